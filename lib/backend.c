/* Choosing a backend for a memory space. */
#include "backend.h"

dist_status dist__backend_for(dist_memory mem, const dist__backend **out) {
  if (mem == DIST_MEM_HOST) {
    *out = &dist__backend_mpi;
    return DIST_SUCCESS;
  }
#ifdef HAVE_CUDA
  int choice = dist__state.settings.cuda_backend;
#ifdef HAVE_NCCL
  if (choice != DIST__CUDA_STAGED) {
    *out = &dist__backend_nccl;
    return DIST_SUCCESS;
  }
#else
  if (choice == DIST__CUDA_NCCL)
    return dist__error(DIST_ERR_UNSUPPORTED, "DIST_CUDA_BACKEND=nccl but distmgr was built without NCCL");
#endif
  *out = &dist__backend_staged;
  return DIST_SUCCESS;
#else
  return dist__error(DIST_ERR_UNSUPPORTED, "CUDA memory given to a distmgr built without CUDA");
#endif
}

void dist__backend_release_group(dist__group *g) {
#ifdef HAVE_NCCL
  void dist__nccl_release(dist__group * g);
  dist__nccl_release(g);
#else
  (void)g;
#endif
}
