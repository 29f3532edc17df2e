/* The CUDA engine: cuFFT for the local transforms (plans made once, on the
 * stream of dist_cuda_set_stream at each call), the box kernel for the
 * exchange, cudaMalloc'd scratch. cuFFT plans have no alignment rules and no
 * planner choice, so `measure` does not apply. */
#include <cufft.h>
#include <stdlib.h>

#include "mem/cuda_libs.h"
#include "fft_internal.h"
#include "mem/memops.h"
#include "core/check.h"

typedef struct cufft_state {
  cufftHandle rows_fwd, rows_inv, cols, whole_fwd, whole_inv;
  int have_rows, have_cols, have_whole;
} cufft_state;

dist_status dist__cufft_error(int code, const char *call) {
  return dist__error(DIST_ERR_CUDA, "dist_fft: %s failed (cufftResult %d)", call, code);
}

static int is_d(const dist_fft_plan *p) { return p->prec == DIST_F64; }

static dist_status make(cufftHandle *h, int rank, long long *n, long long *inembed, long long istride, long long idist,
                        long long *onembed, long long ostride, long long odist, cufftType type, long long batch) {
  size_t work = 0;
  DIST_CUFFT_CALL(cufftCreate(h));
  cufftResult r = cufftMakePlanMany64(*h, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, &work);
  if (r != CUFFT_SUCCESS) {
    DIST_WARN_CALL(cufftDestroy(*h));
    return dist__cufft_error(r, "cufftMakePlanMany64");
  }
  return DIST_SUCCESS;
}

/* One rank, 2-D: the forward as one batched cuFFT plan writing either layout
 * directly (TRANSPOSED through the output embedding: element (b, i, j) of
 * batch b lands at (i*L + b)*k1 + j), the inverse as one plan from T in the
 * SAME layout. 3-D plans and destroy_input TRANSPOSED plans (no T) keep the
 * pipeline. */
static dist_status create_whole(dist_fft_plan *p, cufft_state *st) {
  if (p->P != 1 || p->rank != 2 || !p->T || !p->L || !p->n0 || !p->n1) return DIST_SUCCESS;
  int r2c = p->type == DIST_FFT_R2C, d = is_d(p), tr = p->layout == DIST_FFT_OUT_TRANSPOSED;
  long long n[2] = {p->n0, p->n1}, cplx[2] = {p->n0, p->k1}, outer[2] = {p->n0, tr ? p->L * p->k1 : p->k1};
  long long in_dist = p->n0 * p->n1, c_dist = p->n0 * p->k1;
  cufftType fwd = r2c ? (d ? CUFFT_D2Z : CUFFT_R2C) : (d ? CUFFT_Z2Z : CUFFT_C2C);
  cufftType inv = r2c ? (d ? CUFFT_Z2D : CUFFT_C2R) : fwd;
  DIST_CHECK(make(&st->whole_fwd, 2, n, r2c ? n : cplx, 1, in_dist, outer, 1, tr ? p->k1 : c_dist, fwd, p->L));
  dist_status s = make(&st->whole_inv, 2, n, cplx, 1, c_dist, r2c ? n : cplx, 1, in_dist, inv, p->L);
  if (s) {
    DIST_WARN_CALL(cufftDestroy(st->whole_fwd));
    return s;
  }
  st->have_whole = p->whole = 1;
  return DIST_SUCCESS;
}

static dist_status exec(cufftHandle h, const dist_fft_plan *p, int inverse, const void *in, void *out,
                        const char *what) {
  DIST_CUFFT_CALL(cufftSetStream(h, dist__cuda_stream()));
  cufftResult r;
  void *i = (void *)in;
  if (p->type == DIST_FFT_C2C)
    r = is_d(p) ? cufftExecZ2Z(h, i, out, inverse ? CUFFT_INVERSE : CUFFT_FORWARD)
                : cufftExecC2C(h, i, out, inverse ? CUFFT_INVERSE : CUFFT_FORWARD);
  else if (!inverse) r = is_d(p) ? cufftExecD2Z(h, i, out) : cufftExecR2C(h, i, out);
  else r = is_d(p) ? cufftExecZ2D(h, i, out) : cufftExecC2R(h, i, out);
  return DIST_CUFFT_STATUS(r, what);
}

static dist_status box(const dist_fft_plan *p, const dist__fft_box *b) {
  int e = dist__fft_copy_cuda(b, is_d(p), (void *)dist__cuda_stream());
  return DIST_CUDA_STATUS(e, "the FFT copy kernel");
}

/* Forward: transform, then scale in place if the norm asks. Inverse: copy
 * `in` into T in the SAME layout, scaled (cuFFT's c2r overwrites its input,
 * and `in` is preserved), make the DC and Nyquist columns Hermitian along n0
 * (what the pipeline's column transform and real-part rule give), c2r. */
