/* The collectives on CUDA device memory (run at 1, 2, 3 and 4 ranks).
 *
 * A representative subset of test_coll.c on cudaMalloc'd buffers: each case
 * runs the same call on host tensors through distmgr too, and both results
 * are compared with a serial reference computed here in double (rounded once
 * to the dtype) and with each other. Device results are stream-ordered on
 * dist_cuda_stream(), so that stream is synchronized before copying back.
 *
 * Exits 77 (automake's SKIP) with "SKIP: no CUDA device" when built without
 * CUDA (no HAVE_CUDA in config.h) or when some rank sees no device. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <mpi.h>
#include <stdio.h>

#include "cuda_skip.h"

#ifndef HAVE_CUDA

int main(void) { return cuda_skip_build("no CUDA device (built without CUDA)"); }

#else /* HAVE_CUDA */

#include <cuda_runtime.h>
#include <distmgr/cuda.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "coll_values.h" /* groups, dtypes, seeded values */

static int W, R, DEV;  /* world size and rank from MPI; my CUDA ordinal from the manager */
static uint64_t seq;   /* seed of the next check: the same sequence on every rank */

static grp groups[2]; /* the world and "pair" (size 2, or 1 at odd W) */
#define NGROUPS 2



/* Ranges keep every reduction of <= 4 ranks inside the dtype. */
static double gen(dist_dtype dt, uint64_t seed, int owner, int64_t k) {
  double u = unit(seed, owner, k);
  switch (dt) {
  case DIST_U8: return floor(u * 61);
  case DIST_I32: return floor(u * 2001) - 1000;
  case DIST_I64: return (floor(u * 2001) - 1000) * 1e9;
  default: return 4 * u - 2;
  }
}

static void fill(dist_dtype dt, void *p, int64_t n, uint64_t seed, int owner) {
  for (int64_t i = 0; i < n; i++) {
    cval v = {gen(dt, seed, owner, 2 * i), is_complex(dt) ? gen(dt, seed, owner, 2 * i + 1) : 0};
    store(dt, p, i, v);
  }
}

/* ---- host and device tensors ------------------------------------------------------- */

typedef struct {
  dist_tensor t;
  void *mem; /* owned */
  int64_t n;
} buf;

static int64_t numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* owner >= 0: owner's data for seed; owner < 0: a 0x5A pattern (an unwritten output cannot pass). */
static buf make(dist_dtype dt, int ndim, const int64_t *shape, uint64_t seed, int owner) {
  buf b;
  b.n = numel(ndim, shape);
  b.mem = malloc((size_t)b.n * DT_SIZE[dt] + 1);
  memset(b.mem, 0x5A, (size_t)b.n * DT_SIZE[dt] + 1);
  if (owner >= 0) fill(dt, b.mem, b.n, seed, owner);
  b.t = dist_tensor_host(b.n ? b.mem : NULL, dt, ndim, shape);
  return b;
}

static void assert_at(int ok, int line, const char *what) {
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "", CU_FALSE);
}

#define CUDA_OK(call) cuda_ok_((call), #call, __LINE__)
static int cuda_ok_(cudaError_t e, const char *text, int line) {
  if (e != cudaSuccess) fprintf(stderr, "[rank %d/%d] line %d: %s: %s\n", R, W, line, text, cudaGetErrorString(e));
  assert_at(e == cudaSuccess, line, text);
  return e == cudaSuccess;
}

/* A device copy of a host buffer: same dtype, shape and bytes. */
typedef struct {
  dist_tensor t;
  void *d;
  size_t nbytes;
} dbuf;

static dbuf upload(const buf *h) {
  dbuf x = {h->t, NULL, (size_t)h->n * DT_SIZE[h->t.dtype]};
  CUDA_OK(cudaMalloc(&x.d, x.nbytes + 1));
  CUDA_OK(cudaMemcpy(x.d, h->mem, x.nbytes + 1, cudaMemcpyHostToDevice));
  x.t = dist_tensor_cuda(h->n ? x.d : NULL, h->t.dtype, DEV, h->t.ndim, h->t.shape);
  return x;
}

/* The device bytes, once the work enqueued on distmgr's stream is done (caller frees). */
static void *download(const dbuf *x) {
  void *h = calloc(x->nbytes + 1, 1);
  CUDA_OK(cudaStreamSynchronize(dist_cuda_stream()));
  CUDA_OK(cudaMemcpy(h, x->d, x->nbytes, cudaMemcpyDeviceToHost));
  return h;
}

