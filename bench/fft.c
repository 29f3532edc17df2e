/* bench/fft: a 2-D real-to-complex FFT (forward plus inverse) over the last
 * two dims of a channel-first f32 array [B, C, H, W] split along H, through
 * distmgr and through FFTW-MPI, side by side in one run.
 *
 *   1 distmgr:   dist_fft_plan_create(R2C, F32, host, [B,C,H,W], fft_rank 2,
 *                default options: TRANSPOSED output [H, B, C, k1 local],
 *                BACKWARD norm) with measure=1 (FFTW_MEASURE), then
 *                dist_fft_forward + dist_fft_inverse.
 *   2 FFTW-MPI:  its preferred layout, interleaved [H local, W padded to
 *                2*(W/2+1), B*C], in place: fftwf_mpi_plan_many_dft_r2c
 *                (howmany B*C, default blocks, FFTW_MEASURE |
 *                FFTW_MPI_TRANSPOSED_OUT) and the matching c2r with
 *                FFTW_MPI_TRANSPOSED_IN. FFTW's own block split of H and k1.
 *   3 FFTW-MPI plus the layout conversion a channel-first user has to do:
 *                [B*C, H local, W] -> FFTW's interleaved array before the
 *                r2c, FFTW's transposed output [k1 local, H, B*C] ->
 *                [B*C, k1 local, H] after it, and the mirror image around the
 *                c2r (tiled transposes, as a careful user would write them).
 *   4 the limit model: serial fftwf plans (FFTW_MEASURE) of this rank's local
 *                work under distmgr's split (r2c along W of B*C*H_local rows,
 *                c2c along H of B*C*k1_local columns, and their inverses)
 *                plus two MPI_Alltoallv of the exchanged bytes (B*C*H_local*
 *                k1_r complex values to each rank r, forward and inverse),
 *                each phase timed on its own after a barrier. Packing,
 *                unpacking and normalisation are not in the model; one plain
 *                memcpy of the exchanged bytes is timed alongside and printed
 *                for information (the least a pack or an unpack costs).
 *
 * k1 = W/2+1. Times are forward plus inverse, in ms: on one node the span
 * from the first rank's start to the last rank's end (see span_times), so
 * ranks time-sliced on oversubscribed cores are counted in full.
 * FFTW-MPI is unnormalised (variants 2, 3) while distmgr scales its inverse
 * by 1/(H*W) (in its exchange packing); to keep the FFTW data bounded, each
 * variant's input is rescaled before its timed call, outside the timing (the
 * same untimed pass over the input for every variant, so every variant starts
 * from the same cache state).
 *
 * Once per size (before timing, also the warm-up) the results are checked:
 * distmgr's forward output against FFTW-MPI's on the same global data (max
 * |diff| / max |value| < 1e-4, on the frequencies both hold on a rank, which
 * is all of them when the two splits agree), the channel-first conversion
 * against distmgr's output, and both round trips against the input.
 *
 * Each repetition runs the four variants in turn, the starting variant
 * rotating with the repetition, so that load drift on the shared cores hits
 * all of them alike. Times: median over repetitions. Ratios: median of the
 * per-repetition ratios 1/2, 1/3, 1/4 (distmgr over each other variant).
 * Repetitions: --reps, or enough for about 2 s of timed work per size (at
 * least 3, at most 30).
 *
 * Without FFTW-MPI for this build's MPI (configure: none installed, or
 * Debian's, which is linked to Open MPI, in an MPICH build; HAVE_FFTW_MPI and
 * DIST_FFTW_MPI_SKIP in config.h) variants 2 and 3 are not run: the driver
 * prints "SKIP FFTW-MPI: <why>", distmgr's forward output is checked instead
 * against serial FFTW (a 2-D r2c of the whole plane, for the first and last
 * channel), and only the ratio 1/4 is printed.
 *
 * The driver (run without --worker) starts `$LAUNCHER N bench/fft --worker
 * ...` once per rank count (LAUNCHER unset: this build's MPI launcher,
 * DIST_DEFAULT_LAUNCHER). A size whose estimated memory (all ranks on this
 * node, all four variants) is above 70% of MemAvailable is skipped with a
 * note.
 *
 * Usage: bench/fft [--ranks 2,4] [--bc 64,256] [--sizes 256x256,720x1440,1024x1024]
 *                  [--reps N] [--quick]                (LAUNCHER as for make check)
 *   --bc: B*C values (B = 4 when B*C is a multiple of 4, else B = 1) or BxC.
 *   --quick (the CI smoke run): unless given, --ranks 2 --bc 8 --sizes 64x64 --reps 2.
 * Exits non-zero only on errors (a failed call, a wrong result), never on a
 * missed target: those are reported in the `ratio:` lines. */
#include "config.h" /* HAVE_FFTW_MPI, DIST_FFTW_MPI_SKIP */
#include "bench_util.h"
#include <distmgr.h>
#include <distmgr/fft.h>
#include <distmgr/mapping.h>
#include <distmgr/mpi.h>
#ifdef HAVE_FFTW_MPI
#include <fftw3-mpi.h>
#define WITH_FFTW_MPI 1
#else
#include <fftw3.h> /* variants 2 and 3 skipped: DIST_FFTW_MPI_SKIP says why */
#define WITH_FFTW_MPI 0
#endif
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TARGET_12 "1.0"
#define TARGET_13 "0.8"
#define TARGET_14 "1.25"
#define SECONDS_PER_SIZE 2.0 /* timed work per size when --reps is not given */
#define MIN_REPS 3
#define MAX_REPS 30
#define MEM_FRACTION 0.70 /* of MemAvailable */
#define CHECK_TOL 1e-4
#define MAX_LIST 16
#define TILE 32 /* transpose tile, elements */

typedef struct options {
  const char *ranks, *bc, *sizes;
  int reps, quick, destroy_input;
  int ranks_set, bc_set, sizes_set;
} options;
static int destroy_input; /* worker: plan distmgr with destroy_input = 1 */

/* ---- worker --------------------------------------------------------------- */

typedef struct {
  float re, im;
} cplx;

enum { V_DIST, V_FFTW, V_CONV, V_MODEL, V_COUNT };
/* model phases: rows r2c, all-to-all, columns c2c, columns c2c^-1, all-to-all, rows c2r; then,
 * for information and not in the model, one plain copy of the exchanged bytes (what a pack or
 * an unpack costs at least) */
enum { M_R2C, M_A2A_F, M_C2C_F, M_C2C_B, M_A2A_B, M_C2R, M_COPY, M_COUNT };

typedef struct ctx {
  MPI_Comm comm, node;
  int rank, size, node_size;
  int one_node; /* all ranks share this node's monotonic clock */
} ctx;

