/* Remote calls (distmgr/rpc.h) at 1-4 ranks: calls to every worker and to
 * oneself, payloads from 0 bytes to 64 MiB, nested calls, calls from many
 * threads, futures, every partitioner and reducer against a serial
 * computation, distributed backward against the serial VJP, bad input, and
 * shutdown. Every rank makes its own calls, so each worker serves calls from
 * all the others while it calls them. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fault.h"        /* dist__fault_site: a request sent malformed */
#include "rpc/rpc_internal.h" /* dist__rpc.timeout: a short DIST_TIMEOUT for one test */
#include "cunit_mpi.h"

static int R, W;

#define TRY(call)                  \
  do {                             \
    dist_status t_ = (call);       \
    if (t_) return t_;             \
  } while (0)

#define OK(call)                                                            \
  do {                                                                      \
    dist_status s_ = (call);                                                \
    if (s_) fprintf(stderr, "rank %d: %s: %s\n", R, #call, dist_last_error()); \
    CU_ASSERT_EQUAL_FATAL(s_, DIST_SUCCESS);                                \
  } while (0)

/* ---- the functions every worker serves ------------------------------------------ */

static dist_status fn_echo(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  for (int i = 0; i < in->nargs; i++) {
    dist_tensor t;
    TRY(dist_rpc_output(out, in->args[i].dtype, in->args[i].ndim, in->args[i].shape, &t));
    if (dist_tensor_nbytes(&t)) memcpy(t.data, in->args[i].data, dist_tensor_nbytes(&t));
  }
  return DIST_SUCCESS;
}

/* x * s + caller, s from the options (a double). */
static dist_status fn_scale(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  double s;
  if (in->nargs != 1 || in->args[0].dtype != DIST_F64 || in->opts_bytes != sizeof s)
    return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "scale wants one f64 tensor and a double");
  memcpy(&s, in->opts, sizeof s);
  dist_tensor y;
  TRY(dist_rpc_output(out, DIST_F64, in->args[0].ndim, in->args[0].shape, &y));
  for (int64_t i = 0; i < dist_tensor_numel(&y); i++)
    ((double *)y.data)[i] = ((const double *)in->args[0].data)[i] * s + in->caller;
  return DIST_SUCCESS;
}

static dist_status fn_fail(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)out, (void)u;
  if (in->opts_bytes) return DIST_ERR_IO; /* without a message */
  return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "asked to fail by rank %d", in->caller);
}

/* scale on the next worker, plus 1: a remote function that calls another. */
static dist_status fn_relay(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  dist_future *f = NULL;
  dist_status s = dist_rpc_call_sync((R + 1) % W, "scale", in->args, in->nargs, in->opts, in->opts_bytes, &f);
  if (!s) {
    const dist_tensor *z = dist_future_output(f, 0);
    dist_tensor y;
    s = dist_rpc_output(out, DIST_F64, z->ndim, z->shape, &y);
    for (int64_t i = 0; !s && i < dist_tensor_numel(&y); i++) ((double *)y.data)[i] = ((const double *)z->data)[i] + 1;
  }
  dist_future_free(f);
  return s;
}

static double sum_f64(const dist_tensor *t) {
  double s = 0;
  for (int64_t i = 0; i < dist_tensor_numel(t); i++) s += ((const double *)t->data)[i];
  return s;
}

/* [sum, count] of arg 0, and the worker's rank. */
static dist_status fn_stats(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  int64_t two = 2, one = 1;
  dist_tensor a, b;
  TRY(dist_rpc_output(out, DIST_F64, 1, &two, &a));
  TRY(dist_rpc_output(out, DIST_I64, 1, &one, &b));
  ((double *)a.data)[0] = sum_f64(&in->args[0]);
  ((double *)a.data)[1] = (double)dist_tensor_numel(&in->args[0]);
  ((int64_t *)b.data)[0] = R;
  return DIST_SUCCESS;
}

static dist_status fn_mean(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  int64_t one = 1;
  dist_tensor a;
  TRY(dist_rpc_output(out, DIST_F64, 1, &one, &a));
  ((double *)a.data)[0] = sum_f64(&in->args[0]) / (double)dist_tensor_numel(&in->args[0]);
  return DIST_SUCCESS;
}

/* [sum], [rank, ndim, extent of dim 0] of arg 0. */
static dist_status fn_colsum(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  int64_t one = 1, three = 3;
  dist_tensor a, b;
  TRY(dist_rpc_output(out, DIST_F64, 1, &one, &a));
  TRY(dist_rpc_output(out, DIST_I32, 1, &three, &b));
  ((double *)a.data)[0] = sum_f64(&in->args[0]);
  int32_t *info = b.data;
  info[0] = R, info[1] = in->args[0].ndim, info[2] = (int32_t)in->args[0].shape[0];
  return DIST_SUCCESS;
}

/* sum_i X[i,:] . w, X split, w {2} replicated. */
static dist_status fn_wsum(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  int64_t one = 1;
  dist_tensor a;
  TRY(dist_rpc_output(out, DIST_F64, 1, &one, &a));
  const double *x = in->args[0].data, *w = in->args[1].data;
  double s = 0;
  for (int64_t i = 0; i < in->args[0].shape[0]; i++) s += x[2 * i] * w[0] + x[2 * i + 1] * w[1];
  ((double *)a.data)[0] = s;
  return DIST_SUCCESS;
}

/* y = W x (W {m, n}, x {n}), and its VJP: gW = gy x^T, gx = W^T gy. */
static dist_status fn_affine(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  const dist_tensor *A = &in->args[0], *x = &in->args[1];
  int64_t m = A->shape[0], n = A->shape[1];
  dist_tensor y;
  TRY(dist_rpc_output(out, DIST_F64, 1, &m, &y));
  for (int64_t i = 0; i < m; i++) {
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += ((const double *)A->data)[i * n + j] * ((const double *)x->data)[j];
    ((double *)y.data)[i] = s;
  }
  return DIST_SUCCESS;
}
static dist_status fn_affine_vjp(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  if (in->nargs != 3) return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "affine's VJP got %d tensors", in->nargs);
  const double *A = in->args[0].data, *x = in->args[1].data, *gy = in->args[2].data;
  int64_t m = in->args[0].shape[0], n = in->args[0].shape[1];
  dist_tensor gA, gx;
  TRY(dist_rpc_output(out, DIST_F64, 2, in->args[0].shape, &gA));
  TRY(dist_rpc_output(out, DIST_F64, 1, &n, &gx));
  for (int64_t j = 0; j < n; j++) ((double *)gx.data)[j] = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      ((double *)gA.data)[i * n + j] = gy[i] * x[j];
      ((double *)gx.data)[j] += A[i * n + j] * gy[i];
    }
  return DIST_SUCCESS;
}

