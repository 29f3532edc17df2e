/* Tests of the local optimizers (optim.h): SGD and Adam/AdamW against the
 * torch.optim formulas evaluated here in scalar double arithmetic (and two
 * literal trajectories), per-parameter steps, lr schedules, reset, state
 * sizes and the argument errors. Serial: one rank.
 *
 * Host memory, and (builds with CUDA, when a device is visible) a "device"
 * suite that runs the update tests again with every tensor cudaMalloc'd:
 * each step's result is checked against the same reference formulas and
 * against a host run of the same test. Without a device that suite is
 * skipped, saying so on a line that starts with SKIP. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distmgr/optim.h"
#include "cuda_mem.h"
#include "cunit_main.h"

/* ---- a parameter set of host or device tensors ------------------------------- */

/* Memory of the fixtures made next (the device suite sets DIST_MEM_CUDA) and
 * the manager's CUDA device, where device fixtures live. */
static dist_memory MEM = DIST_MEM_HOST;
static int DEV;

#define MAXT 3
typedef struct {
  dist_params *set;
  dist_memory mem;
  int count;
  dist_dtype dt[MAXT];
  int64_t n[MAXT];
  void *data[MAXT], *grad[MAXT];   /* the host tensors, or host copies of the device ones */
  void *ddata[MAXT], *dgrad[MAXT]; /* device tensors (CUDA fixtures) */
} fixture;

static double load(dist_dtype dt, const void *b, int64_t k) {
  return dt == DIST_F32 ? ((const float *)b)[k] : ((const double *)b)[k];
}
static void store(dist_dtype dt, void *b, int64_t k, double v) {
  if (dt == DIST_F32) ((float *)b)[k] = (float)v;
  else ((double *)b)[k] = v;
}

static size_t fx_bytes(const fixture *f, int i) { return (size_t)f->n[i] * dist_dtype_size(f->dt[i]); }

/* Starting values away from zero, so relative comparisons stay meaningful. */
static double p0(int i, int64_t k) { return (k % 2 ? -1 : 1) * (0.7 + 0.37 * (double)k + 0.11 * i); }

/* Gradient of element k of tensor i at step t: varied signs and sizes. */
static double gen_grad(int i, int64_t k, int t) { return sin(1.3 * (double)k + 0.7 * i + 2.1 * t) * (1 + 0.5 * (double)k); }

/* The tensors distmgr is given for tensor i: its host buffers, or (CUDA
 * fixtures) device copies of them. */
static int fx_place(fixture *f, int i, void **data, void **grad) {
  *data = f->data[i];
  *grad = f->grad[i];
#ifdef HAVE_CUDA
  if (f->mem == DIST_MEM_CUDA) {
    f->ddata[i] = cuda_copy_of(f->data[i], fx_bytes(f, i));
    f->dgrad[i] = cuda_copy_of(f->grad[i], fx_bytes(f, i));
    if (!f->ddata[i] || !f->dgrad[i]) return -1;
    *data = f->ddata[i];
    *grad = f->dgrad[i];
  }
#endif
  return 0;
}

/* count tensors "t0".."t2" of the given dtypes and sizes in memory MEM;
 * committed unless told. */
static int fx_init(fixture *f, int count, const dist_dtype *dt, const int64_t *n, int commit) {
  memset(f, 0, sizeof *f);
  f->mem = MEM;
  if (dist_params_create(NULL, &f->set) != DIST_SUCCESS) return -1;
  for (int i = 0; i < count; i++) {
    size_t es = dist_dtype_size(dt[i]);
    f->dt[i] = dt[i];
    f->n[i] = n[i];
    f->data[i] = calloc((size_t)n[i] + 1, es);
    f->grad[i] = calloc((size_t)n[i] + 1, es);
    f->count++;
    for (int64_t k = 0; k < n[i]; k++) store(dt[i], f->data[i], k, p0(i, k));
    void *data, *grad;
    char name[8];
    snprintf(name, sizeof name, "t%d", i);
    if (fx_place(f, i, &data, &grad) ||
        dist_params_add(f->set, name, data, grad, n[i], dt[i], f->mem, DEV, NULL) != DIST_SUCCESS)
      return -1;
  }
  return commit ? (int)dist_params_commit(f->set) : 0;
}

static void fx_free(fixture *f) {
  dist_params_destroy(f->set);
  for (int i = 0; i < f->count; i++) {
    free(f->data[i]);
    free(f->grad[i]);
#ifdef HAVE_CUDA
    if (f->mem == DIST_MEM_CUDA) {
      CUDA_CHECK(cudaFree(f->ddata[i]));
      CUDA_CHECK(cudaFree(f->dgrad[i]));
    }
#endif
  }
}

/* CUDA fixtures: copy the host values of the data and/or the gradients to
 * the device tensors, or both back once distmgr's device work is done.
 * No-ops on host memory, where the host values are the tensors. */
static void fx_upload(fixture *f, int data, int grad) {
#ifdef HAVE_CUDA
  for (int i = 0; f->mem == DIST_MEM_CUDA && i < f->count; i++) {
    if (data) cuda_upload(f->ddata[i], f->data[i], fx_bytes(f, i));
    if (grad) cuda_upload(f->dgrad[i], f->grad[i], fx_bytes(f, i));
  }
#endif
}
static void fx_fetch(fixture *f) {
#ifdef HAVE_CUDA
  for (int i = 0; f->mem == DIST_MEM_CUDA && i < f->count; i++) {
    cuda_download(f->data[i], f->ddata[i], fx_bytes(f, i));
    cuda_download(f->grad[i], f->dgrad[i], fx_bytes(f, i));
  }
#endif
}

/* The standard set: f64[5] and f32[4] (56 bytes of data). */
static const dist_dtype STD_DT[2] = {DIST_F64, DIST_F32};
static const int64_t STD_N[2] = {5, 4};
#define STD_BYTES (5 * 8 + 4 * 4)

/* Relative: f64 at 1e-12; f32 at 1e-6 on the host, 2e-6 on the device
 * (whose kernels may fuse multiply-adds). */
static int close_to(dist_dtype dt, double got, double want) {
  double tol = dt == DIST_F64 ? 1e-12 : MEM == DIST_MEM_CUDA ? 2e-6 : 1e-6;
  return fabs(got - want) <= tol * fabs(want);
}

/* ---- reference formulas (torch.optim, scalar double) ------------------------ */

typedef struct {
  double p, b, m, v, vmax;
} ref_elem;

static void ref_sgd(const dist_sgd_options *o, double lr, ref_elem *e, double g, int t) {
  if (o->maximize) g = -g;
  if (o->weight_decay != 0) g = g + o->weight_decay * e->p;
  if (o->momentum != 0) {
    e->b = t == 1 ? g : o->momentum * e->b + (1 - o->dampening) * g;
    g = o->nesterov ? g + o->momentum * e->b : e->b;
  }
  e->p = e->p - lr * g;
}

