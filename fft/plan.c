/* Plan creation, destruction and the local-size queries. Creation checks the
 * arguments on every rank, agrees on them in one round (always, whatever
 * DIST_VERIFY says: a plan is made once and a disagreement would corrupt
 * every later exchange), then allocates scratch and makes the local plans and
 * agrees again, so a failure on one rank is an error on all. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "fft_internal.h"
#include "mem/memops.h"

#define WHAT "dist_fft_plan_create"
#define CHUNK_BYTES (1 << 20) /* A chunk per row-transform pass: about half a core's L2 */

size_t dist__fft_csize(const dist_fft_plan *p) { return p->prec == DIST_F64 ? 16 : 8; }

int dist__fft_device_enter(const dist_fft_plan *p) {
  int prev = -1;
#ifdef HAVE_CUFFT
  if (p->mem == DIST_MEM_CUDA && p->device >= 0 && cudaGetDevice(&prev) == cudaSuccess && prev != p->device)
    DIST_WARN_CALL(cudaSetDevice(p->device)); /* a wrong device then fails the plan's first CUDA call */
#endif
  return prev;
}

void dist__fft_device_leave(const dist_fft_plan *p, int prev) {
#ifdef HAVE_CUFFT
  if (p->mem == DIST_MEM_CUDA && prev >= 0 && prev != p->device) DIST_WARN_CALL(cudaSetDevice(prev));
#endif
}

/* Sizes per rank along a split dim: given (each >= 0, adding up to n) or
 * from the split rule (n >= ranks). */
static dist_status split(const dist_fft_plan *p, const int64_t *given, int64_t n, const char *name,
                         const char *dim, int64_t *sizes, int64_t *offs) {
  if (given) {
    int64_t sum = 0;
    for (int r = 0; r < p->P; r++) {
      if (given[r] < 0)
        return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": %s[%d] = %lld is negative", name, r, (long long)given[r]);
      if (given[r] > n - sum)
        return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": %s add up to more than %s = %lld (at entry %d)", name,
                           dim, (long long)n, r);
      sizes[r] = given[r];
      sum += given[r];
    }
    if (sum != n)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": %s add up to %lld but %s = %lld", name, (long long)sum, dim,
                         (long long)n);
  } else {
    if (n < p->P)
      return dist__error(DIST_ERR_INVALID_ARGUMENT,
                         WHAT ": %s = %lld is smaller than the %d ranks of group '%s'; pass %s explicitly (zeros "
                         "allowed) to leave ranks empty",
                         dim, (long long)n, p->P, p->group, name);
    DIST_CHECK(dist_compute_split_shapes(n, p->P, sizes));
  }
  for (int r = 0; r < p->P; r++) offs[r] = r ? offs[r - 1] + sizes[r - 1] : 0;
  return DIST_SUCCESS;
}

static dist_status check_args(dist_fft_plan *p, dist_fft_plan **out, dist_fft_type type, dist_dtype prec,
                              dist_memory mem, int ndim, const int64_t *shape, int rank, const dist_fft_options *o) {
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": the plan pointer is NULL");
  if (type != DIST_FFT_R2C && type != DIST_FFT_C2C)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": type %d is neither DIST_FFT_R2C nor DIST_FFT_C2C", (int)type);
  if (prec != DIST_F32 && prec != DIST_F64)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       WHAT ": precision must be DIST_F32 or DIST_F64 (the real type), not %s", dist_dtype_name(prec));
  if (mem != DIST_MEM_HOST && mem != DIST_MEM_CUDA)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": unknown memory space %d", (int)mem);
  if (rank != 2 && rank != 3)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": fft_rank = %d; 2-D and 3-D transforms are supported", rank);
  if (!shape) return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": shape is NULL");
  if (ndim < rank || ndim > DIST_TENSOR_MAX_DIMS)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": ndim = %d; the shape needs %d to %d dims for fft_rank %d",
                       ndim, rank, DIST_TENSOR_MAX_DIMS, rank);
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 1)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": shape[%d] = %lld; every extent must be at least 1", d,
                         (long long)shape[d]);
  if ((unsigned)o->norm > DIST_FFT_NORM_FORWARD)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": unknown norm %d", (int)o->norm);
  if ((unsigned)o->layout > DIST_FFT_OUT_SAME)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": unknown layout %d", (int)o->layout);
  if (mem == DIST_MEM_CUDA) {
#ifndef HAVE_CUFFT
    return dist__error(DIST_ERR_UNSUPPORTED, WHAT ": CUDA memory needs cuFFT, which this build of distmgr lacks");
#else
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
      return dist__error(DIST_ERR_UNSUPPORTED, WHAT ": CUDA memory was asked for but no CUDA device is present");
    if (o->device >= n)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": device %d does not exist (%d devices)", o->device, n);
    if (o->device < 0 && cudaGetDevice(&p->device) != cudaSuccess)
      return dist__error(DIST_ERR_CUDA, WHAT ": cudaGetDevice failed");
