/* The UCX side of remote calls: context, worker and endpoints, the progress
 * thread, the active-message handler; dist_rpc_init and shutdown. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distmgr/coll.h"
#include "distmgr/log.h"
#include "distmgr/manager.h"
#include "backend/agree.h"
#include "group/group.h"
#include "manager/state.h"
#include "rpc/rpc_internal.h"

/* ---- receiving ---------------------------------------------------------------- */

/* Completes f, taken from the in-flight table, with its reply: body (taken
 * over) decoded straight into the future's outputs. */
static void complete_reply(dist_future *f, const dist__rpc_header *h, void *body, size_t len) {
  dist__rpc_msg m;
  dist_status s = dist__rpc_decode_cached(&dist__rpc_me.dcache, body, len, &m, f->out);
  if (!s && !h->status && dist__future_complete_owned(f, body, m.ntensors)) return;
  if (s) {
    dist__future_complete(f, s, dist_last_error(), body, NULL, NULL);
  } else if (h->status) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%.*s", (int)m.extra_len, (const char *)m.extra);
    dist__future_complete(f, (dist_status)h->status, msg, body, NULL, NULL);
  } else {
    dist__future_complete(f, DIST_SUCCESS, NULL, body, &m, NULL);
  }
  dist__future_release(f);
}

/* Completes f, taken from the in-flight table, with its tiny reply (wire.h;
 * on_message_tiny checked its kind), copied into its inline body. */
static void complete_tiny(dist_future *f) {
  dist__rpc_tiny th;
  dist_status s = dist__rpc_tiny_decode(f->inline_body, DIST__RPC_TINY_BYTES, &th, &f->out[0]);
  if (!s && dist__future_complete_owned(f, f->inline_body, th.ntensors)) return;
  if (s) {
    dist__future_complete(f, s, dist_last_error(), f->inline_body, NULL, NULL);
  } else {
    dist__rpc_msg m;
    dist__rpc_msg_clear(&m);
    m.ntensors = th.ntensors;
    m.src = f->out;
    dist__future_complete(f, DIST_SUCCESS, NULL, f->inline_body, &m, NULL);
  }
  dist__future_release(f);
}

/* A whole message: a request goes to an executor, a reply completes its future. */
static void deliver(const dist__rpc_header *h, void *body, size_t len) {
  if (h->kind != DIST__RPC_REPLY) {
    dist__rpc_enqueue(h, body, len);
    return;
  }
  dist_future *f = dist__inflight_take(h->call_id);
  if (!f) { /* its future gave up (freed) or a stray id */
    dist__rpc_buf_put(body);
    return;
  }
  complete_reply(f, h, body, len);
}

/* A message whose body could not be received, with a log line: a request is
 * still answered (an error, serve.c), a reply still completes its future. */
static void lost(const dist__rpc_header *h, size_t len, dist_status s, const char *why) {
  dist_log(DIST_LOG_WARN, "remote call: a message of %zu bytes was lost: %s", len, why);
  if (h->kind != DIST__RPC_REPLY) {
    deliver(h, NULL, len);
    return;
  }
  dist_future *f = dist__inflight_take(h->call_id);
  if (!f) return;
  char msg[320];
  snprintf(msg, sizeof msg, "remote call to worker%d: its answer of %zu bytes was lost: %s", f->to, len, why);
  dist__future_complete(f, s, msg, NULL, NULL, NULL);
  dist__future_release(f);
}

typedef struct pending_body {
  dist__rpc_header h;
  void *body;
  size_t len;
} pending_body;

static void body_arrived(void *request, ucs_status_t st, size_t length, void *user) {
  pending_body *p = user;
  (void)length;
  if (st == UCS_OK) {
    deliver(&p->h, p->body, p->len);
  } else {
    dist__rpc_buf_put(p->body);
    lost(&p->h, p->len, DIST_ERR_IO, ucs_status_string(st));
  }
  free(p);
  if (request) ucp_request_free(request);
}

/* An eager message, its body in UCX's buffer until the handler returns: a
 * small request is copied into its job, a small reply into its future,
 * anything larger into a buffer of its own. */
