/* The AFNO parameter table: reference names and shapes, this rank's shard of
 * each, the arenas that hold them, and initial values that depend only on
 * the seed and each element's global position. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "afno_internal.h"

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double afno_rand_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t r = mix(mix(seed ^ mix(stream)) ^ index);
  return (double)(r >> 11) * 0x1.0p-53;
}

double afno_rand_normal(uint64_t seed, uint64_t stream, uint64_t index) { /* Box-Muller */
  double u1 = afno_rand_uniform(seed, stream, 2 * index), u2 = afno_rand_uniform(seed, stream, 2 * index + 1);
  return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

int64_t afno_param_global_index(const afno_param *p, int64_t local) {
  int64_t idx[4] = {0, 0, 0, 0}, g = 0;
  for (int k = p->ndim - 1; k >= 0; k--) { /* local is row-major over the permuted box */
    int a = p->perm[k];
    idx[a] = local % p->len[a];
    local /= p->len[a];
  }
  for (int a = 0; a < p->ndim; a++) g = g * p->shape[a] + p->lo[a] + idx[a];
  return g;
}

/* Append a parameter; shape/lo/len per axis (len -1 = the whole axis). */
static afno_param *add(dist_afno *m, const char *name, int ndim, const int64_t *shape, int split_axis, int64_t lo,
                       int64_t len, int shared_sp, int init, double scale) {
  afno_param *p = &m->params[m->nparams++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->ndim = ndim;
  p->numel = p->local_numel = 1;
  for (int a = 0; a < ndim; a++) {
    p->shape[a] = shape[a];
    p->lo[a] = a == split_axis ? lo : 0;
    p->len[a] = a == split_axis ? len : shape[a];
    p->perm[a] = a;
    p->numel *= shape[a];
    p->local_numel *= p->len[a];
  }
  p->offset = m->params_local;
  m->params_local += p->local_numel;
  p->shared_sp = shared_sp;
  p->init = init;
  p->init_scale = scale;
  return p;
}

static void build_table(dist_afno *m) {
  const afno_dims *d = &m->d;
  int64_t D = d->D, Dl = d->Dl, d0 = d->d0;
  double fan = 1.0 / sqrt((double)d->Kin); /* Conv2d's default (kaiming_uniform with a = sqrt(5)) bound */
  int64_t pw[4] = {D, d->Cin, d->p0, d->p1}, vD[1] = {D};
  add(m, "patch_embed.proj.weight", 4, pw, 0, d0, Dl, 1, AFNO_INIT_UNIFORM, fan);
  add(m, "patch_embed.proj.bias", 1, vD, 0, d0, Dl, 1, AFNO_INIT_UNIFORM, fan);
  int64_t pos[3] = {1, d->h * d->w, D};
  afno_param *p = add(m, "pos_embed", 3, pos, 2, d0, Dl, 0, AFNO_INIT_TRUNC_NORMAL, 0.02);
  p->lo[1] = d->h0 * d->w; /* also split by token rows, stored [Dl, T] */
  p->len[1] = d->T;
  p->local_numel = Dl * d->T;
  m->params_local += p->local_numel - Dl * pos[1];
  p->perm[1] = 2;
  p->perm[2] = 1;
  int64_t nb = d->nb, bs = d->bs, Hd = d->Hd;
  int64_t w1[4] = {2, nb, bs, bs}, b1[3] = {2, nb, bs}, f1[2] = {Hd, D}, vH[1] = {Hd}, f2[2] = {D, Hd};
  int64_t nbl = d->nbl, nb0 = (int64_t)d->mp_rank * nbl;
  for (int i = 0; i < m->cfg.depth; i++) {
    char n[64];
#define NAME(s) (snprintf(n, sizeof n, "blocks.%d.%s", i, s), n)
    add(m, NAME("norm1.weight"), 1, vD, 0, d0, Dl, 1, AFNO_INIT_ONE, 0);
    add(m, NAME("norm1.bias"), 1, vD, 0, d0, Dl, 1, AFNO_INIT_ZERO, 0);
    add(m, NAME("filter.w1"), 4, w1, 1, nb0, nbl, 1, AFNO_INIT_NORMAL, 0.02);
    add(m, NAME("filter.b1"), 3, b1, 1, nb0, nbl, 1, AFNO_INIT_NORMAL, 0.02);
    add(m, NAME("filter.w2"), 4, w1, 1, nb0, nbl, 1, AFNO_INIT_NORMAL, 0.02);
    add(m, NAME("filter.b2"), 3, b1, 1, nb0, nbl, 1, AFNO_INIT_NORMAL, 0.02);
    add(m, NAME("norm2.weight"), 1, vD, 0, d0, Dl, 1, AFNO_INIT_ONE, 0);
    add(m, NAME("norm2.bias"), 1, vD, 0, d0, Dl, 1, AFNO_INIT_ZERO, 0);
    add(m, NAME("mlp.fc1.weight"), 2, f1, 0, d->hd0, d->Hdl, 1, AFNO_INIT_TRUNC_NORMAL, 0.02);
    add(m, NAME("mlp.fc1.bias"), 1, vH, 0, d->hd0, d->Hdl, 1, AFNO_INIT_ZERO, 0);
    add(m, NAME("mlp.fc2.weight"), 2, f2, 1, d->hd0, d->Hdl, 1, AFNO_INIT_TRUNC_NORMAL, 0.02);
    add(m, NAME("mlp.fc2.bias"), 1, vD, 0, d0, Dl, 1, AFNO_INIT_ZERO, 0);
#undef NAME
  }
  int64_t hw[2] = {d->Kout, D};
  add(m, "head.weight", 2, hw, 1, d0, Dl, 1, AFNO_INIT_TRUNC_NORMAL, 0.02);
}

static float init_value(const dist_afno *m, int index, const afno_param *p, int64_t g) {
  uint64_t seed = m->cfg.seed;
  double v;
  switch (p->init) {
  case AFNO_INIT_ONE: return 1.0f;
  case AFNO_INIT_NORMAL: return (float)(p->init_scale * afno_rand_normal(seed, (uint64_t)index, (uint64_t)g));
  case AFNO_INIT_TRUNC_NORMAL: /* torch's trunc_normal_ cuts at +-2 (absolute): redraw beyond */
    for (uint64_t k = 0;; k++) {
      v = p->init_scale * afno_rand_normal(seed, (uint64_t)index + 0x10000u * (k + 1), (uint64_t)g);
      if (fabs(v) <= 2.0) return (float)v;
    }
  case AFNO_INIT_UNIFORM:
    return (float)(p->init_scale * (2.0 * afno_rand_uniform(seed, (uint64_t)index, (uint64_t)g) - 1.0));
  default: return 0.0f;
  }
}

static void block_pointers(dist_afno *m, float *arena, afno_block_w *out) {
  for (int i = 0; i < m->cfg.depth; i++) {
    float *q[12];
    for (int k = 0; k < 12; k++) q[k] = arena + m->params[AFNO_P_BLOCK(i) + k].offset;
    out[i] = (afno_block_w){q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11]};
  }
}

