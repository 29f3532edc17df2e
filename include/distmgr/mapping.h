/* Model-parallel mappings: forward/backward pairs.
 *
 * C has no autograd: a model calls a mapping's forward in its forward pass
 * and the matching _backward with the gradient of the forward's output in its
 * backward pass. Every backward is the adjoint of its forward:
 * sum over the group of <fwd(x), y> equals sum of <x, bwd(y)>.
 *
 * All functions are collective over the caller's copy of `group` (NULL =
 * world), take host or CUDA tensors (in and out in the same memory) and work
 * with uneven splits along any dimension. `out` must be allocated by the
 * caller with the shape stated; a wrong shape is an error naming the expected
 * one. Inputs and outputs must not overlap unless stated. */
#ifndef DISTMGR_MAPPING_H
#define DISTMGR_MAPPING_H

#include "distmgr/coll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Split `size` into n chunks as PhysicsNeMo does: chunks of ceil(size/n) with
 * the remainder last; if that leaves a chunk empty, chunks of floor(size/n)
 * with the remainder added to the last. 10/4 -> 3,3,3,1; 9/4 -> 2,2,2,3.
 * Writes n entries. Local. */
dist_status dist_compute_split_shapes(int64_t size, int n, int64_t *sizes);

/* copy_to: forward identity (out = in), backward all-reduce sum. */
dist_status dist_copy_to_parallel_region(const char *group, const dist_tensor *in, dist_tensor *out);
dist_status dist_copy_to_parallel_region_backward(const char *group, const dist_tensor *grad_out,
                                                  dist_tensor *grad_in);

/* reduce_from: forward all-reduce sum, backward identity. */
dist_status dist_reduce_from_parallel_region(const char *group, const dist_tensor *in, dist_tensor *out);
dist_status dist_reduce_from_parallel_region_backward(const char *group, const dist_tensor *grad_out,
                                                      dist_tensor *grad_in);

/* scatter_to: forward keeps this rank's chunk of dim (split by
 * dist_compute_split_shapes); backward all-gathers the chunks. */
dist_status dist_scatter_to_parallel_region(const char *group, const dist_tensor *in, int dim, dist_tensor *out);
dist_status dist_scatter_to_parallel_region_backward(const char *group, const dist_tensor *grad_out, int dim,
                                                     dist_tensor *grad_in);

/* gather_from: forward all-gathers chunks of sizes[r] along dim (NULL =
 * equal); backward keeps this rank's chunk. */
dist_status dist_gather_from_parallel_region(const char *group, const dist_tensor *in, int dim,
                                             const int64_t *sizes, dist_tensor *out);
dist_status dist_gather_from_parallel_region_backward(const char *group, const dist_tensor *grad_out, int dim,
                                                      const int64_t *sizes, dist_tensor *grad_in);

/* Backward of the v-collectives of coll.h (which are the forwards):
 *   dist_all_gather_v  <-> reduce-scatter-v (sum)
 *   dist_gather_v(dst) <-> scatter-v from dst (grad_out used on dst only)
 *   dist_scatter_v(src)<-> gather-v to src (grad_in written on src only) */
dist_status dist_all_gather_v_backward(const char *group, const dist_tensor *grad_out, dist_tensor *grad_in, int dim,
                                       const int64_t *sizes);
dist_status dist_gather_v_backward(const char *group, const dist_tensor *grad_out, dist_tensor *grad_in, int dim,
                                   const int64_t *sizes, int dst);
dist_status dist_scatter_v_backward(const char *group, const dist_tensor *grad_out, dist_tensor *grad_in, int dim,
                                    const int64_t *sizes, int src);

/* Indexed all-to-all-v: rank r receives in[indices of segment r] along dim.
 * `indices` holds the segments for ranks 0..size-1 back to back,
 * send_counts[r] entries for rank r, each in [0, in.shape[dim]); duplicates
 * are allowed. recv_counts[r] is what rank r sends me (= its
 * send_counts[me]); out's extent along dim is their sum, in rank order.
 * Backward: the reverse exchange, then an index-add into zeros of in's shape
 * (duplicates accumulate; 16-bit floats accumulate in f32). */
dist_status dist_indexed_all_to_all_v(const char *group, const dist_tensor *in, int dim, const int64_t *indices,
                                      const int64_t *send_counts, const int64_t *recv_counts, dist_tensor *out);
dist_status dist_indexed_all_to_all_v_backward(const char *group, const dist_tensor *grad_out, int dim,
                                               const int64_t *indices, const int64_t *send_counts,
                                               const int64_t *recv_counts, dist_tensor *grad_in);

/* Distributed transpose: in holds the full extent of dim0 and this rank's
 * chunk of dim1 (extents cat_sizes[r], NULL = equal); dim0 is split into
 * split_sizes (NULL = dist_compute_split_shapes), chunk r goes to rank r, and
 * the received pieces are concatenated along dim1. out: extent
 * split_sizes[me] along dim0, sum(cat_sizes) along dim1. dim0 != dim1.
 * The backward is the inverse exchange (a permutation's adjoint is its
 * inverse): split along dim1 by cat_sizes, concatenate along dim0. */
dist_status dist_distributed_transpose(const char *group, const dist_tensor *in, int dim0, int dim1,
                                       const int64_t *split_sizes, const int64_t *cat_sizes, dist_tensor *out);
dist_status dist_distributed_transpose_backward(const char *group, const dist_tensor *grad_out, int dim0, int dim1,
                                                const int64_t *split_sizes, const int64_t *cat_sizes,
                                                dist_tensor *grad_in);

#ifdef __cplusplus
}
#endif
#endif
