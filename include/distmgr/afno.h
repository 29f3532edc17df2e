/* AFNO: the Adaptive Fourier Neural Operator (FourCastNet's backbone), with
 * the architecture, parameter names and shapes of PhysicsNeMo's
 * physicsnemo.models.afno.AFNO, trained serial, data-, model- or
 * spatial-parallel (any mix, on a mesh of the world). Link with
 * -ldistmgr_models (pkg-config distmgr-models).
 *
 * Model (x: [B, C_in, H, W] -> y: [B, C_out, H, W]), h = H/p0, w = W/p1:
 *   patch_embed.proj (conv, kernel = stride = patch, as one GEMM) + pos_embed
 *   depth x block:  x = x + filter(norm1(x));  x = x + mlp(norm2(x))
 *     norm: LayerNorm over embed_dim, eps 1e-6
 *     filter: rfft2 (ortho) over the h x w token grid; per mode a
 *       block-diagonal complex MLP (num_blocks blocks of embed_dim/num_blocks
 *       channels: w1, b1, ReLU on real and imaginary parts, w2, b2,
 *       softshrink(sparsity_threshold)); irfft2; plus its own input.
 *     mlp: fc1 (embed_dim -> int(embed_dim * mlp_ratio)), exact-erf GELU, fc2
 *   head (linear, no bias, embed_dim -> C_out*p0*p1) and un-patchify.
 *
 * Kept modes (the reference's rule, copied for weight parity): with
 * m = h/2 + 1 and k = int(m * hard_thresholding_fraction), the spectral MLP
 * runs on rows [max(0, m-k), min(h, m+k)) and columns [0, min(k, w/2+1)) of
 * the rfft2 output; every other mode's output is exactly zero (biases
 * included). Note that m comes from h but limits the columns: for w > h the
 * columns >= h/2+1 are zero even at fraction 1 (as PhysicsNeMo and
 * FourCastNet); and with fraction < 1 the kept rows are the band around row
 * h/2+1, i.e. the highest vertical frequencies (also as the reference).
 *
 * Layouts. The model asks the manager for three groups by name (the Borg
 * pattern: no handles passed); a group that does not exist has size 1:
 *  - data_parallel: each rank its own samples; gradients averaged by the DDP
 *    reducer, each block's gradients marked ready as backward produces them.
 *  - model_parallel: embed_dim (so the spectral blocks, LayerNorm statistics
 *    and MLP hidden units) split over the group; num_blocks must divide by
 *    its size. LayerNorm normalises over the whole embed_dim (as the serial
 *    model; the statistics are all-reduced), the MLP gathers its input
 *    (all-gather-v) and reduce-scatters its output (reduce-scatter-v): one
 *    all-gather and one reduce-scatter per block each way.
 *  - spatial: the token rows split over the group (dist_compute_split_shapes,
 *    uneven allowed, needs h >= size and w/2+1 >= size); the filter's FFTs
 *    are distmgr's distributed FFT; everything else is pointwise and local.
 *    Gradients of the replicated weights are summed over the group.
 * Every rank gives its own samples' image rows: input [B, C_in, rows, W],
 * output [B, C_out, rows, W] with rows/row_offset of dist_afno_layout_get.
 * Parameters are f32 host memory; initial values depend only on the seed and
 * each element's global position, so every layout starts from the same model.
 */
#ifndef DISTMGR_AFNO_H
#define DISTMGR_AFNO_H

#include "distmgr/optim.h"
#include "distmgr/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_afno dist_afno;

/* Initialize with DIST_AFNO_CONFIG_INIT, then set the fields to change
 * (struct_size: see README, "Option structs"). */
typedef struct dist_afno_config {
  size_t struct_size;   /* sizeof(dist_afno_config), set by DIST_AFNO_CONFIG_INIT */
  int64_t inp_shape[2]; /* H, W */
  int in_channels, out_channels;
  int patch_size[2];
  int embed_dim, depth;
  double mlp_ratio;
  int num_blocks;
  double sparsity_threshold, hard_thresholding_fraction;
  uint64_t seed;
  int recompute; /* 1: keep only each block's input; backward recomputes the rest */
  /* Group names; NULL = "data_parallel", "model_parallel", "spatial". */
  const char *data_parallel, *model_parallel, *spatial;
} dist_afno_config;

#define DIST_AFNO_CONFIG_INIT                 \
  {                                           \
    .struct_size = sizeof(dist_afno_config),  \
    .inp_shape = {0, 0},                      \
    .in_channels = 0,                         \
    .out_channels = 0,                        \
    .patch_size = {16, 16},                   \
    .embed_dim = 256,                         \
    .depth = 4,                               \
    .mlp_ratio = 4.0,                         \
    .num_blocks = 16,                         \
    .sparsity_threshold = 0.01,               \
    .hard_thresholding_fraction = 1.0,        \
    .seed = 0,                                \
    .recompute = 0,                           \
    .data_parallel = NULL,                    \
    .model_parallel = NULL,                   \
    .spatial = NULL,                          \
  }

