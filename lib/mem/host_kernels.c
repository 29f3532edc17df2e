/* Host loops over whole buffers: 16-bit conversions for compression and the
 * scaled write-back of averaged gradients. Each is one pass compiled per
 * x86-64 level (simd.h): these loops run over every gradient byte of an
 * iteration, so on AVX-512 they move at memory speed instead of being
 * bound by the baseline's 16-bit shuffles. */
#include "mem/dtype.h"
#include "mem/f16_loops.h"
#include "mem/half.h"
#include "core/simd.h"

DIST__CLONES static void widen_bf16(const uint16_t *restrict s, float *restrict d, size_t n, float f) {
  for (size_t i = 0; i < n; i++) d[i] = dist__bf16_f32(s[i]) * f;
}

DIST__CLONES static void widen_bf16_exact(const uint16_t *restrict s, float *restrict d, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = dist__bf16_f32(s[i]);
}

DIST__CLONES static void narrow_bf16(const float *restrict s, uint16_t *restrict d, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = dist__f32_bf16(s[i]);
}

/* src may equal dst (a bucket view scaled in place), hence no restrict. */
DIST__CLONES static void scale_f32(const float *s, float *d, size_t n, float f) {
  for (size_t i = 0; i < n; i++) d[i] = s[i] * f;
}

DIST__CLONES static void scale_f64(const double *s, double *d, size_t n, double f) {
  for (size_t i = 0; i < n; i++) d[i] = s[i] * f;
}

/* f16 through F16C where the CPU has it (f16_loops.c): GCC 12 vectorises the
 * scalar conversions only with AVX512-FP16. */

/* Exact: no multiply, so NaN payloads and subnormals pass unchanged. */
void dist__host_widen(const void *src, dist_dtype t, void *dst, size_t n) {
  if (t == DIST_U8)
    for (size_t i = 0; i < n; i++) ((int64_t *)dst)[i] = ((const uint8_t *)src)[i];
  else if (t == DIST_BF16)
    widen_bf16_exact(src, dst, n);
  else
    for (size_t i = 0; i < n; i++) ((float *)dst)[i] = dist_f16_to_f32(((const uint16_t *)src)[i]);
}

void dist__host_narrow(const void *src, dist_dtype t, void *dst, size_t n) {
  if (t == DIST_U8) /* an average of u8 values fits */
    for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)((const int64_t *)src)[i];
  else if (t == DIST_BF16)
    narrow_bf16(src, dst, n);
  else
    dist__f16_narrow(src, dst, n);
}

void dist__host_widen_scale(const void *src, dist_dtype t, void *dst, size_t n, double f) {
  switch (t) {
    case DIST_BF16: widen_bf16(src, dst, n, (float)f); break;
    case DIST_F16: dist__f16_widen_scale(src, dst, n, (float)f); break;
    case DIST_F32: scale_f32(src, dst, n, (float)f); break;
    default: scale_f64(src, dst, n, f); break; /* f64: callers pass only these four */
  }
}
