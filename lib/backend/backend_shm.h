/* The shared-memory engine: host-memory collectives of a group whose
 * members share one node, in launches without MPI, through one segment per
 * group instead of Gloo's TCP loopback (backend_shm.c). */
#ifndef DISTMGR_BACKEND_SHM_H
#define DISTMGR_BACKEND_SHM_H

#include "backend/backend.h"

extern const dist__backend dist__backend_shm;

/* Collective over g's members (after its Gloo context and check round are
 * made): give g its data segment when dist__engine.shm_data allows it, g
 * has two members or more and all share this node; else g keeps Gloo. The
 * outcome is the same on every member. */
dist_status dist__shm_data_open(dist__group *g);
void dist__shm_data_close(dist__group *g); /* local */

#endif
