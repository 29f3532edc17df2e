/* The MPI backend: host memory (Open MPI rides UCX with pml ucx). */
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "core/reserve.h"
#include "backend/half_ops.h"
#include "backend/spec.h"
#include "backend/wait.h"

static MPI_Datatype mpi_type(dist_dtype t) {
  switch (t) {
    case DIST_F32: return MPI_FLOAT;
    case DIST_F64: return MPI_DOUBLE;
    case DIST_BF16:
    case DIST_F16: return MPI_UINT16_T; /* moved, never reduced: the caller upcasts */
    case DIST_C64: return MPI_C_FLOAT_COMPLEX;
    case DIST_C128: return MPI_C_DOUBLE_COMPLEX;
    case DIST_I32: return MPI_INT32_T;
    case DIST_I64: return MPI_INT64_T;
    default: return MPI_UINT8_T;
  }
}

static MPI_Op mpi_op(dist_reduce_op op) {
  switch (op) {
    case DIST_MAX: return MPI_MAX;
    case DIST_MIN: return MPI_MIN;
    case DIST_PROD: return MPI_PROD;
    default: return MPI_SUM;
  }
}

static int can_reduce(dist_dtype t, dist_reduce_op op) {
  if (dist__dtype_is16(t) || op == DIST_AVG) return 0;
  if (dist__dtype_kind(t) == DIST__COMPLEX) return op == DIST_SUM || op == DIST_PROD;
  return 1;
}

#define SMALL_INTS 64 /* 4 arrays for 16 ranks */

static dist_status count_int(size_t n, int *out) {
  if (n > INT_MAX)
    return dist__error(DIST_ERR_UNSUPPORTED, "%zu elements exceed the MPI count limit of %d per rank", n, INT_MAX);
  *out = (int)n;
  return DIST_SUCCESS;
}

/* MPI takes int counts and displacements: `k` arrays of n entries converted
 * into one block, kept in the pending state of non-blocking calls until
 * completion. Made after the check round: core/reserve.h. */
static dist_status int_arrays(int n, int k, const size_t *const *in, int *small, int **out) {
  int *v = small && k * n <= SMALL_INTS ? small : dist__reserve_alloc(sizeof(int) * (size_t)k * (size_t)(n ? n : 1), 0);
  if (!v) return dist__error(DIST_ERR_NO_MEMORY, "count arrays for %d ranks", n);
  for (int j = 0; j < k; j++)
    for (int i = 0; i < n; i++) {
      if (in[j][i] > INT_MAX) {
        if (v != small) dist__reserve_free(v);
        return dist__error(DIST_ERR_UNSUPPORTED, "count or offset %zu exceeds the MPI limit of %d", in[j][i], INT_MAX);
      }
      v[j * n + i] = (int)in[j][i];
    }
  *out = v;
  return DIST_SUCCESS;
}

/* `small`: the caller's array of SMALL_INTS, used when the arrays fit and the
 * call really blocks (a polled wait may give up and leave the request, and
 * with it the arrays, to MPI: then they must outlive the frame); NULL: heap. */
#define INT_ARRAYS(g, v, small, ...)                                                                        \
  int_arrays((g)->size, (int)(sizeof((const size_t *[]){__VA_ARGS__}) / sizeof(size_t *)),                 \
             (const size_t *const[]){__VA_ARGS__}, (small), &(v))

/* v came from INT_ARRAYS with `small`: freed unless it is small or a
 * broken wait left it to MPI. */
static void int_arrays_free(int *v, const int *small) {
  if (v != small && !dist__engine.broken) dist__reserve_free(v);
}

static dist_status done(int rc, const char *call) { return rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, call); }

/* A non-blocking call and its wait (DIST_TIMEOUT: the wait is bounded). */
static dist_status waited(int rc, MPI_Request *q, const char *call) {
  return dist__wait_posted(rc, q, call, DIST__WAIT_DATA);
}

/* With DIST_TIMEOUT set, every blocking call runs as its non-blocking form
 * plus a bounded wait; so too where waits must yield the core (an MPI that
 * busy-polls, more ranks than cores); otherwise as the blocking call itself. */
