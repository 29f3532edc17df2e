/* bench/collectives: all-reduce and all-to-all-v through distmgr against the
 * same MPI calls made directly, on the same buffers, side by side in one run.
 *
 *   all_reduce:   f32 sum in place       dist_all_reduce   vs MPI_Allreduce(MPI_IN_PLACE)
 *   all_to_all_v: f32 along dim 0,       dist_all_to_all_v vs MPI_Alltoallv
 *                 uneven per-destination counts (the same on both sides)
 *
 * MPI runs on the communicator distmgr gives for "world" (dist_group_comm), so
 * the difference is distmgr's own overhead. Sizes are per-rank buffer bytes.
 *
 * The driver (run without --worker) starts `$LAUNCHER N bench/collectives
 * --worker ...` twice per rank count: with DIST_VERIFY=1 (distmgr's default:
 * one small agreement all-reduce before each collective) and DIST_VERIFY=0.
 * Each launch measures MPI and distmgr in alternating blocks, because the
 * machine is shared and oversubscribed: a drift in load then hits both sides
 * alike. A block's time is the slowest rank's; the times shown are each
 * side's median over rounds, the ratio the median of the per-round ratios.
 *
 * The Gloo leg, after those two launches at each rank count: bench/gloo
 * (distmgr without MPI, the public API only) and bench/gloo_torch.py
 * (torch.distributed's Gloo all-reduce) under torchrun, one launch each, over
 * the same sizes; its rows set them beside the direct MPI times of the
 * DIST_VERIFY=1 launch (MPI's do not depend on it; bench/gloo runs with the
 * default, 1). bench/gloo runs twice: with DIST_SHM_DATA=off (Gloo's TCP) and,
 * from 2 ranks, with DIST_SHM_DATA=auto (the shared-memory engine, one node).
 * Skipped, saying so, in a build without Gloo or without torch.
 *
 * Usage: bench/collectives [--ranks 2,4] [--min-bytes 4096] [--max-bytes 67108864]
 *                          [--rounds 5] [--quick]          (LAUNCHER as for make check)
 * --quick (the CI smoke run): sizes up to 1 MiB and 3 rounds; the Gloo leg
 * only at the first two sizes from 64 KiB (each launch imports torch).
 * Exits non-zero only on errors (a failed call, a wrong result), never on a
 * missed target: those are reported in the `ratio:` lines. */
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024LL
#define MIB (1024LL * 1024LL)
#define TARGET_FROM_BYTES (64 * KIB) /* the target applies from this size up */
#define TARGET_NOTE "target <= 1.05"
#define BLOCK_SECONDS 0.02 /* long enough for the clock and scheduler noise */
#define MAX_ROUNDS 50
#define MAX_SIZES 16 /* 4 B to 1 GiB, x4 */

#ifndef SRCDIR
#define SRCDIR "."
#endif
#ifndef BUILDDIR
#define BUILDDIR "."
#endif

typedef struct options {
  const char *ranks;
  long long min_bytes, max_bytes;
  int rounds, quick, verify;
} options;

enum { OP_ALL_REDUCE, OP_ALL_TO_ALL_V, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"all_reduce", "all_to_all_v"};

/* One worker's buffers and the layout for the current size. */
typedef struct bench {
  MPI_Comm comm; /* distmgr's world communicator */
  int rank, size;
  float *send, *recv;
  int64_t capacity; /* floats in each buffer */
  int64_t count;    /* floats per rank at the current size */
  /* all-to-all-v: the same counts for both sides */
  int64_t *send_sizes, *recv_sizes;
  int *send_counts, *send_displs, *recv_counts, *recv_displs;
  int64_t recv_total;
  dist_tensor t_send, t_recv, t_reduce;
} bench;

/* ---- worker --------------------------------------------------------------- */

static void fail(const bench *b, const char *what, const char *detail) {
  fprintf(stderr, "bench/collectives: rank %d: %s: %s\n", b->rank, what, detail);
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks may be waiting in a collective */
  exit(1);
}

