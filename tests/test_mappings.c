/* Distributed tests of the model-parallel mappings of mapping.h (run at 1, 2,
 * 3 and 4 ranks; 3 gives uneven splits).
 *
 * Every value is a function of (seed, stream, index): stream 0 is replicated
 * data (the same on every rank), stream s+1 is rank s's data. So each rank can
 * generate every rank's input and check forward results against a serial
 * reference computed locally. Backwards are checked with the adjoint identity
 * <fwd(x), y> = <x, bwd(y)>, inner products taken over the whole group. */
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_mpi.h"

#define MAXW 64
#define REPLICATED 0 /* the stream of replicated data; rank s uses s + 1 */

static int W, R; /* world size and rank from MPI itself */

static const dist_dtype FLOATS[2] = {DIST_F32, DIST_F64};

/* ---- tensors ---------------------------------------------------------------- */

static size_t esize(dist_dtype dt) { return dt == DIST_F64 ? 8 : dt == DIST_F32 ? 4 : 2; }

static int64_t numel(const dist_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* A zeroed host tensor owning its data (one spare element so that an empty
 * tensor still has a pointer). */
static dist_tensor tnew(dist_dtype dt, int ndim, const int64_t *shape) {
  dist_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.memory = DIST_MEM_HOST;
  t.ndim = ndim;
  for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
  t.data = calloc((size_t)numel(&t) + 1, esize(dt));
  return t;
}

/* A 3-D tensor of shape `base` except extent `e` along `dim`. */
static dist_tensor tnew3(dist_dtype dt, const int64_t *base, int dim, int64_t e) {
  int64_t s[3] = {base[0], base[1], base[2]};
  s[dim] = e;
  return tnew(dt, 3, s);
}

static dist_tensor tlike(const dist_tensor *t) { return tnew(t->dtype, t->ndim, t->shape); }

/* Free n tensors given by address. */
static void tfree(int n, ...) {
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    dist_tensor *t = va_arg(ap, dist_tensor *);
    free(t->data);
    t->data = NULL;
  }
  va_end(ap);
}

static double tget(const dist_tensor *t, int64_t i) {
  switch (t->dtype) {
  case DIST_F32: return ((const float *)t->data)[i];
  case DIST_F64: return ((const double *)t->data)[i];
  default: return dist_bf16_to_f32(((const uint16_t *)t->data)[i]);
  }
}

static void tset(dist_tensor *t, int64_t i, double v) {
  switch (t->dtype) {
  case DIST_F32: ((float *)t->data)[i] = (float)v; break;
  case DIST_F64: ((double *)t->data)[i] = v; break;
  default: ((uint16_t *)t->data)[i] = dist_f32_to_bf16((float)v); break;
  }
}

/* splitmix64's finalizer: a good 64-bit mix. */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1), a function of (seed, stream, i) only. */
static double rnd(uint64_t seed, uint64_t stream, uint64_t i) {
  return (double)(mix(mix(mix(seed) ^ stream) ^ i) >> 11) * 0x1p-52 - 1.0;
}

static void tfill(dist_tensor *t, uint64_t seed, uint64_t stream) {
  for (int64_t i = 0; i < numel(t); i++) tset(t, i, rnd(seed, stream, (uint64_t)i));
}

/* Elements before and after `dim`: element (o, k, q) is (o * shape[dim] + k) * inner + q. */
static void around(const dist_tensor *t, int dim, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

/* Copy `count` slices along dim from src (starting at so) into dst (at doff);
 * the other extents of src and dst are equal. */
static void slab_copy(const dist_tensor *src, int64_t so, dist_tensor *dst, int64_t doff, int dim, int64_t count) {
  int64_t outer, inner;
  around(src, dim, &outer, &inner);
  size_t es = esize(src->dtype);
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)dst->data + (size_t)((o * dst->shape[dim] + doff) * inner) * es,
           (const char *)src->data + (size_t)((o * src->shape[dim] + so) * inner) * es, (size_t)(count * inner) * es);
}

/* ---- sizes ------------------------------------------------------------------ */

/* Uneven extents in 1..3, varied by salt. */
static void uneven(int64_t *sizes, int n, int salt) {
  for (int r = 0; r < n; r++) sizes[r] = 1 + (r + salt) % 3;
}

static int64_t offset_of(const int64_t *sizes, int r) {
  int64_t o = 0;
  for (int i = 0; i < r; i++) o += sizes[i];
  return o;
}

/* The split rule of mapping.h, written out here as the reference. */
static void ref_split(int64_t size, int n, int64_t *out) {
  int64_t c = (size + n - 1) / n;
  if (n > 1 && size - c * (n - 1) <= 0) c = size / n;
  for (int i = 0; i < n - 1; i++) out[i] = c;
  out[n - 1] = size - c * (n - 1);
}

/* ---- checks ----------------------------------------------------------------- */

static double tdot(const dist_tensor *a, const dist_tensor *b) {
  double s = 0;
  for (int64_t i = 0; i < numel(a); i++) s += tget(a, i) * tget(b, i);
  return s;
}

static double allsum(double v) { return cunit_all_reduce_double(v, DIST_SUM); }

/* The inner product over the group: the sum of the ranks' local products for
 * distributed tensors. A replicated tensor (the same on every rank) is ONE
 * tensor, so it is counted once: the rank sum divided by W. (Summing it W
 * times would break the identity for copy_to/reduce_from/scatter_to/
 * gather_from by a factor of W.) */
static double gdot(const dist_tensor *a, const dist_tensor *b, int replicated) {
  double s = allsum(tdot(a, b));
  return replicated ? s / W : s;
}

static double tol_of(dist_dtype dt) { return dt == DIST_F64 ? 1e-12 : dt == DIST_F32 ? 1e-5 : 1e-2; }

static void expect_adjoint(const char *what, dist_dtype dt, int dim, double fwd_y, double x_bwd) {
  int ok = fabs(fwd_y - x_bwd) <= tol_of(dt) * (fabs(fwd_y) + fabs(x_bwd) + 1);
  if (!ok)
    fprintf(stderr, "[%d/%d] adjoint %s %s dim %d: <fwd(x), y> = %.17g, <x, bwd(y)> = %.17g\n", R, W, what,
            dist_dtype_name(dt), dim, fwd_y, x_bwd);
  CU_ASSERT_TRUE(ok);
}

/* got == want element by element (exact: data that is only moved). */
static void expect_same(const char *what, const dist_tensor *got, const dist_tensor *want) {
  int ok = numel(got) == numel(want);
  for (int64_t i = 0; ok && i < numel(want); i++)
    if (tget(got, i) != tget(want, i)) {
      fprintf(stderr, "[%d/%d] %s %s: element %lld is %.9g, expected %.9g\n", R, W, what, dist_dtype_name(want->dtype),
              (long long)i, tget(got, i), tget(want, i));
      ok = 0;
    }
  CU_ASSERT_TRUE(ok);
}

/* got close to want[] (results of sums, whose order may differ). */
static void expect_close(const char *what, const dist_tensor *got, const double *want) {
  int ok = 1;
  double tol = got->dtype == DIST_F32 ? 1e-6 : tol_of(got->dtype);
  for (int64_t i = 0; ok && i < numel(got); i++)
    if (fabs(tget(got, i) - want[i]) > tol * (fabs(want[i]) + 1)) {
      fprintf(stderr, "[%d/%d] %s %s: element %lld is %.9g, expected %.9g\n", R, W, what, dist_dtype_name(got->dtype),
              (long long)i, tget(got, i), want[i]);
      ok = 0;
    }
  CU_ASSERT_TRUE(ok);
}

