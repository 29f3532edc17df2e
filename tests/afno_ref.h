/* An independent double-precision reference of the whole AFNO (PhysicsNeMo's
 * physicsnemo.models.afno.AFNO), for the model tests: the ground truth for
 * forward values and, through afno_ref_loss, for central finite differences
 * of the gradients. Naive loops only: no BLAS, no FFT library (the 2-D DFT is
 * written out, separably, with exactly reduced twiddle angles).
 *
 * Activations are channels-last as in the reference: tokens x[b][t][d] with
 * t = row * w + col on the h x w token grid (h = H/p0, w = W/p1, N = h*w).
 * Parameters are in the reference (PyTorch) layout, one double array each,
 * in this order (P = 3 + 12 * depth + 1, see afno_ref_param_shape):
 *   0 patch_embed.proj.weight (D, Cin, p0, p1)  1 patch_embed.proj.bias (D)
 *   2 pos_embed (1, N, D)
 *   3 + 12 i + 0..11: blocks.i.{norm1.weight, norm1.bias, filter.w1, filter.b1,
 *     filter.w2, filter.b2, norm2.weight, norm2.bias, mlp.fc1.weight,
 *     mlp.fc1.bias, mlp.fc2.weight, mlp.fc2.bias}
 *   P - 1 head.weight (Cout*p0*p1, D)
 * with bs = D/nb, Hd = (int)(D * mlp_ratio), filter w1/w2 (2, nb, bs, bs),
 * b1/b2 (2, nb, bs), index 0 of the leading 2 the real part, 1 the imaginary.
 *
 * Every function is static inline (so a test that uses only some of them
 * compiles without unused-function warnings). Output buffers may alias their
 * input in afno_ref_layernorm, afno_ref_filter, afno_ref_mlp and
 * afno_ref_block. Allocation failure aborts. */
#ifndef DISTMGR_TESTS_AFNO_REF_H
#define DISTMGR_TESTS_AFNO_REF_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct afno_ref_cfg {
  int H, W, Cin, Cout, p0, p1, D, depth, nb;
  double mlp_ratio, sparsity, fraction;
} afno_ref_cfg;

enum { AFNO_REF_BLOCK_PARAMS = 12 };

static inline void *afno_ref_alloc_(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "afno_ref: out of memory (%zu x %zu bytes)\n", count, size);
    abort();
  }
  return p;
}

static inline int afno_ref_h(const afno_ref_cfg *c) { return c->H / c->p0; }
static inline int afno_ref_w(const afno_ref_cfg *c) { return c->W / c->p1; }
static inline int afno_ref_tokens(const afno_ref_cfg *c) { return afno_ref_h(c) * afno_ref_w(c); }
static inline int afno_ref_hidden(const afno_ref_cfg *c) { return (int)(c->D * c->mlp_ratio); }

static inline int afno_ref_nparams(const afno_ref_cfg *c) { return 3 + 12 * c->depth + 1; }

/* Name (buffer of >= 64 chars), number of dimensions, reference shape and
 * element count of parameter i; name "" and numel 0 for i out of range. */
