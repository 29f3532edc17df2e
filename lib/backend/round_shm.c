/* The check round through shared memory (see round_shm.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend/agree.h"
#include "backend/backend.h"
#include "backend/round_shm.h"
#include "backend/spec.h"
#include "backend/wait.h"
#include "core/check.h"
#ifdef HAVE_GLOO
#include "backend/gloo.h"
#endif

#define WORDS 6 /* room for the round's words (agree.h) */
#define PROGRESS_TAG 0x0c0f /* never sent: probed only to let MPI progress */

typedef struct slot {
  _Atomic int64_t round; /* written after the words */
  int64_t w[WORDS];
  /* Without MPI: a waiter sleeps on seq (a futex in the shared segment) once
   * it has counted itself in waiters; the writer wakes it after the round. */
  _Atomic uint32_t seq, waiters;
} slot;
_Static_assert(sizeof(slot) == 64, "one cache line per slot");
_Static_assert(DIST__ROUND_WORDS <= WORDS, "the round's words fit a slot");

struct dist__round_shm {
  MPI_Win win;  /* MPI: the window (MPI_WIN_NULL for a mapped segment) */
  void *map;    /* without MPI: the mapped POSIX segment, map_bytes long */
  size_t map_bytes;
  int64_t *pids; /* without MPI: every member's process (a peer that is gone ends a wait) */
  slot *slots;   /* parity 0's P slots, then parity 1's */
  int64_t rounds;
  int me, size;
};

static slot *slot_of(const dist__round_shm *sh, int64_t round, int rank) {
  return &sh->slots[(size_t)(round & 1) * (size_t)sh->size + (size_t)rank];
}

