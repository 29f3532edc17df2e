/* Device-memory cases inside a host test (test_ddp, test_dpo): which memory
 * kinds the parameterised cases run in, and copies between host memory and
 * either kind.
 *
 * main() is cunit_mpi_run with cuda_cases_setup as its setup hook, which
 * finds the devices before the suites run. The device cases run only when
 * every rank has a CUDA device (the one the manager assigned, made current
 * with cudaSetDevice); otherwise rank 0 prints one line starting with "SKIP"
 * and the reason, and every rank runs the host cases alone, so no rank waits
 * in a collective the others skip. A build without CUDA (no HAVE_CUDA in
 * config.h) compiles no device code and says so in the same way. */
#ifndef DISTMGR_TESTS_CUDA_CASES_H
#define DISTMGR_TESTS_CUDA_CASES_H

#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h" /* config.h, distmgr.h, mpi.h; cuda_runtime.h with HAVE_CUDA */
#include "cunit_mpi.h"

#include "cuda_mem.h" /* CUDA_CHECK, cuda_upload/cuda_download (CUDA builds) */

static int cuda_cases_on;     /* every rank runs the device cases */
static int cuda_cases_dev;    /* this rank's CUDA ordinal (the manager's) */

/* Host memory first, then device memory when cuda_cases_on. */
static const dist_memory MEMORY[2] = {DIST_MEM_HOST, DIST_MEM_CUDA};
static inline int memory_kinds(void) { return cuda_cases_on ? 2 : 1; }
static inline const char *memory_name(dist_memory mem) { return mem == DIST_MEM_HOST ? "host" : "device"; }

static inline void cuda_cases_assert(int ok, const char *what, const char *file, int line) {
  if (!ok) fprintf(stderr, "%s:%d: %s\n", file, line, what);
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, file, "", CU_FALSE);
}

/* The setup hook of the test (cunit_mpi_test.setup): decide whether the
 * device cases run. A rank that has a device but cannot make it current
 * fails the setup, so no rank runs the suites. Collective over the world. */
static inline int cuda_cases_setup(int round) {
  (void)round;
  int rank = 0;
  dist_manager_rank(&rank);
  cuda_cases_on = 0;
#ifndef HAVE_CUDA
  if (rank == 0) printf("SKIP: %s device-memory cases: built without CUDA\n", cunit_mpi_name);
  return 0;
#else
  if (cuda_skip_everywhere(rank)) return 0; /* rank 0 printed "SKIP: no CUDA device" */
  dist_device dev = {DIST_DEVICE_CPU, 0};
  int mine = dist_manager_device(&dev) == DIST_SUCCESS && dev.kind == DIST_DEVICE_CUDA, failed = 0;
  if (mine && cudaSetDevice(dev.index) != cudaSuccess) {
    fprintf(stderr, "%s[rank %d]: cudaSetDevice(%d) failed\n", cunit_mpi_name, rank, dev.index);
    mine = 0;
    failed = 1;
  }
  int all = cunit_all_reduce_int(mine, DIST_MIN);
  if (!all && rank == 0)
    printf("SKIP: %s device-memory cases: some rank has no usable CUDA device from the manager (DIST_DEVICE=cpu, "
           "or cudaSetDevice failed)\n", cunit_mpi_name);
  cuda_cases_on = all;
  cuda_cases_dev = dev.index;
  return failed;
#endif
}

/* Zeroed memory of kind `mem` (NULL after a failure, which is asserted). */
static inline void *mem_new(dist_memory mem, size_t bytes) {
  if (mem == DIST_MEM_HOST) return calloc(bytes ? bytes : 1, 1);
#ifdef HAVE_CUDA
  void *p = NULL;
  if (!CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1))) return NULL;
  if (!CUDA_CHECK(cudaMemset(p, 0, bytes))) {
    cudaFree(p);
    return NULL;
  }
  return p;
#else
  cuda_cases_assert(0, "device memory in a build without CUDA", __FILE__, __LINE__);
  return NULL;
#endif
}

static inline void mem_free(dist_memory mem, void *p) {
  if (mem == DIST_MEM_HOST) free(p);
#ifdef HAVE_CUDA
  else if (p) CUDA_CHECK(cudaFree(p));
#endif
}

/* Copy between host memory and memory of kind `mem` (to_mem: host -> mem).
 * A device copy first waits for what distmgr queued on dist_cuda_stream(),
 * so that it reads that work's results, or replaces data only after that
 * work has read it. 1 on success (a failure is asserted). */
static inline int mem_copy(dist_memory mem, void *dst, const void *src, size_t bytes, int to_mem) {
  if (mem == DIST_MEM_HOST) {
    memcpy(dst, src, bytes);
    return 1;
  }
#ifdef HAVE_CUDA
  return to_mem ? cuda_upload(dst, src, bytes) : cuda_download(dst, src, bytes);
#else
  (void)to_mem;
  cuda_cases_assert(0, "device memory in a build without CUDA", __FILE__, __LINE__);
  return 0;
#endif
}
static inline int mem_put(dist_memory mem, void *dst, const void *host, size_t bytes) {
  return mem_copy(mem, dst, host, bytes, 1);
}
static inline int mem_get(dist_memory mem, void *host, const void *src, size_t bytes) {
  return mem_copy(mem, host, src, bytes, 0);
}

#endif
