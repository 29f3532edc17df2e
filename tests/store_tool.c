/* distmgr's store from the command line, for tests/store_torch.sh:
 *   store_tool serve DIALECT           prints "port N", serves until stdin closes,
 *                                      then prints "dropped N"
 *   store_tool check HOST PORT DIALECT runs every client request against a
 *                                      store (torch's, in the test) and checks
 *                                      the replies; leaves "/from_c" = "hello"
 * Exit status 0 when every check held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "store/store.h"

static int failures;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "store_tool: check failed at line %d: %s (%s)\n", __LINE__, #cond, dist_last_error()); \
      failures++;                                                    \
    }                                                                \
  } while (0)

static int same(const uint8_t *v, size_t n, const char *want) { return v && n == strlen(want) && !memcmp(v, want, n); }

static void check_store(dist__store_client *c, dist__store_dialect d) {
  uint8_t *v = NULL;
  size_t n = 0;
  int64_t x = 0;
  int all = -1, del = -1;
  CHECK(dist__store_set(c, "/k", "v1", 2) == DIST_SUCCESS);
  CHECK(dist__store_get(c, "/k", 5, &v, &n) == DIST_SUCCESS && same(v, n, "v1"));
  free(v), v = NULL;
  CHECK(dist__store_add(c, "/n", 7, &x) == DIST_SUCCESS && x == 7);
  CHECK(dist__store_add(c, "/n", -9, &x) == DIST_SUCCESS && x == -2);
  CHECK(dist__store_get(c, "/n", 5, &v, &n) == DIST_SUCCESS && same(v, n, "-2"));
  free(v), v = NULL;
  const char *two[] = {"/k", "/absent"};
  CHECK(dist__store_check(c, two, 2, &all) == DIST_SUCCESS && all == 0);
  CHECK(dist__store_check(c, two, 1, &all) == DIST_SUCCESS && all == 1);
  CHECK(dist__store_compare_set(c, "/k", "v1", 2, "v2", 2, &v, &n) == DIST_SUCCESS && same(v, n, "v2"));
  free(v), v = NULL;
  CHECK(dist__store_compare_set(c, "/k", "zz", 2, "v3", 2, &v, &n) == DIST_SUCCESS && same(v, n, "v2"));
  free(v), v = NULL;
  CHECK(dist__store_compare_set(c, "/new", "x", 1, "v3", 2, &v, &n) == DIST_SUCCESS && same(v, n, "x"));
  free(v), v = NULL;
  CHECK(dist__store_delete(c, "/k", &del) == DIST_SUCCESS && del == 1);
  CHECK(dist__store_delete(c, "/k", &del) == DIST_SUCCESS && del == 0);
  const char *never[] = {"/never"};
  CHECK(dist__store_wait(c, never, 1, 0.3) == DIST_ERR_TIMEOUT);
  CHECK(dist__store_set(c, "/from_c", "hello", 5) == DIST_SUCCESS); /* usable after the timeout */
  CHECK(dist__store_num_keys(c, &x) == DIST_SUCCESS && x >= 2); /* "/n", "/from_c" (and torch's own, if any) */
  (void)d;
}

int main(int argc, char **argv) {
  dist__store_dialect d;
  if (argc == 3 && !strcmp(argv[1], "serve") && !dist__store_dialect_parse(argv[2], &d)) {
    dist__store_server_options o = DIST__STORE_SERVER_OPTIONS_DEFAULT;
    o.dialect = d;
    dist__store_server *s;
    if (dist__store_server_start(0, &o, &s)) return fprintf(stderr, "store_tool: %s\n", dist_last_error()), 1;
    printf("port %d\n", dist__store_server_port(s));
    fflush(stdout);
    while (getchar() != EOF) {
    }
    printf("dropped %ld\n", dist__store_server_dropped(s));
    dist__store_server_stop(s);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "check") && !dist__store_dialect_parse(argv[4], &d)) {
    dist__store_client *c;
    if (dist__store_connect(argv[2], atoi(argv[3]), d, 10, &c))
      return fprintf(stderr, "store_tool: %s\n", dist_last_error()), 1;
    check_store(c, d);
    dist__store_close(c);
    printf("store_tool: %d failed check(s)\n", failures);
    return failures != 0;
  }
  fprintf(stderr, "usage: store_tool serve DIALECT | store_tool check HOST PORT DIALECT\n");
  return 2;
}
