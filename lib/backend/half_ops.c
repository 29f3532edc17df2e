/* MPI sums of bf16 / f16 buffers: each pairwise combine adds in f32 and
 * rounds back to 16 bits, as NCCL does, so compressed buckets cross the
 * wire at 2 bytes per element. MPI has no 16-bit float type, hence a user
 * operation on MPI_UINT16_T (commutative, so every algorithm may use it). */
#include "core/check.h"
#include "mem/f16_loops.h"
#include "backend/half_ops.h"

static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};

/* MPI passes distinct in and inout buffers. */
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  dist__bf16_sum(in, inout, (size_t)*len);
}

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  dist__f16_sum(in, inout, (size_t)*len);
}

dist_status dist__half_sum_op(dist_dtype t, MPI_Op *op) {
  if (t != DIST_BF16 && t != DIST_F16)
    return dist__error(DIST_ERR_INTERNAL, "16-bit sum requested for %s", dist_dtype_name(t));
  int k = t == DIST_F16;
  if (ops[k] == MPI_OP_NULL) {
    int rc = MPI_Op_create(k ? sum_f16 : sum_bf16, 1, &ops[k]);
    if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Op_create (16-bit sum)");
  }
  *op = ops[k];
  return DIST_SUCCESS;
}

void dist__half_ops_free(void) {
  int finalized = 0;
  DIST_WARN_CALL(MPI_Finalized(&finalized));
  for (int k = 0; k < 2; k++) {
    if (ops[k] != MPI_OP_NULL && !finalized) DIST_WARN_CALL(MPI_Op_free(&ops[k]));
    ops[k] = MPI_OP_NULL;
  }
}

dist_status dist__half_sum_ready(dist_dtype t) {
  MPI_Op op;
  return dist__half_sum_op(t, &op);
}
