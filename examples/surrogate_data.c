/* Agreement on errors and the training samples of the surrogate. */
#include <stdio.h>
#include <string.h>

#include "agree.h"
#include "surrogate.h"

dist_status surr_agree(dist_status s) { return agree_status(NULL, s); }

/* x = (omega(t) - mean) / std and target = (omega(t + dt) - omega(t)) /
 * delta_std, computed in double from the stored floats. */
dist_status surr_load_pairs(surr *s, int64_t traj0, const int64_t *pair, int64_t count, float *x, float *target) {
  const int64_t each = s->rows * s->n;
  const double mean = s->meta.mean, inv_std = 1 / s->meta.std, inv_dstd = 1 / s->meta.delta_std;
  for (int64_t k = 0; k < count; k++) {
    int64_t traj = traj0 + pair[k] / s->pairs, snap = pair[k] % s->pairs;
    float *a = x + k * each, *b = target + k * each;
    dist_status st = flowdata_read(s->data, traj, snap, s->row0, s->rows, a);
    if (!st) st = flowdata_read(s->data, traj, snap + 1, s->row0, s->rows, b);
    if (st) return st;
    for (int64_t i = 0; i < each; i++) {
      double w0 = a[i], w1 = b[i];
      a[i] = (float)((w0 - mean) * inv_std);
      b[i] = (float)((w1 - w0) * inv_dstd);
    }
  }
  return DIST_SUCCESS;
}
