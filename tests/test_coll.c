/* Distributed tests of the host-memory collectives of coll.h (run at 1, 2, 3
 * and 4 ranks; 3 gives uneven splits).
 *
 * Every rank can regenerate any rank's input from (seed, world rank), so each
 * result is compared with a serial reference computed here: reductions in
 * double, then averaged and rounded once to the dtype (as the library must do
 * for 16-bit floats, which it reduces in f32), compared with a per-dtype
 * tolerance; calls that only move data are compared byte for byte. Seeds come
 * from a counter that advances identically on every rank. */
#include <distmgr.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cunit_main.h"
#include "coll_values.h" /* groups, dtypes, seeded values */
#include "core/fault.h"       /* dist__fault_site: one rank sends a malformed check word */

static int W, R;    /* world size and rank from MPI itself */
static uint64_t seq; /* seed of the next check: the same sequence on every rank */

static grp groups[2]; /* the world (named NULL) and "pair" (size 2, or 1 at odd W) */
#define NGROUPS 2

/* Component k of owner's data. Ranges keep every reduction of <= 4 ranks
 * inside the dtype: products get small factors, u8 sums stay below 256, and
 * i64 values exceed 32 bits but their sums stay exact in double. */
static double gen(dist_dtype dt, uint64_t seed, int owner, int64_t k, dist_reduce_op op) {
  double u = unit(seed, owner, k);
  int prod = op == DIST_PROD;
  switch (dt) {
  case DIST_U8: return prod ? 1 + floor(u * 3) : floor(u * 61);
  case DIST_I32: return prod ? floor(u * 11) - 5 : floor(u * 2001) - 1000;
  case DIST_I64: return prod ? floor(u * 11) - 5 : (floor(u * 2001) - 1000) * 1e9;
  default: return prod ? (u < 0.5 ? -(0.5 + u) : u + 0.5) : 4 * u - 2;
  }
}

static void fill(dist_dtype dt, void *p, int64_t n, uint64_t seed, int owner, dist_reduce_op op) {
  for (int64_t i = 0; i < n; i++) {
    cval v = {gen(dt, seed, owner, 2 * i, op), is_complex(dt) ? gen(dt, seed, owner, 2 * i + 1, op) : 0};
    store(dt, p, i, v);
  }
}

/* ---- host tensors ---------------------------------------------------------- */

typedef struct {
  dist_tensor t;
  void *mem; /* owned; t.data is NULL when the tensor is empty (the API allows it) */
  int64_t n;
} buf;

static int64_t numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* owner >= 0: owner's data for (seed, op); owner < 0: a 0x5A pattern, so an
 * output the library never wrote cannot pass. */
static buf make(dist_dtype dt, int ndim, const int64_t *shape, uint64_t seed, int owner, dist_reduce_op op) {
  buf b;
  b.n = numel(ndim, shape);
  b.mem = malloc((size_t)b.n * DT_SIZE[dt] + 1);
  memset(b.mem, 0x5A, (size_t)b.n * DT_SIZE[dt] + 1);
  if (owner >= 0) fill(dt, b.mem, b.n, seed, owner, op);
  b.t = dist_tensor_host(b.n ? b.mem : NULL, dt, ndim, shape);
  return b;
}
#define make_out(dt, ndim, shape) make(dt, ndim, shape, 0, -1, DIST_SUM)

/* 3-D tensors {2, 3, 2} with a chosen extent along the split dim. */
static const int64_t BASE[3] = {2, 3, 2};
static void shape3(int dim, int64_t ext, int64_t s[3]) {
  memcpy(s, BASE, sizeof BASE);
  s[dim] = ext;
}
static int64_t outer3(int dim) {
  int64_t o = 1;
  for (int d = 0; d < dim; d++) o *= BASE[d];
  return o;
}
static int64_t inner3(int dim) {
  int64_t i = 1;
  for (int d = dim + 1; d < 3; d++) i *= BASE[d];
  return i;
}

/* Viewing tensors as [outer][extent][row bytes]: copy n slices from slice
 * `from` of src (extent se) to slice `to` of dst (extent de). */
static void copy_slices(void *dst, int64_t de, int64_t to, const void *src, int64_t se, int64_t from, int64_t n,
                        int64_t outer, size_t row) {
  for (int64_t o = 0; o < outer && n > 0; o++)
    memcpy((char *)dst + (size_t)(o * de + to) * row, (const char *)src + (size_t)(o * se + from) * row,
           (size_t)n * row);
}

/* ---- checks ----------------------------------------------------------------- */

static void assert_at(int ok, int line, const char *what) {
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "", CU_FALSE);
}

/* Assert success of a call described by `what`; print distmgr's message if not. */
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
  default: return 0; /* integers: exact */
  }
}

static int close_to(dist_dtype dt, double got, double want) {
  if (is_int(dt)) return got == want;
  return fabs(got - want) <= tolerance(dt) * fmax(1.0, fabs(want)); /* false for NaN */
}

/* got (n elements of dtype dt) against want (already rounded to dt). */
#define EXPECT_CLOSE(dt, got, want, n, what) expect_close_(dt, got, want, n, what, __LINE__)
static void expect_close_(dist_dtype dt, const void *got, const cval *want, int64_t n, const char *what, int line) {
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++) {
    cval g = load(dt, got, i);
    if (!close_to(dt, g.re, want[i].re) || !close_to(dt, g.im, want[i].im)) bad = i;
  }
  if (bad >= 0) {
    cval g = load(dt, got, bad);
    fprintf(stderr, "[rank %d/%d] line %d: %s: element %lld of %lld is (%.9g, %.9g), expected (%.9g, %.9g)\n", R, W,
            line, what, (long long)bad, (long long)n, g.re, g.im, want[bad].re, want[bad].im);
  }
  assert_at(bad < 0, line, what);
}

#define EXPECT_BYTES(got, want, nbytes, what) expect_bytes_(got, want, nbytes, what, __LINE__)
static void expect_bytes_(const void *got, const void *want, size_t nbytes, const char *what, int line) {
  size_t i = 0;
  while (i < nbytes && ((const unsigned char *)got)[i] == ((const unsigned char *)want)[i]) i++;
  if (i < nbytes)
    fprintf(stderr, "[rank %d/%d] line %d: %s: first differing byte %zu of %zu\n", R, W, line, what, i, nbytes);
  assert_at(i == nbytes, line, what);
}

/* ---- serial references ------------------------------------------------------- */

static cval combine(dist_reduce_op op, cval a, cval b) {
  cval c = a;
  switch (op) {
  case DIST_SUM:
  case DIST_AVG: c.re = a.re + b.re, c.im = a.im + b.im; break;
  case DIST_PROD: c.re = a.re * b.re - a.im * b.im, c.im = a.re * b.im + a.im * b.re; break;
  case DIST_MAX: c.re = fmax(a.re, b.re); break;
  case DIST_MIN: c.re = fmin(a.re, b.re); break;
  default: break;
  }
  return c;
}

/* The group's reduction of every member's n-element input for seed, in
 * double; avg divides (integers truncate toward zero); rounded once to dt. */
