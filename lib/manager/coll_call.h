/* The common start of every collective: group lookup, argument checks and
 * the cross-rank verification round (DIST_VERIFY). */
#ifndef DISTMGR_COLL_CALL_H
#define DISTMGR_COLL_CALL_H

#include "backend/backend.h"
#include "backend/spec.h"
#include "manager/state.h"

/* What must agree across the ranks of a call. Shapes along a split dimension
 * differ by design and are left out (zeroed); size arrays enter as a hash. */
typedef struct dist__sig {
  int32_t dtype, memory, ndim, dim, op, root, aux, pad;
  char kind[40]; /* the public call's name: a different collective is a mismatch */
  uint64_t seq;  /* this call's number on its group: a skipped call is a mismatch at the next one */
  int64_t shape[DIST_TENSOR_MAX_DIMS];
  uint64_t sizes;
} dist__sig;

typedef struct dist__call {
  const char *what; /* the public function name, for messages */
  dist__group *g;
  const dist__backend *be;
  dist__sig sig;
  /* All-to-all calls: my send/recv counts and their balance (see
   * dist__sig_exchange); NULL otherwise. */
  const int64_t *xsend, *xrecv;
  uint64_t balance;
  /* How a signature reads in a mismatch message (NULL: as a tensor call). */
  void (*describe)(const dist__sig *s, char *buf, size_t n);
} dist__call;

/* Find the group, check membership and number the call on its group.
 * Local; an unknown group name cannot take part in the check of the group
 * the other ranks meant, so it is also announced on the fault channel: they
 * then fail instead of waiting for this rank. */
dist_status dist__call_begin(dist__call *c, const char *what, const char *group);
/* The lookup alone, for local queries: no numbering, no announcement. */
dist_status dist__call_lookup(dist__call *c, const char *what, const char *group);

/* Agree across the group on `local` (this rank's validation result) and on
 * the signature; returns the same status on every rank, naming the rank that
 * failed or disagreed. Skipped (returns `local`) with DIST_VERIFY=0. */
dist_status dist__call_verify(dist__call *c, dist_status local);
/* The same round whatever DIST_VERIFY says: for one-time setup (FFT plans). */
dist_status dist__call_verify_always(dist__call *c, dist_status local);
/* The round of a call whose data went first (backend/spec.h): a failed
 * round has settled `spec` on every rank when this returns. */
dist_status dist__call_verify_spec(dist__call *c, dist_status local, dist__spec *spec);

/* Argument checks (local), each writing a message that names `what`. */
dist_status dist__check_tensor(const dist__call *c, const dist_tensor *t, const char *name);
dist_status dist__check_same_memory(const dist__call *c, const dist_tensor *a, const dist_tensor *b);
dist_status dist__check_dim(const dist__call *c, const dist_tensor *t, int dim, const char *name);
dist_status dist__check_rank(const dist__call *c, int r, const char *name);
/* `t`'s elements within c->be's count limit (an MPI int), so that an
 * all-to-all's counts and offsets, which are each rank's own, fail in the
 * check round on every rank rather than in the engine on this one. */
dist_status dist__check_engine_count(const dist__call *c, const dist_tensor *t, const char *name);
/* Also switches c->be to its fallback when only that one can reduce. */
dist_status dist__check_op(dist__call *c, dist_dtype t, dist_reduce_op op);
/* `t` must have shape `ref` except extent `n` along dim. */
dist_status dist__check_shape_along(const dist__call *c, const dist_tensor *t, const char *name,
                                    const dist_tensor *ref, int dim, int64_t n);
/* sizes (P entries) non-negative; *sum set. */
dist_status dist__check_sizes(const dist__call *c, const int64_t *sizes, const char *name, int64_t *sum);

/* Fill the signature from a tensor (dim >= 0: that extent left out). */
void dist__sig_tensor(dist__call *c, const dist_tensor *t, int dim);
void dist__sig_sizes(dist__call *c, const int64_t *sizes);
/* Per-peer counts of an all-to-all: what I send to r must be what r expects
 * from me. Each rank adds a hash of (me -> r, send[r]) and subtracts one of
 * (r -> me, recv[r]); the verification round sums these over the group, which
 * is 0 exactly when every pair agrees (up to hash collisions). */
void dist__sig_exchange(dist__call *c, const int64_t *send, const int64_t *recv);
void dist__describe_shape(const dist_tensor *t, char *buf, size_t n); /* "f32[4,3]" */

/* After verification, before the backend call: when this rank prepared
 * something that can fail (scratch, packing), agree on the outcome so a local
 * failure is an error everywhere, not a hang (only with DIST_VERIFY=1).
 * Every rank of the group must call it at the same point. */
dist_status dist__call_ready(dist__call *c, dist_status s);

/* Pick the backend for memory space `mem` into c->be. */
dist_status dist__call_backend(dist__call *c, dist_memory mem);

#endif
