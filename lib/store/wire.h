/* The wire format of c10d's TCPStore (PyTorch's rendezvous store), spoken by
 * distmgr's store server and client so that either side can be torch's.
 *
 * Little-endian framing: one opcode byte, then the arguments; a string or
 * blob is a u64 length and its bytes, counts are u64, ADD's delta is i64.
 * The opcodes depend on the torch version (dialects below); torch >= 2.2
 * also requires VALIDATE (opcode 0 and a magic u32) as the first message of
 * every connection. The parser here is pure and bounded: it never allocates
 * more than the limits allow and is fuzzed (tests/fuzz/fuzz_store.c). */
#ifndef DISTMGR_STORE_WIRE_H
#define DISTMGR_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

typedef enum dist__store_dialect {
  DIST__STORE_TORCH113 = 0, /* torch <= 2.0 (checked with 1.13): no handshake, WATCH_KEY = 7, DELETE_KEY = 8 */
  DIST__STORE_TORCH21,      /* torch 2.1: no handshake, DELETE_KEY = 7 ... CANCEL_WAIT = 11 */
  DIST__STORE_TORCH22,      /* torch >= 2.2: VALIDATE = 0 first, the others shifted by one, PING = 13 */
  DIST__STORE_DIALECTS
} dist__store_dialect;

/* Requests, whatever their number in a dialect. */
typedef enum dist__store_op {
  DIST__STORE_VALIDATE = 0,
  DIST__STORE_SET,
  DIST__STORE_COMPARE_SET,
  DIST__STORE_GET,
  DIST__STORE_ADD,
  DIST__STORE_CHECK,
  DIST__STORE_WAIT,
  DIST__STORE_NUM_KEYS,
  DIST__STORE_WATCH_KEY,
  DIST__STORE_DELETE_KEY,
  DIST__STORE_APPEND,
  DIST__STORE_MULTI_GET,
  DIST__STORE_MULTI_SET,
  DIST__STORE_CANCEL_WAIT,
  DIST__STORE_PING,
  DIST__STORE_OPS
} dist__store_op;

#define DIST__STORE_MAGIC 0x3C85F7CEu /* VALIDATE's argument */
#define DIST__STORE_READY 0           /* CHECK's reply when every key exists; NOT_READY = 1 */
#define DIST__STORE_STOP_WAITING 0    /* WAIT's reply */
#define DIST__STORE_WAIT_CANCELED 1   /* CANCEL_WAIT's reply */

/* "torch113", "torch21", "torch22" (also "1.13", "2.1", "2.2" and later
 * versions, "2.5"): 0 and *out, or -1. */
int dist__store_dialect_parse(const char *s, dist__store_dialect *out);
const char *dist__store_dialect_name(dist__store_dialect d);

/* The opcode byte of `op` in dialect d, or -1 when d has no such request. */
int dist__store_opcode(dist__store_dialect d, dist__store_op op);

/* Limits on what a peer may send (the server's, and the client's on replies). */
typedef struct dist__store_limits {
  size_t key_max;   /* bytes of one key */
  size_t value_max; /* bytes of one value */
  size_t keys_max;  /* keys in one CHECK, WAIT or MULTI_* request */
} dist__store_limits;
#define DIST__STORE_LIMITS_DEFAULT {8192, (size_t)8 << 20, 131072}

/* One parsed request: pointers into the caller's buffer (valid while it is). */
#define DIST__STORE_ARGS_INLINE 3
typedef struct dist__store_req {
  dist__store_op op;
  int64_t delta;   /* ADD */
  uint32_t word;   /* VALIDATE's magic, PING's nonce */
  size_t first;    /* offset of the first string argument in the buffer */
  size_t nargs;    /* strings/blobs in order: SET key,value; COMPARE_SET key,expected,desired; CHECK/WAIT/MULTI_GET
                      keys; MULTI_SET key,value pairs; GET, ADD, DELETE_KEY, APPEND's key (and value) */
  const uint8_t *arg[DIST__STORE_ARGS_INLINE]; /* the first few; parse again with _args for more */
  size_t len[DIST__STORE_ARGS_INLINE];
} dist__store_req;

typedef enum { DIST__STORE_PARSED = 1, DIST__STORE_MORE = 0, DIST__STORE_BAD = -1 } dist__store_parse_result;

/* Parse one request from buf[0..n). PARSED: *used bytes form `req`. MORE: an
 * incomplete request that fits the limits (read more, then parse again).
 * BAD: an unknown opcode or a length beyond the limits, explained in
 * why[0..why_n). Pure; nothing is allocated. */
dist__store_parse_result dist__store_parse(dist__store_dialect d, const dist__store_limits *lim, const uint8_t *buf,
                                           size_t n, dist__store_req *req, size_t *used, char *why, size_t why_n);

/* The i-th string argument (i < r->nargs) of request r parsed from buf,
 * beyond the inline ones too: its bytes and length. */
void dist__store_req_arg(const uint8_t *buf, const dist__store_req *r, size_t i, const uint8_t **p, size_t *len);

/* Little-endian words, whatever the host. */
static inline uint64_t dist__store_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static inline void dist__store_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif
