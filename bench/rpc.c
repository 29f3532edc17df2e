/* bench/rpc: round trips of dist_rpc_call_sync against UCX itself and
 * against torch.distributed.rpc.rpc_sync (TensorPipe), side by side in one run.
 *
 *   raw UCX   its own ucp context and a worker per endpoint (UCP_FEATURE_AM,
 *             one thread, busy-polling ucp_worker_progress on both sides; a
 *             worker of its own for each: a TCP endpoint on the worker made
 *             every progress of the shared-memory one poll TCP too, 0.55 ->
 *             0.8 us a round trip, bench/RESULTS.md): rank 0 sends
 *             N bytes as an active message, rank 1 receives them into a
 *             buffer (ucp_am_recv_data_nbx for rendezvous) and sends the
 *             same N bytes back, over an endpoint with peer failure
 *             detection (UCP_ERR_HANDLING_MODE_PEER: TCP loopback in UCX 1.13,
 *             as distmgr's endpoints to other nodes).
 *   raw UCX, default endpoint
 *             the same over a second endpoint with UCX's default error mode:
 *             shared memory, as distmgr's endpoints on one node, hence the
 *             target `ratio:` line's baseline (the line above the table names
 *             each endpoint's transports).
 *   distmgr   dist_rpc_call_sync(1, "echo", one u8 tensor of N bytes) on
 *             rank 0, then dist_future_free; "echo" answers with a copy of
 *             its argument (dist_rpc_output + memcpy). At 8 B the call and
 *             its answer travel as tiny messages (lib/rpc/wire.h).
 *   distmgr, general layout
 *             8 B only: the same calls with tiny messages off on rank 0 (as
 *             DIST_RPC_TINY=0; the answers then take the general layout
 *             too), through the engine's state (rpc/rpc_internal.h): what
 *             the tiny layout saves, in the same launch.
 *   torch     bench/rpc_torch.py: rpc_sync("worker1", echo, uint8 tensor) in
 *             a separate 2-process job over 127.0.0.1 (TensorPipe); a visible
 *             "skipped: torch RPC: ..." when BENCH_PYTHON cannot import
 *             torch.distributed.rpc.
 *
 * Sizes: 8 B (latency) and 1 KiB, 64 KiB, 1 MiB, 16 MiB, 64 MiB (bandwidth):
 * microseconds per round trip and GB/s = 2 * bytes / time. Each echo is
 * checked once per size before timing (the answer must equal what was sent).
 *
 * The driver (run without --worker) starts `$LAUNCHER 2 bench/rpc --worker`,
 * then the torch job (not inside the MPI job: rank 1's MPI would poll a core
 * while torch runs), then prints the table and the `ratio:` lines. The
 * worker times the three UCX/distmgr variants in turn, blocks of ~20 ms
 * (the order rotates every round, bench_rounds), on rank 0's clock; a
 * side's time is its median over blocks, dist/raw the median of per-round
 * ratios. Between blocks the ranks meet in MPI_Barrier; during a distmgr
 * block rank 1's main thread sleeps on a condition variable (woken by a
 * "stop" call), so the only threads running there are distmgr's own.
 *
 * After the blocks, rank 0 splits distmgr's 8 B round trip: it calls
 * "stamp", which answers with the CLOCK_MONOTONIC time at which its executor
 * started (both ranks read the same clock): request = call made -> executor
 * running, reply = executor running -> dist_rpc_call_sync returned, medians
 * over 2000 calls (200 with --quick), the "breakdown:" line.
 *
 * Usage: bench/rpc [--rounds 9] [--max-bytes 67108864] [--block-seconds 0.02] [--quick]
 *        (LAUNCHER as for make check)
 * --quick (the CI smoke run): sizes up to 1 MiB, 3 rounds of ~5 ms blocks.
 * Exits non-zero only on errors (a failed call, a wrong echo, a failed
 * launch or torch run), never on a missed target: those are in the
 * `ratio:` lines. */
#include "bench_util.h"
#include <distmgr.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "rpc/rpc_internal.h" /* dist__rpc.tiny_fns: the general-layout column */

#ifndef SRCDIR
#define SRCDIR "."
#endif

#define KIB 1024LL
#define MIB (1024LL * 1024LL)
#define MAX_ROUNDS 50
#define NSIZES 6
static const long long sizes[NSIZES] = {8, KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB};
#define LAT_BYTES 8
#define LAT_TARGET_RAW 1.5
#define LAT_TARGET_TORCH 0.5

