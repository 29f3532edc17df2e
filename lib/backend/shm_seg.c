/* Shared-memory segments and flags of a group on one node (shm_seg.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend/engine.h"
#include "backend/shm_seg.h"
#include "backend/wait.h"
#include "core/fault.h"
#include "core/reserve.h"
#ifdef HAVE_GLOO
#include "backend/gloo.h"
#endif

/* The liveness locks' descriptors. An OFD lock lasts as long as its open
 * file description, which a child forked without exec shares through its
 * copies of the descriptor and of the mapping: the lock would outlive this
 * process, and the others would wait for it until DIST_TIMEOUT. So the
 * segments are not mapped into children (MADV_DONTFORK), and in a child
 * these descriptors are pointed at /dev/null (the numbers stay valid; a
 * forked child must not use distmgr anyway). */
static pthread_mutex_t lock_mu = PTHREAD_MUTEX_INITIALIZER;
static int *lock_fds, nlock_fds, lock_cap;

/* Closes fd, forgotten first; under the mutex, so that no fork in between
 * copies it unredirected. */
static void lock_fd_close(int fd) {
  pthread_mutex_lock(&lock_mu);
  for (int i = 0; i < nlock_fds; i++)
    if (lock_fds[i] == fd) {
      lock_fds[i] = lock_fds[--nlock_fds];
      break;
    }
  close(fd);
  pthread_mutex_unlock(&lock_mu);
}

#ifdef HAVE_GLOO
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { pthread_mutex_lock(&lock_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&lock_mu); }
static void fork_child(void) {
  int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int i = 0; i < nlock_fds; i++)
    if (nul < 0 || dup3(nul, lock_fds[i], O_CLOEXEC) < 0) close(lock_fds[i]);
  if (nul >= 0) close(nul);
  nlock_fds = 0;
  pthread_mutex_unlock(&lock_mu);
}
static void lock_fds_init(void) { (void)pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* Maps the segment out of children's reach and takes this member's lock
 * on byte `rank`, remembering fd; all under the mutex, so that no fork in
 * between copies the mapping or the lock. 1 when the lock is held; 0 where
 * any step fails (no memory, an old kernel): the segment then goes on
 * without locks. *map is MAP_FAILED when the mapping failed. */
static int map_and_lock(int fd, size_t bytes, int rank, void **map) {
  pthread_once(&lock_once, lock_fds_init);
  pthread_mutex_lock(&lock_mu);
  *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int held = *map != MAP_FAILED && madvise(*map, bytes, MADV_DONTFORK) == 0;
  if (held && nlock_fds == lock_cap) {
    int cap = lock_cap ? 2 * lock_cap : 16, *more = realloc(lock_fds, sizeof *more * (size_t)cap);
    if (more) lock_fds = more, lock_cap = cap;
    else held = 0;
  }
  struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = rank, .l_len = 1, .l_pid = 0};
  held = held && fcntl(fd, F_OFD_SETLK, &l) == 0;
  if (held) lock_fds[nlock_fds++] = fd;
  pthread_mutex_unlock(&lock_mu);
  return held;
}

/* A random 63-bit number (the clock and the process id where getrandom fails). */
static int64_t nonce(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    r = (uint64_t)t.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)t.tv_sec ^ ((uint64_t)getpid() << 32);
  }
  return (int64_t)(r >> 1);
}

/* Every member's `bytes` bytes, through the group's Gloo context. */
static dist_status gloo_gather(const struct dist__group *g, const void *mine, size_t bytes, void *all) {
  size_t *b = dist__reserve_alloc(sizeof *b * (size_t)g->size, 0); /* the others are in the gather */
  if (!b) return dist__error(DIST_ERR_NO_MEMORY, "group '%s': a shared segment's counts", g->name);
  for (int q = 0; q < g->size; q++) b[q] = bytes;
  dist_status s = dist__gloo_all_gather_v(g->gloo, mine, all, b);
  dist__reserve_free(b);
  return s;
}
#endif

int dist__shm_one_node(const struct dist__group *g) {
  if (!dist__engine.node_leaders || !g->members) return 0;
  for (int q = 1; q < g->size; q++)
    if (dist__engine.node_leaders[g->members[q]] != dist__engine.node_leaders[g->members[0]]) return 0;
  return 1;
}

