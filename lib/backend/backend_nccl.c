/* The NCCL backend: CUDA memory, stream-ordered on the caller's stream.
 *
 * One NCCL communicator per group, created at the group's first device
 * collective (which every member reaches in the same order): rank 0 of the
 * group makes the unique id and broadcasts it over the group's host engine
 * (MPI, or without MPI the group's Gloo context, itself met through the
 * rendezvous store). NCCL has no v-collectives: they are grouped point-to-point
 * sends and receives (or one ncclReduce per chunk for reduce-scatter-v). */
#include <nccl.h>
#include <sched.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/board.h"
#include "core/check.h"
#include "core/reserve.h"
#include "mem/cuda_libs.h"
#include "backend/faults.h"
#include "mem/memops.h"
#include "store/net.h"
#include "backend/wait.h"

dist_status dist__nccl_error(int code, const char *call) {
  return dist__error(DIST_ERR_NCCL, "%s failed: %s", call, ncclGetErrorString((ncclResult_t)code));
}

static dist_status comm_of(dist__group *g, ncclComm_t *out) {
  if (!g->device->nccl) {
    ncclUniqueId id;
    /* NCCL loaded here and rank 0's unique id: agreed on before anyone
     * blocks in ncclCommInitRank (one node without NCCL fails them all). */
    dist_status mine = dist__nccl_load();
    if (!mine && g->rank == 0) {
      mine = DIST_NCCL_STATUS(ncclGetUniqueId(&id), "ncclGetUniqueId");
    }
    DIST_CHECK(dist__agree_group(g, mine, "loading NCCL and ncclGetUniqueId"));
    DIST_CHECK(dist__backend_host(g)->broadcast(g, &id, sizeof id, DIST_U8, 0));
    ncclComm_t comm;
    DIST_NCCL_CALL(ncclCommInitRank(&comm, g->size, id, g->rank));
    g->device->nccl = comm;
  }
  *out = (ncclComm_t)g->device->nccl;
  return DIST_SUCCESS;
}

void dist__nccl_release(dist__group *g) {
  if (g->device && g->device->nccl) DIST_WARN_CALL(ncclCommDestroy((ncclComm_t)g->device->nccl));
  if (g->device) g->device->nccl = NULL;
}

/* DIST_TIMEOUT on device communicators, NCCL's way. With a timeout set, a
 * call waits for its stream while polling ncclCommGetAsyncError and the
 * fault channel; past the limit, on an asynchronous NCCL error or on a peer's
 * failure, the communicator is aborted with ncclCommAbort, which releases the
 * kernels waiting for peers, and the error names the ranks not arrived. */
static dist_status watched(dist__group *g, ncclComm_t comm, const char *call) {
  if (!dist__wait_polled()) return DIST_SUCCESS;
  cudaStream_t st = dist__cuda_stream();
  double t0 = dist__net_now(), limit = dist__engine.timeout; /* MPI_Wtime: no MPI under torchrun */
  for (;;) {
    cudaError_t q = cudaStreamQuery(st);
    if (q == cudaSuccess) return DIST_SUCCESS;
    if (q != cudaErrorNotReady) return dist__cuda_error(q, "cudaStreamQuery");
    ncclResult_t async = ncclSuccess;
    dist_status s = DIST_NCCL_STATUS(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
    double t = dist__net_now() - t0;
    if (!s) s = dist__faults_check();
    if (!s && async != ncclSuccess && async != ncclInProgress)
      s = dist__error(DIST_ERR_NCCL, "%s on group '%s': NCCL reported an asynchronous error: %s", call, g->name,
                      ncclGetErrorString(async));
    if (!s && t > limit) {
      char behind[1024];
      dist__board_report(behind, sizeof behind);
      s = dist__error(DIST_ERR_TIMEOUT,
                      "%s on group '%s' (call #%llu) did not complete within DIST_TIMEOUT=%g s (waited %.1f s for "
                      "its stream); %s",
                      call, g->name, (unsigned long long)dist__engine.cur.seq, limit, t, behind);
    }
    if (s) {
      DIST_WARN_CALL(ncclCommAbort(comm));
      g->device->nccl = NULL;
      return dist__break(s);
    }
    sched_yield();
  }
}

/* Element type for reductions; complex numbers reduce as pairs of reals. */
static int nccl_type(dist_dtype t, ncclDataType_t *out, size_t *mult) {
  *mult = 1;
  switch (t) {
    case DIST_F32: *out = ncclFloat32; return 1;
    case DIST_F64: *out = ncclFloat64; return 1;
    case DIST_C64: *out = ncclFloat32, *mult = 2; return 1;
    case DIST_C128: *out = ncclFloat64, *mult = 2; return 1;
    case DIST_I32: *out = ncclInt32; return 1;
    case DIST_I64: *out = ncclInt64; return 1;
    case DIST_U8: *out = ncclUint8; return 1;
    /* The collective layer upcasts 16-bit floats to f32 before reducing;
     * only DDP's compressed buckets hand them over, to be summed as such. */
    case DIST_BF16: *out = ncclBfloat16; return 1;
    case DIST_F16: *out = ncclFloat16; return 1;
    default: return 0;
  }
}

/* n * k as the size_t count NCCL takes (elements of a reduction's type, or
 * bytes); an error rather than a wrapped count. */
static dist_status scaled(size_t n, size_t k, size_t *out, const char *call) {
  if (__builtin_mul_overflow(n, k, out))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: a count of %zu x %zu overflows size_t", call, n, k);
  return DIST_SUCCESS;
}

/* The chunks (count[r], displ[r]) of `es`-byte elements, as byte ranges: none may overflow size_t. */
static dist_status ranges_fit(int P, const size_t *count, const size_t *displ, size_t es, const char *call) {
  for (int r = 0; count && r < P; r++) {
    size_t end;
    if (__builtin_add_overflow(displ[r], count[r], &end) || __builtin_mul_overflow(end, es, &end))
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: chunk %d (%zu elements at %zu, %zu bytes each) overflows size_t",
                         call, r, count[r], displ[r], es);
  }
  return DIST_SUCCESS;
}