static void ref_adam(const dist_adam_options *o, double lr, ref_elem *e, double g, int t) {
  if (o->maximize) g = -g;
  if (o->decoupled) e->p = e->p * (1 - lr * o->weight_decay);
  else if (o->weight_decay != 0) g = g + o->weight_decay * e->p;
  e->m = o->beta1 * e->m + (1 - o->beta1) * g;
  e->v = o->beta2 * e->v + (1 - o->beta2) * g * g;
  double vhat = e->v;
  if (o->amsgrad) vhat = e->vmax = e->vmax > e->v ? e->vmax : e->v;
  double bc1 = 1 - pow(o->beta1, t), bc2 = 1 - pow(o->beta2, t);
  e->p = e->p - (lr / bc1) * e->m / (sqrt(vhat) / sqrt(bc2) + o->eps);
}

typedef struct {
  const char *what;
  int adam;
  dist_sgd_options sgd;
  dist_adam_options am;
} ocase;

static ocase S(const char *what, dist_sgd_options o) {
  ocase c;
  memset(&c, 0, sizeof c);
  c.what = what;
  c.sgd = o;
  return c;
}
static ocase A(const char *what, dist_adam_options o) {
  ocase c;
  memset(&c, 0, sizeof c);
  c.what = what;
  c.adam = 1;
  c.am = o;
  return c;
}

static dist_status make(const ocase *c, dist_params *set, dist_optim **o) {
  return c->adam ? dist_optim_adam(set, &c->am, o) : dist_optim_sgd(set, &c->sgd, o);
}
static void ref_step(const ocase *c, double lr, ref_elem *e, double g, int t) {
  if (c->adam) ref_adam(&c->am, lr, e, g, t);
  else ref_sgd(&c->sgd, lr, e, g, t);
}

/* Write step t's gradients; the reference takes them as stored (rounded). */
static void put_grads(fixture *f, int t) {
  for (int i = 0; i < f->count; i++)
    for (int64_t k = 0; k < f->n[i]; k++) store(f->dt[i], f->grad[i], k, gen_grad(i, k, t));
  fx_upload(f, 0, 1);
}

/* Compare every element with the reference; report the case once. */
static void compare(const fixture *f, ref_elem ref[][8], const char *what, int t) {
  int bad = 0;
  for (int i = 0; i < f->count; i++)
    for (int64_t k = 0; k < f->n[i]; k++) {
      double got = load(f->dt[i], f->data[i], k);
      if (!close_to(f->dt[i], got, ref[i][k].p)) {
        if (!bad)
          fprintf(stderr, "%s%s, step %d, tensor %d [%lld]: got %.17g want %.17g\n",
                  f->mem == DIST_MEM_CUDA ? "device: " : "", what, t, i, (long long)k, got, ref[i][k].p);
        bad = 1;
      }
    }
  CU_ASSERT_FALSE(bad);
}

static void init_ref(const fixture *f, ref_elem ref[][8]) {
  memset(ref, 0, sizeof(ref_elem) * 8 * MAXT);
  for (int i = 0; i < f->count; i++)
    for (int64_t k = 0; k < f->n[i]; k++) ref[i][k].p = load(f->dt[i], f->data[i], k);
}

/* ---- a device run beside a host run ------------------------------------------ */

/* The device suite runs a test twice (on_device): on host memory, keeping
 * the values after every step (TWIN_KEEP), then on device memory, where
 * every step's values must also be close_to the host run's at the same
 * point (TWIN_CHECK). A test's steps come in a fixed order, so the k-th step
 * of one run is the k-th of the other. */
enum { TWIN_OFF, TWIN_KEEP, TWIN_CHECK };
#define TWIN_STEPS 64
static struct {
  int mode, kept, checked;
  double v[TWIN_STEPS][MAXT * 8];
} twin;

static void twin_step(const fixture *f) {
  if (twin.mode == TWIN_OFF) return;
  int at = twin.mode == TWIN_KEEP ? twin.kept++ : twin.checked++;
  if (at >= TWIN_STEPS || (twin.mode == TWIN_CHECK && at >= twin.kept)) {
    CU_FAIL("more steps than the host run kept");
    return;
  }
  int j = 0, bad = 0;
  for (int i = 0; i < f->count; i++)
    for (int64_t k = 0; k < f->n[i]; k++, j++) {
      double v = load(f->dt[i], f->data[i], k);
      if (twin.mode == TWIN_KEEP) twin.v[at][j] = v;
      else if (!bad && !close_to(f->dt[i], v, twin.v[at][j])) {
        fprintf(stderr, "device step %d, tensor %d [%lld]: %.17g, host run %.17g\n", at + 1, i, (long long)k, v,
                twin.v[at][j]);
        bad = 1;
      }
    }
  CU_ASSERT_FALSE(bad);
}

/* A full step (index < 0) or one parameter's; then the host values hold
 * the result, and the device suite compares it with the host run's. */
static dist_status fx_step(fixture *f, dist_optim *o, int index) {
  dist_status s = index < 0 ? dist_optim_step(o) : dist_optim_step_param(o, index);
  fx_fetch(f);
  twin_step(f);
  return s;
}

/* `steps` full steps of case c on the standard set against the reference. */
static void run_case(ocase cv, int steps) {
  const ocase *c = &cv;
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 2, STD_DT, STD_N, 1), 0);
  ref_elem ref[MAXT][8];
  init_ref(&f, ref);
  dist_optim *o = NULL;
  ASSERT_OK(make(c, f.set, &o));
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  for (int t = 1; t <= steps; t++) {
    put_grads(&f, t);
    for (int i = 0; i < f.count; i++)
      for (int64_t k = 0; k < f.n[i]; k++)
        ref_step(c, c->adam ? c->am.lr : c->sgd.lr, &ref[i][k], load(f.dt[i], f.grad[i], k), t);
    ASSERT_OK(fx_step(&f, o, -1));
    compare(&f, ref, c->what, t);
  }
  dist_optim_destroy(o);
  fx_free(&f);
}

#define SGD(lr_, momentum_, dampening_, weight_decay_, nesterov_, maximize_) \
  ((dist_sgd_options){                                                        \
      .struct_size = sizeof(dist_sgd_options),                                \
      .lr = (lr_),                                                            \
      .momentum = (momentum_),                                                \
      .dampening = (dampening_),                                              \
      .weight_decay = (weight_decay_),                                        \
      .nesterov = (nesterov_),                                                \
      .maximize = (maximize_),                                                \
  })
#define ADAM(lr_, beta1_, beta2_, eps_, weight_decay_, decoupled_, amsgrad_, maximize_) \
  ((dist_adam_options){                                                                  \
      .struct_size = sizeof(dist_adam_options),                                          \
      .lr = (lr_),                                                                       \
      .beta1 = (beta1_),                                                                 \
      .beta2 = (beta2_),                                                                 \
      .eps = (eps_),                                                                     \
      .weight_decay = (weight_decay_),                                                   \
      .decoupled = (decoupled_),                                                         \
      .amsgrad = (amsgrad_),                                                             \
      .maximize = (maximize_),                                                           \
  })
