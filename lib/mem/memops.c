/* Memory operations: host implementations and CUDA dispatch. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mem/memops.h"

#ifdef HAVE_CUDA
static _Thread_local cudaStream_t stream = 0;

cudaStream_t dist__cuda_stream(void) { return stream; }

dist_status dist_cuda_set_stream(cudaStream_t s) {
  stream = s;
  return DIST_SUCCESS;
}

cudaStream_t dist_cuda_stream(void) { return stream; }

dist_status dist__cuda_error(cudaError_t e, const char *call) {
  return dist__error(DIST_ERR_CUDA, "%s failed: %s", call, cudaGetErrorString(e));
}

#define CUDA_CALL(call) \
  do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return dist__cuda_error(e_, #call); } while (0)
/* Launchers return non-zero on failure; earlier errors are cleared first. */
#define KERNEL(call)                                                                  \
  do {                                                                                \
    (void)cudaGetLastError();                                                         \
    if (call) {                                                                       \
      cudaError_t e_ = cudaGetLastError();                                            \
      if (e_ == cudaSuccess) return dist__error(DIST_ERR_INTERNAL, "%s: unsupported dtype", #call); \
      return dist__cuda_error(e_, #call);                                             \
    }                                                                                 \
  } while (0)
#else
#define NO_CUDA() dist__error(DIST_ERR_UNSUPPORTED, "CUDA memory given to a distmgr built without CUDA")
#endif

dist_status dist__mem_alloc(dist_memory mem, size_t bytes, void **p) {
  if (mem == DIST_MEM_HOST) {
    *p = malloc(bytes ? bytes : 1);
    return *p ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "scratch buffer of %zu bytes", bytes);
  }
#ifdef HAVE_CUDA
  /* Stream-ordered: no device-wide synchronisation, unlike cudaMalloc/cudaFree. */
  CUDA_CALL(cudaMallocAsync(p, bytes ? bytes : 1, stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

void dist__mem_free(dist_memory mem, void *p) {
  if (!p) return;
  if (mem == DIST_MEM_HOST) free(p);
#ifdef HAVE_CUDA
  else cudaFreeAsync(p, stream);
#endif
}

dist_status dist__mem_zero(dist_memory mem, void *p, size_t bytes) {
  if (mem == DIST_MEM_HOST) {
    if (bytes) memset(p, 0, bytes);
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  CUDA_CALL(cudaMemsetAsync(p, 0, bytes, stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_copy2d(dist_memory mem, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                             size_t height) {
  if (!width || !height || dst == src) return DIST_SUCCESS;
  size_t end; /* the span of either side: (height - 1) pitches and one row */
  if (__builtin_mul_overflow(height - 1, dpitch > spitch ? dpitch : spitch, &end) ||
      __builtin_add_overflow(end, width, &end) || __builtin_mul_overflow(width, height, &end))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "2-D copy of %zu rows of %zu bytes (pitches %zu and %zu) overflows size_t",
                       height, width, dpitch, spitch);
  if (mem == DIST_MEM_HOST) {
    if (dpitch == width && spitch == width) memmove(dst, src, width * height);
    else
      for (size_t i = 0; i < height; i++) memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  if (height == 1 || (dpitch == width && spitch == width)) { /* one run: no pitch limit applies */
    CUDA_CALL(cudaMemcpyAsync(dst, src, width * height, cudaMemcpyDeviceToDevice, stream));
    return DIST_SUCCESS;
  }
  if (dpitch > INT_MAX || spitch > INT_MAX) { /* beyond cudaDevAttrMaxPitch: row by row */
    for (size_t i = 0; i < height; i++)
      CUDA_CALL(cudaMemcpyAsync((char *)dst + i * dpitch, (const char *)src + i * spitch, width,
                                cudaMemcpyDeviceToDevice, stream));
    return DIST_SUCCESS;
  }
  CUDA_CALL(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_widen(dist_memory mem, const void *src, dist_dtype t, void *dst, size_t n) {
  if (mem == DIST_MEM_HOST) {
    dist__host_widen(src, t, dst, n);
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  KERNEL(dist__cuda_widen(src, (int)t, dst, n, stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_narrow(dist_memory mem, const void *src, dist_dtype t, void *dst, size_t n) {
  if (mem == DIST_MEM_HOST) {
    dist__host_narrow(src, t, dst, n);
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  KERNEL(dist__cuda_narrow(src, (int)t, dst, n, stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

#define DIVIDE(T, buf, n, d)                              \
  do {                                                    \
    T *b_ = (T *)(buf);                                   \
    for (size_t i_ = 0; i_ < (n); i_++) b_[i_] = (T)(b_[i_] / (d)); \
  } while (0)

dist_status dist__mem_divide(dist_memory mem, void *buf, dist_dtype t, size_t n, int64_t d) {
  if (mem != DIST_MEM_HOST) {
#ifdef HAVE_CUDA
    KERNEL(dist__cuda_divide(buf, (int)t, n, d, stream));
    return DIST_SUCCESS;
#else
    return NO_CUDA();
#endif
  }
  switch (t) {
    case DIST_F32: DIVIDE(float, buf, n, d); break;
    case DIST_C64: DIVIDE(float, buf, 2 * n, d); break; /* (re, im) pairs */
    case DIST_F64: DIVIDE(double, buf, n, d); break;
    case DIST_C128: DIVIDE(double, buf, 2 * n, d); break;
    case DIST_I32: DIVIDE(int32_t, buf, n, d); break;
    case DIST_I64: DIVIDE(int64_t, buf, n, d); break;
    case DIST_U8: DIVIDE(uint8_t, buf, n, d); break;
    default: return dist__error(DIST_ERR_INTERNAL, "divide of %s", dist_dtype_name(t));
  }
  return DIST_SUCCESS;
}

#define INDEX_ADD(T, w)                                                            \
  do {                                                                             \
    T *d_ = dst;                                                                   \
    const T *s_ = src;                                                             \
    int64_t in_ = inner * (w);                                                     \
    for (int64_t o = 0; o < outer; o++)                                            \
      for (int64_t k = 0; k < nidx; k++) {                                         \
        T *dr = d_ + (o * rows + idx[k]) * in_;                                    \
        const T *sr = s_ + (o * nidx + k) * in_;                                   \
        for (int64_t i = 0; i < in_; i++) dr[i] += sr[i];                          \
      }                                                                            \
  } while (0)

/* [outer, rows, inner] blocks of esize bytes with rows = max(rows, nidx): an
 * error when a count or byte offset of the loops below overflows int64. */
static dist_status check_block(const char *what, int64_t outer, int64_t rows, int64_t inner, int64_t nidx,
                               size_t esize) {
  int64_t n = (int64_t)esize;
  if (outer < 0 || rows < 0 || inner < 0 || nidx < 0 || __builtin_mul_overflow(n, outer, &n) ||
      __builtin_mul_overflow(n, rows > nidx ? rows : nidx, &n) || __builtin_mul_overflow(n, inner, &n))
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: outer %lld x rows %lld (%lld indices) x inner %lld elements of %zu bytes overflows int64",
                       what, (long long)outer, (long long)rows, (long long)nidx, (long long)inner, esize);
  return DIST_SUCCESS;
}

dist_status dist__mem_index_add(dist_memory mem, void *dst, const void *src, dist_dtype t, int64_t outer, int64_t rows,
                                int64_t inner, const int64_t *idx, int64_t nidx) {
  DIST_CHECK(check_block("index-add", outer, rows, inner, nidx, dist_dtype_size(t)));
  if (mem != DIST_MEM_HOST) {
#ifdef HAVE_CUDA
    KERNEL(dist__cuda_index_add(dst, src, (int)t, outer, rows, inner, idx, nidx, stream));
    return DIST_SUCCESS;
#else
    return NO_CUDA();
#endif
  }
  switch (t) {
    case DIST_F32: INDEX_ADD(float, 1); break;
    case DIST_C64: INDEX_ADD(float, 2); break;
    case DIST_F64: INDEX_ADD(double, 1); break;
    case DIST_C128: INDEX_ADD(double, 2); break;
    case DIST_I32: INDEX_ADD(int32_t, 1); break;
    case DIST_I64: INDEX_ADD(int64_t, 1); break;
    case DIST_U8: INDEX_ADD(uint8_t, 1); break;
    default: return dist__error(DIST_ERR_INTERNAL, "index-add of %s", dist_dtype_name(t));
  }
  return DIST_SUCCESS;
}

dist_status dist__mem_index_select(dist_memory mem, void *dst, const void *src, size_t esize, int64_t outer,
                                   int64_t rows, int64_t inner, const int64_t *idx, int64_t nidx) {
  DIST_CHECK(check_block("index-select", outer, rows, inner, nidx, esize));
  if (mem != DIST_MEM_HOST) {
#ifdef HAVE_CUDA
    KERNEL(dist__cuda_index_select(dst, src, esize, outer, rows, inner, idx, nidx, stream));
    return DIST_SUCCESS;
#else
    return NO_CUDA();
#endif
  }
  size_t row = (size_t)inner * esize;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < nidx; k++)
      memcpy((char *)dst + (size_t)(o * nidx + k) * row, (const char *)src + (size_t)(o * rows + idx[k]) * row, row);
  return DIST_SUCCESS;
}

static dist_status copy(dist_memory mem, void *dst, const void *src, size_t bytes, int up) {
  if (!bytes) return DIST_SUCCESS;
  if (mem == DIST_MEM_HOST) {
    memcpy(dst, src, bytes);
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_upload(dist_memory mem, void *dst, const void *src, size_t bytes) {
  return copy(mem, dst, src, bytes, 1);
}

dist_status dist__mem_download(dist_memory mem, void *dst, const void *src, size_t bytes) {
  return copy(mem, dst, src, bytes, 0);
}

#ifdef HAVE_CUDA
static void CUDART_CB free_host(void *p) { free(p); }
#endif

dist_status dist__mem_upload_copy(dist_memory mem, void *dst, const void *src, size_t bytes) {
  if (mem == DIST_MEM_HOST || !bytes) return dist__mem_upload(mem, dst, src, bytes);
#ifdef HAVE_CUDA
  void *copy = malloc(bytes);
  if (!copy) return dist__error(DIST_ERR_NO_MEMORY, "staging %zu bytes", bytes);
  memcpy(copy, src, bytes);
  cudaError_t e = cudaMemcpyAsync(dst, copy, bytes, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = cudaLaunchHostFunc(stream, free_host, copy);
  if (e != cudaSuccess) {
    cudaStreamSynchronize(stream); /* error path: make sure nothing still reads `copy` */
    free(copy);
    return dist__cuda_error(e, "uploading indices");
  }
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_sync(dist_memory mem) {
  if (mem == DIST_MEM_HOST) return DIST_SUCCESS;
#ifdef HAVE_CUDA
  CUDA_CALL(cudaStreamSynchronize(stream));
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_event_record(dist_memory mem, void **event) {
  *event = NULL;
  if (mem == DIST_MEM_HOST) return DIST_SUCCESS;
#ifdef HAVE_CUDA
  cudaEvent_t e;
  CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(e, stream);
  if (err != cudaSuccess) {
    cudaEventDestroy(e);
    return dist__cuda_error(err, "cudaEventRecord");
  }
  *event = e;
  return DIST_SUCCESS;
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_event_wait(void *event) {
  if (!event) return DIST_SUCCESS;
#ifdef HAVE_CUDA
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
  cudaEventDestroy((cudaEvent_t)event);
  return e == cudaSuccess ? DIST_SUCCESS : dist__cuda_error(e, "cudaEventSynchronize");
#else
  return NO_CUDA();
#endif
}

dist_status dist__mem_event_test(void *event, int *done) {
  *done = 1;
  if (!event) return DIST_SUCCESS;
#ifdef HAVE_CUDA
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* NotReady is not a failure: do not leave it for the next kernel launch */
    *done = 0;
    return DIST_SUCCESS;
  }
  cudaEventDestroy((cudaEvent_t)event);
  return e == cudaSuccess ? DIST_SUCCESS : dist__cuda_error(e, "cudaEventQuery");
#else
  return NO_CUDA();
#endif
}
