/* DataParallelOptimizer: per-parameter gradient averaging around a local
 * optimizer, blocking or with the update deferred to the layer's next
 * forward. Both modes run the same non-blocking reduction (blocking mode
 * waits at once), so they agree bit for bit: MPI may pick different
 * summation orders for MPI_Allreduce and MPI_Iallreduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fault.h"
#include "mem/memops.h"
#include "optim/params_internal.h"

struct dist_dpo {
  dist_optim *opt;
  dist_params *p;
  dist__group *g;
  int blocking;
  int nlayers;
  int *layer_of;
  void **avg;              /* non-blocking: per-parameter reduction buffers */
  dist__pending *pend;
  const dist__backend **be;
  unsigned char *inflight; /* per parameter */
  unsigned char *handed;   /* grad_ready since the last step */
  unsigned char *due;      /* per layer */
  unsigned char *to_step;  /* per parameter: its update is due (non-blocking) */
  int ndue;
  dist_status failed;      /* the first gradient that could not be handed this iteration */
  char why[256];
};

static void free_dpo(dist_dpo *d) {
  for (int i = 0; d->avg && i < d->p->n; i++)
    if (d->avg[i]) dist__mem_free(d->p->p[i].memory, d->avg[i]);
  free(d->avg);
  free(d->pend);
  free(d->be);
  free(d->inflight);
  free(d->handed);
  free(d->due);
  free(d->to_step);
  free(d->layer_of);
  free(d);
}

dist_status dist_dpo_create(dist_optim *opt, int blocking, dist_dpo **out) {
  const char *what = "dist_dpo_create";
  if (!opt) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: optimizer is NULL", what);
  dist_params *p = dist_optim_params(opt);
  DIST_CHECK(dist__params_check(p, what));
  dist__group *g;
  DIST_CHECK(dist__params_group(p, what, &g));
  /* From here on every failure goes into the agreement below: a rank that
   * returned early would leave the others waiting in it. */
  dist_status s = (blocking == 0 || blocking == 1)
                      ? DIST_SUCCESS
                      : dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: blocking = %d must be 0 or 1", what, blocking);
  if (!s && !out) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: out is NULL", what);
  int n = p->n;
  dist_dpo *d = calloc(1, sizeof *d);
  if (d) {
    d->opt = opt;
    d->p = p;
    d->g = g;
    d->blocking = blocking;
    d->nlayers = n;
    d->layer_of = malloc(sizeof(int) * (size_t)(n + 1));
    d->avg = calloc((size_t)n + 1, sizeof *d->avg);
    d->pend = calloc((size_t)n + 1, sizeof *d->pend);
    d->be = calloc((size_t)n + 1, sizeof *d->be);
    d->inflight = calloc((size_t)n + 1, 1);
    d->handed = calloc((size_t)n + 1, 1);
    d->due = calloc((size_t)n + 1, 1);
    d->to_step = calloc((size_t)n + 1, 1);
  }
  if (!d || !d->layer_of || !d->avg || !d->pend || !d->be || !d->inflight || !d->handed || !d->due || !d->to_step)
    s = s ? s : dist__error(DIST_ERR_NO_MEMORY, "%s", what);
  for (int i = 0; i < n && !s; i++) {
    const dist__param *q = &p->p[i];
    d->layer_of[i] = i;
    if (q->dtype != DIST_F32 && q->dtype != DIST_F64)
      s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: parameter '%s' is %s (f32 or f64 expected)", what, q->name,
                      dist_dtype_name(q->dtype));
    if (!s) s = dist__backend_for(q->memory, d->g, &d->be[i]);
    if (!s) s = dist__mem_alloc(q->memory, dist__param_bytes(q), &d->avg[i]);
  }
  int differs;
  s = dist__agree_status_hash_group(g, s, dist__hash(DIST__HASH_SEED, &blocking, sizeof blocking), what, &differs);
  if (differs) s = dist__error(s, "%s: ranks disagree on blocking", what);
  if (s) {
    if (d) free_dpo(d);
    return s;
  }
  p->users++;
  *out = d;
  return DIST_SUCCESS;
}

dist_status dist_dpo_set_layers(dist_dpo *d, const int *layer_of, int nlayers) {
  const char *what = "dist_dpo_set_layers";
  if (!d || !layer_of) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what, d ? "layer_of" : "optimizer");
  if (d->ndue) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %d layers have updates due (flush first)", what, d->ndue);
  int n = d->p->n;
  if (nlayers < 1 || nlayers > n)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: nlayers = %d not in [1, %d]", what, nlayers, n);
  unsigned char *used = calloc((size_t)nlayers, 1);
  if (!used) return dist__error(DIST_ERR_NO_MEMORY, "%s", what);
  for (int i = 0; i < n; i++) {
    if (layer_of[i] < 0 || layer_of[i] >= nlayers) {
      free(used);
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: layer_of[%d] = %d not in [0, %d)", what, i, layer_of[i], nlayers);
    }
    used[layer_of[i]] = 1;
  }
  for (int l = 0; l < nlayers; l++)
    if (!used[l]) {
      free(used);
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: layer %d has no parameters", what, l);
    }
  free(used);
  memcpy(d->layer_of, layer_of, sizeof(int) * (size_t)n);
  d->nlayers = nlayers;
  return DIST_SUCCESS;
}

