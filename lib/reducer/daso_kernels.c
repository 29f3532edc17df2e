/* DASO's host loops over the parameters: pack the change since ref into the
 * wire type, and merge what came back. One pass each, in the parameters'
 * own type (f32 or f64) and with the 16-bit conversions inline, so GCC
 * vectorises them: at 4M parameters the earlier gather-into-double /
 * merge / scatter passes cost more than the transfer they prepared.
 * Instantiated for every (parameter type, wire type) pair by one macro. */
#include "reducer/daso_internal.h"
#include "mem/half.h"
#include "core/simd.h"

#define WIRE_BF16(x) dist__f32_bf16((float)(x))
#define UNWIRE_BF16(w) dist__bf16_f32(w)
#define WIRE_F16(x) dist_f32_to_f16((float)(x))
#define UNWIRE_F16(w) dist_f16_to_f32(w)
#define WIRE_F32(x) ((float)(x))
#define UNWIRE_F32(w) (w)

/* bad |= (x not finite): x - x is 0 for finite x and NaN otherwise; a
 * comparison rather than isfinite() keeps the loop vectorisable. */
#define KERNELS(T, TN, W, WN)                                                                                        \
  DIST__CLONES static int pack_##TN##_##WN(const T *restrict p, const T *restrict ref, T *restrict sent, W *restrict wire,         \
                              int64_t n) {                                                                         \
    int bad = 0;                                                                                                   \
    for (int64_t k = 0; k < n; k++) {                                                                              \
      wire[k] = WIRE_##WN(p[k] - ref[k]);                                                                          \
      T back = (T)UNWIRE_##WN(wire[k]);                                                                            \
      bad |= !(back - back == 0);                                                                                  \
    }                                                                                                              \
    if (sent)                                                                                                      \
      for (int64_t k = 0; k < n; k++) sent[k] = ref[k] + (T)UNWIRE_##WN(wire[k]);                                  \
    return bad;                                                                                                    \
  }                                                                                                                \
  DIST__CLONES static void merge_##TN##_##WN(T *restrict p, T *restrict ref, const W *restrict sum, int64_t n, T nodes, T w,    \
                                int blocking) {                                                                    \
    if (blocking) /* two loops: a branch inside would stop vectorisation */                                     \
      for (int64_t k = 0; k < n; k++) p[k] = ref[k] = ref[k] + (T)UNWIRE_##WN(sum[k]) / nodes;                     \
    else                                                                                                           \
      for (int64_t k = 0; k < n; k++) {                                                                            \
        T avg = ref[k] + (T)UNWIRE_##WN(sum[k]) / nodes;                                                           \
        p[k] = (w * p[k] + nodes * avg) / (nodes + w);                                                             \
        ref[k] = avg;                                                                                              \
      }                                                                                                            \
  }                                                                                                                \
  DIST__CLONES static void delta_##TN##_##WN(T *restrict p, T *restrict ref, const W *restrict sum, const T *restrict own,     \
                                int64_t n, T nodes) {                                                              \
    for (int64_t k = 0; k < n; k++) {                                                                              \
      T avg = ref[k] + (T)UNWIRE_##WN(sum[k]) / nodes;                                                             \
      p[k] += avg - own[k];                                                                                        \
      ref[k] = avg;                                                                                                \
    }                                                                                                              \
  }                                                                                                                \
  DIST__CLONES static void advance_##TN##_##WN(T *restrict ref, const W *restrict sum, int64_t n, T nodes) {       \
    for (int64_t k = 0; k < n; k++) ref[k] = ref[k] + (T)UNWIRE_##WN(sum[k]) / nodes;                              \
  }

KERNELS(float, f32, uint16_t, BF16)
KERNELS(float, f32, uint16_t, F16)
KERNELS(float, f32, float, F32)
KERNELS(double, f64, uint16_t, BF16)
KERNELS(double, f64, uint16_t, F16)
KERNELS(double, f64, float, F32)

/* 1 when a wire value is not finite (an f16 or f32 sum of finite changes
 * can overflow). */
#define FINITE(W, WN)                                                                                                \
  DIST__CLONES static int bad_##WN(const W *restrict wire, int64_t n) {                                            \
    int bad = 0;                                                                                                   \
    for (int64_t k = 0; k < n; k++) {                                                                              \
      float x = UNWIRE_##WN(wire[k]);                                                                              \
      bad |= !(x - x == 0);                                                                                        \
    }                                                                                                              \
    return bad;                                                                                                    \
  }
FINITE(uint16_t, BF16)
FINITE(uint16_t, F16)
FINITE(float, F32)

/* Dispatch on (parameter type, wire type); callers checked both. An
 * expression, so it serves void and int kernels alike. */
#define DISPATCH(pt, wt, F, ...)                                                                          \
  ((pt) == DIST_F32 ? ((wt) == DIST_BF16  ? F##_f32_BF16(__VA_ARGS__)                                     \
                       : (wt) == DIST_F16 ? F##_f32_F16(__VA_ARGS__)                                      \
                                          : F##_f32_F32(__VA_ARGS__))                                     \
                    : ((wt) == DIST_BF16  ? F##_f64_BF16(__VA_ARGS__)                                     \
                       : (wt) == DIST_F16 ? F##_f64_F16(__VA_ARGS__)                                      \
                                          : F##_f64_F32(__VA_ARGS__)))

int dist__daso_pack(dist_dtype pt, const void *p, const void *ref, void *sent, dist_dtype wt, void *wire, int64_t n) {
  return DISPATCH(pt, wt, pack, p, ref, sent, wire, n);
}

void dist__daso_merge(dist_dtype pt, void *p, void *ref, dist_dtype wt, const void *sum, int64_t n, int nodes, int btw,
                      int blocking) {
  DISPATCH(pt, wt, merge, p, ref, sum, n, nodes, btw > 0 ? 2.0 * btw : 1.0, blocking);
}

void dist__daso_merge_delta(dist_dtype pt, void *p, void *ref, dist_dtype wt, const void *sum, const void *own, int64_t n,
                            int nodes) {
  DISPATCH(pt, wt, delta, p, ref, sum, own, n, nodes);
}

void dist__daso_advance_ref(dist_dtype pt, void *ref, dist_dtype wt, const void *sum, int64_t n, int nodes) {
  DISPATCH(pt, wt, advance, ref, sum, n, nodes);
}

int dist__daso_wire_bad(dist_dtype wt, const void *wire, int64_t n) {
  return wt == DIST_BF16 ? bad_BF16(wire, n) : wt == DIST_F16 ? bad_F16(wire, n) : bad_F32(wire, n);
}
