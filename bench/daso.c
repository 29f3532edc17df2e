/* bench/daso: the same training problem trained with DDP (dist_ddp over the
 * world + a local SGD) and with DASO (dist_daso, default options except the
 * epoch counts), for equal epochs, on 4 ranks as 2 nodes of 2 ranks.
 *
 * Problem: MLP regression D -> H -> H -> O (ReLU), a few million f32
 * parameters (--params, default 4M = 16 MB), learning a fixed random "teacher"
 * network from fresh samples every batch (seeded by rank, epoch and batch, so
 * both modes see the same data). Forward and backward are plain loops; the
 * backward marks each layer's gradients ready before computing the layer's
 * input gradient, so communication can overlap it. The batch size sets the
 * compute per batch; the default (128) makes it about what DDP's gradient
 * all-reduce needs on the link (16 MB each way at 1 Gbit/s: 128 ms; compute
 * about 120 ms on two cores), the regime DASO is for: a sync that costs as
 * much as a step. --batch-size 256 doubles the compute (bench/RESULTS.md
 * has both).
 * "fwd+bwd" below is the forward and backward time, mark_ready calls included,
 * averaged over ranks; the rest of an epoch is synchronisation.
 *
 * Both modes run in one launch with their epochs interleaved (DDP, DASO, then
 * DASO, DDP, ...), so load from other jobs on the machine hits both alike.
 * An epoch's time is the slowest rank's, between barriers.
 *
 * Two nodes. If tests/two-nodes.sh can make network namespaces here (root),
 * the driver runs `two-nodes.sh up 1000mbit`, `run 4 <self> --worker ...`
 * and `down` (also on failure and on SIGINT/SIGTERM/SIGHUP): MPI sees two hosts,
 * node-local traffic stays in shared memory and cross-node traffic crosses a
 * veth shaped to 1 Gbit/s. Rank 0 (in node 0) reads the veth's byte counters,
 * so "bytes between nodes" is what really crossed, TCP/IP headers included.
 * Otherwise (or with --no-netns / --quick) it falls back to $LAUNCHER on one
 * machine with DIST_RANKS_PER_NODE=2: the byte figures are then the library's
 * counters (bytes handed to the inter-node all-reduces, summed over ranks) and
 * the time ratio is printed as information only, since no link is shaped.
 *
 * Usage: bench/daso [--epochs 20] [--batches 16] [--params 4000000]
 *                   [--batch-size 128] [--lr 0.02] [--delay 50us] [--no-netns] [--quick]
 * --delay: the nodes are joined by tests/netrelay with that one-way delay
 * (two-nodes.sh up 1000mbit DELAY); rank 0 then reads tap0's counters.
 * --quick (CI smoke run): a tiny model, 3 epochs of 4 batches, no namespaces.
 * Environment: LAUNCHER (fallback; as for make check), TWO_NODES (path of
 * two-nodes.sh; default: found next to the program or in ./tests),
 * TWO_NODES_PREFIX (namespace names; default bdaso<pid>).
 * Exits non-zero only on errors, never on a missed target. */
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NP 4
#define RANKS_PER_NODE 2
#define RATE "1000mbit"
#define D_IN 256
#define D_OUT 16
#define TEACHER_H 64
#define EVAL_SAMPLES 1024
#define TARGET_TIME "target <= 0.66"
#define TARGET_LOSS "target <= 1.05"
#define MOMENTUM 0.9

typedef struct options {
  int epochs, batches, batch, quick, no_netns, rpn;
  long long params;
  double lr;
  const char *veth;  /* worker: the interface whose counters rank 0 reads */
  const char *delay; /* driver: one-way delay of the link (two-nodes.sh up RATE DELAY) */
} options;

/* ---- worker: data --------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double gauss(uint64_t *s) { /* Box-Muller */
  double u = ((splitmix(s) >> 11) + 0.5) * 0x1.0p-53, v = (splitmix(s) >> 11) * 0x1.0p-53;
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static uint64_t seed_of(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = a * 0x100000001b3ULL ^ b * 0x9e3779b97f4a7c15ULL ^ c * 0xc2b2ae3d27d4eb4fULL;
  splitmix(&s);
  return s;
}

/* The teacher: y = C tanh(A x / sqrt(D)), fixed, the same on every rank. */
typedef struct teacher {
  float a[TEACHER_H * D_IN], c[D_OUT * TEACHER_H];
} teacher;

static void teacher_init(teacher *t) {
  uint64_t s = seed_of(7, 7, 7);
  for (int i = 0; i < TEACHER_H * D_IN; i++) t->a[i] = (float)gauss(&s);
  for (int i = 0; i < D_OUT * TEACHER_H; i++) t->c[i] = (float)(gauss(&s) / sqrt(TEACHER_H));
}

