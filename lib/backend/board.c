/* The progress board (see board.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "backend/board.h"

#define GROUPS DIST__TRACKED_GROUPS
#define ANSWER_SECONDS 1.0 /* how long a timed-out rank waits for each peer's entry */

typedef struct entry {
  uint64_t arrived[GROUPS]; /* calls begun per group index */
  int64_t waiting;          /* 1 while inside a wait */
  int64_t group;            /* group index of the current call, -1 none */
  uint64_t seq;             /* its number on that group */
  char what[48];            /* its name */
} entry;

typedef struct board {
  MPI_Win win;
  volatile entry *mine;
} board;

/* The entry is our own memory exposed with MPI_Win_create, not memory from
 * MPI_Win_allocate: in MPICH 4.0.x with ch4:ucx (Debian 12's), a peer's
 * MPI_Rget of a window from MPI_Win_allocate reads zeros for some ranks
 * (pmodels/mpich#6110), which made ranks that had arrived look absent.
 * Both are static, not allocated: a rank whose allocation failed would skip
 * the collective MPI_Win_create and leave the others waiting in it. A window
 * left open by an abnormal end keeps exposing the entry, which a later
 * initialize exposes again in its own window (overlapping windows are
 * allowed; the old one is never read again). */
static board the_board;
static entry the_entry;

dist_status dist__board_open(void) {
  if (dist__engine.timeout <= 0 || dist__groups.size == 1) return DIST_SUCCESS;
  board *b = &the_board;
  memset(&the_entry, 0, sizeof the_entry);
  the_entry.group = -1;
  int rc = MPI_Win_create(&the_entry, (MPI_Aint)sizeof the_entry, 1, MPI_INFO_NULL, dist__engine.world, &b->win);
  if (rc == MPI_SUCCESS) {
    b->mine = &the_entry;
    rc = MPI_Win_set_errhandler(b->win, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, b->win);
  }
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Win_create (progress board)");
  dist__engine.board = b;
  return DIST_SUCCESS;
}

void dist__board_close(int collective) {
  board *b = dist__engine.board;
  if (!b) return;
  /* Freeing the window is collective: only on the orderly path. */
  if (collective) {
    DIST_WARN_CALL(MPI_Win_unlock_all(b->win));
    DIST_WARN_CALL(MPI_Win_free(&b->win));
  } /* else the window stays: peers may still read it */
  dist__engine.board = NULL;
}

void dist__board_arrive(const dist__group *g) {
  board *b = dist__engine.board;
  if (!b) return;
  if (g->index < GROUPS) b->mine->arrived[g->index] = g->seq;
  b->mine->group = g->index;
  b->mine->seq = g->seq;
  const char *what = dist__engine.cur.what ? dist__engine.cur.what : ""; /* (no snprintf: every call passes here) */
  size_t n = strnlen(what, sizeof b->mine->what - 1);
  memcpy((char *)b->mine->what, what, n);
  ((char *)b->mine->what)[n] = 0;
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

void dist__board_waiting(int on) {
  board *b = dist__engine.board;
  if (!b) return;
  b->mine->waiting = on;
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

static const char *group_name(int64_t index) {
  return index >= 0 && index < dist__groups.ngroups ? dist__groups.groups[index]->name : "?";
}

/* "rank 3 (at call #4; now waiting in dist_barrier on 'model', call #2)". */
static size_t describe(const entry *e, int rank, int answered, const dist__group *g, char *buf, size_t n) {
  if (!answered)
    return (size_t)snprintf(buf, n, "rank %d (no answer: dead, or busy outside distmgr)", rank);
  char what[sizeof e->what + 1];
  memcpy(what, e->what, sizeof e->what);
  what[sizeof e->what] = 0;
  uint64_t at = g->index < GROUPS ? e->arrived[g->index] : 0;
  if (e->group >= 0 && e->seq)
    return (size_t)snprintf(buf, n, "rank %d (began %llu call(s) on '%s'; %s %s on '%s', call #%llu)", rank,
                            (unsigned long long)at, g->name, e->waiting ? "waiting in" : "last entered", what,
                            group_name(e->group), (unsigned long long)e->seq);
  return (size_t)snprintf(buf, n, "rank %d (began %llu call(s) on '%s')", rank, (unsigned long long)at, g->name);
}

void dist__board_report(char *buf, size_t n) {
  board *b = dist__engine.board;
  const dist__current *c = &dist__engine.cur;
  buf[0] = 0;
  if (!c->g || !c->g->members) return;
  if (!b) {
    snprintf(buf, n, "which ranks are behind is unknown (no progress board)");
    return;
  }
  int P = c->g->size, pending = 0;
  entry *peers = calloc((size_t)P, sizeof *peers);
  MPI_Request *q = calloc((size_t)P, sizeof *q);
  int *got = calloc((size_t)P, sizeof *got);
  if (!peers || !q || !got) {
    snprintf(buf, n, "which ranks are behind is unknown (out of memory)");
    free(peers), free(q), free(got);
    return;
  }
  for (int i = 0; i < P; i++) {
    q[i] = MPI_REQUEST_NULL;
    if (c->g->members[i] == dist__groups.rank) continue;
    if (MPI_Rget(&peers[i], (int)sizeof(entry), MPI_BYTE, c->g->members[i], 0, (int)sizeof(entry), MPI_BYTE, b->win,
                 &q[i]) == MPI_SUCCESS)
      pending++;
  }
  double t0 = MPI_Wtime();
  while (pending && MPI_Wtime() - t0 < ANSWER_SECONDS)
    for (int i = 0; i < P; i++) {
      int done = 0;
      if (q[i] != MPI_REQUEST_NULL && MPI_Test(&q[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
        got[i] = 1, pending--;
    }
  size_t k = (size_t)snprintf(buf, n, "not arrived:");
  int behind = 0;
  for (int i = 0; i < P && k < n; i++) {
    int r = c->g->members[i];
    if (r == dist__groups.rank) continue;
    uint64_t at = c->g->index < GROUPS ? peers[i].arrived[c->g->index] : 0;
    if (got[i] && at >= c->seq) continue; /* it arrived: waiting for someone else, like us */
    k += (size_t)snprintf(buf + k, n - k, behind++ ? "; " : " ");
    if (k < n) k += describe(&peers[i], r, got[i], c->g, buf + k, n - k);
  }
  if (!behind && k < n) snprintf(buf + k, n - k, " none (every rank began the call; one stopped inside it)");
  free(got);
  if (!pending) free(peers), free(q); /* else MPI may still write there: left to the process's end */
}
