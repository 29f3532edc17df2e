/* Distributed FFT over a named process group: 2-D and 3-D, real-to-complex
 * and complex-to-complex, float and double, host memory (FFTW) and CUDA
 * memory (cuFFT, exchanged through NCCL).
 *
 * A plan transforms the last `fft_rank` dimensions n0, n1 (, n2) of a global
 * array [batch..., n0, n1 (, n2)]; every batch entry (e.g. all B*C channels
 * of an AFNO [B, C, H, W] array) is transformed by the same plan call.
 *
 * Distribution (slab decomposition):
 *  - input: split along n0 across the group's ranks, any sizes (uneven is
 *    normal): rank r holds [batch..., in_sizes[r], n1 (, n2)].
 *  - forward output, DIST_FFT_OUT_TRANSPOSED (the default): one exchange.
 *    The array is split along the first dimension of the local transform's
 *    output, k1 (n1/2+1 frequencies of W for a 2-D r2c, n1 otherwise), and
 *    n0 is moved in front of the batch dimensions, so the pieces received from
 *    each rank are contiguous: rank r holds [n0, batch..., out_sizes[r] (, k2)].
 *  - forward output, DIST_FFT_OUT_SAME: the input's layout and split, two
 *    exchanges: rank r holds [batch..., in_sizes[r], k1 (, k2)].
 *  The inverse takes the forward's output layout and returns the input's.
 *  Here k1 = n1/2+1 (2-D r2c) or n1; k2 = n2/2+1 (3-D r2c) or n2.
 *
 * Order of work (forward): local FFT of every row (r2c along the last
 * dimension first, so the exchange moves half the bytes), exchange through
 * the collectives layer's all-to-all-v, FFT along n0. The inverse runs the
 * same steps backwards. Normalisation is applied while packing the exchange,
 * so it costs no extra pass over the data.
 *
 * Dtypes: precision DIST_F32 (real f32 / complex c64) or DIST_F64 (f64 /
 * c128). An r2c plan's forward takes real input and gives complex output;
 * its inverse is the c2r transform. A c2c plan takes and gives complex.
 * The transforms are out-of-place; `in` is not modified unless the plan was
 * made with destroy_input. */
#ifndef DISTMGR_FFT_H
#define DISTMGR_FFT_H

#include "distmgr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dist_fft_type {
  DIST_FFT_R2C = 0, /* forward real -> complex (half spectrum along the last dim), inverse c2r */
  DIST_FFT_C2C = 1
} dist_fft_type;

/* As numpy.fft / torch.fft: with N the product of the transformed sizes,
 * BACKWARD: forward unscaled, inverse 1/N; ORTHO: both 1/sqrt(N);
 * FORWARD: forward 1/N, inverse unscaled. */
typedef enum dist_fft_norm { DIST_FFT_NORM_BACKWARD = 0, DIST_FFT_NORM_ORTHO, DIST_FFT_NORM_FORWARD } dist_fft_norm;

typedef enum dist_fft_layout { DIST_FFT_OUT_TRANSPOSED = 0, DIST_FFT_OUT_SAME = 1 } dist_fft_layout;

/* Initialize with DIST_FFT_OPTIONS_INIT, then set the fields to change
 * (struct_size: see README, "Option structs"). */
typedef struct dist_fft_options {
  size_t struct_size;       /* sizeof(dist_fft_options), set by DIST_FFT_OPTIONS_INIT */
  const char *group;        /* named group; NULL means "world" */
  dist_fft_norm norm;
  dist_fft_layout layout;
  int measure;              /* 0: FFTW_ESTIMATE; 1: FFTW_MEASURE, planned on rank 0 first and its wisdom
                               broadcast to the group (host plans; cuFFT has no planner choice) */
  const int64_t *in_sizes;  /* n0 rows per rank (group size entries, zeros allowed); NULL: the rule of
                               dist_compute_split_shapes, which needs n0 >= ranks */
  const int64_t *out_sizes; /* k1 entries per rank: the split of the transposed layout (the output of
                               TRANSPOSED plans, the middle step of SAME plans); NULL: the rule of
                               dist_compute_split_shapes, which needs k1 >= ranks */
  int device;               /* CUDA plans: the device of the tensors; -1: the current device */
  int destroy_input;        /* 1: with the TRANSPOSED layout, dist_fft_inverse and dist_fft_forward_backward
                               transform their input in place and leave garbage there, saving one copy (as
                               FFTW_DESTROY_INPUT); 0: every input is preserved */
} dist_fft_options;

#define DIST_FFT_OPTIONS_INIT                 \
  {                                           \
    .struct_size = sizeof(dist_fft_options),  \
    .group = NULL,                            \
    .norm = DIST_FFT_NORM_BACKWARD,           \
    .layout = DIST_FFT_OUT_TRANSPOSED,        \
    .measure = 0,                             \
    .in_sizes = NULL,                         \
    .out_sizes = NULL,                        \
    .device = -1,                             \
    .destroy_input = 0,                       \
  }

typedef struct dist_fft_plan dist_fft_plan;

