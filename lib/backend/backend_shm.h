/* The shared-memory engine: host-memory collectives of a group whose
 * members share one node, in launches without MPI, through one segment per
 * group instead of Gloo's TCP loopback (backend_shm.c). */
#ifndef DISTMGR_BACKEND_SHM_H
#define DISTMGR_BACKEND_SHM_H

#include "backend/backend.h"

extern const dist__backend dist__backend_shm;

/* g's states (g->shm_state). */
enum { DIST__SHM_NONE, DIST__SHM_PENDING, DIST__SHM_OPEN };

/* Local, at g's creation: mark g for the engine (DIST__SHM_PENDING) when
 * dist__engine.shm_data allows it, g has two members or more and all are on
 * one node (dist__engine.node_leaders); else g keeps Gloo. The segment is
 * made at g's first host collective, which every member enters: groups used
 * only for device memory (NCCL) never take /dev/shm space. A member that
 * cannot take part then refuses, and the group goes back to Gloo on every
 * member. */
void dist__shm_data_init(dist__group *g);
void dist__shm_data_close(dist__group *g); /* local */

#endif
