/* Worker selection (TorchOpt's on_rank family) and world information. */
#include <stdio.h>

#include "distmgr/coll.h"
#include "distmgr/manager.h"
#include "rpc/rpc_internal.h"

/* Runs fn when (this rank is in ranks) == want. */
static dist_status select_run(const int *ranks, int n, int want, void (*fn)(void *), void *user, int *ran,
                              const char *what) {
  if (ran) *ran = 0;
  if (!fn || n < 0 || (n && !ranks)) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL function or rank list", what);
  int me, size;
  DIST_CHECK(dist_manager_rank(&me));
  DIST_CHECK(dist_manager_world_size(&size));
  int in = 0;
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= size)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: rank %d is not in the world of %d", what, ranks[i], size);
    in |= ranks[i] == me;
  }
  if (in != want) return DIST_SUCCESS;
  fn(user);
  if (ran) *ran = 1;
  return DIST_SUCCESS;
}

dist_status dist_rpc_on_rank(const int *ranks, int n, void (*fn)(void *), void *user, int *ran) {
  return select_run(ranks, n, 1, fn, user, ran, "dist_rpc_on_rank");
}
dist_status dist_rpc_not_on_rank(const int *ranks, int n, void (*fn)(void *), void *user, int *ran) {
  return select_run(ranks, n, 0, fn, user, ran, "dist_rpc_not_on_rank");
}
dist_status dist_rpc_rank_zero_only(void (*fn)(void *), void *user, int *ran) {
  static const int zero = 0;
  return select_run(&zero, 1, 1, fn, user, ran, "dist_rpc_rank_zero_only");
}
dist_status dist_rpc_rank_non_zero_only(void (*fn)(void *), void *user, int *ran) {
  static const int zero = 0;
  return select_run(&zero, 1, 0, fn, user, ran, "dist_rpc_rank_non_zero_only");
}

dist_status dist_rpc_world_info_get(dist_rpc_world_info *out) {
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_world_info_get: NULL output");
  dist_rpc_world_info w;
  DIST_CHECK(dist_manager_rank(&w.rank));
  DIST_CHECK(dist_manager_world_size(&w.world_size));
  DIST_CHECK(dist_manager_local_rank(&w.local_rank));
  DIST_CHECK(dist_manager_local_size(&w.local_world_size));
  snprintf(w.worker, sizeof w.worker, "worker%d", w.rank);
  *out = w;
  return DIST_SUCCESS;
}

dist_status dist_rpc_barrier(void) {
  if (!dist__rpc.on) return dist__error(DIST_ERR_NOT_INITIALIZED, "dist_rpc_barrier: remote calls are not running");
  return dist_barrier(NULL);
}
