/* The AFNO model: create, forward, backward (with the spatial gradient sums
 * and the DDP marks as each block's gradients become final), the loss and
 * the queries. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "afno_internal.h"
#include "core/internal.h" /* dist__options_copy */

/* OpenBLAS 0.3.21 (Debian 12) does not know CPUs newer than it and falls
 * back to its SSE3 "Prescott" kernels: the MLP GEMMs then run ~2.7x slower.
 * The core is chosen when the library loads, so all we can do is say so. */
static void check_blas_core(void) {
  static int said;
  const char *core = openblas_get_corename();
  if (said || !core || (strcasecmp(core, "prescott") != 0 && strcasecmp(core, "core2") != 0 &&
                        strcasecmp(core, "nehalem") != 0))
    return;
  __builtin_cpu_init();
  const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
  if (!better) return;
  said = 1;
  dist_log(DIST_LOG_WARN, "OpenBLAS picked its '%s' kernels on this CPU, which has %s: set OPENBLAS_CORETYPE=%s "
           "before starting the program for much faster dense layers", core, better[0] == 'S' ? "AVX-512" : "AVX2",
           better);
}

/* A fingerprint of the configuration, to refuse ranks that disagree. */
static int64_t config_hash(const dist_afno_config *c) {
  double v[] = {(double)c->inp_shape[0], (double)c->inp_shape[1], c->in_channels, c->out_channels, c->patch_size[0],
                c->patch_size[1], c->embed_dim, c->depth, c->mlp_ratio, c->num_blocks, c->sparsity_threshold,
                c->hard_thresholding_fraction, (double)c->seed, c->recompute};
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = (const unsigned char *)v;
  for (size_t i = 0; i < sizeof v; i++) h = (h ^ b[i]) * 1099511628211ull;
  return (int64_t)(h >> 1);
}

static dist_status same_config_everywhere(const dist_afno_config *c) {
  int64_t v[2] = {config_hash(c), -config_hash(c)}, shape[1] = {2};
  dist_tensor t = dist_tensor_host(v, DIST_I64, 1, shape);
  dist_status s = dist_all_reduce("world", &t, DIST_MAX);
  if (s) return s;
  if (v[0] != -v[1]) return dist_set_error(DIST_ERR_MISMATCH, "dist_afno_create: ranks passed different configs");
  return DIST_SUCCESS;
}

static const dist_afno_config afno_defaults = DIST_AFNO_CONFIG_INIT;
static const dist__options_kind afno_config_kind =
    DIST__OPTIONS_KIND(dist_afno_config, "DIST_AFNO_CONFIG_INIT", inp_shape, &afno_defaults);

dist_status dist_afno_create(const dist_afno_config *config, dist_afno **out) {
  dist_afno_config full; /* the caller's config as this library's struct */
  dist_status s = config && out ? dist__options_copy(&afno_config_kind, config, &full, "dist_afno_create")
                                : dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_create: %s is NULL",
                                                 config ? "out" : "config");
  s = afno_agree(NULL, s, "dist_afno_create");
  if (s) return s;
  s = same_config_everywhere(&full);
  if (s) return s;
  dist_afno *m = calloc(1, sizeof *m);
  if (!m) s = dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_create: model object");
  if (!s) {
    m->cfg = full;
    m->cfg.data_parallel = m->cfg.model_parallel = m->cfg.spatial = NULL; /* the names live in m->d */
    s = afno_dims_init(&full, &m->d);
  }
  if (!s) {
    int world = 0, n = m->d.dp * m->d.mp * m->d.sp;
    m->solo = n == 1;
    s = dist_manager_world_size(&world);
    if (!s && n != 1 && n != world)
      s = dist_set_error(DIST_ERR_GROUP_SIZE,
                         "dist_afno_create: groups '%s' x '%s' x '%s' (%d x %d x %d ranks) must tile the world of %d "
                         "ranks (or all be absent)", m->d.dp_group, m->d.mp_group, m->d.sp_group, m->d.dp, m->d.mp,
                         m->d.sp, world);
  }
  if (!s) s = afno_params_build(m);
  s = afno_agree(NULL, s, "dist_afno_create");
  if (!s) check_blas_core();
  if (!s) s = dist_params_commit(m->set); /* collective over data_parallel; agrees itself */
  if (!s && m->d.dp > 1) s = dist_ddp_create(m->set, NULL, &m->ddp);
  /* Those two agree within one data-parallel group; the others went on. */
  s = afno_agree(NULL, s, "dist_afno_create");
  if (s) {
    dist_afno_destroy(m);
    return s;
  }
  *out = m;
  return DIST_SUCCESS;
}

