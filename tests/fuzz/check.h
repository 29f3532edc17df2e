/* The fuzz targets' invariant check: a violated one says where and aborts,
 * which libFuzzer reports as a crash and keeps the input. */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                           \
    }                                                                    \
  } while (0)

#endif
