/* The manager's single global state (Borg) and the group table. */
#ifndef DISTMGR_STATE_H
#define DISTMGR_STATE_H

#include <mpi.h>
#include <stdint.h>

#include "distmgr/mpi.h"
#include "internal.h"
#include "layout.h"

typedef struct dist__group {
  char name[DIST_GROUP_NAME_MAX + 1];
  int parent;          /* index in the table; -1 for world */
  dist__layout layout; /* over the manager's world */
  int size;            /* members of my copy (of the group, for non-members) */
  int rank;            /* my rank in my copy; -1 if not a member */
  int index;           /* position in the table (creation order) */
  int *members;        /* world ranks of my copy, NULL if not a member */
  MPI_Comm comm;       /* MPI_COMM_NULL if not a member */
  void *nccl;          /* ncclComm_t, created at the first device collective */
  int cuda_backend;    /* 0 until a device collective picks one: DIST__CUDA_NCCL or _STAGED */
  uint64_t seq;        /* collective calls begun on this group by this rank */
} dist__group;

/* Groups (by creation index) whose call counts the fault notices and the
 * progress board carry; later groups count as "not arrived". */
#define DIST__TRACKED_GROUPS 128

/* The collective this rank is in (for waits: messages, fault checks). */
typedef struct dist__current {
  const char *what;
  struct dist__group *g;
  uint64_t seq;
} dist__current;

typedef struct dist__manager {
  int initialized;
  int mpi_ours; /* distmgr called MPI_Init: finalize MPI at exit */
  dist__settings settings;
  dist_launch launch;
  int adopted; /* world is an application's communicator */
  MPI_Comm world;
  int rank, size, local_rank, local_size, node, nnodes;
  dist_device device;
  uint64_t *device_keys; /* dist__device_key of every world rank */
  char master_addr[DIST_ADDR_MAX];
  int master_port;
  dist__group **groups; /* each group allocated once: names handed out stay valid until finalize */
  int ngroups, capacity;
  size_t nb_allreduce_min; /* DIST_NB_ALLREDUCE_MIN resolved at start: SIZE_MAX = never */
  dist__current cur;
  MPI_Comm faults;     /* the fault channel (faults.c): a duplicate of world */
  int broken;          /* a wait was abandoned: communicators are unusable; the job must end */
  char broken_msg[768];
  int finalize_called; /* dist_manager_finalize ran at least once since MPI_Init */
  void *board;         /* progress board for DIST_TIMEOUT (board.c), NULL when off */
} dist__manager;

extern dist__manager dist__state;

/* Return DIST_ERR_NOT_INITIALIZED naming `what` unless initialized. */
dist_status dist__require_initialized(const char *what);

/* Convert an MPI error code into DIST_ERR_MPI with MPI's text. */
dist_status dist__mpi_error(int code, const char *call);

/* Every rank of the world passes its local status; all return the same code:
 * the most negative one (lowest rank on ties). Rank-local failures thus never
 * leave other ranks waiting in a later collective. Failing ranks keep their
 * own message; others get one naming the rank whose code won. */
dist_status dist__agree(MPI_Comm comm, dist_status mine, const char *what);

/* Both in one all-reduce: the worst local status (as dist__agree) and whether
 * every rank passed the same hash. A hash mismatch returns DIST_ERR_MISMATCH
 * without a message: the caller writes one naming what differs. */
dist_status dist__agree_status_hash(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what);
uint64_t dist__hash(uint64_t h, const void *data, size_t n);

/* The one control round behind all of the above and the verification of
 * collectives: an all-reduce of four words (failure, hash, ~hash, balance),
 * waited for by dist__wait (fault channel and DIST_TIMEOUT observed). */
typedef struct dist__round {
  int64_t in[4], out[4];
} dist__round;
dist__round dist__round_init(MPI_Comm comm, dist_status local, uint64_t hash);
dist_status dist__round_run(MPI_Comm comm, dist__round *r, const char *call);
/* After a run: DIST_SUCCESS if no rank failed; else `local` (this rank's own
 * message) or an error naming the failing rank, its code range-checked. */
dist_status dist__round_failure(MPI_Comm comm, const dist__round *r, dist_status local, const char *what,
                                const char *where);
int dist__round_hash_differs(const dist__round *r);
#define DIST__HASH_SEED 1469598103934665603ULL

/* Group table. */
dist_status dist__group_find(const char *name, dist__group **out); /* NULL = world */
/* Add a group with this layout (taken over) after creating its communicator
 * with MPI_Comm_split over the world. Collective over the world. */
dist_status dist__group_add(const char *name, int parent, dist__layout *layout);
dist_status dist__group_check_new_name(const char *name);
void dist__groups_free(void);

/* Topology: nodes from MPI shared memory (or DIST_RANKS_PER_NODE), checked
 * against the launcher's local values; fills rank/size/local/node fields and
 * creates "world", "local", "cross" and "self". Collective over the world. */
dist_status dist__topology_setup(void);

/* The settings that must match on every rank do (settings_agree.c).
 * Collective over the world. */
dist_status dist__settings_agree(void);

#endif
