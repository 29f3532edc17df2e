/* CUDA memory's operations (memops.h): stream-ordered runtime calls and the
 * kernels of cuda_kernels.cu, on the caller's stream. Arguments were checked
 * by memops.c. Built without CUDA, every operation is an error. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "mem/memops.h"

#ifdef HAVE_CUDA
static _Thread_local cudaStream_t stream = 0;

cudaStream_t dist__cuda_stream(void) { return stream; }

dist_status dist_cuda_set_stream(cudaStream_t s) {
  stream = s;
  return DIST_SUCCESS;
}

cudaStream_t dist_cuda_stream(void) { return stream; }

dist_status dist__cuda_error(int code, const char *call) {
  return dist__error(DIST_ERR_CUDA, "%s failed: %s", call, cudaGetErrorString((cudaError_t)code));
}

/* Kernel launchers return non-zero on failure; earlier errors are cleared
 * first so that the one reported is the launch's. */
#define KERNEL(call)                                                                                  \
  do {                                                                                                \
    (void)cudaGetLastError();                                                                         \
    if (call) {                                                                                       \
      cudaError_t e_ = cudaGetLastError();                                                            \
      if (e_ == cudaSuccess) return dist__error(DIST_ERR_INTERNAL, "%s: unsupported dtype", #call); \
      return dist__cuda_error(e_, #call);                                                             \
    }                                                                                                 \
    return DIST_SUCCESS;                                                                              \
  } while (0)

static dist_status alloc(size_t bytes, void **p) {
  /* Stream-ordered: no device-wide synchronisation, unlike cudaMalloc/cudaFree. */
  DIST_CUDA_CALL(cudaMallocAsync(p, bytes, stream));
  return DIST_SUCCESS;
}

static void release(void *p) { DIST_WARN_CALL(cudaFreeAsync(p, stream)); }

static dist_status zero(void *p, size_t bytes) {
  DIST_CUDA_CALL(cudaMemsetAsync(p, 0, bytes, stream));
  return DIST_SUCCESS;
}

static dist_status copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height) {
  if (height == 1 || (dpitch == width && spitch == width)) { /* one run: no pitch limit applies */
    DIST_CUDA_CALL(cudaMemcpyAsync(dst, src, width * height, cudaMemcpyDeviceToDevice, stream));
    return DIST_SUCCESS;
  }
  if (dpitch > INT_MAX || spitch > INT_MAX) { /* beyond cudaDevAttrMaxPitch: row by row */
    for (size_t i = 0; i < height; i++)
      DIST_CUDA_CALL(cudaMemcpyAsync((char *)dst + i * dpitch, (const char *)src + i * spitch, width,
                                     cudaMemcpyDeviceToDevice, stream));
    return DIST_SUCCESS;
  }
  DIST_CUDA_CALL(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, stream));
  return DIST_SUCCESS;
}

static dist_status widen(const void *src, dist_dtype t, void *dst, size_t n) {
  KERNEL(dist__cuda_widen(src, (int)t, dst, n, stream));
}

static dist_status narrow(const void *src, dist_dtype t, void *dst, size_t n) {
  KERNEL(dist__cuda_narrow(src, (int)t, dst, n, stream));
}

static dist_status divide(void *buf, dist_dtype t, size_t n, int64_t d) {
  KERNEL(dist__cuda_divide(buf, (int)t, n, d, stream));
}

static dist_status copy_pieces(const dist__piece *p, int n, dist_dtype t, int64_t d) {
  KERNEL(dist__cuda_copy_pieces(p, n, (int)t, dist_dtype_size(t), d, stream));
}

static dist_status index_add(void *dst, const void *src, dist_dtype t, int64_t outer, int64_t rows, int64_t inner,
                             const int64_t *idx, int64_t nidx) {
  KERNEL(dist__cuda_index_add(dst, src, (int)t, outer, rows, inner, idx, nidx, stream));
}

static dist_status index_select(void *dst, const void *src, size_t esize, int64_t outer, int64_t rows, int64_t inner,
                                const int64_t *idx, int64_t nidx) {
  KERNEL(dist__cuda_index_select(dst, src, esize, outer, rows, inner, idx, nidx, stream));
}

static dist_status upload(void *dst, const void *src, size_t bytes) {
  DIST_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  return DIST_SUCCESS;
}

static dist_status download(void *dst, const void *src, size_t bytes) {
  DIST_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  return DIST_SUCCESS;
}

static void CUDART_CB free_host(void *p) { free(p); }

/* From a host array the caller may free at once: a copy, freed in stream
 * order once the upload has read it. */
