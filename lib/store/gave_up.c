/* The status code a rank that gave up passes to the others with its
 * message on the store ("[code] text", dist__rdzv_give_up_on). The value
 * comes from the network: read defensively (tests/fuzz/fuzz_store.c). */
#include <ctype.h>
#include <stdlib.h>

#include "store/store.h"

static int is_error_code(long c) {
#define DIST__CASE(name, value, text) case value:
  switch (c) {
    DIST_STATUS_MAP(DIST__CASE)
    return c != DIST_SUCCESS;
    default: return 0;
  }
#undef DIST__CASE
}

dist_status dist__store_gave_up_code(const char **msg) {
  const char *m = *msg;
  char *end = NULL;
  if (m[0] != '[' || (m[1] != '-' && !isdigit((unsigned char)m[1]))) return DIST_ERR_ABORTED;
  long code = strtol(m + 1, &end, 10);
  if (end == m + 1 || end[0] != ']' || end[1] != ' ' || !is_error_code(code)) return DIST_ERR_ABORTED;
  *msg = end + 2;
  return (dist_status)code;
}
