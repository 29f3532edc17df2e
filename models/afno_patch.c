/* Patch embedding (a convolution with stride = kernel = patch, done as one
 * GEMM over the patches) with pos_embed, and the head (a linear layer
 * without bias) with the un-patchify. Both see this rank's token rows only. */
#include <cblas.h>
#include <string.h>

#include "afno_internal.h"

/* Row of patch element (c, i, j): the conv weight's (c, i, j) order for the
 * embedding, the reference head's (i, j, c) order for the output. */
static int64_t patch_row(const afno_dims *d, int head, int64_t C, int64_t c, int64_t i, int64_t j) {
  return head ? (i * d->p1 + j) * C + c : (c * d->p0 + i) * d->p1 + j;
}

/* img [B, C, hl*p0, W] <-> cols [B, C*p0*p1, T]; to_cols picks the direction. */
static void patches(const afno_dims *d, int64_t B, int64_t C, int head, float *img, float *cols, int to_cols) {
  const int64_t T = d->T, K = C * d->p0 * d->p1, rows = d->hl * d->p0;
  for (int64_t s = 0; s < B; s++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < d->p0; i++)
        for (int64_t j = 0; j < d->p1; j++) {
          float *col = cols + (s * K + patch_row(d, head, C, c, i, j)) * T;
          for (int64_t r = 0; r < d->hl; r++) {
            float *px = img + ((s * C + c) * rows + r * d->p0 + i) * d->W + j, *cx = col + r * d->w;
            if (to_cols)
              for (int64_t q = 0; q < d->w; q++) cx[q] = px[q * d->p1];
            else
              for (int64_t q = 0; q < d->w; q++) px[q * d->p1] = cx[q];
          }
        }
}

static float *param(dist_afno *m, float *arena, int index) { return arena + m->params[index].offset; }

dist_status afno_embed_forward(dist_afno *m, const float *img, float *x) {
  const afno_dims *d = &m->d;
  const int64_t T = d->T, Dl = d->Dl;
  const float *wt = param(m, m->data, 0), *bias = param(m, m->data, 1), *pos = param(m, m->data, 2);
  patches(d, m->B, d->Cin, 0, (float *)img, m->cols, 1);
  for (int64_t s = 0; s < m->B; s++) {
    float *xs = x + s * Dl * T;
    for (int64_t c = 0; c < Dl; c++)
      for (int64_t t = 0; t < T; t++) xs[c * T + t] = bias[c] + pos[c * T + t];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Dl, (int)T, d->Kin, 1.0f, wt, d->Kin,
                m->cols + s * d->Kin * T, (int)T, 1.0f, xs, (int)T);
  }
  return DIST_SUCCESS;
}

dist_status afno_embed_backward(dist_afno *m, const float *dx) {
  const afno_dims *d = &m->d;
  const int64_t T = d->T, Dl = d->Dl;
  float *gw = param(m, m->grad, 0), *gb = param(m, m->grad, 1), *gp = param(m, m->grad, 2);
  for (int64_t s = 0; s < m->B; s++) {
    const float *dxs = dx + s * Dl * T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Dl, d->Kin, (int)T, 1.0f, dxs, (int)T,
                m->cols + s * d->Kin * T, (int)T, 1.0f, gw, d->Kin);
    for (int64_t c = 0; c < Dl; c++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < T; t++) {
        acc += dxs[c * T + t];
        gp[c * T + t] += dxs[c * T + t];
      }
      gb[c] += acc;
    }
  }
  return DIST_SUCCESS;
}

dist_status afno_head_forward(dist_afno *m, const float *x, float *y) {
  const afno_dims *d = &m->d;
  const int64_t T = d->T, Dl = d->Dl, K = d->Kout;
  const float *wt = param(m, m->data, AFNO_P_HEAD(m->cfg.depth));
  for (int64_t s = 0; s < m->B; s++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)K, (int)T, (int)Dl, 1.0f, wt, (int)Dl, x + s * Dl * T,
                (int)T, 0.0f, m->s_full + s * K * T, (int)T);
  if (d->mp > 1) { /* row-parallel: reduce_from's forward (an all-reduce, in place) of the channel shards' sums */
    int64_t shape[3] = {m->B, K, T};
    dist_tensor t = dist_tensor_host(m->s_full, DIST_F32, 3, shape);
    dist_status st = dist_all_reduce(d->mp_group, &t, DIST_SUM);
    if (st) return st;
  }
  patches(d, m->B, d->Cout, 1, y, m->s_full, 0);
  return DIST_SUCCESS;
}

/* dx is written (the start of the backward pass). */
dist_status afno_head_backward(dist_afno *m, const float *x, const float *dy, float *dx) {
  const afno_dims *d = &m->d;
  const int64_t T = d->T, Dl = d->Dl, K = d->Kout;
  const float *wt = param(m, m->data, AFNO_P_HEAD(m->cfg.depth));
  float *gw = param(m, m->grad, AFNO_P_HEAD(m->cfg.depth));
  patches(d, m->B, d->Cout, 1, (float *)dy, m->s_full, 1); /* reduce_from's backward is the identity */
  for (int64_t s = 0; s < m->B; s++) {
    const float *dys = m->s_full + s * K * T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)K, (int)Dl, (int)T, 1.0f, dys, (int)T, x + s * Dl * T,
                (int)T, 1.0f, gw, (int)Dl);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Dl, (int)T, (int)K, 1.0f, wt, (int)Dl, dys, (int)T, 0.0f,
                dx + s * Dl * T, (int)T);
  }
  return DIST_SUCCESS;
}
