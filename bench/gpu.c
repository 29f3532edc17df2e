/* bench/gpu: distmgr's device paths against the plain CUDA libraries on the
 * same buffers, one GPU, one rank, side by side in one run.
 *
 *   all_reduce    f32 sum in place      dist_all_reduce        vs ncclAllReduce
 *   all_to_all_v  f32                   dist_all_to_all_v      vs ncclSend/ncclRecv in a group
 *   fft           r2c [B, n0, n1]       dist_fft_forward       vs one cufftPlanMany 2-D plan
 *                 (both layouts), and the bytes it moves per second against the HBM bandwidth
 *   ddp           f32 gradients         mark_ready + finalize  vs one ncclAllReduce of all bytes
 *   optimizer     SGD (momentum), Adam  dist_optim_step        vs the HBM bound (bytes touched / bandwidth)
 *
 * The HBM bandwidth is measured here: a device-to-device copy, bytes read plus
 * written. Each comparison alternates blocks of the two sides (CUDA events,
 * after warm-up) over several rounds; times are each side's median, the ratio
 * the median of the per-round ratios. A missed target is reported in its
 * `ratio:` line, never as a failure; wrong results and failed calls exit 1.
 *
 * Usage: bench/gpu [--quick] [--rounds N]       (one rank: run as is, or under mpirun -n 1)
 * Without a CUDA device (or built without CUDA, NCCL or cuFFT) the parts that
 * need one print SKIP and the program exits 0. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "bench_util.h"
#include <distmgr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(HAVE_CUDA) || !defined(HAVE_NCCL) || !defined(HAVE_CUFFT)
int main(void) {
  printf("SKIP: bench/gpu needs a build with CUDA, NCCL and cuFFT\n");
  return 0;
}
#else

#include <cuda_runtime.h>
#include <cufft.h>
#include <distmgr/cuda.h>
#include <math.h>
#include <nccl.h>

#define MIB (1024LL * 1024LL)

static int quick, rounds = 7;
static cudaStream_t S;
static double hbm; /* bytes per second, read + written */

/* A failed call ends the run: file, line, the call and the library's message. */
static void fail_if(int failed, const char *file, int line, const char *call, const char *why) {
  if (!failed) return;
  fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, why);
  exit(1);
}
static const char *cufft_why(cufftResult r) {
  static char buf[32];
  snprintf(buf, sizeof buf, "cufftResult %d", (int)r);
  return buf;
}
#define CK(x) do { cudaError_t e_ = (x); fail_if(e_ != cudaSuccess, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); } while (0)
#define NK(x) do { ncclResult_t r_ = (x); fail_if(r_ != ncclSuccess, __FILE__, __LINE__, #x, ncclGetErrorString(r_)); } while (0)
#define FK(x) do { cufftResult r_ = (x); fail_if(r_ != CUFFT_SUCCESS, __FILE__, __LINE__, #x, cufft_why(r_)); } while (0)
#define DK(x) do { dist_status s_ = (x); fail_if(s_ != DIST_SUCCESS, __FILE__, __LINE__, #x, dist_last_error()); } while (0)

/* ---- timing ------------------------------------------------------------------ */

typedef void (*op_fn)(void *ctx);

/* Milliseconds per call of f, enqueued reps times on S between two events. */
static double block_ms(op_fn f, void *ctx, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, S));
  for (int i = 0; i < reps; i++) f(ctx);
  CK(cudaEventRecord(b, S));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms / reps;
}

/* Calls per block so that one block lasts about 20 ms (at least 3). */
static int reps_for(op_fn f, void *ctx) {
  double ms = block_ms(f, ctx, 3);
  int r = (int)(20.0 / (ms > 1e-3 ? ms : 1e-3));
  return r < 3 ? 3 : r > 2000 ? 2000 : r;
}

typedef struct {
  double a_ms, b_ms, ratio; /* medians; ratio = a / b per round */
} pair_time;