static void check_dist(const bench *b, dist_status s, const char *what) {
  if (s == DIST_SUCCESS) return;
  char msg[512];
  snprintf(msg, sizeof msg, "%s (%s)", dist_status_string(s), dist_last_error());
  fail(b, what, msg);
}

static void check_mpi(const bench *b, int rc, const char *what) {
  if (rc != MPI_SUCCESS) fail(b, what, "MPI error");
}

/* Offset in rank src's send buffer of its chunk for rank dst. */
static int64_t a2a_offset(int64_t count, int n, int src, int dst) {
  int64_t off = 0;
  for (int d = 0; d < dst; d++) off += bench_a2a_share(count, n, src, d);
  return off;
}

/* Set the counts and tensors for `bytes` per rank. */
static void set_size(bench *b, long long bytes) {
  int n = b->size;
  b->count = bytes / (int64_t)sizeof(float);
  b->recv_total = 0;
  for (int r = 0; r < n; r++) {
    b->send_sizes[r] = bench_a2a_share(b->count, n, b->rank, r);
    b->recv_sizes[r] = bench_a2a_share(b->count, n, r, b->rank);
    b->send_counts[r] = (int)b->send_sizes[r];
    b->recv_counts[r] = (int)b->recv_sizes[r];
    b->send_displs[r] = r ? b->send_displs[r - 1] + b->send_counts[r - 1] : 0;
    b->recv_displs[r] = (int)b->recv_total;
    b->recv_total += b->recv_sizes[r];
  }
  if (b->recv_total > b->capacity) fail(b, "set_size", "receive buffer too small");
  int64_t n_send = b->count, n_recv = b->recv_total;
  b->t_send = dist_tensor_host(b->send, DIST_F32, 1, &n_send);
  b->t_recv = dist_tensor_host(b->recv, DIST_F32, 1, &n_recv);
  b->t_reduce = b->t_send; /* all-reduce works in place on send */
}

static void run_mpi(bench *b, int op) {
  if (op == OP_ALL_REDUCE)
    check_mpi(b, MPI_Allreduce(MPI_IN_PLACE, b->send, (int)b->count, MPI_FLOAT, MPI_SUM, b->comm), "MPI_Allreduce");
  else
    check_mpi(b,
              MPI_Alltoallv(b->send, b->send_counts, b->send_displs, MPI_FLOAT, b->recv, b->recv_counts,
                            b->recv_displs, MPI_FLOAT, b->comm),
              "MPI_Alltoallv");
}

static void run_dist(bench *b, int op) {
  if (op == OP_ALL_REDUCE)
    check_dist(b, dist_all_reduce(NULL, &b->t_reduce, DIST_SUM), "dist_all_reduce");
  else
    check_dist(b, dist_all_to_all_v(NULL, &b->t_send, &b->t_recv, 0, b->send_sizes, b->recv_sizes),
               "dist_all_to_all_v");
}

/* Small integers, so sums are exact in f32 and results compare with ==. */
static float pattern(int rank, int64_t i) { return (float)((i + 7 * (int64_t)rank) % 251); }

/* distmgr's sum must equal MPI's on the same input. */
static void verify_all_reduce(bench *b) {
  for (int64_t i = 0; i < b->count; i++) b->send[i] = b->recv[i] = pattern(b->rank, i);
  check_mpi(b, MPI_Allreduce(MPI_IN_PLACE, b->recv, (int)b->count, MPI_FLOAT, MPI_SUM, b->comm), "MPI_Allreduce");
  run_dist(b, OP_ALL_REDUCE);
  for (int64_t i = 0; i < b->count; i++)
    if (b->send[i] != b->recv[i]) {
      char msg[128];
      snprintf(msg, sizeof msg, "element %lld is %g, MPI gives %g", (long long)i, b->send[i], b->recv[i]);
      fail(b, "dist_all_reduce result", msg);
    }
  /* Repeated in-place sums would grow to inf; zeros keep timing on plain data. */
  memset(b->send, 0, (size_t)b->count * sizeof(float));
}

