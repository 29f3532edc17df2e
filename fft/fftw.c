/* The host engine: FFTW for the local transforms (both precisions from one
 * template, fftw_impl.h), host row copies for the exchange, FFTW's allocator
 * for scratch (SIMD alignment). With FFTW_MEASURE rank 0 plans first and its
 * wisdom is broadcast, so the other ranks reuse its measurements. */
#include <fftw3.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fft_internal.h"

/* The n0 transforms run in place, on T or on the caller's output. */
enum { ROWS_FWD, ROWS_INV, COLS_FWD, COLS_INV, ROLES };
static const char *const role_name[ROLES] = {"row forward", "row inverse", "n0 forward", "n0 inverse"};
#define CACHE 8
typedef struct fftw_entry {
  int ain, aout;
  int64_t nl; /* batch entries (row roles; 0 for the n0 roles) */
  void *plan;
} fftw_entry;
typedef struct fftw_state {
  fftw_entry cache[ROLES][CACHE];
  int n[ROLES];
} fftw_state;

#define X(name) fftw_##name
#define REAL double
#define TAG _d
#include "fftw_impl.h"
#undef X
#undef REAL
#undef TAG
#define X(name) fftwf_##name
#define REAL float
#define TAG _f
#include "fftw_impl.h"
#undef X
#undef REAL
#undef TAG

static int is_d(const dist_fft_plan *p) { return p->prec == DIST_F64; }

/* Rank 0's wisdom to every rank of the group (length -1: rank 0 failed),
 * through the host backend's table. */
static dist_status share_wisdom(dist_fft_plan *p, dist__group *g, dist_status mine) {
  const dist__backend *be = dist__backend_host(g);
  char *w = NULL;
  int64_t len = -1;
  int32_t have = 1, all = 0;
  if (p->me == 0 && !mine) {
    w = is_d(p) ? export__d() : export__f();
    len = w && strlen(w) < INT_MAX ? (int64_t)strlen(w) : -1;
  }
  dist_status s = be->broadcast(g, &len, 1, DIST_I64, 0);
  if (!s && len >= 0 && p->me != 0) have = (w = malloc((size_t)len + 1)) != NULL;
  if (!s && len >= 0) s = be->all_reduce(g, &have, &all, 1, DIST_I32, DIST_MIN, NULL);
  if (!s && len >= 0 && all) s = be->broadcast(g, w, (size_t)len + 1, DIST_U8, 0);
  if (!s && len >= 0 && all && p->me != 0) (void)(is_d(p) ? import__d(w) : import__f(w));
  if (p->me == 0) fftw_free(w);
  else free(w);
  return s; /* no wisdom is not an error: the ranks measure for themselves */
}

#ifdef HAVE_FFTW_THREADS
/* Another library in the process (mpi4py-fft does) may call
 * fftw(f)_plan_with_nthreads without fftw(f)_init_threads; FFTW 3.3.10 then
 * initialises its threads after fftw(f)_cleanup(), which frees every plan,
 * distmgr's too (its next execute or destroy crashes). Initialised before
 * distmgr's first plan, that path does nothing. distmgr's plans follow the
 * process-wide thread count, 1 unless the application changes it. */
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static void init_threads(void) {
  fftw_init_threads();
  fftwf_init_threads();
}
#endif

static dist_status create(dist_fft_plan *p, dist__group *g) {
#ifdef HAVE_FFTW_THREADS
  pthread_once(&threads_once, init_threads);
#endif
  if (!p->measure || p->P == 1) return is_d(p) ? create__d(p) : create__f(p);
  dist_status s = DIST_SUCCESS;
  if (p->me == 0) s = is_d(p) ? create__d(p) : create__f(p);
  dist_status w = share_wisdom(p, g, s);
  if (p->me != 0 && !w) s = is_d(p) ? create__d(p) : create__f(p);
  return s ? s : w;
}

static void destroy(dist_fft_plan *p) { is_d(p) ? destroy__d(p) : destroy__f(p); }

static dist_status rows(dist_fft_plan *p, int inverse, const void *in, void *out, int64_t nl) {
  int r = inverse ? ROWS_INV : ROWS_FWD;
  if (inverse && p->type == DIST_FFT_R2C && p->rank == 3) /* the same result as cuFFT's, by definition */
    dist__fft_hermitize_host((void *)in, is_d(p), nl * p->in_sizes[p->me], p->n1, p->R, p->n2);
  return is_d(p) ? run__d(p, r, nl, in, out) : run__f(p, r, nl, in, out);
}

static dist_status cols(dist_fft_plan *p, int inverse, const void *in, void *out) {
  int r = inverse ? COLS_INV : COLS_FWD;
  if (in != out) return dist__error(DIST_ERR_INTERNAL, "dist_fft: n0 transform out of place");
  return is_d(p) ? run__d(p, r, 0, in, out) : run__f(p, r, 0, in, out);
}

/* Make (before the exchange starts) the plans a pipeline will run on these arrays. */
static dist_status prepare(dist_fft_plan *p, int inverse, const void *in, void *out) {
  dist_status (*get)(dist_fft_plan *, int, const void *, void *) = is_d(p) ? prepare__d : prepare__f;
  if (!inverse) {
    DIST_CHECK(get(p, ROWS_FWD, in, p->A));
    return p->layout == DIST_FFT_OUT_SAME ? DIST_SUCCESS : get(p, COLS_FWD, out, out);
  }
  if (p->destroy_input) DIST_CHECK(get(p, COLS_INV, in, (void *)in));
  return get(p, ROWS_INV, p->A, out);
}

static dist_status copy(dist_fft_plan *p, const dist__fft_box *b) {
  dist__fft_copy_host(b, is_d(p));
  return DIST_SUCCESS;
}

static dist_status alloc(dist_fft_plan *p, size_t bytes, void **ptr) {
  *ptr = fftw_malloc(bytes ? bytes : 1);
  return *ptr ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "dist_fft_plan_create: %zu bytes of scratch", bytes);
}

static void release(dist_fft_plan *p, void *ptr) { fftw_free(ptr); }

const dist__fft_engine dist__fft_fftw = {"fftw", create, destroy, prepare, rows, cols, copy, alloc, release, NULL};
