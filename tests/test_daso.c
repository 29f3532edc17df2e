/* Distributed tests of DASO (daso.h), at 1, 2, 3 and 4 ranks.
 *
 * Node layouts. With DIST_RANKS_PER_NODE set by the launcher (e.g. 4 ranks
 * as 2 nodes of 2: "test_daso-np4-rpn2") only that layout runs. Without it
 * the program runs in rounds, re-initializing the manager: real nodes (on
 * one machine all ranks on one node: cross groups of one rank), then with
 * DIST_RANKS_PER_NODE set here, one rank per node (local groups of one) and,
 * at odd sizes, nodes of 2 and 1, which DASO must refuse. Every test below
 * runs in every even layout.
 *
 * Model: linear regression y = A x + b (weight 2x6, bias 2) with a
 * mean-squared loss; each rank trains on its own shard, rows being a pure
 * function of (rank, batch, row), so any rank can recompute any gradient.
 * Expected values are worked out by hand (merge formula) or come from an
 * independent run (the DDP reducer over the world, or the test's own SGD).
 *
 * Parameters in CUDA memory (builds with CUDA, when every rank sees a
 * device; else a SKIP line says why): the merge by hand and the regression
 * run again with the model's tensors cudaMalloc'd, each compared with the
 * same run on host memory. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_mem.h"
#include "cuda_skip.h"
#include "cunit_mpi.h"
#include "reducer/daso_internal.h" /* dist__daso_merge, dist__daso_pack: the arithmetic alone */
#include "core/fault.h"         /* dist__fault_site: fail one pack on purpose */

static int W, R;        /* world size and rank */
static int L, N;        /* ranks per node, nodes (this round) */
static int NODE, LRANK; /* mine */
static int *NODE_OF;    /* node of every world rank */
static int UNEVEN;      /* nodes of different sizes: only the refusal is tested */
static int RPN;         /* DIST_RANKS_PER_NODE this program set (0: the launcher's) */
static int VERIFY;      /* DIST_VERIFY is on (the default) */
static int DEV;         /* the manager's CUDA device (this round) */
static dist_memory MEM = DIST_MEM_HOST; /* where the models made next keep their tensors */

/* ---- checks ----------------------------------------------------------------- */

static void assert_at(int ok, int line, const char *what) {
  CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "", CU_FALSE);
}

#define CALL_OK(call) call_ok_((call), #call, __LINE__)
static int call_ok_(dist_status s, const char *what, int line) {
  if (s != DIST_SUCCESS)
    fprintf(stderr, "[rank %d/%d, %dx%d] line %d: %s returned %d (%s: %s)\n", R, W, N, L, line, what, (int)s,
            dist_status_string(s), dist_last_error());
  assert_at(s == DIST_SUCCESS, line, what);
  return s == DIST_SUCCESS;
}

#define CALL_FAILS(call, code, text) call_fails_((call), (code), (text), #call, __LINE__)
static void call_fails_(dist_status s, dist_status code, const char *text, const char *what, int line) {
  int ok = s == code && (!text || strstr(dist_last_error(), text));
  if (!ok)
    fprintf(stderr, "[rank %d/%d, %dx%d] line %d: %s returned %d (%s), expected %d with '%s'\n", R, W, N, L, line, what,
            (int)s, s ? dist_last_error() : "success", (int)code, text ? text : "");
  assert_at(ok, line, what);
}

#define CHECK(cond) check_((cond), #cond, __LINE__)
static int check_(int ok, const char *what, int line) {
  if (!ok) fprintf(stderr, "[rank %d/%d, %dx%d] line %d: failed: %s\n", R, W, N, L, line, what);
  assert_at(ok, line, what);
  return ok;
}

/* |got - want| <= tol * max(1, |want|). */
#define NEAR(got, want, tol) near_((got), (want), (tol), #got, __LINE__)
static int near_(double got, double want, double tol, const char *what, int line) {
  int ok = fabs(got - want) <= tol * fmax(1.0, fabs(want));
  if (!ok) fprintf(stderr, "[rank %d/%d, %dx%d] line %d: %s = %.9g, expected %.9g\n", R, W, N, L, line, what, got, want);
  assert_at(ok, line, what);
  return ok;
}

/* ---- model and data ------------------------------------------------------------ */

#define DIN 6
#define DOUT 2
#define NA (DOUT * DIN) /* weight elements */
#define NW (NA + DOUT)  /* all parameter elements */
#define ROWS 4          /* rows per batch */

static uint64_t hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}
static double unit2(uint64_t a, uint64_t b) { /* in [-1, 1) */
  return (double)(hash64(hash64(a + 0x5151ULL) ^ (b * 0x9e3779b97f4a7c15ULL)) >> 11) * 0x1p-52 - 1.0;
}

/* Row j of batch `bi` of `rank`'s shard: y = A* x + b* + noise. */
static void row(int rank, int bi, int j, double x[DIN], double t[DOUT]) {
  uint64_t id = ((uint64_t)rank * 256 + (uint64_t)bi) * 16 + (uint64_t)j;
  for (int k = 0; k < DIN; k++) x[k] = unit2(1, id * DIN + (uint64_t)k);
  for (int o = 0; o < DOUT; o++) {
    double y = 0.5 * unit2(3, (uint64_t)o) + 0.2 * unit2(4, id * DOUT + (uint64_t)o);
    for (int k = 0; k < DIN; k++) y += unit2(2, (uint64_t)(o * DIN + k)) * x[k];
    t[o] = y;
  }
}

/* Loss of batch bi of `rank` under parameters w; adds scale * gradient to g
 * when g is not NULL. Loss = mean over rows of 0.5 |y - t|^2. */
static double batch_loss(const float *w, float *g, int rank, int bi, double scale) {
  double loss = 0, gw[NW] = {0};
  for (int j = 0; j < ROWS; j++) {
    double x[DIN], t[DOUT];
    row(rank, bi, j, x, t);
    for (int o = 0; o < DOUT; o++) {
      double y = w[NA + o];
      for (int k = 0; k < DIN; k++) y += (double)w[o * DIN + k] * x[k];
      double e = y - t[o];
      loss += 0.5 * e * e / ROWS;
      gw[NA + o] += e / ROWS;
      for (int k = 0; k < DIN; k++) gw[o * DIN + k] += e * x[k] / ROWS;
    }
  }
  for (int i = 0; g && i < NW; i++) g[i] += (float)(scale * gw[i]);
  return loss;
}

/* Mean loss over every rank's whole shard. */
static double full_loss(const float *w, int batches) {
  double s = 0;
  for (int r = 0; r < W; r++)
    for (int b = 0; b < batches; b++) s += batch_loss(w, NULL, r, b, 1);
  return s / (W * batches);
}

/* A model: data, gradients, the parameter set over the world, a local SGD
 * and (once made) its DASO. In CUDA memory (MEM) the tensors are dw and dg,
 * and w and g their host copies: model_pull and model_push copy between them. */
typedef struct model {
  float w[NW], g[NW];
  float *dw, *dg;
  dist_params *p;
  dist_optim *o;
  dist_daso *d;
} model;

/* Copy m->w or m->g to its device tensor, or the device's data back to m->w;
 * no-ops for host models. 1 on success. */
static int model_push(model *m, const float *host) {
#ifdef HAVE_CUDA
  if (m->dw) return cuda_upload(host == m->w ? m->dw : m->dg, host, sizeof m->w);
#endif
  return 1;
}
static int model_pull(model *m) {
#ifdef HAVE_CUDA
  if (m->dw) return cuda_download(m->w, m->dw, sizeof m->w);
#endif
  return 1;
}

/* lin.weight and lin.bias: w and g, or (MEM is CUDA) device copies of them. */
static int model_add(model *m) {
  float *w = m->w, *g = m->g;
#ifdef HAVE_CUDA
  if (MEM == DIST_MEM_CUDA) {
    if (!(m->dw = cuda_copy_of(m->w, sizeof m->w)) || !(m->dg = cuda_copy_of(m->g, sizeof m->g))) return 0;
    w = m->dw, g = m->dg;
  }
#endif
  return CALL_OK(dist_params_add(m->p, "lin.weight", w, g, NA, DIST_F32, MEM, DEV, NULL)) &&
         CALL_OK(dist_params_add(m->p, "lin.bias", w + NA, g + NA, DOUT, DIST_F32, MEM, DEV, NULL));
}

/* Rank 0's initial values win at commit; `init` NaN: small seeded values. */
static int model_init(model *m, double lr, double momentum, double init) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < NW; i++) m->w[i] = isnan(init) ? (float)(0.3 * unit2(77 + (uint64_t)R, (uint64_t)i)) : (float)init;
  int ok = CALL_OK(dist_params_create(NULL, &m->p));
  ok = ok && model_add(m);
  ok = ok && CALL_OK(dist_params_commit(m->p)) && model_pull(m);
  dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
  so.lr = lr;
  so.momentum = momentum;
  ok = ok && CALL_OK(dist_optim_sgd(m->p, &so, &m->o));
  return ok;
}

/* The default options with these phase lengths (epochs). */
static dist_daso_options phases(int total, int warmup, int cooldown) {
  dist_daso_options o = DIST_DASO_OPTIONS_INIT;
  o.total_epochs = total;
  o.warmup_epochs = warmup;
  o.cooldown_epochs = cooldown;
  return o;
}

