/* The global manager (Borg state).
 *
 * One process-wide state, set up once by dist_manager_initialize() and queried
 * from anywhere without passing handles. Threading: initialize, finalize and
 * group creation must be called from one thread at a time; queries may be
 * called from any thread once initialize has returned. */
#ifndef DISTMGR_MANAGER_H
#define DISTMGR_MANAGER_H

#include <stddef.h>

#include "distmgr/device.h"
#include "distmgr/launch.h"
#include "distmgr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MPI thread support requested at initialize (MPI_THREAD_* in that order). */
typedef enum dist_thread_level {
  DIST_THREAD_SINGLE = 0,
  DIST_THREAD_FUNNELED,
  DIST_THREAD_SERIALIZED,
  DIST_THREAD_MULTIPLE
} dist_thread_level;

/* Initialize with DIST_INIT_OPTIONS_INIT, then set the fields to change
 * (struct_size: see README, "Option structs"). */
typedef struct dist_init_options {
  size_t struct_size;             /* sizeof(dist_init_options), set by DIST_INIT_OPTIONS_INIT */
  dist_launch_method method;      /* DIST_LAUNCH_AUTO: DIST_INIT_METHOD, else detect */
  dist_thread_level thread_level; /* needed from MPI; less available is an error */
} dist_init_options;

#define DIST_INIT_OPTIONS_INIT                 \
  {                                            \
    .struct_size = sizeof(dist_init_options),  \
    .method = DIST_LAUNCH_AUTO,                \
    .thread_level = DIST_THREAD_SINGLE,        \
  }

/* Set up the manager: read the DIST_* settings, detect the launch, initialize
 * MPI unless the application already did, check the launcher's rank/size
 * against MPI's, find nodes (MPI shared-memory split, or DIST_RANKS_PER_NODE),
 * create the built-in groups "world", "local", "cross" and "self", and select the
 * device. Idempotent: a second call while initialized returns DIST_SUCCESS
 * and changes nothing. Collective over the world. On failure nothing stays
 * initialized (MPI excepted) and every rank returns the same error code. */
dist_status dist_manager_initialize(void);

/* As dist_manager_initialize() with options (NULL = defaults). Collective. */
dist_status dist_manager_initialize_with(const dist_init_options *options);

/* Free every group and communicator distmgr created. Collective over the
 * world. If distmgr initialized MPI, MPI_Finalize runs at process exit, not
 * here: MPI cannot be initialized twice, and initialize must work again after
 * finalize. A program that never calls finalize still exits cleanly (an atexit
 * handler releases everything). Returns DIST_ERR_NOT_INITIALIZED if not
 * initialized. */
dist_status dist_manager_finalize(void);

/* 1 between a successful initialize and finalize, else 0. Local. */
int dist_manager_is_initialized(void);

/* Queries: local, no communication. Each returns DIST_ERR_NOT_INITIALIZED
 * (with a message naming the query) before initialize, and writes its output
 * only on success. */
dist_status dist_manager_rank(int *rank);             /* rank in the world */
dist_status dist_manager_world_size(int *size);
dist_status dist_manager_local_rank(int *rank);       /* rank among this node's ranks */
dist_status dist_manager_local_size(int *size);
dist_status dist_manager_node(int *node);             /* nodes numbered by their lowest world rank */
dist_status dist_manager_node_count(int *count);
dist_status dist_manager_device(dist_device *device);
dist_status dist_manager_is_distributed(int *distributed); /* world size > 1 */
dist_status dist_manager_method(dist_launch_method *method);
dist_status dist_manager_method_name(const char **name); /* "OPENMPI", ... */
dist_status dist_manager_master_address(const char **address); /* launcher's, else rank 0's host name */
dist_status dist_manager_master_port(int *port);               /* launcher's, else DIST_MASTER_PORT */
/* One line for logs, e.g. "OPENMPI rank 1/4 local 1/2 node 0/2 device cpu:0
 * master node0:12355". Truncated to `size` bytes. */
dist_status dist_manager_describe(char *buffer, size_t size);

#ifdef __cplusplus
}
#endif
#endif
