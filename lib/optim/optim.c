/* The optimizer object shared by every kind: per-parameter state, the step
 * loops, the learning rate and its schedules. The kinds (optim_sgd.c,
 * optim_adam.c) check their options and update one tensor. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "mem/memops.h"
#include "optim/optim.h"

#define INVALID DIST_ERR_INVALID_ARGUMENT

dist_status dist__optim_check(const char *fn, const char *name, double v, double lo, double hi, int hi_open) {
  if (isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi)) return DIST_SUCCESS;
  if (isinf(hi))
    return dist__error(INVALID, "%s: %s = %g must be %s>= %g", fn, name, v, isfinite(v) ? "" : "finite and ", lo);
  return dist__error(INVALID, "%s: %s = %g must be in [%g, %g%c", fn, name, v, lo, hi, hi_open ? ')' : ']');
}

dist_status dist__optim_flag(const char *fn, const char *name, int v) {
  return v == 0 || v == 1 ? DIST_SUCCESS : dist__error(INVALID, "%s: %s = %d must be 0 or 1", fn, name, v);
}

static void slot_free(dist__optim_slot *s) {
  for (int b = 0; b < 3; b++) {
    dist__mem_free(s->memory, s->buf[b]);
    s->buf[b] = NULL;
  }
  s->ready = 0;
}

/* Check parameter i and give it zeroed buffers (growing the slot array when
 * an uncommitted set gained parameters after create). */
static dist_status prepare(dist_optim *o, const char *fn, int i) {
  dist_param_info info;
  DIST_CHECK(dist_params_info_get(o->params, i, &info));
  if (info.dtype != DIST_F32 && info.dtype != DIST_F64)
    return dist__error(INVALID, "%s: parameter %d '%s' has dtype %s; optimizers take f32 or f64", fn, i,
                       info.name ? info.name : "", dist_dtype_name(info.dtype));
  if (i >= o->nslots) {
    dist__optim_slot *s = realloc(o->slots, (size_t)(i + 1) * sizeof *s);
    if (!s) return dist__error(DIST_ERR_NO_MEMORY, "%s: optimizer state of %d parameters", fn, i + 1);
    memset(s + o->nslots, 0, (size_t)(i + 1 - o->nslots) * sizeof *s);
    o->slots = s;
    o->nslots = i + 1;
  }
  dist__optim_slot *s = &o->slots[i];
  if (s->ready) return DIST_SUCCESS;
  s->memory = info.memory;
  s->bytes = (size_t)info.numel * dist_dtype_size(info.dtype);
  for (int b = 0; b < o->nbuf; b++) {
    dist_status st = dist__mem_alloc(info.memory, s->bytes, &s->buf[b]);
    if (st == DIST_SUCCESS) st = dist__mem_zero(info.memory, s->buf[b], s->bytes);
    if (st != DIST_SUCCESS) {
      slot_free(s);
      return st;
    }
  }
  s->ready = 1;
  return DIST_SUCCESS;
}

dist_status dist__optim_create(const char *fn, dist_params *p, const char *name, double lr, int nbuf,
                               dist__optim_update_fn update, dist_optim **out) {
  if (!p) return dist__error(INVALID, "%s: params is NULL", fn);
  dist_optim *o = calloc(1, sizeof *o);
  if (!o) return dist__error(DIST_ERR_NO_MEMORY, "%s: optimizer object", fn);
  o->name = name;
  o->params = p;
  o->nbuf = nbuf;
  o->update = update;
  o->lr = o->base_lr = lr;
  o->schedule.kind = DIST_LR_CONSTANT;
  int n = dist_params_count(p);
  for (int i = 0; i < n; i++) {
    dist_status st = prepare(o, fn, i);
    if (st != DIST_SUCCESS) {
      dist_optim_destroy(o);
      return st;
    }
  }
  *out = o;
  return DIST_SUCCESS;
}

static dist_status step_one(dist_optim *o, int i) {
  dist_param_info info;
  DIST_CHECK(dist_params_info_get(o->params, i, &info));
  dist__optim_slot *s = &o->slots[i];
  s->step++;
  if (info.numel == 0) return DIST_SUCCESS;
  void *g = dist_params_grad(o->params, i);
  dist_status st = g ? o->update(o, &info, g, s)
                     : dist__error(DIST_ERR_INTERNAL, "dist_optim_step: parameter %d '%s' has no grad", i, info.name);
  if (st != DIST_SUCCESS) s->step--;
  return st;
}

