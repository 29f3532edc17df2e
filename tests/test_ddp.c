/* Distributed tests of parameter sets (params.h) and the DDP gradient
 * reducer (ddp.h), at 1, 2, 3 and 4 ranks.
 *
 * The model is a 2-layer MLP, y = W2 tanh(W1 x + b1) + b2 with an MSE loss,
 * whose hand-written backward marks each parameter ready as soon as its
 * gradient is final (b2, W2, then b1, W1). Every rank can rebuild any rank's
 * micro-batch from (seed, global row), so the reference is the same MLP code
 * run in-process on the concatenated batch: with the same rows per rank, the
 * average of the per-rank mean-loss gradients is the full-batch mean-loss
 * gradient. Optimizer runs compare with the same optimizer stepping a private
 * replica on the full-batch gradients.
 *
 * Gradient cases also check against the exact mean of every rank's gradient
 * (each rank recomputes all of them, in double) within a bound derived from
 * the roundings of the sum (see checkpoint). Several run in host memory and
 * then, when every rank has a CUDA device (cuda_cases.h), with the
 * gradients in cudaMalloc'd memory, where they must also match the host
 * run. bf16 gradients are reduced in host memory and refused, with a clear
 * error, in device memory. */
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
#include "core/fault.h"      /* dist__fault_site: fail one copy on purpose */
#include "bf16_ref.h"        /* to_bf16, from_bf16: the test's own */

static int W, R; /* world size and rank */

/* ---- model ------------------------------------------------------------------ */

#define DIN 16
#define HID 20
#define DOUT 6
#define ROWS 4 /* rows per rank per micro-batch */
#define STEPS 5
/* Small caps: b2 alone (W2 would overflow 256 B), then W2 + b1 (560 B), then
 * W1 (1280 B) alone, over the 1024 B cap. */
#define FIRST_CAP 256
#define CAP 1024
#define INIT_SEED 77

enum { W1, B1, W2, B2, NP }; /* registration (forward) order */
static const int64_t NUMEL[NP] = {HID * DIN, HID, DOUT * HID, DOUT};
static const char *const NAME[NP] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
static const double INIT_SCALE[NP] = {0.5, 0.1, 0.5, 0.1};
static int64_t total_numel(void) { return NUMEL[W1] + NUMEL[B1] + NUMEL[W2] + NUMEL[B2]; }

static uint64_t mix(uint64_t x) { /* splitmix64 finalizer */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
/* Uniform in [-1, 1), a pure function of (seed, k). */
static float sym(uint64_t seed, uint64_t k) { return (float)(2.0 * (double)(mix(mix(seed) ^ k) >> 11) * 0x1p-53 - 1.0); }

typedef struct mlp {
  float *w[NP], *g[NP];
} mlp;

static mlp mlp_new(uint64_t seed) {
  mlp m;
  for (int i = 0; i < NP; i++) {
    m.w[i] = malloc(sizeof(float) * (size_t)NUMEL[i]);
    m.g[i] = calloc((size_t)NUMEL[i], sizeof(float));
    for (int64_t k = 0; k < NUMEL[i]; k++) m.w[i][k] = (float)(INIT_SCALE[i] * sym(seed * 16 + (uint64_t)i, (uint64_t)k));
  }
  return m;
}

static void mlp_free(mlp *m) {
  for (int i = 0; i < NP; i++) free(m->w[i]), free(m->g[i]);
}

static void zero(float *const g[NP]) {
  for (int i = 0; i < NP; i++) memset(g[i], 0, sizeof(float) * (size_t)NUMEL[i]);
}

typedef struct rig rig; /* a replica registered with a reducer (below) */

/* How the backward reports ready gradients. */
typedef struct marker {
  const rig *r;     /* NULL: no reducer (the reference) */
  const int *order; /* NULL: mark each as soon as final; else all at the end in this order */
  int skip;         /* a parameter left unmarked, -1 none */
} marker;
#define MARK(r) {(r), NULL, -1}

static void assert_at(int ok, int line, const char *what) {
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "", CU_FALSE);
}

#define CALL_OK(call, what) call_ok_((call), (what), __LINE__)
static int call_ok_(dist_status s, const char *what, int line) {
  if (s != DIST_SUCCESS)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s: %s)\n", R, W, line, what, (int)s, dist_status_string(s),
            dist_last_error());
  assert_at(s == DIST_SUCCESS, line, what);
  return s == DIST_SUCCESS;
}

/* Expect `code` and a message containing `text`. */
#define CALL_FAILS(call, code, text, what) call_fails_((call), (code), (text), (what), __LINE__)
static void call_fails_(dist_status s, dist_status code, const char *text, const char *what, int line) {
  int ok = s == code && (!text || strstr(dist_last_error(), text));
  if (!ok)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s), expected %d with '%s'\n", R, W, line, what, (int)s,
            s ? dist_last_error() : "success", (int)code, text ? text : "");
  assert_at(ok, line, what);
}

static void mark(marker *mk, int i); /* with the rigs */

/* Rows [row0, row0 + rows) of batch `seed`. */
static void batch(uint64_t seed, int64_t row0, int rows, float *x, float *t) {
  for (int r = 0; r < rows; r++) {
    for (int j = 0; j < DIN; j++) x[r * DIN + j] = sym(2 * seed, (uint64_t)((row0 + r) * DIN + j));
    for (int o = 0; o < DOUT; o++) t[r * DOUT + o] = sym(2 * seed + 1, (uint64_t)((row0 + r) * DOUT + o));
  }
}

/* Forward and backward of scale * mean((y - t)^2) over the rows, ADDING the
 * gradients into g (accumulation is the caller's choice) and marking each
 * parameter as its gradient becomes final. f32 throughout, like a model. */
static void mlp_backward(float *const w[NP], float *const g[NP], uint64_t seed, int64_t row0, int rows, double scale,
                         marker *mk) {
  float *x = malloc(sizeof(float) * (size_t)rows * DIN), *t = malloc(sizeof(float) * (size_t)rows * DOUT);
  float *h = malloc(sizeof(float) * (size_t)rows * HID), *dy = malloc(sizeof(float) * (size_t)rows * DOUT);
  float *da = malloc(sizeof(float) * (size_t)rows * HID);
  batch(seed, row0, rows, x, t);
  const float c = (float)(2.0 * scale / ((double)rows * DOUT));
  for (int r = 0; r < rows; r++) {
    for (int j = 0; j < HID; j++) {
      float a = w[B1][j];
      for (int k = 0; k < DIN; k++) a += w[W1][j * DIN + k] * x[r * DIN + k];
      h[r * HID + j] = tanhf(a);
    }
    for (int o = 0; o < DOUT; o++) {
      float y = w[B2][o];
      for (int j = 0; j < HID; j++) y += w[W2][o * HID + j] * h[r * HID + j];
      dy[r * DOUT + o] = c * (y - t[r * DOUT + o]);
    }
  }
  int lazy = mk && mk->order;
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < DOUT; o++) g[B2][o] += dy[r * DOUT + o];
  if (!lazy) mark(mk, B2);
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < DOUT; o++)
      for (int j = 0; j < HID; j++) g[W2][o * HID + j] += dy[r * DOUT + o] * h[r * HID + j];
  if (!lazy) mark(mk, W2);
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < HID; j++) {
      float s = 0;
      for (int o = 0; o < DOUT; o++) s += w[W2][o * HID + j] * dy[r * DOUT + o];
      da[r * HID + j] = s * (1 - h[r * HID + j] * h[r * HID + j]);
    }
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < HID; j++) g[B1][j] += da[r * HID + j];
  if (!lazy) mark(mk, B1);
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < HID; j++)
      for (int k = 0; k < DIN; k++) g[W1][j * DIN + k] += da[r * HID + j] * x[r * DIN + k];
  if (!lazy) mark(mk, W1);
  for (int i = 0; lazy && i < NP; i++) mark(mk, mk->order[i]);
  free(x), free(t), free(h), free(dy), free(da);
}

/* ---- comparisons ------------------------------------------------------------ */

static double max_abs(const float *v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
  return m;
}

/* |got - want| <= rtol |want| + atol elementwise; reports the first miss. */
#define EXPECT_CLOSE(got, want, n, rtol, atol, what) expect_close_(got, want, n, rtol, atol, what, __LINE__)
static void expect_close_(const float *got, const float *want, int64_t n, double rtol, double atol, const char *what,
                          int line) {
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (!(fabs((double)got[i] - want[i]) <= rtol * fabs(want[i]) + atol)) bad = i;
  if (bad >= 0)
    fprintf(stderr, "[rank %d/%d] line %d: %s: element %lld of %lld is %.9g, expected %.9g\n", R, W, line, what,
            (long long)bad, (long long)n, got[bad], want[bad]);
  assert_at(bad < 0, line, what);
}

/* Gradients: f32 sums in a different order, so relative 1e-5, with an
 * absolute floor of 1e-6 of the tensor's largest entry for entries that
 * cancel. */
