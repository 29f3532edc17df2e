/* maml: first-order MAML (FOMAML) on sine-wave regression, its task batch
 * spread over the workers by remote calls (distmgr/rpc.h).
 *
 * A task is y = A sin(x - phase), A in [0.1, 5], phase in [0, pi], x in
 * [-5, 5]: K support and K query points. The model is an MLP 1-40-40-1 with
 * ReLU. Each meta-iteration rank 0 draws a batch of T tasks and calls
 * "maml_task" once per task (dim 0 split, exclusive: task j on worker
 * j % W), the meta-parameters sent whole to every call. A call adapts a copy
 * of the parameters with a few SGD steps on the support points and returns
 * the query loss and its gradient at the adapted parameters (first order: no
 * second derivatives through the inner steps). The MEAN reducer averages
 * them over the tasks, and rank 0 takes an Adam step; the other ranks only
 * serve calls, until rank 0 calls "maml_stop" on them.
 *
 * --serial runs the same per-task code in one process and averages exactly
 * as the MEAN reducer does (f64 sums in task order, then / T), so its final
 * parameters equal a distributed run's bit for bit at any rank count.
 *
 *   mpirun -np 4 examples/maml --iters 1000 --tasks 16
 *   examples/maml --serial --iters 1000 --tasks 16 --out serial.f64 */
#include <distmgr.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define HID 40
/* Parameter layout (one f64 vector, so that a call carries one tensor):
 * w1[HID] b1[HID] (1 -> HID), w2[HID][HID] b2[HID] (row i: hidden unit i of
 * layer 2), w3[HID] b3 (HID -> 1). */
#define W1 0
#define B1 (W1 + HID)
#define W2 (B1 + HID)
#define B2 (W2 + HID * HID)
#define W3 (B2 + HID)
#define B3 (W3 + HID)
#define NPARAM (B3 + 1)
#define EVAL_TASKS 32 /* a fixed batch: its loss is comparable across iterations */

/* The per-task settings, sent as a call's option bytes (both sides run this
 * binary, so the layout agrees). */
typedef struct maml_opts {
  double inner_lr;
  int32_t inner_steps, support, query, pad_;
} maml_opts;

typedef struct maml_cfg {
  int iters, tasks, log_every, serial;
  uint64_t seed;
  double meta_lr;
  maml_opts o;
  const char *out;
} maml_cfg;

