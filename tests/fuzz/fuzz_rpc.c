/* libFuzzer target for the message codec of remote calls (lib/rpc/wire.c),
 * what a network peer controls: UCX hands the active-message header and the
 * body to the engine, which checks one and decodes the other.
 *
 * The first sizeof(dist__rpc_header) bytes are the header (fewer when the
 * input is shorter), the rest the body, copied into a 16-byte aligned buffer
 * of exactly its size as the engine's receive buffer is. An accepted header
 * must hold what the check promises. A decoded body must stay inside itself:
 * the name, the extra bytes and every tensor's data (dtype size x numel
 * bytes) lie in the body, the counts within their limits; re-encoding the
 * decoded message gives the same meta and body lengths (and the same meta
 * bytes whatever the buffer held before), and the re-assembled body decodes
 * to the same fields and bytes. The decoder's memo (dist__rpc_decode_cached,
 * kept across inputs) agrees with the decoder; the whole input read as a
 * tiny message decodes only to what wire.h allows and encodes back to itself.
 * Any violation aborts.
 *
 * Build and run: make fuzz (or make check: tests/fuzz/run.sh). Seeds:
 * tests/fuzz/corpus/fuzz_rpc/ (written by tests/test_rpc_wire --write-corpus). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "rpc/wire.h"

#include "check.h"

static size_t nbytes(const dist_tensor *t) {
  size_t n = dist_dtype_size(t->dtype);
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return n;
}

/* 1 when [p, p + n) lies inside [b, b + len). */
static int inside(const void *p, size_t n, const unsigned char *b, size_t len) {
  const unsigned char *q = p;
  return q >= b && q <= b + len && n <= (size_t)(b + len - q);
}

static void check_header(const uint8_t *data, size_t n) {
  dist__rpc_header h;
  if (dist__rpc_check_header(data, n, &h)) return;
  CHECK(n == sizeof h);
  CHECK(!memcmp(&h, data, sizeof h));
  CHECK(h.magic == DIST__RPC_MAGIC && h.version == DIST__RPC_VERSION);
  CHECK(h.kind >= DIST__RPC_REQUEST && h.kind < DIST__RPC_KINDS);
}

/* The decoded message m of body b (len bytes) is sound; returns the size of
 * its meta part (what the tensor data leaves). */
static size_t check_msg(const dist__rpc_msg *m, const unsigned char *b, size_t len) {
  CHECK(m->ntensors >= 0 && m->ntensors <= DIST_RPC_MAX_ARGS);
  CHECK(m->name_len <= DIST_RPC_MAX_NAME);
  CHECK(inside(m->name, m->name_len, b, len));
  CHECK(!memchr(m->name, 0, m->name_len));
  CHECK(m->extra_len <= DIST__RPC_EXTRA_MAX);
  CHECK(inside(m->extra, m->extra_len, b, len));
  size_t data = 0;
  for (int i = 0; i < m->ntensors; i++) {
    const dist_tensor *t = &m->t[i];
    CHECK((int)t->dtype >= 0 && (int)t->dtype < DIST_DTYPE_COUNT && dist_dtype_size(t->dtype) > 0);
    CHECK(t->memory == DIST_MEM_HOST);
    CHECK(t->ndim >= 0 && t->ndim <= DIST_TENSOR_MAX_DIMS);
    for (int k = 0; k < t->ndim; k++) CHECK(t->shape[k] >= 0);
    /* The library's own size of the tensor agrees: no overflow. */
    size_t n = dist_tensor_nbytes(t);
    CHECK(n != SIZE_MAX && n == nbytes(t));
    if (!n) {
      CHECK(t->data == NULL);
    } else {
      CHECK(inside(t->data, n, b, len));
      CHECK(((const unsigned char *)t->data - b) % DIST__RPC_ALIGN == 0);
    }
    CHECK(n <= len && dist__rpc_pad(n) <= len - data);
    data += dist__rpc_pad(n);
  }
  CHECK(data <= len);
  size_t meta = len - data;
  CHECK(meta % DIST__RPC_ALIGN == 0);
  /* Tensor i's data starts at meta + the padded sizes before it. */
  size_t at = meta;
  for (int i = 0; i < m->ntensors; i++) {
    size_t n = nbytes(&m->t[i]);
    if (n) CHECK((const unsigned char *)m->t[i].data == b + at);
    at += dist__rpc_pad(n);
  }
  /* The name and extra bytes are in the meta part. */
  CHECK(inside(m->name, m->name_len, b, meta));
  CHECK(inside(m->extra, m->extra_len, b, meta));
  return meta;
}