/* A block's time is the slowest rank's. On one node it is the span from the
 * first rank's start to the last rank's end on the shared monotonic clock
 * (MPI_Wtime may carry a per-process offset), because a rank descheduled at
 * the barrier on oversubscribed cores starts its own clock late and would
 * hide the time-slicing; across nodes, the longest per-rank duration. */
typedef struct span {
  double start, end;
} span;

/* Reduce n spans to the slowest-rank seconds of each, into out[n]. */
static void span_times(const ctx *c, const span *sp, int n, double *out) {
  double v[64];
  for (int i = 0; i < n; i++)
    if (c->one_node) v[i] = sp[i].end, v[n + i] = -sp[i].start;
    else v[i] = sp[i].end - sp[i].start, v[n + i] = 0;
  bench_max(c->comm, v, 2 * n);
  for (int i = 0; i < n; i++) out[i] = v[i] + v[n + i];
}

/* One size's plans and buffers. */
typedef struct sz {
  int64_t B, C, BC, H, W, k1, Wp, N;
  /* distmgr */
  dist_fft_plan *plan;
  dist_fft_local lin, lout;
  int64_t hs_d[64], ks_d[64]; /* distmgr's splits of H and k1 (dist_compute_split_shapes) */
  int64_t hl_d, h0_d, kl_d, k0_d;
  float *d_in;
  cplx *d_out;
  dist_tensor t_in, t_out;
  /* FFTW-MPI (variants 2 and 3 share the array and the plans) */
  ptrdiff_t alloc, ln0, l0s, ln1, l1s;
  int64_t hs_f[64], ks_f[64];
  fftwf_complex *f_data;
  fftwf_plan f_fwd, f_inv;
  /* variant 3: the user's channel-first arrays, FFTW's split */
  float *u_in; /* [BC, ln0, W] */
  cplx *u_out; /* [BC, ln1, H] */
  /* variant 4: the model, distmgr's split */
  float *m_x; /* [BC*hl_d, W] */
  cplx *m_y;  /* [BC*hl_d, k1] */
  cplx *m_z;  /* [H, BC*kl_d] */
  fftwf_plan m_r2c, m_c2r, m_c2c_f, m_c2c_b;
  int *a2a_fs, *a2a_fsd, *a2a_fr, *a2a_frd; /* forward send/recv counts and displacements, floats */
  size_t copy_bytes;                        /* M_COPY: the exchanged bytes (within both buffers) */
  float one, inv_n;                         /* runtime factors for the untimed input pass */
} sz;

static int g_rank = -1;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "bench/fft: rank %d: %s: %s\n", g_rank, what, detail);
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks may be waiting in a collective */
  exit(1);
}

static void check_dist(dist_status s, const char *what) {
  if (s == DIST_SUCCESS) return;
  char msg[512];
  snprintf(msg, sizeof msg, "%s (%s)", dist_status_string(s), dist_last_error());
  fail(what, msg);
}

static void check_mpi(int rc, const char *what) {
  if (rc != MPI_SUCCESS) fail(what, "MPI error");
}

static void *xalloc(size_t bytes) {
  void *p = fftwf_malloc(bytes ? bytes : 16); /* FFTW's SIMD alignment for every buffer */
  if (!p) fail("fftwf_malloc", "out of memory");
  return p;
}

/* Deterministic values in [-1, 1) from the global index (bc, h, w). */
static float gen(int64_t bc, int64_t h, int64_t w, int64_t H, int64_t W) {
  uint64_t x = (uint64_t)((bc * H + h) * W + w) + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0); /* 2^52 */
}

/* kB from /proc/meminfo or /proc/self/status; 0 if absent. */
static long long read_kb(const char *file, const char *key) {
  FILE *f = fopen(file, "r");
  if (!f) return 0;
  char line[256];
  long long v = 0;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) {
      v = atoll(line + n);
      break;
    }
  fclose(f);
  return v;
}

/* ---- layout conversions (variant 3) ----------------------------------------
 * dst[c * dld + r] = src[r * sld + c] for r < rows, c < cols: a tiled
 * transpose, so both sides move whole cache lines. */
static void transpose_f32(float *restrict dst, int64_t dld, const float *restrict src, int64_t sld, int64_t rows,
                          int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += TILE)
    for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
      int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows, c1 = c0 + TILE < cols ? c0 + TILE : cols;
      for (int64_t c = c0; c < c1; c++)
        for (int64_t r = r0; r < r1; r++) dst[c * dld + r] = src[r * sld + c];
    }
}

static void transpose_c64(cplx *restrict dst, int64_t dld, const cplx *restrict src, int64_t sld, int64_t rows,
                          int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += TILE / 2)
    for (int64_t c0 = 0; c0 < cols; c0 += TILE / 2) {
      int64_t r1 = r0 + TILE / 2 < rows ? r0 + TILE / 2 : rows, c1 = c0 + TILE / 2 < cols ? c0 + TILE / 2 : cols;
      for (int64_t c = c0; c < c1; c++)
        for (int64_t r = r0; r < r1; r++) dst[c * dld + r] = src[r * sld + c];
    }
}

/* user [BC, ln0, W] -> FFTW [ln0, Wp, BC] (real, padded) */
static void conv_to_fftw_real(sz *s) {
  float *f = (float *)s->f_data;
  for (int64_t h = 0; h < s->ln0; h++)
    transpose_f32(f + h * s->Wp * s->BC, s->BC, s->u_in + h * s->W, s->ln0 * s->W, s->BC, s->W);
}

/* FFTW [ln0, Wp, BC] (real) -> user [BC, ln0, W] */
static void conv_from_fftw_real(sz *s) {
  const float *f = (const float *)s->f_data;
  for (int64_t h = 0; h < s->ln0; h++)
    transpose_f32(s->u_in + h * s->W, s->ln0 * s->W, f + h * s->Wp * s->BC, s->BC, s->W, s->BC);
}

/* FFTW transposed output [ln1, H, BC] -> user [BC, ln1, H] */
static void conv_from_fftw_spec(sz *s) {
  const cplx *f = (const cplx *)s->f_data;
  for (int64_t k = 0; k < s->ln1; k++)
    transpose_c64(s->u_out + k * s->H, s->ln1 * s->H, f + k * s->H * s->BC, s->BC, s->H, s->BC);
}

/* user [BC, ln1, H] -> FFTW transposed input [ln1, H, BC] */
static void conv_to_fftw_spec(sz *s) {
  cplx *f = (cplx *)s->f_data;
  for (int64_t k = 0; k < s->ln1; k++)
    transpose_c64(f + k * s->H * s->BC, s->BC, s->u_out + k * s->H, s->ln1 * s->H, s->BC, s->H);
}

/* ---- the four variants ---------------------------------------------------- */

static void run_dist(sz *s) {
  check_dist(dist_fft_forward(s->plan, &s->t_in, &s->t_out), "dist_fft_forward");
  check_dist(dist_fft_inverse(s->plan, &s->t_out, &s->t_in), "dist_fft_inverse");
}

