/* The DDP reducer's state, shared by ddp.c (layout, life cycle) and
 * ddp_reduce.c (marking, launching, finalize) and ddp_progress.c. */
#ifndef DISTMGR_DDP_INTERNAL_H
#define DISTMGR_DDP_INTERNAL_H

#include <pthread.h>

#include "backend/backend.h"
#include "backend/progress.h"
#include "mem/memops.h"
#include "optim/params_internal.h"

typedef struct dist__bucket {
  int nparams;
  int *params;       /* parameter indices in bucket order (expected ready order) */
  int64_t *offset;   /* element offset of each in the bucket */
  int64_t numel;
  dist_dtype dtype;  /* the parameters' dtype */
  dist_memory memory;
  int device;
  void *buf;         /* numel elements of dtype */
  dist_dtype wire;   /* what goes to the backend: dtype, or bf16/f16 when compressed */
  void *wirebuf;     /* numel elements of wire (== buf when wire == dtype) */
  int ready;         /* parameters marked so far this iteration */
  int state;         /* DIST__BUCKET_* */
  int in_buf;        /* the reduction ran on buf (f32) although wire is 16-bit: no widening after */
  int failed;        /* this iteration's launch failed here (a hook's finish is then skipped) */
  dist__pending pending;
  dist_request *hook_req;
} dist__bucket;

enum { DIST__BUCKET_IDLE = 0, DIST__BUCKET_LAUNCHED, DIST__BUCKET_DONE };

struct dist_ddp {
  dist_params *p;
  dist__group *g;
  const dist__backend **be; /* per bucket */
  dist_ddp_options o;
  dist_ddp_hook hook;
  int has_hook;
  int nb;
  dist__bucket *b;
  int *bucket_of, *slot_of; /* per parameter */
  void **orig_grad;         /* grad_as_bucket_view: the user's buffers, restored at destroy */
  unsigned char *marked;
  int nmarked;
  int next_launch;          /* buckets launch strictly in order */
  int *order, norder;       /* marks of this iteration in the order they came (for the rebuild) */
  int rebuild_pending;      /* rebuild_buckets and the first synchronised finalize is still to come */
  int sync;
  uint64_t bytes_sent;
  dist_status sticky;       /* the iteration's first local failure (copy, launch, test), reported by finalize */
  char sticky_why[256];
  void *scratch;            /* f32 scratch for averaging 16-bit buckets (host) */
  dist__piece *pieces;      /* p->n + 1: a device bucket's gradients, copied in one batch */
  dist__progress prog;
};

/* ddp.c */
extern const dist__options_kind dist__ddp_options_kind; /* DASO reads its `local` with it */
dist_status dist__ddp_assign(dist_ddp *d, const int *order); /* sets nb, b, bucket_of, slot_of */
dist_status dist__ddp_alloc_buffers(dist_ddp *d);           /* and d->be */
void dist__ddp_free_buckets(dist__bucket *b, int nb);
dist_status dist__ddp_sync_memory(const dist_ddp *d);
/* Gradients as views into their buckets (1) or back into their own memory (0). */
dist_status dist__ddp_move_grads(dist_ddp *d, int into_bucket);
/* ddp_rebuild.c: collective, at the end of every synchronised finalize while
 * d->rebuild_pending; clears it once rank 0 marked something */
void dist__ddp_rebuild(dist_ddp *d);
/* ddp_reduce.c */
dist_status dist__ddp_launch_ready(dist_ddp *d);
dist_status dist__ddp_wait_all(dist_ddp *d);
/* ddp_progress.c */

#endif