static inline void afno_ref_param_shape(const afno_ref_cfg *c, int i, char *name, int *ndim, long shape[4],
                                        long *numel) {
  long D = c->D, N = afno_ref_tokens(c), nb = c->nb, bs = c->nb ? D / c->nb : 0, Hd = afno_ref_hidden(c);
  int nd = 0;
  long s[4] = {0, 0, 0, 0};
  name[0] = '\0';
#define AFNO_REF_SHAPE_(nm, n, a, b_, c_, d_) \
  (snprintf(name, 64, "%s", nm), nd = (n), s[0] = (a), s[1] = (b_), s[2] = (c_), s[3] = (d_))
  if (i == 0) AFNO_REF_SHAPE_("patch_embed.proj.weight", 4, D, c->Cin, c->p0, c->p1);
  else if (i == 1) AFNO_REF_SHAPE_("patch_embed.proj.bias", 1, D, 0, 0, 0);
  else if (i == 2) AFNO_REF_SHAPE_("pos_embed", 3, 1, N, D, 0);
  else if (i == afno_ref_nparams(c) - 1) AFNO_REF_SHAPE_("head.weight", 2, (long)c->Cout * c->p0 * c->p1, D, 0, 0);
  else if (i > 2 && i < afno_ref_nparams(c) - 1) {
    static const char *const leaf[12] = {"norm1.weight",  "norm1.bias",    "filter.w1",      "filter.b1",
                                         "filter.w2",     "filter.b2",     "norm2.weight",   "norm2.bias",
                                         "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"};
    int blk = (i - 3) / 12, k = (i - 3) % 12;
    char full[64];
    snprintf(full, sizeof full, "blocks.%d.%s", blk, leaf[k]);
    switch (k) {
    case 0: case 1: case 6: case 7: case 11: AFNO_REF_SHAPE_(full, 1, D, 0, 0, 0); break;
    case 2: case 4: AFNO_REF_SHAPE_(full, 4, 2, nb, bs, bs); break;
    case 3: case 5: AFNO_REF_SHAPE_(full, 3, 2, nb, bs, 0); break;
    case 8: AFNO_REF_SHAPE_(full, 2, Hd, D, 0, 0); break;
    case 9: AFNO_REF_SHAPE_(full, 1, Hd, 0, 0, 0); break;
    case 10: AFNO_REF_SHAPE_(full, 2, D, Hd, 0, 0); break;
    }
  }
#undef AFNO_REF_SHAPE_
  long n = nd ? 1 : 0;
  for (int k = 0; k < nd; k++) n *= s[k];
  if (ndim) *ndim = nd;
  if (shape) memcpy(shape, s, sizeof s);
  if (numel) *numel = n;
}

/* Total parameter count (PyTorch's sum of numel). */
static inline long afno_ref_param_count(const afno_ref_cfg *c) {
  char nm[64];
  long total = 0, n;
  for (int i = 0; i < afno_ref_nparams(c); i++) afno_ref_param_shape(c, i, nm, NULL, NULL, &n), total += n;
  return total;
}

/* P zeroed arrays of the parameters' sizes; free with afno_ref_params_free. */
static inline double **afno_ref_params_new(const afno_ref_cfg *c) {
  int P = afno_ref_nparams(c);
  double **p = afno_ref_alloc_((size_t)P, sizeof *p);
  char nm[64];
  long n;
  for (int i = 0; i < P; i++) afno_ref_param_shape(c, i, nm, NULL, NULL, &n), p[i] = afno_ref_alloc_((size_t)n, sizeof **p);
  return p;
}
static inline void afno_ref_params_free(const afno_ref_cfg *c, double **p) {
  if (!p) return;
  for (int i = 0; i < afno_ref_nparams(c); i++) free(p[i]);
  free(p);
}

/* ---- layers ------------------------------------------------------------------------- */

/* img [B][Cin][H][W] -> out [B][N][D]: conv (kernel = stride = patch) + bias + pos_embed. */
static inline void afno_ref_patch_embed(const afno_ref_cfg *c, int B, const double *img, const double *weight,
                                        const double *bias, const double *pos, double *out) {
  int h = afno_ref_h(c), w = afno_ref_w(c), N = h * w, D = c->D, p0 = c->p0, p1 = c->p1;
  for (int b = 0; b < B; b++)
    for (int r = 0; r < h; r++)
      for (int q = 0; q < w; q++) {
        int t = r * w + q;
        for (int d = 0; d < D; d++) {
          double s = 0;
          for (int ci = 0; ci < c->Cin; ci++)
            for (int i = 0; i < p0; i++)
              for (int j = 0; j < p1; j++)
                s += weight[(((size_t)d * c->Cin + ci) * p0 + i) * p1 + j] *
                     img[(((size_t)b * c->Cin + ci) * c->H + (size_t)r * p0 + i) * c->W + (size_t)q * p1 + j];
          out[((size_t)b * N + t) * D + d] = s + bias[d] + pos[(size_t)t * D + d];
        }
      }
}