static void run_fftw(sz *s) {
  fftwf_execute(s->f_fwd);
  fftwf_execute(s->f_inv);
}

static void run_conv_fwd(sz *s) {
  conv_to_fftw_real(s);
  fftwf_execute(s->f_fwd);
  conv_from_fftw_spec(s);
}

static void run_conv_inv(sz *s) {
  conv_to_fftw_spec(s);
  fftwf_execute(s->f_inv);
  conv_from_fftw_real(s);
}

static void a2a(const ctx *c, sz *s, int forward) {
  if (forward)
    check_mpi(
        MPI_Alltoallv(s->m_y, s->a2a_fs, s->a2a_fsd, MPI_FLOAT, s->m_z, s->a2a_fr, s->a2a_frd, MPI_FLOAT, c->comm),
        "MPI_Alltoallv");
  else /* the reverse exchange: what was received goes back */
    check_mpi(
        MPI_Alltoallv(s->m_z, s->a2a_fr, s->a2a_frd, MPI_FLOAT, s->m_y, s->a2a_fs, s->a2a_fsd, MPI_FLOAT, c->comm),
        "MPI_Alltoallv");
}

/* The model: each phase after a barrier, its span into t[M_COUNT]. */
static void run_model(const ctx *c, sz *s, span *t) {
  for (int p = 0; p < M_COUNT; p++) {
    MPI_Barrier(c->comm);
    t[p].start = bench_now();
    switch (p) {
    case M_R2C: fftwf_execute(s->m_r2c); break;
    case M_A2A_F: a2a(c, s, 1); break;
    case M_C2C_F: fftwf_execute(s->m_c2c_f); break;
    case M_C2C_B: fftwf_execute(s->m_c2c_b); break;
    case M_A2A_B: a2a(c, s, 0); break;
    case M_C2R: fftwf_execute(s->m_c2r); break;
    case M_COPY: memcpy(s->m_z, s->m_y, s->copy_bytes); break;
    }
    t[p].end = bench_now();
  }
}

static void scale(float *x, int64_t n, float f) {
  for (int64_t i = 0; i < n; i++) x[i] *= f;
}

/* The untimed pass before a variant's timed call: rescale its input by 1/N
 * (FFTW-MPI does not normalise; distmgr does, so it gets a factor 1); the
 * model's input is copied from distmgr's. */
static void prep(sz *s, int v) {
  switch (v) {
  case V_DIST: scale(s->d_in, s->lin.numel, s->one); break;
  case V_FFTW: scale((float *)s->f_data, s->ln0 * s->Wp * s->BC, s->inv_n); break;
  case V_CONV: scale(s->u_in, s->BC * s->ln0 * s->W, s->inv_n); break;
  case V_MODEL: memcpy(s->m_x, s->d_in, (size_t)s->lin.numel * sizeof(float)); break;
  }
}

/* One variant, timed from a barrier: its span (the model: a span per phase into mt). */
static span timed(const ctx *c, sz *s, int v, span *mt) {
  prep(s, v);
  if (v == V_MODEL) {
    run_model(c, s, mt);
    return (span){0, 0};
  }
  MPI_Barrier(c->comm);
  span t = {bench_now(), 0};
  if (v == V_DIST) run_dist(s);
  else if (v == V_FFTW) run_fftw(s);
  else run_conv_fwd(s), run_conv_inv(s);
  t.end = bench_now();
  return t;
}

/* ---- set-up ----------------------------------------------------------------- */

static void split_list(char *buf, size_t n, const int64_t *v, int count) {
  size_t off = 0;
  buf[0] = 0;
  for (int i = 0; i < count && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? "," : "", (long long)v[i]);
}

/* Bytes this rank will hold for all four variants (an estimate: FFTW-MPI's
 * transpose buffer and distmgr's exchange buffers are guesses). */
static double estimate_bytes(const sz *s) {
  double R_d = (double)s->BC * s->hl_d * s->W * 4, C_d = (double)s->H * s->BC * s->kl_d * 8;
  double rows_d = (double)s->BC * s->hl_d * s->k1 * 8;
  double R_f = (double)s->BC * s->ln0 * s->W * 4, C_f = (double)s->BC * s->ln1 * s->H * 8;
  double fftw = (double)s->alloc * 8;
  double dist = R_d + C_d + 2 * (rows_d > C_d ? rows_d : C_d); /* in, out, send+receive scratch */
  double fftw_mpi = 2 * fftw;                                  /* array + transpose buffer */
  double user = R_f + C_f;
  double model = R_d + rows_d + C_d;
  return dist + fftw_mpi + user + model;
}

static void setup_splits(const ctx *c, sz *s) {
  check_dist(dist_compute_split_shapes(s->H, c->size, s->hs_d), "dist_compute_split_shapes");
  check_dist(dist_compute_split_shapes(s->k1, c->size, s->ks_d), "dist_compute_split_shapes");
  s->hl_d = s->hs_d[c->rank];
  s->kl_d = s->ks_d[c->rank];
  s->h0_d = s->k0_d = 0;
  for (int r = 0; r < c->rank; r++) s->h0_d += s->hs_d[r], s->k0_d += s->ks_d[r];
#ifdef HAVE_FFTW_MPI
  ptrdiff_t n[2] = {(ptrdiff_t)s->H, (ptrdiff_t)s->k1};
  s->alloc = fftwf_mpi_local_size_many_transposed(2, n, (ptrdiff_t)s->BC, FFTW_MPI_DEFAULT_BLOCK,
                                                  FFTW_MPI_DEFAULT_BLOCK, c->comm, &s->ln0, &s->l0s, &s->ln1, &s->l1s);
  int64_t mine[2] = {s->ln0, s->ln1}, all[128];
  check_mpi(MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, c->comm), "MPI_Allgather");
  for (int r = 0; r < c->size; r++) s->hs_f[r] = all[2 * r], s->ks_f[r] = all[2 * r + 1];
#else /* no FFTW-MPI arrays: nothing of variants 2 and 3 is allocated or counted */
  s->alloc = s->ln0 = s->l0s = s->ln1 = s->l1s = 0;
#endif
}

