/* GPU tests skip together (exit 77) unless every rank sees a CUDA device,
 * so no rank waits in a collective the others never join: either through
 * cunit_mpi_run's agreed setup (cuda_missing, cuda_skip_build), or, for
 * tests whose host cases run anyway, with cuda_skip_everywhere. */
#ifndef DISTMGR_TESTS_CUDA_SKIP_H
#define DISTMGR_TESTS_CUDA_SKIP_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <mpi.h>
#include <stdio.h>

#include "cunit_mpi.h"

static const char *cuda_skip_why_;
static inline int cuda_skip_setup_(int round) {
  (void)round;
  return cunit_mpi_skip(cuda_skip_why_);
}

/* The main() of a GPU test in a build without CUDA: the shared main, with no
 * suites and a setup that skips on every rank, saying why. */
static inline int cuda_skip_build(const char *name, const char *why) {
  static CU_SuiteInfo none[] = {CU_SUITE_INFO_NULL};
  cuda_skip_why_ = why;
  return cunit_mpi_run(&(cunit_mpi_test){.name = name, .suites = none, .setup = cuda_skip_setup_});
}

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

/* 1 when some rank has no device (rank 0 prints SKIP). Collective over the
 * manager's world (initialized). */
static inline int cuda_skip_everywhere(int rank) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  int least = cunit_all_reduce_int(count, DIST_MIN);
  if (least == 0 && rank == 0) printf("SKIP: no CUDA device\n");
  return least == 0;
}

/* NULL when this rank sees a CUDA device, else why not: what a setup hook
 * passes to cunit_mpi_skip. Local. */
static inline const char *cuda_missing(void) {
  static char why[160];
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return NULL;
  snprintf(why, sizeof why, "no CUDA device (%s)", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
  return why;
}

#endif /* HAVE_CUDA */

#endif