typedef struct dist_afno_layout {
  int dp_size, dp_rank, mp_size, mp_rank, sp_size, sp_rank;
  int64_t rows, row_offset;             /* image rows of this rank's input and output */
  int64_t token_rows, token_row_offset; /* rows of the h x w token grid */
  int64_t embed_local, embed_offset;    /* channels of embed_dim this rank holds */
  int64_t params_local;                 /* f32 values this rank holds */
  int64_t params_global;                /* the model's parameter count (PyTorch's numel sum) */
} dist_afno_layout;

/* Build the model. Collective over the world (all ranks, same config): a
 * bad config, or group sizes that do not fit it, is an error on every rank. */
dist_status dist_afno_create(const dist_afno_config *config, dist_afno **out);
void dist_afno_destroy(dist_afno *m); /* local; NULL is fine */

dist_status dist_afno_layout_get(const dist_afno *m, dist_afno_layout *out); /* local */

/* Forward of `batch` local samples. x: [batch, C_in, rows, W], y: [batch,
 * C_out, rows, W] (this rank's rows). Keeps what backward needs. Collective
 * over the model-parallel and spatial groups; errors are agreed over both. */
dist_status dist_afno_forward(dist_afno *m, int64_t batch, const float *x, float *y);

/* Backward of the last forward: dy has y's shape. Adds the parameter
 * gradients into the gradient buffers (zero them with dist_afno_zero_grad);
 * with data_parallel size > 1 they are averaged over that group when this
 * returns (the DDP reducer, overlapped with the backward). Collective over
 * all three groups. */
dist_status dist_afno_backward(dist_afno *m, const float *dy);
dist_status dist_afno_zero_grad(dist_afno *m); /* local */

/* Mean squared error over the whole global batch (every image element of
 * every sample on every rank): *loss on every rank, and dy = d loss_local /
 * dy, where loss_local is the mean over this data-parallel rank's samples
 * (so the DDP average of the gradients is the gradient of the global mean
 * when every data-parallel rank holds the same batch). Collective over the
 * three groups. dy may be NULL. */
dist_status dist_afno_mse(dist_afno *m, int64_t batch, const float *y, const float *target, double *loss, float *dy);

/* The parameter set (registration order = forward order; names and local
 * shards as in dist_afno_param_info), for an optimizer. */
dist_params *dist_afno_params(dist_afno *m);

/* Parameters by reference name and shape ("blocks.0.filter.w1", [2, nb, bs,
 * bs]). Local. index in [0, dist_params_count). */
typedef struct dist_afno_param_info {
  const char *name;
  int ndim;
  int64_t shape[4]; /* the reference (PyTorch) shape */
  int64_t numel;    /* of the whole tensor */
  int64_t local_numel;
} dist_afno_param_info;
dist_status dist_afno_param_info_get(const dist_afno *m, int index, dist_afno_param_info *info);

/* The whole tensor `index` in the reference layout (`full`: numel values)
 * from the ranks' shards; get writes it on every rank, set takes it from
 * every rank (each keeps its shard). Collective over the world. */
dist_status dist_afno_param_get(dist_afno *m, int index, float *full);
dist_status dist_afno_param_set(dist_afno *m, int index, const float *full);
/* The same for the gradient (after backward). Collective over the world. */
dist_status dist_afno_grad_get(dist_afno *m, int index, float *full);

/* Checkpoints as safetensors (PyTorch: safetensors.torch.load_file), with
 * the reference names and shapes whatever the layout, plus, when opt is not
 * NULL, the optimizer state as "optim.<name>.<slot>" tensors and its step
 * counts, and `meta` (may be NULL: key/value string pairs, n entries) in
 * __metadata__. Written atomically by world rank 0 (temporary file, fsync,
 * rename); a model saved at any layout loads at any other. Collective over
 * the world. */
typedef struct dist_afno_meta {
  const char *key, *value;
} dist_afno_meta;
dist_status dist_afno_save(dist_afno *m, const dist_optim *opt, const char *path, const dist_afno_meta *meta,
                           int nmeta);
/* Load into m (and opt): the file must hold every parameter with the
 * model's shapes; a missing, corrupt, truncated or mismatched file is an
 * error on every rank naming what is wrong, and changes nothing on any rank
 * (the ranks agree before any copies, also when one runs out of memory). meta_value
 * (may be NULL) reads one metadata key into buf (size bytes; "" if absent). */
dist_status dist_afno_load(dist_afno *m, dist_optim *opt, const char *path);
dist_status dist_afno_meta_read(const char *path, const char *key, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
