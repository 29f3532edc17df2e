/* Distributed tests of the DataParallelOptimizer (dpo.h), at 1, 2, 3 and 4
 * ranks.
 *
 * Model: a 2-layer MLP, y = V tanh(U x + c) + d, loss = mean over rows of
 * 0.5 |y - t|^2, with its forward and backward written out here; the
 * backward hands each gradient over as soon as it is final (d, V, c, U).
 * Rows are a pure function of (iteration, world rank, row), so every rank
 * can rebuild the concatenated batch of all ranks: with equal rows per rank
 * the mean of the per-rank gradients is the full-batch gradient, and a
 * serial run with SGD / Adam written out below in double is the reference.
 *
 * The mode comparisons and the serial runs also run with the parameters in
 * cudaMalloc'd memory when every rank has a CUDA device (cuda_cases.h): the
 * pass reads each layer's weights back before computing with them and
 * writes each gradient there before handing it over. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cases.h" /* memory kinds, device copies; cunit_mpi.h */
#include "core/fault.h"      /* dist__fault_site: fail one copy or step on purpose */

static int W, R; /* world size and rank */

/* ---- checks ----------------------------------------------------------------- */

static void assert_at(int ok, int line, const char *what) {
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "", CU_FALSE);
}

#define CALL_OK(call) call_ok_((call), #call, __LINE__)
static int call_ok_(dist_status s, const char *what, int line) {
  if (s != DIST_SUCCESS)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s: %s)\n", R, W, line, what, (int)s, dist_status_string(s),
            dist_last_error());
  assert_at(s == DIST_SUCCESS, line, what);
  return s == DIST_SUCCESS;
}

/* `call` must fail with `code` and a message containing `text`. */
#define CALL_FAILS(call, code, text) call_fails_((call), (code), (text), #call, __LINE__)
static void call_fails_(dist_status s, dist_status code, const char *text, const char *what, int line) {
  int ok = s == code && (!text || strstr(dist_last_error(), text));
  if (!ok)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s), expected %d with '%s'\n", R, W, line, what, (int)s,
            s ? dist_last_error() : "success", (int)code, text ? text : "");
  assert_at(ok, line, what);
}

#define CHECK(cond) check_((cond), #cond, __LINE__)
static void check_(int ok, const char *what, int line) {
  if (!ok) fprintf(stderr, "[rank %d/%d] line %d: failed: %s\n", R, W, line, what);
  assert_at(ok, line, what);
}

/* ---- model ------------------------------------------------------------------ */

#define DIN 6
#define HID 10
#define DOUT 3
#define ROWS 3  /* per rank per iteration */
#define ITERS 5
#define MAXW 8  /* the serial reference holds at most MAXW * ROWS rows */

enum { U, C, V, D, NP }; /* registration (forward) order */
static const int64_t NUMEL[NP] = {HID * DIN, HID, DOUT * HID, DOUT};
static const char *const NAME[NP] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

static uint64_t hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}
/* In [-1, 1): a pure function of (a, b). */
static double unit2(uint64_t a, uint64_t b) {
  return (double)(hash64(hash64(a + 0x1234567ULL) ^ (b * 0x9e3779b97f4a7c15ULL)) >> 11) * 0x1p-52 - 1.0;
}

/* w, g: the model's f32 arrays on the host. With device memory (mem) the
 * parameter set holds copies of them (dw, dg) instead: w is read back before
 * the forward uses it and g written there before it is handed over. */
typedef struct net {
  float *w[NP], *g[NP];
  dist_memory mem;
  void *dw[NP], *dg[NP];
} net;

static net net_new(uint64_t seed) {
  net m = {.mem = DIST_MEM_HOST};
  for (int i = 0; i < NP; i++) {
    m.w[i] = malloc(sizeof(float) * (size_t)NUMEL[i]);
    m.g[i] = calloc((size_t)NUMEL[i], sizeof(float));
    double scale = (i == U || i == V) ? 0.6 : 0.2;
    for (int64_t k = 0; k < NUMEL[i]; k++) m.w[i][k] = (float)(scale * unit2(seed * 8 + (uint64_t)i, (uint64_t)k));
  }
  return m;
}

static void net_free(net *m) {
  for (int i = 0; i < NP; i++) {
    free(m->w[i]), free(m->g[i]);
    if (m->mem != DIST_MEM_HOST) mem_free(m->mem, m->dw[i]), mem_free(m->mem, m->dg[i]);
  }
}

static size_t bytes_of(int i) { return sizeof(float) * (size_t)NUMEL[i]; }

/* Device memory: w[i] := what distmgr left in the parameter (once its queued work is done). */
static void pull_weight(net *m, int i) {
  if (m->mem != DIST_MEM_HOST) mem_get(m->mem, m->w[i], m->dw[i], bytes_of(i));
}
static void pull_weights(net *m) {
  for (int i = 0; i < NP; i++) pull_weight(m, i);
}
/* Device memory: the gradient in g[i] becomes the one distmgr reads. */
static void push_grad(net *m, int i) {
  if (m->mem != DIST_MEM_HOST) mem_put(m->mem, m->dg[i], m->g[i], bytes_of(i));
}

