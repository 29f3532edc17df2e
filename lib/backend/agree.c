/* Making rank-local outcomes collective, so that errors never turn into hangs.
 *
 * Every control exchange of the library (the verification round of a
 * collective, the agreement points inside initialize, plans and reducers) is
 * one and the same all-reduce of five words (dist__round_run), so two ranks that reached
 * different control points pair up as a detectable mismatch instead of
 * reading each other's words as garbage. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/fault.h"
#include "core/hash.h"
#include "core/reserve.h"
#include "backend/agree.h"
#include "backend/backend.h"
#include "backend/round_shm.h"
#include "backend/spec.h"
#include "backend/wait.h"
#ifdef HAVE_GLOO
#include "backend/gloo.h"
#endif


static dist__round round_init(int rank, dist_status local, uint64_t hash) {
  dist__round r;
  /* (failing code, lowest rank) in one word: MAX picks the most negative
   * code, the lowest rank on ties. Hashes agree iff max(h) and max(~h) are
   * this rank's own values. */
  r.in[0] = local ? ((int64_t)(-(int64_t)local) << 32) | (int64_t)(0x7FFFFFFF - rank) : 0;
  r.in[1] = local ? 0 : (int64_t)hash;
  r.in[2] = local ? 0 : ~(int64_t)hash;
  r.in[3] = r.in[4] = 0;
  r.spec = NULL;
  if (dist__fault("round_word")) r.in[0] = 0x7fffdc8b4b60LL; /* tests: a word no rank could have sent */
  return r;
}

dist__round dist__round_init(MPI_Comm comm, dist_status local, uint64_t hash) {
  int rank = 0;
  /* A failure here shows in dist__round_run, which asks again. */
  (void)MPI_Comm_rank(comm, &rank);
  return round_init(rank, local, hash);
}

/* The round is point-to-point, recursive doubling (MPICH's all-reduce
 * schedule, with the usual fold for a group size that is not a power of 2):
 * as interruptible as a non-blocking all-reduce (each step's requests are
 * waited for by dist__wait, which the fault channel can end), at the cost of
 * a blocking one: libnbc's MPI_Iallreduce took 2.5x MPI_Allreduce for these
 * four words (bench/RESULTS.md, "bench/callcost"). Every round sends the same
 * pattern on the group's communicator under one tag, so two ranks at
 * different control points still pair up and see different hashes. */
#define ROUND_TAG 0x0c0d

#define W DIST__ROUND_WORDS

/* MAX over (failure, hash, ~hash, speculated), SUM over the balance word:
 * commutative, so every rank ends with the same words. */
static void combine(int64_t *mine, const int64_t *theirs) {
  for (int k = 0; k < W; k++)
    if (k != 3 && theirs[k] > mine[k]) mine[k] = theirs[k];
  mine[3] = (int64_t)((uint64_t)mine[3] + (uint64_t)theirs[3]);
}

/* The same on every rank: a failure, different hashes (every rank sees
 * that when any two differ), or counts that do not balance. */
static int round_failed(const dist__round *r) {
  return r->out[0] || r->out[1] != r->in[1] || r->out[2] != r->in[2] || r->out[3];
}

/* Where a control exchange runs: a group's Gloo context, else an MPI
 * communicator (the world's at start-up, before groups exist). */
typedef struct engine {
  MPI_Comm comm;
  const dist__group *g; /* with a Gloo context; NULL: comm */
  int rank, size;
  dist__spec *spec; /* this rank's posted exchange, if any: its own chunk is copied while the first words travel */
  dist__round_shm *shm; /* a group on one node: the round through shared memory */
} engine;