/* bench_rounds' block: variant 0 is A (distmgr), 1 is B (the reference). */
typedef struct pair_arg {
  op_fn f[2];
  void *ctx[2];
  int reps[2];
} pair_arg;

static double pair_block(void *arg, int k) {
  pair_arg *p = arg;
  return block_ms(p->f[k], p->ctx[k], p->reps[k]);
}

/* A (distmgr) against B (the reference), alternating blocks, A first. */
static pair_time compare(op_fn a, void *actx, op_fn b, void *bctx) {
  for (int i = 0; i < 3; i++) a(actx), b(bctx); /* warm-up: plans, communicators, caches */
  CK(cudaStreamSynchronize(S));
  pair_arg p = {{a, b}, {actx, bctx}, {reps_for(a, actx), reps_for(b, bctx)}};
  double t[2 * 64];
  bench_rounds(2, rounds, 0, pair_block, &p, t);
  const double *ta = t, *tb = t + rounds;
  pair_time r = {bench_median(ta, rounds), bench_median(tb, rounds), bench_paired_ratio(ta, tb, rounds)};
  return r;
}

static double single(op_fn f, void *ctx) {
  for (int i = 0; i < 3; i++) f(ctx);
  int r = reps_for(f, ctx);
  double t[64];
  for (int k = 0; k < rounds; k++) t[k] = block_ms(f, ctx, r);
  return bench_median(t, rounds);
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CK(cudaMalloc(&p, bytes));
  return p;
}

/* Random floats in [-1, 1) on the device, from a host LCG (never zeros). */
static void fill_random(float *d, size_t n, unsigned seed) {
  float *h = malloc(n * sizeof *h);
  unsigned long long x = seed * 2654435761ULL + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    h[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
  }
  CK(cudaMemcpy(d, h, n * sizeof *h, cudaMemcpyHostToDevice));
  free(h);
}

/* max |a - b| over n device floats, relative to max |b|. */
static double rel_diff(const float *a, const float *b, size_t n) {
  float *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
  CK(cudaStreamSynchronize(S));
  CK(cudaMemcpy(ha, a, n * sizeof *ha, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb, b, n * sizeof *hb, cudaMemcpyDeviceToHost));
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)ha[i] - hb[i]);
    d = e > d || e != e ? e : d;
    m = fabs(hb[i]) > m ? fabs(hb[i]) : m;
  }
  free(ha);
  free(hb);
  return m > 0 ? d / m : d;
}

static void check_close(const char *what, double rel, double tol) {
  if (!(rel <= tol)) {
    fprintf(stderr, "bench/gpu: %s differs from the reference: relative %.3g > %.3g\n", what, rel, tol);
    exit(1);
  }
}

/* ---- HBM bandwidth ------------------------------------------------------------- */

typedef struct {
  void *dst, *src;
  size_t bytes;
} copy_ctx;
static void copy_op(void *c) {
  copy_ctx *x = c;
  CK(cudaMemcpyAsync(x->dst, x->src, x->bytes, cudaMemcpyDeviceToDevice, S));
}

static void measure_hbm(void) {
  copy_ctx c = {NULL, NULL, (size_t)(quick ? 256 : 1024) * MIB};
  c.dst = dev_alloc(c.bytes);
  c.src = dev_alloc(c.bytes);
  CK(cudaMemset(c.src, 1, c.bytes));
  double ms = single(copy_op, &c);
  hbm = 2.0 * (double)c.bytes / (ms * 1e-3);
  printf("HBM: device-to-device copy of %lld MiB: %.3f ms, %.0f GB/s (read + written)\n",
         (long long)(c.bytes / MIB), ms, hbm / 1e9);
  CK(cudaFree(c.dst));
  CK(cudaFree(c.src));
}

/* ---- collectives ---------------------------------------------------------------- */

typedef struct {
  ncclComm_t comm;
  float *x, *y;
  int64_t n;
  dist_tensor tx, ty;
} coll_ctx;

