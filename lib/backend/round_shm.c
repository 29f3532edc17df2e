/* The check round through shared memory (see round_shm.h). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/agree.h"
#include "backend/backend.h"
#include "backend/round_shm.h"
#include "backend/shm_seg.h"
#include "backend/spec.h"
#include "backend/wait.h"
#include "core/check.h"

#define WORDS 6 /* room for the round's words (agree.h) */
#define PROGRESS_TAG 0x0c0f /* never sent: probed only to let MPI progress */

typedef struct slot {
  dist__shm_flag round; /* the round's number, raised after the words */
  int64_t w[WORDS];
} slot;
_Static_assert(sizeof(slot) == 64, "one cache line per slot");
_Static_assert(DIST__ROUND_WORDS <= WORDS, "the round's words fit a slot");

struct dist__round_shm {
  MPI_Win win;        /* MPI: the window (MPI_WIN_NULL for a mapped segment) */
  dist__shm_seg seg;  /* without MPI: the mapped POSIX segment */
  slot *slots;        /* parity 0's P slots, then parity 1's */
  int64_t rounds;
  int me, size;
  int64_t words[]; /* the round's local words, P blocks (agree.c): no allocation per round */
};

static size_t words_bytes(int size) { return (size_t)size * DIST__ROUND_WORDS * sizeof(int64_t); }

int64_t *dist__round_shm_words(dist__round_shm *sh) { return sh->words; }

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
  dist__round_shm *sh = calloc(1, sizeof *sh + words_bytes(g->size));
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

/* Without MPI (Gloo): a POSIX shared-memory segment (shm_seg.h). Any
 * failure on any member: messages, on every member. */
static dist_status open_mapped(dist__group *g) {
  dist__shm_seg seg;
  dist__round_shm *sh = calloc(1, sizeof *sh + words_bytes(g->size)); /* before: a member without it refuses the segment */
  dist_status s = dist__shm_seg_open(g, "round", 2 * (size_t)g->size * sizeof(slot), sh != NULL, &seg);
  if (s || !seg.map) return free(sh), s;
  sh->win = MPI_WIN_NULL, sh->seg = seg, sh->slots = seg.map, sh->me = g->rank, sh->size = g->size;
  g->round = sh;
  return DIST_SUCCESS;
}

dist_status dist__round_shm_open(dist__group *g) {
  if (g->rank < 0 || g->size < 2 || !dist__engine.round_shm) return DIST_SUCCESS;
  if (g->gloo) return open_mapped(g);
  return g->mpi ? open_mpi(g) : DIST_SUCCESS;
}

void dist__round_shm_close(dist__group *g) {
  dist__round_shm *sh = g->round;
  if (!sh) return;
  g->round = NULL;
  if (sh->seg.map) { /* no collective: the name is gone already */
    dist__shm_seg_close(&sh->seg);
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
    if (atomic_load_explicit(&s->round.value, memory_order_acquire) < a->round) return 0;
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

/* Without MPI: no progress to make (Gloo has its own threads) and no fault
 * channel: sleep on each peer's slot in turn (shm_seg.h). */
static dist_status wait_mapped(arrival *a, const char *call) {
  /* Sleep soon: with Gloo's TCP carrying the data, its threads need the cores. */
  static const dist__shm_wait how = {0, 0, 0};
  double t0 = dist__shm_seconds();
  for (; a->next < a->sh->size; a->next++) {
    int peer = (a->sh->me + a->next) % a->sh->size;
    DIST_CHECK(dist__shm_flag_wait(&a->sh->seg, &slot_of(a->sh, a->round, peer)->round, a->round, peer, t0, &how, call,
                                   "the check round"));
  }
  return DIST_SUCCESS;
}

dist_status dist__round_shm_exchange(dist__round_shm *sh, MPI_Comm comm, int64_t *w, int n, dist__spec *spec,
                                     const char *call) {
  int64_t k = ++sh->rounds;
  slot *mine = slot_of(sh, k, sh->me);
  memcpy(mine->w, w, sizeof *w * (size_t)n);
  if (sh->seg.map) dist__shm_flag_raise(&mine->round, k); /* and wake whoever sleeps on this slot */
  else atomic_store_explicit(&mine->round.value, k, memory_order_release);
  dist__spec_copy_own(spec);
  arrival a = {sh, comm, k, 1};
  if (sh->seg.map) {
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
