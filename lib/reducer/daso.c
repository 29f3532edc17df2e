/* DASO: life cycle, the per-batch step and the end-of-epoch logic. The
 * schedule decides (daso_schedule.c); this file executes its plans. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "reducer/daso_internal.h"
#include "reducer/ddp_internal.h"
#include "core/fault.h"
#include "mem/memops.h"

static const dist_daso_options daso_defaults = DIST_DASO_OPTIONS_INIT;
/* `local` is read with its own struct_size (daso.h: later fields follow it). */
static const dist__options_kind daso_options_kind = {
    .name = "dist_daso_options",
    .init = "DIST_DASO_OPTIONS_INIT",
    .size = sizeof(dist_daso_options),
    .min_size = offsetof(dist_daso_options, total_epochs) + sizeof(int),
    .defaults = &daso_defaults,
    .member = &dist__ddp_options_kind,
    .member_name = "local",
    .member_offset = offsetof(dist_daso_options, local),
};

static dist_status check_options(const dist_daso_options *o) {
  const char *w = "dist_daso_create";
#define BAD(cond, ...) \
  if (cond) return dist__error(DIST_ERR_INVALID_ARGUMENT, __VA_ARGS__)
  BAD(o->total_epochs < 1, "%s: total_epochs = %d must be >= 1", w, o->total_epochs);
  BAD(o->warmup_epochs < 0, "%s: warmup_epochs = %d must be >= 0", w, o->warmup_epochs);
  BAD(o->cooldown_epochs < 0, "%s: cooldown_epochs = %d must be >= 0", w, o->cooldown_epochs);
  BAD(!(o->stability_level >= 0 && o->stability_level < 1), "%s: stability_level = %g must be in [0, 1)", w,
      o->stability_level);
  BAD(o->max_global_skips < 1, "%s: max_global_skips = %d must be >= 1", w, o->max_global_skips);
  BAD(o->sending_chunk_size < 1 || o->sending_chunk_size > 0x7fffffff,
      "%s: sending_chunk_size = %lld must be in [1, 2^31 - 1] elements", w, (long long)o->sending_chunk_size);
  BAD(o->downcast != DIST_BF16 && o->downcast != DIST_F16 && o->downcast != DIST_F32,
      "%s: downcast = %s must be bf16, f16 or f32", w, dist_dtype_name(o->downcast));
  BAD(o->use_mpi_groups != 0 && o->use_mpi_groups != 1, "%s: use_mpi_groups = %d must be 0 or 1", w, o->use_mpi_groups);
  BAD(o->skip_reduction_factor < 2, "%s: skip_reduction_factor = %d must be >= 2", w, o->skip_reduction_factor);
  BAD(o->local_skip_factor < 1, "%s: local_skip_factor = %d must be >= 1", w, o->local_skip_factor);
  BAD(o->verbose != 0 && o->verbose != 1, "%s: verbose = %d must be 0 or 1", w, o->verbose);
  BAD(o->merge != DIST_DASO_MERGE_HEAT && o->merge != DIST_DASO_MERGE_DELTA,
      "%s: merge = %d must be DIST_DASO_MERGE_HEAT or DIST_DASO_MERGE_DELTA", w, o->merge);
#undef BAD
  return DIST_SUCCESS;
}

/* The cross communicator for my local rank, built as the option asks; both
 * give the same ranks in world order. */
/* The table's "world" (there from initialize to finalize). */
static const dist__group *world_group(void) {
  dist__group *w = NULL;
  dist__group_find("world", &w);
  return w;
}

static dist_status make_cross(dist_daso *d) {
  if (!d->o.use_mpi_groups) return dist__group_split_private("DASO cross", d->lrank, dist__groups.rank, &d->cross);
  dist__group *cross;
  dist_status s = dist__group_find("cross", &cross);
  return s ? s : dist__group_copy_private("DASO cross", cross, &d->cross);
}

static void init_schedule(dist_daso *d) {
  const dist_daso_options *o = &d->o;
  dist__daso_sched_init(&d->s, o->total_epochs, o->warmup_epochs, o->cooldown_epochs, o->max_global_skips,
                        o->skip_reduction_factor, o->local_skip_factor, o->stability_level, d->lsize);
  /* Without warmup the first epoch already cycles (epoch_end never sees epoch == warmup). */
  if (o->warmup_epochs == 0 && o->total_epochs > o->cooldown_epochs) d->s.gs = 4, d->s.ls = 1, d->s.btw = 1;
  d->local_sync = 1;
  d->logic_epoch = -1;
}

