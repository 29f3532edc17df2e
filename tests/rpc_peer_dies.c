/* A worker that dies: run under a bare launcher (tests/torchrun.sh), the
 * last rank leaves without a word after dist_rpc_init; every other rank's
 * call to it fails within DIST_TIMEOUT with a message naming it, and calls
 * among the living still work. Prints one "survived: ..." line per live
 * rank, exits 0 there (without a shutdown, which the dead rank cannot join).
 * RPC_PEER_DIES_WARM=1 uses every endpoint first. RPC_PEER_DIES_IN_CALL=1:
 * the last rank dies while it serves the others' calls ("die"), which are
 * then in flight, not made after the death. */
#include <distmgr.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The living meet before they exit (a rank that exits closes its
 * connections, which its peers would see as its death): each tells every
 * other live rank it is done, and waits to hear as much from them. */
static atomic_int done_heard;
static dist_status done(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)in, (void)out, (void)u;
  atomic_fetch_add(&done_heard, 1);
  return DIST_SUCCESS;
}

/* Every caller's "die" is in flight by the time the first one ends the process. */
static dist_status die(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)in, (void)out, (void)u;
  struct timespec nap = {0, 500 * 1000 * 1000};
  nanosleep(&nap, NULL);
  _exit(0);
}

static dist_status echo(const dist_rpc_args *in, dist_rpc_outputs *out, void *u) {
  (void)u;
  dist_tensor t;
  dist_status s = dist_rpc_output(out, in->args[0].dtype, in->args[0].ndim, in->args[0].shape, &t);
  if (!s) memcpy(t.data, in->args[0].data, dist_tensor_nbytes(&t));
  return s;
}

int main(void) {
  int r, w;
  if (dist_manager_initialize() || dist_manager_rank(&r) || dist_manager_world_size(&w) ||
      dist_rpc_register("echo", echo, NULL) || dist_rpc_register("done", done, NULL) ||
      dist_rpc_register("die", die, NULL) || dist_rpc_init())
    return fprintf(stderr, "rpc_peer_dies: %s\n", dist_last_error()), 1;
  /* RPC_PEER_DIES_WARM=1: every endpoint in use before the death (shared
   * memory on one node then notices nothing: the call ends at DIST_TIMEOUT). */
  for (int to = 0; getenv("RPC_PEER_DIES_WARM") && to < w; to++) {
    double y = 0;
    int64_t n1 = 1;
    dist_future *g = NULL;
    dist_tensor b = dist_tensor_host(&y, DIST_F64, 1, &n1);
    if (dist_rpc_call_sync(to, "echo", &b, 1, NULL, 0, &g)) return fprintf(stderr, "warm-up: %s\n", dist_last_error()), 1;
    dist_future_free(g);
  }
  if (dist_rpc_barrier()) return fprintf(stderr, "rpc_peer_dies: barrier: %s\n", dist_last_error()), 1;
  int in_call = getenv("RPC_PEER_DIES_IN_CALL") != NULL;
  if (r == w - 1) { /* gone: no finalize, no shutdown */
    if (!in_call) _exit(0);
    for (;;) pause(); /* its executors serve "die" */
  }
  struct timespec nap = {0, 300 * 1000 * 1000};
  if (!in_call) nanosleep(&nap, NULL);
  double x = r;
  int64_t one = 1;
  dist_tensor a = dist_tensor_host(&x, DIST_F64, 1, &one);
  dist_future *f = NULL;
  time_t t0 = time(NULL);
  dist_status s = dist_rpc_call_sync(w - 1, in_call ? "die" : "echo", &a, 1, NULL, 0, &f);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", dist_last_error());
  dist_future_free(f);
  if (s != DIST_ERR_ABORTED && s != DIST_ERR_TIMEOUT)
    return fprintf(stderr, "rank %d: the call to the dead worker gave %d: %s\n", r, s, msg), 1;
  char dead[32];
  snprintf(dead, sizeof dead, "worker%d", w - 1);
  if (!strstr(msg, dead)) return fprintf(stderr, "rank %d: the message does not name %s: %s\n", r, dead, msg), 1;
  /* the living still answer */
  int to = (r + 1) % (w - 1);
  if (dist_rpc_call_sync(to, "echo", &a, 1, NULL, 0, &f) || *(const double *)dist_future_output(f, 0)->data != x)
    return fprintf(stderr, "rank %d: a call to worker%d after the death: %s\n", r, to, dist_last_error()), 1;
  dist_future_free(f);
  printf("survived: rank %d, after %lld s: %s\n", r, (long long)(time(NULL) - t0), msg);
  fflush(stdout);
  /* A "done" can fail only once it was delivered (its receiver leaves only
   * after hearing from everyone), so its outcome is not looked at. */
  for (int to = 0; to < w - 1; to++) {
    if (to == r) continue;
    (void)dist_rpc_call_sync(to, "done", NULL, 0, NULL, 0, &f);
    dist_future_free(f);
  }
  while (atomic_load(&done_heard) < w - 2) nanosleep(&(struct timespec){0, 1000000}, NULL);
  fflush(stdout);
  _exit(0); /* the world has a dead member: no collective finalize */
}