/* Start parameter i's sum. A gradient that cannot be copied (a failed
 * device copy) is still summed, as zeros where they can be written, so that
 * the other ranks' collective completes; the failure is kept for step. */
static dist_status start(dist_dpo *d, int i) {
  const dist__param *q = &d->p->p[i];
  size_t bytes = dist__param_bytes(q);
  dist_status prep = dist__fault("dpo_copy") ? dist__error(DIST_ERR_INTERNAL, "injected fault (dpo_copy)")
                                             : dist__mem_copy2d(q->memory, d->avg[i], bytes, q->grad, bytes, bytes, 1);
  char why[sizeof d->why] = "";
  if (prep) {
    snprintf(why, sizeof why, "parameter '%s': %s", q->name, dist_last_error());
    if (!d->failed) d->failed = prep, memcpy(d->why, why, sizeof why);
    dist__mem_zero(q->memory, d->avg[i], bytes);
  }
  DIST_CHECK(d->be[i]->all_reduce(d->g, d->avg[i], d->avg[i], (size_t)q->numel, q->dtype, DIST_SUM, &d->pend[i]));
  d->inflight[i] = 1;
  return prep ? dist__error(prep, "%s", why) : DIST_SUCCESS;
}

/* Wait for parameter i's sum and divide: avg[i] holds the average. */
static dist_status land(dist_dpo *d, int i) {
  const dist__param *q = &d->p->p[i];
  if (!d->inflight[i]) return DIST_SUCCESS;
  d->inflight[i] = 0;
  DIST_CHECK(d->be[i]->wait(&d->pend[i]));
  return dist__mem_divide(q->memory, d->avg[i], q->dtype, (size_t)q->numel, d->g->size);
}

/* Blocking mode: the average replaces the gradient, as Heat's hook does. */
static dist_status land_into_grad(dist_dpo *d, int i) {
  const dist__param *q = &d->p->p[i];
  DIST_CHECK(land(d, i));
  size_t bytes = dist__param_bytes(q);
  return dist__mem_copy2d(q->memory, q->grad, bytes, d->avg[i], bytes, bytes, 1);
}

/* Non-blocking mode: step from the average without writing the grad buffer,
 * which by now may hold the next iteration's gradient (zero_grad and the
 * next backward can run before the update lands). */
static dist_status step_from_avg(dist_dpo *d, int i) {
  dist__param *q = &d->p->p[i];
  void *grad = q->grad;
  q->grad = d->avg[i];
  dist_status s = dist__fault("dpo_step") ? dist__error(DIST_ERR_INTERNAL, "injected fault (dpo_step)")
                                           : dist_optim_step_param(d->opt, i);
  q->grad = grad;
  return s;
}

/* Keep the first failure of the iteration for step (and its agreement). */
static void note_failure(dist_dpo *d, dist_status s) {
  if (s && !d->failed) d->failed = s, snprintf(d->why, sizeof d->why, "%s", dist_last_error());
}

/* A layer handed its next gradient while last step's update is still due
 * (the caller skipped before_forward): apply that update now, or drop it if
 * it cannot be applied (then step fails), so that this gradient's sum can
 * still be posted: the other ranks post theirs. */
static dist_status settle_due(dist_dpo *d, int i) {
  int l = d->layer_of[i];
  dist_status s = dist_dpo_before_forward(d, l);
  if (s) {
    note_failure(d, s);
    for (int k = 0; k < d->p->n; k++)
      if (d->layer_of[k] == l) {
        if (d->inflight[k]) land(d, k);
        d->to_step[k] = 0;
      }
    d->due[l] = 0;
    d->ndue--;
  }
  return dist__error(s ? s : DIST_ERR_INVALID_ARGUMENT,
                     "dist_dpo_grad_ready: layer %d of parameter '%s' still had last step's update due (call "
                     "dist_dpo_before_forward before its forward, or dist_dpo_flush): %s",
                     l, d->p->p[i].name, s ? d->why : "applied now");
}

