/* bench/ns2d: a time step of the pseudo-spectral 2-D Navier-Stokes solver
 * of examples/ns2d.c (IF-RK4, 2/3 dealiasing, Kolmogorov forcing, f64; 4
 * stages of 4 inverse + 1 forward real 2-D FFT) on distmgr's distributed
 * FFT, side by side with the same solver in numpy, in one run.
 *
 *   1 distmgr, 1 rank (one thread per rank: OMP_NUM_THREADS=1 and friends)
 *   2 numpy, bench/ns2d_numpy.py (pocketfft, single-threaded) when a python3
 *     that imports numpy is found ($PYTHON, python3, /usr/bin/python3);
 *     otherwise a visible SKIP
 *   3 distmgr at the --ranks counts (default 2 and 4)
 *
 * Every run starts from the same field (ns2d_random_init; the numpy peer
 * reproduces its hash), takes --warmup steps, then --repeats timed blocks of
 * --steps steps; a block is timed between barriers on every rank and the
 * slowest rank's time counts (all-reduce MAX); the step time is the median
 * block time / --steps. After the run each prints energy and enstrophy, and
 * the relative differences to the 1-rank run are printed as a correctness
 * check (same steps from the same field: they agree to round-off). The
 * numpy peer also checks itself once against the Taylor-Green and laminar
 * Kolmogorov solutions. Ratio lines (targets of issue 17): distmgr 1-rank /
 * numpy step time, and 2-rank / 1-rank step time; the 4-rank figures are
 * info lines (steps/s).
 *
 * usage: bench/ns2d [--sizes 256,512] [--ranks 2,4] [--steps 10] [--repeats 5] [--warmup 3] [--quick]
 *   --quick: one 64 x 64 size, 3 steps x 2 blocks (CI smoke run)
 * Environment: LAUNCHER (as for make check), PYTHON. */
#define _GNU_SOURCE 1
#include "bench_util.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <distmgr.h>
#include <distmgr/mpi.h>

#include "../examples/ns2d.h"

#ifndef SRCDIR
#define SRCDIR "."
#endif

#define USAGE                                                                                                   \
  "usage: bench/ns2d [--sizes 256,512] [--ranks 2,4] [--steps 10] [--repeats 5] [--warmup 3] [--quick]\n" \
  "  --sizes   grid sizes n (even, 32..8192), comma-separated\n"                                                \
  "  --ranks   rank counts besides 1 (2..256), comma-separated\n"                                               \
  "  --steps   steps per timed block (1..10000)\n"                                                              \
  "  --repeats timed blocks, the median counts (1..1000)\n"                                                     \
  "  --warmup  untimed steps first (0..10000)\n"                                                                \
  "  --quick   one 64 x 64 size, 3 steps x 2 blocks, 1 warm-up step (CI smoke run)\n"

/* The physical set-up, the same for both implementations (dt = 2/n keeps
 * the CFL number near 0.3 for the field's velocities of order 1). */
#define NU 1e-3
#define FORCE_AMP 1.0
#define FORCE_K 4
#define INIT_SEED 1
#define INIT_K0 8.0
#define INIT_ENERGY 0.5
#define MAX_LIST 16
#define CHECK_TOL 1e-9 /* relative, energy and enstrophy, between runs */

typedef struct options {
  int sizes[MAX_LIST], nsizes;
  int ranks[MAX_LIST], nranks;
  int steps, repeats, warmup, quick;
} options;

/* A whole decimal int in [lo, hi], or -1 (lo >= 0 everywhere here). */
static int parse_int(const char *s, int lo, int hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  return (int)v;
}

/* A comma-separated list of such ints; the count, or -1. */
static int parse_list(const char *s, int lo, int hi, int *out) {
  char buf[256];
  if (strlen(s) >= sizeof buf) return -1;
  snprintf(buf, sizeof buf, "%s", s);
  int k = 0;
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int v = parse_int(t, lo, hi);
    if (v < 0 || k == MAX_LIST) return -1;
    out[k++] = v;
  }
  return k > 0 ? k : -1;
}