#define EXPECT_GRADS(got, want, what) expect_grads_(got, want, what, __LINE__)
static void expect_grads_(float *const got[NP], float *const want[NP], const char *what, int line) {
  for (int i = 0; i < NP; i++) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: gradient of %s", what, NAME[i]);
    expect_close_(got[i], want[i], NUMEL[i], 1e-5, 1e-6 * max_abs(want[i], NUMEL[i]) + 1e-12, msg, line);
  }
}

#define EXPECT_SAME(got, want, what) expect_same_(got, want, what, __LINE__)
static void expect_same_(float *const got[NP], float *const want[NP], const char *what, int line) {
  for (int i = 0; i < NP; i++) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s bit for bit", what, NAME[i]);
    int same = memcmp(got[i], want[i], sizeof(float) * (size_t)NUMEL[i]) == 0;
    if (!same) fprintf(stderr, "[rank %d/%d] line %d: %s differs\n", R, W, line, msg);
    assert_at(same, line, msg);
  }
}

/* ---- rigs: a replica registered with a reducer -------------------------------- */

/* Where a rig's parameters are registered, and their dtype (f32 or bf16). */
typedef struct buffers {
  dist_memory mem;
  dist_dtype dt;
} buffers;
static const buffers PLAIN = {DIST_MEM_HOST, DIST_F32};

/* PLAIN rigs register the model's own arrays (m.w, m.g: the user's
 * buffers). Others register buffers of their own (data, grad): the backward
 * still runs on m, in f32 on the host, and each gradient is written to the
 * registered one, in its dtype, just before it is marked (publish); the
 * weights are read back after commit. */
struct rig {
  mlp m;
  dist_params *p;
  dist_ddp *d;
  buffers b;
  dist_dtype wire; /* what the reducer sums: b.dt, or the 16-bit type of compression */
  void *data[NP], *grad[NP];
};

static const rig NO_RIG; /* what rig_close accepts when rig_open never ran */

static int plain(const rig *r) { return r->b.mem == DIST_MEM_HOST && r->b.dt == DIST_F32; }
static size_t elem_size(dist_dtype dt) { return dt == DIST_F32 ? sizeof(float) : sizeof(uint16_t); }

/* An f32 value as dtype dt holds it. */
static double rounded(dist_dtype dt, float f) { return dt == DIST_BF16 ? from_bf16(to_bf16(f)) : f; }

/* n f32 values written to a buffer of r's, in its dtype. */
static int put(const rig *r, void *dst, const float *src, int64_t n) {
  uint16_t *h = r->b.dt == DIST_BF16 ? malloc(sizeof(uint16_t) * (size_t)(n + 1)) : NULL;
  for (int64_t k = 0; h && k < n; k++) h[k] = to_bf16(src[k]);
  int ok = mem_put(r->b.mem, dst, h ? (const void *)h : src, (size_t)n * elem_size(r->b.dt));
  free(h);
  return ok;
}

/* n values of a buffer of r's, read as f32 once distmgr's queued work is done. */
static int get(const rig *r, float *dst, const void *src, int64_t n) {
  uint16_t *h = r->b.dt == DIST_BF16 ? malloc(sizeof(uint16_t) * (size_t)(n + 1)) : NULL;
  int ok = mem_get(r->b.mem, h ? (void *)h : dst, src, (size_t)n * elem_size(r->b.dt));
  for (int64_t k = 0; h && k < n; k++) dst[k] = from_bf16(h[k]);
  free(h);
  return ok;
}

static dist_ddp_options small_caps(void) {
  dist_ddp_options o = DIST_DDP_OPTIONS_INIT;
  o.first_bucket_bytes = FIRST_CAP;
  o.bucket_bytes = CAP;
  return o;
}

/* The layout small_caps gives f32 gradients ([b2] [W2 b1] [W1]), for 16-bit ones. */
static dist_ddp_options half_caps(void) {
  dist_ddp_options o = small_caps();
  o.first_bucket_bytes /= 2;
  o.bucket_bytes /= 2;
  return o;
}

/* Each rank starts from different values: commit must replace them with
 * rank 0's. A rank whose buffers fail registers fewer parameters, which
 * commit reports on every rank. */
static int rig_open_as(rig *r, const dist_ddp_options *o, buffers b) {
  memset(r, 0, sizeof *r);
  r->b = b;
  r->wire = b.dt;
  if (o && o->compress != DIST_DDP_COMPRESS_NONE && !o->hook && b.dt == DIST_F32)
    r->wire = o->compress == DIST_DDP_COMPRESS_BF16 ? DIST_BF16 : DIST_F16;
  r->m = mlp_new(INIT_SEED + (uint64_t)R);
  if (!CALL_OK(dist_params_create(NULL, &r->p), "dist_params_create")) return 0;
  int ok = 1;
  for (int i = 0; i < NP && ok; i++) {
    size_t bytes = (size_t)NUMEL[i] * elem_size(b.dt);
    int index = -1;
    if (plain(r)) r->data[i] = r->m.w[i], r->grad[i] = r->m.g[i];
    else ok = (r->data[i] = mem_new(b.mem, bytes)) && (r->grad[i] = mem_new(b.mem, bytes)) &&
              put(r, r->data[i], r->m.w[i], NUMEL[i]);
    ok = ok && CALL_OK(dist_params_add(r->p, NAME[i], r->data[i], r->grad[i], NUMEL[i], b.dt, b.mem, cuda_cases_dev,
                                       &index), "dist_params_add");
    CU_ASSERT(!ok || index == i);
  }
  if (!CALL_OK(dist_params_commit(r->p), "dist_params_commit")) return 0; /* on every rank */
  for (int i = 0; i < NP && !plain(r); i++) /* the backward computes with the committed weights */
    ok = get(r, r->m.w[i], r->data[i], NUMEL[i]) && ok;
  return CALL_OK(dist_ddp_create(r->p, o, &r->d), "dist_ddp_create") && ok;
}

static int rig_open(rig *r, const dist_ddp_options *o) { return rig_open_as(r, o, PLAIN); }

static void rig_close(rig *r) {
  dist_ddp_destroy(r->d);
  dist_params_destroy(r->p);
  for (int i = 0; i < NP && !plain(r); i++) mem_free(r->b.mem, r->data[i]), mem_free(r->b.mem, r->grad[i]);
  mlp_free(&r->m);
}

/* Where the backward writes: the gradient buffers as they are now
 * (grad_as_bucket_view moves them), or m.g where publish copies from. */
static void grads_of(const rig *r, float *g[NP]) {
  for (int i = 0; i < NP; i++) g[i] = plain(r) ? dist_params_grad(r->p, i) : r->m.g[i];
}

/* Not PLAIN: the gradient the backward left in m.g[i] becomes the one the
 * reducer reads (dist_params_grad: it moves with grad_as_bucket_view). */
static void publish(const rig *r, int i) {
  if (!plain(r)) put(r, dist_params_grad(r->p, i), r->m.g[i], NUMEL[i]);
}

static void mark(marker *mk, int i) {
  if (!mk || !mk->r || i == mk->skip) return;
  publish(mk->r, i);
  CALL_OK(dist_ddp_mark_ready(mk->r->d, i), NAME[i]);
}

/* Zero the gradients, and m.g where the backward writes there. */
static void rig_zero(const rig *r) {
  CALL_OK(dist_params_zero_grad(r->p), "dist_params_zero_grad");
  if (!plain(r)) zero(r->m.g);
}

static void grads_new(float *g[NP]) {
  for (int i = 0; i < NP; i++) g[i] = calloc((size_t)NUMEL[i], sizeof(float));
}
static void grads_free(float *g[NP]) {
  for (int i = 0; i < NP; i++) free(g[i]);
}

/* The gradients as f32 on the host, wherever they are. */
static void rig_grads(const rig *r, float *out[NP]) {
  for (int i = 0; i < NP; i++) get(r, out[i], dist_params_grad(r->p, i), NUMEL[i]);
}

/* One synchronised iteration on this rank's rows of batch `seed`. */
static int iterate(rig *r, uint64_t seed, marker *mk) {
  float *g[NP];
  grads_of(r, g);
  rig_zero(r);
  mlp_backward(r->m.w, g, seed, (int64_t)R * ROWS, ROWS, 1.0, mk);
  return CALL_OK(dist_ddp_finalize(r->d), "dist_ddp_finalize");
}

/* The full-batch gradient of rank 0's initial model (the reference). */
static mlp reference(uint64_t seed) {
  mlp ref = mlp_new(INIT_SEED);
  mlp_backward(ref.w, ref.g, seed, 0, W * ROWS, 1.0, NULL);
  return ref;
}

/* With DIST_VERIFY=1 a finalize that fails before the sums land (on any
 * rank) writes no gradient back: each rank keeps its own, bit for bit. */
static void expect_local_grads(const rig *r, float *const g[NP], uint64_t seed, const char *what) {
  mlp loc = mlp_new(INIT_SEED);
  mlp_backward(r->m.w, loc.g, seed, (int64_t)R * ROWS, ROWS, 1.0, NULL);
  EXPECT_SAME(g, loc.g, what);
  mlp_free(&loc);
}

