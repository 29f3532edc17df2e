/* MPI-typed parts of the API: adopting a communicator as the world and
 * getting the communicator of a group. Include this only where mpi.h is
 * available; the rest of distmgr does not need it. */
#ifndef DISTMGR_MPI_H
#define DISTMGR_MPI_H

#include <mpi.h>

#include "distmgr/manager.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Initialize with `world` as the manager's world (a duplicate of it is kept):
 * a multi-rank worker of a larger job (Propulate) or an application's own
 * sub-communicator. Ranks and groups then refer to `world`; the launcher's
 * rank/size are checked against MPI_COMM_WORLD. MPI must already be initialized
 * unless `world` is MPI_COMM_WORLD. Collective over `world`. */
dist_status dist_manager_initialize_comm(MPI_Comm world, const dist_init_options *options);

/* The communicator of my copy of group `name` (NULL = world); MPI_COMM_NULL
 * for a non-member. Owned by distmgr: do not free. distmgr's own
 * point-to-point messages on it use tags 3085 and 3086 (its check round and
 * its all-to-all exchange): send yours under other tags, or on a duplicate.
 * Local. */
dist_status dist_group_comm(const char *name, MPI_Comm *comm);

/* Reverse lookup: the name of the group whose communicator is `comm`
 * (the handle from dist_group_comm). DIST_ERR_UNKNOWN_GROUP if none. Local. */
dist_status dist_group_name_of(MPI_Comm comm, const char **name);

#ifdef __cplusplus
}
#endif
#endif