static int setup(int round) {
  (void)round;
  int bad = 0;
  bad |= dist_rpc_register("echo", fn_echo, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("scale", fn_scale, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("fail", fn_fail, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("relay", fn_relay, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("stats", fn_stats, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("mean", fn_mean, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("colsum", fn_colsum, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("wsum", fn_wsum, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register("affine", fn_affine, NULL) != DIST_SUCCESS;
  bad |= dist_rpc_register_vjp("affine", fn_affine_vjp, NULL) != DIST_SUCCESS;
  if (bad) return fprintf(stderr, "rank %d: register: %s\n", R, dist_last_error()), 1;
  if (dist_rpc_init()) return fprintf(stderr, "rank %d: dist_rpc_init: %s\n", R, dist_last_error()), 1;
  return 0;
}

/* ---- calls ---------------------------------------------------------------------- */

static dist_tensor vec(double *x, int64_t *n) { return dist_tensor_host(x, DIST_F64, 1, n); }

static void test_every_worker(void) {
  double x[5] = {0, 1, 2, 3, -4.5}, s = 2.5;
  int64_t n = 5;
  dist_tensor a = vec(x, &n);
  dist_future *fs[4] = {0};
  for (int to = 0; to < W; to++) {
    dist_future *f = NULL;
    OK(dist_rpc_call_sync(to, "scale", &a, 1, &s, sizeof s, &f));
    CU_ASSERT_EQUAL(dist_future_count(f), 1);
    const double *y = dist_future_output(f, 0)->data;
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(y[i], x[i] * s + R);
    dist_future_free(f);
    OK(dist_rpc_call_async(to, "scale", &a, 1, &s, sizeof s, &fs[to]));
  }
  x[0] = 1e9; /* the arguments were sent: changing them changes nothing */
  OK(dist_future_wait_all(fs, W));
  for (int to = 0; to < W; to++) {
    CU_ASSERT_EQUAL(((const double *)dist_future_output(fs[to], 0)->data)[0], 0 * s + R);
    dist_future_free(fs[to]);
  }
}

static void fill(uint8_t *p, size_t n, int seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + (size_t)seed * 13 + (i >> 12));
}

/* Echo of n bytes (plus a second and third tensor of other dtypes) to `to`. */
static void echo_bytes(size_t n, int to) {
  uint8_t *p = malloc(n + 1);
  fill(p, n, R);
  int64_t len = (int64_t)n, sh2[2] = {3, 2};
  float f[6] = {1, -2, 3.5f, 0, 1e-30f, -7};
  int64_t scalar = -42;
  dist_tensor a[3] = {dist_tensor_host(n ? p : NULL, DIST_U8, 1, &len), dist_tensor_host(f, DIST_F32, 2, sh2),
                      dist_tensor_host(&scalar, DIST_I64, 0, NULL)};
  dist_future *fut = NULL;
  dist_status s = dist_rpc_call_sync(to, "echo", a, 3, NULL, 0, &fut);
  if (s) fprintf(stderr, "rank %d: echo of %zu bytes to worker%d: %s\n", R, n, to, dist_last_error());
  CU_ASSERT_EQUAL(s, DIST_SUCCESS);
  if (!s) {
    CU_ASSERT_EQUAL(dist_future_count(fut), 3);
    const dist_tensor *o = dist_future_output(fut, 0);
    CU_ASSERT_EQUAL(o->shape[0], len);
    CU_ASSERT(n == 0 || memcmp(o->data, p, n) == 0);
    CU_ASSERT_EQUAL(memcmp(dist_future_output(fut, 1)->data, f, sizeof f), 0);
    CU_ASSERT_EQUAL(dist_future_output(fut, 1)->shape[1], 2);
    CU_ASSERT_EQUAL(dist_future_output(fut, 2)->ndim, 0);
    CU_ASSERT_EQUAL(*(const int64_t *)dist_future_output(fut, 2)->data, -42);
  }
  dist_future_free(fut);
  free(p);
}

static void test_payloads(void) {
  const size_t sizes[] = {0, 1, 15, 16, 17, 4096, 65537, 1 << 20, 8 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) echo_bytes(sizes[k], (R + 1) % W);
  if (R == 0) echo_bytes((size_t)64 << 20, W - 1); /* 64 MiB once */
  echo_bytes(100, R);                                /* oneself */
}

static void test_nested(void) {
  double x[3] = {1, 2, 3}, s = -1.5;
  int64_t n = 3;
  dist_tensor a = vec(x, &n);
  dist_future *f = NULL;
  int via = (R + 1) % W, last = (via + 1) % W;
  OK(dist_rpc_call_sync(via, "relay", &a, 1, &s, sizeof s, &f));
  const double *y = dist_future_output(f, 0)->data;
  (void)last; /* the inner call's caller is `via` */
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(y[i], x[i] * s + via + 1);
  dist_future_free(f);
}

typedef struct thread_job {
  int t, bad;
} thread_job;

static void *caller_thread(void *arg) {
  thread_job *j = arg;
  for (int i = 0; i < 30; i++) {
    double x[2] = {i, j->t}, s = 3;
    int64_t n = 2;
    dist_tensor a = vec(x, &n);
    dist_future *f = NULL;
    int to = (R + j->t + i) % W;
    if (dist_rpc_call_sync(to, "scale", &a, 1, &s, sizeof s, &f)) j->bad++;
    else {
      const double *y = dist_future_output(f, 0)->data;
      if (y[0] != i * 3.0 + R || y[1] != j->t * 3.0 + R) j->bad++;
    }
    dist_future_free(f);
  }
  return NULL;
}

static void test_threads(void) {
  pthread_t th[4];
  thread_job jobs[4];
  for (int t = 0; t < 4; t++) {
    jobs[t] = (thread_job){t, 0};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, caller_thread, &jobs[t]), 0);
  }
  for (int t = 0; t < 4; t++) {
    pthread_join(th[t], NULL);
    CU_ASSERT_EQUAL(jobs[t].bad, 0);
  }
}

static atomic_int callbacks;
static void count_cb(dist_future *f, void *user) {
  if (dist_future_test(f) && user == (void *)&callbacks) atomic_fetch_add(&callbacks, 1);
}

static void test_futures(void) {
  double x = 1, s = 2;
  int64_t n = 1;
  dist_tensor a = vec(&x, &n);
  dist_future *fs[5] = {0};
  atomic_store(&callbacks, 0);
  for (int i = 0; i < 5; i++) {
    OK(dist_rpc_call_async((R + i) % W, "scale", &a, 1, &s, sizeof s, &fs[i]));
    OK(dist_future_then(fs[i], count_cb, &callbacks));
  }
  CU_ASSERT_EQUAL(dist_future_then(fs[0], count_cb, &callbacks), DIST_ERR_INVALID_ARGUMENT); /* one callback each */
  int any = -1;
  OK(dist_future_wait_any(fs, 5, &any));
  CU_ASSERT(any >= 0 && any < 5 && dist_future_test(fs[any]));
  OK(dist_future_wait_all(fs, 5));
  for (int i = 0; i < 5; i++) CU_ASSERT(dist_future_test(fs[i]));
  CU_ASSERT_EQUAL(atomic_load(&callbacks), 5);
  /* then on a completed future runs at once */
  dist_future *g = NULL;
  OK(dist_rpc_call_sync(R, "scale", &a, 1, &s, sizeof s, &g));
  OK(dist_future_then(g, count_cb, &callbacks));
  CU_ASSERT_EQUAL(atomic_load(&callbacks), 6);
  dist_future_free(g);
  for (int i = 0; i < 5; i++) dist_future_free(fs[i]);
  dist_future_free(NULL);
}

/* A then-callback chains a call with a 1 MiB argument (its bytes are copied:
 * the callback cannot wait for UCX to read them) and may not wait in it. */
typedef struct chain {
  double *big;
  dist_future *next;
  dist_status made, waited;
  atomic_int registered, at_once; /* the callback ran inside dist_future_then */
} chain;

static void chain_cb(dist_future *f, void *user) {
  chain *c = user;
  (void)f;
  atomic_store(&c->at_once, !atomic_load(&c->registered));
  int64_t n = 1 << 17; /* 1 MiB of doubles */
  dist_tensor a = vec(c->big, &n);
  double s = 3;
  c->made = dist_rpc_call_async((R + 1) % W, "scale", &a, 1, &s, sizeof s, &c->next);
  c->waited = c->next ? dist_future_wait(c->next) : DIST_SUCCESS;
}

static void test_then_chain(void) {
  double x = 1, s = 2;
  int64_t one = 1;
  dist_tensor a = vec(&x, &one);
  chain c = {malloc(sizeof(double) << 17), NULL, -1, -1, 0, 0};
  CU_ASSERT_PTR_NOT_NULL_FATAL(c.big);
  for (int i = 0; i < 1 << 17; i++) c.big[i] = i;
  dist_future *f = NULL;
  OK(dist_rpc_call_async((R + 1) % W, "scale", &a, 1, &s, sizeof s, &f));
  OK(dist_future_then(f, chain_cb, &c));
  atomic_store(&c.registered, 1);
  OK(dist_future_wait(f)); /* returns after the callback ran */
  CU_ASSERT_EQUAL(c.made, DIST_SUCCESS);
  /* Waiting there is refused: the completion that ran it holds the worker
   * (unless f had completed before the callback was set: it ran at once). */
  CU_ASSERT(c.waited == DIST_ERR_INVALID_ARGUMENT || atomic_load(&c.at_once));
  memset(c.big, 0, sizeof(double) << 17); /* the chained call sent a copy */
  if (c.next) {
    OK(dist_future_wait(c.next));
    const double *y = dist_future_output(c.next, 0)->data;
    int bad = 0; /* "scale" answers x * s + caller rank (test_nested) */
    for (int i = 0; i < 1 << 17; i++) bad += y[i] != 3.0 * i + R;
    CU_ASSERT_EQUAL(bad, 0);
  }
  dist_future_free(c.next);
  dist_future_free(f);
  free(c.big);
}

/* ---- errors --------------------------------------------------------------------- */

static void test_errors(void) {
  double x = 1, s = 1;
  int64_t n = 1;
  dist_tensor a = vec(&x, &n);
  dist_future *f = NULL;
  int to = (R + 1) % W;
  char worker[32];
  snprintf(worker, sizeof worker, "worker%d", to);
  CU_ASSERT_EQUAL(dist_rpc_call_sync(to, "no_such_fn", &a, 1, NULL, 0, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "no_such_fn"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), worker));
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_future_message(f), worker));
  CU_ASSERT_EQUAL(dist_future_status(f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_future_count(f), 0);
  dist_future_free(f);
  CU_ASSERT_EQUAL(dist_rpc_call_sync(to, "fail", &a, 1, NULL, 0, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "asked to fail"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), worker));
  dist_future_free(f);
  /* a failure without a message is named as such, not with a stale one */
  CU_ASSERT_EQUAL(dist_rpc_call_sync(to, "fail", &a, 1, &s, sizeof s, &f), DIST_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "'fail' returned"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), worker));
  dist_future_free(f);
  /* a remote function's own argument check */
  CU_ASSERT_EQUAL(dist_rpc_call_sync(to, "scale", &a, 1, NULL, 0, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "scale wants"));
  dist_future_free(f);
  /* refused before sending */
  CU_ASSERT_EQUAL(dist_rpc_call_async(W, "scale", &a, 1, &s, sizeof s, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NULL(f);
  CU_ASSERT_EQUAL(dist_rpc_call_async(-1, "scale", &a, 1, &s, sizeof s, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, "scale", &a, 1, &s, sizeof s, NULL), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, "scale", &a, DIST_RPC_MAX_ARGS + 1, &s, sizeof s, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, NULL, &a, 1, &s, sizeof s, &f), DIST_ERR_INVALID_ARGUMENT);
  char longname[DIST_RPC_MAX_NAME + 8];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, longname, &a, 1, &s, sizeof s, &f), DIST_ERR_INVALID_ARGUMENT);
  dist_tensor dev = a;
  dev.memory = DIST_MEM_CUDA;
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, "scale", &dev, 1, &s, sizeof s, &f), DIST_ERR_UNSUPPORTED);
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, "scale", &a, 1, NULL, 8, &f), DIST_ERR_INVALID_ARGUMENT);
  int64_t huge[3] = {(int64_t)1 << 62, (int64_t)1 << 62, 0}; /* no elements, but extents whose bytes overflow */
  dist_tensor odd = dist_tensor_host(NULL, DIST_U8, 3, huge);
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, "echo", &odd, 1, NULL, 0, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_register("scale", fn_scale, NULL), DIST_ERR_INVALID_ARGUMENT); /* twice */
  CU_ASSERT_EQUAL(dist_rpc_register_vjp("never_registered", fn_affine_vjp, NULL), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_register_vjp("affine", fn_affine_vjp, NULL), DIST_ERR_INVALID_ARGUMENT); /* twice */
  CU_ASSERT(strstr(dist_last_error(), "'affine' has a VJP already") != NULL);
  CU_ASSERT_EQUAL(dist_future_wait(NULL), DIST_ERR_INVALID_ARGUMENT);
  /* worker names */
  int r = -1;
  OK(dist_rpc_worker_rank("worker0", &r));
  CU_ASSERT_EQUAL(r, 0);
  char name[16];
  OK(dist_rpc_worker_name(W - 1, name, sizeof name));
  OK(dist_rpc_worker_rank(name, &r));
  CU_ASSERT_EQUAL(r, W - 1);
  const char *bad[] = {"worker", "worker01", "w1", "worker-1", "worker1x", "worker99999999999", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CU_ASSERT_EQUAL(dist_rpc_worker_rank(bad[i], &r), DIST_ERR_INVALID_ARGUMENT);
  snprintf(name, sizeof name, "worker%d", W);
  CU_ASSERT_EQUAL(dist_rpc_worker_rank(name, &r), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_worker_name(W, name, sizeof name), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_worker_name(0, name, 3), DIST_ERR_BUFFER_TOO_SMALL);
}

