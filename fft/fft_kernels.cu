// The exchange's pack/unpack on CUDA memory: one kernel per box, fusing the
// normalisation and the r2c column weights into the copy.
#include <cuda_runtime.h>

#include "fft_box.h"

template <typename T>
__global__ void box_kernel(dist__fft_box b) {
  int64_t rows = b.na * b.nb;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    int64_t i = r / b.nb, j = r % b.nb;
    const T *s = (const T *)b.src + 2 * (i * b.ssa + j * b.ssb);
    T *d = (T *)b.dst + 2 * (i * b.dsa + j * b.dsb);
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < b.row; e += (int64_t)gridDim.x * blockDim.x) {
      T w = (T)b.scale, re = s[2 * e], im = s[2 * e + 1];
      int64_t k = (b.col0 + e) % b.klast;
      if (k > 0 && 2 * k < b.nlast) w *= (T)b.wmul;
      if (b.zero_im && (k == 0 || 2 * k == b.nlast)) im = 0;
      d[2 * e] = w * re;
      d[2 * e + 1] = w * im;
    }
  }
}

extern "C" int dist__fft_copy_cuda(const dist__fft_box *b, int is_double, void *stream) {
  int64_t rows = b->na * b->nb;
  if (!rows || !b->row) return cudaSuccess;
  dim3 block(256);
  int64_t gx = (b->row + 255) / 256;
  dim3 grid((unsigned)(gx < 4096 ? gx : 4096), (unsigned)(rows < 65535 ? rows : 65535));
  dist__fft_box k = *b;
  if (k.klast <= 0) k.klast = 1, k.nlast = 0, k.wmul = 1.0, k.zero_im = 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (is_double) box_kernel<double><<<grid, block, 0, s>>>(k);
  else box_kernel<float><<<grid, block, 0, s>>>(k);
  return (int)cudaGetLastError();
}

// One thread per pair (k, -k) of one DC or Nyquist plane of one row.
template <typename T>
__global__ void hermitize_kernel(T *a, int64_t entries, int64_t n1, int64_t R, int64_t n2) {
  int64_t half = n1 / 2 + 1, planes = n2 % 2 == 0 && n2 > 1 ? 2 : 1, total = entries * planes * half;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t k = i % half, rest = i / half, c = rest % planes ? n2 / 2 : 0, e = rest / planes, kk = (n1 - k) % n1;
    T *x = a + 2 * ((e * n1 + k) * R + c), *y = a + 2 * ((e * n1 + kk) * R + c);
    T re = (x[0] + y[0]) / 2, im = (x[1] - y[1]) / 2;
    x[0] = re, x[1] = im, y[0] = re, y[1] = -im;
  }
}

extern "C" int dist__fft_hermitize_cuda(void *a, int is_double, int64_t entries, int64_t n1, int64_t R, int64_t n2,
                                        void *stream) {
  int64_t total = entries * (n1 / 2 + 1) * 2;
  if (!total) return cudaSuccess;
  int64_t blocks = (total + 255) / 256;
  cudaStream_t s = (cudaStream_t)stream;
  unsigned g = (unsigned)(blocks < 65535 ? blocks : 65535);
  if (is_double) hermitize_kernel<double><<<g, 256, 0, s>>>((double *)a, entries, n1, R, n2);
  else hermitize_kernel<float><<<g, 256, 0, s>>>((float *)a, entries, n1, R, n2);
  return (int)cudaGetLastError();
}
