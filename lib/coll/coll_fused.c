/* Fused all-reduce of many tensors: one packed buffer and one call per kind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_internal.h"
#include "core/fault.h"

/* The type a tensor travels as: 16-bit floats join the f32 buffer. */
static dist_dtype wire_type(dist_dtype t) { return dist__dtype_is16(t) ? DIST_F32 : t; } /* u8 avg widens later */

static dist_status copy_in(const dist_tensor *t, char *dst, size_t n) {
  if (dist__dtype_is16(t->dtype)) return dist__mem_widen(t->memory, t->data, t->dtype, dst, n);
  size_t bytes = n * dist_dtype_size(t->dtype);
  return dist__mem_copy2d(t->memory, dst, bytes, t->data, bytes, bytes, 1);
}

static dist_status copy_out(dist_tensor *t, const char *src, size_t n) {
  if (dist__dtype_is16(t->dtype)) return dist__mem_narrow(t->memory, src, t->dtype, t->data, n);
  size_t bytes = n * dist_dtype_size(t->dtype);
  return dist__mem_copy2d(t->memory, t->data, bytes, src, bytes, bytes, 1);
}

/* Pack every tensor of (wire type w, memory mem) into one buffer, reduce,
 * unpack. A failed unpack (a device copy) is this rank's alone and comes
 * back in *late, not as the return value: the other ranks go on to the next
 * kind's round, and so must this one. */
static dist_status reduce_kind(dist__call *c, dist_tensor *ts, int n, dist_dtype w, dist_memory mem,
                               dist_reduce_op op, dist_status *late) {
  size_t total = 0, esize = dist_dtype_size(w);
  for (int i = 0; i < n; i++)
    if (wire_type(ts[i].dtype) == w && ts[i].memory == mem) total += (size_t)dist_tensor_numel(&ts[i]);
  if (!total) return DIST_SUCCESS;
  char *buf = NULL; /* a failed allocation goes to the round below: the others must not wait */
  dist_status s = dist__mem_alloc(mem, total * esize, (void **)&buf);
  size_t off = 0;
  for (int i = 0; i < n && !s; i++)
    if (wire_type(ts[i].dtype) == w && ts[i].memory == mem) {
      size_t k = (size_t)dist_tensor_numel(&ts[i]);
      s = copy_in(&ts[i], buf + off * esize, k);
      off += k;
    }
  if (!s) s = dist__backend_for(mem, c->g, &c->be);
  if (!s) s = dist__check_op(c, w, op); /* may switch to a fallback backend */
  s = dist__call_ready(c, s);
  if (!s) s = dist__reduce_buffer(c, buf, w, mem, total, op, -1, NULL);
  off = 0;
  dist_status out = DIST_SUCCESS;
  for (int i = 0; i < n && !s && !out; i++)
    if (wire_type(ts[i].dtype) == w && ts[i].memory == mem) {
      size_t k = (size_t)dist_tensor_numel(&ts[i]);
      out = dist__fault("fused_copy_out") ? dist__error(DIST_ERR_INTERNAL, "injected fault (fused_copy_out)")
                                          : copy_out(&ts[i], buf + off * esize, k);
      off += k;
    }
  if (out && !*late) *late = out;
  dist__mem_free(mem, buf);
  return s;
}

/* The packed buffer of each (kind, memory) must not wrap: a sum of counts
 * that each fit can still overflow (16 u8 tensors of 2^60 elements). Counted
 * in the widest form a kind takes (u8 averages reduce in i64). */
static dist_status check_totals(const dist__call *c, const dist_tensor *ts, int n) {
  for (int m = DIST_MEM_HOST; m <= DIST_MEM_CUDA; m++)
    for (int k = 0; k < DIST_DTYPE_COUNT; k++) {
      int64_t total = 0, bytes;
      for (int i = 0; i < n; i++)
        if ((int)wire_type(ts[i].dtype) == k && (int)ts[i].memory == m &&
            __builtin_add_overflow(total, dist_tensor_numel(&ts[i]), &total))
          total = -1;
      size_t es = dist_dtype_size(dist__wire_type((dist_dtype)k, DIST_AVG));
      if (total < 0 || __builtin_mul_overflow(total, (int64_t)es, &bytes) || (uint64_t)bytes > SIZE_MAX)
        return dist__error(DIST_ERR_INVALID_ARGUMENT,
                           "%s: the %s tensors together overflow: their element counts add up to more than the "
                           "%lld elements of %zu bytes one buffer can hold",
                           c->what, dist_dtype_name((dist_dtype)k), (long long)(INT64_MAX / (int64_t)es), es);
    }
  return DIST_SUCCESS;
}

static dist_status fused(const char *what, const char *group, dist_tensor *ts, int n, dist_reduce_op op) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, what, group));
  dist_status s = n < 0 || (n > 0 && !ts)
                      ? dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %d tensors at %p", what, n, (void *)ts)
                      : DIST_SUCCESS;
  uint64_t h = DIST__HASH_SEED;
  for (int i = 0; i < n && !s; i++) {
    char name[32];
    snprintf(name, sizeof name, "tensors[%d]", i);
    s = dist__check_tensor(&c, &ts[i], name);
    if (!s) s = dist__call_backend(&c, ts[i].memory);
    if (!s) s = dist__check_op(&c, ts[i].dtype, op);
    if (!s) {
      dist__sig_tensor(&c, &ts[i], -1);
      h = dist__hash(h, &c.sig, sizeof c.sig);
    }
  }
  if (!s) s = check_totals(&c, ts, n);
  if (!s) {
    dist__sig keep = c.sig; /* its kind and call number stay */
    memset(&c.sig, 0, sizeof c.sig);
    memcpy(c.sig.kind, keep.kind, sizeof c.sig.kind);
    c.sig.seq = keep.seq;
    c.sig.op = op;
    c.sig.aux = n;
    c.sig.sizes = h; /* every tensor's dtype and shape, in order */
  }
  DIST_CHECK(dist__call_verify(&c, s));
  static const dist_dtype kinds[] = {DIST_F32, DIST_F64, DIST_C64, DIST_C128, DIST_I32, DIST_I64, DIST_U8};
  dist_status late = DIST_SUCCESS; /* the first failed unpack, after every round */
  char why[512];
  for (int m = DIST_MEM_HOST; m <= DIST_MEM_CUDA; m++)
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      dist_status was = late;
      DIST_CHECK(reduce_kind(&c, ts, n, kinds[k], (dist_memory)m, op, &late));
      if (late && !was) snprintf(why, sizeof why, "%s", dist_last_error());
    }
  if (late) return dist__error(late, "%s: copying a result back: %s (the other kinds were reduced)", what, why);
  return DIST_SUCCESS;
}

dist_status dist_all_reduce_fused(const char *group, dist_tensor *tensors, int n, dist_reduce_op op) {
  return fused("dist_all_reduce_fused", group, tensors, n, op);
}

dist_status dist_all_reduce_shared_grads(const char *group, dist_tensor *grads, int n) {
  return fused("dist_all_reduce_shared_grads", group, grads, n, DIST_SUM);
}