static void ref_reduce(const grp *g, dist_dtype dt, dist_reduce_op op, int64_t n, uint64_t seed, cval *want) {
  void *tmp = malloc((size_t)n * DT_SIZE[dt] + 1);
  for (int r = 0; r < g->size; r++) {
    fill(dt, tmp, n, seed, g->world[r], op);
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

/* Concatenation along dim of every member's 3-D input (rank r: sizes[r] slices). */
static void ref_concat(const grp *g, dist_dtype dt, int dim, const int64_t *sizes, uint64_t seed, void *want) {
  int64_t total = 0, off = 0, shp[3];
  for (int r = 0; r < g->size; r++) total += sizes[r];
  for (int r = 0; r < g->size; r++) {
    shape3(dim, sizes[r], shp);
    buf b = make(dt, 3, shp, seed, g->world[r], DIST_SUM);
    copy_slices(want, total, off, b.mem, sizes[r], 0, sizes[r], outer3(dim), (size_t)inner3(dim) * DT_SIZE[dt]);
    off += sizes[r];
    free(b.mem);
  }
}

/* Slices group rank a sends to rank b in all_to_all_v pattern k (zeros
 * included); k < 0: the equal chunks of 2 used for all_to_all. */
static int64_t a2a_count(int k, int a, int b) { return k < 0 ? 2 : (a * 3 + b * 5 + k) % 4; }

/* What I receive: from each rank a in order, the slices a sends me. */
static void ref_a2a(const grp *g, dist_dtype dt, int dim, int k, uint64_t seed, void *want) {
  int me = g->rank;
  int64_t out_ext = 0, off = 0, shp[3];
  for (int a = 0; a < g->size; a++) out_ext += a2a_count(k, a, me);
  for (int a = 0; a < g->size; a++) {
    int64_t ext = 0, from = 0;
    for (int b = 0; b < g->size; b++) {
      if (b < me) from += a2a_count(k, a, b);
      ext += a2a_count(k, a, b);
    }
    shape3(dim, ext, shp);
    buf src = make(dt, 3, shp, seed, g->world[a], DIST_SUM);
    copy_slices(want, out_ext, off, src.mem, ext, from, a2a_count(k, a, me), outer3(dim),
                (size_t)inner3(dim) * DT_SIZE[dt]);
    off += a2a_count(k, a, me);
    free(src.mem);
  }
}

/* Per-rank extents along the split dim, by group rank r: uneven, and with
 * empty contributions (pattern 4 is empty everywhere at one rank). */
static int64_t pattern(int p, int r) {
  switch (p) {
  case 0: return 2;
  case 1: return r + 1;
  case 2: return (r * 7) % 5 + 1;
  case 3: return r % 2 ? 0 : r + 1;
  default: return r == 0 ? 0 : 2;
  }
}

/* ---- reductions --------------------------------------------------------------- */

static void check_all_reduce(const grp *g, dist_dtype dt, dist_reduce_op op, int ndim, const int64_t *shape) {
  uint64_t seed = ++seq;
  char what[160];
  snprintf(what, sizeof what, "all_reduce %s %s ndim %d over %s", DT_NAME[dt], OP_NAME[op], ndim, gname(g));
  buf b = make(dt, ndim, shape, seed, g->world[g->rank], op);
  cval *want = calloc((size_t)b.n + 1, sizeof *want);
  ref_reduce(g, dt, op, b.n, seed, want);
  if (CALL_OK(dist_all_reduce(g->name, &b.t, op), what)) EXPECT_CLOSE(dt, b.mem, want, b.n, what);
  free(want);
  free(b.mem);
}

static const dist_dtype ALL_DTYPES[] = {DIST_F32, DIST_F64, DIST_BF16, DIST_F16, DIST_C64,
                                        DIST_C128, DIST_I32, DIST_I64, DIST_U8};
#define NDTYPES ((int)(sizeof ALL_DTYPES / sizeof ALL_DTYPES[0]))

/* Every dtype with every op it supports, on a scalar, a 1-D and a 3-D tensor. */
static void test_all_reduce(void) {
  const int64_t s1[1] = {7}, s3[3] = {2, 3, 4};
  for (int gi = 0; gi < NGROUPS; gi++)
    for (int d = 0; d < NDTYPES; d++)
      for (int op = 0; op < DIST_REDUCE_OP_COUNT; op++) {
        if (is_complex(ALL_DTYPES[d]) && (op == DIST_MAX || op == DIST_MIN)) continue; /* see test_errors */
        int pick = (d + op) % 3;
        check_all_reduce(&groups[gi], ALL_DTYPES[d], (dist_reduce_op)op, pick == 0 ? 0 : pick == 1 ? 1 : 3,
                         pick == 2 ? s3 : s1);
      }
  /* An empty tensor with NULL data is a valid no-op; "world" by name. */
  int64_t zero = 0;
  dist_tensor e = dist_tensor_host(NULL, DIST_F32, 1, &zero);
  CALL_OK(dist_all_reduce("world", &e, DIST_SUM), "all_reduce of an empty tensor");
  int32_t v = R + 1;
  int64_t one = 1;
  dist_tensor t = dist_tensor_host(&v, DIST_I32, 1, &one);
  if (CALL_OK(dist_all_reduce("world", &t, DIST_SUM), "all_reduce over \"world\"")) CU_ASSERT_EQUAL(v, W * (W + 1) / 2);
}

/* From DIST_NB_ALLREDUCE_MIN bytes (1 MiB with Open MPI by default) a blocking
 * all-reduce runs as MPI_Iallreduce + MPI_Wait: just over the threshold, an
 * odd length, several dtypes and ops. */
static void test_all_reduce_large(void) {
  const int64_t n[1] = {(1 << 18) + 3}, n64[1] = {(1 << 17) + 5};
  for (int gi = 0; gi < NGROUPS; gi++) {
    check_all_reduce(&groups[gi], DIST_F32, DIST_SUM, 1, n);
    check_all_reduce(&groups[gi], DIST_F64, DIST_AVG, 1, n64);
    check_all_reduce(&groups[gi], DIST_I32, DIST_MAX, 1, n);
    check_all_reduce(&groups[gi], DIST_BF16, DIST_SUM, 1, n64);
  }
}

/* In place on root; everyone else's tensor unchanged. */
static void check_reduce(const grp *g, dist_dtype dt, dist_reduce_op op, int root) {
  uint64_t seed = ++seq;
  int64_t shape[2] = {3, 5};
  char what[160];
  snprintf(what, sizeof what, "reduce %s %s root %d over %s", DT_NAME[dt], OP_NAME[op], root, gname(g));
  buf b = make(dt, 2, shape, seed, g->world[g->rank], op), mine = make(dt, 2, shape, seed, g->world[g->rank], op);
  cval *want = calloc((size_t)b.n, sizeof *want);
  ref_reduce(g, dt, op, b.n, seed, want);
  if (CALL_OK(dist_reduce(g->name, &b.t, op, root), what)) {
    if (g->rank == root) EXPECT_CLOSE(dt, b.mem, want, b.n, what);
    else EXPECT_BYTES(b.mem, mine.mem, (size_t)b.n * DT_SIZE[dt], what);
  }
  free(want);
  free(b.mem);
  free(mine.mem);
}

/* A u8 average must not wrap: 200 + 250 + ... over the group, then divided.
 * Also over 16-bit: the mean of values near bf16's precision limit. */
static void test_average_no_wrap(void) {
  uint8_t v[3];
  int64_t n = 3;
  long sum[3] = {0, 0, 0};
  for (int r = 0; r < W; r++)
    for (int i = 0; i < 3; i++) sum[i] += 200 + (r * 7 + i * 13) % 56;
  for (int i = 0; i < 3; i++) v[i] = (uint8_t)(200 + (R * 7 + i * 13) % 56);
  dist_tensor t = dist_tensor_host(v, DIST_U8, 1, &n);
  ASSERT_OK(dist_all_reduce(NULL, &t, DIST_AVG));
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(v[i], sum[i] / W);
  for (int i = 0; i < 3; i++) v[i] = (uint8_t)(200 + (R * 7 + i * 13) % 56);
  ASSERT_OK(dist_all_reduce_fused(NULL, &t, 1, DIST_AVG));
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(v[i], sum[i] / W);
}

static void test_reduce(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_F64, DIST_I32, DIST_C64, DIST_U8, DIST_F16, DIST_I64};
  const dist_reduce_op ops[] = {DIST_SUM, DIST_MAX, DIST_PROD, DIST_AVG, DIST_SUM, DIST_MIN, DIST_AVG, DIST_SUM};
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    int roots[3] = {0, g->size - 1, g->size / 2};
    for (int i = 0; i < 8; i++) check_reduce(g, dts[i], ops[i], roots[i % 3]);
  }
}

