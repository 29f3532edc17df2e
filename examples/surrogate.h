/* The AFNO surrogate of examples/ns2d (ns2d_train): one training run's
 * state, shared by the training loop (ns2d_train.c), its checkpoints
 * (surrogate_ckpt.c) and the rollout evaluation with pictures
 * (surrogate_eval.c).
 *
 * The model maps the normalised vorticity at t to the normalised change over
 * one snapshot interval: x = (omega(t) - mean) / std, target = (omega(t + dt)
 * - omega(t)) / delta_std, with the training set's statistics stored in the
 * dataset. A prediction is omega(t) + delta_std * model(x). */
#ifndef DISTMGR_EXAMPLES_SURROGATE_H
#define DISTMGR_EXAMPLES_SURROGATE_H

#include <distmgr.h>
#include <distmgr/afno.h>

#include "flowdata.h"

typedef struct surr_opts {
  const char *data, *out, *resume_from;
  int64_t dp, mp, sp;                        /* mesh of the world; 0 = fill in dp */
  int64_t epochs, batch;                     /* batch: global, over the data-parallel ranks */
  int64_t embed, depth, patch, blocks, seed; /* the AFNO */
  double mlp_ratio, sparsity;                /* AFNO's mlp_ratio and sparsity_threshold */
  double lr, lr_min_frac;                    /* Adam; cosine from lr to lr * lr_min_frac */
  int64_t log_every, val_samples, ckpt_every, keep, max_steps;
  int64_t rollout_steps, pictures;           /* evaluation: steps (0 = all), picture rows */
  int64_t kill_at_step, kill_rank;           /* fault injection for tests: SIGKILL after that step */
  int resume, eval_only, quiet;
} surr_opts;

typedef struct surr {
  surr_opts o;
  flowdata *data;
  flowdata_meta meta;
  dist_afno *model;
  dist_optim *opt;
  dist_afno_layout L;
  int rank, size;              /* in the world */
  int64_t n, rows, row0;       /* grid side; this rank's image rows */
  int64_t pairs;               /* (t, t + dt) pairs per trajectory: snapshots - 1 */
  int64_t train_samples, local_batch, steps_per_epoch, total_steps;
  int64_t step;                /* optimizer steps done */
  double interval_loss;        /* training losses summed since the last progress line */
  int64_t interval_count;
  float *x, *target, *y, *dy;  /* local_batch x rows x n each */
  double *snap_time;           /* the dataset's snapshot times */
} surr;

/* Same status on every rank of the world, with the failing rank's message
 * (examples/agree.h). */
dist_status surr_agree(dist_status s);

/* Read `count` samples (pair indices into trajectories from traj0) into the
 * model's input and target layout, this rank's rows. Local. */
dist_status surr_load_pairs(surr *s, int64_t traj0, const int64_t *pair, int64_t count, float *x, float *target);

/* Checkpoints in <out>/ckpt/step_<8 digits>.safetensors. */
dist_status surr_ckpt_save(surr *s, int64_t epoch);
/* The newest checkpoint's path into buf ("" when the folder has none). */
dist_status surr_ckpt_latest(const surr *s, char *buf, size_t size);
/* Load a checkpoint written by any layout of the same model and run; sets
 * s->step. Names the file and the mismatch otherwise. */
dist_status surr_ckpt_load(surr *s, const char *path);

/* Autoregressive rollout from the held-out trajectories' first snapshots
 * against the solver's trajectories; prints the relative L2 error per step,
 * writes rollout.csv and (pictures > 0) vorticity.png. */
dist_status surr_evaluate(surr *s, double *final_error);

#endif
