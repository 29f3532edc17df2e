/* A non-owning view of a contiguous row-major array: the argument type of
 * every collective and mapping. distmgr never allocates or frees `data`. */
#ifndef DISTMGR_TENSOR_H
#define DISTMGR_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "distmgr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_TENSOR_MAX_DIMS 8

typedef enum dist_dtype {
  DIST_F32 = 0,
  DIST_F64,
  DIST_BF16, /* stored as uint16_t; reduced in f32 */
  DIST_F16,  /* IEEE half, stored as uint16_t; reduced in f32 */
  DIST_C64,  /* float complex: interleaved (re, im) f32 pairs */
  DIST_C128, /* double complex */
  DIST_I32,
  DIST_I64,
  DIST_U8,
  DIST_DTYPE_COUNT
} dist_dtype;

typedef enum dist_memory {
  DIST_MEM_HOST = 0, /* through the MPI backend */
  DIST_MEM_CUDA = 1  /* through NCCL (or staged through host memory without NCCL) */
} dist_memory;

typedef struct dist_tensor {
  void *data;        /* may be NULL only when the tensor has no elements */
  dist_dtype dtype;
  dist_memory memory;
  int device;        /* CUDA ordinal for DIST_MEM_CUDA; ignored for host memory */
  int ndim;          /* 0 (a scalar) to DIST_TENSOR_MAX_DIMS */
  int64_t shape[DIST_TENSOR_MAX_DIMS];
} dist_tensor;

/* A host tensor / a CUDA tensor on `device`. Shapes beyond ndim are zeroed;
 * ndim outside [0, DIST_TENSOR_MAX_DIMS] gives ndim = -1, which every call
 * rejects. Local. */
dist_tensor dist_tensor_host(void *data, dist_dtype dtype, int ndim, const int64_t *shape);
dist_tensor dist_tensor_cuda(void *data, dist_dtype dtype, int device, int ndim, const int64_t *shape);

/* The product of the shape (1 for a scalar; 0 when an extent is 0), or -1
 * when it does not exist as an int64_t: a negative extent, or extents whose
 * product exceeds INT64_MAX (f32[2^40, 2^40]). 0 for a NULL tensor or an
 * ndim out of range. Local.
 * Every call rejects with DIST_ERR_INVALID_ARGUMENT, naming the tensor, one
 * whose extents (zeros left out) times the element size exceed INT64_MAX
 * bytes, with 16-bit floats counted at the 4 bytes of the f32 they are
 * reduced in and u8 at the 8 bytes of an average's i64. */
int64_t dist_tensor_numel(const dist_tensor *t);
/* numel times the dtype size; SIZE_MAX when numel is -1 or the byte count
 * exceeds INT64_MAX (f64[2^61]); 0 for a NULL tensor. Local. */
size_t dist_tensor_nbytes(const dist_tensor *t);
size_t dist_dtype_size(dist_dtype dtype); /* 0 for an unknown dtype */
const char *dist_dtype_name(dist_dtype dtype); /* "f32", ..., "u8"; "unknown" otherwise */

/* Conversions used for 16-bit data (round to nearest even; NaN stays NaN). */
float dist_bf16_to_f32(uint16_t h);
uint16_t dist_f32_to_bf16(float f);
float dist_f16_to_f32(uint16_t h);
uint16_t dist_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif
#endif