#define FAIL(what, s)                                                                               \
  do {                                                                                              \
    fprintf(stderr, "bench/ns2d: %s: %s (%s)\n", what, dist_status_string(s), dist_last_error()); \
    return 1;                                                                                       \
  } while (0)

/* One rank of an np-rank run on an n x n grid. */
static int worker(const options *o, int n) {
  dist_status s = dist_manager_initialize();
  if (s) FAIL("initialize", s);
  int W = 1, R = 0;
  dist_manager_world_size(&W);
  dist_manager_rank(&R);
  ns2d_config c = NS2D_CONFIG_INIT;
  c.n = n, c.nu = NU, c.dt = 2.0 / n, c.force_amp = FORCE_AMP, c.force_k = FORCE_K;
  ns2d *m = NULL;
  if ((s = ns2d_create(&c, &m))) FAIL("ns2d_create", s);
  if ((s = ns2d_random_init(m, INIT_SEED, INIT_K0, INIT_ENERGY))) FAIL("ns2d_random_init", s);
  if ((s = ns2d_step(m, o->warmup))) FAIL("warm-up steps", s);
  MPI_Comm world;
  if ((s = dist_group_comm(NULL, &world))) FAIL("dist_group_comm", s);
  double *block = malloc(sizeof(double) * (size_t)o->repeats);
  if (!block) return fprintf(stderr, "bench/ns2d: out of memory\n"), 1;
  for (int b = 0; b < o->repeats; b++) {
    dist_barrier(NULL);
    double t0 = bench_now();
    if ((s = ns2d_step(m, o->steps))) FAIL("timed steps", s);
    block[b] = bench_slowest(world, bench_now() - t0);
  }
  double med = bench_median(block, o->repeats);
  double e = 0, z = 0;
  if ((s = ns2d_diagnostics(m, &e, &z))) FAIL("diagnostics", s);
  if (R == 0)
    printf("result np=%d n=%d step_ms=%.3f steps=%d energy=%.15e enstrophy=%.15e\n", W, n, 1e3 * med / o->steps,
           o->warmup + o->repeats * o->steps, e, z);
  free(block);
  ns2d_destroy(m);
  dist_manager_finalize();
  return 0;
}

typedef struct result {
  double step_ms, energy, enstrophy;
  int ok;
} result;

/* Run a command, echo its output, pick the step time and diagnostics from
 * "result ..." (distmgr) or "numpy ..." (the peer) lines. */
static result run_cmd(const char *cmd) {
  result r = {0, 0, 0, 0};
  char line[1024];
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return r;
  while (fgets(line, sizeof line, p)) {
    double a, e, z;
    int steps;
    char *q;
    if ((strncmp(line, "result ", 7) == 0 || strncmp(line, "numpy ", 6) == 0) && (q = strstr(line, "step_ms=")) &&
        sscanf(q, "step_ms=%lf steps=%d energy=%lf enstrophy=%lf", &a, &steps, &e, &z) == 4)
      r.step_ms = a, r.energy = e, r.enstrophy = z, r.ok = 1;
    fputs(line, stdout);
  }
  if (pclose(p) != 0) r.ok = 0;
  return r;
}

#define THREADS_ENV "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1"

static result launch(const char *self, const char *launcher, int np, const options *o, int n) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, THREADS_ENV " timeout 900 %s %d %s --worker --size %d --steps %d --repeats %d --warmup %d 2>&1",
           launcher, np, self, n, o->steps, o->repeats, o->warmup);
  return run_cmd(cmd);
}

/* The first of $PYTHON, python3, /usr/bin/python3 that imports numpy (a
 * virtualenv's python3 often lacks Debian's python3-numpy); NULL if none. */
