/* A growable byte buffer for the store's requests, replies and values. */
#ifndef DISTMGR_STORE_BYTES_H
#define DISTMGR_STORE_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct dist__bytes {
  uint8_t *p;
  size_t n, cap;
} dist__bytes;

/* Append n bytes; 0, or -1 (out of memory, buffer unchanged). */
static inline int dist__bytes_add(dist__bytes *b, const void *src, size_t n) {
  if (!n) return 0;
  if (n > b->cap - b->n) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n < n)
      if (__builtin_mul_overflow(cap, 2, &cap)) return -1;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
  return 0;
}

/* Drop the first n bytes. */
static inline void dist__bytes_consume(dist__bytes *b, size_t n) {
  if (!n) return;
  memmove(b->p, b->p + n, b->n - n);
  b->n -= n;
}

static inline void dist__bytes_free(dist__bytes *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

#endif