/* Send w[0..W) to `to` (if >= 0) and receive w[W..2W) from `from` (if >= 0). */
static dist_status step(const engine *e, int to, int from, int64_t *w, const char *call) {
#ifdef HAVE_GLOO
  if (e->g) return dist__gloo_sendrecv(e->g->gloo, w, W * sizeof *w, to, w + W, W * sizeof *w, from);
#endif
  MPI_Comm comm = e->comm;
  MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int rc = MPI_SUCCESS;
  if (from >= 0) rc = MPI_Irecv(w + W, W, MPI_INT64_T, from, ROUND_TAG, comm, &q[1]);
  if (rc == MPI_SUCCESS && to >= 0) rc = MPI_Isend(w, W, MPI_INT64_T, to, ROUND_TAG, comm, &q[0]);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, call); /* (a posted receive stays with the broken rank) */
  dist__spec_copy_own(e->spec);
  for (int i = 0; i < 2; i++)
    if (q[i] != MPI_REQUEST_NULL) DIST_CHECK(dist__wait(&q[i], call, DIST__WAIT_CONTROL));
  return DIST_SUCCESS;
}

/* Recursive doubling over w[0..W) (w[W..2W) receives), with the fold for
 * sizes that are not a power of 2. */
static dist_status exchange_doubling(const engine *e, int64_t *w, const char *call) {
  int me = e->rank, P = e->size;
  int pof2 = 1;
  while (pof2 * 2 <= P) pof2 *= 2;
  int rem = P - pof2, vrank; /* ranks below 2*rem pair up first: the odd one goes on for both */
  dist_status s = DIST_SUCCESS;
  if (me < 2 * rem && me % 2 == 0) {
    s = step(e, me + 1, -1, w, call);
    vrank = -1;
  } else if (me < 2 * rem) {
    s = step(e, -1, me - 1, w, call);
    if (!s) combine(w, w + W);
    vrank = me / 2;
  } else {
    vrank = me - rem;
  }
  for (int mask = 1; !s && vrank >= 0 && mask < pof2; mask <<= 1) {
    int vpeer = vrank ^ mask, peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;
    s = step(e, peer, peer, w, call);
    if (!s) combine(w, w + W);
  }
  if (!s && me < 2 * rem) { /* the result back to the even partner */
    if (me % 2) s = step(e, me - 1, -1, w, call);
    else if (!(s = step(e, -1, me + 1, w, call))) memcpy(w, w + W, W * sizeof *w);
  }
  return s;
}

/* Small groups send their words to every other rank at once: one
 * message's latency instead of log2 P in a row (3 at 3 ranks, with the
 * fold), which is most of the round where ranks share cores
 * (bench/RESULTS.md, "The check round behind the data"). w holds P blocks
 * of W words: mine, then the one from me-1, me-2, ... */
#define DIRECT_MAX 8

static dist_status exchange_direct(const engine *e, int64_t *w, const char *call) {
  int me = e->rank, P = e->size, n = 0, rc = MPI_SUCCESS;
#ifdef HAVE_GLOO
  if (e->g) {
    DIST_CHECK(dist__gloo_exchange_all(e->g->gloo, w, W * sizeof *w, w + W));
    for (int k = 1; k < P; k++) combine(w, w + W * k);
    return DIST_SUCCESS;
  }
#endif
  MPI_Request q[2 * (DIRECT_MAX - 1)];
  for (int k = 1; k < P && rc == MPI_SUCCESS; k++)
    rc = MPI_Irecv(w + W * k, W, MPI_INT64_T, (me - k + P) % P, ROUND_TAG, e->comm, &q[n++]);
  for (int k = 1; k < P && rc == MPI_SUCCESS; k++)
    rc = MPI_Isend(w, W, MPI_INT64_T, (me + k) % P, ROUND_TAG, e->comm, &q[n++]);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, call); /* (posted ones stay with the broken rank) */
  dist__spec_copy_own(e->spec);
  for (int i = 0; i < n; i++) DIST_CHECK(dist__wait(&q[i], call, DIST__WAIT_CONTROL));
  for (int k = 1; k < P; k++) combine(w, w + W * k);
  return DIST_SUCCESS;
}

