/* The Gloo backend: host memory in launches without MPI (torchrun). The
 * collective layer hands it contiguous buffers with counts in elements, as
 * every backend; it maps them onto the shim (gloo.h): Gloo's collectives
 * where the layout is Gloo's (blocks in rank order) on every rank alike,
 * point-to-point exchanges where displacements say otherwise (gather-v,
 * scatter-v) or where each rank's layout is its own (all-to-all-v). Gloo's calls block, so a non-blocking call is complete when
 * it returns and its wait is a no-op. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/reserve.h"
#include "backend/gloo.h"

static int can_reduce(dist_dtype t, dist_reduce_op op) {
  if (dist__dtype_is16(t) || op == DIST_AVG) return 0; /* the caller widens 16-bit and divides for AVG */
  if (dist__dtype_kind(t) == DIST__COMPLEX) return op == DIST_SUM || op == DIST_PROD;
  return t == DIST_F32 || t == DIST_F64 || t == DIST_I32 || t == DIST_I64 || t == DIST_U8;
}

static dist_status context(const dist__group *g) {
  return g->gloo ? DIST_SUCCESS
                 : dist__error(DIST_ERR_INTERNAL, "group '%s' has no Gloo context on this rank", g->name);
}

static dist_status all_reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t,
                              dist_reduce_op op, dist__pending *p) {
  DIST_CHECK(context(g));
  if (send != recv) memcpy(recv, send, count * dist_dtype_size(t));
  return dist__gloo_all_reduce(g->gloo, recv, count, t, op);
}

static dist_status broadcast(dist__group *g, void *buf, size_t count, dist_dtype t, int root) {
  DIST_CHECK(context(g));
  return dist__gloo_broadcast(g->gloo, buf, count * dist_dtype_size(t), root);
}

static dist_status reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t,
                          dist_reduce_op op, int root) {
  DIST_CHECK(context(g));
  return dist__gloo_reduce(g->gloo, send, recv, count, t, op, root);
}

/* counts/displs in elements -> bytes, in arrays of 2P (counts, then displs);
 * count arrays come from core/reserve.h (made after the check round). */
static dist_status bytes_of(int P, const size_t *counts, const size_t *displs, size_t es, size_t **out) {
  size_t *b = dist__reserve_alloc(sizeof *b * 2 * (size_t)P, 0);
  if (!b) return dist__error(DIST_ERR_NO_MEMORY, "Gloo byte counts for %d ranks", P);
  for (int r = 0; r < P; r++) b[r] = counts[r] * es, b[P + r] = displs[r] * es;
  *out = b;
  return DIST_SUCCESS;
}

/* Blocks in rank order, back to back from 0? Then Gloo's own v-collective applies. */
static int packed(int P, const size_t *counts, const size_t *displs) {
  size_t at = 0;
  for (int r = 0; r < P; r++) {
    if (displs[r] != at) return 0;
    at += counts[r];
  }
  return 1;
}

static dist_status all_gather_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, dist_dtype t, dist__pending *p) {
  DIST_CHECK(context(g));
  int P = g->size, me = g->rank;
  size_t *b;
  DIST_CHECK(bytes_of(P, counts, displs, dist_dtype_size(t), &b));
  dist_status s;
  if (packed(P, counts, displs)) s = dist__gloo_all_gather_v(g->gloo, send, recv, b);
  else { /* my block to everyone, each one's block from them */
    size_t *mine = dist__reserve_alloc(sizeof *mine * 2 * (size_t)P, 0);
    if (!mine) s = dist__error(DIST_ERR_NO_MEMORY, "Gloo byte counts for %d ranks", P);
    else {
      for (int r = 0; r < P; r++) mine[r] = b[me], mine[P + r] = 0;
      /* My own block: the exchange copies send + 0 to recv + displs[me]. */
      s = dist__gloo_exchange(g->gloo, send, mine, mine + P, recv, b, b + P);
      dist__reserve_free(mine);
    }
  }
  dist__reserve_free(b);
  return s;
}

