/* The manager's single global state (Borg). The world and the group table
 * are the group layer's (group/group.h), what the engines know of the job is
 * the backend layer's (backend/engine.h): the manager fills both at
 * initialize and empties them at finalize. */
#ifndef DISTMGR_STATE_H
#define DISTMGR_STATE_H

#include <stdint.h>

#include "distmgr/mpi.h"
#include "core/internal.h"
#include "core/hash.h"
#include "group/layout.h"
#include "group/group.h"
#include "backend/agree.h"
#include "backend/engine.h"




typedef struct dist__manager {
  int initialized;
  int mpi_ours; /* distmgr called MPI_Init: finalize MPI at exit */
  dist__settings settings;
  dist_launch launch;
  int adopted; /* world is an application's communicator */
  int without_mpi; /* DIST_HOST_ENGINE=gloo: started through the store, Gloo for host memory */
  int local_rank, local_size, node, nnodes; /* world, rank and size: dist__groups */
  dist_device device;
  int64_t *startup_rows; /* the start-up table during initialize (DIST__ROW_*) */
  int launch_forced;     /* the launch method was forced (DIST_INIT_METHOD or an option) */
  char cpu_reason[320];  /* why this rank runs on the CPU with DIST_DEVICE=auto, or "" */
  char master_addr[DIST_ADDR_MAX];
  int master_port;
  int finalize_called; /* dist_manager_finalize ran at least once since MPI_Init */
} dist__manager;

extern dist__manager dist__state;
extern int dist__finalized_once; /* to tell "before initialize" from "after finalize" */
/* A public lookup's start (group_query.c): initialized, `out` not NULL, the
 * group known. */
dist_status dist__group_lookup(const char *what, const char *name, const void *out, dist__group **g);

/* Return DIST_ERR_NOT_INITIALIZED naming `what` unless initialized. */
dist_status dist__require_initialized(const char *what);


/* Launches that cannot work (launch_advice.c): the message for torchrun's
 * processes, and the check of the launcher's rank and size against
 * MPI_COMM_WORLD's (`forced`: the method was forced; never suggest forcing). */
dist_status dist__launch_refuse_torchrun(const dist_launch *l, const char *const *env);
dist_status dist__launch_check_world(const dist_launch *l, int forced, const char *const *env);


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
/* What rank `me` reports about its node from the start-up table (rows of
 * DIST__ROW_WORDS, above): DIST__NOTE_FELL_BACK when it is the node's
 * lowest rank that runs on the CPU although GPUs were allocated;
 * DIST__NOTE_SHARED when it is the lowest of the node's ranks that drive one
 * GPU together (*a < *b: the first such pair; *n: ranks on the node). Pure. */
#define DIST__NOTE_FELL_BACK 1
#define DIST__NOTE_SHARED 2
int dist__device_notes(const int64_t *rows, int size, int me, int *a, int *b, int *n);


/* The settings that must match on every rank (settings_agree.c): their hash
 * travels in initialize's first agreement round; on a difference
 * dist__settings_name_difference (collective) names the setting and ranks. */
uint64_t dist__settings_hash(void);
dist_status dist__settings_name_difference(void);

#endif
