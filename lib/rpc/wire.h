/* The messages of remote calls: a fixed header and a body (the general
 * layout), or a tiny message of 24 bytes (the end of this file). Pure and
 * bounded: the decoders check every length against the message they got
 * before they read, and are fuzzed (tests/fuzz/fuzz_rpc.c).
 *
 * The header is 16 bytes: UCX's active-message header for a message sent
 * the long way, the first 16 bytes of the data for one sent from the stack
 * (rpc_internal.h). The body of a small call (a name of up to 12 bytes, one
 * tensor of up to 16 bytes) is at most 64: UCX's shared-memory transport
 * sends 80 bytes with its "short" protocol, 0.13 us a send faster than the
 * copy protocol it takes for 96 (bench/RESULTS.md, "bench/rpc"). The body's
 * length is UCX's (less the header's, when it travels in the data).
 *
 * Body, little-endian, every field at its natural alignment:
 *   u32 name_len, name bytes (requests; 0 in replies)
 *   u32 ntensors, u32 extra_len
 *   per tensor: u32 dtype, u32 ndim, i64 shape[ndim]
 *   extra bytes (a request's options, a reply's error message)
 *   zero padding to 16 bytes: the end of the "meta" part
 *   each tensor's data, padded to 16 bytes. */
#ifndef DISTMGR_RPC_WIRE_H
#define DISTMGR_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "distmgr/rpc.h"
#include "mem/dtype.h"

#define DIST__RPC_MAGIC 0x5244u /* "DR" */
#define DIST__RPC_VERSION 2
#define DIST__RPC_BODY_MAX ((uint64_t)1 << 40) /* bytes of a body the engine accepts */
#define DIST__RPC_ALIGN 16
#define DIST__RPC_EXTRA_MAX (1u << 20) /* options or message bytes */

typedef enum dist__rpc_kind {
  DIST__RPC_REQUEST = 1, /* call a function */
  DIST__RPC_VJP,         /* call a function's vector-Jacobian product */
  DIST__RPC_REPLY,
  DIST__RPC_KINDS
} dist__rpc_kind;

typedef struct dist__rpc_header {
  uint16_t magic;
  uint8_t version, kind;
  union {
    int32_t caller; /* a request's: the world rank of its sender */
    int32_t status; /* a reply's: the call's dist_status */
  };
  uint64_t call_id; /* the caller's, echoed by the reply */
} dist__rpc_header;

/* A message's parts, as encoded or decoded. Decoded tensors view the body.
 * The tensors come last and are read up to ntensors only: clearing a
 * message (dist__rpc_msg_clear) leaves their 1.4 KB alone, on every call. */
typedef struct dist__rpc_msg {
  const char *name;
  size_t name_len;
  int ntensors;
  const void *extra;
  size_t extra_len;
  /* The tensors when they are elsewhere (a call's arguments, a function's
   * outputs, a decode into a future), not copied into t; NULL: t. */
  const dist_tensor *src;
  dist_tensor t[DIST_RPC_MAX_ARGS];
} dist__rpc_msg;

static inline const dist_tensor *dist__rpc_msg_tensors(const dist__rpc_msg *m) { return m->src ? m->src : m->t; }

static inline void dist__rpc_msg_clear(dist__rpc_msg *m) { memset(m, 0, offsetof(dist__rpc_msg, t)); }

/* The meta part of m (name, descriptors, extra, padding) into buf (cap
 * bytes; NULL to measure): its length in *meta_len, the whole body's in
 * *body_len. DIST_ERR_INVALID_ARGUMENT names what does not fit a message;
 * DIST_ERR_BUFFER_TOO_SMALL, with no message and the lengths measured: buf
 * is smaller than the meta part (try a buffer first, measure only if it
 * does not fit: one pass for most messages). */
dist_status dist__rpc_encode_meta(const dist__rpc_msg *m, void *buf, size_t cap, size_t *meta_len,
                                  size_t *body_len);

/* The same, with each tensor's data bytes in nbytes[ntensors] (when not
 * NULL): the packing sender's, without measuring every tensor twice. */
dist_status dist__rpc_encode_meta_n(const dist__rpc_msg *m, void *buf, size_t cap, size_t *meta_len,
                                    size_t *body_len, size_t *nbytes);

/* The whole body of m (meta part and data) into buf in one pass, when it
 * fits with 16 bytes to spare (cap: buf's bytes); its length in *body_len.
 * DIST_ERR_BUFFER_TOO_SMALL, with no message, when it does not (buf's
 * contents are then undefined; send it the long way); the same
 * DIST_ERR_INVALID_ARGUMENT as dist__rpc_encode_meta when it cannot be
 * encoded. For small messages (send_now.c). */
dist_status dist__rpc_encode_body(const dist__rpc_msg *m, void *buf, size_t cap, size_t *body_len);

/* Padded size of n data bytes. */
static inline size_t dist__rpc_pad(size_t n) { return (n + DIST__RPC_ALIGN - 1) & ~(size_t)(DIST__RPC_ALIGN - 1); }

/* Checks a header: its length, magic, version and kind. Inline for the
 * header that passes; the one that does not gets its message out of line. */
dist_status dist__rpc_header_refused(const dist__rpc_header *h, size_t hdr_len);
static inline dist_status dist__rpc_check_header(const void *hdr, size_t hdr_len, dist__rpc_header *out) {
  if (!hdr || hdr_len != sizeof *out) return dist__rpc_header_refused(NULL, hdr_len);
  memcpy(out, hdr, sizeof *out);
  if (out->magic != DIST__RPC_MAGIC || out->version != DIST__RPC_VERSION || out->kind < DIST__RPC_REQUEST ||
      out->kind >= DIST__RPC_KINDS)
    return dist__rpc_header_refused(out, hdr_len);
  return DIST_SUCCESS;
}

