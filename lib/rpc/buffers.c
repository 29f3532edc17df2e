/* Message bodies and output tensors, 64-byte aligned. Up to 4 KiB they come
 * in two sizes from the thread's cache (cache.c): posix_memalign is one of
 * glibc's slow paths, paid several times a call. Large ones are kept for
 * reuse: a fresh buffer above glibc's mmap threshold is mapped and faulted in
 * page by page on every call (three such buffers per large round trip),
 * which held a 64 MiB echo to a quarter of the transport's rate. */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_internal.h"

#define HEAD DIST__RPC_BUF_HEAD
#define KEEP_FROM ((size_t)1 << 20) /* buffers from 1 MiB are kept */
#define KEEP_MAX 4                 /* buffers kept at most */
#define KEEP_BYTES ((size_t)1 << 29) /* and bytes kept at most: 512 MiB */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *kept[KEEP_MAX];
static size_t kept_bytes;

void dist__rpc_buf_destroy(void *p) { free((char *)p - HEAD); }

void *dist__rpc_buf_get_slow(size_t n) {
  if (n <= DIST__RPC_MEDIUM) { /* every buffer of a class has its capacity: any fits */
    int small = n <= DIST__RPC_SMALL;
    void *p = dist__rpc_cache_get(small ? DIST__RPC_CACHE_SMALL : DIST__RPC_CACHE_MEDIUM);
    if (p) return p;
    n = small ? DIST__RPC_SMALL : DIST__RPC_MEDIUM;
  }
  if (n >= KEEP_FROM) { /* the smallest kept buffer that fits, not more than twice too big */
    pthread_mutex_lock(&mu);
    int best = -1;
    for (int i = 0; i < KEEP_MAX; i++)
      if (kept[i] && dist__rpc_buf_capacity(kept[i]) >= n && dist__rpc_buf_capacity(kept[i]) / 2 <= n &&
          (best < 0 || dist__rpc_buf_capacity(kept[i]) < dist__rpc_buf_capacity(kept[best])))
        best = i;
    void *p = best >= 0 ? kept[best] : NULL;
    if (p) kept[best] = NULL, kept_bytes -= dist__rpc_buf_capacity(p);
    pthread_mutex_unlock(&mu);
    if (p) return p;
  }
  char *raw = NULL;
  if (n > SIZE_MAX - HEAD || posix_memalign((void **)&raw, 64, HEAD + (n ? n : 1))) return NULL;
  memcpy(raw, &n, sizeof n);
  return raw + HEAD;
}

void dist__rpc_buf_put_slow(void *p) {
  if (!p) return;
  size_t c = dist__rpc_buf_capacity(p);
  if (c == DIST__RPC_SMALL && dist__rpc_cache_put(DIST__RPC_CACHE_SMALL, p, dist__rpc_buf_destroy)) return;
  if (c == DIST__RPC_MEDIUM && dist__rpc_cache_put(DIST__RPC_CACHE_MEDIUM, p, dist__rpc_buf_destroy)) return;
  void *evicted = NULL;
  if (c >= KEEP_FROM) {
    pthread_mutex_lock(&mu);
    /* A free slot, else the smallest kept buffer if this one is larger: the
     * sizes a program uses now win over those it used before (a full pool of
     * 16 MiB buffers made every 64 MiB call map and fault its buffers anew,
     * bench/RESULTS.md "bench/rpc"). */
    int slot = -1;
    for (int i = 0; i < KEEP_MAX && slot < 0; i++)
      if (!kept[i]) slot = i;
    if (slot < 0) { /* full: the smallest kept, if smaller than this one */
      slot = 0;
      for (int i = 1; i < KEEP_MAX; i++)
        if (dist__rpc_buf_capacity(kept[i]) < dist__rpc_buf_capacity(kept[slot])) slot = i;
      if (dist__rpc_buf_capacity(kept[slot]) >= c) slot = -1;
    }
    size_t freed = slot >= 0 && kept[slot] ? dist__rpc_buf_capacity(kept[slot]) : 0;
    if (slot >= 0 && kept_bytes - freed + c <= KEEP_BYTES) {
      evicted = kept[slot];
      kept[slot] = p;
      kept_bytes = kept_bytes - freed + c;
      p = NULL;
    }
    pthread_mutex_unlock(&mu);
  }
  if (evicted) free((char *)evicted - HEAD);
  if (p) free((char *)p - HEAD);
}

void dist__rpc_buf_drain(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < KEEP_MAX; i++)
    if (kept[i]) free((char *)kept[i] - HEAD), kept[i] = NULL;
  kept_bytes = 0;
  pthread_mutex_unlock(&mu);
}
