/* bench/rpc_path: the CPU cost of a remote call's own path, without the
 * network and without threads. One thread plays both sides of an 8 B echo
 * with the library's internal steps, the messages handed over in memory:
 *
 *   caller  future, call id, in-flight entry, encoded request
 *   worker  header check, body copy (as UCX's callback does), decode, the
 *           registry, the function (dist_rpc_output + memcpy), the answer
 *   caller  header check, body copy, in-flight lookup, decode, completion,
 *           dist_future_free
 *
 * These are the steps of the general layout sent the long way (a message
 * object, a received buffer), the way a large call goes: an 8 B call itself
 * now travels as a tiny message from the stack (lib/rpc/wire.h), which
 * bench/rpc_instructions.sh counts. What UCX adds (two sends and the polls
 * that find them) is not here: raw UCX's own round trip is bench/rpc's "raw
 * default" column. Prints the best of 20 runs of 100,000 calls, in ns per
 * call (bench/RESULTS.md, "bench/rpc"). One process, no MPI.
 *
 * Usage: taskset -c 1 bench/rpc_path (pinned: steadier on a busy VM) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/rpc_internal.h"

static dist_status echo(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)user;
  const dist_tensor *a = &in->args[0];
  dist_tensor t;
  dist_status s = dist_rpc_output(out, a->dtype, a->ndim, a->shape, &t);
  if (!s) memcpy(t.data, a->data, dist_tensor_nbytes(a));
  return s;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The body of message o as the receiving side's callback gets it: copied
 * into a buffer of its own. */
static void *received(const dist__rpc_out *o, dist__rpc_header *h, size_t *len) {
  if (dist__rpc_check_header(&o->h, sizeof o->h, h)) return NULL;
  *len = o->iov[0].length;
  void *body = dist__rpc_buf_get(*len);
  if (body) memcpy(body, o->iov[0].buffer, *len);
  return body;
}

/* One call: returns 0 when the echo came back equal. */
static int one_call(uint64_t id, const dist_tensor *arg) {
  dist_future *f = dist__future_new();
  f->id = id, f->to = 1;
  dist__rpc_msg m;
  dist__rpc_msg_clear(&m);
  m.name = "echo", m.name_len = 4, m.ntensors = 1, m.t[0] = *arg;
  dist__rpc_out *req, *rep;
  if (dist__rpc_out_new(DIST__RPC_REQUEST, id, DIST_SUCCESS, &m, &req)) return 1;
  dist__inflight_add(f);
  /* the worker */
  dist__rpc_header h;
  size_t len;
  void *body = received(req, &h, &len);
  dist__rpc_msg r;
  const dist__rpc_fn_entry *e;
  if (!body || dist__rpc_decode(body, len, &r) || dist__rpc_lookup(r.name, r.name_len, &e)) return 1;
  dist_rpc_outputs outs;
  outs.n = 0;
  dist_rpc_args in = {0, r.ntensors, r.t, r.extra, r.extra_len};
  dist__error_clear();
  if (e->fn(&in, &outs, e->user)) return 1;
  dist__rpc_msg answer;
  dist__rpc_msg_clear(&answer);
  answer.ntensors = outs.n;
  memcpy(answer.t, outs.t, sizeof outs.t[0] * (size_t)outs.n);
  if (dist__rpc_out_new(DIST__RPC_REPLY, h.call_id, DIST_SUCCESS, &answer, &rep)) return 1;
  dist__rpc_outputs_free(&outs);
  dist__rpc_buf_put(body);
  dist__rpc_out_free(req);
  /* the caller again */
  void *back = received(rep, &h, &len);
  dist_future *g = dist__inflight_take(h.call_id);
  dist__rpc_msg a;
  if (!back || !g || dist__rpc_decode(back, len, &a)) return 1;
  dist__future_complete(g, DIST_SUCCESS, NULL, back, &a, NULL);
  dist__future_release(g);
  dist__rpc_out_free(rep);
  const dist_tensor *t = dist_future_output(f, 0);
  int bad = !t || memcmp(t->data, arg->data, 8) != 0;
  dist_future_free(f);
  return bad;
}

int main(void) {
  if (dist_rpc_register("echo", echo, NULL)) return fprintf(stderr, "bench/rpc_path: %s\n", dist_last_error()), 1;
  dist__rpc.size = 2; /* worker1 exists for the messages' checks; nothing is sent */
  double x = 1.5;
  int64_t one = 1;
  dist_tensor arg = dist_tensor_host(&x, DIST_F64, 1, &one);
  const int runs = 20, calls = 100000;
  double best = 1e30;
  uint64_t id = 1;
  for (int run = 0; run < runs; run++) {
    double t0 = now_ns();
    for (int i = 0; i < calls; i++)
      if (one_call(id++, &arg)) return fprintf(stderr, "bench/rpc_path: call %d failed: %s\n", i, dist_last_error()), 1;
    double per = (now_ns() - t0) / calls;
    if (per < best) best = per;
  }
  printf("rpc_path: a call's own path without the network, 8 B echo: %.1f ns per call (best of %d runs of %d)\n", best,
         runs, calls);
  return 0;
}
