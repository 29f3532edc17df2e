/* Device assignment. The choice is a pure function; only counting and
 * selecting CUDA devices touches the runtime. */
#include "internal.h"

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#endif

const char *dist_device_kind_name(dist_device_kind kind) { return kind == DIST_DEVICE_CUDA ? "cuda" : "cpu"; }

dist_status dist__device_choose(int setting, int visible, int local_rank, dist_device *out) {
  dist_device d = {DIST_DEVICE_CPU, 0};
  if (setting >= 0) {
    if (setting >= visible)
      return dist__error(DIST_ERR_SETTING, "DIST_DEVICE=%d but this process sees %d CUDA device(s)", setting, visible);
    d.kind = DIST_DEVICE_CUDA;
    d.index = setting;
  } else if (setting == DIST__DEVICE_AUTO && visible > 0) {
    /* One visible device (CUDA_VISIBLE_DEVICES or srun --gpus-per-task) is
     * device 0 whatever the local rank; several are shared round-robin. */
    d.kind = DIST_DEVICE_CUDA;
    d.index = local_rank % visible;
  }
  *out = d;
  return DIST_SUCCESS;
}

int dist__device_visible_count(void) {
#ifdef HAVE_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    dist_log(DIST_LOG_INFO, "no CUDA device in use: cudaGetDeviceCount: %s", cudaGetErrorString(e));
    (void)cudaGetLastError(); /* reset the error state for later CUDA calls */
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

dist_status dist__device_select(const dist_device *d) {
#ifdef HAVE_CUDA
  if (d->kind == DIST_DEVICE_CUDA) {
    cudaError_t e = cudaSetDevice(d->index);
    if (e != cudaSuccess)
      return dist__error(DIST_ERR_CUDA, "cudaSetDevice(%d): %s", d->index, cudaGetErrorString(e));
  }
#else
  (void)d;
#endif
  return DIST_SUCCESS;
}