static void dist_ar(void *c) {
  coll_ctx *x = c;
  DK(dist_all_reduce(NULL, &x->tx, DIST_SUM));
}
static void nccl_ar(void *c) {
  coll_ctx *x = c;
  NK(ncclAllReduce(x->x, x->x, (size_t)x->n, ncclFloat32, ncclSum, x->comm, S));
}
static void dist_a2a(void *c) {
  coll_ctx *x = c;
  DK(dist_all_to_all_v(NULL, &x->tx, &x->ty, 0, &x->n, &x->n));
}
static void nccl_a2a(void *c) {
  coll_ctx *x = c;
  NK(ncclGroupStart());
  NK(ncclSend(x->x, (size_t)x->n, ncclFloat32, 0, x->comm, S));
  NK(ncclRecv(x->y, (size_t)x->n, ncclFloat32, 0, x->comm, S));
  NK(ncclGroupEnd());
}

static void bench_collectives(int dev) {
  coll_ctx c;
  ncclUniqueId id;
  NK(ncclGetUniqueId(&id));
  NK(ncclCommInitRank(&c.comm, 1, id, 0));
  long long max = (quick ? 16 : 256) * MIB;
  c.x = dev_alloc((size_t)max);
  c.y = dev_alloc((size_t)max);
  fill_random(c.x, (size_t)(max / 4), 1);
  printf("\n%-13s %10s %12s %12s %8s\n", "collective", "bytes", "distmgr ms", "NCCL ms", "ratio");
  double worst[2] = {0, 0};
  for (int op = 0; op < 2; op++)
    for (long long bytes = MIB; bytes <= max; bytes *= 4) {
      c.n = bytes / 4;
      c.tx = dist_tensor_cuda(c.x, DIST_F32, dev, 1, &c.n);
      c.ty = dist_tensor_cuda(c.y, DIST_F32, dev, 1, &c.n);
      if (op == 1) { /* the result first: all-to-all-v to self is a copy */
        CK(cudaMemsetAsync(c.y, 0xff, (size_t)bytes, S));
        dist_a2a(&c);
        check_close("all_to_all_v", rel_diff(c.y, c.x, (size_t)c.n), 0);
      }
      pair_time t = op ? compare(dist_a2a, &c, nccl_a2a, &c) : compare(dist_ar, &c, nccl_ar, &c);
      printf("%-13s %10lld %12.4f %12.4f %8.3f\n", op ? "all_to_all_v" : "all_reduce", bytes, t.a_ms, t.b_ms, t.ratio);
      worst[op] = t.ratio > worst[op] ? t.ratio : worst[op];
    }
  bench_ratio(stdout, worst[0], "target <= 1.05", "device all_reduce distmgr/NCCL, worst from 1 MiB");
  bench_ratio(stdout, worst[1], "target <= 1.05", "device all_to_all_v distmgr/NCCL, worst from 1 MiB");
  CK(cudaFree(c.x));
  CK(cudaFree(c.y));
  NK(ncclCommDestroy(c.comm));
}

/* ---- FFT ------------------------------------------------------------------------- */

typedef struct {
  dist_fft_plan *plan;
  cufftHandle ref;
  float *in;
  void *out, *ref_out;
  dist_tensor tin, tout;
} fft_ctx;

static void dist_fwd(void *c) {
  fft_ctx *x = c;
  DK(dist_fft_forward(x->plan, &x->tin, &x->tout));
}
static void cufft_fwd(void *c) {
  fft_ctx *x = c;
  FK(cufftExecR2C(x->ref, x->in, x->ref_out));
}

