/* Distributed tests of the FFT of fft.h on host memory (run at 1, 2, 3 and 4
 * ranks; 3 gives uneven splits).
 *
 * Every rank generates the whole global array from a seed (the "gathered
 * array"), transforms it with serial FFTW in double (the reference, with the
 * norm's scale applied here, as numpy does), takes its own piece of the input
 * as this file computes it from fft.h's rules (and checks that
 * dist_fft_local_input/_output say the same), runs the distributed transform
 * and compares its piece of the output with the matching elements of the
 * serial result: max |got - want| over the group's ranks divided by
 * max |want| over the whole array, at most 1e-5 (f32) or 1e-12 (f64).
 *
 * Gradients are checked two ways: the adjoint identities
 * <forward(x), y> == <x, forward_backward(y)> and
 * <inverse(z), y> == <z, inverse_backward(y)> (real inner products summed over
 * the group, z not Hermitian), and against serial formulas written out here.
 * Then the measure planner, subgroups, re-execution on new and misaligned
 * buffers, and the bad-input paths (an error with a message on every rank,
 * never a hang). Complex values are interleaved (re, im). */
#include <distmgr.h>
#include <distmgr/fft.h>
#include <distmgr/mpi.h>
#include "config.h"
#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fault.h" /* dist__fault_site: one rank's local step fails */
#include "cunit_mpi.h"
#include "fft_ref.h"
#include "coll_values.h" /* grp/group_info, dtype names, is_complex, seeded unit() */

#define MAXW 64


static dist_dtype cplx_of(dist_dtype prec) { return prec == DIST_F32 ? DIST_C64 : DIST_C128; }

/* Scalar i of a float or double array. */
static double sget(dist_dtype prec, const void *p, int64_t i) { return load(prec, p, i).re; }
static void sset(dist_dtype prec, void *p, int64_t i, double v) { store(prec, p, i, (cval){v, 0}); }

/* ---- groups ------------------------------------------------------------------------ */

/* v reduced over my copy of the group, by distmgr's all-reduce on host
 * memory (MPI or Gloo; test_coll checks it against serial references), not
 * by the FFT under test. NaN counts as +infinity. */
static double gred(const char *group, double v, dist_reduce_op op) {
  int64_t one = 1;
  if (isnan(v)) v = INFINITY;
  dist_tensor t = dist_tensor_host(&v, DIST_F64, 1, &one);
  dist_status s = dist_all_reduce(group, &t, op);
  if (s != DIST_SUCCESS) fprintf(stderr, "test_fft: gred over %s: %s\n", group ? group : "world", dist_last_error());
  CU_ASSERT_EQUAL(s, DIST_SUCCESS);
  return s == DIST_SUCCESS ? v : NAN;
}

/* ---- the split rules, written out here as the reference ------------------------------ */


/* Uneven sizes adding up to total, with zeros: at P > 1 rank r gets nothing
 * when (r + salt) % 3 == 0, the others share total in weights 3 and 1 (at 3
 * ranks, salt 0, total 7: 0, 5, 2). Mode 2: everything on one rank (the last
 * for salt 0, the first otherwise). */
static void uneven_sizes(int64_t total, int P, int salt, int mode, int64_t *sizes) {
  if (mode == 2) {
    for (int r = 0; r < P; r++) sizes[r] = 0;
    sizes[salt == 0 ? P - 1 : 0] = total;
    return;
  }
  int64_t w[MAXW], sum = 0, given = 0;
  int last = 0;
  for (int r = 0; r < P; r++) {
    w[r] = P > 1 && (r + salt) % 3 == 0 ? 0 : 1 + 2 * ((r + salt) % 2);
    sum += w[r];
    if (w[r]) last = r;
  }
  for (int r = 0; r < P; r++) given += sizes[r] = w[r] * total / sum;
  sizes[last] += total - given;
}

static int64_t offset_of(const int64_t *sizes, int r) {
  int64_t o = 0;
  for (int i = 0; i < r; i++) o += sizes[i];
  return o;
}

static void join(char *buf, size_t cap, const int64_t *v, int n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, i ? ",%lld" : "%lld", (long long)v[i]);
}

/* ---- the plan under test and its geometry, computed here from fft.h ------------------- */

typedef struct fcase {
  dist_fft_type type;
  dist_dtype prec; /* DIST_F32 or DIST_F64 */
  int fft_rank, ndim;
  int64_t shape[DIST_TENSOR_MAX_DIMS];
  dist_fft_layout layout;
  dist_fft_norm norm;
  int measure;
  int uneven; /* 0: NULL sizes where the default split is valid; 1: uneven sizes with zeros; 2: all on one rank */
  const char *group; /* NULL: world */
  int destroy_input;
} fcase;

static fcase mkcase(dist_fft_type type, dist_dtype prec, int fft_rank, int ndim, const int64_t *shape,
                    dist_fft_layout layout, dist_fft_norm norm) {
  fcase c;
  memset(&c, 0, sizeof c);
  c.type = type, c.prec = prec, c.fft_rank = fft_rank, c.ndim = ndim;
  memcpy(c.shape, shape, (size_t)ndim * sizeof *shape);
  c.layout = layout, c.norm = norm;
  return c;
}

typedef struct geom {
  int P, me;          /* group size and my rank in it */
  int fr, nb;         /* transformed dims, batch dims */
  int64_t B;          /* batch entries */
  int64_t n[3], K[3]; /* transformed sizes; the forward output's extents (last n/2+1 for r2c) */
  int64_t N, NK;      /* products of n and of K */
  int64_t in_sizes[MAXW], out_sizes[MAXW];
  const int64_t *in_arg, *out_arg; /* what is passed: NULL for the default split */
  dist_fft_local in, out;          /* this rank's pieces, as fft.h defines them */
} geom;

typedef struct fctx {
  fcase c;
  geom g;
  dist_fft_plan *plan;
  char name[512];
} fctx;

static const char *const NORM_NAME[] = {"backward", "ortho", "forward"};

static void geom_init(geom *g, const fcase *c) {
  memset(g, 0, sizeof *g);
  dist_group_size(c->group, &g->P);
  dist_group_rank(c->group, &g->me);
  g->fr = c->fft_rank, g->nb = c->ndim - c->fft_rank;
  g->B = prod(c->shape, g->nb);
  for (int i = 0; i < g->fr; i++) g->n[i] = g->K[i] = c->shape[g->nb + i];
  if (c->type == DIST_FFT_R2C) g->K[g->fr - 1] = g->n[g->fr - 1] / 2 + 1;
  g->N = prod(g->n, g->fr), g->NK = prod(g->K, g->fr);
  int transposed = c->layout == DIST_FFT_OUT_TRANSPOSED;
  /* the default split needs n0 >= P (and k1 >= P): otherwise pass sizes */
  if (c->uneven || g->n[0] < g->P) {
    uneven_sizes(g->n[0], g->P, 0, c->uneven, g->in_sizes);
    g->in_arg = g->in_sizes;
  } else {
    ref_split(g->n[0], g->P, g->in_sizes);
  }
  /* out_sizes: the k1 split of the transposed output, which the same layout
   * goes through between its two exchanges (so it needs k1 >= P too) */
  if (c->uneven || g->K[1] < g->P) {
    uneven_sizes(g->K[1], g->P, 1, c->uneven, g->out_sizes);
    g->out_arg = g->out_sizes;
  } else {
    ref_split(g->K[1], g->P, g->out_sizes);
  }
  /* input: [batch..., in_sizes[me], n1 (, n2)] */
  dist_fft_local *p = &g->in;
  p->dtype = c->type == DIST_FFT_R2C ? c->prec : cplx_of(c->prec);
  p->ndim = c->ndim, p->split_dim = g->nb;
  for (int d = 0; d < c->ndim; d++) p->shape[d] = p->global[d] = c->shape[d];
  p->shape[g->nb] = g->in_sizes[g->me];
  p->offset[g->nb] = offset_of(g->in_sizes, g->me);
  /* output */
  p = &g->out;
  p->dtype = cplx_of(c->prec);
  p->ndim = c->ndim;
  if (transposed) { /* [n0, batch..., out_sizes[me] (, k2)] */
    p->split_dim = g->nb + 1;
    p->global[0] = g->n[0];
    for (int d = 0; d < g->nb; d++) p->global[d + 1] = c->shape[d];
    for (int i = 1; i < g->fr; i++) p->global[g->nb + i] = g->K[i];
    memcpy(p->shape, p->global, sizeof p->shape);
    p->shape[g->nb + 1] = g->out_sizes[g->me];
    p->offset[g->nb + 1] = offset_of(g->out_sizes, g->me);
  } else { /* [batch..., in_sizes[me], k1 (, k2)] */
    p->split_dim = g->nb;
    for (int d = 0; d < g->nb; d++) p->global[d] = c->shape[d];
    for (int i = 0; i < g->fr; i++) p->global[g->nb + i] = g->K[i];
    memcpy(p->shape, p->global, sizeof p->shape);
    p->shape[g->nb] = g->in_sizes[g->me];
    p->offset[g->nb] = offset_of(g->in_sizes, g->me);
  }
  for (int k = 0; k < 2; k++) {
    p = k ? &g->out : &g->in;
    p->numel = prod(p->shape, p->ndim);
    p->nbytes = (size_t)p->numel * DT_SIZE[p->dtype];
  }
}