static const char *python_with_numpy(void) {
  static char found[512];
  static int looked;
  const char *env = getenv("PYTHON"), *cands[] = {env, "python3", "/usr/bin/python3"};
  if (looked) return found[0] ? found : NULL;
  looked = 1;
  for (int i = 0; i < 3; i++) {
    char cmd[700];
    if (!cands[i] || !*cands[i] || strlen(cands[i]) > 500) continue;
    snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", cands[i]);
    if (system(cmd) == 0) return snprintf(found, sizeof found, "%s", cands[i]), found;
  }
  return NULL;
}

static result numpy_peer(const options *o, int n) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           THREADS_ENV " timeout 900 %s %s/bench/ns2d_numpy.py --size %d --steps %d --repeats %d --warmup %d --nu %.17g "
           "--amp %.17g --kf %d --k0 %.17g --energy %.17g --seed %d 2>&1",
           python_with_numpy(), SRCDIR, n, o->steps, o->repeats, o->warmup, NU, FORCE_AMP, FORCE_K, INIT_K0,
           INIT_ENERGY, INIT_SEED);
  return run_cmd(cmd);
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-300); }

/* The summary printed at the end (a memory stream, opened in main). */
static FILE *summary;
#define ADD(...) fprintf(summary, __VA_ARGS__)

/* The surrogate's training throughput (examples/ns2d_train: forward, MSE,
 * backward with DDP, Adam) in the layouts of the example, on a dataset made
 * by examples/ns2d_sim: samples/s over the training steps (validation,
 * checkpoints and the rollout not counted). */
static double train_rate(const char *launcher, int np, const char *dir, const char *layout, int steps) {
  char cmd[8192], line[2048];
  snprintf(cmd, sizeof cmd,
           "OPENBLAS_NUM_THREADS=1 timeout 900 %s %d %s/examples/ns2d_train --data %s/flow.h5 --out %s/run --epochs 1000 "
           "--max-steps %d --log-every 100000 --ckpt-every 100000 --pictures 0 --rollout-steps 1 --quiet %s 2>&1",
           launcher, np, BUILDDIR, dir, dir, steps, layout);
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  double rate = 0;
  char *q;
  while (p && fgets(line, sizeof line, p)) {
    if (strstr(line, "steps (") && (q = strstr(line, " samples/s")))
      while (q > line && q[-1] != ' ') q--, rate = atof(q);
    if (strstr(line, "rank") && strstr(line, "ns2d_train")) fputs(line, stdout);
  }
  if (!p || pclose(p) != 0) return 0;
  return rate;
}

static int training_throughput(const char *launcher, int quick) {
  char dir[] = "/tmp/bench_ns2d.XXXXXX", cmd[8192];
  if (!mkdtemp(dir)) return fprintf(stderr, "bench/ns2d: mkdtemp failed\n"), 1;
  int n = quick ? 32 : 64, steps = quick ? 4 : 40;
  snprintf(cmd, sizeof cmd, "timeout 600 %s 2 %s/examples/ns2d_sim --out %s/flow.h5 --n %d --trajectories 10 "
           "--held-out 2 --snapshots 9 --quiet >/dev/null", launcher, BUILDDIR, dir, n);
  if (system(cmd) != 0) return fprintf(stderr, "bench/ns2d: examples/ns2d_sim failed: %s\n", cmd), 1;
  const struct { int np; const char *layout; } runs[] = {
      {1, ""}, {2, "--dp 2"}, {2, "--sp 2"}, {4, "--dp 2 --sp 2"}, {4, "--dp 4"}, {4, "--mp 2 --sp 2"}};
  printf("== surrogate training (examples/ns2d_train, AFNO embed 64 depth 4 patch 4, global batch 8, %dx%d): "
         "samples/s over %d steps, 1 BLAS thread per rank\n", n, n, steps);
  double one = 0;
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    double r = train_rate(launcher, runs[i].np, dir, runs[i].layout, steps);
    if (r <= 0) return fprintf(stderr, "bench/ns2d: training at %d ranks %s failed\n", runs[i].np, runs[i].layout), 1;
    if (i == 0) one = r;
    printf("info: ns2d training %dx%d %d rank%s %-14s %7.1f samples/s  (%.2fx 1 rank)\n", n, n, runs[i].np,
           runs[i].np > 1 ? "s" : " ", *runs[i].layout ? runs[i].layout : "serial", r, r / one);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) != 0;
}

