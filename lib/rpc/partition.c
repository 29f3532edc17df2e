/* Partitioned calls (TorchOpt's remote_async_call): a partitioner turns one
 * call into tasks, each task is a remote call, and a reducer combines the
 * parts' outputs into the returned future's when the last part completes. */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_internal.h"

dist_rpc_partitioner dist_rpc_dim_partitioner(int dim, int exclusive, int keepdim) {
  dist_rpc_partitioner p = {DIST_RPC_PART_DIM, dim, exclusive != 0, keepdim != 0, 0, -1, NULL, NULL};
  return p;
}
dist_rpc_partitioner dist_rpc_batch_partitioner(void) { return dist_rpc_dim_partitioner(0, 0, 1); }
dist_rpc_partitioner dist_rpc_worker_partitioner(int worker) {
  dist_rpc_partitioner p = {DIST_RPC_PART_WORKER, 0, 0, 0, 0, worker, NULL, NULL};
  return p;
}
dist_rpc_partitioner dist_rpc_user_partitioner(dist_rpc_partition_fn fn, void *user) {
  dist_rpc_partitioner p = {DIST_RPC_PART_USER, 0, 0, 0, 0, -1, fn, user};
  return p;
}

/* A view of slices [lo, hi) of t along dim; drop removes dim (hi == lo + 1).
 * Only the leading dims before `dim` must be 1 for a view to be contiguous:
 * general dims copy into `*owned`. */
static dist_status slice(const dist_tensor *t, int dim, int64_t lo, int64_t hi, int drop, dist_tensor *out, void **owned) {
  size_t es = dist_dtype_size(t->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; d++) outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) inner *= t->shape[d];
  *out = *t;
  out->shape[dim] = hi - lo;
  const char *src = t->data;
  size_t row = (size_t)inner * es, ext = (size_t)t->shape[dim];
  if (outer == 1 || hi == lo) {
    out->data = hi > lo ? (void *)(src + (size_t)lo * row) : NULL;
  } else {
    char *dst = malloc((size_t)outer * (size_t)(hi - lo) * row);
    if (!dst) return dist__error(DIST_ERR_NO_MEMORY, "partitioner: a slice");
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (size_t)o * (size_t)(hi - lo) * row, src + ((size_t)o * ext + (size_t)lo) * row, (size_t)(hi - lo) * row);
    out->data = dst;
    *owned = dst;
  }
  if (drop) {
    for (int d = dim; d + 1 < t->ndim; d++) out->shape[d] = out->shape[d + 1];
    out->shape[--out->ndim] = 0;
  }
  return DIST_SUCCESS;
}

