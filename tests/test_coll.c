/* The collectives of coll.h: one suite, run over every backend (at 1, 2, 3
 * and 4 ranks; 3 gives uneven splits). This file builds two programs:
 *  - tests/test_coll: tensors in host memory, carried by the host engine (MPI, or Gloo without MPI);
 *  - tests/test_coll_cuda (COLL_DEVICE): tensors in cudaMalloc'd memory,
 *    carried by the engine DIST_CUDA_BACKEND picks at initialize. make check
 *    runs it as test_coll_cuda-npN (auto) and, through tests/mpi-launch.sh,
 *    as test_coll_cuda-npN-staged and -npN-nccl. On device memory each call
 *    also runs on host copies of its tensors (twins, coll_memory.h), and the
 *    two results are compared. It exits 77 (SKIP, with the reason) in a
 *    build without CUDA, when some rank has no device, or when the engine
 *    serves none of the test's groups (NCCL refuses two ranks on one GPU).
 *
 * Every rank can regenerate any rank's input from (seed, world rank), so each
 * result is compared with a serial reference computed here: reductions in
 * double, then averaged and rounded once to the dtype (as the library must do
 * for 16-bit floats, which it reduces in f32), compared with a per-dtype
 * tolerance; calls that only move data are compared byte for byte. Seeds come
 * from a counter that advances identically on every rank.
 *
 * The cases are listed once, in CASES at the end, each with the rank counts
 * and the memory it applies to; rank 0 prints a line for each case that does
 * not apply to the run. "PROGRAM --list" prints the cases of a program with
 * their rank counts, which tests/rank_counts.sh compares with the rank counts
 * Makefile.am runs the program at. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <math.h>
#include <mpi.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cunit_mpi.h"
#include "coll_values.h" /* groups, dtypes, seeded values */
#include "coll_memory.h" /* MEM, buf, passes and twins */
#include "core/fault.h"  /* dist__fault_site: one rank sends a malformed check word */
#ifdef COLL_DEVICE
#include "cuda_skip.h" /* cuda_missing */
#endif

#ifdef COLL_DEVICE
#define PROGRAM "test_coll_cuda"
#else
#define PROGRAM "test_coll"
#endif
#define MAXW 64 /* the most ranks the fixed arrays below hold */

static int W, R;    /* world size and rank (the harness's) */
static uint64_t seq; /* seed of the next check: the same sequence on every rank */

static grp groups[2]; /* the world (named NULL) and "pair" (size 2, or 1 at odd W) */
#define NGROUPS 2
/* Groups whose collectives run in MEM on every rank (device runs: the engine
 * in force serves them); the cases go over these. */
static int group_on[NGROUPS] = {1, 1};
#define FOR_GROUPS(gi)                                                                                                 \
  for (int gi = 0; gi < NGROUPS; gi++)                                                                                 \
    if (!group_on[gi]) continue;                                                                                       \
    else

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

/* ---- tensors ------------------------------------------------------------------ */

/* A host-only buffer (for references): owner >= 0: owner's data for (seed,
 * op); owner < 0: the 0x5A pattern of buf_host. */
static buf make_ref(dist_dtype dt, int ndim, const int64_t *shape, uint64_t seed, int owner, dist_reduce_op op) {
  buf b = buf_host(dt, ndim, shape);
  if (owner >= 0) fill(dt, b.mem, b.n, seed, owner, op);
  return b;
}

/* The same, placed in the memory under test (and in a host twin): a call's tensor. */
static buf make(dist_dtype dt, int ndim, const int64_t *shape, uint64_t seed, int owner, dist_reduce_op op) {
  buf b = make_ref(dt, ndim, shape, seed, owner, op);
  buf_place(&b);
  return b;
}
#define make_out(dt, ndim, shape) make(dt, ndim, shape, 0, -1, DIST_SUM)

/* A call's tensor holding the given host values. */
static buf make_from(const void *values, dist_dtype dt, int ndim, const int64_t *shape) {
  buf b = buf_host(dt, ndim, shape);
  memcpy(b.mem, values, b.bytes);
  buf_place(&b);
  return b;
}

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

/* `what` of pass k: the call itself, or the same call on the host twins. */
static const char *pass_what(const char *what, int k) {
  static char text[240];
  if (!k) return what;
  snprintf(text, sizeof text, "the same on the host: %s", what);
  return text;
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

/* got (n elements of dtype dt) against want: cvals (already rounded to dt),
 * or (want NULL) n elements of dt at want_raw. */
#define EXPECT_CLOSE(dt, got, want, n, what) expect_close_(dt, got, want, NULL, n, what, __LINE__)
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

#define EXPECT_BYTES(got, want, nbytes, what) expect_bytes_(got, want, nbytes, what, __LINE__)
static void expect_bytes_(const void *got, const void *want, size_t nbytes, const char *what, int line) {
  size_t i = 0;
  while (i < nbytes && ((const unsigned char *)got)[i] == ((const unsigned char *)want)[i]) i++;
  if (i < nbytes)
    fprintf(stderr, "[rank %d/%d] line %d: %s: first differing byte %zu of %zu\n", R, W, line, what, i, nbytes);
  assert_at(i == nbytes, line, what);
}

/* Device runs, when both passes succeeded: the fetched result equals the host
 * twin's, within the dtype's tolerance (TWIN_CLOSE) or byte for byte. */
#define TWIN_CLOSE(b, ok) twin_check_((b), (ok), 0, __LINE__)
#define TWIN_BYTES(b, ok) twin_check_((b), (ok), 1, __LINE__)
static void twin_check_(const buf *b, const int ok[2], int bytes, int line) {
  const char *what = "device result equals host result";
  if (!MEM->twins || !ok[0] || !ok[1]) return;
  if (bytes) expect_bytes_(b->mem, b->twin_mem, b->bytes, what, line);
  else expect_close_(b->t.dtype, b->mem, NULL, b->twin_mem, b->n, what, line);
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
    buf b = make_ref(dt, 3, shp, seed, g->world[r], DIST_SUM);
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
    buf src = make_ref(dt, 3, shp, seed, g->world[a], DIST_SUM);
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
  case 5: return r % 2 ? 0 : 2;
  default: return r == 0 ? 0 : 2;
  }
}

/* ---- reductions --------------------------------------------------------------- */

/* Every member holds the same bits (DDP's replicas stay identical only so):
 * the group's rank 0 broadcasts its result, each compares byte for byte. */
static void expect_same_everywhere(const grp *g, const buf *b, const char *what) {
  buf first = make_from(b->mem, b->t.dtype, b->t.ndim, b->t.shape);
  if (CALL_OK(dist_broadcast(g->name, T(&first, 0), 0), "broadcast of rank 0's result")) {
    buf_fetch(&first);
    if (memcmp(first.mem, b->mem, b->bytes)) {
      fprintf(stderr, "%s: rank %d's result differs from rank 0's\n", what, R);
      CU_FAIL("all-reduce results differ between ranks");
    }
  }
  buf_free(&first);
}

static void check_all_reduce(const grp *g, dist_dtype dt, dist_reduce_op op, int ndim, const int64_t *shape) {
  uint64_t seed = ++seq;
  char what[160];
  snprintf(what, sizeof what, "all_reduce %s %s ndim %d over %s", DT_NAME[dt], OP_NAME[op], ndim, gname(g));
  buf b = make(dt, ndim, shape, seed, g->world[g->rank], op);
  cval *want = calloc((size_t)b.n + 1, sizeof *want);
  ref_reduce(g, dt, op, b.n, seed, want);
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++) ok[k] = CALL_OK(dist_all_reduce(g->name, T(&b, k), op), pass_what(what, k));
  buf_fetch(&b);
  if (ok[0]) EXPECT_CLOSE(dt, b.mem, want, b.n, what);
  if (ok[0]) expect_same_everywhere(g, &b, what);
  TWIN_CLOSE(&b, ok);
  free(want);
  buf_free(&b);
}

static const dist_dtype ALL_DTYPES[] = {DIST_F32, DIST_F64, DIST_BF16, DIST_F16, DIST_C64,
                                        DIST_C128, DIST_I32, DIST_I64, DIST_U8};
#define NDTYPES ((int)(sizeof ALL_DTYPES / sizeof ALL_DTYPES[0]))

/* Every dtype with every op it supports, on a scalar, a 1-D and a 3-D tensor;
 * then sum, avg and max of f32, bf16 and c64 on a {3, 5} tensor. */
