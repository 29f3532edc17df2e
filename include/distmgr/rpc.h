/* Remote calls between the ranks of the world, over UCX active messages:
 * functions registered by name, called on a worker (a rank: "worker0",
 * "worker1", ... as TorchOpt names them) with tensor arguments, answered
 * through futures; partitioners and reducers that spread one call over the
 * workers and combine the answers; explicit-backward distributed autograd.
 *
 * Threading: a progress thread owned by distmgr moves every message (so do
 * waiting callers and one idle executor, for speed), and
 * remote functions run on a small pool of executor threads
 * (DIST_RPC_EXECUTORS), so a remote function may itself call other workers
 * and wait; every function here may be called from any thread, except
 * dist_rpc_init and dist_rpc_shutdown (collective, from the thread that
 * initialized the manager).
 *
 * Payloads are host memory of any dtype and size: small ones go eagerly,
 * large ones by UCX's rendezvous straight into the receiving buffer. */
#ifndef DISTMGR_RPC_H
#define DISTMGR_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "distmgr/status.h"
#include "distmgr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_RPC_MAX_ARGS 16     /* tensors per call, and per answer */
#define DIST_RPC_MAX_NAME 63     /* bytes of a function's name */
#define DIST_RPC_EXECUTORS 4     /* remote functions running at once per worker: the nesting depth */

/* ---- start-up and shutdown ------------------------------------------------ */

/* Collective over the world, after dist_manager_initialize: a UCX context and
 * worker, every worker's address exchanged over the world group, an endpoint
 * to every rank (itself included) with peer failure detection, then the
 * progress thread. Functions registered before init are served at once. */
dist_status dist_rpc_init(void);

/* Collective over the world: waits until no rank has a call in flight (its
 * own or one it serves), as torch's graceful shutdown, then stops. Calls
 * made afterwards fail with DIST_ERR_NOT_INITIALIZED. */
dist_status dist_rpc_shutdown(void);

/* 1 between init and shutdown. Local. */
int dist_rpc_is_initialized(void);

/* ---- functions ------------------------------------------------------------- */

/* What a remote function gets: the caller's rank, its argument tensors
 * (views into the received message, valid during the call), the caller's
 * option bytes. */
typedef struct dist_rpc_args {
  int caller;
  int nargs;
  const dist_tensor *args;
  const void *opts;
  size_t opts_bytes;
} dist_rpc_args;

/* Where a remote function puts its answer. */
typedef struct dist_rpc_outputs dist_rpc_outputs;

/* Adds an output tensor of the given dtype and shape, allocated by the
 * library and sent back when the function returns; *t views it (host
 * memory), for the function to fill. */
dist_status dist_rpc_output(dist_rpc_outputs *out, dist_dtype dtype, int ndim, const int64_t *shape,
                            dist_tensor *t);

/* A remote function returns DIST_SUCCESS, or an error whose status and
 * message (dist_rpc_fail, or the last error of its thread) reach the caller's
 * future with the worker's name. */
typedef dist_status (*dist_rpc_fn)(const dist_rpc_args *in, dist_rpc_outputs *out, void *user);

/* Sets this thread's error message (for a remote function's failure) and
 * returns `status`. */
