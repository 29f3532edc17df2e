/* Group lookup and argument checks of collectives (verification: coll_verify.c). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manager/coll_call.h"
#include "backend/faults.h"
#include "backend/wait.h"

/* An unknown group name: this rank cannot take part in the check of the
 * group the others meant, so they learn of it through the fault channel
 * (faults.h) instead of waiting for this rank. */
static dist_status precheck_failed(dist_status s, const char *what, const char *group) {
  char key[128] = {0};
  int k = snprintf(key, sizeof key, "%s", what);
  if (k >= 0 && (size_t)k + 1 < sizeof key) snprintf(key + k + 1, sizeof key - (size_t)k - 1, "%s", group ? group : "world");
  dist__faults_announce(DIST__FAULT_PRECHECK, key, dist_last_error());
  return s;
}

dist_status dist__call_lookup(dist__call *c, const char *what, const char *group) {
  memset(c, 0, sizeof *c);
  c->what = what;
  DIST_CHECK(dist__require_initialized(what));
  if (dist__group_find(group, &c->g)) return dist__error_context(DIST_ERR_UNKNOWN_GROUP, "%s", what);
  if (c->g->rank < 0)
    return dist__error(DIST_ERR_NOT_MEMBER, "%s: this rank is not a member of group '%s'", what, c->g->name);
  return DIST_SUCCESS;
}

dist_status dist__call_begin(dist__call *c, const char *what, const char *group) {
  DIST_CHECK(dist__require_initialized(what));
  DIST_CHECK(dist__require_usable(what));
  dist_status s = dist__call_lookup(c, what, group);
  if (s == DIST_ERR_UNKNOWN_GROUP) return precheck_failed(s, what, group);
  /* Not announced otherwise: the members know a non-member does not come. */
  DIST_CHECK(s);
  c->sig.dim = c->sig.op = c->sig.root = -1; /* "not used by this call" in messages */
  size_t k = strnlen(what, sizeof c->sig.kind - 1); /* sig was zeroed by the lookup */
  memcpy(c->sig.kind, what, k);
  dist__call_enter(what, c->g);
  c->sig.seq = c->g->seq;
  return DIST_SUCCESS;
}

dist_status dist__call_backend(dist__call *c, dist_memory mem) {
  if (dist__backend_for(mem, c->g, &c->be)) return dist__error_context(DIST_ERR_UNSUPPORTED, "%s", c->what);
  return DIST_SUCCESS;
}

void dist__describe_shape(const dist_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s%s[", dist_dtype_name(t->dtype), t->memory == DIST_MEM_CUDA ? "(cuda)" : "");
  for (int i = 0; i < t->ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)t->shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

dist_status dist__check_tensor(const dist__call *c, const dist_tensor *t, const char *name) {
  if (!t) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is NULL", c->what, name);
  if (t->ndim < 0 || t->ndim > DIST_TENSOR_MAX_DIMS)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has %d dimensions (0 to %d allowed)", c->what, name,
                       t->ndim, DIST_TENSOR_MAX_DIMS);
  if (!dist__dtype_valid(t->dtype))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has an unknown dtype %d", c->what, name, (int)t->dtype);
  if (t->memory != DIST_MEM_HOST && t->memory != DIST_MEM_CUDA)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has an unknown memory space %d", c->what, name,
                       (int)t->memory);
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has a negative extent %lld in dimension %d", c->what,
                         name, (long long)t->shape[i], i);
  /* Every count, offset and byte size of the call is a product of some of
   * these extents: bound them all at once, in the widest form the tensor
   * takes (16-bit floats are reduced in f32, a u8 average in i64). */
  dist_dtype wide = dist__wire_type(t->dtype, DIST_AVG);
  int64_t bytes = (int64_t)dist_dtype_size(wide);
  int over = 0;
  for (int i = 0; i < t->ndim; i++) over |= t->shape[i] && __builtin_mul_overflow(bytes, t->shape[i], &bytes);
  if (over || (uint64_t)bytes > SIZE_MAX) {
    char d[160];
    dist__describe_shape(t, d, sizeof d);
    if (dist_tensor_numel(t) < 0)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has shape %s, whose element count overflows int64",
                         c->what, name, d);
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: '%s' has shape %s, whose size overflows: its extents (zeros left out) times %zu bytes "
                       "per element%s%s%s exceed INT64_MAX",
                       c->what, name, d, dist_dtype_size(wide), wide != t->dtype ? " (" : "",
                       wide != t->dtype ? dist_dtype_name(wide) : "", wide != t->dtype ? ", the type it is reduced in)" : "");
  }
  if (!t->data && dist_tensor_numel(t) > 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has %lld elements but its data pointer is NULL", c->what,
                       name, (long long)dist_tensor_numel(t));
  return DIST_SUCCESS;
}

