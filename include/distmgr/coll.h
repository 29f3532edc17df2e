/* Collectives on a named process group (NULL = "world").
 *
 * All calls here are collective over the caller's copy of the group: every
 * member calls them in the same order with matching arguments. Ranks are
 * ranks within the group (0 .. size-1). Host tensors go through MPI, CUDA
 * tensors through NCCL on the stream set with dist_cuda_set_stream
 * (distmgr/cuda.h); CUDA calls return once the work is enqueued.
 *
 * Splits along a dimension: `dim` is any dimension of the tensor; the other
 * dimensions must be equal on all ranks. `sizes[r]` is rank r's extent along
 * `dim` (an array of group-size entries; NULL = all equal to this rank's).
 *
 * Verification: with DIST_VERIFY=1 (the default) every call first checks with
 * one small all-reduce that all ranks passed valid, matching arguments, so a
 * bad argument on one rank gives an error on every rank, naming the rank,
 * instead of a hang. DIST_VERIFY=0 skips that round trip (local checks stay;
 * a rank-local error may then leave the other ranks waiting).
 *
 * 16-bit floats (bf16, f16) are reduced in f32 and rounded back once.
 * Complex numbers support sum, avg and prod; u8/i32/i64 support all ops
 * (avg divides with truncation toward zero; a u8 average is summed in i64).
 * With DIST_VERIFY=1 all-to-alls also check that every rank's send counts
 * match the receive counts of its peers. */
#ifndef DISTMGR_COLL_H
#define DISTMGR_COLL_H

#include "distmgr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dist_reduce_op { DIST_SUM = 0, DIST_AVG, DIST_MAX, DIST_MIN, DIST_PROD, DIST_REDUCE_OP_COUNT } dist_reduce_op;

const char *dist_reduce_op_name(dist_reduce_op op); /* "sum", ...; "unknown" otherwise */

/* In place on every rank. */
dist_status dist_all_reduce(const char *group, dist_tensor *t, dist_reduce_op op);
/* Root's t overwrites everyone's. */
dist_status dist_broadcast(const char *group, dist_tensor *t, int root);
/* In place on root; the other ranks' t is left unchanged. */
dist_status dist_reduce(const char *group, dist_tensor *t, dist_reduce_op op, int root);

/* out = concatenation along dim of every rank's in (rank order). */
dist_status dist_all_gather(const char *group, const dist_tensor *in, dist_tensor *out, int dim);
dist_status dist_all_gather_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                              const int64_t *sizes);
/* in (extent sum(sizes) along dim) is reduced over the group; rank r keeps
 * chunk r (extent sizes[r]). sizes NULL = equal chunks (must divide). */
dist_status dist_reduce_scatter_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                  const int64_t *sizes, dist_reduce_op op);
/* Concatenation on dst only: `out` is ignored (may be NULL) elsewhere. */
dist_status dist_gather_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim, const int64_t *sizes,
                          int dst);
/* Chunk r of src's in goes to rank r: `in` is ignored (may be NULL) elsewhere.
 * sizes NULL = equal chunks of src's extent (must divide). */
dist_status dist_scatter_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim, const int64_t *sizes,
                           int src);
/* in is split along dim into size equal chunks (must divide); chunk r goes to
 * rank r; out is the concatenation of what each rank sent me. */
dist_status dist_all_to_all(const char *group, const dist_tensor *in, dist_tensor *out, int dim);
/* send_sizes[r]: slices of in (along dim) for rank r; recv_sizes[r]: slices
 * that rank r sends me. Both arrays are required. */
dist_status dist_all_to_all_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                              const int64_t *send_sizes, const int64_t *recv_sizes);
dist_status dist_barrier(const char *group);

/* Sum (average = 0) or mean (average = 1) of each rank's loss, into *out on
 * dst only (out may be NULL elsewhere). Reduced in double. */
dist_status dist_reduce_loss(const char *group, double loss, int dst, int average, double *out);

/* Fused all-reduce: the n tensors are packed into one buffer per kind
 * (f32 together with bf16/f16 upcast to f32, f64, c64, c128, i32, i64, u8,
 * each per memory space) and reduced with one call per buffer. Integers are
 * never mixed with floats. In place. */
dist_status dist_all_reduce_fused(const char *group, dist_tensor *tensors, int n, dist_reduce_op op);

/* Gradients of parameters shared by the group (e.g. replicated weights of a
 * model-parallel layer): each is replaced by its sum over the group, fused.
 * Call after the backward pass has accumulated them. */
dist_status dist_all_reduce_shared_grads(const char *group, dist_tensor *grads, int n);

/* The engine that carries collectives on `memory` over `group`: for host
 * memory "mpi", or in launches without MPI (torchrun) "shm" (a group of two
 * or more members on one node, unless DIST_SHM_DATA=off) or "gloo"; for CUDA memory "nccl", or "staged" (host copies and MPI) when
 * DIST_CUDA_BACKEND=staged, NCCL was not built, or two members of the group
 * drive the same GPU (NCCL refuses that). Fixed at the group's first device
 * use; an error if DIST_CUDA_BACKEND=nccl cannot serve the group. Local. */
dist_status dist_coll_backend(const char *group, dist_memory memory, const char **name);

/* ---- non-blocking ------------------------------------------------------------
 * A start call returns a request once the operation is launched; the tensors
 * must stay valid and unmodified (outputs unread) until it completes. Any
 * number may be in flight and completed in any order. */
typedef struct dist_request dist_request;

dist_status dist_all_reduce_start(const char *group, dist_tensor *t, dist_reduce_op op, dist_request **req);
dist_status dist_all_gather_v_start(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                    const int64_t *sizes, dist_request **req);
dist_status dist_all_to_all_v_start(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                    const int64_t *send_sizes, const int64_t *recv_sizes, dist_request **req);

/* Complete the operation (outputs are then final). Waiting twice is fine.
 * For CUDA tensors this waits on the host for the enqueued work. Local. */
dist_status dist_request_wait(dist_request *req);
/* *done = 1 once complete (then as after wait), else 0. Local. */
dist_status dist_request_test(dist_request *req, int *done);
/* Release a request; NULL is accepted. Freeing one that is still in flight
 * is a usage error: the operation is completed first (nothing leaks, no
 * buffer is written after the call) and DIST_ERR_INVALID_ARGUMENT is
 * returned. Local. */
dist_status dist_request_free(dist_request *req);

#ifdef __cplusplus
}
#endif
#endif