/* lr, momentum, dampening, weight_decay, nesterov, maximize */
static void test_sgd_plain(void) { run_case(S("sgd plain", SGD(0.1, 0, 0, 0, 0, 0)), 4); }
static void test_sgd_momentum(void) { run_case(S("sgd momentum+dampening", SGD(0.05, 0.9, 0.3, 0, 0, 0)), 5); }
static void test_sgd_nesterov(void) { run_case(S("sgd nesterov", SGD(0.05, 0.8, 0, 0.01, 1, 0)), 5); }
static void test_sgd_weight_decay(void) {
  run_case(S("sgd weight decay", SGD(0.1, 0, 0, 0.05, 0, 0)), 4);
  run_case(S("sgd weight decay+momentum", SGD(0.1, 0.5, 0.1, 0.05, 0, 0)), 4);
}
static void test_sgd_maximize(void) {
  run_case(S("sgd maximize", SGD(0.1, 0, 0, 0, 0, 1)), 3);
  run_case(S("sgd maximize+nesterov", SGD(0.05, 0.9, 0, 0.02, 1, 1)), 4);
}

/* lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize */
static void test_adam_plain(void) {
  run_case(A("adam", ADAM(0.01, 0.9, 0.999, 1e-8, 0, 0, 0, 0)), 5);
  run_case(A("adam betas", ADAM(0.05, 0.5, 0.8, 1e-3, 0, 0, 0, 0)), 4);
}
static void test_adamw(void) { run_case(A("adamw", ADAM(0.01, 0.9, 0.999, 1e-8, 0.1, 1, 0, 0)), 5); }
static void test_adam_amsgrad(void) {
  run_case(A("adam amsgrad", ADAM(0.02, 0.9, 0.99, 1e-8, 0, 0, 1, 0)), 6);
  run_case(A("adamw amsgrad maximize", ADAM(0.02, 0.8, 0.9, 1e-6, 0.05, 1, 1, 1)), 5);
}
static void test_adam_l2_vs_decoupled(void) {
  run_case(A("adam L2", ADAM(0.01, 0.9, 0.999, 1e-8, 0.1, 0, 0, 0)), 4);
  run_case(A("adam L2 maximize", ADAM(0.01, 0.9, 0.999, 1e-8, 0.1, 0, 0, 1)), 4);
  /* The two decays really differ: same options but `decoupled`, same grads. */
  fixture a, b;
  CU_ASSERT_EQUAL_FATAL(fx_init(&a, 2, STD_DT, STD_N, 1), 0);
  CU_ASSERT_EQUAL_FATAL(fx_init(&b, 2, STD_DT, STD_N, 1), 0);
  dist_adam_options l2 = ADAM(0.01, 0.9, 0.999, 1e-8, 0.1, 0, 0, 0), dec = l2;
  dec.decoupled = 1;
  dist_optim *oa, *ob;
  ASSERT_OK(dist_optim_adam(a.set, &l2, &oa));
  ASSERT_OK(dist_optim_adam(b.set, &dec, &ob));
  CU_ASSERT_STRING_EQUAL(dist_optim_name(oa), "adam");
  CU_ASSERT_STRING_EQUAL(dist_optim_name(ob), "adamw");
  for (int t = 1; t <= 3; t++) {
    put_grads(&a, t);
    put_grads(&b, t);
    ASSERT_OK(fx_step(&a, oa, -1));
    ASSERT_OK(fx_step(&b, ob, -1));
  }
  CU_ASSERT(fabs(load(DIST_F64, a.data[0], 0) - load(DIST_F64, b.data[0], 0)) > 1e-6);
  dist_optim_destroy(oa);
  dist_optim_destroy(ob);
  fx_free(&a);
  fx_free(&b);
}

/* Literal trajectories: p = {1.0, -0.5} (f64), gradients {0.5, -1.0},
 * {0.25, 0.5}, {-0.125, 0.75}. The expected values were computed with
 * python3 -c using plain floats and torch.optim's update rules (SGD: buffer
 * = d on step 1, else 0.9*b + 0.9*d, d = g + 0.01*p; AdamW: p *= 1 - lr*wd,
 * max of the second moments, bias corrections 1 - beta^t). */
static void literal_case(ocase cv, const double want[2]) {
  const ocase *c = &cv;
  static const double G[3][2] = {{0.5, -1.0}, {0.25, 0.5}, {-0.125, 0.75}};
  double p[2] = {1.0, -0.5}, g[2];
  dist_params *set;
  ASSERT_OK(dist_params_create(NULL, &set));
  ASSERT_OK(dist_params_add(set, "w", p, g, 2, DIST_F64, DIST_MEM_HOST, 0, NULL));
  ASSERT_OK(dist_params_commit(set));
  dist_optim *o;
  ASSERT_OK(make(c, set, &o));
  for (int t = 0; t < 3; t++) {
    memcpy(g, G[t], sizeof g);
    ASSERT_OK(dist_optim_step(o));
  }
  for (int i = 0; i < 2; i++) {
    if (!close_to(DIST_F64, p[i], want[i])) fprintf(stderr, "%s: p[%d] = %.17g, want %.17g\n", c->what, i, p[i], want[i]);
    CU_ASSERT(close_to(DIST_F64, p[i], want[i]));
  }
  dist_optim_destroy(o);
  dist_params_destroy(set);
}

static void test_literal(void) {
  /* SGD lr 0.1, momentum 0.9, dampening 0.1, weight_decay 0.01. */
  literal_case(S("literal sgd", SGD(0.1, 0.9, 0.1, 0.01, 0, 0)),
               (const double[]){0.82787543869, -0.37964353359499997});
  /* AdamW amsgrad lr 0.01, betas (0.9, 0.999), eps 1e-8, weight_decay 0.1. */
  literal_case(A("literal adamw amsgrad", ADAM(0.01, 0.9, 0.999, 1e-8, 0.1, 1, 1, 0)),
               (const double[]){0.9720739012485636, -0.4877124771919052});
}

/* ---- per-parameter steps ------------------------------------------------------ */

/* Parameter 1 takes three steps before parameter 0 takes its first: each one's
 * bias correction follows its own count, and the other is untouched. */