static void setup_dist(const ctx *c, sz *s) {
  int64_t shape[4] = {s->B, s->C, s->H, s->W};
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  opt.measure = 1;
  opt.destroy_input = destroy_input; /* FFTW-MPI's in-place transforms destroy their input too */
  check_dist(dist_fft_plan_create(&s->plan, DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 4, shape, 2, &opt),
             "dist_fft_plan_create");
  check_dist(dist_fft_local_input(s->plan, &s->lin), "dist_fft_local_input");
  check_dist(dist_fft_local_output(s->plan, &s->lout), "dist_fft_local_output");
  /* The layouts fft.h documents; the checks below index them directly. */
  const dist_fft_local *i = &s->lin, *o = &s->lout;
  if (i->ndim != 4 || i->split_dim != 2 || i->shape[0] != s->B || i->shape[1] != s->C || i->shape[2] != s->hl_d ||
      i->shape[3] != s->W || i->offset[2] != s->h0_d || i->dtype != DIST_F32)
    fail("dist_fft_local_input", "not [B, C, H_local, W] f32 with dist_compute_split_shapes' split of H");
  if (o->ndim != 4 || o->split_dim != 3 || o->shape[0] != s->H || o->shape[1] != s->B || o->shape[2] != s->C ||
      o->shape[3] != s->kl_d || o->offset[3] != s->k0_d || o->dtype != DIST_C64)
    fail("dist_fft_local_output", "not [H, B, C, k1_local] c64 with dist_compute_split_shapes' split of k1");
  s->d_in = xalloc(i->nbytes);
  s->d_out = xalloc(o->nbytes);
  s->t_in = dist_tensor_host(s->d_in, i->dtype, i->ndim, i->shape);
  s->t_out = dist_tensor_host(s->d_out, o->dtype, o->ndim, o->shape);
  (void)c;
}

static void setup_fftw(const ctx *c, sz *s) {
#ifdef HAVE_FFTW_MPI
  s->f_data = xalloc((size_t)s->alloc * sizeof(fftwf_complex));
  ptrdiff_t n[2] = {(ptrdiff_t)s->H, (ptrdiff_t)s->W};
  s->f_fwd =
      fftwf_mpi_plan_many_dft_r2c(2, n, (ptrdiff_t)s->BC, FFTW_MPI_DEFAULT_BLOCK, FFTW_MPI_DEFAULT_BLOCK,
                                  (float *)s->f_data, s->f_data, c->comm, FFTW_MEASURE | FFTW_MPI_TRANSPOSED_OUT);
  s->f_inv = fftwf_mpi_plan_many_dft_c2r(2, n, (ptrdiff_t)s->BC, FFTW_MPI_DEFAULT_BLOCK, FFTW_MPI_DEFAULT_BLOCK,
                                         s->f_data, (float *)s->f_data, c->comm, FFTW_MEASURE | FFTW_MPI_TRANSPOSED_IN);
  if (!s->f_fwd || !s->f_inv) fail("fftwf_mpi_plan_many_dft_r2c/c2r", "no plan");
  s->u_in = xalloc((size_t)(s->BC * s->ln0 * s->W) * sizeof(float));
  s->u_out = xalloc((size_t)(s->BC * s->ln1 * s->H) * sizeof(cplx));
#else
  (void)c, (void)s;
#endif
}

static void setup_model(const ctx *c, sz *s) {
  int64_t rows = s->BC * s->hl_d, cols = s->BC * s->kl_d;
  s->m_x = xalloc((size_t)(rows * s->W) * sizeof(float));
  s->m_y = xalloc((size_t)(rows * s->k1) * sizeof(cplx));
  s->m_z = xalloc((size_t)(s->H * cols) * sizeof(cplx));
  if (rows > INT_MAX || cols > INT_MAX || s->W > INT_MAX || s->H > INT_MAX) fail("model", "sizes beyond int");
  int64_t ny = rows * s->k1, nz = s->H * cols;
  s->copy_bytes = (size_t)(ny < nz ? ny : nz) * sizeof(cplx);
  int nw = (int)s->W, nh = (int)s->H;
  fftwf_complex *y = (fftwf_complex *)s->m_y, *z = (fftwf_complex *)s->m_z;
  s->m_r2c = fftwf_plan_many_dft_r2c(1, &nw, (int)rows, s->m_x, NULL, 1, nw, y, NULL, 1, (int)s->k1, FFTW_MEASURE);
  s->m_c2r = fftwf_plan_many_dft_c2r(1, &nw, (int)rows, y, NULL, 1, (int)s->k1, s->m_x, NULL, 1, nw, FFTW_MEASURE);
  s->m_c2c_f =
      fftwf_plan_many_dft(1, &nh, (int)cols, z, NULL, (int)cols, 1, z, NULL, (int)cols, 1, FFTW_FORWARD, FFTW_MEASURE);
  s->m_c2c_b =
      fftwf_plan_many_dft(1, &nh, (int)cols, z, NULL, (int)cols, 1, z, NULL, (int)cols, 1, FFTW_BACKWARD, FFTW_MEASURE);
  if (!s->m_r2c || !s->m_c2r || !s->m_c2c_f || !s->m_c2c_b) fail("fftwf_plan_many_dft", "no plan");
  /* Forward exchange, counts in floats: B*C*hl_d*k1_r complex values to rank r,
   * B*C*hl_s*kl_d from rank s (the bytes distmgr's exchange moves). */
  int n = c->size;
  s->a2a_fs = malloc(4 * n * sizeof(int));
  if (!s->a2a_fs) fail("malloc", "out of memory");
  s->a2a_fsd = s->a2a_fs + n, s->a2a_fr = s->a2a_fs + 2 * n, s->a2a_frd = s->a2a_fs + 3 * n;
  int64_t so = 0, ro = 0;
  for (int r = 0; r < n; r++) {
    int64_t sc = 2 * s->BC * s->hl_d * s->ks_d[r], rc = 2 * s->BC * s->hs_d[r] * s->kl_d;
    if (so + sc > INT_MAX || ro + rc > INT_MAX) fail("model", "all-to-all counts beyond int");
    s->a2a_fs[r] = (int)sc, s->a2a_fsd[r] = (int)so, so += sc;
    s->a2a_fr[r] = (int)rc, s->a2a_frd[r] = (int)ro, ro += rc;
  }
}

/* After planning (FFTW_MEASURE overwrites arrays): the global data in each layout. */
static void fill(sz *s) {
  for (int64_t bc = 0; bc < s->BC; bc++)
    for (int64_t h = 0; h < s->hl_d; h++)
      for (int64_t w = 0; w < s->W; w++) s->d_in[(bc * s->hl_d + h) * s->W + w] = gen(bc, s->h0_d + h, w, s->H, s->W);
  if (s->f_data) { /* FFTW-MPI's arrays (variants 2 and 3) */
    for (int64_t bc = 0; bc < s->BC; bc++)
      for (int64_t h = 0; h < s->ln0; h++)
        for (int64_t w = 0; w < s->W; w++) s->u_in[(bc * s->ln0 + h) * s->W + w] = gen(bc, s->l0s + h, w, s->H, s->W);
    memset(s->f_data, 0, (size_t)s->alloc * sizeof(fftwf_complex));
    float *f = (float *)s->f_data;
    for (int64_t h = 0; h < s->ln0; h++)
      for (int64_t w = 0; w < s->W; w++)
        for (int64_t bc = 0; bc < s->BC; bc++) f[(h * s->Wp + w) * s->BC + bc] = gen(bc, s->l0s + h, w, s->H, s->W);
    memset(s->u_out, 0, (size_t)(s->BC * s->ln1 * s->H) * sizeof(cplx));
  }
  memset(s->d_out, 0, s->lout.nbytes);
  memcpy(s->m_x, s->d_in, s->lin.nbytes);
  memset(s->m_y, 0, (size_t)(s->BC * s->hl_d * s->k1) * sizeof(cplx));
  memset(s->m_z, 0, (size_t)(s->H * s->BC * s->kl_d) * sizeof(cplx));
}