/* ---- the indexed all-to-all plans ---------------------------------------------- */

/* Rank s's input extent along dim: small, so random indices repeat. */
static int64_t iextent(int s) { return 2 + s % 2; }

/* Rows rank s sends rank r in case k: 0..3, so some segments are empty; rank 0
 * always sends itself some (the only segment at 1 rank). */
static int64_t icount(int s, int r, int k) {
  int64_t c = (7 * s + 5 * r + k) % 4;
  return s == 0 && r == 0 && c == 0 ? 2 : c;
}

/* The j-th index of s's segment for r; the second repeats the first, so every
 * segment of two or more holds a duplicate. */
static int64_t iindex(int s, int r, int64_t j, int k) {
  if (j == 1) j = 0;
  return (int64_t)(mix(mix(mix(mix((uint64_t)s) ^ (uint64_t)r) ^ (uint64_t)j) ^ (uint64_t)k) % (uint64_t)iextent(s));
}

typedef struct plan {
  int64_t send[MAXW], recv[MAXW], idx[4 * MAXW], out_extent;
} plan;

/* Rank me's arguments for case k. */
static void make_plan(plan *p, int me, int k) {
  int64_t n = 0;
  p->out_extent = 0;
  for (int r = 0; r < W; r++) {
    p->send[r] = icount(me, r, k);
    p->recv[r] = icount(r, me, k);
    p->out_extent += p->recv[r];
    for (int64_t j = 0; j < p->send[r]; j++) p->idx[n++] = iindex(me, r, j, k);
  }
}

/* ---- the transpose cases ------------------------------------------------------ */

static const int TPAIRS[6][2] = {{0, 1}, {1, 2}, {0, 2}, {1, 0}, {2, 1}, {2, 0}};
#define NTCASES 6

typedef struct tcase {
  int dim0, dim1;
  int64_t gshape[3];                 /* the global array */
  int64_t split[MAXW], cat[MAXW];    /* the sizes in effect */
  const int64_t *split_arg, *cat_arg; /* what is passed: NULL where the case tests the default */
} tcase;

static void make_tcase(tcase *c, int p) {
  c->dim0 = TPAIRS[p][0];
  c->dim1 = TPAIRS[p][1];
  if (p % 2 == 0) {
    ref_split(5 + p, W, c->split);
    c->split_arg = NULL;
  } else {
    uneven(c->split, W, p);
    c->split_arg = c->split;
  }
  if (p % 3 == 2) {
    for (int r = 0; r < W; r++) c->cat[r] = 2;
    c->cat_arg = NULL;
  } else {
    uneven(c->cat, W, p + 1);
    c->cat_arg = c->cat;
  }
  c->gshape[3 - c->dim0 - c->dim1] = 2;
  c->gshape[c->dim0] = offset_of(c->split, W);
  c->gshape[c->dim1] = offset_of(c->cat, W);
}

/* ======================= adjoint identities ======================= */

static const int64_t BASE[3] = {2, 3, 4};

static void test_adjoint_copy_to(void) {
  const int64_t shape[3] = {3, 4, 5};
  for (int k = 0; k < 2; k++) {
    dist_tensor x = tnew(FLOATS[k], 3, shape), y = tlike(&x), fx = tlike(&x), bx = tlike(&x);
    tfill(&x, 11, REPLICATED); /* copy_to's input is replicated by definition: the same x on every rank */
    tfill(&y, 12, R + 1);
    ASSERT_OK(dist_copy_to_parallel_region(NULL, &x, &fx));
    ASSERT_OK(dist_copy_to_parallel_region_backward(NULL, &y, &bx));
    expect_adjoint("copy_to", FLOATS[k], -1, gdot(&fx, &y, 0), gdot(&x, &bx, 1));
    tfree(4, &x, &y, &fx, &bx);
  }
}

static void test_adjoint_reduce_from(void) {
  const int64_t shape[3] = {3, 4, 5};
  for (int k = 0; k < 2; k++) {
    dist_tensor x = tnew(FLOATS[k], 3, shape), y = tlike(&x), fx = tlike(&x), bx = tlike(&x);
    tfill(&x, 21, R + 1);
    tfill(&y, 22, REPLICATED); /* reduce_from's output (so its gradient) is replicated: the same y on every rank */
    ASSERT_OK(dist_reduce_from_parallel_region(NULL, &x, &fx));
    ASSERT_OK(dist_reduce_from_parallel_region_backward(NULL, &y, &bx));
    expect_adjoint("reduce_from", FLOATS[k], -1, gdot(&fx, &y, 1), gdot(&x, &bx, 0));
    tfree(4, &x, &y, &fx, &bx);
  }
}

static void test_adjoint_scatter_to(void) {
  for (int k = 0; k < 2; k++)
    for (int dim = 0; dim < 3; dim++) {
      int64_t extent = 5 + 2 * dim, split[MAXW];
      ref_split(extent, W, split);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, extent), bx = tlike(&x);
      dist_tensor fx = tnew3(FLOATS[k], BASE, dim, split[R]), y = tlike(&fx);
      tfill(&x, 31 + dim, REPLICATED); /* scatter_to's input is replicated: the same x on every rank */
      tfill(&y, 32 + dim, R + 1);
      ASSERT_OK(dist_scatter_to_parallel_region(NULL, &x, dim, &fx));
      ASSERT_OK(dist_scatter_to_parallel_region_backward(NULL, &y, dim, &bx));
      expect_adjoint("scatter_to", FLOATS[k], dim, gdot(&fx, &y, 0), gdot(&x, &bx, 1));
      tfree(4, &x, &y, &fx, &bx);
    }
}

static void test_adjoint_gather_from(void) {
  for (int k = 0; k < 2; k++)
    for (int dim = 0; dim < 3; dim++) {
      int64_t sizes[MAXW] = {0};
      uneven(sizes, W, dim + k);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, sizes[R]), bx = tlike(&x);
      dist_tensor fx = tnew3(FLOATS[k], BASE, dim, offset_of(sizes, W)), y = tlike(&fx);
      tfill(&x, 41 + dim, R + 1);
      tfill(&y, 42 + dim, REPLICATED); /* gather_from's output is replicated: the same y on every rank */
      ASSERT_OK(dist_gather_from_parallel_region(NULL, &x, dim, sizes, &fx));
      ASSERT_OK(dist_gather_from_parallel_region_backward(NULL, &y, dim, sizes, &bx));
      expect_adjoint("gather_from", FLOATS[k], dim, gdot(&fx, &y, 1), gdot(&x, &bx, 0));
      tfree(4, &x, &y, &fx, &bx);
    }
}

/* all_gather_v's output is one copy per rank, each with its own gradient
 * (the backward sums them): distributed, y differs per rank. */
static void test_adjoint_all_gather_v(void) {
  for (int k = 0; k < 2; k++)
    for (int dim = 0; dim < 3; dim++) {
      int64_t sizes[MAXW] = {0};
      uneven(sizes, W, dim + 2 * k);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, sizes[R]), bx = tlike(&x);
      dist_tensor fx = tnew3(FLOATS[k], BASE, dim, offset_of(sizes, W)), y = tlike(&fx);
      tfill(&x, 51 + dim, R + 1);
      tfill(&y, 52 + dim, R + 1);
      ASSERT_OK(dist_all_gather_v(NULL, &x, &fx, dim, sizes));
      ASSERT_OK(dist_all_gather_v_backward(NULL, &y, &bx, dim, sizes));
      expect_adjoint("all_gather_v", FLOATS[k], dim, gdot(&fx, &y, 0), gdot(&x, &bx, 0));
      tfree(4, &x, &y, &fx, &bx);
    }
}