/* 3-D tensors {2, 3, 2} with a chosen extent along the split dim. */
static const int64_t BASE[3] = {2, 3, 2};
static void shape3(int dim, int64_t ext, int64_t s[3]) {
  memcpy(s, BASE, sizeof BASE);
  s[dim] = ext;
}
static int64_t outer3(int dim) { return dim == 0 ? 1 : dim == 1 ? BASE[0] : BASE[0] * BASE[1]; }
static int64_t inner3(int dim) { return dim == 2 ? 1 : dim == 1 ? BASE[2] : BASE[1] * BASE[2]; }

static void copy_slices(void *dst, int64_t de, int64_t to, const void *src, int64_t se, int64_t from, int64_t n,
                        int64_t outer, size_t row) {
  for (int64_t o = 0; o < outer && n > 0; o++)
    memcpy((char *)dst + (size_t)(o * de + to) * row, (const char *)src + (size_t)(o * se + from) * row,
           (size_t)n * row);
}

/* ---- checks ------------------------------------------------------------------------- */

#define CALL_OK(call, what) call_ok_((call), (what), __LINE__)
static int call_ok_(dist_status s, const char *what, int line) {
  if (s != DIST_SUCCESS)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s: %s)\n", R, W, line, what, (int)s,
            dist_status_string(s), dist_last_error());
  assert_at(s == DIST_SUCCESS, line, what);
  return s == DIST_SUCCESS;
}

static double tolerance(dist_dtype dt) {
  switch (dt) {
  case DIST_BF16: return 1e-2;
  case DIST_F16: return 1e-3;
  case DIST_F32:
  case DIST_C64: return 1e-5;
  case DIST_F64:
  case DIST_C128: return 1e-12;
  default: return 0;
  }
}

static int close_to(dist_dtype dt, double got, double want) {
  if (is_int(dt)) return got == want;
  return fabs(got - want) <= tolerance(dt) * fmax(1.0, fabs(want));
}

/* got (n elements of dt) against want, given as cvals or as n elements of dt. */
static void expect_close_(dist_dtype dt, const void *got, const cval *want, const void *want_raw, int64_t n,
                          const char *what, int line) {
  int64_t bad = -1;
  cval g = {0, 0}, w = {0, 0};
  for (int64_t i = 0; i < n && bad < 0; i++) {
    g = load(dt, got, i);
    w = want ? want[i] : load(dt, want_raw, i);
    if (!close_to(dt, g.re, w.re) || !close_to(dt, g.im, w.im)) bad = i;
  }
  if (bad >= 0)
    fprintf(stderr, "[rank %d/%d] line %d: %s: element %lld of %lld is (%.9g, %.9g), expected (%.9g, %.9g)\n", R, W,
            line, what, (long long)bad, (long long)n, g.re, g.im, w.re, w.im);
  assert_at(bad < 0, line, what);
}
#define EXPECT_CLOSE(dt, got, want, n, what) expect_close_(dt, got, want, NULL, n, what, __LINE__)
#define EXPECT_SAME(dt, got, host, n, what) expect_close_(dt, got, NULL, host, n, what, __LINE__)

#define EXPECT_BYTES(got, want, nbytes, what) expect_bytes_(got, want, nbytes, what, __LINE__)
static void expect_bytes_(const void *got, const void *want, size_t nbytes, const char *what, int line) {
  size_t i = 0;
  while (i < nbytes && ((const unsigned char *)got)[i] == ((const unsigned char *)want)[i]) i++;
  if (i < nbytes)
    fprintf(stderr, "[rank %d/%d] line %d: %s: first differing byte %zu of %zu\n", R, W, line, what, i, nbytes);
  assert_at(i == nbytes, line, what);
}

/* ---- serial references ------------------------------------------------------------- */

static cval combine(dist_reduce_op op, cval a, cval b) {
  cval c = a;
  if (op == DIST_SUM || op == DIST_AVG) c.re = a.re + b.re, c.im = a.im + b.im;
  if (op == DIST_MAX) c.re = fmax(a.re, b.re);
  return c;
}

