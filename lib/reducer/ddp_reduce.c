/* DDP reducer: marking gradients ready, launching buckets in order, and
 * finalize (wait, average, write back). */
#include <stdio.h>
#include <string.h>

#include "reducer/ddp_internal.h"
#include "core/fault.h"
#include "mem/half.h"
#include "backend/half_ops.h"
#include "mem/memops.h"

static char *slot(const dist_ddp *d, int i) {
  const dist__bucket *b = &d->b[d->bucket_of[i]];
  return (char *)b->buf + (size_t)b->offset[d->slot_of[i]] * dist_dtype_size(b->dtype);
}

/* Host f32 buckets compressed by the built-in hook, gradients copied (not
 * views): mark_ready narrows into the wire buffer directly. */
static int host_compressed(const dist_ddp *d, const dist__bucket *b) {
  return b->memory == DIST_MEM_HOST && b->wire != b->dtype && !d->has_hook && !d->o.grad_as_bucket_view;
}

/* Device buckets of copied gradients take them in one batch when the last
 * is marked (dist__mem_copy_pieces: one launch, where a copy per gradient
 * costs a launch each), and write the averages back the same way. */
static int gathered(const dist_ddp *d, const dist__bucket *b) {
  return b->memory == DIST_MEM_CUDA && !d->o.grad_as_bucket_view;
}

/* The pieces between bucket b's slots and its parameters' gradients (those
 * marked, when `marked_only`: fill_unmarked zeroed the others' slots). */
static int bucket_pieces(dist_ddp *d, const dist__bucket *b, int into_bucket, int marked_only) {
  int n = 0;
  for (int j = 0; j < b->nparams; j++) {
    int i = b->params[j];
    if (marked_only && !d->marked[i]) continue;
    const dist__param *q = &d->p->p[i];
    void *at = slot(d, i);
    d->pieces[n++] = into_bucket ? (dist__piece){at, q->grad, (size_t)q->numel} : (dist__piece){q->grad, at, (size_t)q->numel};
  }
  return n;
}

/* Sum a 16-bit buffer over the group without widening it on the wire. The
 * checks here are the same on every rank (same layout, op made at create);
 * a local failure goes to *prep and the collective is posted anyway. */
static dist_status reduce16(dist_ddp *d, dist__bucket *b, const dist__backend *be, void *buf, dist_dtype t,
                            dist_status *prep, char why[256]) {
  size_t n = (size_t)b->numel;
  if (be->can_reduce(t, DIST_SUM)) return be->all_reduce(d->g, buf, buf, n, t, DIST_SUM, &b->pending);
  if (b->memory == DIST_MEM_HOST && be->sum16) return be->sum16(d->g, buf, n, t, &b->pending);
  /* Device memory without a 16-bit-capable backend (staged): keep the
   * rounding of compression but sum in f32. */
  if (t != b->wire || b->dtype != DIST_F32)
    return dist__error(DIST_ERR_UNSUPPORTED, "%s gradients in device memory need NCCL (the staged backend cannot sum them)",
                       dist_dtype_name(t));
  dist_status w = dist__mem_widen(b->memory, b->wirebuf, t, b->buf, n);
  if (w) {
    if (!*prep) *prep = w, snprintf(why, 256, "%s", dist_last_error());
    dist__mem_zero(b->memory, b->buf, n * 4); /* best effort, before the post */
  }
  b->in_buf = 1;
  return be->all_reduce(d->g, b->buf, b->buf, n, DIST_F32, DIST_SUM, &b->pending);
}

/* The first failure of an iteration, returned again by finalize. */
static void note_failure(dist_ddp *d, dist_status s, const char *why) {
  if (d->sticky) return;
  d->sticky = s;
  snprintf(d->sticky_why, sizeof d->sticky_why, "%s", why);
}

/* Start bucket k's reduction. A failure before the collective (narrowing
 * into the wire buffer) still posts it, so the other ranks' collectives stay
 * matched and nobody hangs: this rank's contribution is zeroed where it can
 * be, and the error is returned here and by finalize (and agreed there when
 * DIST_VERIFY=1). A user hook that fails is trusted to have posted its
 * collective or to fail on every rank: distmgr cannot post one for it. */
