/* Communication backends: one ops table per engine.
 *
 * The collective layer validates arguments, upcasts 16-bit floats, packs
 * strided chunks and then calls a backend on contiguous buffers with counts
 * in elements of `dtype` (never bf16/f16 for reductions). A backend only
 * moves and reduces bytes; adding one means writing a table and adding it to
 * dist__backend_for(), without touching the callers.
 *
 * Operations with a `pending` argument are non-blocking when it is not NULL:
 * they fill it and return once launched; the backend's wait/test complete it.
 * With pending NULL they return when complete (for stream-ordered backends:
 * once enqueued on the stream, which orders later work correctly). */
#ifndef DISTMGR_BACKEND_H
#define DISTMGR_BACKEND_H

#include <stddef.h>

#include "mem/dtype.h"
#include "backend/engine.h"
#include "backend/agree.h"

/* The MPI backend's part of a group: its communicator. */
struct dist__mpi_group {
  MPI_Comm comm;
};
static inline MPI_Comm dist__comm(const dist__group *g) { return g->mpi ? g->mpi->comm : MPI_COMM_NULL; }

/* NCCL error codes as distmgr errors (DIST_ERR_NCCL); for core/check.h. */
dist_status dist__nccl_error(int code, const char *call);

/* The device backends' part of a group: which one its device collectives
 * use (picked once, DIST__CUDA_NCCL or _STAGED) and NCCL's communicator
 * (ncclComm_t, made at the group's first NCCL collective). */
struct dist__device_group {
  int backend;
  void *nccl;
};

struct dist__spec;

typedef struct dist__pending {
  MPI_Request mpi;
  void *event;    /* cudaEvent_t of stream-ordered backends */
  void *state;    /* backend-owned, released by wait/test on completion */
} dist__pending;

typedef struct dist__backend {
  const char *name;
  /* Can this backend reduce `dtype` with `op` itself? (DIST_AVG may be
   * refused: the caller then sums and divides.) */
  int (*can_reduce)(dist_dtype dtype, dist_reduce_op op);
  dist_status (*all_reduce)(dist__group *g, const void *send, void *recv, size_t count, dist_dtype dtype,
                            dist_reduce_op op, dist__pending *pending);
  dist_status (*broadcast)(dist__group *g, void *buf, size_t count, dist_dtype dtype, int root);
  dist_status (*reduce)(dist__group *g, const void *send, void *recv, size_t count, dist_dtype dtype,
                        dist_reduce_op op, int root);
  dist_status (*all_gather_v)(dist__group *g, const void *send, void *recv, const size_t *counts,
                              const size_t *displs, dist_dtype dtype, dist__pending *pending);
  /* recv gets the reduction of chunk `me` (counts[me] elements). */
  dist_status (*reduce_scatter_v)(dist__group *g, const void *send, void *recv, const size_t *counts,
                                  const size_t *displs, dist_dtype dtype, dist_reduce_op op);
  dist_status (*gather_v)(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                          dist_dtype dtype, int root);
  dist_status (*scatter_v)(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                           dist_dtype dtype, int root);
  dist_status (*all_to_all_v)(dist__group *g, const void *send, const size_t *scounts, const size_t *sdispls,
                              void *recv, const size_t *rcounts, const size_t *rdispls, dist_dtype dtype,
                              dist__pending *pending);
  dist_status (*barrier)(dist__group *g);
  dist_status (*wait)(dist__pending *p);
  dist_status (*test)(dist__pending *p, int *done);
  /* Reductions this backend cannot do go here (NULL: none). */
  const struct dist__backend *fallback;
  /* In-place sum of bf16 or f16 values that stay 16-bit on the wire (each
   * step adds in f32 and rounds back): compressed gradients. NULL where the
   * backend sums 16-bit floats itself (can_reduce) or cannot at all. */
  dist_status (*sum16)(dist__group *g, void *buf, size_t count, dist_dtype dtype, dist__pending *pending);
  /* A blocking all-to-all-v posted before its verification round, finished
   * or settled by it (spec.h). NULL where the engine cannot take back or
   * drain what it posted. */
  dist_status (*all_to_all_v_post)(struct dist__spec *spec, dist__group *g, const void *send, const size_t *scounts,
                                   const size_t *sdispls, void *recv, const size_t *rcounts, const size_t *rdispls,
                                   dist_dtype dtype);
  /* The largest element count or offset one call can take (MPI's are int),
   * for the checks that must fail on every rank before the data moves (an
   * all-to-all's counts are each rank's own); NULL: no limit below size_t. */
  size_t (*max_count)(void);
} dist__backend;