/* The group's reduction (sum, avg or max) of every member's input, in double, rounded once to dt. */
static void ref_reduce(const grp *g, dist_dtype dt, dist_reduce_op op, int64_t n, uint64_t seed, cval *want) {
  void *tmp = malloc((size_t)n * DT_SIZE[dt] + 1);
  for (int r = 0; r < g->size; r++) {
    fill(dt, tmp, n, seed, g->world[r]);
    for (int64_t i = 0; i < n; i++) want[i] = r ? combine(op, want[i], load(dt, tmp, i)) : load(dt, tmp, i);
  }
  for (int64_t i = 0; i < n; i++) {
    if (op == DIST_AVG) {
      want[i].re = is_int(dt) ? trunc(want[i].re / g->size) : want[i].re / g->size;
      want[i].im /= g->size;
    }
    store(dt, tmp, i, want[i]);
    want[i] = load(dt, tmp, i);
  }
  free(tmp);
}

static int64_t a2a_count(int k, int a, int b) { return (a * 3 + b * 5 + k) % 4; }

/* ---- tests ------------------------------------------------------------------------- */

static void check_all_reduce(const grp *g, dist_dtype dt, dist_reduce_op op, int nonblocking) {
  uint64_t seed = ++seq;
  int64_t shape[2] = {3, 5};
  char what[160];
  snprintf(what, sizeof what, "%s %s %s on the device over %s", nonblocking ? "all_reduce_start" : "all_reduce",
           DT_NAME[dt], OP_NAME[op], gname(g));
  buf h = make(dt, 2, shape, seed, g->world[g->rank]);
  dbuf d = upload(&h);
  cval *want = calloc((size_t)h.n, sizeof *want);
  ref_reduce(g, dt, op, h.n, seed, want);
  int ok;
  if (nonblocking) {
    dist_request *req = NULL;
    ok = CALL_OK(dist_all_reduce_start(g->name, &d.t, op, &req), what);
    if (ok) ok = CALL_OK(dist_request_wait(req), "wait");
    if (req) CALL_OK(dist_request_free(req), "free");
  } else {
    ok = CALL_OK(dist_all_reduce(g->name, &d.t, op), what);
  }
  int host_ok = CALL_OK(dist_all_reduce(g->name, &h.t, op), "the same all_reduce on the host");
  void *got = download(&d);
  if (ok) EXPECT_CLOSE(dt, got, want, h.n, what);
  if (ok && host_ok) EXPECT_SAME(dt, got, h.mem, h.n, "device result equals host result");
  free(got);
  free(want);
  free(h.mem);
  cudaFree(d.d);
}

static void test_all_reduce(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_C64};
  const dist_reduce_op ops[] = {DIST_SUM, DIST_AVG, DIST_MAX};
  for (int gi = 0; gi < NGROUPS; gi++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        if (!(is_complex(dts[i]) && ops[j] == DIST_MAX)) check_all_reduce(&groups[gi], dts[i], ops[j], 0);
}

static void test_nonblocking(void) {
  for (int gi = 0; gi < NGROUPS; gi++) check_all_reduce(&groups[gi], DIST_F32, DIST_SUM, 1);
  check_all_reduce(&groups[0], DIST_BF16, DIST_AVG, 1);
}

/* all_gather_v along the middle dim; rank r holds r+1 slices, or 0 / 2 alternately. */
static void check_all_gather_v(const grp *g, dist_dtype dt, int zeros) {
  uint64_t seed = ++seq;
  int64_t sizes[64], total = 0, off = 0, shp[3];
  for (int r = 0; r < g->size; r++) total += sizes[r] = zeros ? (r % 2 ? 0 : 2) : r + 1;
  char what[160];
  snprintf(what, sizeof what, "all_gather_v %s dim 1 %s sizes on the device over %s", DT_NAME[dt],
           zeros ? "zero" : "uneven", gname(g));
  shape3(1, sizes[g->rank], shp);
  buf in = make(dt, 3, shp, seed, g->world[g->rank]);
  shape3(1, total, shp);
  buf out = make(dt, 3, shp, 0, -1);
  dbuf din = upload(&in), dout = upload(&out);
  void *want = calloc((size_t)out.n * DT_SIZE[dt] + 1, 1);
  for (int r = 0; r < g->size; r++) {
    shape3(1, sizes[r], shp);
    buf src = make(dt, 3, shp, seed, g->world[r]);
    copy_slices(want, total, off, src.mem, sizes[r], 0, sizes[r], outer3(1), (size_t)inner3(1) * DT_SIZE[dt]);
    off += sizes[r];
    free(src.mem);
  }
  int ok = CALL_OK(dist_all_gather_v(g->name, &din.t, &dout.t, 1, sizes), what);
  int host_ok = CALL_OK(dist_all_gather_v(g->name, &in.t, &out.t, 1, sizes), "the same all_gather_v on the host");
  void *got = download(&dout);
  if (ok) EXPECT_BYTES(got, want, dout.nbytes, what);
  if (ok && host_ok) EXPECT_BYTES(got, out.mem, dout.nbytes, "device result equals host result");
  free(got), free(want), free(in.mem), free(out.mem);
  cudaFree(din.d), cudaFree(dout.d);
}

