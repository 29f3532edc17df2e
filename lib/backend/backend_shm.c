/* The shared-memory engine (backend_shm.h).
 *
 * One segment per group: a cache line per member holding its barrier
 * counter (a dist__shm_flag) and two words, then two parities of P + 1
 * regions of SLOT bytes: each member's slot and a shared `out`. Data moves
 * in rounds of at most SLOT bytes per member: a member writes its part into
 * its slot of the round's parity, passes a barrier, and reads the others'.
 * Rounds alternate parities, so round t + 2 reuses round t's regions only
 * after a barrier that every member reaches once it has read them: one
 * barrier per round (two for reductions, whose results go through `out`).
 *
 * Reductions are split by element range: each member reduces its share of
 * the round over every slot, in rank order, into `out`, which everyone then
 * copies. So every member gets the same bits, whatever the op.
 *
 * Every call blocks (like Gloo's): a non-blocking call is complete when it
 * returns. A peer that dies or stalls ends the wait (shm_seg.h).
 *
 * The segment is made at the group's first host collective (every member is
 * in it); until then, and on every member for good if one refuses, the calls
 * go to Gloo. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_shm.h"
#include "backend/shm_seg.h"
#include "mem/reduce_host.h"

#define SLOT ((size_t)256 * 1024) /* bytes per member, region and parity */

typedef struct line {
  dist__shm_flag gen; /* barriers passed */
  int64_t word[2];    /* per parity: a number every member publishes with its round (all-to-all) */
  char pad[64 - sizeof(dist__shm_flag) - 2 * sizeof(int64_t)];
} line;
_Static_assert(sizeof(line) == 64, "one cache line per member");

struct dist__shm_data {
  dist__shm_seg seg;
  line *lines;
  char *data;
  int64_t gen, rounds; /* barriers and rounds so far: the same on every member */
  int me, size;
  dist__shm_wait how;  /* how a barrier waits */
};

void dist__shm_data_init(dist__group *g) {
  g->shm_state = DIST__SHM_NONE;
  /* (every member's part of a slot must hold 64 bytes: up to 4096 members) */
  if (dist__engine.shm_data && g->rank >= 0 && g->size >= 2 && g->size <= (int)(SLOT / 64) && g->gloo &&
      dist__shm_one_node(g))
    g->shm_state = DIST__SHM_PENDING;
}

/* Make g's segment: at its first host collective, on every member alike.
 * A refusal (a member short of memory, a full /dev/shm) puts g back on Gloo
 * (state NONE) on every member; the caller then runs this call on Gloo. */
