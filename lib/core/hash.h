/* Hashing of signatures that ranks compare (call arguments, settings,
 * group definitions, device ids): equal on every rank of one build. */
#ifndef DISTMGR_HASH_H
#define DISTMGR_HASH_H

#include <stddef.h>
#include <stdint.h>

#define DIST__HASH_SEED 1469598103934665603ULL

/* Continue hash h over n bytes at data (start with DIST__HASH_SEED). */
uint64_t dist__hash(uint64_t h, const void *data, size_t n);

#endif