static void test_all_gather_v(void) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    check_all_gather_v(&groups[gi], DIST_F32, 0);
    check_all_gather_v(&groups[gi], DIST_BF16, 1);
  }
}

/* all_to_all_v along the middle dim; a2a_count(k, a, b) slices from a to b (zeros included). */
static void check_all_to_all_v(const grp *g, dist_dtype dt, int k) {
  uint64_t seed = ++seq;
  int me = g->rank;
  int64_t send[64], recv[64], in_ext = 0, out_ext = 0, off = 0, shp[3];
  for (int r = 0; r < g->size; r++) {
    send[r] = a2a_count(k, me, r), recv[r] = a2a_count(k, r, me);
    in_ext += send[r], out_ext += recv[r];
  }
  char what[160];
  snprintf(what, sizeof what, "all_to_all_v %s dim 1 pattern %d on the device over %s", DT_NAME[dt], k, gname(g));
  shape3(1, in_ext, shp);
  buf in = make(dt, 3, shp, seed, g->world[me]);
  shape3(1, out_ext, shp);
  buf out = make(dt, 3, shp, 0, -1);
  dbuf din = upload(&in), dout = upload(&out);
  void *want = calloc((size_t)out.n * DT_SIZE[dt] + 1, 1);
  for (int a = 0; a < g->size; a++) { /* from each rank a, in order, the slices it sends me */
    int64_t ext = 0, from = 0;
    for (int b = 0; b < g->size; b++) from += b < me ? a2a_count(k, a, b) : 0, ext += a2a_count(k, a, b);
    shape3(1, ext, shp);
    buf src = make(dt, 3, shp, seed, g->world[a]);
    copy_slices(want, out_ext, off, src.mem, ext, from, recv[a], outer3(1), (size_t)inner3(1) * DT_SIZE[dt]);
    off += recv[a];
    free(src.mem);
  }
  int ok = CALL_OK(dist_all_to_all_v(g->name, &din.t, &dout.t, 1, send, recv), what);
  int host_ok = CALL_OK(dist_all_to_all_v(g->name, &in.t, &out.t, 1, send, recv), "the same all_to_all_v on the host");
  void *got = download(&dout);
  if (ok) EXPECT_BYTES(got, want, dout.nbytes, what);
  if (ok && host_ok) EXPECT_BYTES(got, out.mem, dout.nbytes, "device result equals host result");
  free(got), free(want), free(in.mem), free(out.mem);
  cudaFree(din.d), cudaFree(dout.d);
}

static void test_all_to_all_v(void) {
  for (int gi = 0; gi < NGROUPS; gi++)
    for (int k = 0; k < 3; k++) check_all_to_all_v(&groups[gi], k == 1 ? DIST_C64 : DIST_F32, k);
}

/* reduce_scatter_v (sum) along the middle dim, rank r keeping r+1 slices. */
static void check_reduce_scatter_v(const grp *g, dist_dtype dt, dist_reduce_op op) {
  uint64_t seed = ++seq;
  int64_t sizes[64], total = 0, off = 0, shp[3];
  for (int r = 0; r < g->size; r++) total += sizes[r] = r + 1, off += r < g->rank ? r + 1 : 0;
  char what[160];
  snprintf(what, sizeof what, "reduce_scatter_v %s %s dim 1 on the device over %s", DT_NAME[dt], OP_NAME[op], gname(g));
  shape3(1, total, shp);
  buf in = make(dt, 3, shp, seed, g->world[g->rank]);
  shape3(1, sizes[g->rank], shp);
  buf out = make(dt, 3, shp, 0, -1);
  dbuf din = upload(&in), dout = upload(&out);
  cval *full = calloc((size_t)in.n, sizeof *full), *want = calloc((size_t)out.n, sizeof *want);
  ref_reduce(g, dt, op, in.n, seed, full);
  copy_slices(want, sizes[g->rank], 0, full, total, off, sizes[g->rank], outer3(1), (size_t)inner3(1) * sizeof(cval));
  int ok = CALL_OK(dist_reduce_scatter_v(g->name, &din.t, &dout.t, 1, sizes, op), what);
  int host_ok = CALL_OK(dist_reduce_scatter_v(g->name, &in.t, &out.t, 1, sizes, op), "the same on the host");
  void *got = download(&dout);
  if (ok) EXPECT_CLOSE(dt, got, want, out.n, what);
  if (ok && host_ok) EXPECT_SAME(dt, got, out.mem, out.n, "device result equals host result");
  free(got), free(full), free(want), free(in.mem), free(out.mem);
  cudaFree(din.d), cudaFree(dout.d);
}

