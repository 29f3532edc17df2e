/* Chunks along a dimension: counts, packing and unpacking. */
#include <stdlib.h>
#include <string.h>

#include "mem/split.h"

void dist__outer_inner(const dist_tensor *t, int dim, int64_t *outer, int64_t *inner) {
  int64_t o = 1, i = 1;
  for (int d = 0; d < dim; d++) o *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) i *= t->shape[d];
  *outer = o;
  *inner = i;
}

void dist__split_clear(dist__split *s) {
  /* Not a memset: the inline sizes need no zeroing (a cost on every call). */
  s->outer = s->n = s->inner = 0;
  s->esize = 0;
  s->P = 0;
  s->sizes = NULL;
}

dist_status dist__split_init(dist__split *s, const dist_tensor *t, int dim, int P, const int64_t *sizes, int64_t equal) {
  dist__split_clear(s); /* callers test contiguity even after an error: outer 0 is "not contiguous" */
  int64_t n = 0;
  for (int r = 0; r < P; r++) {
    int64_t v = sizes ? sizes[r] : equal;
    if (v < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "split along dim %d: size %d is %lld (negative)", dim, r, (long long)v);
    if (__builtin_add_overflow(n, v, &n))
      return dist__error(DIST_ERR_INVALID_ARGUMENT,
                         "split along dim %d into %d chunks: the sizes overflow (they add up to more than INT64_MAX)",
                         dim, P);
  }
  dist_tensor whole = *t;
  whole.shape[dim] = n;
  if (dist__tensor_span(&whole) < 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "split along dim %d: extent %lld of a %s tensor with %d dims overflows (more than INT64_MAX bytes)",
                       dim, (long long)n, dist_dtype_name(t->dtype), t->ndim);
  /* no allocation for small groups: a collective's per-call cost (bench/collectives) */
  s->sizes = P <= DIST__SPLIT_SMALL ? s->small : malloc(sizeof(int64_t) * (size_t)P);
  if (!s->sizes) return dist__error(DIST_ERR_NO_MEMORY, "split of %d chunks", P);
  s->P = P;
  s->n = n;
  s->esize = dist_dtype_size(t->dtype);
  dist__outer_inner(t, dim, &s->outer, &s->inner);
  for (int r = 0; r < P; r++) s->sizes[r] = sizes ? sizes[r] : equal;
  return DIST_SUCCESS;
}

void dist__split_free(dist__split *s) {
  if (s->sizes != s->small) free(s->sizes);
  s->sizes = NULL;
}

void dist__split_move(dist__split *to, const dist__split *from) {
  *to = *from;
  if (from->sizes == from->small) to->sizes = to->small;
}

void dist__split_counts(const dist__split *s, size_t *counts, size_t *displs) {
  size_t off = 0;
  for (int r = 0; r < s->P; r++) {
    counts[r] = (size_t)(s->outer * s->sizes[r] * s->inner);
    displs[r] = off;
    off += counts[r];
  }
}

int dist__split_contiguous(const dist__split *s) { return s->outer == 1; }

/* One 2-D copy per chunk: outer rows of sizes[r]*inner elements. */
static dist_status move(dist_memory mem, const dist__split *s, char *full, char *packed, int pack) {
  size_t row = (size_t)(s->n * s->inner) * s->esize, off = 0, pos = 0;
  for (int r = 0; r < s->P; r++) {
    size_t w = (size_t)(s->sizes[r] * s->inner) * s->esize;
    if (pack) DIST_CHECK(dist__mem_copy2d(mem, packed + pos, w, full + off, row, w, (size_t)s->outer));
    else DIST_CHECK(dist__mem_copy2d(mem, full + off, row, packed + pos, w, w, (size_t)s->outer));
    off += w;
    pos += w * (size_t)s->outer;
  }
  return DIST_SUCCESS;
}

dist_status dist__split_pack(dist_memory mem, const dist__split *s, const void *full, void *packed) {
  return move(mem, s, (char *)full, packed, 1);
}

dist_status dist__split_unpack(dist_memory mem, const dist__split *s, const void *packed, void *full) {
  return move(mem, s, full, (char *)packed, 0);
}