static ncclRedOp_t nccl_op(dist_reduce_op op) {
  switch (op) {
    case DIST_AVG: return ncclAvg;
    case DIST_MAX: return ncclMax;
    case DIST_MIN: return ncclMin;
    case DIST_PROD: return ncclProd;
    default: return ncclSum;
  }
}

static int can_reduce(dist_dtype t, dist_reduce_op op) {
  ncclDataType_t nt;
  size_t m;
  if (!nccl_type(t, &nt, &m)) return 0;
  if (dist__dtype_kind(t) == DIST__COMPLEX) return op == DIST_SUM || op == DIST_AVG; /* not elementwise otherwise */
  if (dist__dtype_is16(t)) return op == DIST_SUM || op == DIST_MAX || op == DIST_MIN;
  if (op == DIST_AVG) return dist__dtype_kind(t) == DIST__FLOAT;
  return 1;
}

/* Calls are complete in stream order once enqueued: the collective layer
 * tracks non-blocking CUDA requests with an event, so `pending` is unused. */

static dist_status all_reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t,
                              dist_reduce_op op, dist__pending *p) {
  ncclComm_t comm;
  ncclDataType_t nt;
  size_t m;
  nccl_type(t, &nt, &m);
  DIST_CHECK(scaled(count, m, &count, "ncclAllReduce"));
  DIST_CHECK(comm_of(g, &comm));
  DIST_NCCL_CALL(ncclAllReduce(send, recv, count, nt, nccl_op(op), comm, dist__cuda_stream()));
  return watched(g, comm, "ncclAllReduce");
}

static dist_status broadcast(dist__group *g, void *buf, size_t count, dist_dtype t, int root) {
  ncclComm_t comm;
  size_t bytes;
  DIST_CHECK(scaled(count, dist_dtype_size(t), &bytes, "ncclBroadcast"));
  DIST_CHECK(comm_of(g, &comm));
  DIST_NCCL_CALL(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm, dist__cuda_stream()));
  return watched(g, comm, "ncclBroadcast");
}

static dist_status reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t, dist_reduce_op op,
                          int root) {
  ncclComm_t comm;
  ncclDataType_t nt;
  size_t m;
  nccl_type(t, &nt, &m);
  DIST_CHECK(scaled(count, m, &count, "ncclReduce"));
  DIST_CHECK(comm_of(g, &comm));
  DIST_NCCL_CALL(ncclReduce(send, recv, count, nt, nccl_op(op), root, comm, dist__cuda_stream()));
  return watched(g, comm, "ncclReduce");
}

/* Grouped point-to-point exchange: to peer r, scount[r] bytes from send +
 * sdispl[r]; from peer r, rcount[r] bytes into recv + rdispl[r]. NULL arrays
 * mean no traffic in that direction. The own chunk is a device copy. */
