/* The exchange's box copy on host memory: plain row copies when nothing is
 * scaled, else one fused scale-and-copy pass. */
#include <string.h>

#include "fft_internal.h"

/* Weight of last-dim index k for a box (1 unless an r2c weight applies). */
static inline double weight(const dist__fft_box *b, int64_t k) { return k > 0 && 2 * k < b->nlast ? b->wmul : 1.0; }

#define DEFINE_ROW(NAME, REAL)                                                                         \
  static void NAME(const dist__fft_box *b, REAL *d, const REAL *s) {                                   \
    const REAL sc = (REAL)b->scale;                                                                    \
    if (b->wmul == 1.0 && !b->zero_im) {                                                               \
      for (int64_t j = 0; j < 2 * b->row; j++) d[j] = sc * s[j];                                       \
      return;                                                                                          \
    }                                                                                                  \
    int64_t k = b->col0 % b->klast;                                                                    \
    for (int64_t j = 0; j < b->row; j++) {                                                             \
      REAL w = sc * (REAL)weight(b, k);                                                                \
      d[2 * j] = w * s[2 * j];                                                                         \
      d[2 * j + 1] = b->zero_im && (k == 0 || 2 * k == b->nlast) ? (REAL)0 : w * s[2 * j + 1];         \
      if (++k == b->klast) k = 0;                                                                      \
    }                                                                                                  \
  }
DEFINE_ROW(row_f, float)
DEFINE_ROW(row_d, double)

void dist__fft_copy_host(const dist__fft_box *b, int is_double) {
  size_t cs = is_double ? 16 : 8;
  int plain = b->scale == 1.0 && b->wmul == 1.0 && !b->zero_im;
  for (int64_t i = 0; i < b->na; i++)
    for (int64_t j = 0; j < b->nb; j++) {
      char *d = (char *)b->dst + cs * (size_t)(i * b->dsa + j * b->dsb);
      const char *s = (const char *)b->src + cs * (size_t)(i * b->ssa + j * b->ssb);
      if (plain) memcpy(d, s, cs * (size_t)b->row);
      else if (is_double) row_d(b, (double *)d, (const double *)s);
      else row_f(b, (float *)d, (const float *)s);
    }
}