/* n samples seeded by (stream, a, b): x in R^D standard normal, y = teacher(x). */
static void make_batch(const teacher *t, uint64_t stream, uint64_t a, uint64_t b, int n, float *x, float *y) {
  uint64_t s = seed_of(stream, a, b);
  for (int i = 0; i < n * D_IN; i++) x[i] = (float)gauss(&s);
  for (int k = 0; k < n; k++) {
    float h[TEACHER_H];
    for (int j = 0; j < TEACHER_H; j++) {
      double z = 0;
      for (int i = 0; i < D_IN; i++) z += t->a[j * D_IN + i] * x[k * D_IN + i];
      h[j] = (float)tanh(z / sqrt(D_IN));
    }
    for (int o = 0; o < D_OUT; o++) {
      double z = 0;
      for (int j = 0; j < TEACHER_H; j++) z += t->c[o * TEACHER_H + j] * h[j];
      y[k * D_OUT + o] = (float)z;
    }
  }
}

/* ---- worker: the model ------------------------------------------------------ */

/* Eight independent lanes per step: gcc -O2 vectorises only straight-line
 * code (its cheap cost model skips loops with unknown trip counts), and this
 * unrolled form packs into SIMD registers; restrict rules out aliasing. */
static float dot(const float *restrict x, const float *restrict y, int n) {
  float acc[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) acc[k] += x[i + k] * y[i + k];
  float s = 0;
  for (; i < n; i++) s += x[i] * y[i];
  for (int k = 0; k < 8; k++) s += acc[k];
  return s;
}

static void axpy(float *restrict y, float a, const float *restrict x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) y[i + k] += a * x[i + k];
  for (; i < n; i++) y[i] += a * x[i];
}

/* out x in, row-major, as torch.nn.Linear: a weight row is contiguous, so
 * the forward is dots and both backward products are axpys over rows. */
typedef struct layer {
  int in, out;
  float *w, *b, *gw, *gb;
  int iw, ib; /* parameter indices */
} layer;

#define NLAYERS 3
typedef struct model {
  layer l[NLAYERS];
  float *store; /* all weights, biases and gradients */
  dist_params *p;
  dist_optim *opt;
} model;

/* Per-batch scratch shared by the models (they never run at once). */
typedef struct scratch {
  int batch;
  float *x, *y, *act[NLAYERS], *dact[NLAYERS]; /* act[i]: output of layer i, dact[i]: its gradient */
} scratch;

static int hidden_for(long long params) {
  /* D*H + H*H + H*O + 2H + O = params */
  double bq = D_IN + D_OUT + 2.0, h = (-bq + sqrt(bq * bq + 4.0 * (double)(params - D_OUT))) / 2;
  int hh = (int)h / 8 * 8;
  return hh < 8 ? 8 : hh;
}

static void layer_dims(int h, int dims[NLAYERS + 1]) {
  dims[0] = D_IN, dims[1] = h, dims[2] = h, dims[3] = D_OUT;
}

static long long count_params(int h) {
  int d[NLAYERS + 1];
  layer_dims(h, d);
  long long n = 0;
  for (int i = 0; i < NLAYERS; i++) n += (long long)d[i] * d[i + 1] + d[i + 1];
  return n;
}

static dist_status model_create(model *m, int h, double lr) {
  int d[NLAYERS + 1];
  layer_dims(h, d);
  long long n = count_params(h);
  m->store = calloc((size_t)(2 * n), sizeof(float));
  if (!m->store) return DIST_ERR_NO_MEMORY;
  float *q = m->store;
  uint64_t s = seed_of(11, 0, 0); /* rank 0's initial weights are broadcast at commit anyway */
  dist_status st = dist_params_create(NULL, &m->p);
  for (int i = 0; i < NLAYERS && !st; i++) {
    layer *L = &m->l[i];
    L->in = d[i], L->out = d[i + 1];
    size_t nw = (size_t)L->in * L->out;
    L->w = q, q += nw;
    L->gw = q, q += nw;
    L->b = q, q += L->out;
    L->gb = q, q += L->out;
    double bound = sqrt(6.0 / L->in); /* He uniform, for ReLU */
    for (size_t k = 0; k < nw; k++) L->w[k] = (float)(bound * (2.0 * (splitmix(&s) >> 11) * 0x1.0p-53 - 1));
    char name[32];
    snprintf(name, sizeof name, "fc%d.weight", i + 1);
    st = dist_params_add_host(m->p, name, L->w, L->gw, (int64_t)nw, &L->iw);
    snprintf(name, sizeof name, "fc%d.bias", i + 1);
    if (!st) st = dist_params_add_host(m->p, name, L->b, L->gb, L->out, &L->ib);
  }
  if (!st) st = dist_params_commit(m->p);
  dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
  so.lr = lr, so.momentum = MOMENTUM;
  if (!st) st = dist_optim_sgd(m->p, &so, &m->opt);
  return st;
}