/* Requests that reach the worker malformed (a length that lies, a body
 * shorter than its header says) are answered with DIST_ERR_CORRUPT naming
 * the worker; the next call works. */
static void test_malformed(void) {
  double x[2] = {1, 2}, s = 2;
  int64_t n = 2;
  dist_tensor a = vec(x, &n);
  const char *sites[] = {"rpc_corrupt", "rpc_truncate"};
  for (int k = 0; k < 2; k++) {
    dist_future *f = NULL;
    int to = (R + 1 + k) % W;
    char worker[32];
    snprintf(worker, sizeof worker, "worker%d", to);
    dist__fault_site = sites[k];
    CU_ASSERT_EQUAL(dist_rpc_call_sync(to, "scale", &a, 1, &s, sizeof s, &f), DIST_ERR_CORRUPT);
    CU_ASSERT_PTR_NULL(dist__fault_site); /* the site was reached */
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), worker));
    dist_future_free(f);
    OK(dist_rpc_call_sync(to, "scale", &a, 1, &s, sizeof s, &f));
    CU_ASSERT_EQUAL(((const double *)dist_future_output(f, 0)->data)[1], 2 * s + R);
    dist_future_free(f);
  }
  dist__fault_site = NULL;
}

/* Tiny requests this rank's worker received: after `expect` more, within
 * 10 s (the calls of its predecessor, who may still be making them). */
