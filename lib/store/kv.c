/* The store's hash table (kv.h). */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "store/kv.h"

struct dist__kv_entry {
  dist__kv_entry *next;
  size_t kl, vl;
  uint8_t *v;
  uint8_t k[]; /* the key */
};

int dist__kv_init(dist__kv *t) {
  t->count = 0;
  t->nbuckets = 256;
  t->bucket = calloc(t->nbuckets, sizeof *t->bucket);
  return t->bucket ? 0 : -1;
}

void dist__kv_free(dist__kv *t) {
  for (size_t b = 0; t->bucket && b < t->nbuckets; b++)
    for (dist__kv_entry *e = t->bucket[b], *next; e; e = next) {
      next = e->next;
      free(e->v);
      free(e);
    }
  free(t->bucket);
  t->bucket = NULL;
  t->count = t->nbuckets = 0;
}

static dist__kv_entry **slot(const dist__kv *t, const uint8_t *k, size_t kl) {
  dist__kv_entry **e = &t->bucket[dist__hash(DIST__HASH_SEED, k, kl) & (t->nbuckets - 1)];
  while (*e && ((*e)->kl != kl || memcmp((*e)->k, k, kl))) e = &(*e)->next;
  return e;
}

int dist__kv_get(const dist__kv *t, const uint8_t *k, size_t kl, const uint8_t **v, size_t *vl) {
  dist__kv_entry *e = *slot(t, k, kl);
  if (e && v) *v = e->v, *vl = e->vl;
  return e != NULL;
}

/* Twice the buckets when the table is full (a power of two: slot() masks). */
static void grow(dist__kv *t) {
  size_t n = t->nbuckets * 2;
  dist__kv_entry **b = n > t->nbuckets ? calloc(n, sizeof *b) : NULL;
  if (!b) return; /* longer chains, still correct */
  for (size_t i = 0; i < t->nbuckets; i++)
    for (dist__kv_entry *e = t->bucket[i], *next; e; e = next) {
      next = e->next;
      dist__kv_entry **to = &b[dist__hash(DIST__HASH_SEED, e->k, e->kl) & (n - 1)];
      e->next = *to;
      *to = e;
    }
  free(t->bucket);
  t->bucket = b;
  t->nbuckets = n;
}

static int put(dist__kv *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, int append) {
  dist__kv_entry **s = slot(t, k, kl), *e = *s;
  size_t keep = e && append ? e->vl : 0;
  uint8_t *nv = malloc(keep + vl + 1); /* +1: never malloc(0) */
  if (!nv) return -1;
  if (keep) memcpy(nv, e->v, keep);
  if (vl) memcpy(nv + keep, v, vl);
  if (!e) {
    e = malloc(sizeof *e + kl);
    if (!e) return free(nv), -1;
    memcpy(e->k, k, kl);
    e->kl = kl;
    e->next = NULL;
    e->v = NULL;
    *s = e;
    t->count++;
  }
  free(e->v);
  e->v = nv;
  e->vl = keep + vl;
  if (t->count > t->nbuckets) grow(t);
  return 0;
}

int dist__kv_set(dist__kv *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl) { return put(t, k, kl, v, vl, 0); }

int dist__kv_append(dist__kv *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl) {
  return put(t, k, kl, v, vl, 1);
}

int dist__kv_delete(dist__kv *t, const uint8_t *k, size_t kl) {
  dist__kv_entry **s = slot(t, k, kl), *e = *s;
  if (!e) return 0;
  *s = e->next;
  free(e->v);
  free(e);
  t->count--;
  return 1;
}

int dist__kv_decimal(const uint8_t *v, size_t vl, int64_t *out) {
  size_t i = vl && v[0] == '-';
  if (i == vl) return -1;
  int64_t x = 0;
  for (; i < vl; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    int d = v[i] - '0';
    /* accumulate negatively: INT64_MIN has no positive counterpart */
    if (__builtin_mul_overflow(x, 10, &x) || __builtin_sub_overflow(x, d, &x)) return -1;
  }
  if (!(vl && v[0] == '-') && __builtin_mul_overflow(x, -1, &x)) return -1;
  *out = x;
  return 0;
}
