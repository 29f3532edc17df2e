/* Device assignment. The choice is a pure function; only counting and
 * selecting CUDA devices touches the runtime. */
#include "core/internal.h"
#include "core/hash.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#endif

const char *dist_device_kind_name(dist_device_kind kind) { return kind == DIST_DEVICE_CUDA ? "cuda" : "cpu"; }

dist_status dist__device_choose(int setting, int visible, const char *why, int local_rank, dist_device *out) {
  dist_device d = {DIST_DEVICE_CPU, 0};
  if (setting == DIST__DEVICE_CUDA && visible <= 0)
    return dist__error(DIST_ERR_SETTING, "DIST_DEVICE=cuda but this process can use no CUDA device (%s)",
                       why && *why ? why : "none visible");
  if (setting >= 0) {
    if (setting >= visible)
      return dist__error(DIST_ERR_SETTING, "DIST_DEVICE=%d but this process sees %d CUDA device(s)", setting, visible);
    d.kind = DIST_DEVICE_CUDA;
    d.index = setting;
  } else if ((setting == DIST__DEVICE_AUTO || setting == DIST__DEVICE_CUDA) && visible > 0) {
    /* One visible device (CUDA_VISIBLE_DEVICES or srun --gpus-per-task) is
     * device 0 whatever the local rank; several are shared round-robin. */
    d.kind = DIST_DEVICE_CUDA;
    d.index = local_rank % visible;
  }
  *out = d;
  return DIST_SUCCESS;
}

int dist__device_visible_count(char *why, size_t len) {
  snprintf(why, len, "%s", "");
#ifdef HAVE_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    snprintf(why, len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    (void)cudaGetLastError(); /* reset the error state for later CUDA calls */
    return 0;
  }
  if (n == 0) snprintf(why, len, "cudaGetDeviceCount found no device");
  return n;
#else
  snprintf(why, len, "distmgr was built without CUDA");
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

uint64_t dist__device_key(const dist_device *d, int rank) {
  if (d->kind != DIST_DEVICE_CUDA) return 0;
#ifdef HAVE_CUDA
  struct cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, d->index) == cudaSuccess) {
    uint64_t k = dist__hash(DIST__HASH_SEED, p.uuid.bytes, sizeof p.uuid.bytes);
    return k ? k : 1;
  }
  (void)cudaGetLastError();
#endif
  /* Unknown identity: a key no other rank has, so nothing is taken as shared. */
  return (uint64_t)rank << 1 | 1ULL << 63;
}

int dist__device_shared(const uint64_t *keys, const int *members, int n, int *a, int *b) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (keys[members[i]] && keys[members[i]] == keys[members[j]]) {
        *a = members[i] < members[j] ? members[i] : members[j];
        *b = members[i] < members[j] ? members[j] : members[i];
        return 1;
      }
  return 0;
}

dist_status dist__cuda_backend_pick(int choice, int built_nccl, int shared, const char *group, int a, int b,
                                    int *which) {
  if (choice == DIST__CUDA_NCCL && !built_nccl)
    return dist__error(DIST_ERR_UNSUPPORTED, "DIST_CUDA_BACKEND=nccl but distmgr was built without NCCL");
  if (choice == DIST__CUDA_NCCL && shared)
    return dist__error(DIST_ERR_UNSUPPORTED,
                       "DIST_CUDA_BACKEND=nccl but world ranks %d and %d of group '%s' drive the same GPU, which NCCL "
                       "refuses; give each rank its own GPU, or set DIST_CUDA_BACKEND=auto or staged",
                       a, b, group);
  *which = choice == DIST__CUDA_STAGED || !built_nccl || shared ? DIST__CUDA_STAGED : DIST__CUDA_NCCL;
  return DIST_SUCCESS;
}