static int truly_blocking(void) { return !dist__wait_polled() && !dist__wait_yields(); }
#define BLOCKING(blocking, nonblocking, ...)                                                            \
  (!truly_blocking() ? waited(nonblocking(__VA_ARGS__, &q_), &q_, #nonblocking) : done(blocking(__VA_ARGS__), #blocking))

static dist_status all_reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t,
                              dist_reduce_op op, dist__pending *p) {
  int n = 0;
  DIST_CHECK(count_int(count, &n));
  const void *s = send == recv ? MPI_IN_PLACE : send;
  if (!p && count * dist_dtype_size(t) >= dist__engine.nb_allreduce_min) {
    /* Large: libnbc's Rabenseifner beats the blocking path's choice (manager.c). */
    MPI_Request r;
    return waited(MPI_Iallreduce(s, recv, n, mpi_type(t), mpi_op(op), dist__comm(g), &r), &r, "MPI_Iallreduce");
  }
  MPI_Request q_;
  if (!p) return BLOCKING(MPI_Allreduce, MPI_Iallreduce, s, recv, n, mpi_type(t), mpi_op(op), dist__comm(g));
  p->state = NULL;
  return done(MPI_Iallreduce(s, recv, n, mpi_type(t), mpi_op(op), dist__comm(g), &p->mpi), "MPI_Iallreduce");
}

static dist_status broadcast(dist__group *g, void *buf, size_t count, dist_dtype t, int root) {
  int n = 0;
  DIST_CHECK(count_int(count, &n));
  MPI_Request q_;
  return BLOCKING(MPI_Bcast, MPI_Ibcast, buf, n, mpi_type(t), root, dist__comm(g));
}

static dist_status reduce(dist__group *g, const void *send, void *recv, size_t count, dist_dtype t, dist_reduce_op op,
                          int root) {
  int n = 0;
  DIST_CHECK(count_int(count, &n));
  const void *s = send == recv && g->rank == root ? MPI_IN_PLACE : send;
  MPI_Request q_;
  return BLOCKING(MPI_Reduce, MPI_Ireduce, s, recv, n, mpi_type(t), mpi_op(op), root, dist__comm(g));
}

static dist_status all_gather_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, dist_dtype t, dist__pending *p) {
  int *v, small[SMALL_INTS];
  DIST_CHECK(INT_ARRAYS(g, v, p || !truly_blocking() ? NULL : small, counts, displs));
  int rc, P = g->size;
  if (p) {
    p->state = v;
    rc = MPI_Iallgatherv(send, v[g->rank], mpi_type(t), recv, v, v + P, mpi_type(t), dist__comm(g), &p->mpi);
    if (rc != MPI_SUCCESS) dist__reserve_free(v), p->state = NULL;
    return done(rc, "MPI_Iallgatherv");
  }
  MPI_Request q_;
  dist_status st = BLOCKING(MPI_Allgatherv, MPI_Iallgatherv, send, v[g->rank], mpi_type(t), recv, v, v + P, mpi_type(t),
                            dist__comm(g));
  int_arrays_free(v, small);
  return st;
}

static dist_status reduce_scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts,
                                    const size_t *displs, dist_dtype t, dist_reduce_op op) {
  int *v, small[SMALL_INTS];
  DIST_CHECK(INT_ARRAYS(g, v, truly_blocking() ? small : NULL, counts, displs));
  /* Chunks are consecutive (displs are prefix sums), as MPI_Reduce_scatter wants. */
  MPI_Request q_;
  dist_status st = BLOCKING(MPI_Reduce_scatter, MPI_Ireduce_scatter, send, recv, v, mpi_type(t), mpi_op(op), dist__comm(g));
  int_arrays_free(v, small);
  return st;
}

static dist_status gather_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                            dist_dtype t, int root) {
  int *v, small[SMALL_INTS];
  DIST_CHECK(INT_ARRAYS(g, v, truly_blocking() ? small : NULL, counts, displs));
  MPI_Request q_;
  dist_status st = BLOCKING(MPI_Gatherv, MPI_Igatherv, send, v[g->rank], mpi_type(t), recv, v, v + g->size,
                            mpi_type(t), root, dist__comm(g));
  int_arrays_free(v, small);
  return st;
}

