/* What the engines know of the job: the settings they obey, given once by
 * the manager at initialize, and their own run-time state (the call in
 * progress, the fault channel, the progress board, the broken flag). The
 * world is the group table's (group/group.h). Nothing here reads the
 * manager. */
#ifndef DISTMGR_ENGINE_H
#define DISTMGR_ENGINE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "group/group.h"

/* The collective this rank is in (for waits: messages, fault checks). */
typedef struct dist__current {
  const char *what;
  struct dist__group *g;
  uint64_t seq;
} dist__current;

typedef struct dist__engine_state {
  /* set by the manager */
  MPI_Comm world;              /* the manager's world (MPI_COMM_NULL before initialize) */
  int up;                      /* the manager is initialized: control waits watch the fault channel */
  double timeout;              /* DIST_TIMEOUT in seconds; <= 0: off */
  int round_shm;               /* DIST_ROUND: groups on one node run their check round in shared memory */
  int shm_data;                /* DIST_SHM_DATA: without MPI, groups on one node move host data through shared memory */
  int cuda_backend;            /* DIST_CUDA_BACKEND (DIST__CUDA_*) */
  int node_tasks;              /* ranks on this node as the launcher says (0: unknown) */
  size_t nb_allreduce_min;     /* DIST_NB_ALLREDUCE_MIN resolved at start: SIZE_MAX = never */
  uint64_t *device_keys;       /* dist__device_key of every world rank (the manager allocates) */
  int64_t *node_leaders;       /* launches without MPI: every world rank's node (its lowest world rank); else NULL */
  struct dist__rdzv *rdzv;     /* launches without MPI: the rendezvous store, and Gloo as the host engine */
  double gloo_timeout;         /* seconds every Gloo context waits for its peers */
  unsigned long private_seq;   /* private groups made so far (their Gloo contexts' keys) */
  unsigned long gloo_connects; /* group copies' Gloo connects so far (their keys) */
  /* the engines' own */
  dist__current cur;
  MPI_Comm faults;             /* the fault channel (faults.c): a duplicate of the world */
  int broken;                  /* a wait was abandoned: communicators are unusable; the job must end */
  char broken_msg[768];
  void *board;                 /* progress board for DIST_TIMEOUT (board.c), NULL when off */
} dist__engine_state;

extern dist__engine_state dist__engine;

/* Back to the state before initialize (communicators MPI_COMM_NULL). */
void dist__engine_reset(void);

#endif