/* The round on e's communicator, shared window or Gloo context. Every round
 * on one group takes the same path and pattern (they depend on the size and
 * engine only), so two ranks at different control points still pair up.
 * Where its words live: a wait that gives up (a peer's fault, DIST_TIMEOUT)
 * leaves its requests to MPI, which may still write into them later (the
 * exit-time flush), so not the caller's frame but a block such a round never
 * frees, from the reserve (core/reserve.h) when malloc fails: a rank that
 * could not allocate them would skip the one exchange that exists to turn
 * its failure into everyone's. Rounds on shared memory use their window's
 * room (P blocks, no requests to abandon). */
static dist_status round_run(const engine *eng, dist__round *r, const char *call) {
  engine with_spec = *eng, *e = &with_spec;
  with_spec.spec = r->spec;
  int me = e->rank, P = e->size, direct = P <= DIRECT_MAX || e->shm; /* (w holds every rank's words) */
  int64_t *w = e->shm ? dist__round_shm_words(e->shm) : dist__reserve_alloc(W * (size_t)(direct && P > 2 ? P : 2) * sizeof *w, 0);
  if (!w) return dist__error(DIST_ERR_NO_MEMORY, "%s: control words", call);
  memcpy(w, r->in, sizeof r->in);
  dist_status s;
  if (e->shm) { /* a group on one node */
    s = dist__round_shm_exchange(e->shm, e->comm, w, W, e->spec, call);
    for (int k = 1; !s && k < P; k++) combine(w, w + W * k);
  } else {
    s = direct ? exchange_direct(e, w, call) : exchange_doubling(e, w, call);
  }
  if (!s) memcpy(r->out, w, sizeof r->out);
  /* Gloo's steps returned with w; MPI's abandoned requests keep it */
  if (!e->shm && (!s || e->g)) dist__reserve_free(w);
  if (s) return s;
  if (r->out[4] && round_failed(r)) {
    if (e->g) /* only MPI groups speculate: a word no rank could have sent */
      return dist__error(DIST_ERR_MISMATCH, "%s: a rank of a Gloo group says it speculated", call);
    return dist__spec_settle(e->comm, me, P, r->spec, call);
  }
  return DIST_SUCCESS;
}

dist_status dist__round_run(MPI_Comm comm, dist__round *r, const char *call) {
  engine e = {comm, NULL, 0, 1, NULL, NULL};
  DIST_MPI_CALL(MPI_Comm_size(comm, &e.size));
  DIST_MPI_CALL(MPI_Comm_rank(comm, &e.rank));
  return round_run(&e, r, call);
}

static dist_status round_failure(int size, const dist__round *r, dist_status local, const char *what,
                                 const char *where) {
  if (!r->out[0]) return DIST_SUCCESS;
  long code = -(long)(r->out[0] >> 32);
  long who = 0x7FFFFFFF - (long)(r->out[0] & 0xFFFFFFFF);
  int valid = code < 0 && dist__status_valid(code) && who >= 0 && who < size;
  if (local) { /* this rank's own message, under the code every rank returns */
    if (!valid || code == local) return local;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dist_last_error());
    return dist__error((dist_status)code, "%s", msg);
  }
  if (!valid)
    return dist__error(DIST_ERR_MISMATCH,
                       "%s%s: a rank sent a malformed check word (%#llx): ranks are in different calls or run "
                       "different distmgr builds",
                       what, where, (unsigned long long)r->out[0]);
  return dist__error((dist_status)code, "%s%s failed on rank %ld: %s; see that rank's message", what, where, who,
                     dist_status_string((dist_status)code));
}

dist_status dist__round_failure(MPI_Comm comm, const dist__round *r, dist_status local, const char *what,
                                const char *where) {
  int size = 1;
  if (r->out[0]) DIST_MPI_CALL(MPI_Comm_size(comm, &size));
  return round_failure(size, r, local, what, where);
}

