/* bench/afno: a training step (forward, MSE, backward, Adam) of distmgr's
 * AFNO side by side with the same model in PyTorch (CPU), and distmgr at 2
 * and 4 ranks spatial- and model-parallel, in one run.
 *
 *   1 distmgr, 1 rank (OPENBLAS_NUM_THREADS=1: one thread per rank)
 *   2 PyTorch, bench/afno_torch.py, torch.set_num_threads(1) and (2) when
 *     `python3 -c 'import torch'` works; otherwise a visible SKIP
 *   3 distmgr at 2 and 4 ranks, spatial parallel and model parallel
 *
 * Each size runs warm-up steps, then --steps timed steps; the step time is
 * the median over steps of the slowest rank, the memory the largest peak
 * resident set (ru_maxrss) over ranks. Ratio lines (targets of issue 16):
 * distmgr/PyTorch step time at 1 thread, 2-rank spatial / 1-rank step time
 * and peak memory per rank.
 *
 * usage: bench/afno [--sizes 256,1024] [--steps 5] [--ranks 2,4] [--quick]
 *   --quick: one 128 x 128 size, 2 steps (CI smoke run)
 * Environment: LAUNCHER (as for make check). */
#define _GNU_SOURCE 1
#include "bench_util.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cblas.h>
#include <distmgr.h>
#include <distmgr/afno.h>
#include <distmgr/mpi.h>

#ifndef SRCDIR
#define SRCDIR "."
#endif

typedef struct options {
  char sizes[128], ranks[64];
  int steps, warmup, quick;
  int embed, depth, blocks, patch, channels;
} options;

#define FAIL(what, s)                                                                               \
  do {                                                                                              \
    fprintf(stderr, "bench/afno: %s: %s (%s)\n", what, dist_status_string(s), dist_last_error()); \
    return 1;                                                                                       \
  } while (0)

/* One layout: mode "serial", "spatial" or "model" over all ranks. */
static int worker(const options *o, int size, const char *mode) {
  dist_status s = dist_manager_initialize();
  if (s) FAIL("initialize", s);
  int W = 1, R = 0;
  dist_manager_world_size(&W);
  dist_manager_rank(&R);
  dist_afno_config c = DIST_AFNO_CONFIG_INIT;
  c.inp_shape[0] = c.inp_shape[1] = size;
  c.in_channels = c.out_channels = o->channels;
  c.patch_size[0] = c.patch_size[1] = o->patch;
  c.embed_dim = o->embed;
  c.depth = o->depth;
  c.num_blocks = o->blocks;
  c.seed = 1;
  c.data_parallel = c.model_parallel = c.spatial = "self";
  if (W > 1) {
    const char *name = strcmp(mode, "model") == 0 ? "model_parallel" : "spatial";
    if ((s = dist_group_create_subgroup(name, W, NULL))) FAIL("group", s);
    if (strcmp(mode, "model") == 0) c.model_parallel = name;
    else c.spatial = name;
  }
  dist_afno *m = NULL;
  if ((s = dist_afno_create(&c, &m))) FAIL("dist_afno_create", s);
  dist_afno_layout L;
  dist_afno_layout_get(m, &L);
  int64_t n = (int64_t)o->channels * L.rows * size;
  float *x = malloc(sizeof(float) * (size_t)n), *t = malloc(sizeof(float) * (size_t)n);
  float *y = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) x[i] = sinf(0.001f * (float)i), t[i] = cosf(0.002f * (float)i);
  dist_optim *opt = NULL;
  dist_adam_options ao = DIST_ADAM_OPTIONS_INIT;
  if ((s = dist_optim_adam(dist_afno_params(m), &ao, &opt))) FAIL("adam", s);
  MPI_Comm world;
  if ((s = dist_group_comm(NULL, &world))) FAIL("dist_group_comm", s);
  double times[64];
  int steps = o->steps > 64 ? 64 : o->steps;
  double loss = 0;
  for (int it = -o->warmup; it < steps; it++) {
    dist_barrier(NULL);
    double t0 = bench_now();
    s = dist_afno_zero_grad(m);
    if (!s) s = dist_afno_forward(m, 1, x, y);
    if (!s) s = dist_afno_mse(m, 1, y, t, &loss, dy);
    if (!s) s = dist_afno_backward(m, dy);
    if (!s) s = dist_optim_step(opt);
    if (s) FAIL("training step", s);
    double dt = bench_slowest(world, bench_now() - t0);
    if (it >= 0) times[it] = dt;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double rss = bench_slowest(world, (double)ru.ru_maxrss / 1024.0); /* the largest peak */
  if (R == 0 && strcmp(mode, "serial") == 0) printf("OpenBLAS core: %s\n", openblas_get_corename());
  if (R == 0)
    printf("result mode=%s np=%d size=%d step_ms=%.2f rss_mb=%.1f loss=%.6f params=%lld\n", mode, W, size,
           1e3 * bench_median(times, steps), rss, loss, (long long)L.params_global);
  dist_optim_destroy(opt);
  dist_afno_destroy(m);
  free(x), free(t), free(y), free(dy);
  dist_manager_finalize();
  return 0;
}

