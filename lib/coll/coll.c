/* Reductions, broadcast and barrier on a named group. */
#include <string.h>

#include "coll/coll_internal.h"

/* Reduce n elements of `buf` in place (root < 0: all-reduce, else to root):
 * 16-bit floats go through an f32 copy, avg becomes sum and divide where the
 * backend has no avg. With req, non-blocking (all-reduce only). */
dist_status dist__reduce_buffer(dist__call *c, void *buf, dist_dtype dt, dist_memory mem, size_t n,
                                dist_reduce_op op, int root, dist_request **req) {
  const dist__backend *be = c->be;
  dist__post post;
  dist__post_init(&post, mem);
  if (req) *req = NULL;
  int keeps = root < 0 || root == c->g->rank; /* does this rank receive the result? */
  post.wire = buf;
  post.wire_type = dt;
  post.wire_n = n;
  dist_status s = DIST_SUCCESS;
  dist_dtype wt = dist__wire_type(dt, op);
  if (wt != dt) { /* reduce in the wider type, narrow once at the end */
    s = dist__post_alloc(&post, n * dist_dtype_size(wt), &post.wire);
    if (!s) s = dist__mem_widen(mem, buf, dt, post.wire, n);
    post.wire_type = wt;
    if (keeps) post.cast_to = buf, post.cast_type = dt;
  }
  dist_reduce_op wop = op;
  if (op == DIST_AVG && !be->can_reduce(post.wire_type, DIST_AVG)) {
    wop = DIST_SUM;
    if (keeps) post.divisor = c->g->size;
  }
  if (!s && req) s = dist__request_new(c, req);
  if (wt != dt) s = dist__call_ready(c, s); /* a failed allocation must not strand the others */
  if (s) {
    dist__post_release(&post);
    if (req && *req) dist__request_discard(*req), *req = NULL;
    return s;
  }
  if (req) {
    s = be->all_reduce(c->g, post.wire, post.wire, n, post.wire_type, wop, &(*req)->pending);
    if (s) {
      dist__post_release(&post);
      dist__request_discard(*req);
      *req = NULL;
    } else
      dist__post_move(&(*req)->post, &post);
    return s;
  }
  s = root < 0 ? be->all_reduce(c->g, post.wire, post.wire, n, post.wire_type, wop, NULL)
               : be->reduce(c->g, post.wire, post.wire, n, post.wire_type, wop, root);
  if (s) {
    dist__post_release(&post);
    return s;
  }
  return dist__post_run(&post);
}

/* all-reduce (to_root 0, root ignored) or reduce to `root`; nb: non-blocking. */
static dist_status reduction(const char *what, const char *group, dist_tensor *t, dist_reduce_op op, int to_root,
                             int root, int nb, dist_request **req) {
  dist__call c;
  if (req) *req = NULL;
  DIST_CHECK(dist__call_begin(&c, what, group));
  dist_status s = dist__check_tensor(&c, t, "t");
  if (!s) s = dist__call_backend(&c, t->memory);
  if (!s) s = dist__check_op(&c, t->dtype, op);
  if (!s && to_root) s = dist__check_rank(&c, root, "root");
  if (!s && nb && !req) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the request pointer is NULL", what);
  if (!s) {
    dist__sig_tensor(&c, t, -1);
    c.sig.op = op;
    c.sig.root = to_root ? root : -1;
  }
  DIST_CHECK(dist__call_verify(&c, s));
  if (c.g->size == 1 && !nb) return DIST_SUCCESS; /* one contribution: every op is the identity */
  int ordered = nb && t->memory == DIST_MEM_CUDA; /* enqueue now, track with an event */
  s = dist__reduce_buffer(&c, t->data, t->dtype, t->memory, (size_t)dist_tensor_numel(t), op, to_root ? root : -1,
                          nb && !ordered ? req : NULL);
  return !s && ordered ? dist__request_stream(&c, t->memory, req) : s;
}

dist_status dist_all_reduce(const char *group, dist_tensor *t, dist_reduce_op op) {
  return reduction("dist_all_reduce", group, t, op, 0, 0, 0, NULL);
}

dist_status dist_all_reduce_start(const char *group, dist_tensor *t, dist_reduce_op op, dist_request **req) {
  return reduction("dist_all_reduce_start", group, t, op, 0, 0, 1, req);
}

dist_status dist_reduce(const char *group, dist_tensor *t, dist_reduce_op op, int root) {
  return reduction("dist_reduce", group, t, op, 1, root, 0, NULL);
}

dist_status dist_broadcast(const char *group, dist_tensor *t, int root) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, "dist_broadcast", group));
  dist_status s = dist__check_tensor(&c, t, "t");
  if (!s) s = dist__call_backend(&c, t->memory);
  if (!s) s = dist__check_rank(&c, root, "root");
  if (!s) {
    dist__sig_tensor(&c, t, -1);
    c.sig.root = root;
  }
  DIST_CHECK(dist__call_verify(&c, s));
  return c.be->broadcast(c.g, t->data, (size_t)dist_tensor_numel(t), t->dtype, root);
}

dist_status dist_barrier(const char *group) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, "dist_barrier", group));
  /* The check round is itself a barrier (an all-reduce needs everyone). */
  if (dist__state.settings.verify && c.g->size > 1) return dist__call_verify(&c, DIST_SUCCESS);
  return dist__backend_host(c.g)->barrier(c.g);
}

dist_status dist_reduce_loss(const char *group, double loss, int dst, int average, double *out) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, "dist_reduce_loss", group));
  c.be = dist__backend_host(c.g);
  dist_status s = dist__check_rank(&c, dst, "dst");
  if (!s && c.g->rank == dst && !out) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_reduce_loss: out is NULL on dst");
  c.sig.root = dst;
  c.sig.op = average ? DIST_AVG : DIST_SUM;
  DIST_CHECK(dist__call_verify(&c, s));
  double v = loss;
  DIST_CHECK(c.be->reduce(c.g, &v, &v, 1, DIST_F64, DIST_SUM, dst));
  if (c.g->rank == dst) *out = average ? v / c.g->size : v;
  return DIST_SUCCESS;
}