static dist_status whole(dist_fft_plan *p, int inverse, const void *in, void *out, double scale) {
  cufft_state *st = p->eng_state;
  int64_t all = p->L * p->n0 * p->k1;
  if (!inverse) {
    DIST_CHECK(exec(st->whole_fwd, p, 0, in, out, "whole forward transform"));
    if (scale == 1.0) return DIST_SUCCESS;
    dist__fft_box b = {out, out, 1, 1, all, 0, 0, 0, 0, scale, 0, 0, 0, 1.0, 0};
    return box(p, &b);
  }
  dist__fft_box b = {p->T, in, 1, 1, all, 0, 0, 0, 0, scale, 0, 0, 0, 1.0, 0};
  if (p->layout == DIST_FFT_OUT_TRANSPOSED) { /* [n0, L, k1] -> [L, n0, k1] */
    b.na = p->n0, b.nb = p->L, b.row = p->k1;
    b.ssa = p->L * p->k1, b.ssb = p->k1, b.dsa = p->k1, b.dsb = p->n0 * p->k1;
  }
  DIST_CHECK(box(p, &b));
  if (p->type == DIST_FFT_R2C) {
    int e = dist__fft_hermitize_cuda(p->T, is_d(p), p->L, p->n0, p->k1, p->n1, (void *)dist__cuda_stream());
    if (e) return dist__cuda_error(e, "the FFT Hermitian-symmetry kernel");
  }
  return exec(st->whole_inv, p, 1, p->T, out, "whole inverse transform");
}

static dist_status create(dist_fft_plan *p, dist__group *g) {
  DIST_CHECK(dist__cufft_load());
  cufft_state *st = calloc(1, sizeof *st);
  if (!st) return dist__error(DIST_ERR_NO_MEMORY, "dist_fft_plan_create: cuFFT state");
  p->eng_state = st;
  int r2c = p->type == DIST_FFT_R2C, d = is_d(p);
  long long rows = p->L * p->in_sizes[p->me], M = p->L * p->out_sizes[p->me] * p->R;
  if (rows) {
    int rank = p->rank - 1;
    long long n[2] = {p->n1, p->n2}, real[2] = {p->n1, p->n2}, cplx[2] = {p->k1, p->R};
    if (rank == 1) cplx[0] = p->k1;
    long long row_in = p->n1 * p->n2, row_a = p->k1 * p->R;
    cufftType fwd = r2c ? (d ? CUFFT_D2Z : CUFFT_R2C) : (d ? CUFFT_Z2Z : CUFFT_C2C);
    cufftType inv = r2c ? (d ? CUFFT_Z2D : CUFFT_C2R) : fwd;
    DIST_CHECK(make(&st->rows_fwd, rank, n, real, 1, row_in, cplx, 1, row_a, fwd, rows));
    dist_status s = make(&st->rows_inv, rank, n, cplx, 1, row_a, real, 1, row_in, inv, rows);
    if (s) {
      DIST_WARN_CALL(cufftDestroy(st->rows_fwd));
      return s;
    }
    st->have_rows = 1;
  }
  if (M) {
    long long n0 = p->n0;
    DIST_CHECK(make(&st->cols, 1, &n0, &n0, M, 1, &n0, M, 1, d ? CUFFT_Z2Z : CUFFT_C2C, M));
    st->have_cols = 1;
  }
  return create_whole(p, st);
}

static void destroy(dist_fft_plan *p) {
  cufft_state *st = p->eng_state;
  if (!st) return;
  if (st->have_rows) {
    DIST_WARN_CALL(cufftDestroy(st->rows_fwd));
    DIST_WARN_CALL(cufftDestroy(st->rows_inv));
  }
  if (st->have_cols) DIST_WARN_CALL(cufftDestroy(st->cols));
  if (st->have_whole) {
    DIST_WARN_CALL(cufftDestroy(st->whole_fwd));
    DIST_WARN_CALL(cufftDestroy(st->whole_inv));
  }
  free(st);
  p->eng_state = NULL;
}

static dist_status prepare(dist_fft_plan *p, int inverse, const void *in, void *out) { return DIST_SUCCESS; }

/* One chunk: the plan covers all batch entries (lc == L on the device). */
static dist_status rows(dist_fft_plan *p, int inverse, const void *in, void *out, int64_t nl) {
  cufft_state *st = p->eng_state;
  if (!st->have_rows) return DIST_SUCCESS;
  if (nl != p->L) return dist__error(DIST_ERR_INTERNAL, "dist_fft: cuFFT row chunk of %lld entries", (long long)nl);
  cufftHandle h = inverse ? st->rows_inv : st->rows_fwd;
  if (inverse && p->type == DIST_FFT_R2C && p->rank == 3) { /* a 2-D C2R is defined for Hermitian input only */
    int e = dist__fft_hermitize_cuda((void *)in, is_d(p), nl * p->in_sizes[p->me], p->n1, p->R, p->n2,
                                     (void *)dist__cuda_stream());
    if (e) return dist__cuda_error(e, "the FFT Hermitian-symmetry kernel");
  }
  return exec(h, p, inverse, in, out, inverse ? "inverse row transform" : "row transform");
}

static dist_status cols(dist_fft_plan *p, int inverse, const void *in, void *out) {
  cufft_state *st = p->eng_state;
  if (!st->have_cols) return DIST_SUCCESS;
  DIST_CUFFT_CALL(cufftSetStream(st->cols, dist__cuda_stream()));
  int dir = inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
  cufftResult r = is_d(p) ? cufftExecZ2Z(st->cols, (void *)in, out, dir) : cufftExecC2C(st->cols, (void *)in, out, dir);
  return DIST_CUFFT_STATUS(r, "n0 transform");
}

static dist_status copy(dist_fft_plan *p, const dist__fft_box *b) { return box(p, b); }

static dist_status alloc(dist_fft_plan *p, size_t bytes, void **ptr) {
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
  return DIST_CUDA_STATUS(e, "cudaMalloc (FFT scratch)");
}

static void release(dist_fft_plan *p, void *ptr) {
  if (ptr) cudaFree(ptr);
}

const dist__fft_engine dist__fft_cufft = {"cufft", create, destroy, prepare, rows, cols, copy, alloc, release, whole};