dist_status dist__check_same_memory(const dist__call *c, const dist_tensor *a, const dist_tensor *b) {
  if (a->memory != b->memory || (a->memory == DIST_MEM_CUDA && a->device != b->device))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: input and output are in different memory (%s %d vs %s %d)",
                       c->what, a->memory ? "cuda" : "host", a->device, b->memory ? "cuda" : "host", b->device);
  if (a->dtype != b->dtype)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: input is %s but output is %s", c->what,
                       dist_dtype_name(a->dtype), dist_dtype_name(b->dtype));
  return DIST_SUCCESS;
}

dist_status dist__check_engine_count(const dist__call *c, const dist_tensor *t, const char *name) {
  size_t limit = c->be && c->be->max_count ? c->be->max_count() : SIZE_MAX;
  int64_t n = dist_tensor_numel(t);
  if (n >= 0 && (uint64_t)n <= limit) return DIST_SUCCESS;
  return dist__error(DIST_ERR_UNSUPPORTED,
                     "%s: '%s' has %lld elements; the %s engine takes element counts and offsets up to %zu per call",
                     c->what, name, (long long)n, c->be->name, limit);
}

dist_status dist__check_dim(const dist__call *c, const dist_tensor *t, int dim, const char *name) {
  if (dim < 0 || dim >= t->ndim)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: dim %d is out of range for '%s' with %d dimensions", c->what,
                       dim, name, t->ndim);
  return DIST_SUCCESS;
}

dist_status dist__check_rank(const dist__call *c, int r, const char *name) {
  if (r < 0 || r >= c->g->size)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s %d is out of range for group '%s' of size %d", c->what, name,
                       r, c->g->name, c->g->size);
  return DIST_SUCCESS;
}

static int can(const dist__backend *be, dist_dtype wire, dist_reduce_op op) {
  /* avg is a sum and a division where the backend has no avg. */
  return be->can_reduce(wire, op) || (op == DIST_AVG && be->can_reduce(wire, DIST_SUM));
}

dist_status dist__check_op(dist__call *c, dist_dtype t, dist_reduce_op op) {
  if ((unsigned)op >= DIST_REDUCE_OP_COUNT)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: unknown reduction op %d", c->what, (int)op);
  dist_dtype wire = dist__wire_type(t, op);
  if (!can(c->be, wire, op) && c->be->fallback && can(c->be->fallback, wire, op)) c->be = c->be->fallback;
  if (!can(c->be, wire, op))
    return dist__error(DIST_ERR_UNSUPPORTED, "%s: the %s backend cannot reduce %s with %s", c->what, c->be->name,
                       dist_dtype_name(t), dist_reduce_op_name(op));
  return DIST_SUCCESS;
}

dist_status dist__check_shape_along(const dist__call *c, const dist_tensor *t, const char *name,
                                    const dist_tensor *ref, int dim, int64_t n) {
  int ok = t->ndim == ref->ndim;
  for (int i = 0; ok && i < t->ndim; i++) ok = t->shape[i] == (i == dim ? n : ref->shape[i]);
  if (ok) return DIST_SUCCESS;
  char got[160], want[160];
  dist_tensor e = *ref;
  if (dim >= 0) e.shape[dim] = n;
  e.dtype = t->dtype;
  dist__describe_shape(t, got, sizeof got);
  dist__describe_shape(&e, want, sizeof want);
  return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has shape %s; expected %s", c->what, name, got, want);
}

dist_status dist__check_sizes(const dist__call *c, const int64_t *sizes, const char *name, int64_t *sum) {
  int64_t s = 0;
  for (int r = 0; r < c->g->size; r++) {
    if (sizes[r] < 0)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s[%d] = %lld is negative", c->what, name, r,
                         (long long)sizes[r]);
    if (__builtin_add_overflow(s, sizes[r], &s))
      return dist__error(DIST_ERR_INVALID_ARGUMENT,
                         "%s: %s overflows: its entries add up to more than INT64_MAX (at %s[%d] = %lld)", c->what,
                         name, name, r, (long long)sizes[r]);
  }
  *sum = s;
  return DIST_SUCCESS;
}

dist_status dist_coll_backend(const char *group, dist_memory memory, const char **name) {
  const char *what = "dist_coll_backend";
  if (!name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: name is NULL", what);
  if (memory != DIST_MEM_HOST && memory != DIST_MEM_CUDA)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: memory %d is neither DIST_MEM_HOST nor DIST_MEM_CUDA", what,
                       (int)memory);
  dist__call c;
  DIST_CHECK(dist__call_lookup(&c, what, group));
  DIST_CHECK(dist__call_backend(&c, memory));
  *name = c.be->name;
  return DIST_SUCCESS;
}