#endif
  }
  /* Every count and byte size below derives from these products. */
  int64_t total = 1;
  for (int d = 0; d < ndim; d++)
    if (__builtin_mul_overflow(total, shape[d], &total) || total > (INT64_MAX >> 6))
      return dist__error(DIST_ERR_INVALID_ARGUMENT, WHAT ": the array of shape[0..%d] has too many elements", d);
  p->type = type, p->prec = prec, p->mem = mem, p->ndim = ndim, p->rank = rank;
  p->cplx = prec == DIST_F64 ? DIST_C128 : DIST_C64;
  p->norm = o->norm, p->layout = o->layout, p->measure = o->measure != 0;
  if (mem != DIST_MEM_CUDA || o->device >= 0) p->device = o->device;
  p->destroy_input = o->destroy_input != 0 && o->layout == DIST_FFT_OUT_TRANSPOSED;
  memcpy(p->shape, shape, sizeof *shape * (size_t)ndim);
  p->L = 1;
  for (int d = 0; d < ndim - rank; d++) p->L *= shape[d];
  p->n0 = shape[ndim - rank], p->n1 = shape[ndim - rank + 1], p->n2 = rank == 3 ? shape[ndim - 1] : 1;
  int r2c = type == DIST_FFT_R2C;
  p->k1 = rank == 2 && r2c ? p->n1 / 2 + 1 : p->n1;
  p->R = rank == 3 ? (r2c ? p->n2 / 2 + 1 : p->n2) : 1;
  if (!(p->in_sizes = malloc(sizeof(int64_t) * 4 * (size_t)p->P)) ||
      !(p->send_counts = malloc(sizeof(size_t) * 4 * (size_t)p->P)))
    return dist__error(DIST_ERR_NO_MEMORY, WHAT ": sizes");
  p->in_offs = p->in_sizes + p->P, p->out_sizes = p->in_offs + p->P, p->out_offs = p->out_sizes + p->P;
  p->send_displs = p->send_counts + p->P, p->recv_counts = p->send_displs + p->P;
  p->recv_displs = p->recv_counts + p->P;
  DIST_CHECK(split(p, o->in_sizes, p->n0, "in_sizes", "n0", p->in_sizes, p->in_offs));
  return split(p, o->out_sizes, p->k1, "out_sizes", rank == 2 && r2c ? "n1/2+1" : "n1", p->out_sizes, p->out_offs);
}

/* Counts, scales, scratch and the engine's plans; each step agreed on, as
 * the engine's planning may communicate (FFTW wisdom). */