static dist_status reduce_scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                    const size_t *displs, dist_dtype t, dist_reduce_op op) {
  DIST_CHECK(context(g));
  size_t es = dist_dtype_size(t);
  for (int r = 0; r < g->size; r++) /* one reduce per chunk, rooted at its owner */
    DIST_CHECK(dist__gloo_reduce(g->gloo, (const char *)send + displs[r] * es, recv, counts[r], t, op, r));
  return DIST_SUCCESS;
}

static dist_status gather_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                            dist_dtype t, int root) {
  DIST_CHECK(context(g));
  int P = g->size, me = g->rank;
  size_t *b, *s = dist__reserve_alloc(2 * (size_t)P * sizeof *s, 1);
  if (!s) return dist__error(DIST_ERR_NO_MEMORY, "Gloo byte counts for %d ranks", P);
  dist_status st = bytes_of(P, counts, displs, dist_dtype_size(t), &b);
  if (!st) {
    s[root] = b[me]; /* my block to the root only */
    st = dist__gloo_exchange(g->gloo, send, s, s + P, recv, me == root ? b : NULL, b + P);
    dist__reserve_free(b);
  }
  dist__reserve_free(s);
  return st;
}

static dist_status scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                             dist_dtype t, int root) {
  DIST_CHECK(context(g));
  int P = g->size, me = g->rank;
  size_t *b, *r = dist__reserve_alloc(2 * (size_t)P * sizeof *r, 1);
  if (!r) return dist__error(DIST_ERR_NO_MEMORY, "Gloo byte counts for %d ranks", P);
  dist_status st = bytes_of(P, counts, displs, dist_dtype_size(t), &b);
  if (!st) {
    r[root] = b[me]; /* my block from the root only, at recv + 0 */
    st = dist__gloo_exchange(g->gloo, send, me == root ? b : NULL, b + P, recv, r, r + P);
    dist__reserve_free(b);
  }
  dist__reserve_free(r);
  return st;
}

static dist_status all_to_all_v(dist__group *g, const void *send, const size_t *sc, const size_t *sd, void *recv,
                                const size_t *rc, const size_t *rd, dist_dtype t, dist__pending *p) {
  DIST_CHECK(context(g));
  int P = g->size;
  size_t es = dist_dtype_size(t), *s, *r;
  DIST_CHECK(bytes_of(P, sc, sd, es, &s));
  dist_status st = bytes_of(P, rc, rd, es, &r);
  /* Always point to point: whether a rank's layout is packed is its own
   * business, and two ranks in different calls (Gloo's alltoallv here, the
   * exchange there) would wait for each other forever. */
  if (!st) {
    st = dist__gloo_exchange(g->gloo, send, s, s + P, recv, r, r + P);
    dist__reserve_free(r);
  }
  dist__reserve_free(s);
  return st;
}

static dist_status barrier(dist__group *g) {
  DIST_CHECK(context(g));
  return dist__gloo_barrier(g->gloo);
}

static dist_status sum16(dist__group *g, void *buf, size_t count, dist_dtype t, dist__pending *p) {
  DIST_CHECK(context(g));
  return dist__gloo_sum16(g->gloo, buf, count, t);
}

static dist_status done(dist__pending *p) { return DIST_SUCCESS; }

static dist_status test(dist__pending *p, int *finished) {
  *finished = 1;
  return DIST_SUCCESS;
}

const dist__backend dist__backend_gloo = {
    .name = "gloo",
    .can_reduce = can_reduce,
    .all_reduce = all_reduce,
    .broadcast = broadcast,
    .reduce = reduce,
    .all_gather_v = all_gather_v,
    .reduce_scatter_v = reduce_scatter_v,
    .gather_v = gather_v,
    .scatter_v = scatter_v,
    .all_to_all_v = all_to_all_v,
    .barrier = barrier,
    .wait = done,
    .test = test,
    .fallback = NULL,
    .sum16 = sum16,
};
