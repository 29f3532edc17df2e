/* What the start-up table says about each node's devices (see state.h):
 * ranks that fell back to the CPU, ranks that share a GPU. */
#include "manager/state.h"

int dist__device_notes(const int64_t *rows, int size, int me, int *a, int *b, int *n) {
  const int64_t *mine = rows + (size_t)me * DIST__ROW_WORDS;
  int notes = 0, first_fallback = -1, first_sharer = -1;
  *a = *b = -1;
  *n = 0;
  for (int q = 0; q < size; q++) {
    const int64_t *r = rows + (size_t)q * DIST__ROW_WORDS;
    if (r[DIST__ROW_LEADER] != mine[DIST__ROW_LEADER]) continue;
    (*n)++;
    if (first_fallback < 0 && (r[DIST__ROW_DEVFLAGS] & DIST__DEV_FELL_BACK)) first_fallback = q;
    if (first_sharer >= 0 || !r[DIST__ROW_DEVKEY]) continue;
    for (int p = q + 1; p < size; p++) {
      const int64_t *o = rows + (size_t)p * DIST__ROW_WORDS;
      if (o[DIST__ROW_LEADER] == r[DIST__ROW_LEADER] && o[DIST__ROW_DEVKEY] == r[DIST__ROW_DEVKEY]) {
        first_sharer = q, *a = q, *b = p;
        break;
      }
    }
  }
  if (first_fallback == me) notes |= DIST__NOTE_FELL_BACK;
  if (first_sharer == me) notes |= DIST__NOTE_SHARED;
  return notes;
}
