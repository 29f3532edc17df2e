/* GPU tests skip together (exit 77) unless every rank sees a CUDA device,
 * so no rank waits in a collective the others never join. */
#ifndef DISTMGR_TESTS_CUDA_SKIP_H
#define DISTMGR_TESTS_CUDA_SKIP_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <mpi.h>
#include <stdio.h>

/* The main() of a GPU test in a build without CUDA: start and stop the
 * manager so that every rank takes part, then report SKIP (rank 0 says why). */
static inline int cuda_skip_build(const char *why) {
  int rank = 0;
  if (dist_manager_initialize() == DIST_SUCCESS) {
    dist_manager_rank(&rank);
    dist_manager_finalize();
  }
  if (rank == 0) printf("SKIP: %s\n", why);
  return 77;
}

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

/* 1 when some rank has no device (rank 0 prints SKIP). Collective over the world. */
static inline int cuda_skip_everywhere(int rank) {
  int count = 0, least = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  MPI_Allreduce(&count, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (least == 0 && rank == 0) printf("SKIP: no CUDA device\n");
  return least == 0;
}

#endif /* HAVE_CUDA */

#endif