dist_status dist_optim_step(dist_optim *o) {
  if (!o) return dist__error(INVALID, "dist_optim_step: optimizer is NULL");
  int n = dist_params_count(o->params);
  /* Every check and allocation first, so a failure updates nothing. */
  for (int i = 0; i < n; i++) DIST_CHECK(prepare(o, "dist_optim_step", i));
  for (int i = 0; i < n; i++) DIST_CHECK(step_one(o, i));
  return DIST_SUCCESS;
}

dist_status dist_optim_step_param(dist_optim *o, int index) {
  if (!o) return dist__error(INVALID, "dist_optim_step_param: optimizer is NULL");
  int n = dist_params_count(o->params);
  if (index < 0 || index >= n)
    return dist__error(INVALID, "dist_optim_step_param: index = %d out of range [0, %d)", index, n);
  DIST_CHECK(prepare(o, "dist_optim_step_param", index));
  return step_one(o, index);
}

dist_status dist_optim_zero_grad(dist_optim *o) {
  if (!o) return dist__error(INVALID, "dist_optim_zero_grad: optimizer is NULL");
  return dist_params_zero_grad(o->params);
}

double dist_optim_get_lr(const dist_optim *o) { return o ? o->lr : NAN; }

dist_status dist_optim_set_lr(dist_optim *o, double lr) {
  if (!o) return dist__error(INVALID, "dist_optim_set_lr: optimizer is NULL");
  DIST_CHECK(dist__optim_check("dist_optim_set_lr", "lr", lr, 0, INFINITY, 1));
  o->lr = o->base_lr = lr;
  return DIST_SUCCESS;
}

size_t dist_optim_state_bytes(const dist_optim *o) {
  size_t total = 0;
  for (int i = 0; o && i < o->nslots; i++)
    if (o->slots[i].ready) total += (size_t)o->nbuf * o->slots[i].bytes;
  return total;
}

const char *dist_optim_name(const dist_optim *o) { return o ? o->name : NULL; }

dist_params *dist_optim_params(const dist_optim *o) { return o ? o->params : NULL; }

dist_status dist_optim_set_schedule(dist_optim *o, const dist_lr_schedule *s) {
  static const char *fn = "dist_optim_set_schedule";
  if (!o) return dist__error(INVALID, "%s: optimizer is NULL", fn);
  if (!s) return dist__error(INVALID, "%s: schedule is NULL", fn);
  switch (s->kind) {
  case DIST_LR_CONSTANT: break;
  case DIST_LR_STEP:
  case DIST_LR_EXPONENTIAL:
    if (s->kind == DIST_LR_STEP && s->step_size < 1)
      return dist__error(INVALID, "%s: step_size = %" PRId64 " must be >= 1", fn, s->step_size);
    if (!(isfinite(s->gamma) && s->gamma > 0)) return dist__error(INVALID, "%s: gamma = %g must be > 0", fn, s->gamma);
    break;
  case DIST_LR_CUSTOM:
    if (!s->fn) return dist__error(INVALID, "%s: fn is NULL for DIST_LR_CUSTOM", fn);
    break;
  default: return dist__error(INVALID, "%s: kind = %d is not a dist_lr_schedule_kind", fn, (int)s->kind);
  }
  o->schedule = *s;
  o->base_lr = o->lr;
  o->k = 0;
  return DIST_SUCCESS;
}

/* The schedule's lr after k steps. */
static dist_status lr_at(const dist_optim *o, const char *fn, int64_t k, double *out) {
  const dist_lr_schedule *s = &o->schedule;
  double lr = o->base_lr;
  switch (s->kind) {
  case DIST_LR_STEP: lr *= pow(s->gamma, (double)(k / s->step_size)); break;
  case DIST_LR_EXPONENTIAL: lr *= pow(s->gamma, (double)k); break;
  case DIST_LR_CUSTOM: lr = s->fn(s->ctx, k, o->base_lr); break;
  default: break;
  }
  if (!(isfinite(lr) && lr >= 0))
    return dist__error(INVALID, "%s: lr = %g at k = %" PRId64 " must be finite and >= 0", fn, lr, k);
  *out = lr;
  return DIST_SUCCESS;
}

