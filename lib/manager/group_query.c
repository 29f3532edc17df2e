/* The public lookups of the group table (distmgr/group.h, distmgr/mpi.h):
 * local, after initialize. */
#include <string.h>

#include "manager/state.h"

/* ---- lookups ------------------------------------------------------------ */

dist_status dist__group_lookup(const char *what, const char *name, const void *out, dist__group **g) {
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
  DIST_CHECK(dist__group_lookup("dist_group_size", name, size, &g));
  *size = g->size;
  return DIST_SUCCESS;
}

dist_status dist_group_rank(const char *name, int *rank) {
  dist__group *g;
  DIST_CHECK(dist__group_lookup("dist_group_rank", name, rank, &g));
  if (g->rank < 0)
    return dist__error(DIST_ERR_NOT_MEMBER, "world rank %d is not a member of group '%s'", dist__groups.rank, g->name);
  *rank = g->rank;
  return DIST_SUCCESS;
}

dist_status dist_group_is_member(const char *name, int *is_member) {
  dist__group *g;
  DIST_CHECK(dist__group_lookup("dist_group_is_member", name, is_member, &g));
  *is_member = g->rank >= 0;
  return DIST_SUCCESS;
}

dist_status dist_group_members(const char *name, int *ranks, int capacity, int *count) {
  dist__group *g;
  DIST_CHECK(dist__group_lookup("dist_group_members", name, count, &g));
  /* A non-member of a one-copy group (explicit rank list) lists that copy. */
  int in_copy = dist__groups.rank;
  if (g->rank < 0) {
    if (g->layout.ncopies != 1)
      return dist__error(DIST_ERR_NOT_MEMBER, "world rank %d is in no copy of group '%s'", dist__groups.rank, g->name);
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
  DIST_CHECK(dist__group_lookup("dist_group_parent", name, parent, &g));
  *parent = g->parent >= 0 ? dist__groups.groups[g->parent]->name : NULL;
  return DIST_SUCCESS;
}

dist_status dist_group_count(int *count) {
  DIST_CHECK(dist__require_initialized("dist_group_count"));
  if (!count) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_count: output pointer is NULL");
  *count = dist__groups.ngroups;
  return DIST_SUCCESS;
}

dist_status dist_group_name_at(int index, const char **name) {
  DIST_CHECK(dist__require_initialized("dist_group_name_at"));
  if (!name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_group_name_at: output pointer is NULL");
  if (index < 0 || index >= dist__groups.ngroups)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "group index %d is out of range [0, %d)", index, dist__groups.ngroups);
  *name = dist__groups.groups[index]->name;
  return DIST_SUCCESS;
}