static void test_reduce_scatter_v(void) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    check_reduce_scatter_v(&groups[gi], DIST_F32, DIST_SUM);
    check_reduce_scatter_v(&groups[gi], DIST_BF16, DIST_MAX);
  }
}

static void test_broadcast(void) {
  int64_t shape[2] = {4, 3};
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    for (int root = 0; root < g->size; root += g->size > 1 ? g->size - 1 : 1) {
      uint64_t seed = ++seq;
      char what[160];
      snprintf(what, sizeof what, "broadcast bf16 root %d on the device over %s", root, gname(g));
      buf h = make(DIST_BF16, 2, shape, seed, g->world[g->rank]), want = make(DIST_BF16, 2, shape, seed, g->world[root]);
      dbuf d = upload(&h);
      int ok = CALL_OK(dist_broadcast(g->name, &d.t, root), what);
      int host_ok = CALL_OK(dist_broadcast(g->name, &h.t, root), "the same broadcast on the host");
      void *got = download(&d);
      if (ok) EXPECT_BYTES(got, want.mem, d.nbytes, what);
      if (ok && host_ok) EXPECT_BYTES(got, h.mem, d.nbytes, "device result equals host result");
      free(got), free(h.mem), free(want.mem);
      cudaFree(d.d);
    }
  }
}

/* all_reduce_fused (sum) over f32, bf16, f64, i32, u8 and c64 device tensors. */
static void test_fused(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_F64, DIST_I32, DIST_U8, DIST_C64, DIST_BF16};
  const int64_t lens[] = {7, 5, 3, 4, 6, 2, 9};
  enum { N = 7 };
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    buf h[N];
    dbuf d[N];
    dist_tensor dt[N], ht[N];
    uint64_t seeds[N];
    for (int i = 0; i < N; i++) {
      seeds[i] = ++seq;
      h[i] = make(dts[i], 1, &lens[i], seeds[i], g->world[g->rank]);
      d[i] = upload(&h[i]);
      dt[i] = d[i].t, ht[i] = h[i].t;
    }
    char what[160];
    snprintf(what, sizeof what, "all_reduce_fused sum of %d device tensors over %s", N, gname(g));
    int ok = CALL_OK(dist_all_reduce_fused(g->name, dt, N, DIST_SUM), what);
    int host_ok = CALL_OK(dist_all_reduce_fused(g->name, ht, N, DIST_SUM), "the same on the host");
    for (int i = 0; i < N; i++) {
      char w2[200];
      snprintf(w2, sizeof w2, "%s: tensor %d (%s)", what, i, DT_NAME[dts[i]]);
      cval *want = calloc((size_t)h[i].n, sizeof *want);
      ref_reduce(g, dts[i], DIST_SUM, h[i].n, seeds[i], want);
      void *got = download(&d[i]);
      if (ok) EXPECT_CLOSE(dts[i], got, want, h[i].n, w2);
      if (ok && host_ok) EXPECT_SAME(dts[i], got, h[i].mem, h[i].n, "device result equals host result");
      free(got), free(want), free(h[i].mem);
      cudaFree(d[i].d);
    }
  }
}

static void test_device(void) {
  dist_device dev;
  ASSERT_OK(dist_manager_device(&dev));
  CU_ASSERT_EQUAL(dev.kind, DIST_DEVICE_CUDA); /* a device is visible: the manager must pick it */
  int current = -1;
  CUDA_OK(cudaGetDevice(&current));
  CU_ASSERT_EQUAL(current, DEV);
}

/* Does some pair of ranks of group g drive one GPU? From the devices' UUIDs,
 * gathered here over MPI (independently of the manager's own table). */
static int group_shares_gpu(const grp *g) {
  struct cudaDeviceProp p;
  CUDA_OK(cudaGetDeviceProperties(&p, DEV));
  char *all = malloc(sizeof p.uuid.bytes * (size_t)W);
  MPI_Allgather(p.uuid.bytes, (int)sizeof p.uuid.bytes, MPI_BYTE, all, (int)sizeof p.uuid.bytes, MPI_BYTE,
                MPI_COMM_WORLD);
  int shared = 0;
  for (int i = 0; i < g->size; i++)
    for (int j = i + 1; j < g->size; j++)
      shared |= !memcmp(all + g->world[i] * sizeof p.uuid.bytes, all + g->world[j] * sizeof p.uuid.bytes,
                        sizeof p.uuid.bytes);
  free(all);
  return shared;
}