typedef struct result {
  double step_ms, rss_mb;
  int ok;
} result;

/* Run a command, echo its output, pick "result" or "torch_step_s" lines. */
static result run_cmd(const char *cmd) {
  result r = {0, 0, 0};
  char line[1024];
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return r;
  while (fgets(line, sizeof line, p)) {
    double a, b;
    char *q;
    if ((q = strstr(line, "step_ms=")) && sscanf(q, "step_ms=%lf rss_mb=%lf", &a, &b) == 2) r.step_ms = a, r.rss_mb = b, r.ok = 1;
    if ((q = strstr(line, "torch_step_s=")) && sscanf(q, "torch_step_s=%lf torch_peak_rss_mb=%lf", &a, &b) == 2)
      r.step_ms = 1e3 * a, r.rss_mb = b, r.ok = 1;
    fputs(line, stdout);
  }
  if (pclose(p) != 0) r.ok = 0;
  return r;
}

static result launch(const char *self, const char *launcher, int np, const options *o, int size, const char *mode) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "OPENBLAS_NUM_THREADS=1 timeout 900 %s %d %s --worker %s --size %d --steps %d --warmup %d --embed %d "
           "--depth %d --blocks %d --patch %d --channels %d 2>&1",
           launcher, np, self, mode, size, o->steps, o->warmup, o->embed, o->depth, o->blocks, o->patch, o->channels);
  return run_cmd(cmd);
}

/* The first of $PYTHON, python3, /usr/bin/python3 that imports torch (a
 * virtualenv's python3 often lacks Debian's python3-torch). */
static const char *python_with_torch(void) {
  static char found[512];
  const char *env = getenv("PYTHON"), *cands[] = {env, "python3", "/usr/bin/python3"};
  if (found[0]) return found;
  for (int i = 0; i < 3; i++) {
    char cmd[700];
    if (!cands[i] || !*cands[i] || strlen(cands[i]) > 500) continue;
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", cands[i]);
    if (system(cmd) == 0) return snprintf(found, sizeof found, "%s", cands[i]), found;
  }
  return "python3"; /* the script then prints why it skips */
}

static result torch_peer(const options *o, int size, int threads) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d timeout 900 %s %s/bench/afno_torch.py --size %d %d --channels %d %d --patch %d --embed %d --depth %d "
           "--blocks %d --batch 1 --threads %d --steps %d --warmup %d 2>&1",
           threads, threads, python_with_torch(), SRCDIR, size, size, o->channels, o->channels, o->patch, o->embed, o->depth, o->blocks, threads, o->steps,
           o->warmup);
  return run_cmd(cmd);
}

