/* The message codec of remote calls (lib/rpc/wire.c): round trips of
 * requests and replies with 0 to DIST_RPC_MAX_ARGS tensors of every dtype and
 * rank (0-d scalars and zero-sized tensors included), with and without a name
 * and extra bytes; the encoder's bytes against the layout wire.h documents,
 * padding zeroed; and the decoder's DIST_ERR_CORRUPT for every truncation,
 * out-of-range field and trailing byte, the header check's rejections, and
 * the encoder's DIST_ERR_INVALID_ARGUMENT. No MPI, no UCX.
 *
 *   tests/test_rpc_wire --write-corpus DIR
 * writes the fuzzer's seeds (header + body, tests/fuzz/corpus/fuzz_rpc/) into
 * DIR instead of testing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "cunit_main.h"
#include "rpc/wire.h"

/* ---- helpers ------------------------------------------------------------------- */

/* A 16-byte aligned buffer of exactly n bytes (so a sanitizer sees overreads). */
static void *aligned(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, DIST__RPC_ALIGN, n ? n : 1)) return NULL;
  return p;
}

static size_t nbytes(const dist_tensor *t) {
  size_t n = dist_dtype_size(t->dtype);
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return n;
}

/* The whole body of m as a sender puts it on the wire: the encoded meta part
 * (into a buffer full of garbage: padding must be written, not inherited),
 * then each tensor's data padded with zeros. NULL when encoding fails. */
static unsigned char *assemble_plain(const dist__rpc_msg *m, size_t *len) {
  size_t meta = 0, body = 0, meta2 = 0, body2 = 0;
  if (dist__rpc_encode_meta(m, NULL, 0, &meta, &body)) return NULL;
  unsigned char *b = aligned(body);
  if (!b) return NULL;
  memset(b, 0xA5, body);
  if (dist__rpc_encode_meta(m, b, meta, &meta2, &body2) || meta2 != meta || body2 != body) {
    free(b);
    return NULL;
  }
  size_t at = meta;
  for (int i = 0; i < m->ntensors; i++) {
    size_t n = nbytes(&m->t[i]);
    if (at + dist__rpc_pad(n) > body) {
      free(b);
      return NULL;
    }
    if (n) memcpy(b + at, m->t[i].data, n);
    memset(b + at + n, 0, dist__rpc_pad(n) - n);
    at += dist__rpc_pad(n);
  }
  if (at != body) {
    free(b);
    return NULL;
  }
  *len = body;
  return b;
}

