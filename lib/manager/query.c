/* Manager queries: local reads of the global state. */
#include <stdio.h>

#include "manager/state.h"

/* Each query: check initialized and the output pointer, then copy one field. */
#define DIST__QUERY(fn, type, expr)                                                     \
  dist_status fn(type *out) {                                                            \
    DIST_CHECK(dist__require_initialized(#fn));                                          \
    if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, #fn ": output pointer is NULL"); \
    *out = (expr);                                                                       \
    return DIST_SUCCESS;                                                                 \
  }

DIST__QUERY(dist_manager_rank, int, dist__groups.rank)
DIST__QUERY(dist_manager_world_size, int, dist__groups.size)
DIST__QUERY(dist_manager_local_rank, int, dist__state.local_rank)
DIST__QUERY(dist_manager_local_size, int, dist__state.local_size)
DIST__QUERY(dist_manager_node, int, dist__state.node)
DIST__QUERY(dist_manager_node_count, int, dist__state.nnodes)
DIST__QUERY(dist_manager_device, dist_device, dist__state.device)
DIST__QUERY(dist_manager_is_distributed, int, dist__groups.size > 1)
DIST__QUERY(dist_manager_method, dist_launch_method, dist__state.launch.method)
DIST__QUERY(dist_manager_method_name, const char *, dist_launch_method_name(dist__state.launch.method))
DIST__QUERY(dist_manager_master_address, const char *, dist__state.master_addr)
DIST__QUERY(dist_manager_master_port, int, dist__state.master_port)

dist_status dist_manager_describe(char *buffer, size_t size) {
  const dist__manager *m = &dist__state;
  DIST_CHECK(dist__require_initialized("dist_manager_describe"));
  if (!buffer || size == 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_manager_describe: empty buffer");
  snprintf(buffer, size, "%s%s%s rank %d/%d local %d/%d node %d/%d device %s:%d master %s:%d",
           dist_launch_method_name(m->launch.method), m->launch.slurm_batch ? " (batch script)" : "",
           m->adopted ? " (adopted communicator)" : "", dist__groups.rank, dist__groups.size, m->local_rank, m->local_size, m->node,
           m->nnodes, dist_device_kind_name(m->device.kind), m->device.index, m->master_addr, m->master_port);
  return DIST_SUCCESS;
}
