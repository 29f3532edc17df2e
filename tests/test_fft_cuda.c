/* The distributed FFT on CUDA device memory (run at 1, 2, 3 and 4 ranks).
 *
 * A representative subset of test_fft.c on cudaMalloc'd buffers: for each
 * case a DIST_MEM_CUDA plan and a DIST_MEM_HOST plan of the same problem run
 * on the same data; the device results (downloaded with cudaMemcpy after the
 * work on dist_cuda_stream() is done) are compared with the serial FFTW
 * transform of the global array, in double, and with the host plan's results:
 * max |got - want| over the ranks / max |want| <= 1e-5 (f32) or 1e-12 (f64).
 * 2-D r2c and 3-D c2c (plus one 3-D r2c and one 2-D c2c), f32 and f64, both
 * layouts, every norm; forward, inverse, round trip and the adjoint identities
 * of the backwards, re-execution on a user stream, uneven sizes with zeros.
 *
 * Exits 77 (automake's SKIP) with "SKIP: no CUDA device" when built without
 * CUDA or cuFFT (no HAVE_CUDA / HAVE_CUFFT in config.h) or when some rank sees
 * no device. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <mpi.h>
#include <stdio.h>

#include "cuda_skip.h" /* cunit_mpi.h */

#if !defined(HAVE_CUDA) || !defined(HAVE_CUFFT)

int main(void) { return cuda_skip_build("test_fft_cuda", "no CUDA device (built without CUDA or cuFFT)"); }

#else /* HAVE_CUDA && HAVE_CUFFT */

#include <cuda_runtime.h>
#include <distmgr/cuda.h>
#include <distmgr/fft.h>
#include <distmgr/mpi.h>
#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fft_ref.h"
#include "coll_values.h" /* dtype names and sizes, is_complex, seeded unit() */

#define MAXW 64

static int DEV; /* my CUDA ordinal from the manager */


#define CUDA_OK(call) cuda_ok_((call), #call, __LINE__)
static int cuda_ok_(cudaError_t e, const char *text, int line) {
  if (e != cudaSuccess) fprintf(stderr, "[rank %d/%d] line %d: %s: %s\n", R, W, line, text, cudaGetErrorString(e));
  assert_at(e == cudaSuccess, line, text);
  return e == cudaSuccess;
}


static double sget(dist_dtype prec, const void *p, int64_t i) { return load(prec, p, i).re; }
static void sset(dist_dtype prec, void *p, int64_t i, double v) { store(prec, p, i, (cval){v, 0}); }

/* v reduced over the world by distmgr's host all-reduce (either engine). NaN counts as +infinity. */
static double allred(double v, dist_reduce_op op) { return cunit_all_reduce_double(isnan(v) ? INFINITY : v, op); }

/* ---- cases --------------------------------------------------------------------------- */

typedef struct fcase {
  dist_fft_type type;
  dist_dtype prec;
  int fr, ndim;
  int64_t shape[6];
  dist_fft_layout layout;
  dist_fft_norm norm;
  int uneven; /* explicit sizes with zeros */
} fcase;

static const fcase CASES[] = {
    {DIST_FFT_R2C, DIST_F32, 2, 3, {2, 7, 6}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD, 0},
    {DIST_FFT_R2C, DIST_F64, 2, 3, {3, 9, 5}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO, 0},
    {DIST_FFT_R2C, DIST_F64, 2, 2, {17, 16}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD, 1},
    {DIST_FFT_R2C, DIST_F32, 2, 4, {2, 3, 7, 5}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_FORWARD, 1},
    {DIST_FFT_C2C, DIST_F32, 3, 4, {2, 5, 6, 4}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_FORWARD, 0},
    {DIST_FFT_C2C, DIST_F64, 3, 3, {5, 4, 6}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO, 0},
    {DIST_FFT_C2C, DIST_F64, 3, 3, {7, 5, 3}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_BACKWARD, 1},
    {DIST_FFT_R2C, DIST_F64, 3, 4, {2, 6, 5, 8}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD, 0},
    {DIST_FFT_C2C, DIST_F32, 2, 3, {2, 6, 5}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO, 0},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])