typedef struct options {
  int rounds, quick, is_worker, stamps;
  long long max_bytes;
  double block_s;
} options;

static int my_rank = -1;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench/rpc: rank %d: %s: %s\n", my_rank, what, detail);
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, 1); /* the other rank may wait in a block */
  exit(1);
}

static void check_dist(dist_status s, const char *what) {
  if (s == DIST_SUCCESS) return;
  char msg[1200];
  snprintf(msg, sizeof msg, "%s (%s)", dist_status_string(s), dist_last_error());
  die(what, msg);
}

static void check_ucx(ucs_status_t st, const char *what) {
  if (st != UCS_OK) die(what, ucs_status_string(st));
}

/* Bytes 0..250 repeating, shifted by `seed`: a wrong or stale echo shows. */
static void fill(unsigned char *p, long long n, int seed) {
  for (long long i = 0; i < n; i++) p[i] = (unsigned char)((i + seed) % 251);
}

/* ---- raw UCX: an active-message ping-pong ------------------------------------- */

enum { AM_PING = 1, AM_PONG = 2, AM_STOP = 3 };

/* Two endpoints to the other rank, each on a worker of its own: ep[EP_PEER]
 * with peer failure detection (UCP_ERR_HANDLING_MODE_PEER, as distmgr's to
 * other nodes), ep[EP_DEFAULT] without (UCX's default: in UCX 1.13 only this
 * one may use shared memory, as distmgr's on one node). */
enum { EP_PEER, EP_DEFAULT, NEPS };

typedef struct raw {
  ucp_context_h ctx;
  ucp_worker_h worker[NEPS];
  ucp_ep_h ep[NEPS];
  unsigned char *buf; /* rank 1: what is echoed; rank 0: the answer */
  size_t len;
  int from; /* rank 1: the endpoint the last ping came over */
  volatile int arrived, stop;
} raw;

static raw R;

static void raw_data_done(void *request, ucs_status_t st, size_t length, void *user) {
  (void)length, (void)user;
  check_ucx(st, "ucp_am_recv_data_nbx");
  R.arrived = 1;
  ucp_request_free(request);
}

/* PING and PONG: the data into R.buf (eager: copied out of UCX's buffer, as
 * distmgr's handler copies it; rendezvous: fetched straight into R.buf). */
static ucs_status_t raw_on_data(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param) {
  (void)header, (void)header_length;
  R.len = length;
  R.from = (int)(intptr_t)arg;
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    memcpy(R.buf, data, length);
    R.arrived = 1;
    return UCS_OK;
  }
  ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv_am = raw_data_done};
  ucs_status_ptr_t r = ucp_am_recv_data_nbx(R.worker[R.from], data, R.buf, length, &rp);
  if (UCS_PTR_IS_ERR(r)) check_ucx(UCS_PTR_STATUS(r), "ucp_am_recv_data_nbx");
  if (r == NULL) R.arrived = 1; /* completed in place: no callback */
  return UCS_OK;
}

static ucs_status_t raw_on_stop(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param) {
  (void)arg, (void)header, (void)header_length, (void)data, (void)length, (void)param;
  R.stop = 1;
  return UCS_OK;
}

/* Handler `cb` for AM id + ep * 8 (the ping's endpoint tells the answer's). */
static void raw_handler(unsigned id, int ep, ucp_am_recv_callback_t cb) {
  ucp_am_handler_param_t h = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                                            UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_ARG,
                              .id = id + 8 * (unsigned)ep,
                              .cb = cb,
                              .arg = (void *)(intptr_t)ep,
                              .flags = UCP_AM_FLAG_WHOLE_MSG};
  check_ucx(ucp_worker_set_am_recv_handler(R.worker[ep], &h), "ucp_worker_set_am_recv_handler");
}

/* Endpoint e: its single-threaded worker, the workers' addresses through
 * MPI_Allgather, the endpoint to the other rank. */
