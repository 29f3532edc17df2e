/* The group table: adding groups (one MPI_Comm_split each) and lookups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

dist_status dist__group_find(const char *name, dist__group **out) {
  dist__manager *m = &dist__state;
  if (!name) name = "world";
  for (int i = 0; i < m->ngroups; i++)
    if (strcmp(m->groups[i]->name, name) == 0) {
      *out = m->groups[i];
      return DIST_SUCCESS;
    }
  return dist__error(DIST_ERR_UNKNOWN_GROUP, "no process group named '%s'", name);
}

dist_status dist__group_check_new_name(const char *name) {
  dist__group *g;
  if (!name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group name is NULL");
  if (!*name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group name is empty");
  size_t n = strlen(name);
  if (n > DIST_GROUP_NAME_MAX)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "group name '%.20s...' is %zu characters; the limit is %d", name, n,
                       DIST_GROUP_NAME_MAX);
  if (dist__group_find(name, &g) == DIST_SUCCESS)
    return dist__error(DIST_ERR_DUPLICATE_GROUP, "a process group named '%s' already exists", name);
  return DIST_SUCCESS;
}

static void free_group(dist__group *g);

static dist_status grow_table(void) {
  dist__manager *m = &dist__state;
  if (m->ngroups < m->capacity) return DIST_SUCCESS;
  int cap = m->capacity ? 2 * m->capacity : 8;
  dist__group **g = realloc(m->groups, sizeof *g * (size_t)cap);
  if (!g) return dist__error(DIST_ERR_NO_MEMORY, "group table of %d entries", cap);
  m->groups = g;
  m->capacity = cap;
  return DIST_SUCCESS;
}

dist_status dist__group_keep(const char *name, int parent, dist__layout *layout, MPI_Comm comm) {
  dist__manager *m = &dist__state;
  dist__group g, *kept;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "%s", name);
  g.parent = parent;
  g.rank = -1;
  g.comm = comm;
  dist_status s = grow_table();
  kept = s ? NULL : malloc(sizeof *kept);
  if (!s && !kept) s = dist__error(DIST_ERR_NO_MEMORY, "group '%s'", name);
  if (!s && g.comm != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.size);
    g.members = malloc(sizeof(int) * (size_t)g.size);
    if (!g.members) s = dist__error(DIST_ERR_NO_MEMORY, "member list of group '%s'", name);
    else dist__layout_members(layout, m->rank, g.members);
  } else {
    g.size = layout->size;
  }
  if (s) {
    free(kept);
    free(g.members);
    if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
    return s;
  }
  g.layout = *layout; /* the table takes the layout over */
  memset(layout, 0, sizeof *layout);
  g.index = m->ngroups;
  *kept = g;
  m->groups[m->ngroups++] = kept;
  dist_log(DIST_LOG_DEBUG, "group '%s': size %d, my rank %d, %d copies", g.name, g.size, g.rank, g.layout.ncopies);
  return DIST_SUCCESS;
}

