/* The distributed FFT's plan object and the two engines it drives: the
 * exchange (exchange.c, through the collectives layer's backends) and the
 * local transforms (FFTW on host memory, cuFFT on CUDA memory).
 *
 * Layouts, with L the product of the batch dims and, per rank r,
 * n0_r = in_sizes[r], k1_r = out_sizes[r]:
 *   input  [L, n0_me, n1 (, n2)]   the user's, split along n0
 *   A      [L, n0_me, k1, R]       after the local transform of each row
 *   T      [n0, L, k1_me, R]       after the exchange, split along k1
 * where k1 = n1/2+1 (2-D r2c) or n1, R = n2/2+1 (3-D r2c), n2 (3-D c2c) or 1.
 * Exchange X (A -> T) packs rank r's box of A contiguously as [n0_me, L,
 * k1_r*R]; on arrival those boxes are already T's rows, so nothing is
 * unpacked. Exchange Y (T -> A) sends T's rows as they are and unpacks. */
#ifndef DISTMGR_FFT_INTERNAL_H
#define DISTMGR_FFT_INTERNAL_H

#include "distmgr/fft.h"
#include "core/fault.h"
#include "manager/coll_call.h"

#include "fft_box.h"

struct dist_fft_plan;

/* Local transforms and memory of one memory space. `rows` transforms the
 * rows of nl batch entries of the input layout into A (inverse: A into the
 * input layout; it may destroy A); `cols` transforms T along n0 in place. */
/* cuFFT error codes as distmgr errors (DIST_ERR_CUDA); for core/check.h. */
dist_status dist__cufft_error(int code, const char *call);

typedef struct dist__fft_engine {
  const char *name;
  dist_status (*create)(struct dist_fft_plan *p, dist__group *g); /* collective over g */
  void (*destroy)(struct dist_fft_plan *p);
  /* Before a pipeline's exchange: make whatever it needs for these arrays,
   * so a failure is agreed on in the call's verification round (DIST_VERIFY=1)
   * instead of stranding the peers. */
  dist_status (*prepare)(struct dist_fft_plan *p, int inverse, const void *in, void *out);
  dist_status (*rows)(struct dist_fft_plan *p, int inverse, const void *in, void *out, int64_t nl);
  dist_status (*cols)(struct dist_fft_plan *p, int inverse, const void *in, void *out);
  dist_status (*copy)(struct dist_fft_plan *p, const dist__fft_box *b);
  dist_status (*alloc)(struct dist_fft_plan *p, size_t bytes, void **ptr);
  void (*free)(struct dist_fft_plan *p, void *ptr);
  /* One-rank plans that set p->whole: the whole forward or inverse as one
   * library transform, no exchange (scale applied; `in` preserved). NULL if
   * the engine has none. */
  dist_status (*whole)(struct dist_fft_plan *p, int inverse, const void *in, void *out, double scale);
} dist__fft_engine;

extern const dist__fft_engine dist__fft_fftw;
#ifdef HAVE_CUFFT
extern const dist__fft_engine dist__fft_cufft;
#endif

struct dist_fft_plan {
  char group[DIST_GROUP_NAME_MAX + 1];
  dist_fft_type type;
  dist_dtype prec;  /* DIST_F32 / DIST_F64 */
  dist_dtype cplx;  /* DIST_C64 / DIST_C128 */
  dist_memory mem;
  int device, measure, destroy_input;
  uint64_t sizes_hash; /* of in_sizes and out_sizes: part of every call's signature */
  dist_fft_norm norm;
  dist_fft_layout layout;
  int ndim, rank; /* rank: 2 or 3 transformed dims */
  int64_t shape[DIST_TENSOR_MAX_DIMS];
  int P, me;
  int64_t L, n0, n1, n2, k1, R;
  int64_t lc; /* batch entries per row-transform chunk (A holds one chunk) */
  int64_t *in_sizes, *in_offs, *out_sizes, *out_offs; /* P entries each */
  /* Exchange X in complex elements; Y uses them the other way round. The
   * rank's own piece is copied directly, so its counts are 0. */
  size_t *send_counts, *send_displs, *recv_counts, *recv_displs;
  void *A, *T, *W; /* scratch: one chunk of A, T (SAME / inverse only), send/recv buffer */
  size_t a_elems, t_elems, workspace;
  double scale_fwd, scale_inv;
  const dist__fft_engine *eng;
  void *eng_state;
  int whole; /* the engine made one-rank whole-transform plans (eng->whole) */
};

size_t dist__fft_csize(const struct dist_fft_plan *p); /* bytes of one complex element */
/* CUDA plans: make the plan's device current (returns the previous one), and back. */
int dist__fft_device_enter(const struct dist_fft_plan *p);
void dist__fft_device_leave(const struct dist_fft_plan *p, int prev);

/* The exchanges, `t` in the T layout. X: from `a` in the A layout, or
 * (a NULL) from the row transforms of `in`, one chunk of lc batch entries at
 * a time through the scratch A. Y: into `a`, or (a NULL) through A chunks and
 * the inverse row transforms into `out`. Collective.
 * A failed local step (a transform or copy: this rank's alone) goes into
 * *local, and later local steps are skipped, but the all-to-all is posted
 * anyway: returning would leave the other ranks waiting in it. The return
 * value is the all-to-all's own failure. */
/* One local step of a pipeline, run only while none has failed; its failure
 * goes into *local. Tests make the (dist__fault_skip + 1)-th step fail
 * (fault site "fft_local"). */
#define DIST__FFT_STEP(local, call)                                                                             \
  do {                                                                                                          \
    if (!*(local))                                                                                              \
      *(local) = dist__fault("fft_local") ? dist__error(DIST_ERR_INTERNAL, "injected fault (fft_local)") : (call); \
  } while (0)

dist_status dist__fft_exchange_x(struct dist_fft_plan *p, dist__call *c, const void *in, const void *a, void *t,
                                 double scale, double wmul, dist_status *local);
dist_status dist__fft_exchange_y(struct dist_fft_plan *p, dist__call *c, const void *t, void *a, void *out,
                                 double scale, double wmul, dist_status *local);

/* Host implementation of a box copy (engines for host memory use it). */
void dist__fft_copy_host(const dist__fft_box *b, int is_double);


#endif