static void free_daso(dist_daso *d) {
  dist__daso_sync_free(d);
  dist__group_private_free(&d->cross);
  dist_ddp_destroy(d->ddp);
  free(d);
}

/* What must match on every rank: the options that drive the schedule and
 * the global sync (verbose, the local DDP's options, which its own create
 * checks on each node, and the schedule's function pointers, which differ
 * between processes, are left out). */
static uint64_t options_hash(const dist_daso_options *o) {
  const dist_lr_schedule *sc = o->schedule;
  int kind = sc ? 1 + (int)sc->kind : 0;
  const int64_t v[] = {o->total_epochs, o->warmup_epochs, o->cooldown_epochs, o->max_global_skips, o->sending_chunk_size,
                       o->downcast, o->use_mpi_groups, o->skip_reduction_factor, o->local_skip_factor, o->merge, kind,
                       sc && sc->kind == DIST_LR_STEP ? sc->step_size : 0};
  const double f[] = {o->stability_level,
                      sc && (sc->kind == DIST_LR_STEP || sc->kind == DIST_LR_EXPONENTIAL) ? sc->gamma : 0};
  return dist__hash(dist__hash(DIST__HASH_SEED, v, sizeof v), f, sizeof f);
}

/* Every local check ends in one agreement over the world (so a rank that
 * fails alone cannot leave the others waiting in the collectives after),
 * which also compares the options. */
static dist_status setup(dist_daso *d, const dist_daso_options *o, const char *what) {
  dist_status s = !d ? dist__error(DIST_ERR_NO_MEMORY, "%s", what) : check_options(o);
  dist__group *world = NULL;
  if (!s) s = dist__params_check(d->p, what);
  if (!s) s = dist__params_group(d->p, what, &world);
  if (!s && world->size != dist__groups.size)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the parameter set is over '%s'; DASO needs one over 'world'", what,
                    d->p->group);
  if (!s) s = dist__group_find("local", &d->local);
  /* Every node must have as many ranks as every other (Heat's requirement too). */
  int sizes[2] = {0, 0}, ext[2];
  if (!s) sizes[0] = d->local->size, sizes[1] = -d->local->size;
  int differs;
  s = dist__agree_status_hash_group(world_group(), s, options_hash(o), what, &differs);
  if (differs) return dist__error(s, "%s: ranks passed different options", what);
  dist__group *all = NULL;
  if (!s) s = dist__group_find("world", &all);
  if (!s) s = dist__backend_host(all)->all_reduce(all, sizes, ext, 2, DIST_I32, DIST_MAX, NULL);
  if (!s && ext[0] != -ext[1])
    s = dist__error(DIST_ERR_UNSUPPORTED, "%s: nodes have between %d and %d ranks; DASO needs the same number on every node",
                    what, -ext[1], ext[0]);
  return s;
}

dist_status dist_daso_create(dist_optim *opt, const dist_daso_options *o, dist_daso **out) {
  const char *what = "dist_daso_create";
  DIST_CHECK(dist__require_initialized(what));
  dist_daso *d = NULL;
  dist_daso_options full; /* the caller's options as this library's struct */
  dist_status s = !out || !opt || !o ? dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what,
                                                   !out ? "out" : !opt ? "optimizer" : "options")
                                     : dist__options_copy(&daso_options_kind, o, &full, what);
  if (!s && (d = calloc(1, sizeof *d))) {
    d->opt = opt;
    d->p = dist_optim_params(opt);
    d->o = full;
    dist__group_private_clear(&d->cross);
  }
  /* Still agree after a NULL or an unreadable struct, else the other ranks would wait for this one. */
  int differs;
  s = s ? dist__agree_status_hash_group(world_group(), s, 0, what, &differs) : setup(d, &full, what);
  if (s) {
    free(d);
    return s;
  }
  d->lrank = d->local->rank;
  d->lsize = d->local->size;
  d->nodes = dist__groups.size / d->lsize;
  s = dist__agree_group(world_group(), make_cross(d), what);
  if (!s) {
    dist_ddp_options lo = d->o.local;
    lo.group = "local";
    s = dist_ddp_create(d->p, &lo, &d->ddp); /* collective, agrees by itself */
  }
  if (!s) s = dist__daso_sync_init(d);
  d->lr0 = dist_optim_get_lr(opt);
  if (!s && d->o.schedule) {
    d->schedule = *d->o.schedule;
    d->has_schedule = 1;
    s = dist_optim_set_schedule(opt, &d->schedule);
  }
  s = dist__agree_group(world_group(), s, what);
  if (s) {
    free_daso(d);
    return s;
  }
  init_schedule(d);
  *out = d;
  return DIST_SUCCESS;
}

