/* bench/reducer: the DDP gradient reducer against plain all-reduces, on the
 * parameter set of a real model shape (160 f32 tensors, 1 KiB to 4 MiB,
 * about 30 MiB: an embedding, 19 transformer-like blocks of 8 tensors, a
 * head), side by side in one run.
 *
 *   (a) per tensor: one blocking dist_all_reduce(DIST_AVG) per gradient, in
 *       backward order (what a naive data-parallel loop does)
 *   (b) reducer:    dist_ddp_mark_ready for every gradient in backward order,
 *       then dist_ddp_finalize (default options: 1 MiB first bucket, 25 MiB)
 *   (c) one buffer: a single dist_all_reduce(DIST_AVG) of all the bytes in
 *       one contiguous buffer: the limit, no copies, one collective
 *   (d) reducer with bf16 compression
 *   (f) reducer with f16 compression (target: what bf16 costs)
 *   (e) (b) with grad_as_bucket_view, i.e. without copying the gradients
 *       into and out of the buckets (target e/c <= 1.20; b - e is the copies)
 *
 * All of them average (sum, then divide by the group size). DIST_VERIFY: every
 * dist_all_reduce first runs a small agreement all-reduce, so (a) pays 160 of
 * them per iteration, (c) one, and the reducer one per finalize. The driver
 * therefore launches the comparison twice per rank count, DIST_VERIFY=1 (the
 * default) and DIST_VERIFY=0, the same setting for all variants.
 *
 * Overlap (a third launch per rank count, initialised with
 * DIST_THREAD_MULTIPLE so that progress = THREAD is available): a simulated
 * backward burns a fixed amount of CPU work per tensor, proportional to its
 * size, calibrated so the whole backward takes about as long as (c), and
 * marks each tensor as it finishes; then finalize. Reported per progress mode
 * against compute alone and against compute followed by the reduction
 * (serial: every mark after the compute, so nothing can overlap); TEST and
 * THREAD also with 4 MiB buckets, since a 25 MiB bucket of a 30 MiB model
 * only starts near the end of the backward.
 *
 * Each launch measures its variants in interleaved blocks (the order rotates
 * every round) because the machine is shared: a drift in load hits every
 * variant alike. A block's time is the slowest rank's; times shown are
 * medians over rounds, ratios the median of per-round ratios.
 *
 * Usage: bench/reducer [--ranks 2,4] [--rounds 9] [--quick]   (LAUNCHER as for make check)
 * --quick (CI smoke run): 40 tensors (about 11 MiB) and 3 rounds.
 * Exits non-zero only on errors (a failed call, a wrong result), never on a
 * missed target: those are reported in the `ratio:` lines. */
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024
#define MAX_TENSORS 256
#define MAX_ROUNDS 50
#define BLOCK_SECONDS 0.05 /* per variant per round: enough iterations to beat clock noise */

typedef struct options {
  const char *ranks;
  int rounds, quick, verify;
  int overlap; /* worker: run the overlap experiment instead of the comparison */
} options;

/* ---- the model ------------------------------------------------------------------- */

typedef struct model {
  int n;
  int64_t numel[MAX_TENSORS];
  char name[MAX_TENSORS][40];
  int64_t total;
} model;

static void add(model *m, const char *name, int64_t numel) {
  snprintf(m->name[m->n], sizeof m->name[0], "%s", name);
  m->numel[m->n++] = numel;
  m->total += numel;
}

/* Width 256: embedding [4096, 256] (4 MiB), position table, class token,
 * blocks of {norm w, b, qkv [768, 256], qkv b, out [256, 256], out b,
 * mlp [256, 256], mlp b}, final norm, a pooler bias, head [2048, 256] and its bias. */
static void build(model *m, int blocks) {
  const int64_t D = 256;
  char nm[40];
  memset(m, 0, sizeof *m);
  add(m, "embed.weight", 4096 * D);
  add(m, "pos.embed", 64 * D);
  add(m, "cls.token", D);
  for (int b = 0; b < blocks; b++) {
    static const char *const part[8] = {"norm.weight", "norm.bias", "qkv.weight", "qkv.bias",
                                        "out.weight",  "out.bias",  "mlp.weight", "mlp.bias"};
    const int64_t size[8] = {D, D, 3 * D * D, 3 * D, D * D, D, D * D, D};
    for (int k = 0; k < 8; k++) {
      snprintf(nm, sizeof nm, "block%d.%s", b, part[k]);
      add(m, nm, size[k]);
    }
  }
  add(m, "norm.weight", D);
  add(m, "norm.bias", D);
  add(m, "pool.bias", D);
  add(m, "head.weight", 2048 * D);
  add(m, "head.bias", 2048);
}