static void test_all_reduce(void) {
  const int64_t s1[1] = {7}, s3[3] = {2, 3, 4}, s2[2] = {3, 5};
  FOR_GROUPS(gi) {
    for (int d = 0; d < NDTYPES; d++)
      for (int op = 0; op < DIST_REDUCE_OP_COUNT; op++) {
        if (is_complex(ALL_DTYPES[d]) && (op == DIST_MAX || op == DIST_MIN)) continue; /* see test_errors */
        int pick = (d + op) % 3;
        check_all_reduce(&groups[gi], ALL_DTYPES[d], (dist_reduce_op)op, pick == 0 ? 0 : pick == 1 ? 1 : 3,
                         pick == 2 ? s3 : s1);
      }
    const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_C64};
    const dist_reduce_op ops[] = {DIST_SUM, DIST_AVG, DIST_MAX};
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        if (!(is_complex(dts[i]) && ops[j] == DIST_MAX)) check_all_reduce(&groups[gi], dts[i], ops[j], 2, s2);
  }
  if (!group_on[0]) return;
  /* An empty tensor with NULL data is a valid no-op; "world" by name. */
  int64_t zero = 0, one = 1;
  buf e = make_out(DIST_F32, 1, &zero);
  for (int k = 0; k < PASSES; k++)
    CALL_OK(dist_all_reduce("world", T(&e, k), DIST_SUM), pass_what("all_reduce of an empty tensor", k));
  buf_free(&e);
  int32_t v = R + 1;
  buf t = make_from(&v, DIST_I32, 1, &one);
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++)
    ok[k] = CALL_OK(dist_all_reduce("world", T(&t, k), DIST_SUM), pass_what("all_reduce over \"world\"", k));
  buf_fetch(&t);
  memcpy(&v, t.mem, sizeof v);
  if (ok[0]) CU_ASSERT_EQUAL(v, W * (W + 1) / 2);
  TWIN_BYTES(&t, ok);
  buf_free(&t);
}

/* From DIST_NB_ALLREDUCE_MIN bytes (1 MiB with Open MPI by default) a blocking
 * host all-reduce runs as MPI_Iallreduce + MPI_Wait: just over the threshold,
 * an odd length, several dtypes and ops (on device memory: large buffers). */
static void test_all_reduce_large(void) {
  const int64_t n[1] = {(1 << 18) + 3}, n64[1] = {(1 << 17) + 5};
  FOR_GROUPS(gi) {
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
  buf b = make(dt, 2, shape, seed, g->world[g->rank], op), mine = make_ref(dt, 2, shape, seed, g->world[g->rank], op);
  cval *want = calloc((size_t)b.n, sizeof *want);
  ref_reduce(g, dt, op, b.n, seed, want);
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++) ok[k] = CALL_OK(dist_reduce(g->name, T(&b, k), op, root), pass_what(what, k));
  buf_fetch(&b);
  if (ok[0]) {
    if (g->rank == root) EXPECT_CLOSE(dt, b.mem, want, b.n, what);
    else EXPECT_BYTES(b.mem, mine.mem, b.bytes, what);
  }
  TWIN_CLOSE(&b, ok);
  free(want);
  buf_free(&b);
  free(mine.mem);
}

/* A u8 average must not wrap: 200 + 250 + ... over the world, then divided;
 * alone and as a fused list of one. */
static void test_average_no_wrap(void) {
  if (!group_on[0]) return;
  uint8_t v[3];
  int64_t n = 3;
  long sum[3] = {0, 0, 0};
  for (int r = 0; r < W; r++)
    for (int i = 0; i < 3; i++) sum[i] += 200 + (r * 7 + i * 13) % 56;
  for (int fused = 0; fused < 2; fused++) {
    for (int i = 0; i < 3; i++) v[i] = (uint8_t)(200 + (R * 7 + i * 13) % 56);
    buf b = make_from(v, DIST_U8, 1, &n);
    int ok[2] = {0, 0};
    for (int k = 0; k < PASSES; k++) {
      dist_status s = fused ? dist_all_reduce_fused(NULL, T(&b, k), 1, DIST_AVG)
                            : dist_all_reduce(NULL, T(&b, k), DIST_AVG);
      ok[k] = CALL_OK(s, pass_what(fused ? "all_reduce_fused u8 avg" : "all_reduce u8 avg", k));
    }
    buf_fetch(&b);
    memcpy(v, b.mem, sizeof v);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(v[i], sum[i] / W);
    TWIN_BYTES(&b, ok);
    buf_free(&b);
  }
}

static void test_reduce(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_F64, DIST_I32, DIST_C64, DIST_U8, DIST_F16, DIST_I64};
  const dist_reduce_op ops[] = {DIST_SUM, DIST_MAX, DIST_PROD, DIST_AVG, DIST_SUM, DIST_MIN, DIST_AVG, DIST_SUM};
  FOR_GROUPS(gi) {
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
  buf want = make_ref(dt, ndim, shape, seed, g->world[root], DIST_SUM);
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++) ok[k] = CALL_OK(dist_broadcast(g->name, T(&b, k), root), pass_what(what, k));
  buf_fetch(&b);
  if (ok[0]) EXPECT_BYTES(b.mem, want.mem, b.bytes, what);
  TWIN_BYTES(&b, ok);
  buf_free(&b);
  free(want.mem);
}

/* Six dtypes from three roots; then bf16 {4, 3} from the first and the last rank. */
static void test_broadcast(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_C128, DIST_I64, DIST_U8, DIST_F16};
  const int64_t s2[2] = {4, 3};
  FOR_GROUPS(gi) {
    const grp *g = &groups[gi];
    int roots[3] = {0, g->size / 2, g->size - 1};
    for (int i = 0; i < 6; i++) check_broadcast(g, dts[i], i == 5 ? 0 : 2, s2, roots[i % 3]);
    for (int root = 0; root < g->size; root += g->size > 1 ? g->size - 1 : 1)
      check_broadcast(g, DIST_BF16, 2, s2, root);
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

/* A list of n tensors (lens[i] elements of dts[i]; 0: empty, -1: a scalar)
 * reduced with op by all_reduce_fused, or by all_reduce_shared_grads (sum). */
static void check_fused(const grp *g, dist_reduce_op op, int shared_grads, const dist_dtype *dts, const int64_t *lens,
                        int count) {
  enum { N = 16 };
  buf b[N];
  dist_tensor ts[2][N];
  uint64_t seeds[N];
  int n = 0;
  for (int i = 0; i < count && n < N; i++) {
    if (is_complex(dts[i]) && (op == DIST_MAX || op == DIST_MIN)) continue;
    seeds[n] = ++seq;
    b[n] = make(dts[i], lens[i] < 0 ? 0 : 1, &lens[i], seeds[n], g->world[g->rank], op);
    n++;
  }
  char what[160];
  snprintf(what, sizeof what, "%s %s of %d tensors over %s", shared_grads ? "all_reduce_shared_grads" : "all_reduce_fused",
           OP_NAME[op], n, gname(g));
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++) {
    for (int i = 0; i < n; i++) ts[k][i] = *T(&b[i], k);
    dist_status s = shared_grads ? dist_all_reduce_shared_grads(g->name, ts[k], n)
                                 : dist_all_reduce_fused(g->name, ts[k], n, op);
    ok[k] = CALL_OK(s, pass_what(what, k));
  }
  for (int i = 0; i < n; i++) {
    buf_fetch(&b[i]);
    if (ok[0]) {
      cval *want = calloc((size_t)b[i].n + 1, sizeof *want);
      char w2[200];
      snprintf(w2, sizeof w2, "%s: tensor %d (%s)", what, i, DT_NAME[b[i].t.dtype]);
      ref_reduce(g, b[i].t.dtype, op, b[i].n, seeds[i], want);
      EXPECT_CLOSE(b[i].t.dtype, b[i].mem, want, b[i].n, w2);
      free(want);
    }
    TWIN_CLOSE(&b[i], ok);
    buf_free(&b[i]);
  }
}

/* A mixed list (every kind the fused call packs, a scalar and an empty
 * tensor) with every op and as shared gradients; then a list of 7 (two bf16). */