static void model_destroy(model *m) {
  dist_optim_destroy(m->opt);
  dist_params_destroy(m->p);
  free(m->store);
}

static void forward(const model *m, scratch *sc, int n) {
  const float *x = sc->x;
  for (int i = 0; i < NLAYERS; i++) {
    const layer *L = &m->l[i];
    float *z = sc->act[i];
    for (int o = 0; o < L->out; o++) /* one weight row stays in L1 over the batch */
      for (int k = 0; k < n; k++) {
        float v = dot(x + (size_t)k * L->in, L->w + (size_t)o * L->in, L->in) + L->b[o];
        z[(size_t)k * L->out + o] = i < NLAYERS - 1 && v < 0 ? 0 : v; /* ReLU except on the output */
      }
    x = z;
  }
}

/* Mean squared error over the batch and outputs; fills dact[last] with its gradient. */
static double loss_grad(const scratch *sc, int n, float *grad) {
  const float *p = sc->act[NLAYERS - 1];
  double sum = 0, scale = 2.0 / ((double)n * D_OUT);
  for (int k = 0; k < n * D_OUT; k++) {
    double e = (double)p[k] - sc->y[k];
    sum += e * e;
    if (grad) grad[k] = (float)(scale * e);
  }
  return sum / ((double)n * D_OUT);
}

typedef dist_status (*mark_fn)(void *ctx, int index);

/* Backward from dact[last]; marks each layer's weight and bias ready as soon
 * as they are final, then computes the layer's input gradient (which the
 * reducer's all-reduce can overlap). Returns the first mark error. */
static dist_status backward(model *m, scratch *sc, int n, mark_fn mark, void *ctx) {
  for (int i = NLAYERS - 1; i >= 0; i--) {
    layer *L = &m->l[i];
    float *dz = sc->dact[i];
    const float *x = i ? sc->act[i - 1] : sc->x;
    for (int o = 0; o < L->out; o++) {
      float *gw = L->gw + (size_t)o * L->in;
      float gb = 0;
      for (int k = 0; k < n; k++) {
        float g = dz[(size_t)k * L->out + o];
        if (g != 0) axpy(gw, g, x + (size_t)k * L->in, L->in);
        gb += g;
      }
      L->gb[o] += gb;
    }
    dist_status s = mark(ctx, L->iw);
    if (!s) s = mark(ctx, L->ib);
    if (s) return s;
    if (i == 0) break; /* the input needs no gradient */
    float *dx = sc->dact[i - 1];
    memset(dx, 0, sizeof(float) * (size_t)n * L->in);
    for (int o = 0; o < L->out; o++)
      for (int k = 0; k < n; k++) {
        float g = dz[(size_t)k * L->out + o];
        if (g != 0) axpy(dx + (size_t)k * L->in, g, L->w + (size_t)o * L->in, L->in);
      }
    const float *a = sc->act[i - 1]; /* ReLU: pass where the output was positive */
    for (size_t k = 0; k < (size_t)n * L->in; k++)
      if (a[k] <= 0) dx[k] = 0;
  }
  return DIST_SUCCESS;
}

/* ---- worker: training ------------------------------------------------------- */

/* daso: Heat's merge (the default); daso-delta: merge = DIST_DASO_MERGE_DELTA. */
enum { DDP, DASO, DASO_DELTA, NMODES };
static const char *const mode_names[NMODES] = {"ddp", "daso", "daso-delta"};

typedef struct run {
  model m;
  dist_ddp *ddp;   /* DDP mode */
  dist_daso *daso; /* DASO mode */
  double seconds, compute, last_loss;
  double *elapsed, *loss; /* per epoch: time so far, train loss */
  double net_bytes[2]; /* veth tx (node 0 -> 1) and rx, summed over epochs */
  uint64_t lib_bytes;  /* library counter on this rank */
} run;

static int g_rank = -1;

static void fail(const char *what, dist_status s) {
  fprintf(stderr, "bench/daso: rank %d: %s: %s (%s)\n", g_rank, what, dist_status_string(s), dist_last_error());
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks may be waiting in a collective */
  exit(1);
}

