/* Per-thread free lists of what every call allocates and frees: futures,
 * outgoing messages and small buffers. A small round trip made six
 * allocations of 64-byte aligned or multi-KiB memory, which glibc serves
 * from its slow paths (posix_memalign, consolidation of its fast bins):
 * 0.4 us of the round trip (bench/RESULTS.md, "bench/rpc"). A thread keeps
 * a few of each, constructed; they are destroyed when it exits. Also the
 * thread-local of remote calls (rpc_internal.h). */
#include <stdlib.h>

#include "rpc/rpc_internal.h"

_Thread_local dist__rpc_thread dist__rpc_me;

static pthread_key_t key;
static int key_ok; /* no key, no destructor: nothing is kept */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void empty(dist__rpc_cache_lists *l) {
  for (int k = 0; k < DIST__RPC_CACHE_KINDS; k++) {
    for (int i = 0; i < l->n[k]; i++) l->destroy[k](l->obj[k][i]);
    l->n[k] = 0;
  }
}

/* At thread exit (its thread-locals live until the key destructors ran). */
static void destroy(void *arg) {
  dist__rpc_thread *me = arg;
  me->cache_state = 2; /* a later destructor of this thread that frees ours keeps nothing */
  empty(&me->cache);
}

static void make_key(void) { key_ok = pthread_key_create(&key, destroy) == 0; }

/* The first put of a thread registers it for its exit; no key, nothing kept. */
int dist__rpc_cache_put_slow(dist__rpc_cache_kind k, void *p, void (*destroy)(void *)) {
  dist__rpc_thread *me = &dist__rpc_me;
  if (me->cache_state == 0) {
    pthread_once(&once, make_key);
    me->cache_state = key_ok && !pthread_setspecific(key, me) ? 1 : 2;
  }
  if (me->cache_state != 1 || me->cache.n[k] == DIST__RPC_CACHE_KEEP) return 0;
  me->cache.destroy[k] = destroy;
  me->cache.obj[k][me->cache.n[k]++] = p;
  return 1;
}

void dist__rpc_cache_flush(void) { empty(&dist__rpc_me.cache); }