/* Row j of `rank`'s micro-batch at iteration `it`. */
static void row(int it, int rank, int j, float x[DIN], float t[DOUT]) {
  uint64_t id = ((uint64_t)it * 64 + (uint64_t)rank) * 16 + (uint64_t)j;
  for (int k = 0; k < DIN; k++) x[k] = (float)unit2(1000 + id, (uint64_t)k);
  for (int o = 0; o < DOUT; o++) t[o] = (float)(0.8 * unit2(5000 + id, (uint64_t)o));
}

/* How a pass talks to the optimizer: d NULL = a plain local pass. */
typedef struct hook {
  dist_dpo *d;
  const int *layer_of; /* DPO layer of each parameter (NULL = one per parameter) */
  int defer;           /* 1: call before_forward (non-blocking loop) */
} hook;

static int layer(const hook *hk, int i) { return hk->layer_of ? hk->layer_of[i] : i; }
static void before(const hook *hk, net *m, int i) {
  if (hk && hk->d && hk->defer) CALL_OK(dist_dpo_before_forward(hk->d, layer(hk, i)));
  pull_weight(m, i);
}
static void ready(const hook *hk, net *m, int i) {
  push_grad(m, i);
  if (hk && hk->d) CALL_OK(dist_dpo_grad_ready(hk->d, i));
}

/* Forward + backward over the rows of ranks [r0, r1) at iteration `it`,
 * adding into m->g; returns the mean loss. Arithmetic in double, stored f32. */
static double pass(net *m, int it, int r0, int r1, const hook *hk) {
  int n = (r1 - r0) * ROWS;
  float x[MAXW * ROWS][DIN], t[MAXW * ROWS][DOUT];
  double h[MAXW * ROWS][HID], dy[MAXW * ROWS][DOUT], da[MAXW * ROWS][HID];
  for (int r = r0; r < r1; r++)
    for (int j = 0; j < ROWS; j++) row(it, r, j, x[(r - r0) * ROWS + j], t[(r - r0) * ROWS + j]);
  /* Layer 1 computes with U and c: their updates must have landed. */
  before(hk, m, U);
  before(hk, m, C);
  for (int s = 0; s < n; s++)
    for (int j = 0; j < HID; j++) {
      double a = m->w[C][j];
      for (int k = 0; k < DIN; k++) a += (double)m->w[U][j * DIN + k] * x[s][k];
      h[s][j] = tanh(a);
    }
  before(hk, m, V);
  before(hk, m, D);
  double loss = 0;
  for (int s = 0; s < n; s++)
    for (int o = 0; o < DOUT; o++) {
      double y = m->w[D][o];
      for (int j = 0; j < HID; j++) y += (double)m->w[V][o * HID + j] * h[s][j];
      double e = y - t[s][o];
      loss += 0.5 * e * e / n;
      dy[s][o] = e / n;
    }
  /* Backward, last layer first; each gradient is handed over once final. */
  for (int o = 0; o < DOUT; o++) {
    double acc = 0;
    for (int s = 0; s < n; s++) acc += dy[s][o];
    m->g[D][o] += (float)acc;
  }
  ready(hk, m, D);
  for (int o = 0; o < DOUT; o++)
    for (int j = 0; j < HID; j++) {
      double acc = 0;
      for (int s = 0; s < n; s++) acc += dy[s][o] * h[s][j];
      m->g[V][o * HID + j] += (float)acc;
    }
  ready(hk, m, V);
  for (int s = 0; s < n; s++)
    for (int j = 0; j < HID; j++) {
      double acc = 0;
      for (int o = 0; o < DOUT; o++) acc += (double)m->w[V][o * HID + j] * dy[s][o];
      da[s][j] = acc * (1 - h[s][j] * h[s][j]);
    }
  for (int j = 0; j < HID; j++) {
    double acc = 0;
    for (int s = 0; s < n; s++) acc += da[s][j];
    m->g[C][j] += (float)acc;
  }
  ready(hk, m, C);
  for (int j = 0; j < HID; j++)
    for (int k = 0; k < DIN; k++) {
      double acc = 0;
      for (int s = 0; s < n; s++) acc += da[s][j] * x[s][k];
      m->g[U][j * DIN + k] += (float)acc;
    }
  ready(hk, m, U);
  return loss;
}

static void zero_grads(net *m) {
  for (int i = 0; i < NP; i++) memset(m->g[i], 0, sizeof(float) * (size_t)NUMEL[i]);
}

/* dist_dpo_zero_grad, and the host arrays the pass adds into where they
 * are not the parameter set's. */
static void zero_grad(dist_dpo *d, net *m) {
  CALL_OK(dist_dpo_zero_grad(d));
  if (m->mem != DIST_MEM_HOST) zero_grads(m);
}

/* A parameter set over the world holding m's tensors in memory `mem`,
 * committed (rank 0's values win). A rank whose device buffers fail
 * registers fewer parameters, which commit reports on every rank. */