static dist_status launch(dist_ddp *d, int k) {
  dist__bucket *b = &d->b[k];
  const dist__backend *be = d->be[k];
  size_t n = (size_t)b->numel;
  dist_status post, prep = DIST_SUCCESS;
  char why[256] = "";
  b->in_buf = 0;
  b->failed = 0;
  if (d->has_hook) {
    dist_tensor t = b->memory == DIST_MEM_CUDA ? dist_tensor_cuda(b->buf, b->dtype, b->device, 1, &b->numel)
                                               : dist_tensor_host(b->buf, b->dtype, 1, &b->numel);
    b->hook_req = NULL;
    post = d->hook.start(d->hook.ctx, d->g->name, k, &t, &b->hook_req);
    if (post) post = dist__error_context(post, "DDP communication hook (bucket %d)", k);
  } else {
    if (dist__fault("ddp_launch")) prep = dist__error(DIST_ERR_INTERNAL, "injected fault (ddp_launch)");
    else if (b->wire != b->dtype && !host_compressed(d, b)) prep = dist__mem_narrow(b->memory, b->buf, b->wire, b->wirebuf, n);
    void *target = b->wire != b->dtype ? b->wirebuf : b->buf;
    if (prep) { /* best effort: a zero contribution rather than stale bytes */
      snprintf(why, sizeof why, "%s", dist_last_error());
      dist__mem_zero(b->memory, target, n * dist_dtype_size(b->wire));
    }
    if (b->wire != b->dtype || dist__dtype_is16(b->dtype)) post = reduce16(d, b, be, target, b->wire, &prep, why);
    else post = be->all_reduce(d->g, b->buf, b->buf, n, b->dtype, DIST_SUM, &b->pending);
    if (prep && !post) prep = dist__error(prep, "%s", why); /* its own message, not the post's */
  }
  if (!post || (d->has_hook && b->hook_req)) { /* posted: wait for it even after an error */
    d->bytes_sent += (uint64_t)n * dist_dtype_size(b->in_buf ? DIST_F32 : b->wire);
    b->state = DIST__BUCKET_LAUNCHED;
    dist__progress_add(&d->prog, 1);
  }
  dist_status s = post ? post : prep;
  if (s) b->failed = 1;
  return s ? dist__error_context(s, "DDP bucket %d", k) : DIST_SUCCESS;
}

/* Launch every bucket that is complete, in order. A failed launch does not
 * stop the later ones: the other ranks launch them too. */
dist_status dist__ddp_launch_ready(dist_ddp *d) {
  dist_status first = DIST_SUCCESS;
  char why[sizeof d->sticky_why];
  while (d->next_launch < d->nb && d->b[d->next_launch].ready == d->b[d->next_launch].nparams) {
    int k = d->next_launch++;
    dist__bucket *b = &d->b[k];
    dist_status s = DIST_SUCCESS;
    char at[sizeof why] = "";
    if (gathered(d, b)) { /* a failed copy still launches the bucket: the other ranks expect it */
      s = dist__fault("ddp_copy") ? dist__error(DIST_ERR_INTERNAL, "injected fault (ddp_copy)")
                                  : dist__mem_copy_pieces(b->memory, d->pieces, bucket_pieces(d, b, 1, 1), b->dtype, 1);
      if (s) { /* best effort: a zero contribution rather than stale bytes, as launch does */
        snprintf(at, sizeof at, "DDP bucket %d: copying its gradients into it: %s", k, dist_last_error());
        dist__mem_zero(b->memory, b->buf, (size_t)b->numel * dist_dtype_size(b->dtype));
      }
    }
    dist_status l = launch(d, k);
    if (l && !s) s = l, snprintf(at, sizeof at, "%s", dist_last_error());
    if (s && !first) {
      first = s;
      snprintf(why, sizeof why, "%s", at);
      note_failure(d, s, why);
    }
  }
  return first ? dist__error(first, "%s", why) : DIST_SUCCESS;
}

