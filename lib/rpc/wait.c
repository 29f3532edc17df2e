/* Waiting for futures (bounded by DIST_TIMEOUT): a waiter polls the worker
 * itself for a while, then sleeps until someone else completes its call. */
#include <errno.h>
#include <time.h>

#include "rpc/rpc_internal.h"

unsigned dist__rpc_try_progress(void) {
  if (!dist__rpc_poll_lock()) return 0;
  unsigned n = dist__rpc_progress();
  dist__rpc_unlock();
  return n;
}

/* Waits for done with the deadline of DIST_TIMEOUT (0: none). held: this
 * thread holds the worker lock already (kept from its send). */
static dist_status wait_done(dist_future *f, const char *what, int held) {
  if (!f) {
    if (held) dist__rpc_unlock();
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL future", what);
  }
  /* In a completion callback this thread may hold the worker inside its
   * progress: nobody could move the reply (rpc.h: do not wait in it). */
  if (dist__rpc_me.in_callback && !dist__future_settled(f)) {
    if (held) dist__rpc_unlock();
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: waiting inside a dist_future_then callback (it runs where "
                                                   "replies are received; wait outside it)", what);
  }
  /* The waiter progresses the worker itself for a while (its reply is then
   * handled on this thread, no wake-up of the progress thread and back),
   * then sleeps until the progress thread completes the call. */
  dist__rpc_spin sp = {0, 0};
  dist__rpc_poll_begin();
  while (!dist__future_settled(f)) {
    dist__rpc_poll_turn(&held);
    if (dist__rpc_spin_over(&sp)) break;
  }
  dist__rpc_poll_release(&held);
  int done = dist__future_settled(f);
  dist__rpc_poll_end(!done); /* about to sleep: the progress thread takes over */
  if (done) return DIST_SUCCESS;
  double timeout = dist__rpc.timeout;
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  if (timeout > 0) {
    dl.tv_sec += (time_t)timeout;
    dl.tv_nsec += (long)((timeout - (double)(time_t)timeout) * 1e9);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&f->mu);
  atomic_fetch_or(&f->state, DIST__FUTURE_SLEEPER); /* before the check: the settling completer sees it, or we see SETTLED */
  int rc = 0;
  while (!dist__future_settled(f) && rc != ETIMEDOUT)
    rc = timeout > 0 ? pthread_cond_timedwait(&f->cv, &f->mu, &dl) : pthread_cond_wait(&f->cv, &f->mu);
  done = dist__future_settled(f);
  pthread_mutex_unlock(&f->mu);
  if (done) return DIST_SUCCESS;
  if (f->to >= 0)
    return dist__error(DIST_ERR_TIMEOUT, "%s: the call to worker%d did not complete within DIST_TIMEOUT (%g s)", what,
                       f->to, timeout);
  return dist__error(DIST_ERR_TIMEOUT, "%s: the call did not complete within DIST_TIMEOUT (%g s)", what, timeout);
}

/* A completed future's status, its message made this thread's last error. */
static dist_status outcome(const dist_future *f) {
  if (!f->status) return DIST_SUCCESS;
  return dist__error(f->status, "%s", f->msg ? f->msg : dist_status_string(f->status));
}

dist_status dist_future_wait(dist_future *f) {
  DIST_CHECK(wait_done(f, "dist_future_wait", 0));
  return outcome(f);
}

dist_status dist__future_wait_held(dist_future *f, int held) {
  DIST_CHECK(wait_done(f, "dist_future_wait", held));
  return outcome(f);
}

dist_status dist_future_wait_all(dist_future *const *fs, int n) {
  if (n < 0 || (n && !fs)) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_wait_all: %d futures", n);
  dist_status first = DIST_SUCCESS;
  for (int i = 0; i < n; i++) {
    DIST_CHECK(wait_done(fs[i], "dist_future_wait_all", 0));
    if (!first && fs[i]->status) first = outcome(fs[i]);
  }
  return first ? dist__error(first, "%s", dist_last_error()) : DIST_SUCCESS;
}

dist_status dist_future_wait_any(dist_future *const *fs, int n, int *index) {
  if (n <= 0 || !fs || !index) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_wait_any: %d futures", n);
  for (int i = 0; i < n; i++)
    if (!fs[i]) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_wait_any: future %d is NULL", i);
  double t0 = dist__rpc_now_us();
  for (long spin = 0;; spin++) {
    for (int i = 0; i < n; i++)
      if (dist__future_settled(fs[i])) return *index = i, DIST_SUCCESS;
    if (dist__rpc_me.in_callback) /* as wait_done: nothing could complete them */
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_wait_any: waiting inside a dist_future_then callback");
    if (dist__rpc.timeout > 0 && dist__rpc_now_us() - t0 > dist__rpc.timeout * 1e6)
      return dist__error(DIST_ERR_TIMEOUT, "dist_future_wait_any: none of %d calls completed within DIST_TIMEOUT", n);
    if (spin > 1000) {
      struct timespec nap = {0, 50000};
      nanosleep(&nap, NULL);
    }
  }
}