static void check_broadcast(const grp *g, dist_dtype dt, int ndim, const int64_t *shape, int root) {
  uint64_t seed = ++seq;
  char what[160];
  snprintf(what, sizeof what, "broadcast %s ndim %d root %d over %s", DT_NAME[dt], ndim, root, gname(g));
  buf b = make(dt, ndim, shape, seed, g->world[g->rank], DIST_SUM);
  buf want = make(dt, ndim, shape, seed, g->world[root], DIST_SUM);
  if (CALL_OK(dist_broadcast(g->name, &b.t, root), what)) EXPECT_BYTES(b.mem, want.mem, (size_t)b.n * DT_SIZE[dt], what);
  free(b.mem);
  free(want.mem);
}

static void test_broadcast(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_C128, DIST_I64, DIST_U8, DIST_F16};
  const int64_t s2[2] = {4, 3};
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    int roots[3] = {0, g->size / 2, g->size - 1};
    for (int i = 0; i < 6; i++) check_broadcast(g, dts[i], i == 5 ? 0 : 2, s2, roots[i % 3]);
  }
}

/* Sum or mean of one double per rank, on dst only; out untouched (or NULL) elsewhere. */
static void test_reduce_loss(void) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    for (int average = 0; average < 2; average++)
      for (int k = 0; k < 3; k++) {
        int dst = k == 0 ? 0 : k == 1 ? g->size - 1 : g->size / 2;
        uint64_t seed = ++seq;
        double want = 0, out = -777.0;
        for (int r = 0; r < g->size; r++) want += 10 * unit(seed, g->world[r], 0) - 3;
        if (average) want /= g->size;
        char what[160];
        snprintf(what, sizeof what, "reduce_loss average %d dst %d over %s", average, dst, gname(g));
        int pass_null = g->rank != dst && k == 2; /* out may be NULL off dst */
        if (!CALL_OK(dist_reduce_loss(g->name, 10 * unit(seed, g->world[g->rank], 0) - 3, dst, average,
                                      pass_null ? NULL : &out),
                     what))
          continue;
        if (g->rank == dst) {
          if (fabs(out - want) > 1e-12 * fmax(1, fabs(want)))
            fprintf(stderr, "[rank %d/%d] %s: %.17g, expected %.17g\n", R, W, what, out, want);
          assert_at(fabs(out - want) <= 1e-12 * fmax(1, fabs(want)), __LINE__, what);
        } else {
          assert_at(out == -777.0, __LINE__, what);
        }
      }
  }
}

/* A mixed list (every kind the fused call packs, a scalar and an empty tensor). */
static void check_fused(const grp *g, dist_reduce_op op, int shared_grads) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_F64, DIST_I32, DIST_U8, DIST_F16, DIST_I64, DIST_C64, DIST_F32,
                            DIST_C128, DIST_BF16};
  const int64_t lens[] = {7, 5, 3, 4, 6, 2, 1, 3, 0, 2, -1}; /* 0: empty, -1: a scalar */
  enum { N = 11 };
  buf b[N];
  dist_tensor ts[N];
  uint64_t seeds[N];
  int n = 0;
  for (int i = 0; i < N; i++) {
    if (is_complex(dts[i]) && (op == DIST_MAX || op == DIST_MIN)) continue;
    seeds[n] = ++seq;
    b[n] = make(dts[i], lens[i] < 0 ? 0 : 1, &lens[i], seeds[n], g->world[g->rank], op);
    ts[n] = b[n].t;
    n++;
  }
  char what[160];
  snprintf(what, sizeof what, "%s %s of %d tensors over %s", shared_grads ? "all_reduce_shared_grads" : "all_reduce_fused",
           OP_NAME[op], n, gname(g));
  dist_status s = shared_grads ? dist_all_reduce_shared_grads(g->name, ts, n) : dist_all_reduce_fused(g->name, ts, n, op);
  int ok = CALL_OK(s, what);
  for (int i = 0; i < n; i++) {
    if (ok) {
      cval *want = calloc((size_t)b[i].n + 1, sizeof *want);
      char w2[200];
      snprintf(w2, sizeof w2, "%s: tensor %d (%s)", what, i, DT_NAME[b[i].t.dtype]);
      ref_reduce(g, b[i].t.dtype, op, b[i].n, seeds[i], want);
      EXPECT_CLOSE(b[i].t.dtype, b[i].mem, want, b[i].n, w2);
      free(want);
    }
    free(b[i].mem);
  }
}

static void test_fused(void) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    for (int op = 0; op < DIST_REDUCE_OP_COUNT; op++) check_fused(&groups[gi], (dist_reduce_op)op, 0);
    check_fused(&groups[gi], DIST_SUM, 1);
  }
}

/* ---- data movement ----------------------------------------------------------- */

enum { ALL_GATHER, ALL_GATHER_V, GATHER_V };

/* all_gather, all_gather_v or gather_v (to dst) of 3-D tensors along dim;
 * rank r holds sizes[r] slices; pass_null passes sizes = NULL instead. */
static void check_gather(const grp *g, int kind, dist_dtype dt, int dim, const int64_t *sizes, int pass_null, int dst) {
  static const char *const NAMES[] = {"all_gather", "all_gather_v", "gather_v"};
  uint64_t seed = ++seq;
  int64_t total = 0, shp[3], oshp[3];
  for (int r = 0; r < g->size; r++) total += sizes[r];
  char what[200];
  snprintf(what, sizeof what, "%s %s dim %d sizes[me] %lld total %lld%s dst %d over %s", NAMES[kind], DT_NAME[dt], dim,
           (long long)sizes[g->rank], (long long)total, pass_null ? " (sizes NULL)" : "", dst, gname(g));
  shape3(dim, sizes[g->rank], shp);
  shape3(dim, total, oshp);
  buf in = make(dt, 3, shp, seed, g->world[g->rank], DIST_SUM), out = make_out(dt, 3, oshp);
  void *want = calloc((size_t)out.n * DT_SIZE[dt] + 1, 1);
  ref_concat(g, dt, dim, sizes, seed, want);
  int receives = kind != GATHER_V || g->rank == dst;
  const int64_t *sz = pass_null ? NULL : sizes;
  dist_status s = kind == ALL_GATHER     ? dist_all_gather(g->name, &in.t, &out.t, dim)
                  : kind == ALL_GATHER_V ? dist_all_gather_v(g->name, &in.t, &out.t, dim, sz)
                                         : dist_gather_v(g->name, &in.t, receives ? &out.t : NULL, dim, sz, dst);
  if (CALL_OK(s, what) && receives) EXPECT_BYTES(out.mem, want, (size_t)out.n * DT_SIZE[dt], what);
  free(want);
  free(in.mem);
  free(out.mem);
}

static void sizes_of(const grp *g, int p, int64_t *sizes) {
  for (int r = 0; r < g->size; r++) sizes[r] = pattern(p, r);
}

static void test_all_gather(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_C64};
  int64_t sizes[64];
  for (int gi = 0; gi < NGROUPS; gi++) {
    sizes_of(&groups[gi], 0, sizes);
    for (int dim = 0; dim < 3; dim++) check_gather(&groups[gi], ALL_GATHER, dts[(dim + gi) % 4], dim, sizes, 0, 0);
  }
}

static void test_all_gather_v(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_U8, DIST_C128, DIST_F16};
  int64_t sizes[64];
  for (int gi = 0; gi < NGROUPS; gi++)
    for (int p = 1; p <= 4; p++)
      for (int dim = 0; dim < 3; dim++) {
        sizes_of(&groups[gi], p, sizes);
        check_gather(&groups[gi], ALL_GATHER_V, dts[(p + dim) % 6], dim, sizes, 0, 0);
      }
  for (int gi = 0; gi < NGROUPS; gi++) { /* NULL sizes: everyone's equals mine */
    sizes_of(&groups[gi], 0, sizes);
    check_gather(&groups[gi], ALL_GATHER_V, DIST_F64, 1, sizes, 1, 0);
  }
}

static void test_gather_v(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_I32, DIST_BF16, DIST_C64};
  int64_t sizes[64];
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    for (int p = 0; p <= 4; p++) {
      int dst = p % 2 ? g->size - 1 : g->size / 2;
      sizes_of(g, p, sizes);
      check_gather(g, GATHER_V, dts[p % 4], p % 3, sizes, 0, dst);
    }
    sizes_of(g, 0, sizes);
    check_gather(g, GATHER_V, DIST_U8, 2, sizes, 1, 0);
  }
}