/* ---- tasks ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) { /* splitmix64: same stream everywhere */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double uniform(uint64_t *s, double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* n tasks of k points each into xy[n][k][2] (x, y). */
static void draw_tasks(uint64_t *s, int n, int k, double *xy) {
  for (int t = 0; t < n; t++) {
    double amp = uniform(s, 0.1, 5.0), phase = uniform(s, 0.0, M_PI);
    for (int i = 0; i < k; i++, xy += 2) {
      xy[0] = uniform(s, -5.0, 5.0);
      xy[1] = amp * sin(xy[0] - phase);
    }
  }
}

/* ---- the model ------------------------------------------------------------------ */

/* He-style uniform initialization, so the ReLU layers start neither dead nor
 * exploding; biases zero. */
static void init_params(uint64_t seed, double *w) {
  uint64_t s = seed ^ 0x5eedull;
  memset(w, 0, NPARAM * sizeof *w);
  for (int i = 0; i < HID; i++) w[W1 + i] = uniform(&s, -1.0, 1.0);
  double a2 = sqrt(6.0 / HID);
  for (int i = 0; i < HID * HID; i++) w[W2 + i] = uniform(&s, -a2, a2);
  for (int i = 0; i < HID; i++) w[W3 + i] = uniform(&s, -a2, a2) / 2;
}

/* Mean squared error of the net w on n points xy[n][2]; its gradient goes to
 * g (overwritten). Plain loops: no BLAS thread or kernel choice can change a
 * bit between the serial and the distributed run. */
static double mse_grad(const double *w, const double *xy, int n, double *g) {
  memset(g, 0, NPARAM * sizeof *g);
  double loss = 0;
  for (int p = 0; p < n; p++) {
    double x = xy[2 * p], a1[HID], h1[HID], a2[HID], h2[HID], d2[HID];
    for (int j = 0; j < HID; j++) a1[j] = w[W1 + j] * x + w[B1 + j], h1[j] = a1[j] > 0 ? a1[j] : 0;
    double yhat = w[B3];
    for (int i = 0; i < HID; i++) {
      const double *row = &w[W2 + i * HID];
      double a = w[B2 + i];
      for (int j = 0; j < HID; j++) a += row[j] * h1[j];
      a2[i] = a, h2[i] = a > 0 ? a : 0;
      yhat += w[W3 + i] * h2[i];
    }
    double e = yhat - xy[2 * p + 1], dy = 2 * e / n;
    loss += e * e;
    /* backward, layer by layer */
    g[B3] += dy;
    for (int i = 0; i < HID; i++) {
      g[W3 + i] += dy * h2[i];
      d2[i] = a2[i] > 0 ? dy * w[W3 + i] : 0;
      g[B2 + i] += d2[i];
      for (int j = 0; j < HID; j++) g[W2 + i * HID + j] += d2[i] * h1[j];
    }
    for (int j = 0; j < HID; j++) {
      if (a1[j] <= 0) continue;
      double d1 = 0;
      for (int i = 0; i < HID; i++) d1 += w[W2 + i * HID + j] * d2[i];
      g[B1 + j] += d1;
      g[W1 + j] += d1 * x;
    }
  }
  return loss / n;
}

/* One task of FOMAML: inner_steps SGD steps on the support points from w,
 * then the query loss and its gradient at the adapted parameters (the
 * first-order outer gradient). task: [support + query][2]. Thread safe: the
 * executors run several at once. */
static double task_outer(const double *w, const double *task, const maml_opts *o, double *grad) {
  double phi[NPARAM];
  memcpy(phi, w, sizeof phi);
  for (int s = 0; s < o->inner_steps; s++) {
    mse_grad(phi, task, o->support, grad);
    for (int i = 0; i < NPARAM; i++) phi[i] -= o->inner_lr * grad[i];
  }
  return mse_grad(phi, task + 2 * o->support, o->query, grad);
}

/* ---- the remote function ----------------------------------------------------------- */

/* "maml_task": args [meta-parameters f64[NPARAM], one task f64[K][2]],
 * options maml_opts; outputs [loss f64[1], gradient f64[NPARAM]]. */
static dist_status maml_task(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)user;
  maml_opts o;
  if (in->nargs != 2 || in->opts_bytes != sizeof o)
    return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "maml_task: %d arguments and %zu option bytes (2 and %zu)",
                         in->nargs, in->opts_bytes, sizeof o);
  memcpy(&o, in->opts, sizeof o); /* the option bytes need not be aligned */
  const dist_tensor *w = &in->args[0], *task = &in->args[1];
  if (w->dtype != DIST_F64 || w->ndim != 1 || w->shape[0] != NPARAM)
    return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "maml_task: parameters are not f64[%d]", NPARAM);
  if (task->dtype != DIST_F64 || task->ndim != 2 || task->shape[0] != o.support + o.query || task->shape[1] != 2)
    return dist_rpc_fail(DIST_ERR_INVALID_ARGUMENT, "maml_task: the task is not f64[%d][2] (a batch split "
                         "without keepdim?)", o.support + o.query);
  int64_t one = 1, np = NPARAM;
  dist_tensor loss, grad;
  dist_status s = dist_rpc_output(out, DIST_F64, 1, &one, &loss);
  if (!s) s = dist_rpc_output(out, DIST_F64, 1, &np, &grad);
  if (s) return s;
  *(double *)loss.data = task_outer(w->data, task->data, &o, grad.data);
  return DIST_SUCCESS;
}

/* ---- one batch: distributed or serial ---------------------------------------------- */

