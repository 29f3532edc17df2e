/* Parameter sets: registration, the cross-rank agreement check at commit,
 * and the initial broadcast from rank 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "manager/coll_call.h"
#include "mem/memops.h"
#include "optim/params_internal.h"

dist_status dist_params_create(const char *group, dist_params **out) {
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_create: out is NULL");
  DIST_CHECK(dist__require_initialized("dist_params_create"));
  dist__group *g;
  DIST_CHECK(dist__group_find(group, &g));
  if (g->rank < 0) return dist__error(DIST_ERR_NOT_MEMBER, "dist_params_create: this rank is not in group '%s'", g->name);
  dist_params *p = calloc(1, sizeof *p);
  if (!p) return dist__error(DIST_ERR_NO_MEMORY, "dist_params_create");
  snprintf(p->group, sizeof p->group, "%s", g->name);
  *out = p;
  return DIST_SUCCESS;
}

dist_status dist_params_add(dist_params *p, const char *name, void *data, void *grad, int64_t numel, dist_dtype dtype,
                            dist_memory memory, int device, int *index) {
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add: parameter set is NULL");
  const char *nm = name ? name : "(unnamed)";
  if (p->committed)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': the set is committed (add before commit)", nm);
  if (name && strlen(name) > DIST_PARAM_NAME_MAX)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add: name '%s' is longer than %d characters", name,
                       DIST_PARAM_NAME_MAX);
  if (numel < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': numel %lld < 0", nm, (long long)numel);
  if (dtype != DIST_F32 && dtype != DIST_F64 && dtype != DIST_BF16 && dtype != DIST_F16)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': dtype %s is not a floating type (f32, f64, bf16, f16)",
                       nm, dist_dtype_name(dtype));
  if (memory != DIST_MEM_HOST && memory != DIST_MEM_CUDA)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': unknown memory space %d", nm, (int)memory);
  if (numel > 0 && (!data || !grad))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': %s is NULL", nm, data ? "grad" : "data");
  size_t esize = dist_dtype_size(dtype), bytes = (size_t)numel * esize;
  if ((uint64_t)numel > SIZE_MAX / esize)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': %lld elements of %s overflow size_t", nm,
                       (long long)numel, dist_dtype_name(dtype));
  /* the element loops and kernels read whole elements */
  if ((uintptr_t)data % esize || (uintptr_t)grad % esize)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': %s is not aligned to its %zu-byte %s elements", nm,
                       (uintptr_t)data % esize ? "data" : "grad", esize, dist_dtype_name(dtype));
  if (numel > 0 && (char *)data < (char *)grad + bytes && (char *)grad < (char *)data + bytes)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_add '%s': data and grad overlap", nm);
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 16;
    dist__param *q = realloc(p->p, sizeof *q * (size_t)cap);
    if (!q) return dist__error(DIST_ERR_NO_MEMORY, "dist_params_add: %d parameters", cap);
    p->p = q;
    p->cap = cap;
  }
  dist__param *q = &p->p[p->n];
  memset(q, 0, sizeof *q);
  snprintf(q->name, sizeof q->name, "%s", name ? name : "");
  if (!name) snprintf(q->name, sizeof q->name, "param%d", p->n);
  q->data = data;
  q->grad = grad;
  q->numel = numel;
  q->dtype = dtype;
  q->memory = memory;
  q->device = memory == DIST_MEM_CUDA ? device : 0;
  if (index) *index = p->n;
  p->n++;
  return DIST_SUCCESS;
}

dist_status dist_params_add_host(dist_params *p, const char *name, float *data, float *grad, int64_t numel, int *index) {
  return dist_params_add(p, name, data, grad, numel, DIST_F32, DIST_MEM_HOST, 0, index);
}