dist_status dist__group_add_all(int n, const char *const *names, int parent, dist__layout *layouts, dist_status local) {
  dist__manager *m = &dist__state;
  int before = m->ngroups;
  dist_status s = local;
  for (int k = 0; k < n; k++) {
    /* Split on every rank even after a local failure: the others are in it. */
    MPI_Comm comm = MPI_COMM_NULL;
    int color = s || !layouts[k].color ? -1 : layouts[k].color[m->rank];
    int rc = MPI_Comm_split(m->world, color >= 0 ? color : MPI_UNDEFINED, color >= 0 ? layouts[k].key[m->rank] : 0, &comm);
    if (!s) s = rc != MPI_SUCCESS ? dist__mpi_error(rc, "MPI_Comm_split") : dist__group_keep(names[k], parent, &layouts[k], comm);
    else if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  /* Every rank must add the groups, or the tables would diverge. */
  s = dist__agree(m->world, s, n > 1 ? "creating process groups" : "creating a process group");
  while (s && m->ngroups > before) free_group(m->groups[--m->ngroups]); /* kept here, failed elsewhere */
  return s;
}

dist_status dist__group_add(const char *name, int parent, dist__layout *layout) {
  return dist__group_add_all(1, &name, parent, layout, DIST_SUCCESS);
}

static void free_group(dist__group *g) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  dist__backend_release_group(g);
  if (!finalized && g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
  free(g->members);
  dist__layout_free(&g->layout);
  free(g);
}

void dist__groups_free(void) {
  dist__manager *m = &dist__state;
  for (int i = m->ngroups - 1; i >= 0; i--) free_group(m->groups[i]);
  free(m->groups);
  m->groups = NULL;
  m->ngroups = m->capacity = 0;
}

/* ---- lookups ------------------------------------------------------------ */

static dist_status lookup(const char *what, const char *name, const void *out, dist__group **g) {
  DIST_CHECK(dist__require_initialized(what));
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: output pointer is NULL", what);
  return dist__group_find(name, g);
}

dist_status dist_group_exists(const char *name, int *exists) {
  dist__group *g;
  DIST_CHECK(dist__require_initialized("dist_group_exists"));
  if (!exists) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_exists: output pointer is NULL");
  *exists = dist__group_find(name, &g) == DIST_SUCCESS;
  return DIST_SUCCESS;
}

dist_status dist_group_size(const char *name, int *size) {
  dist__group *g;
  DIST_CHECK(lookup("dist_group_size", name, size, &g));
  *size = g->size;
  return DIST_SUCCESS;
}

dist_status dist_group_rank(const char *name, int *rank) {
  dist__group *g;
  DIST_CHECK(lookup("dist_group_rank", name, rank, &g));
  if (g->rank < 0)
    return dist__error(DIST_ERR_NOT_MEMBER, "world rank %d is not a member of group '%s'", dist__state.rank, g->name);
  *rank = g->rank;
  return DIST_SUCCESS;
}

dist_status dist_group_is_member(const char *name, int *is_member) {
  dist__group *g;
  DIST_CHECK(lookup("dist_group_is_member", name, is_member, &g));
  *is_member = g->rank >= 0;
  return DIST_SUCCESS;
}

dist_status dist_group_members(const char *name, int *ranks, int capacity, int *count) {
  dist__group *g;
  DIST_CHECK(lookup("dist_group_members", name, count, &g));
  /* A non-member of a one-copy group (explicit rank list) lists that copy. */
  int in_copy = dist__state.rank;
  if (g->rank < 0) {
    if (g->layout.ncopies != 1)
      return dist__error(DIST_ERR_NOT_MEMBER, "world rank %d is in no copy of group '%s'", dist__state.rank, g->name);
    for (in_copy = 0; g->layout.color[in_copy] != 0; in_copy++) continue;
  }
  if (g->size > capacity) {
    *count = g->size; /* tells the caller how much to allocate */
    return dist__error(DIST_ERR_BUFFER_TOO_SMALL, "group '%s' has %d members; capacity is %d", g->name, g->size,
                       capacity);
  }
  if (!ranks) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_members: ranks is NULL");
  dist__layout_members(&g->layout, in_copy, ranks);
  *count = g->size;
  return DIST_SUCCESS;
}

dist_status dist_group_parent(const char *name, const char **parent) {
  dist__group *g;
  DIST_CHECK(lookup("dist_group_parent", name, parent, &g));
  *parent = g->parent >= 0 ? dist__state.groups[g->parent]->name : NULL;
  return DIST_SUCCESS;
}

dist_status dist_group_count(int *count) {
  DIST_CHECK(dist__require_initialized("dist_group_count"));
  if (!count) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_count: output pointer is NULL");
  *count = dist__state.ngroups;
  return DIST_SUCCESS;
}

dist_status dist_group_name_at(int index, const char **name) {
  DIST_CHECK(dist__require_initialized("dist_group_name_at"));
  if (!name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_name_at: output pointer is NULL");
  if (index < 0 || index >= dist__state.ngroups)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "group index %d is out of range [0, %d)", index, dist__state.ngroups);
  *name = dist__state.groups[index]->name;
  return DIST_SUCCESS;
}

dist_status dist_group_comm(const char *name, MPI_Comm *comm) {
  dist__group *g;
  DIST_CHECK(lookup("dist_group_comm", name, comm, &g));
  *comm = g->comm;
  return DIST_SUCCESS;
}

dist_status dist_group_name_of(MPI_Comm comm, const char **name) {
  DIST_CHECK(dist__require_initialized("dist_group_name_of"));
  if (!name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_name_of: output pointer is NULL");
  if (comm == MPI_COMM_NULL) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_name_of: comm is MPI_COMM_NULL");
  for (int i = 0; i < dist__state.ngroups; i++)
    if (dist__state.groups[i]->comm == comm) {
      *name = dist__state.groups[i]->name;
      return DIST_SUCCESS;
    }
  return dist__error(DIST_ERR_UNKNOWN_GROUP, "the communicator is not one of distmgr's groups (use the handle from dist_group_comm)");
}
