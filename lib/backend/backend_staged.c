/* The staged backend: CUDA memory without NCCL. Each call copies its device
 * buffers to host memory, runs the group's host backend (MPI's; without MPI
 * the shared-memory engine's on one node, else Gloo's) and copies the
 * results back. can_reduce and max_count ask the job's host engine: the
 * shared-memory engine reduces and counts exactly as Gloo does.
 * It synchronises the caller's stream (not the device) around the copies;
 * correct everywhere, fast nowhere: the fallback, and a reference for NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fault.h"
#include "mem/memops.h"


/* A collective's host buffers: hs holds the caller's device data, hr the
 * result (hr == hs for the in-place calls). */
typedef struct stage {
  void *hs, *hr;
} stage;

/* Allocate hs (`sbytes`, copied in from `src` if given) and hr (`rbytes`;
 * in place when hr_size is (size_t)-1), then agree over the group, before
 * anything is posted, on whether every rank has its data in host memory. A
 * rank that returned on its own failure would leave the others waiting in
 * the collective for good; so on a failure anywhere nobody posts, and every
 * rank returns an error naming the lowest failed rank. One small all-reduce
 * per call: cheap next to this fallback's copies. */
static dist_status stage_in(dist__group *g, stage *st, const void *src, size_t sbytes, size_t rbytes) {
  st->hs = st->hr = NULL;
  dist_status s = dist__mem_alloc(DIST_MEM_HOST, sbytes, &st->hs);
  if (!s && src && sbytes) {
    s = dist__fault("staged_download") ? dist__error(DIST_ERR_INTERNAL, "injected fault (staged_download)")
                                       : dist__mem_download(DIST_MEM_CUDA, st->hs, src, sbytes);
    if (!s) s = dist__mem_sync(DIST_MEM_CUDA);
  }
  if (rbytes == (size_t)-1) st->hr = st->hs;
  else if (!s) s = dist__mem_alloc(DIST_MEM_HOST, rbytes, &st->hr);
  char why[256];
  if (s) snprintf(why, sizeof why, "%s", dist_last_error());
  /* (status, rank) as one word whose minimum is the lowest failed rank's */
  int64_t mine = (int64_t)s * ((int64_t)1 << 32) + g->rank, low = 0;
  dist_status a = dist__backend_host(g)->all_reduce(g, &mine, &low, 1, DIST_I64, DIST_MIN, NULL);
  if (!s && !a && low >= 0) return DIST_SUCCESS;
  free(st->hs);
  if (st->hr != st->hs) free(st->hr);
  st->hs = st->hr = NULL;
  if (s) return dist__error(s, "%s (staged collective: not posted on any rank of group '%s')", why, g->name);
  if (a) return dist__error(a, "staged collective: agreeing on the host copies: %s", dist_last_error());
  return dist__error((dist_status)(low >> 32) /* arithmetic shift: the floor */,
                     "rank %d of group '%s' could not stage its device data in host memory (collective not posted)",
                     (int)(low & 0xffffffff), g->name);
}

/* Copy a host result back to the device (only where `dev` is given) and
 * release the host buffers. A failure here is this rank's alone: the data
 * has already moved. */
static dist_status finish(const stage *st, dist_status s, void *dev, size_t bytes) {
  if (!s && dev && bytes) s = dist__mem_upload(DIST_MEM_CUDA, dev, st->hr, bytes);
  if (!s) s = dist__mem_sync(DIST_MEM_CUDA); /* the host buffers must outlive the copy */
  free(st->hs);
  if (st->hr != st->hs) free(st->hr);
  return s;
}

/* As finish, but upload only the ranges the call receives into (MPI leaves
 * the gaps between them untouched, and so must this). */
static dist_status finish_ranges(dist__group *g, const stage *st, dist_status s, void *dev, const size_t *counts,
                                 const size_t *displs, size_t es) {
  for (int r = 0; !s && dev && r < g->size; r++)
    if (counts[r])
      s = dist__mem_upload(DIST_MEM_CUDA, (char *)dev + displs[r] * es, (char *)st->hr + displs[r] * es, counts[r] * es);
  return finish(st, s, NULL, 0);
}

