/* DDP bucket rebuild. The first layout assumes gradients become ready in
 * reverse registration order; where the backward produces them otherwise
 * (shared layers, branches, a registration order that is not the forward
 * order), a bucket waits for its last parameter and launches late. After
 * the first synchronised iteration in which rank 0 marked something, the
 * buckets are laid out again in the order rank 0 saw (PyTorch DDP does the
 * same), once. */
#include <stdlib.h>

#include "reducer/ddp_internal.h"
#include "mem/memops.h"

/* d->order := the marks of this iteration, then the unmarked parameters in
 * reverse registration order, followed by the number of marks; rank 0's on
 * every rank (d->order holds n + 1 ints). */
static dist_status observed_order(dist_ddp *d) {
  int n = d->p->n, k = d->norder;
  for (int i = n - 1; i >= 0; i--)
    if (!d->marked[i]) d->order[k++] = i;
  d->order[n] = d->norder;
  return dist__backend_host(d->g)->broadcast(d->g, d->order, (size_t)n + 1, DIST_I32, 0);
}

static void *slot_in(const dist__bucket *b, const int *bucket_of, const int *slot_of, int i) {
  const dist__bucket *x = &b[bucket_of[i]];
  return (char *)x->buf + (size_t)x->offset[slot_of[i]] * dist_dtype_size(x->dtype);
}

void dist__ddp_rebuild(dist_ddp *d) {
  int n = d->p->n;
  dist_status s = observed_order(d);
  /* Rank 0 marked nothing (e.g. a finalize without marks): wait for an
   * iteration that shows an order (decided after the agreement below, so
   * that a rank whose broadcast failed is not left alone in it). */
  int wait = !s && d->order[n] == 0;
  /* The old layout stays whole until every rank has the new one. */
  dist__bucket *ob = d->b;
  int onb = d->nb, *obucket = d->bucket_of, *oslot = d->slot_of;
  const dist__backend **obe = d->be;
  d->b = NULL, d->be = NULL, d->bucket_of = NULL, d->slot_of = NULL, d->nb = 0;
  if (!s && !wait) s = dist__ddp_assign(d, d->order);
  int same = !s && d->nb == onb;
  for (int i = 0; same && !wait && i < n; i++) same = d->bucket_of[i] == obucket[i] && d->slot_of[i] == oslot[i];
  same |= wait;
  if (!s && !same) s = dist__ddp_alloc_buffers(d);
  for (int i = 0; !s && !same && d->o.grad_as_bucket_view && i < n; i++) { /* the averages move with their slots */
    size_t bytes = dist__param_bytes(&d->p->p[i]);
    s = dist__mem_copy2d(d->p->p[i].memory, slot_in(d->b, d->bucket_of, d->slot_of, i), bytes,
                         slot_in(ob, obucket, oslot, i), bytes, bytes, 1);
  }
  if (!s && !same && d->o.grad_as_bucket_view) s = dist__ddp_sync_memory(d);
  /* Every rank computed `same` from the same order; a local failure (the
   * broadcast included) makes all of them keep the old layout. */
  s = dist__agree_group(d->g, s, "DDP bucket rebuild");
  d->rebuild_pending = wait && !s;
  int keep_new = !s && !same;
  if (keep_new && d->o.grad_as_bucket_view)
    for (int i = 0; i < n; i++) d->p->p[i].grad = slot_in(d->b, d->bucket_of, d->slot_of, i);
  if (!keep_new) { /* swap back: the new layout is the one to free */
    dist__bucket *tb = d->b;
    int tnb = d->nb, *tbucket = d->bucket_of, *tslot = d->slot_of;
    const dist__backend **tbe = d->be;
    d->b = ob, d->nb = onb, d->bucket_of = obucket, d->slot_of = oslot, d->be = obe;
    ob = tb, onb = tnb, obucket = tbucket, oslot = tslot, obe = tbe;
  }
  if (s) dist_log(DIST_LOG_WARN, "DDP bucket rebuild failed, keeping the first layout: %s", dist_last_error());
  dist__ddp_free_buckets(ob, onb);
  free((void *)obe);
  free(obucket);
  free(oslot);
}
