/* What reducers and optimizers need from a parameter set beyond the public API. */
#ifndef DISTMGR_PARAMS_INTERNAL_H
#define DISTMGR_PARAMS_INTERNAL_H

#include "manager/state.h"

typedef struct dist__param {
  char name[DIST_PARAM_NAME_MAX + 1];
  void *data, *grad;
  int64_t numel;
  dist_dtype dtype;
  dist_memory memory;
  int device;
} dist__param;

struct dist_params {
  char group[DIST_GROUP_NAME_MAX + 1];
  dist__param *p;
  int n, cap;
  int committed;
  int users; /* reducers holding the set: destroy refuses while > 0 */
};

/* The set's group (checks membership); `what` names the caller in messages. */
dist_status dist__params_group(const dist_params *p, const char *what, dist__group **g);
/* Committed set or an error naming `what`. */
dist_status dist__params_check(const dist_params *p, const char *what);
static inline size_t dist__param_bytes(const dist__param *q) { return (size_t)q->numel * dist_dtype_size(q->dtype); }

#endif