dist_status dist_daso_set_last_batch(dist_daso *d, int last) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_set_last_batch: DASO is NULL");
  if (last < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_set_last_batch: last_batch = %d must be >= 0", last);
  if (d->s.cur > last)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_set_last_batch: already at batch %d of this epoch", d->s.cur);
  d->s.last = last;
  return DIST_SUCCESS;
}

dist_status dist_daso_mark_ready(dist_daso *d, int index) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_mark_ready: DASO is NULL");
  DIST_CHECK(dist_ddp_mark_ready(d->ddp, index));
  /* MPI moves the global send only inside MPI calls: give it a turn while
   * the backward computes (with local sync off nothing else would). */
  return dist__daso_poke(d);
}

/* Unscale gradients and look for inf/NaN (mixed precision). */
static dist_status unscale(dist_daso *d, int *found_inf) {
  double scale = d->scaler.scale ? d->scaler.scale(d->scaler.ctx) : 1.0;
  if (!(scale > 0) || !isfinite(scale))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "DASO gradient scaler: scale = %g must be finite and > 0", scale);
  double inv = 1.0 / scale;
  *found_inf = 0;
  for (int i = 0; i < d->p->n; i++) {
    dist__param *q = &d->p->p[i];
    size_t bytes = dist__param_bytes(q);
    void *g = q->grad, *tmp = NULL;
    if (q->memory != DIST_MEM_HOST) {
      if (!(tmp = malloc(bytes ? bytes : 1))) return dist__error(DIST_ERR_NO_MEMORY, "DASO unscale");
      dist_status s = dist__mem_download(q->memory, tmp, q->grad, bytes);
      if (!s) s = dist__mem_sync(q->memory);
      if (s) return free(tmp), s;
      g = tmp;
    }
    for (int64_t k = 0; k < q->numel; k++) {
      double v = q->dtype == DIST_F64 ? ((double *)g)[k] : ((float *)g)[k];
      v *= inv;
      /* Test what is stored: a finite double can overflow f32. */
      if (q->dtype == DIST_F64) ((double *)g)[k] = v;
      else v = ((float *)g)[k] = (float)v;
      if (!isfinite(v)) *found_inf = 1;
    }
    dist_status s = tmp ? dist__mem_upload(q->memory, q->grad, tmp, bytes) : DIST_SUCCESS;
    if (!s && tmp) s = dist__mem_sync(q->memory);
    free(tmp);
    DIST_CHECK(s);
  }
  return DIST_SUCCESS;
}

/* The first failure is kept and returned, but every step of the plan still
 * runs: the other ranks enter its collectives whatever happened here. A
 * failed receive does not cancel the send after it (the schedule has already
 * counted it as pending); ref stays equal across each cross group (finish). */
#define WHY 512
/* Keep the first failure and its message; later ones are dropped. */
static void keep(dist_status s, dist_status *first, char why[WHY]) {
  if (s && !*first) *first = s, snprintf(why, WHY, "%s", dist_last_error());
}

static dist_status run_plan(dist_daso *d, const dist__daso_plan *pl) {
  dist_status first = DIST_SUCCESS;
  char why[WHY] = "";
#define KEEP(call) keep((call), &first, why)
  if (pl->receive) KEEP(dist__daso_receive(d, pl->recv_from, 0, pl->recv_btw));
  if (pl->global) {
    KEEP(dist__daso_send(d, pl->sender));
    if (pl->blocking) KEEP(dist__daso_receive(d, pl->sender, 1, 0)); /* its node learns a failed send here */
  }
  if (pl->local_sync >= 0 && pl->local_sync != d->local_sync) {
    dist_status s = dist_ddp_set_sync(d->ddp, pl->local_sync);
    KEEP(s);
    if (!s) d->local_sync = pl->local_sync;
  }
#undef KEEP
  return first ? dist__error(first, "%s", why) : DIST_SUCCESS;
}

