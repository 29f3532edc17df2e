/* Reading "NAME=value" environments and strict integer parsing. */
#include "core/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dist__env_get(const char *const *env, const char *name) {
  if (!env || !name) return NULL;
  size_t n = strlen(name);
  for (; *env; env++)
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  return NULL;
}

/* `value` for a message: control characters and bytes above 126 escaped (so a
 * log line stays one line), cut after 64 characters. */
static const char *quotable(const char *value, char *buf, size_t n) {
  size_t o = 0, i = 0;
  for (; value[i] && i < 64 && o + 5 < n; i++) {
    unsigned char c = (unsigned char)value[i];
    const char *esc = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\v' ? "\\v"
                    : c == '\f' ? "\\f" : c == '\\' ? "\\\\" : NULL;
    if (esc) o += (size_t)snprintf(buf + o, n - o, "%s", esc);
    else if (c < 32 || c > 126) o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
    else buf[o++] = (char)c;
  }
  buf[o] = '\0';
  if (value[i] && o + 4 <= n) memcpy(buf + o, "...", 4);
  return buf;
}

/* Results of scan(). */
enum { SCAN_OK, SCAN_JUNK, SCAN_NONCANONICAL, SCAN_OVERFLOW };

/* The canonical decimal form of a long: "0", or digits without a leading
 * zero, with a '-' only before a nonzero number. Nothing else: no '+', no
 * whitespace of any kind, no "-0", no "007". SCAN_NONCANONICAL marks text
 * that other programs read as a number (strtol's leniency), so the message
 * can say what is wrong with it. */
static int scan(const char *s, long *out) {
  const char *p = s;
  int neg = *p == '-';
  if (neg) p++;
  if (*p < '0' || *p > '9' || (*p == '0' && (neg || p[1] != '\0'))) {
    char *end;
    errno = 0;
    (void)strtol(s, &end, 10);
    return end != s && *end == '\0' ? SCAN_NONCANONICAL : SCAN_JUNK;
  }
  long v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return SCAN_JUNK;
    int d = *p - '0';
    if (neg ? v < (LONG_MIN + d) / 10 : v > (LONG_MAX - d) / 10) {
      while (*p >= '0' && *p <= '9') p++; /* "99999999999999999999x" is junk, not too big */
      return *p ? SCAN_JUNK : SCAN_OVERFLOW;
    }
    v = neg ? v * 10 - d : v * 10 + d;
  }
  *out = v;
  return SCAN_OK;
}

dist_status dist__parse_int(dist_status status, const char *var, const char *value, long min, long max,
                            const char *context, int *out) {
  if (!value || !*value) return dist__error(status, "%s is empty (%s)", var, context);
  char q[300];
  long v = 0;
  int r = scan(value, &v);
  if (r == SCAN_JUNK)
    return dist__error(status, "%s='%s' is not an integer (%s)", var, quotable(value, q, sizeof q), context);
  if (r == SCAN_NONCANONICAL)
    return dist__error(status,
                       "%s='%s' is not an integer as written: plain decimal digits expected, without '+', "
                       "leading zeros or white space (%s)",
                       var, quotable(value, q, sizeof q), context);
  if (r == SCAN_OVERFLOW || v < min || v > max || v < INT_MIN || v > INT_MAX)
    return dist__error(status, "%s='%s' is out of range [%ld, %ld] (%s)", var, quotable(value, q, sizeof q), min, max,
                       context);
  *out = (int)v;
  return DIST_SUCCESS;
}

int dist__parse_int_loose(const char *value, long *out) {
  if (!value || !*value) return 0;
  char *end;
  int saved = errno;
  errno = 0;
  long v = strtol(value, &end, 10);
  int ok = end != value && *end == '\0' && errno != ERANGE;
  errno = saved;
  if (ok) *out = v;
  return ok;
}
