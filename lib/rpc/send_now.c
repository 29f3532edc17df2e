/* Small messages sent at once from the sender's stack. Most calls and
 * replies are a few hundred bytes, which UCX's short and copy protocols send
 * before ucp_am_send_nbx returns: no message object to take from the cache,
 * fill, keep and give back (25-30 ns a message, bench/RESULTS.md
 * "bench/rpc"). UCX is told to fail rather than keep the buffer
 * (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL); then the message goes the long way. */
#include <string.h>

#include "core/fault.h"
#include "rpc/rpc_internal.h"

/* The tiny layout of m, when it fits (wire.h): 1, or 0 to encode it in the
 * general one. */
static int encode_tiny(dist__rpc_small *sm, dist__rpc_kind kind, uint64_t id, dist_status status,
                       const dist__rpc_msg *m) {
  const dist_tensor *ts = dist__rpc_msg_tensors(m);
  if (status || !dist__rpc_tiny_fits(ts, m->ntensors, m->extra_len)) return 0;
  dist__rpc_tiny th = {.call_id = id, .kind = kind, .ntensors = m->ntensors};
  if (kind == DIST__RPC_REQUEST) {
    th.fn = dist__rpc_fn_index(m->name, m->name_len);
    if (th.fn < 0 || th.fn >= dist__rpc.tiny_fns) return 0;
    th.caller = dist__rpc.rank;
  }
  dist__rpc_tiny_encode(sm->body, &th, ts);
  sm->len = DIST__RPC_TINY_BYTES;
  return sm->tiny = 1;
}

dist_status dist__rpc_small_encode(dist__rpc_small *sm, int to, dist__rpc_kind kind, uint64_t id, dist_status status,
                                   const dist__rpc_msg *m, int tiny) {
  /* Fault injection (tests) lives on the long way; so does a message sent
   * from a completion callback, whose thread may be inside the worker's
   * progress (the unlikely wait in dist__rpc_small_send must not progress
   * it again). */
  if (dist__fault_site || atomic_load_explicit(&dist__rpc.dead[to], memory_order_relaxed) ||
      dist__future_in_callback())
    return DIST_ERR_BUFFER_TOO_SMALL;
  sm->tiny = 0;
  if (tiny && kind != DIST__RPC_VJP && dist__rpc.tiny_fns && encode_tiny(sm, kind, id, status, m)) return DIST_SUCCESS;
  DIST_CHECK(dist__rpc_encode_body(m, sm->body, sizeof sm->body, &sm->len));
  sm->h = dist__rpc_header_make(kind, id, status);
  return DIST_SUCCESS;
}

dist_status dist__rpc_small_send(const dist__rpc_small *sm, int to) {
  static const ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};
  /* Header and body as one buffer of data, no user header (rpc_internal.h);
   * a tiny message is all body. */
  const void *data = sm->tiny ? (const void *)sm->body : (const void *)&sm->h;
  size_t len = sm->tiny ? sm->len : sizeof sm->h + sm->len;
  ucs_status_ptr_t r =
      ucp_am_send_nbx(dist__rpc.ep[to], sm->tiny ? DIST__RPC_AM_ID_TINY : DIST__RPC_AM_ID_NOW, NULL, 0, data, len, &p);
  /* A request despite the flag (UCX says it does not happen): the buffer
   * must outlive it. */
  if (r && !UCS_PTR_IS_ERR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(dist__rpc.worker);
    ucs_status_t st = ucp_request_check_status(r);
    ucp_request_free(r);
    r = st == UCS_OK ? NULL : UCS_STATUS_PTR(st);
  }
  /* Any refusal (no room now, or a UCX that cannot force completion) goes
   * the long way, whose send tells a dead peer from the rest. */
  return r == NULL ? DIST_SUCCESS : DIST_ERR_BUFFER_TOO_SMALL;
}

dist_status dist__rpc_send_now(int to, dist__rpc_kind kind, uint64_t id, dist_status status, const dist__rpc_msg *m,
                               int tiny) {
  dist__rpc_small sm;
  DIST_CHECK(dist__rpc_small_encode(&sm, to, kind, id, status, m, tiny));
  dist__rpc_lock();
  dist_status s = dist__rpc_small_send(&sm, to);
  dist__rpc_unlock();
  return s;
}