dist_status dist__shm_seg_open(const struct dist__group *g, const char *kind, size_t bytes, int ready,
                               dist__shm_seg *seg) {
  memset(seg, 0, sizeof *seg);
#ifndef HAVE_GLOO
  (void)g, (void)kind, (void)bytes, (void)ready;
  return DIST_SUCCESS;
#else
  if (!g->gloo || !dist__shm_one_node(g)) return DIST_SUCCESS;
  int P = g->size;
  /* (pid, nonce) of every member, their flags, their pids: one block (a
   * member that cannot have it cannot join the gathers either) */
  int64_t mine[2] = {(int64_t)getpid(), nonce()};
  /* Kept as the pid list. Without it this member still joins the gathers
   * (through the reserve: the others are in them) and refuses the segment. */
  int64_t *kept = malloc(sizeof(int64_t) * 4 * (size_t)P);
  int64_t *all = kept ? kept : dist__reserve_alloc(sizeof(int64_t) * 4 * (size_t)P, 0);
  if (!all) return dist__error(DIST_ERR_NO_MEMORY, "group '%s': its shared segment's members", g->name);
  int64_t *flags = all + 2 * P, *pids = all + 3 * P;
  ready = ready && kept;
  dist_status s = gloo_gather(g, mine, sizeof mine, all);
  if (s) return dist__reserve_free(all), s;
  /* One name per group, kind and job: member 0's process id and random
   * nonce (another job may share /dev/shm from another pid namespace), and
   * the group's place in the table. A name that exists already is a refusal. */
  char name[128];
  snprintf(name, sizeof name, "/distmgr-%s-%lld-%llx-%d", kind, (long long)all[0], (unsigned long long)all[1], g->index);
  void *map = MAP_FAILED;
  char site[48]; /* tests: one member cannot take part (fault site shm_seg_<kind>) */
  snprintf(site, sizeof site, "shm_seg_%s", kind);
  int ok = ready && !dist__fault(site), fd = -1;
  if (g->rank == 0 && ok) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    /* zero-filled; its pages reserved now: tmpfs hands out pages at the first
     * touch, and a full /dev/shm would then kill the process (SIGBUS) */
    ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0 && posix_fallocate(fd, 0, (off_t)bytes) == 0;
  }
  int locked = 0; /* every member holds its liveness lock (shm_seg.h) */
  for (int step = 0; step < 2 && !s; step++) { /* 0: member 0 made it; 1: every member mapped it */
    int held = 0;
    if (step == 1 && g->rank != 0 && ok) fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600), ok = fd >= 0;
    if (step == 1 && ok) held = map_and_lock(fd, bytes, g->rank, &map), ok = map != MAP_FAILED;
    int64_t flag = ok | held << 1;
    s = gloo_gather(g, &flag, sizeof flag, flags);
    locked = 1;
    for (int q = 0; !s && q < P; q++) ok = ok && (flags[q] & 1), locked = locked && (flags[q] & 2);
  }
  if (g->rank == 0 && fd >= 0) (void)shm_unlink(name); /* mapped where it worked; the name is not needed again */
  if (ok && !s) {
    for (int q = 0; q < P; q++) pids[q] = all[2 * q];
    memmove(all, pids, sizeof *pids * (size_t)P); /* the block becomes the pid list */
    if (!locked) lock_fd_close(fd), fd = -1; /* an old kernel: kill(pid, 0) instead */
    seg->map = map, seg->bytes = bytes, seg->pids = all, seg->fd = fd, seg->locked = locked;
    return DIST_SUCCESS;
  }
  if (fd >= 0) lock_fd_close(fd);
  if (map != MAP_FAILED) munmap(map, bytes);
  if (!s) dist_log(DIST_LOG_DEBUG, "group '%s': no shared %s segment (%zu bytes)", g->name, kind, bytes);
  dist__reserve_free(all);
  return s;
#endif
}

void dist__shm_seg_close(dist__shm_seg *seg) {
  if (seg->map) munmap(seg->map, seg->bytes);
  if (seg->locked) lock_fd_close(seg->fd); /* drops my lock: to the others, I am gone */
  free(seg->pids);
  memset(seg, 0, sizeof *seg);
}

double dist__shm_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
  return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0); /* shared: not FUTEX_PRIVATE_FLAG */
}

void dist__shm_flag_raise(dist__shm_flag *f, int64_t v) {
  atomic_store_explicit(&f->value, v, memory_order_release);
  atomic_store(&f->seq, (uint32_t)v); /* seq_cst: a waiter counted itself, or sees v */
  if (atomic_load(&f->waiters)) (void)futex(&f->seq, FUTEX_WAKE, INT32_MAX, NULL);
}

/* Is member `peer`'s process gone? Its lock is free (shm_seg.h). */
static int peer_gone(const dist__shm_seg *seg, int peer) {
  if (!seg->locked) return kill((pid_t)seg->pids[peer], 0) && errno == ESRCH;
  struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = peer, .l_len = 1, .l_pid = 0};
  return fcntl(seg->fd, F_OFD_GETLK, &l) == 0 && l.l_type == F_UNLCK;
}

static int reached(dist__shm_flag *f, int64_t v) { return atomic_load_explicit(&f->value, memory_order_acquire) >= v; }

dist_status dist__shm_flag_wait(const dist__shm_seg *seg, dist__shm_flag *f, int64_t v, int peer, double t0,
                                const dist__shm_wait *how, const char *call, const char *what) {
  for (int i = 0; i < 2000; i++)
    if (reached(f, v)) return DIST_SUCCESS;
  if (how->spin_s > 0)
    for (double until = dist__shm_seconds() + how->spin_s; dist__shm_seconds() < until;)
      for (int i = 0; i < 256; i++)
        if (reached(f, v)) return DIST_SUCCESS;
  if (how->yield_s > 0)
    for (double until = dist__shm_seconds() + how->yield_s; dist__shm_seconds() < until; sched_yield())
      if (reached(f, v)) return DIST_SUCCESS;
  double limit = dist__engine.timeout > 0 ? dist__engine.timeout : how->limit_off;
  while (!reached(f, v)) {
    atomic_fetch_add(&f->waiters, 1);
    uint32_t seen = atomic_load(&f->seq);
    if (!reached(f, v)) (void)futex(&f->seq, FUTEX_WAIT, seen, &(struct timespec){0, 10000000});
    atomic_fetch_sub(&f->waiters, 1);
    if (reached(f, v)) break;
    if (peer_gone(seg, peer) && !reached(f, v)) /* it may have raised the flag, then closed the segment */
      return dist__break(dist__error(DIST_ERR_ABORTED,
                                     "%s: rank %d of the group (process %d on this node) is gone while the others "
                                     "waited for it in %s (a peer process left or died)",
                                     call, peer, (int)seg->pids[peer], what));
    double t = dist__shm_seconds() - t0;
    if (limit > 0 && t > limit)
      return dist__break(dist__error(DIST_ERR_TIMEOUT, "%s: rank %d of the group did not reach %s within %s=%g s", call,
                                     peer, what, dist__engine.timeout > 0 ? "DIST_TIMEOUT" : "the limit without DIST_TIMEOUT",
                                     limit));
  }
  return DIST_SUCCESS;
}
