/* The staged backend: CUDA memory without NCCL. Each call copies its device
 * buffers to host memory, runs the host engine's backend (MPI's, or Gloo's
 * without MPI) and copies the results back.
 * It synchronises the caller's stream (not the device) around the copies;
 * correct everywhere, fast nowhere: the fallback, and a reference for NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fault.h"
#include "mem/memops.h"


/* A local failure to copy a device buffer to the host, kept until the
 * collective has been posted. */
typedef struct late {
  dist_status s;
  char why[256];
} late;

/* A host copy of `bytes` of device memory (copied in if `src` is given). A
 * failed download still gives a buffer, zeroed, with the failure in *l: the
 * caller posts its collective anyway (a rank that returned here would leave
 * the others waiting in it) and finish makes every rank fail. Only a failed
 * host allocation returns at once. */
static dist_status host_copy(const void *src, size_t bytes, void **out, late *l) {
  DIST_CHECK(dist__mem_alloc(DIST_MEM_HOST, bytes, out));
  if (!src || !bytes) return DIST_SUCCESS;
  dist_status s = dist__fault("staged_download") ? dist__error(DIST_ERR_INTERNAL, "injected fault (staged_download)")
                                                  : dist__mem_download(DIST_MEM_CUDA, *out, src, bytes);
  if (!s) s = dist__mem_sync(DIST_MEM_CUDA);
  if (s) {
    memset(*out, 0, bytes);
    if (!l->s) l->s = s, snprintf(l->why, sizeof l->why, "%s", dist_last_error());
  }
  return DIST_SUCCESS;
}

/* Whether a rank of the group lost its data to a failed download: one small
 * all-reduce after the collective (cheap next to this fallback's copies), so
 * that no rank takes a result holding zeros for another rank's data unaware.
 * Then no rank copies its result back, and every rank returns an error. */
static void agree_late(dist__group *g, late *l) {
  /* (status, rank) as one word whose minimum is the lowest failed rank's */
  int64_t mine = (int64_t)l->s * ((int64_t)1 << 32) + g->rank, low = 0;
  dist_status s = dist__backend_host_engine()->all_reduce(g, &mine, &low, 1, DIST_I64, DIST_MIN, NULL);
  if (l->s) return;
  if (s) {
    l->s = s;
    snprintf(l->why, sizeof l->why, "staged collective: agreeing on the device copies: %s", dist_last_error());
  } else if (low < 0) {
    l->s = (dist_status)(low >> 32); /* arithmetic shift: the floor */
    snprintf(l->why, sizeof l->why, "rank %d of group '%s' could not copy its device buffer to the host",
             (int)(low & 0xffffffff), g->name);
  }
}

/* Copy a host result back to the device and release both host buffers. g:
 * the group, whose ranks then agree on the downloads first; NULL when the
 * caller has already agreed (finish_ranges). */
static dist_status finish(dist__group *g, late *l, dist_status s, void *dev, void *hrecv, size_t bytes,
                          void *hsend) {
  if (g) agree_late(g, l);
  if (!l->s) {
    if (!s && dev && bytes) s = dist__mem_upload(DIST_MEM_CUDA, dev, hrecv, bytes);
    if (!s) s = dist__mem_sync(DIST_MEM_CUDA); /* the host buffers must outlive the copy */
  }
  free(hsend);
  if (hrecv != hsend) free(hrecv);
  if (l->s) return dist__error(l->s, "%s (staged collective: posted with zeros for that data, no result copied back)", l->why);
  return s;
}

/* As finish, but upload only the ranges the call receives into (MPI leaves
 * the gaps between them untouched, and so must this). */
static dist_status finish_ranges(dist__group *g, late *l, dist_status s, void *dev, void *hrecv,
                                 const size_t *counts, const size_t *displs, size_t es, void *hsend) {
  agree_late(g, l);
  for (int r = 0; !s && !l->s && dev && r < g->size; r++)
    if (counts[r])
      s = dist__mem_upload(DIST_MEM_CUDA, (char *)dev + displs[r] * es, (char *)hrecv + displs[r] * es, counts[r] * es);
  return finish(NULL, l, s, NULL, hrecv, 0, hsend);
}

static size_t total(const dist__group *g, const size_t *counts, const size_t *displs) {
  size_t end = 0;
  for (int r = 0; r < g->size; r++)
    if (counts[r] && displs[r] + counts[r] > end) end = displs[r] + counts[r];
  return end;
}

static dist_status all_reduce(dist__group *g, const void *send, void *recv, size_t n, dist_dtype t, dist_reduce_op op,
                              dist__pending *p) {
  void *h;
  late l = {0};
  size_t b = n * dist_dtype_size(t);
  DIST_CHECK(host_copy(send, b, &h, &l));
  return finish(g, &l, dist__backend_host_engine()->all_reduce(g, h, h, n, t, op, NULL), recv, h, b, h);
}

