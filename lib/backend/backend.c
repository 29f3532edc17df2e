/* Choosing a backend for a memory space and a group. */
#include "backend/backend.h"

#include <stdlib.h>

#include "core/internal.h"

#ifdef HAVE_CUDA
/* The CUDA backend of group g, picked at its first device collective and kept:
 * NCCL unless DIST_CUDA_BACKEND says staged, NCCL is not built, or two members
 * drive one GPU (several ranks per GPU, which NCCL refuses). Local: every
 * member reads the same device table, so all pick the same. */
static dist_status cuda_backend(dist__group *g, const dist__backend **out) {
  if (!g->device) {
#ifdef HAVE_NCCL
    const int built_nccl = 1;
#else
    const int built_nccl = 0;
#endif
    int a = -1, b = -1, which = 0;
    int shared = g->members && dist__engine.device_keys &&
                 dist__device_shared(dist__engine.device_keys, g->members, g->size, &a, &b);
    DIST_CHECK(dist__cuda_backend_pick(dist__engine.cuda_backend, built_nccl, shared, g->name, a, b, &which));
    if (shared && which == DIST__CUDA_STAGED && dist__engine.cuda_backend == DIST__CUDA_AUTO)
      dist_log(DIST_LOG_INFO, "group '%s': world ranks %d and %d drive the same GPU; its device collectives go "
               "through host memory and MPI (staged), since NCCL refuses two ranks on one GPU", g->name, a, b);
    g->device = calloc(1, sizeof *g->device);
    if (!g->device) return dist__error(DIST_ERR_NO_MEMORY, "group '%s': its device part", g->name);
    g->device->backend = which;
  }
#ifdef HAVE_NCCL
  if (g->device->backend == DIST__CUDA_NCCL) {
    *out = &dist__backend_nccl;
    return DIST_SUCCESS;
  }
#endif
  *out = &dist__backend_staged;
  return DIST_SUCCESS;
}
#endif

dist_status dist__backend_for(dist_memory mem, dist__group *g, const dist__backend **out) {
  if (mem == DIST_MEM_HOST) {
    *out = dist__backend_host(g);
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  return cuda_backend(g, out);
#else
  (void)g;
  return dist__error(DIST_ERR_UNSUPPORTED, "CUDA memory given to a distmgr built without CUDA");
#endif
}

void dist__backend_release_group(dist__group *g) {
  if (!g->device) return;
#ifdef HAVE_NCCL
  void dist__nccl_release(dist__group * g);
  dist__nccl_release(g);
#endif
  free(g->device);
  g->device = NULL;
}

void dist__pending_init(dist__pending *p) {
  p->mpi = MPI_REQUEST_NULL;
  p->event = NULL;
  p->state = NULL;
}