/* Each received chunk must be the sender's chunk for me (what MPI defines). */
static void verify_all_to_all_v(bench *b) {
  for (int64_t i = 0; i < b->count; i++) b->send[i] = pattern(b->rank, i);
  memset(b->recv, 0xff, (size_t)b->recv_total * sizeof(float)); /* NaNs: nothing stale passes */
  run_dist(b, OP_ALL_TO_ALL_V);
  for (int src = 0; src < b->size; src++) {
    int64_t from = a2a_offset(b->count, b->size, src, b->rank);
    for (int64_t j = 0; j < b->recv_sizes[src]; j++)
      if (b->recv[b->recv_displs[src] + j] != pattern(src, from + j)) {
        char msg[128];
        snprintf(msg, sizeof msg, "element %lld from rank %d is wrong", (long long)j, src);
        fail(b, "dist_all_to_all_v result", msg);
      }
  }
}

/* Seconds per call over `iters` calls, the slowest rank's. */
static double time_block(bench *b, int op, int dist, int iters) {
  MPI_Barrier(b->comm);
  double t0 = bench_now();
  for (int i = 0; i < iters; i++)
    if (dist) run_dist(b, op);
    else run_mpi(b, op);
  return bench_slowest(b->comm, (bench_now() - t0) / iters);
}

/* bench_rounds' block: variant 0 is MPI, 1 distmgr. */
typedef struct block_arg {
  bench *b;
  int op, iters;
} block_arg;

static double block(void *ctx, int k) {
  block_arg *a = ctx;
  return time_block(a->b, a->op, k, a->iters);
}

/* One size: median seconds per call of each side, and the median over rounds
 * of distmgr's block time over the adjacent MPI block's (bench_paired_ratio). */
typedef struct timing {
  double mpi, dist, ratio;
} timing;

static timing measure(bench *b, int op, int rounds) {
  for (int w = 0; w < 2; w++) run_mpi(b, op), run_dist(b, op); /* warm-up */
  double one = time_block(b, op, 0, 1), other = time_block(b, op, 1, 1);
  if (other > one) one = other;
  int iters = one > 0 ? (int)(BLOCK_SECONDS / one) + 1 : 1000;
  if (iters > 1000) iters = 1000;
  double t[2 * MAX_ROUNDS];
  block_arg a = {b, op, iters};
  bench_rounds(2, rounds, 1, block, &a, t); /* the order swaps each round: no side always goes first */
  const double *mpi = t, *dist = t + rounds;
  return (timing){bench_median(mpi, rounds), bench_median(dist, rounds), bench_paired_ratio(dist, mpi, rounds)};
}

/* Bus bandwidth in GB/s as nccl-tests defines it. */
static double busbw(int op, long long bytes, double seconds, int n) {
  double factor = op == OP_ALL_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
  return seconds > 0 ? bytes / seconds * factor / 1e9 : 0;
}

static void alloc_bench(bench *b, long long max_bytes) {
  check_dist(b, dist_group_comm(NULL, &b->comm), "dist_group_comm");
  MPI_Comm_rank(b->comm, &b->rank);
  MPI_Comm_size(b->comm, &b->size);
  int n = b->size;
  /* the last destination's remainders can push a receive over count by < n*n */
  b->capacity = max_bytes / (int64_t)sizeof(float) + (int64_t)n * n;
  b->send = malloc((size_t)b->capacity * sizeof(float));
  b->recv = malloc((size_t)b->capacity * sizeof(float));
  b->send_sizes = malloc(n * sizeof(int64_t));
  b->recv_sizes = malloc(n * sizeof(int64_t));
  b->send_counts = malloc(n * sizeof(int));
  b->send_displs = malloc(n * sizeof(int));
  b->recv_counts = malloc(n * sizeof(int));
  b->recv_displs = malloc(n * sizeof(int));
  if (!b->send || !b->recv || !b->send_sizes || !b->recv_sizes || !b->send_counts || !b->send_displs ||
      !b->recv_counts || !b->recv_displs)
    fail(b, "malloc", "out of memory");
}

static void free_bench(bench *b) {
  free(b->send), free(b->recv), free(b->send_sizes), free(b->recv_sizes);
  free(b->send_counts), free(b->send_displs), free(b->recv_counts), free(b->recv_displs);
}