/* Uneven sizes adding up to total, rank r empty when (r + salt) % 3 == 0 (at P > 1). */
static void uneven_sizes(int64_t total, int P, int salt, int64_t *sizes) {
  int64_t w[MAXW], sum = 0, given = 0;
  int last = 0;
  for (int r = 0; r < P; r++) {
    w[r] = P > 1 && (r + salt) % 3 == 0 ? 0 : 1 + 2 * ((r + salt) % 2);
    sum += w[r];
    if (w[r]) last = r;
  }
  for (int r = 0; r < P; r++) given += sizes[r] = w[r] * total / sum;
  sizes[last] += total - given;
}

/* A case's two plans and its geometry. */
typedef struct fctx {
  fcase c;
  int nb;
  int64_t B, n[3], K[3], N, NK;
  int64_t in_sizes[MAXW], out_sizes[MAXW];
  dist_fft_plan *dplan, *hplan; /* device and host plans */
  dist_fft_local in, out;       /* the host plan's pieces (test_fft checks them) */
  char name[256];
} fctx;

static int ctx_open(fctx *x, const fcase *c, int line) {
  memset(x, 0, sizeof *x);
  x->c = *c;
  x->nb = c->ndim - c->fr;
  x->B = prod(c->shape, x->nb);
  for (int i = 0; i < c->fr; i++) x->n[i] = x->K[i] = c->shape[x->nb + i];
  if (c->type == DIST_FFT_R2C) x->K[c->fr - 1] = x->n[c->fr - 1] / 2 + 1;
  x->N = prod(x->n, c->fr), x->NK = prod(x->K, c->fr);
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  opt.norm = c->norm, opt.layout = c->layout, opt.device = DEV;
  if (c->uneven || x->n[0] < W) {
    uneven_sizes(x->n[0], W, 0, x->in_sizes);
    opt.in_sizes = x->in_sizes;
  }
  if (c->uneven || x->K[1] < W) {
    uneven_sizes(x->K[1], W, 1, x->out_sizes);
    opt.out_sizes = x->out_sizes;
  } else {
    ref_split(x->K[1], W, x->out_sizes);
  }
  snprintf(x->name, sizeof x->name, "%s %s fft_rank %d %s norm %d%s (case %d)", c->type == DIST_FFT_R2C ? "r2c" : "c2c",
           DT_NAME[c->prec], c->fr, c->layout == DIST_FFT_OUT_TRANSPOSED ? "transposed" : "same", (int)c->norm,
           c->uneven ? " uneven sizes" : "", (int)(c - CASES));
  char what[320];
  snprintf(what, sizeof what, "CUDA plan_create %s", x->name);
  dist_status sd = dist_fft_plan_create(&x->dplan, c->type, c->prec, DIST_MEM_CUDA, c->ndim, c->shape, c->fr, &opt);
  check_ok_(sd, what, line);
  dist_status sh = dist_fft_plan_create(&x->hplan, c->type, c->prec, DIST_MEM_HOST, c->ndim, c->shape, c->fr, &opt);
  check_ok_(sh, "host plan_create", line);
  int ok = allred(sd == DIST_SUCCESS && sh == DIST_SUCCESS, DIST_MIN) > 0;
  if (ok) {
    dist_fft_local di, dout;
    ok = check_ok_(dist_fft_local_input(x->hplan, &x->in), "local_input", line) &&
         check_ok_(dist_fft_local_output(x->hplan, &x->out), "local_output", line) &&
         check_ok_(dist_fft_local_input(x->dplan, &di), "CUDA local_input", line) &&
         check_ok_(dist_fft_local_output(x->dplan, &dout), "CUDA local_output", line);
    if (ok) {
      int same = memcmp(di.shape, x->in.shape, sizeof di.shape) == 0 && di.dtype == x->in.dtype &&
                 memcmp(dout.shape, x->out.shape, sizeof dout.shape) == 0 && dout.dtype == x->out.dtype &&
                 memcmp(dout.offset, x->out.offset, sizeof dout.offset) == 0 && di.nbytes == x->in.nbytes &&
                 dout.nbytes == x->out.nbytes;
      if (!same)
        fprintf(stderr, "[rank %d/%d] %s: the CUDA plan's pieces differ from the host plan's\n", R, W, x->name);
      assert_at(same, line, "CUDA plan's pieces == host plan's pieces");
    }
    ok = allred(ok, DIST_MIN) > 0;
  }
  if (!ok) {
    if (sd == DIST_SUCCESS) dist_fft_plan_destroy(x->dplan);
    if (sh == DIST_SUCCESS) dist_fft_plan_destroy(x->hplan);
    x->dplan = x->hplan = NULL;
  }
  return ok;
}