/* ---- the exact mean, and the host run a device run must match -------------------- */

/* How each rank makes its gradient: `micro` micro-batches of ROWS rows
 * (rank q's are rows [q micro ROWS, (q + 1) micro ROWS) of batch `seed`),
 * each loss scaled by `scale`, accumulated in f32. */
typedef struct plan {
  uint64_t seed;
  int micro;
  double scale;
} plan;

/* Every rank's gradient as it hands it over (f32 from weights w, as dtype
 * dt holds it): their mean in double, and sum_r |g_r| for the bounds (both
 * added to zeroed arrays). */
static void exact_mean(float *const w[NP], dist_dtype dt, const plan *pl, double *mean[NP], double *mag[NP]) {
  float *g[NP];
  grads_new(g);
  for (int q = 0; q < W; q++) {
    zero(g);
    for (int b = 0; b < pl->micro; b++)
      mlp_backward(w, g, pl->seed, ((int64_t)q * pl->micro + b) * ROWS, ROWS, pl->scale, NULL);
    for (int i = 0; i < NP; i++)
      for (int64_t k = 0; k < NUMEL[i]; k++) {
        double v = rounded(dt, g[i][k]);
        mean[i][k] += v;
        mag[i][k] += fabs(v);
      }
  }
  for (int i = 0; i < NP; i++)
    for (int64_t k = 0; k < NUMEL[i]; k++) mean[i][k] /= W;
  grads_free(g);
}

/* A host run's gradients at each checkpoint, in order, for the device run
 * of the same case (recorded only when the device cases run). */
#define TRACE_MAX 4
typedef struct trace {
  int n, next;
  double *g[TRACE_MAX][NP];
} trace;

static void trace_free(trace *t, int count) {
  for (int k = 0; k < count; k++)
    for (int j = 0; j < t[k].n; j++)
      for (int i = 0; i < NP; i++) free(t[k].g[j][i]);
}

static void doubles_new(double *v[NP]) {
  for (int i = 0; i < NP; i++) v[i] = calloc((size_t)NUMEL[i], sizeof(double));
}
static void doubles_free(double *v[NP]) {
  for (int i = 0; i < NP; i++) free(v[i]);
}

/* |got - want| <= scale * bound elementwise; reports the first miss of each tensor. */
#define EXPECT_WITHIN(got, want, bound, scale, against, what, mem) \
  expect_within_(got, want, bound, scale, against, what, mem, __LINE__)
static void expect_within_(float *const got[NP], double *const want[NP], double *const bound[NP], double scale,
                           const char *against, const char *what, dist_memory mem, int line) {
  for (int i = 0; i < NP; i++) {
    int64_t bad = -1;
    for (int64_t k = 0; k < NUMEL[i] && bad < 0; k++)
      if (!(fabs(got[i][k] - want[i][k]) <= scale * bound[i][k])) bad = k;
    if (bad >= 0)
      fprintf(stderr, "[rank %d/%d] line %d: %s, %s memory: %s[%lld] = %.9g, %s %.9g (bound %.3g)\n", R, W, line, what,
              memory_name(mem), NAME[i], (long long)bad, got[i][bad], against, want[i][bad], scale * bound[i][bad]);
    assert_at(bad < 0, line, against);
  }
}

/* r's averaged gradients against the exact mean of plan pl. The reducer
 * sums W inputs (each rounded once to a 16-bit wire type, with
 * compression) with W - 1 roundings of partial sums below sum_r |g_r|, and
 * rounds the average once more, so |got - mean| <= 2 u sum_r |g_r|, u the
 * unit roundoff of the wire type (+ 2^-24, f16's subnormal spacing, for an
 * f16 wire). A host run records its gradients in t (t may be NULL); the
 * device run of the case compares with them at the same checkpoint: both
 * are within that bound of the mean, so within twice it of each other. */
static void checkpoint(const rig *r, trace *t, const plan *pl, const char *what) {
  float *got[NP];
  double *mean[NP], *bound[NP];
  grads_new(got), doubles_new(mean), doubles_new(bound);
  rig_grads(r, got);
  exact_mean(r->m.w, r->b.dt, pl, mean, bound); /* bound: sum_r |g_r| so far */
  double u = r->wire == DIST_F32 ? 0x1p-24 : r->wire == DIST_BF16 ? 0x1p-8 : 0x1p-11;
  double floor = r->wire == DIST_F16 ? 0x1p-24 : 0;
  for (int i = 0; i < NP; i++)
    for (int64_t k = 0; k < NUMEL[i]; k++) bound[i][k] = 2 * u * bound[i][k] + floor;
  EXPECT_WITHIN(got, mean, bound, 1, "exact mean", what, r->b.mem);
  if (t && r->b.mem != DIST_MEM_HOST) {
    assert_at(t->next < t->n, __LINE__, "a host run to compare with");
    if (t->next < t->n) EXPECT_WITHIN(got, t->g[t->next++], bound, 2, "host run", what, r->b.mem);
  } else if (t && cuda_cases_on) {
    assert_at(t->n < TRACE_MAX, __LINE__, "at most TRACE_MAX checkpoints a case");
    if (t->n < TRACE_MAX) {
      double **keep = t->g[t->n++];
      doubles_new(keep);
      for (int i = 0; i < NP; i++)
        for (int64_t k = 0; k < NUMEL[i]; k++) keep[i][k] = got[i][k];
    }
  }
  grads_free(got), doubles_free(mean), doubles_free(bound);
}

/* After iterate(r, seed, ...): checkpoint, and with an f32 wire the
 * full-batch gradient too (a 16-bit wire rounds more than its bound). */
static void check_iteration(const rig *r, trace *t, uint64_t seed, const char *what) {
  plan pl = {seed, 1, 1.0};
  checkpoint(r, t, &pl, what);
  if (r->wire != DIST_F32) return;
  float *got[NP];
  grads_new(got);
  rig_grads(r, got);
  mlp ref = reference(seed);
  EXPECT_GRADS(got, ref.g, what);
  mlp_free(&ref);
  grads_free(got);
}

/* ---- parameter sets ----------------------------------------------------------- */

static void test_commit_broadcast(void) {
  rig r;
  mlp mine = mlp_new(INIT_SEED + (uint64_t)R), zero_ = mlp_new(INIT_SEED);
  if (R > 0) CU_ASSERT(memcmp(mine.w[W1], zero_.w[W1], sizeof(float) * NUMEL[W1]) != 0); /* the test can fail */
  if (rig_open(&r, NULL)) {
    EXPECT_SAME(r.m.w, zero_.w, "after commit every rank holds rank 0's values");
    double div = -1;
    CALL_OK(dist_params_max_divergence(r.p, &div), "dist_params_max_divergence");
    CU_ASSERT_EQUAL(div, 0.0);
    CU_ASSERT_EQUAL(dist_params_count(r.p), NP);
    CU_ASSERT_EQUAL(dist_params_numel(r.p), total_numel());
    dist_param_info info;
    CALL_OK(dist_params_info_get(r.p, W2, &info), "dist_params_info_get");
    CU_ASSERT_STRING_EQUAL(info.name, NAME[W2]);
    CU_ASSERT_EQUAL(info.numel, NUMEL[W2]);
    CU_ASSERT_PTR_EQUAL(info.data, r.m.w[W2]);
    /* A diverged replica is seen by every rank. */
    if (W > 1 && R == W - 1) r.m.w[B2][1] += 0.25f;
    CALL_OK(dist_params_max_divergence(r.p, &div), "dist_params_max_divergence");
    CU_ASSERT(W == 1 ? div == 0.0 : fabs(div - 0.25) < 1e-6);
  }
  rig_close(&r);
  mlp_free(&mine), mlp_free(&zero_);
}

/* dist_params_broadcast from the last rank: every rank then holds its
 * values. A root that differs between ranks, or is out of range on one, and
 * dist_params_max_divergence with a NULL out on one rank: an error on every
 * rank (they were hangs), and the set still works after each. */
static void test_params_broadcast(void) {
  rig r;
  if (!rig_open(&r, NULL)) {
    rig_close(&r);
    return;
  }
  const int last = W - 1;
  r.m.w[W1][0] = 1.5f + (float)R; /* rank `last` holds 1.5 + last */
  CALL_OK(dist_params_broadcast(r.p, last), "dist_params_broadcast from the last rank");
  CU_ASSERT_EQUAL(r.m.w[W1][0], 1.5f + (float)last);
  double div = -1;
  CALL_OK(dist_params_max_divergence(r.p, &div), "dist_params_max_divergence");
  CU_ASSERT_EQUAL(div, 0.0);
  if (W > 1) {
    CALL_FAILS(dist_params_broadcast(r.p, R == 0 ? 1 : 0), DIST_ERR_MISMATCH, NULL, "roots differ");
    CALL_FAILS(dist_params_broadcast(r.p, R == last ? W : 0), DIST_ERR_INVALID_ARGUMENT, R == last ? "root" : "rank",
               "root out of range on one rank");
    CALL_FAILS(dist_params_max_divergence(r.p, R == last ? NULL : &div), DIST_ERR_INVALID_ARGUMENT,
               R == last ? "out is NULL" : "rank", "NULL out on one rank");
  }
  CALL_FAILS(dist_params_broadcast(r.p, -1), DIST_ERR_INVALID_ARGUMENT, "root", "root -1 everywhere");
  CALL_OK(dist_params_broadcast(r.p, 0), "dist_params_broadcast after the errors");
  CU_ASSERT_EQUAL(r.m.w[W1][0], 1.5f + (float)last);
  rig_close(&r);
}

