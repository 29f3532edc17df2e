/* CUDA-typed parts of the API: the stream that NCCL collectives and device
 * copies are enqueued on. Include only where cuda_runtime.h is available. */
#ifndef DISTMGR_CUDA_H
#define DISTMGR_CUDA_H

#include <cuda_runtime.h>

#include "distmgr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stream for this thread's device-memory calls (default: the legacy default
 * stream 0). Work is stream-ordered: a collective's outputs are ready for
 * later work on the same stream without any host synchronisation.
 * Declared only in builds with CUDA. Local. */
dist_status dist_cuda_set_stream(cudaStream_t stream);
cudaStream_t dist_cuda_stream(void);

#ifdef __cplusplus
}
#endif
#endif
