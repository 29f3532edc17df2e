/* The one state of remote calls, shared by the files of lib/rpc. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_internal.h"

dist__rpc_engine dist__rpc;

double dist__rpc_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static long futex(atomic_int *word, int op, int val) {
  return syscall(SYS_futex, (int *)word, op, val, NULL, NULL, 0);
}

/* Taken by another thread: say so (wwant: pollers step aside, and a
 * spinning thread that keeps the lock between its turns gives it up within
 * a turn, dist__rpc_poll_turn), spin a little, then sleep on the futex,
 * word 2 telling the holder to wake us. */
void dist__rpc_lock_slow(void) {
  atomic_fetch_add(&dist__rpc.wwant, 1);
  int got = 0;
  for (int i = 0; i < 256 && !got; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    got = atomic_load_explicit(&dist__rpc.wword, memory_order_relaxed) == 0 && dist__rpc_trylock();
  }
  if (!got) {
    while (atomic_exchange_explicit(&dist__rpc.wword, 2, memory_order_acquire) != 0)
      futex(&dist__rpc.wword, FUTEX_WAIT_PRIVATE, 2);
    atomic_store_explicit(&dist__rpc.wowner, (uintptr_t)pthread_self(), memory_order_relaxed);
    dist__rpc.wdepth = 1;
  }
  atomic_fetch_sub(&dist__rpc.wwant, 1);
}

void dist__rpc_unlock_wake(void) { futex(&dist__rpc.wword, FUTEX_WAKE_PRIVATE, 1); }

/* The polling threads' session counters (rpc_internal.h). */
#define POLL_SLOTS 64
static dist__rpc_poll_slot slots[POLL_SLOTS];
/* The threads beyond the slots share this one, counted with locked adds;
 * never reset either (a session that spans dist_rpc_shutdown and init stays
 * balanced). */
static dist__rpc_poll_slot shared;
static atomic_int nslots;

dist__rpc_poll_slot *dist__rpc_poll_slot_new(dist__rpc_thread *me) {
  if (me->no_slot) return &shared;
  int i = atomic_fetch_add(&nslots, 1);
  if (i >= POLL_SLOTS) return me->no_slot = 1, &shared;
  return me->poll_slot = &slots[i];
}

void dist__rpc_poll_counts(unsigned *begun, unsigned *ended) {
  unsigned b = atomic_load(&shared.begins), e = atomic_load(&shared.ends);
  int n = atomic_load(&nslots);
  for (int i = 0; i < n && i < POLL_SLOTS; i++) {
    b += atomic_load_explicit(&slots[i].begins, memory_order_acquire);
    e += atomic_load_explicit(&slots[i].ends, memory_order_acquire);
  }
  *begun = b, *ended = e;
}

void dist__rpc_wake_progress(void) {
  pthread_mutex_lock(&dist__rpc.pmu);
  dist__rpc.pwoken = 1;
  pthread_cond_signal(&dist__rpc.pcv);
  pthread_mutex_unlock(&dist__rpc.pmu);
}
