/* DASO's state, shared by daso.c (life cycle, step, epoch logic) and
 * daso_sync.c (packing, sending, receiving and merging parameters). */
#ifndef DISTMGR_DASO_INTERNAL_H
#define DISTMGR_DASO_INTERNAL_H

#include "daso_schedule.h"
#include "params_internal.h"

struct dist_daso {
  dist_optim *opt;
  dist_params *p;
  dist_ddp *ddp;        /* node-local gradient averaging on "local" */
  dist__group *local;
  MPI_Comm cross;       /* my local rank's ranks on every node (DASO's own, per use_mpi_groups) */
  int nodes, lrank, lsize;
  dist_daso_options o;
  dist_lr_schedule schedule;
  int has_schedule;
  double lr0;           /* lr at create: reset restores it */
  dist_grad_scaler scaler;
  int has_scaler;
  dist__daso_sched s;
  int local_sync;
  /* global sync buffers (host) */
  int64_t n;            /* parameter elements */
  double *ref;          /* my cross group's last agreed parameters */
  void *wire;           /* n + 1 elements of o.downcast: changes since ref, then the non-finite count */
  double *host;         /* scratch: parameters as doubles */
  double *sent;         /* MERGE_DELTA: what this rank sent (ref + its rounded change) */
  MPI_Request *req;     /* one per chunk */
  int nchunks;
  int inflight;         /* my chunks are in flight */
  int skipped;
  uint64_t bytes_sent, syncs;
};

/* daso_sync.c */
dist_status dist__daso_sync_init(dist_daso *d);
void dist__daso_sync_free(dist_daso *d);
/* Rank `sender`'s cross group sends its parameters (others: nothing). */
dist_status dist__daso_send(dist_daso *d, int sender);
/* Complete the send of `sender` and merge (blocking: plain average; else
 * Heat's formula with btw; one node: parameters kept), then broadcast inside
 * each node from `sender`. Every rank calls it. */
dist_status dist__daso_receive(dist_daso *d, int sender, int blocking, int btw);
/* Test the chunks in flight (drives MPI's progress). */
dist_status dist__daso_poke(dist_daso *d);
/* Set ref to the current parameters (identical on all ranks at that point). */
dist_status dist__daso_set_ref(dist_daso *d);
/* The merge arithmetic, pure: p = (w*p + N*(ref + sum/N)) / (N + w) with
 * w = 2*btw (1 if btw == 0); blocking: p = ref + sum/N. ref becomes
 * ref + sum/N. */
void dist__daso_merge(double *p, double *ref, const double *sum, int64_t n, int nodes, int btw, int blocking);
/* DIST_DASO_MERGE_DELTA, non-blocking: p += (ref + sum/N) - own_sent; ref
 * becomes ref + sum/N. */
void dist__daso_merge_delta(double *p, double *ref, const double *sum, const double *own_sent, int64_t n, int nodes);

#endif