static dist_status open_now(dist__group *g) {
  size_t P = (size_t)g->size, bytes = P * sizeof(line) + 2 * (P + 1) * SLOT;
  dist__shm_seg seg;
  /* Allocated first: a member without it refuses the segment. */
  struct dist__shm_data *d = calloc(1, sizeof *d);
  dist_status s = dist__shm_seg_open(g, "data", bytes, d != NULL, &seg);
  if (s || !seg.map) {
    free(d);
    g->shm_state = DIST__SHM_NONE;
    if (!s) dist_log(DIST_LOG_INFO, "group '%s': host collectives on Gloo (no shared-memory segment)", g->name);
    return s;
  }
  d->seg = seg, d->lines = seg.map, d->data = (char *)seg.map + P * sizeof(line), d->me = g->rank, d->size = g->size;
  /* A core for every rank of the node: spin through a peer's usual lateness
   * (waking from a futex costs 10-50 us); fewer cores: yield the core to
   * the rank that is late for a while, then sleep (bench/RESULTS.md). The
   * bound without DIST_TIMEOUT is Gloo's own, which this engine replaces. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int ranks = dist__engine.node_tasks > 0 ? dist__engine.node_tasks : g->size;
  d->how = (dist__shm_wait){cores >= ranks ? 200e-6 : 0, cores >= ranks ? 0 : 50e-6, dist__engine.gloo_timeout};
  g->shm = d;
  g->shm_state = DIST__SHM_OPEN;
  dist_log(DIST_LOG_DEBUG, "group '%s': host collectives through shared memory (%zu bytes)", g->name, bytes);
  return DIST_SUCCESS;
}

/* Run `gloo_call` instead when g is not (or no longer) on this engine. */
#define ON_SHM(g, gloo_call)                                      \
  do {                                                            \
    if ((g)->shm_state == DIST__SHM_PENDING) DIST_CHECK(open_now(g)); \
    if ((g)->shm_state != DIST__SHM_OPEN) return (gloo_call);      \
  } while (0)

void dist__shm_data_close(dist__group *g) {
  g->shm_state = DIST__SHM_NONE;
  if (!g->shm) return;
  dist__shm_seg_close(&g->shm->seg);
  free(g->shm);
  g->shm = NULL;
}

/* ---- rounds -------------------------------------------------------------------- */

static char *region(const struct dist__shm_data *d, int par, int r) {
  return d->data + ((size_t)par * (size_t)(d->size + 1) + (size_t)r) * SLOT;
}
static char *slot(const struct dist__shm_data *d, int par, int r) { return region(d, par, r); }
static char *out(const struct dist__shm_data *d, int par) { return region(d, par, d->size); }
/* A slot split in one part per member (each 64-byte aligned). */
static size_t part(const struct dist__shm_data *d) { return (SLOT / (size_t)d->size) & ~(size_t)63; }

/* The parity of the next round. */
static int next_round(struct dist__shm_data *d) { return (int)(d->rounds++ & 1); }

static dist_status barrier_(struct dist__shm_data *d, const char *call) {
  int64_t k = ++d->gen;
  dist__shm_flag_raise(&d->lines[d->me].gen, k);
  double t0 = dist__shm_seconds();
  for (int j = 1; j < d->size; j++) {
    int peer = (d->me + j) % d->size;
    DIST_CHECK(dist__shm_flag_wait(&d->seg, &d->lines[peer].gen, k, peer, t0, &d->how, call, "a shared-memory collective"));
  }
  return DIST_SUCCESS;
}

static size_t min_(size_t a, size_t b) { return a < b ? a : b; }
/* n bytes from base + off (nothing, and no pointer formed, when n is 0:
 * an empty block's base may be NULL). */
static void copy_from(void *dst, const void *base, size_t off, size_t n) {
  if (n) memcpy(dst, (const char *)base + off, n);
}
static void copy_to(void *base, size_t off, const void *src, size_t n) {
  if (n) memcpy((char *)base + off, src, n);
}
/* The rounds of `bytes` in pieces of `piece`. */
static size_t rounds_of(size_t bytes, size_t piece) { return (bytes + piece - 1) / piece; }

/* Bytes [at, at + piece) of a block of `bytes`, clipped: how many there are. */
static size_t clip(size_t bytes, size_t at, size_t piece) { return at >= bytes ? 0 : min_(piece, bytes - at); }

/* Every member's send reduced into recv (all members, or only `root` when
 * root >= 0). */
static dist_status reduce_rounds(struct dist__shm_data *d, const char *call, const void *send, void *recv, size_t n,
                                 dist_dtype t, dist_reduce_op op, int root) {
  size_t es = dist_dtype_size(t), per = SLOT / es;
  for (size_t off = 0; off < n; off += per) {
    size_t len = min_(per, n - off);
    int par = next_round(d);
    memcpy(slot(d, par, d->me), (const char *)send + off * es, len * es);
    DIST_CHECK(barrier_(d, call));
    size_t lo = len * (size_t)d->me / (size_t)d->size, hi = len * (size_t)(d->me + 1) / (size_t)d->size;
    if (hi > lo) {
      char *o = out(d, par) + lo * es;
      memcpy(o, slot(d, par, 0) + lo * es, (hi - lo) * es);
      for (int r = 1; r < d->size; r++) dist__reduce_host(o, slot(d, par, r) + lo * es, hi - lo, t, op);
    }
    DIST_CHECK(barrier_(d, call));
    if (root < 0 || root == d->me) memcpy((char *)recv + off * es, out(d, par), len * es);
  }
  return DIST_SUCCESS;
}

/* ---- the ops ------------------------------------------------------------------- */

static int can_reduce(dist_dtype t, dist_reduce_op op) {
  return !dist__dtype_is16(t) && op != DIST_AVG && dist__reduce_host_can(t, op);
}

static dist_status all_reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t,
                              dist_reduce_op op, dist__pending *p) {
  ON_SHM(g, dist__backend_gloo.all_reduce(g, send, recv, count, t, op, p));
  return reduce_rounds(g->shm, "all-reduce (shared memory)", send, recv, count, t, op, -1);
}

