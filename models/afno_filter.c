/* The AFNO2D filter: y = irfft2(spectral_mlp(rfft2(u))) + u, rfft2 with
 * norm "ortho" through distmgr's (distributed) FFT over the spatial group.
 *
 * The spectrum is in the FFT's transposed layout [h, B, Dl, k_local]: for
 * each kept row, sample and local block, the block's bs channels x kept
 * columns form a bs x n matrix (leading dimension k_local), and a spectral
 * layer is one complex GEMM with the block's weight W = w[0] + i w[1]:
 * O = W^T X + b (the reference's einsum "...i,io->...o", which multiplies
 * real and imaginary parts exactly as a complex product). Backward with the
 * gradient convention g = dL/dRe + i dL/dIm: G_X = conj(W) G_O,
 * G_W^T = G_O X^H, G_b = sum over columns of G_O. */
#include <cblas.h>
#include <string.h>

#include "afno_internal.h"

/* Complex weights of local block j from the [2, nbl, bs, bs] real layout;
 * conj = 1 gives conj(W). */
static void complex_weight(const afno_dims *d, const float *w, int j, int conj, float complex *out) {
  const int64_t bb = (int64_t)d->bs * d->bs, off = (int64_t)j * bb, im = (int64_t)d->nbl * bb;
  const float sgn = conj ? -1.0f : 1.0f;
  for (int64_t k = 0; k < bb; k++) out[k] = CMPLXF(w[off + k], sgn * w[im + off + k]);
}

/* Columns of the kept box in this rank's part of the spectrum. */
static int64_t kept_cols(const dist_afno *m) {
  int64_t n = m->d.col_hi - m->spec_k0;
  return n < 0 ? 0 : n > m->spec_kl ? m->spec_kl : n;
}

/* Offset (complex values) of block j's first channel at row r, sample s. */
static int64_t block_at(const dist_afno *m, int64_t r, int64_t s, int j) {
  return ((r * m->B + s) * m->d.Dl + (int64_t)j * m->d.bs) * m->spec_kl;
}

dist_status afno_filter_forward(dist_afno *m, const afno_block_w *w, const float *u, float *y, afno_block_cache *c) {
  const afno_dims *d = &m->d;
  const int bs = d->bs;
  const int64_t kl = m->spec_kl, n = kept_cols(m), act = m->B * d->Dl * d->T;
  int64_t in_shape[4] = {m->B, d->Dl, d->hl, d->w}, sp_shape[4] = {d->h, m->B, d->Dl, kl};
  dist_tensor tu = dist_tensor_host((void *)u, DIST_F32, 4, in_shape), ty = dist_tensor_host(y, DIST_F32, 4, in_shape);
  dist_tensor tX = dist_tensor_host(c->X, DIST_C64, 4, sp_shape), tS = dist_tensor_host(m->s_spec, DIST_C64, 4, sp_shape);
  dist_status st = dist_fft_forward(m->fft, &tu, &tX);
  if (st) return st;
  memset(m->s_spec, 0, sizeof(float complex) * (size_t)m->spec_n); /* modes outside the box stay 0 */
  float complex W1[bs * bs], W2[bs * bs], one = 1.0f;
  for (int j = 0; n > 0 && j < d->nbl; j++) {
    complex_weight(d, w->w1, j, 0, W1);
    complex_weight(d, w->w2, j, 0, W2);
    const float *b1 = w->b1 + (int64_t)j * bs, *b2 = w->b2 + (int64_t)j * bs;
    const int64_t bim = (int64_t)d->nbl * bs;
    for (int64_t r = d->row_lo; r < d->row_hi; r++)
      for (int64_t s = 0; s < m->B; s++) {
        const int64_t at = block_at(m, r, s, j);
        float complex *X = c->X + at, *o1 = c->o1 + at, *o2 = c->o2 + at, *Y = m->s_spec + at;
        for (int o = 0; o < bs; o++)
          for (int64_t k = 0; k < n; k++) o1[o * kl + k] = CMPLXF(b1[o], b1[bim + o]);
        cblas_cgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bs, (int)n, bs, &one, W1, bs, X, (int)kl, &one, o1,
                    (int)kl);
        for (int o = 0; o < bs; o++)
          for (int64_t k = 0; k < n; k++) {
            float complex v = o1[o * kl + k];
            o1[o * kl + k] = CMPLXF(crealf(v) > 0 ? crealf(v) : 0.0f, cimagf(v) > 0 ? cimagf(v) : 0.0f);
            o2[o * kl + k] = CMPLXF(b2[o], b2[bim + o]);
          }
        cblas_cgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bs, (int)n, bs, &one, W2, bs, o1, (int)kl, &one, o2,
                    (int)kl);
        const float lam = d->lambda;
        for (int o = 0; o < bs; o++)
          for (int64_t k = 0; k < n; k++) {
            float re = crealf(o2[o * kl + k]), im = cimagf(o2[o * kl + k]);
            re = re > lam ? re - lam : re < -lam ? re + lam : 0.0f;
            im = im > lam ? im - lam : im < -lam ? im + lam : 0.0f;
            o2[o * kl + k] = Y[o * kl + k] = CMPLXF(re, im);
          }
      }
  }
  st = dist_fft_inverse(m->fft, &tS, &ty); /* destroys s_spec */
  if (st) return st;
  for (int64_t i = 0; i < act; i++) y[i] += u[i];
  return DIST_SUCCESS;
}

