/* AFNO setup: the configuration check, this rank's sizes from the groups it
 * finds by name, and the batch-dependent buffers and FFT plan. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "afno_internal.h"

#define BAD(...) dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_create: " __VA_ARGS__)

/* The flag "someone failed" reduced over the groups in turn (over a mesh,
 * MAX over each axis is MAX over their product). */
static dist_status agree_over(dist_status s, const char *what, const char *const *groups, int n) {
  int32_t flag = s != DIST_SUCCESS;
  dist_tensor t = dist_tensor_host(&flag, DIST_I32, 0, NULL);
  dist_status rs = DIST_SUCCESS;
  for (int i = 0; i < n && !rs; i++) rs = dist_all_reduce(groups[i], &t, DIST_MAX);
  if (s != DIST_SUCCESS) return s;
  if (rs != DIST_SUCCESS) return rs;
  if (flag) return dist_set_error(DIST_ERR_MISMATCH, "%s failed on another rank (see its message)", what);
  return DIST_SUCCESS;
}

dist_status afno_agree(const dist_afno *m, dist_status s, const char *what) {
  if (m && m->solo) return s;
  const char *world = "world";
  return agree_over(s, what, &world, 1);
}

dist_status afno_agree_replica(const dist_afno *m, dist_status s, const char *what) {
  if (!m) return afno_agree(m, s, what);
  if (m->solo) return s;
  const char *groups[2] = {m->d.mp_group, m->d.sp_group};
  return agree_over(s, what, groups, 2);
}

/* Size and rank in a group named by the config, "self" when it does not exist. */
static dist_status find_group(const char *want, const char *fallback, char *name, int *size, int *rank) {
  const char *g = want ? want : fallback;
  int exists = 0;
  if (strlen(g) > DIST_GROUP_NAME_MAX) return BAD("group name '%.40s...' is too long", g);
  dist_status s = dist_group_exists(g, &exists);
  if (s) return s;
  if (!exists) g = "self";
  snprintf(name, 64, "%s", g);
  s = dist_group_size(g, size);
  if (!s) s = dist_group_rank(g, rank);
  if (s == DIST_ERR_NOT_MEMBER) return BAD("this rank is not a member of group '%s'", g);
  return s;
}