static void raw_connect(int e) {
  ucp_worker_params_t w = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
  check_ucx(ucp_worker_create(R.ctx, &w, &R.worker[e]), "ucp_worker_create");
  raw_handler(AM_PING, e, raw_on_data);
  raw_handler(AM_PONG, e, raw_on_data);
  raw_handler(AM_STOP, e, raw_on_stop);
  ucp_address_t *addr;
  size_t len;
  check_ucx(ucp_worker_get_address(R.worker[e], &addr, &len), "ucp_worker_get_address");
  long long mine = (long long)len, most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  unsigned char *in = calloc(1, (size_t)most), *all = calloc(2, (size_t)most);
  if (!in || !all) die("malloc", "out of memory");
  memcpy(in, addr, len);
  ucp_worker_release_address(R.worker[e], addr);
  if (MPI_Allgather(in, (int)most, MPI_BYTE, all, (int)most, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
    die("MPI_Allgather", "worker addresses");
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                        .address = (const ucp_address_t *)(all + (size_t)(1 - my_rank) * (size_t)most),
                        .err_mode = e == EP_PEER ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE};
  check_ucx(ucp_ep_create(R.worker[e], &ep, &R.ep[e]), "ucp_ep_create");
  free(in), free(all);
}

static void raw_init(long long max_bytes) {
  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
  check_ucx(ucp_init(&p, NULL, &R.ctx), "ucp_init");
  if (!(R.buf = malloc((size_t)max_bytes))) die("malloc", "out of memory");
  memset(R.buf, 0, (size_t)max_bytes);
  for (int e = 0; e < NEPS; e++) raw_connect(e);
}

/* The transports of endpoint e as "tcp/lo.0 cma/memory.0" (ucp_ep_print_info's lanes). */
static void raw_lanes(int e, char *buf, size_t cap) {
  char *text = NULL;
  size_t len = 0;
  buf[0] = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m) return;
  ucp_ep_print_info(R.ep[e], m);
  fclose(m);
  size_t at = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *l = strstr(line, "lane[");
    char tl[64];
    if (!l || !(l = strchr(l, ':')) || sscanf(l + 1, " %*d:%63s", tl) != 1) continue;
    int n = snprintf(buf + at, cap - at, "%s%s", at ? " " : "", tl);
    if (n < 0 || (size_t)n >= cap - at) break;
    at += (size_t)n;
  }
  free(text);
}

static void raw_fini(void) {
  for (int e = 0; e < NEPS; e++) {
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = 0};
    ucs_status_ptr_t q = ucp_ep_close_nbx(R.ep[e], &p);
    if (q && !UCS_PTR_IS_ERR(q)) {
      double t0 = bench_now();
      while (ucp_request_check_status(q) == UCS_INPROGRESS && bench_now() - t0 < 2) ucp_worker_progress(R.worker[e]);
      ucp_request_free(q);
    }
    ucp_worker_destroy(R.worker[e]);
  }
  ucp_cleanup(R.ctx);
  free(R.buf);
}

/* Sends n bytes as AM `id` over endpoint e and progresses until the send is complete. */
static void raw_send(int e, unsigned id, const void *buf, size_t n) {
  ucp_request_param_t p = {.op_attr_mask = 0};
  ucs_status_ptr_t r = ucp_am_send_nbx(R.ep[e], id + 8 * (unsigned)e, NULL, 0, buf, n, &p);
  if (UCS_PTR_IS_ERR(r)) check_ucx(UCS_PTR_STATUS(r), "ucp_am_send_nbx");
  if (!r) return;
  while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(R.worker[e]);
  check_ucx(ucp_request_check_status(r), "ucp_am_send_nbx completion");
  ucp_request_free(r);
}

/* Rank 0: one round trip of n bytes from `out` over endpoint e (the answer in R.buf). */
static void raw_round_trip(int e, const unsigned char *out, size_t n) {
  R.arrived = 0;
  raw_send(e, AM_PING, out, n);
  while (!R.arrived) ucp_worker_progress(R.worker[e]);
}

/* Rank 1: echo every ping over endpoint e until rank 0 says stop. */
static void raw_serve(int e) {
  R.stop = 0;
  for (;;) {
    ucp_worker_progress(R.worker[e]);
    if (R.arrived) {
      R.arrived = 0;
      raw_send(R.from, AM_PONG, R.buf, R.len);
    } else if (R.stop) {
      return;
    }
  }
}

/* ---- distmgr: remote calls ------------------------------------------------------- */