/* LayerNorm over the last dim D of `rows` rows (biased variance). y may be x. */
static inline void afno_ref_layernorm(long rows, int D, const double *x, const double *g, const double *b, double eps,
                                      double *y) {
  for (long r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * D;
    double *yr = y + (size_t)r * D, mean = 0, var = 0;
    for (int d = 0; d < D; d++) mean += xr[d];
    mean /= D;
    for (int d = 0; d < D; d++) var += (xr[d] - mean) * (xr[d] - mean);
    var /= D;
    double inv = 1.0 / sqrt(var + eps);
    for (int d = 0; d < D; d++) yr[d] = (xr[d] - mean) * inv * g[d] + b[d];
  }
}

static inline double afno_ref_softshrink(double v, double l) { return v > l ? v - l : v < -l ? v + l : 0.0; }
static inline double afno_ref_relu(double v) { return v > 0 ? v : 0.0; }

/* The kept box of modes on the h x (w/2+1) rfft2 grid (the reference's rule):
 * rows [*r0, *r1), columns [0, *c1). */
static inline void afno_ref_kept(const afno_ref_cfg *c, int *r0, int *r1, int *c1) {
  int h = afno_ref_h(c), w = afno_ref_w(c), m = h / 2 + 1, k = (int)(m * c->fraction);
  *r0 = m - k > 0 ? m - k : 0;
  *r1 = m + k < h ? m + k : h;
  *c1 = k < w / 2 + 1 ? k : w / 2 + 1;
  if (*c1 < 0) *c1 = 0;
  if (*r1 < *r0) *r1 = *r0;
}

/* cos and sin of 2 pi j / n for j in [0, n): exact reduction of k*x mod n by the caller. */
static inline void afno_ref_twiddles(int n, double *cs, double *sn) {
  const double two_pi = 6.283185307179586476925286766559;
  for (int j = 0; j < n; j++) cs[j] = cos(two_pi * j / n), sn[j] = sin(two_pi * j / n);
}