dist_status dist__params_group(const dist_params *p, const char *what, dist__group **g) {
  DIST_CHECK(dist__require_initialized(what));
  dist_status s = dist__group_find(p->group, g);
  if (s) return dist__error_context(s, "%s", what);
  if ((*g)->rank < 0) return dist__error(DIST_ERR_NOT_MEMBER, "%s: this rank is not in group '%s'", what, p->group);
  return DIST_SUCCESS;
}

dist_status dist__params_check(const dist_params *p, const char *what) {
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: parameter set is NULL", what);
  if (!p->committed) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: parameter set is not committed (call dist_params_commit)", what);
  return DIST_SUCCESS;
}

/* What must match across ranks, per parameter. */
typedef struct {
  int64_t numel;
  int32_t dtype, memory;
} shape_rec;

static shape_rec rec_of(const dist__param *q) { return (shape_rec){q->numel, (int32_t)q->dtype, (int32_t)q->memory}; }

/* The count and every parameter's shape_rec, hashed. */
static uint64_t shapes_hash(const dist_params *p) {
  uint64_t h = dist__hash(DIST__HASH_SEED, &p->n, sizeof p->n);
  for (int i = 0; i < p->n; i++) {
    shape_rec r = rec_of(&p->p[i]);
    h = dist__hash(h, &r, sizeof r);
  }
  return h;
}

static void describe(const shape_rec *r, char *buf, size_t n) {
  snprintf(buf, n, "%s[%lld] %s", dist_dtype_name((dist_dtype)r->dtype), (long long)r->numel,
           r->memory == DIST_MEM_CUDA ? "cuda" : "host");
}

/* The first error of a sequence of collectives that every rank makes in full
 * (leaving one out after a local failure would leave the others waiting). */
static void keep_first(dist_status *first, dist_status s) {
  if (!*first) *first = s;
}

/* The rare path after a hash mismatch: name the first rank and parameter
 * that differ from rank 0. A few more collectives, through the host
 * backend's table; only on error. */
static dist_status name_mismatch(const dist_params *p, dist__group *g) {
  const dist__backend *be = dist__backend_host(g);
  dist_status e = DIST_SUCCESS;
  int32_t count0 = p->n;
  keep_first(&e, be->broadcast(g, &count0, 1, DIST_I32, 0));
  shape_rec *ref = calloc((size_t)(count0 > 0 ? count0 : 0) + 1, sizeof *ref);
  int32_t have = ref != NULL, all = 0;
  keep_first(&e, be->all_reduce(g, &have, &all, 1, DIST_I32, DIST_MIN, NULL));
  if (!all || e) {
    free(ref);
    return e ? e : dist__error(DIST_ERR_MISMATCH, "dist_params_commit: ranks registered different parameter sets");
  }
  if (g->rank == 0)
    for (int i = 0; i < count0; i++) ref[i] = rec_of(&p->p[i]);
  keep_first(&e, be->broadcast(g, ref, sizeof *ref * (size_t)count0, DIST_U8, 0));
  /* first[0]: the lowest first differing index over the ranks (count0 when
   * only the counts differ, INT32_MAX when nothing does); first[1]: the
   * lowest rank where it occurs. */
  int32_t idx = INT32_MAX, first[2], at;
  int lim = p->n < count0 ? p->n : count0;
  for (int i = 0; i < lim && idx == INT32_MAX; i++) {
    shape_rec r = rec_of(&p->p[i]);
    if (r.numel != ref[i].numel || r.dtype != ref[i].dtype || r.memory != ref[i].memory) idx = i;
  }
  if (idx == INT32_MAX && p->n != count0) idx = lim;
  keep_first(&e, be->all_reduce(g, &idx, &first[0], 1, DIST_I32, DIST_MIN, NULL));
  at = idx == first[0] ? g->rank : INT32_MAX;
  keep_first(&e, be->all_reduce(g, &at, &first[1], 1, DIST_I32, DIST_MIN, NULL));
  if (e || first[1] < 0 || first[1] >= g->size) {
    free(ref);
    return e ? e : dist__error(DIST_ERR_MISMATCH, "dist_params_commit: ranks disagree on the parameter set");
  }
  shape_rec theirs = {0, 0, 0};
  int32_t n_theirs = p->n;
  if (g->rank == first[1] && first[0] < p->n) theirs = rec_of(&p->p[first[0]]);
  keep_first(&e, be->broadcast(g, &theirs, sizeof theirs, DIST_U8, first[1]));
  keep_first(&e, be->broadcast(g, &n_theirs, 1, DIST_I32, first[1]));
  /* Its name, from a rank that registered it, so every rank's message names it. */
  char name[DIST_PARAM_NAME_MAX + 1] = "";
  int holder = first[0] < count0 ? 0 : first[1];
  if (first[0] != INT32_MAX) {
    if (g->rank == holder) snprintf(name, sizeof name, "%s", p->p[first[0]].name);
    keep_first(&e, be->broadcast(g, name, sizeof name, DIST_U8, holder));
  }
  if (e) {
    free(ref);
    return e;
  }
  dist_status s;
  if (first[0] == INT32_MAX) {
    s = dist__error(DIST_ERR_MISMATCH, "dist_params_commit: ranks disagree on the parameter set (hash differs)");
  } else if (first[0] < count0 && first[0] < n_theirs) {
    char a[64], b[64];
    describe(&ref[first[0]], a, sizeof a);
    describe(&theirs, b, sizeof b);
    s = dist__error(DIST_ERR_MISMATCH, "dist_params_commit: parameter %d '%s' is %s on rank 0 but %s on rank %d",
                    first[0], name, a, b, first[1]);
  } else {
    s = dist__error(DIST_ERR_MISMATCH,
                    "dist_params_commit: rank 0 registered %d parameters, rank %d registered %d (parameter %d '%s' is "
                    "on rank %d, not on rank %d)", count0, first[1], n_theirs, first[0], name, holder,
                    holder == 0 ? first[1] : 0);
  }
  free(ref);
  return s;
}

