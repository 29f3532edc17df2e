/* Encoding and checking the messages of remote calls (wire.h). */
#include <string.h>

#include "core/internal.h"
#include "rpc/wire.h"

/* Writer/reader over a bounded buffer; a writer with no buffer only counts. */
typedef struct cursor {
  unsigned char *w;
  const unsigned char *r;
  size_t at, cap;
} cursor;

/* Appends n bytes of p (NULL when n is 0: a reply's name, absent options). */
static void put(cursor *c, const void *p, size_t n) {
  if (n && c->w && c->at + n <= c->cap) memcpy(c->w + c->at, p, n);
  c->at += n;
}

/* Zeros up to the next multiple of a (at most 8): no stale bytes on the wire. */
static void put_align(cursor *c, size_t a) {
  static const unsigned char zeros[8];
  put(c, zeros, ((c->at + a - 1) & ~(a - 1)) - c->at);
}

/* n (bytes so far) times one more extent, each product within INT64_MAX as
 * both ends check it (a zero extent makes 0). 0: negative or too large. */
static int times_extent(size_t *n, int64_t extent) {
  uint64_t e = (uint64_t)extent, nn;
  if (extent < 0 || (e && (__builtin_mul_overflow((uint64_t)*n, e, &nn) || nn > (uint64_t)INT64_MAX))) return 0;
  *n = e ? (size_t)nn : 0;
  return 1;
}

dist_status dist__rpc_encode_meta(const dist__rpc_msg *m, void *buf, size_t cap, size_t *meta_len,
                                  size_t *body_len) {
  return dist__rpc_encode_meta_n(m, buf, cap, meta_len, body_len, NULL);
}

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
  cursor c = {buf, NULL, 0, buf ? cap : 0};
  uint32_t u = (uint32_t)m->name_len;
  put(&c, &u, 4);
  put(&c, m->name, m->name_len);
  put_align(&c, 4);
  uint32_t counts[2] = {(uint32_t)m->ntensors, (uint32_t)m->extra_len};
  put(&c, counts, 8);
  size_t data = 0;
  const dist_tensor *ts = dist__rpc_msg_tensors(m);
  for (int i = 0; i < m->ntensors; i++) {
    const dist_tensor *t = &ts[i];
    size_t n = dist_dtype_size(t->dtype);
    if (!n || t->ndim < 0 || t->ndim > DIST_TENSOR_MAX_DIMS)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: tensor %d has dtype %d and %d dims", i,
                         (int)t->dtype, t->ndim);
    for (int k = 0; k < t->ndim; k++) /* the receiver's limits */
      if (!times_extent(&n, t->shape[k]))
        return dist__error(DIST_ERR_INVALID_ARGUMENT, "remote call: tensor %d has extent %lld in dim %d", i,
                           (long long)t->shape[k], k);
    uint32_t d[2] = {(uint32_t)t->dtype, (uint32_t)t->ndim};
    put(&c, d, 8);
    put_align(&c, 8);
    put(&c, t->shape, 8 * (size_t)t->ndim);
    if (nbytes) nbytes[i] = n;
    data += dist__rpc_pad(n);
  }
  put(&c, m->extra, m->extra_len);
  size_t meta = dist__rpc_pad(c.at);
  *meta_len = meta;
  *body_len = meta + data;
  if (buf && meta > cap) return DIST_ERR_BUFFER_TOO_SMALL; /* measured: the caller retries */
  if (buf) memset((unsigned char *)buf + c.at, 0, meta - c.at);
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

/* Reads n bytes at the cursor, or fails naming `what`. */
static inline __attribute__((always_inline)) const void *take(cursor *c, size_t n, size_t align, const char *what, dist_status *s) {
  if (*s) return NULL;
  size_t at = (c->at + align - 1) & ~(align - 1);
  if (at < c->at || at > c->cap || n > c->cap - at) {
    *s = dist__error(DIST_ERR_CORRUPT, "remote call: message truncated in %s (%zu bytes of %zu)", what, c->cap,
                     at + n);
    return NULL;
  }
  c->at = at + n;
  return c->r + at;
}