/* Rank 1 registers something else: every rank fails and names the parameter. */
static void commit_mismatch(int kind, const char *name) {
  mlp m = mlp_new(INIT_SEED);
  double *wide = calloc((size_t)NUMEL[W2], sizeof(double)), *wide_g = calloc((size_t)NUMEL[W2], sizeof(double));
  float extra[2] = {0, 0}, extra_g[2] = {0, 0};
  dist_params *p = NULL;
  int odd = R == 1;
  if (CALL_OK(dist_params_create(NULL, &p), "dist_params_create")) {
    for (int i = 0; i < NP; i++) {
      if (odd && kind == 4 && i == B2) continue; /* one parameter fewer */
      if (odd && kind == 1 && i == B1) CALL_OK(dist_params_add_host(p, NAME[i], m.w[i], m.g[i], NUMEL[i] - 1, NULL), "add");
      else if (odd && kind == 2 && i == W2)
        CALL_OK(dist_params_add(p, NAME[i], wide, wide_g, NUMEL[i], DIST_F64, DIST_MEM_HOST, 0, NULL), "add f64");
      else CALL_OK(dist_params_add_host(p, NAME[i], m.w[i], m.g[i], NUMEL[i], NULL), "add");
    }
    if (odd && kind == 3) CALL_OK(dist_params_add_host(p, "fc3.bias", extra, extra_g, 2, NULL), "add extra");
    if (W == 1) CALL_OK(dist_params_commit(p), "dist_params_commit (nothing to differ from)");
    else CALL_FAILS(dist_params_commit(p), DIST_ERR_MISMATCH, name, "dist_params_commit with different sets");
  }
  dist_params_destroy(p);
  free(wide), free(wide_g);
  mlp_free(&m);
}

static void test_commit_size(void) { commit_mismatch(1, "fc1.bias"); }
static void test_commit_dtype(void) { commit_mismatch(2, "fc2.weight"); }
static void test_commit_count(void) {
  commit_mismatch(3, "fc3.bias");
  commit_mismatch(4, "fc2.bias");
}

/* ---- layout ------------------------------------------------------------------- */

static void test_layout(void) {
  rig r;
  dist_ddp_options o = small_caps();
  if (rig_open(&r, &o)) {
    int nb = dist_ddp_bucket_count(r.d), seen = 0, next = NP - 1;
    CU_ASSERT(nb >= 3);
    size_t sum = 0;
    for (int k = 0; k < nb; k++) {
      int n = 0;
      const int *idx = NULL;
      size_t bytes = 0;
      dist_dtype dt = DIST_F64;
      if (!CALL_OK(dist_ddp_bucket_info(r.d, k, &n, &idx, &bytes, &dt), "dist_ddp_bucket_info")) break;
      CU_ASSERT(n >= 1);
      CU_ASSERT_EQUAL(dt, DIST_F32);
      size_t cap = k == 0 ? FIRST_CAP : CAP, want = 0;
      for (int j = 0; j < n; j++, seen++) {
        CU_ASSERT_EQUAL(idx[j], next); /* reverse registration order across buckets */
        want += sizeof(float) * (size_t)NUMEL[idx[j]];
        next--;
      }
      CU_ASSERT_EQUAL(bytes, want);
      CU_ASSERT(bytes <= cap || n == 1); /* only a lone parameter may exceed the cap */
      sum += bytes;
    }
    CU_ASSERT_EQUAL(seen, NP);
    CU_ASSERT_EQUAL(sum, sizeof(float) * (size_t)total_numel());
    CALL_FAILS(dist_ddp_bucket_info(r.d, nb, NULL, NULL, NULL, NULL), DIST_ERR_INVALID_ARGUMENT, NULL, "bucket nb");
  }
  rig_close(&r);
  /* The default caps hold this small model in one bucket. */
  if (rig_open(&r, NULL)) CU_ASSERT_EQUAL(dist_ddp_bucket_count(r.d), 1);
  rig_close(&r);
}

/* ---- equivalence ---------------------------------------------------------------- */

/* Three iterations (the marks reset between them) against the exact mean
 * and, for f32, the full batch. */
static void grads_match(const dist_ddp_options *o, buffers b, trace *t, const char *what) {
  rig r;
  if (rig_open_as(&r, o, b)) {
    for (int it = 0; it < 3; it++) {
      marker mk = MARK(&r);
      if (!iterate(&r, 100 + (uint64_t)it, &mk)) break;
      check_iteration(&r, t, 100 + (uint64_t)it, what);
    }
  }
  rig_close(&r);
}

static void test_grads(void) {
  dist_ddp_options o = small_caps();
  trace t = {0};
  for (int m = 0; m < memory_kinds(); m++) grads_match(&o, (buffers){MEMORY[m], DIST_F32}, &t, "small buckets");
  grads_match(NULL, PLAIN, NULL, "default buckets");
  trace_free(&t, 1);
}

/* bf16 gradients in device memory: every bucket's launch fails on every
 * rank alike (none posts its collective, so nobody waits), with an error
 * that names the dtype and the memory, and finalize repeats it. */
static void bf16_refused(const dist_ddp_options *o, buffers b) {
  rig r;
  if (rig_open_as(&r, o, b)) {
    rig_zero(&r);
    mlp_backward(r.m.w, r.m.g, 130, (int64_t)R * ROWS, ROWS, 1.0, NULL);
    int refused = 0;
    for (int i = NP - 1; i >= 0; i--) {
      publish(&r, i);
      dist_status s = dist_ddp_mark_ready(r.d, i);
      if (!s) continue;
      refused++;
      CALL_FAILS(s, DIST_ERR_UNSUPPORTED, "bf16 gradients in device memory", "marking a bf16 device gradient");
    }
    CU_ASSERT_EQUAL(refused, dist_ddp_bucket_count(r.d)); /* each bucket's last mark */
    CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_UNSUPPORTED, "bf16 gradients in device memory",
               "finalize after bf16 device gradients");
  }
  rig_close(&r);
}

/* Does NCCL carry this group's device collectives (dist_coll_backend)? */
static int device_on_nccl(void) {
  const char *name = NULL;
  return dist_coll_backend(NULL, DIST_MEM_CUDA, &name) == DIST_SUCCESS && !strcmp(name, "nccl");
}

/* bf16 gradients, summed in bf16: on the host by an MPI user reduction, in
 * device memory by NCCL. The staged backend cannot sum 16-bit floats, so
 * there the reducer refuses them: bf16_refused. */
static void test_bf16(void) {
  dist_ddp_options o = half_caps();
  grads_match(&o, (buffers){DIST_MEM_HOST, DIST_BF16}, NULL, "bf16 gradients, small buckets");
  if (!cuda_cases_on) return;
  if (device_on_nccl()) grads_match(&o, (buffers){DIST_MEM_CUDA, DIST_BF16}, NULL, "bf16 device gradients (NCCL)");
  else bf16_refused(&o, (buffers){DIST_MEM_CUDA, DIST_BF16});
}

enum { OPT_SGD, OPT_ADAM, OPT_ADAMW };

static dist_status make_optim(int kind, dist_params *p, dist_optim **out) {
  if (kind == OPT_SGD) {
    dist_sgd_options s = DIST_SGD_OPTIONS_INIT;
    s.lr = 0.1, s.momentum = 0.9, s.nesterov = 1, s.weight_decay = 1e-2;
    return dist_optim_sgd(p, &s, out);
  }
  dist_adam_options a = DIST_ADAM_OPTIONS_INIT, aw = DIST_ADAMW_OPTIONS_INIT;
  if (kind == OPT_ADAMW) a = aw;
  else a.weight_decay = 1e-3;
  a.lr = 1e-2;
  return dist_optim_adam(p, &a, out);
}

/* STEPS iterations of reducer + optimizer against the same optimizer on a
 * replica of rank 0's model stepped with full-batch gradients. */