dist_status dist_params_commit(dist_params *p) {
  const char *what = "dist_params_commit";
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: parameter set is NULL", what);
  dist__group *g;
  DIST_CHECK(dist__params_group(p, what, &g));
  dist_status local = p->committed ? dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: already committed", what) : DIST_SUCCESS;
  int differs;
  dist_status s = dist__agree_status_hash_group(g, local, shapes_hash(p), what, &differs);
  if (differs) return name_mismatch(p, g);
  DIST_CHECK(s);
  p->committed = 1;
  return dist_params_broadcast(p, 0);
}

/* A checked call, as coll.h's broadcast: a root that differs between ranks,
 * or is bad on one of them, is an error on every rank, not a hang. */
dist_status dist_params_broadcast(dist_params *p, int root) {
  const char *what = "dist_params_broadcast";
  DIST_CHECK(dist__params_check(p, what));
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, what, p->group));
  dist__group *g = c.g;
  dist_status s = dist__check_rank(&c, root, "root");
  c.sig.root = root;
  c.sig.sizes = shapes_hash(p); /* the count and every parameter's shape */
  DIST_CHECK(dist__call_verify(&c, s));
  if (g->size == 1) return DIST_SUCCESS;
  for (int i = 0; i < p->n; i++) {
    dist__param *q = &p->p[i];
    const dist__backend *be;
    DIST_CHECK(dist__backend_for(q->memory, g, &be));
    /* 16-bit values move as bytes: a broadcast does no arithmetic. */
    dist_dtype t = (q->dtype == DIST_BF16 || q->dtype == DIST_F16) ? DIST_U8 : q->dtype;
    size_t count = t == DIST_U8 ? dist__param_bytes(q) : (size_t)q->numel;
    dist_status s = be->broadcast(g, q->data, count, t, root);
    if (s) return dist__error_context(s, "%s of '%s'", what, q->name);
  }
  return DIST_SUCCESS;
}

int dist_params_count(const dist_params *p) { return p ? p->n : -1; }
const char *dist_params_group(const dist_params *p) { return p ? p->group : NULL; }

