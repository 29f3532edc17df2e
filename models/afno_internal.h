/* AFNO internals: sizes of this rank's shard, the parameter table, the
 * per-layer forward/backward functions and the model object.
 *
 * Activations are channel-first per sample, [B, C, T] with T = local tokens
 * (token_rows x w, row-major): the FFT transforms the last two dims of
 * [B, C, h, w] directly and every dense layer is one GEMM per sample
 * (weights x activations), so no layer needs a transpose. Parameters keep
 * the reference (PyTorch) layout restricted to this rank's shard, except
 * pos_embed, kept as [D_local, T] to add it to channel-first activations. */
#ifndef DISTMGR_MODELS_AFNO_INTERNAL_H
#define DISTMGR_MODELS_AFNO_INTERNAL_H

#include <complex.h>

#include "distmgr.h"
#include "distmgr/afno.h"

#define AFNO_EPS 1e-6f

/* Sizes of this rank's part of the model. */
typedef struct afno_dims {
  int Cin, Cout, p0, p1;
  int64_t H, W, h, w;   /* image and token grid */
  int64_t hl, h0, T;    /* local token rows, first row, local tokens = hl * w */
  int D, Dl, d0;        /* embed channels: all, local, first */
  int nb, nbl, bs;      /* spectral blocks: all, local; channels per block */
  int Hd, Hdl, hd0;     /* MLP hidden units: all, local, first */
  int Kin, Kout;        /* Cin*p0*p1 (patch) and Cout*p0*p1 (head) */
  int64_t kw;           /* w/2 + 1 */
  int64_t row_lo, row_hi, col_hi; /* kept modes: rows [lo, hi), columns [0, col_hi) */
  float lambda;         /* softshrink threshold */
  int dp, dp_rank, mp, mp_rank, sp, sp_rank;
  char dp_group[64], mp_group[64], sp_group[64]; /* "self" where the group is absent */
  int64_t *row_sizes;   /* token rows per spatial rank */
  int64_t *dl_sizes;    /* channels per model-parallel rank */
} afno_dims;

/* One parameter: reference name and shape, and this rank's box of it. The
 * shard is box [lo[a], lo[a]+len[a]) on each reference axis a, stored with
 * the axes in the order perm[0..ndim) (identity except pos_embed). */
typedef struct afno_param {
  char name[64];
  int ndim;
  int64_t shape[4], lo[4], len[4];
  int perm[4];
  int64_t numel, local_numel, offset; /* offset into the model's arenas */
  int shared_sp;                      /* replicated over the spatial group (gradients summed there) */
  int init;                           /* AFNO_INIT_* */
  double init_scale;
} afno_param;

enum { AFNO_INIT_ZERO, AFNO_INIT_ONE, AFNO_INIT_NORMAL, AFNO_INIT_TRUNC_NORMAL, AFNO_INIT_UNIFORM };

/* Pointers of one block's parameters (or gradients) into an arena. */
typedef struct afno_block_w {
  float *n1g, *n1b, *w1, *b1, *w2, *b2, *n2g, *n2b, *fc1w, *fc1b, *fc2w, *fc2b;
} afno_block_w;

/* What one block's backward needs from its forward. */
typedef struct afno_block_cache {
  float *mean1, *rstd1, *mean2, *rstd2;  /* [B, T] */
  float complex *X, *o1, *o2;            /* filter: rfft2 of norm1, the two spectral layers' outputs */
  float *x1;                             /* after the filter and its residual [B, Dl, T] */
  float *v;                              /* norm2 output gathered over model parallel [B, D, T] */
  float *hpre;                           /* fc1 output before GELU [B, Hdl, T] */
} afno_block_cache;

struct dist_afno {
  dist_afno_config cfg;
  afno_dims d;
  int nparams;
  afno_param *params;
  float *data, *grad; /* arenas, params_local floats each */
  int64_t params_local;
  dist_params *set;
  dist_ddp *ddp;
  afno_block_w *bw, *bg; /* per block: weights, gradients */
  /* Batch-dependent state (rebuilt when the batch size changes). */
  int64_t B;
  dist_fft_plan *fft;
  int64_t spec_n;       /* complex values of this rank's spectrum */
  int64_t spec_k0, spec_kl; /* its columns: first, count */
  float *cols;          /* embed im2col [B, Kin, T] */
  float **acts;         /* block inputs, depth + 1 of [B, Dl, T] */
  afno_block_cache *cache; /* depth caches, or 1 with recompute */
  float *s_u, *s_a, *s_b, *s_c; /* [B, Dl, T] scratch of the layers */
  float *s_dx;          /* [B, Dl, T]: the gradient flowing back through the blocks */
  float *s_hid;         /* [B, Hdl, T] scratch */
  float *s_full;        /* [B, max(D, Kout), T] scratch */
  float complex *s_spec, *s_spec2; /* spectrum scratch */
  float *s_stats;       /* [4, B, T] */
  int have_forward;     /* a forward has run since the last backward */
  int solo;             /* no parallel group: every rank holds a whole model of its own */
};

