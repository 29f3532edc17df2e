/* Indexed all-to-all-v and the distributed transpose, with their backwards. */
#include <stdlib.h>
#include <string.h>

#include "coll/coll_internal.h"

/* ---- indexed all-to-all-v -------------------------------------------------------- */

/* Checks shared by both directions: `src` is the tensor indexed (forward
 * input / backward output), `x` the exchanged one (forward output /
 * backward input) with extent sum(recv_counts) along dim. */
static dist_status indexed_checks(dist__call *c, const dist_tensor *src, const char *src_name, const dist_tensor *x,
                                  const char *x_name, int dim, const int64_t *idx, const int64_t *sc,
                                  const int64_t *rc, int64_t *nsend) {
  dist_status s = dist__check_tensor(c, src, src_name);
  if (!s) s = dist__check_tensor(c, x, x_name);
  if (!s) s = dist__check_same_memory(c, src, x);
  if (!s) s = dist__call_backend(c, src->memory);
  if (!s) s = dist__check_dim(c, src, dim, src_name);
  if (!s && (!sc || !rc))
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s is NULL", c->what, sc ? "recv_counts" : "send_counts");
  int64_t nrecv = 0;
  if (!s) s = dist__check_sizes(c, sc, "send_counts", nsend);
  if (!s) s = dist__check_sizes(c, rc, "recv_counts", &nrecv);
  if (!s && sc[c->g->rank] != rc[c->g->rank])
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: send_counts[%d] = %lld but recv_counts[%d] = %lld (what I send myself)",
                    c->what, c->g->rank, (long long)sc[c->g->rank], c->g->rank, (long long)rc[c->g->rank]);
  if (!s) { /* the rows selected to send, before reading that many indices */
    dist_tensor sel = *src;
    sel.shape[dim] = *nsend;
    if (dist__tensor_span(&sel) < 0)
      s = dist__error(DIST_ERR_INVALID_ARGUMENT,
                      "%s: send_counts add up to %lld slices of '%s' along dim %d, whose size overflows int64 bytes",
                      c->what, (long long)*nsend, src_name, dim);
  }
  if (!s && *nsend && !idx) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: indices is NULL", c->what);
  for (int64_t k = 0; !s && k < *nsend; k++)
    if (idx[k] < 0 || idx[k] >= src->shape[dim])
      s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: indices[%lld] = %lld is out of range [0, %lld) along dim %d",
                      c->what, (long long)k, (long long)idx[k], (long long)src->shape[dim], dim);
  if (!s) s = dist__check_shape_along(c, x, x_name, src, dim, nrecv);
  if (!s) {
    dist__sig_tensor(c, src, dim);
    dist__sig_exchange(c, sc, rc);
  }
  return s;
}

/* Indices in the tensors' memory space (device copy for CUDA). */
static dist_status indices_in(dist_memory mem, const int64_t *idx, int64_t n, const int64_t **out, void **owned) {
  *owned = NULL;
  if (mem == DIST_MEM_HOST) {
    *out = idx;
    return DIST_SUCCESS;
  }
  DIST_CHECK(dist__mem_alloc(mem, (size_t)n * sizeof *idx, owned));
  *out = *owned;
  return dist__mem_upload_copy(mem, *owned, idx, (size_t)n * sizeof *idx); /* caller may reuse idx at once */
}