static dist_status check_config(const dist_afno_config *c) {
  if (c->inp_shape[0] < 1 || c->inp_shape[1] < 1) return BAD("inp_shape = [%lld, %lld] must be positive",
                                                             (long long)c->inp_shape[0], (long long)c->inp_shape[1]);
  if (c->in_channels < 1 || c->out_channels < 1)
    return BAD("in_channels = %d and out_channels = %d must be >= 1", c->in_channels, c->out_channels);
  if (c->patch_size[0] < 1 || c->patch_size[1] < 1)
    return BAD("patch_size = [%d, %d] must be positive", c->patch_size[0], c->patch_size[1]);
  if (c->inp_shape[0] % c->patch_size[0] || c->inp_shape[1] % c->patch_size[1])
    return BAD("inp_shape [%lld, %lld] is not divisible by patch_size [%d, %d]", (long long)c->inp_shape[0],
               (long long)c->inp_shape[1], c->patch_size[0], c->patch_size[1]);
  if (c->embed_dim < 1 || c->depth < 0) return BAD("embed_dim = %d must be >= 1, depth = %d >= 0", c->embed_dim, c->depth);
  if (c->num_blocks < 1 || c->embed_dim % c->num_blocks)
    return BAD("embed_dim = %d is not divisible by num_blocks = %d", c->embed_dim, c->num_blocks);
  if (!(c->mlp_ratio > 0 && c->mlp_ratio * c->embed_dim < 1e9) || (int)(c->embed_dim * c->mlp_ratio) < 1)
    return BAD("mlp_ratio = %g gives no hidden units (or too many) for embed_dim %d", c->mlp_ratio, c->embed_dim);
  if (!(c->sparsity_threshold >= 0 && isfinite(c->sparsity_threshold)))
    return BAD("sparsity_threshold = %g must be finite and >= 0", c->sparsity_threshold);
  if (!(c->hard_thresholding_fraction >= 0 && c->hard_thresholding_fraction <= 1))
    return BAD("hard_thresholding_fraction = %g must be in [0, 1]", c->hard_thresholding_fraction);
  if (c->recompute != 0 && c->recompute != 1) return BAD("recompute = %d must be 0 or 1", c->recompute);
  /* Every buffer size below is a product of these: keep each far from overflow. */
  double tokens = (double)c->inp_shape[0] * (double)c->inp_shape[1];
  if (tokens * (c->in_channels + c->out_channels + 8.0 * c->embed_dim * (c->mlp_ratio + 2)) > 4e18 / 16)
    return BAD("sizes overflow: %lld x %lld image with embed_dim %d", (long long)c->inp_shape[0],
               (long long)c->inp_shape[1], c->embed_dim);
  /* Patch features (int) and the parameter arenas (every parameter's count). */
  int k;
  if (__builtin_mul_overflow(c->in_channels, c->patch_size[0], &k) || __builtin_mul_overflow(k, c->patch_size[1], &k) ||
      __builtin_mul_overflow(c->out_channels, c->patch_size[0], &k) || __builtin_mul_overflow(k, c->patch_size[1], &k))
    return BAD("sizes overflow: in_channels %d / out_channels %d times patch_size [%d, %d] exceed INT_MAX features",
               c->in_channels, c->out_channels, c->patch_size[0], c->patch_size[1]);
  if (c->depth > (INT_MAX - 4) / 12) return BAD("depth = %d overflows the parameter table", c->depth);
  double D = c->embed_dim, Hd = floor(D * c->mlp_ratio), bs = D / c->num_blocks,
         patch = (double)c->patch_size[0] * c->patch_size[1], grid = tokens / patch;
  double params = D * ((c->in_channels + c->out_channels) * patch + grid + 1) +
                  (double)c->depth * (4 * D * bs + 4 * D + 2 * D * Hd + Hd + 4 * D);
  if (params > 4e18 / 16)
    return BAD("sizes overflow: %.3g parameters (embed_dim %d, depth %d, mlp_ratio %g, patch_size [%d, %d])", params,
               c->embed_dim, c->depth, c->mlp_ratio, c->patch_size[0], c->patch_size[1]);
  return DIST_SUCCESS;
}