/* ---- worker state ------------------------------------------------------------------ */

/* A model's parameters and gradients, registered as a parameter set. */
typedef struct replica {
  float *data[MAX_TENSORS], *grad[MAX_TENSORS];
  dist_tensor t[MAX_TENSORS]; /* the gradients, for (a) */
  dist_params *p;
} replica;

typedef struct bench {
  int rank, size;
  model m;
  replica r, rv; /* rv: for the grad_as_bucket_view reducer, which moves the gradients */
  float *flat;   /* (c): all the bytes in one buffer */
  dist_tensor flat_t;
  long burn_units; /* overlap: work units of the whole simulated backward */
} bench;

static void fail(const bench *b, const char *what, const char *detail) {
  fprintf(stderr, "bench/reducer: rank %d: %s: %s\n", b->rank, what, detail);
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, 1); /* the others may be waiting in a collective */
  exit(1);
}

static void check(const bench *b, dist_status s, const char *what) {
  if (s == DIST_SUCCESS) return;
  char msg[512];
  snprintf(msg, sizeof msg, "%s (%s)", dist_status_string(s), dist_last_error());
  fail(b, what, msg);
}

/* Small integers: sums are exact in f32 and in bf16 (|x| <= 256), so every
 * variant must give the same average. */
static float pattern(int rank, int64_t i) { return (float)((i + 7 * (int64_t)rank) % 13); }

static void fill(bench *b, const replica *r) {
  for (int i = 0; i < b->m.n; i++) {
    float *g = dist_params_grad(r->p, i);
    for (int64_t k = 0; k < b->m.numel[i]; k++) g[k] = pattern(b->rank, k + i);
  }
  int64_t off = 0;
  for (int i = 0; i < b->m.n; i++)
    for (int64_t k = 0; k < b->m.numel[i]; k++) b->flat[off++] = pattern(b->rank, k + i);
}

static void replica_init(bench *b, replica *r) {
  check(b, dist_params_create(NULL, &r->p), "dist_params_create");
  for (int i = 0; i < b->m.n; i++) {
    r->data[i] = calloc((size_t)b->m.numel[i], sizeof(float));
    r->grad[i] = calloc((size_t)b->m.numel[i], sizeof(float));
    if (!r->data[i] || !r->grad[i]) fail(b, "calloc", "out of memory");
    r->t[i] = dist_tensor_host(r->grad[i], DIST_F32, 1, &b->m.numel[i]);
    check(b, dist_params_add_host(r->p, b->m.name[i], r->data[i], r->grad[i], b->m.numel[i], NULL), "dist_params_add");
  }
  check(b, dist_params_commit(r->p), "dist_params_commit");
}

static void replica_free(bench *b, replica *r) {
  dist_params_destroy(r->p);
  for (int i = 0; i < b->m.n; i++) free(r->data[i]), free(r->grad[i]);
}

static void setup(bench *b, int blocks, int view) {
  build(&b->m, blocks);
  replica_init(b, &b->r);
  if (view) replica_init(b, &b->rv);
  b->flat = malloc(sizeof(float) * (size_t)b->m.total);
  if (!b->flat) fail(b, "malloc", "out of memory");
  b->flat_t = dist_tensor_host(b->flat, DIST_F32, 1, &b->m.total);
}

static void teardown(bench *b) {
  replica_free(b, &b->r);
  if (b->rv.p) replica_free(b, &b->rv);
  free(b->flat);
}

/* cap: bucket_bytes, 0 = the default (25 MiB). */
static dist_ddp *reducer(bench *b, replica *r, dist_ddp_compress c, dist_ddp_progress prog, int view, size_t cap) {
  dist_ddp_options o = DIST_DDP_OPTIONS_INIT;
  if (cap) o.bucket_bytes = cap;
  o.compress = c;
  o.progress = prog;
  o.grad_as_bucket_view = view;
  dist_ddp *d;
  check(b, dist_ddp_create(r->p, &o, &d), "dist_ddp_create");
  return d;
}