static void test_step_param(void) {
  const ocase c = A("adam step_param", ADAM(0.05, 0.9, 0.99, 1e-8, 0.01, 0, 0, 0));
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 2, STD_DT, STD_N, 1), 0);
  ref_elem ref[MAXT][8];
  init_ref(&f, ref);
  dist_optim *o;
  ASSERT_OK(make(&c, f.set, &o));
  for (int t = 1; t <= 3; t++) {
    put_grads(&f, t);
    for (int64_t k = 0; k < f.n[1]; k++) ref_step(&c, c.am.lr, &ref[1][k], load(f.dt[1], f.grad[1], k), t);
    ASSERT_OK(fx_step(&f, o, 1));
    compare(&f, ref, c.what, t); /* parameter 0 still at its start */
  }
  put_grads(&f, 7);
  for (int64_t k = 0; k < f.n[0]; k++) ref_step(&c, c.am.lr, &ref[0][k], load(f.dt[0], f.grad[0], k), 1);
  ASSERT_OK(fx_step(&f, o, 0));
  compare(&f, ref, c.what, 1);
  /* A full step now: parameter 0's second, parameter 1's fourth. */
  put_grads(&f, 8);
  for (int i = 0; i < 2; i++)
    for (int64_t k = 0; k < f.n[i]; k++) ref_step(&c, c.am.lr, &ref[i][k], load(f.dt[i], f.grad[i], k), i ? 4 : 2);
  ASSERT_OK(fx_step(&f, o, -1));
  compare(&f, ref, c.what, 4);
  dist_optim_destroy(o);
  fx_free(&f);
}

/* ---- learning rate and schedules ---------------------------------------------- */

static int lr_close(double got, double want) { return fabs(got - want) <= 1e-14 * fabs(want); }

static dist_optim *sgd_over(fixture *f, double lr) {
  dist_optim *o = NULL;
  CU_ASSERT_EQUAL(fx_init(f, 2, STD_DT, STD_N, 1), 0);
  ASSERT_OK(dist_optim_sgd(f->set, &SGD(lr, 0, 0, 0, 0, 0), &o));
  return o;
}

static void test_schedule_step(void) {
  fixture f;
  dist_optim *o = sgd_over(&f, 0.1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  ASSERT_OK(dist_optim_schedule_step(o)); /* constant by default */
  CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.1));
  ASSERT_OK(dist_optim_set_schedule(o, &(dist_lr_schedule){DIST_LR_STEP, 2, 0.5, NULL, NULL}));
  CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.1));
  static const double want[7] = {0, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125}; /* 0.1 * 0.5^floor(k/2) */
  for (int k = 1; k <= 6; k++) {
    ASSERT_OK(dist_optim_schedule_step(o));
    CU_ASSERT(lr_close(dist_optim_get_lr(o), want[k]));
  }
  /* The step uses the scheduled lr: p -= 0.0125 * g. */
  double before = load(DIST_F64, f.data[0], 1);
  put_grads(&f, 1);
  ASSERT_OK(fx_step(&f, o, -1));
  CU_ASSERT(close_to(DIST_F64, load(DIST_F64, f.data[0], 1), before - 0.0125 * load(DIST_F64, f.grad[0], 1)));
  dist_optim_destroy(o);
  fx_free(&f);
}

static void test_schedule_exponential(void) {
  fixture f;
  dist_optim *o = sgd_over(&f, 0.2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  ASSERT_OK(dist_optim_set_schedule(o, &(dist_lr_schedule){DIST_LR_EXPONENTIAL, 0, 0.9, NULL, NULL}));
  double lr = 0.2;
  for (int k = 1; k <= 5; k++) {
    lr *= 0.9;
    ASSERT_OK(dist_optim_schedule_step(o));
    CU_ASSERT(lr_close(dist_optim_get_lr(o), lr));
  }
  /* Attaching again restarts k from the current lr. */
  ASSERT_OK(dist_optim_set_schedule(o, &(dist_lr_schedule){DIST_LR_EXPONENTIAL, 0, 0.5, NULL, NULL}));
  ASSERT_OK(dist_optim_schedule_step(o));
  CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.2 * pow(0.9, 5) * 0.5));
  /* set_lr becomes the base; k goes on (here k = 1 -> 2). */
  ASSERT_OK(dist_optim_set_lr(o, 0.4));
  CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.4));
  ASSERT_OK(dist_optim_schedule_step(o));
  CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.4 * 0.25));
  dist_optim_destroy(o);
  fx_free(&f);
}

typedef struct {
  int calls;
  int64_t last_k;
  double last_base;
} custom_ctx;

static double inverse_lr(void *ctx, int64_t k, double base) {
  custom_ctx *c = ctx;
  c->calls++;
  c->last_k = k;
  c->last_base = base;
  return base / (1 + (double)k);
}
static double negative_lr(void *ctx, int64_t k, double base) { return -base; }

