/* Status strings and the thread-local last-error message. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *dist_status_string(dist_status status) {
  switch (status) {
#define DIST__STATUS_CASE(name, value, text) \
  case DIST_##name:                          \
    return text;
    DIST_STATUS_MAP(DIST__STATUS_CASE)
#undef DIST__STATUS_CASE
  }
  return "unknown status";
}

int dist__status_valid(long code) {
  switch (code) {
#define DIST__STATUS_VALID(name, value, text) case value:
    DIST_STATUS_MAP(DIST__STATUS_VALID)
#undef DIST__STATUS_VALID
    return 1;
  }
  return 0;
}

const char *dist_last_error(void) { return last_error; }

void dist__error_clear(void) { last_error[0] = 0; }

void dist__error_restore(const char *text) { snprintf(last_error, sizeof last_error, "%s", text); }

/* Record the message as this thread's last error; both entry points below.
 * Formatted aside first: an argument may be dist_last_error() itself. */
static dist_status record(dist_status status, const char *fmt, va_list ap) {
  char text[sizeof last_error];
  vsnprintf(text, sizeof text, fmt, ap);
  memcpy(last_error, text, sizeof last_error);
  dist_log(DIST_LOG_DEBUG, "error %d (%s): %s", (int)status, dist_status_string(status), last_error);
  return status;
}

dist_status dist__error(dist_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(status, fmt, ap);
  va_end(ap);
  return status;
}

dist_status dist_set_error(dist_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(status, fmt, ap);
  va_end(ap);
  return status;
}

dist_status dist__error_context(dist_status status, const char *fmt, ...) {
  char detail[sizeof last_error], prefix[256];
  memcpy(detail, last_error, sizeof detail); /* the old text is about to be overwritten */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  return dist__error(status, "%s: %s", prefix, detail);
}
