/* libFuzzer target for the DIST_* settings (lib/manager/settings.c, lib/core/env.c).
 *
 * The input becomes an environment (tests/fuzz/env_input.h: one "NAME=value"
 * per line). dist__settings_read must either fail with DIST_ERR_SETTING, a
 * one-line message naming a setting that is set, and the output untouched,
 * or succeed with every field in its documented range, the default where
 * the variable is unset, and integers equal to their variable's text (only
 * canonical integers are accepted). dist__settings_warn_unknown and
 * dist__settings_closest then run on the same environment: the closest name
 * is a setting within distance 3, and a setting is its own closest name.
 * Any violation aborts, so the fuzzer reports it.
 *
 * Build and run: make fuzz (or make check: tests/fuzz/run.sh). Seeds:
 * tests/fuzz/corpus/fuzz_settings/. The warnings go to stderr; run.sh passes
 * -close_fd_mask=2 so they do not flood the log. */
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"
#include "env_input.h"

/* An integer setting: the text is canonical and in [lo, hi]. */
static void check_int(char *const *env, const char *name, long long got, long lo, long hi, long dflt) {
  const char *v = env_lookup(env, name);
  CHECK(got >= lo && got <= hi);
  if (!v) CHECK(got == dflt);
  else CHECK(canonical_is(v, (long)got));
}

/* A setting given as a word, else as an integer in [lo, hi]. */
static int is_word(const char *v, const char *word) { return v && strcasecmp(v, word) == 0; }

static void check_success(char *const *env, const dist__settings *s) {
  const char *v;
  v = env_lookup(env, "DIST_INIT_METHOD");
  CHECK(s->init_method >= DIST_LAUNCH_AUTO && s->init_method <= DIST_LAUNCH_MPICH);
  if (!v) CHECK(s->init_method == DIST_LAUNCH_AUTO);

  static const char *const levels[] = {"none", "error", "warn", "info", "debug"};
  v = env_lookup(env, "DIST_LOG_LEVEL");
  CHECK(s->log_level >= DIST_LOG_NONE && s->log_level <= DIST_LOG_DEBUG);
  if (!v) CHECK(s->log_level == DIST_LOG_WARN);
  else CHECK(is_word(v, levels[s->log_level]) || canonical_is(v, s->log_level));

  v = env_lookup(env, "DIST_DEVICE");
  if (is_word(v, "auto")) CHECK(s->device == DIST__DEVICE_AUTO);
  else if (is_word(v, "cpu")) CHECK(s->device == DIST__DEVICE_CPU);
  else if (is_word(v, "cuda")) CHECK(s->device == DIST__DEVICE_CUDA);
  else if (v) check_int(env, "DIST_DEVICE", s->device, 0, 1023, 0);
  else CHECK(s->device == DIST__DEVICE_AUTO);

  check_int(env, "DIST_RANKS_PER_NODE", s->ranks_per_node, 0, 1 << 20, 0);
  check_int(env, "DIST_MASTER_PORT", s->master_port, 1, 65535, 12355);
  check_int(env, "DIST_VERIFY", s->verify, 0, 1, 1);

  static const char *const backends[] = {"auto", "nccl", "staged"};
  v = env_lookup(env, "DIST_CUDA_BACKEND");
  CHECK(s->cuda_backend >= 0 && s->cuda_backend <= 2);
  CHECK(v ? is_word(v, backends[s->cuda_backend]) : s->cuda_backend == DIST__CUDA_AUTO);

  v = env_lookup(env, "DIST_NB_ALLREDUCE_MIN");
  if (!v || is_word(v, "auto")) CHECK(s->nb_allreduce_min == DIST__NB_AUTO);
  else if (is_word(v, "off")) CHECK(s->nb_allreduce_min == DIST__NB_OFF);
  else check_int(env, "DIST_NB_ALLREDUCE_MIN", s->nb_allreduce_min, 1, INT_MAX, 0);

  v = env_lookup(env, "DIST_TIMEOUT");
  CHECK(s->timeout >= 0 && s->timeout <= 1e6); /* also false for NaN */
  if (!v || is_word(v, "off")) CHECK(s->timeout == 0);
}

static void check_failure(char *const *env, const dist__settings *s, const dist__settings *sentinel) {
  const char *msg = dist_last_error();
  CHECK(msg[0] != '\0');
  CHECK(strchr(msg, '\n') == NULL);
  int named = 0;
  for (int i = 0; i < dist_settings_count() && !named; i++) {
    const char *name = dist_settings_get(i)->name;
    named = env_lookup(env, name) && strncmp(msg, name, strlen(name)) == 0;
  }
  CHECK(named); /* the message starts with the variable's name */
  CHECK(memcmp(s, sentinel, sizeof *s) == 0);
}

static void check_closest(char *const *env) {
  for (char *const *e = env; *e; e++) {
    const char *eq = strchr(*e, '=');
    if (strncmp(*e, "DIST_", 5) != 0 || !eq) continue;
    char name[128], out[64];
    size_t len = (size_t)(eq - *e) < sizeof name - 1 ? (size_t)(eq - *e) : sizeof name - 1;
    memcpy(name, *e, len);
    name[len] = '\0';
    int d = dist__settings_closest(name, out, sizeof out);
    CHECK(d >= -1 && d <= 3);
    int known = 0;
    for (int i = 0; i < dist_settings_count(); i++) {
      if (strcmp(out, dist_settings_get(i)->name) == 0) known = 1;
      if (strcmp(name, dist_settings_get(i)->name) == 0) CHECK(d == 0 && strcmp(out, name) == 0);
    }
    CHECK(d == -1 ? out[0] == '\0' : known);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char **env = env_from_input(data, size);
  const char *const *cenv = (const char *const *)env;
  dist__settings s, sentinel;
  memset(&sentinel, 0x5A, sizeof sentinel);
  s = sentinel;
  dist_set_error(DIST_SUCCESS, "%s", "");
  dist_status st = dist__settings_read(cenv, &s);
  if (st == DIST_SUCCESS) check_success(env, &s);
  else {
    CHECK(st == DIST_ERR_SETTING);
    check_failure(env, &s, &sentinel);
  }
  dist_log_level_set(DIST_LOG_WARN);
  dist__settings_warn_unknown(cenv);
  check_closest(env);
  free(env);
  return 0;
}