dist_status dist_indexed_all_to_all_v(const char *group, const dist_tensor *in, int dim, const int64_t *indices,
                                      const int64_t *send_counts, const int64_t *recv_counts, dist_tensor *out) {
  dist__call c;
  int64_t nsend = 0;
  DIST_CHECK(dist__call_begin(&c, "dist_indexed_all_to_all_v", group));
  DIST_CHECK(dist__call_verify(&c, indexed_checks(&c, in, "in", out, "out", dim, indices, send_counts, recv_counts,
                                                  &nsend)));
  dist_tensor sel = *in;
  sel.shape[dim] = nsend;
  int64_t outer, inner;
  dist__outer_inner(in, dim, &outer, &inner);
  const int64_t *didx;
  void *owned = NULL;
  dist_status s = dist__check_engine_count(&c, &sel, "the selected rows");
  if (!s) s = dist__check_engine_count(&c, out, "out");
  sel.data = NULL;
  if (!s) s = dist__mem_alloc(in->memory, dist_tensor_nbytes(&sel), &sel.data);
  if (!s) s = indices_in(in->memory, indices, nsend, &didx, &owned);
  if (!s)
    s = dist__mem_index_select(in->memory, sel.data, in->data, dist_dtype_size(in->dtype), outer, in->shape[dim],
                               inner, didx, nsend);
  s = dist__call_ready(&c, s);
  if (!s) s = dist__all_to_all_dims(&c, &sel, dim, send_counts, out, dim, recv_counts, NULL);
  dist__mem_free(in->memory, owned);
  dist__mem_free(in->memory, sel.data);
  return s;
}

dist_status dist_indexed_all_to_all_v_backward(const char *group, const dist_tensor *grad_out, int dim,
                                               const int64_t *indices, const int64_t *send_counts,
                                               const int64_t *recv_counts, dist_tensor *grad_in) {
  dist__call c;
  int64_t nsend = 0;
  DIST_CHECK(dist__call_begin(&c, "dist_indexed_all_to_all_v_backward", group));
  DIST_CHECK(dist__call_verify(&c, indexed_checks(&c, grad_in, "grad_in", grad_out, "grad_out", dim, indices,
                                                  send_counts, recv_counts, &nsend)));
  dist_memory mem = grad_in->memory;
  dist__post scratch; /* only its scratch buffers are used */
  dist__post_init(&scratch, mem);
  dist_tensor back = *grad_in; /* what I once sent, returned: extent nsend along dim */
  back.shape[dim] = nsend;
  int64_t outer, inner;
  dist__outer_inner(grad_in, dim, &outer, &inner);
  size_t n_back = (size_t)dist_tensor_numel(&back), n_in = (size_t)dist_tensor_numel(grad_in);
  int is16 = dist__dtype_is16(grad_in->dtype); /* accumulate in f32 */
  const int64_t *didx;
  void *owned = NULL, *acc = grad_in->data, *addend;
  dist_status s = dist__check_engine_count(&c, grad_out, "grad_out");
  if (!s) s = dist__check_engine_count(&c, &back, "grad_in's rows sent");
  if (!s) s = dist__post_alloc(&scratch, dist_tensor_nbytes(&back), &back.data);
  s = dist__call_ready(&c, s);
  if (!s) s = dist__all_to_all_dims(&c, grad_out, dim, recv_counts, &back, dim, send_counts, NULL);
  addend = back.data;
  if (!s && is16) { /* accumulate duplicates in f32, round once */
    s = dist__post_alloc(&scratch, n_in * sizeof(float), &acc);
    if (!s) s = dist__post_alloc(&scratch, n_back * sizeof(float), &addend);
    if (!s) s = dist__mem_widen(mem, back.data, back.dtype, addend, n_back);
  }
  if (!s) s = dist__mem_zero(mem, acc, n_in * (is16 ? sizeof(float) : dist_dtype_size(grad_in->dtype)));
  if (!s) s = indices_in(mem, indices, nsend, &didx, &owned);
  if (!s)
    s = dist__mem_index_add(mem, acc, addend, is16 ? DIST_F32 : grad_in->dtype, outer, grad_in->shape[dim], inner,
                            didx, nsend);
  if (!s && is16) s = dist__mem_narrow(mem, acc, grad_in->dtype, grad_in->data, n_in);
  dist__mem_free(mem, owned);
  dist__post_release(&scratch);
  return s;
}

/* ---- distributed transpose --------------------------------------------------------- */

/* `x` holds the full extent of split_dim and this rank's chunk of cat_dim;
 * `y` this rank's chunk of split_dim and the full extent of cat_dim.
 * forward: x -> y; backward: y -> x. */
