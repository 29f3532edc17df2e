/* The one state of remote calls, shared by the files of lib/rpc. */
#include <time.h>

#include "rpc/rpc_internal.h"

dist__rpc_engine dist__rpc;

double dist__rpc_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}