static void destroy(sz *s) {
  dist_fft_plan_destroy(s->plan);
  if (s->f_fwd) fftwf_destroy_plan(s->f_fwd);
  if (s->f_inv) fftwf_destroy_plan(s->f_inv);
  fftwf_destroy_plan(s->m_r2c), fftwf_destroy_plan(s->m_c2r);
  fftwf_destroy_plan(s->m_c2c_f), fftwf_destroy_plan(s->m_c2c_b);
  fftwf_free(s->d_in), fftwf_free(s->d_out), fftwf_free(s->f_data), fftwf_free(s->u_in), fftwf_free(s->u_out);
  fftwf_free(s->m_x), fftwf_free(s->m_y), fftwf_free(s->m_z);
  free(s->a2a_fs);
}

/* ---- the correctness check (also the warm-up) ------------------------------ */

typedef struct errs {
  double fwd, conv, rt_dist, rt_conv; /* max |diff| / max |reference| */
  long long compared, total;
  double est; /* seconds of one repetition, slowest rank */
} errs;

static double cabsf_(cplx a) { return sqrt((double)a.re * a.re + (double)a.im * a.im); }
static double cdiff(cplx a, cplx b) { return cabsf_((cplx){a.re - b.re, a.im - b.im}); }

/* Without FFTW-MPI: distmgr's forward output (on this rank's frequencies)
 * against serial FFTW, a 2-D r2c of the whole H x W plane generated again
 * from gen(), for the first and the last channel. m[0]: max |diff|, m[1]:
 * max |reference|. Returns the bins compared. */
static long long check_serial(sz *s, double *m) {
  int64_t H = s->H, W = s->W, BC = s->BC, k1 = s->k1;
  if (H > INT_MAX || W > INT_MAX) fail("serial check", "sizes beyond int");
  float *x = xalloc((size_t)(H * W) * sizeof(float));
  cplx *y = xalloc((size_t)(H * k1) * sizeof(cplx));
  fftwf_plan p = fftwf_plan_dft_r2c_2d((int)H, (int)W, x, (fftwf_complex *)y, FFTW_ESTIMATE);
  if (!p) fail("fftwf_plan_dft_r2c_2d", "no plan");
  long long cnt = 0;
  int64_t chans[2] = {0, BC - 1};
  for (int i = 0; i < (BC > 1 ? 2 : 1); i++) {
    int64_t bc = chans[i];
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) x[h * W + w] = gen(bc, h, w, H, W);
    fftwf_execute(p);
    for (int64_t h = 0; h < H; h++)
      for (int64_t k = s->k0_d; k < s->k0_d + s->kl_d; k++) {
        cplx ref = y[h * k1 + k], got = s->d_out[(h * BC + bc) * s->kl_d + (k - s->k0_d)];
        double d = cdiff(got, ref), a = cabsf_(ref);
        if (!(d <= m[0])) m[0] = d; /* NaN sticks */
        if (a > m[1]) m[1] = a;
        cnt++;
      }
  }
  fftwf_destroy_plan(p);
  fftwf_free(x), fftwf_free(y);
  return cnt;
}

static errs check(const ctx *c, sz *s) {
  /* each pair: max |diff|, max |reference|; reduced with MAX over ranks */
  double m[8] = {0}, t[4] = {0}, t0;
  long long cnt = 0;
  int64_t BC = s->BC, H = s->H;

  t0 = bench_now();
  check_dist(dist_fft_forward(s->plan, &s->t_in, &s->t_out), "dist_fft_forward");
  t[0] = bench_now() - t0;
  if (!WITH_FFTW_MPI) cnt = check_serial(s, m);
  else {
    t0 = bench_now();
    fftwf_execute(s->f_fwd);
    t[1] = bench_now() - t0;

    /* distmgr [H, BC, kl_d] against FFTW [ln1, H, BC] on the common k */
    const cplx *F = (const cplx *)s->f_data;
    int64_t lo = s->k0_d > s->l1s ? s->k0_d : s->l1s;
    int64_t hi = s->k0_d + s->kl_d < s->l1s + s->ln1 ? s->k0_d + s->kl_d : s->l1s + s->ln1;
    for (int64_t k = lo; k < hi; k++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t bc = 0; bc < BC; bc++) {
          cplx ref = F[((k - s->l1s) * H + h) * BC + bc], got = s->d_out[(h * BC + bc) * s->kl_d + (k - s->k0_d)];
          double d = cdiff(got, ref), a = cabsf_(ref);
          if (!(d <= m[0])) m[0] = d; /* NaN sticks */
          if (a > m[1]) m[1] = a;
          cnt++;
        }

    /* variant 3 (FFTW-MPI on the channel-first data), [BC, ln1, H], against distmgr */
    t0 = bench_now();
    run_conv_fwd(s);
    t[2] = bench_now() - t0;
    for (int64_t k = lo; k < hi; k++)
      for (int64_t bc = 0; bc < BC; bc++)
        for (int64_t h = 0; h < H; h++) {
          cplx ref = s->d_out[(h * BC + bc) * s->kl_d + (k - s->k0_d)];
          cplx got = s->u_out[(bc * s->ln1 + (k - s->l1s)) * H + h];
          double d = cdiff(got, ref), a = cabsf_(ref);
          if (!(d <= m[2])) m[2] = d;
          if (a > m[3]) m[3] = a;
        }
  }

  /* round trips: distmgr's inverse (normalised) and variant 3's (times N) */
  t0 = bench_now();
  check_dist(dist_fft_inverse(s->plan, &s->t_out, &s->t_in), "dist_fft_inverse");
  t[0] += bench_now() - t0;
  if (WITH_FFTW_MPI) {
    t0 = bench_now();
    run_conv_inv(s);
    t[2] += bench_now() - t0;
  }
  for (int64_t bc = 0; bc < BC; bc++)
    for (int64_t h = 0; h < s->hl_d; h++)
      for (int64_t w = 0; w < s->W; w++) {
        double ref = gen(bc, s->h0_d + h, w, H, s->W), d = fabs(s->d_in[(bc * s->hl_d + h) * s->W + w] - ref);
        if (!(d <= m[4])) m[4] = d;
        if (fabs(ref) > m[5]) m[5] = fabs(ref);
      }
  for (int64_t bc = 0; bc < BC; bc++) /* no rows without FFTW-MPI (ln0 = 0) */
    for (int64_t h = 0; h < s->ln0; h++)
      for (int64_t w = 0; w < s->W; w++) {
        double ref = gen(bc, s->l0s + h, w, H, s->W);
        double d = fabs(s->u_in[(bc * s->ln0 + h) * s->W + w] / (double)s->N - ref);
        if (!(d <= m[6])) m[6] = d;
        if (fabs(ref) > m[7]) m[7] = fabs(ref);
      }
  span mt[M_COUNT];
  prep(s, V_MODEL);
  t0 = bench_now();
  run_model(c, s, mt);
  t[3] = bench_now() - t0;

  check_mpi(MPI_Allreduce(MPI_IN_PLACE, m, 8, MPI_DOUBLE, MPI_MAX, c->comm), "MPI_Allreduce");
  bench_max(c->comm, t, 4);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &cnt, 1, MPI_LONG_LONG, MPI_SUM, c->comm), "MPI_Allreduce");
  errs e;
  e.fwd = m[1] > 0 ? m[0] / m[1] : m[0];
  e.conv = m[3] > 0 ? m[2] / m[3] : m[2];
  e.rt_dist = m[5] > 0 ? m[4] / m[5] : m[4];
  e.rt_conv = m[7] > 0 ? m[6] / m[7] : m[6];
  e.compared = cnt;
  /* all bins, or (serial check) those of the channels checked */
  e.total = (long long)(H * (WITH_FFTW_MPI ? BC : BC > 1 ? 2 : 1) * s->k1);
  /* one repetition: distmgr, FFTW-MPI (its forward twice), variant 3, the model */
  e.est = t[0] + 2 * t[1] + t[2] + t[3];
  return e;
}

