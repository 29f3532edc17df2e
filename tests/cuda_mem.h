/* Device copies of test buffers, for tests that run some cases on CUDA
 * memory (test_optim, test_daso; test_ddp and test_dpo through cuda_cases.h). Copies are enqueued on dist_cuda_stream(),
 * the stream distmgr enqueues its device work on, and waited for: a copy in
 * follows the library's last update, and a copy back sees its result. A
 * failing CUDA call is printed (with the world rank while the manager is up) and counted
 * as a CUnit failure. Everything here exists only in builds with CUDA. */
#ifndef DISTMGR_TESTS_CUDA_MEM_H
#define DISTMGR_TESTS_CUDA_MEM_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef HAVE_CUDA
#include <CUnit/CUnit.h>
#include <cuda_runtime.h>
#include <distmgr.h>
#include <distmgr/cuda.h>
#include <stdio.h>

static inline int cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
  if (e != cudaSuccess) {
    int rank = -1;
    dist_manager_rank(&rank); /* stays -1 outside the manager */
    fprintf(stderr, "[rank %d] %s:%d: %s: %s\n", rank, file, line, what, cudaGetErrorString(e));
  }
  CU_assertImplementation(e == cudaSuccess ? CU_TRUE : CU_FALSE, (unsigned)line, what, file, "", CU_FALSE);
  return e == cudaSuccess;
}
#define CUDA_CHECK(call) cuda_check_((call), #call, __FILE__, __LINE__)

static inline int cuda_copy_(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, const char *file,
                             int line) {
  cudaStream_t st = dist_cuda_stream();
  return cuda_check_(cudaMemcpyAsync(dst, src, bytes, kind, st), "cudaMemcpyAsync", file, line) &&
         cuda_check_(cudaStreamSynchronize(st), "cudaStreamSynchronize", file, line);
}
/* Host to device and back, each complete on return; 1 on success. */
#define cuda_upload(dev, host, bytes) cuda_copy_((dev), (host), (bytes), cudaMemcpyHostToDevice, __FILE__, __LINE__)
#define cuda_download(host, dev, bytes) cuda_copy_((host), (dev), (bytes), cudaMemcpyDeviceToHost, __FILE__, __LINE__)

/* A new device buffer holding `bytes` of host memory; NULL on failure. */
static inline void *cuda_copy_of(const void *host, size_t bytes) {
  void *dev = NULL;
  if (!CUDA_CHECK(cudaMalloc(&dev, bytes ? bytes : 1))) return NULL;
  if (bytes && !cuda_upload(dev, host, bytes)) {
    cudaFree(dev);
    return NULL;
  }
  return dev;
}

/* CUDA devices this process sees; 0 when the runtime fails (no driver), and
 * then *why says how. */
static inline int cuda_devices(const char **why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  *why = e != cudaSuccess ? cudaGetErrorString(e) : "0 devices";
  return e == cudaSuccess ? count : 0;
}

/* Make the manager's device current (distmgr allocates optimizer state and
 * runs kernels there; the tests allocate there too) and return its ordinal in
 * *dev. 0, printed, when the manager chose the CPU or the device cannot be set. */
static inline int cuda_use_manager_device(int *dev) {
  dist_device d = {DIST_DEVICE_CPU, 0};
  if (dist_manager_device(&d) != DIST_SUCCESS || d.kind != DIST_DEVICE_CUDA) {
    fprintf(stderr, "the manager chose no CUDA device although one is visible: %s\n", dist_last_error());
    return 0;
  }
  cudaError_t e = cudaSetDevice(d.index);
  if (e != cudaSuccess) fprintf(stderr, "cudaSetDevice(%d): %s\n", d.index, cudaGetErrorString(e));
  *dev = d.index;
  return e == cudaSuccess;
}

#endif /* HAVE_CUDA */
#endif
