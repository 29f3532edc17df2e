/* The spectral Navier-Stokes solver of examples/ns2d.c: the Taylor-Green
 * vortex against its analytic decay, the same field at every rank count
 * (against a one-rank run on every rank), energy and enstrophy conserved to
 * the stepper's order without viscosity and forcing, and bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/ns2d.h"
#include "cunit_mpi.h"

static int R, W;

static ns2d *make(int64_t n, double nu, double dt, double amp, const char *group) {
  ns2d_config c = NS2D_CONFIG_INIT;
  c.n = n, c.nu = nu, c.dt = dt, c.force_amp = amp, c.group = group;
  ns2d *s = NULL;
  ASSERT_OK(ns2d_create(&c, &s));
  return s;
}

static void test_taylor_green(void) {
  const int64_t n = 32;
  const double nu = 0.05, dt = 0.01;
  ns2d *s = make(n, nu, dt, 0.0, NULL);
  if (!s) return;
  int64_t rows = ns2d_rows(s), r0 = ns2d_row_offset(s);
  double *w = malloc(sizeof(double) * (size_t)(rows * n));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) w[r * n + j] = 2 * sin(2 * M_PI * (r0 + r) / n) * sin(2 * M_PI * j / n);
  ASSERT_OK(ns2d_set_vorticity(s, w));
  ASSERT_OK(ns2d_step(s, 100));
  ASSERT_OK(ns2d_get_vorticity(s, w));
  double t = ns2d_time(s), worst = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) {
      double exact = 2 * sin(2 * M_PI * (r0 + r) / n) * sin(2 * M_PI * j / n) * exp(-2 * nu * t);
      worst = fmax(worst, fabs(w[r * n + j] - exact));
    }
  if (worst > 1e-12) fprintf(stderr, "rank %d: Taylor-Green error %g at t = %g\n", R, worst, t);
  CU_ASSERT(worst <= 1e-12);
  CU_ASSERT(fabs(t - 1.0) < 1e-12);
  free(w);
  ns2d_destroy(s);
}

/* Forced, viscous, random start: this layout's rows equal a one-rank run's. */
static void test_same_field_any_layout(void) {
  const int64_t n = 48;
  ns2d *par = make(n, 2e-3, 5e-3, 1.0, NULL), *one = make(n, 2e-3, 5e-3, 1.0, "self");
  if (!par || !one) return;
  ASSERT_OK(ns2d_random_init(par, 5, 4.0, 0.5));
  ASSERT_OK(ns2d_random_init(one, 5, 4.0, 0.5));
  ASSERT_OK(ns2d_step(par, 60));
  ASSERT_OK(ns2d_step(one, 60));
  int64_t rows = ns2d_rows(par), r0 = ns2d_row_offset(par);
  double *a = malloc(sizeof(double) * (size_t)(rows * n)), *b = malloc(sizeof(double) * (size_t)(n * n));
  ASSERT_OK(ns2d_get_vorticity(par, a));
  ASSERT_OK(ns2d_get_vorticity(one, b));
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < n * n; i++) scale = fmax(scale, fabs(b[i]));
  for (int64_t i = 0; i < rows * n; i++) worst = fmax(worst, fabs(a[i] - b[r0 * n + i]));
  if (worst > 1e-11 * scale) fprintf(stderr, "rank %d: %d-rank field differs from 1 rank by %g (max %g)\n", R, W, worst, scale);
  CU_ASSERT(scale > 0.1);
  CU_ASSERT(worst <= 1e-11 * scale);
  free(a), free(b);
  ns2d_destroy(par), ns2d_destroy(one);
}

/* nu = 0, no forcing: the truncated system conserves energy and enstrophy;
 * RK4 drifts at order dt^4 (halving dt divides the drift by ~16). */
static double drift(double dt, int steps) {
  ns2d *s = make(32, 0.0, dt, 0.0, NULL);
  double e0, z0, e1, z1;
  ASSERT_OK(ns2d_random_init(s, 9, 3.0, 1.0));
  ASSERT_OK(ns2d_diagnostics(s, &e0, &z0));
  ASSERT_OK(ns2d_step(s, steps));
  ASSERT_OK(ns2d_diagnostics(s, &e1, &z1));
  ns2d_destroy(s);
  return fmax(fabs(e1 - e0) / e0, fabs(z1 - z0) / z0);
}

static void test_conservation(void) {
  double d1 = drift(0.02, 50), d2 = drift(0.01, 100);
  if (R == 0) printf("energy/enstrophy drift over t = 1: dt 0.02 %.3g, dt 0.01 %.3g (ratio %.1f)\n", d1, d2, d1 / d2);
  CU_ASSERT(d1 < 1e-4);
  CU_ASSERT(d2 < d1 / 8);
}

static void test_bad_input(void) {
  ns2d_config c = NS2D_CONFIG_INIT;
  ns2d *s = NULL;
  c.n = 31;
  ASSERT_STATUS(ns2d_create(&c, &s), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("n = 31");
  c = (ns2d_config)NS2D_CONFIG_INIT;
  c.dt = 0;
  ASSERT_STATUS(ns2d_create(&c, &s), DIST_ERR_INVALID_ARGUMENT);
  c = (ns2d_config)NS2D_CONFIG_INIT;
  c.group = "no_such_group";
  ASSERT_STATUS(ns2d_create(&c, &s), DIST_ERR_UNKNOWN_GROUP);
  CU_ASSERT_PTR_NULL(s);
}

static CU_TestInfo tests[] = {
    {"Taylor-Green vortex decays as the analytic solution", test_taylor_green},
    {"the same field at every rank count", test_same_field_any_layout},
    {"energy and enstrophy conserved to RK4 order (nu = 0)", test_conservation},
    {"bad input", test_bad_input},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {{"ns2d", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_mpi_main(suites, "test_ns2d", &R, &W); }
