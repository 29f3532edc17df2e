/* See reserve.h. */
#include "core/reserve.h"

#include <stdlib.h>
#include <string.h>

#define SLOTS 8

/* Untouched pages of .bss cost nothing until a slot is first used. */
static _Alignas(64) unsigned char slots[SLOTS][DIST__RESERVE_SLOT_BYTES];
static int taken[SLOTS];

void *dist__reserve_alloc(size_t bytes, int zero) {
  void *p = zero ? calloc(1, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
  if (p || bytes > DIST__RESERVE_SLOT_BYTES) return p;
  for (int i = 0; i < SLOTS; i++)
    if (!__atomic_exchange_n(&taken[i], 1, __ATOMIC_ACQUIRE)) {
      if (zero) memset(slots[i], 0, bytes);
      return slots[i];
    }
  return NULL;
}

void dist__reserve_free(void *p) {
  unsigned char *b = p;
  if (b >= slots[0] && b < slots[SLOTS]) __atomic_store_n(&taken[(b - slots[0]) / DIST__RESERVE_SLOT_BYTES], 0, __ATOMIC_RELEASE);
  else free(p);
}
