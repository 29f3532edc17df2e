/* The check round of a group whose members share one node, through shared
 * memory instead of messages (agree.c): an MPI shared-memory window, or
 * without MPI (Gloo) a POSIX shared-memory segment, unlinked as soon as every
 * member has mapped it.
 *
 * Each member owns a 64-byte slot per round parity: it writes its words and
 * then the round's number (release), and reads every peer's slot once that
 * number has arrived (acquire). A member writes round k+2's words only after
 * it has read everyone's round k+1 words, which no peer writes before it has
 * read round k: two parities suffice. Every round of the group takes this
 * path and counts, so two ranks at different control points still meet in
 * the same round and see different hashes, as with messages. No message
 * means no sends, receives and matching for the MPI engine to progress: on
 * shared cores that was most of the round's cost (bench/RESULTS.md). */
#ifndef DISTMGR_ROUND_SHM_H
#define DISTMGR_ROUND_SHM_H

#include <mpi.h>
#include <stdint.h>

#include "core/internal.h"

struct dist__group;
struct dist__spec;
typedef struct dist__round_shm dist__round_shm;

/* Collective over g's members (after the group was agreed; over its
 * communicator or its Gloo context): gives g shared memory for its rounds when
 * all its members share a node and dist__engine.round_shm allows it; else
 * leaves it without (messages). The outcome is the same on every member. */
dist_status dist__round_shm_open(struct dist__group *g);
/* Collective over g's members (at finalize; a broken rank keeps it). */
void dist__round_shm_close(struct dist__group *g);
/* Publish w[0..n) for this round, copy the speculative exchange's own chunk
 * while peers catch up, then wait for every peer's words: w + n*k receives
 * those of rank me-k. On MPI the wait is polled as dist__wait's control waits
 * (progressing MPI on comm); without MPI (comm is MPI_COMM_NULL) it checks
 * that the peer it waits for is alive and bounds itself by DIST_TIMEOUT. */
/* Room for a round's words: DIST__ROUND_WORDS per member. */
int64_t *dist__round_shm_words(dist__round_shm *sh);
dist_status dist__round_shm_exchange(dist__round_shm *sh, MPI_Comm comm, int64_t *w, int n, struct dist__spec *spec,
                                     const char *call);

#endif
