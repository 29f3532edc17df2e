/* GPU tests skip together (exit 77) unless every rank sees a CUDA device,
 * so no rank waits in a collective the others never join. */
#ifndef DISTMGR_TESTS_CUDA_SKIP_H
#define DISTMGR_TESTS_CUDA_SKIP_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>

/* 1 when some rank has no device (rank 0 prints SKIP). Collective over the world. */
static int cuda_skip_everywhere(int rank) {
  int count = 0, least = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  MPI_Allreduce(&count, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (least == 0 && rank == 0) printf("SKIP: no CUDA device\n");
  return least == 0;
}

#endif