static void deliver_eager(const dist__rpc_header *h, const void *data, size_t length) {
  if (h->kind != DIST__RPC_REPLY && length <= DIST__RPC_JOB_INLINE) {
    dist__rpc_enqueue_copy(h, data, length, 0);
    return;
  }
  if (h->kind == DIST__RPC_REPLY && length <= DIST__RPC_FUTURE_INLINE) {
    dist_future *f = dist__inflight_take(h->call_id);
    if (f) {
      if (length) memcpy(f->inline_body, data, length);
      complete_reply(f, h, f->inline_body, length);
    }
    return;
  }
  void *body = length <= DIST__RPC_BODY_MAX ? dist__rpc_buf_get(length) : NULL;
  if (!body) {
    if (length <= DIST__RPC_BODY_MAX) lost(h, length, DIST_ERR_NO_MEMORY, "out of memory");
    else lost(h, length, DIST_ERR_CORRUPT, "larger than a message may be");
    return;
  }
  if (length) memcpy(body, data, length);
  deliver(h, body, length);
}

/* The handlers run inside ucp_worker_progress: short, no waiting. A message
 * whose header fails its checks is dropped with a log line; one with a
 * readable header always ends its call: a request gets an answer, a reply
 * completes its future (with an error when the body could not be received,
 * lost()). This one: the header in UCX's user header (DIST__RPC_AM_ID). */
static ucs_status_t on_message(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param) {
  (void)arg;
  dist__rpc_header h;
  if (dist__rpc_check_header(header, header_length, &h)) {
    dist_log(DIST_LOG_WARN, "remote call: dropped a message: %s", dist_last_error());
    return UCS_OK;
  }
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    deliver_eager(&h, data, length);
    return UCS_OK;
  }
  if (length > DIST__RPC_BODY_MAX) {
    lost(&h, length, DIST_ERR_CORRUPT, "larger than a message may be");
    return UCS_OK;
  }
  void *body = dist__rpc_buf_get(length);
  pending_body *p = body ? malloc(sizeof *p) : NULL;
  if (!p) {
    dist__rpc_buf_put(body);
    lost(&h, length, DIST_ERR_NO_MEMORY, "out of memory");
    return UCS_OK;
  }
  p->h = h;
  p->body = body;
  p->len = length;
  ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                            .cb.recv_am = body_arrived,
                            .user_data = p};
  ucs_status_ptr_t r = ucp_am_recv_data_nbx(dist__rpc.worker, data, body, length, &rp);
  if (r == NULL) body_arrived(NULL, UCS_OK, length, p);
  else if (UCS_PTR_IS_ERR(r)) body_arrived(NULL, UCS_PTR_STATUS(r), 0, p);
  return UCS_OK;
}

/* A tiny message (DIST__RPC_AM_ID_TINY, wire.h): always eager, 24 bytes. A
 * request goes to an executor whole (decoded and checked there: it answers
 * a bad one); a reply completes its future. One that is not even that is
 * dropped with a log line. */
static ucs_status_t on_message_tiny(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param) {
  (void)arg, (void)header;
  const unsigned char *b = data;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || header_length || length != DIST__RPC_TINY_BYTES ||
      b[11] != DIST__RPC_TINY_MAGIC || (b[12] != DIST__RPC_REQUEST && b[12] != DIST__RPC_REPLY)) {
    int whole = length == DIST__RPC_TINY_BYTES && !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    dist_log(DIST_LOG_WARN,
             "remote call: dropped a tiny message of %zu bytes (expected %d; magic %#x, kind %u; user header %zu, "
             "rendezvous %d)",
             length, DIST__RPC_TINY_BYTES, whole ? b[11] : 0u, whole ? b[12] : 0u, header_length,
             !!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV));
    return UCS_OK;
  }
  dist__rpc_header h = {.magic = DIST__RPC_MAGIC, .version = DIST__RPC_VERSION, .kind = b[12]};
  memcpy(&h.call_id, b, 8);
  if (h.kind == DIST__RPC_REQUEST) {
    dist__rpc.tiny_in++;
    uint16_t caller;
    memcpy(&caller, b + 8, 2);
    h.caller = caller;
    dist__rpc_enqueue_copy(&h, data, length, 1);
    return UCS_OK;
  }
  dist_future *f = dist__inflight_take(h.call_id);
  if (f) {
    memcpy(f->inline_body, data, DIST__RPC_TINY_BYTES);
    complete_tiny(f);
  }
  return UCS_OK;
}