/* y = irfft2(spectral_mlp(rfft2(x, ortho)), s = (h, w), ortho) + x, x and y [B][N][D]. */
static inline void afno_ref_filter(const afno_ref_cfg *c, int B, const double *x, const double *w1, const double *b1,
                                   const double *w2, const double *b2, double *y) {
  int h = afno_ref_h(c), w = afno_ref_w(c), N = h * w, D = c->D, nb = c->nb, bs = D / nb, wh = w / 2 + 1;
  int r0, r1, c1;
  afno_ref_kept(c, &r0, &r1, &c1);
  double scale = 1.0 / sqrt((double)h * w);
  double *chs = afno_ref_alloc_((size_t)h, sizeof(double)), *shs = afno_ref_alloc_((size_t)h, sizeof(double));
  double *cws = afno_ref_alloc_((size_t)w, sizeof(double)), *sws = afno_ref_alloc_((size_t)w, sizeof(double));
  afno_ref_twiddles(h, chs, shs);
  afno_ref_twiddles(w, cws, sws);
  size_t spec = (size_t)h * wh * D; /* one sample's spectrum, [row][col][d], re and im apart */
  double *ar = afno_ref_alloc_(spec, sizeof(double)), *ai = afno_ref_alloc_(spec, sizeof(double));
  double *xr = afno_ref_alloc_(spec, sizeof(double)), *xi = afno_ref_alloc_(spec, sizeof(double));
  double *o1r = afno_ref_alloc_((size_t)bs, sizeof(double)), *o1i = afno_ref_alloc_((size_t)bs, sizeof(double));
  double *out = afno_ref_alloc_((size_t)N * D, sizeof(double));
#define AFNO_REF_S_(r, k, d) (((size_t)(r) * wh + (k)) * D + (d))
  for (int b = 0; b < B; b++) {
    const double *xb = x + (size_t)b * N * D;
    /* r2c along the columns: A[r][k] = sum_q x[r][q] e^{-2 pi i k q / w} */
    for (int r = 0; r < h; r++)
      for (int k = 0; k < wh; k++)
        for (int d = 0; d < D; d++) {
          double sr = 0, si = 0;
          for (int q = 0; q < w; q++) {
            int j = (int)(((long)k * q) % w);
            double v = xb[((size_t)r * w + q) * D + d];
            sr += v * cws[j], si -= v * sws[j];
          }
          ar[AFNO_REF_S_(r, k, d)] = sr, ai[AFNO_REF_S_(r, k, d)] = si;
        }
    /* complex DFT along the rows, ortho scale: X[kr][k] = scale sum_r A[r][k] e^{-2 pi i kr r / h} */
    for (int kr = 0; kr < h; kr++)
      for (int k = 0; k < wh; k++)
        for (int d = 0; d < D; d++) {
          double sr = 0, si = 0;
          for (int r = 0; r < h; r++) {
            int j = (int)(((long)kr * r) % h);
            double a = ar[AFNO_REF_S_(r, k, d)], bi = ai[AFNO_REF_S_(r, k, d)];
            sr += a * chs[j] + bi * shs[j], si += bi * chs[j] - a * shs[j];
          }
          xr[AFNO_REF_S_(kr, k, d)] = sr * scale, xi[AFNO_REF_S_(kr, k, d)] = si * scale;
        }
    /* the spectral block MLP on the kept box; every other mode is exactly 0 (into ar/ai) */
    memset(ar, 0, spec * sizeof(double)), memset(ai, 0, spec * sizeof(double));
    for (int kr = r0; kr < r1; kr++)
      for (int k = 0; k < c1; k++)
        for (int blk = 0; blk < nb; blk++) {
          const double *Xr = xr + AFNO_REF_S_(kr, k, blk * bs), *Xi = xi + AFNO_REF_S_(kr, k, blk * bs);
          const double *w1r = w1 + (size_t)blk * bs * bs, *w1i = w1 + ((size_t)nb + blk) * bs * bs;
          const double *w2r = w2 + (size_t)blk * bs * bs, *w2i = w2 + ((size_t)nb + blk) * bs * bs;
          const double *b1r = b1 + (size_t)blk * bs, *b1i = b1 + ((size_t)nb + blk) * bs;
          const double *b2r = b2 + (size_t)blk * bs, *b2i = b2 + ((size_t)nb + blk) * bs;
          for (int o = 0; o < bs; o++) {
            double sr = 0, si = 0;
            for (int i = 0; i < bs; i++) {
              double wr = w1r[(size_t)i * bs + o], wi = w1i[(size_t)i * bs + o];
              sr += Xr[i] * wr - Xi[i] * wi, si += Xi[i] * wr + Xr[i] * wi;
            }
            o1r[o] = afno_ref_relu(sr + b1r[o]), o1i[o] = afno_ref_relu(si + b1i[o]);
          }
          double *Zr = ar + AFNO_REF_S_(kr, k, blk * bs), *Zi = ai + AFNO_REF_S_(kr, k, blk * bs);
          for (int o = 0; o < bs; o++) {
            double sr = 0, si = 0;
            for (int i = 0; i < bs; i++) {
              double wr = w2r[(size_t)i * bs + o], wi = w2i[(size_t)i * bs + o];
              sr += o1r[i] * wr - o1i[i] * wi, si += o1i[i] * wr + o1r[i] * wi;
            }
            Zr[o] = afno_ref_softshrink(sr + b2r[o], c->sparsity), Zi[o] = afno_ref_softshrink(si + b2i[o], c->sparsity);
          }
        }
    /* inverse complex DFT along the rows (into xr/xi): Y[r][k] = sum_kr Z[kr][k] e^{+2 pi i kr r / h} */
    for (int r = 0; r < h; r++)
      for (int k = 0; k < wh; k++)
        for (int d = 0; d < D; d++) {
          double sr = 0, si = 0;
          for (int kr = 0; kr < h; kr++) {
            int j = (int)(((long)kr * r) % h);
            double a = ar[AFNO_REF_S_(kr, k, d)], bi = ai[AFNO_REF_S_(kr, k, d)];
            sr += a * chs[j] - bi * shs[j], si += bi * chs[j] + a * shs[j];
          }
          xr[AFNO_REF_S_(r, k, d)] = sr, xi[AFNO_REF_S_(r, k, d)] = si;
        }
    /* c2r along the columns from columns 0..w/2 (Hermitian doubling of the
     * others; the imaginary parts of column 0 and, w even, column w/2 ignored),
     * ortho scale, plus the filter's own residual */
    for (int r = 0; r < h; r++)
      for (int q = 0; q < w; q++)
        for (int d = 0; d < D; d++) {
          double s = xr[AFNO_REF_S_(r, 0, d)];
          for (int k = 1; k < wh; k++) {
            int j = (int)(((long)k * q) % w);
            double Yr = xr[AFNO_REF_S_(r, k, d)], Yi = xi[AFNO_REF_S_(r, k, d)];
            if (2 * k == w) s += Yr * cws[j]; /* the Nyquist column: once, real part only */
            else s += 2.0 * (Yr * cws[j] - Yi * sws[j]);
          }
          size_t at = ((size_t)r * w + q) * D + d;
          out[at] = s * scale + xb[at];
        }
    memcpy(y + (size_t)b * N * D, out, (size_t)N * D * sizeof(double));
  }
#undef AFNO_REF_S_
  free(chs), free(shs), free(cws), free(sws), free(ar), free(ai), free(xr), free(xi), free(o1r), free(o1i), free(out);
}