/* Chunk r (sizes[r] slices) of src's input goes to rank r; `in` is NULL off src. */
static void check_scatter(const grp *g, dist_dtype dt, int dim, const int64_t *sizes, int pass_null, int src) {
  uint64_t seed = ++seq;
  int64_t total = 0, off = 0, shp[3], oshp[3];
  for (int r = 0; r < g->size; r++) total += sizes[r], off += r < g->rank ? sizes[r] : 0;
  char what[200];
  snprintf(what, sizeof what, "scatter_v %s dim %d sizes[me] %lld total %lld%s src %d over %s", DT_NAME[dt], dim,
           (long long)sizes[g->rank], (long long)total, pass_null ? " (sizes NULL)" : "", src, gname(g));
  shape3(dim, total, shp);
  shape3(dim, sizes[g->rank], oshp);
  buf in = make(dt, 3, shp, seed, g->world[src], DIST_SUM), out = make_out(dt, 3, oshp);
  void *want = calloc((size_t)out.n * DT_SIZE[dt] + 1, 1);
  copy_slices(want, sizes[g->rank], 0, in.mem, total, off, sizes[g->rank], outer3(dim),
              (size_t)inner3(dim) * DT_SIZE[dt]);
  if (CALL_OK(dist_scatter_v(g->name, g->rank == src ? &in.t : NULL, &out.t, dim, pass_null ? NULL : sizes, src), what))
    EXPECT_BYTES(out.mem, want, (size_t)out.n * DT_SIZE[dt], what);
  free(want);
  free(in.mem);
  free(out.mem);
}

static void test_scatter_v(void) {
  const dist_dtype dts[] = {DIST_F64, DIST_BF16, DIST_I32, DIST_C64, DIST_U8};
  int64_t sizes[64];
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    for (int p = 0; p <= 4; p++) {
      sizes_of(g, p, sizes);
      check_scatter(g, dts[p], (p + 1) % 3, sizes, 0, p % 2 ? g->size - 1 : 0);
    }
    sizes_of(g, 0, sizes); /* NULL: equal chunks of src's extent */
    check_scatter(g, DIST_F32, 1, sizes, 1, g->size / 2);
  }
}

/* in (sum(sizes) slices) reduced over the group; I keep chunk me. */
static void check_reduce_scatter(const grp *g, dist_dtype dt, dist_reduce_op op, int dim, const int64_t *sizes,
                                 int pass_null) {
  uint64_t seed = ++seq;
  int64_t total = 0, off = 0, shp[3], oshp[3];
  for (int r = 0; r < g->size; r++) total += sizes[r], off += r < g->rank ? sizes[r] : 0;
  char what[200];
  snprintf(what, sizeof what, "reduce_scatter_v %s %s dim %d sizes[me] %lld total %lld%s over %s", DT_NAME[dt],
           OP_NAME[op], dim, (long long)sizes[g->rank], (long long)total, pass_null ? " (sizes NULL)" : "", gname(g));
  shape3(dim, total, shp);
  shape3(dim, sizes[g->rank], oshp);
  buf in = make(dt, 3, shp, seed, g->world[g->rank], op), out = make_out(dt, 3, oshp);
  cval *full = calloc((size_t)in.n + 1, sizeof *full), *want = calloc((size_t)out.n + 1, sizeof *want);
  ref_reduce(g, dt, op, in.n, seed, full);
  copy_slices(want, sizes[g->rank], 0, full, total, off, sizes[g->rank], outer3(dim), (size_t)inner3(dim) * sizeof(cval));
  if (CALL_OK(dist_reduce_scatter_v(g->name, &in.t, &out.t, dim, pass_null ? NULL : sizes, op), what))
    EXPECT_CLOSE(dt, out.mem, want, out.n, what);
  free(full);
  free(want);
  free(in.mem);
  free(out.mem);
}

static void test_reduce_scatter_v(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_C64, DIST_F16, DIST_U8};
  const dist_reduce_op ops[] = {DIST_SUM, DIST_AVG, DIST_MAX, DIST_PROD, DIST_SUM, DIST_MIN};
  int64_t sizes[64];
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    for (int i = 0; i < 6; i++) {
      sizes_of(g, i % 5, sizes);
      check_reduce_scatter(g, dts[i], ops[i], i % 3, sizes, 0);
    }
    sizes_of(g, 0, sizes); /* NULL: equal chunks */
    check_reduce_scatter(g, DIST_F64, DIST_SUM, 1, sizes, 1);
  }
}

/* all_to_all (k < 0) or all_to_all_v with pattern k. */
static void check_all_to_all(const grp *g, dist_dtype dt, int dim, int k) {
  uint64_t seed = ++seq;
  int64_t send[64], recv[64], in_ext = 0, out_ext = 0, shp[3], oshp[3];
  for (int r = 0; r < g->size; r++) {
    send[r] = a2a_count(k, g->rank, r);
    recv[r] = a2a_count(k, r, g->rank);
    in_ext += send[r], out_ext += recv[r];
  }
  char what[200];
  snprintf(what, sizeof what, "%s %s dim %d pattern %d (in %lld, out %lld) over %s", k < 0 ? "all_to_all" : "all_to_all_v",
           DT_NAME[dt], dim, k, (long long)in_ext, (long long)out_ext, gname(g));
  shape3(dim, in_ext, shp);
  shape3(dim, out_ext, oshp);
  buf in = make(dt, 3, shp, seed, g->world[g->rank], DIST_SUM), out = make_out(dt, 3, oshp);
  void *want = calloc((size_t)out.n * DT_SIZE[dt] + 1, 1);
  ref_a2a(g, dt, dim, k, seed, want);
  dist_status s = k < 0 ? dist_all_to_all(g->name, &in.t, &out.t, dim)
                        : dist_all_to_all_v(g->name, &in.t, &out.t, dim, send, recv);
  if (CALL_OK(s, what)) EXPECT_BYTES(out.mem, want, (size_t)out.n * DT_SIZE[dt], what);
  free(want);
  free(in.mem);
  free(out.mem);
}

static void test_all_to_all(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_C128, DIST_U8};
  for (int gi = 0; gi < NGROUPS; gi++) {
    for (int dim = 0; dim < 3; dim++) check_all_to_all(&groups[gi], dts[dim], dim, -1);
    for (int k = 0; k < 4; k++)
      for (int dim = 0; dim < 3; dim++) check_all_to_all(&groups[gi], dts[(k + dim) % 5], dim, k);
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* one clock for all ranks of a node */
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* No member leaves the barrier before the last one (delayed on purpose)
 * entered. Clock readings are only compared between ranks of one node. */
static void test_barrier(void) {
  int node = 0, nodes[64];
  ASSERT_OK(dist_manager_node(&node));
  MPI_Allgather(&node, 1, MPI_INT, nodes, 1, MPI_INT, MPI_COMM_WORLD);
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    MPI_Barrier(MPI_COMM_WORLD);
    if (g->rank == g->size - 1) nanosleep(&(struct timespec){0, 30000000}, NULL);
    double enter = now(), entered[64], last = 0;
    CALL_OK(dist_barrier(g->name), "barrier");
    double left = now();
    MPI_Allgather(&enter, 1, MPI_DOUBLE, entered, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < g->size; r++)
      if (nodes[g->world[r]] == node) last = fmax(last, entered[g->world[r]]);
    if (left < last - 1e-3)
      fprintf(stderr, "[rank %d/%d] left the barrier of %s %.1f ms before the last member entered\n", R, W, gname(g),
              (last - left) * 1e3);
    assert_at(left >= last - 1e-3, __LINE__, "barrier waits for every member");
  }
  CALL_OK(dist_barrier("world"), "barrier over \"world\"");
}

/* ---- non-blocking ---------------------------------------------------------------- */

/* Five operations in flight at once, completed in another order than started
 * (the last first, one by polling), each checked against its reference. */