/* Element (b, i, j) of [B, n0, k1] (ref) against distmgr's output layout. */
static double fft_check(const fft_ctx *x, int64_t B, int64_t n0, int64_t k1, int transposed) {
  size_t n = (size_t)(B * n0 * k1);
  float *a = malloc(n * 8), *r = malloc(n * 8);
  CK(cudaStreamSynchronize(S));
  CK(cudaMemcpy(a, x->out, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r, x->ref_out, n * 8, cudaMemcpyDeviceToHost));
  double d = 0, m = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < n0; i++)
      for (int64_t j = 0; j < k1; j++) {
        int64_t ir = (b * n0 + i) * k1 + j, ia = transposed ? (i * B + b) * k1 + j : ir;
        for (int c = 0; c < 2; c++) {
          double e = fabs((double)a[2 * ia + c] - r[2 * ir + c]);
          d = e > d || e != e ? e : d;
          m = fabs(r[2 * ir + c]) > m ? fabs(r[2 * ir + c]) : m;
        }
      }
  free(a);
  free(r);
  return d / m;
}

static void bench_fft(int dev) {
  /* AFNO-sized: FourCastNet's 720x1440 grid in 8x8 patches is 90x180 tokens
   * of 768 channels; and one large field. [batch, n0, n1] each. */
  const int64_t shapes[][3] = {{768, 90, 180}, {16, 720, 1440}, {4, 2048, 2048}};
  int ns = quick ? 1 : 3;
  printf("\n%-16s %-11s %10s %10s %8s %9s %9s\n", "fft r2c f32", "layout", "distmgr ms", "cuFFT ms", "ratio",
         "GB/s", "of HBM");
  double worst = 0, best_frac = 0;
  for (int s = 0; s < ns; s++) {
    int64_t B = shapes[s][0], n0 = shapes[s][1], n1 = shapes[s][2], k1 = n1 / 2 + 1;
    fft_ctx x;
    size_t in_n = (size_t)(B * n0 * n1), out_n = (size_t)(B * n0 * k1);
    x.in = dev_alloc(in_n * 4);
    x.out = dev_alloc(out_n * 8);
    x.ref_out = dev_alloc(out_n * 8);
    fill_random(x.in, in_n, 2 + (unsigned)s);
    int n[2] = {(int)n0, (int)n1};
    FK(cufftPlanMany(&x.ref, 2, n, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, (int)B));
    FK(cufftSetStream(x.ref, S));
    cufft_fwd(&x);
    for (int layout = 0; layout < 2; layout++) {
      dist_fft_options o = DIST_FFT_OPTIONS_INIT;
      o.layout = layout ? DIST_FFT_OUT_SAME : DIST_FFT_OUT_TRANSPOSED;
      int64_t shape[3] = {B, n0, n1};
      DK(dist_fft_plan_create(&x.plan, DIST_FFT_R2C, DIST_F32, DIST_MEM_CUDA, 3, shape, 2, &o));
      int64_t oshape[3] = {layout ? B : n0, layout ? n0 : B, k1};
      x.tin = dist_tensor_cuda(x.in, DIST_F32, dev, 3, shape);
      x.tout = dist_tensor_cuda(x.out, DIST_C64, dev, 3, oshape);
      CK(cudaMemsetAsync(x.out, 0xff, out_n * 8, S));
      dist_fwd(&x);
      check_close("the distributed FFT", fft_check(&x, B, n0, k1, !layout), 1e-5);
      pair_time t = compare(dist_fwd, &x, cufft_fwd, &x);
      double bytes = (double)in_n * 4 + (double)out_n * 8; /* read once, written once */
      double gbs = bytes / (t.a_ms * 1e-3) / 1e9;
      printf("%4lldx%4lldx%-5lld %-11s %10.4f %10.4f %8.3f %9.0f %8.0f%%\n", (long long)B, (long long)n0,
             (long long)n1, layout ? "same" : "transposed", t.a_ms, t.b_ms, t.ratio, gbs, 100 * gbs * 1e9 / hbm);
      worst = t.ratio > worst ? t.ratio : worst;
      best_frac = gbs * 1e9 / hbm > best_frac ? gbs * 1e9 / hbm : best_frac;
      dist_fft_plan_destroy(x.plan);
    }
    FK(cufftDestroy(x.ref));
    CK(cudaFree(x.in));
    CK(cudaFree(x.out));
    CK(cudaFree(x.ref_out));
  }
  bench_ratio(stdout, worst, "target <= 1.10", "device fft distmgr (1 rank)/cuFFT, worst");
  bench_ratio(stdout, best_frac, "minimum bytes: input read + output written once",
              "device fft bytes moved / HBM bandwidth, best");
}

