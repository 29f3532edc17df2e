/* The group table: the world and the named process groups drawn from it
 * (their layout over world ranks, my members and the engines' handles,
 * which the engines make and keep). One table per process; the manager fills it at
 * initialize and empties it at finalize. */
#ifndef DISTMGR_GROUP_TABLE_H
#define DISTMGR_GROUP_TABLE_H

#include <stdint.h>

#include "distmgr/group.h"
#include "core/internal.h"
#include "group/layout.h"

typedef struct dist__group {
  char name[DIST_GROUP_NAME_MAX + 1];
  int parent;          /* index in the table; -1 for world */
  dist__layout layout; /* over the manager's world */
  int size;            /* members of my copy (of the group, for non-members) */
  int rank;            /* my rank in my copy; -1 if not a member */
  int index;           /* position in the table (creation order) */
  int *members;        /* world ranks of my copy, NULL if not a member */
  /* The engines' parts, made and freed by backend/ (opaque here). */
  struct dist__mpi_group *mpi;       /* the communicator; NULL if not a member */
  struct dist__device_group *device; /* made at the first device collective; NULL until then */
  struct dist__gloo *gloo;           /* the Gloo context of launches without MPI; NULL otherwise */
  struct dist__round_shm *round;    /* the check round in shared memory (a group on one node); NULL: messages */
  int shm_state;                    /* without MPI, a group on one node: host data through shared memory (backend_shm.h) */
  struct dist__shm_data *shm;       /* its segment, made at the group's first host collective; NULL before */
  uint64_t seq;        /* collective calls begun on this group by this rank */
} dist__group;

/* Groups (by creation index) whose call counts the fault notices and the
 * progress board carry; later groups count as "not arrived". */
#define DIST__TRACKED_GROUPS 128

typedef struct dist__group_table {
  int rank, size;       /* mine in the world, and its size */
  dist__group **groups; /* each group allocated once: names handed out stay valid until finalize */
  int ngroups, capacity;
} dist__group_table;

extern dist__group_table dist__groups;

dist_status dist__group_find(const char *name, dist__group **out); /* NULL = world */
dist_status dist__group_check_new_name(const char *name);
/* Room in the table for one more group. */
dist_status dist__group_reserve(void);

#endif
