/* LayerNorm over embed_dim on channel-first [B, Dl, T] activations. Under
 * model parallelism each rank holds Dl of the D channels: the per-token sums
 * are all-reduced over the model-parallel group, so the result is the serial
 * LayerNorm (PhysicsNeMo's DistributedAFNO normalises over (h, w) instead). */
#include <math.h>
#include <string.h>

#include "afno_internal.h"

/* Sum n floats over the model-parallel group (nothing to do alone). */
static dist_status mp_sum(const afno_dims *d, float *v, int64_t n) {
  if (d->mp == 1) return DIST_SUCCESS;
  int64_t shape[1] = {n};
  dist_tensor t = dist_tensor_host(v, DIST_F32, 1, shape);
  return dist_all_reduce(d->mp_group, &t, DIST_SUM);
}

dist_status afno_ln_forward(const afno_dims *d, int64_t B, const float *x, const float *g, const float *b, float *y,
                            float *mean, float *rstd) {
  const int64_t T = d->T, Dl = d->Dl;
  memset(mean, 0, sizeof(float) * (size_t)(B * T));
  memset(rstd, 0, sizeof(float) * (size_t)(B * T));
  for (int64_t s = 0; s < B; s++)
    for (int64_t c = 0; c < Dl; c++) {
      const float *xc = x + (s * Dl + c) * T;
      float *mu = mean + s * T;
      for (int64_t t = 0; t < T; t++) mu[t] += xc[t];
    }
  dist_status st = mp_sum(d, mean, B * T);
  if (st) return st;
  const float inv_d = 1.0f / (float)d->D;
  for (int64_t i = 0; i < B * T; i++) mean[i] *= inv_d;
  for (int64_t s = 0; s < B; s++) /* two passes: the variance of deviations, as torch */
    for (int64_t c = 0; c < Dl; c++) {
      const float *xc = x + (s * Dl + c) * T, *mu = mean + s * T;
      float *var = rstd + s * T;
      for (int64_t t = 0; t < T; t++) var[t] += (xc[t] - mu[t]) * (xc[t] - mu[t]);
    }
  st = mp_sum(d, rstd, B * T);
  if (st) return st;
  for (int64_t i = 0; i < B * T; i++) rstd[i] = 1.0f / sqrtf(rstd[i] * inv_d + AFNO_EPS);
  for (int64_t s = 0; s < B; s++)
    for (int64_t c = 0; c < Dl; c++) {
      const float *xc = x + (s * Dl + c) * T, *mu = mean + s * T, *r = rstd + s * T;
      float *yc = y + (s * Dl + c) * T, gc = g[c], bc = b[c];
      for (int64_t t = 0; t < T; t++) yc[t] = (xc[t] - mu[t]) * r[t] * gc + bc;
    }
  return DIST_SUCCESS;
}

/* dx += rstd * (dxhat - mean_D(dxhat) - xhat * mean_D(dxhat * xhat)),
 * dxhat = dy * g. scratch: 2 * B * T floats. */
dist_status afno_ln_backward(const afno_dims *d, int64_t B, const float *x, const float *g, const float *mean,
                             const float *rstd, const float *dy, float *dx, float *dg, float *db, float *scratch) {
  const int64_t T = d->T, Dl = d->Dl;
  float *s1 = scratch, *s2 = scratch + B * T;
  memset(scratch, 0, sizeof(float) * (size_t)(2 * B * T));
  for (int64_t s = 0; s < B; s++)
    for (int64_t c = 0; c < Dl; c++) {
      const float *xc = x + (s * Dl + c) * T, *dyc = dy + (s * Dl + c) * T, *mu = mean + s * T, *r = rstd + s * T;
      float *a = s1 + s * T, *q = s2 + s * T, gc = g[c], sg = 0.0f, sb = 0.0f;
      for (int64_t t = 0; t < T; t++) {
        float xh = (xc[t] - mu[t]) * r[t], dxh = dyc[t] * gc;
        sg += dyc[t] * xh;
        sb += dyc[t];
        a[t] += dxh;
        q[t] += dxh * xh;
      }
      dg[c] += sg;
      db[c] += sb;
    }
  dist_status st = mp_sum(d, scratch, 2 * B * T);
  if (st) return st;
  const float inv_d = 1.0f / (float)d->D;
  for (int64_t s = 0; s < B; s++)
    for (int64_t c = 0; c < Dl; c++) {
      const float *xc = x + (s * Dl + c) * T, *dyc = dy + (s * Dl + c) * T, *mu = mean + s * T, *r = rstd + s * T;
      const float *a = s1 + s * T, *q = s2 + s * T;
      float *dxc = dx + (s * Dl + c) * T, gc = g[c];
      for (int64_t t = 0; t < T; t++) {
        float xh = (xc[t] - mu[t]) * r[t];
        dxc[t] += r[t] * (dyc[t] * gc - a[t] * inv_d - xh * q[t] * inv_d);
      }
    }
  return DIST_SUCCESS;
}