dist_status dist_dpo_grad_ready(dist_dpo *d, int i) {
  const char *what = "dist_dpo_grad_ready";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: optimizer is NULL", what);
  if (i < 0 || i >= d->p->n) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: index %d not in [0, %d)", what, i, d->p->n);
  if (d->handed[i])
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: parameter %d '%s' handed twice before a step", what, i,
                       d->p->p[i].name);
  dist_status due = DIST_SUCCESS;
  char why[sizeof d->why] = "";
  if (d->due[d->layer_of[i]]) due = settle_due(d, i), snprintf(why, sizeof why, "%s", dist_last_error());
  dist_status s = start(d, i);
  if (d->inflight[i]) {
    d->handed[i] = 1;
    if (d->blocking) { /* after a failed copy too: the sum is collective */
      dist_status landed = land_into_grad(d, i);
      note_failure(d, landed);
      s = landed ? landed : s;
    }
  }
  return due && !s ? dist__error(due, "%s", why) : s;
}

/* Every rank learns whether some gradient was lost this iteration
 * (DIST_VERIFY=1, one small all-reduce), so that all skip the update alike;
 * without it only the rank that failed knows. */
static dist_status iteration_status(dist_dpo *d) {
  dist_status mine = d->failed;
  d->failed = DIST_SUCCESS;
  if (mine) mine = dist__error(mine, "dist_dpo_step: a gradient could not be handed this iteration: %s", d->why);
  if (!dist__state.settings.verify) return mine;
  return dist__agree_group(d->g, mine, "dist_dpo_step (a gradient could not be handed)");
}

dist_status dist_dpo_step(dist_dpo *d) {
  const char *what = "dist_dpo_step";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: optimizer is NULL", what);
  for (int i = 0; i < d->p->n; i++)
    if (!d->handed[i])
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: parameter %d '%s' was not handed to dist_dpo_grad_ready since the "
                         "last step", what, i, d->p->p[i].name);
  memset(d->handed, 0, (size_t)d->p->n);
  dist_status s = iteration_status(d);
  if (s) { /* the averages are wrong: no update from them, on any rank that knows */
    char why[sizeof d->why];
    snprintf(why, sizeof why, "%s", dist_last_error());
    for (int i = 0; i < d->p->n; i++) land(d, i);
    return dist__error(s, "%s", why);
  }
  if (d->blocking) return dist_optim_step(d->opt);
  for (int l = 0; l < d->nlayers; l++) d->due[l] = 1;
  memset(d->to_step, 1, (size_t)d->p->n);
  d->ndue = d->nlayers;
  return DIST_SUCCESS;
}

/* Each parameter's update is applied once: a call that failed partway can
 * be repeated (or flushed) without stepping any parameter twice. A failed
 * wait drops that parameter's update (its average is lost) and says so. */
dist_status dist_dpo_before_forward(dist_dpo *d, int layer) {
  const char *what = "dist_dpo_before_forward";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: optimizer is NULL", what);
  if (layer < 0 || layer >= d->nlayers)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: layer %d not in [0, %d)", what, layer, d->nlayers);
  if (!d->due[layer]) return DIST_SUCCESS;
  for (int i = 0; i < d->p->n; i++) {
    if (d->layer_of[i] != layer || !d->to_step[i]) continue;
    dist_status s = land(d, i);
    if (s) { /* the average is lost: this parameter keeps its value */
      d->to_step[i] = 0;
      return dist__error_context(s, "%s: update of '%s' dropped", what, d->p->p[i].name);
    }
    DIST_CHECK(step_from_avg(d, i)); /* a retry steps it from the same average */
    d->to_step[i] = 0;
  }
  d->due[layer] = 0;
  d->ndue--;
  return DIST_SUCCESS;
}

dist_status dist_dpo_flush(dist_dpo *d) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_dpo_flush: optimizer is NULL");
  for (int l = 0; l < d->nlayers; l++) DIST_CHECK(dist_dpo_before_forward(d, l));
  return DIST_SUCCESS;
}

dist_status dist_dpo_zero_grad(dist_dpo *d) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_dpo_zero_grad: optimizer is NULL");
  return dist_optim_zero_grad(d->opt);
}

int dist_dpo_blocking(const dist_dpo *d) { return d ? d->blocking : -1; }
int dist_dpo_pending(const dist_dpo *d) { return d ? d->ndue : -1; }

void dist_dpo_destroy(dist_dpo *d) {
  if (!d) return;
  if (dist_dpo_flush(d)) dist_log(DIST_LOG_WARN, "dist_dpo_destroy: flush failed: %s", dist_last_error());
  /* Reductions started after the last step (no step yet) are completed unused. */
  for (int i = 0; i < d->p->n; i++)
    if (d->inflight[i]) d->be[i]->wait(&d->pend[i]);
  d->p->users--;
  free_dpo(d);
}
