/* Sending a request and registering its future (calls and VJP calls). */
#include <stdio.h>
#include <string.h>

#include "rpc/rpc_internal.h"

/* Call ids, unique in the process for its whole life (never reset, so a
 * block kept across dist_rpc_shutdown and init stays unique): each thread
 * takes a block of them at a time, one locked instruction per 4096 calls
 * instead of one per call. */
#define ID_BLOCK 4096
static atomic_uint_fast64_t ids = 1;

static uint64_t new_id(void) {
  dist__rpc_thread *me = &dist__rpc_me;
  if (me->next_id == me->end_id) {
    me->next_id = atomic_fetch_add(&ids, ID_BLOCK);
    me->end_id = me->next_id + ID_BLOCK;
  }
  return me->next_id++;
}

/* A call of `kind` (a function or its VJP). */
dist_status dist__rpc_call(dist__rpc_kind kind, int to, const char *name, size_t name_len, const dist_tensor *args,
                           int nargs, const void *opts, size_t opts_bytes, dist_future **out, int *held) {
  if (held) *held = 0;
  dist__rpc_msg m; /* its tensors stay the caller's (src): not copied in */
  m.name = name, m.name_len = name_len, m.ntensors = nargs, m.extra = opts, m.extra_len = opts_bytes;
  m.src = args;
  dist_future *f = dist__future_new();
  if (!f) return dist__error(DIST_ERR_NO_MEMORY, "remote call: a future");
  f->id = new_id();
  f->to = to;
  if (held) f->sync_owner = (uintptr_t)pthread_self(); /* a synchronous call: it waits here next */
  dist__rpc_small sm; /* encoded before the lock: it is held only to send */
  dist_status s = dist__rpc_small_encode(&sm, to, kind, f->id, DIST_SUCCESS, &m, 1);
  if (!s || s == DIST_ERR_BUFFER_TOO_SMALL) {
    /* Into the table before the send (its reply may come at once), under
     * the same hold of the worker lock, which guards the table. */
    dist__rpc_lock();
    dist__inflight_add(f);
    if (!s) s = dist__rpc_small_send(&sm, to);
    if (!s && held) *held = 1; /* kept for the wait that follows */
    else dist__rpc_unlock();
  }
  if (s == DIST_ERR_BUFFER_TOO_SMALL) { /* the long way: a message object */
    dist__rpc_out *o;
    s = dist__rpc_out_new(kind, f->id, DIST_SUCCESS, &m, &o);
    if (!s) s = dist__rpc_send(to, o, o->niov > 1); /* wait while UCX reads the arguments' own memory */
  }
  if (s) { /* never sent: out of the table again (unless a failure took it) */
    char msg[1024];
    snprintf(msg, sizeof msg, "remote call '%s' to worker%d: %s", name, to, dist_last_error());
    dist__rpc_lock();
    dist_future *g = dist__inflight_take(f->id);
    dist__rpc_unlock();
    if (g) dist__future_release(g);
    dist__future_release(f);
    return dist__error(s, "%s", msg);
  }
  *out = f;
  return DIST_SUCCESS;
}
