// Device kernels for the collective layer: 16-bit casts (reductions run in
// f32), division for emulated avg, index-select and index-add along a
// dimension. Launched on the caller's stream; return non-zero on a launch error.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

// dtype codes as in dist_dtype (include/distmgr/tensor.h)
enum { F32 = 0, F64, BF16, F16, C64, C128, I32, I64, U8 };

static unsigned blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

#define GRID_LOOP(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void bf16_to_f32(const __nv_bfloat16 *s, float *d, size_t n) { GRID_LOOP(i, n) d[i] = __bfloat162float(s[i]); }
__global__ void f16_to_f32(const __half *s, float *d, size_t n) { GRID_LOOP(i, n) d[i] = __half2float(s[i]); }
__global__ void f32_to_bf16(const float *s, __nv_bfloat16 *d, size_t n) { GRID_LOOP(i, n) d[i] = __float2bfloat16_rn(s[i]); }
__global__ void f32_to_f16(const float *s, __half *d, size_t n) { GRID_LOOP(i, n) d[i] = __float2half_rn(s[i]); }

// The divisor stays 64-bit: (T)d would truncate a group size of 256 to 0 for u8.
template <typename T> __global__ void divide(T *b, size_t n, int64_t d) { GRID_LOOP(i, n) b[i] = (T)(b[i] / d); }

