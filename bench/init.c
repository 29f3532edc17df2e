/* bench/init: start-up cost of distmgr against bare MPI, side by side, and
 * without MPI (Gloo under torchrun) against torch.distributed's Gloo.
 *
 *   distmgr: dist_manager_initialize() + a 2-level group tree
 *            world -> {tp 2, dp N/2}
 *   MPI:     MPI_Init + the two equivalent MPI_Comm_split calls
 *   distmgr on Gloo: the distmgr worker under torchrun (no MPI call at all)
 *   torch:   init_process_group("gloo") + the same groups with new_group
 *            (bench/gloo_torch.py --init-only, under the same torchrun)
 *
 * MPI can be initialized once per process, so each measurement is its own
 * launch: the driver (run without --worker) starts `$LAUNCHER N bench/init
 * --worker MODE` alternately for each mode, `--reps` times per rank count,
 * and compares medians of the slowest rank's time. A third mode measures
 * distmgr's own work after the application initialized MPI. The Gloo and
 * torch legs go through tests/torchrun-launch.sh, in the same alternation;
 * they are skipped, saying so, in a build without Gloo or without torch.
 *
 * Usage: bench/init [--ranks 2,4] [--reps 9]      (LAUNCHER as for make check) */
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SRCDIR
#define SRCDIR "."
#endif

static double now_us(void) { return bench_now() * 1e6; }

static dist_status tree(void) {
  int w;
  dist_manager_world_size(&w);
  int tp = w % 2 == 0 ? 2 : 1;
  dist_group_node leaves[2] = {{"tp", tp, 0, NULL}, {"dp", w / tp, 0, NULL}};
  dist_group_node root = {"world", 0, 2, leaves};
  dist_status s = dist_group_create_tree(&root);
  if (s != DIST_SUCCESS) fprintf(stderr, "bench/init: tree: %s\n", dist_last_error());
  return s;
}

/* rank 0 prints the line the driver reads; out holds the slowest rank's values. */
static void print_line(int rank, const double out[2]) {
  if (rank == 0) printf("total_us=%.1f groups_us=%.1f\n", out[0], out[1]);
}

/* The slowest rank's total and group times, through MPI. */
static void report(double total, double groups) {
  double out[2] = {total, groups};
  int r;
  bench_max(MPI_COMM_WORLD, out, 2);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  print_line(r, out);
}

/* The same through distmgr, for the mode that makes no MPI call. */
static int report_dist(double total, double groups) {
  double out[2] = {total, groups};
  int64_t two = 2;
  int r;
  dist_tensor t = dist_tensor_host(out, DIST_F64, 1, &two);
  if (dist_all_reduce(NULL, &t, DIST_MAX) != DIST_SUCCESS || dist_manager_rank(&r) != DIST_SUCCESS)
    return fprintf(stderr, "bench/init: %s\n", dist_last_error()), 1;
  print_line(r, out);
  return 0;
}

static int worker(const char *mode) {
  double t0 = now_us();
  if (strcmp(mode, "mpi") == 0) {
    MPI_Init(NULL, NULL);
    double t1 = now_us();
    int r, w;
    MPI_Comm tp, dp;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &w);
    int k = w % 2 == 0 ? 2 : 1;
    MPI_Comm_split(MPI_COMM_WORLD, r / k, r, &tp);
    MPI_Comm_split(MPI_COMM_WORLD, r % k, r, &dp);
    double t2 = now_us();
    report(t2 - t0, t2 - t1);
    MPI_Comm_free(&tp);
    MPI_Comm_free(&dp);
    MPI_Finalize();
  } else if (strcmp(mode, "dist") == 0) {
    if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "%s\n", dist_last_error()), 1;
    if (tree()) MPI_Abort(MPI_COMM_WORLD, 1);
    double t2 = now_us();
    report(t2 - t0, 0);
    dist_manager_finalize();
  } else if (strcmp(mode, "dist-after-mpi") == 0) {
    MPI_Init(NULL, NULL);
    double t1 = now_us();
    if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "%s\n", dist_last_error()), 1;
    if (tree()) MPI_Abort(MPI_COMM_WORLD, 1);
    double t2 = now_us();
    report(t2 - t0, t2 - t1);
    dist_manager_finalize();
    MPI_Finalize();
  } else if (strcmp(mode, "dist-gloo") == 0) { /* under torchrun: no MPI call in this mode */
    if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "%s\n", dist_last_error()), 1;
    double t1 = now_us();
    if (tree()) return 1; /* torchrun's agent then ends the other ranks */
    double t2 = now_us();
    const char *engine = "?";
    dist_coll_backend(NULL, DIST_MEM_HOST, &engine);
    if (strcmp(engine, "mpi") == 0) /* every rank sees the same engine: all leave here */
      return fprintf(stderr, "bench/init: dist-gloo: the host engine is mpi, not gloo or shm\n"), 1;
    if (report_dist(t2 - t0, t2 - t1)) return 1;
    dist_manager_finalize();
  } else {
    fprintf(stderr, "bench/init: unknown worker mode '%s'\n", mode);
    return 2;
  }
  return 0;
}

