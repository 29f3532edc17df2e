/* libFuzzer target for the safetensors parser (models/safetensors.c).
 *
 * Each input is a whole file. A failed parse must leave a message and no
 * object; a successful one must describe tensors that tile the data area of
 * the input exactly, with sizes that match their shapes and names that find
 * the same tensors. Any violation aborts, so the fuzzer reports it.
 *
 * Build: clang -fsanitize=fuzzer,address -D_GNU_SOURCE -Iinclude -I<build>/include -Ilib -Imodels \
 *          tests/fuzz/fuzz_safetensors.c models/safetensors.c lib/core/status.c lib/core/log.c lib/mem/tensor.c -ljansson -lm
 * Seeds: any .safetensors files (e.g. those written by tests/test_safetensors). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#include "check.h"

static size_t elem_size(dist_dtype d) {
  switch (d) {
  case DIST_F32: return 4;
  case DIST_F64:
  case DIST_I64: return 8;
  default: return 0;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dist_set_error(DIST_SUCCESS, "%s", "");
  dist__st_file *f = (dist__st_file *)1; /* must be left alone on failure */
  dist_status st = dist__st_parse(data, size, "fuzz input", &f);
  if (st != DIST_SUCCESS) {
    CHECK(st == DIST_ERR_CORRUPT || st == DIST_ERR_UNSUPPORTED || st == DIST_ERR_NO_MEMORY);
    CHECK(dist_last_error()[0] != '\0');
    CHECK(f == (dist__st_file *)1);
    return 0;
  }
  CHECK(size >= 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
  CHECK(hlen <= size - 8);
  const uint8_t *next = data + 8 + hlen, *end = data + size;
  int n = dist__st_count(f);
  CHECK(n >= 0);
  for (int i = 0; i < n; i++) {
    dist__st_tensor t, again;
    CHECK(dist__st_at(f, i, &t) == DIST_SUCCESS);
    CHECK(t.name != NULL);
    size_t es = elem_size(t.dtype);
    CHECK(es != 0);
    CHECK(t.ndim >= 0 && t.ndim <= DIST_TENSOR_MAX_DIMS);
    uint64_t numel = 1;
    for (int a = 0; a < t.ndim; a++) {
      CHECK(t.shape[a] >= 0);
      numel *= (uint64_t)t.shape[a]; /* unsigned: a wrap is harmless when a later dim is 0 */
    }
    CHECK(numel <= size && t.nbytes == numel * es);
    const uint8_t *p = t.data;
    CHECK(p == next); /* in data order, contiguous, inside the input */
    CHECK(t.nbytes <= (size_t)(end - p));
    if (t.nbytes) { /* touch the bytes, as a caller would */
      volatile uint8_t sink = p[0] ^ p[t.nbytes - 1];
      (void)sink;
    }
    next = p + t.nbytes;
    CHECK(dist__st_find(f, t.name, &again) == DIST_SUCCESS && again.data == t.data && again.nbytes == t.nbytes);
  }
  CHECK(next == end);
  CHECK(dist__st_at(f, n, &(dist__st_tensor){0}) == DIST_ERR_INVALID_ARGUMENT);
  (void)dist__st_meta_get(f, "format");
  dist__st_free(f);
  return 0;
}
