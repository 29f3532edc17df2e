/* DDP progress thread: MPI advances non-blocking collectives only inside MPI
 * calls, so while buckets are in flight this thread keeps calling into MPI
 * (MPI_Iprobe on a private communicator drives the progress engine without
 * touching the main thread's requests). Needs MPI_THREAD_MULTIPLE. */
#include <time.h>

#include "reducer/ddp_internal.h"

static void *run(void *arg) {
  dist__progress *p = arg;
  pthread_mutex_lock(&p->lock);
  while (!p->stop) {
    if (p->inflight <= 0) {
      pthread_cond_wait(&p->wake, &p->lock);
      continue;
    }
    pthread_mutex_unlock(&p->lock);
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, p->comm, &flag, MPI_STATUS_IGNORE);
    /* Yield the core briefly: ranks often outnumber cores. */
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

dist_status dist__ddp_progress_check(void) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return dist__error(DIST_ERR_UNSUPPORTED, "dist_ddp_create: progress = DIST_DDP_PROGRESS_THREAD needs MPI_THREAD_MULTIPLE "
                       "(initialize with thread_level = DIST_THREAD_MULTIPLE)");
  return DIST_SUCCESS;
}

dist_status dist__ddp_progress_start(dist_ddp *d) {
  dist__progress *p = &d->prog;
  int rc = MPI_Comm_dup(d->g->comm, &p->comm);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Comm_dup (progress thread)");
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  p->stop = 0;
  p->inflight = 0;
  if (pthread_create(&p->thread, NULL, run, p) != 0) {
    MPI_Comm_free(&p->comm);
    return dist__error(DIST_ERR_INTERNAL, "dist_ddp_create: pthread_create failed for the progress thread");
  }
  p->running = 1;
  return DIST_SUCCESS;
}

void dist__ddp_progress_stop(dist_ddp *d) {
  dist__progress *p = &d->prog;
  if (!p->running) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  MPI_Comm_free(&p->comm);
  p->running = 0;
}

void dist__ddp_progress_add(dist_ddp *d, int n) {
  dist__progress *p = &d->prog;
  if (!p->running) return;
  pthread_mutex_lock(&p->lock);
  p->inflight += n;
  if (p->inflight > 0) pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
}
