/* Futures of remote calls: completion, waiting (bounded by DIST_TIMEOUT),
 * callbacks, and the table of calls in flight. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/rpc_internal.h"

dist_future *dist__future_new(void) {
  dist_future *f = dist__rpc_cache_get(DIST__RPC_CACHE_FUTURE);
  if (!f) {
    if (!(f = malloc(sizeof *f))) return NULL;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
  }
  /* Field by field, not a memset: GCC made that a `rep stos`, whose start
   * and drain were 7 % of a call's path without the network. Relaxed: the
   * future is not shared yet. */
  atomic_store_explicit(&f->state, 0, memory_order_relaxed);
  atomic_store_explicit(&f->refs, 1, memory_order_relaxed);
  f->status = DIST_SUCCESS;
  f->msg = NULL;
  f->body = NULL;
  f->nout = 0;
  f->then = NULL;
  f->then_user = NULL;
  f->had_then = 0;
  f->id = 0;
  f->to = -1;
  f->next_inflight = NULL;
  f->nparts = f->pending = 0;
  f->parts = NULL;
  f->reducer = (dist_rpc_reducer){0};
  f->outs.n = 0;
  return f;
}

static void destroy_mem(void *p) {
  dist_future *f = p;
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
  free(f);
}

static void future_destroy(dist_future *f) {
  if (f->parts) { /* a partitioned call's: a plain one makes no call here but the cache's */
    for (int i = 0; i < f->nparts; i++) dist_future_free(f->parts[i]);
    free(f->parts);
  }
  if (f->outs.n) dist__rpc_outputs_free(&f->outs);
  if (f->body != f->inline_body) dist__rpc_buf_put(f->body);
  if (f->msg) free(f->msg);
  if (!dist__rpc_cache_put(DIST__RPC_CACHE_FUTURE, f, destroy_mem)) destroy_mem(f);
}

void dist__future_release(dist_future *f) {
  /* The last reference needs no locked subtract: nobody else holds one,
   * so nobody can take another (a reference comes only from a holder). */
  if (atomic_load_explicit(&f->refs, memory_order_acquire) == 1 || atomic_fetch_sub(&f->refs, 1) == 1)
    future_destroy(f);
}

void dist_future_free(dist_future *f) {
  if (f) dist__future_release(f);
}

int dist__future_in_callback(void) { return dist__rpc_me.in_callback; }

/* A future's state bits. Its one completer fills the result and publishes
 * it; it settles at once (waits return), or after the `then`
 * callback registered meanwhile, which it runs. A waiter about to sleep sets
 * SLEEPER first, so that the settling completer knows to wake it: no lock
 * or broadcast on a call whose caller spins (they cost 25 ns a round trip,
 * bench/RESULTS.md "bench/rpc"). */
enum { CB_SET = 2, PUBLISHED = 4, SETTLED = 8, SLEEPER = 16 };

static unsigned state(const dist_future *f) { return atomic_load(&((dist_future *)f)->state); }
static int settled(const dist_future *f) { return (state(f) & SETTLED) != 0; }

