/* The store's keys and values: a chained hash table of byte strings. */
#ifndef DISTMGR_STORE_KV_H
#define DISTMGR_STORE_KV_H

#include <stddef.h>
#include <stdint.h>

typedef struct dist__kv_entry dist__kv_entry;

typedef struct dist__kv {
  dist__kv_entry **bucket;
  size_t nbuckets, count;
} dist__kv;

int dist__kv_init(dist__kv *t); /* 0, or -1: out of memory */
void dist__kv_free(dist__kv *t);
/* 1 and the value (when v is not NULL) if the key exists, else 0. */
int dist__kv_get(const dist__kv *t, const uint8_t *k, size_t kl, const uint8_t **v, size_t *vl);
int dist__kv_set(dist__kv *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl);    /* 0 or -1 */
int dist__kv_append(dist__kv *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl); /* 0 or -1 */
int dist__kv_delete(dist__kv *t, const uint8_t *k, size_t kl);                              /* 1 if it existed */
/* A value as ADD keeps it: an optional '-' and decimal digits within int64. 0 and *out, or -1. */
int dist__kv_decimal(const uint8_t *v, size_t vl, int64_t *out);

#endif