/* ---- the variants ----------------------------------------------------------------- */

static void per_tensor(bench *b) { /* (a) */
  for (int i = b->m.n - 1; i >= 0; i--) check(b, dist_all_reduce(NULL, &b->r.t[i], DIST_AVG), "dist_all_reduce");
}

static void ddp(bench *b, dist_ddp *d) { /* (b), (d) */
  for (int i = b->m.n - 1; i >= 0; i--) check(b, dist_ddp_mark_ready(d, i), "dist_ddp_mark_ready");
  check(b, dist_ddp_finalize(d), "dist_ddp_finalize");
}

static void one_buffer(bench *b) { /* (c) */
  check(b, dist_all_reduce(NULL, &b->flat_t, DIST_AVG), "dist_all_reduce (one buffer)");
}

/* Every variant leaves the exact average of pattern() over the ranks. */
static void verify(bench *b, int variant, dist_ddp *d, const replica *r) {
  fill(b, r);
  if (variant == 0) per_tensor(b);
  else if (variant == 2) one_buffer(b);
  else ddp(b, d);
  int64_t off = 0;
  for (int i = 0; i < b->m.n; i++)
    for (int64_t k = 0; k < b->m.numel[i]; k++, off++) {
      double want = 0;
      for (int r = 0; r < b->size; r++) want += pattern(r, k + i);
      want = (float)(want / b->size);
      float got = variant == 2 ? b->flat[off] : ((const float *)dist_params_grad(r->p, i))[k];
      if (fabs(got - want) > 1e-6 * fabs(want)) {
        char msg[160];
        snprintf(msg, sizeof msg, "variant %c: %s[%lld] = %g, expected %g", 'a' + variant, b->m.name[i], (long long)k,
                 got, want);
        fail(b, "result", msg);
      }
    }
}

/* ---- timing -------------------------------------------------------------------------- */

typedef void (*variant_fn)(bench *b, void *arg);

/* Seconds per iteration over `iters`, the slowest rank's. */
static double block(bench *b, variant_fn f, void *arg, int iters) {
  MPI_Comm comm;
  dist_group_comm(NULL, &comm);
  MPI_Barrier(comm);
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) f(b, arg);
  return bench_slowest(comm, (bench_now() - t0) / iters);
}

typedef struct variant {
  const char *name;
  variant_fn f;
  void *arg;
  int iters;
  double t[MAX_ROUNDS];
} variant;

/* bench_rounds' block: one block of variant k. */
typedef struct rounds_arg {
  bench *b;
  variant *v;
} rounds_arg;

static double variant_block(void *ctx, int k) {
  rounds_arg *a = ctx;
  return block(a->b, a->v[k].f, a->v[k].arg, a->v[k].iters);
}

/* Interleaved rounds, the order rotating (bench_rounds): none always runs
 * first or right after the same neighbour. */
static void measure(bench *b, variant *v, int nv, int rounds) {
  for (int k = 0; k < nv; k++) {
    v[k].f(b, v[k].arg); /* warm-up: first-touch, MPI buffers */
    double one = block(b, v[k].f, v[k].arg, 1);
    v[k].iters = one > 0 ? (int)(BLOCK_SECONDS / one) + 1 : 1;
    if (v[k].iters > 100) v[k].iters = 100;
  }
  double t[8 * MAX_ROUNDS]; /* up to 8 variants (overlap has 7) */
  rounds_arg a = {b, v};
  bench_rounds(nv, rounds, 1, variant_block, &a, t);
  for (int k = 0; k < nv; k++) memcpy(v[k].t, t + k * rounds, sizeof *t * (size_t)rounds);
}

static void f_per_tensor(bench *b, void *arg) { (void)arg, per_tensor(b); }
static void f_ddp(bench *b, void *arg) { ddp(b, arg); }
static void f_one_buffer(bench *b, void *arg) { (void)arg, one_buffer(b); }