static void train(const dist_ddp_options *o, int kind, const char *what) {
  rig r;
  mlp ref = mlp_new(INIT_SEED);
  dist_params *rp = NULL;
  dist_optim *opt = NULL, *ropt = NULL;
  int ok = rig_open(&r, o) && CALL_OK(dist_params_create(NULL, &rp), "dist_params_create (reference)");
  for (int i = 0; ok && i < NP; i++) ok = CALL_OK(dist_params_add_host(rp, NAME[i], ref.w[i], ref.g[i], NUMEL[i], NULL), "add");
  ok = ok && CALL_OK(dist_params_commit(rp), "commit (reference)");
  ok = ok && CALL_OK(make_optim(kind, r.p, &opt), "optimizer") && CALL_OK(make_optim(kind, rp, &ropt), "optimizer");
  for (int it = 0; ok && it < STEPS; it++) {
    uint64_t seed = 200 + (uint64_t)it;
    marker mk = MARK(&r);
    ok = iterate(&r, seed, &mk) && CALL_OK(dist_optim_step(opt), "dist_optim_step");
    CALL_OK(dist_optim_zero_grad(ropt), "dist_optim_zero_grad");
    mlp_backward(ref.w, ref.g, seed, 0, W * ROWS, 1.0, NULL);
    ok = ok && CALL_OK(dist_optim_step(ropt), "dist_optim_step (reference)");
  }
  if (ok) {
    for (int i = 0; i < NP; i++) {
      char msg[160];
      snprintf(msg, sizeof msg, "%s: %s after %d steps", what, NAME[i], STEPS);
      EXPECT_CLOSE(r.m.w[i], ref.w[i], NUMEL[i], 1e-5, 1e-6, msg);
      /* the parameters moved: a broken optimizer cannot pass */
      mlp init = mlp_new(INIT_SEED);
      CU_ASSERT(memcmp(init.w[i], ref.w[i], sizeof(float) * (size_t)NUMEL[i]) != 0);
      mlp_free(&init);
    }
    double div = -1;
    CALL_OK(dist_params_max_divergence(r.p, &div), "dist_params_max_divergence");
    if (div != 0) fprintf(stderr, "[rank %d/%d] %s: replicas diverge by %g\n", R, W, what, div);
    CU_ASSERT_EQUAL(div, 0.0);
  }
  dist_optim_destroy(opt), dist_optim_destroy(ropt);
  rig_close(&r);
  dist_params_destroy(rp);
  mlp_free(&ref);
}

static void test_sgd(void) {
  dist_ddp_options o = small_caps();
  train(&o, OPT_SGD, "SGD nesterov momentum 0.9, weight decay");
}
static void test_adam(void) {
  dist_ddp_options o = small_caps();
  train(&o, OPT_ADAM, "Adam");
  train(&o, OPT_ADAMW, "AdamW");
}

/* ---- variants ------------------------------------------------------------------- */

/* grad_as_bucket_view moves each gradient buffer into its bucket; destroy
 * gives the user's buffers back, holding the last averages. */
static void view_restored(const dist_ddp_options *o, dist_memory mem, trace *t) {
  rig r;
  if (rig_open_as(&r, o, (buffers){mem, DIST_F32})) {
    for (int i = 0; i < NP; i++) CU_ASSERT_PTR_NOT_EQUAL(dist_params_grad(r.p, i), r.grad[i]); /* moved */
    marker mk = MARK(&r);
    iterate(&r, 300, &mk);
    dist_ddp_destroy(r.d);
    r.d = NULL;
    for (int i = 0; i < NP; i++) CU_ASSERT_PTR_EQUAL(dist_params_grad(r.p, i), r.grad[i]);
    check_iteration(&r, t, 300, "grad_as_bucket_view, after destroy");
  }
  rig_close(&r);
}

static void test_bucket_view(void) {
  dist_ddp_options o = small_caps();
  o.grad_as_bucket_view = 1;
  train(&o, OPT_SGD, "grad_as_bucket_view, SGD");
  trace t[2] = {{0}};
  for (int m = 0; m < memory_kinds(); m++) {
    grads_match(&o, (buffers){MEMORY[m], DIST_F32}, &t[0], "grad_as_bucket_view");
    view_restored(&o, MEMORY[m], &t[1]);
  }
  trace_free(t, 2);
}

/* All marks after the backward, in a different order on each rank; the
 * first is registration order, where the last bucket fills first. Buckets
 * must still launch in bucket order everywhere, or the ranks' all-reduces
 * pair different buckets. */
static void test_scrambled(void) {
  static const int orders[3][NP] = {{W1, B1, W2, B2}, {B1, B2, W1, W2}, {W2, W1, B2, B1}};
  dist_ddp_options o = small_caps();
  rig a = NO_RIG, b = NO_RIG;
  if (rig_open(&a, &o) && rig_open(&b, &o)) {
    for (int k = 0; k < 3; k++) {
      marker ma = MARK(&a), mb = {&b, orders[(k + R) % 3], -1};
      iterate(&a, 400 + (uint64_t)k, &ma);
      iterate(&b, 400 + (uint64_t)k, &mb);
      float *ga[NP], *gb[NP];
      grads_of(&a, ga), grads_of(&b, gb);
      if (cunit_mpi_in_use() || W < 3) EXPECT_SAME(gb, ga, "scrambled marks");
      else /* Gloo's ring sums an element in an order set by its offset in the bucket: the layouts differ, so may the last bit */
        for (int i = 0; i < NP; i++) EXPECT_CLOSE(gb[i], ga[i], NUMEL[i], 1e-6, 1e-7, "scrambled marks (Gloo: to rounding)");
    }
  }
  rig_close(&a), rig_close(&b);
}

/* The parameters of every bucket, concatenated in bucket order. */
static int layout_order(const dist_ddp *d, int out[NP]) {
  int n = 0;
  for (int k = 0; k < dist_ddp_bucket_count(d); k++) {
    int m = 0;
    const int *idx = NULL;
    if (!CALL_OK(dist_ddp_bucket_info(d, k, &m, &idx, NULL, NULL), "dist_ddp_bucket_info")) return n;
    for (int j = 0; j < m && n < NP; j++) out[n++] = idx[j];
  }
  return n;
}

/* The first iteration with marks marks in forward order on rank 0 (another
 * order on the others): the buckets are laid out again in rank 0's order, [W1] then
 * [b1 W2 b2] with these caps, so marking W1 alone now launches bucket 0.
 * rebuild_buckets = 0 keeps the reverse registration layout. */
static void rebuilt(int view, int rebuild, dist_memory mem, trace *t) {
  static const int fwd[NP] = {W1, B1, W2, B2}, other[NP] = {B1, B2, W1, W2};
  dist_ddp_options o = small_caps();
  o.grad_as_bucket_view = view;
  o.rebuild_buckets = rebuild;
  char what[64];
  snprintf(what, sizeof what, "rebuild %d, view %d", rebuild, view);
  rig r;
  if (rig_open_as(&r, &o, (buffers){mem, DIST_F32})) {
    /* A finalize without marks shows no order: the rebuild waits for one that does. */
    CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INVALID_ARGUMENT, "no parameter was marked", "finalize without marks");
    marker first = {&r, R == 0 ? fwd : other, -1};
    iterate(&r, 420, &first);
    float *g[NP];
    grads_of(&r, g);
    check_iteration(&r, t, 420, what); /* the rebuild keeps the averages (moved, with the view) */
    int got[NP], n = layout_order(r.d, got);
    CU_ASSERT_EQUAL(n, NP);
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(got[i], rebuild ? fwd[i] : NP - 1 - i);
    CU_ASSERT_EQUAL(dist_ddp_bucket_count(r.d), rebuild ? 2 : 3);
    /* W1 alone fills the rebuilt bucket 0, which launches at once. */
    rig_zero(&r);
    mlp_backward(r.m.w, g, 421, (int64_t)R * ROWS, ROWS, 1.0, NULL);
    marker by_hand = MARK(&r);
    uint64_t before = dist_ddp_bytes_sent(r.d);
    mark(&by_hand, W1);
    CU_ASSERT_EQUAL(dist_ddp_bytes_sent(r.d) - before, rebuild ? sizeof(float) * (uint64_t)NUMEL[W1] : 0);
    for (int i = 1; i < NP; i++) mark(&by_hand, fwd[i]);
    CALL_OK(dist_ddp_finalize(r.d), "finalize");
    check_iteration(&r, t, 421, what);
    /* Only the first iteration's order counts. */
    marker again = {&r, other, -1};
    iterate(&r, 422, &again);
    n = layout_order(r.d, got);
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(got[i], rebuild ? fwd[i] : NP - 1 - i);
  }
  rig_close(&r);
}

static void test_rebuild(void) {
  trace t[2] = {{0}};
  for (int m = 0; m < memory_kinds(); m++) {
    rebuilt(0, 1, MEMORY[m], &t[0]);
    rebuilt(1, 1, MEMORY[m], &t[1]);
  }
  rebuilt(0, 0, DIST_MEM_HOST, NULL);
  trace_free(t, 2);
}

/* Two micro-batches per rank (loss scaled by 1/2, as torch users do) with
 * no_sync on the first equal one synchronised step over both: rank r owns
 * rows [2 r ROWS, 2 (r + 1) ROWS) of the batch. */