/* gather_v's output exists on dst only: zero elsewhere in the inner product.
 * Elsewhere the forward gets out = NULL (allowed) and the backward a grad_out
 * of random junk, which it must ignore. */
static void test_adjoint_gather_v(void) {
  for (int k = 0; k < 2; k++)
    for (int dim = 0; dim < 3; dim++) {
      int dst = (dim + k) % W;
      int64_t sizes[MAXW] = {0};
      uneven(sizes, W, dim + k + 1);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, sizes[R]), bx = tlike(&x);
      dist_tensor fx = tnew3(FLOATS[k], BASE, dim, offset_of(sizes, W)), y = tlike(&fx);
      tfill(&x, 61 + dim, R + 1);
      tfill(&y, 62 + dim, R == dst ? (uint64_t)R + 1 : 1000);
      ASSERT_OK(dist_gather_v(NULL, &x, R == dst ? &fx : NULL, dim, sizes, dst));
      ASSERT_OK(dist_gather_v_backward(NULL, &y, &bx, dim, sizes, dst));
      double fwd_y = allsum(R == dst ? tdot(&fx, &y) : 0);
      expect_adjoint("gather_v", FLOATS[k], dim, fwd_y, gdot(&x, &bx, 0));
      tfree(4, &x, &y, &fx, &bx);
    }
}

/* scatter_v's input exists on src only: zero elsewhere. Elsewhere the forward
 * gets in = NULL (allowed) and the backward a grad_in that it must not write. */
static void test_adjoint_scatter_v(void) {
  for (int k = 0; k < 2; k++)
    for (int dim = 0; dim < 3; dim++) {
      int src = (dim + k + 1) % W;
      int64_t sizes[MAXW] = {0};
      uneven(sizes, W, dim + 2);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, offset_of(sizes, W)), bx = tlike(&x), keep = tlike(&x);
      dist_tensor fx = tnew3(FLOATS[k], BASE, dim, sizes[R]), y = tlike(&fx);
      tfill(&x, 71 + dim, R + 1);
      tfill(&y, 72 + dim, R + 1);
      if (R != src) {
        tfill(&bx, 73, 1000);
        tfill(&keep, 73, 1000);
      }
      ASSERT_OK(dist_scatter_v(NULL, R == src ? &x : NULL, &fx, dim, sizes, src));
      ASSERT_OK(dist_scatter_v_backward(NULL, &y, &bx, dim, sizes, src));
      double x_bwd = allsum(R == src ? tdot(&x, &bx) : 0);
      expect_adjoint("scatter_v", FLOATS[k], dim, gdot(&fx, &y, 0), x_bwd);
      if (R != src) expect_same("scatter_v_backward leaves grad_in off src alone", &bx, &keep);
      tfree(5, &x, &y, &fx, &bx, &keep);
    }
}

static void test_adjoint_indexed(void) {
  const dist_dtype types[3] = {DIST_F32, DIST_F64, DIST_BF16};
  for (int k = 0; k < 3; k++)
    for (int dim = 0; dim < 3; dim++) {
      plan p;
      int c = 3 * k + dim; /* varies the counts and indices */
      make_plan(&p, R, c);
      dist_tensor x = tnew3(types[k], BASE, dim, iextent(R)), bx = tlike(&x);
      dist_tensor fx = tnew3(types[k], BASE, dim, p.out_extent), y = tlike(&fx);
      tfill(&x, 81 + c, R + 1);
      tfill(&y, 82 + c, R + 1);
      ASSERT_OK(dist_indexed_all_to_all_v(NULL, &x, dim, p.idx, p.send, p.recv, &fx));
      ASSERT_OK(dist_indexed_all_to_all_v_backward(NULL, &y, dim, p.idx, p.send, p.recv, &bx));
      expect_adjoint("indexed_all_to_all_v", types[k], dim, gdot(&fx, &y, 0), gdot(&x, &bx, 0));
      tfree(4, &x, &y, &fx, &bx);
    }
}

static void test_adjoint_transpose(void) {
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < NTCASES; p++) {
      tcase c;
      make_tcase(&c, p);
      dist_tensor x = tnew3(FLOATS[k], c.gshape, c.dim1, c.cat[R]), bx = tlike(&x);
      dist_tensor fx = tnew3(FLOATS[k], c.gshape, c.dim0, c.split[R]), y = tlike(&fx);
      tfill(&x, 91 + p, R + 1);
      tfill(&y, 92 + p, R + 1);
      ASSERT_OK(dist_distributed_transpose(NULL, &x, c.dim0, c.dim1, c.split_arg, c.cat_arg, &fx));
      ASSERT_OK(dist_distributed_transpose_backward(NULL, &y, c.dim0, c.dim1, c.split_arg, c.cat_arg, &bx));
      expect_adjoint("distributed_transpose", FLOATS[k], 10 * c.dim0 + c.dim1, gdot(&fx, &y, 0), gdot(&x, &bx, 0));
      tfree(4, &x, &y, &fx, &bx);
    }
}

/* ======================= forward results against a serial reference ======================= */

static void test_forward_copy_reduce(void) {
  const int64_t shape[3] = {3, 2, 4};
  for (int k = 0; k < 2; k++) {
    dist_tensor x = tnew(FLOATS[k], 3, shape), out = tlike(&x), other = tlike(&x);
    int64_t n = numel(&x);
    double *sum = calloc((size_t)n, sizeof *sum);
    for (int s = 0; s < W; s++) { /* the sum of every rank's data, computed here */
      tfill(&other, 5, s + 1);
      for (int64_t i = 0; i < n; i++) sum[i] += tget(&other, i);
    }
    tfill(&x, 5, R + 1);
    ASSERT_OK(dist_copy_to_parallel_region(NULL, &x, &out));
    expect_same("copy_to", &out, &x);
    ASSERT_OK(dist_copy_to_parallel_region_backward(NULL, &x, &out));
    expect_close("copy_to_backward", &out, sum);
    ASSERT_OK(dist_reduce_from_parallel_region(NULL, &x, &out));
    expect_close("reduce_from", &out, sum);
    ASSERT_OK(dist_reduce_from_parallel_region_backward(NULL, &x, &out));
    expect_same("reduce_from_backward", &out, &x);
    free(sum);
    tfree(3, &x, &out, &other);
  }
}

/* scatter_to keeps chunk R of the split; its backward all-gathers. The last
 * case has extent W-1 along dim, so the split has empty chunks (3/4 -> 0,0,0,3). */
static void test_forward_scatter_to(void) {
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < 4; c++) {
      int dim = c < 3 ? c : 1;
      int64_t extent = c < 3 ? 5 + 2 * dim : W - 1, split[MAXW];
      ref_split(extent, W, split);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, extent), back = tlike(&x), want_back = tlike(&x);
      dist_tensor out = tnew3(FLOATS[k], BASE, dim, split[R]), want = tlike(&out), y = tlike(&out);
      tfill(&x, 100 + c, REPLICATED);
      slab_copy(&x, offset_of(split, R), &want, 0, dim, split[R]);
      ASSERT_OK(dist_scatter_to_parallel_region(NULL, &x, dim, &out));
      expect_same("scatter_to", &out, &want);
      /* Backward: rank s's grad chunk lands at its offset. */
      for (int s = 0; s < W; s++) {
        dist_tensor ys = tnew3(FLOATS[k], BASE, dim, split[s]);
        tfill(&ys, 110 + c, s + 1);
        slab_copy(&ys, 0, &want_back, offset_of(split, s), dim, split[s]);
        if (s == R) slab_copy(&ys, 0, &y, 0, dim, split[s]);
        tfree(1, &ys);
      }
      ASSERT_OK(dist_scatter_to_parallel_region_backward(NULL, &y, dim, &back));
      expect_same("scatter_to_backward", &back, &want_back);
      tfree(6, &x, &back, &want_back, &out, &want, &y);
    }
}

