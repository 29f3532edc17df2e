/* MPI reductions of 16-bit floats on the wire (compressed gradients, DASO's
 * downcast parameters). */
#ifndef DISTMGR_HALF_OPS_H
#define DISTMGR_HALF_OPS_H

#include "backend/engine.h"
#include "backend/agree.h"

/* A commutative MPI_Op summing MPI_UINT16_T buffers holding bf16 or f16. */
dist_status dist__half_sum_op(dist_dtype t, MPI_Op *op);
/* Make t's op now (so that a later sum cannot fail on it); bf16 or f16. */
dist_status dist__half_sum_ready(dist_dtype t);
void dist__half_ops_free(void); /* at manager finalize */

#endif
