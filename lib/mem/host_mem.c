/* Host memory's operations (memops.h): libc and plain loops. Arguments
 * were checked by memops.c. */
#include <stdlib.h>
#include <string.h>

#include "mem/memops.h"

static dist_status alloc(size_t bytes, void **p) {
  *p = malloc(bytes);
  return *p ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "scratch buffer of %zu bytes", bytes);
}

static void release(void *p) { free(p); }

static dist_status zero(void *p, size_t bytes) {
  memset(p, 0, bytes);
  return DIST_SUCCESS;
}

static dist_status copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height) {
  if (dpitch == width && spitch == width) memmove(dst, src, width * height);
  else
    for (size_t i = 0; i < height; i++) memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
  return DIST_SUCCESS;
}

static dist_status widen(const void *src, dist_dtype t, void *dst, size_t n) {
  dist__host_widen(src, t, dst, n);
  return DIST_SUCCESS;
}

static dist_status narrow(const void *src, dist_dtype t, void *dst, size_t n) {
  dist__host_narrow(src, t, dst, n);
  return DIST_SUCCESS;
}

#define DIVIDE(T, buf, n, d)                                        \
  do {                                                              \
    T *b_ = (T *)(buf);                                             \
    for (size_t i_ = 0; i_ < (n); i_++) b_[i_] = (T)(b_[i_] / (d)); \
  } while (0)

static dist_status divide(void *buf, dist_dtype t, size_t n, int64_t d) {
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

static dist_status copy_pieces(const dist__piece *p, int n, dist_dtype t, int64_t d) {
  size_t esize = dist_dtype_size(t);
  for (int k = 0; k < n; k++) {
    if (d == 1 || !dist__dtype_is16(t)) {
      memcpy(p[k].dst, p[k].src, p[k].n * esize);
      dist_status e = d > 1 ? divide(p[k].dst, t, p[k].n, d) : DIST_SUCCESS;
      if (e) return e;
      continue;
    }
    float f[256]; /* 16-bit: widen, divide and narrow a block at a time */
    for (size_t i = 0; i < p[k].n; i += 256) {
      size_t m = p[k].n - i < 256 ? p[k].n - i : 256;
      dist__host_widen((const char *)p[k].src + i * 2, t, f, m);
      for (size_t j = 0; j < m; j++) f[j] = f[j] / d;
      dist__host_narrow(f, t, (char *)p[k].dst + i * 2, m);
    }
  }
  return DIST_SUCCESS;
}

#define INDEX_ADD(T, w)                                   \
  do {                                                    \
    T *d_ = dst;                                          \
    const T *s_ = src;                                    \
    int64_t in_ = inner * (w);                            \
    for (int64_t o = 0; o < outer; o++)                   \
      for (int64_t k = 0; k < nidx; k++) {                \
        T *dr = d_ + (o * rows + idx[k]) * in_;           \
        const T *sr = s_ + (o * nidx + k) * in_;          \
        for (int64_t i = 0; i < in_; i++) dr[i] += sr[i]; \
      }                                                   \
  } while (0)

static dist_status index_add(void *dst, const void *src, dist_dtype t, int64_t outer, int64_t rows, int64_t inner,
                             const int64_t *idx, int64_t nidx) {
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

static dist_status index_select(void *dst, const void *src, size_t esize, int64_t outer, int64_t rows, int64_t inner,
                                const int64_t *idx, int64_t nidx) {
  size_t row = (size_t)inner * esize;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < nidx; k++)
      memcpy((char *)dst + (size_t)(o * nidx + k) * row, (const char *)src + (size_t)(o * rows + idx[k]) * row, row);
  return DIST_SUCCESS;
}

static dist_status copy(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return DIST_SUCCESS;
}

static dist_status nothing(void) { return DIST_SUCCESS; } /* host work is done when the call returns */

static dist_status no_event(void **event) {
  *event = NULL;
  return DIST_SUCCESS;
}

const dist__mem_ops dist__mem_host = {
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
    .upload = copy,
    .download = copy,
    .upload_copy = copy,
    .sync = nothing,
    .event_record = no_event,
};
