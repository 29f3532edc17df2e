/* The distributed sampler (see sampler.h). */
#include "sampler.h"

#include <stdlib.h>

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t sampler_per_replica(const sampler *s) {
  if (!s || s->n < 0 || s->replicas < 1) return -1;
  return s->drop_last ? s->n / s->replicas : (s->n + s->replicas - 1) / s->replicas;
}

dist_status sampler_epoch(const sampler *s, int64_t epoch, int64_t *out) {
  if (!s || !out) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "sampler_epoch: NULL argument");
  if (s->n < 1 || s->replicas < 1 || s->rank < 0 || s->rank >= s->replicas || epoch < 0 || s->n > ((int64_t)1 << 40))
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                          "sampler_epoch: n = %lld, replicas = %d, rank = %d, epoch = %lld (need n in [1, 2^40], "
                          "0 <= rank < replicas, epoch >= 0)", (long long)s->n, s->replicas, s->rank, (long long)epoch);
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)s->n);
  if (!perm) return dist_set_error(DIST_ERR_NO_MEMORY, "sampler_epoch: %lld indices", (long long)s->n);
  for (int64_t i = 0; i < s->n; i++) perm[i] = i;
  if (s->shuffle) {
    uint64_t state = s->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(epoch + 1));
    for (int64_t i = s->n - 1; i > 0; i--) { /* Fisher-Yates; modulo bias < 2^-23 for n <= 2^40 */
      int64_t j = (int64_t)(splitmix(&state) % (uint64_t)(i + 1));
      int64_t t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
  }
  const int64_t per = sampler_per_replica(s);
  for (int64_t k = 0; k < per; k++) out[k] = perm[(k * s->replicas + s->rank) % s->n]; /* wraps: the padding */
  free(perm);
  return DIST_SUCCESS;
}