/* ---- timing ----------------------------------------------------------------- */

static void bench_size(const ctx *c, int64_t B, int64_t C, int64_t H, int64_t W, const options *o) {
  sz s;
  memset(&s, 0, sizeof s);
  s.B = B, s.C = C, s.BC = B * C, s.H = H, s.W = W, s.k1 = W / 2 + 1, s.Wp = 2 * (W / 2 + 1), s.N = H * W;
  s.one = 1.0f, s.inv_n = (float)(1.0 / (double)s.N);
  int P = c->size;
  char head[256];
  snprintf(head, sizeof head, "np %d  B*C=%lld (B=%lld C=%lld)  %lldx%lld", P, (long long)s.BC, (long long)B,
           (long long)C, (long long)H, (long long)W);
  if (H < P || s.k1 < P) {
    if (c->rank == 0) printf("\n== %s: skipped (distmgr's default split needs H and W/2+1 >= ranks)\n", head);
    fflush(stdout);
    return;
  }
  setup_splits(c, &s);

  /* memory: this node's ranks together against MemAvailable */
  double need = estimate_bytes(&s), node_need = 0;
  check_mpi(MPI_Allreduce(&need, &node_need, 1, MPI_DOUBLE, MPI_SUM, c->node), "MPI_Allreduce");
  double avail = (double)read_kb("/proc/meminfo", "MemAvailable:") * 1024.0;
  int skip = avail > 0 && node_need > MEM_FRACTION * avail, any_skip = 0;
  check_mpi(MPI_Allreduce(&skip, &any_skip, 1, MPI_INT, MPI_MAX, c->comm), "MPI_Allreduce");
  if (any_skip) {
    if (c->rank == 0)
      printf("\n== %s: skipped: needs about %.1f GiB on this node, %.0f%% of MemAvailable is %.1f GiB\n", head,
             node_need / (1 << 30), MEM_FRACTION * 100, MEM_FRACTION * avail / (1 << 30));
    fflush(stdout);
    return;
  }

  double tp = bench_now();
  setup_dist(c, &s);
  double t_plan_dist = bench_now() - tp;
  tp = bench_now();
  setup_fftw(c, &s);
  double t_plan_fftw = bench_now() - tp;
  setup_model(c, &s);
  fill(&s);
  MPI_Barrier(c->comm);

  errs e = check(c, &s);
  int ok = e.fwd < CHECK_TOL && e.conv < CHECK_TOL && e.rt_dist < CHECK_TOL && e.rt_conv < CHECK_TOL;
  double rss = (double)read_kb("/proc/self/status", "VmRSS:") * 1024.0, node_rss = 0;
  check_mpi(MPI_Allreduce(&rss, &node_rss, 1, MPI_DOUBLE, MPI_SUM, c->node), "MPI_Allreduce");
  double ws = (double)dist_fft_workspace_bytes(s.plan), plans[2] = {t_plan_dist, t_plan_fftw};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ws, 1, MPI_DOUBLE, MPI_MAX, c->comm), "MPI_Allreduce");
  bench_max(c->comm, plans, 2);

  int reps = o->reps;
  if (reps <= 0) {
    reps = e.est > 0 ? (int)ceil(SECONDS_PER_SIZE / e.est) : MAX_REPS;
    if (reps < MIN_REPS) reps = MIN_REPS;
    if (reps > MAX_REPS) reps = MAX_REPS;
  }
  check_mpi(MPI_Bcast(&reps, 1, MPI_INT, 0, c->comm), "MPI_Bcast"); /* every rank runs the same loop */

  if (c->rank == 0) {
    char a[256], b[256], k[256], d[256];
    split_list(a, sizeof a, s.hs_d, P), split_list(b, sizeof b, s.hs_f, P);
    split_list(k, sizeof k, s.ks_d, P), split_list(d, sizeof d, s.ks_f, P);
    printf("\n== %s, forward + inverse, %d reps\n", head, reps);
    if (WITH_FFTW_MPI) {
      printf("split of H:  distmgr %s | FFTW-MPI %s;  split of k1=%lld: distmgr %s | FFTW-MPI %s\n", a, b,
             (long long)s.k1, k, d);
      printf("memory: estimate %.2f GiB, RSS %.2f GiB (this node, all ranks); distmgr workspace %.1f MiB/rank; "
             "planning (MEASURE): distmgr %.2f s, FFTW-MPI %.2f s\n",
             node_need / (1 << 30), node_rss / (1 << 30), ws / (1 << 20), plans[0], plans[1]);
      printf("check: %s (forward distmgr vs FFTW-MPI max rel err %.2e over %lld of %lld bins%s; channel-first copy "
             "%.2e; round trip distmgr %.2e, FFTW-MPI %.2e)\n",
             ok ? "ok" : "FAILED", e.fwd, e.compared, e.total, e.compared < e.total ? " (the splits differ)" : "",
             e.conv, e.rt_dist, e.rt_conv);
    } else {
      printf("split of H:  distmgr %s;  split of k1=%lld: distmgr %s (no FFTW-MPI)\n", a, (long long)s.k1, k);
      printf("memory: estimate %.2f GiB, RSS %.2f GiB (this node, all ranks); distmgr workspace %.1f MiB/rank; "
             "planning (MEASURE): distmgr %.2f s\n",
             node_need / (1 << 30), node_rss / (1 << 30), ws / (1 << 20), plans[0]);
      printf("check: %s (forward distmgr vs serial FFTW of channel%s max rel err %.2e over %lld of %lld bins; "
             "round trip distmgr %.2e)\n",
             ok ? "ok" : "FAILED", s.BC > 1 ? "s 0 and B*C-1" : " 0", e.fwd, e.compared, e.total, e.rt_dist);
    }
    fflush(stdout);
  }
  if (!ok) fail("check", WITH_FFTW_MPI ? "distmgr's result differs from FFTW-MPI's" : "distmgr's result differs from serial FFTW's");

  double tv[V_COUNT][MAX_REPS], mt[M_COUNT][MAX_REPS], r12[MAX_REPS], r13[MAX_REPS], r14[MAX_REPS];
  for (int r = 0; r < reps; r++) {
    span sp[V_COUNT + M_COUNT] = {{0, 0}};
    double t[V_COUNT + M_COUNT];
    for (int j = 0; j < V_COUNT; j++) {
      int v = (r + j) % V_COUNT; /* rotate which variant goes first */
      if (!WITH_FFTW_MPI && (v == V_FFTW || v == V_CONV)) continue;
      sp[v] = timed(c, &s, v, sp + V_COUNT);
    }
    span_times(c, sp, V_COUNT + M_COUNT, t);
    t[V_MODEL] = 0;
    for (int p = 0; p < M_COUNT; p++) mt[p][r] = t[V_COUNT + p];
    for (int p = 0; p < M_COPY; p++) t[V_MODEL] += t[V_COUNT + p];
    for (int v = 0; v < V_COUNT; v++) tv[v][r] = t[v];
    r12[r] = WITH_FFTW_MPI ? t[V_DIST] / t[V_FFTW] : NAN;
    r13[r] = WITH_FFTW_MPI ? t[V_DIST] / t[V_CONV] : NAN;
    r14[r] = t[V_DIST] / t[V_MODEL];
  }

  if (c->rank == 0) {
    double ms[V_COUNT], ph[M_COUNT];
    for (int v = 0; v < V_COUNT; v++) ms[v] = bench_median(tv[v], reps) * 1e3;
    for (int p = 0; p < M_COUNT; p++) ph[p] = bench_median(mt[p], reps) * 1e3;
    double q12 = bench_median(r12, reps), q13 = bench_median(r13, reps), q14 = bench_median(r14, reps);
    static const char *const names[V_COUNT] = {
        "1 distmgr          [B,C,H,W] -> [H,B,C,k1] -> back", "2 FFTW-MPI         interleaved [H,W,B*C], in place",
        "3 FFTW-MPI + copy  [B*C,H,W] <-> FFTW <-> [B*C,k1,H]", "4 limit model      local FFTs + 2 MPI_Alltoallv"};
    printf("%-54s %11s %10s %8s\n", "variant", "ms", "1/x", "target");
    printf("%-54s %11.3f\n", names[0], ms[0]);
    if (WITH_FFTW_MPI) {
      printf("%-54s %11.3f %10.3f %8s\n", names[1], ms[1], q12, "<= " TARGET_12);
      printf("%-54s %11.3f %10.3f %8s\n", names[2], ms[2], q13, "<= " TARGET_13);
    } else {
      printf("%-54s %11s (no FFTW-MPI for this MPI)\n", names[1], "skipped");
      printf("%-54s %11s (no FFTW-MPI for this MPI)\n", names[2], "skipped");
    }
    printf("%-54s %11.3f %10.3f %8s\n", names[3], ms[3], q14, "<= " TARGET_14);
    printf("model phases (ms): rows r2c %.3f, a2a %.3f, cols c2c %.3f | cols c2c^-1 %.3f, a2a %.3f, rows c2r %.3f"
           " = FFTs %.3f + exchange %.3f\n",
           ph[M_R2C], ph[M_A2A_F], ph[M_C2C_F], ph[M_C2C_B], ph[M_A2A_B], ph[M_C2R],
           ph[M_R2C] + ph[M_C2C_F] + ph[M_C2C_B] + ph[M_C2R], ph[M_A2A_F] + ph[M_A2A_B]);
    printf("distmgr beyond the model: %.3f ms; one plain copy of the exchanged bytes (not in the model): %.3f ms\n",
           ms[0] - ms[3], ph[M_COPY]);
    printf("result np=%d bc=%lld %lldx%lld %.6f %.6f %.6f\n", P, (long long)s.BC, (long long)H, (long long)W, q12, q13,
           q14);
    fflush(stdout);
  }
  destroy(&s);
  MPI_Barrier(c->comm);
}