dist_status dist__rpc_decode(const void *body, size_t len, dist__rpc_msg *m) {
  return dist__rpc_decode_into(body, len, m, m->t);
}

dist_status dist__rpc_decode_into(const void *body, size_t len, dist__rpc_msg *m, dist_tensor *ts) {
  dist__rpc_msg_clear(m);
  if (ts != m->t) m->src = ts;
  cursor c = {NULL, body, 0, len};
  dist_status s = DIST_SUCCESS;
  uint32_t u;
  const void *p = take(&c, 4, 1, "the name's length", &s);
  if (s) return s;
  memcpy(&u, p, 4);
  if (u > DIST_RPC_MAX_NAME) return dist__error(DIST_ERR_CORRUPT, "remote call: a name of %u bytes", (unsigned)u);
  m->name_len = u;
  m->name = take(&c, u, 1, "the name", &s);
  for (uint32_t k = 0; !s && k < u; k++) /* a loop: names are short, a memchr call was 3 % of a call */
    if (!m->name[k]) return dist__error(DIST_ERR_CORRUPT, "remote call: a name with a NUL byte");
  uint32_t counts[2];
  p = take(&c, 8, 4, "the tensor count", &s);
  if (s) return s;
  memcpy(counts, p, 8);
  if (counts[0] > DIST_RPC_MAX_ARGS) return dist__error(DIST_ERR_CORRUPT, "remote call: %u tensors", (unsigned)counts[0]);
  if (counts[1] > DIST__RPC_EXTRA_MAX) return dist__error(DIST_ERR_CORRUPT, "remote call: %u extra bytes", (unsigned)counts[1]);
  m->ntensors = (int)counts[0];
  size_t data = 0, nbytes[DIST_RPC_MAX_ARGS];
  for (int i = 0; i < m->ntensors && !s; i++) {
    uint32_t d[2];
    if (!(p = take(&c, 8, 4, "a tensor's dtype", &s))) break;
    memcpy(d, p, 8);
    if (d[0] >= DIST_DTYPE_COUNT || d[1] > DIST_TENSOR_MAX_DIMS)
      return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d has dtype %u and %u dims", i, (unsigned)d[0],
                         (unsigned)d[1]);
    dist_tensor *t = &ts[i];
    /* Field by field: a memset of the 88 bytes was a slow `rep stos` on
     * every call. */
    t->data = NULL;
    t->dtype = (dist_dtype)d[0];
    t->memory = DIST_MEM_HOST;
    t->device = 0;
    t->ndim = (int)d[1];
    if (!(p = take(&c, 8 * (size_t)t->ndim, 8, "a tensor's shape", &s))) break;
    memcpy(t->shape, p, 8 * (size_t)t->ndim);
    for (int k = t->ndim; k < DIST_TENSOR_MAX_DIMS; k++) t->shape[k] = 0;
    size_t n = dist_dtype_size(t->dtype);
    for (int k = 0; k < t->ndim; k++)
      if (!times_extent(&n, t->shape[k]))
        return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d has extent %lld in dim %d", i,
                           (long long)t->shape[k], k);
    if (dist__rpc_pad(n) < n || data + dist__rpc_pad(n) < data || data + dist__rpc_pad(n) > len)
      return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d's %zu bytes exceed the message", i, n);
    data += dist__rpc_pad(n);
    nbytes[i] = n;
  }
  if (s) return s;
  m->extra_len = counts[1];
  m->extra = take(&c, m->extra_len, 1, "the extra bytes", &s);
  if (s) return s;
  size_t meta = dist__rpc_pad(c.at);
  if (meta > len || len - meta != data)
    return dist__error(DIST_ERR_CORRUPT, "remote call: %zu bytes of tensor data where the descriptors say %zu",
                       meta > len ? 0 : len - meta, data);
  const unsigned char *at = (const unsigned char *)body + meta;
  for (int i = 0; i < m->ntensors; i++) {
    ts[i].data = nbytes[i] ? (void *)at : NULL;
    at += dist__rpc_pad(nbytes[i]);
  }
  return DIST_SUCCESS;
}