static void test_nonblocking(void) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    int me = g->rank;
    uint64_t sa = ++seq, sb = ++seq, sc = ++seq, sd = ++seq, se = ++seq;
    /* A: f32 sum, D: c64 avg, E: u8 max (all-reduce); B: bf16 all_gather_v along
     * the middle dim (pattern 2); C: i64 all_to_all_v along the last dim. */
    int64_t sa_shape[2] = {5, 3}, sd_shape[1] = {4}, se_shape[1] = {9}, bsizes[64], send[64], recv[64], bext = 0,
            cin = 0, cout = 0, shp[3];
    buf a = make(DIST_F32, 2, sa_shape, sa, g->world[me], DIST_SUM);
    buf d = make(DIST_C64, 1, sd_shape, sd, g->world[me], DIST_AVG);
    buf e = make(DIST_U8, 1, se_shape, se, g->world[me], DIST_MAX);
    sizes_of(g, 2, bsizes);
    for (int r = 0; r < g->size; r++) bext += bsizes[r];
    shape3(1, bsizes[me], shp);
    buf bin = make(DIST_BF16, 3, shp, sb, g->world[me], DIST_SUM);
    shape3(1, bext, shp);
    buf bout = make_out(DIST_BF16, 3, shp);
    for (int r = 0; r < g->size; r++) {
      send[r] = a2a_count(1, me, r), recv[r] = a2a_count(1, r, me);
      cin += send[r], cout += recv[r];
    }
    shape3(2, cin, shp);
    buf c_in = make(DIST_I64, 3, shp, sc, g->world[me], DIST_SUM);
    shape3(2, cout, shp);
    buf c_out = make_out(DIST_I64, 3, shp);

    dist_request *ra = NULL, *rb = NULL, *rc = NULL, *rd = NULL, *re = NULL;
    int started = CALL_OK(dist_all_reduce_start(g->name, &a.t, DIST_SUM, &ra), "all_reduce_start f32 sum");
    started &= CALL_OK(dist_all_gather_v_start(g->name, &bin.t, &bout.t, 1, bsizes, &rb), "all_gather_v_start bf16");
    started &= CALL_OK(dist_all_to_all_v_start(g->name, &c_in.t, &c_out.t, 2, send, recv, &rc), "all_to_all_v_start i64");
    started &= CALL_OK(dist_all_reduce_start(g->name, &d.t, DIST_AVG, &rd), "all_reduce_start c64 avg");
    started &= CALL_OK(dist_all_reduce_start(g->name, &e.t, DIST_MAX, &re), "all_reduce_start u8 max");
    if (started) {
      CALL_OK(dist_request_wait(re), "wait E");
      CALL_OK(dist_request_wait(rd), "wait D");
      int done = 0;
      for (double t0 = now(); !done && now() - t0 < 30;)
        if (!CALL_OK(dist_request_test(rb, &done), "test B")) break;
      CU_ASSERT_EQUAL(done, 1);
      CALL_OK(dist_request_wait(rb), "wait B after test"); /* waiting a completed request is fine */
      CALL_OK(dist_request_wait(ra), "wait A");
      CALL_OK(dist_request_wait(rc), "wait C");
      CALL_OK(dist_request_wait(rc), "wait C twice");
      done = 0;
      CALL_OK(dist_request_test(ra, &done), "test A after wait");
      CU_ASSERT_EQUAL(done, 1);

      cval *want = calloc(64, sizeof *want);
      ref_reduce(g, DIST_F32, DIST_SUM, a.n, sa, want);
      EXPECT_CLOSE(DIST_F32, a.mem, want, a.n, "non-blocking all_reduce f32 sum");
      ref_reduce(g, DIST_C64, DIST_AVG, d.n, sd, want);
      EXPECT_CLOSE(DIST_C64, d.mem, want, d.n, "non-blocking all_reduce c64 avg");
      ref_reduce(g, DIST_U8, DIST_MAX, e.n, se, want);
      EXPECT_CLOSE(DIST_U8, e.mem, want, e.n, "non-blocking all_reduce u8 max");
      free(want);
      void *wb = calloc((size_t)bout.n * 2 + 1, 1), *wc = calloc((size_t)c_out.n * 8 + 1, 1);
      ref_concat(g, DIST_BF16, 1, bsizes, sb, wb);
      EXPECT_BYTES(bout.mem, wb, (size_t)bout.n * 2, "non-blocking all_gather_v bf16");
      ref_a2a(g, DIST_I64, 2, 1, sc, wc);
      EXPECT_BYTES(c_out.mem, wc, (size_t)c_out.n * 8, "non-blocking all_to_all_v i64");
      free(wb);
      free(wc);
    }
    dist_request *reqs[5] = {ra, rb, rc, rd, re};
    for (int i = 0; i < 5; i++) CALL_OK(dist_request_free(reqs[i]), "free a completed request");
    free(a.mem), free(d.mem), free(e.mem), free(bin.mem), free(bout.mem), free(c_in.mem), free(c_out.mem);
  }
}

/* Freeing a request never waited is a usage error, but free completes it:
 * the result is final and correct afterwards. */
static void test_free_in_flight(void) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    uint64_t seed = ++seq;
    int64_t shape[1] = {6};
    buf b = make(DIST_F64, 1, shape, seed, g->world[g->rank], DIST_SUM);
    cval want[6];
    ref_reduce(g, DIST_F64, DIST_SUM, 6, seed, want);
    /* Ranks other than 0 start late, so rank 0's request is surely still in flight. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (R != 0) nanosleep(&(struct timespec){0, 20000000}, NULL);
    dist_request *req = NULL;
    if (CALL_OK(dist_all_reduce_start(g->name, &b.t, DIST_SUM, &req), "all_reduce_start f64")) {
      ASSERT_STATUS(dist_request_free(req), DIST_ERR_INVALID_ARGUMENT);
      EXPECT_CLOSE(DIST_F64, b.mem, want, 6, "all_reduce completed by dist_request_free");
    }
    free(b.mem);
  }
  ASSERT_OK(dist_request_free(NULL));
}

/* ---- errors ---------------------------------------------------------------------- */

/* A small all-reduce over the world and the pair group that must still work:
 * no rank was left inside a failed call. */
static void still_works(int line) {
  for (int gi = 0; gi < NGROUPS; gi++) {
    int32_t v = groups[gi].world[groups[gi].rank] + 1, want = 0;
    for (int r = 0; r < groups[gi].size; r++) want += groups[gi].world[r] + 1;
    int64_t one = 1;
    dist_tensor t = dist_tensor_host(&v, DIST_I32, 1, &one);
    dist_status s = dist_all_reduce(groups[gi].name, &t, DIST_SUM);
    if (s != DIST_SUCCESS || v != want)
      fprintf(stderr, "[rank %d/%d] line %d: the all_reduce after the error gave %d (%s), value %d, expected %d\n", R,
              W, line, (int)s, dist_last_error(), v, want);
    assert_at(s == DIST_SUCCESS && v == want, line, "a valid collective works after the error");
  }
}

/* `got` is `code` (or `alt`, if not DIST_SUCCESS), the same on every rank, with a
 * message containing has1 and has2 (either may be NULL); then still_works. */
#define EXPECT_ERR(call, code, alt, has1, has2) expect_err_((call), code, alt, has1, has2, #call, __LINE__)
static void expect_err_(dist_status got, dist_status code, dist_status alt, const char *has1, const char *has2,
                        const char *text, int line) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s", dist_last_error());
  int mine = (int)got, lo, hi;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int code_ok = got == code || (alt != DIST_SUCCESS && got == alt);
  int msg_ok = msg[0] && (!has1 || strstr(msg, has1)) && (!has2 || strstr(msg, has2));
  if (!code_ok || lo != hi || !msg_ok)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d '%s', expected %d%s%s%s%s; codes over ranks %d..%d\n", R, W,
            line, text, mine, msg, (int)code, has1 ? " with '" : "", has1 ? has1 : "", has2 ? "' and '" : "",
            has2 ? has2 : "", lo, hi);
  assert_at(code_ok, line, text);
  assert_at(lo == hi, line, "the same error code on every rank");
  assert_at(msg_ok, line, "error message");
  still_works(line);
}
#define NONE DIST_SUCCESS

