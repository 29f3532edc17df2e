/* A progress thread (progress.h): MPI advances non-blocking collectives
 * only inside MPI calls, so while requests are in flight this thread keeps
 * calling into MPI (MPI_Iprobe on a private communicator drives the progress
 * engine without touching the main thread's requests). Needs
 * MPI_THREAD_MULTIPLE. */
#include <time.h>

#include "core/check.h"
#include "backend/agree.h"
#include "backend/backend.h"
#include "backend/progress.h"

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
    (void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, p->comm, &flag, MPI_STATUS_IGNORE); /* only a poke at MPI's progress */
    /* Yield the core briefly: ranks often outnumber cores. */
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

dist_status dist__progress_check(const char *what, const dist__group *g) {
  if (dist__backend_host(g) != &dist__backend_mpi) return DIST_SUCCESS;
  int level = MPI_THREAD_SINGLE;
  DIST_MPI_CALL(MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE)
    return dist__error(DIST_ERR_UNSUPPORTED, "%s needs MPI_THREAD_MULTIPLE (initialize with thread_level = DIST_THREAD_MULTIPLE)",
                       what);
  return DIST_SUCCESS;
}

void dist__progress_init(dist__progress *p) {
  p->running = 0;
  p->comm = MPI_COMM_NULL;
}

dist_status dist__progress_start(dist__progress *p, const dist__group *g) {
  if (dist__backend_host(g) != &dist__backend_mpi) return DIST_SUCCESS; /* nothing to progress */
  int rc = MPI_Comm_dup(dist__comm(g), &p->comm);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Comm_dup (progress thread)");
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  p->stop = 0;
  p->inflight = 0;
  if (pthread_create(&p->thread, NULL, run, p) != 0) {
    DIST_WARN_CALL(MPI_Comm_free(&p->comm));
    return dist__error(DIST_ERR_INTERNAL, "pthread_create failed for the progress thread");
  }
  p->running = 1;
  return DIST_SUCCESS;
}

void dist__progress_stop(dist__progress *p) {
  if (!p->running) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  DIST_WARN_CALL(MPI_Comm_free(&p->comm));
  p->running = 0;
}

void dist__progress_add(dist__progress *p, int n) {
  if (!p->running) return;
  pthread_mutex_lock(&p->lock);
  p->inflight += n;
  if (p->inflight > 0) pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
}
