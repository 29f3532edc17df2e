/* The manager's MPI start-up, between manager.c and topology.c: the nodes
 * and the built-in groups. */
#ifndef DISTMGR_STARTUP_H
#define DISTMGR_STARTUP_H

#include <mpi.h>

#include "manager/state.h"

/* Topology: my node's communicator (MPI shared memory or DIST_RANKS_PER_NODE
 * blocks), local rank/size and node leader, checked against the launcher's
 * local values. Collective (one split). */
dist_status dist__topology_node(MPI_Comm *node_comm, int *leader);
/* Nodes and the groups "world", "local" (takes `node_comm` over), "cross"
 * and "self" from the gathered table. Collective; the caller agrees. */
dist_status dist__topology_groups(const int64_t *rows, MPI_Comm *node_comm);
/* Their layouts alone, in that order, from the table (sets the manager's
 * node and node count). Local; the caller frees what it does not keep. */
dist_status dist__topology_layouts(const int64_t *rows, dist__layout l[4]);

/* The start-up without MPI (startup_store.c): rendezvous, nodes from host
 * names, devices (choose_device, the MPI start-up's), the built-in groups on
 * Gloo. `local`: this rank's outcome so far. Collective through the store. */
dist_status dist__start_store(dist_status local, dist_status (*choose_device)(int64_t *flags));
/* Undo what the start-up without MPI changed in the process (SIGPIPE). */
void dist__stop_store(void);

#endif