static unsigned tiny_in(void) {
  dist__rpc_lock();
  unsigned n = dist__rpc.tiny_in;
  dist__rpc_unlock();
  return n;
}
static void expect_tiny(unsigned before, unsigned expect) {
  struct timespec nap = {0, 1000000};
  for (int i = 0; i < 10000 && tiny_in() - before < expect; i++) nanosleep(&nap, NULL);
  CU_ASSERT_EQUAL(tiny_in() - before, expect);
}

/* Small calls travel as 24-byte tiny messages (wire.h) and give what the
 * general layout gives: an 8-byte echo, a scalar, two i32, a call without
 * arguments, and a failure (its answer, with the message, in the general
 * layout). Options, a ninth byte, a second dimension or the setting off
 * take the general layout. Counted on the worker that received them. */
static void test_tiny_calls(void) {
  CU_ASSERT_FATAL(dist__rpc.tiny_fns > 0); /* every rank registered the same functions in the same order */
  int to = (R + 1) % W;
  uint8_t bytes[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  double scalar = -2.5 - R;
  int32_t pair[2] = {7 + R, -9};
  int64_t n8 = 8, n9 = 9, n2 = 2, sh2[2] = {1, 1};
  dist_tensor args[] = {dist_tensor_host(bytes, DIST_U8, 1, &n8), dist_tensor_host(&scalar, DIST_F64, 0, NULL),
                        dist_tensor_host(pair, DIST_I32, 1, &n2)};
  unsigned before = tiny_in(); /* before the barrier: the predecessor calls right after it */
  OK(dist_barrier(NULL));
  for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
    dist_future *f = NULL;
    OK(dist_rpc_call_sync(to, "echo", &args[i], 1, NULL, 0, &f));
    CU_ASSERT_EQUAL_FATAL(dist_future_count(f), 1);
    const dist_tensor *t = dist_future_output(f, 0);
    CU_ASSERT_EQUAL(t->dtype, args[i].dtype);
    CU_ASSERT_EQUAL_FATAL(t->ndim, args[i].ndim);
    if (t->ndim) CU_ASSERT_EQUAL(t->shape[0], args[i].shape[0]);
    CU_ASSERT_EQUAL_FATAL(dist_tensor_nbytes(t), dist_tensor_nbytes(&args[i]));
    CU_ASSERT(!memcmp(t->data, args[i].data, dist_tensor_nbytes(t)));
    dist_future_free(f);
  }
  dist_future *f = NULL;
  OK(dist_rpc_call_sync(to, "echo", NULL, 0, NULL, 0, &f)); /* no arguments: no outputs */
  CU_ASSERT_EQUAL(dist_future_count(f), 0);
  dist_future_free(f);
  CU_ASSERT_EQUAL(dist_rpc_call_sync(to, "fail", NULL, 0, NULL, 0, &f), DIST_ERR_INVALID_ARGUMENT);
  char worker[32];
  snprintf(worker, sizeof worker, "worker%d", to);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_future_message(f), worker));
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_future_message(f), "asked to fail"));
  dist_future_free(f);
  expect_tiny(before, 5);

  /* The general layout: a ninth byte, a second dimension, options, the setting off. */
  before = tiny_in();
  OK(dist_barrier(NULL));
  dist_tensor general[] = {dist_tensor_host(bytes, DIST_U8, 1, &n9), dist_tensor_host(bytes, DIST_U8, 2, sh2)};
  for (size_t i = 0; i < 2; i++) {
    OK(dist_rpc_call_sync(to, "echo", &general[i], 1, NULL, 0, &f));
    CU_ASSERT_EQUAL(dist_tensor_nbytes(dist_future_output(f, 0)), dist_tensor_nbytes(&general[i]));
    CU_ASSERT(!memcmp(dist_future_output(f, 0)->data, bytes, dist_tensor_nbytes(&general[i])));
    dist_future_free(f);
  }
  double x = 1, s = 2;
  int64_t one = 1;
  dist_tensor a = vec(&x, &one);
  OK(dist_rpc_call_sync(to, "scale", &a, 1, &s, sizeof s, &f));
  CU_ASSERT_EQUAL(((const double *)dist_future_output(f, 0)->data)[0], 2 + R);
  dist_future_free(f);
  int keep = dist__rpc.tiny_fns;
  dist__rpc.tiny_fns = 0; /* as DIST_RPC_TINY=0 */
  OK(dist_rpc_call_sync(to, "echo", &args[0], 1, NULL, 0, &f));
  CU_ASSERT(!memcmp(dist_future_output(f, 0)->data, bytes, 8));
  dist_future_free(f);
  dist__rpc.tiny_fns = keep;
  OK(dist_barrier(NULL));
  CU_ASSERT_EQUAL(tiny_in() - before, 0);
}

