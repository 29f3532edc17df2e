/* The host-memory backend of a group (and the napping broadcast that picks
 * its engine by it): its own file, so that the device
 * backends (NCCL's id and barrier, the staged copies) can ask for it without
 * a circle through backend.c, which picks them. */
#include "backend/backend.h"
#ifdef HAVE_GLOO
#include "backend/backend_shm.h"
#endif

const dist__backend *dist__backend_host(const dist__group *g) {
#ifdef HAVE_GLOO
  if (g && g->shm_state) return &dist__backend_shm;
  if (g && g->gloo) return &dist__backend_gloo;
#endif
  return &dist__backend_mpi;
}

dist_status dist__broadcast_napping(dist__group *g, void *buf, size_t count, dist_dtype t, int root) {
  const dist__backend *host = dist__backend_host(g);
  if (host != &dist__backend_mpi) return host->broadcast(g, buf, count, t, root); /* Gloo's waits sleep already */
  return dist__mpi_broadcast_napping(g, buf, count, t, root);
}

const dist__backend *dist__backend_host_engine(void) {
#ifdef HAVE_GLOO
  if (dist__engine.rdzv) return &dist__backend_gloo;
#endif
  return &dist__backend_mpi;
}