static void compare(bench *b, const options *o) {
  dist_ddp *plain = reducer(b, &b->r, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_TEST, 0, 0);
  dist_ddp *bf16 = reducer(b, &b->r, DIST_DDP_COMPRESS_BF16, DIST_DDP_PROGRESS_TEST, 0, 0);
  dist_ddp *view = reducer(b, &b->rv, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_TEST, 1, 0);
  dist_ddp *f16 = reducer(b, &b->r, DIST_DDP_COMPRESS_F16, DIST_DDP_PROGRESS_TEST, 0, 0);
  verify(b, 0, NULL, &b->r), verify(b, 1, plain, &b->r), verify(b, 2, NULL, &b->r), verify(b, 3, bf16, &b->r);
  verify(b, 4, view, &b->rv), verify(b, 5, f16, &b->r);
  /* (e) is not one of the targets: it shows what the gradient copies cost */
  variant v[6] = {{"a per-tensor", f_per_tensor, NULL, 0, {0}},
                  {"b reducer", f_ddp, plain, 0, {0}},
                  {"c one buffer", f_one_buffer, NULL, 0, {0}},
                  {"d reducer bf16", f_ddp, bf16, 0, {0}},
                  {"e reducer view", f_ddp, view, 0, {0}},
                  {"f reducer f16", f_ddp, f16, 0, {0}}};
  measure(b, v, 6, o->rounds);
  if (b->rank == 0) {
    printf("np=%d DIST_VERIFY=%d, %d buckets, median ms per iteration over %d rounds "
           "(e = b with grad_as_bucket_view, no gradient copies):\n",
           b->size, o->verify, dist_ddp_bucket_count(plain), o->rounds);
    for (int k = 0; k < 6; k++) {
      double t = bench_median(v[k].t, o->rounds);
      printf("  %-15s %9.2f ms  %7.2f GB/s algbw  (%d it/block)\n", v[k].name, t * 1e3,
             (double)b->m.total * 4 / t / 1e9, v[k].iters);
    }
    /* num, den (indices into v), target, what */
    static const struct {
      int num, den;
      const char *note, *what;
    } ratios[5] = {{1, 2, "target <= 1.10", "b/c reducer/one-buffer"},
                   {0, 1, "target >= 2", "a/b per-tensor/reducer"},
                   {3, 1, "target <= 0.65", "d/b bf16/f32 reducer"},
                   {4, 2, "target <= 1.20", "e/c view-reducer/one-buffer"},
                   {5, 3, "target <= 1.10", "f/d f16/bf16 reducer"}};
    for (int q = 0; q < 5; q++)
      bench_ratio(stdout, bench_paired_ratio(v[ratios[q].num].t, v[ratios[q].den].t, o->rounds), ratios[q].note,
                  "%s np=%d verify=%d", ratios[q].what, b->size, o->verify);
    fflush(stdout);
  }
  dist_ddp_destroy(plain);
  dist_ddp_destroy(bf16);
  dist_ddp_destroy(view);
  dist_ddp_destroy(f16);
}

/* ---- overlap ------------------------------------------------------------------------ */

static volatile double sink;

/* A dependent multiply-add chain: fixed work per unit whatever the
 * scheduler does, so a progress thread that steals the core shows up. */
static void burn(long units) {
  double x = sink;
  for (long i = 0; i < units; i++) x = x * 0.9999999 + 1e-7;
  sink = x;
}

typedef struct backward_arg {
  dist_ddp *d;
  int mode; /* 0 compute only, 1 serial (marks after the compute), 2 overlapped */
} backward_arg;

static void f_backward(bench *b, void *arg) {
  const backward_arg *a = arg;
  for (int i = b->m.n - 1; i >= 0; i--) {
    burn((long)((double)b->burn_units * (double)b->m.numel[i] / (double)b->m.total));
    if (a->mode == 2) check(b, dist_ddp_mark_ready(a->d, i), "dist_ddp_mark_ready");
  }
  if (a->mode == 1) ddp(b, a->d);
  if (a->mode == 2) check(b, dist_ddp_finalize(a->d), "dist_ddp_finalize");
}

#define FINE_BUCKET ((size_t)4 << 20)

/* Bucket sizes in launch order: how late in the backward each can start. */
static void print_buckets(const char *what, const dist_ddp *d) {
  printf("  %s:", what);
  for (int k = 0; k < dist_ddp_bucket_count(d); k++) {
    size_t bytes = 0;
    dist_ddp_bucket_info(d, k, NULL, NULL, &bytes, NULL);
    printf(" %.2f", (double)bytes / (1 << 20));
  }
  printf(" MiB\n");
}

