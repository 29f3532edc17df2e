/* Loops over f16 buffers (DDP compression, the MPI 16-bit sum): F16C's
 * 8-wide conversions (vcvtph2ps / vcvtps2ph) where the CPU has them, checked
 * once at run time; the scalar dist_f16_to_f32 / dist_f32_to_f16 elsewhere.
 * Both give the same bits: round to nearest even, subnormals exact, and a NaN
 * narrowed to the canonical quiet NaN (sign | 0x7E00), as the scalar one does. */
#ifndef DISTMGR_F16_LOOPS_H
#define DISTMGR_F16_LOOPS_H

#include <stddef.h>
#include <stdint.h>

void dist__f16_narrow(const float *src, uint16_t *dst, size_t n);
void dist__f16_widen_scale(const uint16_t *src, float *dst, size_t n, float scale); /* a NaN comes out quiet */
void dist__f16_sum(const uint16_t *a, uint16_t *b, size_t n);                    /* b = f16(f32(a) + f32(b)) */
/* b = bf16(f32(a) + f32(b)); a and b must not overlap */
void dist__bf16_sum(const uint16_t *a, uint16_t *b, size_t n);
/* 1 when the F16C loops run on this CPU (tests compare both paths). */
int dist__f16_hw(void);
/* The scalar loops, whatever the CPU (the tests' reference). */
void dist__f16_narrow_scalar(const float *src, uint16_t *dst, size_t n);
void dist__f16_widen_scale_scalar(const uint16_t *src, float *dst, size_t n, float scale);
void dist__f16_sum_scalar(const uint16_t *a, uint16_t *b, size_t n);

#endif