static void ctx_close(fctx *x) {
  dist_fft_plan_destroy(x->dplan);
  dist_fft_plan_destroy(x->hplan);
}

/* ---- buffers --------------------------------------------------------------------------- */

/* A piece on the host (filled with 0xFF: NaN) and its device twin. */
typedef struct pbuf {
  const dist_fft_local *p;
  void *h, *d;
  dist_tensor ht, dt;
  int64_t nscal;
} pbuf;

static pbuf pbuf_new(const fctx *x, const dist_fft_local *p) {
  pbuf b;
  b.p = p;
  b.nscal = p->numel * comps(p->dtype);
  b.h = malloc(p->nbytes + 16);
  memset(b.h, 0xFF, p->nbytes + 16);
  b.d = NULL;
  CUDA_OK(cudaMalloc(&b.d, p->nbytes + 16));
  CUDA_OK(cudaMemset(b.d, 0xFF, p->nbytes + 16));
  b.ht = dist_tensor_host(p->numel ? b.h : NULL, p->dtype, p->ndim, p->shape);
  b.dt = dist_tensor_cuda(p->numel ? b.d : NULL, p->dtype, DEV, p->ndim, p->shape);
  (void)x;
  return b;
}

static void pbuf_free(pbuf *b) {
  free(b->h);
  cudaFree(b->d);
}

static void upload(pbuf *b) { CUDA_OK(cudaMemcpy(b->d, b->h, b->p->nbytes, cudaMemcpyHostToDevice)); }

/* The device bytes, once the work enqueued on distmgr's stream is done (caller frees). */
static void *download(const pbuf *b) {
  void *h = malloc(b->p->nbytes + 16);
  CUDA_OK(cudaStreamSynchronize(dist_cuda_stream()));
  CUDA_OK(cudaMemcpy(h, b->d, b->p->nbytes, cudaMemcpyDeviceToHost));
  return h;
}

/* Flat index in the natural global array [batch..., n0, rest...] of element i of p. */
static int64_t to_natural(const fctx *x, const dist_fft_local *p, int64_t i) {
  int64_t g[DIST_TENSOR_MAX_DIMS];
  int nb = x->nb, tr = p == &x->out && x->c.layout == DIST_FFT_OUT_TRANSPOSED;
  for (int d = p->ndim - 1; d >= 0; d--) {
    g[d] = i % p->shape[d] + p->offset[d];
    i /= p->shape[d];
  }
  int64_t idx = 0;
  for (int d = 0; d < p->ndim; d++) {
    int src = !tr || d > nb ? d : d < nb ? d + 1 : 0;
    idx = idx * p->global[src] + g[src];
  }
  return idx;
}

static void scatter_piece(const fctx *x, const double *glob, pbuf *b) {
  int cs = comps(b->p->dtype);
  for (int64_t i = 0; i < b->p->numel; i++) {
    int64_t j = to_natural(x, b->p, i);
    for (int k = 0; k < cs; k++) sset(x->c.prec, b->h, i * cs + k, glob[j * cs + k]);
  }
  upload(b);
}

/* got (my piece, host memory) against want (the whole array in natural order), over the world. */
static int expect_piece_(const fctx *x, const char *what, const dist_fft_local *p, const void *got, const double *want,
                         int line) {
  int cs = comps(p->dtype);
  double mine = 0, scale = 0;
  for (int64_t i = 0; i < p->numel * cs; i++) {
    double d = fabs(sget(x->c.prec, got, i) - want[to_natural(x, p, i / cs) * cs + i % cs]);
    mine = isnan(d) ? INFINITY : fmax(mine, d);
  }
  for (int64_t i = 0; i < prod(p->global, p->ndim) * cs; i++) scale = fmax(scale, fabs(want[i]));
  if (scale == 0) scale = 1;
  double rel = allred(mine, DIST_MAX) / scale;
  int ok = rel <= tol_of(x->c.prec);
  if (!(mine / scale <= tol_of(x->c.prec)))
    fprintf(stderr, "[rank %d/%d] line %d: %s, %s: relative error %.3g (tolerance %.0e)\n", R, W, line, what, x->name,
            mine / scale, tol_of(x->c.prec));
  assert_at(ok, line, what);
  return ok;
}

/* ---- serial references ------------------------------------------------------------------ */


