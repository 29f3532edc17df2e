/* AFNO in every layout equals the serial model: forward outputs, every
 * parameter's gradient and the parameters after a few Adam steps, for data,
 * model and spatial parallelism (and meshes of two at 4 ranks), on the same
 * weights and batch. The token grid is 8 x 12 (w > h, so the reference's
 * column limit is exercised) and 3 ranks split rows, spectrum columns and
 * hidden units unevenly. Also: bad configurations fail on every rank. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <distmgr.h>
#include <distmgr/afno.h>

#include "cunit_mpi.h"

static int R, W;

static dist_afno_config small_config(void) {
  dist_afno_config c = DIST_AFNO_CONFIG_INIT;
  c.inp_shape[0] = 16;
  c.inp_shape[1] = 24;
  c.in_channels = 3;
  c.out_channels = 2;
  c.patch_size[0] = c.patch_size[1] = 2;
  c.embed_dim = 24;
  c.depth = 2;
  c.mlp_ratio = 2.6; /* 62 hidden units: uneven over 3 and 4 ranks */
  c.num_blocks = 12;
  c.sparsity_threshold = 0.002;
  c.seed = 7;
  c.data_parallel = c.model_parallel = c.spatial = "self";
  return c;
}

static float value(uint64_t seed, int64_t i) { /* deterministic data in [-1, 1) */
  uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (float)((double)(x >> 11) * 0x1.0p-52 - 1.0);
}

/* Rows [r0, r0+rows) of samples [s0, s0+B) of a [Bg, C, H, Wd] array. */
static void slice(const float *all, int64_t C, int64_t H, int64_t Wd, int64_t s0, int64_t B, int64_t r0, int64_t rows,
                  float *out) {
  for (int64_t s = 0; s < B; s++)
    for (int64_t c = 0; c < C; c++)
      memcpy(out + ((s * C + c) * rows) * Wd, all + (((s0 + s) * C + c) * H + r0) * Wd,
             sizeof(float) * (size_t)(rows * Wd));
}

static double max_abs(const float *a, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
  return m;
}

/* |a - b| <= tol * max|b| elementwise (max over the tensor), reported. */
static int close_to(const char *what, const float *a, const float *b, int64_t n, double tol) {
  double scale = max_abs(b, n), worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs((double)a[i] - b[i]) > worst) worst = fabs((double)a[i] - b[i]), at = i;
  int ok = worst <= tol * scale + 1e-12;
  if (!ok)
    fprintf(stderr, "rank %d: %s differs: |%g - %g| at %lld, max |ref| %g, tol %g\n", R, what, a[at], b[at],
            (long long)at, scale, tol);
  return ok;
}

static int close_to_abs(const char *what, const float *a, const float *b, int64_t n, double tol) {
  double worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs((double)a[i] - b[i]) > worst) worst = fabs((double)a[i] - b[i]), at = i;
  if (worst > tol) fprintf(stderr, "rank %d: %s differs: |%g - %g| at %lld, tol %g\n", R, what, a[at], b[at], (long long)at, tol);
  return worst <= tol;
}

typedef struct run_result {
  float *y;        /* this rank's output part */
  double loss;
  float **grads;   /* whole gradients, reference layout */
  float **params;  /* whole parameters after the steps */
  int64_t *numel;  /* of each parameter */
} run_result;

/* Forward + MSE + backward, then `steps` Adam steps on fresh batches, on the
 * global batch Bg (this rank's samples and rows). */
