/* Encoding and checking the messages of remote calls (wire.h). */
#include <string.h>

#include "core/internal.h"
#include "mem/dtype.h"
#include "rpc/wire.h"

/* n (bytes so far) times one more extent, each product within INT64_MAX as
 * both ends check it (a zero extent makes 0). 0: negative or too large. */
static inline int times_extent(size_t *n, int64_t extent) {
  uint64_t e = (uint64_t)extent, nn;
  if (extent < 0 || (e && (__builtin_mul_overflow((uint64_t)*n, e, &nn) || nn > (uint64_t)INT64_MAX))) return 0;
  *n = e ? (size_t)nn : 0;
  return 1;
}

static inline size_t align_up(size_t at, size_t a) { return (at + a - 1) & ~(a - 1); }

dist_status dist__rpc_encode_meta(const dist__rpc_msg *m, void *buf, size_t cap, size_t *meta_len,
                                  size_t *body_len) {
  return dist__rpc_encode_meta_n(m, buf, cap, meta_len, body_len, NULL);
}

/* Measures first (every check there, and each tensor's bytes), then writes
 * field by field with fixed-size copies: the general writer it replaced, a
 * bounds check and a memcpy call per field, was 175 instructions for an 8 B
 * call (callgrind, bench/RESULTS.md "bench/rpc"). */
dist_status dist__rpc_encode_meta_n(const dist__rpc_msg *m, void *buf, size_t cap, size_t *meta_len,
                                    size_t *body_len, size_t *nbytes) {
  if (m->name_len > DIST_RPC_MAX_NAME)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: function name of %zu bytes (at most %d)", m->name_len,
                       DIST_RPC_MAX_NAME);
  if (m->ntensors < 0 || m->ntensors > DIST_RPC_MAX_ARGS)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: %d tensors (at most %d)", m->ntensors,
                       DIST_RPC_MAX_ARGS);
  if (m->extra_len > DIST__RPC_EXTRA_MAX)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: %zu option bytes (at most %u)", m->extra_len,
                       DIST__RPC_EXTRA_MAX);
  const dist_tensor *ts = dist__rpc_msg_tensors(m);
  size_t local[DIST_RPC_MAX_ARGS], *nb = nbytes ? nbytes : local;
  size_t at = align_up(4 + m->name_len, 4) + 8, data = 0;
  for (int i = 0; i < m->ntensors; i++) {
    const dist_tensor *t = &ts[i];
    size_t n = dist__dtype_size(t->dtype);
    if (!n || t->ndim < 0 || t->ndim > DIST_TENSOR_MAX_DIMS)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: tensor %d has dtype %d and %d dims", i,
                         (int)t->dtype, t->ndim);
    for (int k = 0; k < t->ndim; k++) /* the receiver's limits */
      if (!times_extent(&n, t->shape[k]))
        return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: tensor %d has extent %lld in dim %d", i,
                           (long long)t->shape[k], k);
    if (n && !t->data) return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: tensor %d has no data", i);
    nb[i] = n;
    data += dist__rpc_pad(n);
    at = align_up(at + 8, 8) + 8 * (size_t)t->ndim;
  }
  size_t meta = dist__rpc_pad(at + m->extra_len);
  *meta_len = meta;
  *body_len = meta + data;
  if (!buf) return DIST_SUCCESS;
  if (meta > cap) return DIST_ERR_BUFFER_TOO_SMALL; /* measured: the caller retries */
  unsigned char *w = buf;
  /* The gaps (alignment, the final padding) zero: the whole meta part
   * zeroed first, by fixed-size stores when it is small, then the fields
   * written over it. No stale bytes on the wire. */
  if (meta <= 64 && cap >= 64) memset(w, 0, 64);
  else memset(w, 0, meta);
  uint32_t u = (uint32_t)m->name_len, counts[2] = {(uint32_t)m->ntensors, (uint32_t)m->extra_len};
  memcpy(w, &u, 4);
  if (u) memcpy(w + 4, m->name, u);
  at = align_up(4 + u, 4);
  memcpy(w + at, counts, 8);
  at += 8;
  for (int i = 0; i < m->ntensors; i++) {
    const dist_tensor *t = &ts[i];
    uint32_t d[2] = {(uint32_t)t->dtype, (uint32_t)t->ndim};
    memcpy(w + at, d, 8);
    size_t sh = align_up(at + 8, 8);
    size_t sb = 8 * (size_t)t->ndim;
    memcpy(w + sh, t->shape, sb);
    at = sh + sb;
  }
  if (m->extra_len) memcpy(w + at, m->extra, m->extra_len);
  return DIST_SUCCESS;
}

dist_status dist__rpc_check_header(const void *hdr, size_t hdr_len, dist__rpc_header *out) {
  if (!hdr || hdr_len != sizeof *out)
    return dist__error(DIST_ERR_CORRUPT, "remote call: a message header of %zu bytes (expected %zu)", hdr_len,
                       sizeof *out);
  memcpy(out, hdr, sizeof *out);
  if (out->magic != DIST__RPC_MAGIC || out->version != DIST__RPC_VERSION)
    return dist__error(DIST_ERR_CORRUPT, "remote call: not a distmgr message (magic %#x, version %u; expected %#x, %u)",
                       (unsigned)out->magic, (unsigned)out->version, DIST__RPC_MAGIC, DIST__RPC_VERSION);
  if (out->kind < DIST__RPC_REQUEST || out->kind >= DIST__RPC_KINDS)
    return dist__error(DIST_ERR_CORRUPT, "remote call: unknown message kind %u", (unsigned)out->kind);
  return DIST_SUCCESS;
}