/* B unscaled transforms over the whole array in natural order (see test_fft.c). */
static void ref_fft(const fctx *x, ref_kind kind, const double *in, double *out) {
  ref_fft_many(x->c.fr, x->n, x->B, kind, in, out);
}



/* ---- checks ------------------------------------------------------------------------------ */

/* forward (or inverse) on the device and on the host, from my piece of gsrc:
 * both against want, and the device against the host. */
static void check_both_(fctx *x, int inverse, const double *gsrc, const double *want, int line) {
  const dist_fft_local *ps = inverse ? &x->out : &x->in, *pd = inverse ? &x->in : &x->out;
  pbuf a = pbuf_new(x, ps), b = pbuf_new(x, pd);
  scatter_piece(x, gsrc, &a);
  void *keep = malloc(ps->nbytes + 1);
  memcpy(keep, a.h, ps->nbytes);
  const char *what = inverse ? "inverse on the device" : "forward on the device";
  int ok = check_ok_(inverse ? dist_fft_inverse(x->dplan, &a.dt, &b.dt) : dist_fft_forward(x->dplan, &a.dt, &b.dt), what,
                    line);
  int host_ok = check_ok_(inverse ? dist_fft_inverse(x->hplan, &a.ht, &b.ht) : dist_fft_forward(x->hplan, &a.ht, &b.ht),
                         "the same on the host", line);
  void *got = download(&b), *src_after = download(&a);
  expect_piece_(x, what, pd, got, want, line);
  if (ok && host_ok) { /* device vs host, as a relative error against the host's result */
    int cs = comps(pd->dtype);
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < pd->numel * cs; i++) {
      diff = fmax(diff, fabs(sget(x->c.prec, got, i) - sget(x->c.prec, b.h, i)));
      scale = fmax(scale, fabs(sget(x->c.prec, b.h, i)));
    }
    diff = allred(diff, DIST_MAX), scale = allred(scale, DIST_MAX);
    int same = diff <= tol_of(x->c.prec) * (scale > 0 ? scale : 1);
    if (!same)
      fprintf(stderr, "[rank %d/%d] line %d: %s, %s: device and host differ by %.3g\n", R, W, line, what, x->name,
              diff / scale);
    assert_at(same, line, "device result == host result");
  }
  int kept = memcmp(src_after, keep, ps->nbytes) == 0, host_kept = memcmp(a.h, keep, ps->nbytes) == 0;
  assert_at(kept, line, "the device input is never modified");
  assert_at(host_kept, line, "the host input is never modified");
  free(got), free(src_after), free(keep);
  pbuf_free(&a), pbuf_free(&b);
}

#define CHECK_FORWARD(x, seed) check_forward_((x), (seed), __LINE__)
static void check_forward_(fctx *x, uint64_t seed, int line) {
  int r2c = x->c.type == DIST_FFT_R2C;
  double *src = gen_global(seed, x->B * x->N * (r2c ? 1 : 2), x->c.prec);
  double *want = malloc((size_t)(x->B * x->NK * 2) * sizeof *want);
  ref_fft(x, r2c ? REF_R2C : REF_DFT, src, want);
  double s = fwd_scale(x->c.norm, x->N);
  for (int64_t i = 0; i < x->B * x->NK * 2; i++) want[i] *= s;
  check_both_(x, 0, src, want, line);
  free(src), free(want);
}

#define CHECK_INVERSE(x, seed) check_inverse_((x), (seed), __LINE__)
static void check_inverse_(fctx *x, uint64_t seed, int line) {
  int r2c = x->c.type == DIST_FFT_R2C;
  double *z, *want = malloc((size_t)(x->B * x->N * 2) * sizeof *want);
  int64_t nwant = x->B * x->N * (r2c ? 1 : 2);
  if (r2c) { /* the spectrum of a real array: Hermitian */
    double *real = gen_global(seed, x->B * x->N, x->c.prec);
    z = malloc((size_t)(x->B * x->NK * 2) * sizeof *z);
    ref_fft(x, REF_R2C, real, z);
    if (x->c.prec == DIST_F32)
      for (int64_t i = 0; i < x->B * x->NK * 2; i++) z[i] = (double)(float)z[i];
    ref_fft(x, REF_C2R, z, want);
    free(real);
  } else {
    z = gen_global(seed, x->B * x->N * 2, x->c.prec);
    ref_fft(x, REF_IDFT, z, want);
  }
  double s = inv_scale(x->c.norm, x->N);
  for (int64_t i = 0; i < nwant; i++) want[i] *= s;
  check_both_(x, 1, z, want, line);
  free(z), free(want);
}