static void run(const dist_afno_config *c, int64_t Bg, int steps, run_result *res) {
  dist_afno *m = NULL;
  ASSERT_OK(dist_afno_create(c, &m));
  if (!m) return;
  dist_afno_layout L;
  ASSERT_OK(dist_afno_layout_get(m, &L));
  const int64_t H = c->inp_shape[0], Wd = c->inp_shape[1], Cin = c->in_channels, Cout = c->out_channels;
  const int64_t B = Bg / L.dp_size, s0 = B * L.dp_rank;
  float *xall = malloc(sizeof(float) * (size_t)(Bg * Cin * H * Wd)), *tall = malloc(sizeof(float) * (size_t)(Bg * Cout * H * Wd));
  float *x = malloc(sizeof(float) * (size_t)(B * Cin * L.rows * Wd)), *t = malloc(sizeof(float) * (size_t)(B * Cout * L.rows * Wd));
  float *y = malloc(sizeof(float) * (size_t)(B * Cout * L.rows * Wd)), *dy = malloc(sizeof(float) * (size_t)(B * Cout * L.rows * Wd));
  dist_params *set = dist_afno_params(m);
  int np = dist_params_count(set);
  res->grads = calloc((size_t)np, sizeof(float *));
  res->params = calloc((size_t)np, sizeof(float *));
  res->numel = calloc((size_t)np, sizeof(int64_t));
  dist_optim *opt = NULL;
  dist_adam_options ao = DIST_ADAM_OPTIONS_INIT;
  ao.lr = 0.01;
  ASSERT_OK(dist_optim_adam(set, &ao, &opt));
  for (int it = 0; it <= steps; it++) {
    for (int64_t i = 0; i < Bg * Cin * H * Wd; i++) xall[i] = value(11 + it, i);
    for (int64_t i = 0; i < Bg * Cout * H * Wd; i++) tall[i] = value(101 + it, i);
    slice(xall, Cin, H, Wd, s0, B, L.row_offset, L.rows, x);
    slice(tall, Cout, H, Wd, s0, B, L.row_offset, L.rows, t);
    ASSERT_OK(dist_afno_zero_grad(m));
    ASSERT_OK(dist_afno_forward(m, B, x, y));
    double loss = 0;
    ASSERT_OK(dist_afno_mse(m, B, y, t, &loss, dy));
    ASSERT_OK(dist_afno_backward(m, dy));
    if (it == 0) {
      res->y = malloc(sizeof(float) * (size_t)(B * Cout * L.rows * Wd));
      memcpy(res->y, y, sizeof(float) * (size_t)(B * Cout * L.rows * Wd));
      res->loss = loss;
      for (int p = 0; p < np; p++) {
        dist_afno_param_info info;
        ASSERT_OK(dist_afno_param_info_get(m, p, &info));
        res->grads[p] = malloc(sizeof(float) * (size_t)info.numel);
        ASSERT_OK(dist_afno_grad_get(m, p, res->grads[p]));
      }
    }
    if (it < steps) ASSERT_OK(dist_optim_step(opt));
  }
  for (int p = 0; p < np; p++) {
    dist_afno_param_info info;
    ASSERT_OK(dist_afno_param_info_get(m, p, &info));
    res->params[p] = malloc(sizeof(float) * (size_t)info.numel);
    res->numel[p] = info.numel;
    ASSERT_OK(dist_afno_param_get(m, p, res->params[p]));
  }
  dist_optim_destroy(opt);
  dist_afno_destroy(m);
  free(xall), free(tall), free(x), free(t), free(y), free(dy);
}

static void result_free(run_result *r, int np) {
  for (int p = 0; p < np; p++) free(r->grads ? r->grads[p] : NULL), free(r->params ? r->params[p] : NULL);
  free(r->grads), free(r->params), free(r->y), free(r->numel);
  memset(r, 0, sizeof *r);
}

static int mesh_id;

/* Build a mesh with the given axis sizes for dp, mp, sp (1 = absent), run
 * it and compare with the serial model on every rank. */
static void check_layout(int dp, int mp, int sp, int recompute) {
  if (dp * mp * sp != W) return;
  dist_afno_config c = small_config();
  char names[3][32];
  const char *axis_names[3];
  int sizes[3], n = 0;
  mesh_id++;
  snprintf(names[0], 32, "afno_dp%d", mesh_id);
  snprintf(names[1], 32, "afno_mp%d", mesh_id);
  snprintf(names[2], 32, "afno_sp%d", mesh_id);
  int want[3] = {dp, mp, sp};
  for (int a = 0; a < 3; a++)
    if (want[a] > 1) axis_names[n] = names[a], sizes[n++] = want[a];
  if (n > 0) ASSERT_OK(dist_group_create_mesh(NULL, n, sizes, axis_names));
  c.data_parallel = dp > 1 ? names[0] : "self";
  c.model_parallel = mp > 1 ? names[1] : "self";
  c.spatial = sp > 1 ? names[2] : "self";
  c.recompute = recompute;
  const int64_t Bg = 2 * dp;
  const int steps = 3;
  dist_afno_config serial = small_config();
  run_result ser = {0}, par = {0};
  run(&serial, Bg, steps, &ser);
  run(&c, Bg, steps, &par);
  if (!ser.y || !par.y) return;
  /* Compare this rank's output part with the serial output's same part. */
  dist_afno *m = NULL;
  ASSERT_OK(dist_afno_create(&c, &m));
  dist_afno_layout L;
  ASSERT_OK(dist_afno_layout_get(m, &L));
  const int64_t H = c.inp_shape[0], Wd = c.inp_shape[1], B = Bg / L.dp_size, np = 4 + 12 * c.depth;
  float *part = malloc(sizeof(float) * (size_t)(B * c.out_channels * L.rows * Wd));
  slice(ser.y, c.out_channels, H, Wd, B * L.dp_rank, B, L.row_offset, L.rows, part);
  char what[96];
  snprintf(what, sizeof what, "forward (dp %d mp %d sp %d%s)", dp, mp, sp, recompute ? " recompute" : "");
  CU_ASSERT(close_to(what, par.y, part, B * c.out_channels * L.rows * Wd, 2e-5));
  CU_ASSERT(fabs(par.loss - ser.loss) <= 1e-5 * ser.loss);
  for (int p = 0; p < np; p++) {
    dist_afno_param_info info;
    ASSERT_OK(dist_afno_param_info_get(m, p, &info));
    snprintf(what, sizeof what, "grad %s (dp %d mp %d sp %d)", info.name, dp, mp, sp);
    CU_ASSERT(close_to(what, par.grads[p], ser.grads[p], info.numel, 2e-4));
    /* Adam divides by sqrt(v): an element whose gradient is at rounding level moves by
     * up to lr per step either way, so the bound is absolute, 0.5% of lr * steps (a
     * wrong gradient moves many elements by the full lr). */
    snprintf(what, sizeof what, "param %s after %d Adam steps (dp %d mp %d sp %d)", info.name, steps, dp, mp, sp);
    CU_ASSERT(close_to_abs(what, par.params[p], ser.params[p], info.numel, 5e-3 * 0.01 * steps));
  }
  free(part);
  dist_afno_destroy(m);
  result_free(&ser, (int)np);
  result_free(&par, (int)np);
}