static dist_status reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t,
                          dist_reduce_op op, int root) {
  ON_SHM(g, dist__backend_gloo.reduce(g, send, recv, count, t, op, root));
  return reduce_rounds(g->shm, "reduce (shared memory)", send, recv, count, t, op, root);
}

static dist_status sum16(dist__group *g, void *buf, size_t count, dist_dtype t, dist__pending *p) {
  ON_SHM(g, dist__backend_gloo.sum16(g, buf, count, t, p));
  return reduce_rounds(g->shm, "16-bit sum (shared memory)", buf, buf, count, t, DIST_SUM, -1);
}

static dist_status broadcast(dist__group *g, void *buf, size_t count, dist_dtype t, int root) {
  ON_SHM(g, dist__backend_gloo.broadcast(g, buf, count, t, root));
  struct dist__shm_data *d = g->shm;
  size_t bytes = count * dist_dtype_size(t);
  for (size_t at = 0; at < bytes; at += SLOT) {
    size_t len = min_(SLOT, bytes - at);
    int par = next_round(d);
    if (d->me == root) memcpy(slot(d, par, root), (char *)buf + at, len);
    DIST_CHECK(barrier_(d, "broadcast (shared memory)"));
    if (d->me != root) memcpy((char *)buf + at, slot(d, par, root), len);
  }
  return DIST_SUCCESS;
}

/* Each member's block to every member (root < 0) or to the root. */
static dist_status gather_rounds(dist__group *g, const char *call, const void *send, void *recv, const size_t *counts,
                                 const size_t *displs, dist_dtype t, int root) {
  struct dist__shm_data *d = g->shm;
  size_t es = dist_dtype_size(t), most = 0;
  for (int r = 0; r < d->size; r++) most = counts[r] > most ? counts[r] : most;
  size_t T = rounds_of(most * es, SLOT);
  for (size_t k = 0; k < T; k++) {
    size_t at = k * SLOT;
    int par = next_round(d);
    copy_from(slot(d, par, d->me), send, at, clip(counts[d->me] * es, at, SLOT));
    DIST_CHECK(barrier_(d, call));
    if (root >= 0 && root != d->me) continue;
    for (int r = 0; r < d->size; r++) copy_to(recv, displs[r] * es + at, slot(d, par, r), clip(counts[r] * es, at, SLOT));
  }
  return DIST_SUCCESS;
}

static dist_status all_gather_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, dist_dtype t, dist__pending *p) {
  ON_SHM(g, dist__backend_gloo.all_gather_v(g, send, recv, counts, displs, t, p));
  return gather_rounds(g, "all-gather (shared memory)", send, recv, counts, displs, t, -1);
}

static dist_status gather_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                            dist_dtype t, int root) {
  ON_SHM(g, dist__backend_gloo.gather_v(g, send, recv, counts, displs, t, root));
  return gather_rounds(g, "gather (shared memory)", send, recv, counts, displs, t, root);
}

static dist_status scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                             dist_dtype t, int root) {
  ON_SHM(g, dist__backend_gloo.scatter_v(g, send, recv, counts, displs, t, root));
  struct dist__shm_data *d = g->shm;
  size_t es = dist_dtype_size(t), b = part(d), most = 0;
  for (int r = 0; r < d->size; r++) most = counts[r] > most ? counts[r] : most;
  size_t T = rounds_of(most * es, b);
  for (size_t k = 0; k < T; k++) {
    size_t at = k * b;
    int par = next_round(d);
    if (d->me == root)
      for (int q = 0; q < d->size; q++)
        copy_from(slot(d, par, root) + (size_t)q * b, send, displs[q] * es + at, clip(counts[q] * es, at, b));
    DIST_CHECK(barrier_(d, "scatter (shared memory)"));
    copy_to(recv, at, slot(d, par, root) + (size_t)d->me * b, clip(counts[d->me] * es, at, b));
  }
  return DIST_SUCCESS;
}

