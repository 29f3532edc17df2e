/* Rank-prefixed logging.
 *
 * Lines look like "[distmgr 3/4 WARN] text" once the manager knows the rank
 * ("[distmgr WARN]" before). The threshold comes from DIST_LOG_LEVEL
 * (none, error, warn, info, debug; default warn) and goes to stderr. */
#ifndef DISTMGR_LOG_H
#define DISTMGR_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dist_log_level {
  DIST_LOG_NONE = 0,
  DIST_LOG_ERROR = 1,
  DIST_LOG_WARN = 2,
  DIST_LOG_INFO = 3,
  DIST_LOG_DEBUG = 4
} dist_log_level;

/* Write one line at the given level if the threshold lets it through. Local. */
void dist_log(dist_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print to stdout on world rank 0 only (every rank before initialize). Local. */
void dist_print0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Current threshold. Local. */
dist_log_level dist_log_level_get(void);

/* Change the threshold for the rest of the run (overrides DIST_LOG_LEVEL). Local. */
void dist_log_level_set(dist_log_level level);

#ifdef __cplusplus
}
#endif
#endif