static void round_trip(const dist__rpc_msg *m, size_t meta, size_t len) {
  size_t meta2 = 0, body2 = 0;
  CHECK(dist__rpc_encode_meta(m, NULL, 0, &meta2, &body2) == DIST_SUCCESS);
  CHECK(meta2 == meta);
  CHECK(body2 == len);
  unsigned char *b = NULL;
  CHECK(!posix_memalign((void **)&b, DIST__RPC_ALIGN, body2 ? body2 : 1));
  memset(b, 0xA5, body2);
  size_t meta3 = 0, body3 = 0;
  CHECK(dist__rpc_encode_meta(m, b, meta2, &meta3, &body3) == DIST_SUCCESS);
  CHECK(meta3 == meta2 && body3 == body2);
  /* Every meta byte written: the same bytes over other garbage. */
  unsigned char *g = malloc(meta2 ? meta2 : 1);
  CHECK(g);
  memset(g, 0x5A, meta2);
  CHECK(dist__rpc_encode_meta(m, g, meta2, &meta3, &body3) == DIST_SUCCESS);
  CHECK(!memcmp(g, b, meta2));
  free(g);
  size_t at = meta2;
  for (int i = 0; i < m->ntensors; i++) {
    size_t n = nbytes(&m->t[i]);
    if (n) memcpy(b + at, m->t[i].data, n);
    memset(b + at + n, 0, dist__rpc_pad(n) - n);
    at += dist__rpc_pad(n);
  }
  CHECK(at == body2);
  dist__rpc_msg d;
  CHECK(dist__rpc_decode(b, body2, &d) == DIST_SUCCESS);
  CHECK(d.name_len == m->name_len && !memcmp(d.name, m->name, m->name_len));
  CHECK(d.extra_len == m->extra_len && !memcmp(d.extra, m->extra, m->extra_len));
  CHECK(d.ntensors == m->ntensors);
  for (int i = 0; i < m->ntensors; i++) {
    const dist_tensor *a = &m->t[i], *t = &d.t[i];
    CHECK(t->dtype == a->dtype && t->ndim == a->ndim && t->memory == a->memory);
    CHECK(!memcmp(t->shape, a->shape, sizeof t->shape));
    size_t n = nbytes(a);
    CHECK((t->data == NULL) == (a->data == NULL));
    if (n) CHECK(!memcmp(t->data, a->data, n));
  }
  free(b);
}

/* The whole input as a tiny message (wire.h): a decoded one holds at most
 * one tensor of rank 0 or 1 and 8 bytes inside the message, and encodes
 * back to the same 24 bytes. */
static void check_tiny(const uint8_t *data, size_t size) {
  dist__rpc_tiny h;
  dist_tensor t;
  if (dist__rpc_tiny_decode(data, size, &h, &t)) {
    CHECK(dist_last_error()[0] != 0);
    return;
  }
  CHECK(size == DIST__RPC_TINY_BYTES);
  CHECK(h.kind == DIST__RPC_REQUEST || h.kind == DIST__RPC_REPLY);
  CHECK(h.ntensors == 0 || h.ntensors == 1);
  if (h.ntensors) {
    CHECK((int)t.dtype >= 0 && (int)t.dtype < DIST_DTYPE_COUNT && t.ndim >= 0 && t.ndim <= 1);
    size_t n = dist_tensor_nbytes(&t);
    CHECK(n <= DIST__RPC_TINY_DATA && n == nbytes(&t));
    CHECK(n ? t.data == data + 16 : t.data == NULL);
  }
  unsigned char again[DIST__RPC_TINY_BYTES];
  dist__rpc_tiny_encode(again, &h, &t);
  CHECK(!memcmp(again, data, DIST__RPC_TINY_BYTES));
}

/* The decoder's memo, kept from one input to the next (so that inputs with
 * the same meta part hit it): what the plain decoder says, field by field. */
static dist__rpc_dcache memo;
static void check_memo(const unsigned char *body, size_t len, dist_status plain, const dist__rpc_msg *m) {
  dist__rpc_msg d;
  CHECK(dist__rpc_decode_cached(&memo, body, len, &d, d.t) == plain);
  if (plain) return;
  CHECK(d.name_len == m->name_len && d.name == m->name && d.extra_len == m->extra_len && d.extra == m->extra);
  CHECK(d.ntensors == m->ntensors);
  for (int i = 0; i < m->ntensors; i++) CHECK(!memcmp(&d.t[i], &m->t[i], sizeof d.t[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_tiny(data, size);
  size_t hn = size < sizeof(dist__rpc_header) ? size : sizeof(dist__rpc_header);
  check_header(data, hn);
  size_t len = size - hn;
  unsigned char *body = NULL;
  CHECK(!posix_memalign((void **)&body, DIST__RPC_ALIGN, len ? len : 1));
  if (len) memcpy(body, data + hn, len);
  dist__rpc_msg m;
  dist_status plain = dist__rpc_decode(body, len, &m);
  if (plain == DIST_SUCCESS) {
    size_t meta = check_msg(&m, body, len);
    round_trip(&m, meta, len);
  } else {
    CHECK(dist_last_error()[0] != 0);
  }
  check_memo(body, len, plain, &m);
  free(body);
  return 0;
}