/* The header as the first bytes of the data (DIST__RPC_AM_ID_NOW): always
 * eager from distmgr's sender, whose bodies are small; a rendezvous one
 * could not be read without receiving it, and is dropped. */
static ucs_status_t on_message_now(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                   const ucp_am_recv_param_t *param) {
  (void)arg, (void)header;
  dist__rpc_header h;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || header_length || length < sizeof h) {
    dist_log(DIST_LOG_WARN, "remote call: dropped a small message of %zu bytes (user header %zu, rendezvous %d)", length,
             header_length, !!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV));
    return UCS_OK;
  }
  if (dist__rpc_check_header(data, sizeof h, &h)) {
    dist_log(DIST_LOG_WARN, "remote call: dropped a message: %s", dist_last_error());
    return UCS_OK;
  }
  deliver_eager(&h, (const char *)data + sizeof h, length - sizeof h);
  return UCS_OK;
}

/* ---- the progress thread --------------------------------------------------------- */

/* The progress thread serves the worker only while no other thread polls it,
 * and never spins: it progresses until nothing is left, then sleeps on UCX's
 * wakeup fd (ucp_worker_signal wakes it for sends and for stopping). The
 * threads that wait for something (a caller for its reply, the idle executor
 * for a request) spin on the worker themselves; a spinning progress thread
 * only took the core from them (on 2 cores: 200 us slices in turn with the
 * caller, bench/RESULTS.md "bench/rpc"). While other threads poll, it parks
 * on its condition variable instead of the fd. A poller that stops to sleep
 * wakes it (dist__rpc_poll_end); one that returns to its caller does not, so
 * a park lasts `us` at most: the longest a message waits when the thread
 * that polled went off to run a function or its caller's code. That is
 * DIST__RPC_PARK_US after a quiet spell, doubling up to
 * DIST__RPC_PARK_MAX_US while calls keep coming: each timed wake took the
 * core from a poller and stalled its call by 25-60 us on the 2-core VM
 * (bench/rpc_loop: calls over 20 us, once a millisecond).
 * Returns 1 when a poller woke it. */
static int park(long us) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += us / 1000000;
  dl.tv_nsec += us % 1000000 * 1000L;
  if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&dist__rpc.pmu);
  if (!dist__rpc.pwoken && !atomic_load(&dist__rpc.stop))
    (void)pthread_cond_timedwait(&dist__rpc.pcv, &dist__rpc.pmu, &dl);
  int woken = dist__rpc.pwoken;
  dist__rpc.pwoken = 0;
  pthread_mutex_unlock(&dist__rpc.pmu);
  return woken;
}

/* A park while calls keep coming: one that runs out doubles the next. */
static int park_busy(long *us) {
  int woken = park(*us);
  if (!woken && *us < DIST__RPC_PARK_MAX_US) *us *= 2;
  return woken;
}

