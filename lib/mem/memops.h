/* Memory operations in a memory space: scratch buffers, strided copies,
 * 16-bit casts, scaling and index-add. Host memory is handled here; CUDA
 * memory with stream-ordered runtime calls and the kernels of cuda_kernels.cu,
 * on the caller's stream (dist_cuda_set_stream). */
#ifndef DISTMGR_MEMOPS_H
#define DISTMGR_MEMOPS_H

#include <stddef.h>
#include <stdint.h>

#include "mem/dtype.h"

dist_status dist__mem_alloc(dist_memory mem, size_t bytes, void **p); /* bytes 0 gives a valid pointer */
void dist__mem_free(dist_memory mem, void *p);
dist_status dist__mem_zero(dist_memory mem, void *p, size_t bytes);
/* height rows of width bytes, rows dpitch / spitch bytes apart. */
dist_status dist__mem_copy2d(dist_memory mem, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                             size_t height);
/* t <-> its wider type dist__wire_type(t, DIST_AVG): bf16/f16 <-> f32, u8 <-> i64. */
dist_status dist__mem_widen(dist_memory mem, const void *src, dist_dtype t, void *dst, size_t n);
dist_status dist__mem_narrow(dist_memory mem, const void *src, dist_dtype t, void *dst, size_t n);
/* buf[i] /= divisor for n elements of t (not 16-bit); integers truncate. */
dist_status dist__mem_divide(dist_memory mem, void *buf, dist_dtype t, size_t n, int64_t divisor);
/* For a tensor viewed as [outer, rows, inner] (t not 16-bit):
 * dst[o, idx[k], :] += src[o, k, :] for k < nidx, where src is [outer, nidx, inner]. */
dist_status dist__mem_index_add(dist_memory mem, void *dst, const void *src, dist_dtype t, int64_t outer, int64_t rows,
                                int64_t inner, const int64_t *idx, int64_t nidx);
/* dst[o, k, :] = src[o, idx[k], :]; dst is [outer, nidx, inner]. */
dist_status dist__mem_index_select(dist_memory mem, void *dst, const void *src, size_t esize, int64_t outer,
                                   int64_t rows, int64_t inner, const int64_t *idx, int64_t nidx);
/* Upload from a host array the caller may free at once: it is copied to a
 * buffer that is released in stream order after the upload. */
dist_status dist__mem_upload_copy(dist_memory mem, void *dst, const void *host_src, size_t bytes);
/* Copies between host memory and `mem` (plain copies for host memory). */
dist_status dist__mem_upload(dist_memory mem, void *dst, const void *host_src, size_t bytes);
dist_status dist__mem_download(dist_memory mem, void *host_dst, const void *src, size_t bytes);
/* Events marking the work enqueued so far (CUDA; host memory has none). */
dist_status dist__mem_event_record(dist_memory mem, void **event);
dist_status dist__mem_event_wait(void *event);            /* and destroys it */
dist_status dist__mem_event_test(void *event, int *done); /* destroys it once done */

/* Wait on the host for work enqueued so far (a no-op for host memory). */
dist_status dist__mem_sync(dist_memory mem);

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
cudaStream_t dist__cuda_stream(void);
dist_status dist__cuda_error(cudaError_t e, const char *call);
/* Kernels (cuda_kernels.cu), launched on `s`. idx is a device array. */
int dist__cuda_widen(const void *src, int dtype, void *dst, size_t n, cudaStream_t s);
int dist__cuda_narrow(const void *src, int dtype, void *dst, size_t n, cudaStream_t s);
int dist__cuda_divide(void *buf, int dtype, size_t n, int64_t divisor, cudaStream_t s);
int dist__cuda_index_add(void *dst, const void *src, int dtype, int64_t outer, int64_t rows, int64_t inner,
                         const int64_t *idx, int64_t nidx, cudaStream_t s);
int dist__cuda_index_select(void *dst, const void *src, size_t esize, int64_t outer, int64_t rows, int64_t inner,
                            const int64_t *idx, int64_t nidx, cudaStream_t s);
#endif

#endif