/* One op over all sizes: a table row per size on rank 0, then a "worst" line
 * (worst ratio from TARGET_FROM_BYTES up) for the driver. */
static void bench_op(bench *b, int op, const options *o) {
  double worst = 0;
  for (long long bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 4) {
    set_size(b, bytes);
    if (op == OP_ALL_REDUCE) verify_all_reduce(b);
    else verify_all_to_all_v(b);
    timing t = measure(b, op, o->rounds);
    if (bytes >= TARGET_FROM_BYTES && t.ratio > worst) worst = t.ratio;
    if (b->rank == 0) {
      printf("%-13s %3d %6d %10lld %12.1f %12.1f %9.3f %9.3f %7.3f\n", op_names[op], b->size, o->verify, bytes,
             t.mpi * 1e6, t.dist * 1e6, busbw(op, bytes, t.mpi, b->size), busbw(op, bytes, t.dist, b->size), t.ratio);
      fflush(stdout);
    }
  }
  if (b->rank == 0 && worst > 0) printf("worst %s np=%d verify=%d %.4f\n", op_names[op], b->size, o->verify, worst);
  fflush(stdout);
}

static int worker(const options *o) {
  /* Set here rather than through the launcher's environment, so it reaches
   * every rank under any launcher; distmgr reads it once, at initialize. */
  setenv("DIST_VERIFY", o->verify ? "1" : "0", 1);
  bench b = {0};
  b.rank = -1;
  check_dist(&b, dist_manager_initialize(), "dist_manager_initialize");
  alloc_bench(&b, o->max_bytes);
  for (int op = 0; op < OP_COUNT; op++) bench_op(&b, op, o);
  free_bench(&b);
  check_dist(&b, dist_manager_finalize(), "dist_manager_finalize");
  return 0;
}

/* ---- driver --------------------------------------------------------------- */

typedef struct worst_line {
  char op[32];
  int np, verify;
  double ratio;
} worst_line;

/* Microseconds per call by op and size index (bytes = min_bytes * 4^k); 0: not measured. */
typedef double us_table[OP_COUNT][MAX_SIZES];

static int op_index(const char *name) {
  for (int op = 0; op < OP_COUNT; op++)
    if (strcmp(name, op_names[op]) == 0) return op;
  return -1;
}

static int size_index(const options *o, long long bytes) {
  int k = 0;
  for (long long b = o->min_bytes; b <= o->max_bytes && k < MAX_SIZES; b *= 4, k++)
    if (b == bytes) return k;
  return -1;
}

/* Launch one worker run, pass its table through, collect its "worst" lines
 * and, from the DIST_VERIFY=1 run, its direct MPI times (for the Gloo leg). */
static int launch(const char *self, const char *launcher, int np, const options *o, worst_line *w, int *nw,
                  int max_w, us_table mpi_us) {
  char cmd[8192], line[512];
  int limit = o->quick ? 120 : 1800; /* a hang must end the run, not stall CI */
  int len = snprintf(cmd, sizeof cmd,
                     "timeout %d %s %d %s --worker --verify %d --min-bytes %lld --max-bytes %lld --rounds %d 2>&1", limit,
                     launcher, np, self, o->verify, o->min_bytes, o->max_bytes, o->rounds);
  if (len < 0 || len >= (int)sizeof cmd) return -1;
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  while (fgets(line, sizeof line, p)) {
    worst_line x;
    long long bytes;
    double us;
    int op, k;
    if (sscanf(line, "worst %31s np=%d verify=%d %lf", x.op, &x.np, &x.verify, &x.ratio) == 4) {
      if (*nw < max_w) w[(*nw)++] = x;
      continue;
    }
    /* a table row as bench_op prints it: op np verify bytes MPI_us ... */
    if (sscanf(line, "%31s %d %d %lld %lf", x.op, &x.np, &x.verify, &bytes, &us) == 5 && x.verify == 1 &&
        (op = op_index(x.op)) >= 0 && (k = size_index(o, bytes)) >= 0)
      mpi_us[op][k] = us;
    fputs(line, stdout);
    fflush(stdout);
  }
  return pclose(p) == 0 ? 0 : -1;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--ranks 2,4] [--min-bytes 4096] [--max-bytes 67108864] [--rounds 5] [--quick]\n"
          "  --quick: sizes up to 1 MiB, 3 rounds (CI smoke run)\n",
          argv0);
}

