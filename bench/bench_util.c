/* bench/bench_util: the clock, statistics, alternating blocks and `ratio:`
 * line that the bench programs share (see bench_util.h). */
#include "config.h" /* DIST_DEFAULT_LAUNCHER, HAVE_GLOO */

#include "bench_util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void bench_max(MPI_Comm comm, double *v, int n) {
  if (MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, comm) != MPI_SUCCESS) {
    fprintf(stderr, "bench: MPI_Allreduce of the slowest rank's times failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

double bench_slowest(MPI_Comm comm, double seconds) {
  bench_max(comm, &seconds, 1);
  return seconds;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A copy of n doubles, or exit: statistics run after the timing, where a
 * failed allocation can only end the run. */
static double *copy_of(const double *v, int n) {
  double *s = malloc(sizeof *s * (size_t)(n > 0 ? n : 1));
  if (!s) {
    fprintf(stderr, "bench: out of memory for %d values\n", n);
    exit(1);
  }
  if (n > 0) memcpy(s, v, sizeof *s * (size_t)n);
  return s;
}

double bench_median(const double *v, int n) {
  double *s = copy_of(v, n);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  return m;
}

double bench_paired_ratio(const double *num, const double *den, int n) {
  double *q = copy_of(num, n);
  for (int r = 0; r < n; r++) q[r] /= den[r];
  double m = bench_median(q, n);
  free(q);
  return m;
}

void bench_rounds(int nv, int rounds, int rotate, bench_block_fn block, void *ctx, double *t) {
  for (int r = 0; r < rounds; r++)
    for (int j = 0; j < nv; j++) {
      int k = rotate ? (j + r) % nv : j;
      t[k * rounds + r] = block(ctx, k);
    }
}

void bench_ratio(FILE *out, double value, const char *note, const char *what, ...) {
  va_list ap;
  va_start(ap, what);
  fputs("ratio: ", out);
  vfprintf(out, what, ap);
  fprintf(out, " = %.3f (%s)\n", value, note);
  va_end(ap);
}

const char *bench_launcher(void) {
  const char *l = getenv("LAUNCHER");
  return l && *l ? l : DIST_DEFAULT_LAUNCHER;
}

int bench_self(char *buf, size_t cap) {
  if (cap < 2) return -1;
  ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
  if (n <= 0 || (size_t)n >= cap - 1) return -1;
  buf[n] = 0;
  return 0;
}

int bench_torchrun(const char *srcdir, char *buf, size_t cap) {
#ifdef HAVE_GLOO
  if (system(BENCH_PYTHON " -c 'import torch.distributed.run' >/dev/null 2>&1") != 0) {
    snprintf(buf, cap, BENCH_PYTHON " cannot import torch (torchrun is torch's; Debian: apt-get install python3-torch)");
    return -1;
  }
  int n = snprintf(buf, cap, "sh %s/tests/torchrun-launch.sh", srcdir);
  if (n < 0 || (size_t)n >= cap) return snprintf(buf, cap, "source path too long"), -1;
  return 0;
#else
  (void)srcdir;
  snprintf(buf, cap, "this build has no Gloo (configure found no libgloo-dev)");
  return -1;
#endif
}

int64_t bench_a2a_share(int64_t count, int n, int src, int dst) {
  int64_t weights = (int64_t)n * (n + 1) / 2;
  if (dst < n - 1) return count * (1 + (src + dst) % n) / weights;
  int64_t rest = count;
  for (int d = 0; d < n - 1; d++) rest -= bench_a2a_share(count, n, src, d);
  return rest;
}
