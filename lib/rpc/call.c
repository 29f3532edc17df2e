/* Making remote calls, and worker names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distmgr/manager.h"
#include "rpc/rpc_internal.h"

/* The arguments of a call; *name_len: the name's length. */
static dist_status check_call(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                              size_t opts_bytes, dist_future **out, const char *what, size_t *name_len) {
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL future pointer", what);
  *out = NULL;
  if (!dist__rpc.on) return dist__error(DIST_ERR_NOT_INITIALIZED, "%s: remote calls are not running (dist_rpc_init)", what);
  if (!name || !*name || (*name_len = strlen(name)) > DIST_RPC_MAX_NAME)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: a function name of 1 to %d bytes is needed", what,
                       DIST_RPC_MAX_NAME);
  if (to < 0 || to >= dist__rpc.size)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: worker%d does not exist (world of %d)", what, to, dist__rpc.size);
  if (nargs < 0 || nargs > DIST_RPC_MAX_ARGS || (nargs && !args))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %d arguments (0 to %d)", what, nargs, DIST_RPC_MAX_ARGS);
  if (opts_bytes && !opts) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL options of %zu bytes", what, opts_bytes);
  /* Dtypes, ranks, extents and data are the encoder's to check (wire.c),
   * once: its message names the argument too. */
  for (int i = 0; i < nargs; i++)
    if (args[i].memory != DIST_MEM_HOST)
      return dist__error(DIST_ERR_UNSUPPORTED, "%s: argument %d is device memory (remote calls carry host memory)",
                         what, i);
  return DIST_SUCCESS;
}

/* A call; held as dist__rpc_call's (NULL: none kept). */
static dist_status call(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                        size_t opts_bytes, dist_future **out, const char *what, int *held) {
  size_t name_len = 0;
  DIST_CHECK(check_call(to, name, args, nargs, opts, opts_bytes, out, what, &name_len));
  DIST_CHECK(dist__rpc_call(DIST__RPC_REQUEST, to, name, name_len, args, nargs, opts, opts_bytes, out, held));
  dist__autograd_record(to, name, args, nargs, opts, opts_bytes, *out);
  return DIST_SUCCESS;
}

dist_status dist_rpc_call_async(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                                size_t opts_bytes, dist_future **out) {
  return call(to, name, args, nargs, opts, opts_bytes, out, "dist_rpc_call_async", NULL);
}

/* The send keeps the worker lock for the wait that polls right after it. */
dist_status dist_rpc_call_sync(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                               size_t opts_bytes, dist_future **out) {
  int held = 0;
  DIST_CHECK(call(to, name, args, nargs, opts, opts_bytes, out, "dist_rpc_call_sync", &held));
  dist_status s = dist__future_wait_held(*out, held);
  (*out)->sync_owner = 0; /* the caller's from here on */
  return s;
}

dist_status dist_rpc_worker_rank(const char *worker, int *rank) {
  if (!worker || !rank) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_worker_rank: NULL argument");
  const char *p = worker;
  if (strncmp(p, "worker", 6)) return dist__error(DIST_ERR_INVALID_ARGUMENT, "'%s' is not a worker name (workerN)", worker);
  p += 6;
  long r = 0;
  if (!*p || (*p == '0' && p[1])) return dist__error(DIST_ERR_INVALID_ARGUMENT, "'%s' is not a worker name (workerN)", worker);
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || r > 100000000) return dist__error(DIST_ERR_INVALID_ARGUMENT, "'%s' is not a worker name (workerN)", worker);
    r = r * 10 + (*p - '0');
  }
  int size = dist__rpc.on ? dist__rpc.size : 0;
  if (!size && dist_manager_world_size(&size)) return DIST_ERR_NOT_INITIALIZED;
  if (r >= size) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s does not exist (world of %d)", worker, size);
  *rank = (int)r;
  return DIST_SUCCESS;
}

dist_status dist_rpc_worker_name(int rank, char *buf, size_t cap) {
  int size = 0;
  DIST_CHECK(dist_manager_world_size(&size));
  if (rank < 0 || rank >= size || !buf)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_worker_name: rank %d (world of %d)", rank, size);
  if ((size_t)snprintf(buf, cap, "worker%d", rank) >= cap)
    return dist__error(DIST_ERR_BUFFER_TOO_SMALL, "dist_rpc_worker_name: %zu bytes", cap);
  return DIST_SUCCESS;
}