/* Parse options; returns 1 for a worker, 0 for the driver, -1 on error. */
static int parse(int argc, char **argv, options *o) {
  int is_worker = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--worker") == 0) is_worker = 1;
    else if (strcmp(a, "--quick") == 0) o->quick = 1;
    else if (!v) return -1;
    else if (strcmp(a, "--ranks") == 0) o->ranks = v, i++;
    else if (strcmp(a, "--min-bytes") == 0) o->min_bytes = atoll(v), i++;
    else if (strcmp(a, "--max-bytes") == 0) o->max_bytes = atoll(v), i++;
    else if (strcmp(a, "--rounds") == 0) o->rounds = atoi(v), i++;
    else if (strcmp(a, "--verify") == 0) o->verify = atoi(v), i++;
    else return -1;
  }
  if (o->quick) {
    if (o->max_bytes > MIB) o->max_bytes = MIB;
    if (o->rounds > 3) o->rounds = 3;
  }
  /* f32 elements; MPI counts are int */
  if (o->min_bytes < 4 || o->min_bytes % 4 || o->max_bytes < o->min_bytes || o->max_bytes > INT_MAX / 2)
    return fprintf(stderr, "bench/collectives: need 4 <= --min-bytes <= --max-bytes <= 1 GiB, multiples of 4\n"), -1;
  if (o->rounds < 1 || o->rounds > MAX_ROUNDS)
    return fprintf(stderr, "bench/collectives: --rounds must be 1..%d\n", MAX_ROUNDS), -1;
  return is_worker;
}

static void print_ratios(const worst_line *w, int nw) {
  for (int i = 0; i < nw; i++)
    bench_ratio(stdout, w[i].ratio, TARGET_NOTE, "%s distmgr/MPI np=%d verify=%d worst >=%lldKiB", w[i].op, w[i].np,
                w[i].verify, TARGET_FROM_BYTES / KIB);
}

/* ---- the Gloo leg ---------------------------------------------------------- */

/* The worst ratios from TARGET_FROM_BYTES up at one rank count; 0: none measured. */
typedef struct gloo_worst {
  int np;
  double vs_mpi[OP_COUNT], ar_vs_torch, shm_vs_mpi[OP_COUNT], shm_vs_gloo[OP_COUNT];
} gloo_worst;

/* Run cmd under torchrun; fill t from its "OP BYTES US" lines, the rest to stderr. */
static int run_timed(const char *cmd, const options *o, int limit, us_table t) {
  char full[8400], line[512], name[32];
  long long bytes;
  double us;
  int op, k;
  snprintf(full, sizeof full, "timeout -k 5 %d %s 2>&1", limit, cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "%31s %lld %lf", name, &bytes, &us) == 3 && (op = op_index(name)) >= 0 &&
        (k = size_index(o, bytes)) >= 0)
      t[op][k] = us;
    else if (strncmp(line, "engine ", 7) != 0 && strncmp(line, "init_s ", 7) != 0)
      fputs(line, stderr);
  return pclose(p) == 0 ? 0 : -1;
}

static void cell(char *buf, size_t cap, const char *fmt, double v) {
  if (v > 0) snprintf(buf, cap, fmt, v);
  else snprintf(buf, cap, "-");
}

/* bench/gloo and torch's all-reduce under torchrun at np ranks, over the sizes
 * from gmin to gmax (on the MPI run's grid); rows beside mpi_us, worst ratios into gw. */