/* The same under CUnit: fails the test (fatally) when encoding fails. */
static unsigned char *assemble(const dist__rpc_msg *m, size_t *len) {
  size_t meta = 0, body = 0;
  ASSERT_OK(dist__rpc_encode_meta(m, NULL, 0, &meta, &body));
  CU_ASSERT_EQUAL(meta % DIST__RPC_ALIGN, 0);
  unsigned char *b = assemble_plain(m, len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_EQUAL(*len, body);
  return b;
}

/* Decodes body and compares every field and byte with m. */
static void expect_same(const dist__rpc_msg *m, const unsigned char *body, size_t len) {
  dist__rpc_msg d;
  ASSERT_OK(dist__rpc_decode(body, len, &d));
  CU_ASSERT_EQUAL_FATAL(d.name_len, m->name_len);
  if (m->name_len) CU_ASSERT(d.name && !memcmp(d.name, m->name, m->name_len));
  CU_ASSERT_EQUAL_FATAL(d.ntensors, m->ntensors);
  for (int i = 0; i < m->ntensors; i++) {
    const dist_tensor *a = &m->t[i], *t = &d.t[i];
    CU_ASSERT_EQUAL(t->dtype, a->dtype);
    CU_ASSERT_EQUAL(t->memory, DIST_MEM_HOST);
    CU_ASSERT_EQUAL_FATAL(t->ndim, a->ndim);
    for (int k = 0; k < a->ndim; k++) CU_ASSERT_EQUAL(t->shape[k], a->shape[k]);
    for (int k = a->ndim; k < DIST_TENSOR_MAX_DIMS; k++) CU_ASSERT_EQUAL(t->shape[k], 0);
    size_t n = nbytes(a);
    CU_ASSERT_EQUAL(dist_tensor_nbytes(t), n);
    if (!n) {
      CU_ASSERT_PTR_NULL(t->data);
      continue;
    }
    const unsigned char *p = t->data;
    CU_ASSERT_FATAL(p >= body && p + n <= body + len);
    CU_ASSERT_EQUAL((uintptr_t)p % DIST__RPC_ALIGN, 0);
    CU_ASSERT(!memcmp(p, a->data, n));
  }
  CU_ASSERT_EQUAL_FATAL(d.extra_len, m->extra_len);
  if (m->extra_len) {
    const unsigned char *e = d.extra;
    CU_ASSERT_FATAL(e >= body && e + m->extra_len <= body + len);
    CU_ASSERT(!memcmp(e, m->extra, m->extra_len));
  }
}

/* Tensor i of a message: dtype and rank cycle through all of them; every
 * fifth tensor has a zero extent, rank 0 is a scalar. Data: a byte pattern
 * that differs per tensor. */
static unsigned char storage[DIST_RPC_MAX_ARGS][16 * 3 * 3 * 3 * 2 * 2 * 2 * 2 * 2];
static dist_tensor tensor(int i, int salt) {
  dist_dtype dt = (dist_dtype)((i + salt) % DIST_DTYPE_COUNT);
  int ndim = (i * 3 + salt) % (DIST_TENSOR_MAX_DIMS + 1);
  int64_t shape[DIST_TENSOR_MAX_DIMS] = {0};
  for (int k = 0; k < ndim; k++) shape[k] = k < 3 ? 1 + (i + k + salt) % 3 : 1 + (i + k) % 2;
  if (ndim && i % 5 == 4) shape[(i + salt) % ndim] = 0;
  dist_tensor t = dist_tensor_host(storage[i], dt, ndim, shape);
  size_t n = nbytes(&t);
  if (n > sizeof storage[i]) abort(); /* the table above is too small */
  for (size_t b = 0; b < n; b++) storage[i][b] = (unsigned char)(b * 7 + i * 31 + salt + 1);
  if (!n) t.data = NULL;
  return t;
}

static const char name63[] = "a_function_name_of_exactly_sixty_three_bytes_the_longest_allowe";

/* ---- round trips ------------------------------------------------------------ */

/* The one-pass encoder of small messages (dist__rpc_encode_body) writes the
 * same body over garbage when it has 16 bytes to spare, and refuses without
 * a message when it has fewer. */
static void expect_one_pass(const dist__rpc_msg *m, const unsigned char *body, size_t len) {
  unsigned char *g = aligned(len + 16);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  memset(g, 0xC3, len + 16);
  size_t got = 0;
  ASSERT_OK(dist__rpc_encode_body(m, g, len + 16, &got));
  CU_ASSERT_EQUAL(got, len);
  CU_ASSERT(!memcmp(g, body, len));
  dist__error_clear();
  CU_ASSERT_EQUAL(dist__rpc_encode_body(m, g, len + 15, &got), DIST_ERR_BUFFER_TOO_SMALL);
  CU_ASSERT_STRING_EQUAL(dist_last_error(), "");
  free(g);
}

static void test_round_trips(void) {
  CU_ASSERT_EQUAL(strlen(name63), DIST_RPC_MAX_NAME);
  static const char *names[] = {NULL, "f", "add", "train/step", name63};
  static unsigned char extra[40];
  for (size_t i = 0; i < sizeof extra; i++) extra[i] = (unsigned char)(200 + i);
  static const size_t extras[] = {0, 1, 7, 8, 9, 16, 40};
  int cases = 0;
  for (int nt = 0; nt <= DIST_RPC_MAX_ARGS; nt++)
    for (size_t ni = 0; ni < sizeof names / sizeof *names; ni++)
      for (size_t xi = 0; xi < sizeof extras / sizeof *extras; xi++) {
        dist__rpc_msg m;
        memset(&m, 0, sizeof m);
        m.name = names[ni];
        m.name_len = names[ni] ? strlen(names[ni]) : 0;
        m.ntensors = nt;
        for (int i = 0; i < nt; i++) m.t[i] = tensor(i, (int)(ni + xi));
        m.extra = extras[xi] ? extra : NULL;
        m.extra_len = extras[xi];
        size_t len = 0;
        unsigned char *b = assemble(&m, &len);
        expect_same(&m, b, len);
        expect_one_pass(&m, b, len);
        free(b);
        cases++;
      }
  CU_ASSERT_EQUAL(cases, (DIST_RPC_MAX_ARGS + 1) * 5 * 7);
}

/* Scalars, zero-sized tensors, every dtype, the largest name and extra. */
static void test_edge_messages(void) {
  static double scalar = 2.5;
  static int64_t vec[3] = {-1, 0, INT64_MAX};
  dist__rpc_msg m;
  memset(&m, 0, sizeof m);
  m.ntensors = 4;
  m.t[0] = dist_tensor_host(&scalar, DIST_F64, 0, NULL);
  m.t[1] = dist_tensor_host(NULL, DIST_F32, 2, (int64_t[]){0, 5});
  m.t[2] = dist_tensor_host(vec, DIST_I64, 1, (int64_t[]){3});
  m.t[3] = dist_tensor_host(NULL, DIST_U8, DIST_TENSOR_MAX_DIMS, (int64_t[]){1, 2, 3, 4, 0, 1, 2, 3});
  size_t len = 0;
  unsigned char *b = assemble(&m, &len);
  expect_same(&m, b, len);
  free(b);

  /* Every dtype as a one-element tensor. */
  static unsigned char one[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  memset(&m, 0, sizeof m);
  m.ntensors = DIST_DTYPE_COUNT;
  for (int d = 0; d < DIST_DTYPE_COUNT; d++) m.t[d] = dist_tensor_host(one, (dist_dtype)d, 1, (int64_t[]){1});
  b = assemble(&m, &len);
  expect_same(&m, b, len);
  free(b);

  /* The largest extra part, and a full house of zero-sized tensors. */
  unsigned char *x = malloc(DIST__RPC_EXTRA_MAX);
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  for (size_t i = 0; i < DIST__RPC_EXTRA_MAX; i++) x[i] = (unsigned char)(i * 13);
  memset(&m, 0, sizeof m);
  m.name = name63;
  m.name_len = DIST_RPC_MAX_NAME;
  m.extra = x;
  m.extra_len = DIST__RPC_EXTRA_MAX;
  m.ntensors = DIST_RPC_MAX_ARGS;
  for (int i = 0; i < DIST_RPC_MAX_ARGS; i++) m.t[i] = dist_tensor_host(NULL, DIST_C128, 1, (int64_t[]){0});
  b = assemble(&m, &len);
  expect_same(&m, b, len);
  free(b);
  free(x);
}

/* ---- the layout wire.h documents, written independently of the encoder ------- */

typedef struct raw {
  unsigned char b[4096];
  size_t n;
} raw;
static void raw_bytes(raw *r, const void *p, size_t n) {
  if (r->n + n > sizeof r->b) abort();
  memcpy(r->b + r->n, p, n);
  r->n += n;
}
static void raw_u32(raw *r, uint32_t v) { raw_bytes(r, &v, 4); }
static void raw_u64(raw *r, uint64_t v) { raw_bytes(r, &v, 8); }
static void raw_align(raw *r, size_t a) {
  while (r->n % a) r->b[r->n++] = 0;
}
/* A meta part: name, the tensor and extra counts, (dtype, ndim, shape...)
 * per tensor, then the extra bytes. */
static void raw_meta(raw *r, const char *name, uint32_t name_len, uint32_t nt, const uint32_t *dtype,
                     const uint32_t *ndim, const int64_t (*shape)[DIST_TENSOR_MAX_DIMS], const void *extra,
                     uint64_t extra_len) {
  r->n = 0;
  raw_u32(r, name_len);
  raw_bytes(r, name, name_len);
  raw_align(r, 4);
  raw_u32(r, nt);
  raw_u32(r, (uint32_t)extra_len);
  for (uint32_t i = 0; i < nt; i++) {
    raw_u32(r, dtype[i]);
    raw_u32(r, ndim[i]);
    raw_align(r, 8);
    raw_bytes(r, shape[i], 8 * (size_t)(ndim[i] < DIST_TENSOR_MAX_DIMS ? ndim[i] : DIST_TENSOR_MAX_DIMS));
  }
  raw_bytes(r, extra, (size_t)extra_len);
  raw_align(r, DIST__RPC_ALIGN);
}

/* Decodes r's bytes (+ `data` zero bytes of tensor data) expecting CORRUPT. */
static void expect_corrupt(const raw *r, size_t data, const char *why) {
  unsigned char *b = aligned(r->n + data);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  memcpy(b, r->b, r->n);
  memset(b + r->n, 0, data);
  dist__rpc_msg m;
  dist_status s = dist__rpc_decode(b, r->n + data, &m);
  if (s != DIST_ERR_CORRUPT) fprintf(stderr, "%s: decode returned %d, expected DIST_ERR_CORRUPT\n", why, (int)s);
  CU_ASSERT_EQUAL(s, DIST_ERR_CORRUPT);
  free(b);
}

static void test_layout(void) {
  /* Name "ab" at 4..6 (2 bytes of padding before the counts at 8..16), an
   * f32[2,3] (dtype, ndim at 16..24, shape at 24..40), a u8 scalar (40..48,
   * no shape), "xyz" at 48..51, zeros to 64; then 24 bytes of f32 data
   * padded to 32, 1 byte padded to 16. */
  float f[6] = {1, 2, 3, 4, 5, 6};
  unsigned char u = 9;
  dist__rpc_msg m;
  memset(&m, 0, sizeof m);
  m.name = "ab";
  m.name_len = 2;
  m.ntensors = 2;
  m.t[0] = dist_tensor_host(f, DIST_F32, 2, (int64_t[]){2, 3});
  m.t[1] = dist_tensor_host(&u, DIST_U8, 0, NULL);
  m.extra = "xyz";
  m.extra_len = 3;
  raw r;
  const uint32_t dt[2] = {DIST_F32, DIST_U8}, nd[2] = {2, 0};
  const int64_t sh[2][DIST_TENSOR_MAX_DIMS] = {{2, 3}, {0}};
  raw_meta(&r, "ab", 2, 2, dt, nd, sh, "xyz", 3);
  size_t len = 0;
  unsigned char *b = assemble(&m, &len);
  CU_ASSERT_EQUAL_FATAL(len, r.n + 32 + 16);
  /* The meta part byte for byte, alignment gaps and final padding zero. */
  CU_ASSERT(!memcmp(b, r.b, r.n));
  for (size_t i = 0; i < r.n; i++)
    if (b[i] != r.b[i]) {
      fprintf(stderr, "meta byte %zu: encoder wrote %#x, wire.h says %#x\n", i, b[i], r.b[i]);
      break;
    }
  CU_ASSERT(!memcmp(b + r.n, f, 24));
  CU_ASSERT_EQUAL(b[r.n + 32], 9);
  free(b);

  /* Encoding into a buffer full of garbage gives the same bytes. */
  size_t meta = 0, body = 0;
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
  CU_ASSERT_EQUAL_FATAL(meta, r.n);
  unsigned char g[256];
  memset(g, 0xFF, sizeof g);
  ASSERT_OK(dist__rpc_encode_meta(&m, g, meta, &meta, &body));
  CU_ASSERT(!memcmp(g, r.b, meta));
  CU_ASSERT_EQUAL(g[meta], 0xFF); /* nothing past the meta part */
  /* A buffer one byte short: measured, refused without a message, nothing
   * written past it (the sender's one-pass encode falls back on this). */
  size_t meta3 = 0, body3 = 0;
  memset(g, 0xEE, sizeof g);
  dist__error_clear();
  CU_ASSERT_EQUAL(dist__rpc_encode_meta(&m, g, meta - 1, &meta3, &body3), DIST_ERR_BUFFER_TOO_SMALL);
  CU_ASSERT_EQUAL(meta3, meta);
  CU_ASSERT_EQUAL(body3, body);
  CU_ASSERT_EQUAL(g[meta - 1], 0xEE);
  CU_ASSERT_STRING_EQUAL(dist_last_error(), "");

  /* The raw writer's own message decodes (with its data) as the encoder's. */
  unsigned char *b2 = aligned(r.n + 48);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
  memcpy(b2, r.b, r.n);
  memset(b2 + r.n, 0, 48);
  memcpy(b2 + r.n, f, 24);
  b2[r.n + 32] = 9;
  expect_same(&m, b2, r.n + 48);
  free(b2);
}

/* A buffer too small for the meta part: an error, and nothing written past it. */
static void test_encode_small_buffer(void) {
  dist__rpc_msg m;
  memset(&m, 0, sizeof m);
  m.name = "fn";
  m.name_len = 2;
  m.ntensors = 1;
  m.t[0] = dist_tensor_host(NULL, DIST_F32, 3, (int64_t[]){0, 1, 2});
  size_t meta = 0, body = 0;
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
  unsigned char g[128];
  for (size_t cap = 0; cap < meta; cap++) {
    memset(g, 0x5A, sizeof g);
    size_t ml = 0, bl = 0;
    CU_ASSERT_NOT_EQUAL(dist__rpc_encode_meta(&m, g, cap, &ml, &bl), DIST_SUCCESS);
    for (size_t i = cap; i < sizeof g; i++)
      if (g[i] != 0x5A) {
        CU_FAIL("encoder wrote past its capacity");
        break;
      }
  }
}

/* ---- the decoder's rejections ---------------------------------------------- */

/* Every shorter length of several valid bodies is CORRUPT. */
static void test_truncations(void) {
  static double scalar = 1;
  static float f[6];
  static char opts[11] = "options...";
  dist__rpc_msg ms[4];
  memset(ms, 0, sizeof ms);
  /* ms[0]: an empty message, 4 + 4 + 8 = 16 bytes of meta. A request with a name, tensors and options. */
  ms[1].name = "remote_fn";
  ms[1].name_len = 9;
  ms[1].ntensors = 3;
  ms[1].t[0] = dist_tensor_host(f, DIST_F32, 2, (int64_t[]){2, 3});
  ms[1].t[1] = dist_tensor_host(&scalar, DIST_F64, 0, NULL);
  ms[1].t[2] = dist_tensor_host(NULL, DIST_I32, 1, (int64_t[]){0});
  ms[1].extra = opts;
  ms[1].extra_len = sizeof opts;
  /* Only zero-sized tensors: the body is all meta. */
  ms[2].ntensors = 2;
  ms[2].t[0] = dist_tensor_host(NULL, DIST_BF16, 2, (int64_t[]){4, 0});
  ms[2].t[1] = dist_tensor_host(NULL, DIST_U8, 1, (int64_t[]){0});
  /* Sixteen tensors. */
  ms[3].name = name63;
  ms[3].name_len = DIST_RPC_MAX_NAME;
  ms[3].ntensors = DIST_RPC_MAX_ARGS;
  for (int i = 0; i < DIST_RPC_MAX_ARGS; i++) ms[3].t[i] = tensor(i, 1);
  for (int k = 0; k < 4; k++) {
    size_t len = 0;
    unsigned char *full = assemble(&ms[k], &len);
    expect_same(&ms[k], full, len);
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
      unsigned char *b = aligned(n);
      CU_ASSERT_PTR_NOT_NULL_FATAL(b);
      memcpy(b, full, n);
      dist__rpc_msg d;
      dist_status s = dist__rpc_decode(b, n, &d);
      if (s != DIST_ERR_CORRUPT && !bad++)
        fprintf(stderr, "message %d truncated to %zu of %zu bytes: decode returned %d\n", k, n, len, (int)s);
      free(b);
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(full);
  }
}

static void test_bad_fields(void) {
  raw r;
  const uint32_t f32 = DIST_F32, nd1 = 1, nd0 = 0;
  const int64_t one[1][DIST_TENSOR_MAX_DIMS] = {{1}};

  /* Sanity: the raw writer's valid message with an f32[1] decodes. */
  raw_meta(&r, "ok", 2, 1, &f32, &nd1, one, "", 0);
  {
    unsigned char *b = aligned(r.n + 16);
    memcpy(b, r.b, r.n);
    memset(b + r.n, 0, 16);
    dist__rpc_msg m;
    ASSERT_OK(dist__rpc_decode(b, r.n + 16, &m));
    free(b);
  }

  /* A name of DIST_RPC_MAX_NAME + 1 bytes (all present). */
  char longname[DIST_RPC_MAX_NAME + 1];
  memset(longname, 'n', sizeof longname);
  raw_meta(&r, longname, DIST_RPC_MAX_NAME + 1, 0, NULL, NULL, NULL, "", 0);
  expect_corrupt(&r, 0, "name of 64 bytes");
  ASSERT_MSG_HAS("name of 64 bytes");
  raw_meta(&r, longname, DIST_RPC_MAX_NAME, 0, NULL, NULL, NULL, "", 0); /* 63: fine */
  {
    dist__rpc_msg m;
    unsigned char *b = aligned(r.n);
    memcpy(b, r.b, r.n);
    ASSERT_OK(dist__rpc_decode(b, r.n, &m));
    CU_ASSERT_EQUAL(m.name_len, DIST_RPC_MAX_NAME);
    free(b);
  }
  /* A name length far beyond the body. */
  raw_meta(&r, "", 0, 0, NULL, NULL, NULL, "", 0);
  memcpy(r.b, &(uint32_t){UINT32_MAX}, 4);
  expect_corrupt(&r, 0, "name of 2^32-1 bytes");

  /* A NUL inside the name, and at its end. */
  raw_meta(&r, "ab\0c", 4, 0, NULL, NULL, NULL, "", 0);
  expect_corrupt(&r, 0, "name with a NUL");
  ASSERT_MSG_HAS("NUL");
  raw_meta(&r, "abc\0", 4, 0, NULL, NULL, NULL, "", 0);
  expect_corrupt(&r, 0, "name ending in NUL");

  /* Too many tensors. */
  uint32_t dts[DIST_RPC_MAX_ARGS + 1], nds[DIST_RPC_MAX_ARGS + 1];
  int64_t shs[DIST_RPC_MAX_ARGS + 1][DIST_TENSOR_MAX_DIMS];
  memset(shs, 0, sizeof shs);
  for (int i = 0; i <= DIST_RPC_MAX_ARGS; i++) dts[i] = DIST_U8, nds[i] = 0;
  raw_meta(&r, "", 0, DIST_RPC_MAX_ARGS + 1, dts, nds, shs, "", 0);
  expect_corrupt(&r, 16 * (DIST_RPC_MAX_ARGS + 1), "17 tensors");

  /* dtype DIST_DTYPE_COUNT and beyond. */
  const uint32_t dbad[] = {DIST_DTYPE_COUNT, DIST_DTYPE_COUNT + 1, 0x80000000u, UINT32_MAX};
  for (size_t i = 0; i < sizeof dbad / sizeof *dbad; i++) {
    raw_meta(&r, "", 0, 1, &dbad[i], &nd1, one, "", 0);
    expect_corrupt(&r, 16, "bad dtype");
  }
  ASSERT_MSG_HAS("dtype");

  /* ndim DIST_TENSOR_MAX_DIMS + 1 (with its shape present), and huge. */
  const int64_t ones[1][DIST_TENSOR_MAX_DIMS] = {{1, 1, 1, 1, 1, 1, 1, 1}};
  raw_meta(&r, "", 0, 1, &f32, &(uint32_t){DIST_TENSOR_MAX_DIMS}, ones, "", 0);
  {
    unsigned char *b = aligned(r.n + 16); /* 8 dims: fine */
    memcpy(b, r.b, r.n);
    memset(b + r.n, 0, 16);
    dist__rpc_msg m;
    ASSERT_OK(dist__rpc_decode(b, r.n + 16, &m));
    free(b);
  }
  raw r9;
  r9.n = 0;
  raw_u32(&r9, 0);
  raw_u32(&r9, 1);
  raw_u32(&r9, 0);
  raw_u32(&r9, DIST_F32);
  raw_u32(&r9, DIST_TENSOR_MAX_DIMS + 1);
  raw_align(&r9, 8);
  for (int k = 0; k < DIST_TENSOR_MAX_DIMS + 1; k++) raw_u64(&r9, 1);
  raw_align(&r9, DIST__RPC_ALIGN);
  expect_corrupt(&r9, 16, "9 dims");
  r9.n = 0;
  raw_u32(&r9, 0);
  raw_u32(&r9, 1);
  raw_u32(&r9, 0);
  raw_u32(&r9, DIST_F32);
  raw_u32(&r9, UINT32_MAX);
  raw_align(&r9, 8);
  raw_u64(&r9, 0);
  raw_align(&r9, DIST__RPC_ALIGN);
  expect_corrupt(&r9, 0, "2^32-1 dims");

  /* Negative extents, alone and next to a zero one (no data either way). */
  const int64_t neg[][DIST_TENSOR_MAX_DIMS] = {{-1}, {INT64_MIN}, {0, -3}, {-3, 0}};
  const uint32_t nd2 = 2;
  for (size_t i = 0; i < sizeof neg / sizeof *neg; i++) {
    raw_meta(&r, "", 0, 1, &f32, i < 2 ? &nd1 : &nd2, &neg[i], "", 0);
    expect_corrupt(&r, 0, "negative extent");
  }
  ASSERT_MSG_HAS("extent");

  /* Extents whose byte size overflows (int64 bytes, and size_t through a
   * zero extent that comes later); and one that fits in int64 but exceeds
   * the message. */
  const uint32_t f64 = DIST_F64, u8 = DIST_U8, c128 = DIST_C128, nd3 = 3;
  const int64_t big[][DIST_TENSOR_MAX_DIMS] = {{(int64_t)1 << 61}, {(int64_t)1 << 32, (int64_t)1 << 32, 1},
                                               {INT64_MAX, 2, 0}, {INT64_MAX}};
  raw_meta(&r, "", 0, 1, &f64, &nd1, &big[0], "", 0);
  expect_corrupt(&r, 16, "f64[2^61]");
  raw_meta(&r, "", 0, 1, &c128, &nd3, &big[1], "", 0);
  expect_corrupt(&r, 16, "c128[2^32, 2^32, 1]");
  raw_meta(&r, "", 0, 1, &u8, &nd3, &big[2], "", 0);
  expect_corrupt(&r, 0, "u8[INT64_MAX, 2, 0]");
  raw_meta(&r, "", 0, 1, &u8, &nd1, &big[3], "", 0);
  expect_corrupt(&r, 64, "u8[INT64_MAX]");
  /* Two tensors whose padded sizes sum past the message. */
  const uint32_t two_dt[2] = {DIST_U8, DIST_U8}, two_nd[2] = {1, 1};
  const int64_t two_sh[2][DIST_TENSOR_MAX_DIMS] = {{(int64_t)1 << 62}, {(int64_t)1 << 62}};
  raw_meta(&r, "", 0, 2, two_dt, two_nd, two_sh, "", 0);
  expect_corrupt(&r, 32, "u8[2^62] twice");

  /* extra_len over DIST__RPC_EXTRA_MAX, with that many bytes present. */
  {
    size_t meta_n = 16 + dist__rpc_pad(DIST__RPC_EXTRA_MAX + 1);
    unsigned char *b = aligned(meta_n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    memset(b, 'x', meta_n);
    memcpy(b, &(uint32_t){0}, 4);
    memcpy(b + 4, &(uint32_t){0}, 4);
    memcpy(b + 8, &(uint32_t){DIST__RPC_EXTRA_MAX + 1}, 4);
    dist__rpc_msg m;
    ASSERT_STATUS(dist__rpc_decode(b, meta_n, &m), DIST_ERR_CORRUPT);
    /* The same at exactly the limit is fine. */
    memcpy(b + 8, &(uint32_t){DIST__RPC_EXTRA_MAX}, 4);
    ASSERT_OK(dist__rpc_decode(b, 16 + DIST__RPC_EXTRA_MAX, &m));
    CU_ASSERT_EQUAL(m.extra_len, DIST__RPC_EXTRA_MAX);
    free(b);
  }
  raw_meta(&r, "", 0, 0, NULL, NULL, NULL, "", 0);
  memcpy(r.b + 8, &(uint32_t){UINT32_MAX}, 4);
  expect_corrupt(&r, 0, "extra of 2^32-1 bytes");
  raw_meta(&r, "", 0, 0, NULL, NULL, NULL, "", 0);
  memcpy(r.b + 8, &(uint32_t){9}, 4); /* 9 extra bytes, none there */
  expect_corrupt(&r, 0, "extra past the body");

  /* Trailing bytes: after the data, after the meta of a message without
   * data, and data where the descriptors say none. */
  raw_meta(&r, "ok", 2, 1, &f32, &nd1, one, "", 0);
  for (size_t extra_data = 1; extra_data <= 48; extra_data++)
    if (extra_data != 16) expect_corrupt(&r, extra_data, "f32[1] with the wrong amount of data");
  raw_meta(&r, "", 0, 0, NULL, NULL, NULL, "", 0);
  for (size_t extra_data = 1; extra_data <= 32; extra_data++) expect_corrupt(&r, extra_data, "trailing bytes");
  const int64_t zero[1][DIST_TENSOR_MAX_DIMS] = {{0}};
  raw_meta(&r, "", 0, 1, &f32, &nd1, zero, "", 0);
  expect_corrupt(&r, 16, "data for a zero-sized tensor");
  raw_meta(&r, "", 0, 1, &f32, &nd0, zero, "", 0); /* a scalar: 4 bytes, padded to 16 */
  expect_corrupt(&r, 4, "a scalar's unpadded data");
  expect_corrupt(&r, 0, "a scalar without data");
}

/* Trailing garbage after a full encoded message, from the encoder. */
static void test_trailing_after_encoded(void) {
  dist__rpc_msg m;
  memset(&m, 0, sizeof m);
  m.name = "g";
  m.name_len = 1;
  m.ntensors = 3;
  for (int i = 0; i < 3; i++) m.t[i] = tensor(i, 2);
  size_t len = 0;
  unsigned char *full = assemble(&m, &len);
  for (size_t more = 1; more <= 33; more++) {
    unsigned char *b = aligned(len + more);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    memcpy(b, full, len);
    memset(b + len, 0x3C, more);
    dist__rpc_msg d;
    ASSERT_STATUS(dist__rpc_decode(b, len + more, &d), DIST_ERR_CORRUPT);
    free(b);
  }
  free(full);
}

/* ---- headers -------------------------------------------------------------------- */

static void test_headers(void) {
  dist__rpc_header good = {.magic = DIST__RPC_MAGIC, .version = DIST__RPC_VERSION, .kind = DIST__RPC_REQUEST,
                           .caller = 3, .call_id = 77},
                   out, h;
  CU_ASSERT_EQUAL(sizeof good, 16); /* with a 48-byte body: UCX's short protocol (wire.h) */
  for (int k = DIST__RPC_REQUEST; k < DIST__RPC_KINDS; k++) {
    h = good;
    h.kind = (uint8_t)k;
    if (k == DIST__RPC_REPLY) h.status = DIST_ERR_INVALID_ARGUMENT;
    memset(&out, 0, sizeof out);
    ASSERT_OK(dist__rpc_check_header(&h, sizeof h, &out));
    CU_ASSERT(!memcmp(&out, &h, sizeof h));
  }
  /* An unaligned header (UCX gives no alignment). */
  unsigned char un[sizeof good + 1];
  memcpy(un + 1, &good, sizeof good);
  ASSERT_OK(dist__rpc_check_header(un + 1, sizeof good, &out));
  CU_ASSERT_EQUAL(out.call_id, 77);
  CU_ASSERT_EQUAL(out.caller, 3);

  h = good;
  h.magic = DIST__RPC_MAGIC ^ 1;
  ASSERT_STATUS(dist__rpc_check_header(&h, sizeof h, &out), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS("magic");
  h.magic = 0;
  ASSERT_STATUS(dist__rpc_check_header(&h, sizeof h, &out), DIST_ERR_CORRUPT);
  const uint8_t versions[] = {0, 1, DIST__RPC_VERSION + 1, UINT8_MAX}; /* 1: the 32-byte header before */
  for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
    h = good;
    h.version = versions[i];
    ASSERT_STATUS(dist__rpc_check_header(&h, sizeof h, &out), DIST_ERR_CORRUPT);
    ASSERT_MSG_HAS("version");
  }
  const uint8_t kinds[] = {0, DIST__RPC_KINDS, DIST__RPC_KINDS + 1, UINT8_MAX};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    h = good;
    h.kind = kinds[i];
    ASSERT_STATUS(dist__rpc_check_header(&h, sizeof h, &out), DIST_ERR_CORRUPT);
  }
  ASSERT_MSG_HAS("kind");
  /* Header lengths other than the struct's (the old 32 bytes among them), and no header. */
  unsigned char big[32];
  memcpy(big, &good, sizeof good);
  memset(big + sizeof good, 0, sizeof big - sizeof good);
  ASSERT_STATUS(dist__rpc_check_header(&good, sizeof good - 1, &out), DIST_ERR_CORRUPT);
  ASSERT_STATUS(dist__rpc_check_header(big, sizeof big, &out), DIST_ERR_CORRUPT);
  ASSERT_STATUS(dist__rpc_check_header(&good, 0, &out), DIST_ERR_CORRUPT);
  ASSERT_STATUS(dist__rpc_check_header(NULL, sizeof good, &out), DIST_ERR_CORRUPT);
}

/* A small call's message (a name of up to 12 bytes, one 8-byte tensor) and
 * its answer fit UCX's short protocol: at most 16 + 64 bytes (wire.h). */
static void test_small_sizes(void) {
  double x = 1;
  int64_t one = 1;
  dist__rpc_msg m = {.name = "echo_fn_abcd", .name_len = 12, .ntensors = 1};
  m.t[0] = dist_tensor_host(&x, DIST_F64, 1, &one);
  size_t meta = 0, body = 0;
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
  CU_ASSERT_EQUAL(body, 64);
  m.name_len = 4; /* "echo" */
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
  CU_ASSERT_EQUAL(body, 48);
  m.name = NULL, m.name_len = 0; /* the reply */
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
  CU_ASSERT_EQUAL(body, 48);
}

/* ---- the decoder's memo ----------------------------------------------------------- */

/* dist__rpc_decode_cached gives what dist__rpc_decode gives: for a message,
 * the same message again (a hit), the same meta with other data (a hit whose
 * views are in the new body), and after each of those a copy with one meta
 * byte changed (a miss: decoded or rejected as the plain decoder does). */
static void test_decode_memo(void) {
  dist__rpc_dcache c;
  memset(&c, 0, sizeof c);
  int hits = 0, checked = 0;
  for (int nt = 0; nt <= 5; nt++) {
    dist__rpc_msg m;
    memset(&m, 0, sizeof m);
    m.name = nt % 2 ? "echo" : NULL;
    m.name_len = m.name ? 4 : 0;
    m.ntensors = nt;
    static float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static int64_t ext[5] = {1, 2, 3, 0, 8};
    for (int i = 0; i < nt; i++) m.t[i] = dist_tensor_host(v, DIST_F32, i % 2, &ext[i]); /* small meta parts */
    m.extra = nt == 3 ? "opts" : NULL;
    m.extra_len = m.extra ? 4 : 0;
    size_t len = 0;
    unsigned char *b = assemble(&m, &len);
    unsigned char *b2 = aligned(len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
    for (int round = 0; round < 3; round++) {
      memcpy(b2, b, len);
      size_t meta = 0, body = 0;
      ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
      for (size_t i = meta; i < len && round == 2; i++) b2[i] ^= 0x5A; /* other data, same meta */
      dist__rpc_msg d1, d2;
      dist_status s1 = dist__rpc_decode(b2, len, &d1);
      int hit = c.meta && c.len == len && !memcmp(c.bytes, b2, c.meta);
      dist_status s2 = dist__rpc_decode_cached(&c, b2, len, &d2, d2.t);
      hits += hit;
      CU_ASSERT_EQUAL_FATAL(s1, s2);
      if (!s1) {
        CU_ASSERT_EQUAL(d1.name_len, d2.name_len);
        CU_ASSERT(d1.name == d2.name || !d1.name_len);
        CU_ASSERT_EQUAL(d1.extra_len, d2.extra_len);
        CU_ASSERT(d1.extra == d2.extra);
        CU_ASSERT_EQUAL_FATAL(d1.ntensors, d2.ntensors);
        for (int i = 0; i < d1.ntensors; i++) CU_ASSERT(!memcmp(&d1.t[i], &d2.t[i], sizeof d1.t[i]));
        checked++;
      }
    }
    /* One meta byte changed (the memo holds the message): never a hit, and
     * the plain decoder's verdict. */
    size_t meta = 0, body = 0;
    ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));
    for (size_t at = 0; at < meta; at++) {
      dist__rpc_msg d1, d2;
      memcpy(b2, b, len);
      ASSERT_OK(dist__rpc_decode_cached(&c, b2, len, &d2, d2.t));
      b2[at] ^= 0x01;
      dist_status s1 = dist__rpc_decode(b2, len, &d1);
      CU_ASSERT_EQUAL(dist__rpc_decode_cached(&c, b2, len, &d2, d2.t), s1);
      if (!s1) CU_ASSERT(d1.ntensors == d2.ntensors && !memcmp(d1.t, d2.t, sizeof d1.t[0] * (size_t)d1.ntensors));
    }
    free(b), free(b2);
  }
  CU_ASSERT_EQUAL(hits, 2 * 5); /* the same message and other data, for 0 to 4 tensors (5: not kept) */
  CU_ASSERT_EQUAL(checked, 3 * 6);
}

/* ---- tiny messages --------------------------------------------------------------- */

/* Every tensor that fits (each dtype of at most 8 bytes as a scalar and as a
 * vector of every length that fits, and no tensor) in requests and replies:
 * decoded to the same fields, the bytes at the offsets wire.h gives, and
 * encoded again to the same bytes. */
static void test_tiny_round_trips(void) {
  int cases = 0;
  for (int dt = -1; dt < DIST_DTYPE_COUNT; dt++) {
    size_t size = dt < 0 ? 0 : dist_dtype_size((dist_dtype)dt);
    if (dt >= 0 && size > DIST__RPC_TINY_DATA) continue;
    for (int ext = -1; ext <= (dt < 0 ? -1 : (int)(DIST__RPC_TINY_DATA / size)); ext++) {
      unsigned char data[8];
      for (int i = 0; i < 8; i++) data[i] = (unsigned char)(0xA0 + i + dt);
      int64_t e = ext;
      dist_tensor t = dist_tensor_host(data, (dist_dtype)(dt < 0 ? 0 : dt), ext < 0 ? 0 : 1, &e);
      int nt = dt >= 0;
      CU_ASSERT(dist__rpc_tiny_fits(&t, nt, 0));
      for (int kind = DIST__RPC_REQUEST; kind <= DIST__RPC_REPLY; kind += DIST__RPC_REPLY - DIST__RPC_REQUEST) {
        dist__rpc_tiny h = {.call_id = 0x0102030405060708ull + (uint64_t)cases, .kind = (dist__rpc_kind)kind,
                            .ntensors = nt};
        if (kind == DIST__RPC_REQUEST) h.caller = 65535 - cases, h.fn = cases % 256;
        unsigned char b[DIST__RPC_TINY_BYTES];
        memset(b, 0xEE, sizeof b);
        dist__rpc_tiny_encode(b, &h, &t);
        uint64_t id;
        memcpy(&id, b, 8);
        CU_ASSERT_EQUAL(id, h.call_id);
        CU_ASSERT_EQUAL(b[8] | b[9] << 8, kind == DIST__RPC_REQUEST ? h.caller : 0);
        CU_ASSERT_EQUAL(b[10], kind == DIST__RPC_REQUEST ? h.fn : 0);
        CU_ASSERT_EQUAL(b[11], DIST__RPC_TINY_MAGIC);
        CU_ASSERT_EQUAL(b[12], kind);
        CU_ASSERT_EQUAL(b[13], nt ? (unsigned)dt : DIST__RPC_TINY_NONE);
        size_t n = nt ? size * (ext < 0 ? 1 : (size_t)ext) : 0;
        CU_ASSERT(!memcmp(b + 16, data, n));
        for (size_t i = 16 + n; i < sizeof b; i++) CU_ASSERT_EQUAL(b[i], 0);
        dist__rpc_tiny d;
        dist_tensor u;
        memset(&u, 0x77, sizeof u);
        ASSERT_OK(dist__rpc_tiny_decode(b, sizeof b, &d, &u));
        CU_ASSERT_EQUAL(d.call_id, h.call_id);
        CU_ASSERT_EQUAL(d.kind, h.kind);
        CU_ASSERT_EQUAL(d.caller, kind == DIST__RPC_REQUEST ? h.caller : 0);
        CU_ASSERT_EQUAL(d.fn, kind == DIST__RPC_REQUEST ? h.fn : 0);
        CU_ASSERT_EQUAL_FATAL(d.ntensors, nt);
        if (nt) {
          CU_ASSERT_EQUAL(u.dtype, t.dtype);
          CU_ASSERT_EQUAL(u.memory, DIST_MEM_HOST);
          CU_ASSERT_EQUAL_FATAL(u.ndim, t.ndim);
          for (int k = 0; k < DIST_TENSOR_MAX_DIMS; k++) CU_ASSERT_EQUAL(u.shape[k], t.shape[k]);
          CU_ASSERT_EQUAL(dist_tensor_nbytes(&u), n);
          CU_ASSERT(n ? u.data == b + 16 : u.data == NULL);
        }
        unsigned char again[DIST__RPC_TINY_BYTES];
        memset(again, 0x11, sizeof again);
        dist__rpc_tiny_encode(again, &d, nt ? &u : NULL);
        CU_ASSERT(!memcmp(again, b, sizeof b));
        cases++;
      }
    }
  }
  CU_ASSERT(cases > 60);
}

/* What fits a tiny message and what does not. */
static void test_tiny_fits(void) {
  unsigned char data[16] = {0};
  int64_t e8 = 8, e9 = 9, e2 = 2, neg = -1, sh[2] = {2, 2};
  dist_tensor u8 = dist_tensor_host(data, DIST_U8, 1, &e8), d = dist_tensor_host(data, DIST_F64, 0, NULL);
  CU_ASSERT(dist__rpc_tiny_fits(&u8, 1, 0));
  CU_ASSERT(dist__rpc_tiny_fits(&d, 1, 0));
  CU_ASSERT(dist__rpc_tiny_fits(NULL, 0, 0));
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&u8, 1, 1));                                        /* options */
  dist_tensor two[2] = {u8, u8};
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(two, 2, 0));                                        /* two tensors */
  dist_tensor t = dist_tensor_host(data, DIST_U8, 1, &e9);
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* 9 bytes */
  t = dist_tensor_host(data, DIST_F64, 1, &e2);
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* 16 bytes */
  t = dist_tensor_host(data, DIST_C128, 0, NULL);
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* a 16-byte scalar */
  t = dist_tensor_host(data, DIST_U8, 2, sh);
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* rank 2 */
  t = dist_tensor_host(data, DIST_U8, 1, &neg);
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* a negative extent */
  t = dist_tensor_host(NULL, DIST_U8, 1, &e8);
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* bytes without data */
  t = u8;
  t.memory = DIST_MEM_CUDA;
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* device memory */
  t = u8;
  t.dtype = DIST_DTYPE_COUNT;
  CU_ASSERT_FALSE(dist__rpc_tiny_fits(&t, 1, 0));                                         /* no dtype */
}

