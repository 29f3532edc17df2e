/* bench/callcost: what one small collective call costs on top of MPI's own,
 * side by side: dist_all_reduce of 4 floats against MPI_Allreduce, and
 * dist_all_to_all_v of 16 floats per rank against MPI_Alltoallv, with the
 * verification round on (DIST_VERIFY=1, the default) and off. At these
 * sizes the data costs nothing, so the difference is the library's per-call
 * work (argument checks, bookkeeping, the check round).
 *
 * DIST_VERIFY is read at initialize, so each setting is its own launch: the
 * driver (run without --worker) starts `$LAUNCHER N bench/callcost --worker V`
 * per rank count and setting. A worker alternates blocks of MPI and distmgr
 * calls (`--rounds` each) and reports medians of the slowest rank's
 * microseconds per call.
 *
 * Usage: bench/callcost [--ranks 2,4] [--rounds 9] [--calls 20000] [--quick]
 *        (LAUNCHER as for make check) */
#include "config.h" /* DIST_DEFAULT_LAUNCHER */
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OPS = 2, MAXR = 64 };
static const char *const op_name[OPS] = {"all_reduce", "all_to_all_v"};

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Microseconds per call of `calls` calls, the slowest rank's. */
static double block(int op, int lib, int calls, float *x, float *y, int P, const int64_t *sizes, const int *cnt,
                    const int *dsp) {
  dist_tensor t4 = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){4});
  dist_tensor tx = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){16 * (int64_t)P});
  dist_tensor ty = dist_tensor_host(y, DIST_F32, 1, (int64_t[1]){16 * (int64_t)P});
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  dist_status s = DIST_SUCCESS;
  for (int i = 0; i < calls && !s; i++) {
    if (op == 0 && lib) s = dist_all_reduce(NULL, &t4, DIST_SUM);
    else if (op == 0) MPI_Allreduce(MPI_IN_PLACE, x, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (lib) s = dist_all_to_all_v(NULL, &tx, &ty, 0, sizes, sizes);
    else MPI_Alltoallv(x, cnt, dsp, MPI_FLOAT, y, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD);
  }
  if (s) {
    fprintf(stderr, "bench/callcost: %s: %s\n", op_name[op], dist_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double us = (MPI_Wtime() - t0) / calls * 1e6, worst = 0;
  MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

static int worker(int rounds, int calls) {
  if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "bench/callcost: %s\n", dist_last_error()), 1;
  int P = 1, me = 0;
  dist_manager_world_size(&P);
  dist_manager_rank(&me);
  float *x = calloc(16 * (size_t)P, sizeof *x), *y = calloc(16 * (size_t)P, sizeof *y);
  int64_t *sizes = malloc(sizeof *sizes * (size_t)P);
  int *cnt = malloc(sizeof *cnt * (size_t)P), *dsp = malloc(sizeof *dsp * (size_t)P);
  for (int r = 0; r < P; r++) sizes[r] = cnt[r] = 16, dsp[r] = 16 * r;
  for (int op = 0; op < OPS; op++) {
    double mpi[MAXR], lib[MAXR];
    block(op, 0, calls / 10, x, y, P, sizes, cnt, dsp); /* warm-up */
    block(op, 1, calls / 10, x, y, P, sizes, cnt, dsp);
    for (int r = 0; r < rounds; r++) {
      mpi[r] = block(op, 0, calls, x, y, P, sizes, cnt, dsp);
      lib[r] = block(op, 1, calls, x, y, P, sizes, cnt, dsp);
    }
    if (me == 0) printf("op=%s mpi_us=%.3f dist_us=%.3f\n", op_name[op], median(mpi, rounds), median(lib, rounds));
  }
  free(x), free(y), free(sizes), free(cnt), free(dsp);
  return dist_manager_finalize() != DIST_SUCCESS;
}

int main(int argc, char **argv) {
  const char *ranks = "2,4";
  int rounds = 9, calls = 20000, is_worker = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--worker") == 0 && i + 1 < argc) is_worker = 1, setenv("DIST_VERIFY", argv[++i], 1);
    else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) ranks = argv[++i];
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = atoi(argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0) rounds = 3, calls = 2000;
    else return fprintf(stderr, "usage: %s [--ranks 2,4] [--rounds 9] [--calls 20000] [--quick]\n", argv[0]), 2;
  }
  if (rounds < 1 || rounds > MAXR || calls < 10) return fprintf(stderr, "bench/callcost: --rounds 1..64, --calls >= 10\n"), 2;
  if (is_worker) return worker(rounds, calls);

  const char *launcher = getenv("LAUNCHER");
  if (!launcher || !*launcher) launcher = DIST_DEFAULT_LAUNCHER;
  char self[4096]; /* the libtool wrapper re-execs the real binary: launch what we are */
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return fprintf(stderr, "bench/callcost: cannot find own path\n"), 1;
  self[n] = 0;
  printf("bench/callcost: microseconds per call, median of %d blocks of %d calls, slowest rank (launcher: %s N)\n",
         rounds, calls, launcher);
  printf("%-13s %5s %6s %9s %9s %9s %7s\n", "op", "ranks", "verify", "MPI_us", "dist_us", "extra_us", "ratio");
  char list[64];
  snprintf(list, sizeof list, "%s", ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    for (int verify = 1; verify >= 0; verify--) {
      char cmd[4600], line[256], name[32];
      snprintf(cmd, sizeof cmd, "timeout 300 %s %d %s --worker %d --rounds %d --calls %d 2>&1", launcher, np, self, verify,
               rounds, calls);
      FILE *p = popen(cmd, "r");
      if (!p) return fprintf(stderr, "bench/callcost: cannot start %s\n", cmd), 1;
      int found = 0;
      double m, d;
      while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "op=%31s mpi_us=%lf dist_us=%lf", name, &m, &d) == 3) {
          found++;
          printf("%-13s %5d %6d %9.3f %9.3f %9.3f %7.3f\n", name, np, verify, m, d, d - m, d / m);
          printf("ratio: callcost %s np=%d verify=%d distmgr/MPI = %.3f (%.3f us extra per call)\n", name, np, verify,
                 d / m, d - m);
        } else {
          fputs(line, stderr);
        }
      }
      if (pclose(p) != 0 || found != OPS) return fprintf(stderr, "bench/callcost: the launch at %d ranks failed\n", np), 1;
      fflush(stdout);
    }
  }
  return 0;
}