static size_t total(const dist__group *g, const size_t *counts, const size_t *displs) {
  size_t end = 0;
  for (int r = 0; r < g->size; r++)
    if (counts[r] && displs[r] + counts[r] > end) end = displs[r] + counts[r];
  return end;
}

#define IN_PLACE ((size_t)-1)

static dist_status all_reduce(dist__group *g, const void *send, void *recv, size_t n, dist_dtype t, dist_reduce_op op,
                              dist__pending *p) {
  stage st;
  size_t b = n * dist_dtype_size(t);
  DIST_CHECK(stage_in(g, &st, send, b, IN_PLACE));
  return finish(&st, dist__backend_host(g)->all_reduce(g, st.hs, st.hs, n, t, op, NULL), recv, b);
}

static dist_status broadcast(dist__group *g, void *buf, size_t n, dist_dtype t, int root) {
  stage st;
  size_t b = n * dist_dtype_size(t);
  DIST_CHECK(stage_in(g, &st, g->rank == root ? buf : NULL, b, IN_PLACE));
  return finish(&st, dist__backend_host(g)->broadcast(g, st.hs, n, t, root), buf, b);
}

static dist_status reduce(dist__group *g, const void *send, void *recv, size_t n, dist_dtype t, dist_reduce_op op,
                          int root) {
  stage st;
  size_t b = n * dist_dtype_size(t);
  DIST_CHECK(stage_in(g, &st, send, b, IN_PLACE));
  return finish(&st, dist__backend_host(g)->reduce(g, st.hs, st.hs, n, t, op, root), g->rank == root ? recv : NULL, b);
}

static dist_status all_gather_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                                dist_dtype t, dist__pending *p) {
  stage st;
  size_t es = dist_dtype_size(t);
  DIST_CHECK(stage_in(g, &st, send, c[g->rank] * es, total(g, c, d) * es));
  return finish_ranges(g, &st, dist__backend_host(g)->all_gather_v(g, st.hs, st.hr, c, d, t, NULL), recv, c, d, es);
}

static dist_status reduce_scatter_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                                    dist_dtype t, dist_reduce_op op) {
  stage st;
  size_t es = dist_dtype_size(t), rb = c[g->rank] * es;
  DIST_CHECK(stage_in(g, &st, send, total(g, c, d) * es, rb));
  return finish(&st, dist__backend_host(g)->reduce_scatter_v(g, st.hs, st.hr, c, d, t, op), recv, rb);
}

static dist_status gather_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                            dist_dtype t, int root) {
  stage st;
  int me = g->rank;
  size_t es = dist_dtype_size(t);
  DIST_CHECK(stage_in(g, &st, send, c[me] * es, me == root ? total(g, c, d) * es : 0));
  return finish_ranges(g, &st, dist__backend_host(g)->gather_v(g, st.hs, st.hr, c, d, t, root), me == root ? recv : NULL, c, d, es);
}

static dist_status scatter_v(dist__group *g, const void *send, void *recv, const size_t *c, const size_t *d,
                             dist_dtype t, int root) {
  stage st;
  int me = g->rank;
  size_t es = dist_dtype_size(t), rb = c[me] * es;
  DIST_CHECK(stage_in(g, &st, me == root ? send : NULL, me == root ? total(g, c, d) * es : 0, rb));
  return finish(&st, dist__backend_host(g)->scatter_v(g, st.hs, st.hr, c, d, t, root), recv, rb);
}

static dist_status all_to_all_v(dist__group *g, const void *send, const size_t *sc, const size_t *sd, void *recv,
                                const size_t *rc, const size_t *rd, dist_dtype t, dist__pending *p) {
  stage st;
  size_t es = dist_dtype_size(t);
  DIST_CHECK(stage_in(g, &st, send, total(g, sc, sd) * es, total(g, rc, rd) * es));
  return finish_ranges(g, &st, dist__backend_host(g)->all_to_all_v(g, st.hs, sc, sd, st.hr, rc, rd, t, NULL), recv, rc, rd, es);
}

static dist_status barrier(dist__group *g) {
  DIST_CHECK(dist__mem_sync(DIST_MEM_CUDA));
  return dist__backend_host(g)->barrier(g);
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