/* gather_from concatenates in rank order (sizes uneven, then NULL = equal);
 * its backward keeps chunk R. all_gather_v and its backward alongside. */
static void test_forward_gather_from(void) {
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < 4; c++) {
      int dim = c % 3, equal = c == 3;
      int64_t sizes[MAXW];
      if (equal) for (int r = 0; r < W; r++) sizes[r] = 2;
      else uneven(sizes, W, c);
      int64_t total = offset_of(sizes, W);
      dist_tensor x = tnew3(FLOATS[k], BASE, dim, sizes[R]), back = tlike(&x), want_back = tlike(&x);
      dist_tensor out = tnew3(FLOATS[k], BASE, dim, total), want = tlike(&out), y = tlike(&out);
      double *sum = calloc((size_t)numel(&x), sizeof *sum);
      for (int s = 0; s < W; s++) {
        dist_tensor xs = tnew3(FLOATS[k], BASE, dim, sizes[s]);
        tfill(&xs, 120 + c, s + 1);
        slab_copy(&xs, 0, &want, offset_of(sizes, s), dim, sizes[s]);
        /* all_gather_v_backward: chunk R of every rank's grad, summed */
        dist_tensor ys = tlike(&out), chunk = tlike(&x);
        tfill(&ys, 121 + c, s + 1);
        slab_copy(&ys, offset_of(sizes, R), &chunk, 0, dim, sizes[R]);
        for (int64_t i = 0; i < numel(&x); i++) sum[i] += tget(&chunk, i);
        tfree(3, &xs, &ys, &chunk);
      }
      tfill(&x, 120 + c, R + 1);
      const int64_t *arg = equal ? NULL : sizes;
      ASSERT_OK(dist_gather_from_parallel_region(NULL, &x, dim, arg, &out));
      expect_same("gather_from", &out, &want);
      memset(out.data, 0, (size_t)numel(&out) * esize(out.dtype));
      ASSERT_OK(dist_all_gather_v(NULL, &x, &out, dim, arg));
      expect_same("all_gather_v", &out, &want);
      tfill(&y, 122 + c, REPLICATED);
      slab_copy(&y, offset_of(sizes, R), &want_back, 0, dim, sizes[R]);
      ASSERT_OK(dist_gather_from_parallel_region_backward(NULL, &y, dim, arg, &back));
      expect_same("gather_from_backward", &back, &want_back);
      tfill(&y, 121 + c, R + 1);
      ASSERT_OK(dist_all_gather_v_backward(NULL, &y, &back, dim, arg));
      expect_close("all_gather_v_backward", &back, sum);
      free(sum);
      tfree(6, &x, &back, &want_back, &out, &want, &y);
    }
}

/* gather_v's backward scatters dst's grad; scatter_v's gathers onto src. */
static void test_forward_rooted_backwards(void) {
  for (int k = 0; k < 2; k++)
    for (int dim = 0; dim < 3; dim++) {
      int root = (W - 1 + dim) % W;
      int64_t sizes[MAXW] = {0};
      uneven(sizes, W, dim + 1);
      dist_tensor part = tnew3(FLOATS[k], BASE, dim, sizes[R]), want_part = tlike(&part);
      dist_tensor full = tnew3(FLOATS[k], BASE, dim, offset_of(sizes, W)), want_full = tlike(&full);
      tfill(&full, 130 + dim, R == root ? 0 : 1000); /* only root's counts */
      dist_tensor root_full = tlike(&full);
      tfill(&root_full, 130 + dim, 0);
      slab_copy(&root_full, offset_of(sizes, R), &want_part, 0, dim, sizes[R]);
      ASSERT_OK(dist_gather_v_backward(NULL, &full, &part, dim, sizes, root));
      expect_same("gather_v_backward", &part, &want_part);
      for (int s = 0; s < W; s++) {
        dist_tensor ps = tnew3(FLOATS[k], BASE, dim, sizes[s]);
        tfill(&ps, 131 + dim, s + 1);
        slab_copy(&ps, 0, &want_full, offset_of(sizes, s), dim, sizes[s]);
        if (s == R) slab_copy(&ps, 0, &part, 0, dim, sizes[s]);
        tfree(1, &ps);
      }
      ASSERT_OK(dist_scatter_v_backward(NULL, &part, &full, dim, sizes, root));
      if (R == root) expect_same("scatter_v_backward", &full, &want_full);
      tfree(5, &part, &want_part, &full, &want_full, &root_full);
    }
}

/* Forward: rank R receives, from each s in rank order, s's input rows at s's
 * indices for R. Backward: each grad row is added back at its index
 * (duplicates accumulate). */
static void test_forward_indexed(void) {
  const dist_dtype types[3] = {DIST_F32, DIST_F64, DIST_BF16};
  for (int k = 0; k < 3; k++)
    for (int dim = 0; dim < 3; dim++) {
      int c = 3 * k + dim + 1;
      plan mine;
      make_plan(&mine, R, c);
      dist_tensor x = tnew3(types[k], BASE, dim, iextent(R)), back = tlike(&x);
      dist_tensor out = tnew3(types[k], BASE, dim, mine.out_extent), want = tlike(&out), y = tlike(&out);
      int64_t at = 0; /* where s's rows start in my out */
      for (int s = 0; s < W; s++) {
        plan ps;
        make_plan(&ps, s, c);
        dist_tensor xs = tnew3(types[k], BASE, dim, iextent(s));
        tfill(&xs, 140 + c, s + 1);
        int64_t first = offset_of(ps.send, R);
        for (int64_t j = 0; j < ps.send[R]; j++) slab_copy(&xs, ps.idx[first + j], &want, at + j, dim, 1);
        at += ps.send[R];
        tfree(1, &xs);
      }
      tfill(&x, 140 + c, R + 1);
      ASSERT_OK(dist_indexed_all_to_all_v(NULL, &x, dim, mine.idx, mine.send, mine.recv, &out));
      expect_same("indexed_all_to_all_v", &out, &want);

      /* Backward reference: rank r's grad rows for me sit after those of ranks < R. */
      int64_t outer, inner, n = numel(&x);
      around(&x, dim, &outer, &inner);
      double *sum = calloc((size_t)n, sizeof *sum);
      for (int r = 0; r < W; r++) {
        plan pr;
        make_plan(&pr, r, c);
        dist_tensor yr = tnew3(types[k], BASE, dim, pr.out_extent);
        tfill(&yr, 150 + c, r + 1);
        int64_t from = offset_of(pr.recv, R), first = offset_of(mine.send, r);
        for (int64_t j = 0; j < mine.send[r]; j++)
          for (int64_t o = 0; o < outer; o++)
            for (int64_t q = 0; q < inner; q++)
              sum[(o * iextent(R) + mine.idx[first + j]) * inner + q] +=
                  tget(&yr, (o * pr.out_extent + from + j) * inner + q);
        tfree(1, &yr);
      }
      tfill(&y, 150 + c, R + 1);
      ASSERT_OK(dist_indexed_all_to_all_v_backward(NULL, &y, dim, mine.idx, mine.send, mine.recv, &back));
      expect_close("indexed_all_to_all_v_backward", &back, sum);
      free(sum);
      tfree(5, &x, &back, &out, &want, &y);
    }
}