static dist_status build(dist_fft_plan *p, const dist__call *c) {
  int me = p->me;
  int64_t n0me = p->in_sizes[me], k1me = p->out_sizes[me];
  for (int r = 0; r < p->P; r++) {
    p->send_counts[r] = r == me ? 0 : (size_t)(n0me * p->L * p->out_sizes[r] * p->R);
    p->send_displs[r] = (size_t)(n0me * p->L * p->out_offs[r] * p->R);
    p->recv_counts[r] = r == me ? 0 : (size_t)(p->in_sizes[r] * p->L * k1me * p->R);
    p->recv_displs[r] = (size_t)(p->in_offs[r] * p->L * k1me * p->R);
  }
  double N = (double)p->n0 * (double)p->n1 * (double)p->n2;
  p->scale_fwd = p->norm == DIST_FFT_NORM_BACKWARD ? 1.0 : p->norm == DIST_FFT_NORM_ORTHO ? 1.0 / sqrt(N) : 1.0 / N;
  p->scale_inv = p->norm == DIST_FFT_NORM_FORWARD ? 1.0 : p->norm == DIST_FFT_NORM_ORTHO ? 1.0 / sqrt(N) : 1.0 / N;
  size_t cs = dist__fft_csize(p);
  /* Host: chunks of A that stay in a core's cache, a multiple of m entries
   * so that every chunk of the input keeps its SIMD alignment (64 bytes
   * covers every FFTW build); device: one chunk. */
  int64_t entry = n0me * p->k1 * p->R * (int64_t)cs, lc = entry ? (int64_t)(CHUNK_BYTES / entry) : p->L;
  int64_t in_bytes = n0me * p->n1 * p->n2 * (int64_t)(p->type == DIST_FFT_C2C ? cs : cs / 2), g = 64, m;
  for (int64_t x = in_bytes; x; ) { int64_t t = g % x; g = x; x = t; } /* gcd(64, in_bytes) */
  m = 64 / g;
  p->lc = p->mem == DIST_MEM_CUDA || lc >= p->L ? p->L : lc < m ? m : lc / m * m;
  if (p->lc > p->L || p->lc < 1) p->lc = p->L;
  size_t w_elems = (size_t)(p->L * n0me * p->k1 * p->R);
  p->a_elems = (size_t)(p->lc * n0me * p->k1 * p->R);
  p->t_elems = (size_t)(p->n0 * p->L * k1me * p->R);
  size_t t_alloc = p->destroy_input ? 0 : p->t_elems; /* TRANSPOSED with destroy_input never uses T */
  if (p->layout == DIST_FFT_OUT_SAME) t_alloc = p->t_elems;
  p->workspace = cs * (p->a_elems + w_elems + t_alloc);
  dist_status s = DIST_SUCCESS;
  /* The engine's count limit (MPI's int): refuse here, agreed, rather than
   * in the middle of a transform. */
  size_t limit = c->be->max_count ? c->be->max_count() : SIZE_MAX;
  for (int r = 0; r < p->P && p->P > 1; r++)
    if (p->send_displs[r] + p->send_counts[r] > limit || p->recv_displs[r] + p->recv_counts[r] > limit) {
      s = dist__error(DIST_ERR_UNSUPPORTED,
                      WHAT ": the exchange on this rank spans more than %zu complex elements, beyond the %s engine's "
                      "counts; use more ranks",
                      limit, c->be->name);
      break;
    }
#ifdef HAVE_CUFFT
  p->eng = p->mem == DIST_MEM_CUDA ? &dist__fft_cufft : &dist__fft_fftw;
#else
  p->eng = &dist__fft_fftw;
#endif
  if (!s) s = p->eng->alloc(p, cs * p->a_elems, &p->A);
  if (!s) s = p->eng->alloc(p, cs * w_elems, &p->W);
  if (!s) s = p->eng->alloc(p, cs * t_alloc, &p->T);
  if (p->P > 1) s = dist__agree_group(c->g, s, WHAT);
  if (!s) s = p->eng->create(p, c->g);
  if (p->P > 1) s = dist__agree_group(c->g, s, WHAT);
  return s;
}

