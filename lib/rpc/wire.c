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
    for (int k = 0; k < t->ndim; k++) memcpy(w + sh + 8 * (size_t)k, &t->shape[k], 8); /* no memcpy call */
    at = sh + 8 * (size_t)t->ndim;
  }
  if (m->extra_len) memcpy(w + at, m->extra, m->extra_len);
  return DIST_SUCCESS;
}

/* The encoder's refusal of a message that no buffer could take: the same
 * checks and messages as dist__rpc_encode_meta_n, which it runs. */
static dist_status refuse(const dist__rpc_msg *m) {
  size_t meta, body;
  dist_status s = dist__rpc_encode_meta_n(m, NULL, 0, &meta, &body, NULL);
  return s ? s : dist__error(DIST_ERR_INTERNAL, "remote call: the message encodes after all");
}

/* One pass, fields written as they are checked. The gaps are zeroed by
 * fixed-size stores that the fields after them overwrite: 4 bytes after the
 * name and after each dtype/rank pair, 16 at the end of the meta part (or a
 * memset when the gap there is longer), 16 at the end of each tensor's
 * padded data. Every store stays 16 bytes short of cap: a body that fills
 * the last 16 bytes goes the long way. */
dist_status dist__rpc_encode_body(const dist__rpc_msg *m, void *buf, size_t cap, size_t *body_len) {
  size_t u = m->name_len, xl = m->extra_len;
  int nt = m->ntensors;
  if (u > DIST_RPC_MAX_NAME || nt < 0 || nt > DIST_RPC_MAX_ARGS || xl > DIST__RPC_EXTRA_MAX) return refuse(m);
  unsigned char *w = buf;
  const dist_tensor *ts = dist__rpc_msg_tensors(m);
  const uint32_t zero = 0;
  size_t at = align_up(4 + u, 4), nbytes[DIST_RPC_MAX_ARGS], data = 0;
  if (at + 8 + 16 > cap) return DIST_ERR_BUFFER_TOO_SMALL;
  uint32_t u32 = (uint32_t)u, counts[2] = {(uint32_t)nt, (uint32_t)xl};
  memcpy(w, &u32, 4);
  memcpy(w + 4 + u, &zero, 4);
  if (u) memcpy(w + 4, m->name, u);
  memcpy(w + at, counts, 8);
  at += 8;
  for (int i = 0; i < nt; i++) {
    const dist_tensor *t = &ts[i];
    size_t n = dist__dtype_size(t->dtype), nd = (size_t)t->ndim;
    if (!n || nd > DIST_TENSOR_MAX_DIMS) return refuse(m);
    size_t sh = align_up(at + 8, 8);
    if (sh + 8 * nd + 16 > cap) return DIST_ERR_BUFFER_TOO_SMALL;
    uint32_t d[2] = {(uint32_t)t->dtype, (uint32_t)nd};
    memcpy(w + at, d, 8);
    memcpy(w + at + 8, &zero, 4);
    for (size_t k = 0; k < nd; k++) {
      if (!times_extent(&n, t->shape[k])) return refuse(m);
      memcpy(w + sh + 8 * k, &t->shape[k], 8);
    }
    if (n && !t->data) return refuse(m);
    nbytes[i] = n;
    data += dist__rpc_pad(n);
    at = sh + 8 * nd;
  }
  size_t meta = dist__rpc_pad(at + xl);
  if (meta + data + 16 > cap) return DIST_ERR_BUFFER_TOO_SMALL;
  if (meta - at <= 16) memset(w + at, 0, 16);
  else memset(w + at, 0, meta - at);
  if (xl) memcpy(w + at, m->extra, xl);
  unsigned char *p = w + meta;
  for (int i = 0; i < nt; i++) {
    size_t n = nbytes[i], padded = dist__rpc_pad(n);
    if (padded) memset(p + padded - 16, 0, 16);
    if (n) memcpy(p, ts[i].data, n);
    p += padded;
  }
  *body_len = meta + data;
  return DIST_SUCCESS;
}

