/* Polled waits, the current call and the broken state (see wait.h). */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "backend/board.h"
#include "backend/faults.h"
#include "backend/wait.h"

int dist__wait_polled(void) { return dist__engine.timeout > 0; }

extern char **environ;

int dist__wait_yields(void) {
#ifdef OPEN_MPI
  return 0; /* Open MPI yields by itself when oversubscribed (mpi_yield_when_idle, see manager.c) */
#else
  /* MPICH's ch4 device busy-polls in every blocking call and has no setting
   * to yield: with more ranks than cores, a waiting rank keeps the core its
   * peer needs (3 ranks on 2 cores: the surrogate's dataset took minutes
   * instead of seconds). Then distmgr waits itself and yields. */
  static int known = -1;
  if (known < 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    known = cores > 0 && dist__engine.node_tasks > cores;
  }
  return known;
#endif
}

void dist__call_enter(const char *what, dist__group *g) {
  dist__engine.cur.what = what;
  dist__engine.cur.g = g;
  dist__engine.cur.seq = g ? ++g->seq : 0;
  if (g) dist__board_arrive(g);
}

dist_status dist__break(dist_status s) {
  if (!dist__engine.broken) {
    dist__engine.broken = 1;
    snprintf(dist__engine.broken_msg, sizeof dist__engine.broken_msg, "%s", dist_last_error());
    dist__faults_announce(DIST__FAULT_BROKEN, NULL, dist__engine.broken_msg);
  }
  return s;
}

static dist_status timed_out(const char *call, double waited) {
  const dist__current *c = &dist__engine.cur;
  char behind[1024];
  dist__board_report(behind, sizeof behind);
  if (c->g)
    return dist__error(DIST_ERR_TIMEOUT,
                       "%s on group '%s' (call #%llu) did not complete within DIST_TIMEOUT=%g s (waited %.1f s in "
                       "%s); %s",
                       c->what ? c->what : "?", c->g->name, (unsigned long long)c->seq, dist__engine.timeout,
                       waited, call, behind);
  return dist__error(DIST_ERR_TIMEOUT, "%s did not complete within DIST_TIMEOUT=%g s (waited %.1f s)", call,
                     dist__engine.timeout, waited);
}

dist_status dist__wait_poll(dist__poll_fn done, void *ctx, const char *call, int kind) {
  int watch = dist__engine.up && dist__groups.size > 1 && (kind == DIST__WAIT_CONTROL || dist__engine.timeout > 0);
  double limit = dist__engine.timeout;
  int yield = dist__wait_yields(), d;
  /* Most control steps are done within a few tests: no clock, no board
   * entry for them (the bookkeeping cost as much as the step itself). */
  for (int i = 0; i < 32; i++)
    if ((d = done(ctx))) return d > 0 ? DIST_SUCCESS : DIST_ERR_MPI;
  double t0 = MPI_Wtime();
  dist__board_waiting(1);
  for (unsigned spin = 1;; spin++) {
    if ((d = done(ctx))) break;
    if (spin % 64) continue;
    dist_status s = watch ? dist__faults_check() : DIST_SUCCESS;
    double t = MPI_Wtime() - t0;
    if (!s && limit > 0 && t > limit) s = timed_out(call, t);
    if (s) {
      dist__board_waiting(0);
      return dist__break(s); /* what was awaited stays pending: its communicator is unusable */
    }
    /* Give the core away while waiting long: ranks may share cores. */
    if (t > 0.05) nanosleep(&(struct timespec){0, 20000}, NULL);
    else if (t > 1e-3 || yield) sched_yield();
  }
  dist__board_waiting(0);
  return d > 0 ? DIST_SUCCESS : DIST_ERR_MPI;
}

typedef struct request_wait {
  MPI_Request *r;
  int rc;
} request_wait;

static int request_done(void *p) {
  request_wait *w = p;
  int done = 0;
  w->rc = MPI_Test(w->r, &done, MPI_STATUS_IGNORE);
  return w->rc != MPI_SUCCESS ? -1 : done;
}

dist_status dist__wait(MPI_Request *r, const char *call, int kind) {
  int watch = dist__engine.up && dist__groups.size > 1 && (kind == DIST__WAIT_CONTROL || dist__engine.timeout > 0);
  if (!watch && dist__engine.timeout <= 0 && !dist__wait_yields()) {
    int rc = MPI_Wait(r, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, call);
  }
  request_wait w = {r, MPI_SUCCESS};
  dist_status s = dist__wait_poll(request_done, &w, call, kind);
  return s == DIST_ERR_MPI && w.rc != MPI_SUCCESS ? dist__mpi_error(w.rc, call) : s;
}

dist_status dist__wait_posted(int rc, MPI_Request *r, const char *call, int kind) {
  return rc == MPI_SUCCESS ? dist__wait(r, call, kind) : dist__mpi_error(rc, call);
}

dist_status dist__waitall(int n, MPI_Request *r, const char *call) {
  if (dist__engine.timeout <= 0 && !dist__wait_yields()) { /* as dist__wait's unwatched data waits */
    int rc = MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, call);
  }
  for (int i = 0; i < n; i++) DIST_CHECK(dist__wait(&r[i], call, DIST__WAIT_DATA));
  return DIST_SUCCESS;
}

dist_status dist__require_usable(const char *what) {
  int finalized = 0;
  DIST_MPI_CALL(MPI_Finalized(&finalized));
  if (finalized)
    return dist__error(DIST_ERR_UNSUPPORTED,
                       "%s: MPI was finalized (MPI_Finalize before dist_manager_finalize?): distmgr cannot "
                       "communicate any more",
                       what);
  if (!dist__engine.broken) return DIST_SUCCESS;
  return dist__error(DIST_ERR_ABORTED,
                     "%s: distmgr stopped on this rank after an earlier failure (%s); the job cannot continue: "
                     "exit (distmgr then %s)",
                     what, dist__engine.broken_msg,
                     dist__engine.rdzv ? "tells the other ranks through the rendezvous store" : "ends the job with MPI_Abort");
}