/* A plan's signature in a mismatch message: "r2c f64[2,8,6] fft_rank 2 layout same norm ortho". */
static void describe(const dist__sig *s, char *buf, size_t n) {
  static const char *const layouts[] = {"transposed", "same"}, *const norms[] = {"backward", "ortho", "forward"};
  int k = snprintf(buf, n, "%s %s[", s->op == DIST_FFT_C2C ? "c2c" : "r2c", dist_dtype_name((dist_dtype)s->dtype));
  for (int d = 0; d < s->ndim && d < DIST_TENSOR_MAX_DIMS && k > 0 && (size_t)k < n; d++)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? "," : "", (long long)s->shape[d]);
  if (k > 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, "] fft_rank %d layout %s norm %s measure %d memory %s", s->dim,
             layouts[s->root & 1], norms[(s->aux / 2) % 3], s->aux & 1, s->memory ? "cuda" : "host");
}

static const dist_fft_options fft_defaults = DIST_FFT_OPTIONS_INIT;
static const dist__options_kind fft_options_kind =
    DIST__OPTIONS_KIND(dist_fft_options, "DIST_FFT_OPTIONS_INIT", group, &fft_defaults);

dist_status dist_fft_plan_create(dist_fft_plan **plan, dist_fft_type type, dist_dtype precision, dist_memory memory,
                                 int ndim, const int64_t *shape, int fft_rank, const dist_fft_options *opt) {
  dist_fft_options full;
  /* The group is named inside the struct: an unreadable one fails here, before any collective. */
  DIST_CHECK(dist__options_copy(&fft_options_kind, opt, &full, WHAT));
  const dist_fft_options *o = &full;
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, WHAT, o->group));
  dist_fft_plan *p = calloc(1, sizeof *p);
  if (!p) return dist__call_verify_always(&c, dist__error(DIST_ERR_NO_MEMORY, WHAT ": plan"));
  snprintf(p->group, sizeof p->group, "%s", c.g->name);
  p->P = c.g->size, p->me = c.g->rank;
  dist_status s = check_args(p, plan, type, precision, memory, ndim, shape, fft_rank, o);
  c.describe = describe;
  if (!s) {
    c.sig.dtype = precision, c.sig.memory = memory, c.sig.ndim = ndim, c.sig.dim = fft_rank, c.sig.op = type;
    c.sig.root = o->layout;
    c.sig.aux = (int32_t)o->norm * 2 + (o->measure != 0);
    memcpy(c.sig.shape, shape, sizeof *shape * (size_t)ndim);
    dist__sig_sizes(&c, p->in_sizes);
    dist__sig_sizes(&c, p->out_sizes);
    p->sizes_hash = c.sig.sizes;
  }
  if (!s) s = dist__call_backend(&c, memory);
  s = dist__call_verify_always(&c, s);
  int dev = dist__fft_device_enter(p);
  if (!s) s = build(p, &c);
  dist__fft_device_leave(p, dev);
  if (s) {
    dist_fft_plan_destroy(p);
    return s;
  }
  *plan = p;
  return DIST_SUCCESS;
}

void dist_fft_plan_destroy(dist_fft_plan *p) {
  if (!p) return;
  int dev = dist__fft_device_enter(p);
  if (p->eng) {
    p->eng->destroy(p);
    p->eng->free(p, p->A);
    p->eng->free(p, p->W);
    p->eng->free(p, p->T);
  }
  dist__fft_device_leave(p, dev);
  free(p->in_sizes);
  free(p->send_counts);
  free(p);
}

static dist_status check_plan(const dist_fft_plan *p, const void *info, const char *what) {
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the plan is NULL", what);
  if (!info) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the output pointer is NULL", what);
  return DIST_SUCCESS;
}

