/* Local optimizers over a parameter set: SGD and Adam/AdamW with the update
 * formulas of torch.optim, and a learning-rate schedule hook. They are local
 * (no communication): reducers average the gradients first, or wrap them
 * (DataParallelOptimizer, DASO). Parameters must be f32 or f64, host or CUDA
 * memory (CUDA updates run on the dist_cuda_set_stream stream, with the
 * parameter's device current; state buffers are allocated there at create).
 * reset clears state but keeps lr and the schedule; set_lr does not restart
 * the schedule's count k. Queries on NULL return NULL / NaN.
 *
 * Notation per parameter p with gradient g, learning rate lr, step t (1 on
 * the first step of that parameter):
 *
 * SGD (momentum mu, dampening tau, weight_decay wd, nesterov, maximize):
 *   if maximize: g = -g
 *   if wd != 0:  g = g + wd * p
 *   if mu != 0:  b = (t == 1) ? g : mu * b + (1 - tau) * g
 *                g = nesterov ? g + mu * b : b
 *   p = p - lr * g
 *
 * Adam (beta1, beta2, eps, wd, amsgrad, maximize); AdamW when decoupled:
 *   if maximize: g = -g
 *   if decoupled: p = p * (1 - lr * wd)   else if wd != 0: g = g + wd * p
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g * g
 *   vhat = amsgrad ? (vmax = max(vmax, v)) : v
 *   p = p - (lr / (1 - beta1^t)) * m / (sqrt(vhat) / sqrt(1 - beta2^t) + eps)
 *
 * Schedules (called once per epoch or per step, as the user decides; k is
 * the number of dist_optim_schedule_step calls so far):
 *   STEP:        lr = base_lr * gamma^floor(k / step_size)
 *   EXPONENTIAL: lr = base_lr * gamma^k
 *   CUSTOM:      lr = fn(ctx, k, base_lr) */
#ifndef DISTMGR_OPTIM_H
#define DISTMGR_OPTIM_H

#include "distmgr/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_optim dist_optim;

/* Initialize with the INIT macros below, then set the fields to change
 * (struct_size: see README, "Option structs"). */
typedef struct dist_sgd_options {
  size_t struct_size; /* sizeof(dist_sgd_options), set by DIST_SGD_OPTIONS_INIT */
  double lr, momentum, dampening, weight_decay;
  int nesterov; /* needs momentum > 0 and dampening == 0 */
  int maximize;
} dist_sgd_options;
#define DIST_SGD_OPTIONS_INIT                 \
  {                                           \
    .struct_size = sizeof(dist_sgd_options),  \
    .lr = 0.001,                              \
    .momentum = 0.0,                          \
    .dampening = 0.0,                         \
    .weight_decay = 0.0,                      \
    .nesterov = 0,                            \
    .maximize = 0,                            \
  }

typedef struct dist_adam_options {
  size_t struct_size; /* sizeof(dist_adam_options), set by DIST_ADAM(W)_OPTIONS_INIT */
  double lr, beta1, beta2, eps, weight_decay;
  int decoupled; /* 1 = AdamW */
  int amsgrad;
  int maximize;
} dist_adam_options;
#define DIST_ADAM_OPTIONS_INIT                \
  {                                           \
    .struct_size = sizeof(dist_adam_options), \
    .lr = 0.001,                              \
    .beta1 = 0.9,                             \
    .beta2 = 0.999,                           \
    .eps = 1e-8,                              \
    .weight_decay = 0.0,                      \
    .decoupled = 0,                           \
    .amsgrad = 0,                             \
    .maximize = 0,                            \
  }
#define DIST_ADAMW_OPTIONS_INIT               \
  {                                           \
    .struct_size = sizeof(dist_adam_options), \
    .lr = 0.001,                              \
    .beta1 = 0.9,                             \
    .beta2 = 0.999,                           \
    .eps = 1e-8,                              \
    .weight_decay = 0.01,                     \
    .decoupled = 1,                           \
    .amsgrad = 0,                             \
    .maximize = 0,                            \
  }

/* Create over a committed parameter set (out of range options are errors
 * naming the option). The optimizer keeps a pointer to `p`. Local. */
dist_status dist_optim_sgd(dist_params *p, const dist_sgd_options *o, dist_optim **out);
dist_status dist_optim_adam(dist_params *p, const dist_adam_options *o, dist_optim **out);

/* Update every parameter from its gradient. Local. */
dist_status dist_optim_step(dist_optim *o);
/* Update one parameter only (its own step count advances): for per-layer
 * updates (DataParallelOptimizer's non-blocking mode). Local. */
dist_status dist_optim_step_param(dist_optim *o, int index);
dist_status dist_optim_zero_grad(dist_optim *o);

double dist_optim_get_lr(const dist_optim *o); /* NaN for NULL */
dist_status dist_optim_set_lr(dist_optim *o, double lr);  /* also becomes the schedule's base */
size_t dist_optim_state_bytes(const dist_optim *o);        /* momentum / moment buffers held */
const char *dist_optim_name(const dist_optim *o);          /* "sgd", "adam", "adamw" */
dist_params *dist_optim_params(const dist_optim *o);

typedef enum dist_lr_schedule_kind { DIST_LR_CONSTANT = 0, DIST_LR_STEP, DIST_LR_EXPONENTIAL, DIST_LR_CUSTOM } dist_lr_schedule_kind;
typedef double (*dist_lr_fn)(void *ctx, int64_t k, double base_lr);
typedef struct dist_lr_schedule {
  dist_lr_schedule_kind kind;
  int64_t step_size; /* STEP */
  double gamma;      /* STEP, EXPONENTIAL */
  dist_lr_fn fn;     /* CUSTOM */
  void *ctx;
} dist_lr_schedule;

/* Attach a schedule (base_lr = the current lr; k restarts at 0). Local. */
dist_status dist_optim_set_schedule(dist_optim *o, const dist_lr_schedule *s);
/* Advance the schedule by one and set the new lr. Local. */
dist_status dist_optim_schedule_step(dist_optim *o);
/* State, for checkpoints: `slots` buffers per parameter (SGD: 1 with
 * momentum, else 0; Adam: 2 (exp_avg, exp_avg_sq), 3 with amsgrad
 * (max_exp_avg_sq)), each numel elements of the parameter's dtype in its
 * memory space, writable; and each parameter's step count t. Also the
 * schedule's count k. Local. */
int dist_optim_state_slots(const dist_optim *o); /* -1 for NULL */
dist_status dist_optim_state_buffer(dist_optim *o, int index, int slot, void **buffer);
dist_status dist_optim_state_step(const dist_optim *o, int index, int64_t *step);
dist_status dist_optim_state_set_step(dist_optim *o, int index, int64_t step);
dist_status dist_optim_schedule_count(const dist_optim *o, int64_t *k);
double dist_optim_get_base_lr(const dist_optim *o); /* the schedule's base; NaN for NULL */
/* Put back lr, the schedule's base_lr and count k as saved (a checkpoint
 * resume: the attached schedule carries on from k). Local. */
dist_status dist_optim_restore_schedule(dist_optim *o, double lr, double base_lr, int64_t k);
/* Forget momentum / moments and step counts (the state of a fresh optimizer). */
dist_status dist_optim_reset(dist_optim *o);

void dist_optim_destroy(dist_optim *o);

#ifdef __cplusplus
}
#endif
#endif
