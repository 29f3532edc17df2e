/* Messages out: a header, the meta part and the tensors' own memory as one
 * UCX iov send (no copy of the tensors), freed when UCX is done with them;
 * a small body packed into one buffer instead. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/fault.h"
#include "rpc/rpc_internal.h"

dist_status dist__rpc_ucx_error(ucs_status_t st, const char *what) {
  return dist__error(DIST_ERR_IO, "UCX %s: %s", what, ucs_status_string(st));
}

static void destroy_mem(void *p) {
  dist__rpc_out *o = p;
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cv);
  free(o);
}

void dist__rpc_out_free(dist__rpc_out *o) {
  if (!o) return;
  for (int i = 0; i < o->nowned; i++) dist__rpc_buf_put(o->owned[i]);
  if (o->meta != o->inline_body) dist__rpc_buf_put(o->meta);
  if (!dist__rpc_cache_put(DIST__RPC_CACHE_OUT, o, destroy_mem)) destroy_mem(o);
}

/* A message, reused from this thread's cache when it has one. */
static dist__rpc_out *out_get(void) {
  dist__rpc_out *o = dist__rpc_cache_get(DIST__RPC_CACHE_OUT);
  if (!o) {
    if (posix_memalign((void **)&o, 64, sizeof *o)) return NULL;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
  }
  /* Field by field: a memset was a `rep stos` (future.c). */
  memset(&o->h, 0, sizeof o->h);
  o->niov = 0;
  o->meta = NULL;
  o->data_bytes = 0;
  o->nowned = 0;
  o->waited = o->done = 0;
  o->status = UCS_OK;
  return o;
}

static const unsigned char zeros[DIST__RPC_ALIGN];

void dist__rpc_pack_data(char *at, const dist__rpc_msg *m, const size_t *nbytes) {
  const dist_tensor *ts = dist__rpc_msg_tensors(m);
  for (int i = 0; i < m->ntensors; i++) {
    size_t n = nbytes[i], padded = dist__rpc_pad(n);
    /* The padding zeroed by one fixed 16-byte store under the data
     * (padded - n < 16), not a memset call of a variable size. */
    if (padded) memset(at + padded - DIST__RPC_ALIGN, 0, DIST__RPC_ALIGN);
    if (n) memcpy(at, ts[i].data, n);
    at += padded;
  }
}

dist_status dist__rpc_out_new(dist__rpc_kind kind, uint64_t id, dist_status status, const dist__rpc_msg *m,
                              dist__rpc_out **out) {
  dist__rpc_out *o = out_get();
  if (!o) return dist__error(DIST_ERR_NO_MEMORY, "remote call: a message");
  /* The meta part straight into the message's own buffer, measured first
   * only when it does not fit there. */
  size_t meta_len, body_len, nbytes[DIST_RPC_MAX_ARGS];
  dist_status s = dist__rpc_encode_meta_n(m, o->inline_body, DIST__RPC_INLINE, &meta_len, &body_len, nbytes);
  if (s && s != DIST_ERR_BUFFER_TOO_SMALL) return dist__rpc_out_free(o), s;
  /* A small body goes out packed in one buffer: UCX's contiguous send is
   * 0.2 us faster a round trip than its iov send (bench/RESULTS.md). So does
   * a request made in a completion callback, whatever its size: its sender
   * cannot wait there for UCX to be done with the arguments' memory. */
  int packed = body_len <= DIST__RPC_PACK_MAX || (kind != DIST__RPC_REPLY && dist__future_in_callback());
  size_t cap = packed ? body_len : meta_len;
  o->meta = o->inline_body;
  if (cap > DIST__RPC_INLINE) {
    if (!(o->meta = dist__rpc_buf_get(cap))) {
      dist__rpc_out_free(o);
      return dist__error(DIST_ERR_NO_MEMORY, "remote call: a message of %zu bytes", cap);
    }
    if (!s) memcpy(o->meta, o->inline_body, meta_len);
    else if ((s = dist__rpc_encode_meta(m, o->meta, meta_len, &meta_len, &body_len))) return dist__rpc_out_free(o), s;
  }
  o->h = dist__rpc_header_make(kind, id, status);
  o->data_bytes = body_len - meta_len;
  if (packed) {
    dist__rpc_pack_data((char *)o->meta + meta_len, m, nbytes);
    o->iov[o->niov++] = (ucp_dt_iov_t){o->meta, body_len};
    *out = o;
    return DIST_SUCCESS;
  }
  o->iov[o->niov++] = (ucp_dt_iov_t){o->meta, meta_len};
  for (int i = 0; i < m->ntensors; i++) {
    size_t n = nbytes[i];
    if (n) o->iov[o->niov++] = (ucp_dt_iov_t){dist__rpc_msg_tensors(m)[i].data, n};
    if (dist__rpc_pad(n) > n) o->iov[o->niov++] = (ucp_dt_iov_t){(void *)zeros, dist__rpc_pad(n) - n};
  }
  *out = o;
  return DIST_SUCCESS;
}

