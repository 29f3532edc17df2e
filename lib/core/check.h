/* Return-code checks for the engines, one shape for all: MPI, NCCL, CUDA
 * and cuFFT each report success as 0. Each engine has one function that
 * turns its code into a dist_status with the engine's own text; the macros
 * name it, so the engine's header need only be included where they are used:
 *   dist__mpi_error   (backend/agree.h)   DIST_ERR_MPI
 *   dist__nccl_error  (backend/backend.h) DIST_ERR_NCCL
 *   dist__cuda_error  (mem/memops.h)      DIST_ERR_CUDA
 *   dist__cufft_error (fft/fft_internal.h) DIST_ERR_CUDA */
#ifndef DISTMGR_CHECK_H
#define DISTMGR_CHECK_H

#include "core/internal.h"

/* Return on failure, naming the call as written. */
#define DIST__ENGINE_CALL(report, call)                      \
  do {                                                       \
    int dist__rc = (int)(call);                              \
    if (dist__rc != 0) return report(dist__rc, #call);       \
  } while (0)
#define DIST_MPI_CALL(call) DIST__ENGINE_CALL(dist__mpi_error, call)
#define DIST_NCCL_CALL(call) DIST__ENGINE_CALL(dist__nccl_error, call)
#define DIST_CUDA_CALL(call) DIST__ENGINE_CALL(dist__cuda_error, call)
#define DIST_CUFFT_CALL(call) DIST__ENGINE_CALL(dist__cufft_error, call)

/* As a value, for code that goes on after a failure (an agreement still to
 * join, a buffer to free): s = DIST_MPI_STATUS(rc, "MPI_Bcast (what)"). */
#define DIST__ENGINE_STATUS(report, rc, what) ((int)(rc) == 0 ? DIST_SUCCESS : report((int)(rc), what))
#define DIST_MPI_STATUS(rc, what) DIST__ENGINE_STATUS(dist__mpi_error, rc, what)
#define DIST_NCCL_STATUS(rc, what) DIST__ENGINE_STATUS(dist__nccl_error, rc, what)
#define DIST_CUDA_STATUS(rc, what) DIST__ENGINE_STATUS(dist__cuda_error, rc, what)
#define DIST_CUFFT_STATUS(rc, what) DIST__ENGINE_STATUS(dist__cufft_error, rc, what)

/* Where nothing can be returned (clean-up on a path already failing, void
 * functions, exit handlers): a failure is logged as a warning, not lost, and
 * the thread's last error (the one being reported) is left alone. */
#define DIST_WARN_CALL(call)                                                              \
  do {                                                                                       \
    int dist__rc = (int)(call);                                                              \
    if (dist__rc != 0) dist_log(DIST_LOG_WARN, "%s failed (code %d)", #call, dist__rc); \
  } while (0)

#endif
