/* Settings that must be the same on every rank, checked once at initialize:
 * one hash in one all-reduce; on a difference every rank names the setting
 * and the ranks (e.g. DIST_VERIFY=0 on one rank would pair its data with the
 * others' check round: garbage, then a hang). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "manager/state.h"

#define NMUST 6

/* The last is the threshold DIST_NB_ALLREDUCE_MIN resolves to (blocking and
 * non-blocking all-reduces do not match each other). */
static const char *const NAMES[NMUST] = {"DIST_INIT_METHOD",  "DIST_RANKS_PER_NODE", "DIST_VERIFY",
                                         "DIST_CUDA_BACKEND", "DIST_TIMEOUT",        "DIST_NB_ALLREDUCE_MIN (resolved)"};

static void values(const dist__settings *s, double v[NMUST]) {
  v[0] = s->init_method;
  v[1] = s->ranks_per_node;
  v[2] = s->verify;
  v[3] = s->cuda_backend;
  v[4] = s->timeout;
  v[5] = dist__engine.nb_allreduce_min == SIZE_MAX ? -1 : (double)dist__engine.nb_allreduce_min;
}

/* Error path: gather everyone's values, name the first setting that differs. */
dist_status dist__settings_name_difference(void) {
  MPI_Comm world = dist__engine.world;
  int size = 1;
  MPI_Comm_size(world, &size);
  double *all = malloc(sizeof(double) * NMUST * (size_t)size), mine[NMUST];
  values(&dist__state.settings, mine);
  if (!all || MPI_Allgather(mine, NMUST, MPI_DOUBLE, all, NMUST, MPI_DOUBLE, world) != MPI_SUCCESS) {
    free(all);
    return dist__error(DIST_ERR_SETTING, "the DIST_* settings differ between ranks");
  }
  for (int k = 0; k < NMUST; k++) {
    char ranks[160];
    size_t n = 0;
    int odd = 0;
    for (int r = 1; r < size; r++)
      if (all[r * NMUST + k] != all[k]) {
        if (odd++ < 8 && n < sizeof ranks) n += (size_t)snprintf(ranks + n, sizeof ranks - n, odd > 1 ? ",%d" : "%d", r);
      }
    if (!odd) continue;
    int first = 1;
    while (all[first * NMUST + k] == all[k]) first++;
    double a = all[k], b = all[first * NMUST + k];
    free(all);
    return dist__error(DIST_ERR_SETTING,
                       "%s must be the same on every rank: %g on rank 0 but %g on rank%s %s%s (values as parsed; "
                       "set it identically for all ranks, e.g. mpirun -x %s)",
                       NAMES[k], a, b, odd > 1 ? "s" : "", ranks, odd > 8 ? ",..." : "", NAMES[k]);
  }
  free(all);
  return dist__error(DIST_ERR_SETTING, "the DIST_* settings differ between ranks");
}

uint64_t dist__settings_hash(void) {
  double v[NMUST];
  values(&dist__state.settings, v);
  return dist__hash(DIST__HASH_SEED, v, sizeof v);
}
