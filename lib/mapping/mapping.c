/* Split shapes and the model-parallel mapping pairs built on the collectives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_internal.h"

dist_status dist_compute_split_shapes(int64_t size, int n, int64_t *sizes) {
  if (n <= 0 || size < 0 || !sizes)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_compute_split_shapes: size %lld into %d chunks%s",
                       (long long)size, n, sizes ? "" : " with a NULL output");
  int64_t chunk = size / n + (size % n != 0); /* ceil(size/n); size + n - 1 would overflow near INT64_MAX */
  /* ceil chunks leave the last one non-empty only if (n-1)*chunk < size */
  if ((int64_t)(n - 1) * chunk < size || n == 1) {
    for (int i = 0; i < n - 1; i++) sizes[i] = chunk;
    sizes[n - 1] = size - (int64_t)(n - 1) * chunk;
  } else {
    chunk = size / n;
    for (int i = 0; i < n - 1; i++) sizes[i] = chunk;
    sizes[n - 1] = size - (int64_t)(n - 1) * chunk;
  }
  return DIST_SUCCESS;
}

/* A rank whose own check failed (s) still joins the collective `r` with a
 * NULL tensor, so every rank fails its agreement round instead of hanging;
 * it then reports its own message, not the collective's. */
static _Thread_local char failed_msg[512];
static dist_status keep_own(dist_status s) {
  if (s) snprintf(failed_msg, sizeof failed_msg, "%s", dist_last_error());
  return s;
}
static dist_status joined(dist_status s, dist_status r) { return s ? dist__error(s, "%s", failed_msg) : r; }

/* Local start: group, tensors, same memory and dtype (no communication).
 * Messages name the tensors as the call does (in/out, or grad_out/grad_in
 * for a backward, `what` ending in "_backward"). */
static dist_status local_begin(dist__call *c, const char *what, const char *group, const dist_tensor *in,
                               const dist_tensor *out) {
  size_t n = strlen(what);
  int bwd = n > 9 && !strcmp(what + n - 9, "_backward");
  DIST_CHECK(dist__call_begin(c, what, group));
  DIST_CHECK(dist__check_tensor(c, in, bwd ? "grad_out" : "in"));
  DIST_CHECK(dist__check_tensor(c, out, bwd ? "grad_in" : "out"));
  return dist__check_same_memory(c, in, out);
}

static dist_status copy_tensor(const dist__call *c, const dist_tensor *in, dist_tensor *out) {
  DIST_CHECK(dist__check_shape_along(c, out, "out", in, -1, 0));
  size_t b = dist_tensor_nbytes(in);
  return dist__mem_copy2d(in->memory, out->data, b, in->data, b, b, 1);
}

/* out = the extent [off, off + len) of `full` along dim. */
static dist_status take_chunk(const dist__call *c, const dist_tensor *full, int dim, int64_t off, int64_t len,
                              dist_tensor *out) {
  DIST_CHECK(dist__check_shape_along(c, out, "out", full, dim, len));
  int64_t outer, inner;
  dist__outer_inner(full, dim, &outer, &inner);
  size_t es = dist_dtype_size(full->dtype), w = (size_t)(len * inner) * es;
  return dist__mem_copy2d(full->memory, out->data, w, (const char *)full->data + (size_t)(off * inner) * es,
                          (size_t)(full->shape[dim] * inner) * es, w, (size_t)outer);
}

/* sizes[] of `group` for splitting `n` (compute_split_shapes), or NULL and an error. */
static dist_status split_sizes(const dist__call *c, int64_t n, int64_t **out) {
  *out = malloc(sizeof(int64_t) * (size_t)c->g->size);
  if (!*out) return dist__error(DIST_ERR_NO_MEMORY, "%s: sizes", c->what);
  return dist_compute_split_shapes(n, c->g->size, *out);
}

dist_status dist_copy_to_parallel_region(const char *group, const dist_tensor *in, dist_tensor *out) {
  dist__call c;
  DIST_CHECK(local_begin(&c, "dist_copy_to_parallel_region", group, in, out));
  return copy_tensor(&c, in, out);
}

dist_status dist_copy_to_parallel_region_backward(const char *group, const dist_tensor *grad_out,
                                                  dist_tensor *grad_in) {
  dist__call c;
  dist_status s = local_begin(&c, "dist_copy_to_parallel_region_backward", group, grad_out, grad_in);
  if (!s) s = copy_tensor(&c, grad_out, grad_in);
  keep_own(s);
  return joined(s, dist_all_reduce(group, s ? NULL : grad_in, DIST_SUM));
}