static inline double afno_ref_gelu(double v) { return 0.5 * v * (1.0 + erf(v / sqrt(2.0))); }

/* y = fc2(gelu(fc1(x))) over T tokens, x and y [T][D]; fc1w [Hd][D], fc2w [D][Hd]. y may be x. */
static inline void afno_ref_mlp(long T, int D, int Hd, const double *x, const double *fc1w, const double *fc1b,
                                const double *fc2w, const double *fc2b, double *y) {
  double *hid = afno_ref_alloc_((size_t)Hd, sizeof(double)), *o = afno_ref_alloc_((size_t)D, sizeof(double));
  for (long t = 0; t < T; t++) {
    const double *xt = x + (size_t)t * D;
    for (int j = 0; j < Hd; j++) {
      double s = fc1b[j];
      for (int d = 0; d < D; d++) s += fc1w[(size_t)j * D + d] * xt[d];
      hid[j] = afno_ref_gelu(s);
    }
    for (int d = 0; d < D; d++) {
      double s = fc2b[d];
      for (int j = 0; j < Hd; j++) s += fc2w[(size_t)d * Hd + j] * hid[j];
      o[d] = s;
    }
    memcpy(y + (size_t)t * D, o, (size_t)D * sizeof(double));
  }
  free(hid), free(o);
}

/* One block, x and y [B][N][D] (y may be x); bp: the block's 12 parameters in order.
 *   r = x; x = filter(norm1(x)) + r; r = x; y = mlp(norm2(x)) + r */
static inline void afno_ref_block(const afno_ref_cfg *c, int B, const double *x, const double *const *bp, double *y) {
  long T = (long)B * afno_ref_tokens(c);
  size_t n = (size_t)T * c->D;
  double *u = afno_ref_alloc_(n, sizeof(double)), *v = afno_ref_alloc_(n, sizeof(double));
  afno_ref_layernorm(T, c->D, x, bp[0], bp[1], 1e-6, u);
  afno_ref_filter(c, B, u, bp[2], bp[3], bp[4], bp[5], u);
  for (size_t i = 0; i < n; i++) u[i] += x[i]; /* the block's skip around the filter */
  afno_ref_layernorm(T, c->D, u, bp[6], bp[7], 1e-6, v);
  afno_ref_mlp(T, c->D, afno_ref_hidden(c), v, bp[8], bp[9], bp[10], bp[11], v);
  for (size_t i = 0; i < n; i++) y[i] = v[i] + u[i];
  free(u), free(v);
}

