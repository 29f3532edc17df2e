/* The one state of remote calls, shared by the files of lib/rpc. */
#include <time.h>

#include "rpc/rpc_internal.h"

dist__rpc_engine dist__rpc;

double dist__rpc_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

void dist__rpc_lock(void) { pthread_mutex_lock(&dist__rpc.wmu); }
void dist__rpc_unlock(void) { pthread_mutex_unlock(&dist__rpc.wmu); }

/* The worker is checked under the lock: teardown clears it there. */
unsigned dist__rpc_try_progress(void) {
  if (pthread_mutex_trylock(&dist__rpc.wmu)) return 0;
  unsigned n = dist__rpc.worker ? ucp_worker_progress(dist__rpc.worker) : 0;
  dist__rpc_unlock();
  return n;
}

void dist__rpc_poll_begin(void) { atomic_fetch_add(&dist__rpc.poll_begins, 1); }

void dist__rpc_wake_progress(void) {
  pthread_mutex_lock(&dist__rpc.pmu);
  dist__rpc.pwoken = 1;
  pthread_cond_signal(&dist__rpc.pcv);
  pthread_mutex_unlock(&dist__rpc.pmu);
}

void dist__rpc_poll_end(int blocking) {
  atomic_fetch_add(&dist__rpc.poll_ends, 1);
  if (blocking) dist__rpc_wake_progress();
}