static dist_status complete(dist_ddp *d, int k, int wait) {
  dist__bucket *b = &d->b[k];
  if (b->state != DIST__BUCKET_LAUNCHED) return DIST_SUCCESS;
  int done = 1;
  dist_status s;
  if (d->has_hook) {
    if (!b->hook_req) s = DIST_SUCCESS;
    else if (wait) s = dist_request_wait(b->hook_req);
    else s = dist_request_test(b->hook_req, &done);
    if (done && b->hook_req) {
      dist_request_free(b->hook_req);
      b->hook_req = NULL;
    }
    if (!s && done && d->hook.finish && !b->failed) { /* not after a failed start */
      dist_tensor t = b->memory == DIST_MEM_CUDA ? dist_tensor_cuda(b->buf, b->dtype, b->device, 1, &b->numel)
                                                 : dist_tensor_host(b->buf, b->dtype, 1, &b->numel);
      s = d->hook.finish(d->hook.ctx, k, &t);
    }
  } else {
    s = wait ? d->be[k]->wait(&b->pending) : d->be[k]->test(&b->pending, &done);
  }
  if (done || s) {
    b->state = DIST__BUCKET_DONE;
    dist__progress_add(&d->prog, -1);
  }
  return s ? dist__error_context(s, "DDP bucket %d", k) : DIST_SUCCESS;
}

/* One test of the oldest bucket in flight drives MPI's progress engine for
 * all of them. */
static dist_status poke(dist_ddp *d) {
  for (int k = 0; k < d->next_launch; k++)
    if (d->b[k].state == DIST__BUCKET_LAUNCHED) return complete(d, k, 0);
  return DIST_SUCCESS;
}

dist_status dist_ddp_mark_ready(dist_ddp *d, int i) {
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_mark_ready: reducer is NULL");
  if (i < 0 || i >= d->p->n)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_mark_ready: index %d not in [0, %d)", i, d->p->n);
  if (d->marked[i])
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "dist_ddp_mark_ready: parameter %d '%s' marked ready twice in one iteration (call "
                       "dist_ddp_finalize between iterations)", i, d->p->p[i].name);
  d->marked[i] = 1;
  d->nmarked++;
  if (d->rebuild_pending) d->order[d->norder++] = i;
  if (!d->sync) return DIST_SUCCESS;
  const dist__param *q = &d->p->p[i];
  dist_status copied = DIST_SUCCESS;
  if (!d->o.grad_as_bucket_view && !gathered(d, &d->b[d->bucket_of[i]])) {
    const dist__bucket *b = &d->b[d->bucket_of[i]];
    if (host_compressed(d, b)) { /* narrow straight from the gradient: one pass */
      dist__host_narrow(q->grad, b->wire, (char *)b->wirebuf + (size_t)b->offset[d->slot_of[i]] * 2, (size_t)q->numel);
    } else {
      size_t bytes = dist__param_bytes(q);
      copied = dist__fault("ddp_copy") ? dist__error(DIST_ERR_INTERNAL, "injected fault (ddp_copy)")
                                       : dist__mem_copy2d(q->memory, slot(d, i), bytes, q->grad, bytes, bytes, 1);
    }
  }
  /* A failed copy still counts: the bucket launches, as the other ranks
   * expect, and the failure is returned now and by finalize. */
  char why[sizeof d->sticky_why] = "";
  if (copied) {
    snprintf(why, sizeof why, "dist_ddp_mark_ready: copying parameter %d '%s' into its bucket: %s", i, q->name,
             dist_last_error());
    note_failure(d, copied, why); /* finalize reports the first */
  }
  d->b[d->bucket_of[i]].ready++;
  dist_status launched = dist__ddp_launch_ready(d);
  if (d->o.progress == DIST_DDP_PROGRESS_TEST && !launched) {
    dist_status t = poke(d);
    if (t) { /* that bucket's result is lost: finalize must not average it */
      char twhy[sizeof d->sticky_why];
      snprintf(twhy, sizeof twhy, "%s", dist_last_error());
      note_failure(d, t, twhy);
      if (!copied) return dist__error(t, "%s", twhy);
    }
  }
  if (copied) return dist__error(copied, "%s", why);
  return launched;
}

dist_status dist__ddp_wait_all(dist_ddp *d) {
  dist_status first = DIST_SUCCESS;
  for (int k = 0; k < d->nb; k++) {
    dist_status s = complete(d, k, 1);
    if (s && !first) first = s;
  }
  return first;
}

/* Host f32/f64 buckets: scale by 1/P while writing each gradient (one pass;
 * a compressed bucket is widened in the same pass). */
