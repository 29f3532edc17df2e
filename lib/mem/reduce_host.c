/* Element-wise host reductions (reduce_host.h). One loop per (type, op):
 * the compiler vectorises each. Integers wrap as MPI's do (u8 sums). */
#include <complex.h>
#include <stdint.h>

#include "mem/f16_loops.h"
#include "mem/reduce_host.h"

int dist__reduce_host_can(dist_dtype t, dist_reduce_op op) {
  switch (t) {
  case DIST_F32: case DIST_F64: case DIST_I32: case DIST_I64: case DIST_U8:
    return op == DIST_SUM || op == DIST_PROD || op == DIST_MIN || op == DIST_MAX;
  case DIST_C64: case DIST_C128: return op == DIST_SUM || op == DIST_PROD;
  case DIST_BF16: case DIST_F16: return op == DIST_SUM;
  default: return 0;
  }
}

#define LOOP(T, EXPR)                                                    \
  do {                                                                   \
    T *restrict a = acc;                                                 \
    const T *restrict b = in;                                            \
    for (size_t i = 0; i < n; i++) a[i] = (EXPR);                        \
  } while (0)

#define REAL(T)                                                          \
  switch (op) {                                                          \
  case DIST_SUM: LOOP(T, a[i] + b[i]); break;                            \
  case DIST_PROD: LOOP(T, a[i] * b[i]); break;                           \
  case DIST_MIN: LOOP(T, b[i] < a[i] ? b[i] : a[i]); break;              \
  default: LOOP(T, b[i] > a[i] ? b[i] : a[i]); break;                    \
  }

/* Signed sums and products wrap through the unsigned type (no UB). */
#define INT(T, U)                                                        \
  switch (op) {                                                          \
  case DIST_SUM: LOOP(T, (T)((U)a[i] + (U)b[i])); break;                 \
  case DIST_PROD: LOOP(T, (T)((U)a[i] * (U)b[i])); break;                \
  case DIST_MIN: LOOP(T, b[i] < a[i] ? b[i] : a[i]); break;              \
  default: LOOP(T, b[i] > a[i] ? b[i] : a[i]); break;                    \
  }

#define COMPLEX(T)                                                       \
  switch (op) {                                                          \
  case DIST_SUM: LOOP(T, a[i] + b[i]); break;                            \
  default: LOOP(T, a[i] * b[i]); break;                                  \
  }

void dist__reduce_host(void *acc, const void *in, size_t n, dist_dtype t, dist_reduce_op op) {
  switch (t) {
  case DIST_F32: REAL(float); break;
  case DIST_F64: REAL(double); break;
  case DIST_I32: INT(int32_t, uint32_t); break;
  case DIST_I64: INT(int64_t, uint64_t); break;
  case DIST_U8: INT(uint8_t, unsigned); break;
  case DIST_C64: COMPLEX(float _Complex); break;
  case DIST_C128: COMPLEX(double _Complex); break;
  case DIST_BF16: dist__bf16_sum(in, acc, n); break;
  case DIST_F16: dist__f16_sum(in, acc, n); break;
  default: break;
  }
}