/* Sends len bytes as active message `id` to `to`, as a peer could. */
static void send_raw(int to, unsigned id, const void *data, size_t len) {
  ucp_request_param_t p = {.op_attr_mask = 0};
  dist__rpc_lock();
  ucs_status_ptr_t r = ucp_am_send_nbx(dist__rpc.ep[to], id, NULL, 0, data, len, &p);
  CU_ASSERT_FALSE(UCS_PTR_IS_ERR(r));
  if (r && !UCS_PTR_IS_ERR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) dist__rpc_progress();
    ucp_request_free(r);
  }
  dist__rpc_unlock();
}

/* Small messages carry their header in their data (engine.c). Ones that
 * are too short for a header, not distmgr's, of an unknown kind, or a reply
 * to a call nobody made are dropped with a log line (tiny requests that do
 * not decode are answered with an error); the worker still answers the next
 * call. */
static void test_stray_small(void) {
  double x[2] = {1, 2}, s = 3;
  int64_t n = 2;
  dist_tensor a = vec(x, &n);
  int to = (R + 1) % W;
  dist__rpc_header good = {.magic = DIST__RPC_MAGIC, .version = DIST__RPC_VERSION, .kind = DIST__RPC_REPLY,
                           .call_id = UINT64_MAX}; /* an id no call has */
  dist__rpc_header magic = good, kind = good;
  magic.magic = 0x1234;
  kind.kind = DIST__RPC_KINDS;
  unsigned char buf[64] = {0};
  send_raw(to, DIST__RPC_AM_ID_NOW, buf, 7); /* shorter than a header */
  const dist__rpc_header *hs[] = {&magic, &kind, &good};
  for (int i = 0; i < 3; i++) {
    memcpy(buf, hs[i], sizeof *hs[i]);
    send_raw(to, DIST__RPC_AM_ID_NOW, buf, sizeof buf);
  }
  /* Tiny ones: too short, not distmgr's, a reply nobody waits for, a request
   * for a function index nobody registered (answered with an error to a call
   * its sender never made: dropped there) and one with a bad tensor. */
  unsigned char tiny[DIST__RPC_TINY_BYTES];
  dist__rpc_tiny th = {.call_id = UINT64_MAX, .kind = DIST__RPC_REPLY};
  dist__rpc_tiny_encode(tiny, &th, NULL);
  send_raw(to, DIST__RPC_AM_ID_TINY, tiny, 7);
  send_raw(to, DIST__RPC_AM_ID_TINY, tiny, sizeof tiny); /* the reply */
  tiny[11] ^= 1;
  send_raw(to, DIST__RPC_AM_ID_TINY, tiny, sizeof tiny);
  th = (dist__rpc_tiny){.call_id = UINT64_MAX - 1, .caller = R, .fn = 255, .kind = DIST__RPC_REQUEST};
  dist__rpc_tiny_encode(tiny, &th, NULL);
  send_raw(to, DIST__RPC_AM_ID_TINY, tiny, sizeof tiny);
  th.fn = 0;
  dist__rpc_tiny_encode(tiny, &th, NULL);
  tiny[13] = 0x7F; /* no such dtype */
  send_raw(to, DIST__RPC_AM_ID_TINY, tiny, sizeof tiny);
  dist_future *f = NULL;
  OK(dist_rpc_call_sync(to, "scale", &a, 1, &s, sizeof s, &f));
  CU_ASSERT_EQUAL(((const double *)dist_future_output(f, 0)->data)[1], 2 * s + R);
  dist_future_free(f);
  OK(dist_rpc_barrier()); /* every rank's strays reached their workers before the next test */
}

/* A function registered on rank 0 only: the registries differ, found
 * collectively; registered everywhere, they agree again. */
static void test_registry_mismatch(void) {
  if (R == 0) OK(dist_rpc_register("late", fn_echo, NULL));
  dist_status s = dist_rpc_check_registry();
  if (W > 1) {
    CU_ASSERT_EQUAL(s, DIST_ERR_MISMATCH);
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "worker1"));
  } else {
    CU_ASSERT_EQUAL(s, DIST_SUCCESS);
  }
  if (R != 0) OK(dist_rpc_register("late", fn_echo, NULL));
  OK(dist_rpc_check_registry());
}

/* ---- partitioners and reducers against serial computations ------------------------- */

/* The DIM partitioner's chunk k of B over n = min(B, W) workers. */
static void chunk(int64_t B, int k, int64_t *lo, int64_t *hi) {
  int64_t n = B < W ? B : W, base = B / n, extra = B % n;
  *lo = k * base + (k < extra ? k : extra);
  *hi = *lo + base + (k < extra);
}