static void no_sync(int view, dist_memory mem, trace *t) {
  dist_ddp_options o = small_caps();
  o.grad_as_bucket_view = view;
  rig r = NO_RIG, one = NO_RIG;
  const char *what = view ? "no_sync, bucket view" : "no_sync";
  float *got[NP], *got1[NP];
  grads_new(got), grads_new(got1);
  buffers b = {mem, DIST_F32};
  if (rig_open_as(&r, &o, b) && rig_open_as(&one, &o, b)) {
    for (int it = 0; it < 2; it++) {
      uint64_t seed = 500 + (uint64_t)it;
      int64_t row0 = 2 * (int64_t)R * ROWS;
      float *g[NP];
      grads_of(&r, g);
      uint64_t before = dist_ddp_bytes_sent(r.d);
      rig_zero(&r); /* once per accumulation cycle */
      CALL_OK(dist_ddp_set_sync(r.d, 0), "set_sync 0");
      CU_ASSERT_EQUAL(dist_ddp_sync_enabled(r.d), 0);
      marker mk = MARK(&r);
      mlp_backward(r.m.w, g, seed, row0, ROWS, 0.5, &mk);
      CALL_OK(dist_ddp_finalize(r.d), "finalize without sync");
      CU_ASSERT_EQUAL(dist_ddp_bytes_sent(r.d), before); /* nothing sent */
      mlp local = mlp_new(INIT_SEED);
      zero(local.g);
      mlp_backward(local.w, local.g, seed, row0, ROWS, 0.5, NULL);
      rig_grads(&r, got);
      EXPECT_SAME(got, local.g, "no_sync leaves the local gradients");
      CALL_OK(dist_ddp_set_sync(r.d, 1), "set_sync 1");
      mlp_backward(r.m.w, g, seed, row0 + ROWS, ROWS, 0.5, &mk);
      CALL_OK(dist_ddp_finalize(r.d), "finalize with sync");
      CU_ASSERT_EQUAL(dist_ddp_bytes_sent(r.d) - before, sizeof(float) * (uint64_t)total_numel());
      /* one synchronised step over the rank's 2 ROWS rows */
      float *g1[NP];
      grads_of(&one, g1);
      rig_zero(&one);
      marker m1 = MARK(&one);
      mlp_backward(one.m.w, g1, seed, row0, 2 * ROWS, 1.0, &m1);
      CALL_OK(dist_ddp_finalize(one.d), "finalize");
      rig_grads(&r, got), rig_grads(&one, got1);
      EXPECT_GRADS(got, got1, what);
      mlp ref = mlp_new(INIT_SEED);
      mlp_backward(ref.w, ref.g, seed, 0, 2 * W * ROWS, 1.0, NULL);
      EXPECT_GRADS(got, ref.g, what);
      plan pl = {seed, 2, 0.5};
      checkpoint(&r, t, &pl, what);
      mlp_free(&ref), mlp_free(&local);
    }
    /* switching in the middle of a backward is refused */
    CALL_OK(dist_ddp_mark_ready(r.d, B2), "mark");
    CALL_FAILS(dist_ddp_set_sync(r.d, 0), DIST_ERR_INVALID_ARGUMENT, "already marked", "set_sync mid-iteration");
    marker rest = {&r, (const int[]){W2, B1, W1, -1}, -1};
    for (int i = 0; i < 3; i++) mark(&rest, rest.order[i]);
    CALL_OK(dist_ddp_finalize(r.d), "finalize");
  }
  rig_close(&r), rig_close(&one);
  grads_free(got), grads_free(got1);
}

static void test_no_sync(void) {
  trace t[2] = {{0}};
  for (int m = 0; m < memory_kinds(); m++) {
    no_sync(0, MEMORY[m], &t[0]);
    no_sync(1, MEMORY[m], &t[1]);
  }
  trace_free(t, 2);
}

/* unused = ZERO in memory b: an unmarked parameter counts as a zero local
 * gradient (on device memory the marked ones reach their buckets in one
 * batched copy, which must leave the unmarked one's zeros alone). */
static int iterate_skipping(rig *r, uint64_t seed, int skip) {
  float *g[NP];
  grads_of(r, g);
  rig_zero(r);
  marker mk = {r, NULL, skip};
  mlp_backward(r->m.w, g, seed, (int64_t)R * ROWS, ROWS, 1.0, &mk);
  if (skip >= 0) publish(r, skip); /* its gradient is there, unmarked: it must not count */
  return CALL_OK(dist_ddp_finalize(r->d), "dist_ddp_finalize");
}

static void unused_zero_in(rig *r) {
  float *got[NP];
  grads_new(got);
  /* every rank skips fc1.bias */
  iterate_skipping(r, 600, B1);
  mlp ref = reference(600);
  rig_grads(r, got);
  for (int64_t k = 0; k < NUMEL[B1]; k++) ref.g[B1][k] = 0;
  EXPECT_GRADS(got, ref.g, "unused = ZERO, fc1.bias skipped everywhere");
  mlp_free(&ref);
  /* only the last rank skips fc1.weight: the others' sum over W */
  iterate_skipping(r, 601, R == W - 1 ? W1 : -1);
  ref = reference(601);
  rig_grads(r, got);
  float *want = calloc((size_t)NUMEL[W1], sizeof(float));
  double *acc = calloc((size_t)NUMEL[W1], sizeof(double));
  for (int q = 0; q < W - 1; q++) {
    mlp loc = mlp_new(INIT_SEED);
    mlp_backward(loc.w, loc.g, 601, (int64_t)q * ROWS, ROWS, 1.0, NULL);
    for (int64_t k = 0; k < NUMEL[W1]; k++) acc[k] += loc.g[W1][k];
    mlp_free(&loc);
  }
  for (int64_t k = 0; k < NUMEL[W1]; k++) want[k] = (float)(acc[k] / W);
  memcpy(ref.g[W1], want, sizeof(float) * (size_t)NUMEL[W1]);
  if (W == 1) CU_ASSERT(max_abs(got[W1], NUMEL[W1]) == 0);
  EXPECT_GRADS(got, ref.g, "unused = ZERO, fc1.weight skipped on the last rank");
  free(want), free(acc);
  mlp_free(&ref);
  grads_free(got);
}

static void test_unused_zero(void) {
  dist_ddp_options o = small_caps();
  o.unused = DIST_DDP_UNUSED_ZERO;
  rig r;
  for (int m = 1; m < memory_kinds(); m++) { /* device memory; the host run is below */
    if (rig_open_as(&r, &o, (buffers){MEMORY[m], DIST_F32})) unused_zero_in(&r);
    rig_close(&r);
  }
  if (rig_open(&r, &o)) {
    unused_zero_in(&r);
    float *g[NP];
    grads_of(&r, g);
    marker last = {&r, NULL, R == W - 1 ? W1 : -1};
    mlp ref;
    /* Zeroing the skipped gradient fails on the last rank (injected; a
     * device memset in practice): its bucket still launches, so no rank
     * hangs, and with DIST_VERIFY=1 finalize fails everywhere. */
    const char *v = getenv("DIST_VERIFY");
    int verify = !(v && !strcmp(v, "0"));
    CALL_OK(dist_params_zero_grad(r.p), "zero_grad");
    mlp_backward(r.m.w, g, 602, (int64_t)R * ROWS, ROWS, 1.0, &last);
    if (R == W - 1) dist__fault_site = "mem_zero";
    if (R == W - 1) CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INTERNAL, "mem_zero", "finalize, zeroing failed");
    else if (verify) CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INTERNAL, "failed on rank", "finalize, another rank's zeroing failed");
    else CALL_OK(dist_ddp_finalize(r.d), "finalize, another rank's zeroing failed, no verification");
    CU_ASSERT_PTR_NULL(dist__fault_site);
    dist__fault_site = NULL;
    marker all = MARK(&r);
    iterate(&r, 603, &all);
    ref = reference(603);
    EXPECT_GRADS(g, ref.g, "the iteration after a failed zeroing");
    mlp_free(&ref);
  }
  rig_close(&r);
}

/* unused = ERROR (the default): every rank fails naming the parameter, and
 * the reducer works in the next iteration. */
static void test_unused_error(void) {
  dist_ddp_options o = small_caps();
  rig r;
  /* Only the agreement round (DIST_VERIFY=1, the default) tells the ranks
   * that marked everything about the one that did not. */
  const char *v = getenv("DIST_VERIFY");
  int cases = v && !strcmp(v, "0") ? 1 : 2;
  if (rig_open(&r, &o)) {
    for (int who = 0; who < cases; who++) { /* every rank skips, then only the last */
      float *g[NP];
      grads_of(&r, g);
      CALL_OK(dist_params_zero_grad(r.p), "zero_grad");
      marker mk = {&r, NULL, who == 0 || R == W - 1 ? B1 : -1};
      mlp_backward(r.m.w, g, 700, (int64_t)R * ROWS, ROWS, 1.0, &mk);
      CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INVALID_ARGUMENT, "fc1.bias", "finalize with an unmarked parameter");
      marker all = MARK(&r);
      iterate(&r, 701, &all);
      mlp ref = reference(701);
      EXPECT_GRADS(g, ref.g, "the iteration after an unused error");
      mlp_free(&ref);
    }
  }
  rig_close(&r);
}