static dist_params *params_in(net *m, dist_memory mem) {
  dist_params *p = NULL;
  m->mem = mem;
  if (!CALL_OK(dist_params_create(NULL, &p))) return NULL;
  for (int i = 0; i < NP; i++) {
    void *w = m->w[i], *g = m->g[i];
    if (mem != DIST_MEM_HOST) {
      w = m->dw[i] = mem_new(mem, bytes_of(i));
      g = m->dg[i] = mem_new(mem, bytes_of(i));
      if (!w || !g || !mem_put(mem, w, m->w[i], bytes_of(i))) continue;
    }
    CALL_OK(dist_params_add(p, NAME[i], w, g, NUMEL[i], DIST_F32, mem, cuda_cases_dev, NULL));
  }
  CALL_OK(dist_params_commit(p));
  pull_weights(m);
  return p;
}

static dist_params *params_of(net *m) { return params_in(m, DIST_MEM_HOST); }

/* ---- reference optimizers (the formulas of optim.h, in double) --------------- */

typedef struct refopt {
  int adam;
  double lr, mu, b1, b2, eps;
  int t;
  double *m[NP], *v[NP];
} refopt;

static refopt ref_new(int adam, double lr) {
  refopt o = {adam, lr, 0.9, 0.9, 0.999, 1e-8, 0, {0}, {0}};
  for (int i = 0; i < NP; i++) {
    o.m[i] = calloc((size_t)NUMEL[i], sizeof(double));
    o.v[i] = calloc((size_t)NUMEL[i], sizeof(double));
  }
  return o;
}

static void ref_free(refopt *o) {
  for (int i = 0; i < NP; i++) free(o->m[i]), free(o->v[i]);
}

static void ref_step(refopt *o, net *m) {
  o->t++;
  for (int i = 0; i < NP; i++)
    for (int64_t k = 0; k < NUMEL[i]; k++) {
      double g = m->g[i][k], p = m->w[i][k];
      if (!o->adam) {
        o->m[i][k] = o->t == 1 ? g : o->mu * o->m[i][k] + g;
        p -= o->lr * o->m[i][k];
      } else {
        o->m[i][k] = o->b1 * o->m[i][k] + (1 - o->b1) * g;
        o->v[i][k] = o->b2 * o->v[i][k] + (1 - o->b2) * g * g;
        double mh = o->m[i][k] / (1 - pow(o->b1, o->t)), vh = o->v[i][k] / (1 - pow(o->b2, o->t));
        p -= o->lr * mh / (sqrt(vh) + o->eps);
      }
      m->w[i][k] = (float)p;
    }
}

/* The library optimizer matching ref_new(adam, lr). */
static dist_optim *optim_of(dist_params *p, int adam, double lr) {
  dist_optim *o = NULL;
  if (adam) {
    dist_adam_options a = DIST_ADAM_OPTIONS_INIT;
    a.lr = lr;
    a.beta1 = 0.9;
    a.beta2 = 0.999;
    a.eps = 1e-8;
    CALL_OK(dist_optim_adam(p, &a, &o));
  } else {
    dist_sgd_options s = DIST_SGD_OPTIONS_INIT;
    s.lr = lr;
    s.momentum = 0.9;
    CALL_OK(dist_optim_sgd(p, &s, &o));
  }
  return o;
}

/* ---- (a) non-blocking == blocking, bit for bit ---------------------------------- */

static int same_bits(const net *a, const net *b) {
  for (int i = 0; i < NP; i++)
    if (memcmp(a->w[i], b->w[i], sizeof(float) * (size_t)NUMEL[i]) != 0) return 0;
  return 1;
}

/* |got - want| <= rtol |want| + atol for every weight; reports the first miss. */
static void expect_near(const net *got, const net *want, double rtol, double atol, const char *what) {
  for (int i = 0; i < NP; i++)
    for (int64_t k = 0; k < NUMEL[i]; k++) {
      double g = got->w[i][k], w = want->w[i][k];
      if (fabs(g - w) <= rtol * fabs(w) + atol) continue;
      fprintf(stderr, "[rank %d/%d] %s: %s[%lld] = %.9g, expected %.9g\n", R, W, what, NAME[i], (long long)k, g, w);
      CHECK(0);
      return;
    }
}

/* Two copies of the model in this process, one per mode, trained side by
 * side in memory `mem`; `layer_of` NULL keeps one layer per parameter. The
 * host run leaves its final weights in *host, and a device run must end
 * near them: within twice the bound vs_serial allows between these f32
 * runs and a double one (sums in another order, and the device kernels'
 * fused multiply-adds, move a few ulps per step). */
