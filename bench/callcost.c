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
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPS = 2, MAXR = 64 };
static const char *const op_name[OPS] = {"all_reduce", "all_to_all_v"};

/* One worker's buffers: 4 floats for all-reduce, 16 per rank for all-to-all-v. */
typedef struct bufs {
  int op, calls, P;
  float *x, *y;
  int64_t *sizes;
  int *cnt, *dsp;
} bufs;

/* Microseconds per call of `calls` calls of op, distmgr's if lib, the slowest rank's. */
static double block(const bufs *b, int lib, int calls) {
  dist_tensor t4 = dist_tensor_host(b->x, DIST_F32, 1, (int64_t[1]){4});
  dist_tensor tx = dist_tensor_host(b->x, DIST_F32, 1, (int64_t[1]){16 * (int64_t)b->P});
  dist_tensor ty = dist_tensor_host(b->y, DIST_F32, 1, (int64_t[1]){16 * (int64_t)b->P});
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = bench_now();
  dist_status s = DIST_SUCCESS;
  for (int i = 0; i < calls && !s; i++) {
    if (b->op == 0 && lib) s = dist_all_reduce(NULL, &t4, DIST_SUM);
    else if (b->op == 0) MPI_Allreduce(MPI_IN_PLACE, b->x, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (lib) s = dist_all_to_all_v(NULL, &tx, &ty, 0, b->sizes, b->sizes);
    else MPI_Alltoallv(b->x, b->cnt, b->dsp, MPI_FLOAT, b->y, b->cnt, b->dsp, MPI_FLOAT, MPI_COMM_WORLD);
  }
  if (s) {
    fprintf(stderr, "bench/callcost: %s: %s\n", op_name[b->op], dist_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return bench_slowest(MPI_COMM_WORLD, (bench_now() - t0) / calls * 1e6);
}

/* bench_rounds' block: variant 0 is MPI, 1 distmgr. */
static double round_block(void *ctx, int k) { return block(ctx, k, ((const bufs *)ctx)->calls); }

static int worker(int rounds, int calls) {
  if (dist_manager_initialize() != DIST_SUCCESS) return fprintf(stderr, "bench/callcost: %s\n", dist_last_error()), 1;
  int P = 1, me = 0;
  dist_manager_world_size(&P);
  dist_manager_rank(&me);
  bufs b = {0, calls, P, NULL, NULL, NULL, NULL, NULL};
  b.x = calloc(16 * (size_t)P, sizeof *b.x), b.y = calloc(16 * (size_t)P, sizeof *b.y);
  b.sizes = malloc(sizeof *b.sizes * (size_t)P);
  b.cnt = malloc(sizeof *b.cnt * (size_t)P), b.dsp = malloc(sizeof *b.dsp * (size_t)P);
  for (int r = 0; r < P; r++) b.sizes[r] = b.cnt[r] = 16, b.dsp[r] = 16 * r;
  for (b.op = 0; b.op < OPS; b.op++) {
    double t[2 * MAXR];
    block(&b, 0, calls / 10); /* warm-up */
    block(&b, 1, calls / 10);
    bench_rounds(2, rounds, 0, round_block, &b, t); /* MPI, then distmgr, every round */
    if (me == 0)
      printf("op=%s mpi_us=%.3f dist_us=%.3f\n", op_name[b.op], bench_median(t, rounds), bench_median(t + rounds, rounds));
  }
  free(b.x), free(b.y), free(b.sizes), free(b.cnt), free(b.dsp);
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

  const char *launcher = bench_launcher();
  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/callcost: cannot find own path\n"), 1;
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
          char note[64];
          snprintf(note, sizeof note, "%.3f us extra per call", d - m);
          bench_ratio(stdout, d / m, note, "callcost %s np=%d verify=%d distmgr/MPI", name, np, verify);
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
