/* Safetensors files: the checkpoint format of models/.
 *
 * Layout (what safetensors.torch.load_file reads): an 8-byte little-endian
 * u64 N, N bytes of a JSON object (UTF-8), then the data area. The object
 * maps each tensor name to {"dtype": "F32", "shape": [2, 3],
 * "data_offsets": [begin, end]} with offsets relative to the start of the
 * data area, plus an optional "__metadata__" object of string values. The
 * tensors cover the data area exactly: no overlap, no holes.
 *
 * Only F32, F64 and I64 are handled; other dtypes of the format are
 * DIST_ERR_UNSUPPORTED. JSON goes through jansson.
 *
 * Every function is local (no MPI, not collective) and thread-safe for
 * distinct objects; a parsed file may be read by many threads at once.
 * Concurrent writes of the same path from one process are not supported
 * (they would share the temporary file name). */
#ifndef DISTMGR_MODELS_SAFETENSORS_H
#define DISTMGR_MODELS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "distmgr/tensor.h" /* dist_dtype: DIST_F32, DIST_F64, DIST_I64 ... ; DIST_TENSOR_MAX_DIMS = 8 */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist__st_meta {
  const char *key, *value;
} dist__st_meta;

typedef struct dist__st_tensor {
  const char *name;
  dist_dtype dtype; /* DIST_F32, DIST_F64 or DIST_I64 ("F32", "F64", "I64"); others: DIST_ERR_UNSUPPORTED */
  int ndim;         /* 0..DIST_TENSOR_MAX_DIMS */
  int64_t shape[DIST_TENSOR_MAX_DIMS];
  const void *data; /* numel * dtype size bytes; on read it points into the file bytes and MAY BE UNALIGNED (callers memcpy) */
  size_t nbytes;    /* filled on read; ignored on write */
} dist__st_tensor;

/* Write n tensors (names unique, non-empty, not "__metadata__") and nmeta metadata pairs atomically:
 * to "<path>.tmp.<pid>" in the same directory, fsync, rename over path, fsync the directory. On any
 * failure the temporary file is removed and an existing file at path is untouched. Header padded with
 * spaces to a multiple of 8 bytes (as the reference writer does); data in the given order, contiguous.
 * All arguments are checked before the temporary file is created; `data` may be NULL only for a
 * tensor without elements. A failure after the rename (fsync of the directory) is DIST_ERR_IO with
 * the new file in place. Local. */
dist_status dist__st_write(const char *path, const dist__st_tensor *t, int n, const dist__st_meta *meta, int nmeta);

/* Read a whole file into a malloc'd buffer (*bytes, *size); the caller frees *bytes. Outputs are
 * written only on success. Local. */
dist_status dist__st_read_file(const char *path, void **bytes, size_t *size);

typedef struct dist__st_file dist__st_file;

/* Parse and validate everything (see below). `what` names the file in messages. The parsed object
 * refers to `bytes` (which must outlive it) for tensor data but owns copies of names and metadata.
 * Malformed, truncated or inconsistent contents are DIST_ERR_CORRUPT with a message naming `what`
 * and the fault; a dtype of the format other than F32/F64/I64 is DIST_ERR_UNSUPPORTED. Local. */
dist_status dist__st_parse(const void *bytes, size_t size, const char *what, dist__st_file **out);

int dist__st_count(const dist__st_file *f);                                   /* -1 for NULL */
dist_status dist__st_at(const dist__st_file *f, int i, dist__st_tensor *t);  /* in data-offset order */
dist_status dist__st_find(const dist__st_file *f, const char *name, dist__st_tensor *t); /* DIST_ERR_CORRUPT "no tensor 'x' in <what>" */
const char *dist__st_meta_get(const dist__st_file *f, const char *key);       /* NULL if absent */
void dist__st_free(dist__st_file *f);                                         /* NULL fine */

#ifdef __cplusplus
}
#endif
#endif
