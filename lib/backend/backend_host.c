/* The host-memory backend of a group: its own file, so that the device
 * backends (NCCL's id and barrier, the staged copies) can ask for it without
 * a circle through backend.c, which picks them. */
#include "backend/backend.h"

const dist__backend *dist__backend_host(const dist__group *g) {
#ifdef HAVE_GLOO
  if (g && g->gloo) return &dist__backend_gloo;
#endif
  return &dist__backend_mpi;
}

const dist__backend *dist__backend_host_engine(void) {
#ifdef HAVE_GLOO
  if (dist__engine.rdzv) return &dist__backend_gloo;
#endif
  return &dist__backend_mpi;
}