static void average_host(dist_ddp *d, const dist__bucket *b) {
  int wide = b->wire != b->dtype && !b->in_buf;
  for (int j = 0; j < b->nparams; j++) {
    const dist__param *q = &d->p->p[b->params[j]];
    size_t off = (size_t)b->offset[j];
    void *dst = d->o.grad_as_bucket_view ? slot(d, b->params[j]) : q->grad;
    const void *src = wide ? (const char *)b->wirebuf + off * 2 : (const char *)b->buf + off * dist_dtype_size(b->dtype);
    dist__host_widen_scale(src, wide ? b->wire : b->dtype, dst, (size_t)q->numel, 1.0 / d->g->size);
  }
}

/* Average bucket k in place (after its sum arrived) and copy it back. */
static dist_status average(dist_ddp *d, int k) {
  dist__bucket *b = &d->b[k];
  size_t n = (size_t)b->numel;
  if (b->memory == DIST_MEM_HOST && (b->dtype == DIST_F32 || b->dtype == DIST_F64)) {
    average_host(d, b);
    return DIST_SUCCESS;
  }
  if (b->wire != b->dtype && !b->in_buf && !d->has_hook) DIST_CHECK(dist__mem_widen(b->memory, b->wirebuf, b->wire, b->buf, n));
  if (gathered(d, b)) /* divide while writing back: one pass, one launch */
    return dist__mem_copy_pieces(b->memory, d->pieces, bucket_pieces(d, b, 0, 0), b->dtype, d->g->size);
  if (d->g->size > 1) {
    if (dist__dtype_is16(b->dtype)) {
      /* No 16-bit division kernel: widen, divide, narrow through an f32 copy. */
      void *tmp;
      DIST_CHECK(dist__mem_alloc(b->memory, n * 4, &tmp));
      dist_status s = dist__mem_widen(b->memory, b->buf, b->dtype, tmp, n);
      if (!s) s = dist__mem_divide(b->memory, tmp, DIST_F32, n, d->g->size);
      if (!s) s = dist__mem_narrow(b->memory, tmp, b->dtype, b->buf, n);
      dist__mem_free(b->memory, tmp);
      DIST_CHECK(s);
    } else {
      DIST_CHECK(dist__mem_divide(b->memory, b->buf, b->dtype, n, d->g->size));
    }
  }
  if (d->o.grad_as_bucket_view) return DIST_SUCCESS;
  for (int j = 0; j < b->nparams; j++) {
    const dist__param *q = &d->p->p[b->params[j]];
    size_t bytes = dist__param_bytes(q);
    DIST_CHECK(dist__mem_copy2d(q->memory, q->grad, bytes, slot(d, b->params[j]), bytes, bytes, 1));
  }
  return DIST_SUCCESS;
}

static void reset_marks(dist_ddp *d) {
  memset(d->marked, 0, (size_t)d->p->n);
  d->nmarked = 0;
  d->norder = 0;
  d->next_launch = 0;
  for (int k = 0; k < d->nb; k++) d->b[k].ready = 0, d->b[k].state = DIST__BUCKET_IDLE;
  d->sticky = DIST_SUCCESS;
}

/* Parameters not marked: zero local gradient so every rank still launches
 * every bucket (the collectives stay matched); the message lists them. A
 * failed zeroing (a device memset) still counts its parameter ready: a
 * bucket left short would never launch here while the others wait in its
 * collective. The error comes back after the loop; finalize agrees on it. */
