/* Futures of remote calls: completion, callbacks, and the table of calls in
 * flight with the failing of a dead peer's calls (waiting: wait.c). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  f->sync_owner = 0;
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

static void wake_sleepers(dist_future *f) {
  pthread_mutex_lock(&f->mu);
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

int dist__future_complete_owned(dist_future *f, void *body, int nout) {
  unsigned cur = atomic_load_explicit(&f->state, memory_order_relaxed);
  int refs = atomic_load_explicit(&f->refs, memory_order_relaxed);
  unsigned busy = DIST__FUTURE_PUBLISHED | DIST__FUTURE_CB_SET | DIST__FUTURE_SLEEPER;
  if (!dist__future_owned(f) || (cur & busy) || refs < 2) return 0;
  f->status = DIST_SUCCESS;
  f->msg = NULL;
  f->body = body;
  f->nout = nout;
  atomic_store_explicit(&f->state, cur | DIST__FUTURE_PUBLISHED | DIST__FUTURE_SETTLED, memory_order_relaxed);
  atomic_store_explicit(&f->refs, refs - 1, memory_order_relaxed); /* the in-flight table's */
  return 1;
}

void dist__future_complete(dist_future *f, dist_status s, const char *msg, void *body, const dist__rpc_msg *m,
                           dist_rpc_outputs *outs) {
  /* Whoever takes a call from the in-flight table (its reply, or its
   * failure), or the last part of a partitioned call, completes it: one
   * completer, no claim to make. Checked all the same. */
  if (dist__future_state(f) & DIST__FUTURE_PUBLISHED) {
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
  unsigned cur = dist__future_state(f), want;
  do want = cur | DIST__FUTURE_PUBLISHED | (cur & DIST__FUTURE_CB_SET ? 0 : DIST__FUTURE_SETTLED);
  while (!atomic_compare_exchange_weak(&f->state, &cur, want));
  if (!(cur & DIST__FUTURE_CB_SET)) {
    if (cur & DIST__FUTURE_SLEEPER) wake_sleepers(f);
    return;
  }
  atomic_fetch_add(&f->refs, 1); /* the callback's own hold */
  dist__rpc_me.in_callback++;
  f->then(f, f->then_user);
  dist__rpc_me.in_callback--;
  if (atomic_fetch_or(&f->state, DIST__FUTURE_SETTLED) & DIST__FUTURE_SLEEPER) wake_sleepers(f);
  dist__future_release(f);
}

int dist_future_test(const dist_future *f) { return f && (dist__future_state(f) & DIST__FUTURE_PUBLISHED); }

dist_status dist_future_then(dist_future *f, void (*cb)(dist_future *, void *), void *user) {
  if (!f || !cb) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_then: NULL future or callback");
  pthread_mutex_lock(&f->mu); /* one callback per future, ever: against another dist_future_then */
  int had = f->had_then;
  f->had_then = 1;
  pthread_mutex_unlock(&f->mu);
  if (had) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_future_then: the future has a callback already");
  f->then = cb, f->then_user = user;
  unsigned cur = dist__future_state(f);
  do
    if (cur & DIST__FUTURE_PUBLISHED) { /* completed: run it here */
      cb(f, user);
      return DIST_SUCCESS;
    }
  while (!atomic_compare_exchange_weak(&f->state, &cur, cur | DIST__FUTURE_CB_SET));
  return DIST_SUCCESS;
}

dist_status dist_future_status(const dist_future *f) {
  if (!f) return DIST_ERR_INVALID_ARGUMENT;
  return dist__future_state(f) & DIST__FUTURE_PUBLISHED ? f->status : DIST_ERR_INVALID_ARGUMENT;
}
const char *dist_future_message(const dist_future *f) {
  if (!f || !(dist__future_state(f) & DIST__FUTURE_PUBLISHED)) return "the call has not completed";
  return f->msg ? f->msg : dist_status_string(f->status);
}
int dist_future_count(const dist_future *f) {
  return f && (dist__future_state(f) & DIST__FUTURE_PUBLISHED) && !f->status ? f->nout : 0;
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

void dist__rpc_mark_dead(int peer, ucs_status_t st) {
  if (!atomic_load(&dist__rpc.dead[peer])) dist__rpc.dead_why[peer] = (int)st;
  atomic_store(&dist__rpc.dead[peer], 1);
  atomic_store(&dist__rpc.fail_pending, 1);
}

void dist__rpc_fail_dead(void) {
  if (!atomic_exchange(&dist__rpc.fail_pending, 0)) return;
  for (int p = 0; p < dist__rpc.size; p++) {
    if (!atomic_load(&dist__rpc.dead[p])) continue;
    char why[160];
    snprintf(why, sizeof why, "the worker left or died (UCX: %s)", ucs_status_string((ucs_status_t)dist__rpc.dead_why[p]));
    dist__inflight_fail(p, DIST_ERR_ABORTED, why);
  }
}
