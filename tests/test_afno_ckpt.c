/* AFNO checkpoints: a model (and its Adam state) saved in one layout loads
 * in another and training continues identically; corrupt, truncated,
 * mismatched and missing files fail on every rank and change nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <distmgr.h>
#include <distmgr/afno.h>

#include "cunit_mpi.h"

static int R, W, mesh_id;
static char dir[256];

static dist_afno_config cfg(void) {
  dist_afno_config c = DIST_AFNO_CONFIG_INIT;
  c.inp_shape[0] = 16;
  c.inp_shape[1] = 16;
  c.in_channels = 2;
  c.out_channels = 2;
  c.patch_size[0] = c.patch_size[1] = 2;
  c.embed_dim = 24;
  c.depth = 1;
  c.mlp_ratio = 2.0;
  c.num_blocks = 12;
  c.seed = 3;
  c.data_parallel = c.model_parallel = c.spatial = "self";
  return c;
}

/* A layout over all W ranks: kind 0 spatial, 1 model, 2 data, 3 mesh mp x sp. */
static dist_afno_config layout(int kind) {
  dist_afno_config c = cfg();
  if (W == 1) return c;
  static char pool[64][32]; /* names outlive the call: configs point at them */
  char *a = pool[(2 * mesh_id) % 64], *b = pool[(2 * mesh_id + 1) % 64];
  snprintf(a, 32, "ck_a%d", ++mesh_id);
  snprintf(b, 32, "ck_b%d", mesh_id);
  if (kind == 3 && W == 4) {
    const char *names[2] = {a, b};
    int sizes[2] = {2, 2};
    ASSERT_OK(dist_group_create_mesh(NULL, 2, sizes, names));
    c.model_parallel = a, c.spatial = b;
    return c;
  }
  ASSERT_OK(dist_group_create_subgroup(a, W, NULL));
  if (kind == 0 || kind == 3) c.spatial = a;
  else if (kind == 1) c.model_parallel = a;
  else c.data_parallel = a;
  return c;
}

static float value(uint64_t seed, int64_t i) {
  uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 29, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 32;
  return (float)((double)(x >> 11) * 0x1.0p-52 - 1.0);
}

/* One Adam step on batch `it` (this rank's samples and rows of a global batch of 2*dp). */
static void step(dist_afno *m, dist_optim *o, int it) {
  dist_afno_layout L;
  ASSERT_OK(dist_afno_layout_get(m, &L));
  const int64_t S = 16, C = 2, B = 2, n = B * C * L.rows * S;
  float *x = malloc(sizeof(float) * (size_t)n), *t = malloc(sizeof(float) * (size_t)n);
  float *y = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n);
  for (int64_t s = 0; s < B; s++) /* the same global sample for every data-parallel rank: layouts compare */
    for (int64_t c = 0; c < C; c++)
      for (int64_t r = 0; r < L.rows; r++)
        for (int64_t q = 0; q < S; q++) {
          int64_t i = ((s * C + c) * L.rows + r) * S + q, g = ((s * C + c) * S + L.row_offset + r) * S + q;
          x[i] = value(10 + it, g), t[i] = value(20 + it, g);
        }
  double loss;
  ASSERT_OK(dist_afno_zero_grad(m));
  ASSERT_OK(dist_afno_forward(m, B, x, y));
  ASSERT_OK(dist_afno_mse(m, B, y, t, &loss, dy));
  ASSERT_OK(dist_afno_backward(m, dy));
  ASSERT_OK(dist_optim_step(o));
  free(x), free(t), free(y), free(dy);
}