static void sent(void *request, ucs_status_t st, void *user) {
  dist__rpc_out *o = user;
  pthread_mutex_lock(&o->mu);
  o->status = st;
  __atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
  int waited = o->waited;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
  if (st != UCS_OK) dist_log(DIST_LOG_DEBUG, "remote call: a send ended with %s", ucs_status_string(st));
  if (!waited) { /* nobody waits: the request and the message end here */
    ucp_request_free(request);
    dist__rpc_out_free(o);
  }
}

/* A send UCX refused or failed: the peer's memory or connection is gone. */
static dist_status unreachable(int to, ucs_status_t st) {
  dist__rpc_mark_dead(to, st); /* its other calls in flight fail too */
  return dist__error(DIST_ERR_ABORTED, "worker%d cannot be reached (UCX: %s): it left or died", to,
                     ucs_status_string(st));
}

dist_status dist__rpc_send(int to, dist__rpc_out *o, int wait) {
  if (atomic_load(&dist__rpc.dead[to])) {
    dist__rpc_out_free(o);
    return dist__error(DIST_ERR_ABORTED, "remote call: worker%d left or died", to);
  }
  o->waited = wait;
  /* tests: a body that disagrees with its header, a meta part that lies */
  if (o->h.kind != DIST__RPC_REPLY && o->data_bytes && dist__fault("rpc_truncate")) {
    if (o->niov > 1) o->niov--;
    else o->iov[0].length -= DIST__RPC_ALIGN; /* packed: data is padded to DIST__RPC_ALIGN */
  }
  if (o->h.kind != DIST__RPC_REPLY && dist__fault("rpc_corrupt")) memset(o->meta, 0xff, 4);
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                           .cb.send = sent,
                           .user_data = o};
  const void *buf = o->iov[0].buffer;
  size_t count = o->iov[0].length; /* one part: contiguous */
  if (o->niov > 1) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_iov();
    buf = o->iov, count = o->niov;
  }
  dist__rpc_lock();
  ucs_status_ptr_t r = ucp_am_send_nbx(dist__rpc.ep[to], DIST__RPC_AM_ID, &o->h, sizeof o->h, buf, count, &p);
  dist__rpc_unlock();
  if (r == NULL) {
    dist__rpc_out_free(o);
    return DIST_SUCCESS;
  }
  if (UCS_PTR_IS_ERR(r)) {
    dist__rpc_out_free(o);
    return unreachable(to, UCS_PTR_STATUS(r));
  }
  ucp_worker_signal(dist__rpc.worker); /* the progress thread moves it on */
  /* UCX calls `sent` only for a request not freed before it completes. */
  if (!wait) return DIST_SUCCESS;
  /* A thread that holds the worker lock here (no path does today) moves it
   * on itself: pollers, this one's turns included, give up while the lock is
   * held (state.c), and nobody else could. */
  if (atomic_load_explicit(&dist__rpc.wowner, memory_order_relaxed) == (uintptr_t)pthread_self())
    while (!__atomic_load_n(&o->done, __ATOMIC_ACQUIRE)) dist__rpc_progress();
  /* Move it on ourselves first (a rendezvous send waits for the receiver's
   * fetch): no hand-off to the progress thread for a send that is quick. */
  dist__rpc_poll_begin();
  for (int i = 0; i < 2000 && !__atomic_load_n(&o->done, __ATOMIC_ACQUIRE); i++) dist__rpc_try_progress();
  dist__rpc_poll_end(!__atomic_load_n(&o->done, __ATOMIC_ACQUIRE));
  pthread_mutex_lock(&o->mu);
  while (!o->done) pthread_cond_wait(&o->cv, &o->mu);
  ucs_status_t st = o->status;
  pthread_mutex_unlock(&o->mu);
  dist__rpc_lock();
  ucp_request_free(r);
  dist__rpc_unlock();
  dist__rpc_out_free(o);
  return st == UCS_OK ? DIST_SUCCESS : unreachable(to, st);
}

