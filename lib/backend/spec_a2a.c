/* The speculative all-to-all-v and its settling (see spec.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "backend/backend.h"
#include "backend/spec.h"
#include "backend/wait.h"

#define SPEC_TAG 0x0c0e /* the data of speculative exchanges; the round has its own */

void dist__spec_init(dist__spec *sp) {
  sp->comm = MPI_COMM_NULL;
  sp->me = 0, sp->size = 1;
  sp->posted = 0;
  sp->q = NULL;
  sp->own_src = sp->own_dst = NULL;
  sp->own_bytes = 0;
}

void dist__spec_copy_own(dist__spec *sp) {
  if (sp && sp->own_bytes) memcpy(sp->own_dst, sp->own_src, sp->own_bytes);
  if (sp) sp->own_bytes = 0;
}

/* Request slots: the receive from `from`, the send to `to`. */
static int recv_slot(const dist__spec *sp, int from) { return (sp->me - from + sp->size) % sp->size - 1; }
static int send_slot(const dist__spec *sp, int to) { return sp->size - 1 + (to - sp->me + sp->size) % sp->size - 1; }

static void release_slots(dist__spec *sp) {
  if (sp->q != sp->inline_q) free(sp->q);
  sp->q = NULL;
  sp->posted = 0;
}

dist_status dist__spec_a2a_post(dist__spec *sp, dist__group *g, const void *send, const size_t *sc, const size_t *sd,
                                void *recv, const size_t *rc, const size_t *rd, MPI_Datatype t, size_t es) {
  int P = g->size, me = g->rank, n = 2 * (P - 1);
  dist__spec_init(sp);
  for (int r = 0; r < P; r++)
    if (sc[r] > INT_MAX || rc[r] > INT_MAX)
      return dist__error(DIST_ERR_UNSUPPORTED, "%zu elements for rank %d exceed the MPI count limit of %d",
                         sc[r] > rc[r] ? sc[r] : rc[r], r, INT_MAX);
  sp->q = n <= DIST__SPEC_INLINE ? sp->inline_q : malloc(sizeof *sp->q * (size_t)n);
  if (!sp->q) return dist__error(DIST_ERR_NO_MEMORY, "requests of an all-to-all over %d ranks", P);
  sp->comm = dist__comm(g), sp->me = me, sp->size = P;
  const char *in = send;
  char *out = recv;
  int rc_ = MPI_SUCCESS;
  for (int k = 1; k < P && rc_ == MPI_SUCCESS; k++) {
    int from = (me - k + P) % P;
    rc_ = MPI_Irecv(out + rd[from] * es, (int)rc[from], t, from, SPEC_TAG, sp->comm, &sp->q[recv_slot(sp, from)]);
  }
  for (int k = 1; k < P && rc_ == MPI_SUCCESS; k++) {
    int to = (me + k) % P;
    rc_ = MPI_Isend(in + sd[to] * es, (int)sc[to], t, to, SPEC_TAG, sp->comm, &sp->q[send_slot(sp, to)]);
  }
  if (rc_ != MPI_SUCCESS) { /* some are in flight and cannot be taken back: the rank stops */
    dist_status s = dist__break(dist__mpi_error(rc_, "MPI_Isend/MPI_Irecv (all-to-all)"));
    sp->q = NULL; /* (left to MPI) */
    return s;
  }
  sp->posted = 1;
  sp->own_src = in + sd[me] * es, sp->own_dst = out + rd[me] * es, sp->own_bytes = sc[me] * es;
  return DIST_SUCCESS;
}

dist_status dist__spec_finish(dist__spec *sp, const char *call) {
  dist__spec_copy_own(sp);
  dist_status s = dist__waitall(2 * (sp->size - 1), sp->q, call);
  if (s && dist__engine.broken) return s; /* the requests stay with MPI */
  release_slots(sp);
  return s;
}

void dist__spec_release(dist__spec *sp) {
  if (!sp->posted) return; /* never posted, or settled by the round */
  /* The round gave up (fault, DIST_TIMEOUT): the engine is broken. Take
   * back the receives that nothing matched, so that no late message lands
   * in the caller's memory; the rest stays with MPI. */
  for (int k = 1; k < sp->size; k++) {
    MPI_Request *q = &sp->q[k - 1];
    if (*q != MPI_REQUEST_NULL) (void)MPI_Cancel(q);
  }
  release_slots(sp); /* (the handles; the requests stay with MPI) */
}

/* Receive and drop the one message `from` sent me speculatively. */
static dist_status drain(MPI_Comm comm, int from, const char *call) {
  MPI_Message m;
  MPI_Status st;
  int n = 0;
  DIST_MPI_CALL(MPI_Mprobe(from, SPEC_TAG, comm, &m, &st));
  DIST_MPI_CALL(MPI_Get_count(&st, MPI_BYTE, &n));
  void *buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf) return dist__break(dist__error(DIST_ERR_NO_MEMORY, "%s: %d bytes to drain from rank %d", call, n, from));
  int rc = MPI_Mrecv(buf, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
  free(buf);
  return rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, "MPI_Mrecv (draining an all-to-all)");
}

/* A data request of a failed exchange: its own error (a message longer
 * than the receive: MPI_ERR_TRUNCATE) is expected; a wait that gave up is not. */
static dist_status settle_one(MPI_Request *q, const char *call) {
  dist_status s = dist__wait(q, call, DIST__WAIT_CONTROL);
  return s && dist__engine.broken ? s : DIST_SUCCESS;
}

dist_status dist__spec_settle(MPI_Comm comm, int me, int size, dist__spec *sp, const char *call) {
  int mine = sp && sp->posted;
  /* On the heap: a control wait that gives up leaves the buffers to MPI. */
  int *posted = malloc(sizeof *posted * (size_t)(size + 1));
  if (!posted) return dist__break(dist__error(DIST_ERR_NO_MEMORY, "%s: settling an all-to-all", call));
  posted[size] = mine;
  MPI_Request q;
  DIST_CHECK(dist__wait_posted(MPI_Iallgather(&posted[size], 1, MPI_INT, posted, 1, MPI_INT, comm, &q), &q,
                               "MPI_Iallgather (settling an all-to-all)", DIST__WAIT_CONTROL));
  /* A truncated receive is an error of its request; MPICH reports it
   * through MPI_COMM_WORLD's handler (fatal by default), not the request's
   * communicator's: the world's handler returns errors while we settle. */
  MPI_Errhandler keep = MPI_ERRHANDLER_NULL;
  int swapped = mine && MPI_Comm_get_errhandler(MPI_COMM_WORLD, &keep) == MPI_SUCCESS &&
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS;
  dist_status s = DIST_SUCCESS;
  for (int k = 1; k < size && !s; k++) {
    int peer = (me - k + size) % size;
    if (mine) {
      MPI_Request *r = &sp->q[recv_slot(sp, peer)];
      if (!posted[peer]) (void)MPI_Cancel(r); /* nothing will match it */
      s = settle_one(r, call);
    } else if (posted[peer]) {
      s = drain(comm, peer, call);
    }
  }
  for (int k = 1; k < size && mine && !s; k++) s = settle_one(&sp->q[send_slot(sp, (me + k) % size)], call);
  if (swapped) (void)MPI_Comm_set_errhandler(MPI_COMM_WORLD, keep);
  if (keep != MPI_ERRHANDLER_NULL) (void)MPI_Errhandler_free(&keep);
  free(posted);
  if (s) return s;
  if (mine) release_slots(sp);
  return DIST_SUCCESS;
}