static dist_status echo(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)user;
  if (in->nargs != 1) return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "echo: %d arguments", in->nargs);
  const dist_tensor *a = &in->args[0];
  dist_tensor t;
  dist_status s = dist_rpc_output(out, a->dtype, a->ndim, a->shape, &t);
  if (s) return s;
  size_t n = dist_tensor_nbytes(a);
  if (n) memcpy(t.data, a->data, n);
  return DIST_SUCCESS;
}

/* The time at which this executor started the call (rank 0 splits its round trip). */
static dist_status stamp(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)in, (void)user;
  double now = bench_now();
  dist_tensor t;
  dist_status s = dist_rpc_output(out, DIST_F64, 0, NULL, &t);
  if (!s) memcpy(t.data, &now, sizeof now);
  return s;
}

/* Rank 1's main thread sleeps here during a distmgr block; rank 0 ends the
 * block with a call of "stop". */
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;
static int stop_flag;

static dist_status stop(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)in, (void)out, (void)user;
  pthread_mutex_lock(&stop_mu);
  stop_flag = 1;
  pthread_cond_signal(&stop_cv);
  pthread_mutex_unlock(&stop_mu);
  return DIST_SUCCESS;
}

static void dist_serve(void) {
  pthread_mutex_lock(&stop_mu);
  while (!stop_flag) pthread_cond_wait(&stop_cv, &stop_mu);
  stop_flag = 0;
  pthread_mutex_unlock(&stop_mu);
}

/* Rank 0: one call of "echo" with n bytes from `out`; the answer copied to `back` if given. */
static void dist_round_trip(const unsigned char *out, size_t n, unsigned char *back) {
  int64_t shape[1] = {(int64_t)n};
  dist_tensor a = dist_tensor_host((void *)out, DIST_U8, 1, shape);
  dist_future *f = NULL;
  dist_status s = dist_rpc_call_sync(1, "echo", &a, 1, NULL, 0, &f);
  if (s) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s (%s)", dist_status_string(s), dist_future_message(f));
    dist_future_free(f);
    die("dist_rpc_call_sync(echo)", msg);
  }
  if (back) {
    const dist_tensor *t = dist_future_output(f, 0);
    if (dist_future_count(f) != 1 || !t || dist_tensor_nbytes(t) != n) die("echo", "the answer has another shape");
    if (n) memcpy(back, t->data, n);
  }
  dist_future_free(f);
}

/* ---- blocks ------------------------------------------------------------------------ */

/* raw UCX as distmgr's endpoints are made, distmgr, raw UCX with UCX's defaults */
enum { V_RAW, V_DIST, V_RAW_DEFAULT, V_DIST_GENERAL, NV };
static const char *const v_names[NV] = {"raw UCX", "distmgr", "raw UCX (default endpoint)", "distmgr, general layout"};


typedef struct bench {
  size_t n;
  int iters[NV];
  unsigned char *out; /* rank 0: what is sent */
} bench;

/* V_DIST_GENERAL runs as V_DIST with tiny messages off on rank 0 (8 B only:
 * larger calls never travel tiny); *keep: the value to restore. */
static int general_begin(const bench *b, int *k, int *keep) {
  if (*k != V_DIST_GENERAL) return 1;
  if (b->n != LAT_BYTES) return 0;
  *k = V_DIST;
  *keep = dist__rpc.tiny_fns;
  dist__rpc.tiny_fns = 0;
  return 1;
}

/* Both ranks: a block of `iters` round trips of variant k; rank 0's
 * microseconds per round trip (rank 1: 0). */
static double block_n(bench *b, int k, int iters) {
  int keep = -1;
  if (!general_begin(b, &k, &keep)) return 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (my_rank == 1) {
    if (k == V_DIST) dist_serve();
    else raw_serve(k == V_RAW ? EP_PEER : EP_DEFAULT);
    if (keep >= 0) dist__rpc.tiny_fns = keep;
    return 0;
  }
  double t0 = bench_now();
  for (int i = 0; i < iters; i++)
    if (k == V_DIST) dist_round_trip(b->out, b->n, NULL);
    else raw_round_trip(k == V_RAW ? EP_PEER : EP_DEFAULT, b->out, b->n);
  double us = (bench_now() - t0) / iters * 1e6;
  if (k != V_DIST) {
    raw_send(k == V_RAW ? EP_PEER : EP_DEFAULT, AM_STOP, NULL, 0);
  } else {
    dist_future *f = NULL;
    check_dist(dist_rpc_call_sync(1, "stop", NULL, 0, NULL, 0, &f), "dist_rpc_call_sync(stop)");
    dist_future_free(f);
  }
  if (keep >= 0) dist__rpc.tiny_fns = keep;
  return us;
}

