/* Making rank-local outcomes collective, so that errors never turn into hangs.
 *
 * Every control exchange of the library (the verification round of a
 * collective, the agreement points inside initialize, plans and reducers) is
 * one and the same all-reduce of four words, so two ranks that reached
 * different control points pair up as a detectable mismatch instead of
 * reading each other's words as garbage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "state.h"
#include "wait.h"

dist_status dist__mpi_error(int code, const char *call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
  return dist__error(DIST_ERR_MPI, "%s failed: %s", call, text);
}

uint64_t dist__hash(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL; /* FNV-1a */
  return h;
}

/* MAX over (failure, hash, ~hash), SUM over the balance word. */
static void round_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const int64_t *a = in;
  int64_t *b = inout;
  for (int i = 0; i < *len; i++, a += 4, b += 4) {
    for (int k = 0; k < 3; k++)
      if (a[k] > b[k]) b[k] = a[k];
    b[3] = (int64_t)((uint64_t)b[3] + (uint64_t)a[3]);
  }
}

static MPI_Op rop = MPI_OP_NULL;
static MPI_Datatype rtype = MPI_DATATYPE_NULL;

static dist_status round_handles(MPI_Op *op, MPI_Datatype *type) {
  if (rop == MPI_OP_NULL) { /* local calls, made once per initialize */
    if (MPI_Type_contiguous(4, MPI_INT64_T, &rtype) != MPI_SUCCESS || MPI_Type_commit(&rtype) != MPI_SUCCESS ||
        MPI_Op_create(round_op, 1, &rop) != MPI_SUCCESS)
      return dist__error(DIST_ERR_MPI, "creating the control reduction failed");
  }
  *op = rop;
  *type = rtype;
  return DIST_SUCCESS;
}

/* Freed at finalize: MPICH reports handles still alive at MPI_Finalize as
 * leaks ("yaksa: 1 leaked handle pool objects") on every rank. */
void dist__round_free(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && rop != MPI_OP_NULL) MPI_Op_free(&rop);
  if (!finalized && rtype != MPI_DATATYPE_NULL) MPI_Type_free(&rtype);
  rop = MPI_OP_NULL;
  rtype = MPI_DATATYPE_NULL;
}

dist__round dist__round_init(MPI_Comm comm, dist_status local, uint64_t hash) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  dist__round r;
  /* (failing code, lowest rank) in one word: MAX picks the most negative
   * code, the lowest rank on ties. Hashes agree iff max(h) and max(~h) are
   * this rank's own values. */
  r.in[0] = local ? ((int64_t)(-(int64_t)local) << 32) | (int64_t)(0x7FFFFFFF - rank) : 0;
  r.in[1] = local ? 0 : (int64_t)hash;
  r.in[2] = local ? 0 : ~(int64_t)hash;
  r.in[3] = 0;
  if (dist__fault("round_word")) r.in[0] = 0x7fffdc8b4b60LL; /* tests: a word no rank could have sent */
  return r;
}

dist_status dist__round_run(MPI_Comm comm, dist__round *r, const char *call) {
  MPI_Op op = MPI_OP_NULL;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Request q;
  DIST_CHECK(round_handles(&op, &type));
  /* A wait that gives up (a peer's fault, DIST_TIMEOUT) leaves the request
   * to MPI, which may still write its result during a later progress call
   * (the exit-time flush): the words live on the heap, and stay there then,
   * not in the caller's stack frame. */
  int64_t *w = malloc(8 * sizeof *w);
  if (!w) return dist__error(DIST_ERR_NO_MEMORY, "%s: control words", call);
  memcpy(w, r->in, sizeof r->in);
  int rc = MPI_Iallreduce(w, w + 4, 1, type, op, comm, &q);
  if (rc != MPI_SUCCESS) {
    free(w);
    return dist__mpi_error(rc, call);
  }
  dist_status s = dist__wait(&q, call, DIST__WAIT_CONTROL);
  if (s) return s; /* w belongs to the abandoned request */
  memcpy(r->out, w + 4, sizeof r->out);
  free(w);
  return DIST_SUCCESS;
}

dist_status dist__round_failure(MPI_Comm comm, const dist__round *r, dist_status local, const char *what,
                                const char *where) {
  if (!r->out[0]) return DIST_SUCCESS;
  int size = 1;
  MPI_Comm_size(comm, &size);
  long code = -(long)(r->out[0] >> 32);
  long who = 0x7FFFFFFF - (long)(r->out[0] & 0xFFFFFFFF);
  int valid = code < 0 && dist__status_valid(code) && who >= 0 && who < size;
  if (local) { /* this rank's own message, under the code every rank returns */
    if (!valid || code == local) return local;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dist_last_error());
    return dist__error((dist_status)code, "%s", msg);
  }
  if (!valid)
    return dist__error(DIST_ERR_MISMATCH,
                       "%s%s: a rank sent a malformed check word (%#llx): ranks are in different calls or run "
                       "different distmgr builds",
                       what, where, (unsigned long long)r->out[0]);
  return dist__error((dist_status)code, "%s%s failed on rank %ld: %s; see that rank's message", what, where, who,
                     dist_status_string((dist_status)code));
}

int dist__round_hash_differs(const dist__round *r) { return r->out[1] != r->in[1] || r->out[2] != r->in[2]; }

static uint64_t hash_str(const char *s) { return dist__hash(DIST__HASH_SEED, s, strlen(s) + 1); }

/* One round on `comm`; *differs: the hashes disagree (no rank failed). */
static dist_status agree_round(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what, int *differs) {
  int size = 1;
  *differs = 0;
  MPI_Comm_size(comm, &size);
  if (size == 1) return mine;
  /* The point's name enters the hash: two different agreement points never pair silently. */
  dist__round r = dist__round_init(comm, mine, hash ^ hash_str(what));
  dist_status s = dist__round_run(comm, &r, what);
  if (!s) s = dist__round_failure(comm, &r, mine, what, "");
  if (!s) *differs = dist__round_hash_differs(&r);
  return s;
}

dist_status dist__agree(MPI_Comm comm, dist_status mine, const char *what) {
  int differs;
  dist_status s = agree_round(comm, mine, 0, what, &differs);
  if (differs)
    return dist__error(DIST_ERR_MISMATCH,
                       "%s: the ranks reached different points of the program (a call skipped or added on some "
                       "rank)",
                       what);
  return s;
}

dist_status dist__agree_status_hash(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what, int *differs) {
  dist_status s = agree_round(comm, mine, hash, what, differs);
  return *differs ? DIST_ERR_MISMATCH : s; /* the caller names what differs */
}
