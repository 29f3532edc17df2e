/* Small allocations made where failing on one rank would leave the others
 * waiting: after a collective's check round, on the way to posting it (count
 * and displacement arrays, requests). They come from malloc, and when malloc
 * fails from a static reserve of a few slots, so that a rank short of memory
 * still posts the call its peers already posted. A block too large for a
 * slot, or no free slot, is an error as before. Thread-safe. */
#ifndef DISTMGR_RESERVE_H
#define DISTMGR_RESERVE_H

#include <stddef.h>

#define DIST__RESERVE_SLOT_BYTES 32768 /* 4 int arrays for 2048 ranks */

/* Zeroed when `zero`. */
void *dist__reserve_alloc(size_t bytes, int zero);
/* Accepts NULL, malloc's blocks and the reserve's. */
void dist__reserve_free(void *p);

#endif