static double block(void *ctx, int k) {
  bench *b = ctx;
  return block_n(b, k, b->iters[k]);
}

/* Rank 0: one round trip of each variant, the answer compared with what was sent. */
static void verify(bench *b, unsigned char *back) {
  for (int k0 = 0; k0 < NV; k0++) {
    int k = k0, keep = -1;
    if (!general_begin(b, &k, &keep)) continue;
    fill(b->out, (long long)b->n, 3 * k + 1);
    memset(back, 0xee, b->n);
    MPI_Barrier(MPI_COMM_WORLD);
    if (k != V_DIST) {
      memset(R.buf, 0xee, b->n);
      raw_round_trip(k == V_RAW ? EP_PEER : EP_DEFAULT, b->out, b->n);
      memcpy(back, R.buf, b->n);
      raw_send(k == V_RAW ? EP_PEER : EP_DEFAULT, AM_STOP, NULL, 0);
    } else {
      dist_round_trip(b->out, b->n, back);
      dist_future *f = NULL;
      check_dist(dist_rpc_call_sync(1, "stop", NULL, 0, NULL, 0, &f), "dist_rpc_call_sync(stop)");
      dist_future_free(f);
    }
    if (keep >= 0) dist__rpc.tiny_fns = keep;
    if (memcmp(back, b->out, b->n)) {
      char msg[96];
      snprintf(msg, sizeof msg, "the %s echo of %zu bytes differs from what was sent", v_names[k0], b->n);
      die("verify", msg);
    }
  }
}

/* Rank 1's side of verify. */
static void verify_serve(const bench *b) {
  for (int k0 = 0; k0 < NV; k0++) {
    int k = k0, keep = -1;
    if (!general_begin(b, &k, &keep)) continue;
    MPI_Barrier(MPI_COMM_WORLD);
    if (k == V_DIST) dist_serve();
    else raw_serve(k == V_RAW ? EP_PEER : EP_DEFAULT);
  }
}

/* Rank 0, 8 B: medians over `calls` calls of "stamp" of call made ->
 * executor running, and executor running -> call returned (microseconds). */
static void breakdown(int calls, double *req_us, double *rep_us) {
  double *a = malloc(sizeof *a * (size_t)calls), *c = malloc(sizeof *c * (size_t)calls);
  if (!a || !c) die("malloc", "out of memory");
  unsigned char arg[LAT_BYTES] = {0};
  int64_t shape[1] = {LAT_BYTES};
  dist_tensor t = dist_tensor_host(arg, DIST_U8, 1, shape);
  for (int i = 0; i < calls; i++) {
    dist_future *f = NULL;
    double t0 = bench_now();
    check_dist(dist_rpc_call_sync(1, "stamp", &t, 1, NULL, 0, &f), "dist_rpc_call_sync(stamp)");
    double t2 = bench_now(), t1;
    memcpy(&t1, dist_future_output(f, 0)->data, sizeof t1);
    dist_future_free(f);
    a[i] = (t1 - t0) * 1e6, c[i] = (t2 - t1) * 1e6;
  }
  *req_us = bench_median(a, calls), *rep_us = bench_median(c, calls);
  free(a), free(c);
}