dist_status afno_dims_init(const dist_afno_config *c, afno_dims *d) {
  dist_status s = check_config(c);
  if (s) return s;
  memset(d, 0, sizeof *d);
  s = find_group(c->data_parallel, "data_parallel", d->dp_group, &d->dp, &d->dp_rank);
  if (!s) s = find_group(c->model_parallel, "model_parallel", d->mp_group, &d->mp, &d->mp_rank);
  if (!s) s = find_group(c->spatial, "spatial", d->sp_group, &d->sp, &d->sp_rank);
  if (s) return s;
  d->Cin = c->in_channels;
  d->Cout = c->out_channels;
  d->p0 = c->patch_size[0];
  d->p1 = c->patch_size[1];
  d->H = c->inp_shape[0];
  d->W = c->inp_shape[1];
  d->h = d->H / d->p0;
  d->w = d->W / d->p1;
  d->kw = d->w / 2 + 1;
  d->D = c->embed_dim;
  d->nb = c->num_blocks;
  d->bs = d->D / d->nb;
  d->Hd = (int)(c->embed_dim * c->mlp_ratio);
  d->Kin = d->Cin * d->p0 * d->p1;
  d->Kout = d->Cout * d->p0 * d->p1;
  d->lambda = (float)c->sparsity_threshold;
  if (d->nb % d->mp)
    return BAD("num_blocks = %d is not divisible by the size %d of group '%s' (model parallel splits the blocks)",
               d->nb, d->mp, d->mp_group);
  if (d->Hd < d->mp) return BAD("%d MLP hidden units cannot be split over %d model-parallel ranks", d->Hd, d->mp);
  if (d->h < d->sp || d->kw < d->sp)
    return BAD("a %lld x %lld token grid cannot be split over %d spatial ranks (needs %d rows and w/2+1 >= %d)",
               (long long)d->h, (long long)d->w, d->sp, d->sp, d->sp);
  d->nbl = d->nb / d->mp;
  d->Dl = d->nbl * d->bs;
  d->d0 = d->mp_rank * d->Dl;
  int64_t *hs = malloc(sizeof(int64_t) * (size_t)d->mp);
  d->row_sizes = malloc(sizeof(int64_t) * (size_t)d->sp);
  d->dl_sizes = malloc(sizeof(int64_t) * (size_t)d->mp);
  if (!hs || !d->row_sizes || !d->dl_sizes) {
    free(hs);
    return dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_create: split tables");
  }
  s = dist_compute_split_shapes(d->Hd, d->mp, hs);
  if (!s) s = dist_compute_split_shapes(d->h, d->sp, d->row_sizes);
  for (int r = 0; r < d->mp; r++) d->dl_sizes[r] = d->Dl;
  d->Hdl = (int)hs[d->mp_rank];
  for (int r = 0; r < d->mp_rank; r++) d->hd0 += (int)hs[r];
  free(hs);
  if (s) return s;
  d->hl = d->row_sizes[d->sp_rank];
  for (int r = 0; r < d->sp_rank; r++) d->h0 += d->row_sizes[r];
  d->T = d->hl * d->w;
  /* Kept modes: the reference's rule (see afno.h). */
  int64_t m = d->h / 2 + 1, kept = (int64_t)((double)m * c->hard_thresholding_fraction);
  d->row_lo = m - kept > 0 ? m - kept : 0;
  d->row_hi = m + kept < d->h ? m + kept : d->h;
  d->col_hi = kept < d->kw ? kept : d->kw;
  return DIST_SUCCESS;
}

void afno_batch_free(dist_afno *m) {
  dist_fft_plan_destroy(m->fft);
  m->fft = NULL;
  free(m->cols);
  if (m->acts)
    for (int i = 0; i <= m->cfg.depth; i++) free(m->acts[i]);
  free(m->acts);
  int nc = m->cfg.recompute ? 1 : m->cfg.depth;
  for (int i = 0; m->cache && i < nc; i++) {
    afno_block_cache *c = &m->cache[i];
    free(c->mean1);
    free(c->X);
    free(c->o1);
    free(c->o2);
    free(c->x1);
    free(c->v);
    free(c->hpre);
  }
  free(m->cache);
  free(m->s_u);
  free(m->s_a);
  free(m->s_b);
  free(m->s_c);
  free(m->s_dx);
  free(m->s_hid);
  free(m->s_full);
  free(m->s_spec);
  free(m->s_spec2);
  free(m->s_stats);
  m->cols = NULL;
  m->acts = NULL;
  m->cache = NULL;
  m->s_u = m->s_a = m->s_b = m->s_c = m->s_dx = m->s_hid = m->s_full = m->s_stats = NULL;
  m->s_spec = m->s_spec2 = NULL;
  m->B = 0;
}

static void *fmalloc(int64_t n, size_t size, int *bad) {
  void *p = malloc((size_t)(n > 0 ? n : 1) * size);
  if (!p) *bad = 1;
  return p;
}

