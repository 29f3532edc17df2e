// Device kernels of the SGD and Adam updates: the host loops of optim_sgd.c
// and optim_adam.c, element by element, in the parameter's precision.
#include <cuda_runtime.h>
#include <stdint.h>

#include "optim/optim.h"

static unsigned grid_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

#define GRID_LOOP(i, n) \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

template <typename T>
__global__ void sgd_kernel(T *p, const T *g, T *b, size_t n, dist__sgd_scalars s) {
  const T lr = (T)s.lr, mu = (T)s.momentum, keep = (T)(1 - s.dampening), wd = (T)s.weight_decay;
  const T sign = s.maximize ? (T)-1 : (T)1;
  GRID_LOOP(i, n) {
    T d = sign * g[i];
    if (s.weight_decay != 0) d += wd * p[i];
    if (b) {
      T m = s.first ? d : mu * b[i] + keep * d;
      b[i] = m;
      d = s.nesterov ? d + mu * m : m;
    }
    p[i] -= lr * d;
  }
}

template <typename T>
__global__ void adam_kernel(T *p, const T *g, T *m, T *v, T *vmax, size_t n, dist__adam_scalars s) {
  const T b1 = (T)s.beta1, c1 = (T)(1 - s.beta1), b2 = (T)s.beta2, c2 = (T)(1 - s.beta2);
  const T step = (T)s.step_size, bc2 = (T)s.bc2_sqrt, eps = (T)s.eps, wd = (T)s.weight_decay;
  const T decay = (T)s.decay, sign = s.maximize ? (T)-1 : (T)1;
  GRID_LOOP(i, n) {
    T d = sign * g[i], x = p[i] * decay;
    if (s.weight_decay != 0) d += wd * x;
    T mi = b1 * m[i] + c1 * d, vi = b2 * v[i] + c2 * d * d;
    m[i] = mi;
    v[i] = vi;
    if (s.amsgrad) vmax[i] = vi = vmax[i] > vi ? vmax[i] : vi;
    p[i] = x - step * mi / (sqrt(vi) / bc2 + eps);
  }
}

extern "C" int dist__cuda_sgd(void *p, const void *g, void *b, int dtype, size_t n, const dist__sgd_scalars *s,
                              cudaStream_t st) {
  if (!n) return cudaSuccess;
  unsigned nb = grid_for(n);
  if (dtype == DIST_F32) sgd_kernel<<<nb, 256, 0, st>>>((float *)p, (const float *)g, (float *)b, n, *s);
  else if (dtype == DIST_F64) sgd_kernel<<<nb, 256, 0, st>>>((double *)p, (const double *)g, (double *)b, n, *s);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

extern "C" int dist__cuda_adam(void *p, const void *g, void *m, void *v, void *vmax, int dtype, size_t n,
                               const dist__adam_scalars *s, cudaStream_t st) {
  if (!n) return cudaSuccess;
  unsigned b = grid_for(n);
  if (dtype == DIST_F32)
    adam_kernel<<<b, 256, 0, st>>>((float *)p, (const float *)g, (float *)m, (float *)v, (float *)vmax, n, *s);
  else if (dtype == DIST_F64)
    adam_kernel<<<b, 256, 0, st>>>((double *)p, (const double *)g, (double *)m, (double *)v, (double *)vmax, n, *s);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}