int main(int argc, char **argv) {
  options o = {"256,1024", "2,4", 5, 2, 0, 256, 4, 16, 8, 3};
  const char *mode = NULL;
  int size = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) o.quick = 1;
    else if (!v) return fprintf(stderr, "bench/afno: %s needs a value\n", a), 2;
    else if (strcmp(a, "--worker") == 0) mode = v, i++;
    else if (strcmp(a, "--size") == 0) size = atoi(v), i++;
    else if (strcmp(a, "--sizes") == 0) snprintf(o.sizes, sizeof o.sizes, "%s", v), i++;
    else if (strcmp(a, "--ranks") == 0) snprintf(o.ranks, sizeof o.ranks, "%s", v), i++;
    else if (strcmp(a, "--steps") == 0) o.steps = atoi(v), i++;
    else if (strcmp(a, "--warmup") == 0) o.warmup = atoi(v), i++;
    else if (strcmp(a, "--embed") == 0) o.embed = atoi(v), i++;
    else if (strcmp(a, "--depth") == 0) o.depth = atoi(v), i++;
    else if (strcmp(a, "--blocks") == 0) o.blocks = atoi(v), i++;
    else if (strcmp(a, "--patch") == 0) o.patch = atoi(v), i++;
    else if (strcmp(a, "--channels") == 0) o.channels = atoi(v), i++;
    else return fprintf(stderr, "usage: bench/afno [--sizes 256,1024] [--steps 5] [--ranks 2,4] [--quick]\n"), 2;
  }
  if (o.steps < 1 || o.steps > 64 || o.warmup < 0) return fprintf(stderr, "bench/afno: --steps 1..64\n"), 2;
  if (mode) return worker(&o, size, mode);
  if (o.quick) snprintf(o.sizes, sizeof o.sizes, "128"), o.steps = 2, o.warmup = 1;

  const char *launcher = bench_launcher();
  /* Debian's OpenBLAS 0.3.21 falls back to SSE3 kernels on CPUs newer than
   * itself (see models/afno_model.c): name the right ones, as a user would. */
  __builtin_cpu_init();
  if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  else if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2")) setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/afno: cannot find own path\n"), 1;
  printf("bench/afno: training step (forward, MSE, backward, Adam), 1 sample %dx S x S, patch %d, embed %d, depth %d, "
         "%d blocks; median of %d steps (slowest rank), peak RSS = max over ranks; 1 BLAS thread per rank\n",
         o.channels, o.patch, o.embed, o.depth, o.blocks, o.steps);
  char list[128];
  snprintf(list, sizeof list, "%s", o.sizes);
  char *ratio_text = NULL; /* the ratio lines, printed after all the runs' output */
  size_t ratio_len = 0;
  FILE *ratios = open_memstream(&ratio_text, &ratio_len);
  if (!ratios) return fprintf(stderr, "bench/afno: open_memstream failed\n"), 1;
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int S = atoi(tok);
    printf("== size %d x %d\n", S, S);
    result one = launch(self, launcher, 1, &o, S, "serial");
    if (!one.ok) return fprintf(stderr, "bench/afno: the 1-rank run failed\n"), 1;
    result t1 = torch_peer(&o, S, 1);
    if (t1.ok) {
      torch_peer(&o, S, 2);
      bench_ratio(ratios, one.step_ms / t1.step_ms, "target <= 0.7", "afno %d step distmgr/PyTorch (1 thread)", S);
    } else {
      printf("SKIP: PyTorch peer (python3 cannot import torch; Debian: apt-get install python3-torch)\n");
    }
    char ranks[64];
    snprintf(ranks, sizeof ranks, "%s", o.ranks);
    char *save = NULL;
    for (char *r = strtok_r(ranks, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
      int np = atoi(r);
      result sp = launch(self, launcher, np, &o, S, "spatial");
      result mp = launch(self, launcher, np, &o, S, "model");
      if (!sp.ok || !mp.ok) return fprintf(stderr, "bench/afno: a %d-rank run failed\n", np), 1;
      if (np == 2) {
        bench_ratio(ratios, sp.step_ms / one.step_ms, "target <= 0.6", "afno %d 2-rank spatial / 1-rank step", S);
        bench_ratio(ratios, sp.rss_mb / one.rss_mb, "target <= 0.6", "afno %d 2-rank spatial / 1-rank peak memory per rank",
                    S);
      }
    }
  }
  fclose(ratios);
  fputs(ratio_text, stdout);
  free(ratio_text);
  return 0;
}
