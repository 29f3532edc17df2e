/* The allocation-failure sweep's program (malloc_sweep.sh runs it once per
 * allocation, with tests/faults/failmalloc.so failing that one allocation on
 * one rank). A short training-like sequence: start-up, groups, the
 * collectives that allocate (16-bit wire copies, packing of uneven splits,
 * requests, fused buffers), an FFT round trip, a DDP step, finalize.
 *
 * Every call prints "rank R: CALL -> ok" or "-> error CODE: MESSAGE". A rank
 * stops at its first error and finalizes, as an application would; the
 * others must then get an error too (never wait forever). A call that
 * reports success must have the right result: otherwise the rank prints
 * "WRONG" and exits 3. */
#include <distmgr.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int R, W;

/* 1 if s is a success; else report it, finalize and leave. */
static int ok(const char *call, dist_status s) {
  if (!s) {
    printf("rank %d: %s -> ok\n", R, call);
    fflush(stdout);
    return 1;
  }
  printf("rank %d: %s -> error %d: %s\n", R, call, (int)s, dist_last_error());
  fflush(stdout);
  dist_status f = dist_manager_finalize();
  printf("rank %d: dist_manager_finalize -> %s\n", R, f ? "error" : "ok");
  exit(0);
}

static void expect(const char *call, int good, const char *what) {
  if (good) return;
  printf("rank %d: WRONG %s: %s\n", R, call, what);
  fflush(stdout);
  exit(3);
}

#define N 1000

static void reductions(void) {
  static float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)(R + i);
  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){N});
  ok("dist_all_reduce f32", dist_all_reduce("orth", &t, DIST_SUM));
  int good = 1;
  for (int i = 0; i < N; i++) good &= x[i] == (float)(W * i + W * (W - 1) / 2);
  expect("dist_all_reduce f32", good, "sum of R + i");

  static uint16_t h[N]; /* bf16 1.0 = 0x3f80: reduced through an f32 copy */
  for (int i = 0; i < N; i++) h[i] = 0x3f80;
  t = dist_tensor_host(h, DIST_BF16, 1, (int64_t[1]){N});
  ok("dist_all_reduce bf16", dist_all_reduce("orth", &t, DIST_SUM));
  float want = (float)W, got;
  for (int i = 0; i < N; i++) {
    uint32_t b = (uint32_t)h[i] << 16;
    memcpy(&got, &b, sizeof got);
    good &= got == want;
  }
  expect("dist_all_reduce bf16", good, "W ones");

  for (int i = 0; i < N; i++) x[i] = (float)R;
  t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){N});
  dist_request *q = NULL;
  if (ok("dist_all_reduce_start", dist_all_reduce_start(NULL, &t, DIST_MAX, &q)))
    ok("dist_request_wait", dist_request_wait(q));
  dist_request_free(q);
  expect("dist_all_reduce_start", x[0] == (float)(W - 1) && x[N - 1] == (float)(W - 1), "max of R");

  static double d[7];
  float f[5];
  for (int i = 0; i < 7; i++) d[i] = R * 0.5;
  for (int i = 0; i < 5; i++) f[i] = 1;
  dist_tensor two[2] = {dist_tensor_host(d, DIST_F64, 1, (int64_t[1]){7}),
                        dist_tensor_host(f, DIST_F32, 1, (int64_t[1]){5})};
  ok("dist_all_reduce_fused", dist_all_reduce_fused(NULL, two, 2, DIST_SUM));
  expect("dist_all_reduce_fused", d[6] == 0.25 * W * (W - 1) && f[4] == (float)W, "sums");
}

/* Rank r holds r + 1 columns (uneven, so packing runs): [2, r + 1]. */
static void uneven(void) {
  int64_t sizes[8], total = 0;
  for (int r = 0; r < W; r++) sizes[r] = r + 1, total += r + 1;
  float in[2 * 8], out[2 * 36];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j <= R; j++) in[i * (R + 1) + j] = (float)(100 * R + 10 * i + j);
  dist_tensor a = dist_tensor_host(in, DIST_F32, 2, (int64_t[2]){2, R + 1});
  dist_tensor b = dist_tensor_host(out, DIST_F32, 2, (int64_t[2]){2, total});
  ok("dist_all_gather_v", dist_all_gather_v(NULL, &a, &b, 1, sizes));
  int good = 1;
  for (int i = 0; i < 2; i++)
    for (int r = 0, c = 0; r < W; r++)
      for (int j = 0; j <= r; j++, c++) good &= out[i * total + c] == (float)(100 * r + 10 * i + j);
  expect("dist_all_gather_v", good, "every rank's columns in order");

  /* reduce-scatter-v along dim 1: every rank sends [2, total] of ones */
  for (int i = 0; i < 2 * total; i++) out[i] = 1;
  b = dist_tensor_host(out, DIST_F32, 2, (int64_t[2]){2, total});
  ok("dist_reduce_scatter_v", dist_reduce_scatter_v(NULL, &b, &a, 1, sizes, DIST_SUM));
  good = 1;
  for (int i = 0; i < 2 * (R + 1); i++) good &= in[i] == (float)W;
  expect("dist_reduce_scatter_v", good, "W everywhere");

  /* all-to-all-v along dim 1: rank R sends r + 1 columns to rank r and gets
   * R + 1 from each */
  float send[2 * 36], recv[2 * 36];
  for (int i = 0; i < 2; i++)
    for (int c = 0; c < total; c++) send[i * total + c] = (float)(1000 * R + 10 * i + c);
  int64_t rsz[8];
  for (int r = 0; r < W; r++) rsz[r] = R + 1;
  a = dist_tensor_host(send, DIST_F32, 2, (int64_t[2]){2, total});
  b = dist_tensor_host(recv, DIST_F32, 2, (int64_t[2]){2, (int64_t)W * (R + 1)});
  ok("dist_all_to_all_v", dist_all_to_all_v(NULL, &a, &b, 1, sizes, rsz));
  good = 1;
  int off = R * (R + 1) / 2; /* where my columns start in every sender's row */
  for (int i = 0; i < 2; i++)
    for (int r = 0; r < W; r++)
      for (int j = 0; j <= R; j++)
        good &= recv[i * W * (R + 1) + r * (R + 1) + j] == (float)(1000 * r + 10 * i + off + j);
  expect("dist_all_to_all_v", good, "each sender's columns for me");
}

