/* DASO: Distributed Asynchronous and Selective Optimization (Heat's
 * algorithm, Coquelin et al. 2022) over the manager's node layout.
 *
 * Ranks on one node average gradients with a DDP reducer on the "local"
 * group (local synchronisation); once every global_skips batches one rank
 * per node, the ranks of local rank g (the "cross" group of g, g rotating
 * over local ranks), average their *parameters* across nodes (global
 * synchronisation), non-blocking: the parameters are packed, sent in chunks
 * of sending_chunk_size elements and received batches_to_wait batches later,
 * then merged with what the rank trained meanwhile,
 *     p = (2*btw * p_now + sum over nodes of p_sent) / (nodes + 2*btw)
 * (1 instead of 2*btw when btw is 0), and broadcast inside each node from
 * local rank g. Phases: warmup_epochs of blocking global averaging every
 * batch, then cycling (global_skips, local_skips, batches_to_wait) =
 * (4,1,1) -> (2,1,1) -> (1,1,1) -> (max, max/f, max/f) -> (4,...) ..., moving
 * one step each time the loss plateaus (an epoch improves when loss <
 * best * (1 - stability_level); plateau = more than 2 non-improving epochs
 * in a row), then cooldown_epochs of blocking averaging again. The last
 * batch of every epoch is a blocking global average.
 *
 * One training iteration (backward writes gradients; see README):
 *     forward; backward calling dist_daso_mark_ready(d, i) per parameter;
 *     dist_daso_step(d);               // local optimizer + the sync logic
 * and at the end of each epoch dist_daso_epoch_loss_logic(d, loss, 0).
 * dist_daso_set_last_batch(d, batches_per_epoch - 1) before the first step.
 *
 * Where distmgr differs from Heat, deliberately:
 * - One rank per node works (cross = world, no local sync needed), and so
 *   does one node (cross groups of one rank: the global sync is a no-op).
 * - A chunked receive waits for every chunk (Heat waits for at most one
 *   extra chunk per parameter and breaks when one spans more than two).
 * - The merge uses the btw the parameters were sent with (Heat reads the
 *   member value, which may have changed meanwhile).
 * - Downcast: applies to every global send, blocking or not (Heat: only in
 *   the blocking phases), and what is downcast is the change since the
 *   sending group's last agreed parameters, not the parameters themselves:
 *   p_sent = ref + bf16(p - ref), with ref identical on every rank of the
 *   group. Rounding the parameters would erase every update smaller than
 *   1/256 of a weight (bf16 keeps 8 significant bits); rounding the change
 *   keeps that relative error on the change only, halves the bytes, and
 *   blocking results still agree bit for bit across ranks.
 * - A NaN or inf in a sent buffer is an error on every rank of the group
 *   (flagged in an extra element of the same all-reduce: no extra round
 *   trip, no hang), and those parameters are not merged. A sender that
 *   cannot pack (e.g. a failed device copy) sends the same flag, so its
 *   group fails at the receive instead of waiting for it.
 * - The previous send still in flight is received before a new one starts.
 * - A sum of sent changes that overflows the wire type (f16: 2 x 40000) is
 *   an error on every rank of the group, and nothing is merged.
 * - Failures never leave other ranks waiting. create agrees over the world
 *   (one rank's NULL or bad option fails every rank) and refuses options
 *   that differ between ranks (DIST_ERR_MISMATCH). Compared: every option
 *   that drives the schedule or the sync, and the schedule's kind and the
 *   values that kind uses; not verbose, not the local DDP options (each
 *   node's DDP create checks those), not a custom schedule's fn and ctx. A
 *   step whose local part fails (DDP finalize, the scaler, the optimizer)
 *   still runs this batch's sync with the rank's unstepped parameters and
 *   returns the error. A node whose sender cannot merge a received sync (a
 *   failed device copy) fails that step; its ranks still take the sender's
 *   parameters, and the group's agreed copy of them (the base of the
 *   changes sent) stays equal on every node, so the next sync brings all
 *   ranks back together.
 *
 * Merge option. Heat's formula (the default) keeps only 2*btw/(N + 2*btw)
 * of what a rank trained since it sent: with btw = 1 and 2 nodes half of
 * those batches' updates is dropped at every global sync, which on a
 * steadily falling loss costs a constant few percent (bench/daso: 7 %).
 * merge = DIST_DASO_MERGE_DELTA instead takes the group's mean of the sent
 * copies and adds this rank's own progress since sending:
 *     p = mean(p_sent) + (p_now - p_sent_mine)
 * (blocking syncs are plain means either way).
 *
 * Node layout: taken from the manager ("local" and "cross" groups); on one
 * machine DIST_RANKS_PER_NODE=2 treats 4 ranks as 2 nodes of 2. Every node
 * must have the same number of ranks. */
#ifndef DISTMGR_DASO_H
#define DISTMGR_DASO_H

#include "distmgr/ddp.h"
#include "distmgr/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_daso dist_daso;

/* Initialize with DIST_DASO_OPTIONS_INIT, then set the fields to change
 * (struct_size: see README, "Option structs"). `local` carries its own
 * struct_size, so dist_ddp_options may grow inside it: fields added to
 * dist_daso_options go after `local` (the library finds them where the
 * caller's `local` ends, at local.struct_size), never before it, and need no
 * stricter alignment than dist_ddp_options (8 bytes). */