dist_status afno_params_build(dist_afno *m) {
  int n = 4 + 12 * m->cfg.depth;
  m->params = calloc((size_t)n, sizeof *m->params);
  m->bw = calloc((size_t)m->cfg.depth + 1, sizeof *m->bw);
  m->bg = calloc((size_t)m->cfg.depth + 1, sizeof *m->bg);
  if (!m->params || !m->bw || !m->bg) return dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_create: parameter table");
  build_table(m);
  m->data = calloc((size_t)m->params_local, sizeof(float));
  m->grad = calloc((size_t)m->params_local, sizeof(float));
  if (!m->data || !m->grad)
    return dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_create: %lld parameters", (long long)m->params_local);
  for (int i = 0; i < m->nparams; i++) {
    const afno_param *p = &m->params[i];
    float *v = m->data + p->offset;
    for (int64_t k = 0; k < p->local_numel; k++) v[k] = init_value(m, i, p, afno_param_global_index(p, k));
  }
  block_pointers(m, m->data, m->bw);
  block_pointers(m, m->grad, m->bg);
  /* The set over data_parallel: its replicas hold the same shard. */
  dist_status s = dist_params_create(m->d.dp_group, &m->set);
  for (int i = 0; !s && i < m->nparams; i++) {
    const afno_param *p = &m->params[i];
    s = dist_params_add_host(m->set, p->name, m->data + p->offset, m->grad + p->offset, p->local_numel, NULL);
  }
  return s;
}