static int gloo_leg(const char *torchrun, int np, const options *o, const us_table mpi_us, gloo_worst *gw) {
  long long gmin = o->min_bytes, gmax = o->max_bytes;
  if (o->quick) { /* each launch costs seconds of torchrun and torch imports: few sizes */
    while (gmin < TARGET_FROM_BYTES && gmin * 4 <= gmax) gmin *= 4;
    if (gmax > gmin * 4) gmax = gmin * 4;
  }
  int limit = o->quick ? 120 : 1800;
  char args[128], cmd[8192];
  us_table gloo = {{0}}, shm = {{0}}, torch = {{0}};
  snprintf(args, sizeof args, "--min-bytes %lld --max-bytes %lld --rounds %d", gmin, gmax, o->rounds);
  snprintf(cmd, sizeof cmd, "env DIST_SHM_DATA=off %s %d %s/bench/gloo %s", torchrun, np, BUILDDIR, args);
  if (run_timed(cmd, o, limit, gloo)) return fprintf(stderr, "bench/collectives: bench/gloo at %d ranks failed\n", np), -1;
  /* The same without MPI, through the shared-memory engine (one node, DIST_SHM_DATA=auto). */
  snprintf(cmd, sizeof cmd, "env DIST_SHM_DATA=auto %s %d %s/bench/gloo %s", torchrun, np, BUILDDIR, args);
  if (np > 1 && run_timed(cmd, o, limit, shm))
    return fprintf(stderr, "bench/collectives: bench/gloo (shm) at %d ranks failed\n", np), -1;
  snprintf(cmd, sizeof cmd, "%s %d %s %s/bench/gloo_torch.py %s", torchrun, np, BENCH_PYTHON, SRCDIR, args);
  if (run_timed(cmd, o, limit, torch))
    return fprintf(stderr, "bench/collectives: bench/gloo_torch.py at %d ranks failed\n", np), -1;

  *gw = (gloo_worst){np, {0, 0}, 0, {0, 0}, {0, 0}};
  printf("%-13s %3s %6s %10s %12s %12s %12s %12s %9s %10s %8s %9s\n", "gloo leg", "np", "", "bytes", "MPI_us",
         "dist_gloo_us", "torch_us", "dist_shm_us", "gloo/MPI", "gloo/torch", "shm/MPI", "shm/gloo");
  for (int op = 0; op < OP_COUNT; op++)
    for (long long bytes = gmin; bytes <= gmax; bytes *= 4) {
      int k = size_index(o, bytes);
      double g = k >= 0 ? gloo[op][k] : 0, m = k >= 0 ? mpi_us[op][k] : 0, t = k >= 0 ? torch[op][k] : 0;
      double h = k >= 0 ? shm[op][k] : 0;
      if (g <= 0) continue;
      double vs_mpi = m > 0 ? g / m : 0, vs_torch = t > 0 ? g / t : 0, h_mpi = h > 0 && m > 0 ? h / m : 0,
             h_gloo = h > 0 ? h / g : 0;
      if (bytes >= TARGET_FROM_BYTES) {
        if (vs_mpi > gw->vs_mpi[op]) gw->vs_mpi[op] = vs_mpi;
        if (vs_torch > gw->ar_vs_torch) gw->ar_vs_torch = vs_torch;
        if (h_mpi > gw->shm_vs_mpi[op]) gw->shm_vs_mpi[op] = h_mpi;
        if (h_gloo > gw->shm_vs_gloo[op]) gw->shm_vs_gloo[op] = h_gloo;
      }
      char c_mpi[32], c_torch[32], c_shm[32], r_mpi[32], r_torch[32], r_hm[32], r_hg[32];
      cell(c_mpi, sizeof c_mpi, "%.1f", m), cell(c_torch, sizeof c_torch, "%.1f", t), cell(c_shm, sizeof c_shm, "%.1f", h);
      cell(r_mpi, sizeof r_mpi, "%.3f", vs_mpi), cell(r_torch, sizeof r_torch, "%.3f", vs_torch);
      cell(r_hm, sizeof r_hm, "%.3f", h_mpi), cell(r_hg, sizeof r_hg, "%.3f", h_gloo);
      printf("%-13s %3d %6s %10lld %12s %12.1f %12s %12s %9s %10s %8s %9s\n", op_names[op], np, "", bytes, c_mpi, g,
             c_torch, c_shm, r_mpi, r_torch, r_hm, r_hg);
    }
  fflush(stdout);
  return 0;
}

