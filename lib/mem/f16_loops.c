/* f16 loops (see f16_loops.h). GCC 12 does not vectorise the scalar
 * conversions (only with AVX512-FP16), and f16 compression took 6.5x the time
 * of bf16 (bench/reducer); F16C converts 8 values per instruction. */
#include "mem/f16_loops.h"

#include "distmgr/tensor.h"
#include "core/simd.h"
#include "mem/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_F16C_LOOPS 1
#endif

void dist__f16_narrow_scalar(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = dist_f32_to_f16(src[i]);
}

void dist__f16_widen_scale_scalar(const uint16_t *src, float *dst, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) dst[i] = dist_f16_to_f32(src[i]) * scale;
}

void dist__f16_sum_scalar(const uint16_t *a, uint16_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) b[i] = dist_f32_to_f16(dist_f16_to_f32(a[i]) + dist_f16_to_f32(b[i]));
}

#ifdef HAVE_F16C_LOOPS
#define F16C __attribute__((target("avx2,f16c")))

/* 8 floats to f16, NaN lanes replaced by sign | 0x7E00 (vcvtps2ph would keep
 * the payload). */
F16C static inline __m128i narrow8(__m256 x) {
  __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
  __m128i canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7E00));
  return _mm_blendv_epi8(h, canon, nan16);
}

F16C static void narrow_hw(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), narrow8(_mm256_loadu_ps(src + i)));
  dist__f16_narrow_scalar(src + i, dst + i, n - i);
}

F16C static void widen_scale_hw(const uint16_t *src, float *dst, size_t n, float scale) {
  size_t i = 0;
  __m256 k = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))), k));
  dist__f16_widen_scale_scalar(src + i, dst + i, n - i, scale);
}

F16C static void sum_hw(const uint16_t *a, uint16_t *b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 fa = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
    __m256 fb = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
    _mm_storeu_si128((__m128i *)(b + i), narrow8(_mm256_add_ps(fa, fb)));
  }
  dist__f16_sum_scalar(a + i, b + i, n - i);
}

int dist__f16_hw(void) {
  static int hw = -1; /* a race here writes the same value */
  if (hw < 0) hw = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return hw;
}
#else
int dist__f16_hw(void) { return 0; }
#endif

void dist__f16_narrow(const float *src, uint16_t *dst, size_t n) {
#ifdef HAVE_F16C_LOOPS
  if (dist__f16_hw()) return narrow_hw(src, dst, n);
#endif
  dist__f16_narrow_scalar(src, dst, n);
}

void dist__f16_widen_scale(const uint16_t *src, float *dst, size_t n, float scale) {
#ifdef HAVE_F16C_LOOPS
  if (dist__f16_hw()) return widen_scale_hw(src, dst, n, scale);
#endif
  dist__f16_widen_scale_scalar(src, dst, n, scale);
}

void dist__f16_sum(const uint16_t *a, uint16_t *b, size_t n) {
#ifdef HAVE_F16C_LOOPS
  if (dist__f16_hw()) return sum_hw(a, b, n);
#endif
  dist__f16_sum_scalar(a, b, n);
}

/* bf16 needs no conversion instruction (the top half of an f32): GCC
 * vectorises this, and restrict spares it an overlap check (about 15 %). */
DIST__CLONES void dist__bf16_sum(const uint16_t *restrict a, uint16_t *restrict b, size_t n) {
  for (size_t i = 0; i < n; i++) b[i] = dist__f32_bf16(dist__bf16_f32(a[i]) + dist__bf16_f32(b[i]));
}