static void fft(void) {
  dist_fft_plan *p = NULL;
  int64_t shape[2] = {6, 10};
  ok("dist_fft_plan_create", dist_fft_plan_create(&p, DIST_FFT_R2C, DIST_F64, DIST_MEM_HOST, 2, shape, 2, NULL));
  dist_fft_local li, lo;
  ok("dist_fft_local_input", dist_fft_local_input(p, &li));
  ok("dist_fft_local_output", dist_fft_local_output(p, &lo));
  double *x = calloc((size_t)li.numel + 1, sizeof *x), *y = calloc((size_t)li.numel + 1, sizeof *y);
  double *z = calloc(2 * (size_t)lo.numel + 2, sizeof *z);
  if (!x || !y || !z) abort();
  for (int64_t i = 0; i < li.numel; i++) x[i] = sin(0.3 * (double)(i + 7 * R));
  dist_tensor tx = dist_tensor_host(x, li.dtype, li.ndim, li.shape);
  dist_tensor tz = dist_tensor_host(z, lo.dtype, lo.ndim, lo.shape);
  dist_tensor ty = dist_tensor_host(y, li.dtype, li.ndim, li.shape);
  ok("dist_fft_forward", dist_fft_forward(p, &tx, &tz));
  ok("dist_fft_inverse", dist_fft_inverse(p, &tz, &ty));
  double err = 0;
  for (int64_t i = 0; i < li.numel; i++) err = fmax(err, fabs(x[i] - y[i]));
  expect("dist_fft_inverse", err < 1e-12, "the round trip gives back the input");
  dist_fft_plan_destroy(p);
  free(x), free(y), free(z);
}

static void ddp(void) {
  static float w1[300], g1[300], w2[40], g2[40];
  dist_params *ps = NULL;
  ok("dist_params_create", dist_params_create(NULL, &ps));
  ok("dist_params_add_host", dist_params_add_host(ps, "w1", w1, g1, 300, NULL));
  ok("dist_params_add_host", dist_params_add_host(ps, "w2", w2, g2, 40, NULL));
  ok("dist_params_commit", dist_params_commit(ps));
  dist_ddp_options o = DIST_DDP_OPTIONS_INIT;
  o.first_bucket_bytes = o.bucket_bytes = 512; /* two buckets */
  dist_ddp *d = NULL;
  ok("dist_ddp_create", dist_ddp_create(ps, &o, &d));
  for (int i = 0; i < 300; i++) g1[i] = (float)(R + 1);
  for (int i = 0; i < 40; i++) g2[i] = (float)(2 * R);
  ok("dist_ddp_mark_ready", dist_ddp_mark_ready(d, 1));
  ok("dist_ddp_mark_ready", dist_ddp_mark_ready(d, 0));
  ok("dist_ddp_finalize", dist_ddp_finalize(d));
  const float *a = dist_params_grad(ps, 0), *b = dist_params_grad(ps, 1);
  expect("dist_ddp_finalize", a[299] == (W + 1) / 2.0f && b[0] == (float)(W - 1), "averaged gradients");
  dist_ddp_destroy(d);
  dist_params_destroy(ps);
}

int main(void) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK"); /* for messages before start-up ends */
  if (!r) r = getenv("PMI_RANK");
  if (!r) r = getenv("RANK"); /* a launch without MPI (tests/faults/bare-launch.sh) */
  R = r ? atoi(r) : 0;
  ok("dist_manager_initialize", dist_manager_initialize());
  dist_manager_rank(&R);
  dist_manager_world_size(&W);
  ok("dist_group_create_subgroup", dist_group_create_subgroup("solo", 1, NULL));
  ok("dist_group_create_orthogonal", dist_group_create_orthogonal("orth", "solo"));
  reductions();
  uneven();
  fft();
  ddp();
  ok("dist_manager_finalize", dist_manager_finalize());
  printf("rank %d: done\n", R);
  return 0;
}
