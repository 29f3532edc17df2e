/* The table of DIST_* environment settings.
 *
 * Every setting distmgr reads is listed here with its default and one line of
 * documentation. They are read once, by dist_manager_initialize(); an invalid
 * value makes initialize fail with DIST_ERR_SETTING naming the variable. */
#ifndef DISTMGR_SETTINGS_H
#define DISTMGR_SETTINGS_H

#include <stdio.h>

#include "distmgr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_setting_info {
  const char *name;          /* "DIST_LOG_LEVEL" */
  const char *default_value; /* value used when unset */
  const char *doc;           /* one line */
} dist_setting_info;

/* Number of settings. Local. */
int dist_settings_count(void);

/* The i-th setting (0 <= i < count), or NULL. Local. */
const dist_setting_info *dist_settings_get(int i);

/* Print the table (name, default, value in this process's environment, doc).
 * Local. */
void dist_settings_print(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