dist_status dist__rpc_header_refused(const dist__rpc_header *h, size_t hdr_len) {
  if (!h)
    return dist__error(DIST_ERR_CORRUPT, "remote call: a message header of %zu bytes (expected %zu)", hdr_len,
                       sizeof *h);
  if (h->magic != DIST__RPC_MAGIC || h->version != DIST__RPC_VERSION)
    return dist__error(DIST_ERR_CORRUPT, "remote call: not a distmgr message (magic %#x, version %u; expected %#x, %u)",
                       (unsigned)h->magic, (unsigned)h->version, DIST__RPC_MAGIC, DIST__RPC_VERSION);
  return dist__error(DIST_ERR_CORRUPT, "remote call: unknown message kind %u", (unsigned)h->kind);
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

/* The decoder; *meta_len: the meta part's length. Every offset is checked
 * against len before it is read; the fields are read with fixed-size copies
 * (the general cursor it replaced was 250 instructions for an 8 B call,
 * callgrind). */
static dist_status decode(const void *body, size_t len, dist__rpc_msg *m, dist_tensor *ts, size_t *meta_len) {
  const unsigned char *b = body;
  /* Every field of m is written below (no clear first); the tensors only up
   * to ntensors. */
  m->src = ts != m->t ? ts : NULL;
  m->name = NULL;
  m->name_len = 0;
  m->ntensors = 0;
  m->extra_len = 0;
  m->extra = NULL;
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
  int nt = (int)counts[0];
  size_t data = 0, nbytes[DIST_RPC_MAX_ARGS];
  for (int i = 0; i < nt; i++) {
    uint32_t d[2];
    if (!fits(at, 8, len)) return truncated("a tensor's dtype", len, at, 8);
    memcpy(d, b + at, 8);
    if (d[0] >= DIST_DTYPE_COUNT || d[1] > DIST_TENSOR_MAX_DIMS)
      return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d has dtype %u and %u dims", i, (unsigned)d[0],
                         (unsigned)d[1]);
    size_t sh = align_up(at + 8, 8), nd = d[1];
    if (!fits(sh, 8 * nd, len)) return truncated("a tensor's shape", len, sh, 8 * nd);
    dist_tensor *t = &ts[i];
    /* Field by field: a memset of the 88 bytes was a slow `rep stos`. The
     * unused extents zeroed by fixed-size stores, the used ones copied in
     * the loop that checks them (no memcpy call of a variable size). */
    t->dtype = (dist_dtype)d[0];
    t->memory = DIST_MEM_HOST;
    t->device = 0;
    t->ndim = (int)nd;
    memset(t->shape, 0, sizeof t->shape);
    size_t n = dist__dtype_size(t->dtype);
    for (size_t k = 0; k < nd; k++) {
      memcpy(&t->shape[k], b + sh + 8 * k, 8);
      if (!times_extent(&n, t->shape[k]))
        return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d has extent %lld in dim %d", i,
                           (long long)t->shape[k], (int)k);
    }
    at = sh + 8 * nd;
    size_t padded = dist__rpc_pad(n);
    if (padded < n || data + padded < data || data + padded > len)
      return dist__error(DIST_ERR_CORRUPT, "remote call: tensor %d's %zu bytes exceed the message", i, n);
    nbytes[i] = n;
    data += padded;
  }
  m->ntensors = nt;
  if (!fits(at, counts[1], len)) return truncated("the extra bytes", len, at, counts[1]);
  m->extra_len = counts[1];
  m->extra = b + at;
  size_t meta = dist__rpc_pad(at + counts[1]);
  if (meta > len || len - meta != data)
    return dist__error(DIST_ERR_CORRUPT, "remote call: %zu bytes of tensor data where the descriptors say %zu",
                       meta > len ? 0 : len - meta, data);
  const unsigned char *p = b + meta;
  for (int i = 0; i < nt; i++) {
    ts[i].data = nbytes[i] ? (void *)p : NULL;
    p += dist__rpc_pad(nbytes[i]);
  }
  *meta_len = meta;
  return DIST_SUCCESS;
}

dist_status dist__rpc_decode_into(const void *body, size_t len, dist__rpc_msg *m, dist_tensor *ts) {
  size_t meta;
  return decode(body, len, m, ts, &meta);
}

/* A hit needs the same length and the same meta bytes: the decoder reads
 * nothing else (the data part's bytes are only pointed at), so it would give
 * the same fields, offsets and checks' outcome. Filled only from a message
 * that decoded. */