/* Add the [bs x bs] complex G^T accumulated for block j into the real
 * [2, nbl, bs, bs] gradient (transposed back: G^T[o][i] -> g[.., i, o]). */
static void add_weight_grad(const afno_dims *d, const float complex *Gt, int j, float *g) {
  const int64_t bb = (int64_t)d->bs * d->bs, off = (int64_t)j * bb, im = (int64_t)d->nbl * bb;
  for (int o = 0; o < d->bs; o++)
    for (int i = 0; i < d->bs; i++) {
      g[off + (int64_t)i * d->bs + o] += crealf(Gt[o * d->bs + i]);
      g[im + off + (int64_t)i * d->bs + o] += cimagf(Gt[o * d->bs + i]);
    }
}

/* Backward of ReLU and of softshrink on real and imaginary parts: both pass
 * the gradient exactly where their output is not 0. G (bs rows of n, leading
 * dimension ldg) is masked by out (leading dimension ldo) in place, and its
 * row sums go to the bias gradient (real parts at db, imaginary at db + bim). */
static void mask_by_output(const float complex *out, int64_t ldo, float complex *G, int64_t ldg, int bs, int64_t n,
                           float *db, int64_t bim) {
  for (int o = 0; o < bs; o++) {
    float sr = 0.0f, si = 0.0f;
    for (int64_t k = 0; k < n; k++) {
      float complex v = out[o * ldo + k], gv = G[o * ldg + k];
      gv = CMPLXF(crealf(v) != 0.0f ? crealf(gv) : 0.0f, cimagf(v) != 0.0f ? cimagf(gv) : 0.0f);
      G[o * ldg + k] = gv;
      sr += crealf(gv);
      si += cimagf(gv);
    }
    db[o] += sr;
    db[bim + o] += si;
  }
}

dist_status afno_filter_backward(dist_afno *m, const afno_block_w *w, const afno_block_cache *c, const float *dy,
                                 float *du, afno_block_w *g) {
  const afno_dims *d = &m->d;
  const int bs = d->bs;
  const int64_t kl = m->spec_kl, n = kept_cols(m), act = m->B * d->Dl * d->T;
  int64_t in_shape[4] = {m->B, d->Dl, d->hl, d->w}, sp_shape[4] = {d->h, m->B, d->Dl, kl};
  dist_tensor tdy = dist_tensor_host((void *)dy, DIST_F32, 4, in_shape);
  dist_tensor tG = dist_tensor_host(m->s_spec, DIST_C64, 4, sp_shape);
  dist_tensor tGX = dist_tensor_host(m->s_spec2, DIST_C64, 4, sp_shape);
  dist_tensor tout = dist_tensor_host(m->s_c, DIST_F32, 4, in_shape);
  dist_status st = dist_fft_inverse_backward(m->fft, &tdy, &tG);
  if (st) return st;
  memset(m->s_spec2, 0, sizeof(float complex) * (size_t)m->spec_n);
  float complex W1c[bs * bs], W2c[bs * bs], dW1[bs * bs], dW2[bs * bs], G1[bs * (n > 0 ? n : 1)], one = 1.0f,
      zero = 0.0f;
  const int64_t bim = (int64_t)d->nbl * bs;
  for (int j = 0; n > 0 && j < d->nbl; j++) {
    complex_weight(d, w->w1, j, 1, W1c);
    complex_weight(d, w->w2, j, 1, W2c);
    memset(dW1, 0, sizeof dW1);
    memset(dW2, 0, sizeof dW2);
    float *db1 = g->b1 + (int64_t)j * bs, *db2 = g->b2 + (int64_t)j * bs;
    for (int64_t r = d->row_lo; r < d->row_hi; r++)
      for (int64_t s = 0; s < m->B; s++) {
        const int64_t at = block_at(m, r, s, j);
        const float complex *X = c->X + at, *o1 = c->o1 + at, *o2 = c->o2 + at;
        float complex *G2 = m->s_spec + at, *GX = m->s_spec2 + at;
        mask_by_output(o2, kl, G2, kl, bs, n, db2, bim); /* softshrink */
        cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasConjTrans, bs, bs, (int)n, &one, G2, (int)kl, o1, (int)kl, &one,
                    dW2, bs);
        cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, (int)n, bs, &one, W2c, bs, G2, (int)kl, &zero, G1,
                    (int)n);
        mask_by_output(o1, kl, G1, n, bs, n, db1, bim); /* ReLU */
        cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasConjTrans, bs, bs, (int)n, &one, G1, (int)n, X, (int)kl, &one,
                    dW1, bs);
        cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, (int)n, bs, &one, W1c, bs, G1, (int)n, &zero, GX,
                    (int)kl);
      }
    add_weight_grad(d, dW1, j, g->w1);
    add_weight_grad(d, dW2, j, g->w2);
  }
  st = dist_fft_forward_backward(m->fft, &tGX, &tout); /* destroys s_spec2 */
  if (st) return st;
  for (int64_t i = 0; i < act; i++) du[i] += dy[i] + m->s_c[i];
  return DIST_SUCCESS;
}
