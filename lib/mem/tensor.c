/* Tensor views, dtype facts and 16-bit float conversions. */
#include <math.h>
#include <string.h>

#include "mem/dtype.h"
#include "mem/half.h"
#include "mem/split.h"

static const struct {
  const char *name;
  dist__kind kind;
} DTYPES[DIST_DTYPE_COUNT] = {
    [DIST_F32] = {"f32", DIST__FLOAT},      [DIST_F64] = {"f64", DIST__FLOAT},
    [DIST_BF16] = {"bf16", DIST__FLOAT},    [DIST_F16] = {"f16", DIST__FLOAT},
    [DIST_C64] = {"c64", DIST__COMPLEX},    [DIST_C128] = {"c128", DIST__COMPLEX},
    [DIST_I32] = {"i32", DIST__INT},        [DIST_I64] = {"i64", DIST__INT},
    [DIST_U8] = {"u8", DIST__INT},
};

const unsigned char dist__dtype_sizes[DIST_DTYPE_COUNT] = {
    [DIST_F32] = 4, [DIST_F64] = 8, [DIST_BF16] = 2, [DIST_F16] = 2, [DIST_C64] = 8,
    [DIST_C128] = 16, [DIST_I32] = 4, [DIST_I64] = 8, [DIST_U8] = 1,
};

int dist__dtype_valid(dist_dtype t) { return (unsigned)t < DIST_DTYPE_COUNT; }
size_t dist_dtype_size(dist_dtype t) { return dist__dtype_size(t); }
const char *dist_dtype_name(dist_dtype t) { return dist__dtype_valid(t) ? DTYPES[t].name : "unknown"; }
dist__kind dist__dtype_kind(dist_dtype t) { return DTYPES[t].kind; }
int dist__dtype_is16(dist_dtype t) { return t == DIST_BF16 || t == DIST_F16; }

dist_dtype dist__wire_type(dist_dtype t, int op) {
  if (dist__dtype_is16(t)) return DIST_F32;
  if (t == DIST_U8 && op == DIST_AVG) return DIST_I64;
  return t;
}

static dist_tensor make(void *data, dist_dtype dtype, dist_memory mem, int device, int ndim, const int64_t *shape) {
  dist_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.memory = mem;
  t.device = device;
  t.ndim = ndim >= 0 && ndim <= DIST_TENSOR_MAX_DIMS && (ndim == 0 || shape) ? ndim : -1;
  for (int i = 0; i < t.ndim; i++) t.shape[i] = shape[i];
  return t;
}

dist_tensor dist_tensor_host(void *data, dist_dtype dtype, int ndim, const int64_t *shape) {
  return make(data, dtype, DIST_MEM_HOST, 0, ndim, shape);
}

dist_tensor dist_tensor_cuda(void *data, dist_dtype dtype, int device, int ndim, const int64_t *shape) {
  return make(data, dtype, DIST_MEM_CUDA, device, ndim, shape);
}

int64_t dist_tensor_numel(const dist_tensor *t) {
  if (!t || t->ndim < 0 || t->ndim > DIST_TENSOR_MAX_DIMS) return 0;
  int64_t n = 1;
  int zero = 0, over = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0) return -1;
    if (t->shape[i] == 0) zero = 1; /* exactly 0 elements, whatever the other extents */
    else over |= __builtin_mul_overflow(n, t->shape[i], &n);
  }
  return zero ? 0 : over ? -1 : n;
}

/* One pass, as numel's and then the bytes' (a remote function's outputs
 * call it on every call). */
size_t dist_tensor_nbytes(const dist_tensor *t) {
  if (!t || t->ndim < 0 || t->ndim > DIST_TENSOR_MAX_DIMS) return 0;
  if (t->ndim <= 1) { /* scalars and vectors, the small calls' tensors: no loop */
    int64_t e = t->ndim ? t->shape[0] : 1, b;
    if (e < 0) return SIZE_MAX;
    return __builtin_mul_overflow(e, (int64_t)dist__dtype_size(t->dtype), &b) ? SIZE_MAX : (size_t)b;
  }
  int64_t n = 1, b;
  int zero = 0, over = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0) return SIZE_MAX;
    if (t->shape[i] == 0) zero = 1;
    else over |= __builtin_mul_overflow(n, t->shape[i], &n);
  }
  if (zero) return 0;
  if (over || __builtin_mul_overflow(n, (int64_t)dist__dtype_size(t->dtype), &b) || (uint64_t)b > SIZE_MAX)
    return SIZE_MAX;
  return (size_t)b;
}

int64_t dist__tensor_span(const dist_tensor *t) {
  int64_t b = (int64_t)dist_dtype_size(t->dtype);
  if (t->ndim < 0 || t->ndim > DIST_TENSOR_MAX_DIMS) return -1;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0 || (t->shape[i] && __builtin_mul_overflow(b, t->shape[i], &b))) return -1;
  return (uint64_t)b > SIZE_MAX ? -1 : b;
}

/* ---- 16-bit floats ---------------------------------------------------------- */

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float dist_bf16_to_f32(uint16_t h) { return dist__bf16_f32(h); }
uint16_t dist_f32_to_bf16(float f) { return dist__f32_bf16(f); }

float dist_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) return float_of(sign | 0x7F800000 | (man << 13)); /* inf / NaN */
  if (exp == 0) {                                                     /* zero / subnormal */
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t dist_f32_to_f16(float f) {
  uint32_t u = bits_of(f), sign = (u >> 16) & 0x8000;
  float a = fabsf(f);
  if (isnan(f)) return (uint16_t)(sign | 0x7E00);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7C00); /* rounds to inf */
  if (a < 6.103515625e-05f) {                           /* subnormal: multiples of 2^-24 */
    float q = nearbyintf(a * 16777216.0f);              /* default mode rounds to even */
    return (uint16_t)(sign | (uint32_t)q);
  }
  uint32_t au = bits_of(a);
  uint32_t exp = (au >> 23) - 112, man = au & 0x7FFFFF;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* may carry into the exponent: correct */
  return (uint16_t)(sign | h);
}

const char *dist_reduce_op_name(dist_reduce_op op) {
  static const char *const names[] = {"sum", "avg", "max", "min", "prod"};
  return (unsigned)op < DIST_REDUCE_OP_COUNT ? names[op] : "unknown";
}