dist_status dist_rpc_fail(dist_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Registers `fn` under `name` on this rank. Every rank registers the same
 * names (dist_rpc_init and dist_rpc_check_registry compare them). Local;
 * thread safe. A name registered twice is an error. */
dist_status dist_rpc_register(const char *name, dist_rpc_fn fn, void *user);

/* The vector-Jacobian product of a registered function, for distributed
 * autograd: `in` holds the forward's arguments and then the gradients of its
 * outputs (nargs + nouts tensors, opts the forward's); it adds one output
 * per forward argument, the gradient with respect to it (same shape). Once
 * per function, as dist_rpc_register: a second one is an error. */
dist_status dist_rpc_register_vjp(const char *name, dist_rpc_fn vjp, void *user);

/* Collective: every rank has registered the same names. An error names the
 * first rank and function that differ. */
dist_status dist_rpc_check_registry(void);

/* ---- futures ---------------------------------------------------------------- */

typedef struct dist_future dist_future;

/* Until the call completes or DIST_TIMEOUT passes (then DIST_ERR_TIMEOUT,
 * the call stays in flight). Returns the call's status. */
dist_status dist_future_wait(dist_future *f);
/* 1 when complete, 0 when not (never blocks). */
int dist_future_test(const dist_future *f);
/* Every future completes (the first failure's status is returned after all
 * are complete); any: *index of one that is complete. */
dist_status dist_future_wait_all(dist_future *const *fs, int n);
dist_status dist_future_wait_any(dist_future *const *fs, int n, int *index);
/* cb(f, user) runs once, when f completes: at once on this thread if it
 * already has, else on the thread that progressed its reply (the progress
 * thread, an executor or a waiting caller): keep it short. It may make calls
 * (their arguments are copied), but a wait in it for a call not yet complete
 * returns DIST_ERR_INVALID_ARGUMENT (that thread holds the worker: nothing
 * could complete it). Waits on f return after it ran. One callback per future. */
dist_status dist_future_then(dist_future *f, void (*cb)(dist_future *f, void *user), void *user);
/* A completed call's status; its message names the worker. */
dist_status dist_future_status(const dist_future *f);
const char *dist_future_message(const dist_future *f);
/* A completed call's outputs (owned by the future). */
int dist_future_count(const dist_future *f);
const dist_tensor *dist_future_output(const dist_future *f, int i);
/* Frees f; a call still in flight completes into nothing. NULL is allowed. */
void dist_future_free(dist_future *f);

/* ---- calls ------------------------------------------------------------------- */

/* Calls `name` on rank `to` (itself allowed) with nargs host tensors and
 * opts_bytes option bytes. Both are copied or sent before it returns, so the
 * caller may reuse them. Local. */
dist_status dist_rpc_call_async(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                                size_t opts_bytes, dist_future **out);
/* The same, then dist_future_wait: returns the call's status; *out holds
 * the outputs (free it) even when the call failed, for its message. */
dist_status dist_rpc_call_sync(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                               size_t opts_bytes, dist_future **out);

/* "workerN" <-> N. Local. */
dist_status dist_rpc_worker_rank(const char *worker, int *rank);
dist_status dist_rpc_worker_name(int rank, char *buf, size_t cap);


/* ---- partitioners and reducers (TorchOpt's remote_async_call) ---------------- */

/* One call of a partitioned call: the worker and its argument tensors
 * (views; a user partitioner's must stay valid until dist_rpc_remote_async
 * returns). */
typedef struct dist_rpc_task {
  int worker;
  int nargs;
  dist_tensor args[DIST_RPC_MAX_ARGS];
} dist_rpc_task;

/* A user partitioner: fills tasks[0 .. *ntasks) (at most max_tasks) from
 * the call's arguments. */
typedef dist_status (*dist_rpc_partition_fn)(int world_size, const dist_tensor *args, int nargs,
                                             dist_rpc_task *tasks, int max_tasks, int *ntasks, void *user);

typedef enum dist_rpc_partition_kind {
  DIST_RPC_PART_DIM = 0, /* split along dim over the workers */
  DIST_RPC_PART_WORKER,  /* the whole call on one worker */
  DIST_RPC_PART_USER
} dist_rpc_partition_kind;

typedef struct dist_rpc_partitioner {
  dist_rpc_partition_kind kind;
  /* DIM: every argument not in `replicated` (bit i: argument i, sent whole to
   * every task) is split along `dim`, and all have the same extent B there.
   * Not exclusive: min(B, world size) contiguous chunks, worker i the i-th
   * (uneven: the first B % n get one more). Exclusive: B tasks of one slice
   * each, task j on worker j % world size; keepdim keeps that slice's dim of
   * extent 1, else it is dropped. */
  int dim, exclusive, keepdim;
  uint32_t replicated;
  int worker;                  /* WORKER */
  dist_rpc_partition_fn fn;    /* USER */
  void *user;
} dist_rpc_partitioner;

dist_rpc_partitioner dist_rpc_dim_partitioner(int dim, int exclusive, int keepdim);
/* dim 0, not exclusive, keepdim (TorchOpt's batch_partitioner). */
dist_rpc_partitioner dist_rpc_batch_partitioner(void);
dist_rpc_partitioner dist_rpc_worker_partitioner(int worker);
dist_rpc_partitioner dist_rpc_user_partitioner(dist_rpc_partition_fn fn, void *user);

/* A user reducer: the completed, successful parts in task order; it adds
 * its outputs with dist_rpc_output. */
typedef dist_status (*dist_rpc_reduce_fn)(dist_future *const *parts, int n, dist_rpc_outputs *out, void *user);

typedef enum dist_rpc_reduce_kind {
  DIST_RPC_REDUCE_NONE = 0, /* no reduction: the parts, through dist_future_part */
  DIST_RPC_REDUCE_MEAN,     /* each output: the element-wise mean over the parts (f32, f64; f64 sums) */
  DIST_RPC_REDUCE_SUM,      /* each output: the element-wise sum (f32, f64, i32, i64) */
  DIST_RPC_REDUCE_USER
} dist_rpc_reduce_kind;

typedef struct dist_rpc_reducer {
  dist_rpc_reduce_kind kind;
  dist_rpc_reduce_fn fn; /* USER */
  void *user;
} dist_rpc_reducer;

/* Partitions the call, calls `name` once per task, and completes the
 * returned future when every part has: its outputs are the reduced ones
 * (NULL reducer: NONE). A failed part fails the whole call with its status
 * and message. Local. */
dist_status dist_rpc_remote_async(const char *name, const dist_tensor *args, int nargs, const void *opts,
                                  size_t opts_bytes, const dist_rpc_partitioner *p, const dist_rpc_reducer *r,
                                  dist_future **out);
dist_status dist_rpc_remote_sync(const char *name, const dist_tensor *args, int nargs, const void *opts,
                                 size_t opts_bytes, const dist_rpc_partitioner *p, const dist_rpc_reducer *r,
                                 dist_future **out);
/* The parts of a partitioned call (0 for a plain call). */
int dist_future_parts(const dist_future *f);
dist_future *dist_future_part(const dist_future *f, int i);

/* TorchOpt's parallelize: a registered function bound to a partitioner and
 * a reducer, called as one. */
typedef struct dist_rpc_parallel dist_rpc_parallel;
dist_status dist_rpc_parallelize(const char *name, const dist_rpc_partitioner *p, const dist_rpc_reducer *r,
                                 dist_rpc_parallel **out);
dist_status dist_rpc_parallel_call(dist_rpc_parallel *par, const dist_tensor *args, int nargs, const void *opts,
                                   size_t opts_bytes, dist_future **out);
dist_status dist_rpc_parallel_call_async(dist_rpc_parallel *par, const dist_tensor *args, int nargs,
                                         const void *opts, size_t opts_bytes, dist_future **out);
void dist_rpc_parallel_free(dist_rpc_parallel *par);

/* ---- worker selection and world info ------------------------------------------ */

/* fn(user) runs here only when this rank is (on_rank) or is not (not_on_rank)
 * one of ranks[0 .. n); *ran says whether it did (may be NULL). Local. */
dist_status dist_rpc_on_rank(const int *ranks, int n, void (*fn)(void *user), void *user, int *ran);
dist_status dist_rpc_not_on_rank(const int *ranks, int n, void (*fn)(void *user), void *user, int *ran);
dist_status dist_rpc_rank_zero_only(void (*fn)(void *user), void *user, int *ran);
dist_status dist_rpc_rank_non_zero_only(void (*fn)(void *user), void *user, int *ran);

typedef struct dist_rpc_world_info {
  int rank, world_size, local_rank, local_world_size;
  char worker[24]; /* "worker<rank>" */
} dist_rpc_world_info;
/* TorchOpt's get_world_info, from the manager. Local. */
dist_status dist_rpc_world_info_get(dist_rpc_world_info *out);
/* Collective over the world: every worker reached it. */
dist_status dist_rpc_barrier(void);

/* ---- distributed autograd (explicit backward) ----------------------------------- */

typedef struct dist_autograd_ctx dist_autograd_ctx;

/* Starts recording: every remote call this thread makes to a function with
 * a registered VJP, until dist_autograd_end, records itself in the context
 * (its worker, name, a copy of its arguments and options, its outputs). */
dist_status dist_autograd_begin(dist_autograd_ctx **ctx);
dist_status dist_autograd_end(dist_autograd_ctx *ctx);
/* Seeds the gradients of `roots` (outputs of recorded calls, by their
 * memory) with `grads`, then runs each recorded call's VJP, newest first, on
 * the worker that ran its forward; a call's argument that is an earlier
 * call's output passes its gradient on to that call. Gradients of the same
 * memory add up. */
dist_status dist_autograd_backward(dist_autograd_ctx *ctx, const dist_tensor *roots, const dist_tensor *grads, int n);
/* The gradient accumulated for tensor t (matched by its data pointer and
 * shape), copied into grad (same dtype and shape); zero when none reached t. */
dist_status dist_autograd_grad(const dist_autograd_ctx *ctx, const dist_tensor *t, dist_tensor *grad);
void dist_autograd_free(dist_autograd_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
