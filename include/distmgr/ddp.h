/* DDP gradient reducer: averages the gradients of a parameter set over its
 * group while the backward pass is still running.
 *
 * Buckets. Parameters are grouped by (dtype, memory space, device) and
 * assigned in reverse registration order (the order backward produces them)
 * to buckets of at most first_bucket_bytes (the first) and bucket_bytes (the
 * rest); a parameter larger than the cap gets a bucket of its own.
 *
 * One iteration:
 *   backward: for each parameter, once its gradient is final,
 *             dist_ddp_mark_ready(ddp, index)
 *             - the gradient is copied into its bucket (not with
 *               grad_as_bucket_view: the gradient already lives there);
 *               in device memory, all of a bucket's gradients in one batch
 *               when its last one is marked (on the stream current then),
 *               so a marked gradient must not change until finalize;
 *             - a bucket whose parameters are all ready starts its
 *               non-blocking all-reduce at once, strictly in bucket order
 *               (a later bucket that fills first waits for the earlier ones);
 *   dist_ddp_finalize(ddp): waits for all buckets, divides by the group size
 *             and leaves the averaged gradients in place (in each grad
 *             buffer). Then step the optimizer. With DIST_VERIFY=1 a
 *             finalize that fails on any rank writes back nothing on every
 *             rank: each keeps its own gradients (with grad_as_bucket_view
 *             they are the buckets, and hold what the reductions left).
 *
 * Progress. MPI progresses non-blocking collectives only inside MPI calls.
 * progress = DIST_DDP_PROGRESS_TEST (default) tests the launched requests at
 * every mark_ready; DIST_DDP_PROGRESS_THREAD runs a thread that polls MPI
 * while buckets are in flight (needs DIST_THREAD_MULTIPLE at initialize);
 * DIST_DDP_PROGRESS_NONE leaves it to finalize. bench/reducer measures them.
 *
 * Accumulation. dist_ddp_set_sync(ddp, 0) is torch's no_sync(): marks are
 * recorded but nothing is sent, and the backward keeps adding into the
 * gradient buffers; the next iteration with sync on reduces the sum.
 *
 * Unused parameters. Parameters not marked ready by finalize are, per the
 * `unused` option, an error that names them (DIST_DDP_UNUSED_ERROR, the
 * default, agreed by all ranks in one small all-reduce per finalize) or
 * treated as a zero local gradient and reduced with the rest
 * (DIST_DDP_UNUSED_ZERO). Every rank launches every bucket either way, so
 * nothing hangs; with DIST_VERIFY=0 the agreement round is skipped and only
 * the ranks that found the problem report it. A finalize with no mark at
 * all since the last one is an error in both modes (a forgotten backward).
 *
 * Compression. DIST_DDP_COMPRESS_BF16 / _F16 send each f32 bucket as 16-bit
 * floats (half the bytes), summed pairwise in f32 and rounded back to 16 bits
 * by NCCL or by an MPI user reduction; the result is widened to f32 before
 * averaging. The staged backend (device memory without NCCL, or ranks
 * sharing a GPU) cannot sum 16-bit floats: there a compressed bucket keeps
 * the 16-bit rounding but travels as f32, and bf16/f16 gradients are refused
 * (DIST_ERR_UNSUPPORTED). A user hook may instead reduce a bucket any way it
 * likes.
 *
 * Collective calls: create, finalize, destroy. mark_ready and set_sync are
 * local but every rank must mark the same parameters in the same iteration
 * (a mismatch is caught by finalize's check when unused = ERROR). */
#ifndef DISTMGR_DDP_H
#define DISTMGR_DDP_H

#include "distmgr/coll.h"
#include "distmgr/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_ddp dist_ddp;

typedef enum dist_ddp_progress { DIST_DDP_PROGRESS_TEST = 0, DIST_DDP_PROGRESS_THREAD, DIST_DDP_PROGRESS_NONE } dist_ddp_progress;
typedef enum dist_ddp_unused { DIST_DDP_UNUSED_ERROR = 0, DIST_DDP_UNUSED_ZERO } dist_ddp_unused;
typedef enum dist_ddp_compress { DIST_DDP_COMPRESS_NONE = 0, DIST_DDP_COMPRESS_BF16, DIST_DDP_COMPRESS_F16 } dist_ddp_compress;

