/* The 64-bit hash behind every cross-rank signature (see hash.h). */
#include <string.h>

#include "core/hash.h"

/* Eight bytes per step: the signature of every verified call is hashed, and
 * FNV-1a's byte-at-a-time chain of multiplies was a tenth of a small call's
 * time. Only ranks of one build compare hashes, so the function is free to
 * change between versions. */
uint64_t dist__hash(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h ^= w * 0x9E3779B97F4A7C15ULL;
    h = ((h << 31) | (h >> 33)) * 0xBF58476D1CE4E5B9ULL;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  h ^= n;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL; /* splitmix64's finalizer */
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
  return h ^ (h >> 31);
}