/* The library's description of a piece against ours. */
static int same_piece(const fctx *x, const char *what, const dist_fft_local *got, const dist_fft_local *want,
                      int line) {
  int ok = got->dtype == want->dtype && got->ndim == want->ndim && got->split_dim == want->split_dim &&
           got->numel == want->numel && got->nbytes == want->nbytes;
  for (int d = 0; ok && d < want->ndim; d++)
    ok = got->shape[d] == want->shape[d] && got->offset[d] == want->offset[d] && got->global[d] == want->global[d];
  if (!ok) {
    char gs[3][96], ws[3][96];
    join(gs[0], 96, got->shape, got->ndim), join(gs[1], 96, got->offset, got->ndim),
        join(gs[2], 96, got->global, got->ndim);
    join(ws[0], 96, want->shape, want->ndim), join(ws[1], 96, want->offset, want->ndim),
        join(ws[2], 96, want->global, want->ndim);
    fprintf(stderr,
            "[rank %d/%d] line %d: %s of %s: got %s shape [%s] offset [%s] global [%s] split_dim %d numel %lld, "
            "expected %s shape [%s] offset [%s] global [%s] split_dim %d numel %lld\n",
            R, W, line, what, x->name, DT_NAME[got->dtype % DIST_DTYPE_COUNT], gs[0], gs[1], gs[2], got->split_dim,
            (long long)got->numel, DT_NAME[want->dtype], ws[0], ws[1], ws[2], want->split_dim, (long long)want->numel);
  }
  assert_at(ok, line, what);
  return ok;
}

static void describe(fctx *x) {
  const fcase *c = &x->c;
  char sh[96], in[96] = "default", out[96] = "default";
  join(sh, sizeof sh, c->shape, c->ndim);
  if (x->g.in_arg) join(in, sizeof in, x->g.in_sizes, x->g.P);
  if (x->g.out_arg) join(out, sizeof out, x->g.out_sizes, x->g.P);
  snprintf(x->name, sizeof x->name, "%s %s [%s] fft_rank %d %s norm %s%s, in_sizes %s, out_sizes %s, group %s",
           c->type == DIST_FFT_R2C ? "r2c" : "c2c", DT_NAME[c->prec], sh, c->fft_rank,
           c->layout == DIST_FFT_OUT_TRANSPOSED ? "transposed" : "same", NORM_NAME[c->norm],
           c->measure ? " measure" : "", in, out, c->group ? c->group : "world");
}

/* Create the plan (collective over c->group) and check the pieces it reports.
 * Returns 0, on every rank of the group, if any rank failed to create it. */
#define CTX_OPEN(x, c) ctx_open_((x), (c), __LINE__)

/* dist_fft_input_split / _output_split against every rank's own local
 * piece (all-gathered over the group): each rank's extent and offset along
 * the split dim, in group order. */
