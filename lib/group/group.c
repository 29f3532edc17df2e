/* The group table: finding groups, checking new names, room for one more.
 * Groups are made and freed with their communicators by the backend layer
 * (backend/group_comm.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group/group.h"

dist__group_table dist__groups;

dist_status dist__group_find(const char *name, dist__group **out) {
  if (!name) name = "world";
  for (int i = 0; i < dist__groups.ngroups; i++)
    if (strcmp(dist__groups.groups[i]->name, name) == 0) {
      *out = dist__groups.groups[i];
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

dist_status dist__group_reserve(void) {
  if (dist__groups.ngroups < dist__groups.capacity) return DIST_SUCCESS;
  int cap = dist__groups.capacity ? 2 * dist__groups.capacity : 8;
  dist__group **g = realloc(dist__groups.groups, sizeof *g * (size_t)cap);
  if (!g) return dist__error(DIST_ERR_NO_MEMORY, "group table of %d entries", cap);
  dist__groups.groups = g;
  dist__groups.capacity = cap;
  return DIST_SUCCESS;
}