static int worker(const options *o) {
  check_dist(dist_manager_initialize(), "dist_manager_initialize");
  int np = 0;
  dist_manager_rank(&my_rank);
  dist_manager_world_size(&np);
  if (np != 2) die("worker", "bench/rpc runs on 2 ranks");
  check_dist(dist_rpc_register("echo", echo, NULL), "dist_rpc_register(echo)");
  check_dist(dist_rpc_register("stamp", stamp, NULL), "dist_rpc_register(stamp)");
  check_dist(dist_rpc_register("stop", stop, NULL), "dist_rpc_register(stop)");
  check_dist(dist_rpc_init(), "dist_rpc_init");
  raw_init(o->max_bytes);

  bench b = {0};
  unsigned char *back = NULL;
  if (my_rank == 0 && (!(b.out = malloc((size_t)o->max_bytes)) || !(back = malloc((size_t)o->max_bytes))))
    die("malloc", "out of memory");
  for (int si = 0; si < NSIZES && sizes[si] <= o->max_bytes; si++) {
    b.n = (size_t)sizes[si];
    if (my_rank == 1) {
      verify_serve(&b);
      for (int k = 0; k < NV; k++) block_n(&b, k, 0), block_n(&b, k, 0); /* warm-up, calibration */
      double t[NV * MAX_ROUNDS];
      bench_rounds(NV, o->rounds, 1, block, &b, t);
      continue;
    }
    verify(&b, back);
    for (int k = 0; k < NV; k++) {
      block_n(&b, k, 3); /* warm-up */
      int calib = b.n >= 16 * MIB ? 1 : b.n >= MIB ? 4 : 50;
      double us = block_n(&b, k, calib);
      int iters = us > 0 ? (int)(o->block_s * 1e6 / us) + 1 : 1000;
      b.iters[k] = iters > 200000 ? 200000 : iters;
    }
    double t[NV * MAX_ROUNDS];
    bench_rounds(NV, o->rounds, 1, block, &b, t); /* raw, distmgr; then distmgr, raw; ... */
    const double *raw_t = t + V_RAW * o->rounds, *dist_t = t + V_DIST * o->rounds, *def_t = t + V_RAW_DEFAULT * o->rounds,
                 *gen_t = t + V_DIST_GENERAL * o->rounds;
    int lat = b.n == LAT_BYTES;
    printf("row %lld %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", sizes[si], bench_median(raw_t, o->rounds),
           bench_median(dist_t, o->rounds), bench_paired_ratio(dist_t, raw_t, o->rounds),
           bench_median(def_t, o->rounds), bench_paired_ratio(dist_t, def_t, o->rounds),
           lat ? bench_median(gen_t, o->rounds) : 0, lat ? bench_paired_ratio(gen_t, def_t, o->rounds) : 0,
           lat ? bench_paired_ratio(dist_t, gen_t, o->rounds) : 0);
    fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (my_rank == 0) {
    char peer[256], def[256];
    raw_lanes(EP_PEER, peer, sizeof peer), raw_lanes(EP_DEFAULT, def, sizeof def);
    printf("lanes %s | %s\n", peer, def);
    double req, rep;
    breakdown(o->stamps, &req, &rep);
    printf("breakdown %.4f %.4f\n", req, rep);
    fflush(stdout);
  }
  free(b.out), free(back);
  MPI_Barrier(MPI_COMM_WORLD);
  raw_fini();
  check_dist(dist_rpc_shutdown(), "dist_rpc_shutdown");
  check_dist(dist_manager_finalize(), "dist_manager_finalize");
  return 0;
}

/* ---- driver ---------------------------------------------------------------------------- */

typedef struct row {
  double raw_us, dist_us, ratio, def_us, def_ratio, gen_us, gen_def_ratio, tiny_gen_ratio, torch_us;
} row;

static double gbps(long long bytes, double us) { return us > 0 ? 2.0 * (double)bytes / (us * 1e-6) / 1e9 : 0; }

static void cell(char *buf, size_t cap, const char *fmt, double v) {
  if (v > 0) snprintf(buf, cap, fmt, v);
  else snprintf(buf, cap, "-");
}

static int size_index(long long bytes) {
  for (int i = 0; i < NSIZES; i++)
    if (sizes[i] == bytes) return i;
  return -1;
}

/* The torch job: fills rows[].torch_us from its "BYTES US" lines; -1 with
 * why (a missing torch) or on a failed run. */
static int torch_leg(const options *o, row *rows, char *why, size_t cap) {
  if (system(BENCH_PYTHON " -c 'import torch.distributed.rpc' >/dev/null 2>&1") != 0) {
    snprintf(why, cap, BENCH_PYTHON " cannot import torch.distributed.rpc (Debian: apt-get install python3-torch)");
    return -1;
  }
  char cmd[4600], line[512];
  snprintf(cmd, sizeof cmd, "timeout -k 5 %d %s %s/bench/rpc_torch.py --max-bytes %lld --rounds %d --block-seconds %g 2>&1",
           o->quick ? 180 : 1200, BENCH_PYTHON, SRCDIR, o->max_bytes, o->rounds, o->block_s);
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return snprintf(why, cap, "cannot start %s", cmd), -1;
  long long bytes;
  double us;
  int k;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "%lld %lf", &bytes, &us) == 2 && (k = size_index(bytes)) >= 0) rows[k].torch_us = us;
    else fputs(line, stderr);
  if (pclose(p) != 0) return snprintf(why, cap, "the run failed: %s", cmd), -1;
  return 0;
}