static void test_batch_sum(void) {
  for (int64_t B = 1; B <= 10; B += 3) {
    double X[30];
    int64_t sh[2] = {B, 3};
    for (int i = 0; i < 30; i++) X[i] = (i * 37 % 11) - 5.25 + R;
    dist_tensor a = dist_tensor_host(X, DIST_F64, 2, sh);
    dist_rpc_partitioner p = dist_rpc_batch_partitioner();
    dist_rpc_reducer r = {DIST_RPC_REDUCE_SUM, NULL, NULL};
    dist_future *f = NULL;
    OK(dist_rpc_remote_sync("stats", &a, 1, NULL, 0, &p, &r, &f));
    double want = 0;
    for (int i = 0; i < B * 3; i++) want += X[i];
    const double *got = dist_future_output(f, 0)->data;
    CU_ASSERT_DOUBLE_EQUAL(got[0], want, 1e-12);
    CU_ASSERT_EQUAL(got[1], (double)(B * 3));
    /* workers 0 .. min(B, W) - 1, one chunk each: their ranks summed */
    int64_t n = B < W ? B : W;
    CU_ASSERT_EQUAL(*(const int64_t *)dist_future_output(f, 1)->data, n * (n - 1) / 2);
    CU_ASSERT_EQUAL(dist_future_parts(f), (int)n);
    dist_future_free(f);
  }
}

static void test_batch_mean(void) {
  double X[14];
  int64_t B = 7, sh[2] = {7, 2};
  for (int i = 0; i < 14; i++) X[i] = i * 0.5 - 2 + R;
  dist_tensor a = dist_tensor_host(X, DIST_F64, 2, sh);
  dist_rpc_partitioner p = dist_rpc_batch_partitioner();
  dist_rpc_reducer r = {DIST_RPC_REDUCE_MEAN, NULL, NULL};
  dist_future *f = NULL;
  OK(dist_rpc_remote_sync("mean", &a, 1, NULL, 0, &p, &r, &f));
  int n = B < W ? (int)B : W;
  double want = 0;
  for (int k = 0; k < n; k++) {
    int64_t lo, hi;
    chunk(B, k, &lo, &hi);
    double s = 0;
    for (int64_t i = lo * 2; i < hi * 2; i++) s += X[i];
    want += s / (double)((hi - lo) * 2);
  }
  want /= n;
  CU_ASSERT_DOUBLE_EQUAL(((const double *)dist_future_output(f, 0)->data)[0], want, 1e-12);
  dist_future_free(f);
}

/* dim(1, exclusive): one task per column, on worker j % W; keepdim keeps a dim of 1. */
static void test_exclusive(void) {
  double X[15];
  int64_t sh[2] = {3, 5};
  for (int i = 0; i < 15; i++) X[i] = i * i - 3.0 * R;
  dist_tensor a = dist_tensor_host(X, DIST_F64, 2, sh);
  for (int keep = 0; keep < 2; keep++) {
    dist_rpc_partitioner p = dist_rpc_dim_partitioner(1, 1, keep);
    dist_future *f = NULL;
    OK(dist_rpc_remote_sync("colsum", &a, 1, NULL, 0, &p, NULL, &f));
    CU_ASSERT_EQUAL_FATAL(dist_future_parts(f), 5);
    CU_ASSERT_EQUAL(dist_future_count(f), 0); /* no reducer: the parts */
    for (int j = 0; j < 5; j++) {
      dist_future *part = dist_future_part(f, j);
      double want = X[j] + X[5 + j] + X[10 + j];
      CU_ASSERT_EQUAL(((const double *)dist_future_output(part, 0)->data)[0], want);
      const int32_t *info = dist_future_output(part, 1)->data;
      CU_ASSERT_EQUAL(info[0], j % W);
      CU_ASSERT_EQUAL(info[1], keep ? 2 : 1);
      CU_ASSERT_EQUAL(info[2], 3);
    }
    dist_future_free(f);
  }
}

static dist_status reverse_partitioner(int size, const dist_tensor *args, int nargs, dist_rpc_task *tasks,
                                       int max_tasks, int *ntasks, void *user) {
  (void)user;
  if (max_tasks < size) return DIST_ERR_INVALID_ARGUMENT;
  for (int k = 0; k < size; k++) {
    tasks[k].worker = size - 1 - k;
    tasks[k].nargs = nargs;
    memcpy(tasks[k].args, args, sizeof *args * (size_t)nargs);
  }
  *ntasks = size;
  return DIST_SUCCESS;
}

static dist_status max_reducer(dist_future *const *parts, int n, dist_rpc_outputs *out, void *user) {
  (void)user;
  int64_t one = 1;
  dist_tensor t;
  TRY(dist_rpc_output(out, DIST_I64, 1, &one, &t));
  int64_t m = -1;
  for (int k = 0; k < n; k++) {
    int64_t v = *(const int64_t *)dist_future_output(parts[k], 1)->data;
    if (v > m) m = v;
  }
  *(int64_t *)t.data = m;
  return DIST_SUCCESS;
}

static void test_replicated_and_user(void) {
  double X[10], w[2] = {0.5, -2};
  int64_t sh[2] = {5, 2}, two = 2;
  for (int i = 0; i < 10; i++) X[i] = i + R;
  dist_tensor a[2] = {dist_tensor_host(X, DIST_F64, 2, sh), dist_tensor_host(w, DIST_F64, 1, &two)};
  dist_rpc_partitioner p = dist_rpc_batch_partitioner();
  p.replicated = 1u << 1;
  dist_rpc_reducer sum = {DIST_RPC_REDUCE_SUM, NULL, NULL};
  dist_future *f = NULL;
  OK(dist_rpc_remote_sync("wsum", a, 2, NULL, 0, &p, &sum, &f));
  double want = 0;
  for (int i = 0; i < 5; i++) want += X[2 * i] * w[0] + X[2 * i + 1] * w[1];
  CU_ASSERT_DOUBLE_EQUAL(((const double *)dist_future_output(f, 0)->data)[0], want, 1e-12);
  dist_future_free(f);
  /* w not replicated: it has extent 2 along dim 0, X 5 */
  p.replicated = 0;
  CU_ASSERT_EQUAL(dist_rpc_remote_async("wsum", a, 2, NULL, 0, &p, &sum, &f), DIST_ERR_INVALID_ARGUMENT);
  /* user partitioner (every worker, reversed) and user reducer (max of the ranks) */
  dist_rpc_partitioner up = dist_rpc_user_partitioner(reverse_partitioner, NULL);
  dist_rpc_reducer ur = {DIST_RPC_REDUCE_USER, max_reducer, NULL};
  OK(dist_rpc_remote_sync("stats", a, 1, NULL, 0, &up, &ur, &f));
  CU_ASSERT_EQUAL(*(const int64_t *)dist_future_output(f, 0)->data, W - 1);
  CU_ASSERT_EQUAL(*(const int64_t *)dist_future_output(dist_future_part(f, 0), 1)->data, W - 1);
  dist_future_free(f);
  /* one worker */
  dist_rpc_partitioner one = dist_rpc_worker_partitioner((R + 1) % W);
  OK(dist_rpc_remote_sync("stats", a, 1, NULL, 0, &one, &sum, &f));
  CU_ASSERT_EQUAL(*(const int64_t *)dist_future_output(f, 1)->data, (R + 1) % W);
  dist_future_free(f);
  /* a failed part fails the whole call, naming the worker */
  dist_rpc_partitioner batch = dist_rpc_batch_partitioner();
  CU_ASSERT_EQUAL(dist_rpc_remote_sync("fail", a, 1, NULL, 0, &batch, &sum, &f), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "worker"));
  dist_future_free(f);
}