void dist_afno_destroy(dist_afno *m) {
  if (!m) return;
  afno_batch_free(m);
  dist_ddp_destroy(m->ddp);
  dist_params_destroy(m->set);
  free(m->d.row_sizes);
  free(m->d.dl_sizes);
  free(m->params);
  free(m->bw);
  free(m->bg);
  free(m->data);
  free(m->grad);
  free(m);
}

dist_status dist_afno_layout_get(const dist_afno *m, dist_afno_layout *o) {
  if (!m || !o) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_layout_get: NULL argument");
  const afno_dims *d = &m->d;
  memset(o, 0, sizeof *o);
  o->dp_size = d->dp, o->dp_rank = d->dp_rank, o->mp_size = d->mp, o->mp_rank = d->mp_rank;
  o->sp_size = d->sp, o->sp_rank = d->sp_rank;
  o->token_rows = d->hl, o->token_row_offset = d->h0;
  o->rows = d->hl * d->p0, o->row_offset = d->h0 * d->p0;
  o->embed_local = d->Dl, o->embed_offset = d->d0;
  o->params_local = m->params_local;
  for (int i = 0; i < m->nparams; i++) o->params_global += m->params[i].numel;
  return DIST_SUCCESS;
}

dist_params *dist_afno_params(dist_afno *m) { return m ? m->set : NULL; }

dist_status dist_afno_param_info_get(const dist_afno *m, int index, dist_afno_param_info *info) {
  if (!m || !info || index < 0 || index >= m->nparams)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_param_info_get: %s",
                          !m || !info ? "NULL argument" : "index out of range");
  const afno_param *p = &m->params[index];
  info->name = p->name;
  info->ndim = p->ndim;
  for (int a = 0; a < 4; a++) info->shape[a] = a < p->ndim ? p->shape[a] : 0;
  info->numel = p->numel;
  info->local_numel = p->local_numel;
  return DIST_SUCCESS;
}

dist_status dist_afno_zero_grad(dist_afno *m) {
  if (!m) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_zero_grad: model is NULL");
  return dist_params_zero_grad(m->set);
}

dist_status dist_afno_forward(dist_afno *m, int64_t batch, const float *x, float *y) {
  dist_status s = DIST_SUCCESS;
  if (!m || !x || !y)
    s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_forward: %s is NULL", !m ? "model" : !x ? "x" : "y");
  else if (batch < 1 || batch > (int64_t)1 << 30)
    s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_forward: batch = %lld must be in [1, 2^30]",
                       (long long)batch);
  s = afno_agree_replica(m, s, "dist_afno_forward");
  if (!s && m->B != batch) /* new buffers and FFT plan only when the batch size changes */
    s = afno_agree_replica(m, afno_batch_prepare(m, batch), "dist_afno_forward (buffers and FFT plan)");
  if (s) return s;
  m->have_forward = 0;
  s = afno_embed_forward(m, x, m->acts[0]);
  for (int i = 0; !s && i < m->cfg.depth; i++)
    s = afno_block_forward(m, i, m->acts[i], m->acts[i + 1], &m->cache[m->cfg.recompute ? 0 : i]);
  if (!s) s = afno_head_forward(m, m->acts[m->cfg.depth], y);
  m->have_forward = s == DIST_SUCCESS;
  return s;
}

/* Sum the gradients of parameters [first, last] (contiguous in the arena)
 * over the spatial group, where they are replicated. */
static dist_status spatial_sum(dist_afno *m, int first, int last) {
  if (m->d.sp == 1) return DIST_SUCCESS;
  const afno_param *a = &m->params[first], *b = &m->params[last];
  int64_t shape[1] = {b->offset + b->local_numel - a->offset};
  dist_tensor t = dist_tensor_host(m->grad + a->offset, DIST_F32, 1, shape);
  return dist_all_reduce(m->d.sp_group, &t, DIST_SUM);
}

