#include "agree.h"

#include <stdint.h>
#include <stdio.h>

dist_status agree_status(const char *group, dist_status st) {
  char msg[1024] = "";
  if (st) snprintf(msg, sizeof msg, "%s", dist_last_error()); /* before any collective can replace it */
  int rank = 0;
  dist_status e = dist_group_rank(group, &rank);
  if (e) return e;
  /* MINLOC in one i64 MIN: status (negative on failure) above, rank below,
   * so the minimum is the most negative status at its lowest rank. */
  int64_t v = (int64_t)st * ((int64_t)1 << 32) + rank, one = 1;
  dist_tensor t = dist_tensor_host(&v, DIST_I64, 1, &one);
  if ((e = dist_all_reduce(group, &t, DIST_MIN))) return e;
  int64_t root = v & 0xFFFFFFFF, code = (v - root) / ((int64_t)1 << 32);
  if (code == DIST_SUCCESS) return DIST_SUCCESS;
  int64_t len = (int64_t)sizeof msg;
  t = dist_tensor_host(msg, DIST_U8, 1, &len);
  if ((e = dist_broadcast(group, &t, (int)root))) return e;
  msg[sizeof msg - 1] = 0;
  return dist_set_error((dist_status)code, "%s", msg);
}