/* The mean loss and gradient of n tasks through the remote calls. */
static dist_status batch_remote(const maml_cfg *c, const double *w, const double *tasks, int n, double *loss,
                                double *grad) {
  int64_t wshape[1] = {NPARAM}, tshape[3] = {n, c->o.support + c->o.query, 2};
  dist_tensor args[2] = {dist_tensor_host((void *)w, DIST_F64, 1, wshape),
                         dist_tensor_host((void *)tasks, DIST_F64, 3, tshape)};
  dist_rpc_partitioner p = dist_rpc_dim_partitioner(0, 1, 0); /* one task per call, dim 0 dropped */
  p.replicated = 1u << 0;                                     /* the meta-parameters go whole to each */
  dist_rpc_reducer r = {DIST_RPC_REDUCE_MEAN, NULL, NULL};
  dist_future *f = NULL;
  dist_status s = dist_rpc_remote_sync("maml_task", args, 2, &c->o, sizeof c->o, &p, &r, &f);
  if (!s && dist_future_count(f) != 2)
    s = dist_set_error(DIST_ERR_INTERNAL, "maml_task: %d reduced outputs (2 expected)", dist_future_count(f));
  if (!s) {
    *loss = *(const double *)dist_future_output(f, 0)->data;
    memcpy(grad, dist_future_output(f, 1)->data, NPARAM * sizeof *grad);
  }
  dist_future_free(f);
  return s;
}

/* The same in this process: each task's outputs, then their mean computed
 * as the MEAN reducer does (lib/rpc/partition.c): per element, an f64 sum
 * over the tasks in order from 0, then divided by the count. */
static dist_status batch_serial(const maml_cfg *c, const double *w, const double *tasks, int n, double *loss,
                                double *grad) {
  double *parts = malloc((size_t)n * (NPARAM + 1) * sizeof *parts); /* [n][loss, grad] */
  if (!parts) return dist_set_error(DIST_ERR_NO_MEMORY, "maml: %d tasks' gradients", n);
  size_t k = 2 * (size_t)(c->o.support + c->o.query);
  for (int t = 0; t < n; t++) {
    double *part = parts + (size_t)t * (NPARAM + 1);
    part[0] = task_outer(w, tasks + t * k, &c->o, part + 1);
  }
  for (int i = 0; i <= NPARAM; i++) {
    double s = 0;
    for (int t = 0; t < n; t++) s += parts[(size_t)t * (NPARAM + 1) + i];
    s /= n;
    if (i == 0) *loss = s;
    else grad[i - 1] = s;
  }
  free(parts);
  return DIST_SUCCESS;
}

static dist_status batch(const maml_cfg *c, const double *w, const double *tasks, int n, double *loss, double *grad) {
  return c->serial ? batch_serial(c, w, tasks, n, loss, grad) : batch_remote(c, w, tasks, n, loss, grad);
}

/* ---- the outer loop (rank 0) --------------------------------------------------------- */

/* Adam on the meta-parameters (beta 0.9, 0.999; eps 1e-8), step t from 1. */
static void adam_step(double *w, const double *g, double *m, double *v, int t, double lr) {
  double c1 = 1 - pow(0.9, t), c2 = 1 - pow(0.999, t);
  for (int i = 0; i < NPARAM; i++) {
    m[i] = 0.9 * m[i] + 0.1 * g[i];
    v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
    w[i] -= lr * (m[i] / c1) / (sqrt(v[i] / c2) + 1e-8);
  }
}

static dist_status write_params(const char *path, const double *w) {
  FILE *f = fopen(path, "wb");
  if (!f) return dist_set_error(DIST_ERR_IO, "maml: cannot write %s", path);
  size_t n = fwrite(w, sizeof *w, NPARAM, f);
  if (fclose(f) || n != NPARAM) return dist_set_error(DIST_ERR_IO, "maml: writing %s failed", path);
  return DIST_SUCCESS;
}

/* State of the run: rank 0's, kept apart from the configuration. */
typedef struct maml_run {
  const maml_cfg *c;
  double *w, *g, *m, *v, *tasks, *eval;
  dist_status status;
  char msg[1024]; /* the failure's message, before shutdown's calls replace it */
} maml_run;