static dist_status fill_unmarked(dist_ddp *d, int *first_missing) {
  char names[512] = "";
  size_t len = 0;
  int missing = 0;
  dist_status zero = DIST_SUCCESS;
  char zero_why[256] = "";
  for (int i = 0; i < d->p->n; i++) {
    if (d->marked[i]) continue;
    const dist__param *q = &d->p->p[i];
    const dist__bucket *b = &d->b[d->bucket_of[i]];
    if (host_compressed(d, b)) { /* mark_ready would have narrowed into the wire buffer */
      memset((char *)b->wirebuf + (size_t)b->offset[d->slot_of[i]] * 2, 0, (size_t)q->numel * 2);
    } else {
      dist_status z = dist__mem_zero(q->memory, slot(d, i), dist__param_bytes(q));
      if (z && !zero) zero = z, snprintf(zero_why, sizeof zero_why, "%s", dist_last_error());
    }
    d->b[d->bucket_of[i]].ready++;
    if (missing++ < 8 && len < sizeof names - 80)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%d '%s'", missing > 1 ? ", " : "", i, q->name);
  }
  if (zero)
    return dist__error(zero, "dist_ddp_finalize: zeroing the gradient of unmarked parameter(s) %s: %s", names, zero_why);
  if (d->nmarked == 0 && d->p->n > 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_ddp_finalize: no parameter was marked ready since the last finalize");
  if (missing && d->o.unused == DIST_DDP_UNUSED_ERROR) {
    for (int i = 0; i < d->p->n && *first_missing < 0; i++)
      if (!d->marked[i]) *first_missing = i;
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "dist_ddp_finalize: %d parameters were not marked ready: %s%s (mark them, or create the reducer "
                       "with unused = DIST_DDP_UNUSED_ZERO)", missing, names, missing > 8 ? ", ..." : "");
  }
  return DIST_SUCCESS;
}

/* (value, rank) in one word whose minimum is the lowest value, on the
 * lowest rank that has it (MPI's MINLOC). */
static int64_t at_rank(int32_t value, int rank) { return (int64_t)value * 4294967296LL + rank; }
static int rank_of(int64_t w) { return (int)(w & 0xFFFFFFFF); }
static int value_of(int64_t w) { return (int)((w - rank_of(w)) / 4294967296LL); } /* exact: a negative value too */

/* dist__agree plus the first parameter some rank left unmarked (unused =
 * ERROR), so that ranks which marked everything also name it. One
 * all-reduce, like dist__agree. */
static dist_status agree_finalize(dist_ddp *d, dist_status local, int first_missing) {
  int64_t in[2] = {at_rank((int32_t)local, d->g->rank), at_rank(first_missing < 0 ? INT32_MAX : first_missing, d->g->rank)},
          w[2];
  DIST_CHECK(dist__backend_host(d->g)->all_reduce(d->g, in, w, 2, DIST_I64, DIST_MIN, NULL));
  int out[4] = {value_of(w[0]), rank_of(w[0]), value_of(w[1]), rank_of(w[1])};
  if (out[0] == DIST_SUCCESS) return DIST_SUCCESS;
  if (local) return local; /* this rank's own code; finalize keeps its message */
  if (out[2] < d->p->n)
    return dist__error((dist_status)out[0],
                       "dist_ddp_finalize: parameter %d '%s' was not marked ready on rank %d (mark it, or create the "
                       "reducer with unused = DIST_DDP_UNUSED_ZERO)", out[2], d->p->p[out[2]].name, out[3]);
  return dist__error((dist_status)out[0], "dist_ddp_finalize failed on rank %d: %s", out[1],
                     dist_status_string((dist_status)out[0]));
}

dist_status dist_ddp_finalize(dist_ddp *d) {
  const char *what = "dist_ddp_finalize";
  if (!d) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: reducer is NULL", what);
  if (!d->sync) {
    reset_marks(d);
    return DIST_SUCCESS;
  }
  /* The first local failure and its message: later calls (the waits, the
   * agreement, the rebuild) may replace the thread's last error. */
  char why[512] = "";
  int first_missing = -1;
  dist_status local = fill_unmarked(d, &first_missing);
  if (local) snprintf(why, sizeof why, "%s", dist_last_error());
  if (d->sticky) local = d->sticky, snprintf(why, sizeof why, "%s", d->sticky_why);
  dist_status s = dist__ddp_launch_ready(d);
  if (s && !local) local = s, snprintf(why, sizeof why, "%s", dist_last_error());
  dist_status w = dist__ddp_wait_all(d);
  if (w && !local) local = w, snprintf(why, sizeof why, "%s", dist_last_error());
  if (dist__state.settings.verify) {
    dist_status agreed = agree_finalize(d, local, first_missing);
    if (agreed && !local) local = agreed, snprintf(why, sizeof why, "%s", dist_last_error());
  }
  for (int k = 0; k < d->nb && !local; k++)
    if ((local = average(d, k))) snprintf(why, sizeof why, "%s", dist_last_error());
  if (d->rebuild_pending) dist__ddp_rebuild(d); /* every rank reaches this point in the same finalize */
  if (local) local = dist__error(local, "%s", why);
  reset_marks(d);
  return local;
}