int64_t dist_params_numel(const dist_params *p) {
  int64_t n = 0;
  for (int i = 0; p && i < p->n; i++) n += p->p[i].numel;
  return n;
}

dist_status dist_params_info_get(const dist_params *p, int index, dist_param_info *info) {
  if (!p || !info) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_info_get: %s is NULL", p ? "info" : "set");
  if (index < 0 || index >= p->n)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_info_get: index %d not in [0, %d)", index, p->n);
  const dist__param *q = &p->p[index];
  *info = (dist_param_info){q->name, q->data, q->grad, q->numel, q->dtype, q->memory, q->device};
  return DIST_SUCCESS;
}

void *dist_params_grad(const dist_params *p, int index) {
  return p && index >= 0 && index < p->n ? p->p[index].grad : NULL;
}

dist_status dist_params_zero_grad(dist_params *p) {
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_zero_grad: parameter set is NULL");
  for (int i = 0; i < p->n; i++) DIST_CHECK(dist__mem_zero(p->p[i].memory, p->p[i].grad, dist__param_bytes(&p->p[i])));
  return DIST_SUCCESS;
}

static double load(const void *base, dist_dtype t, int64_t i) {
  switch (t) {
    case DIST_F32: return ((const float *)base)[i];
    case DIST_F64: return ((const double *)base)[i];
    case DIST_BF16: return dist_bf16_to_f32(((const uint16_t *)base)[i]);
    default: return dist_f16_to_f32(((const uint16_t *)base)[i]);
  }
}

dist_status dist_params_max_divergence(dist_params *p, double *out) {
  const char *what = "dist_params_max_divergence";
  DIST_CHECK(dist__params_check(p, what));
  dist__group *g;
  DIST_CHECK(dist__params_group(p, what, &g));
  size_t most = 1;
  for (int i = 0; i < p->n; i++)
    if (dist__param_bytes(&p->p[i]) > most) most = dist__param_bytes(&p->p[i]);
  void *mine = malloc(most), *ref = malloc(most);
  /* A NULL out on one rank goes into the agreement too: the others wait in it. */
  dist_status s = !out ? dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: out is NULL", what)
                  : mine && ref ? DIST_SUCCESS
                                : dist__error(DIST_ERR_NO_MEMORY, "%s: %zu bytes", what, most);
  s = dist__agree_group(g, s, what);
  if (s) {
    free(mine);
    free(ref);
    return s;
  }
  double worst = 0;
  for (int i = 0; i < p->n; i++) { /* every rank joins every broadcast, even after a local error */
    dist__param *q = &p->p[i];
    size_t bytes = dist__param_bytes(q);
    dist_status ls = s ? s : dist__mem_download(q->memory, mine, q->data, bytes);
    if (!ls) ls = dist__mem_sync(q->memory);
    if (!ls) memcpy(ref, mine, bytes);
    dist_status bs = dist__backend_host(g)->broadcast(g, ref, bytes, DIST_U8, 0);
    if (!ls) ls = bs;
    for (int64_t k = 0; !ls && k < q->numel; k++) {
      double d = fabs(load(mine, q->dtype, k) - load(ref, q->dtype, k));
      if (d > worst || d != d) worst = d != d ? INFINITY : d;
    }
    if (ls && !s) s = ls;
  }
  free(mine);
  free(ref);
  DIST_CHECK(dist__agree_group(g, s, what));
  double all;
  DIST_CHECK(dist__backend_host(g)->all_reduce(g, &worst, &all, 1, DIST_F64, DIST_MAX, NULL));
  *out = all;
  return DIST_SUCCESS;
}

void dist_params_destroy(dist_params *p) {
  if (!p) return;
  if (p->users > 0) {
    dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_params_destroy: %d reducers still use the set (destroy them first); not freed",
                p->users);
    return;
  }
  free(p->p);
  free(p);
}