extern const dist__backend dist__backend_mpi;
/* The host-memory backend of group g: Gloo's when g has a Gloo context
 * (launches without MPI), else MPI's. */
const dist__backend *dist__backend_host(const dist__group *g);
/* The job's host engine's backend (every group of a job has the same one). */
const dist__backend *dist__backend_host_engine(void);
#ifdef HAVE_GLOO
extern const dist__backend dist__backend_gloo; /* host memory without MPI (torchrun) */
#endif
#ifdef HAVE_CUDA
extern const dist__backend dist__backend_staged; /* CUDA memory through host copies and MPI */
#endif
#ifdef HAVE_NCCL
extern const dist__backend dist__backend_nccl;
#endif

/* The backend for tensors in `mem` on group g, of which this rank is a member
 * (DIST_ERR_UNSUPPORTED if none). Local; the same on every member. */
dist_status dist__backend_for(dist_memory mem, dist__group *g, const dist__backend **out);

/* Release what backends keep per group (NCCL communicators). */
void dist__backend_release_group(dist__group *g);

/* Groups with their communicators (group_comm.c). */
/* Add n groups of one parent with one agreement: all of them or, on any
 * rank's failure (`local`: computing the layouts failed here, and layouts
 * may be NULL), none. The layouts are taken over. Collective. */
dist_status dist__group_add_all(int n, const char *const *names, int parent, dist__layout *layouts,
                                dist_status local);
/* Add a group whose communicator `comm` (MPI_COMM_NULL for non-members) the
 * caller made; both taken over, freed on failure. Local: the caller makes
 * every rank agree (start-up adds the built-in groups with one agreement). */
dist_status dist__group_keep(const char *name, int parent, dist__layout *layout, MPI_Comm comm);
#ifdef HAVE_GLOO
/* The same in launches without MPI: my copy's members connect a Gloo context
 * through the rendezvous store, then the group is kept. Collective over the
 * members; after a `local` failure (or its own) this rank does not connect
 * and says so on the copy's key, which ends its copy-mates' connect at once.
 * The caller makes every rank agree on the outcome. */
dist_status dist__group_keep_gloo(const char *name, int parent, dist__layout *layout, dist_status local);
#endif
/* After every rank agreed on groups [from, end of the table): give those
 * whose members share one node their shared-memory check round
 * (round_shm.h). Collective over the world, in table order. */
dist_status dist__groups_open_rounds(int from);
void dist__groups_free(void);

/* A pending operation that has not started (waiting on it returns at once). */
void dist__pending_init(dist__pending *p);

/* Private groups (group_comm.c): a reducer's own communicator, outside the
 * group table; collective over the world (split) or over `of`'s members
 * (copy). A rank outside the split gets rank -1. Free with
 * dist__group_private_free (also after a failed create). */
dist_status dist__group_split_private(const char *name, int color, int key, dist__group *out);
dist_status dist__group_copy_private(const char *name, const dist__group *of, dist__group *out);
void dist__group_private_free(dist__group *g);
void dist__group_private_clear(dist__group *g); /* none yet: freeing it does nothing */

/* A host broadcast whose waiting ranks leave the cores to the sender and the
 * network stack (DASO's node broadcasts, which last as long as a global
 * sync): on MPI it naps between tests; Gloo's waits sleep by themselves. */
dist_status dist__broadcast_napping(dist__group *g, void *buf, size_t count, dist_dtype dtype, int root);
dist_status dist__mpi_broadcast_napping(dist__group *g, void *buf, size_t count, dist_dtype dtype, int root);

#endif