static void test_data_parallel(void) { check_layout(W, 1, 1, 0); }
static void test_model_parallel(void) { check_layout(1, W, 1, 0); }
static void test_spatial_parallel(void) { check_layout(1, 1, W, 0); }
static void test_spatial_recompute(void) { check_layout(1, 1, W, 1); }
static void test_dp_sp(void) { check_layout(2, 1, 2, 0); }
static void test_mp_sp(void) { check_layout(1, 2, 2, 0); }
static void test_dp_mp(void) { check_layout(2, 2, 1, 1); }

/* Forward is collective within a replica only: data-parallel ranks may run
 * different batch sizes, or none at all (an evaluation dealt unevenly),
 * without hanging, each getting the solo model's output. */
static void test_dp_uneven_forward(void) {
  if (W < 2) return;
  char name[32];
  snprintf(name, sizeof name, "afno_dp_uneven%d", ++mesh_id);
  int sizes[1] = {W};
  const char *names[1] = {name};
  ASSERT_OK(dist_group_create_mesh(NULL, 1, sizes, names));
  dist_afno_config c = small_config(), solo = small_config();
  c.data_parallel = name, c.model_parallel = c.spatial = "self";
  solo.data_parallel = solo.model_parallel = solo.spatial = "self";
  dist_afno *m = NULL, *one = NULL;
  ASSERT_OK(dist_afno_create(&c, &m));
  ASSERT_OK(dist_afno_create(&solo, &one));
  if (!m || !one) return;
  const int64_t n = c.in_channels * c.inp_shape[0] * c.inp_shape[1], batch = R % 2 ? 0 : R + 1;
  float *x = malloc(sizeof(float) * (size_t)(n * (R + 1))), *y = malloc(sizeof(float) * (size_t)(n * (R + 1)));
  float *ref = malloc(sizeof(float) * (size_t)(n * (R + 1)));
  for (int64_t i = 0; i < n * (R + 1); i++) x[i] = value(5 + R, i);
  for (int pass = 0; pass < 2 && batch; pass++) { /* twice: the second reuses the buffers */
    ASSERT_OK(dist_afno_forward(m, batch, x, y));
    ASSERT_OK(dist_afno_forward(one, batch, x, ref));
    CU_ASSERT(close_to("uneven data-parallel forward", y, ref, batch * n, 0));
  }
  free(x), free(y), free(ref);
  dist_afno_destroy(m);
  dist_afno_destroy(one);
}

/* Recomputation keeps nothing but block inputs and gives the same numbers. */
static void test_recompute_same(void) {
  dist_afno_config c = small_config();
  run_result a = {0}, b = {0};
  run(&c, 2, 1, &a);
  c.recompute = 1;
  run(&c, 2, 1, &b);
  if (!a.y || !b.y) return;
  const int np = 4 + 12 * c.depth;
  CU_ASSERT(close_to("recompute forward", b.y, a.y, 2 * 2 * 16 * 24, 0));
  for (int p = 0; p < np; p++) {
    CU_ASSERT(close_to("recompute grad", b.grads[p], a.grads[p], a.numel[p], 0));
    CU_ASSERT(close_to("recompute param", b.params[p], a.params[p], a.numel[p], 0));
  }
  result_free(&a, np);
  result_free(&b, np);
}

/* Each bad configuration fails on every rank with a message naming it. */
static void expect_bad(dist_afno_config c, dist_status code, const char *text) {
  dist_afno *m = NULL;
  ASSERT_STATUS(dist_afno_create(&c, &m), code);
  CU_ASSERT_PTR_NULL(m);
  ASSERT_MSG_HAS(text);
}