static void test_schedule_custom(void) {
  fixture f;
  dist_optim *o = sgd_over(&f, 0.3);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  custom_ctx c = {0, 0, 0};
  ASSERT_OK(dist_optim_set_schedule(o, &(dist_lr_schedule){DIST_LR_CUSTOM, 0, 0, inverse_lr, &c}));
  for (int k = 1; k <= 4; k++) {
    ASSERT_OK(dist_optim_schedule_step(o));
    CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.3 / (1 + k)));
  }
  CU_ASSERT_EQUAL(c.calls, 4);
  CU_ASSERT_EQUAL(c.last_k, 4);
  CU_ASSERT(lr_close(c.last_base, 0.3));
  /* A schedule giving a negative lr is refused and changes nothing. */
  ASSERT_OK(dist_optim_set_schedule(o, &(dist_lr_schedule){DIST_LR_CUSTOM, 0, 0, negative_lr, NULL}));
  double lr = dist_optim_get_lr(o);
  ASSERT_STATUS(dist_optim_schedule_step(o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("lr = -");
  CU_ASSERT_EQUAL(dist_optim_get_lr(o), lr);
  dist_optim_destroy(o);
  fx_free(&f);
}

static void test_set_lr(void) {
  fixture f;
  dist_optim *o = sgd_over(&f, 0.1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  ASSERT_OK(dist_optim_set_lr(o, 0.25));
  CU_ASSERT_EQUAL(dist_optim_get_lr(o), 0.25);
  double before = load(DIST_F32, f.data[1], 2);
  put_grads(&f, 2);
  ASSERT_OK(fx_step(&f, o, -1));
  CU_ASSERT(close_to(DIST_F32, load(DIST_F32, f.data[1], 2), before - 0.25 * load(DIST_F32, f.grad[1], 2)));
  ASSERT_OK(dist_optim_set_lr(o, 0)); /* lr 0 is allowed: nothing moves */
  before = load(DIST_F32, f.data[1], 2);
  ASSERT_OK(fx_step(&f, o, -1));
  CU_ASSERT_EQUAL(load(DIST_F32, f.data[1], 2), before);
  CU_ASSERT(isnan(dist_optim_get_lr(NULL)));
  dist_optim_destroy(o);
  fx_free(&f);
}

/* ---- reset, state sizes, accessors -------------------------------------------- */

/* After 3 steps and a reset, a step equals the first step of a fresh
 * optimizer from the same parameters, bit for bit. */
static void test_reset(void) {
  const ocase cases[] = {S("reset sgd", SGD(0.05, 0.9, 0.3, 0.01, 0, 0)),
                         A("reset adam amsgrad", ADAM(0.02, 0.9, 0.99, 1e-8, 0.1, 1, 1, 0))};
  for (int c = 0; c < 2; c++) {
    fixture a, b;
    CU_ASSERT_EQUAL_FATAL(fx_init(&a, 2, STD_DT, STD_N, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fx_init(&b, 2, STD_DT, STD_N, 1), 0);
    dist_optim *oa, *ob;
    ASSERT_OK(make(&cases[c], a.set, &oa));
    for (int t = 1; t <= 3; t++) {
      put_grads(&a, t);
      ASSERT_OK(fx_step(&a, oa, -1));
    }
    size_t held = dist_optim_state_bytes(oa);
    ASSERT_OK(dist_optim_reset(oa));
    CU_ASSERT_EQUAL(dist_optim_state_bytes(oa), held);
    for (int i = 0; i < 2; i++) memcpy(b.data[i], a.data[i], fx_bytes(&a, i));
    fx_upload(&b, 1, 0);
    ASSERT_OK(make(&cases[c], b.set, &ob));
    put_grads(&a, 9);
    put_grads(&b, 9);
    ASSERT_OK(fx_step(&a, oa, -1));
    ASSERT_OK(fx_step(&b, ob, -1));
    for (int i = 0; i < 2; i++) {
      int same = !memcmp(a.data[i], b.data[i], fx_bytes(&a, i));
      if (!same) fprintf(stderr, "%s: tensor %d differs from a fresh optimizer's first step\n", cases[c].what, i);
      CU_ASSERT(same);
    }
    dist_optim_destroy(oa);
    dist_optim_destroy(ob);
    fx_free(&a);
    fx_free(&b);
  }
}

/* Exported state (buffers, step counts, lr schedule) put into a fresh
 * optimizer continues exactly as the original (a checkpoint resume). */
static void test_state_export(void) {
  const ocase cases[] = {S("export sgd", SGD(0.05, 0.9, 0.3, 0.01, 0, 0)),
                         A("export adam amsgrad", ADAM(0.02, 0.9, 0.99, 1e-8, 0.1, 1, 1, 0))};
  const int slots[] = {1, 3};
  dist_lr_schedule sched = {DIST_LR_STEP, 2, 0.5, NULL, NULL};
  for (int c = 0; c < 2; c++) {
    fixture a, b;
    CU_ASSERT_EQUAL_FATAL(fx_init(&a, 2, STD_DT, STD_N, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fx_init(&b, 2, STD_DT, STD_N, 1), 0);
    dist_optim *oa, *ob;
    ASSERT_OK(make(&cases[c], a.set, &oa));
    ASSERT_OK(make(&cases[c], b.set, &ob));
    ASSERT_OK(dist_optim_set_schedule(oa, &sched));
    ASSERT_OK(dist_optim_set_schedule(ob, &sched));
    CU_ASSERT_EQUAL(dist_optim_state_slots(oa), slots[c]);
    for (int t = 1; t <= 3; t++) {
      put_grads(&a, t);
      ASSERT_OK(fx_step(&a, oa, -1));
      ASSERT_OK(dist_optim_schedule_step(oa));
    }
    for (int i = 0; i < 2; i++) {
      memcpy(b.data[i], a.data[i], fx_bytes(&a, i));
      for (int k = 0; k < slots[c]; k++) {
        void *from = NULL, *to = NULL;
        ASSERT_OK(dist_optim_state_buffer(oa, i, k, &from));
        ASSERT_OK(dist_optim_state_buffer(ob, i, k, &to));
        if (from && to) memcpy(to, from, fx_bytes(&a, i));
      }
      int64_t step = -1;
      ASSERT_OK(dist_optim_state_step(oa, i, &step));
      CU_ASSERT_EQUAL(step, 3);
      ASSERT_OK(dist_optim_state_set_step(ob, i, step));
    }
    int64_t k = -1;
    ASSERT_OK(dist_optim_schedule_count(oa, &k));
    CU_ASSERT_EQUAL(k, 3);
    ASSERT_OK(dist_optim_restore_schedule(ob, dist_optim_get_lr(oa), dist_optim_get_base_lr(oa), k));
    fx_upload(&b, 1, 0);
    put_grads(&a, 9);
    put_grads(&b, 9);
    ASSERT_OK(fx_step(&a, oa, -1));
    ASSERT_OK(fx_step(&b, ob, -1));
    ASSERT_OK(dist_optim_schedule_step(oa));
    ASSERT_OK(dist_optim_schedule_step(ob));
    CU_ASSERT_EQUAL(dist_optim_get_lr(oa), dist_optim_get_lr(ob));
    for (int i = 0; i < 2; i++) CU_ASSERT(!memcmp(a.data[i], b.data[i], fx_bytes(&a, i)));
    void *buf;
    ASSERT_STATUS(dist_optim_state_buffer(oa, 0, slots[c], &buf), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(dist_optim_state_step(oa, 2, &k), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(dist_optim_state_set_step(oa, 0, -1), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(dist_optim_restore_schedule(oa, -1.0, 0.1, 0), DIST_ERR_INVALID_ARGUMENT);
    dist_optim_destroy(oa);
    dist_optim_destroy(ob);
    fx_free(&a);
    fx_free(&b);
  }
  CU_ASSERT_EQUAL(dist_optim_state_slots(NULL), -1);
}

static void test_state_bytes(void) {
  const struct {
    ocase c;
    size_t bytes;
  } rows[] = {
      {S("sgd", SGD(0.1, 0, 0, 0.1, 0, 0)), 0},
      {S("sgd momentum", SGD(0.1, 0.9, 0, 0, 0, 0)), STD_BYTES},
      {A("adam", ADAM(0.001, 0.9, 0.999, 1e-8, 0, 0, 0, 0)), 2 * STD_BYTES},
      {A("adamw", ADAM(0.001, 0.9, 0.999, 1e-8, 0.01, 1, 0, 0)), 2 * STD_BYTES},
      {A("adam amsgrad", ADAM(0.001, 0.9, 0.999, 1e-8, 0, 0, 1, 0)), 3 * STD_BYTES},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_init(&f, 2, STD_DT, STD_N, 1), 0);
    dist_optim *o;
    ASSERT_OK(make(&rows[r].c, f.set, &o));
    CU_ASSERT_EQUAL(dist_optim_state_bytes(o), rows[r].bytes);
    put_grads(&f, 1);
    ASSERT_OK(fx_step(&f, o, -1));
    if (dist_optim_state_bytes(o) != rows[r].bytes)
      fprintf(stderr, "%s: state_bytes %zu, want %zu\n", rows[r].c.what, dist_optim_state_bytes(o), rows[r].bytes);
    CU_ASSERT_EQUAL(dist_optim_state_bytes(o), rows[r].bytes);
    dist_optim_destroy(o);
    fx_free(&f);
  }
  CU_ASSERT_EQUAL(dist_optim_state_bytes(NULL), 0);
}

static void test_accessors(void) {
  fixture f;
  dist_optim *o = sgd_over(&f, 0.1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  CU_ASSERT_STRING_EQUAL(dist_optim_name(o), "sgd");
  CU_ASSERT_PTR_EQUAL(dist_optim_params(o), f.set);
  CU_ASSERT_PTR_NULL(dist_optim_params(NULL));
  CU_ASSERT_PTR_NULL(dist_optim_name(NULL));
  put_grads(&f, 1);
  ASSERT_OK(dist_optim_zero_grad(o));
  fx_fetch(&f);
  for (int i = 0; i < 2; i++)
    for (int64_t k = 0; k < f.n[i]; k++) CU_ASSERT_EQUAL(load(f.dt[i], f.grad[i], k), 0.0);
  dist_optim_destroy(o);
  dist_optim_destroy(NULL);
  fx_free(&f);
}

/* An empty set, a zero-size tensor, and a set that grows after create
 * (uncommitted): the late parameter gets its state on its first step. */
static void test_odd_sets(void) {
  dist_params *empty;
  ASSERT_OK(dist_params_create(NULL, &empty));
  ASSERT_OK(dist_params_commit(empty));
  dist_optim *o;
  ASSERT_OK(dist_optim_adam(empty, &ADAM(0.01, 0.9, 0.999, 1e-8, 0, 0, 0, 0), &o));
  ASSERT_OK(dist_optim_step(o));
  CU_ASSERT_EQUAL(dist_optim_state_bytes(o), 0);
  dist_optim_destroy(o);
  dist_params_destroy(empty);

  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 1, STD_DT, STD_N, 0), 0);
  const ocase c = S("growing set", SGD(0.1, 0.5, 0, 0, 0, 0));
  ASSERT_OK(make(&c, f.set, &o));
  ASSERT_OK(dist_params_add(f.set, "none", NULL, NULL, 0, DIST_F64, DIST_MEM_HOST, 0, NULL));
  f.dt[1] = DIST_F32;
  f.n[1] = 4;
  f.data[1] = calloc(4, sizeof(float));
  f.grad[1] = calloc(4, sizeof(float));
  for (int k = 0; k < 4; k++) store(DIST_F32, f.data[1], k, p0(1, k));
  ASSERT_OK(dist_params_add(f.set, "late", f.data[1], f.grad[1], 4, DIST_F32, DIST_MEM_HOST, 0, NULL));
  f.count = 2;
  /* Index 2 in the set is "late"; the fixture's tensor 1 points at it. */
  ref_elem ref[MAXT][8];
  init_ref(&f, ref);
  for (int t = 1; t <= 3; t++) {
    put_grads(&f, t);
    for (int i = 0; i < 2; i++)
      for (int64_t k = 0; k < f.n[i]; k++) ref_step(&c, 0.1, &ref[i][k], load(f.dt[i], f.grad[i], k), t);
    ASSERT_OK(fx_step(&f, o, -1));
    compare(&f, ref, c.what, t);
  }
  CU_ASSERT_EQUAL(dist_optim_state_bytes(o), 5 * 8 + 4 * 4);
  dist_optim_destroy(o);
  fx_free(&f);
}

/* ---- errors ----------------------------------------------------------------- */

static void test_sgd_errors(void) {
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 2, STD_DT, STD_N, 1), 0);
  const struct {
    dist_sgd_options o;
    const char *msg;
  } rows[] = {
      {SGD(-1, 0, 0, 0, 0, 0), "lr = -1 must be >= 0"},
      {SGD(NAN, 0, 0, 0, 0, 0), "lr = nan"},
      {SGD(0.1, -0.5, 0, 0, 0, 0), "dist_optim_sgd: momentum = -0.5 must be >= 0"},
      {SGD(0.1, 0.9, 1.5, 0, 0, 0), "dampening = 1.5 must be in [0, 1]"},
      {SGD(0.1, 0.9, -0.1, 0, 0, 0), "dampening = -0.1"},
      {SGD(0.1, 0, 0, -0.01, 0, 0), "weight_decay = -0.01 must be >= 0"},
      {SGD(0.1, 0, 0, 0, 1, 0), "nesterov"},
      {SGD(0.1, 0.9, 0.1, 0, 1, 0), "dampening = 0.1"},
      {SGD(0.1, 0.9, 0, 0, 2, 0), "nesterov = 2"},
      {SGD(0.1, 0, 0, 0, 0, -1), "maximize = -1"},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    dist_optim *o = (dist_optim *)&f; /* must stay as it is */
    ASSERT_STATUS(dist_optim_sgd(f.set, &rows[r].o, &o), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(rows[r].msg);
    CU_ASSERT_PTR_EQUAL(o, (dist_optim *)&f);
  }
  dist_optim *o;
  ASSERT_STATUS(dist_optim_sgd(f.set, NULL, &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("options");
  ASSERT_STATUS(dist_optim_sgd(NULL, &SGD(0.1, 0, 0, 0, 0, 0), &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("params");
  ASSERT_STATUS(dist_optim_sgd(f.set, &SGD(0.1, 0, 0, 0, 0, 0), NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("out");
  fx_free(&f);
}

static void test_adam_errors(void) {
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 2, STD_DT, STD_N, 1), 0);
  const struct {
    dist_adam_options o;
    const char *msg;
  } rows[] = {
      {ADAM(-0.001, 0.9, 0.999, 1e-8, 0, 0, 0, 0), "dist_optim_adam: lr = -0.001 must be >= 0"},
      {ADAM(INFINITY, 0.9, 0.999, 1e-8, 0, 0, 0, 0), "lr = inf must be finite"},
      {ADAM(0.001, 1, 0.999, 1e-8, 0, 0, 0, 0), "beta1 = 1 must be in [0, 1)"},
      {ADAM(0.001, -0.1, 0.999, 1e-8, 0, 0, 0, 0), "beta1 = -0.1"},
      {ADAM(0.001, 0.9, 1.0, 1e-8, 0, 0, 0, 0), "beta2 = 1 must be in [0, 1)"},
      {ADAM(0.001, 0.9, 1.5, 1e-8, 0, 0, 0, 0), "beta2 = 1.5"},
      {ADAM(0.001, 0.9, 0.999, -1e-8, 0, 0, 0, 0), "eps = -1e-08 must be >= 0"},
      {ADAM(0.001, 0.9, 0.999, 1e-8, -0.01, 1, 0, 0), "weight_decay = -0.01 must be >= 0"},
      {ADAM(0.001, 0.9, 0.999, 1e-8, 0, 2, 0, 0), "decoupled = 2"},
      {ADAM(0.001, 0.9, 0.999, 1e-8, 0, 0, -1, 0), "amsgrad = -1"},
      {ADAM(0.001, 0.9, 0.999, 1e-8, 0, 0, 0, 5), "maximize = 5"},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    dist_optim *o = (dist_optim *)&f;
    ASSERT_STATUS(dist_optim_adam(f.set, &rows[r].o, &o), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(rows[r].msg);
    CU_ASSERT_PTR_EQUAL(o, (dist_optim *)&f);
  }
  dist_optim *o;
  ASSERT_STATUS(dist_optim_adam(f.set, NULL, &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("options");
  ASSERT_STATUS(dist_optim_adam(NULL, &ADAM(0.001, 0.9, 0.999, 1e-8, 0, 0, 0, 0), &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("params");
  fx_free(&f);
}

/* Option structs of other headers' sizes (README, "Option structs"). */
static void test_option_struct_sizes(void) {
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 2, STD_DT, STD_N, 1), 0);
  dist_optim *o = NULL;
  /* An older caller whose struct ends before nesterov: nesterov and
   * maximize take their defaults (5 would be refused). */
  dist_sgd_options s = SGD(0.1, 0, 0, 0, 5, 5);
  ASSERT_STATUS(dist_optim_sgd(f.set, &s, &o), DIST_ERR_INVALID_ARGUMENT);
  s.struct_size = offsetof(dist_sgd_options, nesterov);
  ASSERT_OK(dist_optim_sgd(f.set, &s, &o));
  CU_ASSERT_DOUBLE_EQUAL(dist_optim_get_lr(o), 0.1, 0);
  dist_optim_destroy(o);
  /* Zeroed structs: the message names the macros. */
  memset(&s, 0, sizeof s);
  ASSERT_STATUS(dist_optim_sgd(f.set, &s, &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("DIST_SGD_OPTIONS_INIT");
  dist_adam_options a;
  memset(&a, 0, sizeof a);
  ASSERT_STATUS(dist_optim_adam(f.set, &a, &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("DIST_ADAMW_OPTIONS_INIT");
  /* A newer caller: its new field left zero is accepted, set is refused. */
  struct {
    dist_adam_options a;
    double more;
  } big;
  memset(&big, 0, sizeof big);
  big.a = (dist_adam_options)DIST_ADAMW_OPTIONS_INIT;
  big.a.struct_size = sizeof big;
  o = NULL;
  ASSERT_OK(dist_optim_adam(f.set, &big.a, &o));
  if (o) CU_ASSERT_STRING_EQUAL(dist_optim_name(o), "adamw");
  dist_optim_destroy(o);
  big.more = 1;
  ASSERT_STATUS(dist_optim_adam(f.set, &big.a, &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("of dist_adam_options");
  fx_free(&f);
}

/* 16-bit parameters are refused at create, naming the parameter and dtype;
 * and when they join an uncommitted set later, at the step, before any update. */
static void test_dtype_errors(void) {
  uint16_t h[3] = {0}, hg[3] = {0};
  dist_params *set;
  ASSERT_OK(dist_params_create(NULL, &set));
  /* Buffers not aligned to their elements, and a count whose bytes overflow. */
  static double w[4], g[4];
  ASSERT_STATUS(dist_params_add(set, "odd", (char *)w + 4, g, 2, DIST_F64, DIST_MEM_HOST, 0, NULL),
                DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("'odd': data is not aligned to its 8-byte f64 elements");
  ASSERT_STATUS(dist_params_add(set, "odd", w, (char *)g + 2, 2, DIST_F32, DIST_MEM_HOST, 0, NULL),
                DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("grad is not aligned");
  ASSERT_STATUS(dist_params_add(set, "huge", w, g, INT64_MAX / 2, DIST_F64, DIST_MEM_HOST, 0, NULL),
                DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflow size_t");
  ASSERT_OK(dist_params_add(set, "half", h, hg, 3, DIST_BF16, DIST_MEM_HOST, 0, NULL));
  ASSERT_OK(dist_params_commit(set));
  dist_optim *o = NULL;
  ASSERT_STATUS(dist_optim_sgd(set, &SGD(0.1, 0, 0, 0, 0, 0), &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("'half' has dtype bf16");
  ASSERT_STATUS(dist_optim_adam(set, &ADAM(0.1, 0.9, 0.999, 1e-8, 0, 0, 0, 0), &o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_adam");
  CU_ASSERT_PTR_NULL(o);
  dist_params_destroy(set);

  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f, 1, STD_DT, STD_N, 0), 0);
  ASSERT_OK(dist_optim_sgd(f.set, &SGD(0.1, 0, 0, 0, 0, 0), &o));
  ASSERT_OK(dist_params_add(f.set, "late16", h, hg, 3, DIST_F16, DIST_MEM_HOST, 0, NULL));
  put_grads(&f, 1);
  double before = load(DIST_F64, f.data[0], 0);
  ASSERT_STATUS(dist_optim_step(o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("'late16' has dtype f16");
  CU_ASSERT_EQUAL(load(DIST_F64, f.data[0], 0), before);
  ASSERT_STATUS(dist_optim_step_param(o, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_step_param");
  dist_optim_destroy(o);
  fx_free(&f);
}

static double unit_lr(void *ctx, int64_t k, double base) { return base; }

static void test_call_errors(void) {
  fixture f;
  dist_optim *o = sgd_over(&f, 0.1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  ASSERT_STATUS(dist_optim_step_param(o, 2), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("index = 2");
  ASSERT_STATUS(dist_optim_step_param(o, -1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("index = -1");
  ASSERT_STATUS(dist_optim_set_lr(o, -0.5), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_set_lr: lr = -0.5");
  ASSERT_STATUS(dist_optim_set_lr(o, NAN), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("lr = nan");
  CU_ASSERT_EQUAL(dist_optim_get_lr(o), 0.1);

  const struct {
    dist_lr_schedule s;
    const char *msg;
  } rows[] = {
      {{DIST_LR_STEP, 0, 0.5, NULL, NULL}, "step_size = 0 must be >= 1"},
      {{DIST_LR_STEP, 3, 0, NULL, NULL}, "gamma = 0 must be > 0"},
      {{DIST_LR_EXPONENTIAL, 0, -1, NULL, NULL}, "gamma = -1"},
      {{DIST_LR_CUSTOM, 0, 0, NULL, NULL}, "fn is NULL"},
      {{(dist_lr_schedule_kind)99, 0, 0.5, unit_lr, NULL}, "kind = 99"},
  };
  ASSERT_OK(dist_optim_set_schedule(o, &(dist_lr_schedule){DIST_LR_EXPONENTIAL, 0, 0.5, NULL, NULL}));
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    ASSERT_STATUS(dist_optim_set_schedule(o, &rows[r].s), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(rows[r].msg);
  }
  ASSERT_STATUS(dist_optim_set_schedule(o, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("schedule is NULL");
  /* The schedule in place survived the refusals. */
  ASSERT_OK(dist_optim_schedule_step(o));
  CU_ASSERT(lr_close(dist_optim_get_lr(o), 0.05));

  ASSERT_STATUS(dist_optim_step(NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_step: optimizer is NULL");
  ASSERT_STATUS(dist_optim_step_param(NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_step_param");
  ASSERT_STATUS(dist_optim_zero_grad(NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_zero_grad");
  ASSERT_STATUS(dist_optim_set_lr(NULL, 0.1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_set_lr");
  ASSERT_STATUS(dist_optim_set_schedule(NULL, &rows[0].s), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_set_schedule");
  ASSERT_STATUS(dist_optim_schedule_step(NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_schedule_step");
  ASSERT_STATUS(dist_optim_reset(NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_optim_reset");
  dist_optim_destroy(o);
  fx_free(&f);
}

static CU_TestInfo sgd_tests[] = {{"plain", test_sgd_plain},
                                  {"momentum and dampening", test_sgd_momentum},
                                  {"nesterov", test_sgd_nesterov},
                                  {"weight decay", test_sgd_weight_decay},
                                  {"maximize", test_sgd_maximize},
                                  CU_TEST_INFO_NULL};
static CU_TestInfo adam_tests[] = {{"plain", test_adam_plain},
                                   {"adamw", test_adamw},
                                   {"amsgrad", test_adam_amsgrad},
                                   {"L2 vs decoupled", test_adam_l2_vs_decoupled},
                                   {"literal trajectories", test_literal},
                                   {"step_param", test_step_param},
                                   CU_TEST_INFO_NULL};
static CU_TestInfo lr_tests[] = {{"STEP schedule", test_schedule_step},
                                 {"EXPONENTIAL schedule", test_schedule_exponential},
                                 {"CUSTOM schedule", test_schedule_custom},
                                 {"set_lr", test_set_lr},
                                 CU_TEST_INFO_NULL};
static CU_TestInfo state_tests[] = {{"reset", test_reset},
                                    {"state_bytes", test_state_bytes},
                                    {"state export and restore", test_state_export},
                                    {"accessors", test_accessors},
                                    {"empty, zero-size and growing sets", test_odd_sets},
                                    CU_TEST_INFO_NULL};
static CU_TestInfo error_tests[] = {{"sgd options", test_sgd_errors},
                                    {"adam options", test_adam_errors},
                                    {"option structs of older and newer headers", test_option_struct_sizes},
                                    {"dtypes", test_dtype_errors},
                                    {"calls", test_call_errors},
                                    CU_TEST_INFO_NULL};
#ifdef HAVE_CUDA
/* ---- the device suite --------------------------------------------------------- */

/* `test` on host memory, keeping every step's values, then on device
 * memory: there each step is checked against the reference (by the test)
 * and against the host run's values at the same step (by fx_step). */
static void on_device(void (*test)(void)) {
  MEM = DIST_MEM_HOST, twin.mode = TWIN_KEEP, twin.kept = 0;
  test();
  MEM = DIST_MEM_CUDA, twin.mode = TWIN_CHECK, twin.checked = 0;
  test();
  CU_ASSERT_EQUAL(twin.checked, twin.kept); /* the device run took every step of the host run */
}
/* After each device test, also one that a fatal assertion cut short. */
static void host_again(void) { MEM = DIST_MEM_HOST, twin.mode = TWIN_OFF; }

#define ON_DEVICE(test) \
  static void device_##test(void) { on_device(test); }
ON_DEVICE(test_sgd_plain)
ON_DEVICE(test_sgd_momentum)
ON_DEVICE(test_sgd_nesterov)
ON_DEVICE(test_sgd_weight_decay)
ON_DEVICE(test_sgd_maximize)
ON_DEVICE(test_adam_plain)
ON_DEVICE(test_adamw)
ON_DEVICE(test_adam_amsgrad)
ON_DEVICE(test_adam_l2_vs_decoupled)
ON_DEVICE(test_step_param)
ON_DEVICE(test_schedule_step)
ON_DEVICE(test_set_lr)
ON_DEVICE(test_reset)
ON_DEVICE(test_state_bytes)
ON_DEVICE(test_accessors)

static CU_TestInfo device_tests[] = {{"sgd plain", device_test_sgd_plain},
                                     {"sgd momentum and dampening", device_test_sgd_momentum},
                                     {"sgd nesterov", device_test_sgd_nesterov},
                                     {"sgd weight decay", device_test_sgd_weight_decay},
                                     {"sgd maximize", device_test_sgd_maximize},
                                     {"adam", device_test_adam_plain},
                                     {"adamw", device_test_adamw},
                                     {"adam amsgrad", device_test_adam_amsgrad},
                                     {"adam L2 vs decoupled", device_test_adam_l2_vs_decoupled},
                                     {"adam step_param", device_test_step_param},
                                     {"STEP schedule", device_test_schedule_step},
                                     {"set_lr", device_test_set_lr},
                                     {"reset", device_test_reset},
                                     {"state_bytes", device_test_state_bytes},
                                     {"accessors, zero_grad", device_test_accessors},
                                     CU_TEST_INFO_NULL};
#endif /* HAVE_CUDA */

static CU_SuiteInfo suites[] = {{"sgd", NULL, NULL, NULL, NULL, sgd_tests},
                                {"adam", NULL, NULL, NULL, NULL, adam_tests},
                                {"lr", NULL, NULL, NULL, NULL, lr_tests},
                                {"state", NULL, NULL, NULL, NULL, state_tests},
                                {"errors", NULL, NULL, NULL, NULL, error_tests},
#ifdef HAVE_CUDA
                                {"device", NULL, NULL, NULL, host_again, device_tests}, /* last (see below) */
#endif
                                CU_SUITE_INFO_NULL};

/* Keeps the device suite where it can run; else says why (a SKIP line, or
 * an error, which counts as a failure) and drops it. Returns the failures. */
static int device_suite_setup(void) {
#ifdef HAVE_CUDA
  const char *why;
  int runs = 0, failed = 0;
  if (cuda_devices(&why) == 0) printf("SKIP: test_optim device suite: no CUDA device (%s)\n", why);
  else if (cuda_use_manager_device(&DEV)) runs = 1;
  else failed = 1;
  if (!runs) suites[sizeof suites / sizeof suites[0] - 2] = (CU_SuiteInfo)CU_SUITE_INFO_NULL; /* the device suite */
  return failed;
#else
  printf("SKIP: test_optim device suite: distmgr built without CUDA\n");
  return 0;
#endif
}

int main(void) {
  /* Parameter sets live in process groups: the manager must be up. */
  dist_status s = dist_manager_initialize();
  if (s != DIST_SUCCESS) {
    fprintf(stderr, "initialize: %s (%s)\n", dist_status_string(s), dist_last_error());
    return 1;
  }
  int failed = device_suite_setup();
  failed += cunit_run(suites, "test_optim", 0);
  if (dist_manager_finalize() != DIST_SUCCESS) failed++;
  return failed != 0;
}
