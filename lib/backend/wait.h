/* Waiting for MPI requests without hanging silently: while a request is
 * pending, the fault channel (faults.c) is watched so that a rank that
 * failed or left elsewhere ends the wait with an error, and DIST_TIMEOUT
 * bounds the wait, naming the ranks that did not arrive (board.c). An
 * abandoned request leaves its communicator unusable, so a failed wait stops
 * the library on this rank (dist__engine.broken) and tells the others. */
#ifndef DISTMGR_WAIT_H
#define DISTMGR_WAIT_H

#include "backend/engine.h"
#include "backend/agree.h"

#define DIST__WAIT_DATA 0    /* data movement: polled only when DIST_TIMEOUT is set */
#define DIST__WAIT_CONTROL 1 /* control rounds: always polled when the fault channel is open */

dist_status dist__wait(MPI_Request *r, const char *call, int kind);
/* The loop behind dist__wait, for anything polled: done(ctx) returns 1 when
 * finished, 0 while not, -1 on an MPI error (returned as DIST_ERR_MPI without a
 * message: the caller names it). The fault channel, DIST_TIMEOUT and yielding
 * as for dist__wait; a wait that gives up breaks the rank. */
typedef int (*dist__poll_fn)(void *ctx);
dist_status dist__wait_poll(dist__poll_fn done, void *ctx, const char *call, int kind);
/* rc: what posting *r returned (MPI_Ixxx): its error, or dist__wait's outcome. */
dist_status dist__wait_posted(int rc, MPI_Request *r, const char *call, int kind);
dist_status dist__waitall(int n, MPI_Request *r, const char *call);
/* Are data waits polled for DIST_TIMEOUT? (Then blocking MPI calls go non-blocking + dist__wait.) */
int dist__wait_polled(void);
/* Must waits give the core away from the start? With an MPI that busy-polls
 * without yielding (MPICH) and more ranks on this node than cores. Then
 * blocking MPI calls also go non-blocking + dist__wait. */
int dist__wait_yields(void);

/* Start a collective call on group g (NULL: a control point outside any
 * group): advances g's call counter, publishes the arrival (board.c) and
 * records it as the current call for messages. */
void dist__call_enter(const char *what, dist__group *g);

/* An error that ends the job: mark this rank broken with the message (kept
 * for later calls) and tell the other ranks. Returns `s`. */
dist_status dist__break(dist_status s);
/* DIST_ERR_ABORTED naming the earlier failure, for calls after a break. */
dist_status dist__require_usable(const char *what);

#endif