/* Setup (afno_setup.c). */
dist_status afno_dims_init(const dist_afno_config *c, afno_dims *d);
dist_status afno_params_build(dist_afno *m); /* table, arenas, initial values, block pointers */
dist_status afno_batch_prepare(dist_afno *m, int64_t B);
void afno_batch_free(dist_afno *m);

/* Agree over the world on a local status: every rank returns an error when
 * any rank failed (the failing rank keeps its own message). A model without
 * parallel groups (m->solo) is local: nothing to agree on. m may be NULL. */
dist_status afno_agree(const dist_afno *m, dist_status s, const char *what);
/* The same within one model replica (the model-parallel x spatial ranks of
 * one data-parallel rank): forward's scope, so data-parallel ranks may run
 * different batch sizes, or none (an evaluation dealt unevenly). */
dist_status afno_agree_replica(const dist_afno *m, dist_status s, const char *what);

/* Counter-based random values: the same for a (seed, stream, index) on
 * every rank, whatever the layout. */
double afno_rand_normal(uint64_t seed, uint64_t stream, uint64_t index);
double afno_rand_uniform(uint64_t seed, uint64_t stream, uint64_t index); /* [0, 1) */

/* Shard <-> reference layout. local index i <-> global reference index. */
int64_t afno_param_global_index(const afno_param *p, int64_t local);

/* Whole tensor `index` (reference layout, numel floats) from each rank's
 * shard `local` (laid out as the parameter's shard): on every rank, or on
 * world rank 0 only (root_only; the others' `full` is scratch). Collective
 * over the world unless solo. */
dist_status afno_shard_gather(dist_afno *m, int index, const float *local, float *full, int root_only);
/* This rank's shard of tensor `index` from the whole (possibly unaligned) tensor. */
void afno_shard_extract(const dist_afno *m, int index, const void *full, float *local);

/* Layers. x, y, dx, dy: [B, C, T] channel-first; gradients are added (+=). */
dist_status afno_ln_forward(const afno_dims *d, int64_t B, const float *x, const float *g, const float *b, float *y,
                            float *mean, float *rstd);
dist_status afno_ln_backward(const afno_dims *d, int64_t B, const float *x, const float *g, const float *mean,
                             const float *rstd, const float *dy, float *dx, float *dg, float *db, float *scratch);

/* y = irfft2(spectral_mlp(rfft2(u))) + u. */
dist_status afno_filter_forward(dist_afno *m, const afno_block_w *w, const float *u, float *y, afno_block_cache *c);
/* du += dy + the spectral path's gradient; weight gradients into g. */
dist_status afno_filter_backward(dist_afno *m, const afno_block_w *w, const afno_block_cache *c, const float *dy,
                                 float *du, afno_block_w *g);

/* y = fc2(gelu(fc1(v))) (written, not added). */
dist_status afno_mlp_forward(dist_afno *m, const afno_block_w *w, const float *v, float *y, afno_block_cache *c);
dist_status afno_mlp_backward(dist_afno *m, const afno_block_w *w, const afno_block_cache *c, const float *dy,
                              float *dv, afno_block_w *g);

/* Patch embedding + pos_embed: img [B, Cin, rows, W] -> x [B, Dl, T]. */
dist_status afno_embed_forward(dist_afno *m, const float *img, float *x);
dist_status afno_embed_backward(dist_afno *m, const float *dx);
/* Head + un-patchify: x [B, Dl, T] -> y [B, Cout, rows, W]. */
dist_status afno_head_forward(dist_afno *m, const float *x, float *y);
dist_status afno_head_backward(dist_afno *m, const float *x, const float *dy, float *dx);

/* Exact-erf GELU (afno_gelu.c): z = gelu(h); dz *= gelu'(h). */
void afno_gelu(const float *h, float *z, int64_t n);
void afno_gelu_backward(const float *h, float *dz, int64_t n);

/* Blocks (afno_block.c). */
dist_status afno_block_forward(dist_afno *m, int i, const float *x, float *y, afno_block_cache *c);
dist_status afno_block_backward(dist_afno *m, int i, const float *x, afno_block_cache *c, float *dx);

/* Parameter indices: patch weight, patch bias, pos_embed, 12 per block, head. */
#define AFNO_P_BLOCK(i) (3 + 12 * (i))
#define AFNO_P_HEAD(depth) (3 + 12 * (depth))

#endif
