/* A thread that drives MPI's progress while non-blocking requests are in
 * flight (DDP's DIST_DDP_PROGRESS_THREAD). */
#ifndef DISTMGR_PROGRESS_H
#define DISTMGR_PROGRESS_H

#include <pthread.h>

#include "group/group.h"

typedef struct dist__progress {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  int running, stop, inflight; /* inflight: buckets launched and not yet waited */
  MPI_Comm comm;               /* a private duplicate the thread probes */
} dist__progress;

void dist__progress_init(dist__progress *p); /* not running */
/* Local: the MPI thread level allows a thread; `what` names the user. A
 * group on Gloo needs no thread (its calls complete before they return). */
dist_status dist__progress_check(const char *what, const dist__group *g);
dist_status dist__progress_start(dist__progress *p, const dist__group *g); /* collective over g (a private duplicate); none on Gloo */
void dist__progress_stop(dist__progress *p);
void dist__progress_add(dist__progress *p, int n); /* launched (+1) / completed (-n) */

#endif