/* Every rank passes the same bad argument. */
static void test_errors_everywhere(void) {
  float x[64] = {0}, y[256] = {0};
  int64_t s3[3] = {2, 3, 4}, s1[1] = {4}, big[3] = {2, 3 * W, 4}, wrong[3] = {2, 3 * W + 1, 4};
  dist_tensor t = dist_tensor_host(x, DIST_F32, 3, s3), out = dist_tensor_host(y, DIST_F32, 3, big);
  dist_tensor bad_out = dist_tensor_host(y, DIST_F32, 3, wrong);
  const dist_status INV = DIST_ERR_INVALID_ARGUMENT;

  /* NULL tensors, NULL data with elements, a rejected ndim, unknown dtype and op. */
  EXPECT_ERR(dist_all_reduce(NULL, NULL, DIST_SUM), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_all_gather(NULL, &t, NULL, 0), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_broadcast(NULL, NULL, 0), INV, NONE, NULL, NULL);
  dist_tensor nodata = dist_tensor_host(NULL, DIST_F32, 1, s1);
  EXPECT_ERR(dist_all_reduce(NULL, &nodata, DIST_SUM), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_all_gather(NULL, &nodata, &out, 0), INV, NONE, NULL, NULL);
  int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  dist_tensor nine = dist_tensor_host(x, DIST_F32, 9, s9);
  EXPECT_ERR(dist_all_reduce(NULL, &nine, DIST_SUM), INV, NONE, NULL, NULL);
  dist_tensor baddt = t;
  baddt.dtype = DIST_DTYPE_COUNT;
  EXPECT_ERR(dist_all_reduce(NULL, &baddt, DIST_SUM), INV, DIST_ERR_UNSUPPORTED, NULL, NULL);
  EXPECT_ERR(dist_all_reduce(NULL, &t, DIST_REDUCE_OP_COUNT), INV, DIST_ERR_UNSUPPORTED, NULL, NULL);
  EXPECT_ERR(dist_all_reduce_start(NULL, &t, DIST_SUM, NULL), INV, NONE, NULL, NULL);

  /* Unknown group. */
  EXPECT_ERR(dist_all_reduce("no_such_group", &t, DIST_SUM), DIST_ERR_UNKNOWN_GROUP, NONE, "no_such_group", NULL);
  EXPECT_ERR(dist_barrier("no_such_group"), DIST_ERR_UNKNOWN_GROUP, NONE, "no_such_group", NULL);

  /* dim out of range. */
  EXPECT_ERR(dist_all_gather(NULL, &t, &out, 3), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_all_gather(NULL, &t, &out, -1), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_reduce_scatter_v(NULL, &out, &t, 7, NULL, DIST_SUM), INV, NONE, NULL, NULL);

  /* Output shapes and sizes that do not add up. */
  int64_t sizes[64], zeros[64] = {0};
  for (int r = 0; r < W; r++) sizes[r] = 3;
  EXPECT_ERR(dist_all_gather(NULL, &t, &bad_out, 1), INV, NONE, NULL, NULL);
  int64_t other[3] = {2, 3 * W, 5};
  dist_tensor out_other = dist_tensor_host(y, DIST_F32, 3, other); /* a non-split dim differs */
  EXPECT_ERR(dist_all_gather(NULL, &t, &out_other, 1), INV, NONE, NULL, NULL);
  dist_tensor out_f64 = dist_tensor_host(y, DIST_F64, 3, big); /* dtype of out differs */
  EXPECT_ERR(dist_all_gather(NULL, &t, &out_f64, 1), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_all_gather_v(NULL, &t, &bad_out, 1, sizes), INV, NONE, NULL, NULL);
  sizes[0] = 4; /* my entry no longer matches my extent */
  EXPECT_ERR(dist_all_gather_v(NULL, &t, &out, 1, sizes), INV, NONE, NULL, NULL);
  for (int r = 0; r < W; r++) sizes[r] = 3;
  EXPECT_ERR(dist_reduce_scatter_v(NULL, &bad_out, &t, 1, sizes, DIST_SUM), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_reduce_scatter_v(NULL, &out, &bad_out, 1, sizes, DIST_SUM), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_scatter_v(NULL, &bad_out, &t, 1, sizes, 0), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_gather_v(NULL, &t, &bad_out, 1, sizes, 0), INV, NONE, NULL, NULL); /* wrong on dst only */
  EXPECT_ERR(dist_all_to_all_v(NULL, &t, &t, 1, zeros, zeros), INV, NONE, NULL, NULL); /* send sum 0 != 3 */
  EXPECT_ERR(dist_all_to_all_v(NULL, &t, &t, 1, NULL, NULL), INV, NONE, NULL, NULL); /* both required */
  if (W > 1) { /* extents that do not divide by the group size */
    int64_t odd[3] = {2, 2 * W + 1, 4};
    dist_tensor t_odd = dist_tensor_host(y, DIST_F32, 3, odd), t_one = dist_tensor_host(x, DIST_F32, 3, (int64_t[3]){2, 2, 4});
    EXPECT_ERR(dist_all_to_all(NULL, &t_odd, &t_odd, 1), INV, NONE, NULL, NULL);
    EXPECT_ERR(dist_reduce_scatter_v(NULL, &t_odd, &t_one, 1, NULL, DIST_SUM), INV, NONE, NULL, NULL);
  }

  /* Roots out of range. */
  EXPECT_ERR(dist_broadcast(NULL, &t, W), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_broadcast(NULL, &t, -1), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_reduce(NULL, &t, DIST_SUM, W), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_gather_v(NULL, &t, &out, 1, NULL, W), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_scatter_v(NULL, &out, &t, 1, NULL, -1), INV, NONE, NULL, NULL);
  double loss = 0;
  EXPECT_ERR(dist_reduce_loss(NULL, 1.0, W, 0, &loss), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_reduce_loss(NULL, 1.0, 0, 0, NULL), INV, NONE, NULL, NULL); /* NULL out on dst */
  EXPECT_ERR(dist_broadcast(groups[1].name, &t, groups[1].size), INV, NONE, NULL, NULL);

  /* Complex numbers have no order: the message names the dtype and the op. */
  dist_tensor c = dist_tensor_host(x, DIST_C64, 1, s1);
  EXPECT_ERR(dist_all_reduce(NULL, &c, DIST_MAX), DIST_ERR_UNSUPPORTED, NONE, "c64", "max");
  dist_tensor cc = dist_tensor_host(x, DIST_C128, 1, (int64_t[1]){W});
  dist_tensor cc1 = dist_tensor_host(y, DIST_C128, 1, (int64_t[1]){1});
  EXPECT_ERR(dist_reduce_scatter_v(NULL, &cc, &cc1, 0, NULL, DIST_MIN), DIST_ERR_UNSUPPORTED, NONE, "c128", "min");
  dist_tensor list[2] = {t, c};
  EXPECT_ERR(dist_all_reduce_fused(NULL, list, 2, DIST_MAX), DIST_ERR_UNSUPPORTED, NONE, "c64", "max");
  EXPECT_ERR(dist_all_reduce_fused(NULL, NULL, 2, DIST_SUM), INV, NONE, NULL, NULL);
  EXPECT_ERR(dist_all_reduce_fused(NULL, list, -1, DIST_SUM), INV, NONE, NULL, NULL);
}

/* Only rank 1 differs: every rank must fail the same way; the others are told
 * which rank was at fault. */