static dist_status exchange(dist__group *g, const char *send, const size_t *sc, const size_t *sd, char *recv,
                            const size_t *rc, const size_t *rd, size_t es) {
  ncclComm_t comm;
  cudaStream_t st = dist__cuda_stream();
  DIST_CHECK(ranges_fit(g->size, sc, sd, es, "ncclSend"));
  DIST_CHECK(ranges_fit(g->size, rc, rd, es, "ncclRecv"));
  DIST_CHECK(comm_of(g, &comm));
  int me = g->rank;
  if (sc && rc && sc[me]) {
    DIST_CUDA_CALL(cudaMemcpyAsync(recv + rd[me] * es, send + sd[me] * es, sc[me] * es, cudaMemcpyDeviceToDevice, st));
  }
  ncclResult_t res = ncclSuccess;
  DIST_NCCL_CALL(ncclGroupStart());
  for (int r = 0; r < g->size && res == ncclSuccess; r++) {
    if (r == me) continue;
    if (sc && sc[r]) res = ncclSend(send + sd[r] * es, sc[r] * es, ncclUint8, r, comm, st);
    if (res == ncclSuccess && rc && rc[r]) res = ncclRecv(recv + rd[r] * es, rc[r] * es, ncclUint8, r, comm, st);
  }
  ncclResult_t end = ncclGroupEnd(); /* always close the group */
  if (res != ncclSuccess) return dist__nccl_error(res, "ncclSend/ncclRecv");
  if (end != ncclSuccess) return dist__nccl_error(end, "ncclGroupEnd");
  return watched(g, comm, "ncclSend/ncclRecv");
}

static dist_status all_gather_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, dist_dtype t, dist__pending *p) {
  int P = g->size;
  size_t *s = dist__reserve_alloc(sizeof(size_t) * 2 * (size_t)P, 0); /* (core/reserve.h) */
  if (!s) return dist__error(DIST_ERR_NO_MEMORY, "count arrays");
  for (int r = 0; r < P; r++) s[r] = counts[g->rank], s[P + r] = 0; /* my chunk to everyone */
  dist_status st = exchange(g, send, s, s + P, recv, counts, displs, dist_dtype_size(t));
  dist__reserve_free(s);
  return st;
}

static dist_status reduce_scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                    const size_t *displs, dist_dtype t, dist_reduce_op op) {
  ncclComm_t comm;
  ncclDataType_t nt;
  size_t m, es = dist_dtype_size(t);
  nccl_type(t, &nt, &m);
  DIST_CHECK(ranges_fit(g->size, counts, displs, es, "ncclReduce"));
  DIST_CHECK(comm_of(g, &comm));
  ncclResult_t res = ncclSuccess;
  DIST_NCCL_CALL(ncclGroupStart());
  for (int r = 0; r < g->size && res == ncclSuccess; r++)
    res = ncclReduce((const char *)send + displs[r] * es, recv, counts[r] * m, nt, nccl_op(op), r, comm,
                     dist__cuda_stream());
  ncclResult_t end = ncclGroupEnd();
  if (res != ncclSuccess) return dist__nccl_error(res, "ncclReduce");
  if (end != ncclSuccess) return dist__nccl_error(end, "ncclGroupEnd");
  return watched(g, comm, "ncclReduce");
}

static dist_status gather_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                            dist_dtype t, int root) {
  int P = g->size, me = g->rank;
  size_t *s = dist__reserve_alloc(2 * (size_t)P * sizeof(size_t), 1);
  if (!s) return dist__error(DIST_ERR_NO_MEMORY, "count arrays");
  s[root] = counts[me];
  dist_status st = exchange(g, send, s, s + P, recv, me == root ? counts : NULL, displs, dist_dtype_size(t));
  dist__reserve_free(s);
  return st;
}

static dist_status scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                             dist_dtype t, int root) {
  int P = g->size, me = g->rank;
  size_t *r = dist__reserve_alloc(2 * (size_t)P * sizeof(size_t), 1);
  if (!r) return dist__error(DIST_ERR_NO_MEMORY, "count arrays");
  r[root] = counts[me];
  dist_status st = exchange(g, send, me == root ? counts : NULL, displs, recv, r, r + P, dist_dtype_size(t));
  dist__reserve_free(r);
  return st;
}

static dist_status all_to_all_v(dist__group *g, const void *send, const size_t *sc, const size_t *sd, void *recv,
                                const size_t *rc, const size_t *rd, dist_dtype t, dist__pending *p) {
  DIST_CHECK(exchange(g, send, sc, sd, recv, rc, rd, dist_dtype_size(t)));
  return DIST_SUCCESS;
}

static dist_status barrier(dist__group *g) {
  DIST_CHECK(dist__mem_sync(DIST_MEM_CUDA));
  return dist__backend_host(g)->barrier(g);
}

static dist_status wait(dist__pending *p) { return DIST_SUCCESS; }

static dist_status test(dist__pending *p, int *done) {
  *done = 1;
  return DIST_SUCCESS;
}

const dist__backend dist__backend_nccl = {
    "nccl", can_reduce, all_reduce, broadcast, reduce, all_gather_v, reduce_scatter_v,
    gather_v, scatter_v, all_to_all_v, barrier, wait, test,
    &dist__backend_staged, /* complex prod: not elementwise on real pairs */
    NULL,                  /* sums f16/bf16 itself */
    NULL,                  /* device memory: verified before the data */
    NULL,                  /* counts in size_t: no limit below it */
};
