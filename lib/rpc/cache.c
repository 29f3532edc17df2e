/* Per-thread free lists of what every call allocates and frees: futures,
 * outgoing messages and small buffers. A small round trip made six
 * allocations of 64-byte aligned or multi-KiB memory, which glibc serves
 * from its slow paths (posix_memalign, consolidation of its fast bins):
 * 0.4 us of the round trip (bench/RESULTS.md, "bench/rpc"). A thread keeps
 * a few of each, constructed; they are destroyed when it exits. */
#include <stdlib.h>

#include "rpc/rpc_internal.h"

#define KEEP 4 /* objects kept per kind and thread */

typedef struct lists {
  void *obj[DIST__RPC_CACHE_KINDS][KEEP];
  int n[DIST__RPC_CACHE_KINDS];
  void (*destroy[DIST__RPC_CACHE_KINDS])(void *);
} lists;

static pthread_key_t key;
static int key_ok; /* no key, no destructor: nothing is kept */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static DIST__RPC_TLS lists *mine;

static void destroy(void *arg) {
  lists *l = arg;
  mine = NULL; /* a later destructor of this thread that frees ours keeps nothing */
  for (int k = 0; k < DIST__RPC_CACHE_KINDS; k++)
    for (int i = 0; i < l->n[k]; i++) l->destroy[k](l->obj[k][i]);
  free(l);
}

static void make_key(void) { key_ok = pthread_key_create(&key, destroy) == 0; }

static lists *get_lists(void) {
  if (mine) return mine;
  pthread_once(&once, make_key);
  if (!key_ok) return NULL;
  lists *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  if (pthread_setspecific(key, l)) { /* no destructor: keep nothing */
    free(l);
    return NULL;
  }
  return mine = l;
}

void *dist__rpc_cache_get(dist__rpc_cache_kind k) {
  lists *l = mine;
  return l && l->n[k] ? l->obj[k][--l->n[k]] : NULL;
}

int dist__rpc_cache_put(dist__rpc_cache_kind k, void *p, void (*destroy)(void *)) {
  lists *l = get_lists();
  if (!l || l->n[k] == KEEP) return 0;
  l->destroy[k] = destroy;
  l->obj[k][l->n[k]++] = p;
  return 1;
}

void dist__rpc_cache_flush(void) {
  lists *l = mine;
  if (!l) return;
  for (int k = 0; k < DIST__RPC_CACHE_KINDS; k++) {
    for (int i = 0; i < l->n[k]; i++) l->destroy[k](l->obj[k][i]);
    l->n[k] = 0;
  }
}
