/* Per-thread free lists of what every call allocates and frees: futures,
 * outgoing messages and small buffers. A small round trip made six
 * allocations of 64-byte aligned or multi-KiB memory, which glibc serves
 * from its slow paths (posix_memalign, consolidation of its fast bins):
 * 0.4 us of the round trip (bench/RESULTS.md, "bench/rpc"). A thread keeps
 * a few of each, constructed; they are destroyed when it exits. */
#include <stdlib.h>

#include "rpc/rpc_internal.h"

typedef dist__rpc_cache_lists lists;

static pthread_key_t key;
static int key_ok; /* no key, no destructor: nothing is kept */
static pthread_once_t once = PTHREAD_ONCE_INIT;
DIST__RPC_TLS lists *dist__rpc_cache_mine;

static void destroy(void *arg) {
  lists *l = arg;
  dist__rpc_cache_mine = NULL; /* a later destructor of this thread that frees ours keeps nothing */
  for (int k = 0; k < DIST__RPC_CACHE_KINDS; k++)
    for (int i = 0; i < l->n[k]; i++) l->destroy[k](l->obj[k][i]);
  free(l);
}

static void make_key(void) { key_ok = pthread_key_create(&key, destroy) == 0; }

static lists *get_lists(void) {
  if (dist__rpc_cache_mine) return dist__rpc_cache_mine;
  pthread_once(&once, make_key);
  if (!key_ok) return NULL;
  lists *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  if (pthread_setspecific(key, l)) { /* no destructor: keep nothing */
    free(l);
    return NULL;
  }
  return dist__rpc_cache_mine = l;
}

/* The first put of a thread: its lists. */
int dist__rpc_cache_put_slow(dist__rpc_cache_kind k, void *p, void (*destroy)(void *)) {
  lists *l = get_lists();
  if (!l || l->n[k] == DIST__RPC_CACHE_KEEP) return 0;
  l->destroy[k] = destroy;
  l->obj[k][l->n[k]++] = p;
  return 1;
}

void dist__rpc_cache_flush(void) {
  lists *l = dist__rpc_cache_mine;
  if (!l) return;
  for (int k = 0; k < DIST__RPC_CACHE_KINDS; k++) {
    for (int i = 0; i < l->n[k]; i++) l->destroy[k](l->obj[k][i]);
    l->n[k] = 0;
  }
}