static dist_status mark(dist_afno *m, int first, int last) {
  for (int i = first; m->ddp && i <= last; i++) {
    dist_status s = dist_ddp_mark_ready(m->ddp, i);
    if (s) return s;
  }
  return DIST_SUCCESS;
}

dist_status dist_afno_backward(dist_afno *m, const float *dy) {
  dist_status s = DIST_SUCCESS;
  if (!m || !dy) s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_backward: %s is NULL", m ? "dy" : "model");
  else if (!m->have_forward)
    s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_backward: no forward to go back through (call "
                                                  "dist_afno_forward first, once per backward)");
  s = afno_agree(m, s, "dist_afno_backward");
  if (s) return s;
  const int depth = m->cfg.depth, head = AFNO_P_HEAD(depth);
  s = afno_head_backward(m, m->acts[depth], dy, m->s_dx);
  if (!s) s = spatial_sum(m, head, head);
  if (!s) s = mark(m, head, head);
  for (int i = depth - 1; !s && i >= 0; i--) {
    afno_block_cache *c = &m->cache[m->cfg.recompute ? 0 : i];
    if (m->cfg.recompute) s = afno_block_forward(m, i, m->acts[i], m->s_c, c);
    if (!s) s = afno_block_backward(m, i, m->acts[i], c, m->s_dx);
    if (!s) s = spatial_sum(m, AFNO_P_BLOCK(i), AFNO_P_BLOCK(i) + 11);
    if (!s) s = mark(m, AFNO_P_BLOCK(i), AFNO_P_BLOCK(i) + 11);
  }
  if (!s) s = afno_embed_backward(m, m->s_dx);
  if (!s) s = spatial_sum(m, 0, 1); /* pos_embed (2) is split over the spatial group, not replicated */
  if (!s) s = mark(m, 0, 2);
  m->have_forward = 0;
  if (m->ddp) { /* every rank finalizes (the reducer agrees on failures itself) */
    dist_status f = dist_ddp_finalize(m->ddp);
    if (!s) s = f;
  }
  return s;
}

dist_status dist_afno_mse(dist_afno *m, int64_t batch, const float *y, const float *target, double *loss, float *dy) {
  dist_status s = DIST_SUCCESS;
  if (!m || !y || !target || !loss)
    s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_mse: %s is NULL",
                       !m ? "model" : !y ? "y" : !target ? "target" : "loss");
  else if (batch < 1) s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_mse: batch = %lld", (long long)batch);
  else {
    int64_t per = (int64_t)m->d.Cout * m->d.hl * m->d.p0 * m->d.W, bytes; /* values per sample */
    if (__builtin_mul_overflow(batch, per, &bytes) || __builtin_mul_overflow(bytes, (int64_t)sizeof(float), &bytes))
      s = dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                         "dist_afno_mse: batch = %lld overflows: %lld values per sample times the batch exceed "
                         "INT64_MAX bytes",
                         (long long)batch, (long long)per);
  }
  s = afno_agree(m, s, "dist_afno_mse");
  if (s) return s;
  const afno_dims *d = &m->d;
  const int64_t n = batch * d->Cout * d->hl * d->p0 * d->W; /* checked above */
  double acc[2] = {0.0, (double)n};
  for (int64_t i = 0; i < n; i++) acc[0] += ((double)y[i] - target[i]) * ((double)y[i] - target[i]);
  int64_t shape[1] = {2};
  dist_tensor t = dist_tensor_host(acc, DIST_F64, 1, shape);
  if (!m->solo) s = dist_all_reduce("world", &t, DIST_SUM); /* model-parallel copies: each counted mp times */
  if (s) return s;
  *loss = acc[0] / acc[1];
  if (dy) { /* d(mean over this data-parallel rank's samples, whole images) */
    const float scale = (float)(2.0 / ((double)batch * d->Cout * d->H * d->W));
    for (int64_t i = 0; i < n; i++) dy[i] = scale * (y[i] - target[i]);
  }
  return DIST_SUCCESS;
}
