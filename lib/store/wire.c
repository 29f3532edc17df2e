/* TCPStore requests: dialects and the bounded parser (wire.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/wire.h"

/* Opcode of each request per dialect; -1: not in that dialect. Checked
 * against torch 1.13's client and server byte for byte (tests/store_torch.sh);
 * 2.1 and 2.2 from their TCPStoreBackend.hpp (../shared/reference). */
static const int8_t OPCODES[DIST__STORE_DIALECTS][DIST__STORE_OPS] = {
    /*            VAL SET CAS GET ADD CHK WAIT NUM WATCH DEL APP MGET MSET CANCEL PING */
    [DIST__STORE_TORCH113] = {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, -1, -1},
    [DIST__STORE_TORCH21] = {-1, 0, 1, 2, 3, 4, 5, 6, -1, 7, 8, 9, 10, 11, -1},
    [DIST__STORE_TORCH22] = {0, 1, 2, 3, 4, 5, 6, 7, -1, 8, 9, 10, 11, 12, 13},
};

static const char *const NAMES[DIST__STORE_DIALECTS] = {"torch113", "torch21", "torch22"};

int dist__store_dialect_parse(const char *s, dist__store_dialect *out) {
  if (!s) return -1;
  for (int d = 0; d < DIST__STORE_DIALECTS; d++)
    if (!strcmp(s, NAMES[d])) return *out = (dist__store_dialect)d, 0;
  /* A torch version: MAJOR.MINOR, then anything that is not a digit ("2.5.1+cu121"). */
  char *end;
  unsigned long major = strtoul(s, &end, 10), minor;
  if (end == s || *end != '.' || !isdigit((unsigned char)end[1])) return -1;
  minor = strtoul(end + 1, &end, 10);
  if (major == 1 || (major == 2 && minor == 0)) *out = DIST__STORE_TORCH113;
  else if (major == 2 && minor == 1) *out = DIST__STORE_TORCH21;
  else if (major >= 2 && major < 100) *out = DIST__STORE_TORCH22;
  else return -1;
  return 0;
}

const char *dist__store_dialect_name(dist__store_dialect d) {
  return d >= 0 && d < DIST__STORE_DIALECTS ? NAMES[d] : "unknown";
}

int dist__store_opcode(dist__store_dialect d, dist__store_op op) {
  if (d < 0 || d >= DIST__STORE_DIALECTS || op < 0 || op >= DIST__STORE_OPS) return -1;
  return OPCODES[d][op];
}

/* A reader over buf[0..n) that stops at the first short read. */
typedef struct reader {
  const uint8_t *buf;
  size_t n, at;
  int short_;
} reader;

static int take(reader *r, size_t k) {
  if (r->short_ || r->n - r->at < k) return r->short_ = 1, 0;
  r->at += k;
  return 1;
}

static uint64_t word(reader *r, size_t k) {
  size_t at = r->at;
  if (!take(r, k)) return 0;
  uint64_t v = 0;
  for (size_t i = k; i-- > 0;) v = v << 8 | r->buf[at + i];
  return v;
}

#define FAIL(...) (snprintf(why, why_n, __VA_ARGS__), DIST__STORE_BAD)

/* One length-prefixed string of at most `max` bytes; kept inline if room. */
static dist__store_parse_result string(reader *r, size_t max, dist__store_req *q, const char *what, char *why,
                                       size_t why_n) {
  size_t start = r->at;
  uint64_t len = word(r, 8);
  if (r->short_) return DIST__STORE_MORE;
  if (len > max) return FAIL("%s of %llu bytes (at most %zu)", what, (unsigned long long)len, max);
  if (!q->nargs) q->first = start;
  if (q->nargs < DIST__STORE_ARGS_INLINE) {
    q->arg[q->nargs] = r->buf + r->at;
    q->len[q->nargs] = (size_t)len;
  }
  q->nargs++;
  take(r, (size_t)len);
  return r->short_ ? DIST__STORE_MORE : DIST__STORE_PARSED;
}

#define STRING(max, what)                                                   \
  do {                                                                      \
    dist__store_parse_result s_ = string(&r, (max), req, (what), why, why_n); \
    if (s_ != DIST__STORE_PARSED) return s_;                                \
  } while (0)

dist__store_parse_result dist__store_parse(dist__store_dialect d, const dist__store_limits *lim, const uint8_t *buf,
                                           size_t n, dist__store_req *req, size_t *used, char *why, size_t why_n) {
  memset(req, 0, sizeof *req);
  *used = 0;
  if (!n) return DIST__STORE_MORE;
  int op = -1;
  for (int k = 0; k < DIST__STORE_OPS && op < 0; k++)
    if (dist__store_opcode(d, (dist__store_op)k) == buf[0]) op = k;
  if (op < 0) return FAIL("unknown request %u for a %s store", buf[0], dist__store_dialect_name(d));
  req->op = (dist__store_op)op;
  reader r = {buf, n, 1, 0};
  switch (req->op) {
    case DIST__STORE_VALIDATE:
    case DIST__STORE_PING:
      req->word = (uint32_t)word(&r, 4);
      break;
    case DIST__STORE_SET:
    case DIST__STORE_APPEND:
      STRING(lim->key_max, "key");
      STRING(lim->value_max, "value");
      break;
    case DIST__STORE_COMPARE_SET:
      STRING(lim->key_max, "key");
      STRING(lim->value_max, "expected value");
      STRING(lim->value_max, "desired value");
      break;
    case DIST__STORE_GET:
    case DIST__STORE_DELETE_KEY:
    case DIST__STORE_WATCH_KEY:
      STRING(lim->key_max, "key");
      break;
    case DIST__STORE_ADD:
      STRING(lim->key_max, "key");
      req->delta = (int64_t)word(&r, 8);
      break;
    case DIST__STORE_CHECK:
    case DIST__STORE_WAIT:
    case DIST__STORE_MULTI_GET:
    case DIST__STORE_MULTI_SET: {
      uint64_t k = word(&r, 8);
      if (r.short_) return DIST__STORE_MORE;
      if (k > lim->keys_max) return FAIL("%llu keys in one request (at most %zu)", (unsigned long long)k, lim->keys_max);
      for (uint64_t i = 0; i < k; i++) {
        STRING(lim->key_max, "key");
        if (req->op == DIST__STORE_MULTI_SET) STRING(lim->value_max, "value");
      }
      break;
    }
    case DIST__STORE_NUM_KEYS:
    case DIST__STORE_CANCEL_WAIT:
    case DIST__STORE_OPS:
      break;
  }
  if (r.short_) return DIST__STORE_MORE;
  *used = r.at;
  return DIST__STORE_PARSED;
}

void dist__store_req_arg(const uint8_t *buf, const dist__store_req *r, size_t i, const uint8_t **p, size_t *len) {
  if (i < DIST__STORE_ARGS_INLINE) {
    *p = r->arg[i], *len = r->len[i];
    return;
  }
  /* Arguments after the first are consecutive strings, except MULTI_SET's
   * and CHECK/WAIT's count, which precede the first. */
  size_t at = r->first;
  for (size_t k = 0;; k++) {
    size_t l = (size_t)dist__store_u64(buf + at);
    if (k == i) {
      *p = buf + at + 8, *len = l;
      return;
    }
    at += 8 + l;
  }
}