#define CHECK(call)                          \
  do {                                       \
    dist_status s_ = (call);                 \
    if (s_ != DIST_SUCCESS) fail(#call, s_); \
  } while (0)

static dist_status mark_ddp(void *ctx, int i) { return dist_ddp_mark_ready(ctx, i); }
static dist_status mark_daso(void *ctx, int i) { return dist_daso_mark_ready(ctx, i); }

/* veth byte counters (rank 0 in node 0 sees node 0's end); -1 if unreadable. */
static double read_counter(const char *ifname, const char *which) {
  if (!ifname) return -1;
  char path[256];
  snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s_bytes", ifname, which);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  unsigned long long v;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  return ok ? (double)v : -1;
}

/* One epoch of one mode. Returns this rank's mean batch loss. */
static double train_epoch(run *r, int mode, int epoch, const options *o, const teacher *t, scratch *sc, MPI_Comm world,
                          double *compute) {
  double sum = 0, busy = 0;
  for (int b = 0; b < o->batches; b++) {
    make_batch(t, 1 + (uint64_t)g_rank, (uint64_t)epoch, (uint64_t)b, o->batch, sc->x, sc->y);
    CHECK(dist_optim_zero_grad(r->m.opt));
    double t0 = bench_now();
    forward(&r->m, sc, o->batch);
    sum += loss_grad(sc, o->batch, sc->dact[NLAYERS - 1]);
    if (mode == DDP) {
      CHECK(backward(&r->m, sc, o->batch, mark_ddp, r->ddp));
      busy += bench_now() - t0;
      CHECK(dist_ddp_finalize(r->ddp));
      CHECK(dist_optim_step(r->m.opt));
    } else {
      CHECK(backward(&r->m, sc, o->batch, mark_daso, r->daso));
      busy += bench_now() - t0;
      CHECK(dist_daso_step(r->daso));
    }
  }
  double loss = sum / o->batches;
  if (mode != DDP) CHECK(dist_daso_epoch_loss_logic(r->daso, loss, 0));
  else { /* for the table; the same small cost as DASO's */
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, world);
    loss /= NP;
  }
  *compute = busy;
  return loss;
}

/* MSE on a held-out set (the same for both modes), split over the ranks. */
static double eval_loss(run *r, const teacher *t, scratch *sc, MPI_Comm world, int size) {
  double s[2] = {0, 0};
  for (int start = g_rank * sc->batch; start < EVAL_SAMPLES; start += size * sc->batch) {
    int n = EVAL_SAMPLES - start < sc->batch ? EVAL_SAMPLES - start : sc->batch;
    make_batch(t, 0, 999, (uint64_t)start, n, sc->x, sc->y);
    forward(&r->m, sc, n);
    s[0] += loss_grad(sc, n, NULL) * n, s[1] += n;
  }
  MPI_Allreduce(MPI_IN_PLACE, s, 2, MPI_DOUBLE, MPI_SUM, world);
  return s[0] / s[1];
}

/* When (in epochs, log-linear between epoch ends, and seconds) run r's
 * train loss first reached `target`; 0 if it never did. */
static int time_to_loss(const run *r, int epochs, double target, double *ep, double *sec) {
  for (int e = 0; e < epochs; e++) {
    if (!(r->loss[e] <= target)) continue;
    double f = 1, t0 = e ? r->elapsed[e - 1] : 0;
    if (e > 0 && r->loss[e - 1] > r->loss[e] && target > 0)
      f = log(r->loss[e - 1] / target) / log(r->loss[e - 1] / r->loss[e]);
    *ep = e + f;
    *sec = t0 + f * (r->elapsed[e] - t0);
    return 1;
  }
  return 0;
}

