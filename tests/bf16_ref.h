/* bf16 <-> f32 for the tests' own references, independent of distmgr's
 * conversions: round to nearest even (no NaN handling: the tests' values are
 * finite). */
#ifndef DISTMGR_TESTS_BF16_REF_H
#define DISTMGR_TESTS_BF16_REF_H

#include <stdint.h>
#include <string.h>

static inline uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#endif
