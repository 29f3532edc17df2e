/* Message bodies and output tensors. Large ones are kept for reuse: a fresh
 * buffer above glibc's mmap threshold is mapped and faulted in page by page
 * on every call (three such buffers per large round trip), which held a
 * 64 MiB echo to a quarter of the transport's rate. */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_internal.h"

#define HEAD 64                    /* the capacity, before the 64-byte aligned memory */
#define KEEP_FROM ((size_t)1 << 20) /* buffers from 1 MiB are kept */
#define KEEP_MAX 4                 /* buffers kept at most */
#define KEEP_BYTES ((size_t)1 << 29) /* and bytes kept at most: 512 MiB */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *kept[KEEP_MAX];
static size_t kept_bytes;

static size_t capacity(const void *p) {
  size_t c;
  memcpy(&c, (const char *)p - HEAD, sizeof c);
  return c;
}

void *dist__rpc_buf_get(size_t n) {
  if (n >= KEEP_FROM) { /* the smallest kept buffer that fits, not more than twice too big */
    pthread_mutex_lock(&mu);
    int best = -1;
    for (int i = 0; i < KEEP_MAX; i++)
      if (kept[i] && capacity(kept[i]) >= n && capacity(kept[i]) / 2 <= n &&
          (best < 0 || capacity(kept[i]) < capacity(kept[best])))
        best = i;
    void *p = best >= 0 ? kept[best] : NULL;
    if (p) kept[best] = NULL, kept_bytes -= capacity(p);
    pthread_mutex_unlock(&mu);
    if (p) return p;
  }
  char *raw = NULL;
  if (n > SIZE_MAX - HEAD || posix_memalign((void **)&raw, 64, HEAD + (n ? n : 1))) return NULL;
  memcpy(raw, &n, sizeof n);
  return raw + HEAD;
}

void dist__rpc_buf_put(void *p) {
  if (!p) return;
  size_t c = capacity(p);
  if (c >= KEEP_FROM) {
    pthread_mutex_lock(&mu);
    int slot = -1;
    for (int i = 0; i < KEEP_MAX && slot < 0; i++)
      if (!kept[i]) slot = i;
    if (slot >= 0 && kept_bytes + c <= KEEP_BYTES) {
      kept[slot] = p;
      kept_bytes += c;
      p = NULL;
    }
    pthread_mutex_unlock(&mu);
    if (!p) return;
  }
  free((char *)p - HEAD);
}

void dist__rpc_buf_drain(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < KEEP_MAX; i++)
    if (kept[i]) free((char *)kept[i] - HEAD), kept[i] = NULL;
  kept_bytes = 0;
  pthread_mutex_unlock(&mu);
}