/* A user communication hook. start: `bucket` holds this rank's gradients
 * (flat, the bucket's dtype); launch a reduction that leaves their SUM over
 * `group` in the bucket and return its request in *req (or NULL when already
 * done). finish (may be NULL): called after the request completed, e.g. to
 * decompress. Both run on the calling thread. A start that fails on some
 * ranks only must still have posted its collective (returning its request):
 * the other ranks wait for it, and distmgr cannot post one for the hook. */
typedef struct dist_ddp_hook {
  dist_status (*start)(void *ctx, const char *group, int bucket, dist_tensor *grads, dist_request **req);
  dist_status (*finish)(void *ctx, int bucket, dist_tensor *grads);
  void *ctx;
} dist_ddp_hook;

/* Initialize with DIST_DDP_OPTIONS_INIT, then set the fields to change
 * (struct_size: see README, "Option structs"). */
typedef struct dist_ddp_options {
  size_t struct_size;        /* sizeof(dist_ddp_options), set by DIST_DDP_OPTIONS_INIT */
  size_t first_bucket_bytes; /* default 1 MiB */
  size_t bucket_bytes;       /* default 25 MiB */
  int grad_as_bucket_view;   /* 1: every grad buffer is moved into its bucket (see dist_params_grad) */
  dist_ddp_unused unused;
  dist_ddp_compress compress;
  const dist_ddp_hook *hook; /* overrides compress; copied at create */
  dist_ddp_progress progress;
  const char *group;         /* NULL = the parameter set's group */
  /* 1 (DIST_DDP_OPTIONS_INIT): at the end of the first synchronised
   * finalize in which rank 0 marked something, lay the buckets out again in
   * the order rank 0's gradients became ready (unmarked ones last), so that
   * each bucket fills, and launches, as early as the backward allows.
   * Nothing changes when that order gives the same layout (e.g. reverse
   * registration order). Otherwise the bucket count and indices change and
   * earlier dist_ddp_bucket_info `params` pointers are freed (a hook keeping
   * per-bucket state must allow for it); with grad_as_bucket_view the
   * gradients move to their new slots, values kept: re-read
   * dist_params_grad after that finalize. 0: never. */
  int rebuild_buckets;
} dist_ddp_options;
#define DIST_DDP_OPTIONS_INIT                 \
  {                                           \
    .struct_size = sizeof(dist_ddp_options),  \
    .first_bucket_bytes = (size_t)1 << 20,    \
    .bucket_bytes = (size_t)25 << 20,         \
    .grad_as_bucket_view = 0,                 \
    .unused = DIST_DDP_UNUSED_ERROR,          \
    .compress = DIST_DDP_COMPRESS_NONE,       \
    .hook = NULL,                             \
    .progress = DIST_DDP_PROGRESS_TEST,       \
    .group = NULL,                            \
    .rebuild_buckets = 1,                     \
  }

/* Build the buckets of a committed set (o NULL = defaults). Collective. */
dist_status dist_ddp_create(dist_params *p, const dist_ddp_options *o, dist_ddp **out);
/* The gradient of parameter `index` is final for this iteration. Local. If
 * the copy into the bucket, or the narrowing before its all-reduce, fails,
 * the bucket and the later ones are still sent (the other ranks expect them)
 * and the error is returned here and by the next finalize; with
 * DIST_VERIFY=1 every rank's finalize fails, with 0 only this rank's. */
dist_status dist_ddp_mark_ready(dist_ddp *d, int index);
/* Wait, average, write back; resets the marks for the next iteration.
 * Collective. Marks made with sync off are only reset. */
dist_status dist_ddp_finalize(dist_ddp *d);
/* 0 = no_sync (accumulate locally), 1 = reduce (the default). Local. */
dist_status dist_ddp_set_sync(dist_ddp *d, int on);
int dist_ddp_sync_enabled(const dist_ddp *d);

/* Layout queries: number of buckets, and for bucket b its parameter indices
 * in bucket order (ready order), byte size and dtype. */
int dist_ddp_bucket_count(const dist_ddp *d);
dist_status dist_ddp_bucket_info(const dist_ddp *d, int b, int *nparams, const int **params, size_t *bytes,
                                 dist_dtype *dtype);
/* Bytes this rank handed to the backend for all-reduces so far (wire dtype). */
uint64_t dist_ddp_bytes_sent(const dist_ddp *d);

/* Completes anything in flight first. Collective when buckets are in flight. */
void dist_ddp_destroy(dist_ddp *d);

#ifdef __cplusplus
}
#endif
#endif