static void test_bad_config(void) {
  dist_afno_config c = small_config();
  c.inp_shape[0] = 15;
  expect_bad(c, DIST_ERR_INVALID_ARGUMENT, "not divisible by patch_size");
  c = small_config();
  c.num_blocks = 5;
  expect_bad(c, DIST_ERR_INVALID_ARGUMENT, "not divisible by num_blocks");
  c = small_config();
  c.hard_thresholding_fraction = 1.5;
  expect_bad(c, DIST_ERR_INVALID_ARGUMENT, "hard_thresholding_fraction");
  c = small_config();
  c.depth = -1;
  expect_bad(c, DIST_ERR_INVALID_ARGUMENT, "depth");
  c = small_config();
  c.inp_shape[0] = (int64_t)1 << 40;
  c.inp_shape[1] = (int64_t)1 << 40;
  expect_bad(c, DIST_ERR_INVALID_ARGUMENT, "overflow");
  if (W > 1) { /* a config that differs on one rank is refused everywhere */
    c = small_config();
    if (R == W - 1) c.embed_dim = 36;
    expect_bad(c, DIST_ERR_MISMATCH, "different configs");
    /* num_blocks not divisible by the model-parallel size */
    char name[32];
    snprintf(name, sizeof name, "afno_badmp%d", ++mesh_id);
    ASSERT_OK(dist_group_create_subgroup(name, W, NULL));
    c = small_config();
    c.model_parallel = name;
    c.num_blocks = W == 4 ? 6 : W == 3 ? 4 : 3;
    expect_bad(c, DIST_ERR_INVALID_ARGUMENT, "model parallel");
    /* a group that does not tile the world */
    if (W == 4) {
      snprintf(name, sizeof name, "afno_half%d", ++mesh_id);
      ASSERT_OK(dist_group_create_subgroup(name, 2, NULL));
      c = small_config();
      c.spatial = name;
      expect_bad(c, DIST_ERR_GROUP_SIZE, "tile the world");
    }
  }
  /* Runtime misuse: NULL input, backward before forward. */
  c = small_config();
  dist_afno *m = NULL;
  ASSERT_OK(dist_afno_create(&c, &m));
  float y[4];
  ASSERT_STATUS(dist_afno_forward(m, 1, NULL, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("x is NULL");
  ASSERT_STATUS(dist_afno_backward(m, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("no forward");
  dist_afno_destroy(m);
}

/* The vectorised GELU against erfc in double (erfc, not 1 + erf, which
 * cancels in the tail): relative error where the value is not tiny. */
void afno_gelu(const float *h, float *z, int64_t n);
void afno_gelu_backward(const float *h, float *dz, int64_t n);
static void test_gelu(void) {
  enum { N = 24001 };
  static float h[N], z[N], d[N];
  double worst = 0, worst_d = 0;
  for (int i = 0; i < N; i++) h[i] = -12.0f + 24.0f * (float)i / (N - 1), d[i] = 1.0f;
  afno_gelu(h, z, N);
  afno_gelu_backward(h, d, N);
  for (int i = 0; i < N; i++) {
    double x = h[i], g = 0.5 * x * erfc(-x / sqrt(2.0)), gd = 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    worst = fmax(worst, fabs(z[i] - g) / fmax(fabs(g), 1e-30));
    if (fabs(x + 0.7518) > 0.01) worst_d = fmax(worst_d, fabs(d[i] - gd) / fmax(fabs(gd), 1e-30)); /* gelu' = 0 there */
  }
  if (worst > 1e-5 || worst_d > 3e-5) fprintf(stderr, "gelu: worst relative error %g, derivative %g\n", worst, worst_d);
  CU_ASSERT(worst <= 1e-5);
  CU_ASSERT(worst_d <= 3e-5);
}

static CU_TestInfo tests[] = {
    {"forward at uneven data-parallel batches", test_dp_uneven_forward},
    {"GELU and its derivative against erfc", test_gelu},
    {"data parallel equals serial", test_data_parallel},
    {"model parallel equals serial", test_model_parallel},
    {"spatial parallel equals serial", test_spatial_parallel},
    {"spatial parallel with recompute", test_spatial_recompute},
    {"mesh dp x sp (4 ranks)", test_dp_sp},
    {"mesh mp x sp (4 ranks)", test_mp_sp},
    {"mesh dp x mp with recompute (4 ranks)", test_dp_mp},
    {"recompute gives the same numbers", test_recompute_same},
    {"bad configurations and misuse", test_bad_config},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {{"afno", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_mpi_main(suites, "test_afno", &R, &W); }
