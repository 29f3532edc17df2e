/* Status codes and error messages.
 *
 * Every fallible distmgr call returns a dist_status: 0 on success, negative on
 * error. dist_status_string() gives a constant one-line meaning of a code;
 * dist_last_error() gives the detailed message written by the place that
 * detected the most recent failure on the calling thread. */
#ifndef DISTMGR_STATUS_H
#define DISTMGR_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro list: one place generates the enum and the strings. */
#define DIST_STATUS_MAP(X)                                                                 \
  X(SUCCESS, 0, "success")                                                                 \
  X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                          \
  X(ERR_NOT_INITIALIZED, -2, "distmgr is not initialized (call dist_manager_initialize)")  \
  X(ERR_ENVIRONMENT, -3, "malformed launcher environment")                                 \
  X(ERR_SETTING, -4, "invalid DIST_* setting")                                             \
  X(ERR_LAUNCH_MISMATCH, -5, "launcher environment disagrees with MPI")                    \
  X(ERR_UNSUPPORTED, -6, "unsupported launch or operation")                                \
  X(ERR_UNKNOWN_GROUP, -7, "unknown process group")                                        \
  X(ERR_DUPLICATE_GROUP, -8, "process group name already in use")                          \
  X(ERR_GROUP_SIZE, -9, "group size does not fit its parent")                              \
  X(ERR_NOT_MEMBER, -10, "calling rank is not a member of the group")                      \
  X(ERR_MISMATCH, -11, "ranks disagree on a collective call")                              \
  X(ERR_BUFFER_TOO_SMALL, -12, "output buffer too small")                                  \
  X(ERR_MPI, -13, "MPI call failed")                                                       \
  X(ERR_CUDA, -14, "CUDA call failed")                                                     \
  X(ERR_NO_MEMORY, -15, "out of memory")                                                   \
  X(ERR_INTERNAL, -16, "internal error (please report)")                                  \
  X(ERR_IO, -17, "input/output failed (a file or a connection)")                          \
  X(ERR_CORRUPT, -18, "malformed, truncated or mismatched data")                          \
  X(ERR_TIMEOUT, -19, "a collective did not complete within DIST_TIMEOUT")                \
  X(ERR_ABORTED, -20, "the job cannot continue: a rank failed, left or gave up (see the message)") \
  X(ERR_NCCL, -21, "NCCL call failed")

typedef enum dist_status {
#define DIST__STATUS_ENUM(name, value, text) DIST_##name = value,
  DIST_STATUS_MAP(DIST__STATUS_ENUM)
#undef DIST__STATUS_ENUM
} dist_status;

/* Constant text for a status code ("unknown status" for values not in the list).
 * Not collective. */
const char *dist_status_string(dist_status status);

/* Detailed message of the last failure on this thread, e.g.
 * "RANK='abc' is not an integer (launch method ENV)"; "" if none yet.
 * The text stays valid until the next failing distmgr call on this thread.
 * Not collective. */
const char *dist_last_error(void);
/* For layers built on distmgr (models/, applications): record `status` with
 * a printf-style message as the last error of this thread and return
 * `status`, as distmgr's own calls do. Not collective. */
dist_status dist_set_error(dist_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
