/* Element-wise reductions of host buffers, for engines that reduce in
 * distmgr's own code (the shared-memory engine): acc[i] = acc[i] op in[i]. */
#ifndef DISTMGR_REDUCE_HOST_H
#define DISTMGR_REDUCE_HOST_H

#include <stddef.h>

#include "core/internal.h"

/* Can dist__reduce_host do (t, op)? f32, f64, i32, i64 and u8 with sum,
 * prod, min and max; c64 and c128 with sum and prod; bf16 and f16 with sum
 * only, each step added in f32 and rounded back (compressed gradients). No
 * average: callers sum and divide. */
int dist__reduce_host_can(dist_dtype t, dist_reduce_op op);
/* acc = acc op in, n elements; (t, op) as dist__reduce_host_can allows. */
void dist__reduce_host(void *acc, const void *in, size_t n, dist_dtype t, dist_reduce_op op);

#endif