/* A message that ends before `what` (n bytes wanted at offset at). */
static dist_status truncated(const char *what, size_t len, size_t at, size_t n) {
  return dist__error(DIST_ERR_CORRUPT, "remote call: message truncated in %s (%zu bytes of %zu)", what, len, at + n);
}

/* 1 when n bytes at offset at (at <= len or not) lie within len. */
static inline int fits(size_t at, size_t n, size_t len) { return at <= len && n <= len - at; }

dist_status dist__rpc_decode(const void *body, size_t len, dist__rpc_msg *m) {
  return dist__rpc_decode_into(body, len, m, m->t);
}

/* Every offset is checked against len before it is read; the fields are
 * read with fixed-size copies (the general cursor it replaced was 250
 * instructions for an 8 B call, callgrind). */
dist_status dist__rpc_decode_into(const void *body, size_t len, dist__rpc_msg *m, dist_tensor *ts) {
  const unsigned char *b = body;
  dist__rpc_msg_clear(m);
  if (ts != m->t) m->src = ts;
  uint32_t u, counts[2];
  if (!fits(0, 4, len)) return truncated("the name's length", len, 0, 4);
  memcpy(&u, b, 4);
  if (u > DIST_RPC_MAX_NAME) return dist__error(DIST_ERR_CORRUPT, "remote call: a name of %u bytes", (unsigned)u);
  if (!fits(4, u, len)) return truncated("the name", len, 4, u);
  m->name = (const char *)b + 4;
  m->name_len = u;
  for (uint32_t k = 0; k < u; k++) /* a loop: names are short, a memchr call was 3 % of a call */
    if (!m->name[k]) return dist__error(DIST_ERR_CORRUPT, "remote call: a name with a NUL byte");
  size_t at = align_up(4 + (size_t)u, 4);
  if (!fits(at, 8, len)) return truncated("the tensor count", len, at, 8);
  memcpy(counts, b + at, 8);
  at += 8;
  if (counts[0] > DIST_RPC_MAX_ARGS) return dist__error(DIST_ERR_CORRUPT, "remote call: %u tensors", (unsigned)counts[0]);
  if (counts[1] > DIST__RPC_EXTRA_MAX) return dist__error(DIST_ERR_CORRUPT, "remote call: %u extra bytes", (unsigned)counts[1]);
  m->ntensors = (int)counts[0];
  size_t data = 0, nbytes[DIST_RPC_MAX_ARGS];
  for (int i = 0; i < m->ntensors; i++) {
    uint32_t d[2];
    if (!fits(at, 8, len)) return truncated("a tensor's dtype", len, at, 8);
    memcpy(d, b + at, 8);
    if (d[0] >= DIST_DTYPE_COUNT || d[1] > DIST_TENSOR_MAX_DIMS)
      return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d has dtype %u and %u dims", i, (unsigned)d[0],
                         (unsigned)d[1]);
    size_t sh = align_up(at + 8, 8), sb = 8 * (size_t)d[1];
    if (!fits(sh, sb, len)) return truncated("a tensor's shape", len, sh, sb);
    dist_tensor *t = &ts[i];
    /* Field by field: a memset of the 88 bytes was a slow `rep stos`. */
    t->data = NULL;
    t->dtype = (dist_dtype)d[0];
    t->memory = DIST_MEM_HOST;
    t->device = 0;
    t->ndim = (int)d[1];
    /* The unused extents zeroed by fixed-size stores first (a loop over
     * them was 66 instructions, callgrind). */
    memset(t->shape, 0, sizeof t->shape);
    memcpy(t->shape, b + sh, sb);
    at = sh + sb;
    size_t n = dist__dtype_size(t->dtype);
    for (int k = 0; k < t->ndim; k++)
      if (!times_extent(&n, t->shape[k]))
        return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d has extent %lld in dim %d", i,
                           (long long)t->shape[k], k);
    if (dist__rpc_pad(n) < n || data + dist__rpc_pad(n) < data || data + dist__rpc_pad(n) > len)
      return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d's %zu bytes exceed the message", i, n);
    data += dist__rpc_pad(n);
    nbytes[i] = n;
  }
  m->extra_len = counts[1];
  if (!fits(at, m->extra_len, len)) return truncated("the extra bytes", len, at, m->extra_len);
  m->extra = b + at;
  at += m->extra_len;
  size_t meta = dist__rpc_pad(at);
  if (meta > len || len - meta != data)
    return dist__error(DIST_ERR_CORRUPT, "remote call: %zu bytes of tensor data where the descriptors say %zu",
                       meta > len ? 0 : len - meta, data);
  const unsigned char *p = b + meta;
  for (int i = 0; i < m->ntensors; i++) {
    ts[i].data = nbytes[i] ? (void *)p : NULL;
    p += dist__rpc_pad(nbytes[i]);
  }
  return DIST_SUCCESS;
}
