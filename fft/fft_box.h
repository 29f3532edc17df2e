/* The exchange's pack/unpack step as one plain struct, shared by the host
 * code and the CUDA kernel (so it needs no MPI or distmgr headers). */
#ifndef DISTMGR_FFT_BOX_H
#define DISTMGR_FFT_BOX_H

#include <stdint.h>

/* One strided copy of na x nb rows of `row` complex elements (scaled): the
 * pack and unpack of the exchange. Strides in complex elements. */
typedef struct dist__fft_box {
  void *dst;
  const void *src;
  int64_t na, nb, row;
  int64_t dsa, dsb, ssa, ssb;
  double scale;
  /* r2c only: element j of a row has last-dim index k = (col0 + j) % klast.
   * wmul multiplies the columns 0 < k < nlast/2; zero_im clears Im of the
   * DC and Nyquist columns (which a c2r ignores) so every engine agrees. */
  int64_t col0, klast, nlast;
  double wmul;
  int zero_im;
} dist__fft_box;

#ifdef __cplusplus
extern "C" {
#endif
/* CUDA memory: the copy as one kernel on `stream`; returns a cudaError_t. */
int dist__fft_copy_cuda(const dist__fft_box *b, int is_double, void *stream);
/* Before a 3-D c2r of `entries` rows [n1][R] (R = n2/2+1): make the DC and
 * Nyquist planes Hermitian along n1, h[k] := (h[k] + conj(h[-k])) / 2. */
void dist__fft_hermitize_host(void *a, int is_double, int64_t entries, int64_t n1, int64_t R, int64_t n2);
int dist__fft_hermitize_cuda(void *a, int is_double, int64_t entries, int64_t n1, int64_t R, int64_t n2, void *stream);
#ifdef __cplusplus
}
#endif

#endif