static dist_status upload_copy(void *dst, const void *src, size_t bytes) {
  void *copy = malloc(bytes);
  if (!copy) return dist__error(DIST_ERR_NO_MEMORY, "staging %zu bytes", bytes);
  memcpy(copy, src, bytes);
  cudaError_t e = cudaMemcpyAsync(dst, copy, bytes, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = cudaLaunchHostFunc(stream, free_host, copy);
  if (e != cudaSuccess) {
    DIST_WARN_CALL(cudaStreamSynchronize(stream)); /* make sure nothing still reads `copy` */
    free(copy);
    return dist__cuda_error(e, "uploading indices");
  }
  return DIST_SUCCESS;
}

static dist_status sync(void) {
  DIST_CUDA_CALL(cudaStreamSynchronize(stream));
  return DIST_SUCCESS;
}

static dist_status event_record(void **event) {
  cudaEvent_t e;
  DIST_CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(e, stream);
  if (err != cudaSuccess) {
    DIST_WARN_CALL(cudaEventDestroy(e));
    return dist__cuda_error(err, "cudaEventRecord");
  }
  *event = e;
  return DIST_SUCCESS;
}

dist_status dist__mem_event_wait(void *event) {
  if (!event) return DIST_SUCCESS;
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
  DIST_WARN_CALL(cudaEventDestroy((cudaEvent_t)event));
  return DIST_CUDA_STATUS(e, "cudaEventSynchronize");
}

dist_status dist__mem_event_test(void *event, int *done) {
  *done = 1;
  if (!event) return DIST_SUCCESS;
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* NotReady is not a failure: do not leave it for the next kernel launch */
    *done = 0;
    return DIST_SUCCESS;
  }
  DIST_WARN_CALL(cudaEventDestroy((cudaEvent_t)event));
  return DIST_CUDA_STATUS(e, "cudaEventQuery");
}

const dist__mem_ops dist__mem_cuda = {
    .alloc = alloc,
    .free = release,
    .zero = zero,
    .copy2d = copy2d,
    .widen = widen,
    .narrow = narrow,
    .divide = divide,
    .copy_pieces = copy_pieces,
    .index_add = index_add,
    .index_select = index_select,
    .upload = upload,
    .download = download,
    .upload_copy = upload_copy,
    .sync = sync,
    .event_record = event_record,
};

#else /* built without CUDA: CUDA memory cannot have reached here legitimately */

static dist_status no_cuda(void) {
  return dist__error(DIST_ERR_UNSUPPORTED, "CUDA memory given to a distmgr built without CUDA");
}

dist_status dist__cuda_error(int code, const char *call) {
  return dist__error(DIST_ERR_CUDA, "%s failed: CUDA error %d", call, code);
}

static dist_status alloc(size_t bytes, void **p) {
  *p = NULL;
  return no_cuda();
}
static void release(void *p) {}
static dist_status zero(void *p, size_t b) { return no_cuda(); }
static dist_status copy2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h) { return no_cuda(); }
static dist_status convert(const void *s, dist_dtype t, void *d, size_t n) { return no_cuda(); }
static dist_status divide(void *b, dist_dtype t, size_t n, int64_t d) { return no_cuda(); }
static dist_status copy_pieces(const dist__piece *p, int n, dist_dtype t, int64_t d) { return no_cuda(); }
static dist_status index_add(void *d, const void *s, dist_dtype t, int64_t o, int64_t r, int64_t in, const int64_t *i,
                             int64_t n) {
  return no_cuda();
}
static dist_status index_select(void *d, const void *s, size_t e, int64_t o, int64_t r, int64_t in, const int64_t *i,
                                int64_t n) {
  return no_cuda();
}
static dist_status copy(void *d, const void *s, size_t b) { return no_cuda(); }
static dist_status sync(void) { return no_cuda(); }
static dist_status event_record(void **e) { return no_cuda(); }

dist_status dist__mem_event_wait(void *event) { return event ? no_cuda() : DIST_SUCCESS; }

dist_status dist__mem_event_test(void *event, int *done) {
  *done = 1;
  return event ? no_cuda() : DIST_SUCCESS;
}

const dist__mem_ops dist__mem_cuda = {
    .alloc = alloc,
    .free = release,
    .zero = zero,
    .copy2d = copy2d,
    .widen = convert,
    .narrow = convert,
    .divide = divide,
    .copy_pieces = copy_pieces,
    .index_add = index_add,
    .index_select = index_select,
    .upload = copy,
    .download = copy,
    .upload_copy = copy,
    .sync = sync,
    .event_record = event_record,
};
#endif