static void *progress_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "dist-rpc-prog"); /* for top and perf */
  unsigned seen, begun, ended;
  dist__rpc_poll_counts(&seen, &ended);
  int woken = 0;
  long us = DIST__RPC_PARK_US;
  while (!atomic_load(&dist__rpc.stop)) {
    dist__rpc_poll_counts(&begun, &ended);
    /* Not even one turn on the worker's lock while another thread polls:
     * a contended lock makes its holder wake a waiter on every release. */
    if (begun != ended) {
      seen = begun;
      woken = park_busy(&us);
      continue;
    }
    /* Nobody polls now, but someone did during the park (and did not go to
     * sleep): calls come back to back. One turn for what came meanwhile,
     * without arming the worker: armed, it made each peer signal its fd on
     * the next message and this thread wake on the pollers' core, 40 us
     * stalls, once or twice a millisecond (bench/RESULTS.md, "bench/rpc"). */
    if (begun != seen && !woken) {
      seen = begun;
      while (dist__rpc_try_progress()) {
      }
      woken = park_busy(&us);
      continue;
    }
    seen = begun;
    woken = 0;
    us = DIST__RPC_PARK_US; /* quiet: this thread serves the worker now */
    dist__rpc_lock();
    unsigned n = dist__rpc_progress();
    ucs_status_t st = n ? UCS_ERR_BUSY : ucp_worker_arm(dist__rpc.worker);
    dist__rpc_unlock();
    if (st == UCS_ERR_BUSY) continue; /* progress made, or events came meanwhile */
    struct pollfd pfd = {dist__rpc.efd, POLLIN, 0};
    if (st == UCS_OK) poll(&pfd, 1, 100);
  }
  return NULL;
}

/* ---- peers ---------------------------------------------------------------------- */

/* UCX's error callback: possibly on UCX's own thread, so it only marks the
 * peer; its calls in flight are failed under the worker lock (future.c). */
static void peer_failed(void *arg, ucp_ep_h ep, ucs_status_t st) {
  (void)ep;
  dist__rpc_mark_dead((int)(intptr_t)arg, st);
}

/* Every rank's worker address, through an all-gather over the world. */
static dist_status exchange_addresses(uint8_t **all, size_t *stride) {
  ucp_address_t *addr;
  size_t len;
  ucs_status_t st = ucp_worker_get_address(dist__rpc.worker, &addr, &len);
  if (st != UCS_OK) return dist__rpc_ucx_error(st, "ucp_worker_get_address");
  int64_t mine = (int64_t)len, most = mine;
  dist_tensor t = dist_tensor_host(&most, DIST_I64, 0, NULL);
  dist_status s = dist_all_reduce(NULL, &t, DIST_MAX);
  uint8_t *in = NULL, *out = NULL;
  if (!s && (!(in = calloc(1, (size_t)most)) || !(out = calloc((size_t)dist__rpc.size, (size_t)most))))
    s = dist__error(DIST_ERR_NO_MEMORY, "dist_rpc_init: worker addresses");
  if (!s) {
    memcpy(in, addr, len);
    int64_t one = most, shape_all[1] = {most * dist__rpc.size};
    dist_tensor a = dist_tensor_host(in, DIST_U8, 1, &one), b = dist_tensor_host(out, DIST_U8, 1, shape_all);
    s = dist_all_gather_v(NULL, &a, &b, 0, NULL);
  }
  ucp_worker_release_address(dist__rpc.worker, addr);
  free(in);
  if (s) return free(out), s;
  *all = out;
  *stride = (size_t)most;
  return DIST_SUCCESS;
}

/* Every rank's node (the manager's numbering). */
static dist_status exchange_nodes(int64_t **nodes) {
  int node = 0;
  DIST_CHECK(dist_manager_node(&node));
  int64_t mine = node, n = dist__rpc.size;
  *nodes = calloc((size_t)n, sizeof **nodes);
  if (!*nodes) return dist__error(DIST_ERR_NO_MEMORY, "dist_rpc_init: node table");
  int64_t one = 1;
  dist_tensor a = dist_tensor_host(&mine, DIST_I64, 1, &one), b = dist_tensor_host(*nodes, DIST_I64, 1, &n);
  return dist_all_gather_v(NULL, &a, &b, 0, NULL);
}

/* UCX's peer-failure mode rules out its shared-memory and self transports
 * ("no peer failure handler"), which would put every call on a node over
 * TCP loopback. So endpoints on this node take shared memory without it (a
 * dead neighbour's calls end at DIST_TIMEOUT), endpoints to other nodes
 * detect a dead peer at once. */