typedef struct dist_daso_options {
  size_t struct_size;         /* sizeof(dist_daso_options), set by DIST_DASO_OPTIONS_INIT */
  int total_epochs;           /* required, > warmup + cooldown is not required */
  int warmup_epochs;          /* 4 */
  int cooldown_epochs;        /* 4 */
  double stability_level;     /* 0.05, in [0, 1) */
  int max_global_skips;       /* 8, >= 1 */
  int64_t sending_chunk_size; /* 10,000,000 elements, >= 1 */
  dist_dtype downcast;        /* DIST_BF16 (default), DIST_F16 or DIST_F32 (no downcast) */
  int use_mpi_groups;         /* 1: global communicators from MPI groups (MPI_Comm_create_group), 0: MPI_Comm_split */
  int skip_reduction_factor;  /* 2, >= 2 */
  int local_skip_factor;      /* 4, >= 1 */
  int verbose;                /* dist_daso_print0 prints on world rank 0 */
  int merge;                  /* DIST_DASO_MERGE_HEAT (default) or DIST_DASO_MERGE_DELTA (see above) */
  const dist_lr_schedule *schedule; /* NULL: none; else stepped after every local optimizer step, as Heat's scheduler */
  dist_ddp_options local;     /* the node-local DDP reducer (group is forced to "local") */
} dist_daso_options;
enum { DIST_DASO_MERGE_HEAT = 0, DIST_DASO_MERGE_DELTA = 1 };
#define DIST_DASO_OPTIONS_INIT                 \
  {                                            \
    .struct_size = sizeof(dist_daso_options),  \
    .total_epochs = 0,                         \
    .warmup_epochs = 4,                        \
    .cooldown_epochs = 4,                      \
    .stability_level = 0.05,                   \
    .max_global_skips = 8,                     \
    .sending_chunk_size = 10000000,            \
    .downcast = DIST_BF16,                     \
    .use_mpi_groups = 1,                       \
    .skip_reduction_factor = 2,                \
    .local_skip_factor = 4,                    \
    .verbose = 0,                              \
    .merge = DIST_DASO_MERGE_HEAT,             \
    .schedule = NULL,                          \
    .local = DIST_DDP_OPTIONS_INIT,            \
  }

/* Gradient-scaler hook (mixed precision): before the local optimizer runs,
 * gradients are divided by scale(ctx) and checked; any inf/NaN skips the
 * optimizer step (the sync logic still runs) and update(ctx, 1) is called,
 * else update(ctx, 0). */
typedef struct dist_grad_scaler {
  double (*scale)(void *ctx);
  void (*update)(void *ctx, int found_inf);
  void *ctx;
} dist_grad_scaler;

/* Wrap the local optimizer `opt` (whose parameter set is over "world").
 * Collective over the world. */
dist_status dist_daso_create(dist_optim *opt, const dist_daso_options *o, dist_daso **out);
dist_status dist_daso_set_last_batch(dist_daso *d, int last_batch); /* batches per epoch - 1 */
dist_status dist_daso_mark_ready(dist_daso *d, int index);         /* backward hook; local */
/* Local optimizer step, then the local / global synchronisation of this batch.
 * Collective over the world. The sync runs even when the local part failed;
 * the first error is returned. */
dist_status dist_daso_step(dist_daso *d);
dist_status dist_daso_zero_grad(dist_daso *d);
/* End of epoch: average the loss over the world (unless already_averaged),
 * run the phase and plateau logic. Collective (two small all-reduces, taken
 * whatever already_averaged says). Errors on every rank, with the schedule
 * unchanged: called before the first epoch ended, mid-epoch or twice for one
 * epoch, ranks at different batches, a NaN or inf loss on some rank, ranks
 * passing different already_averaged, or (already_averaged) losses that
 * differ between ranks: their schedules would part ways. */
dist_status dist_daso_epoch_loss_logic(dist_daso *d, double loss, int already_averaged);
/* Back to the state after create (epoch 0, warmup, plateau forgotten, local
 * optimizer state cleared, lr and schedule restarted); parameters are kept,
 * as rank 0 holds them, so that all ranks restart identical. A sync in
 * flight is completed and its outcome discarded (logged as a warning): reset
 * also recovers from a failed sync. Collective. */
dist_status dist_daso_reset(dist_daso *d);
dist_status dist_daso_add_scaler(dist_daso *d, const dist_grad_scaler *s); /* NULL removes */
/* printf on world rank 0 when verbose. */
void dist_daso_print0(const dist_daso *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct dist_daso_state {
  int epoch, batch, global_skips, local_skips, batches_to_wait;
  int local_sync;    /* the next batch averages gradients in the node */
  int sends_pending; /* a global send in flight */
  int skipped_steps; /* optimizer steps skipped by the scaler */
  uint64_t global_bytes_sent; /* parameter bytes this rank sent to other nodes */
  uint64_t global_syncs;
} dist_daso_state;
dist_status dist_daso_state_get(const dist_daso *d, dist_daso_state *s);

void dist_daso_destroy(dist_daso *d); /* completes a pending send first (collective then) */

#ifdef __cplusplus
}
#endif
#endif
