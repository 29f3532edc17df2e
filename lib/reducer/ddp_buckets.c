/* DDP reducer: the bucket layout (which parameter goes where, the buffers,
 * gradients as views into them) and its release. Used by creation (ddp.c)
 * and by the rebuild after the first step (ddp_rebuild.c). */
#include <stdlib.h>
#include <string.h>

#include "reducer/ddp_internal.h"
#include "backend/half_ops.h"
#include "mem/memops.h"

typedef struct {
  dist_dtype dtype;
  dist_memory memory;
  int device;
  int open;      /* bucket index being filled, -1 none */
  int opened;    /* buckets of this key so far (the first gets the first cap) */
  size_t cap;    /* of the open bucket */
} bucket_key;

/* Fill buckets with the parameters in `order` (the order their gradients are
 * expected ready); per (dtype, memory, device) key a bucket is closed before
 * a parameter that would overflow its cap, so only a single parameter larger
 * than the cap makes a bucket bigger than it. */
dist_status dist__ddp_assign(dist_ddp *d, const int *order) {
  const dist_params *p = d->p;
  bucket_key keys[16];
  int nkeys = 0;
  d->nb = 0;
  d->b = calloc((size_t)p->n + 1, sizeof *d->b);
  d->bucket_of = malloc(sizeof(int) * ((size_t)p->n + 1));
  d->slot_of = malloc(sizeof(int) * ((size_t)p->n + 1));
  if (!d->b || !d->bucket_of || !d->slot_of) return dist__error(DIST_ERR_NO_MEMORY, "DDP bucket layout");
  for (int o = 0; o < p->n; o++) {
    int i = order[o];
    const dist__param *q = &p->p[i];
    int k = 0;
    while (k < nkeys && !(keys[k].dtype == q->dtype && keys[k].memory == q->memory && keys[k].device == q->device)) k++;
    if (k == nkeys) {
      if (nkeys == 16) return dist__error(DIST_ERR_UNSUPPORTED, "dist_ddp_create: more than 16 (dtype, device) kinds");
      keys[nkeys++] = (bucket_key){q->dtype, q->memory, q->device, -1, 0, 0};
    }
    size_t esize = dist_dtype_size(q->dtype);
    if (keys[k].open >= 0) {
      const dist__bucket *cur = &d->b[keys[k].open];
      if (cur->nparams > 0 && (size_t)(cur->numel + q->numel) * esize > keys[k].cap) keys[k].open = -1;
    }
    if (keys[k].open < 0) {
      dist__bucket *nb = &d->b[d->nb];
      nb->dtype = q->dtype;
      nb->memory = q->memory;
      nb->device = q->device;
      nb->params = malloc(sizeof(int) * (size_t)p->n);
      nb->offset = malloc(sizeof(int64_t) * (size_t)p->n);
      if (!nb->params || !nb->offset) {
        free(nb->params), free(nb->offset); /* not counted in d->nb yet */
        nb->params = NULL, nb->offset = NULL;
        return dist__error(DIST_ERR_NO_MEMORY, "DDP bucket %d", d->nb);
      }
      keys[k].open = d->nb++;
      keys[k].cap = keys[k].opened++ == 0 ? d->o.first_bucket_bytes : d->o.bucket_bytes;
    }
    dist__bucket *b = &d->b[keys[k].open];
    d->bucket_of[i] = keys[k].open;
    d->slot_of[i] = b->nparams;
    b->params[b->nparams] = i;
    b->offset[b->nparams++] = b->numel;
    b->numel += q->numel;
  }
  return DIST_SUCCESS;
}

dist_status dist__ddp_alloc_buffers(dist_ddp *d) {
  free(d->be);
  d->be = calloc((size_t)d->nb + 1, sizeof *d->be);
  if (!d->be) return dist__error(DIST_ERR_NO_MEMORY, "DDP buckets");
  for (int k = 0; k < d->nb; k++) {
    dist__bucket *b = &d->b[k];
    size_t esize = dist_dtype_size(b->dtype);
    DIST_CHECK(dist__backend_for(b->memory, d->g, &d->be[k]));
    DIST_CHECK(dist__mem_alloc(b->memory, (size_t)b->numel * esize, &b->buf));
    b->wire = b->dtype;
    b->wirebuf = b->buf;
    if (d->be[k] == &dist__backend_mpi && !d->has_hook &&
        (dist__dtype_is16(b->dtype) || d->o.compress != DIST_DDP_COMPRESS_NONE)) {
      /* MPI's 16-bit sum op, made now so that launching a bucket cannot fail on it */
      DIST_CHECK(dist__half_sum_ready(d->o.compress == DIST_DDP_COMPRESS_F16 || b->dtype == DIST_F16 ? DIST_F16 : DIST_BF16));
    }
    if (!d->has_hook && d->o.compress != DIST_DDP_COMPRESS_NONE && b->dtype == DIST_F32) {
      b->wire = d->o.compress == DIST_DDP_COMPRESS_BF16 ? DIST_BF16 : DIST_F16;
      DIST_CHECK(dist__mem_alloc(b->memory, (size_t)b->numel * 2, &b->wirebuf));
    }
  }
  return DIST_SUCCESS;
}

/* grad_as_bucket_view: the gradient moves into its bucket slot. */
dist_status dist__ddp_move_grads(dist_ddp *d, int into_bucket) {
  for (int i = 0; i < d->p->n; i++) {
    dist__param *q = &d->p->p[i];
    dist__bucket *b = &d->b[d->bucket_of[i]];
    char *slot = (char *)b->buf + (size_t)b->offset[d->slot_of[i]] * dist_dtype_size(b->dtype);
    size_t bytes = dist__param_bytes(q);
    if (into_bucket) {
      DIST_CHECK(dist__mem_copy2d(q->memory, slot, bytes, q->grad, bytes, bytes, 1));
      d->orig_grad[i] = q->grad;
      q->grad = slot;
    } else {
      DIST_CHECK(dist__mem_copy2d(q->memory, d->orig_grad[i], bytes, slot, bytes, bytes, 1));
      q->grad = d->orig_grad[i];
    }
  }
  return dist__ddp_sync_memory(d);
}

/* Wait for queued device copies into or out of any bucket (host: nothing). */
dist_status dist__ddp_sync_memory(const dist_ddp *d) {
  for (int k = 0; k < d->nb; k++)
    if (d->b[k].memory != DIST_MEM_HOST) return dist__mem_sync(d->b[k].memory);
  return DIST_SUCCESS;
}

void dist__ddp_free_buckets(dist__bucket *b, int nb) {
  for (int k = 0; b && k < nb; k++) {
    if (b[k].wirebuf && b[k].wirebuf != b[k].buf) dist__mem_free(b[k].memory, b[k].wirebuf);
    if (b[k].buf) dist__mem_free(b[k].memory, b[k].buf);
    free(b[k].params);
    free(b[k].offset);
  }
  free(b);
}