dist_status dist__rpc_decode_cached(dist__rpc_dcache *c, const void *body, size_t len, dist__rpc_msg *m,
                                    dist_tensor *ts) {
  const unsigned char *b = body;
  if (c->meta && len == c->len && !memcmp(b, c->bytes, c->meta)) {
    m->src = ts != m->t ? ts : NULL;
    m->name = (const char *)b + 4;
    m->name_len = c->name_len;
    m->extra = b + c->extra_at;
    m->extra_len = c->extra_len;
    m->ntensors = c->ntensors;
    for (int i = 0; i < c->ntensors; i++) {
      ts[i] = c->t[i];
      ts[i].data = c->data_at[i] ? (void *)(b + c->data_at[i]) : NULL;
    }
    return DIST_SUCCESS;
  }
  size_t meta;
  dist_status s = decode(body, len, m, ts, &meta);
  c->meta = 0;
  if (s || meta > sizeof c->bytes || m->ntensors > DIST__RPC_DCACHE_TENSORS) return s;
  memcpy(c->bytes, b, meta);
  c->len = len;
  c->name_len = (uint32_t)m->name_len;
  c->extra_at = (uint32_t)((const unsigned char *)m->extra - b);
  c->extra_len = (uint32_t)m->extra_len;
  c->ntensors = m->ntensors;
  for (int i = 0; i < m->ntensors; i++) {
    c->t[i] = ts[i];
    c->data_at[i] = ts[i].data ? (size_t)((const unsigned char *)ts[i].data - b) : 0; /* never 0: after the meta part */
    c->t[i].data = NULL;
  }
  c->meta = meta;
  return DIST_SUCCESS;
}

/* ---- tiny messages (wire.h) ---------------------------------------------------- */

dist_status dist__rpc_tiny_decode(const void *buf, size_t len, dist__rpc_tiny *h, dist_tensor *t) {
  const unsigned char *b = buf;
  if (len != DIST__RPC_TINY_BYTES)
    return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny message of %zu bytes (expected %d)", len,
                       DIST__RPC_TINY_BYTES);
  if (b[11] != DIST__RPC_TINY_MAGIC || (b[12] != DIST__RPC_REQUEST && b[12] != DIST__RPC_REPLY))
    return dist__error(DIST_ERR_CORRUPT, "remote call: not a tiny distmgr message (magic %#x, kind %u)",
                       (unsigned)b[11], (unsigned)b[12]);
  uint16_t caller;
  memcpy(&h->call_id, b, 8);
  memcpy(&caller, b + 8, 2);
  h->kind = (dist__rpc_kind)b[12];
  h->caller = caller;
  h->fn = b[10];
  if (h->kind == DIST__RPC_REPLY && (caller || b[10]))
    return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny reply with a caller or function");
  unsigned dt = b[13], nd = b[14], ext = b[15];
  size_t n = 0;
  if (dt == DIST__RPC_TINY_NONE) {
    if (nd || ext) return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny message without a tensor has a shape");
    h->ntensors = 0;
  } else {
    n = dt < DIST_DTYPE_COUNT ? dist__dtype_size((dist_dtype)dt) : 0;
    if (!n || nd > 1 || (!nd && ext))
      return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny tensor of dtype %u, rank %u, extent %u", dt, nd, ext);
    if (nd) n *= ext;
    if (n > DIST__RPC_TINY_DATA)
      return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny tensor of %zu bytes (at most %d)", n,
                         DIST__RPC_TINY_DATA);
    h->ntensors = 1;
    t->data = n ? (void *)(b + 16) : NULL;
    t->dtype = (dist_dtype)dt;
    t->memory = DIST_MEM_HOST;
    t->device = 0;
    t->ndim = (int)nd;
    memset(t->shape, 0, sizeof t->shape);
    t->shape[0] = nd ? (int64_t)ext : 0;
  }
  uint64_t pad; /* the data's 8 bytes, little-endian: those past n are the high ones */
  memcpy(&pad, b + 16, 8);
  if (n < 8 && pad >> (8 * n)) return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny message's padding is not zero");
  return DIST_SUCCESS;
}