static int model_daso(model *m, double lr, double momentum, double init, const dist_daso_options *o, int batches) {
  if (!model_init(m, lr, momentum, init)) return 0;
  if (!CALL_OK(dist_daso_create(m->o, o, &m->d))) return 0;
  return CALL_OK(dist_daso_set_last_batch(m->d, batches - 1));
}

static void model_free(model *m) {
  dist_daso_destroy(m->d);
  dist_optim_destroy(m->o);
  dist_params_destroy(m->p);
#ifdef HAVE_CUDA
  if (m->dw) CUDA_CHECK(cudaFree(m->dw));
  if (m->dg) CUDA_CHECK(cudaFree(m->dg));
#endif
}

/* One DASO iteration on batch bi of my shard, the loss scaled by `scale`.
 * A device model's gradients are computed on the host and copied in, and
 * its parameters copied back after the step. A failed copy is a CUnit
 * failure (cuda_mem.h); the step runs all the same, so that no rank waits. */
static dist_status daso_batch(model *m, int bi, double scale, double *loss) {
  dist_status s = dist_daso_zero_grad(m->d);
  if (s) return s;
  if (m->dw) memset(m->g, 0, sizeof m->g); /* as zero_grad left the device's */
  double l = batch_loss(m->w, m->g, R, bi, scale);
  if (loss) *loss = l;
  model_push(m, m->g);
  if ((s = dist_daso_mark_ready(m->d, 1)) || (s = dist_daso_mark_ready(m->d, 0))) return s;
  s = dist_daso_step(m->d);
  model_pull(m);
  return s;
}

static dist_daso_state state_of(const model *m) {
  dist_daso_state st;
  memset(&st, 0xff, sizeof st);
  CALL_OK(dist_daso_state_get(m->d, &st));
  return st;
}

static double divergence(model *m) {
  double dv = -1;
  CALL_OK(dist_params_max_divergence(m->p, &dv));
  return dv;
}

/* ---- merge arithmetic ------------------------------------------------------------ */

/* dist__daso_merge with numbers small enough to do by hand (f64 parameters,
 * f32 wire). ref + sum/N is the mean of what the nodes sent; w = 2 btw (1
 * when btw is 0). */
static void merge64(double *p, double *ref, const float *sum, int64_t n, int nodes, int btw, int blocking) {
  dist__daso_merge(DIST_F64, p, ref, DIST_F32, sum, n, nodes, btw, blocking);
}

static void test_merge_formula(void) {
  double p[2], ref[2];
  const float sum[2] = {2, -6}; /* sum over nodes of (p_sent - ref) */
  /* N = 2, btw = 2: w = 4, mean = ref + sum/2 = {2, -1}; p = (4 p + 2 mean) / 6. */
  p[0] = 5, p[1] = 2, ref[0] = 1, ref[1] = 2;
  merge64(p, ref, sum, 2, 2, 2, 0);
  CHECK(p[0] == 4 && p[1] == 1);
  CHECK(ref[0] == 2 && ref[1] == -1);
  /* btw = 1: w = 2: p = (2 p + 2 mean) / 4. */
  p[0] = 5, p[1] = 2, ref[0] = 1, ref[1] = 2;
  merge64(p, ref, sum, 2, 2, 1, 0);
  CHECK(p[0] == 3.5 && p[1] == 0.5);
  /* btw = 0: weight 1, not 0: p = (p + 2 mean) / 3. */
  p[0] = 5, p[1] = 2, ref[0] = 1, ref[1] = 2;
  merge64(p, ref, sum, 2, 2, 0, 0);
  CHECK(p[0] == 3 && p[1] == 0);
  /* Blocking: the plain mean, whatever btw. */
  p[0] = 5, p[1] = 2, ref[0] = 1, ref[1] = 2;
  merge64(p, ref, sum, 2, 2, 3, 1);
  CHECK(p[0] == 2 && p[1] == -1);
  CHECK(ref[0] == 2 && ref[1] == -1);
  /* N = 4, btw = 3: w = 6, mean = 0 + 8/4 = 2: p = (6 * 9 + 4 * 2) / 10. */
  double q = 9, r = 0;
  const float s = 8;
  merge64(&q, &r, &s, 1, 4, 3, 0);
  CHECK(q == 6.2 && r == 2);
  /* The same in f32 parameters with a bf16 wire (8 is a bf16 number). */
  float qf = 9, rf = 0;
  uint16_t sb = dist_f32_to_bf16(8);
  dist__daso_merge(DIST_F32, &qf, &rf, DIST_BF16, &sb, 1, 4, 3, 0);
  CHECK(qf == 6.2f && rf == 2);
  /* Delta merge: mean = ref + sum/N = {2, -1}; p += mean - own_sent. */
  const double own[2] = {4, 1};
  p[0] = 5, p[1] = 2, ref[0] = 1, ref[1] = 2;
  dist__daso_merge_delta(DIST_F64, p, ref, DIST_F32, sum, own, 2, 2);
  CHECK(p[0] == 3 && p[1] == 0);
  CHECK(ref[0] == 2 && ref[1] == -1);
}

/* dist__daso_pack against element-by-element conversions, and its flag. */
static void test_pack(void) {
  enum { N = 37 }; /* not a multiple of any vector width */
  float p[N], ref[N], sent[N];
  uint16_t wire[N];
  for (int k = 0; k < N; k++) p[k] = 1.0f + 0.37f * k, ref[k] = 0.5f * k - 3.0f;
  CHECK(dist__daso_pack(DIST_F32, p, ref, sent, DIST_BF16, wire, N) == 0);
  int same = 1;
  for (int k = 0; k < N; k++) {
    uint16_t want = dist_f32_to_bf16(p[k] - ref[k]);
    same &= wire[k] == want && sent[k] == ref[k] + dist_bf16_to_f32(want);
  }
  CHECK(same);
  /* f16 wire: a change beyond 65504 is flagged, and so are NaN and inf. */
  p[3] = 1e6f;
  CHECK(dist__daso_pack(DIST_F32, p, ref, NULL, DIST_F16, wire, N) == 1);
  CHECK(dist__daso_pack(DIST_F32, p, ref, NULL, DIST_BF16, wire, N) == 0);
  p[N - 1] = NAN;
  CHECK(dist__daso_pack(DIST_F32, p, ref, NULL, DIST_BF16, wire, N) == 1);
  p[N - 1] = 0, p[0] = -INFINITY;
  CHECK(dist__daso_pack(DIST_F32, p, ref, NULL, DIST_BF16, wire, N) == 1);
  /* f64 parameters, f32 wire: the change is rounded once, to f32. */
  double pd[2] = {1.0 + 1e-12, 3.0}, rd[2] = {1.0, -1.0}, sd[2];
  float wf[2];
  CHECK(dist__daso_pack(DIST_F64, pd, rd, sd, DIST_F32, wf, 2) == 0);
  CHECK(wf[0] == (float)(pd[0] - rd[0]) && wf[0] != 0 && wf[1] == 4.0f && sd[1] == 3.0);
  pd[1] = 1e300; /* finite in f64, not in f32 */
  CHECK(dist__daso_pack(DIST_F64, pd, rd, NULL, DIST_F32, wf, 2) == 1);
}

/* ---- layout and creation ------------------------------------------------------------ */

static void test_layout(void) {
  int l = -1, n = -1;
  CALL_OK(dist_manager_local_size(&l));
  CALL_OK(dist_manager_node_count(&n));
  model m;
  dist_daso_options o = DIST_DASO_OPTIONS_INIT;
  o.total_epochs = 2;
  if (!model_init(&m, 0.1, 0, NAN)) {
    model_free(&m);
    return;
  }
  dist_status s = dist_daso_create(m.o, &o, &m.d);
  if (UNEVEN) {
    /* Every rank fails (nobody hangs), with the sizes named. */
    CALL_FAILS(s, DIST_ERR_UNSUPPORTED, "the same number on every node");
    CHECK(m.d == NULL);
  } else {
    CALL_OK(s);
    CHECK(n * l == W && N == n && L == l);
    if (RPN) CHECK(L == RPN); /* 1: local groups of one rank; W: one node, cross groups of one */
    dist_daso_state st = state_of(&m);
    CHECK(st.epoch == 0 && st.batch == 0 && st.sends_pending == 0 && st.skipped_steps == 0);
    CHECK(st.global_skips == 0 && st.batches_to_wait == 0 && st.local_sync == 1); /* warmup: blocking */
  }
  model_free(&m);
}

