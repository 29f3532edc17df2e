/* SGD with momentum, dampening, Nesterov, weight decay and maximize, as
 * torch.optim.SGD (formulas in include/distmgr/optim.h). */
#include <math.h>

#include "core/internal.h"
#include "core/check.h"
#include "mem/memops.h"
#include "optim/optim.h"

#define FN "dist_optim_sgd"

static const dist_sgd_options sgd_defaults = DIST_SGD_OPTIONS_INIT;
static const dist__options_kind sgd_options_kind =
    DIST__OPTIONS_KIND(dist_sgd_options, "DIST_SGD_OPTIONS_INIT", lr, &sgd_defaults);

dist_status dist_optim_sgd(dist_params *p, const dist_sgd_options *options, dist_optim **out) {
  if (!options) return dist__error(DIST_ERR_INVALID_ARGUMENT, FN ": options is NULL");
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, FN ": out is NULL");
  dist_sgd_options full;
  DIST_CHECK(dist__options_copy(&sgd_options_kind, options, &full, FN));
  const dist_sgd_options *opt = &full;
  DIST_CHECK(dist__optim_check(FN, "lr", opt->lr, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_check(FN, "momentum", opt->momentum, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_check(FN, "dampening", opt->dampening, 0, 1, 0));
  DIST_CHECK(dist__optim_check(FN, "weight_decay", opt->weight_decay, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_flag(FN, "nesterov", opt->nesterov));
  DIST_CHECK(dist__optim_flag(FN, "maximize", opt->maximize));
  if (opt->nesterov && (opt->momentum == 0 || opt->dampening != 0))
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       FN ": nesterov = 1 needs momentum > 0 and dampening = 0 (momentum = %g, dampening = %g)",
                       opt->momentum, opt->dampening);
  dist_optim *o;
  DIST_CHECK(dist__optim_create(FN, p, "sgd", opt->lr, opt->momentum != 0, dist__optim_sgd_update, &o));
  o->opt.sgd = *opt;
  *out = o;
  return DIST_SUCCESS;
}

/* One loop per precision; the flags are loop-invariant, so the compiler can
 * unswitch and vectorise. */
#define SGD_LOOP(T)                                                                                    \
  static void sgd_##T(T *restrict p, const T *restrict g, T *restrict b, size_t n,                    \
                      const dist__sgd_scalars *s) {                                                    \
    const T lr = (T)s->lr, mu = (T)s->momentum, keep = (T)(1 - s->dampening), wd = (T)s->weight_decay; \
    const T sign = s->maximize ? (T)-1 : (T)1;                                                         \
    const int decay = s->weight_decay != 0, first = s->first, nesterov = s->nesterov;                  \
    for (size_t i = 0; i < n; i++) {                                                                   \
      T d = sign * g[i];                                                                               \
      if (decay) d += wd * p[i];                                                                       \
      if (b) {                                                                                         \
        T m = first ? d : mu * b[i] + keep * d;                                                        \
        b[i] = m;                                                                                      \
        d = nesterov ? d + mu * m : m;                                                                 \
      }                                                                                                \
      p[i] -= lr * d;                                                                                  \
    }                                                                                                  \
  }
SGD_LOOP(float)
SGD_LOOP(double)

dist_status dist__optim_sgd_update(const dist_optim *o, const dist_param_info *info, void *grad, dist__optim_slot *s) {
  const dist_sgd_options *opt = &o->opt.sgd;
  dist__sgd_scalars sc = {o->lr, opt->momentum, opt->dampening, opt->weight_decay, opt->nesterov, opt->maximize,
                          s->step == 1};
  size_t n = (size_t)info->numel;
  if (info->memory == DIST_MEM_CUDA) {
#ifdef HAVE_CUDA
    (void)cudaGetLastError(); /* an earlier failure is not ours */
    int e = dist__cuda_sgd(info->data, grad, s->buf[0], (int)info->dtype, n, &sc, dist__cuda_stream());
    return DIST_CUDA_STATUS(e, "dist__cuda_sgd");
#else
    return dist__error(DIST_ERR_UNSUPPORTED, "dist_optim_step: CUDA parameter '%s' in a distmgr built without CUDA",
                       info->name);
#endif
  }
  if (info->dtype == DIST_F32) sgd_float(info->data, grad, s->buf[0], n, &sc);
  else sgd_double(info->data, grad, s->buf[0], n, &sc);
  return DIST_SUCCESS;
}
