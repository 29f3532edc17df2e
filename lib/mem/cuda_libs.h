/* cuFFT and NCCL, loaded at run time (configure's default) or linked.
 *
 * A CUDA build must start on nodes without CUDA (a CPU-only partition, a
 * login node): libdistmgr links the CUDA runtime statically (it loads the
 * driver itself, lazily, and reports a missing one through
 * cudaGetDeviceCount) and opens cuFFT and NCCL by their versioned sonames
 * only when device memory first needs them. Files that call them include
 * this header after cufft.h / nccl.h: with DIST_CUDA_DLOPEN each function
 * name then means the entry of a table filled once by dist__cufft_load /
 * dist__nccl_load, so the call sites read as plain cuFFT and NCCL calls.
 * With --disable-cuda-dlopen the tables hold the linked functions. */
#ifndef DIST_CUDA_LIBS_H
#define DIST_CUDA_LIBS_H

#include "config.h"
#include "distmgr/status.h"

#ifdef HAVE_CUFFT
#include <cufft.h>
#define DIST__CUFFT_FUNCS(X)                                                                               \
  X(cufftCreate) X(cufftMakePlanMany64) X(cufftDestroy) X(cufftSetStream) X(cufftExecC2C) X(cufftExecZ2Z) \
  X(cufftExecR2C) X(cufftExecD2Z) X(cufftExecC2R) X(cufftExecZ2D)
#define DIST__FN_MEMBER(f) __typeof__(&f) f;
typedef struct dist__cufft_fns {
  DIST__CUFFT_FUNCS(DIST__FN_MEMBER)
} dist__cufft_fns;
extern dist__cufft_fns dist__cufft;
/* Once per process; later calls return the first outcome. The error names
 * the library and the loader's reason. Local. */
dist_status dist__cufft_load(void);
#endif

#ifdef HAVE_NCCL
#include <nccl.h>
#define DIST__NCCL_FUNCS(X)                                                                                        \
  X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)               \
  X(ncclCommGetAsyncError) X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) X(ncclSend) X(ncclRecv) X(ncclGroupStart) \
  X(ncclGroupEnd)
#ifndef DIST__FN_MEMBER
#define DIST__FN_MEMBER(f) __typeof__(&f) f;
#endif
typedef struct dist__nccl_fns {
  DIST__NCCL_FUNCS(DIST__FN_MEMBER)
} dist__nccl_fns;
extern dist__nccl_fns dist__nccl;
dist_status dist__nccl_load(void);
#endif

/* Call sites: each name is its table entry (not in cuda_libs.c, which
 * resolves the real names). */
#if defined(DIST_CUDA_DLOPEN) && !defined(DIST__CUDA_LIBS_IMPL)
#ifdef HAVE_CUFFT
#define cufftCreate (dist__cufft.cufftCreate)
#define cufftMakePlanMany64 (dist__cufft.cufftMakePlanMany64)
#define cufftDestroy (dist__cufft.cufftDestroy)
#define cufftSetStream (dist__cufft.cufftSetStream)
#define cufftExecC2C (dist__cufft.cufftExecC2C)
#define cufftExecZ2Z (dist__cufft.cufftExecZ2Z)
#define cufftExecR2C (dist__cufft.cufftExecR2C)
#define cufftExecD2Z (dist__cufft.cufftExecD2Z)
#define cufftExecC2R (dist__cufft.cufftExecC2R)
#define cufftExecZ2D (dist__cufft.cufftExecZ2D)
#endif
#ifdef HAVE_NCCL
#define ncclGetErrorString (dist__nccl.ncclGetErrorString)
#define ncclGetUniqueId (dist__nccl.ncclGetUniqueId)
#define ncclCommInitRank (dist__nccl.ncclCommInitRank)
#define ncclCommDestroy (dist__nccl.ncclCommDestroy)
#define ncclCommAbort (dist__nccl.ncclCommAbort)
#define ncclCommGetAsyncError (dist__nccl.ncclCommGetAsyncError)
#define ncclAllReduce (dist__nccl.ncclAllReduce)
#define ncclBroadcast (dist__nccl.ncclBroadcast)
#define ncclReduce (dist__nccl.ncclReduce)
#define ncclSend (dist__nccl.ncclSend)
#define ncclRecv (dist__nccl.ncclRecv)
#define ncclGroupStart (dist__nccl.ncclGroupStart)
#define ncclGroupEnd (dist__nccl.ncclGroupEnd)
#endif
#endif

#endif