static dist_status scatter_v(dist__group *g, const void *send, void *recv, const size_t *counts, const size_t *displs,
                             dist_dtype t, int root) {
  int *v, small[SMALL_INTS];
  DIST_CHECK(INT_ARRAYS(g, v, truly_blocking() ? small : NULL, counts, displs));
  MPI_Request q_;
  dist_status st = BLOCKING(MPI_Scatterv, MPI_Iscatterv, send, v, v + g->size, mpi_type(t), recv, v[g->rank],
                            mpi_type(t), root, dist__comm(g));
  int_arrays_free(v, small);
  return st;
}

static dist_status all_to_all_v(dist__group *g, const void *send, const size_t *sc, const size_t *sd, void *recv,
                                const size_t *rc_, const size_t *rd, dist_dtype t, dist__pending *p) {
  int *v, P = g->size, rc, small[SMALL_INTS];
  DIST_CHECK(INT_ARRAYS(g, v, p || !truly_blocking() ? NULL : small, sc, sd, rc_, rd));
  MPI_Datatype mt = mpi_type(t);
  if (p) {
    p->state = v;
    rc = MPI_Ialltoallv(send, v, v + P, mt, recv, v + 2 * P, v + 3 * P, mt, dist__comm(g), &p->mpi);
    if (rc != MPI_SUCCESS) dist__reserve_free(v), p->state = NULL;
    return done(rc, "MPI_Ialltoallv");
  }
  MPI_Request q_;
  dist_status st = BLOCKING(MPI_Alltoallv, MPI_Ialltoallv, send, v, v + P, mt, recv, v + 2 * P, v + 3 * P, mt, dist__comm(g));
  int_arrays_free(v, small);
  return st;
}

static dist_status barrier(dist__group *g) {
  MPI_Request q_;
  return BLOCKING(MPI_Barrier, MPI_Ibarrier, dist__comm(g));
}

static dist_status wait(dist__pending *p) {
  dist_status s = dist__wait(&p->mpi, "MPI_Wait", DIST__WAIT_DATA);
  if (s && dist__engine.broken) return s; /* the request may still use its count arrays */
  dist__reserve_free(p->state);
  p->state = NULL;
  return s;
}

static dist_status test(dist__pending *p, int *flag) {
  int rc = MPI_Test(&p->mpi, flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS || *flag) {
    dist__reserve_free(p->state);
    p->state = NULL;
  }
  return done(rc, "MPI_Test");
}

dist_status dist__mpi_broadcast_napping(dist__group *g, void *buf, size_t count, dist_dtype t, int root) {
  int n = 0, finished = 0;
  DIST_CHECK(count_int(count, &n));
  MPI_Request q;
  int rc = MPI_Ibcast(buf, n, mpi_type(t), root, dist__comm(g), &q);
  while (rc == MPI_SUCCESS && (rc = MPI_Test(&q, &finished, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !finished) {
    struct timespec nap = {0, 50000}; /* 50 us: noise against a sync of milliseconds */
    nanosleep(&nap, NULL);
  }
  return done(rc, "MPI_Ibcast");
}

/* The 16-bit sum through a user MPI_Op (half_ops.c) on MPI_UINT16_T. */
static dist_status sum16(dist__group *g, void *buf, size_t count, dist_dtype t, dist__pending *p) {
  MPI_Op op;
  int n = 0;
  DIST_CHECK(dist__half_sum_op(t, &op));
  DIST_CHECK(count_int(count, &n));
  MPI_Request q_;
  if (!p) return BLOCKING(MPI_Allreduce, MPI_Iallreduce, MPI_IN_PLACE, buf, n, MPI_UINT16_T, op, dist__comm(g));
  p->state = NULL;
  return done(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_UINT16_T, op, dist__comm(g), &p->mpi), "MPI_Iallreduce (16-bit sum)");
}

static dist_status all_to_all_v_post(dist__spec *sp, dist__group *g, const void *send, const size_t *sc,
                                     const size_t *sd, void *recv, const size_t *rc_, const size_t *rd, dist_dtype t) {
  return dist__spec_a2a_post(sp, g, send, sc, sd, recv, rc_, rd, mpi_type(t), dist_dtype_size(t));
}

static size_t max_count(void) { return INT_MAX; }

const dist__backend dist__backend_mpi = {
    "mpi", can_reduce, all_reduce, broadcast, reduce, all_gather_v, reduce_scatter_v,
    gather_v, scatter_v, all_to_all_v, barrier, wait, test, NULL, sum16, all_to_all_v_post, max_count,
};