static void test_fused(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_F64, DIST_I32, DIST_U8, DIST_F16, DIST_I64, DIST_C64, DIST_F32,
                            DIST_C128, DIST_BF16};
  const int64_t lens[] = {7, 5, 3, 4, 6, 2, 1, 3, 0, 2, -1};
  const dist_dtype dts7[] = {DIST_F32, DIST_BF16, DIST_F64, DIST_I32, DIST_U8, DIST_C64, DIST_BF16};
  const int64_t lens7[] = {7, 5, 3, 4, 6, 2, 9};
  FOR_GROUPS(gi) {
    for (int op = 0; op < DIST_REDUCE_OP_COUNT; op++) check_fused(&groups[gi], (dist_reduce_op)op, 0, dts, lens, 11);
    check_fused(&groups[gi], DIST_SUM, 1, dts, lens, 11);
    check_fused(&groups[gi], DIST_SUM, 0, dts7, lens7, 7);
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
  void *want = calloc(out.bytes + 1, 1);
  ref_concat(g, dt, dim, sizes, seed, want);
  int receives = kind != GATHER_V || g->rank == dst;
  const int64_t *sz = pass_null ? NULL : sizes;
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++) {
    dist_tensor *ti = T(&in, k), *to = T(&out, k);
    dist_status s = kind == ALL_GATHER     ? dist_all_gather(g->name, ti, to, dim)
                    : kind == ALL_GATHER_V ? dist_all_gather_v(g->name, ti, to, dim, sz)
                                           : dist_gather_v(g->name, ti, receives ? to : NULL, dim, sz, dst);
    ok[k] = CALL_OK(s, pass_what(what, k));
  }
  buf_fetch(&out);
  if (ok[0] && receives) EXPECT_BYTES(out.mem, want, out.bytes, what);
  if (receives) TWIN_BYTES(&out, ok);
  free(want);
  buf_free(&in);
  buf_free(&out);
}

static void sizes_of(const grp *g, int p, int64_t *sizes) {
  for (int r = 0; r < g->size; r++) sizes[r] = pattern(p, r);
}

static void test_all_gather(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_C64};
  int64_t sizes[MAXW];
  FOR_GROUPS(gi) {
    sizes_of(&groups[gi], 0, sizes);
    for (int dim = 0; dim < 3; dim++) check_gather(&groups[gi], ALL_GATHER, dts[(dim + gi) % 4], dim, sizes, 0, 0);
  }
}

/* Patterns 1-4 along every dim, f32 r+1 slices and bf16 0 or 2 slices along
 * dim 1, and NULL sizes. */
static void test_all_gather_v(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_U8, DIST_C128, DIST_F16};
  int64_t sizes[MAXW];
  FOR_GROUPS(gi) {
    for (int p = 1; p <= 4; p++)
      for (int dim = 0; dim < 3; dim++) {
        sizes_of(&groups[gi], p, sizes);
        check_gather(&groups[gi], ALL_GATHER_V, dts[(p + dim) % 6], dim, sizes, 0, 0);
      }
    sizes_of(&groups[gi], 1, sizes);
    check_gather(&groups[gi], ALL_GATHER_V, DIST_F32, 1, sizes, 0, 0);
    sizes_of(&groups[gi], 5, sizes);
    check_gather(&groups[gi], ALL_GATHER_V, DIST_BF16, 1, sizes, 0, 0);
  }
  FOR_GROUPS(gi) { /* NULL sizes: everyone's equals mine */
    sizes_of(&groups[gi], 0, sizes);
    check_gather(&groups[gi], ALL_GATHER_V, DIST_F64, 1, sizes, 1, 0);
  }
}

static void test_gather_v(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_I32, DIST_BF16, DIST_C64};
  int64_t sizes[MAXW];
  FOR_GROUPS(gi) {
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
  void *want = calloc(out.bytes + 1, 1);
  copy_slices(want, sizes[g->rank], 0, in.mem, total, off, sizes[g->rank], outer3(dim),
              (size_t)inner3(dim) * DT_SIZE[dt]);
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++)
    ok[k] = CALL_OK(dist_scatter_v(g->name, g->rank == src ? T(&in, k) : NULL, T(&out, k), dim,
                                   pass_null ? NULL : sizes, src),
                    pass_what(what, k));
  buf_fetch(&out);
  if (ok[0]) EXPECT_BYTES(out.mem, want, out.bytes, what);
  TWIN_BYTES(&out, ok);
  free(want);
  buf_free(&in);
  buf_free(&out);
}

static void test_scatter_v(void) {
  const dist_dtype dts[] = {DIST_F64, DIST_BF16, DIST_I32, DIST_C64, DIST_U8};
  int64_t sizes[MAXW];
  FOR_GROUPS(gi) {
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
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++)
    ok[k] = CALL_OK(dist_reduce_scatter_v(g->name, T(&in, k), T(&out, k), dim, pass_null ? NULL : sizes, op),
                    pass_what(what, k));
  buf_fetch(&out);
  if (ok[0]) EXPECT_CLOSE(dt, out.mem, want, out.n, what);
  TWIN_CLOSE(&out, ok);
  free(full);
  free(want);
  buf_free(&in);
  buf_free(&out);
}

/* Six dtype/op pairs over patterns and dims, f32 sum and bf16 max with r+1
 * slices along dim 1, and NULL sizes. */
static void test_reduce_scatter_v(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_C64, DIST_F16, DIST_U8};
  const dist_reduce_op ops[] = {DIST_SUM, DIST_AVG, DIST_MAX, DIST_PROD, DIST_SUM, DIST_MIN};
  int64_t sizes[MAXW];
  FOR_GROUPS(gi) {
    const grp *g = &groups[gi];
    for (int i = 0; i < 6; i++) {
      sizes_of(g, i % 5, sizes);
      check_reduce_scatter(g, dts[i], ops[i], i % 3, sizes, 0);
    }
    sizes_of(g, 1, sizes);
    check_reduce_scatter(g, DIST_F32, DIST_SUM, 1, sizes, 0);
    check_reduce_scatter(g, DIST_BF16, DIST_MAX, 1, sizes, 0);
    sizes_of(g, 0, sizes); /* NULL: equal chunks */
    check_reduce_scatter(g, DIST_F64, DIST_SUM, 1, sizes, 1);
  }
}

/* all_to_all (k < 0) or all_to_all_v with pattern k. */
static void check_all_to_all(const grp *g, dist_dtype dt, int dim, int k) {
  uint64_t seed = ++seq;
  int64_t send[MAXW], recv[MAXW], in_ext = 0, out_ext = 0, shp[3], oshp[3];
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
  void *want = calloc(out.bytes + 1, 1);
  ref_a2a(g, dt, dim, k, seed, want);
  int ok[2] = {0, 0};
  for (int p = 0; p < PASSES; p++) {
    dist_status s = k < 0 ? dist_all_to_all(g->name, T(&in, p), T(&out, p), dim)
                          : dist_all_to_all_v(g->name, T(&in, p), T(&out, p), dim, send, recv);
    ok[p] = CALL_OK(s, pass_what(what, p));
  }
  buf_fetch(&out);
  if (ok[0]) EXPECT_BYTES(out.mem, want, out.bytes, what);
  TWIN_BYTES(&out, ok);
  free(want);
  buf_free(&in);
  buf_free(&out);
}

/* all_to_all along every dim; all_to_all_v patterns 0-3 along every dim, and
 * patterns 0-2 in f32, c64 and f32 along dim 1. */