static void overlap(bench *b, const options *o) {
  dist_ddp *none = reducer(b, &b->r, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_NONE, 0, 0);
  dist_ddp *test = reducer(b, &b->r, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_TEST, 0, 0);
  dist_ddp *thread = reducer(b, &b->r, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_THREAD, 0, 0);
  /* Finer buckets launch earlier in the backward: more of it can overlap. */
  dist_ddp *test4 = reducer(b, &b->r, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_TEST, 0, FINE_BUCKET);
  dist_ddp *thread4 = reducer(b, &b->r, DIST_DDP_COMPRESS_NONE, DIST_DDP_PROGRESS_THREAD, 0, FINE_BUCKET);
  verify(b, 1, thread, &b->r);
  verify(b, 1, thread4, &b->r);
  /* Calibrate: the whole backward's work takes as long as (c). */
  variant c = {"c one buffer", f_one_buffer, NULL, 0, {0}};
  measure(b, &c, 1, o->rounds < 5 ? o->rounds : 5);
  double tc = bench_median(c.t, o->rounds < 5 ? o->rounds : 5);
  MPI_Comm comm;
  dist_group_comm(NULL, &comm);
  long probe = 1000000;
  double t0;
  do {
    probe *= 2;
    MPI_Barrier(comm); /* all ranks burn together, as in the experiment */
    t0 = bench_now();
    burn(probe);
    t0 = bench_slowest(comm, bench_now() - t0); /* every rank leaves the loop together */
  } while (t0 < 0.05);
  b->burn_units = (long)((double)probe * tc / t0); /* tc and t0 are the slowest rank's: the same everywhere */
  backward_arg args[7] = {{none, 0}, {none, 1}, {none, 2}, {test, 2}, {thread, 2}, {test4, 2}, {thread4, 2}};
  variant v[7] = {{"compute", f_backward, &args[0], 0, {0}},
                  {"serial", f_backward, &args[1], 0, {0}},
                  {"NONE", f_backward, &args[2], 0, {0}},
                  {"TEST", f_backward, &args[3], 0, {0}},
                  {"THREAD", f_backward, &args[4], 0, {0}},
                  {"TEST/4MiB-buckets", f_backward, &args[5], 0, {0}},
                  {"THREAD/4MiB-buckets", f_backward, &args[6], 0, {0}}};
  measure(b, v, 7, o->rounds);
  if (b->rank == 0) {
    double comp = bench_median(v[0].t, o->rounds), ser = bench_median(v[1].t, o->rounds);
    printf("np=%d overlap (DIST_THREAD_MULTIPLE, DIST_VERIFY=%d): (c) alone %.2f ms; simulated backward calibrated to it\n",
           b->size, o->verify, tc * 1e3);
    print_buckets("default buckets", test);
    print_buckets("4 MiB buckets", test4);
    for (int k = 2; k < 7; k++) {
      double t = bench_median(v[k].t, o->rounds);
      printf("overlap: %s np=%d = %.2f ms (compute %.2f ms, serial %.2f ms; hidden %.0f%% of the reduction)\n",
             v[k].name, b->size, t * 1e3, comp * 1e3, ser * 1e3, ser > comp ? 100 * (ser - t) / (ser - comp) : 0.0);
    }
    fflush(stdout);
  }
  dist_ddp_destroy(none);
  dist_ddp_destroy(test);
  dist_ddp_destroy(thread);
  dist_ddp_destroy(test4);
  dist_ddp_destroy(thread4);
}

static int worker(const options *o) {
  setenv("DIST_VERIFY", o->verify ? "1" : "0", 1); /* read once, at initialize, on every rank */
  bench b;
  memset(&b, 0, sizeof b);
  b.rank = -1;
  dist_init_options io = DIST_INIT_OPTIONS_INIT;
  if (o->overlap) io.thread_level = DIST_THREAD_MULTIPLE;
  check(&b, dist_manager_initialize_with(&io), "dist_manager_initialize_with");
  check(&b, dist_manager_rank(&b.rank), "dist_manager_rank");
  check(&b, dist_manager_world_size(&b.size), "dist_manager_world_size");
  setup(&b, o->quick ? 4 : 19, !o->overlap);
  if (o->overlap) overlap(&b, o);
  else compare(&b, o);
  teardown(&b);
  check(&b, dist_manager_finalize(), "dist_manager_finalize");
  return 0;
}