/* The DIM partitioner's tasks; slices that had to be copied go in owned[]. */
static dist_status dim_tasks(const dist_rpc_partitioner *p, int size, const dist_tensor *args, int nargs,
                             dist_rpc_task **tasks, int *ntasks, void ***owned, int *nowned) {
  int64_t B = -1;
  for (int i = 0; i < nargs; i++) {
    if (p->replicated >> i & 1u) continue;
    if (p->dim < 0 || p->dim >= args[i].ndim)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dim partitioner: argument %d has %d dims, split along dim %d "
                         "(mark it replicated to send it whole)", i, args[i].ndim, p->dim);
    if (B >= 0 && args[i].shape[p->dim] != B)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dim partitioner: argument %d has extent %lld along dim %d, "
                         "an earlier one %lld", i, (long long)args[i].shape[p->dim], p->dim, (long long)B);
    B = args[i].shape[p->dim];
  }
  if (B < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dim partitioner: no argument to split (all replicated)");
  if (B == 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dim partitioner: nothing to split (extent 0 along dim %d)", p->dim);
  int n = p->exclusive ? (B > 1 << 20 ? -1 : (int)B) : (int)(B < size ? B : size);
  if (n < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dim partitioner: %lld exclusive tasks", (long long)B);
  *tasks = calloc((size_t)n, sizeof **tasks);
  *owned = calloc((size_t)n * (size_t)(nargs ? nargs : 1), sizeof **owned);
  if (!*tasks || !*owned) return dist__error(DIST_ERR_NO_MEMORY, "dim partitioner: %d tasks", n);
  for (int k = 0; k < n; k++) {
    int64_t lo, hi;
    if (p->exclusive) lo = k, hi = k + 1;
    else {
      int64_t base = B / n, extra = B % n;
      lo = k * base + (k < extra ? k : extra);
      hi = lo + base + (k < extra);
    }
    dist_rpc_task *t = &(*tasks)[k];
    t->worker = k % size;
    t->nargs = nargs;
    for (int i = 0; i < nargs; i++) {
      if (p->replicated >> i & 1u) {
        t->args[i] = args[i];
        continue;
      }
      void *own = NULL;
      DIST_CHECK(slice(&args[i], p->dim, lo, hi, p->exclusive && !p->keepdim, &t->args[i], &own));
      if (own) (*owned)[(*nowned)++] = own;
    }
  }
  *ntasks = n;
  return DIST_SUCCESS;
}

/* ---- reducing ---------------------------------------------------------------------- */

static dist_status reduce_builtin(dist_future *const *parts, int n, dist_rpc_outputs *out, int mean) {
  int nout = dist_future_count(parts[0]);
  for (int k = 1; k < n; k++)
    if (dist_future_count(parts[k]) != nout)
      return dist__error(DIST_ERR_MISMATCH, "%s reducer: part %d has %d outputs, part 0 %d", mean ? "mean" : "sum", k,
                         dist_future_count(parts[k]), nout);
  for (int j = 0; j < nout; j++) {
    const dist_tensor *a = dist_future_output(parts[0], j);
    int ok = a->dtype == DIST_F32 || a->dtype == DIST_F64 || (!mean && (a->dtype == DIST_I32 || a->dtype == DIST_I64));
    if (!ok)
      return dist__error(DIST_ERR_UNSUPPORTED, "%s reducer: output %d is %s", mean ? "mean" : "sum", j, dist_dtype_name(a->dtype));
    for (int k = 1; k < n; k++) {
      const dist_tensor *b = dist_future_output(parts[k], j);
      if (b->dtype != a->dtype || b->ndim != a->ndim || memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim))
        return dist__error(DIST_ERR_MISMATCH, "%s reducer: output %d of part %d differs from part 0's in dtype or shape",
                           mean ? "mean" : "sum", j, k);
    }
    dist_tensor r;
    DIST_CHECK(dist_rpc_output(out, a->dtype, a->ndim, a->shape, &r));
    size_t m = (size_t)dist_tensor_numel(a);
    for (size_t i = 0; i < m; i++) {
      /* f64 accumulation, in part order: the same bits on every run */
      double s = 0;
      int64_t si = 0;
      for (int k = 0; k < n; k++) {
        const void *d = dist_future_output(parts[k], j)->data;
        switch (a->dtype) {
          case DIST_F32: s += ((const float *)d)[i]; break;
          case DIST_F64: s += ((const double *)d)[i]; break;
          case DIST_I32: si += ((const int32_t *)d)[i]; break;
          default: si += ((const int64_t *)d)[i]; break;
        }
      }
      if (mean) s /= n;
      switch (a->dtype) {
        case DIST_F32: ((float *)r.data)[i] = (float)s; break;
        case DIST_F64: ((double *)r.data)[i] = s; break;
        case DIST_I32: ((int32_t *)r.data)[i] = (int32_t)si; break;
        default: ((int64_t *)r.data)[i] = si; break;
      }
    }
  }
  return DIST_SUCCESS;
}

/* Runs when a part completes (on the progress thread, or the caller's when
 * the part had completed already); the last one reduces. */
static void part_done(dist_future *part, void *user) {
  dist_future *whole = user;
  (void)part;
  pthread_mutex_lock(&whole->mu);
  int last = --whole->pending == 0;
  pthread_mutex_unlock(&whole->mu);
  if (!last) return;
  dist_rpc_outputs outs = {0};
  dist_status s = DIST_SUCCESS;
  char msg[1200] = "";
  for (int k = 0; k < whole->nparts && !s; k++)
    if ((s = dist_future_status(whole->parts[k])))
      snprintf(msg, sizeof msg, "part %d of %d: %s", k, whole->nparts, dist_future_message(whole->parts[k]));
  if (!s) {
    switch (whole->reducer.kind) {
      case DIST_RPC_REDUCE_MEAN: s = reduce_builtin(whole->parts, whole->nparts, &outs, 1); break;
      case DIST_RPC_REDUCE_SUM: s = reduce_builtin(whole->parts, whole->nparts, &outs, 0); break;
      case DIST_RPC_REDUCE_USER: s = whole->reducer.fn(whole->parts, whole->nparts, &outs, whole->reducer.user); break;
      default: break;
    }
    if (s) snprintf(msg, sizeof msg, "reducer: %s", dist_last_error());
  }
  dist__future_complete(whole, s, msg, NULL, NULL, &outs);
  dist__future_release(whole); /* the parts' hold */
}

dist_status dist_rpc_remote_async(const char *name, const dist_tensor *args, int nargs, const void *opts,
                                  size_t opts_bytes, const dist_rpc_partitioner *p, const dist_rpc_reducer *r,
                                  dist_future **out) {
  if (!out || !p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_remote_async: NULL partitioner or future pointer");
  *out = NULL;
  if (!dist__rpc.on) return dist__error(DIST_ERR_NOT_INITIALIZED, "dist_rpc_remote_async: remote calls are not running");
  if (nargs < 0 || nargs > DIST_RPC_MAX_ARGS || (nargs && !args))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_remote_async: %d arguments", nargs);
  dist_rpc_reducer red = r ? *r : (dist_rpc_reducer){DIST_RPC_REDUCE_NONE, NULL, NULL};
  if (red.kind < DIST_RPC_REDUCE_NONE || red.kind > DIST_RPC_REDUCE_USER || (red.kind == DIST_RPC_REDUCE_USER && !red.fn))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_remote_async: reducer kind %d%s", (int)red.kind,
                       red.kind == DIST_RPC_REDUCE_USER ? " without a function" : "");
  dist_rpc_task *tasks = NULL, one;
  void **owned = NULL;
  int ntasks = 0, nowned = 0;
  dist_status s = DIST_SUCCESS;
  switch (p->kind) {
    case DIST_RPC_PART_DIM:
      s = dim_tasks(p, dist__rpc.size, args, nargs, &tasks, &ntasks, &owned, &nowned);
      break;
    case DIST_RPC_PART_WORKER:
      one.worker = p->worker, one.nargs = nargs;
      if (nargs) memcpy(one.args, args, sizeof *args * (size_t)nargs);
      tasks = &one, ntasks = 1;
      break;
    case DIST_RPC_PART_USER: {
      int cap = 4 * dist__rpc.size + 64;
      if (!p->fn) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "user partitioner: no function");
      else if (!(tasks = calloc((size_t)cap, sizeof *tasks))) s = dist__error(DIST_ERR_NO_MEMORY, "user partitioner");
      else if (!(s = p->fn(dist__rpc.size, args, nargs, tasks, cap, &ntasks, p->user)) && (ntasks < 1 || ntasks > cap))
        s = dist__error(DIST_ERR_INVALID_ARGUMENT, "user partitioner: %d tasks (1 to %d)", ntasks, cap);
      break;
    }
    default:
      s = dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_remote_async: partitioner kind %d", (int)p->kind);
  }
  dist_future *whole = s ? NULL : dist__future_new();
  if (!s && (!whole || !(whole->parts = calloc((size_t)ntasks, sizeof *whole->parts))))
    s = dist__error(DIST_ERR_NO_MEMORY, "dist_rpc_remote_async: %d parts", ntasks);
  for (int k = 0; !s && k < ntasks; k++) {
    s = dist_rpc_call_async(tasks[k].worker, name, tasks[k].args, tasks[k].nargs, opts, opts_bytes, &whole->parts[k]);
    if (!s) whole->nparts++;
  }
  if (!s) {
    whole->reducer = red;
    whole->pending = whole->nparts;
    atomic_fetch_add(&whole->refs, 1); /* the parts' hold, dropped by the last part_done */
    for (int k = 0; k < whole->nparts; k++) dist_future_then(whole->parts[k], part_done, whole);
    *out = whole;
  } else if (whole) {
    /* parts already sent complete into nothing */
    dist__future_release(whole);
  }
  for (int i = 0; i < nowned; i++) free(owned[i]);
  free(owned);
  if (tasks != &one) free(tasks);
  return s;
}