static void test_mark_errors(void) {
  dist_ddp_options o = small_caps();
  rig r;
  if (rig_open(&r, &o)) {
    float *g[NP];
    grads_of(&r, g);
    /* twice in one iteration */
    CALL_OK(dist_params_zero_grad(r.p), "zero_grad");
    marker mk = MARK(&r);
    mlp_backward(r.m.w, g, 800, (int64_t)R * ROWS, ROWS, 1.0, &mk);
    CALL_FAILS(dist_ddp_mark_ready(r.d, W2), DIST_ERR_INVALID_ARGUMENT, "fc2.weight", "marked twice");
    CALL_FAILS(dist_ddp_mark_ready(r.d, NP), DIST_ERR_INVALID_ARGUMENT, NULL, "index out of range");
    CALL_OK(dist_ddp_finalize(r.d), "finalize after the refused mark");
    mlp ref = reference(800);
    EXPECT_GRADS(g, ref.g, "a refused second mark changes nothing");
    mlp_free(&ref);
    /* finalize without a single mark */
    CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INVALID_ARGUMENT, "no parameter was marked", "finalize without marks");
    marker again = MARK(&r);
    iterate(&r, 801, &again);
    ref = reference(801);
    EXPECT_GRADS(g, ref.g, "the iteration after a finalize without marks");
    mlp_free(&ref);
    /* A copy into a bucket fails on the last rank (injected): its bucket
     * still launches, so no rank hangs; the mark and finalize report it
     * there, and with DIST_VERIFY=1 (the default) finalize fails everywhere. */
    const char *v = getenv("DIST_VERIFY");
    int verify = !(v && !strcmp(v, "0"));
    CALL_OK(dist_params_zero_grad(r.p), "zero_grad");
    mlp_backward(r.m.w, g, 802, (int64_t)R * ROWS, ROWS, 1.0, NULL);
    if (R == W - 1) dist__fault_site = "ddp_copy";
    for (int i = NP - 1; i >= 0; i--) {
      dist_status s = dist_ddp_mark_ready(r.d, i);
      if (R == W - 1 && i == NP - 1) CALL_FAILS(s, DIST_ERR_INTERNAL, "injected", "mark with a failing copy");
      else CALL_OK(s, NAME[i]);
    }
    if (R == W - 1) CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INTERNAL, NAME[NP - 1], "finalize after a failed copy");
    else if (verify) CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INTERNAL, "failed on rank", "finalize, another rank's copy failed");
    else CALL_OK(dist_ddp_finalize(r.d), "finalize, another rank's copy failed, no verification");
    if (verify) expect_local_grads(&r, g, 802, "after a failed copy on the last rank");
    marker next = MARK(&r);
    iterate(&r, 803, &next);
    ref = reference(803);
    EXPECT_GRADS(g, ref.g, "the iteration after a failed copy");
    mlp_free(&ref);
    /* The step before bucket 0's collective fails on the last rank
     * (injected): the collective is posted anyway and the later buckets
     * launch, so no rank hangs; exactly one mark reports it there. */
    CALL_OK(dist_params_zero_grad(r.p), "zero_grad");
    mlp_backward(r.m.w, g, 804, (int64_t)R * ROWS, ROWS, 1.0, NULL);
    if (R == W - 1) dist__fault_site = "ddp_launch";
    int failed = 0;
    for (int i = NP - 1; i >= 0; i--) {
      dist_status s = dist_ddp_mark_ready(r.d, i);
      if (s) {
        failed++;
        CU_ASSERT_EQUAL(s, DIST_ERR_INTERNAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "DDP bucket 0"));
      }
    }
    CU_ASSERT_EQUAL(failed, R == W - 1);
    if (R == W - 1) CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INTERNAL, "ddp_launch", "finalize after a failed launch");
    else if (verify) CALL_FAILS(dist_ddp_finalize(r.d), DIST_ERR_INTERNAL, "failed on rank", "finalize, another rank's launch failed");
    else CALL_OK(dist_ddp_finalize(r.d), "finalize, another rank's launch failed, no verification");
    if (verify) expect_local_grads(&r, g, 804, "after a failed launch on the last rank");
    CU_ASSERT_PTR_NULL(dist__fault_site);
    marker after = MARK(&r);
    iterate(&r, 805, &after);
    ref = reference(805);
    EXPECT_GRADS(g, ref.g, "the iteration after a failed launch");
    mlp_free(&ref);
  }
  rig_close(&r);
}

/* 16-bit compression of f32 buckets, against the exact mean (checkpoint:
 * every input and every partial sum rounded once to the wire type).
 * order (NULL: as the backward goes): every iteration marks in that order,
 * so a non-NULL one rebuilds the buckets (and their wire buffers) after a
 * first, unchecked iteration. */
static void compressed(dist_ddp_compress c, const int *order, dist_memory mem, trace *t, const char *what) {
  dist_ddp_options o = small_caps(), none = small_caps();
  o.compress = c;
  buffers b = {mem, DIST_F32};
  rig r = NO_RIG, p = NO_RIG;
  if (rig_open_as(&r, &o, b) && rig_open_as(&p, &none, b)) {
    marker mk = {&r, order, -1}, mp = {&p, order, -1};
    if (order) {
      iterate(&r, 899, &mk);
      iterate(&p, 899, &mp);
      CU_ASSERT_EQUAL(dist_ddp_bucket_count(r.d), 2); /* [W1] [b1 W2 b2]: rebuilt */
    }
    uint64_t r0 = dist_ddp_bytes_sent(r.d), p0 = dist_ddp_bytes_sent(p.d);
    iterate(&r, 900, &mk);
    iterate(&p, 900, &mp);
    check_iteration(&r, t, 900, what);
    uint64_t n = (uint64_t)total_numel();
    uint64_t rs = dist_ddp_bytes_sent(r.d) - r0, ps = dist_ddp_bytes_sent(p.d) - p0;
    /* Half of the uncompressed bytes (host, NCCL). The staged backend does
     * not sum 16-bit floats: its device bucket is rounded to the wire type,
     * then summed in f32 (the same rounding, the full bytes). */
    uint64_t want = mem == DIST_MEM_CUDA && !device_on_nccl() ? 4 * n : 2 * n;
    CU_ASSERT_EQUAL(ps, 4 * n);
    CU_ASSERT_EQUAL(rs, want);
    if (rs != want)
      fprintf(stderr, "[rank %d/%d] %s, %s memory: sent %llu bytes, uncompressed %llu\n", R, W, what, memory_name(mem),
              (unsigned long long)rs, (unsigned long long)ps);
  }
  rig_close(&r), rig_close(&p);
}

static void test_compress(void) {
  static const int fwd[NP] = {W1, B1, W2, B2};
  trace t[3] = {{0}};
  for (int m = 0; m < memory_kinds(); m++) {
    compressed(DIST_DDP_COMPRESS_BF16, NULL, MEMORY[m], &t[0], "bf16");
    compressed(DIST_DDP_COMPRESS_F16, NULL, MEMORY[m], &t[1], "f16");
    compressed(DIST_DDP_COMPRESS_BF16, fwd, MEMORY[m], &t[2], "bf16, buckets rebuilt");
  }
  trace_free(t, 3);
}

/* A user hook: a plain non-blocking sum through the public API. */
typedef struct hook_count {
  int starts, finishes;
} hook_count;

static dist_status hook_start(void *ctx, const char *group, int bucket, dist_tensor *grads, dist_request **req) {
  (void)bucket;
  ((hook_count *)ctx)->starts++;
  return dist_all_reduce_start(group, grads, DIST_SUM, req);
}

static dist_status hook_finish(void *ctx, int bucket, dist_tensor *grads) {
  (void)bucket, (void)grads;
  ((hook_count *)ctx)->finishes++;
  return DIST_SUCCESS;
}

static void test_hook(void) {
  hook_count n = {0, 0};
  dist_ddp_hook h = {hook_start, hook_finish, &n};
  dist_ddp_options o = small_caps(), plain = small_caps();
  o.hook = &h;
  o.compress = DIST_DDP_COMPRESS_BF16; /* the hook overrides it */
  rig r = NO_RIG, p = NO_RIG;
  if (rig_open(&r, &o) && rig_open(&p, &plain)) {
    int nb = dist_ddp_bucket_count(r.d);
    for (int it = 0; it < 2; it++) {
      marker mk = MARK(&r), mp = MARK(&p);
      iterate(&r, 1000 + (uint64_t)it, &mk);
      iterate(&p, 1000 + (uint64_t)it, &mp);
      float *gr[NP], *gp[NP];
      grads_of(&r, gr), grads_of(&p, gp);
      EXPECT_SAME(gr, gp, "hook result equals the default");
    }
    CU_ASSERT_EQUAL(n.starts, 2 * nb);
    CU_ASSERT_EQUAL(n.finishes, 2 * nb);
  }
  rig_close(&r), rig_close(&p);
}