static void test_all_to_all(void) {
  const dist_dtype dts[] = {DIST_F32, DIST_BF16, DIST_I64, DIST_C128, DIST_U8};
  FOR_GROUPS(gi) {
    for (int dim = 0; dim < 3; dim++) check_all_to_all(&groups[gi], dts[dim], dim, -1);
    for (int k = 0; k < 4; k++)
      for (int dim = 0; dim < 3; dim++) check_all_to_all(&groups[gi], dts[(k + dim) % 5], dim, k);
    for (int k = 0; k < 3; k++) check_all_to_all(&groups[gi], k == 1 ? DIST_C64 : DIST_F32, 1, k);
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* one clock for all ranks of a node */
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* No member leaves the barrier before the last one (delayed on purpose)
 * entered. Clock readings are only compared between ranks of one node. */
/* Buffers larger than one round of the shared-memory engine (256 KiB per
 * member), with uneven sizes, so that every call runs several rounds whose
 * last one is partial and whose blocks run out at different rounds: every
 * engine must give the same values. Small integers: every sum is exact. */
static float big_val(long r, long i) { return (float)((r * 7 + i) % 1000); }

static int big_mismatches(const float *got, long n, long r, long from) {
  int bad = 0;
  for (long i = 0; i < n; i++) bad += got[i] != big_val(r, from + i);
  return bad;
}

static void test_large_rounds(void) {
  long n = 100003, sizes[MAXW], off[MAXW + 1];
  int64_t sz[MAXW];
  off[0] = 0;
  for (int r = 0; r < W; r++) sizes[r] = 65536 + 40009L * r, sz[r] = sizes[r], off[r + 1] = off[r] + sizes[r];
  float *a = malloc(sizeof *a * (size_t)(off[W] + n)), *b = malloc(sizeof *b * (size_t)(off[W] + n));
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  /* all-reduce: the sum of every rank's values */
  for (long i = 0; i < n; i++) a[i] = big_val(R, i);
  dist_tensor t = dist_tensor_host(a, DIST_F32, 1, (int64_t[1]){n});
  ASSERT_OK(dist_all_reduce(NULL, &t, DIST_SUM));
  int bad = 0;
  for (long i = 0; i < n; i++) {
    double want = 0;
    for (int r = 0; r < W; r++) want += big_val(r, i);
    bad += a[i] != (float)want;
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* broadcast from the last rank */
  for (long i = 0; i < n; i++) a[i] = R == W - 1 ? big_val(W - 1, i) : -1.0f;
  ASSERT_OK(dist_broadcast(NULL, &t, W - 1));
  CU_ASSERT_EQUAL(big_mismatches(a, n, W - 1, 0), 0);
  /* all-gather-v and gather-v: block r is rank r's values */
  for (long i = 0; i < sizes[R]; i++) a[i] = big_val(R, i);
  dist_tensor in = dist_tensor_host(a, DIST_F32, 1, (int64_t[1]){sizes[R]});
  dist_tensor out = dist_tensor_host(b, DIST_F32, 1, (int64_t[1]){off[W]});
  for (int k = 0; k < 2; k++) {
    for (long i = 0; i < off[W]; i++) b[i] = -1.0f;
    ASSERT_OK(k ? dist_gather_v(NULL, &in, &out, 0, sz, 0) : dist_all_gather_v(NULL, &in, &out, 0, sz));
    for (int r = 0; (k == 0 || R == 0) && r < W; r++) CU_ASSERT_EQUAL(big_mismatches(b + off[r], sizes[r], r, 0), 0);
  }
  /* scatter-v from the last rank: block r to rank r */
  for (int r = 0; r < W; r++)
    for (long i = 0; i < sizes[r]; i++) a[off[r] + i] = big_val(r, i);
  dist_tensor all = dist_tensor_host(a, DIST_F32, 1, (int64_t[1]){off[W]});
  dist_tensor mine = dist_tensor_host(b, DIST_F32, 1, (int64_t[1]){sizes[R]});
  ASSERT_OK(dist_scatter_v(NULL, &all, &mine, 0, sz, W - 1));
  CU_ASSERT_EQUAL(big_mismatches(b, sizes[R], R, 0), 0);
  /* reduce-scatter-v: rank R keeps the sum of block R */
  for (long i = 0; i < off[W]; i++) a[i] = big_val(R, i);
  ASSERT_OK(dist_reduce_scatter_v(NULL, &all, &mine, 0, sz, DIST_SUM));
  bad = 0;
  for (long i = 0; i < sizes[R]; i++) {
    double want = 0;
    for (int r = 0; r < W; r++) want += big_val(r, off[R] + i);
    bad += b[i] != (float)want;
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* all-to-all-v: rank r sends rank q 30000 + 9001 ((r + q) mod W) + 5 r values of big_val(r W + q, .) */
  int64_t send[MAXW], recv[MAXW];
  long so = 0, ro = 0;
  for (int q = 0; q < W; q++) {
    send[q] = 30000 + 9001L * ((R + q) % W) + 5L * R, recv[q] = 30000 + 9001L * ((q + R) % W) + 5L * q;
    for (long i = 0; i < send[q]; i++) a[so + i] = big_val((long)R * W + q, i);
    so += send[q], ro += recv[q];
  }
  dist_tensor ain = dist_tensor_host(a, DIST_F32, 1, (int64_t[1]){so}), aout = dist_tensor_host(b, DIST_F32, 1, (int64_t[1]){ro});
  ASSERT_OK(dist_all_to_all_v(NULL, &ain, &aout, 0, send, recv));
  ro = 0;
  for (int r = 0; r < W; r++) {
    CU_ASSERT_EQUAL(big_mismatches(b + ro, recv[r], (long)r * W + R, 0), 0);
    ro += recv[r];
  }
  free(a), free(b);
}

static void test_barrier(void) {
  int node = 0, nodes[64];
  ASSERT_OK(dist_manager_node(&node));
  cunit_all_gather_int(node, nodes);
  for (int gi = 0; gi < NGROUPS; gi++) {
    const grp *g = &groups[gi];
    cunit_barrier();
    if (g->rank == g->size - 1) nanosleep(&(struct timespec){0, 30000000}, NULL);
    double enter = now(), entered[64], last = 0;
    CALL_OK(dist_barrier(g->name), "barrier");
    double left = now();
    { /* every rank's entry time, over the world's host engine */
      int64_t one = 1, w = W;
      dist_tensor in = dist_tensor_host(&enter, DIST_F64, 1, &one), out = dist_tensor_host(entered, DIST_F64, 1, &w);
      ASSERT_OK(dist_all_gather(NULL, &in, &out, 0));
    }
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
  FOR_GROUPS(gi) {
    const grp *g = &groups[gi];
    int me = g->rank;
    uint64_t sa = ++seq, sb = ++seq, sc = ++seq, sd = ++seq, se = ++seq;
    /* A: f32 sum, D: c64 avg, E: u8 max (all-reduce); B: bf16 all_gather_v along
     * the middle dim (pattern 2); C: i64 all_to_all_v along the last dim. */
    int64_t sa_shape[2] = {5, 3}, sd_shape[1] = {4}, se_shape[1] = {9}, bsizes[MAXW], send[MAXW], recv[MAXW], bext = 0,
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

    int started[2] = {0, 0};
    for (int k = 0; k < PASSES; k++) {
      dist_request *ra = NULL, *rb = NULL, *rc = NULL, *rd = NULL, *re = NULL;
      int s = CALL_OK(dist_all_reduce_start(g->name, T(&a, k), DIST_SUM, &ra),
                      pass_what("all_reduce_start f32 sum", k));
      s &= CALL_OK(dist_all_gather_v_start(g->name, T(&bin, k), T(&bout, k), 1, bsizes, &rb),
                   "all_gather_v_start bf16");
      s &= CALL_OK(dist_all_to_all_v_start(g->name, T(&c_in, k), T(&c_out, k), 2, send, recv, &rc),
                   "all_to_all_v_start i64");
      s &= CALL_OK(dist_all_reduce_start(g->name, T(&d, k), DIST_AVG, &rd), "all_reduce_start c64 avg");
      s &= CALL_OK(dist_all_reduce_start(g->name, T(&e, k), DIST_MAX, &re), "all_reduce_start u8 max");
      if (s) {
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
      }
      dist_request *reqs[5] = {ra, rb, rc, rd, re};
      for (int i = 0; i < 5; i++) CALL_OK(dist_request_free(reqs[i]), "free a completed request");
      started[k] = s;
    }
    buf_fetch(&a), buf_fetch(&d), buf_fetch(&e), buf_fetch(&bout), buf_fetch(&c_out);
    if (started[0]) {
      cval *want = calloc(64, sizeof *want);
      ref_reduce(g, DIST_F32, DIST_SUM, a.n, sa, want);
      EXPECT_CLOSE(DIST_F32, a.mem, want, a.n, "non-blocking all_reduce f32 sum");
      ref_reduce(g, DIST_C64, DIST_AVG, d.n, sd, want);
      EXPECT_CLOSE(DIST_C64, d.mem, want, d.n, "non-blocking all_reduce c64 avg");
      ref_reduce(g, DIST_U8, DIST_MAX, e.n, se, want);
      EXPECT_CLOSE(DIST_U8, e.mem, want, e.n, "non-blocking all_reduce u8 max");
      free(want);
      void *wb = calloc(bout.bytes + 1, 1), *wc = calloc(c_out.bytes + 1, 1);
      ref_concat(g, DIST_BF16, 1, bsizes, sb, wb);
      EXPECT_BYTES(bout.mem, wb, bout.bytes, "non-blocking all_gather_v bf16");
      ref_a2a(g, DIST_I64, 2, 1, sc, wc);
      EXPECT_BYTES(c_out.mem, wc, c_out.bytes, "non-blocking all_to_all_v i64");
      free(wb);
      free(wc);
    }
    TWIN_CLOSE(&a, started), TWIN_CLOSE(&d, started), TWIN_CLOSE(&e, started);
    TWIN_BYTES(&bout, started), TWIN_BYTES(&c_out, started);
    buf_free(&a), buf_free(&d), buf_free(&e), buf_free(&bin), buf_free(&bout), buf_free(&c_in), buf_free(&c_out);
  }
}

/* One all_reduce_start at a time, waited and freed: f32 sum over each group,
 * bf16 average over the world. */
static void check_all_reduce_start(const grp *g, dist_dtype dt, dist_reduce_op op) {
  uint64_t seed = ++seq;
  int64_t shape[2] = {3, 5};
  char what[160];
  snprintf(what, sizeof what, "all_reduce_start %s %s over %s", DT_NAME[dt], OP_NAME[op], gname(g));
  buf b = make(dt, 2, shape, seed, g->world[g->rank], op);
  cval *want = calloc((size_t)b.n, sizeof *want);
  ref_reduce(g, dt, op, b.n, seed, want);
  int ok[2] = {0, 0};
  for (int k = 0; k < PASSES; k++) {
    dist_request *req = NULL;
    ok[k] = CALL_OK(dist_all_reduce_start(g->name, T(&b, k), op, &req), pass_what(what, k));
    if (ok[k]) ok[k] = CALL_OK(dist_request_wait(req), "wait");
    if (req) CALL_OK(dist_request_free(req), "free");
  }
  buf_fetch(&b);
  if (ok[0]) EXPECT_CLOSE(dt, b.mem, want, b.n, what);
  TWIN_CLOSE(&b, ok);
  free(want);
  buf_free(&b);
}

static void test_start_wait(void) {
  FOR_GROUPS(gi) check_all_reduce_start(&groups[gi], DIST_F32, DIST_SUM);
  if (group_on[0]) check_all_reduce_start(&groups[0], DIST_BF16, DIST_AVG);
}

/* Freeing a request never waited is a usage error, but free completes it:
 * the result is final and correct afterwards. */
static void test_free_in_flight(void) {
  FOR_GROUPS(gi) {
    const grp *g = &groups[gi];
    uint64_t seed = ++seq;
    int64_t shape[1] = {6};
    buf b = make(DIST_F64, 1, shape, seed, g->world[g->rank], DIST_SUM);
    cval want[6];
    ref_reduce(g, DIST_F64, DIST_SUM, 6, seed, want);
    int ok[2] = {0, 0};
    for (int k = 0; k < PASSES; k++) {
      /* Ranks other than 0 start late, so rank 0's request is surely still in flight. */
      cunit_barrier();
      if (R != 0) nanosleep(&(struct timespec){0, 20000000}, NULL);
      dist_request *req = NULL;
      if (CALL_OK(dist_all_reduce_start(g->name, T(&b, k), DIST_SUM, &req), pass_what("all_reduce_start f64", k))) {
        ASSERT_STATUS(dist_request_free(req), DIST_ERR_INVALID_ARGUMENT);
        ok[k] = 1;
      }
    }
    buf_fetch(&b);
    if (ok[0]) EXPECT_CLOSE(DIST_F64, b.mem, want, 6, "all_reduce completed by dist_request_free");
    TWIN_CLOSE(&b, ok);
    buf_free(&b);
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
  int mine = (int)got, lo = cunit_all_reduce_int(mine, DIST_MIN), hi = cunit_all_reduce_int(mine, DIST_MAX);
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

/* An all-to-all-v whose data went before its check round (backend/spec.h)
 * must leave nothing behind when the round fails: every data message taken
 * or drained, every receive matched or cancelled. A correct exchange of
 * rendezvous-sized chunks afterwards proves it: a stray message would land in
 * it (or, one in flight for ever, hang it). */
#define SPEC_CHUNK 20000 /* floats per peer: past every eager limit */

static float spec_value(int src, int dst, int64_t i) { return (float)(src * 1000003 + dst * 7919) + (float)i; }

static void a2a_works(int line) {
  int64_t ss[MAXW], rs[MAXW], nin = 0, nout = 0;
  for (int r = 0; r < W; r++) ss[r] = SPEC_CHUNK + r, rs[r] = SPEC_CHUNK + R, nin += ss[r], nout += rs[r];
  float *in = malloc(sizeof *in * (size_t)nin), *out = malloc(sizeof *out * (size_t)nout);
  int64_t off = 0;
  for (int r = 0; r < W; r++)
    for (int64_t i = 0; i < ss[r]; i++) in[off++] = spec_value(R, r, i);
  dist_tensor ti = dist_tensor_host(in, DIST_F32, 1, &nin), to = dist_tensor_host(out, DIST_F32, 1, &nout);
  dist_status s = dist_all_to_all_v(NULL, &ti, &to, 0, ss, rs);
  int bad = 0;
  off = 0;
  for (int r = 0; r < W && !s; r++)
    for (int64_t i = 0; i < rs[r]; i++) bad += out[off++] != spec_value(r, R, i);
  if (s || bad)
    fprintf(stderr, "[rank %d/%d] line %d: the all_to_all_v after the error: %d (%s), %d wrong values\n", R, W, line,
            (int)s, s ? dist_last_error() : "", bad);
  assert_at(!s && !bad, line, "a valid all_to_all_v works after the error");
  free(in);
  free(out);
}

/* Rank 1's arguments differ from everyone else's; the others' data is
 * already on its way when the round finds out. */
static void test_errors_speculated(void) {
  const dist_status INV = DIST_ERR_INVALID_ARGUMENT, MIS = DIST_ERR_MISMATCH;
  int64_t ss[MAXW], rs[MAXW], nin = 0, nout = 0;
  for (int r = 0; r < W; r++) ss[r] = rs[r] = SPEC_CHUNK, nin += ss[r], nout += rs[r];
  float *in = calloc((size_t)nin + 64, sizeof *in), *out = calloc((size_t)nout + 64, sizeof *out);
  dist_tensor ti = dist_tensor_host(in, DIST_F32, 1, &nin), to = dist_tensor_host(out, DIST_F32, 1, &nout);
  a2a_works(__LINE__);

  /* A different collective: rank 1 posted no receives; its messages are drained. */
  EXPECT_ERR(R == 1 ? dist_all_reduce(NULL, &ti, DIST_SUM) : dist_all_to_all_v(NULL, &ti, &to, 0, ss, rs), MIS, NONE,
             NULL, NULL);
  a2a_works(__LINE__);

  /* The non-blocking form does not speculate: rank 1 again posted nothing. */
  dist_request *req = NULL;
  EXPECT_ERR(R == 1 ? dist_all_to_all_v_start(NULL, &ti, &to, 0, ss, rs, &req) : dist_all_to_all_v(NULL, &ti, &to, 0, ss, rs),
             MIS, NONE, NULL, NULL);
  CU_ASSERT_PTR_NULL(req);
  a2a_works(__LINE__);

  /* A rank-local invalid argument: rank 1 never posts. */
  dist_tensor nodata = dist_tensor_host(R == 1 ? NULL : in, DIST_F32, 1, &nin);
  EXPECT_ERR(dist_all_to_all_v(NULL, &nodata, &to, 0, ss, rs), INV, MIS, R == 1 ? NULL : "rank 1", NULL);
  a2a_works(__LINE__);

  /* Counts that do not pair up, both ways: rank 1 sends rank 0 more than it
   * expects (a truncated receive) or fewer. */
  for (int more = 0; more < 2; more++) {
    int64_t s2[MAXW], n2 = 0, d = more ? 64 : -64;
    for (int r = 0; r < W; r++) s2[r] = ss[r] + (R == 1 && r == 0 ? d : 0), n2 += s2[r];
    dist_tensor t2 = dist_tensor_host(in, DIST_F32, 1, &n2);
    EXPECT_ERR(dist_all_to_all_v(NULL, &t2, &to, 0, s2, rs), MIS, NONE, "rank 1 of group 'world' sends", "rank 0");
    a2a_works(__LINE__);
  }

  /* The same counts under another shape: both post, the hashes differ. */
  int64_t sh2[2] = {nin, 1}, so2[2] = {nout, 1};
  dist_tensor t2i = dist_tensor_host(in, DIST_F32, 2, sh2), t2o = dist_tensor_host(out, DIST_F32, 2, so2);
  EXPECT_ERR(R == 1 ? dist_all_to_all_v(NULL, &t2i, &t2o, 0, ss, rs) : dist_all_to_all_v(NULL, &ti, &to, 0, ss, rs),
             MIS, NONE, NULL, NULL);
  a2a_works(__LINE__);
  free(in);
  free(out);
}

/* Sizes that overflow (issue 18): shapes whose element or byte count does
 * not fit int64 (f32[2^40, 2^40] wrapped to 0 elements and "reduced"
 * successfully), and (test_errors_overflow_ranks, from 2 ranks) sums over
 * the ranks that wrap ({8, INT64_MAX, INT64_MAX, 10} adds up to 16). Every
 * rank passes them (each rank's own check fails), so every rank gets invalid
 * argument with a message naming the argument and saying it overflows. The
 * data buffer is never read: every call must stop in its checks. */
static void test_errors_overflow(void) {
  static uint8_t bytes[256];
  const dist_status INV = DIST_ERR_INVALID_ARGUMENT;
  const int64_t T40 = (int64_t)1 << 40;

  dist_tensor huge = dist_tensor_host(bytes, DIST_F32, 2, (int64_t[2]){T40, T40}); /* 2^80 elements */
  EXPECT_ERR(dist_all_reduce(NULL, &huge, DIST_SUM), INV, NONE, "'t'", "overflow");
  EXPECT_ERR(dist_reduce(NULL, &huge, DIST_SUM, 0), INV, NONE, "'t'", "overflow");
  EXPECT_ERR(dist_broadcast(NULL, &huge, 0), INV, NONE, "'t'", "overflow");
  dist_tensor fat = dist_tensor_host(bytes, DIST_F64, 1, (int64_t[1]){(int64_t)1 << 61}); /* 2^64 bytes */
  EXPECT_ERR(dist_all_reduce(NULL, &fat, DIST_SUM), INV, NONE, "'t'", "overflow");
  /* bf16[2^62 - 1] fits in bytes, but not as the f32 it is reduced in */
  dist_tensor half = dist_tensor_host(bytes, DIST_BF16, 1, (int64_t[1]){((int64_t)1 << 62) - 1});
  EXPECT_ERR(dist_all_reduce(NULL, &half, DIST_SUM), INV, NONE, "'t'", "overflow");
  dist_tensor small = dist_tensor_host(bytes, DIST_F32, 2, (int64_t[2]){1, 1});
  dist_tensor list[2] = {small, huge};
  EXPECT_ERR(dist_all_reduce_fused(NULL, list, 2, DIST_SUM), INV, NONE, "tensors[1]", "overflow");
  EXPECT_ERR(dist_all_gather(NULL, &small, &huge, 1), INV, NONE, "'out'", "overflow");
  EXPECT_ERR(dist_all_to_all(NULL, &huge, &huge, 0), INV, NONE, "'in'", "overflow");
}

/* Sums over the ranks that overflow (from 2 ranks: one rank has no sum or
 * product over ranks to overflow), as in test_errors_overflow. */
static void test_errors_overflow_ranks(void) {
  static uint8_t bytes[256];
  const dist_status INV = DIST_ERR_INVALID_ARGUMENT;
  /* Equal extents whose sum over the ranks overflows. */
  int64_t e = INT64_MAX / W + 1;
  dist_tensor part = dist_tensor_host(bytes, DIST_U8, 1, &e), one = dist_tensor_host(bytes, DIST_U8, 1, (int64_t[1]){1});
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
  dist_tensor mine = dist_tensor_host(bytes, DIST_U8, 1, &S[R]), whole = dist_tensor_host(bytes, DIST_U8, 1, &sum);
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

/* An all-to-all whose counts exceed the engine's (an MPI int) on one rank
 * only: each rank's counts are its own, so the check round must carry the
 * refusal, else the others would wait in MPI_Alltoallv for rank 0. Rank 0
 * keeps 2^31 one-byte slices to itself, every other rank one; the tensors
 * claim those extents over a small buffer, which nothing may touch. Both
 * paths that run the round before the data: a chunk layout that is packed
 * (dim 1), and the non-blocking call. Gloo's counts are size_t: not here. */
static void test_errors_engine_count(void) {
  const char *engine = NULL;
  ASSERT_OK(dist_coll_backend(NULL, DIST_MEM_HOST, &engine));
  if (!engine || strcmp(engine, "mpi")) {
    if (R == 0) printf("%s: engine count limit: none on %s, nothing to check\n", PROGRAM, engine ? engine : "?");
    return;
  }
  static uint8_t bytes[64];
  int64_t mine = R == 0 ? (int64_t)INT_MAX + 1 : 1, ss[64] = {0};
  ss[R] = mine;
  const char *says = R == 0 ? "has 4294967296 elements" : "rank 0";
  dist_tensor t = dist_tensor_host(bytes, DIST_U8, 2, (int64_t[2]){2, mine});
  EXPECT_ERR(dist_all_to_all_v(NULL, &t, &t, 1, ss, ss), DIST_ERR_UNSUPPORTED, NONE, says, NULL);
  t = dist_tensor_host(bytes, DIST_U8, 1, &mine);
  dist_request *req = NULL;
  if (R == 0) says = "has 2147483648 elements";
  EXPECT_ERR(dist_all_to_all_v_start(NULL, &t, &t, 0, ss, ss, &req), DIST_ERR_UNSUPPORTED, NONE, says, NULL);
  CU_ASSERT_PTR_NULL(req);
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

/* A check word no rank could have sent (what a rank outside the check round,
 * e.g. in a data all-reduce, contributes): an error on every rank, never a
 * status or rank decoded from garbage. */
static void test_errors_malformed_word(void) {
  float x[4] = {0};
  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){4});
  if (R == 1) dist__fault_site = "round_word";
  EXPECT_ERR(dist_all_reduce(NULL, &t, DIST_SUM), DIST_ERR_MISMATCH, NONE, "malformed check word", NULL);
  CU_ASSERT_PTR_NULL(dist__fault_site);
}

/* Rank 1's scratch allocation fails (a test fault site in dist__mem_alloc)
 * in each call that takes scratch before moving data: every rank returns an
 * error, none waits for rank 1 in the engine, and the group still works. */
static void test_errors_scratch_alloc(void) {
  float x[64] = {0}, y[256] = {0};
  uint16_t h[64] = {0};
  int64_t S[64];
  for (int r = 0; r < W; r++) S[r] = 1;
  dist_tensor in = dist_tensor_host(x, DIST_F32, 2, (int64_t[2]){2, 1});       /* dim 1: packed */
  dist_tensor all = dist_tensor_host(y, DIST_F32, 2, (int64_t[2]){2, W});
  dist_tensor a2a = dist_tensor_host(x, DIST_F32, 2, (int64_t[2]){2, W});
  dist_tensor a2a_out = dist_tensor_host(y, DIST_F32, 2, (int64_t[2]){2, W});
  dist_tensor half = dist_tensor_host(h, DIST_BF16, 1, (int64_t[1]){8});     /* reduced in f32 */
  dist_tensor list[2] = {dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){4}), dist_tensor_host(x + 4, DIST_F32, 1, (int64_t[1]){4})};
  const char *says = R == 1 ? "injected fault (mem_alloc)" : "rank 1";
#define ON_RANK_1(call)                                        \
  do {                                                         \
    if (R == 1) dist__fault_site = "mem_alloc";                \
    EXPECT_ERR(call, DIST_ERR_NO_MEMORY, NONE, says, NULL);    \
    CU_ASSERT_PTR_NULL(dist__fault_site);                      \
    dist__fault_site = NULL;                                   \
  } while (0)
  ON_RANK_1(dist_all_reduce_fused(NULL, list, 2, DIST_SUM));
  ON_RANK_1(dist_all_reduce(NULL, &half, DIST_SUM));
  ON_RANK_1(dist_all_gather_v(NULL, &in, &all, 1, S));
  ON_RANK_1(dist_all_to_all_v(NULL, &a2a, &a2a_out, 1, S, S));
  ON_RANK_1(dist_gather_v(NULL, &in, &all, 1, S, 1));  /* rank 1 receives: unpacks through scratch */
  ON_RANK_1(dist_scatter_v(NULL, &all, &in, 1, S, 1)); /* rank 1 sends: packs through scratch */
  dist_tensor hw = dist_tensor_host(h, DIST_BF16, 1, (int64_t[1]){W}), hmine = dist_tensor_host(h, DIST_BF16, 1, (int64_t[1]){1});
  ON_RANK_1(dist_reduce_scatter_v(NULL, &hw, &hmine, 0, S, DIST_SUM));
#undef ON_RANK_1
}

/* Copying the f32 result back fails on rank 1 (a test fault site; with
 * device tensors a failed device copy): it used to stop there, while the
 * others went on to the f64 round and waited in it. Now rank 1 reduces the
 * f64 tensor with the others and then returns the error; the others succeed,
 * and the f64 sums are right everywhere. */
static void test_errors_fused_copy_out(void) {
  float f[4];
  double d[3];
  for (int i = 0; i < 4; i++) f[i] = (float)(R + i);
  for (int i = 0; i < 3; i++) d[i] = (double)(R + 1) * (i + 1);
  dist_tensor ts[2] = {dist_tensor_host(f, DIST_F32, 1, (int64_t[1]){4}), dist_tensor_host(d, DIST_F64, 1, (int64_t[1]){3})};
  if (R == 1) dist__fault_site = "fused_copy_out";
  dist_status s = dist_all_reduce_fused(NULL, ts, 2, DIST_SUM);
  CU_ASSERT_PTR_NULL(dist__fault_site);
  dist__fault_site = NULL;
  if (R == 1) {
    CU_ASSERT_EQUAL(s, DIST_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "fused_copy_out"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "the other kinds were reduced"));
  } else {
    CU_ASSERT_EQUAL(s, DIST_SUCCESS);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(f[i], (float)(W * (W - 1) / 2 + W * i));
  }
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(d[i], (double)(W * (W + 1) / 2) * (i + 1));
  CU_ASSERT_EQUAL(cunit_all_reduce_int(1, DIST_SUM), W); /* still in step */
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

/* ---- engines and devices ----------------------------------------------------------- */

#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
static int DEV; /* my CUDA ordinal, from the manager */

static void test_device(void) {
  dist_device dev;
  ASSERT_OK(dist_manager_device(&dev));
  CU_ASSERT_EQUAL(dev.kind, DIST_DEVICE_CUDA); /* a device is visible: the manager must pick it */
  int current = -1;
  CUDA_CHECK(cudaGetDevice(&current));
  CU_ASSERT_EQUAL(current, DEV);
}

/* Does some pair of ranks of group g drive one GPU? From the devices' UUIDs,
 * gathered here on host memory (independently of the manager's own table). */
static int group_shares_gpu(const grp *g) {
  struct cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  CUDA_CHECK(cudaGetDeviceProperties(&p, DEV));
  char *all = malloc(sizeof p.uuid.bytes * (size_t)W);
  int64_t n = (int64_t)sizeof p.uuid.bytes, w = n * W;
  dist_tensor in = dist_tensor_host(p.uuid.bytes, DIST_U8, 1, &n), out = dist_tensor_host(all, DIST_U8, 1, &w);
  ASSERT_OK(dist_all_gather(NULL, &in, &out, 0)); /* on the host engine, apart from the device tables */
  int shared = 0;
  for (int i = 0; i < g->size; i++)
    for (int j = i + 1; j < g->size; j++)
      shared |= !memcmp(all + g->world[i] * sizeof p.uuid.bytes, all + g->world[j] * sizeof p.uuid.bytes,
                        sizeof p.uuid.bytes);
  free(all);
  return shared;
}
#endif

/* The engine of each group's collectives in MEM. Host memory: MPI. Device
 * memory: NCCL unless the group has two ranks on one GPU (NCCL refuses them:
 * staged, or an error when NCCL is forced) or DIST_CUDA_BACKEND=staged; the
 * host engine is MPI, or Gloo where the launch runs without MPI (told from the
 * environment, apart from the query under test). Then the errors of the query
 * itself. */
static void test_backend_choice(void) {
  const char *HOST_ENGINE = cunit_mpi_launch_without_mpi() ? "gloo" : "mpi";
  const char *name = NULL;
#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
  const char *env = getenv("DIST_CUDA_BACKEND");
  for (int k = 0; k < NGROUPS; k++) {
    int shared = group_shares_gpu(&groups[k]);
    name = NULL;
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
    if (R == 0) printf("  (group '%s' of %d: device collectives on %s)\n", gname(&groups[k]), groups[k].size, name);
  }
#endif
  for (int k = 0; k < NGROUPS; k++) {
    name = NULL;
    ASSERT_OK(dist_coll_backend(groups[k].name, DIST_MEM_HOST, &name));
    CU_ASSERT_PTR_NOT_NULL_FATAL(name);
    /* Without MPI a group of two or more on one node (here: every group,
     * unless nodes are simulated) moves host data through shared memory. */
    const char *shm = getenv("DIST_SHM_DATA"), *per_node = getenv("DIST_RANKS_PER_NODE");
    int shm_on = !(shm && !strcasecmp(shm, "off"));
    if (strcmp(HOST_ENGINE, "gloo") == 0 && per_node && shm_on) {
      CU_ASSERT(!strcmp(name, "shm") || !strcmp(name, "gloo"));
    } else if (strcmp(HOST_ENGINE, "gloo") == 0 && shm_on && groups[k].size >= 2) {
      CU_ASSERT_STRING_EQUAL(name, "shm");
    } else {
      CU_ASSERT_STRING_EQUAL(name, HOST_ENGINE);
    }
  }
  CU_ASSERT_EQUAL(dist_coll_backend("no such group", MEM->space, &name), DIST_ERR_UNKNOWN_GROUP);
  CU_ASSERT_EQUAL(dist_coll_backend(NULL, (dist_memory)7, &name), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_coll_backend(NULL, MEM->space, NULL), DIST_ERR_INVALID_ARGUMENT);
}

/* One member cannot take part in a group's shared data segment, made at the
 * group's first host collective (a test fault site, as a failed allocation
 * or a full /dev/shm would): that call and every later one go to Gloo on
 * every member, and give the right values. Under MPI: the group is on MPI
 * as any other. */
static void test_shm_refused(void) {
  int W2 = W < 4 ? W : 4, ranks[4] = {0, 1, 2, 3}, without = cunit_mpi_launch_without_mpi();
  const char *shm = getenv("DIST_SHM_DATA");
  int shm_on = without && !(shm && !strcasecmp(shm, "off")) && !getenv("DIST_RANKS_PER_NODE");
  ASSERT_OK(dist_group_create_ranks("shm_refused", W2, ranks));
  if (R >= W2) return;
  const char *name = NULL;
  ASSERT_OK(dist_coll_backend("shm_refused", DIST_MEM_HOST, &name));
  CU_ASSERT_PTR_NOT_NULL_FATAL(name);
  CU_ASSERT_STRING_EQUAL(name, shm_on ? "shm" : without ? "gloo" : "mpi"); /* the segment comes at the first call */
  /* The first host collective makes the segment, and the last member refuses it. */
  dist__fault_site = R == W2 - 1 ? "shm_seg_data" : NULL, dist__fault_skip = 0;
  float x[3] = {1, 2, 3};
  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){3});
  ASSERT_OK(dist_all_reduce("shm_refused", &t, DIST_SUM));
  if (R == W2 - 1 && shm_on) CU_ASSERT_PTR_NULL(dist__fault_site); /* the site was reached */
  dist__fault_site = NULL, dist__fault_skip = 0;
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(x[i], (float)(W2 * (i + 1)));
  ASSERT_OK(dist_coll_backend("shm_refused", DIST_MEM_HOST, &name));
  CU_ASSERT_STRING_EQUAL(name, without ? "gloo" : "mpi");
  for (int i = 0; i < 3; i++) x[i] = (float)(R + i);
  ASSERT_OK(dist_all_reduce("shm_refused", &t, DIST_MAX)); /* and Gloo carries on */
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(x[i], (float)(W2 - 1 + i));
}

/* ---- the cases ------------------------------------------------------------------ */

enum { HOST = 1, DEVICE = 2, BOTH = 3 }; /* the memory a case runs in */
#ifdef COLL_DEVICE
#define HERE DEVICE
#else
#define HERE HOST
#endif

/* Every case once, in suite order, with the rank counts it applies at
 * (min..max) and the memory it runs in. Cases without tensors, and the
 * bad-input cases (host tensors, outcomes compared over the world), run in
 * host memory only. Makefile.am runs both programs at 1, 2, 3 and 4 ranks
 * (tests/rank_counts.sh checks that every case runs at one of them). */
typedef struct {
  const char *suite, *name;
  CU_TestFunc run;
  int min_ranks, max_ranks;
  int memory;
} coll_case;

static const coll_case CASES[] = {
    /* suite          case                                                function            ranks     memory */
    {"helpers",       "16-bit conversions, dtype table",                  test_conversions,          1, MAXW, HOST},
    {"engines",       "backend choice (GPUs shared by ranks go staged)",  test_backend_choice,       1, MAXW, BOTH},
#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
    {"engines",       "device selection",                                 test_device,               1, MAXW, DEVICE},
#endif
    {"reductions",    "all_reduce: dtypes x ops",                         test_all_reduce,           1, MAXW, BOTH},
    {"reductions",    "all_reduce: u8 average does not wrap",             test_average_no_wrap,      1, MAXW, BOTH},
    {"reductions",    "all_reduce: large (non-blocking path on the host)", test_all_reduce_large,    1, MAXW, BOTH},
    {"reductions",    "reduce: roots, non-roots unchanged",               test_reduce,               1, MAXW, BOTH},
    {"reductions",    "all_reduce_fused and shared grads",                test_fused,                1, MAXW, BOTH},
    {"reductions",    "reduce_loss",                                      test_reduce_loss,          1, MAXW, HOST},
    {"data movement", "broadcast",                                        test_broadcast,            1, MAXW, BOTH},
    {"data movement", "all_gather",                                       test_all_gather,           1, MAXW, BOTH},
    {"data movement", "all_gather_v",                                     test_all_gather_v,         1, MAXW, BOTH},
    {"data movement", "gather_v",                                         test_gather_v,             1, MAXW, BOTH},
    {"data movement", "scatter_v",                                        test_scatter_v,            1, MAXW, BOTH},
    {"data movement", "reduce_scatter_v",                                 test_reduce_scatter_v,     1, MAXW, BOTH},
    {"data movement", "all_to_all(_v)",                                   test_all_to_all,           1, MAXW, BOTH},
    {"data movement", "barrier",                                          test_barrier,              1, MAXW, HOST},
    {"data movement", "large uneven buffers (several shared-memory rounds)", test_large_rounds,   1, MAXW, HOST},
    {"engines",       "a member refuses the shared segments: Gloo",       test_shm_refused,          2, MAXW, HOST},
    {"non-blocking",  "several in flight, any order",                     test_nonblocking,          1, MAXW, BOTH},
    {"non-blocking",  "all_reduce_start + wait",                          test_start_wait,           1, MAXW, BOTH},
    {"non-blocking",  "free in flight",                                   test_free_in_flight,       1, MAXW, BOTH},
    {"errors",        "fused tensors whose total overflows",              test_errors_fused_overflow, 1, MAXW, HOST},
    {"errors",        "same bad argument everywhere",                     test_errors_everywhere,    1, MAXW, HOST},
    {"errors",        "a malformed check word",                           test_errors_malformed_word, 2, MAXW, HOST},
    {"errors",        "one rank differs",                                 test_errors_one_rank,      2, MAXW, HOST},
    {"errors",        "one rank differs from an all_to_all_v in flight",  test_errors_speculated,    2, MAXW, HOST},
    {"errors",        "sizes that overflow",                              test_errors_overflow,      1, MAXW, HOST},
    {"errors",        "sums over the ranks that overflow",                test_errors_overflow_ranks, 2, MAXW, HOST},
    {"errors",        "counts beyond the engine's on one rank",           test_errors_engine_count,  2, MAXW, HOST},
    {"errors",        "a scratch allocation fails on one rank",           test_errors_scratch_alloc, 2, MAXW, HOST},
    {"errors",        "a fused result's copy back fails on one rank",     test_errors_fused_copy_out, 2, MAXW, HOST},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static CU_TestInfo picked[2 * NCASES + 1]; /* the cases that apply, each suite's list ended by a NULL entry */
static CU_SuiteInfo suites[NCASES + 1];

/* NULL when case c applies to this run, else why not. */
static const char *not_here(const coll_case *c) {
  static char why[96];
  if (!(c->memory & HERE)) return c->memory == HOST ? "host memory only" : "device memory only";
  if (W >= c->min_ranks && W <= c->max_ranks) return NULL;
  snprintf(why, sizeof why, "applies at %d to %d ranks, not at %d", c->min_ranks, c->max_ranks, W);
  return why;
}

/* The CUnit suites of the cases that apply; rank 0 prints one line for each
 * case that does not. */
static void pick_cases(void) {
  int ns = 0, nt = 0;
  for (int i = 0; i < NCASES; i++) {
    const coll_case *c = &CASES[i];
    const char *why = not_here(c);
    if (why) {
      if (R == 0) printf("%s: not run: %s / %s: %s\n", PROGRAM, c->suite, c->name, why);
      continue;
    }
    if (!ns || strcmp(suites[ns - 1].pName, c->suite)) {
      if (ns) picked[nt++] = (CU_TestInfo)CU_TEST_INFO_NULL;
      suites[ns++] = (CU_SuiteInfo){c->suite, NULL, NULL, NULL, NULL, &picked[nt]};
    }
    picked[nt++] = (CU_TestInfo){c->name, c->run};
  }
  if (ns) picked[nt++] = (CU_TestInfo)CU_TEST_INFO_NULL;
  suites[ns] = (CU_SuiteInfo)CU_SUITE_INFO_NULL;
}

/* "--list": this program's cases, one line each: "ranks MIN MAX SUITE / CASE". */
static int list_cases(void) {
  for (int i = 0; i < NCASES; i++)
    if (CASES[i].memory & HERE)
      printf("ranks %d %d %s / %s\n", CASES[i].min_ranks, CASES[i].max_ranks, CASES[i].suite, CASES[i].name);
  return 0;
}

/* ---- main ------------------------------------------------------------------------- */

#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
/* Device runs: every rank sees a device (else every rank skips, the first
 * without one saying why), makes the manager's current, and learns which
 * groups the engine in force serves on every rank. A group it refuses
 * (DIST_CUDA_BACKEND=nccl with two ranks on one GPU, or without NCCL) is left
 * out of the cases with a line saying why; with none left, every rank skips.
 * Collective over the world. */
static int device_setup(void) {
  const char *missing = cuda_missing();
  int any = cunit_all_reduce_int(missing != NULL, DIST_MAX);
  if (any) return cunit_mpi_skip(missing); /* NULL where this rank has a device */
  MEM = &coll_device;
  dist_device dev = {DIST_DEVICE_CPU, 0};
  dist_manager_device(&dev);
  DEV = coll_device_ordinal = dev.kind == DIST_DEVICE_CUDA ? dev.index : 0; /* test_device flags a CPU choice */
  int failed = 0;
  cudaError_t e = cudaSetDevice(DEV);
  if (e != cudaSuccess) {
    fprintf(stderr, "[rank %d/%d] cudaSetDevice(%d): %s\n", R, W, DEV, cudaGetErrorString(e));
    failed++;
  }
  static char refused[320]; /* the first refusal here: the reason to skip when every group is refused */
  int served = 0;
  for (int k = 0; k < NGROUPS; k++) {
    const char *engine = NULL;
    char why[320] = "";
    int ok = dist_coll_backend(groups[k].name, DIST_MEM_CUDA, &engine) == DIST_SUCCESS;
    if (!ok) snprintf(why, sizeof why, "%s", dist_last_error());
    if (!ok && !refused[0]) memcpy(refused, why, sizeof why);
    int all = cunit_all_reduce_int(ok, DIST_MIN);
    group_on[k] = all;
    served += all;
    if (!all && R == 0)
      printf("%s: group '%s' of %d rank(s) left out of the cases: %s\n", PROGRAM, gname(&groups[k]), groups[k].size,
             ok ? "the engine refuses another copy of it" : why);
  }
  if (served || failed) return failed;
  static char reason[400];
  snprintf(reason, sizeof reason, "the device engine serves none of the test's groups: %s", refused[0] ? refused : "?");
  return cunit_mpi_skip(reason);
}
#endif

/* The pair group, every rank's view of both groups, and (device runs) the
 * device; then the cases that apply. */
static int setup(int round) {
  (void)round;
  if (W > MAXW) {
    fprintf(stderr, "%s supports at most %d ranks\n", PROGRAM, MAXW);
    return 1;
  }
  int failed = 0;
  /* A group other than the world: pairs (singletons at odd sizes). Collective over the world. */
  if (dist_group_create_subgroup("pair", W % 2 == 0 ? 2 : 1, NULL) != DIST_SUCCESS) {
    fprintf(stderr, "create pair: %s\n", dist_last_error());
    failed++;
  }
  failed += group_info(NULL, &groups[0]) + group_info("pair", &groups[1]);
#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
  int device = device_setup();
  if (device == CUNIT_MPI_SKIP) return failed ? failed : device;
  failed += device;
#elif defined(COLL_DEVICE)
  return failed ? failed : cunit_mpi_skip("built without CUDA");
#endif
  pick_cases();
  return failed;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--list")) return list_cases();
  return cunit_mpi_run(&(cunit_mpi_test){PROGRAM, suites, .rank = &R, .size = &W, .setup = setup});
}
