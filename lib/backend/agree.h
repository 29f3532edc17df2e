/* Agreement: making rank-local outcomes collective (agree.c). */
#ifndef DISTMGR_AGREE_H
#define DISTMGR_AGREE_H

#include <mpi.h>
#include <stdint.h>

#include "core/internal.h"

/* Convert an MPI error code into DIST_ERR_MPI with MPI's text. */
dist_status dist__mpi_error(int code, const char *call);

/* Every rank of the world passes its local status; all return the same code:
 * the most negative one (lowest rank on ties). Rank-local failures thus never
 * leave other ranks waiting in a later collective. Failing ranks keep their
 * own message; others get one naming the rank whose code won. */
dist_status dist__agree(MPI_Comm comm, dist_status mine, const char *what);

/* Both in one all-reduce: the worst local status (as dist__agree) and whether
 * every rank passed the same hash. A hash mismatch (no rank failed) sets
 * *differs on every rank and returns DIST_ERR_MISMATCH without a message: the
 * caller writes one naming what differs. A rank that failed with
 * DIST_ERR_MISMATCH of its own leaves *differs 0. */
dist_status dist__agree_status_hash(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what, int *differs);

/* The one control round behind all of the above and the verification of
 * collectives: an all-reduce of five words (failure, hash, ~hash, balance,
 * speculated), through a group's shared-memory window when it has one
 * (round_shm.h), else by point-to-point messages (one exchange with every
 * rank up to 8 ranks, recursive doubling above), waited for like dist__wait
 * (fault channel and DIST_TIMEOUT observed). A round that fails
 * (a rank failed, hashes or the balance differ) with a speculating rank in
 * it settles the speculative exchanges (spec.h) on every rank before it
 * returns: `spec` is this rank's (NULL: none). */
#define DIST__ROUND_WORDS 5
struct dist__spec;
typedef struct dist__round {
  int64_t in[DIST__ROUND_WORDS], out[DIST__ROUND_WORDS];
  struct dist__spec *spec;
} dist__round;
dist__round dist__round_init(MPI_Comm comm, dist_status local, uint64_t hash);
dist_status dist__round_run(MPI_Comm comm, dist__round *r, const char *call);
/* After a run: DIST_SUCCESS if no rank failed; else `local` (this rank's own
 * message) or an error naming the failing rank, its code range-checked. */
dist_status dist__round_failure(MPI_Comm comm, const dist__round *r, dist_status local, const char *what,
                                const char *where);
int dist__round_hash_differs(const dist__round *r);

/* The same on a group's members, for every layer above the backends (which
 * do not handle communicators). */
struct dist__group;
dist_status dist__agree_group(const struct dist__group *g, dist_status mine, const char *what);
dist_status dist__agree_status_hash_group(const struct dist__group *g, dist_status mine, uint64_t hash, const char *what,
                                          int *differs);
dist__round dist__round_init_group(const struct dist__group *g, dist_status local, uint64_t hash);
dist_status dist__round_run_group(const struct dist__group *g, dist__round *r, const char *call);
/* After a round whose hashes differ: are all members at control point
 * `point` (a name), so that its own exchanges naming what differs can run?
 * DIST_SUCCESS if so, else DIST_ERR_MISMATCH (its message names `what`) on
 * every member. Every member whose round saw the difference must call it,
 * whatever its point (agree.c: each agreement above does). */
dist_status dist__round_same_point_group(const struct dist__group *g, const char *point, const char *what);
dist_status dist__round_failure_group(const struct dist__group *g, const dist__round *r, dist_status local,
                                      const char *what, const char *where);

/* Control exchanges for error paths (naming who differs after a round said
 * that someone does): collective over g's members, waited for like the round
 * (the fault channel can end them). The buffers must be on the heap: a wait
 * that gives up leaves them to MPI. */
dist_status dist__control_all_gather(const struct dist__group *g, const void *mine, size_t bytes, void *all,
                                     const char *what);
dist_status dist__control_all_to_all(const struct dist__group *g, const int64_t *send, int64_t *recv, const char *what);
dist_status dist__control_all_reduce(const struct dist__group *g, const int64_t *in, int64_t *out, int n,
                                     dist_reduce_op op, const char *what);

#endif
