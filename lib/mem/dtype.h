/* Internal facts about dtypes: kind, element size, reduction type. */
#ifndef DISTMGR_DTYPE_H
#define DISTMGR_DTYPE_H

#include "core/internal.h"

typedef enum { DIST__FLOAT, DIST__COMPLEX, DIST__INT } dist__kind;

dist__kind dist__dtype_kind(dist_dtype t);
int dist__dtype_is16(dist_dtype t); /* bf16 or f16: reduced in f32 */
int dist__dtype_valid(dist_dtype t);
/* dist_dtype_size inline, for the library's per-call paths (remote calls:
 * a call through to tensor.c was 16 instructions, callgrind). */
extern const unsigned char dist__dtype_sizes[DIST_DTYPE_COUNT];
static inline size_t dist__dtype_size(dist_dtype t) {
  return (unsigned)t < DIST_DTYPE_COUNT ? dist__dtype_sizes[t] : 0;
}
/* The type a reduction runs in: f32 for bf16/f16 (accumulate in f32, round
 * once), i64 for a u8 average (the sum would wrap), else t itself. */
dist_dtype dist__wire_type(dist_dtype t, int op);

/* Host conversions between t and its wider type (bf16/f16 <-> f32, u8 <-> i64). */
void dist__host_widen(const void *src, dist_dtype t, void *dst, size_t n);
void dist__host_narrow(const void *src, dist_dtype t, void *dst, size_t n);
/* dst = f * src as f32 (src bf16, f16 or f32) or f64 (src f64): the widening
 * write-back of a compressed bucket, or a plain scaled copy. */
void dist__host_widen_scale(const void *src, dist_dtype t, void *dst, size_t n, double f);

#endif