static dist_status connect_all(void) {
  uint8_t *all = NULL;
  size_t stride = 0;
  int64_t *nodes = NULL;
  DIST_CHECK(exchange_addresses(&all, &stride));
  dist_status s = exchange_nodes(&nodes);
  for (int r = 0; r < dist__rpc.size && !s; r++) {
    int here = nodes[r] == nodes[dist__rpc.rank];
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                          .address = (const ucp_address_t *)(all + (size_t)r * stride),
                          .err_mode = here ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER};
    if (!here) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_handler = (ucp_err_handler_t){peer_failed, (void *)(intptr_t)r};
    }
    ucs_status_t st = ucp_ep_create(dist__rpc.worker, &ep, &dist__rpc.ep[r]);
    if (st != UCS_OK) s = dist__rpc_ucx_error(st, "ucp_ep_create");
  }
  free(nodes);
  free(all);
  return s;
}

/* ---- init and shutdown ------------------------------------------------------------ */

static dist_status create_worker(void) {
  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
  ucs_status_t st = ucp_init(&p, NULL, &dist__rpc.ctx);
  if (st != UCS_OK) return dist__rpc_ucx_error(st, "ucp_init");
  /* Serialized, under distmgr's own lock (rpc_internal.h), rather than UCX's
   * multi-threaded worker: its lock on every call cost 0.18 us a raw round
   * trip, and the threads that wait for a message only try ours
   * (dist__rpc_try_progress), where they queued for UCX's
   * (bench/RESULTS.md, "bench/rpc"). */
  ucp_worker_params_t w = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SERIALIZED};
  if ((st = ucp_worker_create(dist__rpc.ctx, &w, &dist__rpc.worker)) != UCS_OK) return dist__rpc_ucx_error(st, "ucp_worker_create");
  if ((st = ucp_worker_get_efd(dist__rpc.worker, &dist__rpc.efd)) != UCS_OK) return dist__rpc_ucx_error(st, "ucp_worker_get_efd");
  ucp_am_handler_param_t h = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                                            UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
                              .id = DIST__RPC_AM_ID,
                              .cb = on_message,
                              .flags = UCP_AM_FLAG_WHOLE_MSG};
  if ((st = ucp_worker_set_am_recv_handler(dist__rpc.worker, &h)) != UCS_OK)
    return dist__rpc_ucx_error(st, "ucp_worker_set_am_recv_handler");
  h.id = DIST__RPC_AM_ID_NOW;
  h.cb = on_message_now;
  if ((st = ucp_worker_set_am_recv_handler(dist__rpc.worker, &h)) != UCS_OK)
    return dist__rpc_ucx_error(st, "ucp_worker_set_am_recv_handler");
  h.id = DIST__RPC_AM_ID_TINY;
  h.cb = on_message_tiny;
  if ((st = ucp_worker_set_am_recv_handler(dist__rpc.worker, &h)) != UCS_OK)
    return dist__rpc_ucx_error(st, "ucp_worker_set_am_recv_handler");
  return DIST_SUCCESS;
}

static void close_endpoints(void) {
  for (int r = 0; r < dist__rpc.size; r++) {
    if (!dist__rpc.ep || !dist__rpc.ep[r]) continue;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = atomic_load(&dist__rpc.dead[r]) ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t q = ucp_ep_close_nbx(dist__rpc.ep[r], &p);
    double t0 = dist__rpc_now_us();
    if (q && !UCS_PTR_IS_ERR(q)) {
      while (ucp_request_check_status(q) == UCS_INPROGRESS && dist__rpc_now_us() - t0 < 2e6) ucp_worker_progress(dist__rpc.worker);
      ucp_request_free(q);
    }
    dist__rpc.ep[r] = NULL;
  }
}

