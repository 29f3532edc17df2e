/* Exact-erf GELU, 0.5 x (1 + erf(x / sqrt 2)), and its derivative, in loops
 * the compiler vectorises: glibc's erff and expf are scalar calls, which made
 * GELU a third of a training step (perf, bench/afno 256). 1 + erf(x/sqrt 2)
 * is 2 - erfc(|x|/sqrt 2) or erfc(|x|/sqrt 2) for x < 0, with erfc from the
 * Chebyshev fit of Numerical Recipes' erfcc (fractional error < 1.2e-7
 * everywhere, so also in the tail) and exp from the Cephes expf polynomial
 * (about 1 ulp). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "afno_internal.h"
#include "core/simd.h"

/* e^x for x <= 0 (the only arguments here: -x^2/2). */
static inline __attribute__((always_inline)) float exp_neg(float x) {
  const float x0 = x;
  x = x < -87.0f ? -87.0f : x;
  float k = x * 1.44269504088896341f;
  k = (k + 12582912.0f) - 12582912.0f; /* round to nearest (1.5 * 2^23) */
  float r = x - k * 0.693359375f + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)k + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return x0 < -87.0f ? 0.0f : p * scale; /* below the normal range: 0, not e^-87 */
}

/* 1 + erf(x / sqrt 2), and e^(-x^2/2) for the derivative. */
static inline __attribute__((always_inline)) float one_plus_erf(float x, float *gauss) {
  const float z = fabsf(x) * (float)M_SQRT1_2, t = 1.0f / (1.0f + 0.5f * z);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  q = q < 0.0f ? q : 0.0f; /* log(erfc(z) e^(z^2) / t) <= 0; only rounding makes it 3e-8 at z = 0 */
  const float e = exp_neg(-0.5f * x * x), tail = t * exp_neg(-0.5f * x * x + q);
  *gauss = e;
  return x < 0.0f ? tail : 2.0f - tail; /* erfc(|x| / sqrt 2) */
}

DIST__CLONES void afno_gelu(const float *h, float *z, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g;
    z[i] = 0.5f * h[i] * one_plus_erf(h[i], &g);
  }
}

/* dz *= gelu'(h) = 0.5 (1 + erf(h/sqrt 2)) + h e^(-h^2/2) / sqrt(2 pi). */
DIST__CLONES void afno_gelu_backward(const float *h, float *dz, int64_t n) {
  const float c = (float)(0.5 * M_2_SQRTPI * M_SQRT1_2);
  for (int64_t i = 0; i < n; i++) {
    float g, s = one_plus_erf(h[i], &g);
    dz[i] *= 0.5f * s + h[i] * g * c;
  }
}
