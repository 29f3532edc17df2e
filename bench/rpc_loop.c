/* bench/rpc_loop: the distribution of single calls, where bench/rpc gives
 * the mean of blocks. Rank 0 times each of --calls dist_rpc_call_sync(1,
 * "echo", --bytes) + dist_future_free back to back; rank 1's main thread
 * sleeps on a condition variable meanwhile (as in bench/rpc), so only
 * distmgr's threads run there. Prints the median, mean, p90 and p99 in us,
 * and how much of the mean the slow calls add: for calls over 2, 5 and
 * 20 us, their count and (time - median) summed over all calls / calls.
 * A mean far above the median with a large "> 5 us" share is scheduling
 * (a thread woken on a busy core), not per-call work (bench/RESULTS.md,
 * "bench/rpc").
 *
 * Usage: $LAUNCHER 2 bench/rpc_loop [--calls 200000] [--bytes 8] */
#include "bench_util.h"
#include <distmgr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stopped;

static dist_status echo(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)user;
  const dist_tensor *a = &in->args[0];
  dist_tensor t;
  dist_status s = dist_rpc_output(out, a->dtype, a->ndim, a->shape, &t);
  if (!s && dist_tensor_nbytes(a)) memcpy(t.data, a->data, dist_tensor_nbytes(a));
  return s;
}

static dist_status stop(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)in, (void)out, (void)user;
  pthread_mutex_lock(&mu);
  stopped = 1;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  return DIST_SUCCESS;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int fail(const char *what) {
  fprintf(stderr, "bench/rpc_loop: %s: %s\n", what, dist_last_error());
  return 1;
}

/* Rank 0 could not finish: rank 1 would wait for "stop" for ever. */
static int abort_job(const char *what) {
  fail(what);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

/* Rank 0: the calls, each timed; the table. */
static int caller(int calls, size_t bytes) {
  double *t = malloc(sizeof *t * (size_t)calls);
  unsigned char *arg = calloc(1, bytes ? bytes : 1);
  if (!t || !arg) return abort_job("out of memory");
  int64_t shape[1] = {(int64_t)bytes};
  dist_tensor a = dist_tensor_host(arg, DIST_U8, 1, shape);
  for (int i = 0; i < calls; i++) {
    dist_future *f = NULL;
    double t0 = bench_now();
    if (dist_rpc_call_sync(1, "echo", &a, 1, NULL, 0, &f)) return abort_job("dist_rpc_call_sync(echo)");
    dist_future_free(f);
    t[i] = (bench_now() - t0) * 1e6;
  }
  double sum = 0, med = bench_median(t, calls);
  const double over[3] = {2, 5, 20};
  double extra[3] = {0};
  int count[3] = {0};
  for (int i = 0; i < calls; i++) {
    sum += t[i];
    for (int k = 2; k >= 0; k--)
      if (t[i] > over[k]) {
        count[k]++, extra[k] += t[i] - med;
        break;
      }
  }
  qsort(t, (size_t)calls, sizeof *t, cmp);
  printf("rpc_loop: %d calls of %zu B: median %.3f us, mean %.3f, p90 %.3f, p99 %.3f\n", calls, bytes, med,
         sum / calls, t[calls * 9 / 10], t[calls * 99 / 100]);
  printf("rpc_loop: calls over 2-5 us %d (+%.3f us a call), 5-20 us %d (+%.3f), over 20 us %d (+%.3f)\n", count[0],
         extra[0] / calls, count[1], extra[1] / calls, count[2], extra[2] / calls);
  dist_future *f = NULL;
  if (dist_rpc_call_sync(1, "stop", NULL, 0, NULL, 0, &f)) return abort_job("dist_rpc_call_sync(stop)");
  dist_future_free(f);
  free(t), free(arg);
  return 0;
}

int main(int argc, char **argv) {
  int calls = 200000;
  long bytes = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--bytes")) bytes = atol(argv[i + 1]);
    else return fprintf(stderr, "usage: %s [--calls 200000] [--bytes 8]\n", argv[0]), 2;
  }
  if (calls < 100 || bytes < 0 || bytes > (1L << 26))
    return fprintf(stderr, "bench/rpc_loop: --calls >= 100, --bytes 0..64 MiB\n"), 2;
  int rank = 0, size = 0;
  if (dist_manager_initialize()) return fail("dist_manager_initialize");
  dist_manager_rank(&rank);
  dist_manager_world_size(&size);
  if (size != 2) return fprintf(stderr, "bench/rpc_loop runs on 2 ranks\n"), 1;
  if (dist_rpc_register("echo", echo, NULL) || dist_rpc_register("stop", stop, NULL) || dist_rpc_init())
    return fail("dist_rpc_init");
  int rc = 0;
  if (rank == 0) {
    rc = caller(calls, (size_t)bytes);
  } else {
    pthread_mutex_lock(&mu);
    while (!stopped) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
  }
  if (dist_rpc_shutdown()) rc = fail("dist_rpc_shutdown");
  dist_manager_finalize();
  return rc;
}
