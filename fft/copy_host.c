/* The exchange's box copy on host memory: plain row copies when nothing is
 * scaled, else one fused scale-and-copy pass. */
#include <string.h>

#include "fft_internal.h"

/* One row: a scaled copy the compiler vectorises (or memcpy), then the
 * rarely used column weights and the DC/Nyquist patch, visiting only the
 * elements they touch. */
#define DEFINE_ROW(NAME, REAL)                                                                         \
  static void NAME(const dist__fft_box *b, REAL *restrict d, const REAL *restrict s) {                 \
    const REAL sc = (REAL)b->scale;                                                                    \
    if (b->scale == 1.0) memcpy(d, s, sizeof(REAL) * 2 * (size_t)b->row);                              \
    else                                                                                               \
      for (int64_t j = 0; j < 2 * b->row; j++) d[j] = sc * s[j];                                       \
    int64_t k0 = b->col0 % b->klast;                                                                   \
    if (b->wmul != 1.0) {                                                                              \
      const REAL w = (REAL)b->wmul;                                                                    \
      for (int64_t j = 0, k = k0; j < b->row; j++, k = k + 1 == b->klast ? 0 : k + 1)                  \
        if (k > 0 && 2 * k < b->nlast) d[2 * j] *= w, d[2 * j + 1] *= w;                               \
    }                                                                                                  \
    if (b->zero_im) {                                                                                  \
      for (int64_t j = (b->klast - k0) % b->klast; j < b->row; j += b->klast) d[2 * j + 1] = 0;         \
      if (b->nlast % 2 == 0 && b->nlast / 2 < b->klast)                                                \
        for (int64_t j = (b->nlast / 2 - k0 + b->klast) % b->klast; j < b->row; j += b->klast)          \
          d[2 * j + 1] = 0;                                                                            \
    }                                                                                                  \
  }
DEFINE_ROW(row_f, float)
DEFINE_ROW(row_d, double)

void dist__fft_copy_host(const dist__fft_box *b, int is_double) {
  size_t cs = is_double ? 16 : 8;
  /* An empty box (an empty piece has NULL data): nothing to copy, and
   * memcpy must not see a NULL pointer even for 0 bytes (as the CUDA copy). */
  if (b->na <= 0 || b->nb <= 0 || b->row <= 0) return;
  int plain = b->scale == 1.0 && b->wmul == 1.0 && !b->zero_im;
  if (plain && b->nb > 1 && b->dsb == b->row && b->ssb == b->row && b->na == 1) { /* one block */
    memcpy(b->dst, b->src, cs * (size_t)(b->row * b->nb));
    return;
  }
  for (int64_t i = 0; i < b->na; i++)
    for (int64_t j = 0; j < b->nb; j++) {
      char *d = (char *)b->dst + cs * (size_t)(i * b->dsa + j * b->dsb);
      const char *s = (const char *)b->src + cs * (size_t)(i * b->ssa + j * b->ssb);
      if (plain) memcpy(d, s, cs * (size_t)b->row);
      else if (is_double) row_d(b, (double *)d, (const double *)s);
      else row_f(b, (float *)d, (const float *)s);
    }
}

/* Make the DC and Nyquist planes of 3-D r2c rows Hermitian along n1:
 * h[k1] := (h[k1] + conj(h[-k1])) / 2. A multi-dimensional c2r is only
 * defined for such input (cuFFT); FFTW's result is the same either way. */
#define DEFINE_HERMITIZE(NAME, REAL)                                                                   \
  static void NAME(REAL *a, int64_t entries, int64_t n1, int64_t R, int64_t n2) {                      \
    for (int64_t e = 0; e < entries; e++)                                                              \
      for (int64_t c = 0; c <= n2 / 2; c += n2 % 2 == 0 && n2 > 1 ? n2 / 2 : n2 + 1)                   \
        for (int64_t k = 0; k <= n1 - k; k++) {                                                        \
          int64_t kk = (n1 - k) % n1;                                                                  \
          REAL *x = a + 2 * ((e * n1 + k) * R + c), *y = a + 2 * ((e * n1 + kk) * R + c);              \
          REAL re = (x[0] + y[0]) / 2, im = (x[1] - y[1]) / 2;                                         \
          x[0] = re, x[1] = im, y[0] = re, y[1] = -im;                                                 \
        }                                                                                              \
  }
DEFINE_HERMITIZE(herm_f, float)
DEFINE_HERMITIZE(herm_d, double)

void dist__fft_hermitize_host(void *a, int is_double, int64_t entries, int64_t n1, int64_t R, int64_t n2) {
  if (is_double) herm_d(a, entries, n1, R, n2);
  else herm_f(a, entries, n1, R, n2);
}