/* Buffers and the filter's FFT plan for batch B (kept while B stays). */
dist_status afno_batch_prepare(dist_afno *m, int64_t B) {
  if (m->B == B) return DIST_SUCCESS;
  afno_batch_free(m);
  const afno_dims *d = &m->d;
  /* Every buffer below is B times at most this many floats (complex: twice);
   * check_config bounds it, but not B times it. */
  int64_t per = d->Kin > d->Kout ? d->Kin : d->Kout, most;
  if (d->D > per) per = d->D;
  if (d->Hdl > per) per = d->Hdl;
  if (per < 4) per = 4;
  if (__builtin_mul_overflow(per * d->T, B, &most) || __builtin_mul_overflow(most, (int64_t)sizeof(float complex), &most))
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                          "dist_afno_forward: batch = %lld overflows: %lld floats per sample of the activations times "
                          "the batch exceed INT64_MAX bytes",
                          (long long)B, (long long)(per * d->T));
  dist_fft_options o = DIST_FFT_OPTIONS_INIT;
  o.group = d->sp_group;
  o.norm = DIST_FFT_NORM_ORTHO;
  o.in_sizes = d->row_sizes;
  o.destroy_input = 1; /* inverse and forward_backward read only scratch */
  int64_t shape[4] = {B, d->Dl, d->h, d->w};
  dist_status s = dist_fft_plan_create(&m->fft, DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 4, shape, 2, &o);
  if (s) return s;
  dist_fft_local out;
  s = dist_fft_local_output(m->fft, &out);
  if (s) return s;
  /* Transposed layout: [h, B, Dl, k local]. */
  m->spec_n = out.numel;
  m->spec_k0 = out.offset[3];
  m->spec_kl = out.shape[3];
  int64_t act = B * d->Dl * d->T, bt = B * d->T;
  int bad = 0, nc = m->cfg.recompute ? 1 : m->cfg.depth;
  int64_t full = B * d->T * (d->D > d->Kout ? d->D : d->Kout);
  m->cols = fmalloc(B * d->Kin * d->T, sizeof(float), &bad);
  m->acts = calloc((size_t)m->cfg.depth + 1, sizeof(float *));
  m->cache = calloc((size_t)(nc > 0 ? nc : 1), sizeof *m->cache);
  if (!m->acts || !m->cache) bad = 1;
  for (int i = 0; !bad && i <= m->cfg.depth; i++) m->acts[i] = fmalloc(act, sizeof(float), &bad);
  for (int i = 0; !bad && i < nc; i++) {
    afno_block_cache *c = &m->cache[i];
    c->mean1 = fmalloc(4 * bt, sizeof(float), &bad);
    c->rstd1 = c->mean1 + bt;
    c->mean2 = c->mean1 + 2 * bt;
    c->rstd2 = c->mean1 + 3 * bt;
    c->X = fmalloc(m->spec_n, sizeof(float complex), &bad);
    c->o1 = fmalloc(m->spec_n, sizeof(float complex), &bad);
    c->o2 = fmalloc(m->spec_n, sizeof(float complex), &bad);
    c->x1 = fmalloc(act, sizeof(float), &bad);
    c->v = fmalloc(B * d->D * d->T, sizeof(float), &bad);
    c->hpre = fmalloc(B * d->Hdl * d->T, sizeof(float), &bad);
  }
  m->s_u = fmalloc(act, sizeof(float), &bad);
  m->s_a = fmalloc(act, sizeof(float), &bad);
  m->s_b = fmalloc(act, sizeof(float), &bad);
  m->s_c = fmalloc(act, sizeof(float), &bad);
  m->s_dx = fmalloc(act, sizeof(float), &bad);
  m->s_hid = fmalloc(B * d->Hdl * d->T, sizeof(float), &bad);
  m->s_full = fmalloc(full, sizeof(float), &bad);
  m->s_spec = fmalloc(m->spec_n, sizeof(float complex), &bad);
  m->s_spec2 = fmalloc(m->spec_n, sizeof(float complex), &bad);
  m->s_stats = fmalloc(4 * bt, sizeof(float), &bad);
  m->B = B;
  if (bad) {
    afno_batch_free(m);
    return dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_forward: activations for a batch of %lld",
                          (long long)B);
  }
  return DIST_SUCCESS;
}
