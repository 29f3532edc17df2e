/* Nodes, local ranks and the built-in groups "world", "local", "cross", "self". */
#include <stdlib.h>
#include <string.h>

#include "state.h"

#define MPI_TRY(call)                                               \
  do {                                                              \
    int rc_ = (call);                                               \
    if (rc_ != MPI_SUCCESS) return dist__mpi_error(rc_, #call);     \
  } while (0)

/* My node's ranks: MPI's shared-memory split, or blocks of N world ranks
 * when DIST_RANKS_PER_NODE simulates nodes on one machine. */
static dist_status split_node(MPI_Comm *node_comm) {
  dist__manager *m = &dist__state;
  int n = m->settings.ranks_per_node;
  if (n > 0) MPI_TRY(MPI_Comm_split(m->world, m->rank / n, m->rank, node_comm));
  else MPI_TRY(MPI_Comm_split_type(m->world, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, node_comm));
  return DIST_SUCCESS;
}

/* Node index = rank of my node's local rank 0 among all local ranks 0
 * (nodes ordered by their lowest world rank). */
static dist_status number_nodes(MPI_Comm node_comm) {
  dist__manager *m = &dist__state;
  MPI_Comm leaders;
  int info[2] = {0, 0};
  MPI_TRY(MPI_Comm_split(m->world, m->local_rank == 0 ? 0 : MPI_UNDEFINED, m->rank, &leaders));
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &info[0]);
    MPI_Comm_size(leaders, &info[1]);
    MPI_Comm_free(&leaders);
  }
  MPI_TRY(MPI_Bcast(info, 2, MPI_INT, 0, node_comm));
  m->node = info[0];
  m->nnodes = info[1];
  return DIST_SUCCESS;
}

/* The launcher's local rank/size, where it gives them, must match MPI's. */
static dist_status check_launcher_local(void) {
  const dist__manager *m = &dist__state;
  const dist_launch *l = &m->launch;
  if (m->adopted || m->settings.ranks_per_node > 0) return DIST_SUCCESS; /* launcher describes another world */
  if (l->local_rank >= 0 && l->local_rank != m->local_rank)
    return dist__error(DIST_ERR_LAUNCH_MISMATCH, "launcher %s says local rank %d, MPI shared memory says %d",
                       dist_launch_method_name(l->method), l->local_rank, m->local_rank);
  if (l->local_size > 0 && l->local_size != m->local_size)
    return dist__error(DIST_ERR_LAUNCH_MISMATCH, "launcher %s says local size %d, MPI shared memory says %d",
                       dist_launch_method_name(l->method), l->local_size, m->local_size);
  return DIST_SUCCESS;
}

/* Gather every rank's (node, local rank) and derive the built-in layouts. */
static dist_status builtin_layouts(dist__layout *world, dist__layout *local, dist__layout *cross) {
  dist__manager *m = &dist__state;
  int mine[2] = {m->node, m->local_rank};
  int *all = malloc(sizeof(int) * 4 * (size_t)m->size);
  dist_status s = all ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "topology table for %d ranks", m->size);
  DIST_CHECK(dist__agree(m->world, s, "allocating the topology table")); /* before the collective */
  int rc = MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, m->world);
  s = rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, "MPI_Allgather (topology)");
  int *node = all + 2 * m->size, *lrank = all + 3 * m->size;
  for (int r = 0; r < m->size; r++) {
    node[r] = all[2 * r];
    lrank[r] = all[2 * r + 1];
  }
  if (!s) s = dist__layout_world(m->size, world);
  if (!s) s = dist__layout_nodes(m->size, node, lrank, local, cross);
  free(all);
  return s;
}

dist_status dist__topology_setup(void) {
  dist__manager *m = &dist__state;
  MPI_Comm node_comm;
  MPI_Comm_rank(m->world, &m->rank);
  MPI_Comm_size(m->world, &m->size);
  DIST_CHECK(split_node(&node_comm));
  MPI_Comm_rank(node_comm, &m->local_rank);
  MPI_Comm_size(node_comm, &m->local_size);
  dist_status s = number_nodes(node_comm);
  MPI_Comm_free(&node_comm);
  DIST_CHECK(s);
  DIST_CHECK(dist__agree(m->world, check_launcher_local(), "checking local ranks against the launcher"));

  dist__layout world, local, cross;
  memset(&world, 0, sizeof world);
  local = cross = world;
  s = dist__agree(m->world, builtin_layouts(&world, &local, &cross), "building the node layout");
  if (!s) s = dist__group_add("world", -1, &world);
  if (!s) s = dist__group_add("local", 0, &local);
  if (!s) s = dist__group_add("cross", 0, &cross);
  dist__layout all, self; /* every rank alone: the size-1 group a layer uses when a parallel group is absent */
  memset(&all, 0, sizeof all);
  self = all;
  if (!s) s = dist__layout_world(m->size, &all); /* "world" took its layout over */
  if (!s) s = dist__layout_subgroup(&all, 1, &self);
  if (!s) s = dist__group_add("self", 0, &self);
  dist__layout_free(&all);
  dist__layout_free(&self);
  dist__layout_free(&world); /* no-ops for layouts the table took over */
  dist__layout_free(&local);
  dist__layout_free(&cross);
  return s;
}
