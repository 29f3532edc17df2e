/* Chunks of a tensor along one dimension, and packing them contiguously.
 *
 * A tensor is viewed as [outer, n, inner] around `dim`; chunk r is the
 * extent sizes[r] starting at the sum of the sizes before it. Packed, the
 * chunks lie one after another, each itself row-major. When outer == 1 the
 * tensor already is its packed form and no copy is needed. */
#ifndef DISTMGR_SPLIT_H
#define DISTMGR_SPLIT_H

#include "mem/memops.h"

#define DIST__SPLIT_SMALL 16
typedef struct dist__split {
  int64_t outer, n, inner;
  size_t esize;
  int P;
  int64_t *sizes; /* P extents (owned copy): `small` for up to DIST__SPLIT_SMALL ranks, so a
                     copy of the struct must go through dist__split_move */
  int64_t small[DIST__SPLIT_SMALL];
} dist__split;

/* An empty split (no sizes, not contiguous); dist__split_free is a no-op on it. */
void dist__split_clear(dist__split *s);
/* *to = *from, with `sizes` pointing into to's own storage. */
void dist__split_move(dist__split *to, const dist__split *from);

/* `t` gives outer/inner/esize around dim; n = sum of sizes (NULL = all
 * equal to `equal`). DIST_ERR_INVALID_ARGUMENT when a size is negative, the
 * sizes add up to more than INT64_MAX, or t with extent n along dim fails
 * dist__tensor_span (the callers check these first; this is the backstop
 * that keeps the counts and offsets below exact). */
dist_status dist__split_init(dist__split *s, const dist_tensor *t, int dim, int P, const int64_t *sizes, int64_t equal);
void dist__split_free(dist__split *s);
/* Element counts and offsets of each chunk in the packed form (P entries each). */
void dist__split_counts(const dist__split *s, size_t *counts, size_t *displs);
int dist__split_contiguous(const dist__split *s);
dist_status dist__split_pack(dist_memory mem, const dist__split *s, const void *full, void *packed);
dist_status dist__split_unpack(dist_memory mem, const dist__split *s, const void *packed, void *full);

/* The bytes of t counting only its non-zero extents (dtype size times their
 * product), or -1 when that exceeds INT64_MAX (or SIZE_MAX) or an extent is
 * negative. Every collective checks it on its tensors (dist__check_tensor),
 * so every product of some of their extents -- outer, inner, counts,
 * offsets, byte sizes -- fits without overflow. */
int64_t dist__tensor_span(const dist_tensor *t);

/* outer and inner products of t's shape around dim (t must pass
 * dist__tensor_span, as every checked tensor does). */
void dist__outer_inner(const dist_tensor *t, int dim, int64_t *outer, int64_t *inner);

#endif