static float *whole(dist_afno *m, int *np) {
  dist_params *set = dist_afno_params(m);
  *np = dist_params_count(set);
  int64_t total = 0;
  dist_afno_param_info info;
  for (int p = 0; p < *np; p++) {
    ASSERT_OK(dist_afno_param_info_get(m, p, &info));
    total += info.numel;
  }
  float *all = malloc(sizeof(float) * (size_t)total), *at = all;
  for (int p = 0; p < *np; p++) {
    ASSERT_OK(dist_afno_param_info_get(m, p, &info));
    ASSERT_OK(dist_afno_param_get(m, p, at));
    at += info.numel;
  }
  return all;
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

static int64_t total_numel(dist_afno *m) {
  dist_afno_layout L;
  dist_afno_layout_get(m, &L);
  return L.params_global;
}

/* Save in layout `from` after 2 steps, load in layout `to` (fresh model,
 * other seed): the same parameters, and one more step on each agrees. */
static void roundtrip(int from, int to) {
  char path[300];
  snprintf(path, sizeof path, "%s/rt_%d_%d.safetensors", dir, from, to);
  dist_afno_config ca = from < 0 ? cfg() : layout(from), cb = to < 0 ? cfg() : layout(to);
  cb.seed = 99;
  dist_afno *a = NULL, *b = NULL;
  dist_optim *oa = NULL, *ob = NULL;
  dist_adam_options ao = DIST_ADAM_OPTIONS_INIT;
  ao.lr = 0.01;
  ASSERT_OK(dist_afno_create(&ca, &a));
  ASSERT_OK(dist_afno_create(&cb, &b));
  if (!a || !b) return;
  ASSERT_OK(dist_optim_adam(dist_afno_params(a), &ao, &oa));
  ao.lr = 0.5; /* restored from the file */
  ASSERT_OK(dist_optim_adam(dist_afno_params(b), &ao, &ob));
  step(a, oa, 0);
  step(a, oa, 1);
  /* A solo model saves on every rank: each its own file; rank 0's is loaded. */
  char mine[320];
  snprintf(mine, sizeof mine, "%s.r%d", path, from < 0 ? R : 0);
  dist_afno_meta meta[1] = {{"epoch", "7"}};
  ASSERT_OK(dist_afno_save(a, oa, mine, meta, 1));
  cunit_barrier();
  snprintf(mine, sizeof mine, "%s.r0", path);
  ASSERT_OK(dist_afno_load(b, ob, mine));
  char epoch[16];
  ASSERT_OK(dist_afno_meta_read(mine, "epoch", epoch, sizeof epoch));
  CU_ASSERT_STRING_EQUAL(epoch, "7");
  CU_ASSERT_DOUBLE_EQUAL(dist_optim_get_lr(ob), 0.01, 1e-15);
  int np;
  float *pa = whole(a, &np), *pb = whole(b, &np);
  const int64_t n = total_numel(a);
  CU_ASSERT_EQUAL(max_diff(pa, pb, n), 0.0); /* a copy, bit for bit */
  step(a, oa, 2);
  step(b, ob, 2);
  float *qa = whole(a, &np), *qb = whole(b, &np);
  double d = max_diff(qa, qb, n);
  if (d > 1e-5) fprintf(stderr, "rank %d: after resume (%d -> %d) params differ by %g\n", R, from, to, d);
  CU_ASSERT(d <= 1e-5);
  CU_ASSERT(max_diff(qa, pa, n) > 1e-4); /* the step did move them (Adam state restored, not zero) */
  free(pa), free(pb), free(qa), free(qb);
  dist_optim_destroy(oa), dist_optim_destroy(ob);
  dist_afno_destroy(a), dist_afno_destroy(b);
}

static void test_spatial_to_serial(void) { roundtrip(0, -1); }
static void test_serial_to_model(void) { roundtrip(-1, 1); }
static void test_model_to_spatial(void) { roundtrip(1, 0); }
static void test_data_to_mesh(void) { roundtrip(2, 3); }

/* Files that must fail: everywhere, with a message, changing nothing. */
static void expect_load_fails(dist_afno *m, dist_optim *o, const char *path, dist_status code, const char *text) {
  int np;
  float *before = whole(m, &np);
  ASSERT_STATUS(dist_afno_load(m, o, path), code);
  if (R == 0) ASSERT_MSG_HAS(text);
  float *after = whole(m, &np);
  CU_ASSERT_EQUAL(max_diff(before, after, total_numel(m)), 0.0);
  free(before), free(after);
}

static void test_bad_files(void) {
  dist_afno_config c = layout(0);
  dist_afno *m = NULL;
  dist_optim *o = NULL;
  ASSERT_OK(dist_afno_create(&c, &m));
  if (!m) return;
  dist_adam_options ao = DIST_ADAM_OPTIONS_INIT;
  ASSERT_OK(dist_optim_adam(dist_afno_params(m), &ao, &o));
  char good[300], bad[300];
  snprintf(good, sizeof good, "%s/good.safetensors", dir);
  ASSERT_OK(dist_afno_save(m, o, good, NULL, 0));
  /* a crash mid-write is a missing rename: the old file stays whole */
  ASSERT_STATUS(dist_afno_save(m, o, "/nonexistent-dir/x.safetensors", NULL, 0), DIST_ERR_IO);
  snprintf(bad, sizeof bad, "%s/missing.safetensors", dir);
  expect_load_fails(m, o, bad, DIST_ERR_IO, "missing.safetensors");
  if (R == 0) { /* truncated copy and a flipped header byte */
    FILE *f = fopen(good, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    CU_ASSERT_EQUAL(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    snprintf(bad, sizeof bad, "%s/trunc.safetensors", dir);
    f = fopen(bad, "wb");
    fwrite(buf, 1, (size_t)n / 2, f);
    fclose(f);
    snprintf(bad, sizeof bad, "%s/flip.safetensors", dir);
    buf[20] = '{';
    f = fopen(bad, "wb");
    fwrite(buf, 1, (size_t)n, f);
    fclose(f);
    free(buf);
  }
  cunit_barrier();
  snprintf(bad, sizeof bad, "%s/trunc.safetensors", dir);
  expect_load_fails(m, o, bad, DIST_ERR_CORRUPT, "trunc.safetensors");
  snprintf(bad, sizeof bad, "%s/flip.safetensors", dir);
  expect_load_fails(m, o, bad, DIST_ERR_CORRUPT, "flip.safetensors");
  /* a checkpoint of another shape */
  dist_afno_config other = cfg();
  other.embed_dim = 36;
  dist_afno *m2 = NULL;
  ASSERT_OK(dist_afno_create(&other, &m2));
  snprintf(bad, sizeof bad, "%s/other_r%d.safetensors", dir, R);
  ASSERT_OK(dist_afno_save(m2, NULL, bad, NULL, 0));
  cunit_barrier();
  snprintf(bad, sizeof bad, "%s/other_r0.safetensors", dir);
  expect_load_fails(m, NULL, bad, DIST_ERR_CORRUPT, "the model expects");
  /* model only (no optimizer state) into a model with an optimizer */
  expect_load_fails(m, o, bad, DIST_ERR_CORRUPT, "optimizer");
  ASSERT_OK(dist_afno_load(m, NULL, good)); /* the good file still loads */
  dist_afno_destroy(m2);
  dist_optim_destroy(o);
  dist_afno_destroy(m);
}

static CU_TestInfo tests[] = {
    {"spatial -> serial", test_spatial_to_serial},
    {"serial -> model parallel", test_serial_to_model},
    {"model -> spatial parallel", test_model_to_spatial},
    {"data parallel -> mesh", test_data_to_mesh},
    {"corrupt, truncated, mismatched, missing", test_bad_files},
    CU_TEST_INFO_NULL,
};

static int setup(void) {
  int rank = 0;
  dist_manager_rank(&rank);
  if (rank == 0) {
    snprintf(dir, sizeof dir, "/tmp/test_afno_ckpt.XXXXXX");
    if (!mkdtemp(dir)) return 1;
  }
  cunit_broadcast_bytes(dir, sizeof dir, 0);
  return 0;
}

static int teardown(void) {
  cunit_barrier();
  if (R == 0) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
  }
  return 0;
}

static CU_SuiteInfo suites[] = {{"afno checkpoints", setup, teardown, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_mpi_main(suites, "test_afno_ckpt", &R, &W); }