/* A global array G known everywhere: rank r holds G's dim1 chunk r (all of
 * dim0); after the transpose it holds G's dim0 chunk r (all of dim1). The
 * backward brings back the input exactly. */
static void test_forward_transpose(void) {
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < NTCASES; p++) {
      tcase c;
      make_tcase(&c, p);
      dist_tensor g = tnew(FLOATS[k], 3, c.gshape);
      tfill(&g, 160 + p, REPLICATED);
      dist_tensor x = tnew3(FLOATS[k], c.gshape, c.dim1, c.cat[R]), back = tlike(&x);
      dist_tensor out = tnew3(FLOATS[k], c.gshape, c.dim0, c.split[R]), want = tlike(&out);
      slab_copy(&g, offset_of(c.cat, R), &x, 0, c.dim1, c.cat[R]);
      slab_copy(&g, offset_of(c.split, R), &want, 0, c.dim0, c.split[R]);
      ASSERT_OK(dist_distributed_transpose(NULL, &x, c.dim0, c.dim1, c.split_arg, c.cat_arg, &out));
      expect_same("distributed_transpose", &out, &want);
      ASSERT_OK(dist_distributed_transpose_backward(NULL, &out, c.dim0, c.dim1, c.split_arg, c.cat_arg, &back));
      expect_same("distributed_transpose_backward(forward(x))", &back, &x);
      tfree(5, &g, &x, &back, &out, &want);
    }
}

/* The same mappings over a subgroup: ranks are group ranks, and only the
 * members of my copy take part. */
static void test_forward_subgroup(void) {
  int s = W % 2 == 0 ? 2 : 1, gr = R % s, base_rank = R - gr, gsize = -1;
  ASSERT_OK(dist_group_create_subgroup("mp", s, NULL));
  ASSERT_OK(dist_group_size("mp", &gsize));
  CU_ASSERT_EQUAL_FATAL(gsize, s);
  int64_t sizes[MAXW];
  uneven(sizes, s, 1);
  dist_tensor x = tnew3(DIST_F64, BASE, 1, sizes[gr]), out = tnew3(DIST_F64, BASE, 1, offset_of(sizes, s));
  dist_tensor want = tlike(&out);
  for (int g = 0; g < s; g++) {
    dist_tensor xs = tnew3(DIST_F64, BASE, 1, sizes[g]);
    tfill(&xs, 170, base_rank + g + 1);
    slab_copy(&xs, 0, &want, offset_of(sizes, g), 1, sizes[g]);
    tfree(1, &xs);
  }
  tfill(&x, 170, R + 1);
  ASSERT_OK(dist_gather_from_parallel_region("mp", &x, 1, sizes, &out));
  expect_same("gather_from over a subgroup", &out, &want);
  /* reduce_from sums over my copy only (same extents on every member here). */
  dist_tensor y = tnew3(DIST_F64, BASE, 1, 2), ysum = tlike(&y), ys = tlike(&y);
  double *ref = calloc((size_t)numel(&y), sizeof *ref);
  for (int g = 0; g < s; g++) {
    tfill(&ys, 171, base_rank + g + 1);
    for (int64_t i = 0; i < numel(&y); i++) ref[i] += tget(&ys, i);
  }
  tfill(&y, 171, R + 1);
  ASSERT_OK(dist_reduce_from_parallel_region("mp", &y, &ysum));
  expect_close("reduce_from over a subgroup", &ysum, ref);
  free(ref);
  tfree(6, &x, &out, &want, &y, &ysum, &ys);
}

/* ======================= bad input ======================= */

/* The message names one of two words (wordings differ: "sizes sum to" or "shape"). */
#define ASSERT_MSG_HAS_ANY(a, b)                                                                       \
  do {                                                                                                 \
    int has_ = strstr(dist_last_error(), (a)) || strstr(dist_last_error(), (b));                       \
    if (!has_) fprintf(stderr, "%s:%d: message '%s' has neither '%s' nor '%s'\n", __FILE__, __LINE__, \
                       dist_last_error(), (a), (b));                                                   \
    CU_ASSERT_TRUE(has_);                                                                              \
  } while (0)

/* After an error every rank must still be in step: a valid collective works
 * and gives the right sum. */
static void expect_in_step(void) {
  const int64_t one[1] = {1};
  dist_tensor a = tnew(DIST_F64, 1, one), b = tlike(&a);
  tset(&a, 0, R + 1.0);
  ASSERT_OK(dist_copy_to_parallel_region_backward(NULL, &a, &b));
  CU_ASSERT_EQUAL(tget(&b, 0), W * (W + 1) / 2.0);
  tfree(2, &a, &b);
}

/* Plant a known last-error message (a local failure), so that an error that
 * comes without a message of its own shows up as this stale one. */
#define STALE "stale-marker-group"
static void plant_stale_message(void) {
  int v;
  dist_group_size(STALE, &v);
}

static void expect_fresh_message(const char *call) {
  int fresh = strstr(dist_last_error(), STALE) == NULL;
  if (!fresh) fprintf(stderr, "[%d/%d] %s failed without a message of its own\n", R, W, call);
  CU_ASSERT_TRUE(fresh);
}

/* `call` fails with invalid argument on every rank, with its own message
 * naming `word`, and the ranks are still in step afterwards. */
#define EXPECT_BAD(call, word)                         \
  do {                                                 \
    plant_stale_message();                             \
    ASSERT_STATUS(call, DIST_ERR_INVALID_ARGUMENT);    \
    expect_fresh_message(#call);                       \
    ASSERT_MSG_HAS(word);                              \
    expect_in_step();                                  \
  } while (0)

#define EXPECT_BAD_ANY(call, word1, word2)             \
  do {                                                 \
    plant_stale_message();                             \
    ASSERT_STATUS(call, DIST_ERR_INVALID_ARGUMENT);    \
    expect_fresh_message(#call);                       \
    ASSERT_MSG_HAS_ANY(word1, word2);                  \
    expect_in_step();                                  \
  } while (0)

static void test_errors_null(void) {
  const int64_t shape[3] = {2, 3, 2};
  int64_t split[MAXW];
  ref_split(3, W, split);
  dist_tensor x = tnew(DIST_F32, 3, shape), out = tlike(&x);
  dist_tensor chunk = tnew3(DIST_F32, shape, 1, split[R]), full = tnew3(DIST_F32, shape, 1, 3 * W);
  int64_t idx[MAXW] = {0}, ones[MAXW];
  for (int r = 0; r < W; r++) ones[r] = 1;
  EXPECT_BAD(dist_copy_to_parallel_region(NULL, NULL, &out), "NULL");
  EXPECT_BAD(dist_copy_to_parallel_region(NULL, &x, NULL), "NULL");
  EXPECT_BAD(dist_copy_to_parallel_region_backward(NULL, NULL, &out), "NULL");
  EXPECT_BAD(dist_reduce_from_parallel_region(NULL, &x, NULL), "NULL");
  EXPECT_BAD(dist_reduce_from_parallel_region_backward(NULL, NULL, &out), "NULL");
  EXPECT_BAD(dist_scatter_to_parallel_region(NULL, NULL, 1, &chunk), "NULL");
  EXPECT_BAD(dist_scatter_to_parallel_region_backward(NULL, &chunk, 1, NULL), "NULL");
  EXPECT_BAD(dist_gather_from_parallel_region(NULL, NULL, 1, NULL, &full), "NULL");
  EXPECT_BAD(dist_gather_from_parallel_region_backward(NULL, &full, 1, NULL, NULL), "NULL");
  EXPECT_BAD(dist_all_gather_v_backward(NULL, NULL, &x, 1, NULL), "NULL");
  EXPECT_BAD(dist_gather_v_backward(NULL, &full, NULL, 1, NULL, 0), "NULL");
  EXPECT_BAD(dist_scatter_v_backward(NULL, NULL, &full, 1, NULL, 0), "NULL");
  dist_tensor iout = tnew3(DIST_F32, shape, 1, W); /* W rows: one from each rank */
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, NULL, 1, idx, ones, ones, &iout), "NULL");
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &x, 1, NULL, ones, ones, &iout), "NULL");
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &x, 1, idx, NULL, ones, &iout), "NULL");
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &x, 1, idx, ones, NULL, &iout), "NULL");
  EXPECT_BAD(dist_indexed_all_to_all_v_backward(NULL, &iout, 1, idx, ones, ones, NULL), "NULL");
  EXPECT_BAD(dist_distributed_transpose(NULL, NULL, 1, 0, NULL, NULL, &out), "NULL");
  EXPECT_BAD(dist_distributed_transpose_backward(NULL, &x, 1, 0, NULL, NULL, NULL), "NULL");
  tfree(5, &x, &out, &chunk, &full, &iout);
}

