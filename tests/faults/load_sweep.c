/* The allocation-failure sweep over a checkpoint load (malloc_sweep.sh with
 * MALLOC_SWEEP_TARGET=load): 3 ranks, an AFNO model split model-parallel
 * (uneven: each rank holds a different shard) with an Adam optimizer.
 * The program saves the model as A (optimizer state 0.5 everywhere, steps 5,
 * lr 0.25, schedule count 3), changes it to B (every parameter + 1, state
 * 0.25, steps 7, lr 0.5, count 9), and loads A again with one
 * allocation of distmgr's failing on one rank. dist_afno_load must then give
 * the same verdict on every rank, and leave every rank at A (success) or at
 * B (error): never a mixture. A rank prints "WRONG" and exits 3 otherwise.
 *
 * Allocations before the load are not swept: the program prints "sweep from
 * allocation N" (the shim's count at that point, read through dlsym). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <distmgr.h>
#include <distmgr/afno.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int R, W;

static void need(const char *call, dist_status s) {
  if (!s) return;
  printf("rank %d: %s -> error %d: %s\n", R, call, (int)s, dist_last_error());
  exit(1);
}

static void wrong(const char *what) {
  printf("rank %d: WRONG %s\n", R, what);
  fflush(stdout);
  exit(3);
}

/* The optimizer's state: every slot of this rank's shard of every
 * parameter, all `v` (set), or checked against `v` (returns 1 when all are). */
static int state_is(dist_afno *m, dist_optim *o, int n, float v, int set) {
  int same = 1;
  for (int p = 0; p < n; p++) {
    dist_afno_param_info info;
    need("dist_afno_param_info_get", dist_afno_param_info_get(m, p, &info));
    for (int k = 0; k < dist_optim_state_slots(o); k++) {
      void *b = NULL;
      need("dist_optim_state_buffer", dist_optim_state_buffer(o, p, k, &b));
      float *f = b;
      for (int64_t i = 0; i < info.local_numel; i++)
        if (set) f[i] = v;
        else same &= f[i] == v;
    }
  }
  return same;
}

/* Every parameter's whole tensor and the optimizer's state, steps, lr and
 * schedule equal the saved ones plus `plus` / `state` / `step` / `lr` / `count`. */
static int model_is(dist_afno *m, dist_optim *o, float **saved, int n, float plus, float state, int64_t step, double lr,
                    int64_t count) {
  int64_t k = -1;
  dist_optim_schedule_count(o, &k);
  int same = dist_optim_get_lr(o) == lr && dist_optim_get_base_lr(o) == lr && k == count && state_is(m, o, n, state, 0);
  for (int p = 0; p < n; p++) {
    dist_afno_param_info info;
    need("dist_afno_param_info_get", dist_afno_param_info_get(m, p, &info));
    float *now = malloc(sizeof(float) * (size_t)info.numel);
    if (!now) wrong("(the check could not allocate)");
    need("dist_afno_param_get", dist_afno_param_get(m, p, now));
    for (int64_t i = 0; i < info.numel; i++) same &= now[i] == saved[p][i] + plus;
    free(now);
    int64_t s = -1;
    need("dist_optim_state_step", dist_optim_state_step(o, p, &s));
    same &= s == step;
  }
  return same;
}

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: load_sweep FILE\n"), 2;
  need("dist_manager_initialize", dist_manager_initialize());
  dist_manager_rank(&R);
  dist_manager_world_size(&W);
  need("dist_group_create_subgroup", dist_group_create_subgroup("mp", W, NULL));
  dist_afno_config c = DIST_AFNO_CONFIG_INIT;
  c.inp_shape[0] = c.inp_shape[1] = 16;
  c.in_channels = c.out_channels = 2;
  c.patch_size[0] = c.patch_size[1] = 4;
  c.embed_dim = 12, c.depth = 1, c.mlp_ratio = 2.0, c.num_blocks = 6, c.seed = 7;
  c.data_parallel = c.spatial = "self";
  c.model_parallel = "mp";
  dist_afno *m = NULL;
  dist_optim *o = NULL;
  dist_adam_options ao = DIST_ADAM_OPTIONS_INIT;
  need("dist_afno_create", dist_afno_create(&c, &m));
  need("dist_optim_adam", dist_optim_adam(dist_afno_params(m), &ao, &o));
  const int n = dist_params_count(dist_afno_params(m));
  float **saved = calloc((size_t)n, sizeof *saved);
  for (int p = 0; saved && p < n; p++) {
    dist_afno_param_info info;
    need("dist_afno_param_info_get", dist_afno_param_info_get(m, p, &info));
    if (!(saved[p] = malloc(sizeof(float) * (size_t)info.numel))) wrong("(could not allocate)");
    need("dist_afno_param_get", dist_afno_param_get(m, p, saved[p]));
    need("dist_optim_state_set_step", dist_optim_state_set_step(o, p, 5));
  }
  if (!saved) wrong("(could not allocate)");
  state_is(m, o, n, 0.5f, 1);
  need("dist_optim_restore_schedule", dist_optim_restore_schedule(o, 0.25, 0.25, 3));
  need("dist_afno_save", dist_afno_save(m, o, argv[1], NULL, 0));
  for (int p = 0; p < n; p++) { /* B: A + 1 */
    dist_afno_param_info info;
    need("dist_afno_param_info_get", dist_afno_param_info_get(m, p, &info));
    float *b = malloc(sizeof(float) * (size_t)info.numel);
    if (!b) wrong("(could not allocate)");
    for (int64_t i = 0; i < info.numel; i++) b[i] = saved[p][i] + 1;
    need("dist_afno_param_set", dist_afno_param_set(m, p, b));
    need("dist_optim_state_set_step", dist_optim_state_set_step(o, p, 7));
    free(b);
  }
  state_is(m, o, n, 0.25f, 1);
  need("dist_optim_restore_schedule", dist_optim_restore_schedule(o, 0.5, 0.5, 9));
  long (*counted)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "failmalloc_counted");
  if (counted) printf("rank %d: sweep from allocation %ld\n", R, counted() + 1);

  dist_status s = dist_afno_load(m, o, argv[1]);
  printf("rank %d: dist_afno_load -> %s%s\n", R, s ? "error: " : "ok", s ? dist_last_error() : "");
  fflush(stdout);
  int32_t v[2] = {s != DIST_SUCCESS, -(s != DIST_SUCCESS)}; /* max and -min of "failed" */
  dist_tensor t = dist_tensor_host(v, DIST_I32, 1, (int64_t[1]){2});
  need("dist_all_reduce", dist_all_reduce(NULL, &t, DIST_MAX));
  if (v[0] != -v[1]) wrong("dist_afno_load: some ranks failed, others did not");
  if (!model_is(m, o, saved, n, s ? 1.0f : 0.0f, s ? 0.25f : 0.5f, s ? 7 : 5, s ? 0.5 : 0.25, s ? 9 : 3))
    wrong(s ? "dist_afno_load failed but changed the model" : "dist_afno_load succeeded but the model is not the file's");
  for (int p = 0; p < n; p++) free(saved[p]);
  free(saved);
  dist_optim_destroy(o);
  dist_afno_destroy(m);
  need("dist_manager_finalize", dist_manager_finalize());
  printf("rank %d: done\n", R);
  return 0;
}
