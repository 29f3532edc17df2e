/* Fuzz input -> environment, shared by the fuzz targets that read one.
 *
 * The input is split on '\n' into at most ENV_INPUT_MAX entries ("NAME=value"
 * as in `environ`; an entry without '=' is kept, as a broken environment may
 * hold one); a NUL byte ends its entry early. The result is a
 * NULL-terminated list of strings in one allocation; free it with free(). */
#ifndef DISTMGR_FUZZ_ENV_INPUT_H
#define DISTMGR_FUZZ_ENV_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV_INPUT_MAX 64

#include "check.h"

static char **env_from_input(const uint8_t *data, size_t size) {
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  if (lines > ENV_INPUT_MAX) lines = ENV_INPUT_MAX;
  char **env = malloc((lines + 1) * sizeof *env + size + 1);
  CHECK(env != NULL);
  char *text = (char *)(env + lines + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  size_t n = 0;
  for (char *p = text; n < lines;) {
    env[n++] = p;
    char *nl = memchr(p, '\n', (size_t)(text + size - p));
    if (!nl) break;
    *nl = '\0';
    p = nl + 1;
  }
  env[n] = NULL;
  return env;
}

/* Value of `name` in env as the first "NAME=" entry, found independently of
 * the library's dist__env_get. */
static const char *env_lookup(char *const *env, const char *name) {
  size_t n = strlen(name);
  for (; *env; env++)
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  return NULL;
}

/* Is `text` exactly the canonical decimal form of v? */
static int canonical_is(const char *text, long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%ld", v);
  return text && strcmp(text, buf) == 0;
}

#endif