static void test_errors_dims(void) {
  const int64_t shape[3] = {2, 3, 2};
  int64_t split[MAXW], sizes[MAXW];
  ref_split(3, W, split);
  for (int r = 0; r < W; r++) sizes[r] = 3;
  dist_tensor x = tnew(DIST_F32, 3, shape), tout = tlike(&x); /* tout: never the same buffer as x */
  dist_tensor chunk = tnew3(DIST_F32, shape, 1, split[R]), full = tnew3(DIST_F32, shape, 1, 3 * W);
  EXPECT_BAD(dist_scatter_to_parallel_region(NULL, &x, 3, &chunk), "dim");
  EXPECT_BAD(dist_scatter_to_parallel_region_backward(NULL, &chunk, 3, &x), "dim");
  EXPECT_BAD(dist_gather_from_parallel_region(NULL, &x, 3, NULL, &full), "dim");
  EXPECT_BAD(dist_gather_from_parallel_region_backward(NULL, &full, 3, NULL, &x), "dim");
  EXPECT_BAD(dist_all_gather_v_backward(NULL, &full, &x, 3, sizes), "dim");
  EXPECT_BAD(dist_gather_v_backward(NULL, &full, &x, 3, sizes, 0), "dim");
  EXPECT_BAD(dist_scatter_v_backward(NULL, &x, &full, 3, sizes, 0), "dim");
  EXPECT_BAD(dist_distributed_transpose(NULL, &x, 0, 3, NULL, NULL, &tout), "dim");
  EXPECT_BAD(dist_distributed_transpose(NULL, &x, 1, 1, NULL, NULL, &tout), "dim");
  EXPECT_BAD(dist_distributed_transpose_backward(NULL, &x, 2, 2, NULL, NULL, &tout), "dim");
  /* indexed: dim out of range */
  int64_t idx[MAXW] = {0}, ones[MAXW];
  for (int r = 0; r < W; r++) ones[r] = 1;
  dist_tensor got = tnew3(DIST_F32, shape, 1, W);
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &x, 3, idx, ones, ones, &got), "dim");
  tfree(5, &x, &tout, &chunk, &full, &got);
}

static void test_errors_sizes(void) {
  const int64_t shape[3] = {2, 3, 2};
  int64_t sizes[MAXW], split[MAXW];
  dist_tensor x = tnew(DIST_F32, 3, shape);
  /* sizes[me] disagrees with my extent (sizes all 4, x has 3) */
  for (int r = 0; r < W; r++) sizes[r] = 4;
  dist_tensor full4 = tnew3(DIST_F32, shape, 1, 4 * W);
  EXPECT_BAD(dist_gather_from_parallel_region(NULL, &x, 1, sizes, &full4), "size");
  /* grad_out's extent is not the sum of sizes */
  uneven(sizes, W, 0);
  dist_tensor part = tnew3(DIST_F32, shape, 1, sizes[R]), over = tnew3(DIST_F32, shape, 1, offset_of(sizes, W) + 1);
  EXPECT_BAD_ANY(dist_all_gather_v_backward(NULL, &over, &part, 1, sizes), "size", "shape");
  EXPECT_BAD_ANY(dist_gather_from_parallel_region_backward(NULL, &over, 1, sizes, &part), "size", "shape");
  /* split_sizes that do not sum to the extent of dim0 (x has 2 along dim 0) */
  for (int r = 0; r < W; r++) split[r] = r == 0 ? 3 : 0;
  dist_tensor tout = tnew(DIST_F32, 3, (int64_t[3]){R == 0 ? 3 : 0, 3 * W, 2});
  EXPECT_BAD_ANY(dist_distributed_transpose(NULL, &x, 0, 1, split, NULL, &tout), "size", "shape");
  /* negative sizes that still sum to the extent (rank 0's out fits its size) */
  dist_tensor tneg = tnew(DIST_F32, 3, (int64_t[3]){R == 0 ? 2 + W - 1 : 0, 3 * W, 2});
  for (int r = 0; r < W; r++) split[r] = r == 0 ? 2 + W - 1 : -1;
  if (W > 1) EXPECT_BAD_ANY(dist_distributed_transpose(NULL, &x, 0, 1, split, NULL, &tneg), "size", "negative");
  tfree(6, &x, &full4, &part, &over, &tout, &tneg);
}

static void test_errors_indices(void) {
  const int64_t shape[3] = {2, 3, 2};
  int64_t idx[MAXW], ones[MAXW];
  dist_tensor x = tnew(DIST_F32, 3, shape), out = tnew3(DIST_F32, shape, 1, W), back = tlike(&x);
  for (int r = 0; r < W; r++) ones[r] = 1, idx[r] = r % 3;
  idx[0] = 3; /* == x.shape[1]: one past the end */
  EXPECT_BAD_ANY(dist_indexed_all_to_all_v(NULL, &x, 1, idx, ones, ones, &out), "ind", "range");
  EXPECT_BAD_ANY(dist_indexed_all_to_all_v_backward(NULL, &out, 1, idx, ones, ones, &back), "ind", "range");
  idx[0] = -1;
  EXPECT_BAD_ANY(dist_indexed_all_to_all_v(NULL, &x, 1, idx, ones, ones, &out), "ind", "range");
  /* a negative count */
  idx[0] = 0;
  ones[0] = -1;
  EXPECT_BAD_ANY(dist_indexed_all_to_all_v(NULL, &x, 1, idx, ones, ones, &out), "count", "negative");
  tfree(3, &x, &out, &back);
}

