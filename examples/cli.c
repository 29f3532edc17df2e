#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

dist_status cli_int(const char *flag, const char *value, int64_t lo, int64_t hi, int64_t *out) {
  if (!value) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s needs a value", flag);
  char *end = NULL;
  errno = 0;
  long long v = strtoll(value, &end, 10);
  if (errno || end == value || *end)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' is not a whole number", flag, value);
  if (v < lo || v > hi)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: %lld is out of range [%lld, %lld]", flag, v, (long long)lo,
                          (long long)hi);
  *out = v;
  return DIST_SUCCESS;
}

dist_status cli_real(const char *flag, const char *value, double lo, double hi, double *out) {
  if (!value) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s needs a value", flag);
  char *end = NULL;
  errno = 0;
  double v = strtod(value, &end);
  if (errno || end == value || *end || !isfinite(v))
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' is not a finite number", flag, value);
  if (v < lo || v > hi) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: %g is out of range [%g, %g]", flag, v, lo, hi);
  *out = v;
  return DIST_SUCCESS;
}