static void wake_sleepers(dist_future *f) {
  pthread_mutex_lock(&f->mu);
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

void dist__future_complete(dist_future *f, dist_status s, const char *msg, void *body, const dist__rpc_msg *m,
                           dist_rpc_outputs *outs) {
  /* Whoever takes a call from the in-flight table (its reply, or its
   * failure), or the last part of a partitioned call, completes it: one
   * completer, no claim to make. Checked all the same. */
  if (state(f) & PUBLISHED) {
    if (body != f->inline_body) dist__rpc_buf_put(body);
    if (outs) dist__rpc_outputs_free(outs);
    return;
  }
  f->status = s;
  f->msg = msg && *msg ? strdup(msg) : NULL;
  f->body = body;
  if (m && !s) {
    f->nout = m->ntensors;
    const dist_tensor *t = dist__rpc_msg_tensors(m);
    if (t != f->out) memcpy(f->out, t, sizeof *t * (size_t)m->ntensors);
  }
  if (outs && !s) {
    f->outs = *outs;
    f->nout = outs->n;
    memcpy(f->out, outs->t, sizeof outs->t[0] * (size_t)outs->n);
    outs->n = 0;
  } else if (outs) {
    dist__rpc_outputs_free(outs);
  }
  /* Publish, and settle in the same step unless a callback waits to run. */
  unsigned cur = state(f), want;
  do want = cur | PUBLISHED | (cur & CB_SET ? 0 : SETTLED);
  while (!atomic_compare_exchange_weak(&f->state, &cur, want));
  if (!(cur & CB_SET)) {
    if (cur & SLEEPER) wake_sleepers(f);
    return;
  }
  atomic_fetch_add(&f->refs, 1); /* the callback's own hold */
  dist__rpc_me.in_callback++;
  f->then(f, f->then_user);
  dist__rpc_me.in_callback--;
  if (atomic_fetch_or(&f->state, SETTLED) & SLEEPER) wake_sleepers(f);
  dist__future_release(f);
}

int dist_future_test(const dist_future *f) { return f && (state(f) & PUBLISHED); }

/* Waits for done with the deadline of DIST_TIMEOUT (0: none). held: this
 * thread holds the worker lock already (kept from its send). */
static dist_status wait_done(dist_future *f, const char *what, int held) {
  if (!f) {
    if (held) dist__rpc_unlock();
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL future", what);
  }
  /* In a completion callback this thread may hold the worker inside its
   * progress: nobody could move the reply (rpc.h: do not wait in it). */
  if (dist__rpc_me.in_callback && !settled(f)) {
    if (held) dist__rpc_unlock();
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: waiting inside a dist_future_then callback (it runs where "
                                                   "replies are received; wait outside it)", what);
  }
  /* The waiter progresses the worker itself for a while (its reply is then
   * handled on this thread, no wake-up of the progress thread and back),
   * then sleeps until the progress thread completes the call. */
  dist__rpc_spin sp = {0, 0};
  dist__rpc_poll_begin();
  while (!settled(f)) {
    dist__rpc_poll_turn(&held);
    if (dist__rpc_spin_over(&sp)) break;
  }
  dist__rpc_poll_release(&held);
  int done = settled(f);
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
  atomic_fetch_or(&f->state, SLEEPER); /* before the check: the settling completer sees it, or we see SETTLED */
  int rc = 0;
  while (!settled(f) && rc != ETIMEDOUT)
    rc = timeout > 0 ? pthread_cond_timedwait(&f->cv, &f->mu, &dl) : pthread_cond_wait(&f->cv, &f->mu);
  done = settled(f);
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
      if (settled(fs[i])) return *index = i, DIST_SUCCESS;
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

dist_status dist_future_then(dist_future *f, void (*cb)(dist_future *, void *), void *user) {
  if (!f || !cb) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_then: NULL future or callback");
  pthread_mutex_lock(&f->mu); /* one callback per future, ever: against another dist_future_then */
  int had = f->had_then;
  f->had_then = 1;
  pthread_mutex_unlock(&f->mu);
  if (had) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_then: the future has a callback already");
  f->then = cb, f->then_user = user;
  unsigned cur = state(f);
  do
    if (cur & PUBLISHED) { /* completed: run it here */
      cb(f, user);
      return DIST_SUCCESS;
    }
  while (!atomic_compare_exchange_weak(&f->state, &cur, cur | CB_SET));
  return DIST_SUCCESS;
}

dist_status dist_future_status(const dist_future *f) {
  if (!f) return DIST_ERR_INVALID_ARGUMENT;
  return state(f) & PUBLISHED ? f->status : DIST_ERR_INVALID_ARGUMENT;
}
const char *dist_future_message(const dist_future *f) {
  if (!f || !(state(f) & PUBLISHED)) return "the call has not completed";
  return f->msg ? f->msg : dist_status_string(f->status);
}
int dist_future_count(const dist_future *f) {
  return f && (state(f) & PUBLISHED) && !f->status ? f->nout : 0;
}
const dist_tensor *dist_future_output(const dist_future *f, int i) {
  return i >= 0 && i < dist_future_count(f) ? &f->out[i] : NULL;
}
int dist_future_parts(const dist_future *f) { return f ? f->nparts : 0; }
dist_future *dist_future_part(const dist_future *f, int i) {
  return f && i >= 0 && i < f->nparts ? f->parts[i] : NULL;
}

/* ---- the in-flight table: a list (calls in flight are few) under the worker lock --
 * Its callers hold the lock: a call adds its future in the same hold as its
 * send, a reply takes it inside the worker's progress. A lock of its own
 * cost two more locked instructions a call (bench/RESULTS.md "bench/rpc"). */

void dist__inflight_add(dist_future *f) {
  /* The table's reference: f is not shared yet (its caller's alone until
   * the lock is given back), so a plain store, no locked add. */
  atomic_store_explicit(&f->refs, atomic_load_explicit(&f->refs, memory_order_relaxed) + 1, memory_order_relaxed);
  f->next_inflight = dist__rpc.inflight;
  dist__rpc.inflight = f;
}

dist_future *dist__inflight_take(uint64_t id) {
  dist_future **p = &dist__rpc.inflight;
  while (*p && (*p)->id != id) p = &(*p)->next_inflight;
  dist_future *f = *p;
  if (f) *p = f->next_inflight;
  return f;
}

void dist__inflight_fail(int peer, dist_status s, const char *why) {
  for (;;) {
    dist_future **p = &dist__rpc.inflight;
    while (*p && peer >= 0 && (*p)->to != peer) p = &(*p)->next_inflight;
    dist_future *f = *p;
    if (!f) return;
    *p = f->next_inflight;
    char msg[320];
    snprintf(msg, sizeof msg, "remote call to worker%d: %s", f->to, why);
    dist__future_complete(f, s, msg, NULL, NULL, NULL);
    dist__future_release(f);
  }
}

int dist__inflight_count(void) {
  int n = 0;
  for (dist_future *f = dist__rpc.inflight; f; f = f->next_inflight) n++;
  return n;
}