/* out with a wrong shape: an error naming the expected shape. */
static void test_errors_shapes(void) {
  const int64_t shape[3] = {2, 11, 3}, wrong[3] = {2, 12, 3};
  int64_t split[MAXW], ones[MAXW], idx[MAXW];
  dist_tensor x = tnew(DIST_F32, 3, shape), bad = tnew(DIST_F32, 3, wrong);
  EXPECT_BAD(dist_copy_to_parallel_region(NULL, &x, &bad), "shape");
  ASSERT_MSG_HAS("11"); /* the expected extent */
  EXPECT_BAD(dist_reduce_from_parallel_region(NULL, &x, &bad), "shape");
  EXPECT_BAD(dist_copy_to_parallel_region_backward(NULL, &x, &bad), "shape");
  EXPECT_BAD(dist_reduce_from_parallel_region_backward(NULL, &x, &bad), "shape");
  /* scatter_to: out one longer than my chunk */
  ref_split(11, W, split);
  dist_tensor chunk1 = tnew3(DIST_F32, shape, 1, split[R] + 1);
  EXPECT_BAD(dist_scatter_to_parallel_region(NULL, &x, 1, &chunk1), "shape");
  /* a dtype that differs between in and out */
  dist_tensor x64 = tnew(DIST_F64, 3, shape);
  EXPECT_BAD_ANY(dist_copy_to_parallel_region(NULL, &x, &x64), "dtype", "f64");
  /* other dimensions differ */
  dist_tensor other = tnew(DIST_F32, 3, (int64_t[3]){3, 11 * W, 3});
  EXPECT_BAD(dist_gather_from_parallel_region(NULL, &x, 1, NULL, &other), "shape");
  /* transpose: out must be split_sizes[me] x sum(cat) */
  ref_split(2, W, split);
  dist_tensor tbad = tnew(DIST_F32, 3, (int64_t[3]){split[R], 11 * W + 1, 3});
  EXPECT_BAD(dist_distributed_transpose(NULL, &x, 0, 1, NULL, NULL, &tbad), "shape");
  /* indexed: out's extent along dim must be sum(recv_counts) = W */
  for (int r = 0; r < W; r++) ones[r] = 1, idx[r] = 0;
  dist_tensor ibad = tnew3(DIST_F32, shape, 1, W + 1);
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &x, 1, idx, ones, ones, &ibad), "shape");
  tfree(7, &x, &bad, &chunk1, &x64, &other, &tbad, &ibad);
}

/* Sizes that overflow (issue 18): size arrays whose sums wrap ({8,
 * INT64_MAX, INT64_MAX, 10} adds up to 16) and counts whose selected slices
 * overflow in bytes. Every rank gets invalid argument with a message that
 * says what overflows. The tensors' data are never read. */
static void test_errors_overflow(void) {
  static uint8_t buf[4096];
  int64_t S[MAXW] = {0}, idx[MAXW] = {0};
  uint64_t wrapped = 0;
  for (int r = 0; r < W; r++) {
    S[r] = r == 1 || r == 2 ? INT64_MAX : r == 0 ? 8 : 10;
    wrapped += (uint64_t)S[r];
  }
  int64_t sum = (int64_t)wrapped > 0 ? (int64_t)wrapped : 1;
  int huge_mine = S[R] == INT64_MAX; /* my tensor of that extent is itself too large (u8 counts as i64) */

  /* indexed: send_counts add up to slices that overflow in bytes: 2^60 rows
   * of 8 f32 to each other rank (1 to myself, at 1 rank 2^60 to myself); the
   * check must come before the indices (W of them) are read. */
  int64_t sc[MAXW], rc[MAXW];
  for (int r = 0; r < W; r++) sc[r] = r == R && W > 1 ? 1 : (int64_t)1 << 60, rc[r] = sc[r];
  if (W > 1)
    for (int r = 0; r < W; r++) rc[r] = 1;
  dist_tensor x = dist_tensor_host(buf, DIST_F32, 2, (int64_t[2]){4, 8});
  dist_tensor xo = dist_tensor_host(buf, DIST_F32, 2, (int64_t[2]){W, 8}); /* at 1 rank the wrong extent: checked later */
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &x, 0, idx, sc, rc, &xo), "overflow");
  ASSERT_MSG_HAS("send_counts");
  EXPECT_BAD(dist_indexed_all_to_all_v_backward(NULL, &xo, 0, idx, sc, rc, &x), "overflow");

  if (W == 1) return; /* one entry: no sum to overflow */
  dist_tensor mine = dist_tensor_host(buf, DIST_U8, 1, &S[R]), whole = dist_tensor_host(buf, DIST_U8, 1, &sum);
  /* gather_from backward: sizes wrap to the extent of grad_out */
  EXPECT_BAD(dist_gather_from_parallel_region_backward(NULL, &whole, 0, S, &mine), "overflow");
  ASSERT_MSG_HAS(huge_mine ? "'grad_in'" : "sizes"); /* the tensor by its name in this call */
  EXPECT_BAD(dist_gather_from_parallel_region(NULL, &mine, 0, S, &whole), "overflow");
  EXPECT_BAD(dist_all_gather_v_backward(NULL, &whole, &mine, 0, S), "overflow");
  EXPECT_BAD(dist_scatter_v_backward(NULL, &whole, &mine, 0, S, 0), "overflow");
  EXPECT_BAD(dist_gather_v_backward(NULL, &mine, &whole, 0, S, 0), "overflow");
  /* indexed: counts that wrap (indices enough for the wrapped sum) */
  int64_t many[64] = {0};
  dist_tensor u = dist_tensor_host(buf, DIST_U8, 1, (int64_t[1]){4}), uo = dist_tensor_host(buf, DIST_U8, 1, &sum);
  for (int r = 0; r < W; r++) sc[r] = S[r], rc[r] = r == R ? S[r] : 1;
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &u, 0, many, sc, rc, &uo), "overflow");
  ASSERT_MSG_HAS("send_counts");
  for (int r = 0; r < W; r++) sc[r] = r == R, rc[r] = r == R ? 1 : INT64_MAX;
  EXPECT_BAD(dist_indexed_all_to_all_v(NULL, &u, 0, many, sc, rc, &uo), "overflow");
  ASSERT_MSG_HAS("recv_counts");
  /* transpose: split_sizes that wrap to dim0's extent (out valid on every
   * rank: the sizes must be caught before out's shape is compared) */
  dist_tensor tx = dist_tensor_host(buf, DIST_U8, 2, (int64_t[2]){sum, 1});
  dist_tensor ty = dist_tensor_host(buf, DIST_U8, 2, (int64_t[2]){1, W});
  EXPECT_BAD(dist_distributed_transpose(NULL, &tx, 0, 1, S, NULL, &ty), "overflow");
  ASSERT_MSG_HAS("split_sizes");
  EXPECT_BAD(dist_distributed_transpose_backward(NULL, &ty, 0, 1, S, NULL, &tx), "overflow");
  /* transpose: cat_sizes that wrap; x holds my entry along dim1 (u8[1, S[me]]) */
  int64_t split1[MAXW];
  ref_split(1, W, split1);
  dist_tensor cx = dist_tensor_host(buf, DIST_U8, 2, (int64_t[2]){1, S[R]});
  dist_tensor cy = dist_tensor_host(buf, DIST_U8, 2, (int64_t[2]){split1[R], sum});
  EXPECT_BAD(dist_distributed_transpose(NULL, &cx, 0, 1, NULL, S, &cy), "overflow");
  ASSERT_MSG_HAS(huge_mine ? "'in'" : "cat_sizes");
}

/* Counts beyond the engine's (an MPI int) on rank 0 only: the exchanges under
 * the indexed all-to-all and the transpose must refuse on every rank in
 * their check round, not in MPI on rank 0 alone (the others would wait for
 * it). Rank 0's tensors claim their extents over a buffer of 1 MiB, which
 * holds the other ranks' ones. Gloo's counts are size_t: nothing to check
 * there. */
