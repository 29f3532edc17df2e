/* One AFNO block (the reference's double skip):
 *   x1 = filter(norm1(x)) + x        (the filter adds its own input too)
 *   y  = mlp(norm2(x1)) + x1
 * and its backward, which turns dx = dL/dy into dL/dx in place. Scratch:
 * s_u (norm1 output, then its gradient), s_a, s_b. */
#include <string.h>

#include "afno_internal.h"

dist_status afno_block_forward(dist_afno *m, int i, const float *x, float *y, afno_block_cache *c) {
  const afno_dims *d = &m->d;
  const afno_block_w *w = &m->bw[i];
  const int64_t act = m->B * d->Dl * d->T;
  float *v = d->mp == 1 ? c->v : m->s_b; /* alone, norm2 writes straight into what fc1's backward needs */
  dist_status st = afno_ln_forward(d, m->B, x, w->n1g, w->n1b, m->s_u, c->mean1, c->rstd1);
  if (!st) st = afno_filter_forward(m, w, m->s_u, m->s_a, c);
  if (st) return st;
  for (int64_t k = 0; k < act; k++) c->x1[k] = m->s_a[k] + x[k];
  st = afno_ln_forward(d, m->B, c->x1, w->n2g, w->n2b, v, c->mean2, c->rstd2);
  if (!st) st = afno_mlp_forward(m, w, v, m->s_a, c);
  if (st) return st;
  for (int64_t k = 0; k < act; k++) y[k] = m->s_a[k] + c->x1[k];
  return DIST_SUCCESS;
}

dist_status afno_block_backward(dist_afno *m, int i, const float *x, afno_block_cache *c, float *dx) {
  const afno_dims *d = &m->d;
  const afno_block_w *w = &m->bw[i];
  afno_block_w *g = &m->bg[i];
  const int64_t act = m->B * d->Dl * d->T;
  const size_t bytes = sizeof(float) * (size_t)act;
  memset(m->s_b, 0, bytes);
  dist_status st = afno_mlp_backward(m, w, c, dx, m->s_b, g); /* s_b = d norm2 output */
  if (st) return st;
  memcpy(m->s_a, dx, bytes); /* s_a = d x1: the skip plus norm2's gradient */
  st = afno_ln_backward(d, m->B, c->x1, w->n2g, c->mean2, c->rstd2, m->s_b, m->s_a, g->n2g, g->n2b, m->s_stats);
  if (st) return st;
  memset(m->s_u, 0, bytes);
  st = afno_filter_backward(m, w, c, m->s_a, m->s_u, g); /* s_u = d norm1 output */
  if (st) return st;
  memcpy(dx, m->s_a, bytes);
  return afno_ln_backward(d, m->B, x, w->n1g, c->mean1, c->rstd1, m->s_u, dx, g->n1g, g->n1b, m->s_stats);
}