static int parse(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--worker") == 0) o->is_worker = 1;
    else if (strcmp(a, "--quick") == 0) o->quick = 1;
    else if (!v) return -1;
    else if (strcmp(a, "--rounds") == 0) o->rounds = atoi(v), i++;
    else if (strcmp(a, "--max-bytes") == 0) o->max_bytes = atoll(v), i++;
    else if (strcmp(a, "--block-seconds") == 0) o->block_s = atof(v), i++;
    else return -1;
  }
  if (o->quick) {
    if (o->max_bytes > MIB) o->max_bytes = MIB;
    if (o->rounds > 3) o->rounds = 3;
    if (o->block_s > 0.005) o->block_s = 0.005;
    o->stamps = 200;
  }
  if (o->rounds < 1 || o->rounds > MAX_ROUNDS || o->max_bytes < LAT_BYTES || o->max_bytes > 64 * MIB ||
      o->block_s <= 0)
    return fprintf(stderr, "bench/rpc: --rounds 1..%d, --max-bytes 8..64 MiB, --block-seconds > 0\n", MAX_ROUNDS), -1;
  return 0;
}

int main(int argc, char **argv) {
  options o = {9, 0, 0, 2000, 64 * MIB, 0.02};
  if (parse(argc, argv, &o))
    return fprintf(stderr, "usage: %s [--rounds 9] [--max-bytes 67108864] [--block-seconds 0.02] [--quick]\n", argv[0]), 2;
  if (o.is_worker) return worker(&o);

  const char *launcher = bench_launcher();
  char self[4096], cmd[4600 + 4096], line[1024], why[4700] = "", lanes[600] = "?";
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/rpc: cannot find own path\n"), 1;
  printf("bench/rpc: round trips rank 0 -> rank 1 -> rank 0 on one node, N bytes each way; one launch (%s 2)\n"
         "of raw UCX, distmgr and raw UCX with a default endpoint in turn, %d blocks of ~%g ms each; us: median\n"
         "per round trip over blocks; GB/s = 2 * bytes / time; dist/raw: median over rounds of adjacent blocks\n",
         launcher, o.rounds, o.block_s * 1e3);
  fflush(stdout);
  row rows[NSIZES] = {{0}};
  double req = 0, rep = 0;
  snprintf(cmd, sizeof cmd, "timeout %d %s 2 %s --worker%s --rounds %d --max-bytes %lld --block-seconds %g 2>&1",
           o.quick ? 180 : 1800, launcher, self, o.quick ? " --quick" : "", o.rounds, o.max_bytes, o.block_s);
  FILE *p = popen(cmd, "r");
  if (!p) return fprintf(stderr, "bench/rpc: cannot start %s\n", cmd), 1;
  while (fgets(line, sizeof line, p)) {
    long long bytes;
    row r = {0};
    int k;
    if (sscanf(line, "row %lld %lf %lf %lf %lf %lf %lf %lf %lf", &bytes, &r.raw_us, &r.dist_us, &r.ratio, &r.def_us,
               &r.def_ratio, &r.gen_us, &r.gen_def_ratio, &r.tiny_gen_ratio) == 9 &&
        (k = size_index(bytes)) >= 0)
      rows[k] = r;
    else if (sscanf(line, "breakdown %lf %lf", &req, &rep) == 2)
      ;
    else if (strncmp(line, "lanes ", 6) == 0)
      snprintf(lanes, sizeof lanes, "%.*s", (int)strcspn(line + 6, "\n"), line + 6);
    else
      fputs(line, stderr);
  }
  if (pclose(p) != 0) return fprintf(stderr, "bench/rpc: the launch failed: %s\n", cmd), 1;
  int torch = torch_leg(&o, rows, why, sizeof why) == 0;
  if (!torch && strncmp(why, "the run failed", 14) == 0) return fprintf(stderr, "bench/rpc: torch RPC: %s\n", why), 1;

  char *bar = strchr(lanes, '|');
  if (bar) bar[-1] = 0;
  printf("raw UCX: ucp worker of one thread, busy-polled; its endpoint with peer failure detection, as distmgr's\n"
         "(transports: %s); raw default: UCX's default endpoint (transports: %s)\n",
         lanes, bar ? bar + 2 : "?");
  if (!torch) printf("skipped: torch RPC: %s\n", why);
  else printf("torch: bench/rpc_torch.py, rpc_sync over TensorPipe, 2 processes on 127.0.0.1, its own %d blocks\n", o.rounds);
  printf("%9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "bytes", "raw_us", "rawdef_us", "dist_us", "torch_us",
         "raw_GB/s", "rawdefGB/s", "dist_GB/s", "torchGB/s", "dist/raw", "d/rawdef", "d/torch");
  for (int k = 0; k < NSIZES && sizes[k] <= o.max_bytes; k++) {
    const row *r = &rows[k];
    char tu[32], tg[32], rt[32];
    cell(tu, sizeof tu, "%.2f", r->torch_us);
    cell(tg, sizeof tg, "%.3f", gbps(sizes[k], r->torch_us));
    cell(rt, sizeof rt, "%.3f", r->torch_us > 0 ? r->dist_us / r->torch_us : 0);
    printf("%9lld %9.2f %9.2f %9.2f %9s %9.3f %9.3f %9.3f %9s %9.3f %9.3f %9s\n", sizes[k], r->raw_us, r->def_us,
           r->dist_us, tu, gbps(sizes[k], r->raw_us), gbps(sizes[k], r->def_us), gbps(sizes[k], r->dist_us), tg,
           r->ratio, r->def_ratio, rt);
  }
  printf("breakdown: distmgr 8 B, median of %d calls: call made -> executor running %.2f us, executor running -> "
         "call returned %.2f us (raw UCX one way: %.2f us)\n",
         o.stamps, req, rep, rows[0].raw_us / 2);
  char note[96];
  snprintf(note, sizeof note, "target <= %.1f; the same transports: shared memory", LAT_TARGET_RAW);
  bench_ratio(stdout, rows[0].def_ratio, note, "rpc latency 8B distmgr/raw UCX default endpoint");
  printf("general layout: distmgr 8 B with tiny messages off (as DIST_RPC_TINY=0), same launch: %.2f us\n",
         rows[0].gen_us);
  bench_ratio(stdout, rows[0].gen_def_ratio, "no target: tiny messages off",
              "rpc latency 8B distmgr general layout/raw UCX default endpoint");
  bench_ratio(stdout, rows[0].tiny_gen_ratio, "no target: what the 24-byte layout saves",
              "rpc latency 8B distmgr tiny/general layout");
  if (torch && rows[0].torch_us > 0) {
    snprintf(note, sizeof note, "target <= %.1f", LAT_TARGET_TORCH);
    bench_ratio(stdout, rows[0].dist_us / rows[0].torch_us, note, "rpc latency 8B distmgr/torch rpc");
  }
  bench_ratio(stdout, rows[0].ratio, "no target: raw UCX over TCP loopback (peer failure detection), distmgr on shared memory",
              "rpc latency 8B distmgr/raw UCX peer-failure endpoint");
  for (int k = 0; k < NSIZES && sizes[k] <= o.max_bytes; k++) {
    if (sizes[k] != MIB && sizes[k] != 64 * MIB) continue;
    const row *r = &rows[k];
    snprintf(note, sizeof note, "no target; %.3f GB/s against %.3f", gbps(sizes[k], r->dist_us), gbps(sizes[k], r->raw_us));
    bench_ratio(stdout, r->ratio > 0 ? 1 / r->ratio : 0, note, "rpc bandwidth %lldMiB distmgr/raw UCX", sizes[k] / MIB);
    snprintf(note, sizeof note, "no target; %.3f GB/s against %.3f", gbps(sizes[k], r->dist_us), gbps(sizes[k], r->def_us));
    bench_ratio(stdout, r->def_ratio > 0 ? 1 / r->def_ratio : 0, note,
                "rpc bandwidth %lldMiB distmgr/raw UCX default endpoint", sizes[k] / MIB);
    if (torch && r->torch_us > 0) {
      snprintf(note, sizeof note, "no target; %.3f GB/s against %.3f", gbps(sizes[k], r->dist_us),
               gbps(sizes[k], r->torch_us));
      bench_ratio(stdout, r->torch_us / r->dist_us, note, "rpc bandwidth %lldMiB distmgr/torch rpc", sizes[k] / MIB);
    }
  }
  return 0;
}
