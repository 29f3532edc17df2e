/* Inline bf16 <-> f32 conversions for hot host loops (compression, the MPI
 * 16-bit sum): branch-free, so compilers vectorise them; the exported
 * dist_bf16_to_f32 / dist_f32_to_bf16 are these. */
#ifndef DISTMGR_HALF_H
#define DISTMGR_HALF_H

#include <stdint.h>
#include <string.h>

static inline float dist__bf16_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even; a NaN stays a (quiet) NaN. */
static inline uint16_t dist__f32_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded);
}

#endif