static void test_errors_one_rank(void) {
  if (W < 2) return;
  float x[64] = {0}, y[256] = {0};
  int64_t s4[1] = {4}, s5[1] = {5}, s3[3] = {2, 3, 4}, big[3] = {2, 3 * W, 4};
  const dist_status INV = DIST_ERR_INVALID_ARGUMENT, MIS = DIST_ERR_MISMATCH;
  const char *blame = R == 0 ? "rank 1" : NULL;

  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, R == 1 ? s5 : s4); /* count differs */
  EXPECT_ERR(dist_all_reduce(NULL, &t, DIST_SUM), MIS, INV, blame, NULL);
  t = dist_tensor_host(x, R == 1 ? DIST_F64 : DIST_F32, 1, s4); /* dtype differs */
  EXPECT_ERR(dist_all_reduce(NULL, &t, DIST_SUM), MIS, INV, NULL, NULL);
  t = dist_tensor_host(x, DIST_F32, 1, s4); /* op differs */
  EXPECT_ERR(dist_all_reduce(NULL, &t, R == 1 ? DIST_MAX : DIST_SUM), MIS, INV, NULL, NULL);
  EXPECT_ERR(dist_broadcast(NULL, &t, R == 1 ? 1 : 0), MIS, INV, NULL, NULL); /* root differs */
  /* sizes differ, although each rank's own arrays are consistent with its tensors */
  int64_t sizes[64], out_ext = 0;
  for (int r = 0; r < W; r++) sizes[r] = R == 1 && r == 0 ? 4 : 3, out_ext += sizes[r];
  dist_tensor in3 = dist_tensor_host(x, DIST_F32, 3, s3);
  dist_tensor out3 = dist_tensor_host(y, DIST_F32, 3, (int64_t[3]){2, out_ext, 4});
  EXPECT_ERR(dist_all_gather_v(NULL, &in3, &out3, 1, sizes), MIS, INV, NULL, NULL);

  /* all-to-all-v counts that do not pair up: rank 1 expects 2 slices from
   * rank 0, which sends 1. Each rank's arrays fit its own tensors. */
  int64_t ss[64], rs[64], rtotal = 0;
  for (int r = 0; r < W; r++) ss[r] = 1, rs[r] = R == 1 && r == 0 ? 2 : 1, rtotal += rs[r];
  dist_tensor a_in = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){W});
  dist_tensor a_out = dist_tensor_host(y, DIST_F32, 1, (int64_t[1]){rtotal});
  EXPECT_ERR(dist_all_to_all_v(NULL, &a_in, &a_out, 0, ss, rs), MIS, NONE,
             "rank 0 of group 'world' sends 1 slices to rank 1, which expects 2", NULL);

  /* A rank-local invalid argument on rank 1 only. */
  dist_tensor outw = dist_tensor_host(y, DIST_F32, 3, big);
  EXPECT_ERR(dist_all_gather(NULL, &in3, &outw, R == 1 ? 99 : 1), INV, MIS, R == 1 ? NULL : "rank 1", NULL);
  dist_tensor nodata = dist_tensor_host(R == 1 ? NULL : x, DIST_F32, 1, s4);
  EXPECT_ERR(dist_all_reduce(NULL, &nodata, DIST_SUM), INV, MIS, R == 1 ? NULL : "rank 1", NULL);

  /* Over the pair group: only the copy holding rank 1 fails; others go on. */
  if (groups[1].size == 2) {
    dist_status s = dist_all_reduce(groups[1].name, &nodata, DIST_SUM);
    if (R < 2) {
      CU_ASSERT_EQUAL(s, INV);
      if (R == 0) ASSERT_MSG_HAS("rank 1");
    } else {
      ASSERT_OK(s);
    }
    still_works(__LINE__);
  }
}

/* Sizes that overflow (issue 18): shapes whose element or byte count does
 * not fit int64 (f32[2^40, 2^40] wrapped to 0 elements and "reduced"
 * successfully), and size arrays whose sum wraps ({8, INT64_MAX, INT64_MAX,
 * 10} adds up to 16). Every rank passes them (each rank's own check fails),
 * so every rank gets invalid argument with a message naming the argument and
 * saying it overflows. The data buffer is never read: every call must stop in
 * its checks. */
static void test_errors_overflow(void) {
  static uint8_t buf[256];
  const dist_status INV = DIST_ERR_INVALID_ARGUMENT;
  const int64_t T40 = (int64_t)1 << 40;

  dist_tensor huge = dist_tensor_host(buf, DIST_F32, 2, (int64_t[2]){T40, T40}); /* 2^80 elements */
  EXPECT_ERR(dist_all_reduce(NULL, &huge, DIST_SUM), INV, NONE, "'t'", "overflow");
  EXPECT_ERR(dist_reduce(NULL, &huge, DIST_SUM, 0), INV, NONE, "'t'", "overflow");
  EXPECT_ERR(dist_broadcast(NULL, &huge, 0), INV, NONE, "'t'", "overflow");
  dist_tensor fat = dist_tensor_host(buf, DIST_F64, 1, (int64_t[1]){(int64_t)1 << 61}); /* 2^64 bytes */
  EXPECT_ERR(dist_all_reduce(NULL, &fat, DIST_SUM), INV, NONE, "'t'", "overflow");
  /* bf16[2^62 - 1] fits in bytes, but not as the f32 it is reduced in */
  dist_tensor half = dist_tensor_host(buf, DIST_BF16, 1, (int64_t[1]){((int64_t)1 << 62) - 1});
  EXPECT_ERR(dist_all_reduce(NULL, &half, DIST_SUM), INV, NONE, "'t'", "overflow");
  dist_tensor small = dist_tensor_host(buf, DIST_F32, 2, (int64_t[2]){1, 1});
  dist_tensor list[2] = {small, huge};
  EXPECT_ERR(dist_all_reduce_fused(NULL, list, 2, DIST_SUM), INV, NONE, "tensors[1]", "overflow");
  EXPECT_ERR(dist_all_gather(NULL, &small, &huge, 1), INV, NONE, "'out'", "overflow");
  EXPECT_ERR(dist_all_to_all(NULL, &huge, &huge, 0), INV, NONE, "'in'", "overflow");

  if (W == 1) return; /* one rank: no product or sum over ranks to overflow */
  /* Equal extents whose sum over the ranks overflows. */
  int64_t e = INT64_MAX / W + 1;
  dist_tensor part = dist_tensor_host(buf, DIST_U8, 1, &e), one = dist_tensor_host(buf, DIST_U8, 1, (int64_t[1]){1});
  EXPECT_ERR(dist_all_gather(NULL, &part, &one, 0), INV, NONE, "'in'", "overflow");
  EXPECT_ERR(dist_gather_v(NULL, &part, &one, 0, NULL, 0), INV, NONE, "'in'", "overflow");
  EXPECT_ERR(dist_scatter_v(NULL, &one, &part, 0, NULL, 0), INV, NONE, "'out'", "overflow");

  /* Size arrays whose sum wraps: {8, INT64_MAX} at 2 ranks, {8, INT64_MAX,
   * INT64_MAX} (6) at 3, {8, INT64_MAX, INT64_MAX, 10} (16) at 4. Each rank's
   * tensors fit its own entry and the wrapped sum. A rank whose own entry is
   * INT64_MAX holds a tensor too large for a collective (u8 counts as the i64
   * of an average): its message names that tensor; the others', the sizes. */
  int64_t S[64];
  uint64_t wrapped = 0;
  for (int r = 0; r < W; r++) {
    S[r] = r == 1 || r == 2 ? INT64_MAX : r == 0 ? 8 : 10;
    wrapped += (uint64_t)S[r];
  }
  int64_t sum = (int64_t)wrapped > 0 ? (int64_t)wrapped : 1;
  int huge_mine = S[R] == INT64_MAX;
  dist_tensor mine = dist_tensor_host(buf, DIST_U8, 1, &S[R]), whole = dist_tensor_host(buf, DIST_U8, 1, &sum);
  EXPECT_ERR(dist_all_gather_v(NULL, &mine, &whole, 0, S), INV, NONE, huge_mine ? "'in'" : "sizes", "overflow");
  EXPECT_ERR(dist_gather_v(NULL, &mine, &whole, 0, S, 0), INV, NONE, huge_mine ? "'in'" : "sizes", "overflow");
  EXPECT_ERR(dist_scatter_v(NULL, &whole, &mine, 0, S, 0), INV, NONE, huge_mine ? "'out'" : "sizes", "overflow");
  EXPECT_ERR(dist_reduce_scatter_v(NULL, &whole, &mine, 0, S, DIST_SUM), INV, NONE, huge_mine ? "'out'" : "sizes",
             "overflow");
  EXPECT_ERR(dist_all_to_all_v(NULL, &whole, &whole, 0, S, S), INV, NONE, "send_sizes", "overflow");
  /* Send one slice to myself; expect INT64_MAX from every other rank. */
  int64_t ss[64], rs[64];
  for (int r = 0; r < W; r++) ss[r] = r == R, rs[r] = r == R ? 1 : INT64_MAX;
  EXPECT_ERR(dist_all_to_all_v(NULL, &one, &one, 0, ss, rs), INV, NONE, "recv_sizes", "overflow");
}