dist_status dist_optim_schedule_step(dist_optim *o) {
  if (!o) return dist__error(INVALID, "dist_optim_schedule_step: optimizer is NULL");
  double lr = 0; /* set by lr_at on success (GCC cannot see it) */
  DIST_CHECK(lr_at(o, "dist_optim_schedule_step", o->k + 1, &lr));
  o->lr = lr;
  o->k++;
  return DIST_SUCCESS;
}

dist_status dist_optim_schedule_count(const dist_optim *o, int64_t *k) {
  if (!o || !k) return dist__error(INVALID, "dist_optim_schedule_count: %s is NULL", o ? "k" : "optimizer");
  *k = o->k;
  return DIST_SUCCESS;
}

double dist_optim_get_base_lr(const dist_optim *o) { return o ? o->base_lr : NAN; }

dist_status dist_optim_restore_schedule(dist_optim *o, double lr, double base_lr, int64_t k) {
  static const char *fn = "dist_optim_restore_schedule";
  if (!o) return dist__error(INVALID, "%s: optimizer is NULL", fn);
  DIST_CHECK(dist__optim_check(fn, "lr", lr, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_check(fn, "base_lr", base_lr, 0, INFINITY, 1));
  if (k < 0) return dist__error(INVALID, "%s: k = %" PRId64 " must be >= 0", fn, k);
  o->lr = lr;
  o->base_lr = base_lr;
  o->k = k;
  return DIST_SUCCESS;
}

int dist_optim_state_slots(const dist_optim *o) { return o ? o->nbuf : -1; }

/* Parameter `index` with its state allocated. */
static dist_status state_slot(const dist_optim *o, const char *fn, int index, dist__optim_slot **out) {
  if (!o) return dist__error(INVALID, "%s: optimizer is NULL", fn);
  int n = dist_params_count(o->params);
  if (index < 0 || index >= n) return dist__error(INVALID, "%s: index = %d out of range [0, %d)", fn, index, n);
  DIST_CHECK(prepare((dist_optim *)o, fn, index));
  *out = &o->slots[index];
  return DIST_SUCCESS;
}

dist_status dist_optim_state_buffer(dist_optim *o, int index, int slot, void **buffer) {
  static const char *fn = "dist_optim_state_buffer";
  dist__optim_slot *s;
  DIST_CHECK(state_slot(o, fn, index, &s));
  if (slot < 0 || slot >= o->nbuf || !buffer)
    return dist__error(INVALID, "%s: %s", fn, buffer ? "slot out of range" : "buffer is NULL");
  *buffer = s->buf[slot];
  return DIST_SUCCESS;
}

dist_status dist_optim_state_step(const dist_optim *o, int index, int64_t *step) {
  dist__optim_slot *s;
  if (!step) return dist__error(INVALID, "dist_optim_state_step: step is NULL");
  DIST_CHECK(state_slot(o, "dist_optim_state_step", index, &s));
  *step = s->step;
  return DIST_SUCCESS;
}

dist_status dist_optim_state_set_step(dist_optim *o, int index, int64_t step) {
  dist__optim_slot *s;
  if (step < 0) return dist__error(INVALID, "dist_optim_state_set_step: step = %" PRId64 " must be >= 0", step);
  DIST_CHECK(state_slot(o, "dist_optim_state_set_step", index, &s));
  s->step = step;
  return DIST_SUCCESS;
}

dist_status dist_optim_reset(dist_optim *o) {
  if (!o) return dist__error(INVALID, "dist_optim_reset: optimizer is NULL");
  /* Keep the buffers: zeroed they are those of a fresh optimizer. */
  for (int i = 0; i < o->nslots; i++) {
    dist__optim_slot *s = &o->slots[i];
    for (int b = 0; s->ready && b < o->nbuf; b++) DIST_CHECK(dist__mem_zero(s->memory, s->buf[b], s->bytes));
    s->step = 0;
  }
  return DIST_SUCCESS;
}

void dist_optim_destroy(dist_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->nslots; i++) slot_free(&o->slots[i]);
  free(o->slots);
  free(o);
}