dist_status dist_reduce_from_parallel_region(const char *group, const dist_tensor *in, dist_tensor *out) {
  dist__call c;
  dist_status s = local_begin(&c, "dist_reduce_from_parallel_region", group, in, out);
  if (!s) s = copy_tensor(&c, in, out);
  keep_own(s);
  return joined(s, dist_all_reduce(group, s ? NULL : out, DIST_SUM));
}

dist_status dist_reduce_from_parallel_region_backward(const char *group, const dist_tensor *grad_out,
                                                      dist_tensor *grad_in) {
  dist__call c;
  DIST_CHECK(local_begin(&c, "dist_reduce_from_parallel_region_backward", group, grad_out, grad_in));
  return copy_tensor(&c, grad_out, grad_in);
}

dist_status dist_scatter_to_parallel_region(const char *group, const dist_tensor *in, int dim, dist_tensor *out) {
  dist__call c;
  int64_t *sz = NULL;
  DIST_CHECK(local_begin(&c, "dist_scatter_to_parallel_region", group, in, out));
  dist_status s = dist__check_dim(&c, in, dim, "in");
  if (!s) s = split_sizes(&c, in->shape[dim], &sz);
  int64_t off = 0;
  for (int r = 0; !s && r < c.g->rank; r++) off += sz[r];
  if (!s) s = take_chunk(&c, in, dim, off, sz[c.g->rank], out);
  free(sz);
  return s;
}

dist_status dist_scatter_to_parallel_region_backward(const char *group, const dist_tensor *grad_out, int dim,
                                                     dist_tensor *grad_in) {
  dist__call c;
  int64_t *sz = NULL;
  dist_status s = local_begin(&c, "dist_scatter_to_parallel_region_backward", group, grad_out, grad_in);
  if (s == DIST_ERR_UNKNOWN_GROUP || s == DIST_ERR_NOT_MEMBER || s == DIST_ERR_NOT_INITIALIZED) return s;
  if (!s) s = dist__check_dim(&c, grad_in, dim, "grad_in");
  if (!s) s = split_sizes(&c, grad_in->shape[dim], &sz);
  keep_own(s);
  dist_status r = joined(s, dist_all_gather_v(group, s ? NULL : grad_out, grad_in, dim, sz));
  free(sz);
  return r;
}

dist_status dist_gather_from_parallel_region(const char *group, const dist_tensor *in, int dim,
                                             const int64_t *sizes, dist_tensor *out) {
  return dist_all_gather_v(group, in, out, dim, sizes);
}

dist_status dist_gather_from_parallel_region_backward(const char *group, const dist_tensor *grad_out, int dim,
                                                      const int64_t *sizes, dist_tensor *grad_in) {
  dist__call c;
  DIST_CHECK(local_begin(&c, "dist_gather_from_parallel_region_backward", group, grad_out, grad_in));
  DIST_CHECK(dist__check_dim(&c, grad_out, dim, "grad_out"));
  int64_t off = 0, total = 0;
  if (sizes) {
    DIST_CHECK(dist__check_sizes(&c, sizes, "sizes", &total));
    for (int r = 0; r < c.g->rank; r++) off += sizes[r];
  } else
    total = grad_out->shape[dim];
  if (total != grad_out->shape[dim])
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: sizes add up to %lld but 'grad_out' has extent %lld along dim %d",
                       c.what, (long long)total, (long long)grad_out->shape[dim], dim);
  int64_t mine = sizes ? sizes[c.g->rank] : grad_out->shape[dim] / c.g->size;
  if (!sizes && grad_out->shape[dim] % c.g->size)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: extent %lld along dim %d does not divide by %d (pass sizes)",
                       c.what, (long long)grad_out->shape[dim], dim, c.g->size);
  if (!sizes) off = c.g->rank * mine;
  return take_chunk(&c, grad_out, dim, off, mine, grad_in);
}

dist_status dist_all_gather_v_backward(const char *group, const dist_tensor *grad_out, dist_tensor *grad_in, int dim,
                                       const int64_t *sizes) {
  return dist_reduce_scatter_v(group, grad_out, grad_in, dim, sizes, DIST_SUM);
}

dist_status dist_gather_v_backward(const char *group, const dist_tensor *grad_out, dist_tensor *grad_in, int dim,
                                   const int64_t *sizes, int dst) {
  return dist_scatter_v(group, grad_out, grad_in, dim, sizes, dst);
}

dist_status dist_scatter_v_backward(const char *group, const dist_tensor *grad_out, dist_tensor *grad_in, int dim,
                                    const int64_t *sizes, int src) {
  return dist_gather_v(group, grad_out, grad_in, dim, sizes, src);
}
