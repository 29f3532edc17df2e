/* Nodes, local ranks and the built-in groups "world", "local", "cross", "self". */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/check.h"
#include "manager/startup.h"


/* My node's ranks: MPI's shared-memory split, or blocks of N world ranks
 * when DIST_RANKS_PER_NODE simulates nodes on one machine. */
static dist_status split_node(MPI_Comm *node_comm) {
  dist__manager *m = &dist__state;
  int n = m->settings.ranks_per_node;
  if (n > 0) DIST_MPI_CALL(MPI_Comm_split(dist__engine.world, dist__groups.rank / n, dist__groups.rank, node_comm));
  else DIST_MPI_CALL(MPI_Comm_split_type(dist__engine.world, MPI_COMM_TYPE_SHARED, dist__groups.rank, MPI_INFO_NULL, node_comm));
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

/* My node's communicator, local rank and size, and the world rank of my
 * node's local rank 0 (its "leader": the node's lowest world rank, since the
 * split keys by world rank). One collective: the split. */
dist_status dist__topology_node(MPI_Comm *node_comm, int *leader) {
  dist__manager *m = &dist__state;
  MPI_Group node_group, world_group;
  int zero = 0;
  *node_comm = MPI_COMM_NULL;
  int rc = MPI_Comm_rank(dist__engine.world, &dist__groups.rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(dist__engine.world, &dist__groups.size);
  DIST_CHECK(split_node(node_comm)); /* collective: joined before any local failure returns */
  /* Local from here: a failure is this rank's, agreed on by the caller. */
  DIST_CHECK(DIST_MPI_STATUS(rc, "MPI_Comm_rank/size (world)"));
  DIST_MPI_CALL(MPI_Comm_rank(*node_comm, &m->local_rank));
  DIST_MPI_CALL(MPI_Comm_size(*node_comm, &m->local_size));
  DIST_MPI_CALL(MPI_Comm_group(*node_comm, &node_group));
  rc = MPI_Comm_group(dist__engine.world, &world_group);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Group_translate_ranks(node_group, 1, &zero, world_group, leader);
    DIST_WARN_CALL(MPI_Group_free(&world_group));
  }
  DIST_WARN_CALL(MPI_Group_free(&node_group));
  DIST_CHECK(DIST_MPI_STATUS(rc, "MPI_Group_translate_ranks (node leader)"));
  return check_launcher_local();
}

/* Node index of every rank: the order of its leader among all leaders. */
static dist_status number_nodes(const int64_t *rows, int **node_out, int **lrank_out) {
  dist__manager *m = &dist__state;
  int *node = malloc(sizeof(int) * 2 * (size_t)dist__groups.size), *lrank = node + dist__groups.size;
  if (!node) return dist__error(DIST_ERR_NO_MEMORY, "topology table for %d ranks", dist__groups.size);
  /* node[q] first counts the leaders up to q (a leader is its own leader). */
  int count = 0;
  for (int q = 0; q < dist__groups.size; q++) {
    if (rows[q * DIST__ROW_WORDS + DIST__ROW_LEADER] == q) count++;
    node[q] = count - 1;
  }
  for (int q = 0; q < dist__groups.size; q++) {
    int64_t leader = rows[q * DIST__ROW_WORDS + DIST__ROW_LEADER];
    lrank[q] = (int)rows[q * DIST__ROW_WORDS + DIST__ROW_LRANK];
    if (leader < 0 || leader > q || rows[leader * DIST__ROW_WORDS + DIST__ROW_LEADER] != leader) {
      free(node);
      return dist__error(DIST_ERR_MPI, "rank %d reports node leader %lld, which is not a node leader", q, (long long)leader);
    }
  }
  for (int q = dist__groups.size - 1; q >= 0; q--) node[q] = node[rows[q * DIST__ROW_WORDS + DIST__ROW_LEADER]];
  m->node = node[dist__groups.rank];
  m->nnodes = count;
  *node_out = node;
  *lrank_out = lrank;
  return DIST_SUCCESS;
}

/* The built-in groups from the start-up table. "local" takes over
 * `node_comm` and "self" duplicates MPI_COMM_SELF (no communication): the
 * world's duplicate and the "cross" split are the only collectives, made on
 * every rank whatever failed locally. The caller makes the ranks agree. */
dist_status dist__topology_layouts(const int64_t *rows, dist__layout l[4]) {
  int *node = NULL, *lrank = NULL;
  dist__layout all;
  memset(l, 0, 4 * sizeof *l);
  memset(&all, 0, sizeof all);
  dist_status s = number_nodes(rows, &node, &lrank);
  if (!s) s = dist__layout_world(dist__groups.size, &l[0]);
  if (!s) s = dist__layout_nodes(dist__groups.size, node, lrank, &l[1], &l[2]);
  if (!s) s = dist__layout_world(dist__groups.size, &all);
  if (!s) s = dist__layout_subgroup(&all, 1, &l[3]); /* every rank alone: the size-1 group a layer uses when a parallel group is absent */
  free(node);
  dist__layout_free(&all);
  return s;
}

dist_status dist__topology_groups(const int64_t *rows, MPI_Comm *node_comm) {
  dist__manager *m = &dist__state;
  dist__layout l[4];
  dist_status s = dist__topology_layouts(rows, l);
  dist__layout *cross_ = &l[2];
  MPI_Comm comms[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
  int rc[3];
  rc[0] = MPI_Comm_dup(dist__engine.world, &comms[0]);
  /* Split keyed as the layout orders a copy (by node), not by world rank. */
  rc[1] = MPI_Comm_split(dist__engine.world, m->local_rank, s ? dist__groups.rank : cross_->key[dist__groups.rank], &comms[1]);
  rc[2] = MPI_Comm_dup(MPI_COMM_SELF, &comms[2]);
  for (int k = 0; k < 3; k++)
    if (!s && rc[k] != MPI_SUCCESS) s = dist__mpi_error(rc[k], "creating the built-in groups");
  dist__layout *layouts[4] = {&l[0], &l[1], &l[2], &l[3]};
  static const char *const names[4] = {"world", "local", "cross", "self"};
  MPI_Comm made[4] = {comms[0], *node_comm, comms[1], comms[2]};
  *node_comm = MPI_COMM_NULL; /* the table takes it over, or it is freed below */
  for (int k = 0; k < 4; k++) {
    if (!s) s = dist__group_keep(names[k], k ? 0 : -1, layouts[k], made[k]); /* frees made[k] on failure */
    else if (made[k] != MPI_COMM_NULL) MPI_Comm_free(&made[k]);
  }
  for (int k = 0; k < 4; k++) dist__layout_free(layouts[k]); /* no-ops for layouts the table took over */
  return s;
}