/* "64" -> B=4, C=16 (B = 1 when not a multiple of 4); "4x16" as given. */
static int parse_bc(const char *tok, int64_t *B, int64_t *C) {
  long long b, c;
  if (sscanf(tok, "%lldx%lld", &b, &c) == 2 && b > 0 && c > 0) return *B = b, *C = c, 0;
  long long bc = atoll(tok);
  if (bc < 1) return -1;
  *B = bc % 4 == 0 ? 4 : 1, *C = bc / *B;
  return 0;
}

static int parse_hw(const char *tok, int64_t *H, int64_t *W) {
  long long h, w;
  if (sscanf(tok, "%lldx%lld", &h, &w) != 2 || h < 1 || w < 1) return -1;
  return *H = h, *W = w, 0;
}

static int worker(const options *o) {
  ctx c = {0};
  check_dist(dist_manager_initialize(), "dist_manager_initialize");
  check_dist(dist_group_comm(NULL, &c.comm), "dist_group_comm");
  MPI_Comm_rank(c.comm, &c.rank);
  MPI_Comm_size(c.comm, &c.size);
  g_rank = c.rank;
  if (c.size > 64) fail("worker", "at most 64 ranks");
  check_mpi(MPI_Comm_split_type(c.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c.node), "MPI_Comm_split_type");
  MPI_Comm_size(c.node, &c.node_size);
  c.one_node = c.node_size == c.size;
#ifdef HAVE_FFTW_MPI
  fftwf_mpi_init();
#endif

  char bcs[256], hws[256];
  snprintf(bcs, sizeof bcs, "%s", o->bc);
  char *save1 = NULL, *save2 = NULL;
  for (char *tb = strtok_r(bcs, ",", &save1); tb; tb = strtok_r(NULL, ",", &save1)) {
    int64_t B, C;
    if (parse_bc(tb, &B, &C)) fail("--bc", tb);
    snprintf(hws, sizeof hws, "%s", o->sizes);
    for (char *th = strtok_r(hws, ",", &save2); th; th = strtok_r(NULL, ",", &save2)) {
      int64_t H, W;
      if (parse_hw(th, &H, &W)) fail("--sizes", th);
      bench_size(&c, B, C, H, W, o);
    }
  }
  MPI_Comm_free(&c.node);
  check_dist(dist_manager_finalize(), "dist_manager_finalize");
  return 0;
}

