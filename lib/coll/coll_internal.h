/* Internal entry points shared by the collective, fused and mapping files. */
#ifndef DISTMGR_COLL_INTERNAL_H
#define DISTMGR_COLL_INTERNAL_H

#include "coll/coll_op.h"

/* Reduce n elements of buf in place: root < 0 all-reduce, else to root;
 * req non-NULL: non-blocking all-reduce. Arguments already verified. */
dist_status dist__reduce_buffer(dist__call *c, void *buf, dist_dtype dt, dist_memory mem, size_t n,
                                dist_reduce_op op, int root, dist_request **req);

/* All-to-all-v where `in` is split along split_dim (send_sizes) and the
 * received pieces are concatenated along cat_dim of `out` (recv_sizes).
 * Arguments already verified. req non-NULL: non-blocking. */
dist_status dist__all_to_all_dims(dist__call *c, const dist_tensor *in, int split_dim, const int64_t *send_sizes,
                                  dist_tensor *out, int cat_dim, const int64_t *recv_sizes, dist_request **req);

#endif
