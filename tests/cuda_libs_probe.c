/* Loads cuFFT and NCCL the way the library does at its first device use,
 * and prints each outcome: "cufft: ok" or "cufft: error -N: MESSAGE".
 * For tests/cuda_hidden.sh. */
#include <stdio.h>

#include "config.h"
#include "mem/cuda_libs.h"
#include "distmgr.h"

int main(void) {
#ifdef HAVE_CUFFT
  dist_status s = dist__cufft_load();
  printf("cufft: %s%s\n", s ? "error: " : "ok", s ? dist_last_error() : "");
#endif
#ifdef HAVE_NCCL
  dist_status n = dist__nccl_load();
  printf("nccl: %s%s\n", n ? "error: " : "ok", n ? dist_last_error() : "");
#endif
  return 0;
}
