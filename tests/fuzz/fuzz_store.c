/* libFuzzer target for the store's wire parser (lib/store/wire.c), what a
 * network peer controls, and the decimal values ADD reads (lib/store/kv.c).
 *
 * The first byte picks the dialect; the rest is a stream of requests parsed
 * as the server does, under small limits so that the limit paths run. Every
 * parsed request must lie inside the input, with its strings within the
 * limits and inside the request, and each string reachable through
 * dist__store_req_arg; BAD must say why, MORE must consume nothing. A value
 * ADD accepts as decimal must be the number strtoll reads. The input as a
 * gave-up message (its "[code] " tag, lib/store/client.c) must give an
 * error code and a message inside it, past a tag only when one was read.
 * Any violation aborts.
 *
 * Build and run: make fuzz (or make check: tests/fuzz/run.sh). Seeds:
 * tests/fuzz/corpus/fuzz_store/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "store/kv.h"
#include "store/store.h"
#include "store/wire.h"

#include "check.h"

static void check_decimal(const uint8_t *p, size_t n) {
  int64_t v;
  if (dist__kv_decimal(p, n, &v)) return;
  char text[32];
  CHECK(n > 0 && n < sizeof text);
  memcpy(text, p, n);
  text[n] = 0;
  /* Accepted text is the number, up to leading zeros ("-0" and "007" too). */
  CHECK(strtoll(text, NULL, 10) == v);
}

static void check_gave_up(const uint8_t *p, size_t n) {
  char *text = malloc(n + 1);
  if (!text) return;
  memcpy(text, p, n);
  text[n] = 0;
  const char *msg = text;
  dist_status code = dist__store_gave_up_code(&msg);
  CHECK(code < 0 && dist_status_string(code)[0] && strcmp(dist_status_string(code), "unknown status"));
  CHECK(msg >= text && msg <= text + strlen(text));
  if (msg != text) CHECK(text[0] == '[' && msg - text >= 4 && msg[-1] == ' ' && msg[-2] == ']');
  else CHECK(code == DIST_ERR_ABORTED);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  check_gave_up(data, size);
  dist__store_dialect d = (dist__store_dialect)(data[0] % DIST__STORE_DIALECTS);
  const dist__store_limits lim = {64, 256, 8};
  const uint8_t *buf = data + 1;
  size_t n = size - 1, at = 0;
  check_decimal(buf, n < 24 ? n : 24);
  while (at < n) {
    dist__store_req r;
    size_t used = 0;
    char why[160];
    dist__store_parse_result pr = dist__store_parse(d, &lim, buf + at, n - at, &r, &used, why, sizeof why);
    if (pr == DIST__STORE_BAD) {
      CHECK(why[0] != 0);
      break;
    }
    if (pr == DIST__STORE_MORE) {
      CHECK(used == 0);
      break;
    }
    CHECK(used >= 1 && used <= n - at);
    CHECK(dist__store_opcode(d, r.op) == buf[at]);
    CHECK(r.nargs <= 1 + 2 * lim.keys_max);
    for (size_t i = 0; i < r.nargs; i++) {
      const uint8_t *p;
      size_t len;
      dist__store_req_arg(buf + at, &r, i, &p, &len);
      CHECK(p >= buf + at && p + len <= buf + at + used);
      CHECK(len <= lim.value_max);
      if (i < DIST__STORE_ARGS_INLINE) CHECK(p == r.arg[i] && len == r.len[i]);
    }
    at += used;
  }
  return 0;
}