static dist_status transpose(const char *what, const char *group, const dist_tensor *x, const char *xn,
                             const dist_tensor *y, const char *yn, int dim0, int dim1, const int64_t *split,
                             const int64_t *cat, int forward) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, what, group));
  int P = c.g->size, me = c.g->rank;
  int64_t *sp = NULL, *ct = NULL, total = 0, n0 = 0;
  dist_status s = dist__check_tensor(&c, x, xn);
  if (!s) s = dist__check_tensor(&c, y, yn);
  if (!s) s = dist__check_same_memory(&c, x, y);
  if (!s) s = dist__call_backend(&c, x->memory);
  if (!s) s = dist__check_dim(&c, x, dim0, xn);
  if (!s) s = dist__check_dim(&c, x, dim1, xn);
  if (!s && dim0 == dim1)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: dim0 and dim1 are both %d; a transpose needs two dimensions", what,
                    dim0);
  if (!s && !(sp = malloc(sizeof *sp * 2 * (size_t)P))) s = dist__error(DIST_ERR_NO_MEMORY, "%s: sizes", what);
  if (!s) {
    ct = sp + P;
    n0 = x->shape[dim0];
    if (split) memcpy(sp, split, sizeof *sp * (size_t)P);
    else s = dist_compute_split_shapes(n0, P, sp);
    for (int r = 0; r < P; r++) ct[r] = cat ? cat[r] : x->shape[dim1];
  }
  if (!s) s = dist__check_sizes(&c, sp, "split_sizes", &total);
  if (!s && total != n0)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: split_sizes add up to %lld but '%s' has extent %lld along dim0 = %d",
                    what, (long long)total, xn, (long long)n0, dim0);
  if (!s) s = dist__check_sizes(&c, ct, cat ? "cat_sizes" : "the ranks' dim1 extents", &total);
  if (!s && ct[me] != x->shape[dim1])
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: cat_sizes[%d] = %lld but '%s' has extent %lld along dim1 = %d", what,
                    me, (long long)ct[me], xn, (long long)x->shape[dim1], dim1);
  if (!s) {
    dist_tensor want = *x;
    want.shape[dim0] = sp[me];
    want.shape[dim1] = total;
    s = dist__check_shape_along(&c, y, yn, &want, -1, 0);
  }
  if (!s) {
    dist__sig_tensor(&c, x, cat ? dim1 : -1); /* without cat_sizes all dim1 extents are equal */
    c.sig.aux = dim0;
    dist__sig_sizes(&c, sp);
    if (cat) dist__sig_sizes(&c, cat);
  }
  if (!s) s = dist__check_engine_count(&c, x, xn);
  if (!s) s = dist__check_engine_count(&c, y, yn);
  s = dist__call_verify(&c, s);
  if (!s && forward) s = dist__all_to_all_dims(&c, x, dim0, sp, (dist_tensor *)y, dim1, ct, NULL);
  if (!s && !forward) s = dist__all_to_all_dims(&c, y, dim1, ct, (dist_tensor *)x, dim0, sp, NULL);
  free(sp);
  return s;
}

dist_status dist_distributed_transpose(const char *group, const dist_tensor *in, int dim0, int dim1,
                                       const int64_t *split_sizes, const int64_t *cat_sizes, dist_tensor *out) {
  return transpose("dist_distributed_transpose", group, in, "in", out, "out", dim0, dim1, split_sizes, cat_sizes, 1);
}

dist_status dist_distributed_transpose_backward(const char *group, const dist_tensor *grad_out, int dim0, int dim1,
                                                const int64_t *split_sizes, const int64_t *cat_sizes,
                                                dist_tensor *grad_in) {
  return transpose("dist_distributed_transpose_backward", group, grad_in, "grad_in", grad_out, "grad_out", dim0, dim1,
                   split_sizes, cat_sizes, 0);
}