// 8-bit atomic add through a compare-and-swap on the containing word.
__device__ void atomic_add(uint8_t *p, uint8_t v) {
  unsigned *w = (unsigned *)((uintptr_t)p & ~(uintptr_t)3);
  unsigned shift = ((uintptr_t)p & 3) * 8, old = *w, assumed;
  do {
    assumed = old;
    unsigned byte = ((assumed >> shift) + v) & 0xFF;
    old = atomicCAS(w, assumed, (assumed & ~(0xFFu << shift)) | (byte << shift));
  } while (assumed != old);
}
__device__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ void atomic_add(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
__device__ void atomic_add(int64_t *p, int64_t v) { atomicAdd((unsigned long long *)p, (unsigned long long)v); }

// dst[o, idx[k], i] += src[o, k, i]; duplicates in idx accumulate atomically.
template <typename T>
__global__ void index_add(T *dst, const T *src, int64_t outer, int64_t rows, int64_t inner, const int64_t *idx,
                          int64_t nidx) {
  size_t n = (size_t)(outer * nidx * inner);
  GRID_LOOP(e, n) {
    int64_t i = (int64_t)e % inner, k = ((int64_t)e / inner) % nidx, o = (int64_t)e / (inner * nidx);
    atomic_add(&dst[(o * rows + idx[k]) * inner + i], src[e]);
  }
}

// dst[o, k, :] = src[o, idx[k], :], moving elements of W bytes.
template <typename W>
__global__ void index_select(W *dst, const W *src, int64_t outer, int64_t rows, int64_t inner, const int64_t *idx,
                             int64_t nidx) {
  size_t n = (size_t)(outer * nidx * inner);
  GRID_LOOP(e, n) {
    int64_t i = (int64_t)e % inner, k = ((int64_t)e / inner) % nidx, o = (int64_t)e / (inner * nidx);
    dst[e] = src[(o * rows + idx[k]) * inner + i];
  }
}

static int launched(void) { return cudaPeekAtLastError() != cudaSuccess; }

__global__ void u8_to_i64(const uint8_t *s, int64_t *d, size_t n) { GRID_LOOP(i, n) d[i] = s[i]; }
__global__ void i64_to_u8(const int64_t *s, uint8_t *d, size_t n) { GRID_LOOP(i, n) d[i] = (uint8_t)s[i]; }

// t -> its wider type: bf16/f16 -> f32, u8 -> i64.
extern "C" int dist__cuda_widen(const void *src, int dtype, void *dst, size_t n, cudaStream_t s) {
  if (!n) return 0;
  switch (dtype) {
    case BF16: bf16_to_f32<<<blocks_for(n), 256, 0, s>>>((const __nv_bfloat16 *)src, (float *)dst, n); break;
    case F16: f16_to_f32<<<blocks_for(n), 256, 0, s>>>((const __half *)src, (float *)dst, n); break;
    case U8: u8_to_i64<<<blocks_for(n), 256, 0, s>>>((const uint8_t *)src, (int64_t *)dst, n); break;
    default: return 1;
  }
  return launched();
}

extern "C" int dist__cuda_narrow(const void *src, int dtype, void *dst, size_t n, cudaStream_t s) {
  if (!n) return 0;
  switch (dtype) {
    case BF16: f32_to_bf16<<<blocks_for(n), 256, 0, s>>>((const float *)src, (__nv_bfloat16 *)dst, n); break;
    case F16: f32_to_f16<<<blocks_for(n), 256, 0, s>>>((const float *)src, (__half *)dst, n); break;
    case U8: i64_to_u8<<<blocks_for(n), 256, 0, s>>>((const int64_t *)src, (uint8_t *)dst, n); break;
    default: return 1;
  }
  return launched();
}

extern "C" int dist__cuda_divide(void *b, int dtype, size_t n, int64_t d, cudaStream_t s) {
  if (!n) return 0;
  switch (dtype) {
    case F32: divide<<<blocks_for(n), 256, 0, s>>>((float *)b, n, d); break;
    case C64: divide<<<blocks_for(2 * n), 256, 0, s>>>((float *)b, 2 * n, d); break;
    case F64: divide<<<blocks_for(n), 256, 0, s>>>((double *)b, n, d); break;
    case C128: divide<<<blocks_for(2 * n), 256, 0, s>>>((double *)b, 2 * n, d); break;
    case I32: divide<<<blocks_for(n), 256, 0, s>>>((int32_t *)b, n, d); break;
    case I64: divide<<<blocks_for(n), 256, 0, s>>>((int64_t *)b, n, d); break;
    case U8: divide<<<blocks_for(n), 256, 0, s>>>((uint8_t *)b, n, d); break;
    default: return 1;
  }
  return launched();
}

// A batch of copies in one launch: blockIdx.y picks the piece (as
// dist__piece in memops.h), blockIdx.x strides over its elements.
#define PIECES 64 // a launch's
struct piece {
  void *dst;
  const void *src;
  size_t n;
};
struct pieces {
  piece p[PIECES]; // by value: a kernel parameter, no device table to keep
};

template <typename U> __global__ void copy_pieces(pieces a) {
  const piece &q = a.p[blockIdx.y];
  GRID_LOOP(i, q.n) ((U *)q.dst)[i] = ((const U *)q.src)[i];
}

template <typename T> __global__ void divide_pieces(pieces a, int64_t d) {
  const piece &q = a.p[blockIdx.y];
  GRID_LOOP(i, q.n) ((T *)q.dst)[i] = (T)(((const T *)q.src)[i] / d);
}

// 16-bit: in f32, as widen, divide and narrow in turn would round.
__global__ void divide_pieces_bf16(pieces a, int64_t d) {
  const piece &q = a.p[blockIdx.y];
  GRID_LOOP(i, q.n)
  ((__nv_bfloat16 *)q.dst)[i] = __float2bfloat16_rn(__bfloat162float(((const __nv_bfloat16 *)q.src)[i]) / d);
}
__global__ void divide_pieces_f16(pieces a, int64_t d) {
  const piece &q = a.p[blockIdx.y];
  GRID_LOOP(i, q.n) ((__half *)q.dst)[i] = __float2half_rn(__half2float(((const __half *)q.src)[i]) / d);
}

// n <= PIECES pieces of elements of esize bytes, each dst = src / d (d 1: a copy).
static int launch_pieces(const void *p, int n, int dtype, size_t esize, int64_t d, cudaStream_t s) {
  pieces a;
  memcpy(a.p, p, sizeof(piece) * (size_t)n);
  // Copies move the widest words (16 bytes, then 8, ... 1) that every
  // piece's addresses and length allow (a c128 may sit at an 8-byte boundary).
  size_t unit = 16, most = 0;
  for (int k = 0; d == 1 && k < n; k++)
    while (unit > 1 && ((uintptr_t)a.p[k].dst % unit || (uintptr_t)a.p[k].src % unit || a.p[k].n * esize % unit))
      unit /= 2;
  for (int k = 0; k < n; k++) {
    a.p[k].n = d == 1 ? a.p[k].n * esize / unit : a.p[k].n * (dtype == C64 || dtype == C128 ? 2 : 1);
    most = a.p[k].n > most ? a.p[k].n : most;
  }
  // Enough blocks per piece to fill the GPU for a large one; small ones end at once.
  unsigned bx = blocks_for(most);
  dim3 grid(bx < 1024 ? bx : 1024, (unsigned)n);
  if (d == 1) {
    switch (unit) {
      case 16: copy_pieces<uint4><<<grid, 256, 0, s>>>(a); break;
      case 8: copy_pieces<uint64_t><<<grid, 256, 0, s>>>(a); break;
      case 4: copy_pieces<uint32_t><<<grid, 256, 0, s>>>(a); break;
      case 2: copy_pieces<uint16_t><<<grid, 256, 0, s>>>(a); break;
      case 1: copy_pieces<uint8_t><<<grid, 256, 0, s>>>(a); break;
      default: return 1;
    }
    return launched();
  }
  switch (dtype) {
    case F32: case C64: divide_pieces<float><<<grid, 256, 0, s>>>(a, d); break;
    case F64: case C128: divide_pieces<double><<<grid, 256, 0, s>>>(a, d); break;
    case BF16: divide_pieces_bf16<<<grid, 256, 0, s>>>(a, d); break;
    case F16: divide_pieces_f16<<<grid, 256, 0, s>>>(a, d); break;
    default: return 1;
  }
  return launched();
}

// Any number of pieces, PIECES a launch.
extern "C" int dist__cuda_copy_pieces(const void *p, int n, int dtype, size_t esize, int64_t d, cudaStream_t s) {
  for (int k = 0; k < n; k += PIECES)
    if (launch_pieces((const piece *)p + k, n - k < PIECES ? n - k : PIECES, dtype, esize, d, s)) return 1;
  return 0;
}

extern "C" int dist__cuda_index_add(void *dst, const void *src, int dtype, int64_t outer, int64_t rows, int64_t inner,
                                    const int64_t *idx, int64_t nidx, cudaStream_t s) {
  size_t n = (size_t)(outer * nidx * inner);
  if (!n) return 0;
  unsigned b = blocks_for(n);
  switch (dtype) {
    case F32: index_add<<<b, 256, 0, s>>>((float *)dst, (const float *)src, outer, rows, inner, idx, nidx); break;
    case C64: index_add<<<blocks_for(2 * n), 256, 0, s>>>((float *)dst, (const float *)src, outer, rows, 2 * inner, idx, nidx); break;
    case F64: index_add<<<b, 256, 0, s>>>((double *)dst, (const double *)src, outer, rows, inner, idx, nidx); break;
    case C128: index_add<<<blocks_for(2 * n), 256, 0, s>>>((double *)dst, (const double *)src, outer, rows, 2 * inner, idx, nidx); break;
    case I32: index_add<<<b, 256, 0, s>>>((int32_t *)dst, (const int32_t *)src, outer, rows, inner, idx, nidx); break;
    case I64: index_add<<<b, 256, 0, s>>>((int64_t *)dst, (const int64_t *)src, outer, rows, inner, idx, nidx); break;
    case U8: index_add<<<b, 256, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, outer, rows, inner, idx, nidx); break;
    default: return 1;
  }
  return launched();
}

struct b16 { uint64_t lo, hi; };

extern "C" int dist__cuda_index_select(void *dst, const void *src, size_t esize, int64_t outer, int64_t rows,
                                       int64_t inner, const int64_t *idx, int64_t nidx, cudaStream_t s) {
  size_t n = (size_t)(outer * nidx * inner);
  if (!n) return 0;
  unsigned b = blocks_for(n);
  switch (esize) {
    case 1: index_select<<<b, 256, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, outer, rows, inner, idx, nidx); break;
    case 2: index_select<<<b, 256, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, outer, rows, inner, idx, nidx); break;
    case 4: index_select<<<b, 256, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, outer, rows, inner, idx, nidx); break;
    case 8: index_select<<<b, 256, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, outer, rows, inner, idx, nidx); break;
    case 16: index_select<<<b, 256, 0, s>>>((b16 *)dst, (const b16 *)src, outer, rows, inner, idx, nidx); break;
    default: return 1;
  }
  return launched();
}