/* inverse(forward(x)) == x, all on the device. */
#define CHECK_ROUND_TRIP(x, seed) check_round_trip_((x), (seed), __LINE__)
static void check_round_trip_(fctx *x, uint64_t seed, int line) {
  double *src = gen_global(seed, x->B * x->N * comps(x->in.dtype), x->c.prec);
  pbuf a = pbuf_new(x, &x->in), f = pbuf_new(x, &x->out), b = pbuf_new(x, &x->in);
  scatter_piece(x, src, &a);
  check_ok_(dist_fft_forward(x->dplan, &a.dt, &f.dt), "forward on the device (round trip)", line);
  check_ok_(dist_fft_inverse(x->dplan, &f.dt, &b.dt), "inverse on the device (round trip)", line);
  void *got = download(&b);
  expect_piece_(x, "inverse(forward(x)) == x on the device", &x->in, got, src, line);
  free(got), free(src);
  pbuf_free(&a), pbuf_free(&f), pbuf_free(&b);
}

static void fill_local(pbuf *b, dist_dtype prec, uint64_t seed, int owner) {
  for (int64_t i = 0; i < b->nscal; i++) sset(prec, b->h, i, 2 * unit(seed, owner, i) - 1);
  upload(b);
}

static double dot(dist_dtype prec, const void *a, const void *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += sget(prec, a, i) * sget(prec, b, i);
  return s;
}

/* <fwd(a), y> == <a, bwd(y)> on the device, for forward/forward_backward and
 * inverse/inverse_backward (z not Hermitian), within tol * |fwd(a)| |y|. */
