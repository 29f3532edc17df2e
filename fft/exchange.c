/* The two exchanges of a distributed FFT (see fft_internal.h for the
 * layouts): pack or unpack with the plan's engine, move the bytes with the
 * group's backend all-to-all-v. The rank's own piece never goes through the
 * backend: it is copied straight between A and T. Normalisation and the
 * r2c column weights ride on these copies, which touch every element anyway. */
#include "fft_internal.h"

/* The box of rank r's columns in the A layout, as rows [n0_me, L] of k1_r*R. */
static dist__fft_box a_box(const struct dist_fft_plan *p, int r, double scale, double wmul) {
  dist__fft_box b = {0};
  int64_t n0 = p->in_sizes[p->me];
  b.na = n0;
  b.nb = p->L;
  b.row = p->out_sizes[r] * p->R;
  b.scale = scale;
  b.col0 = p->out_offs[r] * p->R;
  b.klast = p->rank == 2 ? p->k1 : p->R;
  b.nlast = p->rank == 2 ? p->n1 : p->n2;
  b.wmul = p->type == DIST_FFT_R2C ? wmul : 1.0;
  return b;
}

/* Where rank r's piece lives on the T side (its own piece: inside t). */
static void *t_piece(const struct dist_fft_plan *p, int r, const void *t) {
  size_t cs = dist__fft_csize(p);
  if (r == p->me)
    return (char *)t + cs * (size_t)(p->in_offs[p->me] * p->L * p->out_sizes[p->me] * p->R);
  return (char *)p->W + cs * p->send_displs[r];
}

/* Copy batch entries l0 .. l0+nl-1 between the A layout (`a` holds entry
 * l0 first) and the pieces of the T side. */
static dist_status copy_pieces(struct dist_fft_plan *p, int to_t, const void *a, const void *t, double scale,
                               double wmul, int before_c2r, int64_t l0, int64_t nl) {
  size_t cs = dist__fft_csize(p);
  int64_t a_row = p->k1 * p->R, a_plane = p->in_sizes[p->me] * a_row;
  for (int r = 0; r < p->P; r++) {
    dist__fft_box b = a_box(p, r, scale, wmul);
    b.nb = nl;
    if (!b.na || !b.nb || !b.row) continue;
    char *ap = (char *)a + cs * (size_t)b.col0;
    /* The piece is contiguous [n0_me, L, row]. */
    int64_t pa = p->L * b.row, pb = b.row;
    char *tp = (char *)t_piece(p, r, t) + cs * (size_t)(l0 * pb);
    if (to_t) {
      b.src = ap, b.ssa = a_row, b.ssb = a_plane;
      b.dst = tp, b.dsa = pa, b.dsb = pb;
    } else {
      b.src = tp, b.ssa = pa, b.ssb = pb;
      b.dst = ap, b.dsa = a_row, b.dsb = a_plane;
      /* A 1-D c2r ignores Im at DC and Nyquist; clearing it makes every engine agree. */
      b.zero_im = before_c2r && p->type == DIST_FFT_R2C && p->rank == 2;
    }
    DIST_CHECK(p->eng->copy(p, &b));
  }
  return DIST_SUCCESS;
}

/* Bytes of one batch entry of the input layout. */
static size_t in_entry(const struct dist_fft_plan *p) {
  size_t es = p->type == DIST_FFT_C2C ? dist__fft_csize(p) : dist__fft_csize(p) / 2;
  return es * (size_t)(p->in_sizes[p->me] * p->n1 * p->n2);
}

dist_status dist__fft_exchange_x(struct dist_fft_plan *p, dist__call *c, const void *in, const void *a, void *t,
                                 double scale, double wmul, dist_status *local) {
  if (!in) {
    DIST__FFT_STEP(local, copy_pieces(p, 1, a, t, scale, wmul, 0, 0, p->L));
  } else { /* transform a chunk into A while it fits in cache, then pack it */
    for (int64_t l0 = 0; l0 < p->L && !*local; l0 += p->lc) {
      int64_t nl = p->L - l0 < p->lc ? p->L - l0 : p->lc;
      DIST__FFT_STEP(local, p->eng->rows(p, 0, (const char *)in + in_entry(p) * (size_t)l0, p->A, nl));
      DIST__FFT_STEP(local, copy_pieces(p, 1, p->A, t, scale, wmul, 0, l0, nl));
    }
  }
  if (p->P == 1) return DIST_SUCCESS;
  return c->be->all_to_all_v(c->g, p->W, p->send_counts, p->send_displs, t, p->recv_counts, p->recv_displs, p->cplx,
                             NULL);
}

dist_status dist__fft_exchange_y(struct dist_fft_plan *p, dist__call *c, const void *t, void *a, void *out,
                                 double scale, double wmul, dist_status *local) {
  if (p->P > 1)
    DIST_CHECK(c->be->all_to_all_v(c->g, t, p->recv_counts, p->recv_displs, p->W, p->send_counts, p->send_displs,
                                   p->cplx, NULL));
  if (!out) {
    DIST__FFT_STEP(local, copy_pieces(p, 0, a, t, scale, wmul, 0, 0, p->L));
    return DIST_SUCCESS;
  }
  for (int64_t l0 = 0; l0 < p->L && !*local; l0 += p->lc) { /* unpack a chunk into A, transform it from cache */
    int64_t nl = p->L - l0 < p->lc ? p->L - l0 : p->lc;
    DIST__FFT_STEP(local, copy_pieces(p, 0, p->A, t, scale, wmul, 1, l0, nl));
    DIST__FFT_STEP(local, p->eng->rows(p, 1, p->A, (char *)out + in_entry(p) * (size_t)l0, nl));
  }
  return DIST_SUCCESS;
}
