/* An all-to-all-v posted before its verification round (spec_a2a.c).
 *
 * A verified call normally runs its check round (agree.c) before any data
 * moves, which adds one latency-bound exchange to every call. For an
 * all-to-all-v on MPI the data can go first: every posting rank sends one
 * message to every peer and receives one from every peer, on one tag of the
 * group's communicator, so no combination of calls on the other ranks can
 * make it hang. A round that finds all ranks in the same call with matching
 * counts lets it finish (dist__spec_finish); any other outcome settles it
 * inside the round, on every rank of the round, speculating or not
 * (dist__spec_settle): receives from ranks that posted nothing are
 * cancelled, messages to ranks that posted no receives are drained there.
 * Afterwards nothing is in flight and the group stays usable, as after a
 * mismatch caught before the data; only the caller's output may hold part of
 * the data. */
#ifndef DISTMGR_SPEC_H
#define DISTMGR_SPEC_H

#include <mpi.h>

#include "core/internal.h"

#define DIST__SPEC_INLINE 32 /* requests kept in the struct: groups of up to 17 ranks */

typedef struct dist__spec {
  MPI_Comm comm;
  int me, size;
  int posted; /* every receive and send is in flight (cleared once they are complete or left to MPI) */
  MPI_Request *q; /* receives from me-1, me-2, ... then sends to me+1, me+2, ... */
  MPI_Request inline_q[DIST__SPEC_INLINE];
  /* This rank's own chunk, copied once the messages are out (own_bytes 0: done). */
  const void *own_src;
  void *own_dst;
  size_t own_bytes;
} dist__spec;

void dist__spec_init(dist__spec *sp);
/* Post the exchange on g's communicator (counts and offsets in elements of
 * `type`, each `esize` bytes). This rank's own chunk is copied later
 * (dist__spec_copy_own), while messages travel. Local; on failure nothing is
 * posted. */
dist_status dist__spec_a2a_post(dist__spec *sp, dist__group *g, const void *send, const size_t *sc, const size_t *sd,
                                void *recv, const size_t *rc, const size_t *rd, MPI_Datatype type, size_t esize);
/* Copy this rank's own chunk, once: the round calls it right after posting
 * its own messages, so that the copy overlaps their latency instead of
 * delaying every peer's data and words behind it (bench/RESULTS.md). */
void dist__spec_copy_own(dist__spec *sp);
/* After a round that passed: copy the own chunk if the round did not, and
 * wait for the data. */
dist_status dist__spec_finish(dist__spec *sp, const char *call);
/* After a round that failed: release what the round did not settle (a wait
 * that gave up: the engine is broken, receives are cancelled where MPI can). */
void dist__spec_release(dist__spec *sp);
/* Inside a round that failed with a speculating rank in it (agree.c):
 * collective over the round's communicator; sp is NULL on ranks that did not
 * post. */
dist_status dist__spec_settle(MPI_Comm comm, int me, int size, dist__spec *sp, const char *call);

#endif
