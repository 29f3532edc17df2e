/* Adam and AdamW (decoupled weight decay) with amsgrad and maximize, as
 * torch.optim.Adam / AdamW (formulas in include/distmgr/optim.h). */
#include <math.h>

#include "core/internal.h"
#include "core/check.h"
#include "mem/memops.h"
#include "optim/optim.h"

#define FN "dist_optim_adam"

static const dist_adam_options adam_defaults = DIST_ADAM_OPTIONS_INIT;
static const dist__options_kind adam_options_kind =
    DIST__OPTIONS_KIND(dist_adam_options, "DIST_ADAM_OPTIONS_INIT (or DIST_ADAMW_OPTIONS_INIT)", lr, &adam_defaults);

dist_status dist_optim_adam(dist_params *p, const dist_adam_options *options, dist_optim **out) {
  if (!options) return dist__error(DIST_ERR_INVALID_ARGUMENT, FN ": options is NULL");
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, FN ": out is NULL");
  dist_adam_options full;
  DIST_CHECK(dist__options_copy(&adam_options_kind, options, &full, FN));
  const dist_adam_options *opt = &full;
  DIST_CHECK(dist__optim_check(FN, "lr", opt->lr, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_check(FN, "beta1", opt->beta1, 0, 1, 1));
  DIST_CHECK(dist__optim_check(FN, "beta2", opt->beta2, 0, 1, 1));
  DIST_CHECK(dist__optim_check(FN, "eps", opt->eps, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_check(FN, "weight_decay", opt->weight_decay, 0, INFINITY, 1));
  DIST_CHECK(dist__optim_flag(FN, "decoupled", opt->decoupled));
  DIST_CHECK(dist__optim_flag(FN, "amsgrad", opt->amsgrad));
  DIST_CHECK(dist__optim_flag(FN, "maximize", opt->maximize));
  dist_optim *o;
  DIST_CHECK(dist__optim_create(FN, p, opt->decoupled ? "adamw" : "adam", opt->lr, 2 + opt->amsgrad,
                                dist__optim_adam_update, &o));
  o->opt.adam = *opt;
  *out = o;
  return DIST_SUCCESS;
}

/* One loop per precision and amsgrad, without conditional stores; the other
 * flags are loop-invariant selects. (GCC vectorises them at -O3 with
 * -fno-math-errno: otherwise sqrt keeps an errno call path.) */
#define ADAM_LOOP(NAME, T, SQRT, AMS)                                                                   \
  static void NAME(T *restrict p, const T *restrict g, T *restrict m, T *restrict v, T *restrict vmax, \
                   size_t n, const dist__adam_scalars *s) {                                             \
    const T b1 = (T)s->beta1, c1 = (T)(1 - s->beta1), b2 = (T)s->beta2, c2 = (T)(1 - s->beta2);         \
    const T step = (T)s->step_size, bc2 = (T)s->bc2_sqrt, eps = (T)s->eps, wd = (T)s->weight_decay;      \
    const T decay = (T)s->decay, sign = s->maximize ? (T)-1 : (T)1;                                      \
    const int l2 = s->weight_decay != 0;                                                                 \
    for (size_t i = 0; i < n; i++) {                                                                     \
      T d = sign * g[i], x = p[i] * decay;                                                               \
      d = l2 ? d + wd * x : d;                                                                           \
      T mi = b1 * m[i] + c1 * d, vi = b2 * v[i] + c2 * d * d;                                            \
      m[i] = mi;                                                                                         \
      v[i] = vi;                                                                                         \
      if (AMS) vmax[i] = vi = vmax[i] > vi ? vmax[i] : vi;                                               \
      p[i] = x - step * mi / (SQRT(vi) / bc2 + eps);                                                     \
    }                                                                                                    \
  }
ADAM_LOOP(adam_f32, float, sqrtf, 0)
ADAM_LOOP(adam_f32_ams, float, sqrtf, 1)
ADAM_LOOP(adam_f64, double, sqrt, 0)
ADAM_LOOP(adam_f64_ams, double, sqrt, 1)

dist_status dist__optim_adam_update(const dist_optim *o, const dist_param_info *info, void *grad, dist__optim_slot *s) {
  const dist_adam_options *opt = &o->opt.adam;
  double t = (double)s->step;
  /* Exactly one of the two decays is active: x * 1 is exact. */
  dist__adam_scalars sc = {o->lr / (1 - pow(opt->beta1, t)),
                           sqrt(1 - pow(opt->beta2, t)),
                           opt->beta1,
                           opt->beta2,
                           opt->eps,
                           opt->decoupled ? 0 : opt->weight_decay,
                           opt->decoupled ? 1 - o->lr * opt->weight_decay : 1,
                           opt->decoupled,
                           opt->amsgrad,
                           opt->maximize};
  size_t n = (size_t)info->numel;
  if (info->memory == DIST_MEM_CUDA) {
#ifdef HAVE_CUDA
    (void)cudaGetLastError(); /* an earlier failure is not ours */
    int e = dist__cuda_adam(info->data, grad, s->buf[0], s->buf[1], s->buf[2], (int)info->dtype, n, &sc,
                            dist__cuda_stream());
    return DIST_CUDA_STATUS(e, "dist__cuda_adam");
#else
    return dist__error(DIST_ERR_UNSUPPORTED, "dist_optim_step: CUDA parameter '%s' in a distmgr built without CUDA",
                       info->name);
#endif
  }
  void *p = info->data, *m = s->buf[0], *v = s->buf[1], *vmax = s->buf[2];
  if (info->dtype == DIST_F32) (opt->amsgrad ? adam_f32_ams : adam_f32)(p, grad, m, v, vmax, n, &sc);
  else (opt->amsgrad ? adam_f64_ams : adam_f64)(p, grad, m, v, vmax, n, &sc);
  return DIST_SUCCESS;
}