static void test_parallelize(void) {
  double X[8];
  int64_t sh[1] = {8};
  for (int i = 0; i < 8; i++) X[i] = 1.5 * i - R;
  dist_tensor a = dist_tensor_host(X, DIST_F64, 1, sh);
  dist_rpc_partitioner p = dist_rpc_batch_partitioner();
  dist_rpc_reducer r = {DIST_RPC_REDUCE_SUM, NULL, NULL};
  dist_rpc_parallel *par = NULL;
  OK(dist_rpc_parallelize("stats", &p, &r, &par));
  dist_future *f = NULL;
  OK(dist_rpc_parallel_call(par, &a, 1, NULL, 0, &f));
  double want = 0;
  for (int i = 0; i < 8; i++) want += X[i];
  CU_ASSERT_DOUBLE_EQUAL(((const double *)dist_future_output(f, 0)->data)[0], want, 1e-12);
  dist_future_free(f);
  dist_rpc_parallel_free(par);
}

/* ---- worker selection and world info ------------------------------------------------- */

static int runs;
static void bump(void *u) { runs += *(int *)u; }

static void test_world(void) {
  dist_rpc_world_info w;
  OK(dist_rpc_world_info_get(&w));
  CU_ASSERT_EQUAL(w.rank, R);
  CU_ASSERT_EQUAL(w.world_size, W);
  CU_ASSERT(w.local_rank >= 0 && w.local_rank < w.local_world_size && w.local_world_size <= W);
  char name[24];
  snprintf(name, sizeof name, "worker%d", R);
  CU_ASSERT_STRING_EQUAL(w.worker, name);
  int one = 1, ran = -1;
  runs = 0;
  int list[2] = {0, W - 1};
  OK(dist_rpc_on_rank(list, 2, bump, &one, &ran));
  CU_ASSERT_EQUAL(ran, R == 0 || R == W - 1);
  OK(dist_rpc_not_on_rank(list, 2, bump, &one, &ran));
  CU_ASSERT_EQUAL(ran, !(R == 0 || R == W - 1));
  CU_ASSERT_EQUAL(runs, 1); /* exactly one of the two */
  OK(dist_rpc_rank_zero_only(bump, &one, &ran));
  CU_ASSERT_EQUAL(ran, R == 0);
  OK(dist_rpc_rank_non_zero_only(bump, &one, &ran));
  CU_ASSERT_EQUAL(ran, R != 0);
  CU_ASSERT_EQUAL(runs, 2);
  int badlist[1] = {W};
  CU_ASSERT_EQUAL(dist_rpc_on_rank(badlist, 1, bump, &one, &ran), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_rpc_on_rank(list, 2, NULL, &one, &ran), DIST_ERR_INVALID_ARGUMENT);
  OK(dist_rpc_barrier());
}

/* ---- distributed autograd against the serial VJP ---------------------------------------- */

static void test_autograd(void) {
  double A1[12], x[4], A2[6], g[2] = {1, -2};
  int64_t s1[2] = {3, 4}, s2[2] = {2, 3}, four = 4, two = 2;
  for (int i = 0; i < 12; i++) A1[i] = 0.25 * i - 1 + R;
  for (int i = 0; i < 4; i++) x[i] = 1.0 / (i + 1);
  for (int i = 0; i < 6; i++) A2[i] = 2 - 0.5 * i;
  dist_tensor tA1 = dist_tensor_host(A1, DIST_F64, 2, s1), tx = dist_tensor_host(x, DIST_F64, 1, &four),
              tA2 = dist_tensor_host(A2, DIST_F64, 2, s2);
  dist_autograd_ctx *ctx = NULL;
  OK(dist_autograd_begin(&ctx));
  dist_future *f1 = NULL, *f2 = NULL, *f3 = NULL;
  dist_tensor in1[2] = {tA1, tx};
  OK(dist_rpc_call_sync((R + 1) % W, "affine", in1, 2, NULL, 0, &f1));
  dist_tensor in2[2] = {tA2, *dist_future_output(f1, 0)};
  OK(dist_rpc_call_sync((R + 2) % W, "affine", in2, 2, NULL, 0, &f2));
  double s = 1;
  OK(dist_rpc_call_sync(R, "scale", &tx, 1, &s, sizeof s, &f3)); /* no VJP: not recorded */
  OK(dist_autograd_end(ctx));
  dist_tensor root = *dist_future_output(f2, 0), groot = dist_tensor_host(g, DIST_F64, 1, &two);
  OK(dist_autograd_backward(ctx, &root, &groot, 1));
  /* serial: y1 = A1 x; gA2 = g y1^T; gy1 = A2^T g; gA1 = gy1 x^T; gx = A1^T gy1 */
  double y1[3] = {0}, gy1[3] = {0}, gA1[12], gA2[6], gx[4] = {0};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) y1[i] += A1[i * 4 + j] * x[j];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) gA2[i * 3 + j] = g[i] * y1[j], gy1[j] += A2[i * 3 + j] * g[i];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) gA1[i * 4 + j] = gy1[i] * x[j], gx[j] += A1[i * 4 + j] * gy1[i];
  double got1[12], got2[6], gotx[4];
  dist_tensor o1 = dist_tensor_host(got1, DIST_F64, 2, s1), o2 = dist_tensor_host(got2, DIST_F64, 2, s2),
              ox = dist_tensor_host(gotx, DIST_F64, 1, &four);
  OK(dist_autograd_grad(ctx, &tA1, &o1));
  OK(dist_autograd_grad(ctx, &tA2, &o2));
  OK(dist_autograd_grad(ctx, &tx, &ox));
  for (int i = 0; i < 12; i++) CU_ASSERT_DOUBLE_EQUAL(got1[i], gA1[i], 1e-12);
  for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(got2[i], gA2[i], 1e-12);
  for (int i = 0; i < 4; i++) CU_ASSERT_DOUBLE_EQUAL(gotx[i], gx[i], 1e-12);
  /* a wrong-shaped output is refused */
  CU_ASSERT_EQUAL(dist_autograd_grad(ctx, &tA1, &ox), DIST_ERR_INVALID_ARGUMENT);
  dist_autograd_free(ctx);
  dist_future_free(f1);
  dist_future_free(f2);
  dist_future_free(f3);
}