static int worker(const options *o) {
  if (o->rpn > 0) { /* one machine: let distmgr split it into nodes */
    char v[16];
    snprintf(v, sizeof v, "%d", o->rpn);
    setenv("DIST_RANKS_PER_NODE", v, 1);
  }
  CHECK(dist_manager_initialize());
  CHECK(dist_manager_rank(&g_rank));
  int size, nodes;
  CHECK(dist_manager_world_size(&size));
  CHECK(dist_manager_node_count(&nodes));
  MPI_Comm world;
  CHECK(dist_group_comm(NULL, &world));
  if (size != NP || nodes != 2) {
    if (g_rank == 0) fprintf(stderr, "bench/daso: needs %d ranks on 2 nodes, got %d on %d\n", NP, size, nodes);
    dist_manager_finalize();
    return 1;
  }

  /* Only rank 0 reads the counters; all must agree on what is reported. */
  int veth_ok = g_rank == 0 && read_counter(o->veth, "tx") >= 0;
  MPI_Bcast(&veth_ok, 1, MPI_INT, 0, world);
  const char *veth = veth_ok ? o->veth : NULL;
  if (o->veth && !veth && g_rank == 0)
    printf("bench/daso: cannot read /sys/class/net/%s/statistics: reporting library counters instead\n", o->veth);

  teacher *t = malloc(sizeof *t);
  int h = hidden_for(o->params);
  scratch sc = {.batch = o->batch};
  size_t wide = (size_t)o->batch * (h > D_IN ? h : D_IN);
  sc.x = malloc(sizeof(float) * (size_t)o->batch * D_IN);
  sc.y = malloc(sizeof(float) * (size_t)o->batch * D_OUT);
  for (int i = 0; i < NLAYERS; i++) sc.act[i] = malloc(sizeof(float) * wide), sc.dact[i] = malloc(sizeof(float) * wide);
  if (!t || !sc.x || !sc.y || !sc.act[0] || !sc.act[1] || !sc.act[2] || !sc.dact[0] || !sc.dact[1] || !sc.dact[2])
    fail("malloc", DIST_ERR_NO_MEMORY);
  teacher_init(t);

  run r[NMODES];
  memset(r, 0, sizeof r);
  for (int m = 0; m < NMODES; m++) {
    CHECK(model_create(&r[m].m, h, o->lr));
    r[m].elapsed = calloc((size_t)o->epochs, sizeof(double));
    r[m].loss = calloc((size_t)o->epochs, sizeof(double));
    if (!r[m].elapsed || !r[m].loss) fail("calloc", DIST_ERR_NO_MEMORY);
  }
  CHECK(dist_ddp_create(r[DDP].m.p, NULL, &r[DDP].ddp));
  dist_daso_options dopt = DIST_DASO_OPTIONS_INIT;
  /* Heat's defaults (4 warm-up, 4 cool-down epochs) are sized for ~90-epoch
   * runs; keep the same share of this run, at least one epoch each. */
  int edge = (int)lround(o->epochs * 4.0 / 90.0);
  dopt.total_epochs = o->epochs;
  dopt.warmup_epochs = dopt.cooldown_epochs = edge < 1 ? 1 : edge;
  for (int m = DASO; m < NMODES; m++) {
    dopt.merge = m == DASO_DELTA ? DIST_DASO_MERGE_DELTA : DIST_DASO_MERGE_HEAT;
    CHECK(dist_daso_create(r[m].m.opt, &dopt, &r[m].daso));
    CHECK(dist_daso_set_last_batch(r[m].daso, o->batches - 1));
  }

  long long np = count_params(h);
  if (g_rank == 0) {
    printf("model: MLP %d-%d-%d-%d (ReLU), %lld f32 parameters (%.1f MB), batch %d per rank, %d batches/epoch, %d "
           "epochs\n",
           D_IN, h, h, D_OUT, np, np * 4 / 1e6, o->batch, o->batches, o->epochs);
    printf("ddp: reducer defaults over world, SGD lr %g momentum %g; daso: defaults, warmup %d, cooldown %d epochs\n", o->lr,
           MOMENTUM, dopt.warmup_epochs, dopt.cooldown_epochs);
    printf("bytes between nodes: %s\n", veth ? "measured on the veth (rank 0's end: tx = node0->node1)"
                                               : "library counters (no veth): bytes handed to inter-node all-reduces");
    printf("%-5s %-10s %9s %9s %11s %11s %11s  %s\n", "epoch", "mode", "seconds", "fwd+bwd", "MB 0->1", "MB 1->0",
           "train_loss", "daso (gs,ls,btw)");
    fflush(stdout);
  }

  for (int e = 0; e < o->epochs; e++)
    for (int j = 0; j < NMODES; j++) {
      int mode = e % 2 ? NMODES - 1 - j : j; /* alternate who goes first */
      run *R = &r[mode];
      char phase[32] = ""; /* the schedule this epoch runs with */
      if (mode != DDP) {
        dist_daso_state st;
        CHECK(dist_daso_state_get(R->daso, &st));
        snprintf(phase, sizeof phase, "(%d,%d,%d)", st.global_skips, st.local_skips, st.batches_to_wait);
      }
      double tx0 = read_counter(veth, "tx"), rx0 = read_counter(veth, "rx"), compute;
      MPI_Barrier(world);
      double t0 = bench_now();
      double loss = train_epoch(R, mode, e, o, t, &sc, world, &compute);
      MPI_Barrier(world);
      double sec = bench_now() - t0;
      double tx = read_counter(veth, "tx") - tx0, rx = read_counter(veth, "rx") - rx0;
      MPI_Allreduce(MPI_IN_PLACE, &compute, 1, MPI_DOUBLE, MPI_SUM, world);
      compute /= size;
      R->seconds += sec, R->compute += compute, R->last_loss = loss;
      R->elapsed[e] = R->seconds, R->loss[e] = loss;
      R->net_bytes[0] += tx, R->net_bytes[1] += rx;
      if (g_rank == 0) {
        printf("%-5d %-10s %9.3f %9.3f %11.2f %11.2f %11.5f  %s\n", e, mode_names[mode], sec, compute,
               veth ? tx / 1e6 : NAN, veth ? rx / 1e6 : NAN, loss, phase);
        fflush(stdout);
      }
    }

  dist_daso_state st;
  r[DDP].lib_bytes = dist_ddp_bytes_sent(r[DDP].ddp);
  for (int m = NMODES - 1; m >= DASO; m--) {
    CHECK(dist_daso_state_get(r[m].daso, &st));
    r[m].lib_bytes = st.global_bytes_sent;
  }
  for (int m = 0; m < NMODES; m++) {
    double div, lib = (double)r[m].lib_bytes;
    CHECK(dist_params_max_divergence(r[m].m.p, &div));
    double final = eval_loss(&r[m], t, &sc, world, size);
    MPI_Allreduce(MPI_IN_PLACE, &lib, 1, MPI_DOUBLE, MPI_SUM, world);
    double bytes = veth ? r[m].net_bytes[0] + r[m].net_bytes[1] : lib;
    if (g_rank == 0) {
      printf("%s: library counter %.2f MB/epoch (all ranks), max parameter divergence across ranks %g\n", mode_names[m],
             lib / o->epochs / 1e6, div);
      /* parsed by the driver: seconds/epoch, bytes/epoch, final loss, compute/epoch, last train loss */
      printf("result %s %.6f %.0f %.8g %.6f %.8g\n", mode_names[m], r[m].seconds / o->epochs, bytes / o->epochs, final,
             r[m].compute / o->epochs, r[m].last_loss);
      fflush(stdout);
    }
  }
  if (g_rank == 0) {
    printf("daso: %llu global syncs, %.2f MB sent by the senders in all (bf16 parameter deltas)\n",
           (unsigned long long)st.global_syncs, (double)st.global_bytes_sent / 1e6);
    double ep, sec;
    if (time_to_loss(&r[DDP], o->epochs, r[DASO].last_loss, &ep, &sec))
      printf("reach %.6f %.6f %.6f\n", ep, sec, r[DASO].seconds); /* parsed by the driver */
    fflush(stdout);
  }

  dist_daso_destroy(r[DASO].daso);
  dist_daso_destroy(r[DASO_DELTA].daso);
  dist_ddp_destroy(r[DDP].ddp);
  for (int m = 0; m < NMODES; m++) model_destroy(&r[m].m), free(r[m].elapsed), free(r[m].loss);
  for (int i = 0; i < NLAYERS; i++) free(sc.act[i]), free(sc.dact[i]);
  free(sc.x), free(sc.y), free(t);
  CHECK(dist_manager_finalize());
  return 0;
}