/* Block q of every member's send reduced, in rank order, into member q's recv. */
static dist_status reduce_scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                    const size_t *displs, dist_dtype t, dist_reduce_op op) {
  ON_SHM(g, dist__backend_gloo.reduce_scatter_v(g, send, recv, counts, displs, t, op));
  struct dist__shm_data *d = g->shm;
  size_t es = dist_dtype_size(t), b = part(d), most = 0; /* b: a multiple of 64, so of every element size */
  for (int r = 0; r < d->size; r++) most = counts[r] > most ? counts[r] : most;
  size_t T = rounds_of(most * es, b), mine = counts[d->me] * es;
  for (size_t k = 0; k < T; k++) {
    size_t at = k * b;
    int par = next_round(d);
    for (int q = 0; q < d->size; q++)
      copy_from(slot(d, par, d->me) + (size_t)q * b, send, displs[q] * es + at, clip(counts[q] * es, at, b));
    DIST_CHECK(barrier_(d, "reduce-scatter (shared memory)"));
    size_t len = clip(mine, at, b);
    if (!len) continue;
    char *o = (char *)recv + at;
    memcpy(o, slot(d, par, 0) + (size_t)d->me * b, len);
    for (int r = 1; r < d->size; r++) dist__reduce_host(o, slot(d, par, r) + (size_t)d->me * b, len / es, t, op);
  }
  return DIST_SUCCESS;
}

/* Each member's own counts: the number of rounds travels with round 0 (the
 * parity's word), and every member runs the largest. */
static dist_status all_to_all_v(dist__group *g, const void *send, const size_t *sc, const size_t *sd, void *recv,
                                const size_t *rc, const size_t *rd, dist_dtype t, dist__pending *p) {
  ON_SHM(g, dist__backend_gloo.all_to_all_v(g, send, sc, sd, recv, rc, rd, t, p));
  struct dist__shm_data *d = g->shm;
  const char *call = "all-to-all (shared memory)";
  size_t es = dist_dtype_size(t), b = part(d), most = 0;
  for (int r = 0; r < d->size; r++) {
    most = sc[r] > most ? sc[r] : most;
    most = rc[r] > most ? rc[r] : most;
  }
  size_t T = rounds_of(most * es, b);
  for (size_t k = 0; k < (T ? T : 1); k++) {
    size_t at = k * b;
    int par = next_round(d);
    for (int q = 0; q < d->size; q++) copy_from(slot(d, par, d->me) + (size_t)q * b, send, sd[q] * es + at, clip(sc[q] * es, at, b));
    if (k == 0) d->lines[d->me].word[par] = (int64_t)T; /* published by the barrier's release */
    DIST_CHECK(barrier_(d, call));
    if (k == 0)
      for (int r = 0; r < d->size; r++) {
        size_t theirs = (size_t)d->lines[r].word[par];
        T = theirs > T ? theirs : T;
      }
    for (int r = 0; r < d->size; r++) copy_to(recv, rd[r] * es + at, slot(d, par, r) + (size_t)d->me * b, clip(rc[r] * es, at, b));
  }
  return DIST_SUCCESS;
}

static dist_status barrier(dist__group *g) {
  ON_SHM(g, dist__backend_gloo.barrier(g));
  return barrier_(g->shm, "barrier (shared memory)");
}

/* Every call above completes before returning. */
static dist_status shm_wait(dist__pending *p) {
  (void)p;
  return DIST_SUCCESS;
}
static dist_status shm_test(dist__pending *p, int *done) {
  (void)p;
  *done = 1;
  return DIST_SUCCESS;
}

const dist__backend dist__backend_shm = {
    .name = "shm",
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
    .wait = shm_wait,
    .test = shm_test,
    .sum16 = sum16,
};