int dist__round_hash_differs(const dist__round *r) { return r->out[1] != r->in[1] || r->out[2] != r->in[2]; }

static uint64_t hash_str(const char *s) { return dist__hash(DIST__HASH_SEED, s, strlen(s) + 1); }

static dist_status on_comm(MPI_Comm comm, engine *e) {
  e->comm = comm, e->g = NULL, e->spec = NULL, e->shm = NULL;
  DIST_MPI_CALL(MPI_Comm_rank(comm, &e->rank));
  DIST_MPI_CALL(MPI_Comm_size(comm, &e->size));
  return DIST_SUCCESS;
}

/* A group knows its rank and size: no MPI query on the path of every verified call. */
static dist_status on_group(const dist__group *g, engine *e) {
  e->comm = dist__comm(g), e->g = NULL, e->rank = g->rank, e->size = g->size, e->spec = NULL;
  e->shm = g->round;
#ifdef HAVE_GLOO
  if (g->gloo) e->comm = MPI_COMM_NULL, e->g = g;
#endif
  return DIST_SUCCESS;
}

/* After a round whose hashes differed, every rank runs exactly one more,
 * on the name of its control point alone. The exchanges that then name
 * what differs are each point's own (an all-gather of call signatures, of
 * parameter shapes...): two ranks at different points would wait in
 * different ones for each other. They run only when every rank is at the
 * same point; otherwise each rank returns DIST_ERR_MISMATCH here. */
static dist_status same_point(const engine *e, const char *point, const char *what) {
  dist__round r = round_init(e->rank, DIST_SUCCESS, hash_str(point) ^ 0x5a5a5a5a5a5a5a5aULL);
  char call[200];
  snprintf(call, sizeof call, "%s (which control point)", what);
  DIST_CHECK(round_run(e, &r, call));
  if (!dist__round_hash_differs(&r)) return DIST_SUCCESS;
  return dist__error(DIST_ERR_MISMATCH,
                     "%s: the ranks reached different points of the program (a call skipped, added or reordered "
                     "on some rank)",
                     what);
}

/* One round; *differs: the hashes disagree (no rank failed) and every rank
 * is at this point. */
static dist_status agree_round(const engine *e, dist_status mine, uint64_t hash, const char *what, int *differs) {
  *differs = 0;
  if (e->size == 1) return mine;
  /* The point's name enters the hash: two different agreement points never pair silently. */
  dist__round r = round_init(e->rank, mine, hash ^ hash_str(what));
  dist_status s = round_run(e, &r, what);
  if (!s) s = round_failure(e->size, &r, mine, what, "");
  if (!s && dist__round_hash_differs(&r)) {
    s = same_point(e, what, what);
    *differs = !s;
  }
  return s;
}

/* The hash is the point's name alone: ranks at this point never differ, and
 * ranks elsewhere are reported by same_point. */
static dist_status agree_on(const engine *e, dist_status mine, const char *what) {
  int differs;
  return agree_round(e, mine, 0, what, &differs);
}

dist_status dist__agree(MPI_Comm comm, dist_status mine, const char *what) {
  engine e;
  DIST_CHECK(on_comm(comm, &e));
  return agree_on(&e, mine, what);
}

dist_status dist__agree_status_hash(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what, int *differs) {
  engine e;
  *differs = 0;
  DIST_CHECK(on_comm(comm, &e));
  dist_status s = agree_round(&e, mine, hash, what, differs);
  return *differs ? DIST_ERR_MISMATCH : s; /* the caller names what differs */
}

/* ---- control exchanges of error paths (agree.h) ---------------------------- */

