/* DDP reducer: options, creation, destruction and queries (the bucket layout is ddp_buckets.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reducer/ddp_internal.h"
#include "mem/memops.h"

static const dist_ddp_options ddp_defaults = DIST_DDP_OPTIONS_INIT;
const dist__options_kind dist__ddp_options_kind =
    DIST__OPTIONS_KIND(dist_ddp_options, "DIST_DDP_OPTIONS_INIT", first_bucket_bytes, &ddp_defaults);

static dist_status check_options(const dist_ddp_options *o, const dist_params *p) {
  const char *w = "dist_ddp_create";
  if (o->first_bucket_bytes == 0 || o->bucket_bytes == 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s = 0 (bucket caps must be > 0 bytes)", w,
                       o->first_bucket_bytes == 0 ? "first_bucket_bytes" : "bucket_bytes");
  if (o->unused != DIST_DDP_UNUSED_ERROR && o->unused != DIST_DDP_UNUSED_ZERO)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: unused = %d is not DIST_DDP_UNUSED_ERROR or _ZERO", w, (int)o->unused);
  if ((unsigned)o->compress > DIST_DDP_COMPRESS_F16)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: compress = %d is not NONE, BF16 or F16", w, (int)o->compress);
  if ((unsigned)o->progress > DIST_DDP_PROGRESS_NONE)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: progress = %d is not TEST, THREAD or NONE", w, (int)o->progress);
  if (o->grad_as_bucket_view != 0 && o->grad_as_bucket_view != 1)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: grad_as_bucket_view = %d must be 0 or 1", w, o->grad_as_bucket_view);
  if (o->rebuild_buckets != 0 && o->rebuild_buckets != 1)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: rebuild_buckets = %d must be 0 or 1", w, o->rebuild_buckets);
  if (o->hook && !o->hook->start) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: hook->start is NULL", w);
  if (p->users > 0 && o->grad_as_bucket_view)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: grad_as_bucket_view on a set another reducer already uses", w);
  return DIST_SUCCESS;
}

static uint64_t options_hash(const dist_ddp_options *o, int has_hook) {
  int64_t v[8] = {(int64_t)o->first_bucket_bytes, (int64_t)o->bucket_bytes, o->grad_as_bucket_view, o->unused,
                  o->compress, has_hook, o->progress, o->rebuild_buckets};
  return dist__hash(DIST__HASH_SEED, v, sizeof v);
}

static void free_ddp(dist_ddp *d) {
  dist__ddp_free_buckets(d->b, d->nb);
  free(d->be);
  free(d->bucket_of);
  free(d->slot_of);
  free(d->marked);
  free(d->order);
  free(d->orig_grad);
  free(d->scratch);
  free(d->pieces);
  free(d);
}

dist_status dist_ddp_create(dist_params *p, const dist_ddp_options *o, dist_ddp **out) {
  const char *what = "dist_ddp_create";
  DIST_CHECK(dist__params_check(p, what));
  /* An unreadable struct fails here, before any collective, as an unknown group does below. */
  dist_ddp_options opt;
  DIST_CHECK(dist__options_copy(&dist__ddp_options_kind, o, &opt, what));
  dist__group *g;
  DIST_CHECK(dist__require_initialized(what));
  dist_status s = dist__group_find(opt.group ? opt.group : p->group, &g);
  if (s) return dist__error_context(s, "%s", what);
  if (g->rank < 0) return dist__error(DIST_ERR_NOT_MEMBER, "%s: this rank is not in group '%s'", what, g->name);
  /* From here on every failure goes into the agreement below: a rank that
   * returned early (a NULL out on one rank, or no memory for the reducer)
   * would leave the others waiting in it. */
  dist_ddp *d = calloc(1, sizeof *d);
  if (!d) {
    char why[256];
    snprintf(why, sizeof why, "%s: the reducer's state: out of memory", what);
    int differs;
    (void)dist__agree_status_hash_group(g, dist__error(DIST_ERR_NO_MEMORY, "%s", why), options_hash(&opt, opt.hook != NULL),
                                        what, &differs);
    return dist__error(DIST_ERR_NO_MEMORY, "%s", why);
  }
  d->p = p;
  d->g = g;
  d->o = opt;
  d->o.group = g->name;
  d->sync = 1;
  dist__progress_init(&d->prog);
  if (opt.hook) d->hook = *opt.hook, d->has_hook = 1;
  s = check_options(&opt, p);
  if (!s && !out) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: out is NULL", what);
  if (!s) {
    d->orig_grad = calloc((size_t)p->n + 1, sizeof *d->orig_grad);
    d->marked = calloc((size_t)p->n + 1, 1);
    d->order = malloc(sizeof(int) * ((size_t)p->n + 1));
    d->pieces = malloc(sizeof *d->pieces * ((size_t)p->n + 1));
    if (!d->orig_grad || !d->marked || !d->order || !d->pieces) s = dist__error(DIST_ERR_NO_MEMORY, "%s", what);
  }
  if (!s) {
    for (int o = 0; o < p->n; o++) d->order[o] = p->n - 1 - o; /* reverse registration */
    s = dist__ddp_assign(d, d->order);
  }
  if (!s) s = dist__ddp_alloc_buffers(d);
  d->rebuild_pending = opt.rebuild_buckets;
  if (!s && opt.progress == DIST_DDP_PROGRESS_THREAD)
    s = dist__progress_check("dist_ddp_create: progress = DIST_DDP_PROGRESS_THREAD", d->g);
  int differs;
  dist_status agreed = dist__agree_status_hash_group(g, s, options_hash(&opt, d->has_hook), what, &differs);
  if (differs)
    agreed = dist__error(DIST_ERR_MISMATCH, "%s: ranks passed different options (bucket caps, view, unused, compress, "
                         "hook, progress or rebuild)", what);
  /* Steps that can still fail locally (the options are agreed, so every
   * rank takes the same ones): agreed once more, so that no rank keeps a
   * reducer the others dropped. */
  int moved = 0;
  if (!agreed && (opt.progress == DIST_DDP_PROGRESS_THREAD || opt.grad_as_bucket_view)) {
    dist_status t = opt.progress == DIST_DDP_PROGRESS_THREAD ? dist__progress_start(&d->prog, d->g) : DIST_SUCCESS;
    if (!t && opt.grad_as_bucket_view) moved = !(t = dist__ddp_move_grads(d, 1));
    agreed = dist__agree_group(g, t, what);
  }
  if (agreed) {
    if (moved) dist__ddp_move_grads(d, 0);
    dist__progress_stop(&d->prog);
    free_ddp(d);
    return agreed;
  }
  p->users++;
  *out = d;
  return DIST_SUCCESS;
}

