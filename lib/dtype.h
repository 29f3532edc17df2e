/* Internal facts about dtypes: kind, element size, reduction type. */
#ifndef DISTMGR_DTYPE_H
#define DISTMGR_DTYPE_H

#include "internal.h"

typedef enum { DIST__FLOAT, DIST__COMPLEX, DIST__INT } dist__kind;

dist__kind dist__dtype_kind(dist_dtype t);
int dist__dtype_is16(dist_dtype t); /* bf16 or f16: reduced in f32 */
int dist__dtype_valid(dist_dtype t);

/* Host conversions between 16-bit floats and f32 (n elements). */
void dist__host_to_f32(const void *src, dist_dtype t, float *dst, size_t n);
void dist__host_from_f32(const float *src, dist_dtype t, void *dst, size_t n);

#endif
