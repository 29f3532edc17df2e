/* bench/gloo: distmgr's host collectives on whichever engine the launch
 * gives (Gloo under torchrun, DIST_HOST_ENGINE=gloo; MPI under mpirun),
 * through the public API only. bench/collectives runs it under torchrun for
 * its Gloo leg, beside MPI and torch.distributed's Gloo (bench/gloo_torch.py);
 * by hand: `sh tests/torchrun-launch.sh 2 bench/gloo`.
 *
 *   bench/gloo [--min-bytes N] [--max-bytes N] [--rounds R]
 *
 * Prints "engine NAME", "init_s T" (dist_manager_initialize, slowest rank)
 * and one line per op and size: "OP BYTES US" (microseconds per call, the
 * median over R blocks of about 20 ms of the slowest rank's time). Sizes are
 * per rank, N, 4N, ... as bench/collectives'; all-to-all-v splits them
 * unevenly as it does (bench_a2a_share). The slowest rank's time comes from a
 * distmgr all-reduce, so no MPI call is made here. */
#include <distmgr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static int rank, size;

static double slowest(double t) {
  int64_t one = 1;
  dist_tensor x = dist_tensor_host(&t, DIST_F64, 1, &one);
  if (dist_all_reduce(NULL, &x, DIST_MAX)) fprintf(stderr, "bench/gloo: %s\n", dist_last_error()), exit(1);
  return t;
}

typedef struct op {
  const char *name;
  dist_tensor a, b;
  int64_t send[64], recv[64];
} op;

static void call(op *o) {
  dist_status s = !strcmp(o->name, "all_reduce") ? dist_all_reduce(NULL, &o->a, DIST_SUM)
                                                 : dist_all_to_all_v(NULL, &o->a, &o->b, 0, o->send, o->recv);
  if (s) fprintf(stderr, "bench/gloo: %s: %s\n", o->name, dist_last_error()), exit(1);
}

/* Microseconds per call: calls per block sized to ~20 ms (agreed on rank 0's
 * estimate), R blocks, the median of the slowest rank's times. */
static double time_op(op *o, int rounds) {
  for (int i = 0; i < 3; i++) call(o);
  double t0 = bench_now();
  call(o);
  double one = slowest(bench_now() - t0);
  int64_t n = one > 0 ? (int64_t)(0.02 / one) : 1000, cnt = 1;
  if (n < 1) n = 1;
  if (n > 100000) n = 100000;
  dist_tensor nt = dist_tensor_host(&n, DIST_I64, 1, &cnt);
  if (dist_broadcast(NULL, &nt, 0)) exit(1);
  double *t = malloc(sizeof *t * (size_t)rounds);
  for (int r = 0; r < rounds; r++) {
    double s = bench_now();
    for (int64_t i = 0; i < n; i++) call(o);
    t[r] = slowest(bench_now() - s) / (double)n;
  }
  double m = bench_median(t, rounds);
  free(t);
  return m * 1e6;
}

int main(int argc, char **argv) {
  long min_bytes = 4096, max_bytes = 4 << 20;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--min-bytes")) min_bytes = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-bytes")) max_bytes = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
  }
  double t0 = bench_now();
  if (dist_manager_initialize()) return fprintf(stderr, "bench/gloo: %s\n", dist_last_error()), 1;
  double init = bench_now() - t0;
  dist_manager_rank(&rank);
  dist_manager_world_size(&size);
  init = slowest(init);
  const char *engine = "?";
  dist_coll_backend(NULL, DIST_MEM_HOST, &engine);
  if (size > 64) return fprintf(stderr, "bench/gloo: at most 64 ranks\n"), 1;
  if (!rank) printf("engine %s\ninit_s %.4f\n", engine, init);
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    int64_t n = bytes / 4;
    float *a = calloc((size_t)n + 1, 4), *b = calloc((size_t)(2 * n) + 64, 4);
    for (int64_t i = 0; i < n; i++) a[i] = (float)(i % 7);
    op ar = {"all_reduce", dist_tensor_host(a, DIST_F32, 1, &n), {0}, {0}, {0}};
    double us = time_op(&ar, rounds);
    if (!rank) printf("all_reduce %ld %.2f\n", bytes, us);
    /* all-to-all-v: bench/collectives' uneven split, so its MPI times compare */
    op av = {"all_to_all_v", {0}, {0}, {0}, {0}};
    int64_t st = 0, rt = 0;
    for (int d = 0; d < size; d++) av.send[d] = bench_a2a_share(n, size, rank, d), st += av.send[d];
    for (int s = 0; s < size; s++) av.recv[s] = bench_a2a_share(n, size, s, rank), rt += av.recv[s];
    av.a = dist_tensor_host(a, DIST_F32, 1, &st);
    av.b = dist_tensor_host(b, DIST_F32, 1, &rt);
    us = time_op(&av, rounds);
    if (!rank) printf("all_to_all_v %ld %.2f\n", bytes, us);
    free(a), free(b);
  }
  fflush(stdout);
  return dist_manager_finalize() != DIST_SUCCESS;
}