/* The 16-bit conversions the references rely on, at known bit patterns. */
static void test_conversions(void) {
  union {
    float f;
    uint32_t u;
  } v;
  CU_ASSERT_EQUAL(dist_f32_to_bf16(1.0f), 0x3F80);
  CU_ASSERT_EQUAL(dist_f32_to_bf16(-2.0f), 0xC000);
  CU_ASSERT_EQUAL(dist_f32_to_bf16(0.1f), 0x3DCD); /* 0x3DCCCCCD rounds up */
  v.u = 0x3F808000;                                /* halfway: ties to even */
  CU_ASSERT_EQUAL(dist_f32_to_bf16(v.f), 0x3F80);
  v.u = 0x3F818000;
  CU_ASSERT_EQUAL(dist_f32_to_bf16(v.f), 0x3F82);
  CU_ASSERT_EQUAL(dist_bf16_to_f32(0x4049), 3.140625f);
  CU_ASSERT_TRUE(isnan(dist_bf16_to_f32(dist_f32_to_bf16(NAN))));
  CU_ASSERT_EQUAL(dist_f32_to_f16(1.0f), 0x3C00);
  CU_ASSERT_EQUAL(dist_f32_to_f16(-2.0f), 0xC000);
  CU_ASSERT_EQUAL(dist_f32_to_f16(65504.0f), 0x7BFF);
  CU_ASSERT_EQUAL(dist_f32_to_f16(1.0f + 0x1p-11f), 0x3C00); /* halfway: ties to even */
  CU_ASSERT_EQUAL(dist_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
  CU_ASSERT_EQUAL(dist_f16_to_f32(0x0001), 0x1p-24f); /* smallest subnormal */
  CU_ASSERT_EQUAL(dist_f16_to_f32(0x3555), 0x1.554p-2f);
  CU_ASSERT_TRUE(isnan(dist_f16_to_f32(dist_f32_to_f16(NAN))));
  for (int d = 0; d < NDTYPES; d++) {
    CU_ASSERT_EQUAL(dist_dtype_size(ALL_DTYPES[d]), DT_SIZE[ALL_DTYPES[d]]);
    CU_ASSERT_STRING_EQUAL(dist_dtype_name(ALL_DTYPES[d]), DT_NAME[ALL_DTYPES[d]]);
  }
  int64_t shape[3] = {2, 0, 3};
  dist_tensor t = dist_tensor_host(NULL, DIST_C64, 0, shape);
  CU_ASSERT_EQUAL(dist_tensor_numel(&t), 1); /* a scalar */
  t = dist_tensor_host(NULL, DIST_C64, 3, shape);
  CU_ASSERT_EQUAL(dist_tensor_numel(&t), 0);
  shape[1] = 5;
  t = dist_tensor_host(NULL, DIST_C64, 3, shape);
  CU_ASSERT_EQUAL(dist_tensor_nbytes(&t), 2 * 5 * 3 * 8);
}

static CU_TestInfo reduction_tests[] = {
    {"all_reduce: dtypes x ops", test_all_reduce},
    {"all_reduce: u8 average does not wrap", test_average_no_wrap},
    {"all_reduce: large (non-blocking path)", test_all_reduce_large},
    {"reduce: roots, non-roots unchanged", test_reduce},
    {"all_reduce_fused and shared grads", test_fused},
    {"reduce_loss", test_reduce_loss},
    CU_TEST_INFO_NULL};
static CU_TestInfo movement_tests[] = {
    {"broadcast", test_broadcast},
    {"all_gather", test_all_gather},
    {"all_gather_v", test_all_gather_v},
    {"gather_v", test_gather_v},
    {"scatter_v", test_scatter_v},
    {"reduce_scatter_v", test_reduce_scatter_v},
    {"all_to_all(_v)", test_all_to_all},
    {"barrier", test_barrier},
    CU_TEST_INFO_NULL};
static CU_TestInfo nonblocking_tests[] = {
    {"several in flight, any order", test_nonblocking},
    {"free in flight", test_free_in_flight},
    CU_TEST_INFO_NULL};
/* A check word no rank could have sent (what a rank outside the check round,
 * e.g. in a data all-reduce, contributes): an error on every rank, never a
 * status or rank decoded from garbage. */
static void test_errors_malformed_word(void) {
  if (W < 2) return;
  float x[4] = {0};
  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){4});
  if (R == 1) dist__fault_site = "round_word";
  EXPECT_ERR(dist_all_reduce(NULL, &t, DIST_SUM), DIST_ERR_MISMATCH, NONE, "malformed check word", NULL);
  CU_ASSERT_PTR_NULL(dist__fault_site);
}

/* Many tensors whose counts each fit but whose sum does not: an error, not
 * a wrapped buffer size (16 x (2^60 - 1) + 17 u8 elements wrap to 1). */
static void test_errors_fused_overflow(void) {
  static uint8_t dummy[32];
  dist_tensor ts[17];
  for (int i = 0; i < 16; i++) ts[i] = dist_tensor_host(dummy, DIST_U8, 1, (int64_t[1]){((int64_t)1 << 60) - 1});
  ts[16] = dist_tensor_host(dummy, DIST_U8, 1, (int64_t[1]){17});
  EXPECT_ERR(dist_all_reduce_fused(NULL, ts, 17, DIST_SUM), DIST_ERR_INVALID_ARGUMENT, NONE, "u8", "overflow");
}

static CU_TestInfo error_tests[] = {
    {"fused tensors whose total overflows", test_errors_fused_overflow},
    {"same bad argument everywhere", test_errors_everywhere},
    {"a malformed check word", test_errors_malformed_word},
    {"one rank differs", test_errors_one_rank},
    {"sizes that overflow", test_errors_overflow},
    CU_TEST_INFO_NULL};
static CU_TestInfo helper_tests[] = {{"16-bit conversions, dtype table", test_conversions}, CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"helpers", NULL, NULL, NULL, NULL, helper_tests},
                                {"reductions", NULL, NULL, NULL, NULL, reduction_tests},
                                {"data movement", NULL, NULL, NULL, NULL, movement_tests},
                                {"non-blocking", NULL, NULL, NULL, NULL, nonblocking_tests},
                                {"errors", NULL, NULL, NULL, NULL, error_tests},
                                CU_SUITE_INFO_NULL};


int main(void) {
  dist_status s = dist_manager_initialize();
  if (s != DIST_SUCCESS) {
    fprintf(stderr, "initialize: %s (%s)\n", dist_status_string(s), dist_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &R);
  /* A group other than the world: pairs (singletons at odd sizes). Collective over the world. */
  int failed = 0;
  if ((s = dist_group_create_subgroup("pair", W % 2 == 0 ? 2 : 1, NULL)) != DIST_SUCCESS) {
    fprintf(stderr, "create pair: %s\n", dist_last_error());
    failed++;
  }
  failed += group_info(NULL, &groups[0]) + group_info("pair", &groups[1]);
  int any = 0; /* run the collectives on every rank or on none */
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  char tag[64];
  snprintf(tag, sizeof tag, "test_coll[rank %d/%d]", R, W);
  if (!any) failed += cunit_run(suites, tag, R != 0);
  if (dist_manager_finalize() != DIST_SUCCESS) failed++;
  /* MPI is still up (distmgr finalizes it at exit): agree on the verdict. */
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (R == 0) printf("test_coll: %d failure(s) over %d rank(s)\n", total, W);
  return total != 0;
}
