/* Shared memory between the members of a group on one node, in launches
 * without MPI (Gloo): a POSIX segment that member 0 creates and unlinks as
 * soon as every member has mapped it (nothing is left in /dev/shm, even
 * after a crash past that point), and flags that one member raises and the
 * others wait on. The check round (round_shm.c) and the shared-memory data
 * engine (backend_shm.c) are built on them. */
#ifndef DISTMGR_SHM_SEG_H
#define DISTMGR_SHM_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

struct dist__group;

typedef struct dist__shm_seg {
  void *map;     /* NULL: no segment (members on several nodes, or a member could not map it) */
  size_t bytes;
  int64_t *pids; /* every member's process id (in its own pid namespace), for messages */
  /* Liveness: each member holds an open-file-description lock on byte
   * `rank` of the segment's file through `fd`; the kernel drops it when the
   * process exits, whatever pid namespace the waiter is in. Without such
   * locks (locked = 0), kill(pid, 0), right only within one pid namespace. */
  int fd, locked;
} dist__shm_seg;

/* Are all of g's members on one node (dist__engine.node_leaders: launches
 * without MPI)? Local; 0 without that table or for a non-member. */
int dist__shm_one_node(const struct dist__group *g);

/* Collective over g's members, through its Gloo context: a zero-filled
 * segment of `bytes` when every member shares this node
 * (dist__shm_one_node), is ready (`ready`: e.g. its own state could be
 * allocated) and mapped it; else seg->map is NULL on every member. The
 * segment's pages are reserved when it is made (a full /dev/shm is a
 * refusal then, not a SIGBUS at the first touch). `kind` tells the segments
 * of one group apart. An error only when the Gloo exchange failed. */
dist_status dist__shm_seg_open(const struct dist__group *g, const char *kind, size_t bytes, int ready,
                               dist__shm_seg *seg);
void dist__shm_seg_close(dist__shm_seg *seg); /* local */

/* A counter in the segment that only its owner raises. */
typedef struct dist__shm_flag {
  _Atomic int64_t value;
  _Atomic uint32_t seq, waiters; /* a waiter sleeps on seq (a futex) once counted in waiters */
} dist__shm_flag;

/* Raise my flag to v (release: what I wrote before is visible to whoever
 * sees v) and wake the members asleep on it. */
void dist__shm_flag_raise(dist__shm_flag *f, int64_t v);
/* How a wait behaves before it sleeps, and its bound. */
typedef struct dist__shm_wait {
  double spin_s;    /* spin this long (a core per rank: waking from a sleep costs tens of microseconds) */
  double yield_s;   /* then test and yield the core this long (fewer cores: the peer may need this one) */
  double limit_off; /* the bound when DIST_TIMEOUT is off; 0: none */
} dist__shm_wait;

/* Wait until member `peer`'s flag f reaches v (acquire): a short spin, then
 * as `how` says, then asleep on the flag. Every 10 ms asleep it checks that
 * the peer is alive (its lock): one that is gone ends the wait at once, naming it;
 * DIST_TIMEOUT (or how->limit_off), counted from t0 (dist__shm_seconds()),
 * bounds the rest. Both break the job (dist__break). `what` names the
 * place in messages ("the check round"). */
dist_status dist__shm_flag_wait(const dist__shm_seg *seg, dist__shm_flag *f, int64_t v, int peer, double t0,
                                const dist__shm_wait *how, const char *call, const char *what);
double dist__shm_seconds(void);

#endif
