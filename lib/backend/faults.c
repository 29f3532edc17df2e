/* The fault channel (see faults.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "backend/faults.h"

#define TAG 0x0fa7
#define GROUPS DIST__TRACKED_GROUPS
#define KEYS 256    /* PRECHECK failures remembered for matching */
#define OUTBOX 16   /* send buffers, reused in turn: a notice is long delivered when its slot comes round */

typedef struct notice {
  int32_t session; /* which dist_manager_initialize of the sender: older ones are ignored */
  int32_t type, rank, ngroups;
  int32_t occurrence; /* PRECHECK: how many times the sender has failed with this key */
  uint64_t arrived[GROUPS];
  char key[128];  /* PRECHECK: "call\0group" */
  char text[512]; /* the sender's own message */
} notice;

static notice outbox[OUTBOX]; /* buffers of sends never waited for */
static int nout;
static notice **inbox;        /* [world rank * TYPES + type]: the latest notice of each kind */
static struct { char key[128]; int count; } keys[KEYS]; /* this rank's own PRECHECK failures */
static int nkeys;
static int open_; /* dist__engine.faults is valid (it is 0, not MPI_COMM_NULL, in a zeroed state) */
/* Counts dist__faults_open calls, the same on every rank (initialize is
 * collective). Notices of an earlier session can still arrive: MPICH gives
 * a new communicator the context of a freed one whose unreceived notices
 * are still queued. */
static int32_t session;

dist_status dist__faults_open(void) {
  inbox = calloc((size_t)dist__groups.size * DIST__FAULT_TYPES, sizeof *inbox);
  /* The duplicate is collective: made on every rank, whatever the allocation did. */
  int rc = MPI_Comm_dup(dist__engine.world, &dist__engine.faults);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Comm_dup (fault channel)");
  DIST_WARN_CALL(MPI_Comm_set_errhandler(dist__engine.faults, MPI_ERRORS_RETURN));
  session++;
  nkeys = 0;
  open_ = 1;
  return inbox ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "fault channel for %d ranks", dist__groups.size);
}

void dist__faults_close(void) {
  int finalized = 0;
  DIST_WARN_CALL(MPI_Finalized(&finalized));
  /* Notices nobody received stay in MPI's queues; freeing the communicator
   * is local for MPI and completes once they are gone. */
  if (open_ && !finalized) DIST_WARN_CALL(MPI_Comm_free(&dist__engine.faults));
  dist__engine.faults = MPI_COMM_NULL;
  open_ = 0;
  if (inbox)
    for (int i = 0; i < dist__groups.size * DIST__FAULT_TYPES; i++) free(inbox[i]);
  free(inbox);
  inbox = NULL;
}

static void fill_arrived(notice *n) {
  n->ngroups = dist__groups.ngroups < GROUPS ? dist__groups.ngroups : GROUPS;
  for (int i = 0; i < n->ngroups; i++) n->arrived[i] = dist__groups.groups[i]->seq;
}

void dist__faults_announce(dist__fault_type type, const char *key, const char *text) {
  if (!open_ || dist__groups.size == 1) return;
  notice *n = &outbox[nout++ % OUTBOX];
  memset(n, 0, sizeof *n);
  n->session = session;
  n->type = type;
  n->rank = dist__groups.rank;
  fill_arrived(n);
  if (type == DIST__FAULT_PRECHECK && key) {
    memcpy(n->key, key, sizeof n->key);
    int i = 0;
    while (i < nkeys && memcmp(keys[i].key, key, sizeof n->key) != 0) i++;
    if (i == nkeys && nkeys < KEYS) memcpy(keys[nkeys++].key, key, sizeof n->key);
    if (i < nkeys) n->occurrence = ++keys[i].count;
  }
  snprintf(n->text, sizeof n->text, "%s", text ? text : "");
  for (int r = 0; r < dist__groups.size; r++) {
    MPI_Request q;
    if (r != dist__groups.rank && MPI_Isend(n, (int)sizeof *n, MPI_BYTE, r, TAG, dist__engine.faults, &q) == MPI_SUCCESS)
      DIST_WARN_CALL(MPI_Request_free(&q)); /* small and eager; the buffer stays valid until exit */
  }
}