/* A failure before the global sync (the node's DDP finalize, the scaler,
 * the local step) is kept, not returned at once: this rank still runs the
 * plan, whose collectives the other nodes enter too. Its parameters simply
 * miss this batch's step; the error is returned. */
dist_status dist_daso_step(dist_daso *d) {
  const char *what = "dist_daso_step";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: DASO is NULL", what);
  if (d->s.last < 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: call dist_daso_set_last_batch (batches per epoch - 1) first", what);
  char why[WHY] = "";
  dist_status first = DIST_SUCCESS;
#define KEEP(call) keep((call), &first, why)
  KEEP(dist__daso_poke(d));
  KEEP(dist_ddp_finalize(d->ddp)); /* collective on the node: always */
  int found_inf = 0;
  if (!first && d->has_scaler) {
    KEEP(dist__fault("daso_unscale") ? dist__error(DIST_ERR_INTERNAL, "injected fault (daso_unscale)")
                                     : unscale(d, &found_inf));
    if (!first && d->scaler.update) d->scaler.update(d->scaler.ctx, found_inf);
  }
  if (found_inf) d->skipped++;
  else if (!first) KEEP(dist_optim_step(d->opt));
  if (d->has_schedule) KEEP(dist_optim_schedule_step(d->opt)); /* the lr stays in step with the other ranks */
  dist__daso_plan pl;
  int epoch = d->s.epoch, batch = d->s.cur;
  dist__daso_plan_step(&d->s, &pl);
  KEEP(run_plan(d, &pl));
#undef KEEP
  if (first) return dist__error(first, "%s (epoch %d, batch %d): %s", what, epoch, batch, why);
  if (pl.global && d->o.verbose >= 1 && batch == d->s.last)
    dist_daso_print0(d, "DASO epoch %d done: global skips %d, local skips %d, batches to wait %d\n", epoch, d->s.gs, d->s.ls,
                     d->s.btw);
  return DIST_SUCCESS;
}

dist_status dist_daso_zero_grad(dist_daso *d) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_zero_grad: DASO is NULL");
  DIST_CHECK(dist__daso_poke(d));
  return dist_optim_zero_grad(d->opt);
}

/* One extra all-reduce per epoch (max of x and -x gives max and min) checks
 * that every rank is at the same point with the same loss, so that no two
 * ranks' schedules part ways (which would leave a sender waiting). */
