/* bench/init: start-up cost of distmgr against bare MPI, side by side.
 *
 *   distmgr: dist_manager_initialize() + a 2-level group tree
 *            world -> {tp 2, dp N/2}
 *   MPI:     MPI_Init + the two equivalent MPI_Comm_split calls
 *
 * MPI can be initialized once per process, so each measurement is its own
 * launch: the driver (run without --worker) starts `$LAUNCHER N bench/init
 * --worker MODE` alternately for both modes, `--reps` times per rank count,
 * and compares medians of the slowest rank's time. A third mode measures
 * distmgr's own work after the application initialized MPI.
 *
 * Usage: bench/init [--ranks 2,4] [--reps 9]      (LAUNCHER as for make check) */
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double now_us(void) { return bench_now() * 1e6; }

static void tree(void) {
  int w;
  dist_manager_world_size(&w);
  int tp = w % 2 == 0 ? 2 : 1;
  dist_group_node leaves[2] = {{"tp", tp, 0, NULL}, {"dp", w / tp, 0, NULL}};
  dist_group_node root = {"world", 0, 2, leaves};
  if (dist_group_create_tree(&root) != DIST_SUCCESS) {
    fprintf(stderr, "bench/init: tree: %s\n", dist_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* Print the slowest rank's value(s) as "key=value" on rank 0. */
static void report(const char *key, double v, const char *key2, double v2) {
  double out[2] = {v, v2};
  int r;
  bench_max(MPI_COMM_WORLD, out, 2);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (r == 0) printf("%s=%.1f %s=%.1f\n", key, out[0], key2, out[1]);
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
    report("total_us", t2 - t0, "groups_us", t2 - t1);
    MPI_Comm_free(&tp);
    MPI_Comm_free(&dp);
    MPI_Finalize();
  } else if (strcmp(mode, "dist") == 0) {
    if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "%s\n", dist_last_error()), 1;
    tree();
    double t2 = now_us();
    report("total_us", t2 - t0, "groups_us", 0);
    dist_manager_finalize();
  } else if (strcmp(mode, "dist-after-mpi") == 0) {
    MPI_Init(NULL, NULL);
    double t1 = now_us();
    if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "%s\n", dist_last_error()), 1;
    tree();
    double t2 = now_us();
    report("total_us", t2 - t0, "groups_us", t2 - t1);
    dist_manager_finalize();
    MPI_Finalize();
  } else {
    fprintf(stderr, "bench/init: unknown worker mode '%s'\n", mode);
    return 2;
  }
  return 0;
}

/* Launch one worker run; read its "total_us=.. groups_us=.." line. */
static int launch(const char *self, const char *launcher, int np, const char *mode, double *total, double *groups) {
  char cmd[1024], line[256];
  snprintf(cmd, sizeof cmd, "timeout 120 %s %d %s --worker %s 2>&1", launcher, np, self, mode);
  FILE *p = popen(cmd, "r");
  int found = 0;
  if (!p) return -1;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "total_us=%lf groups_us=%lf", total, groups) == 2) found = 1;
    else fputs(line, stderr);
  int rc = pclose(p);
  return found && rc == 0 ? 0 : -1;
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
  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/init: cannot find own path\n"), 1;

  printf("bench/init: median of %d launches each, slowest rank, microseconds (launcher: %s N)\n", reps, launcher);
  printf("%5s %14s %14s %8s | %16s %16s\n", "ranks", "MPI init+split", "distmgr", "ratio", "MPI splits only",
         "distmgr after MPI");
  int worst = 0;
  char list[64];
  snprintf(list, sizeof list, "%s", ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    double mpi[100], dist[100], split[100], after[100], g;
    for (int r = 0; r < reps; r++) { /* alternate so drift hits both alike */
      if (launch(self, launcher, np, "mpi", &mpi[r], &split[r]) ||
          launch(self, launcher, np, "dist", &dist[r], &g) ||
          launch(self, launcher, np, "dist-after-mpi", &g, &after[r]))
        return fprintf(stderr, "bench/init: a launch at %d ranks failed\n", np), 1;
    }
    double m_mpi = bench_median(mpi, reps), m_dist = bench_median(dist, reps), ratio = m_dist / m_mpi;
    printf("%5d %14.0f %14.0f %8.3f | %16.0f %16.0f\n", np, m_mpi, m_dist, ratio, bench_median(split, reps),
           bench_median(after, reps));
    bench_ratio(stdout, ratio, "target <= 1.2", "init+tree distmgr/MPI at %d ranks", np);
    worst |= ratio > 1.2;
  }
  (void)worst; /* a missed target is reported in the ratio lines, not as a failure */
  return 0;
}