static void print_gloo_ratios(const gloo_worst *gw, int n) {
  for (int i = 0; i < n; i++) {
    for (int op = 0; op < OP_COUNT; op++)
      if (gw[i].vs_mpi[op] > 0)
        bench_ratio(stdout, gw[i].vs_mpi[op], "no target: MPI's shared memory against Gloo's TCP loopback",
                    "gloo %s distmgr-on-Gloo/MPI np=%d worst >=%lldKiB", op_names[op], gw[i].np,
                    TARGET_FROM_BYTES / KIB);
    if (gw[i].ar_vs_torch > 0)
      bench_ratio(stdout, gw[i].ar_vs_torch, "target <= 1.0",
                  "gloo all_reduce distmgr-on-Gloo/torch-on-Gloo np=%d worst >=%lldKiB", gw[i].np,
                  TARGET_FROM_BYTES / KIB);
    for (int op = 0; op < OP_COUNT; op++) {
      if (gw[i].shm_vs_gloo[op] > 0)
        bench_ratio(stdout, gw[i].shm_vs_gloo[op], "target <= 0.5",
                    "shm %s distmgr-on-shm/distmgr-on-Gloo np=%d worst >=%lldKiB", op_names[op], gw[i].np,
                    TARGET_FROM_BYTES / KIB);
      if (gw[i].shm_vs_mpi[op] > 0)
        bench_ratio(stdout, gw[i].shm_vs_mpi[op], "target <= 2.0",
                    "shm %s distmgr-on-shm/MPI np=%d worst >=%lldKiB", op_names[op], gw[i].np, TARGET_FROM_BYTES / KIB);
    }
  }
}

int main(int argc, char **argv) {
  options o = {"2,4", 4 * KIB, 64 * MIB, 5, 0, 1};
  int mode = parse(argc, argv, &o);
  if (mode < 0) return usage(argv[0]), 2;
  if (mode == 1) return worker(&o);

  const char *launcher = bench_launcher();
  char self[4096], torchrun[4200];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/collectives: cannot find own path\n"), 1;
  int gloo = bench_torchrun(SRCDIR, torchrun, sizeof torchrun) == 0;

  printf("bench/collectives: f32, bytes per rank; %d rounds of alternating MPI/distmgr blocks, slowest rank;\n"
         "times: median per side; ratio: median of distmgr/MPI over adjacent blocks\n"
         "(launcher: %s N; busbw as nccl-tests; verify = DIST_VERIFY)\n",
         o.rounds, launcher);
  if (gloo)
    printf("gloo leg: bench/gloo (distmgr on Gloo) and bench/gloo_torch.py (torch.distributed gloo) under %s N,\n"
           "each the median of its own blocks; MPI_us: the direct MPI time above (verify 1)\n",
           torchrun);
  else
    printf("skipped: the gloo leg (distmgr on Gloo, torch.distributed gloo): %s\n", torchrun);
  printf("%-13s %3s %6s %10s %12s %12s %9s %9s %7s\n", "op", "np", "verify", "bytes", "MPI_us", "distmgr_us",
         "MPI_GB/s", "dist_GB/s", "ratio");
  worst_line w[64];
  gloo_worst gw[16];
  int nw = 0, ngw = 0;
  char list[128];
  snprintf(list, sizeof list, "%s", o.ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    us_table mpi_us = {{0}};
    if (np < 1) return fprintf(stderr, "bench/collectives: bad rank count '%s'\n", tok), 2;
    for (o.verify = 1; o.verify >= 0; o.verify--)
      if (launch(self, launcher, np, &o, w, &nw, 64, mpi_us))
        return fprintf(stderr, "bench/collectives: the launch at %d ranks, DIST_VERIFY=%d failed\n", np, o.verify), 1;
    o.verify = 1;
    if (gloo && ngw < 16 && gloo_leg(torchrun, np, &o, mpi_us, &gw[ngw++])) return 1;
  }
  print_ratios(w, nw); /* a missed target is reported here, not as a failure */
  print_gloo_ratios(gw, ngw);
  return 0;
}
