/* Memory operations: the arguments are checked here, once for every memory
 * space, and the work goes to that space's table (memops.h). */
#include "core/fault.h"
#include "mem/memops.h"

static inline const dist__mem_ops *ops(dist_memory mem) {
  return mem == DIST_MEM_HOST ? &dist__mem_host : &dist__mem_cuda;
}

dist_status dist__mem_alloc(dist_memory mem, size_t bytes, void **p) {
  if (dist__fault("mem_alloc")) { /* tests: one rank's scratch allocation fails */
    *p = NULL;
    return dist__error(DIST_ERR_NO_MEMORY, "injected fault (mem_alloc): %zu bytes", bytes);
  }
  dist_status s = ops(mem)->alloc(bytes ? bytes : 1, p);
  if (s) *p = NULL; /* so that a caller's cleanup frees nothing */
  return s;
}

void dist__mem_free(dist_memory mem, void *p) {
  if (p) ops(mem)->free(p);
}

dist_status dist__mem_zero(dist_memory mem, void *p, size_t bytes) {
  if (bytes && dist__fault("mem_zero")) /* tests: one rank's memset fails (a device one, in practice) */
    return dist__error(DIST_ERR_INTERNAL, "injected fault (mem_zero): %zu bytes", bytes);
  return bytes ? ops(mem)->zero(p, bytes) : DIST_SUCCESS;
}

dist_status dist__mem_copy2d(dist_memory mem, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                             size_t height) {
  if (!width || !height || dst == src) return DIST_SUCCESS;
  size_t end; /* the span of either side: (height - 1) pitches and one row */
  if (__builtin_mul_overflow(height - 1, dpitch > spitch ? dpitch : spitch, &end) ||
      __builtin_add_overflow(end, width, &end) || __builtin_mul_overflow(width, height, &end))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "2-D copy of %zu rows of %zu bytes (pitches %zu and %zu) overflows size_t",
                       height, width, dpitch, spitch);
  return ops(mem)->copy2d(dst, dpitch, src, spitch, width, height);
}

dist_status dist__mem_widen(dist_memory mem, const void *src, dist_dtype t, void *dst, size_t n) {
  return ops(mem)->widen(src, t, dst, n);
}

dist_status dist__mem_narrow(dist_memory mem, const void *src, dist_dtype t, void *dst, size_t n) {
  return ops(mem)->narrow(src, t, dst, n);
}

dist_status dist__mem_divide(dist_memory mem, void *buf, dist_dtype t, size_t n, int64_t d) {
  return ops(mem)->divide(buf, t, n, d);
}

dist_status dist__mem_copy_pieces(dist_memory mem, const dist__piece *p, int n, dist_dtype t, int64_t divisor) {
  if (n < 0 || (n && !p) || divisor < 1)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "batched copy of %d pieces (%s) with divisor %lld", n,
                       p ? "given" : "NULL", (long long)divisor);
  const int valid = dist__dtype_valid(t), halves = valid && dist__dtype_kind(t) == DIST__COMPLEX;
  if (divisor > 1 && (!valid || dist__dtype_kind(t) == DIST__INT))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "batched copy divided by %lld: %s is not a floating type",
                       (long long)divisor, dist_dtype_name(t));
  /* Division reads whole numbers; a plain copy any bytes. */
  size_t esize = dist_dtype_size(t), bytes, align = halves ? esize / 2 : esize; /* a complex number's parts */
  for (int i = 0; i < n; i++) {
    if (__builtin_mul_overflow(p[i].n, esize, &bytes))
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "batched copy: piece %d of %zu elements of %s overflows size_t", i,
                         p[i].n, dist_dtype_name(t));
    if (divisor > 1 && p[i].n && ((uintptr_t)p[i].dst % align || (uintptr_t)p[i].src % align))
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "batched copy: piece %d is not aligned to its %s numbers", i,
                         dist_dtype_name(t));
  }
  return n ? ops(mem)->copy_pieces(p, n, t, divisor) : DIST_SUCCESS;
}

/* [outer, rows, inner] blocks of esize bytes with rows = max(rows, nidx): an
 * error when a count or byte offset of the loops overflows int64. */
static dist_status check_block(const char *what, int64_t outer, int64_t rows, int64_t inner, int64_t nidx,
                               size_t esize) {
  int64_t n = (int64_t)esize;
  if (outer < 0 || rows < 0 || inner < 0 || nidx < 0 || __builtin_mul_overflow(n, outer, &n) ||
      __builtin_mul_overflow(n, rows > nidx ? rows : nidx, &n) || __builtin_mul_overflow(n, inner, &n))
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: outer %lld x rows %lld (%lld indices) x inner %lld elements of %zu bytes overflows int64",
                       what, (long long)outer, (long long)rows, (long long)nidx, (long long)inner, esize);
  return DIST_SUCCESS;
}

dist_status dist__mem_index_add(dist_memory mem, void *dst, const void *src, dist_dtype t, int64_t outer, int64_t rows,
                                int64_t inner, const int64_t *idx, int64_t nidx) {
  DIST_CHECK(check_block("index-add", outer, rows, inner, nidx, dist_dtype_size(t)));
  return ops(mem)->index_add(dst, src, t, outer, rows, inner, idx, nidx);
}

dist_status dist__mem_index_select(dist_memory mem, void *dst, const void *src, size_t esize, int64_t outer,
                                   int64_t rows, int64_t inner, const int64_t *idx, int64_t nidx) {
  DIST_CHECK(check_block("index-select", outer, rows, inner, nidx, esize));
  return ops(mem)->index_select(dst, src, esize, outer, rows, inner, idx, nidx);
}

dist_status dist__mem_upload(dist_memory mem, void *dst, const void *src, size_t bytes) {
  return bytes ? ops(mem)->upload(dst, src, bytes) : DIST_SUCCESS;
}

dist_status dist__mem_download(dist_memory mem, void *dst, const void *src, size_t bytes) {
  return bytes ? ops(mem)->download(dst, src, bytes) : DIST_SUCCESS;
}

dist_status dist__mem_upload_copy(dist_memory mem, void *dst, const void *src, size_t bytes) {
  return bytes ? ops(mem)->upload_copy(dst, src, bytes) : DIST_SUCCESS;
}

dist_status dist__mem_sync(dist_memory mem) { return ops(mem)->sync(); }

dist_status dist__mem_event_record(dist_memory mem, void **event) {
  *event = NULL;
  return ops(mem)->event_record(event);
}
