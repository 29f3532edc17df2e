/* A parameter set: the trainable tensors of a model, in registration
 * (forward) order, each with its data and gradient buffers. Reducers and
 * optimizers work on a parameter set; they never own the buffers.
 *
 * Life cycle: dist_params_create, one dist_params_add per tensor (local),
 * then dist_params_commit (collective), which checks with one small
 * all-reduce that every rank registered the same count, sizes, dtypes and
 * memory spaces, and broadcasts every parameter's data from rank 0 of the
 * group so that all ranks start identical. After commit the set is frozen. */
#ifndef DISTMGR_PARAMS_H
#define DISTMGR_PARAMS_H

#include "distmgr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_params dist_params;

#define DIST_PARAM_NAME_MAX 63

typedef struct dist_param_info {
  const char *name; /* as registered ("fc1.weight") */
  void *data;
  void *grad;       /* may move: a reducer with grad_as_bucket_view points it into its bucket */
  int64_t numel;
  dist_dtype dtype; /* f32, f64, bf16 or f16 */
  dist_memory memory;
  int device;
} dist_param_info;

/* An empty set over `group` (NULL = "world"): the ranks that hold replicas
 * of the same model. Local. */
dist_status dist_params_create(const char *group, dist_params **out);
/* Register one tensor (data and grad both numel elements, distinct, non-NULL
 * unless numel is 0). `index` (may be NULL) receives its position. Local. */
dist_status dist_params_add(dist_params *p, const char *name, void *data, void *grad, int64_t numel,
                            dist_dtype dtype, dist_memory memory, int device, int *index);
/* Shorthand for host tensors. */
dist_status dist_params_add_host(dist_params *p, const char *name, float *data, float *grad, int64_t numel,
                                 int *index);
/* Freeze the set, check that all ranks agree (the message names the first
 * parameter that differs and how) and broadcast data from the group's rank 0.
 * Collective over the group. */
dist_status dist_params_commit(dist_params *p);

int dist_params_count(const dist_params *p); /* -1 for NULL */
int64_t dist_params_numel(const dist_params *p); /* all parameters */
const char *dist_params_group(const dist_params *p);
dist_status dist_params_info_get(const dist_params *p, int index, dist_param_info *info);
/* Current gradient buffer of a parameter (see grad_as_bucket_view); NULL on a bad index. */
void *dist_params_grad(const dist_params *p, int index);
/* Set every gradient to zero. Local. */
dist_status dist_params_zero_grad(dist_params *p);
/* Broadcast every parameter's data from group rank `root`. Collective. */
dist_status dist_params_broadcast(dist_params *p, int root);
/* Largest |a - b| between this rank's parameters and root's, gathered to all
 * ranks (a test and debugging aid). Collective. */
dist_status dist_params_max_divergence(dist_params *p, double *out);

void dist_params_destroy(dist_params *p); /* NULL is fine; not while a reducer uses it */

#ifdef __cplusplus
}
#endif
#endif