dist_status dist__control_all_gather(const dist__group *g, const void *mine, size_t bytes, void *all, const char *what) {
#ifdef HAVE_GLOO
  if (g->gloo) {
    size_t *b = malloc(sizeof *b * (size_t)g->size);
    if (!b) return dist__error(DIST_ERR_NO_MEMORY, "%s: counts", what);
    for (int q = 0; q < g->size; q++) b[q] = bytes;
    dist_status s = dist__gloo_all_gather_v(g->gloo, mine, all, b);
    free(b);
    return s;
  }
#endif
  MPI_Request q;
  char call[160];
  snprintf(call, sizeof call, "MPI_Iallgather (%s)", what);
  if (bytes > INT_MAX) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %zu bytes per rank", call, bytes);
  int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, dist__comm(g), &q);
  return dist__wait_posted(rc, &q, call, DIST__WAIT_CONTROL);
}

dist_status dist__control_all_to_all(const dist__group *g, const int64_t *send, int64_t *recv, const char *what) {
#ifdef HAVE_GLOO
  if (g->gloo) {
    size_t *b = malloc(sizeof *b * (size_t)g->size);
    if (!b) return dist__error(DIST_ERR_NO_MEMORY, "%s: counts", what);
    for (int q = 0; q < g->size; q++) b[q] = sizeof *send;
    dist_status s = dist__gloo_all_to_all_v(g->gloo, send, b, recv, b);
    free(b);
    return s;
  }
#endif
  MPI_Request q;
  char call[160];
  snprintf(call, sizeof call, "MPI_Ialltoall (%s)", what);
  int rc = MPI_Ialltoall(send, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, dist__comm(g), &q);
  return dist__wait_posted(rc, &q, call, DIST__WAIT_CONTROL);
}

dist_status dist__control_all_reduce(const dist__group *g, const int64_t *in, int64_t *out, int n, dist_reduce_op op,
                                     const char *what) {
  MPI_Request q;
  char call[160];
  snprintf(call, sizeof call, "MPI_Iallreduce (%s)", what);
  if (op != DIST_MIN && op != DIST_MAX && op != DIST_SUM)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: op %d is not min, max or sum", call, (int)op);
#ifdef HAVE_GLOO
  if (g->gloo) {
    memcpy(out, in, sizeof *in * (size_t)n);
    return dist__gloo_all_reduce(g->gloo, out, (size_t)n, DIST_I64, op);
  }
#endif
  MPI_Op mop = op == DIST_MIN ? MPI_MIN : op == DIST_MAX ? MPI_MAX : MPI_SUM;
  int rc = MPI_Iallreduce(in, out, n, MPI_INT64_T, mop, dist__comm(g), &q);
  return dist__wait_posted(rc, &q, call, DIST__WAIT_CONTROL);
}

/* ---- the same on groups ------------------------------------------------------ */

dist_status dist__agree_group(const dist__group *g, dist_status mine, const char *what) {
  engine e;
  DIST_CHECK(on_group(g, &e));
  return agree_on(&e, mine, what);
}

dist_status dist__agree_status_hash_group(const dist__group *g, dist_status mine, uint64_t hash, const char *what,
                                          int *differs) {
  engine e;
  *differs = 0;
  DIST_CHECK(on_group(g, &e));
  dist_status s = agree_round(&e, mine, hash, what, differs);
  return *differs ? DIST_ERR_MISMATCH : s; /* the caller names what differs */
}

dist__round dist__round_init_group(const dist__group *g, dist_status local, uint64_t hash) {
  return round_init(g->rank, local, hash);
}

dist_status dist__round_run_group(const dist__group *g, dist__round *r, const char *call) {
  engine e;
  DIST_CHECK(on_group(g, &e));
  return round_run(&e, r, call);
}

dist_status dist__round_same_point_group(const dist__group *g, const char *point, const char *what) {
  engine e;
  DIST_CHECK(on_group(g, &e));
  return same_point(&e, point, what);
}

dist_status dist__round_failure_group(const dist__group *g, const dist__round *r, dist_status local, const char *what,
                                      const char *where) {
  return round_failure(g->size, r, local, what, where);
}