/* Run one launch, cmd without its redirection; read its "total_us=.. groups_us=.." line. */
static int launch(const char *cmd, double *total, double *groups) {
  char full[16500], line[256];
  snprintf(full, sizeof full, "timeout 120 %s 2>&1", cmd);
  FILE *p = popen(full, "r");
  int found = 0;
  if (!p) return -1;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "total_us=%lf groups_us=%lf", total, groups) == 2) found = 1;
    else fputs(line, stderr);
  int rc = pclose(p);
  return found && rc == 0 ? 0 : -1;
}

/* A worker of this program in MODE on np ranks, started by the launcher prefix. */
static int launch_worker(const char *launcher, int np, const char *self, const char *mode, double *total,
                         double *groups) {
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "%s %d %s --worker %s", launcher, np, self, mode);
  return launch(cmd, total, groups);
}

int main(int argc, char **argv) {
  const char *ranks = "2,4";
  int reps = 9;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--worker") == 0 && i + 1 < argc) return worker(argv[i + 1]);
    if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) ranks = argv[++i];
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else return fprintf(stderr, "usage: %s [--ranks 2,4] [--reps 9]\n", argv[0]), 2;
  }
  if (reps < 1 || reps > 100) return fprintf(stderr, "bench/init: --reps must be 1..100\n"), 2;
  const char *launcher = bench_launcher();
  char self[4096], torchrun[4200], torch_cmd[4400];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/init: cannot find own path\n"), 1;
  int gloo = bench_torchrun(SRCDIR, torchrun, sizeof torchrun) == 0;

  printf("bench/init: median of %d launches each, slowest rank, microseconds (launcher: %s N)\n", reps, launcher);
  if (gloo)
    printf("Gloo: distmgr and torch.distributed (init_process_group + new_group) under %s N\n", torchrun);
  else
    printf("skipped: distmgr on Gloo and torch.distributed's Gloo: %s\n", torchrun);
  printf("%5s %14s %14s %8s | %16s %16s | %14s %14s\n", "ranks", "MPI init+split", "distmgr", "ratio",
         "MPI splits only", "distmgr after MPI", "distmgr Gloo", "torch Gloo");
  char list[64];
  snprintf(list, sizeof list, "%s", ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    double mpi[100], dist[100], split[100], after[100], on_gloo[100], torch[100], g;
    for (int r = 0; r < reps; r++) { /* alternate so drift hits every mode alike */
      if (launch_worker(launcher, np, self, "mpi", &mpi[r], &split[r]) ||
          launch_worker(launcher, np, self, "dist", &dist[r], &g) ||
          launch_worker(launcher, np, self, "dist-after-mpi", &g, &after[r]))
        return fprintf(stderr, "bench/init: a launch at %d ranks failed\n", np), 1;
      if (!gloo) continue;
      snprintf(torch_cmd, sizeof torch_cmd, "%s %d %s %s/bench/gloo_torch.py --init-only", torchrun, np,
               BENCH_PYTHON, SRCDIR);
      if (launch_worker(torchrun, np, self, "dist-gloo", &on_gloo[r], &g) || launch(torch_cmd, &torch[r], &g))
        return fprintf(stderr, "bench/init: a launch under torchrun at %d ranks failed\n", np), 1;
    }
    double m_mpi = bench_median(mpi, reps), m_dist = bench_median(dist, reps), ratio = m_dist / m_mpi;
    char m_gloo[32] = "-", m_torch[32] = "-";
    if (gloo) {
      snprintf(m_gloo, sizeof m_gloo, "%.0f", bench_median(on_gloo, reps));
      snprintf(m_torch, sizeof m_torch, "%.0f", bench_median(torch, reps));
    }
    printf("%5d %14.0f %14.0f %8.3f | %16.0f %16.0f | %14s %14s\n", np, m_mpi, m_dist, ratio,
           bench_median(split, reps), bench_median(after, reps), m_gloo, m_torch);
    bench_ratio(stdout, ratio, "target <= 1.2", "init+tree distmgr/MPI at %d ranks", np);
    if (gloo) {
      double m_g = bench_median(on_gloo, reps);
      bench_ratio(stdout, m_g / m_dist, "no target: start-up without MPI",
                  "init+tree distmgr on Gloo (torchrun)/distmgr on MPI (mpirun) at %d ranks", np);
      bench_ratio(stdout, m_g / bench_median(torch, reps), "no target: torch builds the same groups",
                  "init+tree distmgr on Gloo/torch.distributed gloo at %d ranks", np);
    }
  }
  return 0; /* a missed target is reported in the ratio lines, not as a failure */
}
