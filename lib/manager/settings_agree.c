/* Settings that must be the same on every rank, checked once at initialize:
 * one hash in one all-reduce; on a difference every rank names the setting
 * and the ranks (e.g. DIST_VERIFY=0 on one rank would pair its data with the
 * others' check round: garbage, then a hang). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "core/check.h"
#include "manager/state.h"

/* Room for every setting of the table, and one more: the threshold
 * DIST_NB_ALLREDUCE_MIN resolves to (blocking and non-blocking all-reduces
 * do not match each other). */
#define MAXMUST 32
#define RESOLVED "DIST_NB_ALLREDUCE_MIN (resolved)"

/* The values that must match, in table order; returns how many, names in `names`. */
static int values(const dist__settings *s, double v[MAXMUST], const char *names[MAXMUST]) {
  int n = 0;
  for (int i = 0; i < dist_settings_count() && n < MAXMUST - 1; i++)
    n += dist__settings_must_match(i, s, &names[n], &v[n]);
  names[n] = RESOLVED;
  v[n++] = dist__engine.nb_allreduce_min == SIZE_MAX ? -1 : (double)dist__engine.nb_allreduce_min;
  return n;
}

/* Error path: gather everyone's values, name the first setting that differs. */
dist_status dist__settings_name_difference(void) {
  MPI_Comm world = dist__engine.world;
  int size = 1;
  DIST_MPI_CALL(MPI_Comm_size(world, &size));
  double mine[MAXMUST];
  const char *names[MAXMUST];
  const int nmust = values(&dist__state.settings, mine, names);
  double *all = malloc(sizeof(double) * nmust * (size_t)size);
  if (!all || MPI_Allgather(mine, nmust, MPI_DOUBLE, all, nmust, MPI_DOUBLE, world) != MPI_SUCCESS) {
    free(all);
    return dist__error(DIST_ERR_SETTING, "the DIST_* settings differ between ranks");
  }
  for (int k = 0; k < nmust; k++) {
    char ranks[160];
    size_t n = 0;
    int odd = 0;
    for (int r = 1; r < size; r++)
      if (all[r * nmust + k] != all[k]) {
        if (odd++ < 8 && n < sizeof ranks) n += (size_t)snprintf(ranks + n, sizeof ranks - n, odd > 1 ? ",%d" : "%d", r);
      }
    if (!odd) continue;
    int first = 1;
    while (all[first * nmust + k] == all[k]) first++;
    double a = all[k], b = all[first * nmust + k];
    free(all);
    return dist__error(DIST_ERR_SETTING,
                       "%s must be the same on every rank: %g on rank 0 but %g on rank%s %s%s (values as parsed; "
                       "set it identically for all ranks, e.g. mpirun -x %s)",
                       names[k], a, b, odd > 1 ? "s" : "", ranks, odd > 8 ? ",..." : "", names[k]);
  }
  free(all);
  return dist__error(DIST_ERR_SETTING, "the DIST_* settings differ between ranks");
}

uint64_t dist__settings_hash(void) {
  double v[MAXMUST];
  const char *names[MAXMUST];
  int n = values(&dist__state.settings, v, names);
  return dist__hash(DIST__HASH_SEED, v, sizeof(double) * (size_t)n);
}
