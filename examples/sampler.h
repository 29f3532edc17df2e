/* A distributed sampler with the rule of torch.utils.data.DistributedSampler:
 * each epoch the N sample indices are shuffled from seed + epoch (the same
 * permutation on every rank; a Fisher-Yates shuffle driven by splitmix64, not
 * torch's generator), padded by repeating the permutation's first indices up
 * to a multiple of the replica count (or cut down to one, drop_last), and
 * replica r takes positions r, r + R, r + 2R, ... Every index then appears
 * exactly once per epoch across replicas, plus the padding repeats. Pure
 * logic, no communication. */
#ifndef DISTMGR_EXAMPLES_SAMPLER_H
#define DISTMGR_EXAMPLES_SAMPLER_H

#include <stdint.h>

#include <distmgr.h>

typedef struct sampler {
  int64_t n;        /* dataset size */
  int replicas, rank;
  uint64_t seed;
  int shuffle, drop_last;
} sampler;

/* Samples per replica per epoch: ceil(n / R), or floor with drop_last. */
int64_t sampler_per_replica(const sampler *s);

/* This replica's indices for `epoch` into out (sampler_per_replica entries). */
dist_status sampler_epoch(const sampler *s, int64_t epoch, int64_t *out);

#endif
