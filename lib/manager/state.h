/* The manager's single global state (Borg) and the group table. */
#ifndef DISTMGR_STATE_H
#define DISTMGR_STATE_H

#include <mpi.h>
#include <stdint.h>

#include "distmgr/mpi.h"
#include "core/internal.h"
#include "core/hash.h"
#include "group/layout.h"

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
  int64_t *startup_rows; /* the start-up table during initialize (DIST__ROW_*) */
  int launch_forced;     /* the launch method was forced (DIST_INIT_METHOD or an option) */
  char cpu_reason[320];  /* why this rank runs on the CPU with DIST_DEVICE=auto, or "" */
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
 * every rank passed the same hash. A hash mismatch (no rank failed) sets
 * *differs on every rank and returns DIST_ERR_MISMATCH without a message: the
 * caller writes one naming what differs. A rank that failed with
 * DIST_ERR_MISMATCH of its own leaves *differs 0. */
dist_status dist__agree_status_hash(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what, int *differs);

/* The one control round behind all of the above and the verification of
 * collectives: an all-reduce of four words (failure, hash, ~hash, balance) by
 * point-to-point recursive doubling, each step waited for by dist__wait
 * (fault channel and DIST_TIMEOUT observed). */
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

/* Launches that cannot work (launch_advice.c): the message for torchrun's
 * processes, and the check of the launcher's rank and size against
 * MPI_COMM_WORLD's (`forced`: the method was forced; never suggest forcing). */
dist_status dist__launch_refuse_torchrun(const dist_launch *l, const char *const *env);
dist_status dist__launch_check_world(const dist_launch *l, int forced, const char *const *env);

/* Group table. */
dist_status dist__group_find(const char *name, dist__group **out); /* NULL = world */
/* Add a group with this layout (taken over) after creating its communicator
 * with MPI_Comm_split over the world. Collective over the world. */
dist_status dist__group_add(const char *name, int parent, dist__layout *layout);
/* Add n groups of one parent with one agreement: all of them or, on any
 * rank's failure (`local`: computing the layouts failed here), none. The
 * layouts are taken over. Collective. */
dist_status dist__group_add_all(int n, const char *const *names, int parent, dist__layout *layouts,
                                dist_status local);
/* Add a group whose communicator `comm` (MPI_COMM_NULL for non-members) the
 * caller made; both taken over, freed on failure. Local: the caller makes
 * every rank agree (start-up adds the built-in groups with one agreement). */
dist_status dist__group_keep(const char *name, int parent, dist__layout *layout, MPI_Comm comm);
dist_status dist__group_check_new_name(const char *name);
void dist__groups_free(void);

/* The start-up table: one row per world rank, gathered in one all-gather
 * at initialize, from which every rank derives the nodes, the built-in groups
 * and who drives which GPU (start-up collectives are slow when ranks outnumber
 * cores, so everything travels at once). */
enum {
  DIST__ROW_STATUS,   /* the rank's worst status of the steps before the gather */
  DIST__ROW_LEADER,   /* world rank of its node's local rank 0 */
  DIST__ROW_LRANK,    /* local rank */
  DIST__ROW_DEVKEY,   /* dist__device_key of its device (0: CPU) */
  DIST__ROW_DEVFLAGS, /* DIST__DEV_* */
  DIST__ROW_WORDS
};
#define DIST__DEV_FELL_BACK 1 /* GPUs were allocated, CUDA is unusable: runs on the CPU */

/* Topology: my node's communicator (MPI shared memory or DIST_RANKS_PER_NODE
 * blocks), local rank/size and node leader, checked against the launcher's
 * local values. Collective (one split). */
dist_status dist__topology_node(MPI_Comm *node_comm, int *leader);
/* Nodes and the groups "world", "local" (takes `node_comm` over), "cross"
 * and "self" from the gathered table. Collective; the caller agrees. */
dist_status dist__topology_groups(const int64_t *rows, MPI_Comm *node_comm);

/* The settings that must match on every rank (settings_agree.c): their hash
 * travels in initialize's first agreement round; on a difference
 * dist__settings_name_difference (collective) names the setting and ranks. */
uint64_t dist__settings_hash(void);
dist_status dist__settings_name_difference(void);

#endif