void dist_ddp_destroy(dist_ddp *d) {
  if (!d) return;
  dist_status s = dist__ddp_wait_all(d);
  if (s) dist_log(DIST_LOG_WARN, "dist_ddp_destroy: completing buckets in flight: %s", dist_last_error());
  dist__progress_stop(&d->prog);
  if (d->o.grad_as_bucket_view) dist__ddp_move_grads(d, 0);
  d->p->users--;
  free_ddp(d);
}

dist_status dist_ddp_set_sync(dist_ddp *d, int on) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_set_sync: reducer is NULL");
  if (on != 0 && on != 1) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_set_sync: on = %d must be 0 or 1", on);
  if (d->nmarked > 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "dist_ddp_set_sync: %d parameters are already marked in this iteration (switch before the backward "
                       "pass, after finalize)", d->nmarked);
  d->sync = on;
  return DIST_SUCCESS;
}

int dist_ddp_sync_enabled(const dist_ddp *d) { return d ? d->sync : 0; }
int dist_ddp_bucket_count(const dist_ddp *d) { return d ? d->nb : -1; }
uint64_t dist_ddp_bytes_sent(const dist_ddp *d) { return d ? d->bytes_sent : 0; }

dist_status dist_ddp_bucket_info(const dist_ddp *d, int k, int *nparams, const int **params, size_t *bytes,
                                 dist_dtype *dtype) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_bucket_info: reducer is NULL");
  if (k < 0 || k >= d->nb)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_bucket_info: bucket %d not in [0, %d)", k, d->nb);
  const dist__bucket *b = &d->b[k];
  if (nparams) *nparams = b->nparams;
  if (params) *params = b->params;
  if (bytes) *bytes = (size_t)b->numel * dist_dtype_size(b->dtype);
  if (dtype) *dtype = b->dtype;
  return DIST_SUCCESS;
}