static void splits_match(fctx *x, const dist_fft_local *li, const dist_fft_local *lo, int line) {
  int P = 0;
  ASSERT_OK(dist_group_size(x->c.group, &P));
  if (P <= 0) return;
  CU_ASSERT_EQUAL(dist_fft_plan_ranks(x->plan), P);
  int64_t mine[4] = {li->shape[li->split_dim], li->offset[li->split_dim], lo->shape[lo->split_dim],
                     lo->offset[lo->split_dim]};
  int64_t *all = malloc(sizeof *all * 4 * (size_t)P), *got = malloc(sizeof *got * 4 * (size_t)P);
  int64_t four = 4, nall = 4 * (int64_t)P;
  dist_tensor tin = dist_tensor_host(mine, DIST_I64, 1, &four), tall = dist_tensor_host(all, DIST_I64, 1, &nall);
  ASSERT_OK(dist_all_gather(x->c.group, &tin, &tall, 0));
  int bad = dist_fft_input_split(x->plan, P, got, got + P) != DIST_SUCCESS ||
            dist_fft_output_split(x->plan, P, got + 2 * P, got + 3 * P) != DIST_SUCCESS;
  for (int r = 0; r < P && !bad; r++)
    for (int k = 0; k < 4; k++) bad |= got[k * P + r] != all[4 * r + k];
  if (bad) fprintf(stderr, "test_fft.c:%d: %s: the plan's splits differ from the ranks' local pieces\n", line, x->name);
  CU_ASSERT_FALSE(bad);
  /* room for fewer entries than ranks, and NULL arrays */
  if (P > 1) CU_ASSERT_EQUAL(dist_fft_input_split(x->plan, P - 1, got, NULL), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_fft_output_split(x->plan, P, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_fft_input_split(NULL, P, got, got), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(dist_fft_plan_ranks(NULL), 0);
  free(all), free(got);
}

static int ctx_open_(fctx *x, const fcase *c, int line) {
  memset(x, 0, sizeof *x);
  x->c = *c;
  geom_init(&x->g, c);
  describe(x);
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  opt.group = c->group, opt.norm = c->norm, opt.layout = c->layout, opt.measure = c->measure;
  opt.in_sizes = x->g.in_arg, opt.out_sizes = x->g.out_arg, opt.destroy_input = c->destroy_input;
  dist_status s = dist_fft_plan_create(&x->plan, c->type, c->prec, DIST_MEM_HOST, c->ndim, c->shape, c->fft_rank, &opt);
  char what[640];
  snprintf(what, sizeof what, "plan_create %s", x->name);
  check_ok_(s, what, line);
  if (gred(c->group, s == DIST_SUCCESS, DIST_MIN) == 0) { /* some rank failed: skip the case everywhere */
    if (s == DIST_SUCCESS) dist_fft_plan_destroy(x->plan);
    x->plan = NULL;
    return 0;
  }
  dist_fft_local li, lo;
  memset(&li, 0x7f, sizeof li), memset(&lo, 0x7f, sizeof lo);
  if (check_ok_(dist_fft_local_input(x->plan, &li), "dist_fft_local_input", line))
    same_piece(x, "dist_fft_local_input", &li, &x->g.in, line);
  if (check_ok_(dist_fft_local_output(x->plan, &lo), "dist_fft_local_output", line))
    same_piece(x, "dist_fft_local_output", &lo, &x->g.out, line);
  splits_match(x, &li, &lo, line);
  (void)dist_fft_workspace_bytes(x->plan);
  return 1;
}

static void ctx_close(fctx *x) {
  dist_fft_plan_destroy(x->plan);
  x->plan = NULL;
}

/* ---- local buffers ------------------------------------------------------------------- */

/* A piece's buffer, its data `shift` bytes into a malloc'd block filled with
 * 0xFF (NaN in every float type: an element left unwritten cannot pass), with
 * GUARD bytes after it. An empty piece's tensor has NULL data. */
#define GUARD 32
typedef struct lbuf {
  void *mem, *data;
  dist_tensor t;
  int64_t nscal; /* scalars */
  size_t shift, nbytes;
} lbuf;

static lbuf lbuf_new(const dist_fft_local *p, size_t shift) {
  lbuf b;
  b.mem = malloc(p->nbytes + shift + GUARD);
  memset(b.mem, 0xFF, p->nbytes + shift + GUARD);
  b.data = (char *)b.mem + shift;
  b.nscal = p->numel * comps(p->dtype);
  b.shift = shift, b.nbytes = p->nbytes;
  b.t = dist_tensor_host(p->numel ? b.data : NULL, p->dtype, p->ndim, p->shape);
  return b;
}

/* Nothing was written before or after the tensor's bytes. */
static int lbuf_guards_ok(const lbuf *b) {
  const unsigned char *m = b->mem;
  for (size_t i = 0; i < b->shift; i++)
    if (m[i] != 0xFF) return 0;
  for (size_t i = b->shift + b->nbytes; i < b->shift + b->nbytes + GUARD; i++)
    if (m[i] != 0xFF) return 0;
  return 1;
}

static void lbuf_free(lbuf *b) {
  free(b->mem);
  b->mem = b->data = NULL;
}

static dist_dtype prec_of(dist_dtype dt) { return dt == DIST_F32 || dt == DIST_C64 ? DIST_F32 : DIST_F64; }

/* Random local data in [-1, 1): a function of (seed, owner, i). */
static void lbuf_fill(lbuf *b, uint64_t seed, int owner) {
  for (int64_t i = 0; i < b->nscal; i++) sset(prec_of(b->t.dtype), b->data, i, 2 * unit(seed, owner, i) - 1);
}

static double lbuf_dot(const lbuf *a, const lbuf *b) {
  double s = 0;
  dist_dtype pa = prec_of(a->t.dtype), pb = prec_of(b->t.dtype);
  for (int64_t i = 0; i < a->nscal && i < b->nscal; i++) s += sget(pa, a->data, i) * sget(pb, b->data, i);
  return s;
}

/* ---- between pieces and the global array ---------------------------------------------- */

static int is_transposed(const fctx *x, const dist_fft_local *p) {
  return p == &x->g.out && x->c.layout == DIST_FFT_OUT_TRANSPOSED;
}

/* The flat index, in the global array in natural order [batch..., n0, rest...],
 * of element i of piece p (whose dim 0 is n0 when transposed). */
static int64_t to_natural(const fctx *x, const dist_fft_local *p, int64_t i) {
  int64_t g[DIST_TENSOR_MAX_DIMS];
  int nb = x->g.nb, tr = is_transposed(x, p);
  for (int d = p->ndim - 1; d >= 0; d--) {
    g[d] = i % p->shape[d] + p->offset[d];
    i /= p->shape[d];
  }
  int64_t idx = 0;
  for (int d = 0; d < p->ndim; d++) {
    int src = !tr || d > nb ? d : d < nb ? d + 1 : 0;
    idx = idx * p->global[src] + g[src];
  }
  return idx;
}

/* My piece of the global array `glob` (natural order), rounded to the precision. */
static void scatter_piece(const fctx *x, const dist_fft_local *p, const double *glob, lbuf *b) {
  int cs = comps(p->dtype);
  for (int64_t i = 0; i < p->numel; i++) {
    int64_t j = to_natural(x, p, i);
    for (int k = 0; k < cs; k++) sset(x->c.prec, b->data, i * cs + k, glob[j * cs + k]);
  }
}

/* max |piece - glob| over my piece (NaN counts as infinite); *worst: where. */
static double piece_diff(const fctx *x, const dist_fft_local *p, const void *got, const double *glob, int64_t *worst) {
  int cs = comps(p->dtype);
  double m = 0;
  *worst = -1;
  for (int64_t i = 0; i < p->numel * cs; i++) {
    double d = fabs(sget(x->c.prec, got, i) - glob[to_natural(x, p, i / cs) * cs + i % cs]);
    if (isnan(d)) d = INFINITY;
    if (d > m || *worst < 0) m = d, *worst = i;
  }
  return m;
}

static double maxabs(const double *a, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
  return m;
}

/* got (my piece p) against want (the whole array in natural order), over the
 * group: max |got - want| / max |want| <= tol. */
static int expect_piece_(const fctx *x, const char *what, const dist_fft_local *p, const void *got, const double *want,
                         int line) {
  int cs = comps(p->dtype);
  int64_t worst;
  double mine = piece_diff(x, p, got, want, &worst);
  double diff = gred(x->c.group, mine, DIST_MAX);
  double scale = maxabs(want, prod(p->global, p->ndim) * cs);
  if (scale == 0) scale = 1;
  int ok = diff / scale <= tol_of(x->c.prec);
  if (!(mine / scale <= tol_of(x->c.prec))) {
    int64_t j = to_natural(x, p, worst / cs);
    fprintf(stderr,
            "[rank %d/%d] line %d: %s, %s: relative error %.3g (tolerance %.0e); worst local element %lld (%s) = "
            "%.9g, expected %.9g (global natural index %lld)\n",
            R, W, line, what, x->name, mine / scale, tol_of(x->c.prec), (long long)(worst / cs),
            cs == 2 ? (worst % 2 ? "im" : "re") : "real", sget(x->c.prec, got, worst), want[j * cs + worst % cs],
            (long long)j);
  }
  char w2[640];
  snprintf(w2, sizeof w2, "%s: %s", what, x->name);
  assert_at(ok, line, w2);
  return ok;
}

/* ---- serial references (FFTW, double, the whole array in natural order) ----------------- */


/* B unscaled transforms of the fft_rank sizes n. R2C: B*N reals -> B*NH
 * complex, NH = N / n_last * (n_last/2+1); C2R the reverse; DFT (exponent -1)
 * and IDFT (+1): B*N complex. */
static void ref_fft(const geom *g, ref_kind kind, const double *in, double *out) {
  ref_fft_many(g->fr, g->n, g->B, kind, in, out);
}


static void scale_by(double *a, int64_t n, double s) {
  for (int64_t i = 0; i < n; i++) a[i] *= s;
}

/* n scalars in [-1, 1), a function of (seed, i) only, rounded to the
 * precision so that the library and the reference see the same numbers. */

static void round_to(dist_dtype prec, double *a, int64_t n) {
  if (prec == DIST_F32)
    for (int64_t i = 0; i < n; i++) a[i] = (double)(float)a[i];
}

/* ---- running the plan ------------------------------------------------------------------ */

typedef enum { OP_FORWARD, OP_INVERSE, OP_FORWARD_BACKWARD, OP_INVERSE_BACKWARD } fft_op;
static const char *const OPNAME[] = {"forward", "inverse", "forward_backward", "inverse_backward"};

static dist_status run_op(dist_fft_plan *plan, fft_op op, const dist_tensor *a, dist_tensor *b) {
  switch (op) {
  case OP_FORWARD: return dist_fft_forward(plan, a, b);
  case OP_INVERSE: return dist_fft_inverse(plan, a, b);
  case OP_FORWARD_BACKWARD: return dist_fft_forward_backward(plan, a, b);
  default: return dist_fft_inverse_backward(plan, a, b);
  }
}

/* forward and inverse_backward read the input's layout; the others the output's. */
static const dist_fft_local *src_piece(const fctx *x, fft_op op) {
  return op == OP_FORWARD || op == OP_INVERSE_BACKWARD ? &x->g.in : &x->g.out;
}
static const dist_fft_local *dst_piece(const fctx *x, fft_op op) {
  return op == OP_FORWARD || op == OP_INVERSE_BACKWARD ? &x->g.out : &x->g.in;
}

/* Run `op` on my piece of `gsrc` and compare my piece of the result with
 * `want` (both whole arrays in natural order); buffers `shift` bytes off
 * malloc's alignment. Also: the source is left unchanged. */
static int check_op_(fctx *x, fft_op op, const double *gsrc, const double *want, size_t shift, const char *tag,
                     int line) {
  const dist_fft_local *ps = src_piece(x, op), *pd = dst_piece(x, op);
  lbuf a = lbuf_new(ps, shift), b = lbuf_new(pd, shift);
  scatter_piece(x, ps, gsrc, &a);
  void *keep = malloc(ps->nbytes + 1);
  memcpy(keep, a.data, ps->nbytes);
  char what[128];
  snprintf(what, sizeof what, "%s%s%s", OPNAME[op], tag ? " " : "", tag ? tag : "");
  int ok = check_ok_(run_op(x->plan, op, &a.t, &b.t), what, line);
  ok = expect_piece_(x, what, pd, b.data, want, line) && ok;
  /* destroy_input lets the TRANSPOSED inverse pipeline (inverse, forward_backward) overwrite its input */
  int may_destroy = x->c.destroy_input && x->c.layout == DIST_FFT_OUT_TRANSPOSED &&
                    (op == OP_INVERSE || op == OP_FORWARD_BACKWARD);
  int same = may_destroy || memcmp(keep, a.data, ps->nbytes) == 0, guarded = lbuf_guards_ok(&a) && lbuf_guards_ok(&b);
  if (!same) fprintf(stderr, "[rank %d/%d] line %d: %s of %s modified its input\n", R, W, line, what, x->name);
  if (!guarded)
    fprintf(stderr, "[rank %d/%d] line %d: %s of %s wrote outside its tensors\n", R, W, line, what, x->name);
  assert_at(same, line, "the input is never modified");
  assert_at(guarded, line, "nothing written outside the tensors");
  free(keep);
  lbuf_free(&a), lbuf_free(&b);
  return ok;
}

/* forward(x) against s_f * FFTW(x). */
static void check_forward_(fctx *x, uint64_t seed, size_t shift, const char *tag, int line) {
  const geom *g = &x->g;
  int r2c = x->c.type == DIST_FFT_R2C;
  double *src = gen_global(seed, g->B * g->N * (r2c ? 1 : 2), x->c.prec);
  double *want = malloc((size_t)(g->B * g->NK * 2) * sizeof *want);
  ref_fft(g, r2c ? REF_R2C : REF_DFT, src, want);
  scale_by(want, g->B * g->NK * 2, fwd_scale(x->c.norm, g->N));
  check_op_(x, OP_FORWARD, src, want, shift, tag, line);
  free(src), free(want);
}
#define CHECK_FORWARD(x, seed) check_forward_((x), (seed), 0, NULL, __LINE__)

/* inverse(z) against s_i * FFTW's inverse of z; for r2c z is the (Hermitian)
 * spectrum of a real array, so c2r is defined. */
static void check_inverse_(fctx *x, uint64_t seed, size_t shift, const char *tag, int line) {
  const geom *g = &x->g;
  int r2c = x->c.type == DIST_FFT_R2C;
  double *z, *want = malloc((size_t)(g->B * g->N * 2) * sizeof *want);
  if (r2c) {
    double *real = gen_global(seed, g->B * g->N, x->c.prec);
    z = malloc((size_t)(g->B * g->NK * 2) * sizeof *z);
    ref_fft(g, REF_R2C, real, z);
    round_to(x->c.prec, z, g->B * g->NK * 2); /* what the library gets */
    ref_fft(g, REF_C2R, z, want);
    scale_by(want, g->B * g->N, inv_scale(x->c.norm, g->N));
    free(real);
  } else {
    z = gen_global(seed, g->B * g->N * 2, x->c.prec);
    ref_fft(g, REF_IDFT, z, want);
    scale_by(want, g->B * g->N * 2, inv_scale(x->c.norm, g->N));
  }
  check_op_(x, OP_INVERSE, z, want, shift, tag, line);
  free(z), free(want);
}
#define CHECK_INVERSE(x, seed) check_inverse_((x), (seed), 0, NULL, __LINE__)

/* inverse(forward(x)) == x. */
#define CHECK_ROUND_TRIP(x, seed) check_round_trip_((x), (seed), __LINE__)
static void check_round_trip_(fctx *x, uint64_t seed, int line) {
  const geom *g = &x->g;
  double *src = gen_global(seed, g->B * g->N * comps(g->in.dtype), x->c.prec);
  lbuf a = lbuf_new(&g->in, 0), f = lbuf_new(&g->out, 0), b = lbuf_new(&g->in, 0);
  scatter_piece(x, &g->in, src, &a);
  int ok = check_ok_(dist_fft_forward(x->plan, &a.t, &f.t), "forward (round trip)", line);
  ok = check_ok_(dist_fft_inverse(x->plan, &f.t, &b.t), "inverse (round trip)", line) && ok;
  expect_piece_(x, "inverse(forward(x)) == x", &g->in, b.data, src, line);
  lbuf_free(&a), lbuf_free(&f), lbuf_free(&b);
  free(src);
}

/* Gradients against formulas computed serially (fft.h):
 *  r2c forward_backward(g) = Re(s_f * IDFT_unscaled(g zero-padded to the full spectrum));
 *  r2c inverse_backward(g) = s_i * w_k * r2c_unscaled(g), w_k = 1 at k = 0 and k = n/2, else 2;
 *  c2c forward_backward(g) = s_f * IDFT_unscaled(g), inverse_backward(g) = s_i * DFT_unscaled(g). */
#define CHECK_GRAD_FORMULA(x, seed) check_grad_formula_((x), (seed), 0, __LINE__)
static void check_grad_formula_(fctx *x, uint64_t seed, size_t shift, int line) {
  const geom *g = &x->g;
  dist_dtype prec = x->c.prec;
  double sf = fwd_scale(x->c.norm, g->N), si = inv_scale(x->c.norm, g->N);
  int64_t full = g->B * g->N * 2, half = g->B * g->NK * 2;
  double *go = gen_global(seed, half, prec), *tmp = malloc((size_t)full * sizeof *tmp);
  double *want = malloc((size_t)full * sizeof *want);
  if (x->c.type == DIST_FFT_R2C) {
    int64_t nl = g->n[g->fr - 1], kl = g->K[g->fr - 1];
    double *pad = calloc((size_t)full, sizeof *pad);
    for (int64_t i = 0; i < g->B * g->NK; i++) {
      int64_t j = i / kl * nl + i % kl;
      pad[2 * j] = go[2 * i], pad[2 * j + 1] = go[2 * i + 1];
    }
    ref_fft(g, REF_IDFT, pad, tmp);
    for (int64_t i = 0; i < g->B * g->N; i++) want[i] = sf * tmp[2 * i];
    check_op_(x, OP_FORWARD_BACKWARD, go, want, shift, "against Re(s_f IDFT(zero-padded))", line);
    free(pad);
    double *gi = gen_global(seed + 1, g->B * g->N, prec);
    ref_fft(g, REF_R2C, gi, want);
    for (int64_t i = 0; i < g->B * g->NK; i++) {
      int64_t k = i % kl;
      double w = k == 0 || 2 * k == nl ? 1 : 2;
      want[2 * i] *= si * w, want[2 * i + 1] *= si * w;
    }
    check_op_(x, OP_INVERSE_BACKWARD, gi, want, shift, "against s_i w_k r2c", line);
    free(gi);
  } else {
    ref_fft(g, REF_IDFT, go, want);
    scale_by(want, full, sf);
    check_op_(x, OP_FORWARD_BACKWARD, go, want, shift, "against s_f IDFT", line);
    double *gi = gen_global(seed + 1, full, prec);
    ref_fft(g, REF_DFT, gi, want);
    scale_by(want, full, si);
    check_op_(x, OP_INVERSE_BACKWARD, gi, want, shift, "against s_i DFT", line);
    free(gi);
  }
  free(go), free(tmp), free(want);
}

/* <fwd(a), y> == <a, bwd(y)> over the group, for random local a and y, within
 * tol * |fwd(a)| |y| (Cauchy-Schwarz's bound of either side). */
static void expect_adjoint(const fctx *x, const char *what, double lhs, double rhs, double scale, int line) {
  double tol = x->c.prec == DIST_F32 ? 1e-5 : 1e-12;
  int ok = fabs(lhs - rhs) <= tol * scale && scale > 0;
  if (!ok && x->g.me == 0)
    fprintf(stderr, "[rank %d/%d] line %d: adjoint %s, %s: %.17g vs %.17g (|difference| / (|f| |y|) = %.3g)\n", R, W,
            line, what, x->name, lhs, rhs, fabs(lhs - rhs) / scale);
  char w2[640];
  snprintf(w2, sizeof w2, "adjoint %s: %s", what, x->name);
  assert_at(ok, line, w2);
}

#define CHECK_ADJOINT(x, seed) check_adjoint_((x), (seed), __LINE__)
static void check_adjoint_(fctx *x, uint64_t seed, int line) {
  const geom *g = &x->g;
  const char *grp_ = x->c.group;
  int me = g->me;
  { /* <forward(a), y> == <a, forward_backward(y)> */
    lbuf a = lbuf_new(&g->in, 0), y = lbuf_new(&g->out, 0), fa = lbuf_new(&g->out, 0), by = lbuf_new(&g->in, 0);
    lbuf_fill(&a, seed, 2 * me), lbuf_fill(&y, seed, 2 * me + 1);
    int ok = check_ok_(dist_fft_forward(x->plan, &a.t, &fa.t), "forward", line);
    ok = check_ok_(dist_fft_forward_backward(x->plan, &y.t, &by.t), "forward_backward", line) && ok;
    double lhs = gred(grp_, lbuf_dot(&fa, &y), DIST_SUM), rhs = gred(grp_, lbuf_dot(&a, &by), DIST_SUM);
    double scale = sqrt(gred(grp_, lbuf_dot(&fa, &fa), DIST_SUM) * gred(grp_, lbuf_dot(&y, &y), DIST_SUM));
    expect_adjoint(x, "<forward(x), y> == <x, forward_backward(y)>", lhs, rhs, scale, line);
    lbuf_free(&a), lbuf_free(&y), lbuf_free(&fa), lbuf_free(&by);
  }
  { /* <inverse(z), y> == <z, inverse_backward(y)>, z not Hermitian */
    lbuf z = lbuf_new(&g->out, 0), y = lbuf_new(&g->in, 0), iz = lbuf_new(&g->in, 0), by = lbuf_new(&g->out, 0);
    lbuf_fill(&z, seed + 1, 2 * me), lbuf_fill(&y, seed + 1, 2 * me + 1);
    int ok = check_ok_(dist_fft_inverse(x->plan, &z.t, &iz.t), "inverse", line);
    ok = check_ok_(dist_fft_inverse_backward(x->plan, &y.t, &by.t), "inverse_backward", line) && ok;
    double lhs = gred(grp_, lbuf_dot(&iz, &y), DIST_SUM), rhs = gred(grp_, lbuf_dot(&z, &by), DIST_SUM);
    double scale = sqrt(gred(grp_, lbuf_dot(&iz, &iz), DIST_SUM) * gred(grp_, lbuf_dot(&y, &y), DIST_SUM));
    expect_adjoint(x, "<inverse(z), y> == <z, inverse_backward(y)>", lhs, rhs, scale, line);
    lbuf_free(&z), lbuf_free(&y), lbuf_free(&iz), lbuf_free(&by);
  }
}

/* ======================= forward, inverse and round trip against serial FFTW ======================= */

typedef struct {
  int ndim;
  int64_t s[DIST_TENSOR_MAX_DIMS];
} shp;

/* Odd and prime sizes, most n0 not divisible by the rank count, batches of 0
 * to 2 dims.
 * Where n0 or k1 is below the rank count ([3,6]: n0 3; [2,3,7,5] r2c: k1 3;
 * [3,2,3]: n1 2) the sizes are passed explicitly. */
static const shp SHAPES_2D[] = {{4, {2, 3, 7, 5}}, {3, {1, 13, 8}}, {4, {4, 6, 11, 9}}, {2, {17, 16}}, {2, {3, 6}}};
static const shp SHAPES_3D[] = {
    {3, {5, 7, 6}}, {4, {2, 9, 4, 5}}, {4, {4, 6, 11, 9}}, {3, {3, 2, 3}}, {5, {2, 3, 5, 4, 3}}};

/* Every shape in f32 and f64, transposed and same; the norm rotates so that
 * each shape sees all three. */
static void run_shapes(dist_fft_type type, int fft_rank, const shp *shapes, int nshapes, uint64_t seed0) {
  for (int s = 0; s < nshapes; s++)
    for (int p = 0; p < 2; p++)
      for (int l = 0; l < 2; l++) {
        fcase c = mkcase(type, p ? DIST_F64 : DIST_F32, fft_rank, shapes[s].ndim, shapes[s].s, (dist_fft_layout)l,
                         (dist_fft_norm)((s + 2 * p + l) % 3));
        fctx x;
        uint64_t seed = seed0 + 100 * (uint64_t)s + 10 * (uint64_t)(2 * p + l);
        if (!CTX_OPEN(&x, &c)) continue;
        CHECK_FORWARD(&x, seed);
        CHECK_INVERSE(&x, seed + 1);
        CHECK_ROUND_TRIP(&x, seed + 2);
        ctx_close(&x);
      }
}

static void test_r2c_2d(void) { run_shapes(DIST_FFT_R2C, 2, SHAPES_2D, 5, 1000); }
static void test_c2c_2d(void) { run_shapes(DIST_FFT_C2C, 2, SHAPES_2D, 5, 2000); }
static void test_r2c_3d(void) { run_shapes(DIST_FFT_R2C, 3, SHAPES_3D, 5, 3000); }
static void test_c2c_3d(void) { run_shapes(DIST_FFT_C2C, 3, SHAPES_3D, 5, 4000); }

/* Explicit in_sizes/out_sizes: uneven with zeros (at 3 ranks 0,5,2 for n0 7),
 * and everything on one rank. */
static void test_explicit_sizes(void) {
  static const struct {
    dist_fft_type type;
    dist_dtype prec;
    int fr;
    shp s;
    dist_fft_layout layout;
    dist_fft_norm norm;
    int mode;
  } cases[] = {
      {DIST_FFT_R2C, DIST_F64, 2, {3, {2, 7, 6}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD, 1},
      {DIST_FFT_R2C, DIST_F32, 2, {2, {13, 9}}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO, 1},
      {DIST_FFT_C2C, DIST_F64, 2, {3, {3, 7, 5}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD, 1},
      {DIST_FFT_R2C, DIST_F32, 3, {3, {7, 5, 4}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO, 1},
      {DIST_FFT_C2C, DIST_F64, 3, {4, {2, 6, 5, 3}}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_BACKWARD, 1},
      {DIST_FFT_R2C, DIST_F32, 2, {2, {2, 3}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD, 1},
      {DIST_FFT_R2C, DIST_F64, 2, {3, {2, 5, 7}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO, 2},
      {DIST_FFT_C2C, DIST_F32, 3, {3, {4, 3, 5}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD, 2},
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    fcase c = mkcase(cases[i].type, cases[i].prec, cases[i].fr, cases[i].s.ndim, cases[i].s.s, cases[i].layout,
                     cases[i].norm);
    c.uneven = cases[i].mode;
    fctx x;
    if (!CTX_OPEN(&x, &c)) continue;
    uint64_t seed = 5000 + 10 * (uint64_t)i;
    CHECK_FORWARD(&x, seed);
    CHECK_INVERSE(&x, seed + 1);
    CHECK_ROUND_TRIP(&x, seed + 2);
    CHECK_ADJOINT(&x, seed + 3);
    ctx_close(&x);
  }
}

/* ======================= gradients ======================= */

/* r2c 2-D with even (Nyquist column) and odd last dims, r2c 3-D likewise, c2c
 * 2-D and 3-D; every norm for each kind. */
static const struct {
  dist_fft_type type;
  dist_dtype prec;
  int fr;
  shp s;
  dist_fft_layout layout;
  dist_fft_norm norm;
} GRAD_CASES[] = {
    {DIST_FFT_R2C, DIST_F64, 2, {3, {3, 6, 8}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD},
    {DIST_FFT_R2C, DIST_F32, 2, {3, {2, 5, 7}}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO},
    {DIST_FFT_R2C, DIST_F64, 2, {2, {9, 4}}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_FORWARD},
    {DIST_FFT_R2C, DIST_F32, 2, {3, {2, 7, 9}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD},
    {DIST_FFT_R2C, DIST_F64, 3, {4, {2, 5, 4, 6}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO},
    {DIST_FFT_R2C, DIST_F32, 3, {3, {5, 6, 3}}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_BACKWARD},
    {DIST_FFT_R2C, DIST_F32, 3, {4, {3, 4, 5, 4}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD},
    {DIST_FFT_C2C, DIST_F32, 2, {3, {2, 6, 5}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD},
    {DIST_FFT_C2C, DIST_F64, 3, {3, {4, 5, 3}}, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO},
    {DIST_FFT_C2C, DIST_F64, 2, {2, {5, 7}}, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD},
};
#define NGRAD (int)(sizeof GRAD_CASES / sizeof GRAD_CASES[0])

static fcase grad_case(int i) {
  return mkcase(GRAD_CASES[i].type, GRAD_CASES[i].prec, GRAD_CASES[i].fr, GRAD_CASES[i].s.ndim, GRAD_CASES[i].s.s,
                GRAD_CASES[i].layout, GRAD_CASES[i].norm);
}

static void test_adjoint(void) {
  for (int i = 0; i < NGRAD; i++) {
    fcase c = grad_case(i);
    fctx x;
    if (!CTX_OPEN(&x, &c)) continue;
    CHECK_ADJOINT(&x, 6000 + 10 * (uint64_t)i);
    ctx_close(&x);
  }
}

static void test_grad_formula(void) {
  for (int i = 0; i < NGRAD; i++) {
    fcase c = grad_case(i);
    fctx x;
    if (!CTX_OPEN(&x, &c)) continue;
    CHECK_GRAD_FORMULA(&x, 7000 + 10 * (uint64_t)i);
    ctx_close(&x);
  }
}

/* ======================= planner, groups, re-execution ======================= */

/* measure = 1 (FFTW_MEASURE, rank 0's wisdom broadcast): the same results. */
static void test_measure(void) {
  const int64_t s1[3] = {2, 9, 8}, s2[3] = {5, 6, 4}, s3[3] = {6, 5, 4};
  fcase cases[3] = {mkcase(DIST_FFT_R2C, DIST_F64, 2, 3, s1, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO),
                    mkcase(DIST_FFT_C2C, DIST_F32, 3, 3, s2, DIST_FFT_OUT_SAME, DIST_FFT_NORM_FORWARD),
                    mkcase(DIST_FFT_R2C, DIST_F32, 3, 3, s3, DIST_FFT_OUT_SAME, DIST_FFT_NORM_BACKWARD)};
  for (int i = 0; i < 3; i++) {
    cases[i].measure = 1;
    fctx x;
    if (!CTX_OPEN(&x, &cases[i])) continue;
    uint64_t seed = 8000 + 10 * (uint64_t)i;
    CHECK_FORWARD(&x, seed);
    CHECK_INVERSE(&x, seed + 1);
    CHECK_GRAD_FORMULA(&x, seed + 2);
    ctx_close(&x);
  }
}

/* destroy_input = 1: the same results; the TRANSPOSED inverse may overwrite
 * its input, every other call (and the SAME layout) still preserves it. */
static void test_destroy_input(void) {
  const int64_t s1[4] = {2, 3, 9, 8}, s2[3] = {5, 6, 4}, s3[3] = {7, 6, 5};
  fcase cases[4] = {mkcase(DIST_FFT_R2C, DIST_F32, 2, 4, s1, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD),
                    mkcase(DIST_FFT_R2C, DIST_F64, 2, 4, s1, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO),
                    mkcase(DIST_FFT_C2C, DIST_F64, 3, 3, s2, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD),
                    mkcase(DIST_FFT_R2C, DIST_F64, 3, 3, s3, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO)};
  for (int i = 0; i < 4; i++) {
    cases[i].destroy_input = 1;
    fctx x;
    if (!CTX_OPEN(&x, &cases[i])) continue;
    uint64_t seed = 8500 + 10 * (uint64_t)i;
    CHECK_FORWARD(&x, seed);
    CHECK_INVERSE(&x, seed + 1);
    CHECK_ROUND_TRIP(&x, seed + 2);
    CHECK_GRAD_FORMULA(&x, seed + 3);
    ctx_close(&x);
  }
}

/* Another library of the process sets FFTW's thread count without
 * initialising FFTW's threads (mpi4py-fft does): FFTW 3.3.10 then runs
 * fftw(f)_cleanup(), which freed distmgr's plans (a crash at their next use)
 * unless distmgr initialised the threads first. */
static void test_fftw_threads_interop(void) {
#ifdef HAVE_FFTW_THREADS
  const int64_t s1[3] = {3, 10, 12};
  fcase cases[2] = {mkcase(DIST_FFT_R2C, DIST_F32, 2, 3, s1, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD),
                    mkcase(DIST_FFT_C2C, DIST_F64, 2, 3, s1, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO)};
  for (int i = 0; i < 2; i++) {
    fctx x;
    if (!CTX_OPEN(&x, &cases[i])) continue;
    CHECK_FORWARD(&x, 8800 + 10 * (uint64_t)i);
    /* FFTW's cleanup also forgets all wisdom: unchanged wisdom shows it did
     * not run (freed plans need not crash at once). */
    char *wf = fftwf_export_wisdom_to_string(), *wd = fftw_export_wisdom_to_string();
    fftwf_plan_with_nthreads(2); /* the other library */
    fftw_plan_with_nthreads(2);
    char *wf2 = fftwf_export_wisdom_to_string(), *wd2 = fftw_export_wisdom_to_string();
    CU_ASSERT_TRUE(wf && wf2 && strcmp(wf, wf2) == 0);
    CU_ASSERT_TRUE(wd && wd2 && strcmp(wd, wd2) == 0);
    fftwf_free(wf), fftwf_free(wf2), fftw_free(wd), fftw_free(wd2);
    CHECK_FORWARD(&x, 8801 + 10 * (uint64_t)i);
    CHECK_INVERSE(&x, 8802 + 10 * (uint64_t)i);
    fftwf_plan_with_nthreads(1);
    fftw_plan_with_nthreads(1);
    ctx_close(&x);
  }
#else
  CU_PASS("FFTW's threads libraries are not linked: the hazard cannot arise through distmgr's plans");
#endif
}

/* Many batch entries: the host engine transforms rows in cache-sized chunks
 * (a shorter last chunk, chunk offsets that keep or change the alignment). */
static void test_chunked(void) {
  const int64_t s1[3] = {40, 64, 1024}, s2[3] = {40, 8, 1001};
  fcase cases[3] = {mkcase(DIST_FFT_R2C, DIST_F32, 2, 3, s1, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD),
                    mkcase(DIST_FFT_R2C, DIST_F32, 2, 3, s2, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO),
                    mkcase(DIST_FFT_C2C, DIST_F64, 2, 3, s2, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD)};
  for (int i = 0; i < 3; i++) {
    fctx x;
    if (!CTX_OPEN(&x, &cases[i])) continue;
    uint64_t seed = 8700 + 10 * (uint64_t)i;
    CHECK_FORWARD(&x, seed);
    check_forward_(&x, seed + 1, DT_SIZE[cases[i].prec], "shifted", __LINE__); /* one scalar: a double 4 bytes off is UB */
    CHECK_INVERSE(&x, seed + 2);
    CHECK_GRAD_FORMULA(&x, seed + 3);
    ctx_close(&x);
  }
}

/* Plans on named groups: the even world ranks (a rank list: the others are not
 * members and do not call), consecutive pairs (one copy per pair, each with
 * its own data) and the strided axis of a mesh. */
static void run_on_group(const char *group, fcase c, uint64_t seed) {
  int member = 0;
  grp g;
  if (!CHECK_OK(dist_group_is_member(group, &member), group) || !member) return;
  if (group_info(group, &g)) {
    fprintf(stderr, "[rank %d/%d] no info on group %s\n", R, W, gname(&g));
    assert_at(0, __LINE__, "group_info");
    return;
  }
  c.group = group;
  seed += 1000 * (uint64_t)g.world[0]; /* each copy its own data */
  fctx x;
  if (!CTX_OPEN(&x, &c)) return;
  CHECK_FORWARD(&x, seed);
  CHECK_INVERSE(&x, seed + 1);
  CHECK_ADJOINT(&x, seed + 2);
  ctx_close(&x);
}

static void test_groups(void) {
  const int64_t s1[3] = {2, 7, 6}, s2[3] = {5, 6, 4}, s3[4] = {2, 5, 4, 6}, s4[3] = {3, 7, 5};
  run_on_group("fft_evens", mkcase(DIST_FFT_R2C, DIST_F64, 2, 3, s1, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO),
               9000);
  run_on_group("fft_evens", mkcase(DIST_FFT_C2C, DIST_F32, 3, 3, s2, DIST_FFT_OUT_SAME, DIST_FFT_NORM_BACKWARD), 9010);
  run_on_group("fft_pair", mkcase(DIST_FFT_R2C, DIST_F32, 3, 4, s3, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD),
               9020);
  run_on_group("fft_mesh_a", mkcase(DIST_FFT_C2C, DIST_F64, 2, 3, s4, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_FORWARD),
               9030);
  fcase c = mkcase(DIST_FFT_R2C, DIST_F64, 2, 3, s4, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD);
  c.uneven = 1;
  run_on_group("fft_mesh_a", c, 9040);
}

/* One plan executed many times on new data, then on buffers one scalar off
 * malloc's alignment (FFTW plans made for aligned arrays must not be reused
 * on them blindly), then aligned again. */
static void test_reexecute(void) {
  const int64_t s1[3] = {2, 9, 10}, s2[3] = {5, 4, 6};
  fcase cases[2] = {mkcase(DIST_FFT_R2C, DIST_F32, 2, 3, s1, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD),
                    mkcase(DIST_FFT_C2C, DIST_F64, 3, 3, s2, DIST_FFT_OUT_SAME, DIST_FFT_NORM_ORTHO)};
  for (int i = 0; i < 2; i++) {
    fctx x;
    if (!CTX_OPEN(&x, &cases[i])) continue;
    uint64_t seed = 10000 + 100 * (uint64_t)i;
    size_t one = DT_SIZE[cases[i].prec];
    for (int k = 0; k < 3; k++) check_forward_(&x, seed + (uint64_t)k, 0, "(again)", __LINE__);
    for (int k = 0; k < 2; k++) check_inverse_(&x, seed + 10 + (uint64_t)k, 0, "(again)", __LINE__);
    check_forward_(&x, seed + 20, one, "(misaligned buffers)", __LINE__);
    check_inverse_(&x, seed + 21, one, "(misaligned buffers)", __LINE__);
    check_grad_formula_(&x, seed + 22, one, __LINE__);
    check_forward_(&x, seed + 30, 0, "(aligned after misaligned)", __LINE__);
    CHECK_ROUND_TRIP(&x, seed + 31);
    ctx_close(&x);
  }
}

/* ======================= bad input ======================= */

/* Plant a known last-error message (a local failure), so that an error that
 * comes without a message of its own shows up as this stale one. */
#define STALE "stale-marker-group"
static void plant_stale_message(void) {
  int v;
  dist_group_size(STALE, &v);
}

/* Does the last message contain one of the '|'-separated words (any case)? */
static int msg_has_any(const char *words) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", words);
  for (char *save = NULL, *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
    if (strcasestr(dist_last_error(), w)) return 1;
  return 0;
}

#define ANY_ERROR ((dist_status)1) /* not a status: any error will do */

/* got is `code` (any error for ANY_ERROR) with a fresh message holding one of `words`. */
static void expect_error_(dist_status got, dist_status code, const char *words, const char *what, int line) {
  int code_ok = code == ANY_ERROR ? got != DIST_SUCCESS : got == code;
  if (!code_ok)
    fprintf(stderr, "[rank %d/%d] line %d: %s returned %d (%s: %s), expected %s\n", R, W, line, what, (int)got,
            dist_status_string(got), got ? dist_last_error() : "",
            code == ANY_ERROR ? "an error" : dist_status_string(code));
  assert_at(code_ok, line, what);
  if (got == DIST_SUCCESS) return;
  if (getenv("TEST_FFT_VERBOSE")) /* to read every message */
    fprintf(stderr, "[rank %d/%d] line %d: %s: %s\n", R, W, line, dist_status_string(got), dist_last_error());
  int fresh = strstr(dist_last_error(), STALE) == NULL && dist_last_error()[0];
  if (!fresh) fprintf(stderr, "[rank %d/%d] line %d: %s failed without a message of its own\n", R, W, line, what);
  assert_at(fresh, line, "an error message of its own");
  if (words && !msg_has_any(words))
    fprintf(stderr, "[rank %d/%d] line %d: %s: message '%s' has none of '%s'\n", R, W, line, what, dist_last_error(),
            words);
  assert_at(!words || msg_has_any(words), line, words ? words : "");
}

#define EXPECT_ERROR(call, code, words)                  \
  do {                                                   \
    plant_stale_message();                               \
    dist_status s_ = (call);                             \
    expect_error_(s_, (code), (words), #call, __LINE__); \
  } while (0)

/* After an error every rank must still be in step: a valid collective over
 * the world works and gives the right sum. */
#define EXPECT_IN_STEP() expect_in_step_(__LINE__)
static void expect_in_step_(int line) {
  double v = R + 1.0;
  int64_t one = 1;
  dist_tensor t = dist_tensor_host(&v, DIST_F64, 1, &one);
  int ok = check_ok_(dist_all_reduce(NULL, &t, DIST_SUM), "all_reduce after an error", line);
  assert_at(ok && v == W * (W + 1) / 2.0, line, "ranks in step after an error");
}

static char sentinel_;
#define SENTINEL ((dist_fft_plan *)(void *)&sentinel_)

/* plan_create fails on this rank with `code` and a message holding one of
 * `words`, leaves *plan alone, and the world is in step afterwards. */
#define EXPECT_CREATE_ERROR(code, words, ...) expect_create_error_(__LINE__, (code), (words), __VA_ARGS__)
static void expect_create_error_(int line, dist_status code, const char *words, dist_fft_type type, dist_dtype prec,
                                 dist_memory memory, int ndim, const int64_t *shape, int fft_rank,
                                 const dist_fft_options *opt) {
  dist_fft_plan *p = SENTINEL;
  plant_stale_message();
  dist_status s = dist_fft_plan_create(&p, type, prec, memory, ndim, shape, fft_rank, opt);
  expect_error_(s, code, words, "dist_fft_plan_create", line);
  if (p != SENTINEL) {
    fprintf(stderr, "[rank %d/%d] line %d: plan_create wrote *plan though it returned %d\n", R, W, line, (int)s);
    if (s == DIST_SUCCESS) dist_fft_plan_destroy(p);
  }
  assert_at(p == SENTINEL || s == DIST_SUCCESS, line, "*plan written only on success");
  expect_in_step_(line);
}

/* A valid r2c 2-D problem at up to 4 ranks: n0 8, k1 4. */
static const int64_t ESHAPE[3] = {2, 8, 6};

static void test_errors_create(void) {
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  const dist_fft_type R2C = DIST_FFT_R2C;
  const dist_memory HOST = DIST_MEM_HOST;
  const int64_t shape4[4] = {2, 2, 8, 6}, zero1[3] = {2, 0, 6}, zero2[3] = {2, 8, 0}, zero0[3] = {0, 8, 6};
  const int64_t neg[3] = {2, 8, -6}, big[9] = {1, 1, 1, 1, 1, 1, 1, 8, 6};
  EXPECT_ERROR(dist_fft_plan_create(NULL, R2C, DIST_F32, HOST, 3, ESHAPE, 2, &opt), DIST_ERR_INVALID_ARGUMENT,
               "plan|NULL");
  EXPECT_IN_STEP();
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "shape|NULL", R2C, DIST_F32, HOST, 3, NULL, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "fft_rank", R2C, DIST_F32, HOST, 3, ESHAPE, 1, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "fft_rank", R2C, DIST_F32, HOST, 4, shape4, 4, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "fft_rank", R2C, DIST_F64, HOST, 3, ESHAPE, 0, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "precision", R2C, DIST_C64, HOST, 3, ESHAPE, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "precision", DIST_FFT_C2C, DIST_C128, HOST, 3, ESHAPE, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "precision", R2C, DIST_I32, HOST, 3, ESHAPE, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "precision", R2C, DIST_BF16, HOST, 3, ESHAPE, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "ndim|fft_rank", R2C, DIST_F32, HOST, 2, ESHAPE + 1, 3, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "ndim", R2C, DIST_F32, HOST, 9, big, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "shape|extent", R2C, DIST_F32, HOST, 3, zero1, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "shape|extent", R2C, DIST_F32, HOST, 3, zero2, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "shape|extent", R2C, DIST_F32, HOST, 3, zero0, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "shape|extent", R2C, DIST_F32, HOST, 3, neg, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "type", (dist_fft_type)7, DIST_F32, HOST, 3, ESHAPE, 2, &opt);
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "memory", R2C, DIST_F32, (dist_memory)7, 3, ESHAPE, 2, &opt);
  opt.norm = (dist_fft_norm)9;
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "norm", R2C, DIST_F32, HOST, 3, ESHAPE, 2, &opt);
  opt.norm = DIST_FFT_NORM_BACKWARD, opt.layout = (dist_fft_layout)5;
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "layout", R2C, DIST_F32, HOST, 3, ESHAPE, 2, &opt);
  /* opt NULL is DIST_FFT_OPTIONS_INIT: it works */
  dist_fft_plan *p = NULL;
  if (CHECK_OK(dist_fft_plan_create(&p, R2C, DIST_F32, HOST, 3, ESHAPE, 2, NULL), "plan_create with opt NULL")) {
    CU_ASSERT_PTR_NOT_NULL(p);
    dist_fft_plan_destroy(p);
  }
  EXPECT_IN_STEP();
  /* An exchange whose offsets pass MPI's int counts (about 2^31 + 2^16
   * complex elements a rank): refused at creation on every rank, before any
   * scratch is taken; a rank whose own offsets fit names the one that
   * failed. (Gloo counts in size_t.) */
  const char *engine = NULL;
  if (W > 1 && !dist_coll_backend(NULL, HOST, &engine) && !strcmp(engine, "mpi")) {
    const int64_t huge[2] = {(int64_t)W << 16, ((int64_t)1 << 15) + 1};
    EXPECT_CREATE_ERROR(DIST_ERR_UNSUPPORTED, "mpi engine|on rank 0", DIST_FFT_C2C, DIST_F32, HOST, 2, huge, 2, NULL);
  }
}

static void test_errors_group(void) {
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  opt.group = "no-such-fft-group";
  EXPECT_CREATE_ERROR(DIST_ERR_UNKNOWN_GROUP, "no-such-fft-group", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2,
                      &opt);
  /* "fft_r0" is {0}: rank 0 plans alone, the others are not members */
  opt.group = "fft_r0";
  if (R == 0) {
    fcase c = mkcase(DIST_FFT_R2C, DIST_F64, 2, 3, ESHAPE, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD);
    c.group = "fft_r0";
    fctx x;
    if (CTX_OPEN(&x, &c)) {
      CHECK_FORWARD(&x, 11000);
      ctx_close(&x);
    }
    EXPECT_IN_STEP();
  } else {
    EXPECT_CREATE_ERROR(DIST_ERR_NOT_MEMBER, "member|fft_r0", DIST_FFT_R2C, DIST_F64, DIST_MEM_HOST, 3, ESHAPE, 2,
                        &opt);
  }
}

static void test_errors_sizes(void) {
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  int64_t sizes[MAXW];
  if (W > 1) { /* default split of n0 = W - 1 rows over W ranks */
    const int64_t s[3] = {2, W - 1, 8};
    EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "n0|in_sizes|rank", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, s, 2,
                        &opt);
    /* k1 = W - 1 columns over W ranks, transposed; then the same with explicit
     * out_sizes (some zero), which works */
    const int64_t t[2] = {8, W - 1};
    EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "k1|n1|out_sizes|rank", DIST_FFT_C2C, DIST_F64, DIST_MEM_HOST, 2, t,
                        2, &opt);
    fcase c = mkcase(DIST_FFT_C2C, DIST_F64, 2, 2, t, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD);
    fctx x;
    if (CTX_OPEN(&x, &c)) { /* geom_init passes out_sizes here */
      CHECK_FORWARD(&x, 12000);
      CHECK_INVERSE(&x, 12001);
      ctx_close(&x);
    }
  }
  /* in_sizes adding up to n0 + 1, n0 - 1; a negative entry */
  ref_split(9, W, sizes);
  opt.in_sizes = sizes;
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "in_sizes", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2, &opt);
  for (int r = 0; r < W; r++) sizes[r] = r == 0 ? 7 : 0;
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "in_sizes", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2, &opt);
  if (W > 1) {
    for (int r = 0; r < W; r++) sizes[r] = r == 0 ? 9 : r == 1 ? -1 : 0;
    EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "in_sizes|negative", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3,
                        ESHAPE, 2, &opt);
  }
  /* out_sizes adding up to k1 + 1 (k1 = 4), and a negative entry */
  opt.in_sizes = NULL;
  ref_split(5, W, sizes);
  opt.out_sizes = sizes;
  EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "out_sizes", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2,
                      &opt);
  if (W > 1) {
    for (int r = 0; r < W; r++) sizes[r] = r == 0 ? 5 : r == 1 ? -1 : 0;
    EXPECT_CREATE_ERROR(DIST_ERR_INVALID_ARGUMENT, "out_sizes|negative", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3,
                        ESHAPE, 2, &opt);
  }
}

/* Ranks that disagree (each rank's arguments valid on their own, or one rank's
 * bad): an error on every rank, no hang, and the ranks in step afterwards. */
static void test_errors_mismatch(void) {
  if (W == 1) return;
  const dist_status M = DIST_ERR_MISMATCH;
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  const int64_t other_w[3] = {2, 8, 7}, shape4[4] = {2, 4, 8, 6};
  /* Each message must say what differs (not only that something does). */
  /* rank 1 passes a different W */
  EXPECT_CREATE_ERROR(M, "8,7|shape", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, R == 1 ? other_w : ESHAPE, 2, &opt);
  /* rank W-1 another norm, then rank 1 another layout */
  opt.norm = R == W - 1 ? DIST_FFT_NORM_ORTHO : DIST_FFT_NORM_BACKWARD;
  EXPECT_CREATE_ERROR(M, "norm", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2, &opt);
  opt.norm = DIST_FFT_NORM_BACKWARD;
  opt.layout = R == 1 ? DIST_FFT_OUT_SAME : DIST_FFT_OUT_TRANSPOSED;
  EXPECT_CREATE_ERROR(M, "layout", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2, &opt);
  opt.layout = DIST_FFT_OUT_TRANSPOSED;
  /* rank 0 another type, then another precision */
  EXPECT_CREATE_ERROR(M, "type|r2c|c2c", R == 0 ? DIST_FFT_C2C : DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2,
                      &opt);
  EXPECT_CREATE_ERROR(M, "precision|f64", DIST_FFT_R2C, R == 0 ? DIST_F64 : DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2,
                      &opt);
  /* fft_rank 2 vs 3 on the same 4-D shape */
  EXPECT_CREATE_ERROR(M, "fft_rank", DIST_FFT_C2C, DIST_F32, DIST_MEM_HOST, 4, shape4, R == 0 ? 3 : 2, &opt);
  /* in_sizes that add up on every rank but differ (rank 0 gives itself all rows) */
  int64_t sizes[MAXW];
  ref_split(8, W, sizes);
  if (R == 0)
    for (int r = 0; r < W; r++) sizes[r] = r == 0 ? 8 : 0;
  opt.in_sizes = sizes;
  EXPECT_CREATE_ERROR(M, "in_sizes|size", DIST_FFT_R2C, DIST_F32, DIST_MEM_HOST, 3, ESHAPE, 2, &opt);
  opt.in_sizes = NULL;
  /* one rank's arguments bad on their own (fft_rank 1): every rank fails, the
   * others' message names that rank */
  char bad[32];
  snprintf(bad, sizeof bad, "rank %d", W - 1);
  EXPECT_CREATE_ERROR(R == W - 1 ? DIST_ERR_INVALID_ARGUMENT : ANY_ERROR, R == W - 1 ? "fft_rank" : bad, DIST_FFT_R2C,
                      DIST_F32, DIST_MEM_HOST, 3, ESHAPE, R == W - 1 ? 1 : 2, &opt);
}

/* Tensors that do not fit the plan, NULLs, and the local queries. */
static void test_errors_execute(void) {
  fcase c = mkcase(DIST_FFT_R2C, DIST_F32, 2, 3, ESHAPE, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_BACKWARD);
  fctx x;
  if (!CTX_OPEN(&x, &c)) return;
  const geom *g = &x.g;
  lbuf in = lbuf_new(&g->in, 0), out = lbuf_new(&g->out, 0);
  lbuf_fill(&in, 1, R), lbuf_fill(&out, 2, R);
  const dist_status E = DIST_ERR_INVALID_ARGUMENT;
  /* NULL plan, NULL tensors */
  for (int op = 0; op < 4; op++) {
    const dist_tensor *a = op == OP_FORWARD || op == OP_INVERSE_BACKWARD ? &in.t : &out.t;
    dist_tensor *b = a == &in.t ? &out.t : &in.t;
    EXPECT_ERROR(run_op(NULL, (fft_op)op, a, b), E, "plan|NULL");
    EXPECT_ERROR(run_op(x.plan, (fft_op)op, NULL, b), E, "NULL");
    EXPECT_ERROR(run_op(x.plan, (fft_op)op, a, NULL), E, "NULL");
    EXPECT_IN_STEP();
  }
  /* wrong shapes: one more along the last dim, the split dim, one dim fewer, permuted */
  dist_tensor t = in.t;
  t.shape[2] += 1;
  EXPECT_ERROR(dist_fft_forward(x.plan, &t, &out.t), E, "shape|'in'");
  t = out.t;
  t.shape[g->out.split_dim] += 1;
  EXPECT_ERROR(dist_fft_forward(x.plan, &in.t, &t), E, "shape|'out'");
  t = in.t;
  t.ndim = 2, t.shape[1] *= t.shape[2], t.shape[2] = 0;
  EXPECT_ERROR(dist_fft_forward(x.plan, &t, &out.t), E, "shape|ndim|'in'");
  t = in.t;
  t.shape[1] = in.t.shape[2], t.shape[2] = in.t.shape[1];
  if (t.shape[1] != in.t.shape[1]) EXPECT_ERROR(dist_fft_forward(x.plan, &t, &out.t), E, "shape|'in'");
  t = out.t;
  t.shape[0] -= 1;
  EXPECT_ERROR(dist_fft_inverse(x.plan, &t, &in.t), E, "shape|'in'");
  EXPECT_ERROR(dist_fft_forward_backward(x.plan, &t, &in.t), E, "shape|grad_out");
  t = in.t;
  t.shape[0] += 1;
  EXPECT_ERROR(dist_fft_inverse_backward(x.plan, &t, &out.t), E, "shape|grad_out");
  EXPECT_IN_STEP();
  /* wrong dtypes */
  t = in.t, t.dtype = DIST_F64;
  EXPECT_ERROR(dist_fft_forward(x.plan, &t, &out.t), E, "dtype|f64");
  t = out.t, t.dtype = DIST_C128;
  EXPECT_ERROR(dist_fft_forward(x.plan, &in.t, &t), E, "dtype|c128");
  t = in.t, t.dtype = DIST_C64; /* the shape of the real input, but complex */
  EXPECT_ERROR(dist_fft_forward(x.plan, &t, &out.t), E, "dtype|c64");
  EXPECT_IN_STEP();
  /* wrong memory: host buffers labelled as device memory */
  t = in.t, t.memory = DIST_MEM_CUDA;
  EXPECT_ERROR(dist_fft_forward(x.plan, &t, &out.t), E, "memory|cuda|device|host");
  t = out.t, t.memory = DIST_MEM_CUDA;
  EXPECT_ERROR(dist_fft_forward(x.plan, &in.t, &t), E, "memory|cuda|device|host");
  /* the other direction's tensors */
  EXPECT_ERROR(dist_fft_forward(x.plan, &out.t, &in.t), E, "shape|dtype|'in'");
  EXPECT_ERROR(dist_fft_inverse(x.plan, &in.t, &out.t), E, "shape|dtype|'in'");
  EXPECT_ERROR(dist_fft_forward_backward(x.plan, &in.t, &out.t), E, "shape|dtype|grad_out");
  EXPECT_ERROR(dist_fft_inverse_backward(x.plan, &out.t, &in.t), E, "shape|dtype|grad_out");
  EXPECT_IN_STEP();
  /* the local queries */
  dist_fft_local info;
  EXPECT_ERROR(dist_fft_local_input(NULL, &info), E, "plan|NULL");
  EXPECT_ERROR(dist_fft_local_output(NULL, &info), E, "plan|NULL");
  EXPECT_ERROR(dist_fft_local_input(x.plan, NULL), E, "info|NULL");
  EXPECT_ERROR(dist_fft_local_output(x.plan, NULL), E, "info|NULL");
  CU_ASSERT_EQUAL(dist_fft_workspace_bytes(NULL), 0);
  dist_fft_plan_destroy(NULL);
  /* after all that the plan still works */
  CHECK_FORWARD(&x, 13000);
  CHECK_INVERSE(&x, 13001);
  lbuf_free(&in), lbuf_free(&out);
  ctx_close(&x);
  /* in and out the same buffer (c2c, same layout: same shapes): they must not overlap */
  const int64_t s[2] = {8, 5};
  c = mkcase(DIST_FFT_C2C, DIST_F64, 2, 2, s, DIST_FFT_OUT_SAME, DIST_FFT_NORM_BACKWARD);
  if (!CTX_OPEN(&x, &c)) return;
  lbuf b = lbuf_new(&x.g.in, 0);
  lbuf_fill(&b, 3, R);
  EXPECT_ERROR(dist_fft_forward(x.plan, &b.t, &b.t), E, "overlap|alias|same");
  EXPECT_IN_STEP();
  lbuf_free(&b);
  ctx_close(&x);
}

/* DIST_MEM_CUDA where no rank has a GPU (a build without CUDA, or no device):
 * an error on every rank, with a message. */
static void test_errors_cuda_memory(void) {
  dist_device dev = {DIST_DEVICE_CPU, 0};
  dist_manager_device(&dev);
  if (gred(NULL, dev.kind == DIST_DEVICE_CUDA, DIST_MAX) > 0) return; /* a GPU: test_fft_cuda's business */
  dist_fft_options opt = DIST_FFT_OPTIONS_INIT;
  EXPECT_CREATE_ERROR(ANY_ERROR, NULL, DIST_FFT_R2C, DIST_F32, DIST_MEM_CUDA, 3, ESHAPE, 2, &opt);
  EXPECT_CREATE_ERROR(ANY_ERROR, NULL, DIST_FFT_C2C, DIST_F64, DIST_MEM_CUDA, 3, ESHAPE, 3, &opt);
}

/* One rank's tensor has the wrong shape at execute: every rank returns an
 * error (none waits in the exchange), then the plan still works. Last, as a
 * hang here would stop the program. */
static void test_errors_execute_one_rank(void) {
  if (W == 1) return;
  fcase c = mkcase(DIST_FFT_R2C, DIST_F64, 2, 3, ESHAPE, DIST_FFT_OUT_TRANSPOSED, DIST_FFT_NORM_ORTHO);
  fctx x;
  if (!CTX_OPEN(&x, &c)) return;
  lbuf in = lbuf_new(&x.g.in, 0), out = lbuf_new(&x.g.out, 0);
  lbuf_fill(&in, 4, R);
  char last[32];
  snprintf(last, sizeof last, "rank %d", W - 1);
  dist_tensor t = out.t;
  if (R == W - 1) t.shape[0] += 1;
  EXPECT_ERROR(dist_fft_forward(x.plan, &in.t, &t), R == W - 1 ? DIST_ERR_INVALID_ARGUMENT : ANY_ERROR,
               R == W - 1 ? "shape|'out'" : last);
  EXPECT_IN_STEP();
  t = in.t;
  if (R == 0) t.data = NULL;
  EXPECT_ERROR(dist_fft_inverse_backward(x.plan, &t, &out.t), R == 0 ? DIST_ERR_INVALID_ARGUMENT : ANY_ERROR,
               R == 0 ? "NULL|data" : "rank 0");
  EXPECT_IN_STEP();
  CHECK_FORWARD(&x, 14000);
  lbuf_free(&in), lbuf_free(&out);
  ctx_close(&x);
}

/* One rank's local step (a row or column transform, a pack or unpack copy:
 * with cuFFT a failed launch) fails at execute: the (k+1)-th step of rank
 * W-1, for every k until the call runs out of steps, in each of the four
 * operations and both layouts. That rank must still post the exchanges
 * after it (it returned before and left the others in them), and with
 * DIST_VERIFY=1 every rank returns an error; then the plan still works. */
static void test_errors_local_step(void) {
  static const int64_t shape[3] = {4, 6, 5};
  const dist_fft_layout layouts[2] = {DIST_FFT_OUT_TRANSPOSED, DIST_FFT_OUT_SAME};
  char last[32];
  snprintf(last, sizeof last, "rank %d", W - 1);
  const char *v = getenv("DIST_VERIFY");
  int verify = !(v && !strcmp(v, "0"));
  for (int l = 0; l < 2; l++) {
    fcase c = mkcase(DIST_FFT_R2C, DIST_F64, 2, 3, shape, layouts[l], DIST_FFT_NORM_ORTHO);
    fctx x;
    if (!CTX_OPEN(&x, &c)) continue;
    lbuf in = lbuf_new(&x.g.in, 0), out = lbuf_new(&x.g.out, 0);
    for (int op = 0; op < 4; op++) {
      int k, failed = 1;
      for (k = 0; failed && k < 64; k++) {
        lbuf_fill(&in, 40 + (uint64_t)k, R), lbuf_fill(&out, 80 + (uint64_t)k, R);
        if (R == W - 1) dist__fault_site = "fft_local", dist__fault_skip = k;
        dist_status s = op == 0   ? dist_fft_forward(x.plan, &in.t, &out.t)
                        : op == 1 ? dist_fft_inverse(x.plan, &out.t, &in.t)
                        : op == 2 ? dist_fft_forward_backward(x.plan, &out.t, &in.t)
                                  : dist_fft_inverse_backward(x.plan, &in.t, &out.t);
        failed = gred(NULL, R == W - 1 && !dist__fault_site, DIST_MAX) > 0; /* the site was reached */
        dist__fault_site = NULL, dist__fault_skip = 0;
        if (failed && (R == W - 1 || verify)) {
          expect_error_(s, R == W - 1 ? DIST_ERR_INTERNAL : ANY_ERROR, R == W - 1 ? "fft_local" : last, OPNAME[op],
                        __LINE__);
        } else { /* with DIST_VERIFY=0 only the failing rank knows */
          CU_ASSERT_EQUAL(s, DIST_SUCCESS); /* past the last step: nothing failed */
        }
        EXPECT_IN_STEP();
      }
      CU_ASSERT(k >= 3); /* a distributed transform has at least a transform, a copy and another transform */
    }
    CHECK_FORWARD(&x, 15000 + (uint64_t)l);
    CHECK_INVERSE(&x, 15010 + (uint64_t)l);
    lbuf_free(&in), lbuf_free(&out);
    ctx_close(&x);
  }
}

static CU_TestInfo serial_tests[] = {
    {"r2c 2-D forward/inverse/round trip vs FFTW", test_r2c_2d},
    {"c2c 2-D forward/inverse/round trip vs FFTW", test_c2c_2d},
    {"r2c 3-D forward/inverse/round trip vs FFTW", test_r2c_3d},
    {"c2c 3-D forward/inverse/round trip vs FFTW", test_c2c_3d},
    {"explicit uneven sizes with zeros", test_explicit_sizes},
    CU_TEST_INFO_NULL};

static CU_TestInfo grad_tests[] = {
    {"adjoint identities", test_adjoint},
    {"backwards vs serial formulas", test_grad_formula},
    CU_TEST_INFO_NULL};

static CU_TestInfo plan_tests[] = {
    {"measure", test_measure},
    {"destroy_input", test_destroy_input},
    {"chunked row transforms", test_chunked},
    {"another library sets FFTW's thread count", test_fftw_threads_interop},
    {"groups", test_groups},
    {"re-execution, misaligned buffers", test_reexecute},
    CU_TEST_INFO_NULL};

static CU_TestInfo error_tests[] = {
    {"plan_create arguments", test_errors_create},
    {"groups", test_errors_group},
    {"sizes", test_errors_sizes},
    {"ranks that disagree", test_errors_mismatch},
    {"execute tensors and NULLs", test_errors_execute},
    {"CUDA memory without a GPU", test_errors_cuda_memory},
    {"bad tensor on one rank at execute", test_errors_execute_one_rank},
    {"a local step fails on one rank at execute", test_errors_local_step},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"fft vs serial", NULL, NULL, NULL, NULL, serial_tests},
                                {"fft gradients", NULL, NULL, NULL, NULL, grad_tests},
                                {"fft plans", NULL, NULL, NULL, NULL, plan_tests},
                                {"fft errors", NULL, NULL, NULL, NULL, error_tests},
                                CU_SUITE_INFO_NULL};

/* The groups the tests plan on (creation is collective over the world). */
static int setup(int round) {
  (void)round;
  if (W > MAXW) {
    fprintf(stderr, "test_fft supports at most %d ranks\n", MAXW);
    return 1;
  }
  int evens[MAXW], ne = 0, r0 = 0;
  for (int r = 0; r < W; r += 2) evens[ne++] = r;
  const int mesh[2] = {-1, W % 2 == 0 ? 2 : 1};
  const char *const mesh_names[2] = {"fft_mesh_a", "fft_mesh_b"};
  if (dist_group_create_ranks("fft_evens", ne, evens) != DIST_SUCCESS ||
      dist_group_create_subgroup("fft_pair", W % 2 == 0 ? 2 : 1, NULL) != DIST_SUCCESS ||
      dist_group_create_ranks("fft_r0", 1, &r0) != DIST_SUCCESS ||
      dist_group_create_mesh(NULL, 2, mesh, mesh_names) != DIST_SUCCESS) {
    fprintf(stderr, "[rank %d/%d] creating the test groups: %s\n", R, W, dist_last_error());
    return 1;
  }
  (void)is_int; /* the one helper of coll_values.h this file has no use for */
  return 0;
}

int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_fft", suites, .rank = &R, .size = &W, .setup = setup}); }
