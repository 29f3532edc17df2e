/* The messages of remote calls: a fixed header (UCX's active-message header)
 * and a body. Pure and bounded: the decoder checks every length against the
 * body it got before it reads, and is fuzzed (tests/fuzz/fuzz_rpc.c).
 *
 * The header is 16 bytes and the body of a small call (a name of up to 12
 * bytes, one tensor of up to 16 bytes) at most 64: UCX's shared-memory
 * transport sends 80 bytes with its "short" protocol, 0.13 us a send faster
 * than the copy protocol it takes for 96 (bench/RESULTS.md, "bench/rpc").
 * The body's length is UCX's.
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

/* Padded size of n data bytes. */
static inline size_t dist__rpc_pad(size_t n) { return (n + DIST__RPC_ALIGN - 1) & ~(size_t)(DIST__RPC_ALIGN - 1); }

/* Checks a header: its length, magic, version and kind. */
dist_status dist__rpc_check_header(const void *hdr, size_t hdr_len, dist__rpc_header *out);

/* Parses a body (16-byte aligned) of `len` bytes into m: every length,
 * dtype, rank count and shape checked, the data sizes summed without
 * overflow and equal to what is left. DIST_ERR_CORRUPT says what was wrong. */
dist_status dist__rpc_decode(const void *body, size_t len, dist__rpc_msg *m);
/* The same with the tensors written to t[DIST_RPC_MAX_ARGS] (m->src = t). */
dist_status dist__rpc_decode_into(const void *body, size_t len, dist__rpc_msg *m, dist_tensor *t);

#endif