/* The post-adaptation query loss on the fixed evaluation batch. */
static dist_status eval_loss(maml_run *r, double *loss) {
  return batch(r->c, r->w, r->eval, EVAL_TASKS, loss, r->g);
}

static dist_status train(maml_run *r) {
  const maml_cfg *c = r->c;
  int k = c->o.support + c->o.query;
  uint64_t s = c->seed, es = c->seed ^ 0xe7a1ull;
  double meta_loss = 0, ev0, ev;
  init_params(c->seed, r->w);
  draw_tasks(&es, EVAL_TASKS, k, r->eval);
  dist_status st = eval_loss(r, &ev0);
  if (st) return st;
  printf("maml: %s, %d iterations of %d tasks (K %d+%d, %d inner step(s)), %d parameters\n",
         c->serial ? "serial" : "remote calls", c->iters, c->tasks, c->o.support, c->o.query, c->o.inner_steps,
         NPARAM);
  printf("iter %5d  eval meta-loss %.6f\n", 0, ev0);
  ev = ev0;
  for (int it = 1; it <= c->iters; it++) {
    draw_tasks(&s, c->tasks, k, r->tasks);
    if ((st = batch(c, r->w, r->tasks, c->tasks, &meta_loss, r->g))) return st;
    adam_step(r->w, r->g, r->m, r->v, it, c->meta_lr);
    if (it % c->log_every == 0 || it == c->iters) {
      if ((st = eval_loss(r, &ev))) return st;
      printf("iter %5d  meta-loss %.6f  eval meta-loss %.6f\n", it, meta_loss, ev);
      fflush(stdout);
    }
  }
  printf("maml: final eval meta-loss %.17g (start %.17g)\n", ev, ev0);
  return c->out ? write_params(c->out, r->w) : DIST_SUCCESS;
}

static void train_job(void *user) {
  maml_run *r = user;
  r->status = train(r);
  if (r->status) snprintf(r->msg, sizeof r->msg, "%s", dist_last_error());
}

/* ---- serving until rank 0 is done ------------------------------------------------- */

/* The serving ranks sleep here until rank 0's "maml_stop" call and only then
 * enter dist_rpc_shutdown. Waiting inside it instead would wait in an
 * all-reduce, which DIST_TIMEOUT bounds (a run longer than DIST_TIMEOUT would
 * fail) and which polls the cores the executors need. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
} serving = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static dist_status maml_stop(const dist_rpc_args *in, dist_rpc_outputs *out, void *user) {
  (void)in, (void)out, (void)user;
  pthread_mutex_lock(&serving.mu);
  serving.stop = 1;
  pthread_cond_signal(&serving.cv);
  pthread_mutex_unlock(&serving.mu);
  return DIST_SUCCESS;
}

static void serve_until_stopped(void *user) {
  (void)user;
  pthread_mutex_lock(&serving.mu);
  while (!serving.stop) pthread_cond_wait(&serving.cv, &serving.mu);
  pthread_mutex_unlock(&serving.mu);
}

/* Rank 0: trains, then stops every server, also after a failure and past a
 * server that cannot be reached, so that none waits forever. */
static void drive(void *user) {
  maml_run *r = user;
  train_job(r);
  dist_rpc_world_info wi;
  if (dist_rpc_world_info_get(&wi)) wi.world_size = 1;
  for (int w = 1; w < wi.world_size; w++) {
    dist_future *f = NULL;
    dist_status s = dist_rpc_call_sync(w, "maml_stop", NULL, 0, NULL, 0, &f);
    if (s && !r->status) {
      r->status = s;
      snprintf(r->msg, sizeof r->msg, "stopping worker%d: %s", w, dist_last_error());
    }
    dist_future_free(f);
  }
}

/* ---- main ------------------------------------------------------------------------- */

static int usage_error(const char *msg) {
  fprintf(stderr, "maml: %s\nusage: maml [--iters N] [--tasks T] [--support K] [--query K] [--inner-steps N] "
                  "[--inner-lr X] [--meta-lr X] [--seed N] [--log-every N] [--serial] [--out FILE]\n", msg);
  return 2;
}