static void blocking_vs_nonblocking(int adam, const int *layer_of, int nlayers, dist_memory mem, net *host) {
  net a = net_new(11 + (uint64_t)R), b = net_new(11 + (uint64_t)R); /* commit makes rank 0's win */
  dist_params *pa = params_in(&a, mem), *pb = params_in(&b, mem);
  dist_optim *oa = optim_of(pa, adam, adam ? 0.01 : 0.05), *ob = optim_of(pb, adam, adam ? 0.01 : 0.05);
  dist_dpo *da = NULL, *db = NULL;
  CALL_OK(dist_dpo_create(oa, 1, &da));
  CALL_OK(dist_dpo_create(ob, 0, &db));
  if (!da || !db) goto out;
  CHECK(dist_dpo_blocking(da) == 1 && dist_dpo_blocking(db) == 0);
  if (layer_of) CALL_OK(dist_dpo_set_layers(db, layer_of, nlayers));
  else nlayers = NP;
  CHECK(same_bits(&a, &b));
  hook ha = {da, NULL, 0}, hb = {db, layer_of, 1};
  for (int it = 0; it < ITERS; it++) {
    zero_grad(da, &a);
    double la = pass(&a, it, R, R + 1, &ha);
    CALL_OK(dist_dpo_step(da));
    CHECK(dist_dpo_pending(da) == 0);

    /* Non-blocking: zero_grad before the forward, while updates are due. */
    zero_grad(db, &b);
    double lb = pass(&b, it, R, R + 1, &hb);
    /* The forward saw exactly the parameters blocking mode computed with. */
    CHECK(la == lb);
    /* Handed-over gradients are copies: scribbling on the buffers changes nothing. */
    for (int i = 0; i < NP; i++) {
      for (int64_t k = 0; k < NUMEL[i]; k++) b.g[i][k] = 1e30f;
      push_grad(&b, i);
    }
    CALL_OK(dist_dpo_step(db));
    CHECK(dist_dpo_pending(db) == nlayers);
  }
  CALL_OK(dist_dpo_flush(db));
  CHECK(dist_dpo_pending(db) == 0);
  pull_weights(&a), pull_weights(&b);
  CHECK(same_bits(&a, &b));
  if (mem == DIST_MEM_HOST)
    for (int i = 0; i < NP; i++) memcpy(host->w[i], a.w[i], bytes_of(i));
  else
    expect_near(&a, host, 4e-5, 4e-6, "device memory against the host run");
out:
  dist_dpo_destroy(da);
  dist_dpo_destroy(db);
  dist_optim_destroy(oa);
  dist_optim_destroy(ob);
  dist_params_destroy(pa);
  dist_params_destroy(pb);
  net_free(&a);
  net_free(&b);
}

static const int GROUPED[NP] = {0, 0, 1, 1}; /* weight + bias per layer */

/* In host memory, then in device memory (compared with the host run). */
static void modes(int adam, const int *layer_of, int nlayers) {
  net host = net_new(0);
  for (int m = 0; m < memory_kinds(); m++) blocking_vs_nonblocking(adam, layer_of, nlayers, MEMORY[m], &host);
  net_free(&host);
}

static void test_bits_sgd(void) { modes(0, NULL, 0); }
static void test_bits_adam(void) { modes(1, NULL, 0); }
static void test_bits_sgd_grouped(void) { modes(0, GROUPED, 2); }
static void test_bits_adam_grouped(void) { modes(1, GROUPED, 2); }

/* ---- (b) blocking == serial run on the concatenated batch ---------------------- */

static void serial_run(int adam, int blocking, dist_memory mem) {
  if (W > MAXW) return;
  net m = net_new(21 + (uint64_t)R), ref = net_new(21); /* rank 0's seed: what commit broadcasts */
  dist_params *p = params_in(&m, mem);
  dist_optim *o = optim_of(p, adam, adam ? 0.01 : 0.05);
  refopt ro = ref_new(adam, adam ? 0.01 : 0.05);
  dist_dpo *d = NULL;
  CALL_OK(dist_dpo_create(o, blocking, &d));
  hook hk = {d, NULL, !blocking};
  for (int it = 0; d && it < ITERS; it++) {
    zero_grad(d, &m);
    pass(&m, it, R, R + 1, &hk);
    CALL_OK(dist_dpo_step(d));
    zero_grads(&ref);
    pass(&ref, it, 0, W, NULL); /* every rank's rows at once */
    ref_step(&ro, &ref);
  }
  CALL_OK(dist_dpo_flush(d));
  pull_weights(&m);
  /* f32 model arithmetic against a double reference: a few ulps per step. */
  char what[96];
  snprintf(what, sizeof what, "%s, %s, %s memory, against the serial run", adam ? "adam" : "sgd",
           blocking ? "blocking" : "non-blocking", memory_name(mem));
  expect_near(&m, &ref, 2e-5, 2e-6, what);
  dist_dpo_destroy(d);
  dist_optim_destroy(o);
  dist_params_destroy(p);
  ref_free(&ro);
  net_free(&m);
  net_free(&ref);
}

static void vs_serial(int adam, int blocking) {
  for (int m = 0; m < memory_kinds(); m++) serial_run(adam, blocking, MEMORY[m]);
}