/* ---- driver --------------------------------------------------------------- */

typedef struct result {
  int np;
  long long bc, h, w;
  double r12, r13, r14;
} result;

/* Launch one worker run, pass its output through, collect its "result" lines. */
static int launch(const char *self, const char *launcher, int np, const options *o, result *res, int *nres,
                  int max_res) {
  char cmd[8192], line[1024];
  int limit = o->quick ? 120 : 3600; /* a hang must end the run, not stall CI */
  int len = snprintf(cmd, sizeof cmd, "timeout %d %s %d %s --worker --bc %s --sizes %s --reps %d%s 2>&1", limit,
                     launcher, np, self, o->bc, o->sizes, o->reps, o->destroy_input ? " --destroy-input" : "");
  if (len < 0 || len >= (int)sizeof cmd) return -1;
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  while (fgets(line, sizeof line, p)) {
    result x;
    if (sscanf(line, "result np=%d bc=%lld %lldx%lld %lf %lf %lf", &x.np, &x.bc, &x.h, &x.w, &x.r12, &x.r13, &x.r14) ==
        7) {
      if (*nres < max_res) res[(*nres)++] = x;
    } else {
      fputs(line, stdout);
      fflush(stdout);
    }
  }
  return pclose(p) == 0 ? 0 : -1;
}

/* Without FFTW-MPI: the line that says so and why (configure's finding). */
static void print_fftw_mpi_skip(void) {
#ifndef HAVE_FFTW_MPI
  printf("SKIP FFTW-MPI: %s: variants 2 and 3 and the ratios 1/2, 1/3 are not measured; distmgr is checked "
         "against serial FFTW and timed against the limit model (ratio 1/4)\n",
         DIST_FFTW_MPI_SKIP);
#endif
}

static void print_ratios(const result *r, int n) {
  print_fftw_mpi_skip();
  for (int i = 0; i < n; i++) {
    if (!isnan(r[i].r12))
      bench_ratio(stdout, r[i].r12, "target <= " TARGET_12, "fft 1/2 np%d BC=%lld %lldx%lld", r[i].np, r[i].bc, r[i].h,
                  r[i].w);
    if (!isnan(r[i].r13))
      bench_ratio(stdout, r[i].r13, "target <= " TARGET_13, "fft 1/3 np%d BC=%lld %lldx%lld", r[i].np, r[i].bc, r[i].h,
                  r[i].w);
    bench_ratio(stdout, r[i].r14, "target <= " TARGET_14, "fft 1/4 np%d BC=%lld %lldx%lld", r[i].np, r[i].bc, r[i].h,
                r[i].w);
  }
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--ranks 2,4] [--bc 64,256] [--sizes 256x256,720x1440,1024x1024] [--reps N] [--quick]\n"
          "          [--destroy-input]\n"
          "  --destroy-input: distmgr's inverse may overwrite its input (like FFTW-MPI in place)\n"
          "  --bc: B*C values (B=4 when a multiple of 4) or BxC; --reps: default about 2 s per size (3..%d)\n"
          "  --quick: unless given, --ranks 2 --bc 8 --sizes 64x64 --reps 2 (CI smoke run)\n",
          argv0, MAX_REPS);
}

/* Parse options; returns 1 for a worker, 0 for the driver, -1 on error. */
static int parse(int argc, char **argv, options *o) {
  int is_worker = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--worker") == 0) is_worker = 1;
    else if (strcmp(a, "--quick") == 0) o->quick = 1;
    else if (strcmp(a, "--destroy-input") == 0) o->destroy_input = destroy_input = 1;
    else if (!v) return -1;
    else if (strcmp(a, "--ranks") == 0) o->ranks = v, o->ranks_set = 1, i++;
    else if (strcmp(a, "--bc") == 0) o->bc = v, o->bc_set = 1, i++;
    else if (strcmp(a, "--sizes") == 0) o->sizes = v, o->sizes_set = 1, i++;
    else if (strcmp(a, "--reps") == 0) o->reps = atoi(v), i++;
    else return -1;
  }
  if (o->quick) {
    if (!o->ranks_set) o->ranks = "2";
    if (!o->bc_set) o->bc = "8";
    if (!o->sizes_set) o->sizes = "64x64";
    if (o->reps <= 0) o->reps = 2;
  }
  if (o->reps < 0 || o->reps > MAX_REPS)
    return fprintf(stderr, "bench/fft: --reps must be 1..%d (0: automatic)\n", MAX_REPS), -1;
  if (strlen(o->bc) > 200 || strlen(o->sizes) > 200 || strlen(o->ranks) > 100)
    return fprintf(stderr, "bench/fft: option lists too long\n"), -1;
  for (const char *p = o->bc; *p; p++)
    if (!strchr("0123456789x,", *p)) return fprintf(stderr, "bench/fft: bad --bc '%s'\n", o->bc), -1;
  for (const char *p = o->sizes; *p; p++)
    if (!strchr("0123456789x,", *p)) return fprintf(stderr, "bench/fft: bad --sizes '%s'\n", o->sizes), -1;
  return is_worker;
}

int main(int argc, char **argv) {
  options o = {"2,4", "64,256", "256x256,720x1440,1024x1024", 0, 0, 0, 0, 0, 0};
  int mode = parse(argc, argv, &o);
  if (mode < 0) return usage(argv[0]), 2;
  if (mode == 1) return worker(&o);

  const char *launcher = bench_launcher();
  char self[4096];
  if (bench_self(self, sizeof self)) return fprintf(stderr, "bench/fft: cannot find own path\n"), 1;

  const char *verify = getenv("DIST_VERIFY");
  printf("bench/fft: 2-D r2c over [B, C, H, W] f32 split along H, forward + inverse, slowest rank, ms;\n"
         "per rep the four variants in rotating order; times: median over reps; 1/x: median of per-rep ratios\n"
         "(launcher: %s N; FFTW_MEASURE everywhere; DIST_VERIFY=%s)\n",
         launcher, verify && *verify ? verify : "default");
  print_fftw_mpi_skip();
  result res[256];
  int nres = 0, rc = 0;
  char list[128];
  snprintf(list, sizeof list, "%s", o.ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    if (np < 1 || np > 64) return fprintf(stderr, "bench/fft: bad rank count '%s'\n", tok), 2;
    if (launch(self, launcher, np, &o, res, &nres, 256)) {
      fprintf(stderr, "bench/fft: the launch at %d ranks failed\n", np);
      rc = 1;
      break;
    }
  }
  printf("\n");
  print_ratios(res, nres); /* a missed target is reported here, not as a failure */
  return rc;
}