static void test_progress(void) {
  dist_ddp_options none = small_caps(), test = small_caps(), thread = small_caps();
  none.progress = DIST_DDP_PROGRESS_NONE;
  test.progress = DIST_DDP_PROGRESS_TEST;
  thread.progress = DIST_DDP_PROGRESS_THREAD;
  rig a = NO_RIG, b = NO_RIG;
  if (rig_open(&a, &none) && rig_open(&b, &test)) {
    for (int it = 0; it < 2; it++) {
      marker ma = MARK(&a), mb = MARK(&b);
      iterate(&a, 1100 + (uint64_t)it, &ma);
      iterate(&b, 1100 + (uint64_t)it, &mb);
      float *ga[NP], *gb[NP];
      grads_of(&a, ga), grads_of(&b, gb);
      EXPECT_SAME(ga, gb, "progress NONE vs TEST");
    }
  }
  rig_close(&a);
  int level = MPI_THREAD_SINGLE;
  dist_ddp *d = NULL;
  /* On Gloo, THREAD needs no thread (the calls complete before they return) and must just work too. */
  if (cunit_mpi_in_use() && (MPI_Query_thread(&level), level < MPI_THREAD_MULTIPLE)) {
    CALL_FAILS(dist_ddp_create(b.p, &thread, &d), DIST_ERR_UNSUPPORTED, "MPI_THREAD_MULTIPLE",
               "progress THREAD without MPI_THREAD_MULTIPLE");
    dist_ddp_destroy(d);
  } else { /* an MPI that grants more than asked, or Gloo: then THREAD must just work */
    rig c;
    if (rig_open(&c, &thread)) {
      marker mc = MARK(&c), mb = MARK(&b);
      iterate(&c, 1102, &mc);
      iterate(&b, 1102, &mb);
      float *gc[NP], *gb[NP];
      grads_of(&c, gc), grads_of(&b, gb);
      EXPECT_SAME(gc, gb, "progress THREAD vs TEST");
    }
    rig_close(&c);
  }
  rig_close(&b);
}

/* Options are part of the collective contract. */
static void test_options_mismatch(void) {
  rig r;
  if (!rig_open(&r, NULL)) {
    rig_close(&r);
    return;
  }
  for (int k = 0; k < 4; k++) {
    dist_ddp_options o = small_caps();
    if (R == W - 1) {
      if (k == 0) o.bucket_bytes = 2 * CAP;
      else if (k == 1) o.compress = DIST_DDP_COMPRESS_F16;
      else if (k == 2) o.unused = DIST_DDP_UNUSED_ZERO;
      else o.rebuild_buckets = 0;
    }
    dist_ddp *d = NULL;
    if (W == 1) CALL_OK(dist_ddp_create(r.p, &o, &d), "dist_ddp_create (nothing to differ from)");
    else CALL_FAILS(dist_ddp_create(r.p, &o, &d), DIST_ERR_MISMATCH, "different options", "options differ on one rank");
    dist_ddp_destroy(d);
  }
  /* NULL out on the last rank only: an error on every rank (the others are
   * not left waiting in the creation's agreement), naming it elsewhere. */
  dist_ddp_options o = small_caps();
  dist_ddp *d = NULL;
  if (W > 1)
    CALL_FAILS(dist_ddp_create(r.p, &o, R == W - 1 ? NULL : &d), DIST_ERR_INVALID_ARGUMENT,
               R == W - 1 ? "out is NULL" : "rank", "NULL out on one rank");
  CU_ASSERT_PTR_NULL(d);
  /* bad options: the same everywhere, an error naming the option */
  o.bucket_bytes = 0;
  CALL_FAILS(dist_ddp_create(r.p, &o, &d), DIST_ERR_INVALID_ARGUMENT, "bucket_bytes", "bucket_bytes = 0");
  o = small_caps();
  o.rebuild_buckets = 2;
  CALL_FAILS(dist_ddp_create(r.p, &o, &d), DIST_ERR_INVALID_ARGUMENT, "rebuild_buckets", "rebuild_buckets = 2");
  rig_close(&r);
}

/* Option structs of other headers' sizes (README, "Option structs"). */
static void test_options_struct_size(void) {
  rig r;
  dist_ddp_options small = small_caps();
  int nb_small = 0;
  if (rig_open(&r, &small)) nb_small = dist_ddp_bucket_count(r.d);
  rig_close(&r);
  /* An older caller whose struct ends before bucket_bytes: the default cap
   * (25 MiB) holds everything after the first bucket. */
  dist_ddp_options o = small_caps();
  o.struct_size = offsetof(dist_ddp_options, bucket_bytes);
  o.bucket_bytes = 1; /* beyond its struct: not read */
  if (rig_open(&r, &o)) {
    int n = 0;
    size_t bytes = 0;
    CU_ASSERT_EQUAL(dist_ddp_bucket_count(r.d), 2);
    CU_ASSERT(nb_small > 2);
    if (CALL_OK(dist_ddp_bucket_info(r.d, 0, &n, NULL, &bytes, NULL), "dist_ddp_bucket_info"))
      CU_ASSERT(bytes <= FIRST_CAP || n == 1); /* first_bucket_bytes was read */
  }
  rig_close(&r);
  if (!rig_open(&r, NULL)) {
    rig_close(&r);
    return;
  }
  /* Older still: group and rebuild_buckets (invalid here) are not read. */
  dist_ddp *d = NULL;
  o = small_caps();
  o.group = "no such group";
  o.rebuild_buckets = 5;
  CALL_FAILS(dist_ddp_create(r.p, &o, &d), DIST_ERR_UNKNOWN_GROUP, "no such group", "the whole struct is read");
  o.struct_size = offsetof(dist_ddp_options, group);
  CALL_OK(dist_ddp_create(r.p, &o, &d), "dist_ddp_create, struct without group and rebuild_buckets");
  if (d) CU_ASSERT_EQUAL(dist_ddp_bucket_count(d), nb_small);
  dist_ddp_destroy(d);
  d = NULL;
  /* A newer caller: zero bytes past our struct are accepted, others refused. */
  struct {
    dist_ddp_options o;
    int64_t more[2];
  } big;
  memset(&big, 0, sizeof big);
  big.o = small_caps();
  big.o.struct_size = sizeof big;
  CALL_OK(dist_ddp_create(r.p, &big.o, &d), "dist_ddp_create, newer struct with its new fields zero");
  if (d) CU_ASSERT_EQUAL(dist_ddp_bucket_count(d), nb_small);
  dist_ddp_destroy(d);
  d = NULL;
  big.more[1] = 3;
  char byte[64];
  snprintf(byte, sizeof byte, "byte %zu of dist_ddp_options", sizeof(dist_ddp_options) + sizeof(int64_t));
  CALL_FAILS(dist_ddp_create(r.p, &big.o, &d), DIST_ERR_INVALID_ARGUMENT, byte, "a newer field set");
  CU_ASSERT_PTR_NULL(d);
  /* A zeroed struct: says how to make one. */
  memset(&o, 0, sizeof o);
  CALL_FAILS(dist_ddp_create(r.p, &o, &d), DIST_ERR_INVALID_ARGUMENT, "initialize the struct with DIST_DDP_OPTIONS_INIT",
             "a zeroed struct");
  CU_ASSERT_PTR_NULL(d);
  rig_close(&r);
}

static CU_TestInfo param_tests[] = {{"commit broadcasts rank 0's values", test_commit_broadcast},
                                    {"broadcast, bad roots, max_divergence on one rank", test_params_broadcast},
                                    {"commit: a size differs", test_commit_size},
                                    {"commit: a dtype differs", test_commit_dtype},
                                    {"commit: the count differs", test_commit_count},
                                    CU_TEST_INFO_NULL};
static CU_TestInfo ddp_tests[] = {{"bucket layout", test_layout},
                                  {"gradients = full-batch gradients", test_grads},
                                  {"bf16 gradients", test_bf16},
                                  {"SGD steps = single process", test_sgd},
                                  {"Adam / AdamW steps = single process", test_adam},
                                  {"grad_as_bucket_view", test_bucket_view},
                                  {"scrambled mark order", test_scrambled},
                                  {"buckets rebuilt in the observed order", test_rebuild},
                                  {"no_sync accumulation", test_no_sync},
                                  {"unused = ZERO", test_unused_zero},
                                  {"unused = ERROR", test_unused_error},
                                  {"mark twice, finalize without marks", test_mark_errors},
                                  {"bf16 / f16 compression", test_compress},
                                  {"communication hook", test_hook},
                                  {"progress modes", test_progress},
                                  {"options differ across ranks", test_options_mismatch},
                                  {"option structs of older and newer headers", test_options_struct_size},
                                  CU_TEST_INFO_NULL};
static CU_SuiteInfo suites[] = {{"params", NULL, NULL, NULL, NULL, param_tests},
                                {"ddp", NULL, NULL, NULL, NULL, ddp_tests},
                                CU_SUITE_INFO_NULL};

int main(void) {
  return cunit_mpi_run(&(cunit_mpi_test){"test_ddp", suites, .rank = &R, .size = &W, .setup = cuda_cases_setup});
}
