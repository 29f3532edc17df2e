/* The block MLP: fc1 (D -> Hd), exact-erf GELU, fc2 (Hd -> D), one GEMM per
 * sample on channel-first activations.
 *
 * Model parallel (Megatron style, with the mapping pairs of mapping.h): the
 * input's Dl channels are all-gathered to D (dist_all_gather_v; backward
 * dist_all_gather_v_backward, a reduce-scatter), fc1 is column-parallel
 * (this rank's Hdl hidden units), fc2 row-parallel, and its partial sums
 * are reduce-scattered back to Dl channels (the same pair the other way
 * round): one all-gather and one reduce-scatter per pass, where PhysicsNeMo
 * does an all-gather, an all-reduce and a split. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "afno_internal.h"

static dist_tensor act3(float *p, int64_t B, int64_t C, int64_t T) {
  int64_t shape[3] = {B, C, T};
  return dist_tensor_host(p, DIST_F32, 3, shape);
}

dist_status afno_mlp_forward(dist_afno *m, const afno_block_w *w, const float *v, float *y, afno_block_cache *c) {
  const afno_dims *d = &m->d;
  const int64_t B = m->B, T = d->T, D = d->D, Dl = d->Dl, Hdl = d->Hdl;
  dist_status st;
  if (v != c->v) { /* gather the channels of the other model-parallel ranks */
    dist_tensor in = act3((float *)v, B, Dl, T), out = act3(c->v, B, D, T);
    if ((st = dist_all_gather_v(d->mp_group, &in, &out, 1, d->dl_sizes))) return st;
  }
  float *part = d->mp == 1 ? y : m->s_full; /* fc2 output: final alone, partial sums otherwise */
  for (int64_t s = 0; s < B; s++) {
    float *hp = c->hpre + s * Hdl * T, *z = m->s_hid + s * Hdl * T, *ys = part + s * D * T;
    for (int64_t o = 0; o < Hdl; o++)
      for (int64_t t = 0; t < T; t++) hp[o * T + t] = w->fc1b[o];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Hdl, (int)T, (int)D, 1.0f, w->fc1w, (int)D,
                c->v + s * D * T, (int)T, 1.0f, hp, (int)T);
    afno_gelu(hp, z, Hdl * T);
    for (int64_t o = 0; o < D; o++) /* fc2's bias once: alone here, after the reduce-scatter otherwise */
      for (int64_t t = 0; t < T; t++) ys[o * T + t] = d->mp == 1 ? w->fc2b[o] : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)T, (int)Hdl, 1.0f, w->fc2w, (int)Hdl, z,
                (int)T, 1.0f, ys, (int)T);
  }
  if (d->mp == 1) return DIST_SUCCESS;
  dist_tensor full = act3(m->s_full, B, D, T), mine = act3(y, B, Dl, T);
  if ((st = dist_all_gather_v_backward(d->mp_group, &full, &mine, 1, d->dl_sizes))) return st;
  for (int64_t s = 0; s < B; s++)
    for (int64_t o = 0; o < Dl; o++)
      for (int64_t t = 0; t < T; t++) y[(s * Dl + o) * T + t] += w->fc2b[o];
  return DIST_SUCCESS;
}

dist_status afno_mlp_backward(dist_afno *m, const afno_block_w *w, const afno_block_cache *c, const float *dy,
                              float *dv, afno_block_w *g) {
  const afno_dims *d = &m->d;
  const int64_t B = m->B, T = d->T, D = d->D, Dl = d->Dl, Hdl = d->Hdl;
  dist_status st;
  const float *dfull = dy;
  if (d->mp > 1) { /* adjoint of the reduce-scatter */
    dist_tensor in = act3((float *)dy, B, Dl, T), out = act3(m->s_full, B, D, T);
    if ((st = dist_all_gather_v(d->mp_group, &in, &out, 1, d->dl_sizes))) return st;
    dfull = m->s_full;
  }
  for (int64_t s = 0; s < B; s++)
    for (int64_t o = 0; o < Dl; o++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < T; t++) acc += dy[(s * Dl + o) * T + t];
      g->fc2b[o] += acc;
    }
  float *dvfull = d->mp == 1 ? dv : m->s_full; /* d(input): summed here alone, reduce-scattered otherwise */
  for (int64_t s = 0; s < B; s++) {
    const float *hp = c->hpre + s * Hdl * T, *dys = dfull + s * D * T, *vs = c->v + s * D * T;
    float *z = m->s_hid + s * Hdl * T;
    afno_gelu(hp, z, Hdl * T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)D, (int)Hdl, (int)T, 1.0f, dys, (int)T, z, (int)T, 1.0f,
                g->fc2w, (int)Hdl);
    /* dz over z (z is not an input of this GEMM) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Hdl, (int)T, (int)D, 1.0f, w->fc2w, (int)Hdl, dys,
                (int)T, 0.0f, z, (int)T);
    afno_gelu_backward(hp, z, Hdl * T);
    for (int64_t o = 0; o < Hdl; o++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < T; t++) acc += z[o * T + t];
      g->fc1b[o] += acc;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Hdl, (int)D, (int)T, 1.0f, z, (int)T, vs, (int)T, 1.0f,
                g->fc1w, (int)D);
    /* d(input) of sample s over dy's sample s, already used (model parallel) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)T, (int)Hdl, 1.0f, w->fc1w, (int)D, z, (int)T,
                d->mp == 1 ? 1.0f : 0.0f, dvfull + s * D * T, (int)T);
  }
  if (d->mp == 1) return DIST_SUCCESS;
  dist_tensor full = act3(m->s_full, B, D, T), mine = act3(m->s_c, B, Dl, T);
  if ((st = dist_all_gather_v_backward(d->mp_group, &full, &mine, 1, d->dl_sizes))) return st;
  for (int64_t i = 0; i < B * Dl * T; i++) dv[i] += m->s_c[i];
  return DIST_SUCCESS;
}