static void teardown(void) {
  if (dist__rpc.progress) {
    atomic_store(&dist__rpc.stop, 1);
    ucp_worker_signal(dist__rpc.worker);
    dist__rpc_wake_progress();
    pthread_join(dist__rpc.progress, NULL);
    dist__rpc.progress = 0;
  }
  dist__rpc_exec_stop();
  /* A user thread may still be in a wait that tries the worker. */
  dist__rpc_lock();
  dist__inflight_fail(-1, DIST_ERR_NOT_INITIALIZED, "remote calls were shut down");
  if (dist__rpc.worker) close_endpoints();
  free(dist__rpc.ep);
  free(dist__rpc.dead);
  free(dist__rpc.dead_why);
  free(dist__rpc.arrived);
  if (dist__rpc.worker) ucp_worker_destroy(dist__rpc.worker);
  dist__rpc.worker = NULL;
  dist__rpc_unlock();
  if (dist__rpc.ctx) ucp_cleanup(dist__rpc.ctx);
  dist__rpc_buf_drain();
  dist__rpc_cache_flush(); /* this thread's; the library's threads flushed theirs on exit */
  pthread_mutex_destroy(&dist__rpc.pmu);
  pthread_cond_destroy(&dist__rpc.pcv);
  memset(&dist__rpc, 0, sizeof dist__rpc);
}

int dist_rpc_is_initialized(void) { return dist__rpc.on; }

static dist_status register_own(void);

/* Every rank's outcome of a step of init, so that none goes on alone: the
 * control round on the world group (it names a rank that failed). */
static dist_status agree(dist_status mine, const char *what) {
  dist__group *world = NULL;
  DIST_CHECK(dist__group_find(NULL, &world));
  return dist__agree_group(world, mine, what);
}

/* Whether every rank registered its functions in the same order: then tiny
 * calls name them by index (wire.h). Collective. */
static dist_status agree_order(void) {
  int n = 0, differs = 0;
  uint64_t h = dist__rpc_registry_order(&n);
  dist__group *world = NULL;
  DIST_CHECK(dist__group_find(NULL, &world));
  DIST_CHECK(dist__agree_status_hash_group(world, DIST_SUCCESS, h, "dist_rpc_init (function order)", &differs));
  int off = !dist__state.settings.rpc_tiny || dist__rpc.size > DIST__RPC_TINY_RANKS;
  dist__rpc.tiny_fns = differs || off ? 0 : n;
  return DIST_SUCCESS;
}

dist_status dist_rpc_init(void) {
  DIST_CHECK(dist__require_initialized("dist_rpc_init"));
  if (dist__rpc.on) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_init: remote calls are running already");
  memset(&dist__rpc, 0, sizeof dist__rpc);
  pthread_mutex_init(&dist__rpc.pmu, NULL);
  pthread_cond_init(&dist__rpc.pcv, NULL);
  DIST_CHECK(dist_manager_rank(&dist__rpc.rank));
  DIST_CHECK(dist_manager_world_size(&dist__rpc.size));
  dist__rpc.timeout = dist__state.settings.timeout;
  dist_status s = DIST_SUCCESS;
  dist__rpc.ep = calloc((size_t)dist__rpc.size, sizeof *dist__rpc.ep);
  dist__rpc.dead = calloc((size_t)dist__rpc.size, sizeof *dist__rpc.dead);
  dist__rpc.dead_why = calloc((size_t)dist__rpc.size, sizeof *dist__rpc.dead_why);
  dist__rpc.arrived = calloc((size_t)dist__rpc.size, sizeof *dist__rpc.arrived);
  if (!dist__rpc.ep || !dist__rpc.dead || !dist__rpc.dead_why || !dist__rpc.arrived) s = dist__error(DIST_ERR_NO_MEMORY, "dist_rpc_init: endpoints");
  if (!s) s = register_own();
  if (!s) s = create_worker();
  s = agree(s, "dist_rpc_init (UCX worker)");
  if (!s) s = agree(connect_all(), "dist_rpc_init (endpoints)");
  if (!s) s = dist__rpc_exec_start();
  if (!s && pthread_create(&dist__rpc.progress, NULL, progress_main, NULL))
    s = dist__error(DIST_ERR_INTERNAL, "dist_rpc_init: no progress thread");
  s = agree(s, "dist_rpc_init (threads)");
  if (!s) s = dist_rpc_check_registry();
  if (!s) s = agree_order();
  if (s) {
    teardown();
    return s;
  }
  dist__rpc.on = 1;
  return DIST_SUCCESS;
}