static void test_serial_sgd(void) { vs_serial(0, 1); }
static void test_serial_adam(void) { vs_serial(1, 1); }
static void test_serial_nonblocking(void) { vs_serial(0, 0); }

/* ---- (c) errors and bookkeeping -------------------------------------------------- */

typedef struct fixture {
  net m;
  dist_params *p;
  dist_optim *o;
  dist_dpo *d;
} fixture;

static fixture fix_new(int blocking) {
  fixture f = {net_new(31), NULL, NULL, NULL};
  f.p = params_of(&f.m);
  f.o = optim_of(f.p, 0, 0.05);
  CALL_OK(dist_dpo_create(f.o, blocking, &f.d));
  return f;
}

static void fix_free(fixture *f) {
  dist_dpo_destroy(f->d);
  dist_optim_destroy(f->o);
  dist_params_destroy(f->p);
  net_free(&f->m);
}

static void test_create_errors(void) {
  fixture f = fix_new(1);
  dist_dpo *d = (dist_dpo *)&f; /* must stay untouched on failure */
  CALL_FAILS(dist_dpo_create(NULL, 1, &d), DIST_ERR_INVALID_ARGUMENT, "optimizer");
  CALL_FAILS(dist_dpo_create(f.o, 1, NULL), DIST_ERR_INVALID_ARGUMENT, "out");
  /* NULL out on rank 0 only: every rank fails (none waits in the agreement). */
  if (W > 1) CALL_FAILS(dist_dpo_create(f.o, 1, R == 0 ? NULL : &d), DIST_ERR_INVALID_ARGUMENT, R == 0 ? "out is NULL" : "rank 0");
  CHECK(d == (dist_dpo *)&f);
  CALL_FAILS(dist_dpo_create(f.o, 2, &d), DIST_ERR_INVALID_ARGUMENT, "blocking = 2");
  CHECK(d == (dist_dpo *)&f);
  if (W > 1) { /* one rank differs: every rank fails, nobody hangs */
    CALL_FAILS(dist_dpo_create(f.o, R == 0, &d), DIST_ERR_MISMATCH, "blocking");
    CHECK(d == (dist_dpo *)&f);
  }
  /* An uncommitted set. */
  dist_params *raw = NULL;
  dist_optim *ro = NULL;
  CALL_OK(dist_params_create(NULL, &raw));
  CALL_OK(dist_params_add_host(raw, "w", f.m.w[U], f.m.g[U], NUMEL[U], NULL));
  dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
  CALL_OK(dist_optim_sgd(raw, &so, &ro));
  CALL_FAILS(dist_dpo_create(ro, 1, &d), DIST_ERR_INVALID_ARGUMENT, "not committed");
  dist_optim_destroy(ro);
  dist_params_destroy(raw);
  /* NULL objects everywhere else. */
  CALL_FAILS(dist_dpo_grad_ready(NULL, 0), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_dpo_step(NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_dpo_before_forward(NULL, 0), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_dpo_flush(NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_dpo_zero_grad(NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_dpo_set_layers(NULL, GROUPED, 2), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_dpo_set_layers(f.d, NULL, 2), DIST_ERR_INVALID_ARGUMENT, "layer_of");
  CHECK(dist_dpo_pending(NULL) == -1);
  CHECK(dist_dpo_blocking(NULL) == -1);
  dist_dpo_destroy(NULL);
  /* Index and layer ranges. */
  CALL_FAILS(dist_dpo_grad_ready(f.d, -1), DIST_ERR_INVALID_ARGUMENT, "index -1");
  CALL_FAILS(dist_dpo_grad_ready(f.d, NP), DIST_ERR_INVALID_ARGUMENT, "index 4");
  CALL_FAILS(dist_dpo_before_forward(f.d, NP), DIST_ERR_INVALID_ARGUMENT, "layer 4");
  fix_free(&f);
}

static void test_step_errors(void) {
  for (int blocking = 0; blocking < 2; blocking++) {
    fixture f = fix_new(blocking);
    if (!f.d) {
      fix_free(&f);
      continue;
    }
    /* Step before any gradient: names the first parameter. */
    CALL_FAILS(dist_dpo_step(f.d), DIST_ERR_INVALID_ARGUMENT, "'fc1.weight'");
    CALL_OK(dist_dpo_grad_ready(f.d, D));
    CALL_OK(dist_dpo_grad_ready(f.d, V));
    CALL_OK(dist_dpo_grad_ready(f.d, U));
    /* fc1.bias is missing. */
    CALL_FAILS(dist_dpo_step(f.d), DIST_ERR_INVALID_ARGUMENT, "'fc1.bias'");
    /* Handed twice before a step. */
    CALL_FAILS(dist_dpo_grad_ready(f.d, V), DIST_ERR_INVALID_ARGUMENT, "'fc2.weight' handed twice");
    CALL_OK(dist_dpo_grad_ready(f.d, C));
    CALL_OK(dist_dpo_step(f.d));
    CHECK(dist_dpo_pending(f.d) == (blocking ? 0 : NP));
    if (!blocking) {
      /* The next backward before the layer's forward: its update was still
       * due. An error naming the call that was skipped, but the update is
       * applied and the gradient handed (its sum posted, as on every rank). */
      CALL_FAILS(dist_dpo_grad_ready(f.d, V), DIST_ERR_INVALID_ARGUMENT, "dist_dpo_before_forward");
      CHECK(dist_dpo_pending(f.d) == NP - 1);
      CALL_OK(dist_dpo_before_forward(f.d, V)); /* nothing left to do */
      CALL_FAILS(dist_dpo_grad_ready(f.d, V), DIST_ERR_INVALID_ARGUMENT, "handed twice");
      CALL_OK(dist_dpo_flush(f.d));
      CALL_OK(dist_dpo_grad_ready(f.d, U));
      CALL_OK(dist_dpo_grad_ready(f.d, C));
      CALL_OK(dist_dpo_grad_ready(f.d, D));
    } else {
      for (int i = 0; i < NP; i++) CALL_OK(dist_dpo_grad_ready(f.d, i)); /* nothing is ever due */
    }
    CALL_OK(dist_dpo_step(f.d));
    CALL_OK(dist_dpo_flush(f.d));
    fix_free(&f);
  }
}

static void test_layer_maps(void) {
  fixture f = fix_new(0);
  if (!f.d) {
    fix_free(&f);
    return;
  }
  const int out_of_range[NP] = {0, 0, 2, 1}, negative[NP] = {0, -1, 1, 1}, gap[NP] = {0, 0, 2, 2};
  CALL_FAILS(dist_dpo_set_layers(f.d, out_of_range, 2), DIST_ERR_INVALID_ARGUMENT, "layer_of[2] = 2");
  CALL_FAILS(dist_dpo_set_layers(f.d, negative, 2), DIST_ERR_INVALID_ARGUMENT, "layer_of[1] = -1");
  CALL_FAILS(dist_dpo_set_layers(f.d, gap, 3), DIST_ERR_INVALID_ARGUMENT, "layer 1 has no parameters");
  CALL_FAILS(dist_dpo_set_layers(f.d, GROUPED, 0), DIST_ERR_INVALID_ARGUMENT, "nlayers = 0");
  CALL_FAILS(dist_dpo_set_layers(f.d, GROUPED, NP + 1), DIST_ERR_INVALID_ARGUMENT, "nlayers = 5");
  /* The failed calls kept one layer per parameter. */
  for (int i = 0; i < NP; i++) CALL_OK(dist_dpo_grad_ready(f.d, i));
  CALL_OK(dist_dpo_step(f.d));
  CHECK(dist_dpo_pending(f.d) == NP);
  /* Not while updates are due. */
  CALL_FAILS(dist_dpo_set_layers(f.d, GROUPED, 2), DIST_ERR_INVALID_ARGUMENT, "flush first");
  CALL_OK(dist_dpo_flush(f.d));
  CALL_OK(dist_dpo_set_layers(f.d, GROUPED, 2));
  CALL_FAILS(dist_dpo_before_forward(f.d, 2), DIST_ERR_INVALID_ARGUMENT, "layer 2");
  for (int i = 0; i < NP; i++) CALL_OK(dist_dpo_grad_ready(f.d, i));
  CALL_OK(dist_dpo_step(f.d));
  CHECK(dist_dpo_pending(f.d) == 2);
  fix_free(&f); /* destroy flushes */
}

/* Pending counts: nlayers after a non-blocking step, one less per layer
 * finished, unchanged by a second before_forward or an empty flush. */
static void test_pending(void) {
  fixture f = fix_new(0);
  if (!f.d) {
    fix_free(&f);
    return;
  }
  CHECK(dist_dpo_pending(f.d) == 0);
  CALL_OK(dist_dpo_before_forward(f.d, 0)); /* nothing due: a no-op */
  CHECK(dist_dpo_pending(f.d) == 0);
  for (int i = NP - 1; i >= 0; i--) CALL_OK(dist_dpo_grad_ready(f.d, i));
  CHECK(dist_dpo_pending(f.d) == 0); /* handed, not yet stepped */
  CALL_OK(dist_dpo_step(f.d));
  CHECK(dist_dpo_pending(f.d) == 4);
  CALL_OK(dist_dpo_before_forward(f.d, 2));
  CHECK(dist_dpo_pending(f.d) == 3);
  CALL_OK(dist_dpo_before_forward(f.d, 2));
  CHECK(dist_dpo_pending(f.d) == 3);
  CALL_OK(dist_dpo_before_forward(f.d, 0));
  CHECK(dist_dpo_pending(f.d) == 2);
  CALL_OK(dist_dpo_flush(f.d));
  CHECK(dist_dpo_pending(f.d) == 0);
  CALL_OK(dist_dpo_flush(f.d));
  CHECK(dist_dpo_pending(f.d) == 0);
  fix_free(&f);
}

/* Destroying a non-blocking optimizer with updates due applies them: the
 * parameters equal the blocking copy's after the same step. */
static void test_destroy_flushes(void) {
  net a = net_new(41), b = net_new(41);
  dist_params *pa = params_of(&a), *pb = params_of(&b);
  dist_optim *oa = optim_of(pa, 1, 0.01), *ob = optim_of(pb, 1, 0.01);
  dist_dpo *da = NULL, *db = NULL;
  CALL_OK(dist_dpo_create(oa, 1, &da));
  CALL_OK(dist_dpo_create(ob, 0, &db));
  if (da && db) {
    hook ha = {da, NULL, 0}, hb = {db, NULL, 1};
    pass(&a, 0, R, R + 1, &ha);
    CALL_OK(dist_dpo_step(da));
    pass(&b, 0, R, R + 1, &hb);
    CALL_OK(dist_dpo_step(db));
    CHECK(dist_dpo_pending(db) == NP);
    CHECK(!same_bits(&a, &b)); /* the update is really still due */
    dist_dpo_destroy(db);
    db = NULL;
    CHECK(same_bits(&a, &b));
  }
  dist_dpo_destroy(da);
  dist_dpo_destroy(db);
  dist_optim_destroy(oa);
  dist_optim_destroy(ob);
  dist_params_destroy(pa);
  dist_params_destroy(pb);
  net_free(&a);
  net_free(&b);
}

/* One rank cannot copy a gradient (fc2.weight, injected as a failed device
 * copy would be). Its sum is still posted (zeros from that rank), so nobody
 * waits; with DIST_VERIFY=1 (the default) step fails on every rank and no
 * rank updates from the wrong averages: the parameters stay as they were,
 * bit for bit. The next iteration is normal and every rank agrees. */
static void copy_fault(int blocking) {
  fixture f = fix_new(blocking);
  if (!f.d) {
    fix_free(&f);
    return;
  }
  hook hk = {f.d, NULL, !blocking};
  CALL_OK(dist_dpo_zero_grad(f.d));
  pass(&f.m, 0, R, R + 1, &hk);
  CALL_OK(dist_dpo_step(f.d));
  CALL_OK(dist_dpo_flush(f.d));
  net before = net_new(0);
  for (int i = 0; i < NP; i++) memcpy(before.w[i], f.m.w[i], sizeof(float) * (size_t)NUMEL[i]);

  CALL_OK(dist_dpo_zero_grad(f.d));
  pass(&f.m, 1, R, R + 1, NULL);
  const int order[NP] = {D, V, C, U};
  for (int k = 0; k < NP; k++) {
    if (order[k] == V && R == W - 1) dist__fault_site = "dpo_copy";
    dist_status s = dist_dpo_grad_ready(f.d, order[k]);
    if (order[k] == V && R == W - 1) CALL_FAILS(s, DIST_ERR_INTERNAL, "'fc2.weight': injected fault (dpo_copy)");
    else CALL_OK(s);
  }
  CHECK(dist__fault_site == NULL);
  const char *v = getenv("DIST_VERIFY");
  if (v && !strcmp(v, "0")) { /* documented: only the rank that failed knows */
    if (R == W - 1) CALL_FAILS(dist_dpo_step(f.d), DIST_ERR_INTERNAL, "could not be handed");
    else CALL_OK(dist_dpo_step(f.d));
    CALL_OK(dist_dpo_flush(f.d));
    net_free(&before);
    fix_free(&f);
    return;
  }
  CALL_FAILS(dist_dpo_step(f.d), DIST_ERR_INTERNAL, R == W - 1 ? "could not be handed" : "failed on rank");
  CHECK(dist_dpo_pending(f.d) == 0);
  CALL_OK(dist_dpo_flush(f.d));
  CHECK(same_bits(&f.m, &before));

  CALL_OK(dist_dpo_zero_grad(f.d));
  pass(&f.m, 2, R, R + 1, &hk);
  CALL_OK(dist_dpo_step(f.d));
  CALL_OK(dist_dpo_flush(f.d));
  double dv = -1;
  CALL_OK(dist_params_max_divergence(f.p, &dv));
  CHECK(dv == 0 && !same_bits(&f.m, &before));
  net_free(&before);
  fix_free(&f);
}

static void test_copy_fault_blocking(void) { copy_fault(1); }
static void test_copy_fault_nonblocking(void) { copy_fault(0); }

/* before_forward fails partway through a layer (fc1.weight stepped, then
 * fc1.bias's step fails, injected) and is called again: every parameter is
 * updated exactly once, so the run still equals blocking mode bit for bit. */
static void test_retry_before_forward(void) {
  net a = net_new(41), b = net_new(41);
  dist_params *pa = params_of(&a), *pb = params_of(&b);
  dist_optim *oa = optim_of(pa, 0, 0.05), *ob = optim_of(pb, 0, 0.05);
  dist_dpo *da = NULL, *db = NULL;
  CALL_OK(dist_dpo_create(oa, 0, &da));
  CALL_OK(dist_dpo_create(ob, 1, &db));
  if (da && db) {
    CALL_OK(dist_dpo_set_layers(da, GROUPED, 2));
    hook ha = {da, GROUPED, 1}, hb = {db, NULL, 0};
    for (int it = 0; it < 3; it++) {
      if (it == 2) {
        dist__fault_site = "dpo_step";
        dist__fault_skip = 1; /* fc1.weight steps, fc1.bias fails */
        CALL_FAILS(dist_dpo_before_forward(da, 0), DIST_ERR_INTERNAL, "injected fault (dpo_step)");
        CHECK(dist__fault_site == NULL && dist_dpo_pending(da) == 2);
        CALL_OK(dist_dpo_before_forward(da, 0));
        CHECK(dist_dpo_pending(da) == 1);
      }
      CALL_OK(dist_dpo_zero_grad(da));
      pass(&a, it, R, R + 1, &ha);
      CALL_OK(dist_dpo_step(da));
      CALL_OK(dist_dpo_zero_grad(db));
      pass(&b, it, R, R + 1, &hb);
      CALL_OK(dist_dpo_step(db));
    }
    CALL_OK(dist_dpo_flush(da));
    CHECK(same_bits(&a, &b));
  }
  dist_dpo_destroy(da);
  dist_dpo_destroy(db);
  dist_optim_destroy(oa);
  dist_optim_destroy(ob);
  dist_params_destroy(pa);
  dist_params_destroy(pb);
  net_free(&a);
  net_free(&b);
}

/* One rank's before_forward fails (fc1.weight's step, injected) and the
 * loop goes on without retrying it: that rank's next grad_ready for the
 * layer applies the update then (an error naming before_forward) and still
 * posts its sum, so the other ranks do not wait, and every rank ends with
 * the same parameters (the same averages were applied everywhere). */
static void test_skipped_before_forward(void) {
  fixture f = fix_new(0);
  if (!f.d) {
    fix_free(&f);
    return;
  }
  hook hk = {f.d, NULL, 1};
  CALL_OK(dist_dpo_zero_grad(f.d));
  pass(&f.m, 0, R, R + 1, &hk);
  CALL_OK(dist_dpo_step(f.d));
  int odd = R == W - 1;
  if (odd) {
    dist__fault_site = "dpo_step";
    CALL_FAILS(dist_dpo_before_forward(f.d, U), DIST_ERR_INTERNAL, "injected fault (dpo_step)");
    for (int l = C; l < NP; l++) CALL_OK(dist_dpo_before_forward(f.d, l));
    CHECK(dist_dpo_pending(f.d) == 1);
  } else {
    CALL_OK(dist_dpo_flush(f.d));
  }
  CALL_OK(dist_dpo_zero_grad(f.d));
  pass(&f.m, 1, R, R + 1, NULL);
  const int order[NP] = {D, V, C, U};
  for (int k = 0; k < NP; k++) {
    dist_status s = dist_dpo_grad_ready(f.d, order[k]);
    if (odd && order[k] == U) CALL_FAILS(s, DIST_ERR_INVALID_ARGUMENT, "applied now");
    else CALL_OK(s);
  }
  CALL_OK(dist_dpo_step(f.d));
  CALL_OK(dist_dpo_flush(f.d));
  double dv = -1;
  CALL_OK(dist_params_max_divergence(f.p, &dv));
  CHECK(dv == 0);
  fix_free(&f);
}

static CU_TestInfo bits_tests[] = {
    {"sgd momentum, one layer per parameter", test_bits_sgd},
    {"adam, one layer per parameter", test_bits_adam},
    {"sgd momentum, weight+bias layers", test_bits_sgd_grouped},
    {"adam, weight+bias layers", test_bits_adam_grouped},
    CU_TEST_INFO_NULL};
static CU_TestInfo serial_tests[] = {
    {"blocking sgd == serial concatenated batch", test_serial_sgd},
    {"blocking adam == serial concatenated batch", test_serial_adam},
    {"non-blocking sgd == serial concatenated batch", test_serial_nonblocking},
    CU_TEST_INFO_NULL};
static CU_TestInfo error_tests[] = {
    {"create and NULL arguments", test_create_errors},
    {"step / grad_ready order", test_step_errors},
    {"layer maps", test_layer_maps},
    {"pending count", test_pending},
    {"destroy flushes", test_destroy_flushes},
    {"failed copy on one rank, blocking", test_copy_fault_blocking},
    {"failed copy on one rank, non-blocking", test_copy_fault_nonblocking},
    {"before_forward retried after a partial failure", test_retry_before_forward},
    {"before_forward failed on one rank, not retried", test_skipped_before_forward},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"non-blocking == blocking", NULL, NULL, NULL, NULL, bits_tests},
                                {"against a serial run", NULL, NULL, NULL, NULL, serial_tests},
                                {"errors and bookkeeping", NULL, NULL, NULL, NULL, error_tests},
                                CU_SUITE_INFO_NULL};

int main(void) {
  return cunit_mpi_run(&(cunit_mpi_test){"test_dpo", suites, .rank = &R, .size = &W, .setup = cuda_cases_setup});
}