static dist_status broadcast(dist__group *g, void *buf, size_t n, dist_dtype t, int root) {
  void *h;
  late l = {0};
  size_t b = n * dist_dtype_size(t);
  DIST_CHECK(host_copy(g->rank == root ? buf : NULL, b, &h, &l));
  return finish(g, &l, dist__backend_host_engine()->broadcast(g, h, n, t, root), buf, h, b, h);
}

static dist_status reduce(dist__group *g, const void *send, void *recv, size_t n, dist_dtype t, dist_reduce_op op,
                          int root) {
  void *h;
  late l = {0};
  size_t b = n * dist_dtype_size(t);
  DIST_CHECK(host_copy(send, b, &h, &l));
  return finish(g, &l, dist__backend_host_engine()->reduce(g, h, h, n, t, op, root), g->rank == root ? recv : NULL, h, b, h);
}

static dist_status all_gather_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                                dist_dtype t, dist__pending *p) {
  void *hs, *hr;
  late l = {0};
  size_t es = dist_dtype_size(t), rb = total(g, c, d) * es;
  DIST_CHECK(host_copy(send, c[g->rank] * es, &hs, &l));
  dist_status s = dist__mem_alloc(DIST_MEM_HOST, rb, &hr);
  if (s) return free(hs), s; /* not posted: report the allocation */
  return finish_ranges(g, &l, dist__backend_host_engine()->all_gather_v(g, hs, hr, c, d, t, NULL), recv, hr, c, d, es, hs);
}

static dist_status reduce_scatter_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                                    dist_dtype t, dist_reduce_op op) {
  void *hs, *hr;
  late l = {0};
  size_t es = dist_dtype_size(t), rb = c[g->rank] * es;
  DIST_CHECK(host_copy(send, total(g, c, d) * es, &hs, &l));
  dist_status s = dist__mem_alloc(DIST_MEM_HOST, rb, &hr);
  if (s) return free(hs), s; /* not posted: report the allocation */
  return finish(g, &l, dist__backend_host_engine()->reduce_scatter_v(g, hs, hr, c, d, t, op), recv, hr, rb, hs);
}

static dist_status gather_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                            dist_dtype t, int root) {
  void *hs, *hr = NULL;
  late l = {0};
  int me = g->rank;
  size_t es = dist_dtype_size(t), rb = me == root ? total(g, c, d) * es : 0;
  DIST_CHECK(host_copy(send, c[me] * es, &hs, &l));
  dist_status s = dist__mem_alloc(DIST_MEM_HOST, rb, &hr);
  if (s) return free(hs), s; /* not posted: report the allocation */
  return finish_ranges(g, &l, dist__backend_host_engine()->gather_v(g, hs, hr, c, d, t, root), me == root ? recv : NULL, hr, c, d, es, hs);
}

static dist_status scatter_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                             dist_dtype t, int root) {
  void *hs, *hr;
  late l = {0};
  int me = g->rank;
  size_t es = dist_dtype_size(t), rb = c[me] * es;
  DIST_CHECK(host_copy(me == root ? send : NULL, me == root ? total(g, c, d) * es : 0, &hs, &l));
  dist_status s = dist__mem_alloc(DIST_MEM_HOST, rb, &hr);
  if (s) return free(hs), s; /* not posted: report the allocation */
  return finish(g, &l, dist__backend_host_engine()->scatter_v(g, hs, hr, c, d, t, root), recv, hr, rb, hs);
}

static dist_status all_to_all_v(dist__group *g, const void *send, const size_t *sc, const size_t *sd, void *recv,
                                const size_t *rc, const size_t *rd, dist_dtype t, dist__pending *p) {
  void *hs, *hr;
  late l = {0};
  size_t es = dist_dtype_size(t), rb = total(g, rc, rd) * es;
  DIST_CHECK(host_copy(send, total(g, sc, sd) * es, &hs, &l));
  dist_status s = dist__mem_alloc(DIST_MEM_HOST, rb, &hr);
  if (s) return free(hs), s; /* not posted: report the allocation */
  return finish_ranges(g, &l, dist__backend_host_engine()->all_to_all_v(g, hs, sc, sd, hr, rc, rd, t, NULL), recv, hr, rc, rd, es, hs);
}

static dist_status barrier(dist__group *g) {
  DIST_CHECK(dist__mem_sync(DIST_MEM_CUDA));
  return dist__backend_host_engine()->barrier(g);
}

static int can_reduce(dist_dtype t, dist_reduce_op op) { return dist__backend_host_engine()->can_reduce(t, op); }

/* Every call above completes before returning. */
static dist_status wait(dist__pending *p) { return DIST_SUCCESS; }
static dist_status test(dist__pending *p, int *done) {
  *done = 1;
  return DIST_SUCCESS;
}

/* The data moves through the host engine: its limit. */
static size_t max_count(void) {
  const dist__backend *h = dist__backend_host_engine();
  return h->max_count ? h->max_count() : SIZE_MAX;
}

const dist__backend dist__backend_staged = {
    "staged", can_reduce, all_reduce, broadcast, reduce, all_gather_v, reduce_scatter_v,
    gather_v, scatter_v, all_to_all_v, barrier, wait, test, NULL, NULL, NULL, max_count,
};