/* The engine of each group's device collectives: NCCL unless the group has
 * two ranks on one GPU (NCCL refuses them: staged, or an error when NCCL is
 * forced) or DIST_CUDA_BACKEND=staged. The collective tests then run on it. */
static void test_backend_choice(void) {
  const char *env = getenv("DIST_CUDA_BACKEND");
  for (int k = 0; k < NGROUPS; k++) {
    int shared = group_shares_gpu(&groups[k]);
    const char *name = NULL;
    dist_status s = dist_coll_backend(groups[k].name, DIST_MEM_CUDA, &name);
    if (env && !strcmp(env, "nccl") && shared) {
      CU_ASSERT_EQUAL(s, DIST_ERR_UNSUPPORTED);
      CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "drive the same GPU"));
      continue;
    }
    ASSERT_OK(s);
#ifdef HAVE_NCCL
    const char *want = shared || (env && !strcmp(env, "staged")) ? "staged" : "nccl";
#else
    const char *want = "staged";
#endif
    CU_ASSERT_PTR_NOT_NULL_FATAL(name);
    CU_ASSERT_STRING_EQUAL(name, want);
    if (R == 0) printf("  (group '%s' of %d: device collectives on %s)\n", gname(&groups[k]),
                       groups[k].size, name);
  }
  const char *host = NULL;
  ASSERT_OK(dist_coll_backend(NULL, DIST_MEM_HOST, &host));
  CU_ASSERT_STRING_EQUAL(host, "mpi");
  CU_ASSERT_EQUAL(dist_coll_backend("no such group", DIST_MEM_CUDA, &host), DIST_ERR_UNKNOWN_GROUP);
  CU_ASSERT_EQUAL(dist_coll_backend(NULL, (dist_memory)7, &host), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_coll_backend(NULL, DIST_MEM_CUDA, NULL), DIST_ERR_INVALID_ARGUMENT);
}

static CU_TestInfo cuda_tests[] = {
    {"device selection", test_device},
    {"backend choice (GPUs shared by ranks go staged)", test_backend_choice},
    {"all_reduce sum/avg/max f32 bf16 c64", test_all_reduce},
    {"all_reduce_start + wait", test_nonblocking},
    {"all_gather_v middle dim", test_all_gather_v},
    {"all_to_all_v middle dim", test_all_to_all_v},
    {"reduce_scatter_v", test_reduce_scatter_v},
    {"broadcast", test_broadcast},
    {"all_reduce_fused mixed dtypes", test_fused},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"cuda collectives", NULL, NULL, NULL, NULL, cuda_tests}, CU_SUITE_INFO_NULL};


int main(void) {
  dist_status s = dist_manager_initialize();
  if (s != DIST_SUCCESS) {
    fprintf(stderr, "initialize: %s (%s)\n", dist_status_string(s), dist_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &R);
  if (cuda_skip_everywhere(R)) {
    dist_manager_finalize();
    return 77;
  }
  dist_device dev = {DIST_DEVICE_CPU, 0};
  dist_manager_device(&dev);
  DEV = dev.kind == DIST_DEVICE_CUDA ? dev.index : 0; /* test_device flags a CPU choice */
  int failed = 0;
  if (cudaSetDevice(DEV) != cudaSuccess) {
    fprintf(stderr, "[rank %d/%d] cudaSetDevice(%d) failed\n", R, W, DEV);
    failed++;
  }
  if (dist_group_create_subgroup("pair", W % 2 == 0 ? 2 : 1, NULL) != DIST_SUCCESS) {
    fprintf(stderr, "create pair: %s\n", dist_last_error());
    failed++;
  }
  failed += group_info(NULL, &groups[0]) + group_info("pair", &groups[1]);
  int any = 0; /* run the collectives on every rank or on none */
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  char tag[64];
  snprintf(tag, sizeof tag, "test_coll_cuda[rank %d/%d]", R, W);
  if (!any) failed += cunit_run(suites, tag, R != 0);
  if (dist_manager_finalize() != DIST_SUCCESS) failed++;
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (R == 0) printf("test_coll_cuda: %d failure(s) over %d rank(s)\n", total, W);
  return total != 0;
}

#endif /* HAVE_CUDA */