/* ---- driver ------------------------------------------------------------------------- */

/* Launch one worker run and pass its output through, keeping the summary
 * lines for the end. */
static int launch(const char *self, const char *launcher, int np, const options *o, char *summary, size_t cap) {
  char cmd[8192], line[512];
  int limit = o->quick ? 180 : 1200; /* a hang must end the run, not stall CI */
  int len = snprintf(cmd, sizeof cmd, "timeout %d %s %d %s --worker --verify %d --rounds %d%s%s 2>&1", limit, launcher,
                     np, self, o->verify, o->rounds, o->quick ? " --quick" : "", o->overlap ? " --overlap" : "");
  if (len < 0 || len >= (int)sizeof cmd) return -1;
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  while (fgets(line, sizeof line, p)) {
    fputs(line, stdout);
    fflush(stdout);
    if ((!strncmp(line, "ratio:", 6) || !strncmp(line, "overlap:", 8) || !strncmp(line, "info:", 5)) && strlen(summary) + strlen(line) < cap)
      strcat(summary, line);
  }
  return pclose(p) == 0 ? 0 : -1;
}

static int parse(int argc, char **argv, options *o) {
  int is_worker = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--worker")) is_worker = 1;
    else if (!strcmp(a, "--quick")) o->quick = 1;
    else if (!strcmp(a, "--overlap")) o->overlap = 1;
    else if (!v) return -1;
    else if (!strcmp(a, "--ranks")) o->ranks = v, i++;
    else if (!strcmp(a, "--rounds")) o->rounds = atoi(v), i++;
    else if (!strcmp(a, "--verify")) o->verify = atoi(v), i++;
    else return -1;
  }
  if (o->quick && o->rounds > 3) o->rounds = 3;
  if (o->rounds < 1 || o->rounds > MAX_ROUNDS)
    return fprintf(stderr, "bench/reducer: --rounds must be 1..%d\n", MAX_ROUNDS), -1;
  return is_worker;
}

int main(int argc, char **argv) {
  options o = {"2,4", 9, 0, 1, 0};
  int mode = parse(argc, argv, &o);
  if (mode < 0) {
    fprintf(stderr, "usage: %s [--ranks 2,4] [--rounds 9] [--quick]\n  --quick: 40 tensors, 3 rounds (CI smoke run)\n",
            argv[0]);
    return 2;
  }
  if (mode == 1) return worker(&o);

  const char *launcher = bench_launcher();
  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/reducer: cannot find own path\n"), 1;

  model m;
  build(&m, o.quick ? 4 : 19);
  int64_t lo = m.numel[0], hi = m.numel[0];
  for (int i = 0; i < m.n; i++) lo = m.numel[i] < lo ? m.numel[i] : lo, hi = m.numel[i] > hi ? m.numel[i] : hi;
  printf("bench/reducer: %d f32 tensors, %.2f MiB in all, %lld B to %.0f KiB each (launcher: %s N)\n", m.n,
         (double)m.total * 4 / (KIB * KIB), (long long)lo * 4, (double)hi * 4 / KIB, launcher);
  printf("variants average: dist_all_reduce(DIST_AVG) = MPI sum + divide; the reducer sums and divides the same way.\n"
         "DIST_VERIFY: each dist_all_reduce runs one small agreement all-reduce first, so (a) pays %d per iteration,\n"
         "(c) one, the reducer one per finalize; the comparison runs with DIST_VERIFY=1 (default) and =0, the same\n"
         "setting for all variants.\n",
         m.n);
  char summary[8192] = "";
  char list[128];
  snprintf(list, sizeof list, "%s", o.ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    if (np < 1) return fprintf(stderr, "bench/reducer: bad rank count '%s'\n", tok), 2;
    for (o.verify = 1; o.verify >= 0; o.verify--)
      if (launch(self, launcher, np, &o, summary, sizeof summary))
        return fprintf(stderr, "bench/reducer: the launch at %d ranks, DIST_VERIFY=%d failed\n", np, o.verify), 1;
    o.verify = 1, o.overlap = 1;
    if (launch(self, launcher, np, &o, summary, sizeof summary))
      return fprintf(stderr, "bench/reducer: the overlap launch at %d ranks failed\n", np), 1;
    o.overlap = 0;
  }
  printf("summary:\n%s", summary);
  return 0;
}