/* Parses a body (16-byte aligned) of `len` bytes into m: every length,
 * dtype, rank count and shape checked, the data sizes summed without
 * overflow and equal to what is left. DIST_ERR_CORRUPT says what was wrong. */
dist_status dist__rpc_decode(const void *body, size_t len, dist__rpc_msg *m);
/* The same with the tensors written to t[DIST_RPC_MAX_ARGS] (m->src = t). */
dist_status dist__rpc_decode_into(const void *body, size_t len, dist__rpc_msg *m, dist_tensor *t);

/* A thread's memo of the last message it decoded, for the next one with
 * the same meta part (a function called again with arguments of the same
 * dtypes and shapes, and its answers): compared byte for byte, then copied
 * instead of parsed. Small meta parts of a few tensors only. */
#define DIST__RPC_DCACHE_TENSORS 4
typedef struct dist__rpc_dcache {
  size_t meta; /* its length; 0: empty */
  size_t len;  /* the whole body's */
  _Alignas(DIST__RPC_ALIGN) unsigned char bytes[64];
  uint32_t name_len, extra_at, extra_len;
  int ntensors;
  size_t data_at[DIST__RPC_DCACHE_TENSORS]; /* each tensor's data offset; 0: none */
  dist_tensor t[DIST__RPC_DCACHE_TENSORS];  /* data NULL */
} dist__rpc_dcache;
/* dist__rpc_decode_into through the memo c (refilled on a miss). */
dist_status dist__rpc_decode_cached(dist__rpc_dcache *c, const void *body, size_t len, dist__rpc_msg *m,
                                    dist_tensor *ts);

/* Tiny messages: a call of a function both sides registered at the same
 * index before dist_rpc_init (agreed there), with no options and at most
 * one argument of rank 0 or 1 and at most 8 bytes, and the success of such
 * a call answered by at most one such output. 24 bytes in all, header
 * included, where the general layout takes 64 for the smallest call: UCX's
 * shared-memory transport carries up to 28 bytes of data in the cache line
 * of its own header, and each further line costs the round trip 0.03-0.05
 * us (bench/RESULTS.md, "bench/rpc"). Little-endian:
 *   u64 call id
 *   u16 caller's world rank (requests; 0 in replies)
 *   u8  function index (requests; 0 in replies)
 *   u8  DIST__RPC_TINY_MAGIC
 *   u8  kind (DIST__RPC_REQUEST or DIST__RPC_REPLY)
 *   u8  dtype (DIST__RPC_TINY_NONE: no tensor), u8 rank (0 or 1), u8 extent (rank 1; 0 for a scalar)
 *   8 bytes of data, zero padded. */
#define DIST__RPC_TINY_BYTES 24
#define DIST__RPC_TINY_DATA 8
#define DIST__RPC_TINY_MAGIC 0xD3u
#define DIST__RPC_TINY_NONE 0xFFu
#define DIST__RPC_TINY_FNS 256 /* function indexes a tiny call can name */
#define DIST__RPC_TINY_RANKS 65536 /* world ranks a tiny request can name */

/* A tiny message's fields, decoded. */
typedef struct dist__rpc_tiny {
  uint64_t call_id;
  int caller, fn;
  dist__rpc_kind kind;
  int ntensors; /* 0 or 1: t */
} dist__rpc_tiny;

/* 1 when nt tensors ts (nt 0 or 1, host memory, checked as the encoder does)
 * and no options fit a tiny message. */
static inline int dist__rpc_tiny_fits(const dist_tensor *ts, int nt, size_t extra_len) {
  if (extra_len || nt > 1) return 0;
  if (!nt) return 1;
  const dist_tensor *t = &ts[0];
  if (t->memory != DIST_MEM_HOST || (unsigned)t->dtype >= (unsigned)DIST_DTYPE_COUNT || (unsigned)t->ndim > 1) return 0;
  size_t n = dist__dtype_size(t->dtype);
  if (t->ndim) {
    if (t->shape[0] < 0 || t->shape[0] > DIST__RPC_TINY_DATA) return 0;
    n *= (size_t)t->shape[0];
  }
  return n <= DIST__RPC_TINY_DATA && (!n || t->data);
}

/* Writes a tiny message (its tensors fit: dist__rpc_tiny_fits) into out.
 * Inline: it is most of a small call's encoding. */
static inline void dist__rpc_tiny_encode(unsigned char out[DIST__RPC_TINY_BYTES], const dist__rpc_tiny *h,
                                         const dist_tensor *t) {
  memset(out, 0, DIST__RPC_TINY_BYTES);
  memcpy(out, &h->call_id, 8);
  if (h->kind != DIST__RPC_REPLY) {
    uint16_t caller = (uint16_t)h->caller;
    memcpy(out + 8, &caller, 2);
    out[10] = (unsigned char)h->fn;
  }
  out[11] = DIST__RPC_TINY_MAGIC;
  out[12] = (unsigned char)h->kind;
  out[13] = DIST__RPC_TINY_NONE;
  if (!h->ntensors) return;
  out[13] = (unsigned char)t->dtype;
  out[14] = (unsigned char)t->ndim;
  size_t n = dist__dtype_size(t->dtype);
  if (t->ndim) {
    out[15] = (unsigned char)t->shape[0];
    n *= (size_t)t->shape[0];
  }
  if (n) memcpy(out + 16, t->data, n);
}

/* Parses a tiny message of len bytes into h and, when it has one, *t
 * (viewing its data in buf). Every field checked, the padding and unused
 * fields zero; DIST_ERR_CORRUPT says what was wrong. */
dist_status dist__rpc_tiny_decode(const void *buf, size_t len, dist__rpc_tiny *h, dist_tensor *t);

#endif
