/* The public MPI adapters of distmgr/mpi.h that concern groups: a group's
 * communicator and the reverse lookup. (dist_manager_initialize_comm is the
 * manager's start-up, manager.c.) */
#include "backend/backend.h"
#include "manager/state.h"

dist_status dist_group_comm(const char *name, MPI_Comm *comm) {
  dist__group *g;
  DIST_CHECK(dist__group_lookup("dist_group_comm", name, comm, &g));
  *comm = dist__comm(g);
  return DIST_SUCCESS;
}

dist_status dist_group_name_of(MPI_Comm comm, const char **name) {
  DIST_CHECK(dist__require_initialized("dist_group_name_of"));
  if (!name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_name_of: output pointer is NULL");
  if (comm == MPI_COMM_NULL) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_name_of: comm is MPI_COMM_NULL");
  for (int i = 0; i < dist__groups.ngroups; i++)
    if (dist__comm(dist__groups.groups[i]) == comm) {
      *name = dist__groups.groups[i]->name;
      return DIST_SUCCESS;
    }
  return dist__error(DIST_ERR_UNKNOWN_GROUP, "the communicator is not one of distmgr's groups (use the handle from dist_group_comm)");
}