dist_status dist_daso_epoch_loss_logic(dist_daso *d, double loss, int already_averaged) {
  const char *what = "dist_daso_epoch_loss_logic";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: DASO is NULL", what);
  /* Both all-reduces run whatever already_averaged says, so that ranks
   * passing different values still call the same collectives. */
  double avg = 0;
  dist__group *world;
  DIST_CHECK(dist__group_find("world", &world));
  DIST_CHECK(dist__backend_host(world)->all_reduce(world, &loss, &avg, 1, DIST_F64, DIST_SUM, NULL));
  if (already_averaged) avg = loss;
  else avg /= dist__groups.size;
  int aa = already_averaged != 0;
  double v[9] = {avg, -avg, d->s.epoch, -d->s.epoch, d->s.cur, -d->s.cur, !isfinite(loss), aa, -aa}, mx[9];
  DIST_CHECK(dist__backend_host(world)->all_reduce(world, v, mx, 9, DIST_F64, DIST_MAX, NULL));
  if (mx[2] != -mx[3] || mx[4] != -mx[5])
    return dist__error(DIST_ERR_MISMATCH, "%s: ranks are at different points (epochs %g to %g, batches %g to %g)", what,
                       -mx[3], mx[2], -mx[5], mx[4]);
  if (mx[7] != -mx[8]) return dist__error(DIST_ERR_MISMATCH, "%s: ranks passed different already_averaged", what);
  if (mx[6]) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the loss is NaN or inf on some rank", what);
  if (already_averaged && mx[0] != -mx[1])
    return dist__error(DIST_ERR_MISMATCH, "%s: already_averaged, but the losses differ between ranks (%.17g to %.17g)",
                       what, -mx[1], mx[0]);
  if (d->s.epoch == 0 && d->s.cur == 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: no epoch has ended yet (call it after each epoch's last batch)", what);
  if (d->s.cur != 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: called at batch %d of epoch %d; call it after the epoch's last batch (set_last_batch)", what,
                       d->s.cur, d->s.epoch);
  if (d->logic_epoch == d->s.epoch)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: already called for epoch %d", what, d->s.epoch);
  avg = mx[0]; /* bit-identical on every rank, whatever the order of the sum */
  d->logic_epoch = d->s.epoch;
  int before[3] = {d->s.gs, d->s.ls, d->s.btw};
  dist__daso_epoch_end(&d->s, avg);
  if (before[0] != d->s.gs || before[1] != d->s.ls || before[2] != d->s.btw)
    dist_daso_print0(d, "DASO epoch %d: loss %g, (global skips, local skips, batches to wait) (%d,%d,%d) -> (%d,%d,%d)\n",
                     d->s.epoch, avg, before[0], before[1], before[2], d->s.gs, d->s.ls, d->s.btw);
  return DIST_SUCCESS;
}

/* The sync in flight is completed but its outcome discarded (logged): every
 * rank restarts from rank 0's parameters anyway, so reset also recovers from
 * a failed sync (e.g. a NaN sent). */
dist_status dist_daso_reset(dist_daso *d) {
  const char *what = "dist_daso_reset";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: DASO is NULL", what);
  int from = d->s.prev_sender;
  d->s.prev_sender = -1;
  if (from >= 0 && dist__daso_receive(d, from, 0, d->s.pending_btw))
    dist_log(DIST_LOG_WARN, "%s: the global sync in flight failed and is discarded: %s", what, dist_last_error());
  int last = d->s.last;
  dist_status s = dist_params_broadcast(d->p, 0); /* everyone restarts from rank 0's parameters */
  if (!s) s = dist__daso_set_ref(d);
  if (!s) s = dist_optim_reset(d->opt);
  if (!s) s = dist_optim_set_lr(d->opt, d->lr0); /* the schedule restarts from the initial lr */
  if (!s && d->has_schedule) s = dist_optim_set_schedule(d->opt, &d->schedule);
  int still_off = d->local_sync == 0 && dist_ddp_set_sync(d->ddp, 1); /* fails only with marks pending */
  if (still_off && !s) s = DIST_ERR_INVALID_ARGUMENT;
  /* The schedule restarts on every rank, failed or not, so that the ranks'
   * plans stay the same; every rank learns of a failure. */
  init_schedule(d);
  if (still_off) d->local_sync = 0;
  d->s.last = last;
  d->skipped = 0;
  return dist__agree_group(world_group(), s, what);
}

dist_status dist_daso_add_scaler(dist_daso *d, const dist_grad_scaler *sc) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_add_scaler: DASO is NULL");
  d->has_scaler = sc != NULL;
  if (sc) d->scaler = *sc;
  return DIST_SUCCESS;
}

void dist_daso_print0(const dist_daso *d, const char *fmt, ...) {
  if (!d || !d->o.verbose || dist__groups.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

dist_status dist_daso_state_get(const dist_daso *d, dist_daso_state *st) {
  if (!d || !st) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_state_get: %s is NULL", d ? "state" : "DASO");
  *st = (dist_daso_state){d->s.epoch, d->s.cur, d->s.gs, d->s.ls, d->s.btw, d->local_sync, d->inflight || d->s.prev_sender >= 0,
                          d->skipped, d->bytes_sent, d->syncs};
  return DIST_SUCCESS;
}

void dist_daso_destroy(dist_daso *d) {
  if (!d) return;
  if (d->s.prev_sender >= 0 && dist__daso_receive(d, d->s.prev_sender, 0, d->s.pending_btw))
    dist_log(DIST_LOG_WARN, "dist_daso_destroy: completing the send in flight: %s", dist_last_error());
  free_daso(d);
}
