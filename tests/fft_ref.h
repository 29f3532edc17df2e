/* What the FFT tests share: rank-tagged assertions, and serial references: FFTW on the whole array (which
 * every rank generates identically: the "gathered" array), the norms' scale
 * factors, the split rule written out, seeded global data. */
#ifndef DISTMGR_TESTS_FFT_REF_H
#define DISTMGR_TESTS_FFT_REF_H

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll_values.h" /* is_complex, seeded unit() */

/* ---- assertions with the rank and line ---------------------------------------------- */

static int W, R; /* world size and rank from MPI itself */

static void assert_at(int ok, int line, const char *what) {
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "", CU_FALSE);
}

#define CHECK_OK(call, what) check_ok_((call), (what), __LINE__)
static int check_ok_(dist_status s, const char *what, int line) {
  if (s != DIST_SUCCESS)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s: %s)\n", R, W, line, what, (int)s, dist_status_string(s),
            dist_last_error());
  assert_at(s == DIST_SUCCESS, line, what);
  return s == DIST_SUCCESS;
}

static int64_t prod(const int64_t *v, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= v[i];
  return p;
}

/* ---- references ----------------------------------------------------------------------- */

typedef enum { REF_R2C, REF_C2R, REF_DFT, REF_IDFT } ref_kind;

/* B transforms of rank fr over n[0..fr), unscaled, in double; complex data
 * interleaved (re, im); r2c/c2r spectra hold n[fr-1]/2+1 in the last dim. */
static void ref_fft_many(int fr, const int64_t *nn, int64_t B, ref_kind kind, const double *in, double *out) {
  int n[3], howmany = (int)B, N = 1;
  for (int i = 0; i < fr; i++) n[i] = (int)nn[i], N *= n[i];
  int NH = N / n[fr - 1] * (n[fr - 1] / 2 + 1);
  size_t rb = (size_t)howmany * (size_t)N * sizeof(double), hb = (size_t)howmany * (size_t)NH * sizeof(fftw_complex);
  size_t fb = (size_t)howmany * (size_t)N * sizeof(fftw_complex);
  size_t ib = kind == REF_R2C ? rb : kind == REF_C2R ? hb : fb, ob = kind == REF_R2C ? hb : kind == REF_C2R ? rb : fb;
  void *a = fftw_malloc(ib), *b = fftw_malloc(ob); /* plan on copies: c2r overwrites its input */
  fftw_plan plan;
  if (kind == REF_R2C) plan = fftw_plan_many_dft_r2c(fr, n, howmany, a, NULL, 1, N, b, NULL, 1, NH, FFTW_ESTIMATE);
  else if (kind == REF_C2R) plan = fftw_plan_many_dft_c2r(fr, n, howmany, a, NULL, 1, NH, b, NULL, 1, N, FFTW_ESTIMATE);
  else
    plan = fftw_plan_many_dft(fr, n, howmany, a, NULL, 1, N, b, NULL, 1, N,
                              kind == REF_DFT ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
  memcpy(a, in, ib);
  fftw_execute(plan);
  memcpy(out, b, ob);
  fftw_destroy_plan(plan);
  fftw_free(a), fftw_free(b);
}

static double fwd_scale(dist_fft_norm norm, int64_t N) {
  return norm == DIST_FFT_NORM_BACKWARD ? 1.0 : norm == DIST_FFT_NORM_ORTHO ? 1.0 / sqrt((double)N) : 1.0 / (double)N;
}
static double inv_scale(dist_fft_norm norm, int64_t N) {
  return norm == DIST_FFT_NORM_BACKWARD ? 1.0 / (double)N : norm == DIST_FFT_NORM_ORTHO ? 1.0 / sqrt((double)N) : 1.0;
}
static double tol_of(dist_dtype prec) { return prec == DIST_F32 ? 1e-5 : 1e-12; }
static int comps(dist_dtype dt) { return is_complex(dt) ? 2 : 1; } /* scalars per element */

/* dist_compute_split_shapes, written out */
static void ref_split(int64_t size, int n, int64_t *out) {
  int64_t c = (size + n - 1) / n;
  if (n > 1 && size - c * (n - 1) <= 0) c = size / n;
  for (int i = 0; i < n - 1; i++) out[i] = c;
  out[n - 1] = size - c * (n - 1);
}

/* n seeded values in [-1, 1), rounded to the precision the library gets. */
static double *gen_global(uint64_t seed, int64_t n, dist_dtype prec) {
  double *a = malloc((size_t)n * sizeof *a + 8);
  for (int64_t i = 0; i < n; i++) {
    double v = 2 * unit(seed, 0, i) - 1;
    a[i] = prec == DIST_F32 ? (double)(float)v : v;
  }
  return a;
}

#endif
