/* DASO's state, shared by daso.c (life cycle, step, epoch logic) and
 * daso_sync.c (sending, receiving, node broadcasts) and daso_kernels.c
 * (packing and merging). */
#ifndef DISTMGR_DASO_INTERNAL_H
#define DISTMGR_DASO_INTERNAL_H

#include "reducer/daso_schedule.h"
#include "optim/params_internal.h"
#include "backend/backend.h"

struct dist_daso {
  dist_optim *opt;
  dist_params *p;
  dist_ddp *ddp;        /* node-local gradient averaging on "local" */
  dist__group *local;
  dist__group cross;    /* my local rank's ranks on every node (DASO's own, per use_mpi_groups; private) */
  int nodes, lrank, lsize;
  dist_daso_options o;
  dist_lr_schedule schedule;
  int has_schedule;
  double lr0;           /* lr at create: reset restores it */
  dist_grad_scaler scaler;
  int has_scaler;
  dist__daso_sched s;
  int local_sync;
  int logic_epoch;      /* the epoch epoch_loss_logic last ran for (-1: none) */
  /* global sync buffers (host) */
  int64_t n;            /* parameter elements */
  size_t nbytes;        /* their bytes, each in its own dtype */
  void *ref;            /* my cross group's last agreed parameters, laid out as the parameters back to back */
  void *wire;           /* n + 1 elements of o.downcast: changes since ref, then the non-finite flag */
  void *sent;           /* MERGE_DELTA: what this rank sent (ref + its rounded change), laid out as ref */
  void *stage;          /* a host copy of one device parameter (NULL when all are on the host) */
  dist__pending *req;   /* one per chunk */
  int nchunks;
  int inflight;         /* my chunks are in flight */
  dist_status send_error; /* packing failed here: sent as the flag, reported at the receive */
  char send_why[256];
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
/* daso_kernels.c: one pass over one parameter of type pt (f32 or f64); wire
 * and sum are of type wt (bf16, f16 or f32). */
/* wire = wt(p - ref); sent (unless NULL) = ref + wire read back. Returns 1
 * when a wire value is not finite: a NaN or inf parameter, or a change
 * beyond wt's range. */
int dist__daso_pack(dist_dtype pt, const void *p, const void *ref, void *sent, dist_dtype wt, void *wire, int64_t n);
/* The merge, pure: p = (w*p + N*(ref + sum/N)) / (N + w) with w = 2*btw
 * (1 if btw == 0); blocking: p = ref + sum/N. ref becomes ref + sum/N. */
void dist__daso_merge(dist_dtype pt, void *p, void *ref, dist_dtype wt, const void *sum, int64_t n, int nodes, int btw,
                      int blocking);
/* DIST_DASO_MERGE_DELTA, non-blocking: p += (ref + sum/N) - own_sent; ref
 * becomes ref + sum/N. */
void dist__daso_merge_delta(dist_dtype pt, void *p, void *ref, dist_dtype wt, const void *sum, const void *own_sent,
                            int64_t n, int nodes);

/* ref += sum/N alone, with the merges' arithmetic: a node that cannot merge
 * a parameter still keeps ref equal to its cross group's. */
void dist__daso_advance_ref(dist_dtype pt, void *ref, dist_dtype wt, const void *sum, int64_t n, int nodes);
/* 1 when one of the n wire values is NaN or inf. */
int dist__daso_wire_bad(dist_dtype wt, const void *wire, int64_t n);

#endif