static void test_option_errors(void) {
  if (UNEVEN) return;
  model m;
  if (!model_init(&m, 0.1, 0, NAN)) {
    model_free(&m);
    return;
  }
  struct {
    const char *name;
    dist_daso_options o;
  } bad[16];
  int nb = 0;
  dist_daso_options good = DIST_DASO_OPTIONS_INIT;
  good.total_epochs = 10;
  good.sending_chunk_size = 100;
#define BAD_OPT(field, value)   \
  bad[nb].name = #field " = ";  \
  bad[nb].o = good;             \
  bad[nb].o.field = value;      \
  nb++
  BAD_OPT(total_epochs, 0);
  BAD_OPT(warmup_epochs, -1);
  BAD_OPT(cooldown_epochs, -1);
  BAD_OPT(stability_level, 1.0);
  BAD_OPT(stability_level, -0.01);
  BAD_OPT(stability_level, NAN);
  BAD_OPT(max_global_skips, 0);
  BAD_OPT(merge, 2);
  BAD_OPT(sending_chunk_size, 0);
  BAD_OPT(downcast, DIST_F64);
  BAD_OPT(use_mpi_groups, 2);
  BAD_OPT(skip_reduction_factor, 1);
  BAD_OPT(local_skip_factor, 0);
  BAD_OPT(verbose, 2);
#undef BAD_OPT
  for (int i = 0; i < nb; i++) {
    dist_daso *d = NULL;
    dist_status s = dist_daso_create(m.o, &bad[i].o, &d);
    if (!CHECK(s == DIST_ERR_INVALID_ARGUMENT && strstr(dist_last_error(), bad[i].name) && d == NULL))
      fprintf(stderr, "  option %s: %d '%s'\n", bad[i].name, (int)s, dist_last_error());
  }
  dist_daso *d = NULL;
  CALL_FAILS(dist_daso_create(NULL, &good, &d), DIST_ERR_INVALID_ARGUMENT, "optimizer");
  CALL_FAILS(dist_daso_create(m.o, NULL, &d), DIST_ERR_INVALID_ARGUMENT, "options");
  CALL_FAILS(dist_daso_create(m.o, &good, NULL), DIST_ERR_INVALID_ARGUMENT, "out");
  /* The good options are good. */
  CALL_OK(dist_daso_create(m.o, &good, &m.d));
  /* NULL handles elsewhere. */
  dist_daso_state st;
  CALL_FAILS(dist_daso_step(NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_mark_ready(NULL, 0), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_zero_grad(NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_set_last_batch(NULL, 1), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_epoch_loss_logic(NULL, 1, 1), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_reset(NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_add_scaler(NULL, NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_state_get(NULL, &st), DIST_ERR_INVALID_ARGUMENT, "NULL");
  CALL_FAILS(dist_daso_state_get(m.d, NULL), DIST_ERR_INVALID_ARGUMENT, "NULL");
  dist_daso_destroy(NULL);
  if (m.d) {
    /* A step needs the epoch's length first. */
    CALL_FAILS(dist_daso_step(m.d), DIST_ERR_INVALID_ARGUMENT, "dist_daso_set_last_batch");
    CALL_FAILS(dist_daso_set_last_batch(m.d, -1), DIST_ERR_INVALID_ARGUMENT, "last_batch = -1");
    CALL_OK(dist_daso_set_last_batch(m.d, 0));
    CALL_OK(daso_batch(&m, 0, 1, NULL));
  }
  model_free(&m);

  /* A parameter set over a smaller group than the world. */
  if (W > 1) {
    model h;
    memset(&h, 0, sizeof h);
    CALL_OK(dist_group_create_subgroup("daso_half", W / 2, NULL));
    CALL_OK(dist_params_create("daso_half", &h.p));
    CALL_OK(dist_params_add_host(h.p, "w", h.w, h.g, NW, NULL));
    CALL_OK(dist_params_commit(h.p));
    dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
    CALL_OK(dist_optim_sgd(h.p, &so, &h.o));
    CALL_FAILS(dist_daso_create(h.o, &good, &h.d), DIST_ERR_INVALID_ARGUMENT, "'world'");
    model_free(&h);
  }
}

/* Option structs of other headers' sizes (README, "Option structs"): the
 * embedded `local` is read with its own struct_size, and its errors reach
 * every rank. */
static void test_option_struct_sizes(void) {
  if (UNEVEN) return;
  model m;
  if (!model_init(&m, 0.1, 0, NAN)) {
    model_free(&m);
    return;
  }
  dist_daso *d = NULL;
  dist_daso_options o = phases(10, 4, 4);
  o.local.rebuild_buckets = 7; /* invalid, when read */
  CALL_FAILS(dist_daso_create(m.o, &o, &d), DIST_ERR_INVALID_ARGUMENT, "rebuild_buckets");
  /* An older caller whose dist_ddp_options ended before group: the fields
   * after it are not read, and its dist_daso_options ends with it. */
  o.local.struct_size = offsetof(dist_ddp_options, group);
  o.struct_size = offsetof(dist_daso_options, local) + o.local.struct_size;
  if (CALL_OK(dist_daso_create(m.o, &o, &d))) dist_daso_destroy(d);
  d = NULL;
  /* `local` zeroed: named, with its own INIT macro, on every rank. */
  o = phases(10, 4, 4);
  memset(&o.local, 0, sizeof o.local);
  CALL_FAILS(dist_daso_create(m.o, &o, &d), DIST_ERR_INVALID_ARGUMENT, "dist_daso_options.local.struct_size is 0");
  CHECK(strstr(dist_last_error(), "DIST_DDP_OPTIONS_INIT") != NULL);
  /* A newer caller with a field set past our struct; the whole struct zeroed. */
  struct {
    dist_daso_options o;
    int64_t more;
  } big;
  memset(&big, 0, sizeof big);
  big.o = phases(10, 4, 4);
  big.o.struct_size = sizeof big;
  big.more = 1;
  CALL_FAILS(dist_daso_create(m.o, &big.o, &d), DIST_ERR_INVALID_ARGUMENT, "of dist_daso_options");
  memset(&o, 0, sizeof o);
  CALL_FAILS(dist_daso_create(m.o, &o, &d), DIST_ERR_INVALID_ARGUMENT, "DIST_DASO_OPTIONS_INIT");
  CHECK(d == NULL);
  model_free(&m);
}

/* Bad input on one rank only: create agrees before any collective that
 * could wait, so every rank fails (the others naming the rank) instead of
 * some ranks waiting for the one that gave up. Options that are valid but
 * differ between ranks would part the ranks' schedules (a sender waiting
 * for a send never posted): refused on every rank. */
static void test_one_rank_errors(void) {
  if (UNEVEN || W == 1) return;
  model m;
  if (!model_init(&m, 0.1, 0, NAN)) {
    model_free(&m);
    return;
  }
  int odd = R == W - 1;
  dist_daso_options o = DIST_DASO_OPTIONS_INIT;
  o.total_epochs = 10;
  dist_daso *d = NULL;
  dist_status s = dist_daso_create(m.o, odd ? NULL : &o, &d);
  CALL_FAILS(s, DIST_ERR_INVALID_ARGUMENT, odd ? "options is NULL" : "failed on rank");
  CHECK(d == NULL);
  dist_daso_options bad = o;
  if (odd) bad.stability_level = 2;
  CALL_FAILS(dist_daso_create(m.o, &bad, &d), DIST_ERR_INVALID_ARGUMENT, odd ? "stability_level" : "failed on rank");
  const char *fields[] = {"warmup_epochs", "sending_chunk_size", "use_mpi_groups", "downcast", "schedule"};
  dist_lr_schedule sch = {DIST_LR_EXPONENTIAL, 0, 0.5, NULL, NULL};
  for (int f = 0; f < 5; f++) {
    dist_daso_options x = o;
    if (odd) {
      if (f == 0) x.warmup_epochs = 1;
      if (f == 1) x.sending_chunk_size = 7;
      if (f == 2) x.use_mpi_groups = 0;
      if (f == 3) x.downcast = DIST_F32;
      if (f == 4) x.schedule = &sch;
    }
    s = dist_daso_create(m.o, &x, &d);
    if (!CHECK(s == DIST_ERR_MISMATCH && strstr(dist_last_error(), "different options") && d == NULL))
      fprintf(stderr, "  %s differing: %d '%s'\n", fields[f], (int)s, dist_last_error());
  }
  /* verbose may differ (it only decides what rank 0 prints). */
  dist_daso_options v = o;
  v.verbose = odd;
  CALL_OK(dist_daso_create(m.o, &v, &m.d));
  model_free(&m);
}

/* ---- agreement after every blocking global sync ------------------------------------- */

#define AG_EPOCHS 5
#define AG_BATCHES 6

/* warmup 1, cooldown 1: epochs 1..3 cycle (sends received a batch later),
 * the last batch of each epoch and all of epochs 0 and 4 are blocking. */
static void agreement(dist_dtype downcast) {
  if (UNEVEN) return;
  dist_daso_options o = phases(AG_EPOCHS, 1, 1);
  o.downcast = downcast;
  o.sending_chunk_size = 7; /* 3 chunks */
  model m;
  if (!model_daso(&m, 0.05, 0.9, NAN, &o, AG_BATCHES)) {
    model_free(&m);
    return;
  }
  int checked = 0, bad = 0, pending_seen = 0;
  double spread = 0; /* divergence seen between nodes while cycling */
  for (int e = 0; e < AG_EPOCHS && !bad; e++) {
    double loss = 0, l;
    for (int b = 0; b < AG_BATCHES && !bad; b++) {
      if (!CALL_OK(daso_batch(&m, b, 1, &l))) bad = 1;
      loss += l / AG_BATCHES;
      dist_daso_state st = state_of(&m);
      pending_seen |= st.sends_pending;
      int blocking = e < 1 || e >= AG_EPOCHS - 1 || b == AG_BATCHES - 1;
      double dv = divergence(&m);
      if (blocking) {
        checked++;
        if (!CHECK(dv == 0)) fprintf(stderr, "  epoch %d batch %d: divergence %g after a blocking sync\n", e, b, dv);
        if (dv != 0) bad = 1;
      } else {
        spread = fmax(spread, dv);
      }
      /* The manager's epoch / batch counters follow ours. */
      if (!CHECK(st.epoch == (b == AG_BATCHES - 1 ? e + 1 : e) && st.batch == (b + 1) % AG_BATCHES)) bad = 1;
    }
    CALL_OK(dist_daso_epoch_loss_logic(m.d, loss, 0));
  }
  CHECK(checked == AG_BATCHES * 2 + (AG_EPOCHS - 2));
  CHECK(pending_seen);      /* non-blocking sends happened */
  if (N > 1) CHECK(spread > 0); /* nodes really drifted apart between syncs */
  model_free(&m);
}

static void test_agree_bf16(void) { agreement(DIST_BF16); }
static void test_agree_f16(void) { agreement(DIST_F16); }
static void test_agree_f32(void) { agreement(DIST_F32); }

/* ---- the merge, distributed ------------------------------------------------------------ */

/* lr = 0: parameters change only by global syncs. Every rank starts from
 * OFF (the agreed ref), then node n holds p = OFF + c_n m_k with c_n = n + 1,
 * m_k = 1 + k % 3. Warmup 0 starts cycling at (gs, ls, btw) = (4, 1, 1):
 * batch 0 sends from local rank 0, batch 1 receives and merges with w = 2:
 *     q_n = OFF + (2 c_n m_k + S m_k) / (N + 2),  S = sum of c_n = N (N + 1) / 2,
 * batch 4 sends (local rank 1 when there is one), batch 5 merges:
 *     r_n = OFF + (2 (q_n - OFF) + S m_k) / (N + 2)   (the q_n sum as the p_n did),
 * batch 8 sends, and batch 9, the last, merges it and averages blocking: the
 * mean OFF + S m_k / N everywhere (merges preserve the sum over nodes).
 * OFF = 1 + 2^-12 is not a bf16 number but every change c_n m_k is: the
 * first merge is exact only if the change, not the parameter, is downcast.
 * `trace` (may be NULL) receives the parameters after every batch. */
#define OFF (1 + 0x1p-12)
#define MR_BATCHES 10
static void merge_run(dist_dtype downcast, float (*trace)[NW]) {
  if (UNEVEN) return;
  dist_daso_options o = phases(1, 0, 0);
  o.downcast = downcast;
  o.sending_chunk_size = 5; /* 4 chunks of (NW + 1) */
  model m;
  if (!model_daso(&m, 0.0, 0.0, OFF, &o, MR_BATCHES)) {
    model_free(&m);
    return;
  }
  const double S = N * (N + 1) / 2.0, c = NODE + 1;
  /* First merge: differences are small integers, exact in bf16 too. Later
   * ones round each node's change to the wire's precision. */
  const double tol1 = 1e-7, tol = downcast == DIST_F32 ? 1e-6 : 2e-2;
  const size_t wire = downcast == DIST_F32 ? 4 : 2;
  for (int k = 0; k < NW; k++) m.w[k] = (float)(OFF + c * (1 + k % 3));
  model_push(&m, m.w);
  for (int b = 0; b < MR_BATCHES; b++) {
    if (!CALL_OK(daso_batch(&m, b, 1, NULL))) break;
    if (trace) memcpy(trace[b], m.w, sizeof m.w);
    dist_daso_state st = state_of(&m);
    int bad = 0;
    for (int k = 0; k < NW && !bad; k++) {
      double mk = 1 + k % 3, q = (2 * c * mk + S * mk) / (N + 2), r = (2 * q + S * mk) / (N + 2);
      double want = OFF + (b < 1 ? c * mk : b < 5 ? q : b < 9 ? r : S * mk / N);
      bad = !near_(m.w[k], want, b < 5 ? tol1 : tol, "merged parameter", __LINE__);
      if (bad) fprintf(stderr, "  after batch %d, element %d\n", b, k);
    }
    /* A send is in flight from batches 0, 4 and 8 to the next batch. */
    CHECK(st.sends_pending == (b == 0 || b == 4 || b == 8));
    if (b == 0) { /* only local rank 0's cross group sent: NW + 1 wire elements */
      CHECK(st.global_bytes_sent == (LRANK == 0 ? (NW + 1) * wire : 0));
      CHECK(st.global_syncs == (LRANK == 0 ? 1u : 0u));
    }
    if (bad) break;
  }
  CHECK(divergence(&m) == 0);
  model_free(&m);
}

static void test_merge_bf16(void) { merge_run(DIST_BF16, NULL); }
static void test_merge_f32(void) { merge_run(DIST_F32, NULL); }

/* ---- training: DASO against the DDP reducer --------------------------------------------- */

#define TR_EPOCHS 12
#define TR_BATCHES 10
#define TR_LR 0.05
#define TR_MOMENTUM 0.9

/* The same problem with the DDP reducer over the world: the reference. */
static double train_ddp(float *wout) {
  model m;
  dist_ddp *ddp = NULL;
  double loss = NAN;
  if (model_init(&m, TR_LR, TR_MOMENTUM, NAN) && CALL_OK(dist_ddp_create(m.p, NULL, &ddp))) {
    for (int e = 0; e < TR_EPOCHS; e++)
      for (int b = 0; b < TR_BATCHES; b++) {
        memset(m.g, 0, sizeof m.g);
        batch_loss(m.w, m.g, R, b, 1);
        CALL_OK(dist_ddp_mark_ready(ddp, 1));
        CALL_OK(dist_ddp_mark_ready(ddp, 0));
        CALL_OK(dist_ddp_finalize(ddp));
        CALL_OK(dist_optim_step(m.o));
      }
    loss = full_loss(m.w, TR_BATCHES);
    if (wout) memcpy(wout, m.w, sizeof m.w);
  }
  dist_ddp_destroy(ddp);
  model_free(&m);
  return loss;
}

/* Only a hundredfold drop counts as progress: the phase moves every third
 * epoch, (4,1,1) -> (2,1,1) -> (1,1,1) -> (max, max/4, max/4). */
static int tr_merge = DIST_DASO_MERGE_HEAT;

static double train_daso(int max_global_skips, int *pending_seen, float *wout) {
  dist_daso_options o = DIST_DASO_OPTIONS_INIT;
  o.merge = tr_merge;
  o.total_epochs = TR_EPOCHS;
  o.warmup_epochs = 1;
  o.cooldown_epochs = 1;
  o.stability_level = 0.99;
  o.max_global_skips = max_global_skips;
  o.verbose = getenv("DASO_VERBOSE") != NULL;
  model m;
  double loss = NAN;
  *pending_seen = 0;
  if (model_daso(&m, TR_LR, TR_MOMENTUM, NAN, &o, TR_BATCHES)) {
    for (int e = 0; e < TR_EPOCHS; e++) {
      double el = 0, l;
      for (int b = 0; b < TR_BATCHES; b++) {
        CALL_OK(daso_batch(&m, b, 1, &l));
        el += l / TR_BATCHES;
        *pending_seen |= state_of(&m).sends_pending;
        /* Blocking syncs agree here too, after phases without local syncs. */
        if ((e < 1 || e >= TR_EPOCHS - 1 || b == TR_BATCHES - 1) && !CHECK(divergence(&m) == 0))
          fprintf(stderr, "  epoch %d batch %d\n", e, b);
      }
      CALL_OK(dist_daso_epoch_loss_logic(m.d, el, 0));
    }
    CHECK(divergence(&m) == 0);
    loss = full_loss(m.w, TR_BATCHES);
    if (wout) memcpy(wout, m.w, sizeof m.w);
  }
  model_free(&m);
  return loss;
}

static void test_converges_like_ddp(void) {
  if (UNEVEN) return;
  int pending = 0;
  double start;
  {
    float w0[NW];
    for (int i = 0; i < NW; i++) w0[i] = (float)(0.3 * unit2(77, (uint64_t)i)); /* rank 0's initial values */
    start = full_loss(w0, TR_BATCHES);
  }
  double ddp = train_ddp(NULL), daso = train_daso(8, &pending, NULL); /* ends in (8,2,2): local syncs skipped */
  if (R == 0) printf("  [%dx%d] loss: start %.6f, DDP %.6f, DASO %.6f\n", N, L, start, ddp, daso);
  CHECK(ddp < 0.1 * start); /* the problem was learnt at all */
  if (!CHECK(fabs(daso - ddp) <= 0.05 * ddp)) fprintf(stderr, "  DASO loss %g vs DDP %g\n", daso, ddp);
  CHECK(pending); /* cycling happened: at least one non-blocking send */
}

/* The same with merge = DELTA (each rank keeps its progress since its send):
 * also within 5 % of DDP. */
static void test_converges_delta(void) {
  if (UNEVEN) return;
  int pending = 0;
  double ddp = train_ddp(NULL);
  tr_merge = DIST_DASO_MERGE_HEAT;
  double heat = train_daso(8, &pending, NULL);
  tr_merge = DIST_DASO_MERGE_DELTA;
  double delta = train_daso(8, &pending, NULL);
  tr_merge = DIST_DASO_MERGE_HEAT;
  if (R == 0) printf("  [%dx%d] loss: DDP %.6f, DASO heat merge %.6f, delta merge %.6f\n", N, L, ddp, heat, delta);
  CHECK(fabs(delta - ddp) <= 0.05 * ddp);
  CHECK(delta != heat || N == 1); /* the option changed the merge (nodes > 1) */
}

/* One node: cross groups of one rank, so the global sync has nothing to
 * average and must leave the parameters alone (daso.h: a no-op). With
 * local skips kept at 1 (max_global_skips 4: the cycle returns to (4,1,1))
 * DASO is then the node's DDP, which here is the world's: the same
 * arithmetic as the reference, up to summation order. */
static void test_one_node_is_ddp(void) {
  if (UNEVEN || N != 1) return;
  int pending = 0;
  float wd[NW], wa[NW];
  train_ddp(wd);
  train_daso(4, &pending, wa);
  for (int i = 0; i < NW; i++)
    if (!NEAR(wa[i], wd[i], 1e-5)) break;
}

/* ---- NaN in a sent buffer --------------------------------------------------------------- */

/* One rank poisons the sync that finds it: a sender of that sync, on the
 * last node (local rank 1 % L at warmup's batch 1, which is blocking; local
 * rank 0 when cycling: batch 0 sends, batch 1 receives). NaN: a parameter
 * written after the backward, so no gradient spreads it; every rank must
 * fail, naming NaN. FAULT: its pack fails (injected, as a failed device copy
 * would); it still joins the all-reduce with the error flag set, so every
 * rank fails at the receive instead of waiting for it, and the victim names
 * its own reason. Nothing may hang either way. */
enum { POISON_NAN, POISON_FAULT };

static void poison_run(int warmup, int how) {
  if (UNEVEN) return;
  dist_daso_options o = phases(3, warmup, 0);
  model m;
  if (!model_daso(&m, 0.05, 0, NAN, &o, 6)) {
    model_free(&m);
    return;
  }
  int victim = NODE == N - 1 && LRANK == (warmup ? 1 % L : 0);
  dist_status s = DIST_SUCCESS;
  for (int b = 0; b < 2; b++) {
    CALL_OK(dist_daso_zero_grad(m.d));
    batch_loss(m.w, m.g, R, b, 1);
    CALL_OK(dist_daso_mark_ready(m.d, 1));
    CALL_OK(dist_daso_mark_ready(m.d, 0));
    if (victim && b == (warmup ? 1 : 0)) {
      if (how == POISON_NAN) m.w[3] = NAN;
      else dist__fault_site = "daso_pack";
    }
    s = dist_daso_step(m.d);
    if (b == 0) {
      CALL_OK(s);
      if (how == POISON_NAN) CHECK(state_of(&m).sends_pending == !warmup); /* cycling: the poisoned send is in flight */
    }
  }
  if (how == POISON_NAN) CALL_FAILS(s, DIST_ERR_INVALID_ARGUMENT, "NaN");
  else {
    CHECK(s != DIST_SUCCESS);
    if (victim) CALL_FAILS(s, DIST_ERR_INTERNAL, "could not send its parameters: injected fault");
    else CHECK(strstr(dist_last_error(), "send") != NULL);
    CHECK(dist__fault_site == NULL); /* the fault was hit */
  }
  CHECK(state_of(&m).sends_pending == 0);
  model_free(&m); /* nothing in flight: destroy completes */
}

/* A poisoned send still in flight at reset: reset completes it, discards
 * the failed outcome (logged) and restarts every rank from rank 0's
 * parameters, so training goes on. */
static void test_reset_after_nan(void) {
  if (UNEVEN) return;
  dist_daso_options o = phases(3, 0, 0);
  model m;
  if (!model_daso(&m, 0.05, 0, NAN, &o, 6)) {
    model_free(&m);
    return;
  }
  int victim = NODE == N - 1 && LRANK == 0; /* a sender of batch 0 */
  CALL_OK(dist_daso_zero_grad(m.d));
  batch_loss(m.w, m.g, R, 0, 1);
  CALL_OK(dist_daso_mark_ready(m.d, 1));
  CALL_OK(dist_daso_mark_ready(m.d, 0));
  if (victim) m.w[3] = NAN;
  CALL_OK(dist_daso_step(m.d)); /* sent, flagged: found at the receive */
  CHECK(state_of(&m).sends_pending == 1);
  if (victim) m.w[3] = 0;
  CALL_OK(dist_daso_reset(m.d));
  CHECK(state_of(&m).sends_pending == 0 && divergence(&m) == 0);
  for (int b = 0; b < 6; b++) CALL_OK(daso_batch(&m, b, 1, NULL));
  CHECK(state_of(&m).epoch == 1 && divergence(&m) == 0);
  model_free(&m);
}

static void test_nan_blocking(void) { poison_run(1, POISON_NAN); }
static void test_nan_nonblocking(void) { poison_run(0, POISON_NAN); }
static void test_fault_blocking(void) { poison_run(1, POISON_FAULT); }
static void test_fault_nonblocking(void) { poison_run(0, POISON_FAULT); }

/* ---- a failure on one rank before or inside a sync -------------------------------------- */

/* One iteration in which the backward marks both parameters and the step
 * runs whatever the marks returned (as a training loop that checks only
 * the step's status would). */
static dist_status batch_no_early_exit(model *m, int bi) {
  dist_status s = dist_daso_zero_grad(m->d);
  batch_loss(m->w, m->g, R, bi, 1);
  dist_status a = dist_daso_mark_ready(m->d, 1), b = dist_daso_mark_ready(m->d, 0);
  dist_status t = dist_daso_step(m->d);
  return s ? s : a ? a : b ? b : t;
}

/* One rank fails before the global sync of its batch: its gradient copy into
 * the node's DDP bucket (FAULT_COPY, injected as a failed device copy would
 * be), or the gradient scaler (FAULT_UNSCALE). Its step must still take part
 * in the sync, which the other nodes have entered: before the fix the other
 * nodes waited in it for ever. Blocking (warmup): the sync of batch 1 is an
 * average of the parameters, so every rank agrees right after it although
 * one rank missed its step. Non-blocking (cycling: batch 0 sends, batch 1
 * receives): the failing sender still sends. Either way only the failing
 * rank (FAULT_UNSCALE) or its node (FAULT_COPY, agreed by the node's DDP
 * finalize) sees the error, and the epoch's last, blocking, sync leaves all
 * ranks equal. */
enum { FAULT_COPY, FAULT_UNSCALE };
static double unit_scale(void *ctx) { return ((void)ctx, 1.0); }

static void local_failure_run(int warmup, int how) {
  if (UNEVEN) return;
  dist_daso_options o = phases(3, warmup, 0);
  model m;
  if (!model_daso(&m, 0.05, 0, NAN, &o, 4)) {
    model_free(&m);
    return;
  }
  dist_grad_scaler gs = {unit_scale, NULL, NULL};
  if (how == FAULT_UNSCALE) CALL_OK(dist_daso_add_scaler(m.d, &gs));
  int victim = R == W - 1, at = warmup ? 1 : 0;
  for (int b = 0; b < 4; b++) {
    if (victim && b == at) dist__fault_site = how == FAULT_COPY ? "ddp_copy" : "daso_unscale";
    dist_status s = batch_no_early_exit(&m, b);
    /* The node's DDP finalize agrees (DIST_VERIFY=1): the victim's node fails. */
    int fails = b == at && (how == FAULT_COPY && VERIFY ? NODE == NODE_OF[W - 1] : victim);
    if (fails) CALL_FAILS(s, DIST_ERR_INTERNAL, victim ? (how == FAULT_COPY ? "ddp_copy" : "daso_unscale") : NULL);
    else CALL_OK(s);
    if (warmup && b == at) CHECK(divergence(&m) == 0); /* the blocking sync ran with the victim */
  }
  CHECK(dist__fault_site == NULL);
  CHECK(state_of(&m).epoch == 1 && state_of(&m).sends_pending == 0);
  CHECK(divergence(&m) == 0);
  model_free(&m);
}

static void test_copy_fault_blocking(void) { local_failure_run(1, FAULT_COPY); }
static void test_copy_fault_nonblocking(void) { local_failure_run(0, FAULT_COPY); }
static void test_unscale_fault_blocking(void) { local_failure_run(1, FAULT_UNSCALE); }
static void test_unscale_fault_nonblocking(void) { local_failure_run(0, FAULT_UNSCALE); }

/* The merge fails on the last node's sender (a failed device copy, injected)
 * after a correct non-blocking sync: that node's ranks fail at the receive,
 * the others merge. The failing sender still moves its copy of the group's
 * agreed parameters (ref) on, so the epoch's last, blocking, sync, which
 * averages changes since ref, still leaves every rank equal; with a stale
 * ref there the last node would end elsewhere once that group syncs again. */
static void merge_fault(int warmup) {
  if (UNEVEN || N == 1) return; /* one node: nothing is merged */
  dist_daso_options o = phases(3, warmup, 0);
  o.downcast = DIST_F32;
  model m;
  if (!model_daso(&m, 0.05, 0, NAN, &o, 4)) {
    model_free(&m);
    return;
  }
  int last_node = NODE == N - 1, at = warmup ? 0 : 1;
  for (int k = 0; k < 8; k++) { /* two epochs: every cross group sends again after the fault */
    if (last_node && LRANK == 0 && k == at) dist__fault_site = "daso_merge";
    dist_status s = batch_no_early_exit(&m, k % 4);
    if (k == at && last_node) CALL_FAILS(s, DIST_ERR_INTERNAL, LRANK == 0 ? "injected fault (daso_merge)" : "local rank 0");
    else CALL_OK(s);
    if (k % 4 == 3 || (warmup && k == at + 1)) CHECK(divergence(&m) == 0);
  }
  CHECK(dist__fault_site == NULL);
  model_free(&m);
}

/* Blocking (warmup): the failing node's sender merged nothing into
 * lin.weight, but its ref holds the agreed value and is broadcast in its
 * node, so the very next blocking sync (another cross group) brings every
 * rank back together. */
static void test_merge_fault(void) { merge_fault(0); }
static void test_merge_fault_blocking(void) { merge_fault(1); }

/* The sum of finite f16 changes overflows f16 (2 x 40000 > 65504): an error
 * on every rank, nothing merged, rather than inf written into the
 * parameters. Blocking (warmup) sync of batch 0, every node sending +40000. */
static void test_f16_overflow(void) {
  if (UNEVEN || N == 1) return;
  dist_daso_options o = phases(2, 1, 0);
  o.downcast = DIST_F16;
  model m;
  if (!model_daso(&m, 0.05, 0, 0.0, &o, 2)) {
    model_free(&m);
    return;
  }
  CALL_OK(dist_daso_zero_grad(m.d));
  CALL_OK(dist_daso_mark_ready(m.d, 1));
  CALL_OK(dist_daso_mark_ready(m.d, 0));
  for (int i = 0; i < NW; i++) m.g[i] = 0;
  m.w[0] = 40000.0f; /* after the backward: the step leaves it (zero gradient) */
  CALL_FAILS(dist_daso_step(m.d), DIST_ERR_INVALID_ARGUMENT, "overflows f16");
  CHECK(m.w[0] == 40000.0f && isfinite(m.w[1]));
  model_free(&m);
}

/* ---- gradient scaler --------------------------------------------------------------------- */

typedef struct scaler_ctx {
  double scale;
  int calls, last_found_inf, infs;
} scaler_ctx;
static double sc_scale(void *c) { return ((scaler_ctx *)c)->scale; }
static void sc_update(void *c, int found_inf) {
  scaler_ctx *s = c;
  s->calls++;
  s->last_found_inf = found_inf;
  s->infs += found_inf;
}

/* Cycling from batch 0 ((4, 1, 1)): batches 2 and 3 do no global sync, so a
 * step there is the local optimizer alone, on gradients averaged in the node. */
static void test_scaler(void) {
  if (UNEVEN) return;
  dist_daso_options o = phases(2, 0, 0);
  const double lr = 0.05;
  model m;
  if (!model_daso(&m, lr, 0, NAN, &o, 6)) {
    model_free(&m);
    return;
  }
  scaler_ctx sc = {1.0, 0, -1, 0};
  dist_grad_scaler gs = {sc_scale, sc_update, &sc};
  CALL_OK(dist_daso_add_scaler(m.d, &gs));
  CALL_OK(daso_batch(&m, 0, 1, NULL));
  CALL_OK(daso_batch(&m, 1, 1, NULL));
  CHECK(sc.calls == 2 && sc.infs == 0 && state_of(&m).skipped_steps == 0);

  /* Batch 2: 1/scale = 1e40 overflows every f32 gradient: the step is skipped. */
  float before[NW];
  memcpy(before, m.w, sizeof before);
  sc.scale = 1e-40;
  CALL_OK(daso_batch(&m, 2, 1, NULL));
  CHECK(sc.calls == 3 && sc.last_found_inf == 1);
  CHECK(state_of(&m).skipped_steps == 1);
  CHECK(memcmp(before, m.w, sizeof before) == 0);

  /* Batch 3: loss scaled by 4, scale 4: the plain SGD step on the node's mean
   * gradient, which this rank recomputes from its node's shards. */
  sc.scale = 4;
  memcpy(before, m.w, sizeof before);
  double gmean[NW] = {0};
  for (int r = 0; r < W; r++)
    if (NODE_OF[r] == NODE) {
      float g[NW] = {0};
      batch_loss(before, g, r, 3, 1);
      for (int i = 0; i < NW; i++) gmean[i] += (double)g[i] / L;
    }
  CALL_OK(daso_batch(&m, 3, 4, NULL));
  CHECK(sc.calls == 4 && sc.last_found_inf == 0);
  CHECK(state_of(&m).skipped_steps == 1);
  for (int i = 0; i < NW; i++)
    if (!NEAR(m.w[i], before[i] - lr * gmean[i], 1e-6)) break;

  /* A gradient already inf with a sane scale is caught too. */
  sc.scale = 1;
  CALL_OK(dist_daso_zero_grad(m.d));
  batch_loss(m.w, m.g, R, 4, 1);
  m.g[0] = INFINITY; /* on every rank: the node average is inf as well */
  memcpy(before, m.w, sizeof before);
  CALL_OK(dist_daso_mark_ready(m.d, 1));
  CALL_OK(dist_daso_mark_ready(m.d, 0));
  CALL_OK(dist_daso_step(m.d)); /* batch 4: global send, no receive */
  CHECK(sc.last_found_inf == 1 && state_of(&m).skipped_steps == 2);
  CHECK(memcmp(before, m.w, sizeof before) == 0);

  /* A bad scale is an error; removing the scaler stops the calls. */
  sc.scale = 0;
  CALL_FAILS(daso_batch(&m, 5, 1, NULL), DIST_ERR_INVALID_ARGUMENT, "scale");
  CALL_OK(dist_daso_add_scaler(m.d, NULL));
  int calls = sc.calls;
  CALL_OK(daso_batch(&m, 5, 1, NULL));
  CHECK(sc.calls == calls);
  model_free(&m);
}

/* ---- use_mpi_groups 0 and 1 ------------------------------------------------------------- */

/* Two models trained side by side, one per way of building the cross
 * communicators: identical parameters after every step. */
static void test_mpi_groups(void) {
  if (UNEVEN) return;
  dist_daso_options o = phases(4, 1, 1);
  o.sending_chunk_size = 6;
  model a, b;
  o.use_mpi_groups = 1;
  int ok = model_daso(&a, 0.05, 0.9, NAN, &o, 6);
  o.use_mpi_groups = 0;
  ok = model_daso(&b, 0.05, 0.9, NAN, &o, 6) && ok;
  int same = 1;
  for (int e = 0; ok && e < 4 && same; e++) {
    double la = 0, lb = 0, l;
    for (int bi = 0; bi < 6 && same; bi++) {
      CALL_OK(daso_batch(&a, bi, 1, &l));
      la += l;
      CALL_OK(daso_batch(&b, bi, 1, &l));
      lb += l;
      same = CHECK(memcmp(a.w, b.w, sizeof a.w) == 0);
      if (!same) fprintf(stderr, "  epoch %d batch %d differs\n", e, bi);
    }
    CALL_OK(dist_daso_epoch_loss_logic(a.d, la / 6, 0));
    CALL_OK(dist_daso_epoch_loss_logic(b.d, lb / 6, 0));
  }
  model_free(&a);
  model_free(&b);
}

/* Calls out of order, each an error naming what was wrong, after which
 * training goes on: epoch_loss_logic in mid-epoch or twice at one epoch's
 * end, a NaN loss, set_last_batch behind the current batch, a parameter
 * marked twice. */
static void test_wrong_order(void) {
  if (UNEVEN) return;
  dist_daso_options o = phases(6, 1, 0);
  model m;
  if (!model_daso(&m, 0.05, 0, NAN, &o, 3)) {
    model_free(&m);
    return;
  }
  CALL_OK(daso_batch(&m, 0, 1, NULL));
  CALL_FAILS(dist_daso_epoch_loss_logic(m.d, 1.0, 0), DIST_ERR_INVALID_ARGUMENT, "called at batch 1 of epoch 0");
  CALL_FAILS(dist_daso_set_last_batch(m.d, 0), DIST_ERR_INVALID_ARGUMENT, "already at batch 1");
  CALL_OK(dist_daso_zero_grad(m.d));
  batch_loss(m.w, m.g, R, 1, 1);
  CALL_OK(dist_daso_mark_ready(m.d, 1));
  CALL_FAILS(dist_daso_mark_ready(m.d, 1), DIST_ERR_INVALID_ARGUMENT, "lin.bias");
  CALL_OK(dist_daso_mark_ready(m.d, 0));
  CALL_OK(dist_daso_step(m.d));
  CALL_OK(daso_batch(&m, 2, 1, NULL));
  CHECK(state_of(&m).epoch == 1 && divergence(&m) == 0);
  CALL_FAILS(dist_daso_epoch_loss_logic(m.d, R == W - 1 ? NAN : 1.0, 0), DIST_ERR_INVALID_ARGUMENT, "NaN");
  if (W > 1) CALL_FAILS(dist_daso_epoch_loss_logic(m.d, 1.0, R == W - 1), DIST_ERR_MISMATCH, "already_averaged");
  CALL_OK(dist_daso_epoch_loss_logic(m.d, 1.0, 0));
  CHECK(state_of(&m).global_skips == 4); /* warmup over: cycling */
  CALL_FAILS(dist_daso_epoch_loss_logic(m.d, 1.0, 0), DIST_ERR_INVALID_ARGUMENT, "already called for epoch 1");
  CHECK(state_of(&m).global_skips == 4);
  for (int b = 0; b < 3; b++) CALL_OK(daso_batch(&m, b, 1, NULL));
  CHECK(state_of(&m).epoch == 2 && divergence(&m) == 0);
  model_free(&m);

  /* Before any epoch ended; then ranks at different batches (the last rank
   * counts 2 batches per epoch, the others 1, all in warmup: every batch is
   * a blocking sync, so the steps still pair up). */
  o.warmup_epochs = 4;
  if (!model_daso(&m, 0.05, 0, NAN, &o, 1)) {
    model_free(&m);
    return;
  }
  CALL_FAILS(dist_daso_epoch_loss_logic(m.d, 1.0, 0), DIST_ERR_INVALID_ARGUMENT, "no epoch has ended yet");
  if (W > 1) {
    CALL_OK(dist_daso_set_last_batch(m.d, R == W - 1 ? 1 : 0));
    CALL_OK(daso_batch(&m, 0, 1, NULL));
    CALL_FAILS(dist_daso_epoch_loss_logic(m.d, 1.0, 0), DIST_ERR_MISMATCH, "different points");
  }
  model_free(&m);
}

/* ---- epoch logic, reset, schedule -------------------------------------------------------- */

/* One batch per epoch (every step is the epoch's blocking sync), warmup 1:
 * epoch 1 enters cycling at (4, 1, 1) and seeds the plateau test; three
 * non-improving epochs (5% threshold) make it stable: (2, 1, 1). */
static void test_epoch_logic_and_reset(void) {
  if (UNEVEN) return;
  dist_daso_options o = phases(20, 1, 2);
  const double lr = 0.05, mu = 0.9;
  model m;
  if (!model_daso(&m, lr, mu, NAN, &o, 1)) {
    model_free(&m);
    return;
  }
  const int flat[4] = {4, 4, 4, 2}, improving[4] = {4, 4, 4, 4};

  /* Averaged here: rank losses spread around 1 by multiples of 1/8 (exact),
   * so only the world mean (1 every epoch) is flat. Each rank alone would
   * see its own losses rise or fall. */
  CALL_OK(daso_batch(&m, 0, 1, NULL));
  for (int e = 0; e < 4; e++) {
    double loss = 1 + (R - (W - 1) / 2.0) * 0.125 * (e + 1);
    CALL_OK(dist_daso_epoch_loss_logic(m.d, loss, 0));
    dist_daso_state st = state_of(&m);
    CHECK(st.global_skips == flat[e] && st.local_skips == 1 && st.batches_to_wait == 1);
    CALL_OK(daso_batch(&m, 0, 1, NULL));
  }
  /* Reset with a send in flight would need cycling with more batches; here
   * every step ends blocking. Back to epoch 0, warmup. */
  float kept[NW];
  memcpy(kept, m.w, sizeof kept);
  CALL_OK(dist_daso_reset(m.d));
  dist_daso_state st = state_of(&m);
  CHECK(st.epoch == 0 && st.batch == 0 && st.global_skips == 0 && st.batches_to_wait == 0 && st.sends_pending == 0);
  CHECK(memcmp(kept, m.w, sizeof kept) == 0); /* parameters kept (they agreed already) */

  /* Already averaged: the value is used as given, and must be the same on
   * every rank. Rank 0's differs from the others': an error on every rank,
   * the schedule untouched (else the ranks' schedules would part ways and a
   * sender would wait for a send never posted). Then all pass one value:
   * halving every epoch, never a plateau. */
  CALL_OK(daso_batch(&m, 0, 1, NULL)); /* epoch 0 (warmup) after reset */
  if (W > 1) {
    CALL_FAILS(dist_daso_epoch_loss_logic(m.d, R == 0 ? 1.0 : 0.5, 1), DIST_ERR_MISMATCH, "losses differ");
    CHECK(state_of(&m).global_skips == 0);
  }
  for (int e = 0; e < 4; e++) {
    CALL_OK(dist_daso_epoch_loss_logic(m.d, ldexp(1.0, -e), 1));
    st = state_of(&m);
    CHECK(st.global_skips == improving[e]);
    CALL_OK(daso_batch(&m, 0, 1, NULL));
  }

  /* Reset clears the local optimizer: the next SGD step is a first step,
   * p - lr g, with no momentum from before. */
  CALL_OK(dist_daso_reset(m.d));
  CHECK(divergence(&m) == 0);
  memcpy(kept, m.w, sizeof kept);
  for (int i = 0; i < NW; i++) m.g[i] = (float)(0.25 * (1 + i % 5));
  CALL_OK(dist_optim_step(m.o));
  for (int i = 0; i < NW; i++)
    if (!NEAR(m.w[i], kept[i] - lr * 0.25 * (1 + i % 5), 1e-6)) break;
  /* The last batch survives reset: stepping needs no set_last_batch. */
  CALL_OK(daso_batch(&m, 0, 1, NULL));
  CHECK(state_of(&m).epoch == 1);
  model_free(&m);
}

/* A send in flight at reset is received first; then all ranks restart from
 * rank 0's parameters. */
static void test_reset_in_flight(void) {
  if (UNEVEN) return;
  dist_daso_options o = phases(3, 0, 0);
  model m;
  if (!model_daso(&m, 0.05, 0.9, NAN, &o, 8)) {
    model_free(&m);
    return;
  }
  CALL_OK(daso_batch(&m, 0, 1, NULL));
  CHECK(state_of(&m).sends_pending == 1);
  CALL_OK(dist_daso_reset(m.d));
  dist_daso_state st = state_of(&m);
  CHECK(st.sends_pending == 0 && st.epoch == 0 && st.batch == 0);
  CHECK(st.global_skips == 4 && st.batches_to_wait == 1); /* no warmup: cycling at once */
  CHECK(divergence(&m) == 0);
  for (int b = 0; b < 8; b++) CALL_OK(daso_batch(&m, b, 1, NULL));
  CHECK(divergence(&m) == 0 && state_of(&m).epoch == 1);
  model_free(&m);
}

static double custom_lr(void *ctx, int64_t k, double base) {
  ++*(int *)ctx;
  return base / (double)(1 + k);
}

/* The schedule is stepped once per dist_daso_step (as Heat steps its
 * scheduler in step()). */
static void test_schedule(void) {
  if (UNEVEN) return;
  const dist_lr_schedule kinds[3] = {{DIST_LR_EXPONENTIAL, 0, 0.5, NULL, NULL},
                                     {DIST_LR_STEP, 2, 0.1, NULL, NULL},
                                     {DIST_LR_CUSTOM, 0, 0, custom_lr, NULL}};
  for (int s = 0; s < 3; s++) {
    int calls = 0;
    dist_lr_schedule sch = kinds[s];
    if (sch.kind == DIST_LR_CUSTOM) sch.ctx = &calls;
    dist_daso_options o = DIST_DASO_OPTIONS_INIT;
    o.total_epochs = 4;
    o.warmup_epochs = 1;
    o.cooldown_epochs = 1;
    o.schedule = &sch;
    model m;
    if (!model_daso(&m, 0.1, 0, NAN, &o, 3)) {
      model_free(&m);
      continue;
    }
    CHECK(dist_optim_get_lr(m.o) == 0.1);
    for (int k = 1; k <= 5; k++) {
      CALL_OK(daso_batch(&m, (k - 1) % 3, 1, NULL));
      if (k == 3) CALL_OK(dist_daso_epoch_loss_logic(m.d, 1.0, 0));
      double want = s == 0 ? 0.1 * pow(0.5, k) : s == 1 ? 0.1 * pow(0.1, k / 2) : 0.1 / (1 + k);
      NEAR(dist_optim_get_lr(m.o), want, 1e-12);
    }
    if (sch.kind == DIST_LR_CUSTOM) CHECK(calls == 5);
    model_free(&m);
  }
}

/* ---- parameters in device memory ---------------------------------------------------------- */
#ifdef HAVE_CUDA

/* The merge by hand (lr 0: only the syncs move the parameters) with the
 * model in CUDA memory: the same checks against the formula inside, and
 * after every batch the host run's parameters bit for bit. DASO stages
 * device parameters through host copies and merges there, and an SGD step
 * with lr 0 leaves them as they were, on either side. */
static void test_device_merge(void) {
  if (UNEVEN) return;
  float host[MR_BATCHES][NW], dev[MR_BATCHES][NW];
  memset(host, 0, sizeof host);
  memset(dev, 0xff, sizeof dev); /* a batch the device run missed cannot match */
  merge_run(DIST_BF16, host);
  MEM = DIST_MEM_CUDA;
  merge_run(DIST_BF16, dev);
  MEM = DIST_MEM_HOST;
  for (int b = 0; b < MR_BATCHES; b++)
    if (!CHECK(memcmp(host[b], dev[b], sizeof host[b]) == 0)) {
      fprintf(stderr, "  device parameters differ from the host run's after batch %d\n", b);
      break;
    }
}

/* The regression run (train_daso: 120 SGD steps with momentum, warmup,
 * cycling with non-blocking bf16 sends, cooldown) with the model in CUDA
 * memory: agreement after every blocking sync inside, and the final loss
 * and every parameter within DEVICE_TOL (relative to max(1, |host|)) of the
 * host run's. Not bit for bit: the device SGD kernel may fuse multiply-adds,
 * NCCL may add a node's gradients in another order, and the node's average
 * divides by its size where the host multiplies by the inverse, each a
 * rounding of the last bit that the next steps carry on (seen on one H100
 * at 1 to 4 ranks: 6e-8 at most). The bound leaves room for such a rounding
 * to flip one element of a bf16 send. */
#define DEVICE_TOL 1e-4
static void test_device_training(void) {
  if (UNEVEN) return;
  int pending = 0;
  float host[NW], dev[NW];
  double lh = train_daso(8, &pending, host);
  MEM = DIST_MEM_CUDA;
  double ld = train_daso(8, &pending, dev);
  MEM = DIST_MEM_HOST;
  double worst = 0;
  for (int i = 0; i < NW; i++) worst = fmax(worst, fabs((double)dev[i] - host[i]) / fmax(1.0, fabs(host[i])));
  if (R == 0)
    printf("  [%dx%d] loss: host %.9f, device %.9f; parameters differ by %.3g at most\n", N, L, lh, ld, worst);
  NEAR(ld, lh, DEVICE_TOL);
  CHECK(worst <= DEVICE_TOL);
  CHECK(pending); /* the device run cycled too */
}

/* After each device test, also one that an assertion cut short. */
static void host_again(void) { MEM = DIST_MEM_HOST; }
#endif /* HAVE_CUDA */

/* ---- suites and rounds --------------------------------------------------------------------- */

static CU_TestInfo merge_tests[] = {
    {"merge formula by hand", test_merge_formula}, {"pack against per-element conversions", test_pack}, CU_TEST_INFO_NULL};
static CU_TestInfo setup_tests[] = {
    {"node layout (uneven nodes refused)", test_layout},
    {"option errors, NULLs, set_last_batch", test_option_errors},
    {"option structs of older and newer headers", test_option_struct_sizes},
    {"errors on one rank only, differing options", test_one_rank_errors},
    CU_TEST_INFO_NULL};
static CU_TestInfo sync_tests[] = {
    {"agreement after blocking syncs, bf16", test_agree_bf16},
    {"agreement after blocking syncs, f16", test_agree_f16},
    {"agreement after blocking syncs, f32", test_agree_f32},
    {"merge by hand, bf16", test_merge_bf16},
    {"merge by hand, f32", test_merge_f32},
    {"NaN sent in a blocking sync", test_nan_blocking},
    {"NaN sent in a non-blocking sync", test_nan_nonblocking},
    {"failed pack in a blocking sync", test_fault_blocking},
    {"failed pack in a non-blocking sync", test_fault_nonblocking},
    {"reset after a NaN sent", test_reset_after_nan},
    {"use_mpi_groups 0 == 1", test_mpi_groups},
    {"copy fault before a blocking sync", test_copy_fault_blocking},
    {"copy fault before a non-blocking sync", test_copy_fault_nonblocking},
    {"unscale fault before a blocking sync", test_unscale_fault_blocking},
    {"unscale fault before a non-blocking sync", test_unscale_fault_nonblocking},
    {"merge fault on one node", test_merge_fault},
    {"merge fault on one node, blocking sync", test_merge_fault_blocking},
    {"f16 sum overflow", test_f16_overflow},
    CU_TEST_INFO_NULL};
static CU_TestInfo train_tests[] = {
    {"regression: DASO loss within 5% of DDP", test_converges_like_ddp},
    {"regression: delta merge within 5% of DDP", test_converges_delta},
    {"one node: DASO == DDP", test_one_node_is_ddp},
    {"gradient scaler", test_scaler},
    {"epoch_loss_logic and reset", test_epoch_logic_and_reset},
    {"calls out of order", test_wrong_order},
    {"reset with a send in flight", test_reset_in_flight},
    {"lr schedule per step", test_schedule},
    CU_TEST_INFO_NULL};
#ifdef HAVE_CUDA
static CU_TestInfo device_tests[] = {
    {"merge by hand, bf16: device == host bit for bit", test_device_merge},
    {"regression: device within 1e-4 of host", test_device_training},
    CU_TEST_INFO_NULL};
#endif

static CU_SuiteInfo suites[] = {{"merge", NULL, NULL, NULL, NULL, merge_tests},
                                {"setup", NULL, NULL, NULL, NULL, setup_tests},
                                {"global sync", NULL, NULL, NULL, NULL, sync_tests},
                                {"training", NULL, NULL, NULL, NULL, train_tests},
#ifdef HAVE_CUDA
                                CU_SUITE_INFO_NULL, /* the device suite, in rounds that run it (device_round) */
#endif
                                CU_SUITE_INFO_NULL};

#ifdef HAVE_CUDA
static int ON_DEVICE; /* every rank sees a CUDA device */

/* This round runs the device suite if every rank made the manager's device
 * current. Returns the failures: a rank that could not fails the round's
 * setup, and then no rank runs the suites. */
static int device_round(void) {
  static const CU_SuiteInfo device_suite = {"device memory", NULL, NULL, NULL, host_again, device_tests};
  int ok = !ON_DEVICE || cuda_use_manager_device(&DEV), all = cunit_all_reduce_int(ok, DIST_MIN);
  suites[sizeof suites / sizeof suites[0] - 2] = ON_DEVICE && all ? device_suite : (CU_SuiteInfo)CU_SUITE_INFO_NULL;
  return !ok;
}
#endif

/* This round's layout from the manager. */
static int read_layout(void) {
  int bad = 0;
  bad |= dist_manager_local_size(&L) != DIST_SUCCESS;
  bad |= dist_manager_node_count(&N) != DIST_SUCCESS;
  bad |= dist_manager_node(&NODE) != DIST_SUCCESS;
  bad |= dist_manager_local_rank(&LRANK) != DIST_SUCCESS;
  NODE_OF = malloc(sizeof(int) * (size_t)W);
  if (bad || !NODE_OF) return 1;
  cunit_all_gather_int(NODE, NODE_OF);
  UNEVEN = cunit_all_reduce_int(L, DIST_MIN) != cunit_all_reduce_int(L, DIST_MAX);
  return 0;
}

static int RPNS[3], NROUNDS; /* each round's DIST_RANKS_PER_NODE (0: as launched) */

static int before_round(int round) {
  char v[16];
  RPN = RPNS[round];
  if (RPN > 0) {
    snprintf(v, sizeof v, "%d", RPN);
    setenv("DIST_RANKS_PER_NODE", v, 1);
  }
  return 0;
}

static int setup_round(int round) {
  int failed = 0;
#ifdef HAVE_CUDA
  if (round == 0) { /* collective: once the manager is up */
    ON_DEVICE = !cuda_skip_everywhere(R); /* else rank 0 printed SKIP */
    if (!ON_DEVICE && R == 0) printf("  (test_daso: the device-memory cases are skipped; the host cases run)\n");
  }
  failed += device_round();
#endif
  if (read_layout()) {
    fprintf(stderr, "layout queries failed\n");
    return failed + 1;
  }
  if (R == 0) printf("test_daso round %d: %d node(s) x %d%s\n", round, N, L, UNEVEN ? ", uneven" : "");
  return failed;
}

static int after_round(int round) {
  (void)round;
  free(NODE_OF);
  NODE_OF = NULL;
  return 0;
}

int main(void) {
  /* The round list needs W before the manager starts: from MPI, which this
   * program initializes (distmgr adopts it), or, in a launch without MPI
   * (torchrun's processes on Gloo), from the launcher's variables. */
  int mpi = !cunit_mpi_launch_without_mpi();
  if (mpi) {
    MPI_Init(NULL, NULL);
    MPI_Comm_size(MPI_COMM_WORLD, &W);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
  } else {
    extern char **environ;
    dist_launch l;
    if (dist_launch_detect((const char *const *)environ, DIST_LAUNCH_AUTO, &l) != DIST_SUCCESS) {
      fprintf(stderr, "test_daso: %s\n", dist_last_error());
      return 1;
    }
    W = l.size, R = l.rank;
  }
  VERIFY = !(getenv("DIST_VERIFY") && !strcmp(getenv("DIST_VERIFY"), "0"));
#ifndef HAVE_CUDA
  if (R == 0) printf("SKIP: test_daso device-memory cases: distmgr built without CUDA\n");
#endif
  /* Layouts: as launched (real nodes: one on a single machine, or the
   * launcher's DIST_RANKS_PER_NODE), then, unless the launcher chose, one
   * rank per node and (odd sizes) uneven nodes of 2. */
  RPNS[NROUNDS++] = 0; /* first, while the variable is still as launched */
  if (!getenv("DIST_RANKS_PER_NODE")) {
    if (W > 1) RPNS[NROUNDS++] = 1;
    if (W % 2 == 1 && W > 1) RPNS[NROUNDS++] = 2;
  }
  int status = cunit_mpi_run(&(cunit_mpi_test){"test_daso", suites, .rounds = NROUNDS, .before = before_round,
                                               .setup = setup_round, .after = after_round});
  if (mpi) MPI_Finalize(); /* this program initialized MPI: distmgr adopted it */
  return status;
}