/* The input layout [batch..., n0_me, n1 (, n2)]. */
dist_status dist_fft_local_input(const dist_fft_plan *p, dist_fft_local *info) {
  DIST_CHECK(check_plan(p, info, "dist_fft_local_input"));
  dist_fft_local l = {0};
  l.dtype = p->type == DIST_FFT_R2C ? p->prec : p->cplx;
  l.ndim = p->ndim;
  l.split_dim = p->ndim - p->rank;
  memcpy(l.global, p->shape, sizeof l.global);
  memcpy(l.shape, p->shape, sizeof l.shape);
  l.shape[l.split_dim] = p->in_sizes[p->me];
  l.offset[l.split_dim] = p->in_offs[p->me];
  l.numel = 1;
  for (int d = 0; d < l.ndim; d++) l.numel *= l.shape[d];
  l.nbytes = (size_t)l.numel * dist_dtype_size(l.dtype);
  *info = l;
  return DIST_SUCCESS;
}

/* TRANSPOSED [n0, batch..., k1_me (, R)]; SAME [batch..., n0_me, k1 (, R)]. */
dist_status dist_fft_local_output(const dist_fft_plan *p, dist_fft_local *info) {
  DIST_CHECK(check_plan(p, info, "dist_fft_local_output"));
  dist_fft_local l = {0};
  int nb = p->ndim - p->rank;
  l.dtype = p->cplx;
  l.ndim = p->ndim;
  memcpy(l.global, p->shape, sizeof l.global);
  l.global[nb + 1] = p->k1;
  if (p->rank == 3) l.global[nb + 2] = p->R;
  if (p->layout == DIST_FFT_OUT_SAME) {
    memcpy(l.shape, l.global, sizeof l.shape);
    l.split_dim = nb;
    l.shape[nb] = p->in_sizes[p->me];
    l.offset[nb] = p->in_offs[p->me];
  } else {
    int64_t g[DIST_TENSOR_MAX_DIMS] = {0};
    g[0] = p->n0;
    for (int d = 0; d < nb; d++) g[d + 1] = p->shape[d];
    for (int d = nb + 1; d < p->ndim; d++) g[d] = l.global[d];
    memcpy(l.global, g, sizeof g);
    memcpy(l.shape, g, sizeof g);
    l.split_dim = nb + 1;
    l.shape[nb + 1] = p->out_sizes[p->me];
    l.offset[nb + 1] = p->out_offs[p->me];
  }
  l.numel = 1;
  for (int d = 0; d < l.ndim; d++) l.numel *= l.shape[d];
  l.nbytes = (size_t)l.numel * dist_dtype_size(l.dtype);
  *info = l;
  return DIST_SUCCESS;
}

/* Every rank's extent and offset along a layout's split dim. */
static dist_status split_of(const dist_fft_plan *p, const int64_t *sz, const int64_t *off, int n, int64_t *sizes,
                            int64_t *offsets, const char *what) {
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the plan is NULL", what);
  if (!sizes && !offsets) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: sizes and offsets are both NULL", what);
  if (n < p->P)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: room for %d entries, but the plan's group has %d ranks", what, n,
                       p->P);
  for (int r = 0; r < p->P; r++) {
    if (sizes) sizes[r] = sz[r];
    if (offsets) offsets[r] = off[r];
  }
  return DIST_SUCCESS;
}

dist_status dist_fft_input_split(const dist_fft_plan *p, int n, int64_t *sizes, int64_t *offsets) {
  return split_of(p, p ? p->in_sizes : NULL, p ? p->in_offs : NULL, n, sizes, offsets, "dist_fft_input_split");
}

dist_status dist_fft_output_split(const dist_fft_plan *p, int n, int64_t *sizes, int64_t *offsets) {
  if (p && p->layout == DIST_FFT_OUT_SAME) /* the output is split as the input */
    return split_of(p, p->in_sizes, p->in_offs, n, sizes, offsets, "dist_fft_output_split");
  return split_of(p, p ? p->out_sizes : NULL, p ? p->out_offs : NULL, n, sizes, offsets, "dist_fft_output_split");
}

int dist_fft_plan_ranks(const dist_fft_plan *p) { return p ? p->P : 0; }

size_t dist_fft_workspace_bytes(const dist_fft_plan *p) { return p ? p->workspace : 0; }