/* x [B][N][D] -> out [B][Cout][H][W]: linear (no bias) to Cout*p0*p1, then
 * un-patchify: channel (i*p1 + j)*Cout + co goes to out[b][co][row*p0+i][col*p1+j]. */
static inline void afno_ref_head(const afno_ref_cfg *c, int B, const double *x, const double *headw, double *out) {
  int h = afno_ref_h(c), w = afno_ref_w(c), N = h * w, D = c->D, p0 = c->p0, p1 = c->p1, Co = c->Cout;
  for (int b = 0; b < B; b++)
    for (int r = 0; r < h; r++)
      for (int q = 0; q < w; q++) {
        const double *xt = x + ((size_t)b * N + (size_t)r * w + q) * D;
        for (int i = 0; i < p0; i++)
          for (int j = 0; j < p1; j++)
            for (int co = 0; co < Co; co++) {
              int o = (i * p1 + j) * Co + co;
              double s = 0;
              for (int d = 0; d < D; d++) s += headw[(size_t)o * D + d] * xt[d];
              out[(((size_t)b * Co + co) * c->H + (size_t)r * p0 + i) * c->W + (size_t)q * p1 + j] = s;
            }
      }
}

/* img [B][Cin][H][W] -> out [B][Cout][H][W]; params: P arrays in the order above. */
static inline void afno_ref_forward(const afno_ref_cfg *c, int B, const double *img, const double *const *params,
                                    double *out) {
  size_t n = (size_t)B * afno_ref_tokens(c) * c->D;
  double *x = afno_ref_alloc_(n, sizeof(double));
  afno_ref_patch_embed(c, B, img, params[0], params[1], params[2], x);
  for (int i = 0; i < c->depth; i++) afno_ref_block(c, B, x, params + 3 + 12 * i, x);
  afno_ref_head(c, B, x, params[afno_ref_nparams(c) - 1], out);
  free(x);
}

/* Mean of squared differences over n values. */
static inline double afno_ref_mse(long n, const double *y, const double *target) {
  double s = 0;
  for (long i = 0; i < n; i++) s += (y[i] - target[i]) * (y[i] - target[i]);
  return n > 0 ? s / (double)n : 0.0;
}

/* mse(forward(img), target): the scalar for central finite differences. */
static inline double afno_ref_loss(const afno_ref_cfg *c, int B, const double *img, const double *const *params,
                                   const double *target) {
  long n = (long)B * c->Cout * c->H * c->W;
  double *y = afno_ref_alloc_((size_t)n, sizeof(double));
  afno_ref_forward(c, B, img, params, y);
  double l = afno_ref_mse(n, y, target);
  free(y);
  return l;
}

/* d loss / d params[i][k] by central differences with step eps (params is
 * perturbed in place and restored bit-exactly). The loss has kinks (ReLU and
 * softshrink in every spectral mode, each moved by any parameter upstream):
 * a step that carries one across its corner gives a wrong slope (seen with
 * eps = 1e-5 at O(1) activations, 1% of the largest gradient off; 1e-6 was
 * clean in the self-check). Comparing two steps tells such elements apart. */
static inline double afno_ref_fd(const afno_ref_cfg *c, int B, const double *img, double *const *params,
                                 const double *target, int i, long k, double eps) {
  double keep = params[i][k];
  params[i][k] = keep + eps;
  double lp = afno_ref_loss(c, B, img, (const double *const *)params, target);
  params[i][k] = keep - eps;
  double lm = afno_ref_loss(c, B, img, (const double *const *)params, target);
  params[i][k] = keep;
  return (lp - lm) / (2.0 * eps);
}

#endif