/* Every field out of range, every length but 24, padding that is not zero. */
static void test_tiny_rejections(void) {
  unsigned char data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t e4 = 4;
  dist_tensor t = dist_tensor_host(data, DIST_U8, 1, &e4);
  dist__rpc_tiny h = {.call_id = 9, .caller = 1, .fn = 2, .kind = DIST__RPC_REQUEST, .ntensors = 1}, d;
  unsigned char good[DIST__RPC_TINY_BYTES], b[DIST__RPC_TINY_BYTES + 8];
  dist__rpc_tiny_encode(good, &h, &t);
  dist_tensor u;
  ASSERT_OK(dist__rpc_tiny_decode(good, sizeof good, &d, &u));
  for (size_t len = 0; len < sizeof b; len++) {
    if (len == DIST__RPC_TINY_BYTES) continue;
    memset(b, 0, sizeof b);
    memcpy(b, good, len < sizeof good ? len : sizeof good);
    ASSERT_STATUS(dist__rpc_tiny_decode(b, len, &d, &u), DIST_ERR_CORRUPT);
  }
  struct {
    int at;
    unsigned char v;
  } bad[] = {{11, 0}, {11, DIST__RPC_TINY_MAGIC ^ 1}, {12, 0}, {12, DIST__RPC_VJP}, {12, DIST__RPC_KINDS},
             {13, DIST_DTYPE_COUNT}, {13, 0xFE}, {14, 2}, {14, 255}, {15, 9}, /* 9 bytes */
             {20, 1}, {23, 0x80}};                                                    /* padding after 4 bytes */
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    memcpy(b, good, sizeof good);
    b[bad[i].at] = bad[i].v;
    ASSERT_STATUS(dist__rpc_tiny_decode(b, sizeof good, &d, &u), DIST_ERR_CORRUPT);
  }
  /* A scalar with an extent, no tensor with a shape, a reply naming a caller or function. */
  memcpy(b, good, sizeof good);
  b[14] = 0;
  ASSERT_STATUS(dist__rpc_tiny_decode(b, sizeof good, &d, &u), DIST_ERR_CORRUPT);
  memcpy(b, good, sizeof good);
  b[13] = DIST__RPC_TINY_NONE;
  ASSERT_STATUS(dist__rpc_tiny_decode(b, sizeof good, &d, &u), DIST_ERR_CORRUPT);
  memset(b + 13, 0, 11), b[13] = DIST__RPC_TINY_NONE;
  ASSERT_OK(dist__rpc_tiny_decode(b, sizeof good, &d, &u));
  CU_ASSERT_EQUAL(d.ntensors, 0);
  b[16] = 1; /* data without a tensor */
  ASSERT_STATUS(dist__rpc_tiny_decode(b, sizeof good, &d, &u), DIST_ERR_CORRUPT);
  memcpy(b, good, sizeof good);
  b[12] = DIST__RPC_REPLY;
  ASSERT_STATUS(dist__rpc_tiny_decode(b, sizeof good, &d, &u), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS("reply");
  b[8] = b[9] = b[10] = 0;
  ASSERT_OK(dist__rpc_tiny_decode(b, sizeof good, &d, &u));
  CU_ASSERT_EQUAL(d.kind, DIST__RPC_REPLY);
}