int main(int argc, char **argv) {
  options o = {{256, 512}, 2, {2, 4}, 2, 10, 5, 3, 0};
  int worker_mode = 0, size = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) o.quick = 1;
    else if (strcmp(a, "--worker") == 0) worker_mode = 1;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return fputs(USAGE, stdout), 0;
    else if (strcmp(a, "--sizes") && strcmp(a, "--ranks") && strcmp(a, "--steps") && strcmp(a, "--repeats") &&
             strcmp(a, "--warmup") && strcmp(a, "--size"))
      return fprintf(stderr, "bench/ns2d: unknown option '%s'\n" USAGE, a), 2;
    else if (!v) return fprintf(stderr, "bench/ns2d: %s needs a value\n" USAGE, a), 2;
    else {
      int ok = 1;
      i++;
      if (strcmp(a, "--sizes") == 0) {
        ok = (o.nsizes = parse_list(v, 32, 8192, o.sizes)) > 0;
        for (int k = 0; ok && k < o.nsizes; k++) ok = o.sizes[k] % 2 == 0;
      } else if (strcmp(a, "--ranks") == 0) ok = (o.nranks = parse_list(v, 2, 256, o.ranks)) > 0;
      else if (strcmp(a, "--steps") == 0) ok = (o.steps = parse_int(v, 1, 10000)) > 0;
      else if (strcmp(a, "--repeats") == 0) ok = (o.repeats = parse_int(v, 1, 1000)) > 0;
      else if (strcmp(a, "--warmup") == 0) ok = (o.warmup = parse_int(v, 0, 10000)) >= 0;
      else ok = (size = parse_int(v, 4, 8192)) > 0 && size % 2 == 0; /* --size, the worker's */
      if (!ok) return fprintf(stderr, "bench/ns2d: bad value '%s' for %s\n" USAGE, v, a), 2;
    }
  }
  if (worker_mode) {
    if (size <= 0) return fprintf(stderr, "bench/ns2d: --worker needs --size\n"), 2;
    return worker(&o, size);
  }
  if (o.quick) o.sizes[0] = 64, o.nsizes = 1, o.steps = 3, o.repeats = 2, o.warmup = 1;

  const char *launcher = bench_launcher();
  /* Debian's OpenBLAS 0.3.21 falls back to SSE3 kernels on newer CPUs (see
   * models/afno_model.c): name the right ones for the training runs. */
  __builtin_cpu_init();
  if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  else if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2")) setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/ns2d: cannot find own path\n"), 1;
  char *summary_text = NULL;
  size_t summary_len = 0;
  if (!(summary = open_memstream(&summary_text, &summary_len)))
    return fprintf(stderr, "bench/ns2d: open_memstream failed\n"), 1;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int mismatch = 0;
  printf("bench/ns2d: pseudo-spectral 2-D Navier-Stokes step (vorticity, IF-RK4, 2/3 dealiasing, Kolmogorov forcing "
         "kf=%d, f64; 20 real 2-D FFTs per step), nu=%g, dt=2/n; median of %d blocks of %d steps after %d warm-up "
         "steps (slowest rank); one core per rank for distmgr and one core for numpy (single-threaded pocketfft, "
         "OMP/OPENBLAS/MKL_NUM_THREADS=1); %ld cores online\n",
         FORCE_K, NU, o.repeats, o.steps, o.warmup, cores);

  const char *py = python_with_numpy();
  if (py) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, THREADS_ENV " timeout 300 %s %s/bench/ns2d_numpy.py --self-check 2>&1", py, SRCDIR);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0) {
      printf("WARNING: the numpy peer's self-check failed (%s %d); its figures are suspect\n",
             WIFEXITED(rc) ? "exit status" : "wait status", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
      mismatch = 1;
    }
  } else {
    printf("SKIP: numpy peer (no python3 that imports numpy: tried $PYTHON, python3, /usr/bin/python3; "
           "Debian: apt-get install python3-numpy); the distmgr/numpy ratios are skipped\n");
  }

  for (int si = 0; si < o.nsizes; si++) {
    int n = o.sizes[si];
    printf("== size %d x %d\n", n, n);
    result one = launch(self, launcher, 1, &o, n);
    if (!one.ok) return fprintf(stderr, "bench/ns2d: the 1-rank run at n = %d failed\n", n), 1;
    result peer = {0, 0, 0, 0}, multi[MAX_LIST];
    if (py && !(peer = numpy_peer(&o, n)).ok) return fprintf(stderr, "bench/ns2d: the numpy peer at n = %d failed\n", n), 1;
    for (int ri = 0; ri < o.nranks; ri++)
      if (!(multi[ri] = launch(self, launcher, o.ranks[ri], &o, n)).ok)
        return fprintf(stderr, "bench/ns2d: the %d-rank run at n = %d failed\n", o.ranks[ri], n), 1;
    if (py) bench_ratio(summary, one.step_ms / peer.step_ms, "target <= 0.5", "ns2d %d distmgr 1-rank step / numpy step", n);
    for (int ri = 0; ri < o.nranks; ri++)
      if (o.ranks[ri] == 2)
        bench_ratio(summary, multi[ri].step_ms / one.step_ms, "target <= 0.6", "ns2d %d 2-rank / 1-rank step", n);
    ADD("info: ns2d %d steps/s: 1 rank %.1f", n, 1e3 / one.step_ms);
    for (int ri = 0; ri < o.nranks; ri++) ADD(", %d ranks %.1f", o.ranks[ri], 1e3 / multi[ri].step_ms);
    if (py) ADD(", numpy %.1f", 1e3 / peer.step_ms);
    ADD("\n");
    for (int ri = 0; ri < o.nranks; ri++)
      if (o.ranks[ri] != 2)
        ADD("info: ns2d %d %d-rank / 1-rank step = %.3f%s\n", n, o.ranks[ri], multi[ri].step_ms / one.step_ms,
            o.ranks[ri] > cores ? " (more ranks than cores here: oversubscribed)" : "");
    /* Same field, same steps: the runs agree to round-off, unless a long
     * run lets the flow's chaos amplify it (then the check says so). */
    double worst = 0;
    if (py) {
      double de = rel(peer.energy, one.energy), dz = rel(peer.enstrophy, one.enstrophy);
      worst = fmax(de, dz);
      ADD("check: ns2d %d numpy vs distmgr 1-rank, energy and enstrophy after the same %d steps: rel diff %.1e, %.1e\n",
          n, o.warmup + o.repeats * o.steps, de, dz);
    }
    ADD("check: ns2d %d distmgr at", n);
    for (int ri = 0; ri < o.nranks; ri++) {
      double de = rel(multi[ri].energy, one.energy), dz = rel(multi[ri].enstrophy, one.enstrophy);
      worst = fmax(worst, fmax(de, dz));
      ADD("%s %d ranks %.1e, %.1e", ri ? ";" : "", o.ranks[ri], de, dz);
    }
    ADD(" (energy and enstrophy rel diff to 1 rank)\n");
    if (worst > CHECK_TOL) {
      ADD("WARNING: ns2d %d: the runs differ by %.1e (> %g) after the same steps from the same field%s\n", n, worst,
          CHECK_TOL, o.quick ? "" : " (a bug, or a long run's chaos amplifying round-off)");
      mismatch = 1;
    }
  }
  fclose(summary);
  fputs(summary_text, stdout);
  free(summary_text);

  if (training_throughput(launcher, o.quick)) return 1;

  if (mismatch && o.quick) return fprintf(stderr, "bench/ns2d: a correctness check failed (see WARNING above)\n"), 1;
  return 0;
}
