/* Reading "NAME=value" environments and strict integer parsing. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *dist__env_get(const char *const *env, const char *name) {
  if (!env || !name) return NULL;
  size_t n = strlen(name);
  for (; *env; env++)
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  return NULL;
}

dist_status dist__parse_int(dist_status status, const char *var, const char *value, long min, long max,
                            const char *context, int *out) {
  if (!value || !*value) return dist__error(status, "%s is empty (%s)", var, context);
  char *end;
  errno = 0;
  long v = strtol(value, &end, 10);
  /* Leading spaces are accepted by strtol but not by us: "RANK= 1" is a typo. */
  if (*value == ' ' || *value == '\t' || *end != '\0' || end == value)
    return dist__error(status, "%s='%s' is not an integer (%s)", var, value, context);
  if (errno == ERANGE || v < min || v > max)
    return dist__error(status, "%s='%s' is out of range [%ld, %ld] (%s)", var, value, min, max, context);
  *out = (int)v;
  return DIST_SUCCESS;
}