dist_status dist_rpc_remote_sync(const char *name, const dist_tensor *args, int nargs, const void *opts,
                                 size_t opts_bytes, const dist_rpc_partitioner *p, const dist_rpc_reducer *r,
                                 dist_future **out) {
  DIST_CHECK(dist_rpc_remote_async(name, args, nargs, opts, opts_bytes, p, r, out));
  return dist_future_wait(*out);
}

/* ---- parallelize --------------------------------------------------------------------- */

struct dist_rpc_parallel {
  char name[DIST_RPC_MAX_NAME + 1];
  dist_rpc_partitioner p;
  dist_rpc_reducer r;
};

dist_status dist_rpc_parallelize(const char *name, const dist_rpc_partitioner *p, const dist_rpc_reducer *r,
                                 dist_rpc_parallel **out) {
  if (!out || !p || !name || !*name || strlen(name) > DIST_RPC_MAX_NAME)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_parallelize: a name, a partitioner and an output are needed");
  dist_rpc_parallel *par = calloc(1, sizeof *par);
  if (!par) return dist__error(DIST_ERR_NO_MEMORY, "dist_rpc_parallelize");
  snprintf(par->name, sizeof par->name, "%s", name);
  par->p = *p;
  par->r = r ? *r : (dist_rpc_reducer){DIST_RPC_REDUCE_NONE, NULL, NULL};
  *out = par;
  return DIST_SUCCESS;
}

dist_status dist_rpc_parallel_call_async(dist_rpc_parallel *par, const dist_tensor *args, int nargs,
                                         const void *opts, size_t opts_bytes, dist_future **out) {
  if (!par) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_parallel_call: NULL handle");
  return dist_rpc_remote_async(par->name, args, nargs, opts, opts_bytes, &par->p, &par->r, out);
}

dist_status dist_rpc_parallel_call(dist_rpc_parallel *par, const dist_tensor *args, int nargs, const void *opts,
                                   size_t opts_bytes, dist_future **out) {
  DIST_CHECK(dist_rpc_parallel_call_async(par, args, nargs, opts, opts_bytes, out));
  return dist_future_wait(*out);
}

void dist_rpc_parallel_free(dist_rpc_parallel *par) { free(par); }