/* ---- DDP ------------------------------------------------------------------------- */

enum { NPARAM = 64 };
typedef struct {
  dist_ddp *ddp;
  ncclComm_t comm;
  float *flat;
  size_t total;
  int n;
} ddp_ctx;

static void ddp_step(void *c) {
  ddp_ctx *x = c;
  for (int i = x->n - 1; i >= 0; i--) DK(dist_ddp_mark_ready(x->ddp, i)); /* backward order */
  DK(dist_ddp_finalize(x->ddp));
}
static void nccl_flat(void *c) {
  ddp_ctx *x = c;
  NK(ncclAllReduce(x->flat, x->flat, x->total, ncclFloat32, ncclAvg, x->comm, S));
}

static void bench_ddp(int dev) {
  /* A ResNet-50-sized model: 25.6 M f32 parameters in 64 tensors of mixed sizes. */
  int64_t total = quick ? 1 << 22 : 25600000;
  int64_t sizes[NPARAM], sum = 0;
  for (int i = 0; i < NPARAM; i++) sum += sizes[i] = 1000 + (i % 8) * (total / NPARAM) / 4;
  sizes[NPARAM - 1] += total - sum > 0 ? total - sum : 0;
  ddp_ctx x = {0};
  x.n = NPARAM;
  ncclUniqueId id;
  NK(ncclGetUniqueId(&id));
  NK(ncclCommInitRank(&x.comm, 1, id, 0));
  x.total = 0;
  for (int i = 0; i < NPARAM; i++) x.total += (size_t)sizes[i];
  x.flat = dev_alloc(x.total * 4);
  fill_random(x.flat, x.total, 5);
  char head[40];
  snprintf(head, sizeof head, "ddp (%.1fM f32 params)", (double)total / 1e6);
  printf("\n%-26s %12s %12s %8s\n", head, "distmgr ms", "NCCL ms", "ratio");
  double worst = 0;
  for (int view = 0; view < 2; view++) {
    float *data = dev_alloc(x.total * 4), *grad = dev_alloc(x.total * 4);
    CK(cudaMemcpy(grad, x.flat, x.total * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemset(data, 0, x.total * 4));
    dist_params *p;
    DK(dist_params_create(NULL, &p));
    size_t off = 0;
    for (int i = 0; i < NPARAM; i++) {
      char name[16];
      snprintf(name, sizeof name, "p%d", i);
      DK(dist_params_add(p, name, data + off, grad + off, sizes[i], DIST_F32, DIST_MEM_CUDA, dev, NULL));
      off += (size_t)sizes[i];
    }
    DK(dist_params_commit(p));
    dist_ddp_options o = DIST_DDP_OPTIONS_INIT;
    o.grad_as_bucket_view = view;
    DK(dist_ddp_create(p, &o, &x.ddp));
    ddp_step(&x);
    /* At one rank the average is the gradient itself. */
    const float *g0 = dist_params_grad(p, 0);
    check_close("the DDP average", rel_diff(g0, x.flat, (size_t)sizes[0]), 0);
    pair_time t = compare(ddp_step, &x, nccl_flat, &x);
    printf("%-26s %12.4f %12.4f %8.3f\n", view ? "grad_as_bucket_view" : "copies into buckets", t.a_ms, t.b_ms,
           t.ratio);
    worst = view && t.ratio > worst ? t.ratio : worst;
    dist_ddp_destroy(x.ddp);
    dist_params_destroy(p);
    CK(cudaFree(data));
    CK(cudaFree(grad));
  }
  bench_ratio(stdout, worst, "target <= 1.10",
              "device ddp distmgr (grad_as_bucket_view)/one NCCL all-reduce of all bytes");
  CK(cudaFree(x.flat));
  NK(ncclCommDestroy(x.comm));
}

/* ---- optimizer step ------------------------------------------------------------- */

typedef struct {
  dist_optim *o;
} optim_ctx;
static void optim_step(void *c) { DK(dist_optim_step(((optim_ctx *)c)->o)); }

static void bench_optim(int dev) {
  int64_t n = quick ? 1 << 22 : 1LL << 26; /* 64 M f32: 256 MiB per tensor */
  float *data = dev_alloc((size_t)n * 4), *grad = dev_alloc((size_t)n * 4);
  fill_random(data, (size_t)n, 7);
  fill_random(grad, (size_t)n, 8);
  char head[40];
  snprintf(head, sizeof head, "optimizer (%lldM f32)", (long long)(n >> 20));
  printf("\n%-22s %10s %12s %10s %9s\n", head, "ms", "bytes/elem", "GB/s", "of HBM");
  double worst = 1e9;
  for (int k = 0; k < 3; k++) {
    dist_params *p;
    DK(dist_params_create(NULL, &p));
    DK(dist_params_add(p, "w", data, grad, n, DIST_F32, DIST_MEM_CUDA, dev, NULL));
    DK(dist_params_commit(p));
    optim_ctx x;
    const char *name;
    int per_elem; /* bytes read + written per element */
    if (k < 2) {
      dist_sgd_options o = DIST_SGD_OPTIONS_INIT;
      o.momentum = k ? 0.9 : 0;
      DK(dist_optim_sgd(p, &o, &x.o));
      name = k ? "sgd momentum" : "sgd";
      per_elem = k ? 5 * 4 : 3 * 4; /* p, g (, buf) read; p (, buf) written */
    } else {
      dist_adam_options o = DIST_ADAMW_OPTIONS_INIT;
      DK(dist_optim_adam(p, &o, &x.o));
      name = "adamw";
      per_elem = 7 * 4; /* p, g, m, v read; p, m, v written */
    }
    double ms = single(optim_step, &x);
    double gbs = (double)per_elem * (double)n / (ms * 1e-3) / 1e9;
    double frac = gbs * 1e9 / hbm;
    printf("%-22s %10.4f %12d %10.0f %8.0f%%\n", name, ms, per_elem, gbs, 100 * frac);
    worst = frac < worst ? frac : worst;
    dist_optim_destroy(x.o);
    dist_params_destroy(p);
  }
  bench_ratio(stdout, worst, "target >= 0.70", "device optimizer step bandwidth / HBM bandwidth, worst");
  CK(cudaFree(data));
  CK(cudaFree(grad));
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1, rounds = 3;
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench/gpu [--quick] [--rounds N]\n");
      return 2;
    }
  }
  if (rounds < 1 || rounds > 64) rounds = 7;
  DK(dist_manager_initialize());
  int size = 0, count = 0;
  DK(dist_manager_world_size(&size));
  dist_device d;
  DK(dist_manager_device(&d));
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || d.kind != DIST_DEVICE_CUDA) {
    printf("SKIP: bench/gpu: no CUDA device\n");
    dist_manager_finalize();
    return 0;
  }
  if (size != 1) {
    fprintf(stderr, "bench/gpu: run it on one rank (world size %d)\n", size);
    dist_manager_finalize();
    return 2;
  }
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, d.index));
  CK(cudaStreamCreateWithFlags(&S, cudaStreamNonBlocking));
  DK(dist_cuda_set_stream(S));
  int nv = 0;
  ncclGetVersion(&nv);
  printf("device: %s, %d SMs, %.0f GiB; NCCL %d, CUDA runtime %d; rounds %d%s\n", prop.name,
         prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, nv, CUDART_VERSION, rounds,
         quick ? " (quick)" : "");
  measure_hbm();
  bench_collectives(d.index);
  bench_fft(d.index);
  bench_ddp(d.index);
  bench_optim(d.index);
  CK(cudaStreamDestroy(S));
  DK(dist_manager_finalize());
  return 0;
}
#endif