static int parse_args(int argc, char **argv, maml_cfg *c) {
  *c = (maml_cfg){500, 16, 50, 0, 1, 1e-3, {0.01, 1, 10, 10, 0}, NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t n = 0;
    dist_status s = DIST_SUCCESS;
    if (!strcmp(a, "--serial")) { c->serial = 1; continue; }
    if (!strcmp(a, "--out")) { if (!v) return usage_error("--out needs a file"); c->out = v; i++; continue; }
    if (!strcmp(a, "--inner-lr")) s = cli_real(a, v, 0, 10, &c->o.inner_lr);
    else if (!strcmp(a, "--meta-lr")) s = cli_real(a, v, 0, 10, &c->meta_lr);
    /* (a value that fails its check is stored too: the run stops below) */
    else if (!strcmp(a, "--iters")) s = cli_int(a, v, 1, 10000000, &n), c->iters = (int)n;
    else if (!strcmp(a, "--tasks")) s = cli_int(a, v, 1, 1 << 16, &n), c->tasks = (int)n;
    else if (!strcmp(a, "--support")) s = cli_int(a, v, 1, 10000, &n), c->o.support = (int32_t)n;
    else if (!strcmp(a, "--query")) s = cli_int(a, v, 1, 10000, &n), c->o.query = (int32_t)n;
    else if (!strcmp(a, "--inner-steps")) s = cli_int(a, v, 0, 1000, &n), c->o.inner_steps = (int32_t)n;
    else if (!strcmp(a, "--seed")) s = cli_int(a, v, 0, INT64_MAX, &n), c->seed = (uint64_t)n;
    else if (!strcmp(a, "--log-every")) s = cli_int(a, v, 1, 10000000, &n), c->log_every = (int)n;
    else {
      char msg[200];
      snprintf(msg, sizeof msg, "unknown option '%s'", a);
      return usage_error(msg);
    }
    if (s) return usage_error(dist_last_error());
    i++;
  }
  return 0;
}

#define CHECK(call)                                                                                    \
  do {                                                                                                 \
    dist_status s_ = (call);                                                                           \
    if (s_ != DIST_SUCCESS) {                                                                          \
      fprintf(stderr, "maml: %s: %s (%s)\n", #call, dist_status_string(s_), dist_last_error());       \
      return 1;                                                                                        \
    }                                                                                                  \
  } while (0)

int main(int argc, char **argv) {
  maml_cfg c;
  int rc = parse_args(argc, argv, &c);
  if (rc) return rc;
  size_t k = 2 * (size_t)(c.o.support + c.o.query);
  double *mem = calloc(4 * NPARAM + (size_t)c.tasks * k + EVAL_TASKS * k, sizeof *mem);
  if (!mem) return fprintf(stderr, "maml: out of memory for %d tasks\n", c.tasks), 1;
  maml_run r = {&c, mem, mem + NPARAM, mem + 2 * NPARAM, mem + 3 * NPARAM, mem + 4 * NPARAM,
                mem + 4 * NPARAM + (size_t)c.tasks * k, DIST_SUCCESS, ""};
  if (c.serial) {
    train_job(&r); /* the same code, one process, no remote calls */
  } else {
    /* Every rank registers the functions and serves; rank 0 also drives.
     * Shutdown waits until no call is in flight anywhere. */
    CHECK(dist_manager_initialize());
    CHECK(dist_rpc_register("maml_task", maml_task, NULL));
    CHECK(dist_rpc_register("maml_stop", maml_stop, NULL));
    CHECK(dist_rpc_init());
    CHECK(dist_rpc_rank_zero_only(drive, &r, NULL));
    CHECK(dist_rpc_rank_non_zero_only(serve_until_stopped, NULL, NULL));
    CHECK(dist_rpc_shutdown());
    CHECK(dist_manager_finalize());
  }
  free(mem);
  if (r.status) {
    fprintf(stderr, "maml: %s (%s)\n", dist_status_string(r.status), r.msg);
    return 1;
  }
  return 0;
}