/* ---- shutdown (last) ---------------------------------------------------------------------- */

static void test_shutdown(void) {
  OK(dist_rpc_shutdown());
  CU_ASSERT(!dist_rpc_is_initialized());
  double x = 1, s = 1;
  int64_t n = 1;
  dist_tensor a = vec(&x, &n);
  dist_future *f = NULL;
  CU_ASSERT_EQUAL(dist_rpc_call_async(0, "scale", &a, 1, &s, sizeof s, &f), DIST_ERR_NOT_INITIALIZED);
  CU_ASSERT_EQUAL(dist_rpc_shutdown(), DIST_ERR_NOT_INITIALIZED);
  /* again: init after shutdown serves the same functions */
  OK(dist_rpc_init());
  CU_ASSERT_EQUAL(dist_rpc_init(), DIST_ERR_INVALID_ARGUMENT);
  OK(dist_rpc_call_sync((R + 1) % W, "scale", &a, 1, &s, sizeof s, &f));
  CU_ASSERT_EQUAL(((const double *)dist_future_output(f, 0)->data)[0], 1.0 + R);
  dist_future_free(f);
  /* Rank 0 still calls for 3 of DIST_TIMEOUT's while the others wait in
   * shutdown: they wait (pinging it), and nobody's call fails. */
  dist__rpc.timeout = 0.4;
  if (R == 0) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int calls = 0, bad = 0;
    do {
      bad += dist_rpc_call_sync(W - 1, "scale", &a, 1, &s, sizeof s, &f) != DIST_SUCCESS;
      dist_future_free(f);
      calls++;
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < 1.2);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(calls > 0);
  }
  OK(dist_rpc_shutdown());
}

/* Large buffers are kept for reuse, and when every place is taken a larger
 * one replaces the smallest kept: a program that moves on from 2 MiB calls to
 * 8 MiB ones reuses its 8 MiB buffers (before, a pool full of old sizes made
 * every larger call map and fault its buffers anew). Local. */
static void test_buffers_kept(void) {
  const size_t MiB = (size_t)1 << 20;
  dist__rpc_buf_drain();
  void *small[4];
  for (int i = 0; i < 4; i++) CU_ASSERT_PTR_NOT_NULL_FATAL(small[i] = dist__rpc_buf_get(2 * MiB));
  for (int i = 0; i < 4; i++) dist__rpc_buf_put(small[i]); /* all four places: 2 MiB */
  void *big = dist__rpc_buf_get(8 * MiB);
  CU_ASSERT_PTR_NOT_NULL_FATAL(big);
  CU_ASSERT_EQUAL(dist__rpc_buf_capacity(big), 8 * MiB); /* none kept fits */
  dist__rpc_buf_put(big);
  void *again = dist__rpc_buf_get(5 * MiB); /* the kept 8 MiB one (fits, at most twice too big) */
  CU_ASSERT_PTR_NOT_NULL_FATAL(again);
  CU_ASSERT_EQUAL(dist__rpc_buf_capacity(again), 8 * MiB);
  void *two = dist__rpc_buf_get(2 * MiB); /* the 2 MiB ones still kept beside it */
  CU_ASSERT_EQUAL(dist__rpc_buf_capacity(two), 2 * MiB);
  memset(again, 1, 5 * MiB); /* the whole of it is there */
  dist__rpc_buf_put(two);
  dist__rpc_buf_put(again);
  dist__rpc_buf_drain();
}

static CU_TestInfo call_tests[] = {{"every worker and oneself", test_every_worker},
                                   {"payloads 0 B to 64 MiB", test_payloads},
                                   {"nested calls", test_nested},
                                   {"calls from 4 threads", test_threads},
                                   {"futures", test_futures},
                                   {"a call chained in a then-callback", test_then_chain},
                                   {"bad input and remote failures", test_errors},
                                   {"malformed requests", test_malformed},
                                   {"stray small messages", test_stray_small},
                                   {"tiny calls", test_tiny_calls},
                                   {"registries that differ", test_registry_mismatch},
                                   {"large buffers kept, new sizes first", test_buffers_kept},
                                   CU_TEST_INFO_NULL};
static CU_TestInfo map_tests[] = {{"batch partitioner, sum reducer", test_batch_sum},
                                  {"batch partitioner, mean reducer", test_batch_mean},
                                  {"dim(1, exclusive), keepdim or not", test_exclusive},
                                  {"replicated arguments, user partitioner and reducer", test_replicated_and_user},
                                  {"parallelize", test_parallelize},
                                  CU_TEST_INFO_NULL};
static CU_TestInfo other_tests[] = {{"worker selection and world info", test_world},
                                    {"distributed backward", test_autograd},
                                    {"shutdown, calls after it, init again", test_shutdown},
                                    CU_TEST_INFO_NULL};
static CU_SuiteInfo suites[] = {{"calls", NULL, NULL, NULL, NULL, call_tests},
                                {"partitioners and reducers", NULL, NULL, NULL, NULL, map_tests},
                                {"selection, autograd, shutdown", NULL, NULL, NULL, NULL, other_tests},
                                CU_SUITE_INFO_NULL};

int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_rpc", suites, .rank = &R, .size = &W, .setup = setup}); }