/* Do all members share my node? The same answer on every member. */
static dist_status one_node(MPI_Comm comm, int size, int *yes) {
  MPI_Comm node = MPI_COMM_NULL;
  int n = 0;
  DIST_MPI_CALL(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int rc = MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Comm_size (node of a group)");
  *yes = n == size;
  return DIST_SUCCESS;
}

static dist_status open_mpi(dist__group *g) {
  MPI_Comm comm = g->mpi->comm;
  int shared = 0;
  DIST_CHECK(one_node(comm, g->size, &shared));
  if (!shared) return DIST_SUCCESS;
  dist__round_shm *sh = calloc(1, sizeof *sh);
  MPI_Aint bytes = g->rank == 0 ? (MPI_Aint)(2 * (size_t)g->size * sizeof(slot)) : 0;
  slot *base = NULL;
  MPI_Win win = MPI_WIN_NULL;
  /* Every member takes part, whatever failed before on it (MPI fails a
   * window's creation on all members or none). */
  int ok = MPI_Win_allocate_shared(bytes, sizeof(slot), MPI_INFO_NULL, comm, &base, &win) == MPI_SUCCESS, locked = 0;
  if (ok) {
    MPI_Aint size = 0;
    int unit = 0;
    ok = MPI_Win_shared_query(win, 0, &size, &unit, &base) == MPI_SUCCESS &&
         size == (MPI_Aint)(2 * (size_t)g->size * sizeof(slot));
    locked = ok && MPI_Win_lock_all(MPI_MODE_NOCHECK, win) == MPI_SUCCESS;
  }
  if (locked && g->rank == 0) memset(base, 0, 2 * (size_t)g->size * sizeof(slot));
  atomic_thread_fence(memory_order_seq_cst);
  ok = locked && sh;
  int all = 0;
  int rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm); /* also: the zeros are there before any round */
  if (rc == MPI_SUCCESS && all) {
    sh->win = win, sh->slots = base, sh->me = g->rank, sh->size = g->size;
    g->round = sh;
    return DIST_SUCCESS;
  }
  if (win != MPI_WIN_NULL) {
    if (locked) (void)MPI_Win_unlock_all(win);
    (void)MPI_Win_free(&win);
  }
  free(sh);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Allreduce (a group's round window)");
  dist_log(DIST_LOG_DEBUG, "group '%s': check rounds by messages (no shared-memory window)", g->name);
  return DIST_SUCCESS;
}

#ifdef HAVE_GLOO
/* Every member's `bytes` bytes, through the group's Gloo context. */
static dist_status gloo_gather(const dist__group *g, const void *mine, size_t bytes, void *all) {
  size_t *b = malloc(sizeof *b * (size_t)g->size);
  if (!b) return dist__error(DIST_ERR_NO_MEMORY, "group '%s': a round segment's counts", g->name);
  for (int q = 0; q < g->size; q++) b[q] = bytes;
  dist_status s = dist__gloo_all_gather_v(g->gloo, mine, all, b);
  free(b);
  return s;
}

/* Without MPI (Gloo): a POSIX shared-memory segment that member 0 creates
 * and unlinks once every member has mapped it (nothing is left in /dev/shm,
 * even after a crash past this point). Same node: the manager's node
 * (dist__engine.node_leader), as the "local" group has it. Any failure on
 * any member: messages, on every member. */
static dist_status open_mapped(dist__group *g) {
  if (dist__engine.node_leader < 0) return DIST_SUCCESS;
  int P = g->size;
  size_t bytes = 2 * (size_t)P * sizeof(slot);
  int64_t mine[2] = {dist__engine.node_leader, (int64_t)getpid()}, *all = malloc(sizeof mine * (size_t)P);
  int64_t *flags = malloc(sizeof *flags * (size_t)P);
  if (!all || !flags) {
    free(all), free(flags);
    return dist__error(DIST_ERR_NO_MEMORY, "group '%s': its round's members", g->name);
  }
  dist_status s = gloo_gather(g, mine, sizeof mine, all);
  int shared = !s;
  for (int q = 0; shared && q < P; q++) shared = all[2 * q] == all[0];
  if (!shared) return free(all), free(flags), s;
  /* One name per group and job: member 0's process id and the group's place in the table. */
  char name[96];
  snprintf(name, sizeof name, "/distmgr-round-%lld-%d", (long long)all[1], g->index);
  void *map = MAP_FAILED;
  int ok = 1, fd = -1;
  if (g->rank == 0) {
    (void)shm_unlink(name); /* a stale one, from a process that had this id before */
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0; /* zero-filled */
  }
  for (int step = 0; step < 2 && !s; step++) { /* 0: member 0 made it; 1: every member mapped it */
    if (step == 1 && g->rank != 0 && ok) fd = shm_open(name, O_RDWR, 0600), ok = fd >= 0;
    if (step == 1 && ok) ok = (map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) != MAP_FAILED;
    int64_t flag = ok;
    s = gloo_gather(g, &flag, sizeof flag, flags);
    for (int q = 0; !s && q < P; q++) ok = ok && flags[q];
  }
  free(flags);
  if (fd >= 0) close(fd);
  if (g->rank == 0) (void)shm_unlink(name); /* mapped where it worked; the name is not needed again */
  dist__round_shm *sh = ok && !s ? calloc(1, sizeof *sh) : NULL;
  int64_t *pids = sh ? malloc(sizeof *pids * (size_t)P) : NULL;
  if (sh && pids) {
    for (int q = 0; q < P; q++) pids[q] = all[2 * q + 1];
    sh->win = MPI_WIN_NULL, sh->map = map, sh->map_bytes = bytes, sh->slots = map, sh->pids = pids;
    sh->me = g->rank, sh->size = P;
    g->round = sh;
  } else {
    /* (a member short of memory here waits alone: the others' rounds time out, as any lost member's) */
    free(sh), sh = NULL;
    if (map != MAP_FAILED) munmap(map, bytes);
  }
  if (!sh && !s) dist_log(DIST_LOG_DEBUG, "group '%s': check rounds by messages (no shared-memory segment)", g->name);
  free(all);
  return s;
}
#endif

dist_status dist__round_shm_open(dist__group *g) {
  if (g->rank < 0 || g->size < 2 || !dist__engine.round_shm) return DIST_SUCCESS;
#ifdef HAVE_GLOO
  if (g->gloo) return open_mapped(g);
#endif
  return g->mpi ? open_mpi(g) : DIST_SUCCESS;
}

void dist__round_shm_close(dist__group *g) {
  dist__round_shm *sh = g->round;
  if (!sh) return;
  g->round = NULL;
  if (sh->map) { /* no collective: the name is gone already */
    munmap(sh->map, sh->map_bytes);
    free(sh->pids);
    free(sh);
    return;
  }
  int finalized = 0;
  (void)MPI_Finalized(&finalized);
  /* A collective free could wait for a rank that left; after MPI_Finalize
   * the window is gone with MPI. Our handle goes either way. */
  if (!dist__engine.broken && !finalized) {
    (void)MPI_Win_unlock_all(sh->win);
    DIST_WARN_CALL(MPI_Win_free(&sh->win));
  }
  free(sh);
}

typedef struct arrival {
  const dist__round_shm *sh;
  MPI_Comm comm;
  int64_t round;
  int next; /* peers me+1, me+2, ... up to `next` have arrived */
} arrival;

static int all_arrived(arrival *a) {
  for (; a->next < a->sh->size; a->next++) {
    const slot *s = slot_of(a->sh, a->round, (a->sh->me + a->next) % a->sh->size);
    if (atomic_load_explicit(&s->round, memory_order_acquire) < a->round) return 0;
  }
  return 1;
}

static int arrived(void *p) {
  arrival *a = p;
  int flag = 0;
  /* Progress for the data in flight (a speculative exchange) and Open MPI's
   * yield when idle: the same as a wait in MPI_Test would do. */
  if (MPI_Iprobe(MPI_ANY_SOURCE, PROGRESS_TAG, a->comm, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
  return all_arrived(a);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
  return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0); /* shared: not FUTEX_PRIVATE_FLAG */
}

/* Without MPI: no progress to make (Gloo has its own threads) and no fault
 * channel. The waiter spins a little, then sleeps on the peer's futex: a
 * spinning or yielding waiter took the core that the peer's Gloo thread
 * needed to finish its call (a 2-rank all-reduce of 1 MiB took 1.5-2x as
 * long). Every 10 ms asleep it checks that the peer is alive (a rank that
 * died ends the wait at once, naming it); DIST_TIMEOUT bounds the rest. */
static dist_status wait_mapped(arrival *a, const char *call) {
  for (int i = 0; i < 2000; i++)
    if (all_arrived(a)) return DIST_SUCCESS;
  double t0 = seconds(), limit = dist__engine.timeout;
  while (!all_arrived(a)) {
    int peer = (a->sh->me + a->next) % a->sh->size;
    slot *s = slot_of(a->sh, a->round, peer);
    atomic_fetch_add(&s->waiters, 1);
    uint32_t seen = atomic_load(&s->seq);
    if (atomic_load_explicit(&s->round, memory_order_acquire) < a->round)
      (void)futex(&s->seq, FUTEX_WAIT, seen, &(struct timespec){0, 10000000});
    atomic_fetch_sub(&s->waiters, 1);
    if (atomic_load_explicit(&s->round, memory_order_acquire) >= a->round) continue;
    pid_t pid = (pid_t)a->sh->pids[peer];
    if (kill(pid, 0) && errno == ESRCH)
      return dist__break(dist__error(DIST_ERR_ABORTED,
                                     "%s: rank %d of the group (process %d on this node) is gone while the others "
                                     "waited for it in a check round (a peer process left or died)",
                                     call, peer, (int)pid));
    double t = seconds() - t0;
    if (limit > 0 && t > limit)
      return dist__break(dist__error(DIST_ERR_TIMEOUT,
                                     "%s: rank %d of the group did not reach the check round within DIST_TIMEOUT=%g s",
                                     call, peer, limit));
  }
  return DIST_SUCCESS;
}

dist_status dist__round_shm_exchange(dist__round_shm *sh, MPI_Comm comm, int64_t *w, int n, dist__spec *spec,
                                     const char *call) {
  int64_t k = ++sh->rounds;
  slot *mine = slot_of(sh, k, sh->me);
  memcpy(mine->w, w, sizeof *w * (size_t)n);
  atomic_store_explicit(&mine->round, k, memory_order_release);
  if (sh->map) { /* wake whoever sleeps on this slot (seq_cst: a waiter counted itself, or sees k) */
    atomic_store(&mine->seq, (uint32_t)k);
    if (atomic_load(&mine->waiters)) (void)futex(&mine->seq, FUTEX_WAKE, INT32_MAX, NULL);
  }
  dist__spec_copy_own(spec);
  arrival a = {sh, comm, k, 1};
  if (sh->map) {
    DIST_CHECK(wait_mapped(&a, call));
  } else {
    dist_status s = dist__wait_poll(arrived, &a, call, DIST__WAIT_CONTROL);
    if (s == DIST_ERR_MPI) return dist__mpi_error(MPI_ERR_OTHER, "MPI_Iprobe (progress in a check round)");
    DIST_CHECK(s);
  }
  for (int j = 1; j < sh->size; j++)
    memcpy(w + n * j, slot_of(sh, k, (sh->me - j + sh->size) % sh->size)->w, sizeof *w * (size_t)n);
  return DIST_SUCCESS;
}