/* ---- shutdown: arrivals told through remote calls -------------------------------- */

#define ARRIVE "__dist_rpc_arrive"
#define PING "__dist_rpc_ping"

static dist_status fn_arrive(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)out, (void)user;
  if (in->caller >= 0 && in->caller < dist__rpc.size) atomic_store(&dist__rpc.arrived[in->caller], 1);
  return DIST_SUCCESS;
}
static dist_status fn_ping(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)in, (void)out, (void)user;
  return DIST_SUCCESS;
}

/* The library's own functions, registered once per process on every rank. */
static dist_status register_own(void) {
  const dist__rpc_fn_entry *e;
  if (dist__rpc_lookup(ARRIVE, strlen(ARRIVE), &e)) DIST_CHECK(dist_rpc_register(ARRIVE, fn_arrive, NULL));
  if (dist__rpc_lookup(PING, strlen(PING), &e)) DIST_CHECK(dist_rpc_register(PING, fn_ping, NULL));
  return DIST_SUCCESS;
}

static dist_status call_own(int to, const char *name) {
  dist_future *f = NULL;
  dist_status s = dist__rpc_call(DIST__RPC_REQUEST, to, name, strlen(name), NULL, 0, NULL, 0, &f, NULL);
  if (!s) s = dist_future_wait(f);
  dist_future_free(f);
  return s;
}

static void nap_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Each rank first waits for its own calls (each bounded by DIST_TIMEOUT, as
 * their futures), tells every rank it arrived, and waits with no deadline for
 * everyone's word, as torch's graceful shutdown: a rank still working is
 * fine. Each DIST_TIMEOUT without news, the ranks missing are pinged (their
 * executors answer while they compute); one that does not answer ends the
 * wait with its name. Once all have arrived nothing is in flight anywhere. */
static dist_status drain(void) {
  double t0 = dist__rpc_now_us(), limit = dist__rpc.timeout > 0 ? dist__rpc.timeout * 1e6 : 0;
  for (;;) {
    dist__rpc_lock();
    dist__rpc_fail_dead();
    int n = dist__inflight_count(), late = n > 0 && limit && dist__rpc_now_us() - t0 > limit;
    if (late) dist__inflight_fail(-1, DIST_ERR_TIMEOUT, "abandoned by dist_rpc_shutdown after DIST_TIMEOUT");
    dist__rpc_unlock();
    if (!n || late) break;
    nap_ms(1);
  }
  for (int r = 0; r < dist__rpc.size; r++) {
    dist_status s = call_own(r, ARRIVE);
    if (s) return dist__error(s, "dist_rpc_shutdown: telling worker%d: %s", r, dist_last_error());
  }
  double last = dist__rpc_now_us();
  for (;;) {
    int missing = -1;
    for (int r = 0; r < dist__rpc.size && missing < 0; r++)
      if (!atomic_load(&dist__rpc.arrived[r])) missing = r;
    if (missing < 0) return DIST_SUCCESS;
    if (limit && dist__rpc_now_us() - last > limit) {
      dist_status s = call_own(missing, PING);
      if (s) return dist__error(DIST_ERR_ABORTED, "dist_rpc_shutdown: worker%d stopped answering while the others waited: %s",
                                missing, dist_last_error());
      dist_log(DIST_LOG_DEBUG, "dist_rpc_shutdown: worker%d is alive and has not arrived yet", missing);
      last = dist__rpc_now_us();
    }
    nap_ms(1);
  }
}

dist_status dist_rpc_shutdown(void) {
  if (!dist__rpc.on) return dist__error(DIST_ERR_NOT_INITIALIZED, "dist_rpc_shutdown: remote calls are not running");
  dist_status s = drain();
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", s ? dist_last_error() : "");
  dist__rpc.on = 0;
  /* Everyone has arrived (or one failed: then the others are told by the
   * collective's own failure, as in any collective). */
  dist_status b = dist_barrier(NULL);
  teardown();
  if (s) return dist__error(s, "%s", msg);
  return b;
}
