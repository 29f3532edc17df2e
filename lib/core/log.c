/* Rank-prefixed logging. The manager tells this layer the rank; nothing here
 * knows about the manager. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>

static dist_log_level threshold = DIST_LOG_WARN;
static int log_rank = -1, log_size = -1;

static const char *level_name(dist_log_level level) {
  static const char *const names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG"};
  return level >= DIST_LOG_NONE && level <= DIST_LOG_DEBUG ? names[level] : "?";
}

void dist__log_set_rank(int rank, int size) {
  log_rank = rank;
  log_size = size;
}

dist_log_level dist_log_level_get(void) { return threshold; }
void dist_log_level_set(dist_log_level level) { threshold = level; }

static void vlog(dist_log_level level, const char *fmt, va_list ap) {
  char line[1200];
  int n = log_rank >= 0 ? snprintf(line, sizeof line, "[distmgr %d/%d %s] ", log_rank, log_size, level_name(level))
                        : snprintf(line, sizeof line, "[distmgr %s] ", level_name(level));
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  /* One fputs per line keeps lines of different ranks from interleaving mid-line. */
  fprintf(stderr, "%s\n", line);
}

void dist_log(dist_log_level level, const char *fmt, ...) {
  if (level == DIST_LOG_NONE || level > threshold) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

void dist_print0(const char *fmt, ...) {
  if (log_rank > 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}