/* ---- the encoder's refusals ---------------------------------------------------- */

static void test_encode_invalid(void) {
  dist__rpc_msg m;
  size_t meta = 0, body = 0;
  char longname[DIST_RPC_MAX_NAME + 2];
  memset(longname, 'n', sizeof longname);
  unsigned char buf[512];

  memset(&m, 0, sizeof m);
  m.name = longname;
  m.name_len = DIST_RPC_MAX_NAME + 1;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__rpc_encode_meta(&m, buf, sizeof buf, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("name");
  m.name_len = DIST_RPC_MAX_NAME;
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));

  memset(&m, 0, sizeof m);
  m.ntensors = DIST_RPC_MAX_ARGS + 1;
  for (int i = 0; i < DIST_RPC_MAX_ARGS; i++) m.t[i] = dist_tensor_host(NULL, DIST_F32, 1, (int64_t[]){0});
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__rpc_encode_meta(&m, buf, sizeof buf, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("tensors");
  m.ntensors = -1;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  m.ntensors = DIST_RPC_MAX_ARGS;
  ASSERT_OK(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body));

  memset(&m, 0, sizeof m);
  m.extra = buf;
  m.extra_len = DIST__RPC_EXTRA_MAX + 1;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);

  /* Tensors the wire cannot describe. */
  memset(&m, 0, sizeof m);
  m.ntensors = 1;
  m.t[0] = dist_tensor_host(NULL, DIST_F32, 1, (int64_t[]){0});
  m.t[0].dtype = DIST_DTYPE_COUNT;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  m.t[0].dtype = (dist_dtype)-1;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  m.t[0].dtype = DIST_F32;
  m.t[0].ndim = DIST_TENSOR_MAX_DIMS + 1;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  m.t[0].ndim = -1;
  ASSERT_STATUS(dist__rpc_encode_meta(&m, NULL, 0, &meta, &body), DIST_ERR_INVALID_ARGUMENT);
  /* The one-pass encoder refuses them with the same messages. */
  ASSERT_STATUS(dist__rpc_encode_body(&m, buf, sizeof buf, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dims");
  m.t[0].ndim = 1;
  m.t[0].shape[0] = -3;
  ASSERT_STATUS(dist__rpc_encode_body(&m, buf, sizeof buf, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("extent");
  m.t[0].shape[0] = 2;
  ASSERT_STATUS(dist__rpc_encode_body(&m, buf, sizeof buf, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("no data");
  m.ntensors = DIST_RPC_MAX_ARGS + 1;
  ASSERT_STATUS(dist__rpc_encode_body(&m, buf, sizeof buf, &body), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("tensors");
}

/* ---- the fuzzer's seeds ---------------------------------------------------------- */

static int write_file(const char *dir, const char *name, const void *a, size_t an, const void *b, size_t bn) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  int bad = fwrite(a, 1, an, f) != an || (bn && fwrite(b, 1, bn, f) != bn);
  return fclose(f) || bad;
}

/* A seed: the header (kind, body_len = the full body's) and the body, whole
 * (cut < 0) or its first `cut` bytes. */
static int seed(const char *dir, const char *name, dist__rpc_kind kind, const dist__rpc_msg *m, long cut) {
  size_t len = 0;
  unsigned char *b = assemble_plain(m, &len);
  if (!b) {
    fprintf(stderr, "%s: encoding failed: %s\n", name, dist_last_error());
    return 1;
  }
  dist__rpc_header h = {.magic = DIST__RPC_MAGIC, .version = DIST__RPC_VERSION, .kind = (uint8_t)kind, .caller = 1,
                        .call_id = 42};
  size_t keep = cut < 0 || (size_t)cut > len ? len : (size_t)cut;
  int r = write_file(dir, name, &h, sizeof h, b, keep);
  free(b);
  return r;
}

static int write_corpus(const char *dir) {
  static float f[6] = {1, 2, 3, 4, 5, 6};
  static double scalar = 0.5;
  static const char opts[] = "k=v";
  static const char err[] = "worker1: DIST_ERR_INVALID_ARGUMENT: no function 'nope'";
  dist__rpc_msg empty, call, reply, many;
  memset(&empty, 0, sizeof empty);
  memset(&call, 0, sizeof call);
  call.name = "add";
  call.name_len = 3;
  call.ntensors = 2;
  call.t[0] = dist_tensor_host(f, DIST_F32, 2, (int64_t[]){2, 3});
  call.t[1] = dist_tensor_host(&scalar, DIST_F64, 0, NULL);
  call.extra = opts;
  call.extra_len = sizeof opts - 1;
  memset(&reply, 0, sizeof reply);
  reply.ntensors = 2;
  reply.t[0] = dist_tensor_host(NULL, DIST_I64, 2, (int64_t[]){0, 4});
  reply.t[1] = dist_tensor_host(f, DIST_BF16, 1, (int64_t[]){5});
  dist__rpc_msg failed;
  memset(&failed, 0, sizeof failed);
  failed.extra = err;
  failed.extra_len = sizeof err - 1;
  memset(&many, 0, sizeof many);
  many.name = "vjp_of_everything";
  many.name_len = strlen(many.name);
  many.ntensors = DIST_RPC_MAX_ARGS;
  for (int i = 0; i < DIST_RPC_MAX_ARGS; i++) many.t[i] = tensor(i, 0);
  int r = 0;
  size_t many_len = 0;
  unsigned char *many_body = assemble_plain(&many, &many_len);
  if (!many_body) return 1;
  free(many_body);
  r |= seed(dir, "empty_request", DIST__RPC_REQUEST, &empty, -1);
  r |= seed(dir, "call_add", DIST__RPC_REQUEST, &call, -1);
  r |= seed(dir, "reply_zero_sized", DIST__RPC_REPLY, &reply, -1);
  r |= seed(dir, "reply_error", DIST__RPC_REPLY, &failed, -1);
  r |= seed(dir, "vjp_sixteen_tensors", DIST__RPC_VJP, &many, -1);
  r |= seed(dir, "call_add_truncated_meta", DIST__RPC_REQUEST, &call, 20);
  r |= seed(dir, "call_add_truncated_data", DIST__RPC_REQUEST, &call, 70);
  r |= seed(dir, "vjp_truncated_last_byte", DIST__RPC_VJP, &many, (long)many_len - 1);
  /* Tiny messages (the fuzzer reads the whole input as one too). */
  unsigned char tiny[DIST__RPC_TINY_BYTES];
  double x = 2.5;
  dist_tensor one = dist_tensor_host(&x, DIST_F64, 0, NULL);
  dist__rpc_tiny th = {.call_id = 42, .caller = 1, .fn = 3, .kind = DIST__RPC_REQUEST, .ntensors = 1};
  dist__rpc_tiny_encode(tiny, &th, &one);
  r |= write_file(dir, "tiny_request", tiny, sizeof tiny, NULL, 0);
  th = (dist__rpc_tiny){.call_id = 42, .kind = DIST__RPC_REPLY};
  dist__rpc_tiny_encode(tiny, &th, NULL);
  r |= write_file(dir, "tiny_reply_empty", tiny, sizeof tiny, NULL, 0);
  r |= seed(dir, "header_only", DIST__RPC_REQUEST, &empty, 0);
  return r;
}

static CU_TestInfo tests[] = {
    {"round trips: 0..16 tensors, names, extra bytes", test_round_trips},
    {"round trips: scalars, zero-sized, every dtype, largest parts", test_edge_messages},
    {"the layout of wire.h, padding zeroed", test_layout},
    {"encoding into too small a buffer", test_encode_small_buffer},
    {"every truncation is corrupt", test_truncations},
    {"bad names, counts, dtypes, ranks, extents, extra, trailing bytes", test_bad_fields},
    {"trailing bytes after an encoded message", test_trailing_after_encoded},
    {"headers", test_headers},
    {"a small call fits UCX's short protocol", test_small_sizes},
    {"the encoder's refusals", test_encode_invalid},
    {"the decoder's memo", test_decode_memo},
    {"tiny messages: round trips and layout", test_tiny_round_trips},
    {"tiny messages: what fits", test_tiny_fits},
    {"tiny messages: rejections", test_tiny_rejections},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {{"rpc wire", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write-corpus")) return write_corpus(argv[2]) != 0;
  return cunit_run(suites, "test_rpc_wire", 0) != 0;
}