#define CHECK_ADJOINT(x, seed) check_adjoint_((x), (seed), __LINE__)
static void check_adjoint_(fctx *x, uint64_t seed, int line) {
  dist_dtype prec = x->c.prec;
  for (int inv = 0; inv < 2; inv++) {
    const dist_fft_local *pa = inv ? &x->out : &x->in, *py = inv ? &x->in : &x->out;
    pbuf a = pbuf_new(x, pa), y = pbuf_new(x, py), fa = pbuf_new(x, py), by = pbuf_new(x, pa);
    fill_local(&a, prec, seed + (uint64_t)inv, 2 * R), fill_local(&y, prec, seed + (uint64_t)inv, 2 * R + 1);
    if (inv) {
      check_ok_(dist_fft_inverse(x->dplan, &a.dt, &fa.dt), "inverse on the device", line);
      check_ok_(dist_fft_inverse_backward(x->dplan, &y.dt, &by.dt), "inverse_backward on the device", line);
    } else {
      check_ok_(dist_fft_forward(x->dplan, &a.dt, &fa.dt), "forward on the device", line);
      check_ok_(dist_fft_forward_backward(x->dplan, &y.dt, &by.dt), "forward_backward on the device", line);
    }
    void *hfa = download(&fa), *hby = download(&by);
    double lhs = allred(dot(prec, hfa, y.h, y.nscal), DIST_SUM), rhs = allred(dot(prec, a.h, hby, a.nscal), DIST_SUM);
    double scale = sqrt(allred(dot(prec, hfa, hfa, y.nscal), DIST_SUM) * allred(dot(prec, y.h, y.h, y.nscal), DIST_SUM));
    int ok = scale > 0 && fabs(lhs - rhs) <= tol_of(prec) * scale;
    if (!ok && R == 0)
      fprintf(stderr, "[rank %d/%d] line %d: adjoint of %s on the device, %s: %.17g vs %.17g\n", R, W, line,
              inv ? "inverse" : "forward", x->name, lhs, rhs);
    assert_at(ok, line,
              inv ? "<inverse(z), y> == <z, inverse_backward(y)> on the device"
                  : "<forward(x), y> == <x, forward_backward(y)> on the device");
    free(hfa), free(hby);
    pbuf_free(&a), pbuf_free(&y), pbuf_free(&fa), pbuf_free(&by);
  }
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_device(void) {
  dist_device dev;
  CHECK_OK(dist_manager_device(&dev), "dist_manager_device");
  CU_ASSERT_EQUAL(dev.kind, DIST_DEVICE_CUDA);
  int current = -1;
  CUDA_OK(cudaGetDevice(&current));
  CU_ASSERT_EQUAL(current, DEV);
}

static void test_forward_inverse(void) {
  for (int i = 0; i < NCASES; i++) {
    fctx x;
    if (!ctx_open(&x, &CASES[i], __LINE__)) continue;
    uint64_t seed = 100 + 10 * (uint64_t)i;
    CHECK_FORWARD(&x, seed);
    CHECK_INVERSE(&x, seed + 1);
    CHECK_ROUND_TRIP(&x, seed + 2);
    ctx_close(&x);
  }
}

static void test_adjoint(void) {
  for (int i = 0; i < NCASES; i++) {
    fctx x;
    if (!ctx_open(&x, &CASES[i], __LINE__)) continue;
    CHECK_ADJOINT(&x, 200 + 10 * (uint64_t)i);
    ctx_close(&x);
  }
}

/* The same plan again and again, then on a stream of the user's: the results
 * are stream-ordered on dist_cuda_stream(). */
static void test_reexecute_stream(void) {
  fctx x;
  if (!ctx_open(&x, &CASES[0], __LINE__)) return;
  for (int k = 0; k < 3; k++) CHECK_FORWARD(&x, 300 + (uint64_t)k);
  cudaStream_t s = NULL;
  if (CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) {
    CHECK_OK(dist_cuda_set_stream(s), "dist_cuda_set_stream");
    CU_ASSERT_TRUE(dist_cuda_stream() == s);
    CHECK_FORWARD(&x, 310);
    CHECK_INVERSE(&x, 311);
    CHECK_ADJOINT(&x, 312);
    CHECK_OK(dist_cuda_set_stream(0), "dist_cuda_set_stream(0)");
    cudaStreamDestroy(s);
  }
  CHECK_FORWARD(&x, 320);
  ctx_close(&x);
}

/* Host tensors on a device plan, device tensors on a host plan: errors. */
static void test_errors(void) {
  fctx x;
  if (!ctx_open(&x, &CASES[0], __LINE__)) return;
  pbuf a = pbuf_new(&x, &x.in), b = pbuf_new(&x, &x.out);
  dist_status s = dist_fft_forward(x.dplan, &a.ht, &b.dt);
  if (s == DIST_SUCCESS) fprintf(stderr, "[rank %d/%d] a CUDA plan accepted a host 'in'\n", R, W);
  CU_ASSERT_EQUAL(s, DIST_ERR_INVALID_ARGUMENT);
  s = dist_fft_forward(x.hplan, &a.dt, &b.ht);
  if (s == DIST_SUCCESS) fprintf(stderr, "[rank %d/%d] a host plan accepted a CUDA 'in'\n", R, W);
  CU_ASSERT_EQUAL(s, DIST_ERR_INVALID_ARGUMENT);
  CHECK_FORWARD(&x, 400); /* still works */
  pbuf_free(&a), pbuf_free(&b);
  ctx_close(&x);
}

static CU_TestInfo cuda_tests[] = {
    {"device selection", test_device},
    {"forward, inverse, round trip vs FFTW and the host plan", test_forward_inverse},
    {"adjoint identities", test_adjoint},
    {"re-execution, user stream", test_reexecute_stream},
    {"memory mismatches", test_errors},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"cuda fft", NULL, NULL, NULL, NULL, cuda_tests}, CU_SUITE_INFO_NULL};

/* Every rank sees a device (else all skip) and makes the manager's current. */
static int setup(int round) {
  (void)round;
  const char *why = cuda_missing();
  if (why) return cunit_mpi_skip(why);
  if (W > MAXW) {
    fprintf(stderr, "test_fft_cuda supports at most %d ranks\n", MAXW);
    return 1;
  }
  dist_device dev = {DIST_DEVICE_CPU, 0};
  dist_manager_device(&dev);
  DEV = dev.kind == DIST_DEVICE_CUDA ? dev.index : 0; /* test_device flags a CPU choice */
  if (cudaSetDevice(DEV) != cudaSuccess) {
    fprintf(stderr, "[rank %d/%d] cudaSetDevice(%d) failed\n", R, W, DEV);
    return 1;
  }
  (void)is_int, (void)gname, (void)group_info; /* coll_values.h helpers this file has no use for */
  return 0;
}

int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_fft_cuda", suites, .rank = &R, .size = &W, .setup = setup}); }

#endif /* HAVE_CUDA && HAVE_CUFFT */
