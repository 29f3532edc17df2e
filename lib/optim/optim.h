/* Optimizer internals: the common object (optim.c), the per-kind updates
 * (optim_sgd.c, optim_adam.c) and the CUDA launchers (optim_kernels.cu, which
 * includes this header: it needs only the public headers and plain structs). */
#ifndef DISTMGR_LIB_OPTIM_H
#define DISTMGR_LIB_OPTIM_H

#include <stdint.h>

#include "distmgr/optim.h"

/* Scalars of one SGD update, in double; the loops convert them once. */
typedef struct dist__sgd_scalars {
  double lr, momentum, dampening, weight_decay;
  int nesterov, maximize;
  int first; /* the parameter's first step: the momentum buffer starts as g */
} dist__sgd_scalars;

/* Scalars of one Adam update. step_size = lr / (1 - beta1^t), bc2_sqrt =
 * sqrt(1 - beta2^t); decay = 1 - lr * wd multiplies p (AdamW, else 1);
 * weight_decay is the L2 term added to g (Adam, else 0). */
typedef struct dist__adam_scalars {
  double step_size, bc2_sqrt, beta1, beta2, eps, weight_decay, decay;
  int decoupled, amsgrad, maximize;
} dist__adam_scalars;

#ifndef __CUDACC__
/* State of one parameter: its step count and up to three buffers of numel
 * elements of its dtype (SGD: momentum; Adam: exp_avg, exp_avg_sq,
 * max_exp_avg_sq), allocated in its memory space. */
typedef struct dist__optim_slot {
  int64_t step;
  void *buf[3];
  int ready; /* buffers allocated (and zeroed) */
  dist_memory memory;
  size_t bytes; /* of each buffer */
} dist__optim_slot;

/* Update parameter `info` with gradient `grad` and its slot (step already
 * advanced to t >= 1). Called only for f32/f64 and numel > 0. */
typedef dist_status (*dist__optim_update_fn)(const dist_optim *o, const dist_param_info *info, void *grad,
                                             dist__optim_slot *slot);

struct dist_optim {
  const char *name; /* "sgd", "adam", "adamw" */
  dist_params *params;
  union {
    dist_sgd_options sgd;
    dist_adam_options adam;
  } opt;
  int nbuf; /* buffers per parameter */
  dist__optim_update_fn update;
  double lr, base_lr;
  dist_lr_schedule schedule;
  int64_t k; /* schedule steps so far */
  dist__optim_slot *slots;
  int nslots; /* may trail the set's count while an uncommitted set grows */
};

/* Create over `p` after the kind checked its options: checks the set's dtypes
 * and allocates nbuf zeroed buffers per parameter. `fn` names the caller. */
dist_status dist__optim_create(const char *fn, dist_params *p, const char *name, double lr, int nbuf,
                               dist__optim_update_fn update, dist_optim **out);

/* Option checks, errors "fn: name = v must be ...": v finite in [lo, hi]
 * ([lo, hi) when hi_open; hi = INFINITY for a lower bound only), and flags
 * that must be 0 or 1. */
dist_status dist__optim_check(const char *fn, const char *name, double v, double lo, double hi, int hi_open);
dist_status dist__optim_flag(const char *fn, const char *name, int v);

dist_status dist__optim_sgd_update(const dist_optim *o, const dist_param_info *info, void *grad, dist__optim_slot *s);
dist_status dist__optim_adam_update(const dist_optim *o, const dist_param_info *info, void *grad, dist__optim_slot *s);

#endif

#if defined(HAVE_CUDA) || defined(__CUDACC__)
#include <cuda_runtime.h>
#ifdef __cplusplus
extern "C" {
#endif
/* Kernels on `st` (dtype 0 = f32, 1 = f64); return a cudaError_t. b may be
 * NULL without momentum, vmax without amsgrad. */
int dist__cuda_sgd(void *p, const void *g, void *b, int dtype, size_t n, const dist__sgd_scalars *s, cudaStream_t st);
int dist__cuda_adam(void *p, const void *g, void *m, void *v, void *vmax, int dtype, size_t n,
                    const dist__adam_scalars *s, cudaStream_t st);
#ifdef __cplusplus
}
#endif
#endif

#endif