static void receive(void) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG, dist__engine.faults, &flag, &st) != MPI_SUCCESS || !flag) return;
    notice *n = malloc(sizeof *n), dummy;
    int count = 0;
    if (MPI_Get_count(&st, MPI_BYTE, &count) != MPI_SUCCESS) count = -1; /* dropped below */
    if (MPI_Recv(n ? n : &dummy, (int)sizeof *n, MPI_BYTE, st.MPI_SOURCE, TAG, dist__engine.faults, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS ||
        !n || count != (int)sizeof *n || n->session != session || n->type < 0 || n->type >= DIST__FAULT_TYPES ||
        n->rank != st.MPI_SOURCE || n->ngroups < 0 || n->ngroups > GROUPS) {
      free(n); /* not a notice of this build, or of an earlier session: ignored */
      continue;
    }
    n->key[sizeof n->key - 1] = n->text[sizeof n->text - 1] = 0;
    notice **slot = &inbox[st.MPI_SOURCE * DIST__FAULT_TYPES + n->type];
    free(*slot);
    *slot = n;
  }
}

/* Has this rank failed the same call on the same group as often (a
 * consistent error, which every rank returned: nobody waits for anybody)? */
static int same_precheck(const notice *n) {
  for (int i = 0; i < nkeys; i++)
    if (memcmp(keys[i].key, n->key, sizeof n->key) == 0) return n->occurrence > 0 && keys[i].count >= n->occurrence;
  return 0;
}

static const char *why(const notice *n) {
  switch (n->type) {
    case DIST__FAULT_PRECHECK: return "it rejected the call before its group could check it";
    case DIST__FAULT_FINALIZE: return "it called dist_manager_finalize";
    case DIST__FAULT_EXIT: return "it exited without calling dist_manager_finalize";
    default: return "it gave up an earlier wait";
  }
}

dist_status dist__faults_check(void) {
  const dist__current *c = &dist__engine.cur;
  if (!open_ || !inbox) return DIST_SUCCESS;
  receive();
  if (!c->g || !c->g->members) return DIST_SUCCESS;
  for (int i = 0; i < c->g->size; i++) {
    int r = c->g->members[i];
    for (int t = 0; r != dist__groups.rank && t < DIST__FAULT_TYPES; t++) {
      const notice *n = inbox[r * DIST__FAULT_TYPES + t];
      if (!n || (t == DIST__FAULT_PRECHECK && same_precheck(n))) continue;
      uint64_t arrived = c->g->index < n->ngroups ? n->arrived[c->g->index] : 0;
      /* It took part in this call already; but a rank that gave up or left
       * during this very call will not finish it (its round contribution
       * can still complete ours, and then it misses the error path's
       * exchanges). */
      int during = t == DIST__FAULT_BROKEN || t == DIST__FAULT_EXIT;
      if (during ? arrived > c->seq : arrived >= c->seq) continue;
      return dist__error(DIST_ERR_ABORTED,
                         "%s on group '%s' (call #%llu) cannot complete: rank %d will not take part: %s after "
                         "%llu call(s) on this group (its message: %s)",
                         c->what, c->g->name, (unsigned long long)c->seq, r, why(n), (unsigned long long)arrived,
                         n->text[0] ? n->text : "none");
    }
  }
  return DIST_SUCCESS;
}

void dist__faults_note(int r, char *buf, size_t n) {
  if (!open_ || !inbox || r < 0 || r >= dist__groups.size) return;
  receive();
  size_t k = strlen(buf);
  for (int t = 0; t < DIST__FAULT_TYPES && k < n; t++) {
    const notice *m = inbox[r * DIST__FAULT_TYPES + t];
    if (m && !(t == DIST__FAULT_PRECHECK && same_precheck(m)))
      k += (size_t)snprintf(buf + k, n - k, "; rank %d had announced: %s", r, m->text[0] ? m->text : why(m));
  }
}

void dist__faults_flush(double seconds) {
  double t0 = MPI_Wtime();
  /* Drive MPI's progress so the notices leave (with UCX a send can need the
   * sender's progress), while the others' waits report them. */
  while (MPI_Wtime() - t0 < seconds) {
    int flag = 0;
    if (open_) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dist__engine.faults, &flag, MPI_STATUS_IGNORE);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
}

void dist__faults_drain(double seconds) {
  if (!open_ || !inbox) return;
  double t0 = MPI_Wtime();
  for (;;) {
    receive();
    int missing = 0;
    for (int r = 0; r < dist__groups.size; r++)
      missing += r != dist__groups.rank && !inbox[r * DIST__FAULT_TYPES + DIST__FAULT_FINALIZE];
    if (!missing || MPI_Wtime() - t0 >= seconds) return;
    nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}