/* ---- driver ----------------------------------------------------------------- */

typedef struct result {
  int have;
  double seconds, bytes, loss, compute, train;
} result;

typedef struct reach { /* when DDP reached DASO's final train loss */
  int have;
  double epochs, ddp_seconds, daso_seconds;
} reach;

static char g_script[4096]; /* two-nodes.sh, for the signal handler */
static volatile sig_atomic_t g_up;

/* `two-nodes.sh down` from a signal handler: fork and exec only. */
static void on_signal(int sig) {
  if (g_up) {
    pid_t pid = fork();
    if (pid == 0) {
      execlp("bash", "bash", g_script, "down", (char *)NULL);
      _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* $TWO_NODES, else tests/two-nodes.sh in a parent of the program (the
 * libtool binary sits in bench/.libs of a build tree inside the source
 * tree, or next to it) or of the working directory. */
static int find_script(const char *self, char *out, size_t len) {
  const char *env = getenv("TWO_NODES");
  if (env && *env) return snprintf(out, len, "%s", env), file_exists(out);
  char dir[2048];
  if (snprintf(dir, sizeof dir, "%s", self) >= (int)sizeof dir) dir[0] = 0;
  for (int up = 0; up < 5; up++) {
    char *slash = strrchr(dir, '/');
    if (!slash) break;
    *slash = 0;
    snprintf(out, len, "%s/tests/two-nodes.sh", dir);
    if (file_exists(out)) return 1;
  }
  snprintf(out, len, "tests/two-nodes.sh");
  return file_exists(out);
}

static int sh(const char *cmd) {
  fflush(stdout);
  int rc = system(cmd);
  return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/* Run one worker launch, pass its output through, collect its result lines. */
static int launch(const char *cmd, result res[NMODES], reach *rch) {
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[1024], mode[16];
  while (fgets(line, sizeof line, p)) {
    result x = {1, 0, 0, 0, 0, 0};
    if (sscanf(line, "result %15s %lf %lf %lf %lf %lf", mode, &x.seconds, &x.bytes, &x.loss, &x.compute, &x.train) == 6) {
      for (int m = 0; m < NMODES; m++)
        if (strcmp(mode, mode_names[m]) == 0) res[m] = x;
    } else if (sscanf(line, "reach %lf %lf %lf", &rch->epochs, &rch->ddp_seconds, &rch->daso_seconds) == 3) {
      rch->have = 1;
    } else {
      fputs(line, stdout);
      fflush(stdout);
    }
  }
  int rc = pclose(p);
  return rc == 0 ? 0 : -1;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--epochs 20] [--batches 16] [--params 4000000] [--batch-size 128] [--lr 0.02]\n"
          "       [--delay 50us] [--no-netns] [--quick]\n"
          "  --quick: tiny model, 3 epochs of 4 batches, one machine (CI smoke run)\n"
          "  --no-netns: one machine with DIST_RANKS_PER_NODE=2 even where namespaces work\n"
          "  --delay: one-way delay added to the link (tests/netrelay; e.g. 50us, 1ms)\n",
          argv0);
}

/* Parse options; returns 1 for a worker, 0 for the driver, -1 on error. */
static int parse(int argc, char **argv, options *o) {
  int is_worker = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--worker") == 0) is_worker = 1;
    else if (strcmp(a, "--quick") == 0) o->quick = 1;
    else if (strcmp(a, "--no-netns") == 0) o->no_netns = 1;
    else if (!v) return -1;
    else if (strcmp(a, "--epochs") == 0) o->epochs = atoi(v), i++;
    else if (strcmp(a, "--batches") == 0) o->batches = atoi(v), i++;
    else if (strcmp(a, "--params") == 0) o->params = atoll(v), i++;
    else if (strcmp(a, "--batch-size") == 0) o->batch = atoi(v), i++;
    else if (strcmp(a, "--ranks-per-node") == 0) o->rpn = atoi(v), i++;
    else if (strcmp(a, "--veth") == 0) o->veth = v, i++;
    else if (strcmp(a, "--lr") == 0) o->lr = atof(v), i++;
    else if (strcmp(a, "--delay") == 0) o->delay = v, i++;
    else return -1;
  }
  if (o->quick && !is_worker) o->epochs = 3, o->batches = 4, o->params = 20000, o->batch = 16, o->no_netns = 1;
  if (o->epochs < 1 || o->epochs > 1000 || o->batches < 1 || o->batches > 100000 || o->batch < 1 || o->batch > 4096)
    return fprintf(stderr, "bench/daso: need 1 <= --epochs <= 1000, 1 <= --batches, 1 <= --batch-size <= 4096\n"), -1;
  if (o->params < 1000 || o->params > 200000000LL)
    return fprintf(stderr, "bench/daso: --params must be in [1000, 2e8]\n"), -1;
  return is_worker;
}

static void summary(const result res[NMODES], const reach *rch, int netns) {
  const result *a = &res[DDP];
  printf("\n%-10s %14s %14s %18s %12s %12s\n", "mode", "s/epoch", "fwd+bwd s/ep", netns ? "MB/epoch (veth)" : "MB/epoch (lib)",
         "final_loss", "train_loss");
  for (int m = 0; m < NMODES; m++)
    printf("%-10s %14.3f %14.3f %18.2f %12.5f %12.5f\n", mode_names[m], res[m].seconds, res[m].compute, res[m].bytes / 1e6,
           res[m].loss, res[m].train);
  for (int m = DASO; m < NMODES; m++) {
    const result *b = &res[m];
    const char *n = mode_names[m];
    double tr = b->seconds / a->seconds, lr = b->loss / a->loss, br = a->bytes > 0 ? b->bytes / a->bytes : NAN;
    printf("info: %s/ddp bytes between nodes per epoch = %.3f (%s)\n", n, br, netns ? "veth counters" : "library counters");
    if (netns) bench_ratio(stdout, tr, TARGET_TIME, "%s/ddp time per epoch", n);
    else printf("info: %s/ddp time per epoch = %.3f (one machine, no shaped link: not meaningful)\n", n, tr);
    bench_ratio(stdout, lr, TARGET_LOSS, "%s/ddp final loss", n);
  }
  if (rch->have)
    printf("info: ddp reached daso's final train loss after %.2f epochs, %.1f s; daso/ddp time to that loss = %.3f%s\n",
           rch->epochs, rch->ddp_seconds, rch->daso_seconds / rch->ddp_seconds, netns ? "" : " (not meaningful)");
  else
    printf("info: ddp never reached daso's final train loss\n");
}

int main(int argc, char **argv) {
  options o = {20, 16, 128, 0, 0, 0, 4000000, 0.02, NULL, NULL};
  int mode = parse(argc, argv, &o);
  if (mode < 0) return usage(argv[0]), 2;
  if (mode == 1) return worker(&o);

  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/daso: cannot find own path\n"), 1;
  int limit = o.quick ? 300 : 3600; /* a hang must end the run, not stall CI */
  char args[512], cmd[16384];
  snprintf(args, sizeof args, "--worker --epochs %d --batches %d --params %lld --batch-size %d --lr %g", o.epochs, o.batches,
           o.params, o.batch, o.lr);

  int netns = 0;
  if (o.no_netns) printf("bench/daso: %s: one machine, no namespaces\n", o.quick ? "--quick" : "--no-netns");
  else if (!find_script(self, g_script, sizeof g_script))
    printf("bench/daso: tests/two-nodes.sh not found (set TWO_NODES): one machine, no namespaces\n");
  else {
    snprintf(cmd, sizeof cmd, "timeout 60 bash '%s' check", g_script);
    netns = sh(cmd) == 0;
    if (!netns) printf("bench/daso: two simulated nodes are not possible here (see above): one machine, no namespaces\n");
  }

  result res[NMODES];
  memset(res, 0, sizeof res);
  reach rch = {0, 0, 0, 0};
  int rc = 0;
  if (netns) {
    if (!getenv("TWO_NODES_PREFIX")) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "bdaso%ld", (long)getpid());
      setenv("TWO_NODES_PREFIX", prefix, 1);
    }
    char tl[16];
    snprintf(tl, sizeof tl, "%d", limit);
    setenv("TWO_NODES_TIMEOUT", tl, 1);
    signal(SIGINT, on_signal), signal(SIGTERM, on_signal), signal(SIGHUP, on_signal);
    g_up = 1; /* from here on, a signal tears down whatever "up" made */
    if (o.delay && strspn(o.delay, "0123456789.usm") != strlen(o.delay))
      return fprintf(stderr, "bench/daso: --delay '%s' must look like 50us or 1ms\n", o.delay), 2;
    snprintf(cmd, sizeof cmd, "timeout 120 bash '%s' up %s %s", g_script, RATE, o.delay ? o.delay : "");
    if (sh(cmd) != 0) {
      rc = 1;
      fprintf(stderr, "bench/daso: two-nodes.sh up failed\n");
    } else {
      printf("bench/daso: 4 ranks on two simulated nodes (namespaces %s0/%s1), link shaped to %s%s%s\n",
             getenv("TWO_NODES_PREFIX"), getenv("TWO_NODES_PREFIX"), RATE, o.delay ? ", one-way delay " : "",
             o.delay ? o.delay : "");
      /* The delayed link is a TAP pair (tests/netrelay), the plain one a veth. */
      snprintf(cmd, sizeof cmd, "timeout -k 10 %d bash '%s' run %d '%s' %s --veth %s 2>&1", limit + 30, g_script, NP, self,
               args, o.delay ? "tap0" : "veth0");
      rc = launch(cmd, res, &rch);
    }
    snprintf(cmd, sizeof cmd, "timeout 120 bash '%s' down", g_script);
    if (sh(cmd) != 0) fprintf(stderr, "bench/daso: warning: two-nodes.sh down failed\n");
    g_up = 0;
  } else {
    const char *launcher = bench_launcher();
    printf("bench/daso: 4 ranks as 2 nodes of 2 on one machine (DIST_RANKS_PER_NODE=2; launcher: %s 4)\n", launcher);
    snprintf(cmd, sizeof cmd, "timeout -k 10 %d %s %d '%s' %s --ranks-per-node %d 2>&1", limit, launcher, NP, self, args,
             RANKS_PER_NODE);
    rc = launch(cmd, res, &rch);
  }
  if (rc || !res[DDP].have || !res[DASO].have || !res[DASO_DELTA].have)
    return fprintf(stderr, "bench/daso: the worker launch failed or gave no results\n"), 1;
  summary(res, &rch, netns);
  return 0;
}
