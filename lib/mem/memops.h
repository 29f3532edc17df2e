/* Memory operations in a memory space: scratch buffers, strided copies,
 * 16-bit casts, scaling and index-add. One ops table per memory space:
 * host memory (host_mem.c) and CUDA memory (cuda_mem.c: stream-ordered
 * runtime calls and the kernels of cuda_kernels.cu, on the caller's stream,
 * dist_cuda_set_stream). memops.c checks the arguments once and picks the
 * table: the only place that tells host from CUDA memory. */
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
/* One piece of a batched copy: n elements from src to dst. */
typedef struct dist__piece {
  void *dst;
  const void *src;
  size_t n;
} dist__piece;
/* dst = src / divisor for each of the n pieces, elements of t. divisor 1 is
 * a plain copy (any t); otherwise t is floating, the 16-bit ones computed in
 * f32 as widen, dist__mem_divide and narrow would. Pieces must not overlap.
 * CUDA memory: one kernel per 64 pieces, where one copy each would be bound
 * by the launches (DDP's buckets of small tensors). */
dist_status dist__mem_copy_pieces(dist_memory mem, const dist__piece *p, int n, dist_dtype t, int64_t divisor);
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

/* A memory space's operations, on arguments memops.c has checked. */
typedef struct dist__mem_ops {
  dist_status (*alloc)(size_t bytes, void **p);
  void (*free)(void *p);
  dist_status (*zero)(void *p, size_t bytes);
  dist_status (*copy2d)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height);
  dist_status (*widen)(const void *src, dist_dtype t, void *dst, size_t n);
  dist_status (*narrow)(const void *src, dist_dtype t, void *dst, size_t n);
  dist_status (*divide)(void *buf, dist_dtype t, size_t n, int64_t divisor);
  dist_status (*copy_pieces)(const dist__piece *p, int n, dist_dtype t, int64_t divisor);
  dist_status (*index_add)(void *dst, const void *src, dist_dtype t, int64_t outer, int64_t rows, int64_t inner,
                           const int64_t *idx, int64_t nidx);
  dist_status (*index_select)(void *dst, const void *src, size_t esize, int64_t outer, int64_t rows, int64_t inner,
                              const int64_t *idx, int64_t nidx);
  dist_status (*upload)(void *dst, const void *host_src, size_t bytes);
  dist_status (*download)(void *host_dst, const void *src, size_t bytes);
  dist_status (*upload_copy)(void *dst, const void *host_src, size_t bytes);
  dist_status (*sync)(void);
  dist_status (*event_record)(void **event);
} dist__mem_ops;

extern const dist__mem_ops dist__mem_host; /* host_mem.c */
extern const dist__mem_ops dist__mem_cuda; /* cuda_mem.c; without CUDA every op is an error */

/* CUDA error codes as distmgr errors (DIST_ERR_CUDA); for core/check.h. */
dist_status dist__cuda_error(int code, const char *call);

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
cudaStream_t dist__cuda_stream(void);
/* Kernels (cuda_kernels.cu), launched on `s`. idx is a device array. */
int dist__cuda_widen(const void *src, int dtype, void *dst, size_t n, cudaStream_t s);
int dist__cuda_narrow(const void *src, int dtype, void *dst, size_t n, cudaStream_t s);
int dist__cuda_divide(void *buf, int dtype, size_t n, int64_t divisor, cudaStream_t s);
int dist__cuda_copy_pieces(const dist__piece *p, int n, int dtype, size_t esize, int64_t divisor, cudaStream_t s);
int dist__cuda_index_add(void *dst, const void *src, int dtype, int64_t outer, int64_t rows, int64_t inner,
                         const int64_t *idx, int64_t nidx, cudaStream_t s);
int dist__cuda_index_select(void *dst, const void *src, size_t esize, int64_t outer, int64_t rows, int64_t inner,
                            const int64_t *idx, int64_t nidx, cudaStream_t s);
#endif

#endif