static void expect_engine_refusal(dist_status s, const char *call) {
  if (s != DIST_ERR_UNSUPPORTED) fprintf(stderr, "[%d/%d] %s: status %d (%s)\n", R, W, call, (int)s, dist_last_error());
  CU_ASSERT_EQUAL(s, DIST_ERR_UNSUPPORTED);
  ASSERT_MSG_HAS(R == 0 ? "engine takes" : "rank 0");
  expect_in_step();
}

static void test_errors_engine_count(void) {
  const char *engine = NULL;
  ASSERT_OK(dist_coll_backend(NULL, DIST_MEM_HOST, &engine));
  if (W == 1 || !engine || strcmp(engine, "mpi")) return;
  static uint8_t bytes[1 << 20];
  static int64_t zeros[2048];
  /* Indexed: rank 0 selects row 0 2048 times from rows of 2^20 bytes (2^31
   * bytes to itself); the others one row each, to themselves. */
  int64_t n = R == 0 ? 2048 : 1, sc[MAXW] = {0};
  sc[R] = n;
  dist_tensor x = dist_tensor_host(bytes, DIST_U8, 2, (int64_t[2]){1, 1 << 20});
  dist_tensor out = dist_tensor_host(bytes, DIST_U8, 2, (int64_t[2]){n, 1 << 20});
  expect_engine_refusal(dist_indexed_all_to_all_v(NULL, &x, 0, zeros, sc, sc, &out), "indexed_all_to_all_v");
  expect_engine_refusal(dist_indexed_all_to_all_v_backward(NULL, &out, 0, zeros, sc, sc, &x),
                        "indexed_all_to_all_v_backward");
  /* Transpose of one row: rank 0 gets it, and holds 2^31 of its columns. */
  int64_t split[MAXW] = {0}, cat[MAXW];
  split[0] = 1;
  for (int r = 0; r < W; r++) cat[r] = r == 0 ? (int64_t)1 << 31 : 1;
  int64_t total = cat[0] + W - 1;
  dist_tensor in = dist_tensor_host(bytes, DIST_U8, 2, (int64_t[2]){1, cat[R]});
  dist_tensor y = dist_tensor_host(bytes, DIST_U8, 2, (int64_t[2]){split[R], total});
  expect_engine_refusal(dist_distributed_transpose(NULL, &in, 0, 1, split, cat, &y), "distributed_transpose");
}

/* A bad argument on one rank only: every rank gets an error (no hang), the
 * others' message names the rank; then the ranks are still in step. */
static void test_errors_one_rank(void) {
  if (W == 1) return;
  const int64_t shape[3] = {2, 3, 2};
  dist_tensor x = tnew(DIST_F32, 3, shape), full = tnew3(DIST_F32, shape, 1, 3 * W);
  int bad = W - 1;
  plant_stale_message();
  dist_status s = dist_gather_from_parallel_region(NULL, &x, R == bad ? 3 : 1, NULL, &full);
  expect_fresh_message("gather_from with dim 3 on one rank");
  if (R == bad) {
    CU_ASSERT_EQUAL(s, DIST_ERR_INVALID_ARGUMENT);
    ASSERT_MSG_HAS("dim");
  } else {
    if (s == DIST_SUCCESS) fprintf(stderr, "[%d/%d] gather_from succeeded though rank %d passed dim 3\n", R, W, bad);
    CU_ASSERT_NOT_EQUAL(s, DIST_SUCCESS);
    ASSERT_MSG_HAS("rank");
  }
  expect_in_step();
  /* NULL out on one rank only. */
  dist_tensor y = tlike(&x);
  plant_stale_message();
  s = dist_copy_to_parallel_region_backward(NULL, &x, R == bad ? NULL : &y);
  expect_fresh_message("copy_to_backward with NULL grad_in on one rank");
  CU_ASSERT_NOT_EQUAL(s, DIST_SUCCESS);
  expect_in_step();
  /* Valid but different dims on rank 0 and the others (same element counts,
   * so nothing hangs): arguments that do not match are an error everywhere,
   * in the mapping and in the coll.h call under it. */
  int64_t two[3] = {2, 2, 2}, four0[3] = {2 * W, 2, 2}, four1[3] = {2, 2 * W, 2};
  dist_tensor small = tnew(DIST_F32, 3, two), big = tnew(DIST_F32, 3, R == 0 ? four0 : four1);
  s = dist_gather_from_parallel_region(NULL, &small, R == 0 ? 0 : 1, NULL, &big);
  if (s == DIST_SUCCESS) fprintf(stderr, "[%d/%d] gather_from succeeded though the ranks passed different dims\n", R, W);
  CU_ASSERT_NOT_EQUAL(s, DIST_SUCCESS);
  expect_in_step();
  s = dist_all_gather_v(NULL, &small, &big, R == 0 ? 0 : 1, NULL);
  if (s == DIST_SUCCESS) fprintf(stderr, "[%d/%d] all_gather_v succeeded though the ranks passed different dims\n", R, W);
  CU_ASSERT_NOT_EQUAL(s, DIST_SUCCESS);
  expect_in_step();
  int64_t twos[MAXW];
  for (int r = 0; r < W; r++) twos[r] = 2;
  s = dist_all_gather_v(NULL, &small, &big, R == 0 ? 0 : 1, twos); /* the same with explicit sizes */
  if (s == DIST_SUCCESS) fprintf(stderr, "[%d/%d] all_gather_v(sizes) succeeded though the ranks passed different dims\n", R, W);
  CU_ASSERT_NOT_EQUAL(s, DIST_SUCCESS);
  expect_in_step();
  tfree(5, &x, &y, &full, &small, &big);
}

static CU_TestInfo adjoint_tests[] = {
    {"copy_to", test_adjoint_copy_to},
    {"reduce_from", test_adjoint_reduce_from},
    {"scatter_to", test_adjoint_scatter_to},
    {"gather_from", test_adjoint_gather_from},
    {"all_gather_v", test_adjoint_all_gather_v},
    {"gather_v", test_adjoint_gather_v},
    {"scatter_v", test_adjoint_scatter_v},
    {"indexed_all_to_all_v", test_adjoint_indexed},
    {"distributed_transpose", test_adjoint_transpose},
    CU_TEST_INFO_NULL};

static CU_TestInfo forward_tests[] = {
    {"copy_to and reduce_from", test_forward_copy_reduce},
    {"scatter_to", test_forward_scatter_to},
    {"gather_from and all_gather_v", test_forward_gather_from},
    {"gather_v and scatter_v backwards", test_forward_rooted_backwards},
    {"indexed_all_to_all_v", test_forward_indexed},
    {"distributed_transpose", test_forward_transpose},
    {"subgroup", test_forward_subgroup},
    CU_TEST_INFO_NULL};

static CU_TestInfo error_tests[] = {
    {"NULL arguments", test_errors_null},
    {"dims", test_errors_dims},
    {"sizes", test_errors_sizes},
    {"indices", test_errors_indices},
    {"sizes that overflow", test_errors_overflow},
    {"shapes", test_errors_shapes},
    {"bad on one rank", test_errors_one_rank},
    {"counts beyond the engine's on one rank", test_errors_engine_count},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"adjoint", NULL, NULL, NULL, NULL, adjoint_tests},
                                {"forward", NULL, NULL, NULL, NULL, forward_tests},
                                {"errors", NULL, NULL, NULL, NULL, error_tests},
                                CU_SUITE_INFO_NULL};

static int setup(int round) {
  (void)round;
  if (W <= MAXW) return 0;
  fprintf(stderr, "test_mappings supports at most %d ranks\n", MAXW);
  return 1;
}

int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_mappings", suites, .rank = &R, .size = &W, .setup = setup}); }