/* Create a plan for the global array `shape` (ndim dims, the last fft_rank
 * of them transformed; fft_rank 2 or 3; every extent >= 1). precision is
 * DIST_F32 or DIST_F64; memory DIST_MEM_HOST (FFTW) or DIST_MEM_CUDA (needs
 * cuFFT and a device). opt NULL means DIST_FFT_OPTIONS_INIT.
 * Collective over the group: every rank passes the same type, precision,
 * memory, shape, options and sizes; a mismatch, a group that does not exist
 * or sizes that do not add up is an error on every rank. *plan is written
 * only on success. */
dist_status dist_fft_plan_create(dist_fft_plan **plan, dist_fft_type type, dist_dtype precision, dist_memory memory,
                                 int ndim, const int64_t *shape, int fft_rank, const dist_fft_options *opt);

/* Local. Accepts NULL. Frees the plan's scratch and local FFT plans. */
void dist_fft_plan_destroy(dist_fft_plan *plan);

/* This rank's piece of an array the plan reads or writes: allocate `numel`
 * elements of `dtype` (`nbytes` bytes) and view them as shape[0..ndim). The
 * piece covers global indices offset[d] .. offset[d]+shape[d]-1 along each
 * dim d of the array in that layout; `global` is the whole array's shape
 * and `split_dim` the dim divided across ranks. */
typedef struct dist_fft_local {
  dist_dtype dtype;
  int ndim, split_dim;
  int64_t shape[DIST_TENSOR_MAX_DIMS];
  int64_t offset[DIST_TENSOR_MAX_DIMS];
  int64_t global[DIST_TENSOR_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
} dist_fft_local;

/* Local: the forward's input (= the inverse's output) and the forward's
 * output (= the inverse's input) on this rank. */
dist_status dist_fft_local_input(const dist_fft_plan *plan, dist_fft_local *info);
dist_status dist_fft_local_output(const dist_fft_plan *plan, dist_fft_local *info);
/* Local: every rank's piece along the split dim of the forward's input
 * (dist_fft_local_input's split_dim) and output (dist_fft_local_output's),
 * in group rank order: sizes[r] and offsets[r] for r < the plan's group size
 * (dist_fft_plan_ranks), so no rank recomputes the split. n is the room in
 * each array (an error if smaller than the group); either array may be NULL. */
dist_status dist_fft_input_split(const dist_fft_plan *plan, int n, int64_t *sizes, int64_t *offsets);
dist_status dist_fft_output_split(const dist_fft_plan *plan, int n, int64_t *sizes, int64_t *offsets);
/* Local: the number of ranks of the plan's group (0 for NULL). */
int dist_fft_plan_ranks(const dist_fft_plan *plan);
/* Local: bytes of scratch the plan holds (exchange buffers; FFTW/cuFFT work areas not counted). */
size_t dist_fft_workspace_bytes(const dist_fft_plan *plan);

/* Collective over the plan's group. `in` and `out` must have exactly the
 * shapes, dtypes and memory of dist_fft_local_input / _output (forward) or
 * the reverse (inverse), and must not overlap. CUDA plans run on the stream
 * of dist_cuda_set_stream and return without waiting for the device; a plan
 * owns its scratch, so one plan's calls must not overlap (one stream, or
 * one plan per stream). */
dist_status dist_fft_forward(dist_fft_plan *plan, const dist_tensor *in, dist_tensor *out);
dist_status dist_fft_inverse(dist_fft_plan *plan, const dist_tensor *in, dist_tensor *out);

/* Gradients (vector-Jacobian products) so a model can train through the
 * transforms; real inner product on complex values, <a, b> = sum(Re a Re b +
 * Im a Im b), so that <forward(x), g> == <x, forward_backward(g)> and
 * <inverse(z), g> == <z, inverse_backward(g)>. With s_f, s_i the forward and
 * inverse scale factors of the plan's norm, N the transformed size:
 *
 *  - forward_backward (the gradient of rfft2/rfftn with respect to its real
 *    input; grad_out has the forward's output layout, grad_in the input's):
 *      grad_in = s_f * c2r_unscaled(h),  h = grad_out with every column
 *      0 < k < n_last/2 (not DC, not Nyquist) halved,
 *    which equals Re(s_f * IDFT_unscaled(grad_out zero-padded to the full
 *    spectrum)): only the stored half spectrum gets gradient.
 *  - inverse_backward (the gradient of irfft2/irfftn with respect to its
 *    complex input; grad_out has the input's layout, grad_in the output's):
 *      grad_in = s_i * w_k * r2c_unscaled(grad_out),  w_k = 2 for the
 *      columns 0 < k < n_last/2 and 1 for DC and Nyquist,
 *    because each of those columns stands for itself and its conjugate twin.
 *  - c2c plans: forward_backward = s_f * IDFT_unscaled(grad_out) and
 *    inverse_backward = s_i * DFT_unscaled(grad_out) (the adjoints).
 * Collective, like dist_fft_forward. */
dist_status dist_fft_forward_backward(dist_fft_plan *plan, const dist_tensor *grad_out, dist_tensor *grad_in);
dist_status dist_fft_inverse_backward(dist_fft_plan *plan, const dist_tensor *grad_out, dist_tensor *grad_in);

#ifdef __cplusplus
}
#endif
#endif
