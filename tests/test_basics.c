/* Unit tests for the small pure pieces: status strings, the per-thread last
 * error, DIST_* settings, device choice and strict integer parsing. */
#include "core/internal.h"
#include "backend/backend.h"
#include "manager/state.h" /* dist__device_notes and the start-up table */
#include "mem/f16_loops.h"
#include <math.h>
#include <mpi.h>

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cunit_main.h"

/* Print the case name after a failed check so a table row can be found. */
static void name_failure(unsigned failures_before, const char *what) {
  if (CU_get_number_of_failures() != failures_before) fprintf(stderr, "  ^ failing case: %s\n", what);
}

/* ---- status strings -------------------------------------------------------- */

#define AS_CODE(name, value, text) DIST_##name,
static const dist_status ALL_CODES[] = {DIST_STATUS_MAP(AS_CODE)};
#undef AS_CODE
#define NCODES (sizeof ALL_CODES / sizeof ALL_CODES[0])

static void test_status_strings(void) {
  for (size_t i = 0; i < NCODES; i++) {
    const char *s = dist_status_string(ALL_CODES[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_NOT_EQUAL(strlen(s), 0);
    CU_ASSERT_STRING_NOT_EQUAL(s, "unknown status");
    /* Distinct texts: a user can tell every code apart from its string. */
    for (size_t j = 0; j < i; j++) CU_ASSERT_STRING_NOT_EQUAL(s, dist_status_string(ALL_CODES[j]));
  }
  CU_ASSERT_STRING_EQUAL(dist_status_string(DIST_SUCCESS), "success");
}

static void test_status_unknown(void) {
  CU_ASSERT_STRING_EQUAL(dist_status_string((dist_status)1), "unknown status");
  CU_ASSERT_STRING_EQUAL(dist_status_string((dist_status)-99), "unknown status");
  CU_ASSERT_STRING_EQUAL(dist_status_string((dist_status)INT_MIN), "unknown status");
}

/* ---- per-thread last error ----------------------------------------------- */

typedef struct thread_report {
  char at_start[64];  /* the new thread's message before it failed anything */
  char after[256];    /* after its own failure */
  dist_status status; /* of that failure */
} thread_report;

static void *fail_in_thread(void *arg) {
  thread_report *r = arg;
  dist_launch_method m;
  snprintf(r->at_start, sizeof r->at_start, "%s", dist_last_error());
  r->status = dist_launch_method_parse("other-thread", &m);
  snprintf(r->after, sizeof r->after, "%s", dist_last_error());
  return NULL;
}

static void test_last_error_per_thread(void) {
  dist_launch_method m;
  ASSERT_STATUS(dist_launch_method_parse("nope", &m), DIST_ERR_INVALID_ARGUMENT);
  char mine[256];
  snprintf(mine, sizeof mine, "%s", dist_last_error());
  CU_ASSERT_PTR_NOT_NULL(strstr(mine, "nope"));

  thread_report r;
  memset(&r, 0, sizeof r);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, fail_in_thread, &r), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_join(t, NULL), 0);
  /* The other thread started clean and saw only its own failure... */
  CU_ASSERT_STRING_EQUAL(r.at_start, "");
  CU_ASSERT_EQUAL(r.status, DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.after, "other-thread"));
  CU_ASSERT_PTR_NULL(strstr(r.after, "nope"));
  /* ...and did not touch this thread's message. */
  CU_ASSERT_STRING_EQUAL(dist_last_error(), mine);
}

static void test_success_keeps_last_error(void) {
  /* The message describes the last failure; a success must not clear it. */
  dist_launch_method m;
  ASSERT_STATUS(dist_launch_method_parse("still-here", &m), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_OK(dist_launch_method_parse("ENV", &m));
  ASSERT_MSG_HAS("still-here");
}

static void test_error_from_last_error(void) {
  /* A message may be built from the last one (agreements pass a rank's own
   * message on): the new text must contain the old, not an empty string. */
  ASSERT_STATUS(dist_set_error(DIST_ERR_NO_MEMORY, "first failure"), DIST_ERR_NO_MEMORY);
  ASSERT_STATUS(dist_set_error(DIST_ERR_IO, "%s", dist_last_error()), DIST_ERR_IO);
  CU_ASSERT_STRING_EQUAL(dist_last_error(), "first failure");
  ASSERT_STATUS(dist_set_error(DIST_ERR_IO, "context: %s (then %d)", dist_last_error(), 2), DIST_ERR_IO);
  CU_ASSERT_STRING_EQUAL(dist_last_error(), "context: first failure (then 2)");
}

/* ---- settings -------------------------------------------------------------- */

static void fill_settings_sentinel(dist__settings *s) { memset(s, 0x5A, sizeof *s); }

/* Read settings from a one-variable environment (NULL: empty). */
static dist_status read_one(const char *entry, dist__settings *s) {
  const char *env[] = {entry, NULL};
  fill_settings_sentinel(s);
  return dist__settings_read(env, s);
}

static void expect_defaults_except(const dist__settings *s, const char *changed) {
  if (strcmp(changed, "DIST_INIT_METHOD") != 0) CU_ASSERT_EQUAL(s->init_method, DIST_LAUNCH_AUTO);
  if (strcmp(changed, "DIST_LOG_LEVEL") != 0) CU_ASSERT_EQUAL(s->log_level, DIST_LOG_WARN);
  if (strcmp(changed, "DIST_DEVICE") != 0) CU_ASSERT_EQUAL(s->device, DIST__DEVICE_AUTO);
  if (strcmp(changed, "DIST_RANKS_PER_NODE") != 0) CU_ASSERT_EQUAL(s->ranks_per_node, 0);
  if (strcmp(changed, "DIST_MASTER_PORT") != 0) CU_ASSERT_EQUAL(s->master_port, 12355);
}

static void test_settings_defaults(void) {
  dist__settings s;
  ASSERT_OK(read_one(NULL, &s));
  expect_defaults_except(&s, "");
  fill_settings_sentinel(&s);
  ASSERT_OK(dist__settings_read(NULL, &s));
  expect_defaults_except(&s, "");
  /* Unrelated variables change nothing. */
  ASSERT_OK(read_one("DIST_UNKNOWN=1", &s));
  expect_defaults_except(&s, "");
}

/* The debug log's line names every setting of the table, with the given
 * value or the default. */
static void test_settings_line(void) {
  const char *env[] = {"DIST_VERIFY=0", "DIST_TIMEOUT=30", NULL};
  char line[2048];
  dist__settings_line(env, line, sizeof line);
  for (int i = 0; i < dist_settings_count(); i++) {
    const dist_setting_info *info = dist_settings_get(i);
    char want[256];
    if (!strcmp(info->name, "DIST_VERIFY")) snprintf(want, sizeof want, "DIST_VERIFY=0");
    else if (!strcmp(info->name, "DIST_TIMEOUT")) snprintf(want, sizeof want, "DIST_TIMEOUT=30");
    else snprintf(want, sizeof want, "%s=%s (default)", info->name, info->default_value);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
  }
  CU_ASSERT_PTR_NULL(strstr(line, "DIST_VERIFY=1"));
  /* Truncated, still terminated. */
  char small[24];
  dist__settings_line(env, small, sizeof small);
  CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
  CU_ASSERT_EQUAL(strncmp(small, "DIST_INIT_METHOD=AUTO (", sizeof small - 1), 0);
}

/* The settings that must match across ranks come from the table, read back
 * at the offsets it gives: each shows the value a parse put there. */
static void test_settings_must_match(void) {
  const char *env[] = {"DIST_VERIFY=0", "DIST_TIMEOUT=2.5", "DIST_RANKS_PER_NODE=3", "DIST_CUDA_BACKEND=staged",
                       "DIST_INIT_METHOD=SINGLE", "DIST_STORE_SERVER=external", "DIST_ROUND=p2p", "DIST_SHM_DATA=off", NULL};
  dist__settings s;
  CU_ASSERT_EQUAL_FATAL(dist__settings_read(env, &s), DIST_SUCCESS);
  static const struct { const char *name; double value; } want[] = {
      {"DIST_INIT_METHOD", DIST_LAUNCH_SINGLE}, {"DIST_RANKS_PER_NODE", 3}, {"DIST_VERIFY", 0}, {"DIST_ROUND", 0}, {"DIST_SHM_DATA", 0},
      {"DIST_CUDA_BACKEND", DIST__CUDA_STAGED}, {"DIST_TIMEOUT", 2.5}, {"DIST_STORE_SERVER", 1},
      {"DIST_HOST_ENGINE", DIST__HOST_AUTO}};
  int n = 0;
  for (int i = -1; i <= dist_settings_count(); i++) {
    const char *name = NULL;
    double v = -99;
    if (!dist__settings_must_match(i, &s, &name, &v)) continue;
    CU_ASSERT_FATAL(n < (int)(sizeof want / sizeof want[0]));
    CU_ASSERT_STRING_EQUAL(name, want[n].name);
    CU_ASSERT_DOUBLE_EQUAL(v, want[n].value, 0);
    n++;
  }
  CU_ASSERT_EQUAL(n, (int)(sizeof want / sizeof want[0]));
}

static void test_settings_log_level(void) {
  static const struct { const char *entry; dist_log_level want; } cases[] = {
      {"DIST_LOG_LEVEL=debug", DIST_LOG_DEBUG}, {"DIST_LOG_LEVEL=3", DIST_LOG_INFO},
      {"DIST_LOG_LEVEL=INFO", DIST_LOG_INFO},   {"DIST_LOG_LEVEL=none", DIST_LOG_NONE},
      {"DIST_LOG_LEVEL=0", DIST_LOG_NONE},      {"DIST_LOG_LEVEL=Error", DIST_LOG_ERROR},
      {"DIST_LOG_LEVEL=4", DIST_LOG_DEBUG}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    dist__settings s;
    ASSERT_OK(read_one(cases[i].entry, &s));
    CU_ASSERT_EQUAL(s.log_level, cases[i].want);
    expect_defaults_except(&s, "DIST_LOG_LEVEL");
    name_failure(before, cases[i].entry);
  }
}

static void test_settings_device(void) {
  static const struct { const char *entry; int want; } cases[] = {
      {"DIST_DEVICE=cpu", DIST__DEVICE_CPU}, {"DIST_DEVICE=CPU", DIST__DEVICE_CPU},
      {"DIST_DEVICE=2", 2},                  {"DIST_DEVICE=0", 0},
      {"DIST_DEVICE=auto", DIST__DEVICE_AUTO}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    dist__settings s;
    ASSERT_OK(read_one(cases[i].entry, &s));
    CU_ASSERT_EQUAL(s.device, cases[i].want);
    expect_defaults_except(&s, "DIST_DEVICE");
    name_failure(before, cases[i].entry);
  }
}

static void test_settings_others(void) {
  dist__settings s;
  ASSERT_OK(read_one("DIST_INIT_METHOD=slurm", &s));
  CU_ASSERT_EQUAL(s.init_method, DIST_LAUNCH_SLURM);
  expect_defaults_except(&s, "DIST_INIT_METHOD");
  ASSERT_OK(read_one("DIST_INIT_METHOD=torchrun", &s));
  CU_ASSERT_EQUAL(s.init_method, DIST_LAUNCH_ENV);
  ASSERT_OK(read_one("DIST_RANKS_PER_NODE=2", &s));
  CU_ASSERT_EQUAL(s.ranks_per_node, 2);
  expect_defaults_except(&s, "DIST_RANKS_PER_NODE");
  ASSERT_OK(read_one("DIST_MASTER_PORT=4000", &s));
  CU_ASSERT_EQUAL(s.master_port, 4000);
  expect_defaults_except(&s, "DIST_MASTER_PORT");
}

static void test_settings_all_at_once(void) {
  const char *env[] = {"DIST_INIT_METHOD=mpich", "DIST_LOG_LEVEL=error", "DIST_DEVICE=1",
                       "DIST_RANKS_PER_NODE=4",  "DIST_MASTER_PORT=65535", NULL};
  dist__settings s;
  fill_settings_sentinel(&s);
  ASSERT_OK(dist__settings_read(env, &s));
  CU_ASSERT_EQUAL(s.init_method, DIST_LAUNCH_MPICH);
  CU_ASSERT_EQUAL(s.log_level, DIST_LOG_ERROR);
  CU_ASSERT_EQUAL(s.device, 1);
  CU_ASSERT_EQUAL(s.ranks_per_node, 4);
  CU_ASSERT_EQUAL(s.master_port, 65535);
}

/* Reading must fail with DIST_ERR_SETTING naming `var` and leave `out` alone. */
static void expect_bad_setting(const char *entry, const char *var) {
  unsigned before = CU_get_number_of_failures();
  /* A valid setting after the bad one: the first NAME= match is the one read. */
  const char *env[] = {entry, "DIST_RANKS_PER_NODE=2", NULL};
  dist__settings s, orig;
  fill_settings_sentinel(&s);
  orig = s;
  ASSERT_STATUS(dist__settings_read(env, &s), DIST_ERR_SETTING);
  ASSERT_MSG_HAS(var);
  CU_ASSERT_EQUAL(memcmp(&s, &orig, sizeof s), 0);
  name_failure(before, entry);
}

static void test_settings_invalid(void) {
  expect_bad_setting("DIST_LOG_LEVEL=loud", "DIST_LOG_LEVEL");
  expect_bad_setting("DIST_LOG_LEVEL=5", "DIST_LOG_LEVEL");
  expect_bad_setting("DIST_LOG_LEVEL=", "DIST_LOG_LEVEL");
  expect_bad_setting("DIST_DEVICE=-3", "DIST_DEVICE");
  expect_bad_setting("DIST_DEVICE=gpu", "DIST_DEVICE");
  expect_bad_setting("DIST_DEVICE=1.5", "DIST_DEVICE");
  expect_bad_setting("DIST_INIT_METHOD=pbs", "DIST_INIT_METHOD");
  expect_bad_setting("DIST_INIT_METHOD=", "DIST_INIT_METHOD");
  expect_bad_setting("DIST_RANKS_PER_NODE=-1", "DIST_RANKS_PER_NODE");
  expect_bad_setting("DIST_MASTER_PORT=0", "DIST_MASTER_PORT");
  expect_bad_setting("DIST_MASTER_PORT=65536", "DIST_MASTER_PORT");
  expect_bad_setting("DIST_VERIFY=2", "DIST_VERIFY");
  expect_bad_setting("DIST_CUDA_BACKEND=gloo", "DIST_CUDA_BACKEND");
  expect_bad_setting("DIST_NB_ALLREDUCE_MIN=0", "DIST_NB_ALLREDUCE_MIN");
  expect_bad_setting("DIST_NB_ALLREDUCE_MIN=1MiB", "DIST_NB_ALLREDUCE_MIN");
  expect_bad_setting("DIST_NB_ALLREDUCE_MIN=", "DIST_NB_ALLREDUCE_MIN");
  expect_bad_setting("DIST_TIMEOUT=-1", "DIST_TIMEOUT");
  expect_bad_setting("DIST_TIMEOUT=10s", "DIST_TIMEOUT");
  expect_bad_setting("DIST_TIMEOUT=nan", "DIST_TIMEOUT");
  expect_bad_setting("DIST_TIMEOUT=0x10", "DIST_TIMEOUT");
  expect_bad_setting("DIST_TIMEOUT=1e3", "DIST_TIMEOUT");
  expect_bad_setting("DIST_TIMEOUT=", "DIST_TIMEOUT");
  /* The message also quotes the offending value. */
  expect_bad_setting("DIST_INIT_METHOD=pbs", "pbs");
  expect_bad_setting("DIST_ROUND=shared", "DIST_ROUND");
  expect_bad_setting("DIST_SHM_DATA=yes", "DIST_SHM_DATA");
}

static void test_settings_table(void) {
  int n = dist_settings_count();
  CU_ASSERT_EQUAL(n, 15);
  for (int i = 0; i < n; i++) {
    const dist_setting_info *info = dist_settings_get(i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(info);
    CU_ASSERT_PTR_NOT_NULL_FATAL(info->name);
    CU_ASSERT_EQUAL(strncmp(info->name, "DIST_", 5), 0);
    CU_ASSERT_PTR_NOT_NULL(info->default_value);
    CU_ASSERT_TRUE(info->doc && *info->doc);
    for (int j = 0; j < i; j++) CU_ASSERT_STRING_NOT_EQUAL(info->name, dist_settings_get(j)->name);
  }
  CU_ASSERT_PTR_NULL(dist_settings_get(-1));
  CU_ASSERT_PTR_NULL(dist_settings_get(n));
  CU_ASSERT_PTR_NULL(dist_settings_get(INT_MAX));
}

static void test_settings_table_is_read(void) {
  /* Every listed setting is parsed by dist__settings_read: a nonsense value
   * must be rejected under that setting's name. */
  for (int i = 0; i < dist_settings_count(); i++) {
    char entry[128];
    snprintf(entry, sizeof entry, "%s=#bogus#", dist_settings_get(i)->name);
    expect_bad_setting(entry, dist_settings_get(i)->name);
  }
}

static void test_settings_print(void) {
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  dist_settings_print(f);
  long len = ftell(f);
  CU_ASSERT_TRUE_FATAL(len > 0);
  char *text = calloc((size_t)len + 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  rewind(f);
  CU_ASSERT_EQUAL(fread(text, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  for (int i = 0; i < dist_settings_count(); i++) {
    const dist_setting_info *info = dist_settings_get(i);
    if (!strstr(text, info->name)) fprintf(stderr, "settings print lacks %s\n", info->name);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, info->name));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, info->doc));
  }
  free(text);
}

static void capture(int fd, void (*fn)(void), char *out, size_t size);

static void test_settings_closest(void) {
  static const struct { const char *name, *want; int d; } cases[] = {
      {"DIST_VERFIY", "DIST_VERIFY", 1},           /* two letters swapped */
      {"DIST_VERIFY", "DIST_VERIFY", 0},           /* a setting is its own closest */
      {"DIST_verify", "DIST_VERIFY", 0},           /* case does not count */
      {"DIST_DEVICES", "DIST_DEVICE", 1},
      {"DIST_LOGLEVEL", "DIST_LOG_LEVEL", 1},
      {"DIST_RANK_PER_NODE", "DIST_RANKS_PER_NODE", 1},
      {"DIST_MASTERPORT", "DIST_MASTER_PORT", 1},
      {"DIST_TIMEOUTS", "DIST_TIMEOUT", 1},
      {"DIST_INIT_METOD", "DIST_INIT_METHOD", 1},
      {"DIST_CUDA_BAKCEND", "DIST_CUDA_BACKEND", 1},
      {"DIST_DEV", "DIST_DEVICE", 3},
      {"DIST_X", "", -1},                          /* nothing close */
      {"DIST_UNKNOWN", "", -1},
      {"DIST_DEBUG_EVERYTHING_PLEASE", "", -1},
      {"", "", -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    char out[64];
    memset(out, 'z', sizeof out);
    CU_ASSERT_EQUAL(dist__settings_closest(cases[i].name, out, sizeof out), cases[i].d);
    CU_ASSERT_STRING_EQUAL(out, cases[i].want);
    name_failure(before, cases[i].name);
  }
  /* A long name is compared, not overrun; a short buffer is cut, not overrun. */
  char longname[4096], out[8];
  memset(longname, 'D', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CU_ASSERT_EQUAL(dist__settings_closest(longname, out, sizeof out), -1);
  CU_ASSERT_EQUAL(dist__settings_closest("DIST_VERFIY", out, sizeof out), 1);
  CU_ASSERT_STRING_EQUAL(out, "DIST_VE");
  CU_ASSERT_EQUAL(dist__settings_closest(NULL, out, sizeof out), -1);
  CU_ASSERT_EQUAL(dist__settings_closest("DIST_VERFIY", NULL, 0), 1);
}

static const char *const *warn_env;
static void warn_unknown_now(void) { dist__settings_warn_unknown(warn_env); }

static void test_settings_warn_unknown(void) {
  static char longname[300];
  memset(longname, 'Q', sizeof longname - 1);
  memcpy(longname, "DIST_", 5);
  longname[sizeof longname - 3] = '=';
  const char *env[] = {"DIST_VERFIY=0", "DIST_VERIFY=1", "DIST_X=1", "PATH=/bin", "DIST_", "XDIST_VERFIY=1",
                       "DIST_LOG_LEVEL=warn", "DIST_\x01\n=1", longname, NULL};
  char text[8192];
  dist_log_level level = dist_log_level_get();
  dist_log_level_set(DIST_LOG_WARN);
  warn_env = env;
  capture(2, warn_unknown_now, text, sizeof text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "[distmgr WARN] DIST_VERFIY is not a distmgr setting (did you mean "
                                      "DIST_VERIFY?); see dist_settings_print\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "DIST_X is not a distmgr setting (known settings: DIST_INIT_METHOD, "));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "DIST_RPC_TINY); see dist_settings_print\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "DIST_?? is not a distmgr setting"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "DIST_QQQQ")); /* long names are cut */
  CU_ASSERT_PTR_NULL(strstr(text, "QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"));
  CU_ASSERT_PTR_NULL(strstr(text, "DIST_VERIFY is not"));
  CU_ASSERT_PTR_NULL(strstr(text, "DIST_LOG_LEVEL is not"));
  CU_ASSERT_PTR_NULL(strstr(text, "XDIST"));
  CU_ASSERT_PTR_NULL(strstr(text, "PATH"));
  int lines = 0;
  for (const char *p = text; (p = strchr(p, '\n')); p++) lines++;
  CU_ASSERT_EQUAL(lines, 4); /* one per unknown name; "DIST_" without '=' is no variable */
  /* Quiet below WARN, and no crash on an empty or NULL environment. */
  dist_log_level_set(DIST_LOG_ERROR);
  capture(2, warn_unknown_now, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "");
  dist_log_level_set(DIST_LOG_WARN);
  warn_env = NULL;
  capture(2, warn_unknown_now, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "");
  dist_log_level_set(level);
}

/* ---- device choice --------------------------------------------------------- */

/* Choose, expecting success, and compare kind and index. */
static void expect_device(int setting, int visible, int local_rank, dist_device_kind kind, int index) {
  unsigned before = CU_get_number_of_failures();
  dist_device d = {(dist_device_kind)77, -77};
  ASSERT_OK(dist__device_choose(setting, visible, "", local_rank, &d));
  CU_ASSERT_EQUAL(d.kind, kind);
  CU_ASSERT_EQUAL(d.index, index);
  if (CU_get_number_of_failures() != before)
    fprintf(stderr, "  ^ failing case: setting %d, visible %d, local rank %d\n", setting, visible, local_rank);
}

static void test_device_no_gpu(void) {
  /* No CUDA device: CPU for everyone, no division by zero. */
  for (int lr = 0; lr < 8; lr++) expect_device(DIST__DEVICE_AUTO, 0, lr, DIST_DEVICE_CPU, 0);
}

static void test_device_one_per_task(void) {
  /* srun --gpus-per-task: each task sees exactly its own device as 0. */
  for (int lr = 0; lr <= 5; lr++) expect_device(DIST__DEVICE_AUTO, 1, lr, DIST_DEVICE_CUDA, 0);
}

static void test_device_round_robin(void) {
  expect_device(DIST__DEVICE_AUTO, 4, 0, DIST_DEVICE_CUDA, 0);
  expect_device(DIST__DEVICE_AUTO, 4, 3, DIST_DEVICE_CUDA, 3);
  expect_device(DIST__DEVICE_AUTO, 4, 6, DIST_DEVICE_CUDA, 2);
}

static void test_device_explicit(void) {
  expect_device(DIST__DEVICE_CPU, 4, 1, DIST_DEVICE_CPU, 0);
  expect_device(DIST__DEVICE_CPU, 0, 0, DIST_DEVICE_CPU, 0);
  expect_device(3, 4, 0, DIST_DEVICE_CUDA, 3);
  expect_device(0, 1, 5, DIST_DEVICE_CUDA, 0);
}

/* DIST_DEVICE=cuda: as auto where GPUs are visible, an error naming the
 * reason where none is. */
static void test_device_cuda_required(void) {
  expect_device(DIST__DEVICE_CUDA, 4, 6, DIST_DEVICE_CUDA, 2);
  expect_device(DIST__DEVICE_CUDA, 1, 3, DIST_DEVICE_CUDA, 0);
  dist_device d = {DIST_DEVICE_CUDA, 42};
  ASSERT_STATUS(dist__device_choose(DIST__DEVICE_CUDA, 0, "cudaGetDeviceCount: no driver", 0, &d), DIST_ERR_SETTING);
  ASSERT_MSG_HAS("DIST_DEVICE=cuda but this process can use no CUDA device (cudaGetDeviceCount: no driver)");
  CU_ASSERT_EQUAL(d.index, 42);
}

/* Which environments say GPUs were given to this process. */
static void test_gpus_allocated(void) {
  static const struct { const char *env[3]; int given; const char *what; } cases[] = {
      {{NULL}, 0, ""},
      {{"CUDA_VISIBLE_DEVICES=", NULL}, 0, ""},
      {{"CUDA_VISIBLE_DEVICES=-1", NULL}, 0, ""},
      {{"CUDA_VISIBLE_DEVICES=NoDevFiles", NULL}, 0, ""},
      {{"CUDA_VISIBLE_DEVICES=0,1", NULL}, 1, "CUDA_VISIBLE_DEVICES=0,1"},
      {{"CUDA_VISIBLE_DEVICES=GPU-8d1e", NULL}, 1, "CUDA_VISIBLE_DEVICES=GPU-8d1e"},
      {{"SLURM_STEP_GPUS=2", NULL}, 1, "SLURM_STEP_GPUS=2"},
      {{"SLURM_JOB_GPUS=0,1,2,3", NULL}, 1, "SLURM_JOB_GPUS=0,1,2,3"},
      {{"SLURM_GPUS_ON_NODE=0", NULL}, 0, ""},
      {{"SLURM_GPUS_ON_NODE=4", NULL}, 1, "SLURM_GPUS_ON_NODE=4"},
      {{"SLURM_GPUS_PER_TASK=x", NULL}, 0, ""},
      {{"CUDA_VISIBLE_DEVICES=-1", "SLURM_GPUS_ON_NODE=2", NULL}, 1, "SLURM_GPUS_ON_NODE=2"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char what[96];
    int given = dist__gpus_allocated(cases[i].env, what, sizeof what);
    CU_ASSERT_EQUAL(given, cases[i].given);
    CU_ASSERT_STRING_EQUAL(what, cases[i].what);
  }
  /* A control byte is quoted as '?', a long value cut with "...". */
  const char *ctl[] = {"CUDA_VISIBLE_DEVICES=0\n1", NULL};
  char what[96];
  CU_ASSERT_EQUAL(dist__gpus_allocated(ctl, what, sizeof what), 1);
  CU_ASSERT_STRING_EQUAL(what, "CUDA_VISIBLE_DEVICES=0?1");
  char longv[120] = "CUDA_VISIBLE_DEVICES=";
  memset(longv + strlen(longv), '7', 60);
  const char *lv[] = {longv, NULL};
  CU_ASSERT_EQUAL(dist__gpus_allocated(lv, what, sizeof what), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(what, "..."));
  CU_ASSERT_EQUAL(strlen(what), strlen("CUDA_VISIBLE_DEVICES=") + 40 + 3);
}

/* Tasks the launcher starts on this node (for the oversubscription default). */
static void test_node_tasks(void) {
  static const struct { const char *env[6]; int tasks; } cases[] = {
      {{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=3", NULL}, 3},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=4", "SLURM_NODEID=0", NULL}, 4},
      {{"SLURM_PROCID=5", "SLURM_NTASKS=7", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_NODEID=2", NULL}, 2},
      {{"SLURM_PROCID=6", "SLURM_NTASKS=7", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_NODEID=3", NULL}, 1},
      {{"SLURM_PROCID=6", "SLURM_NTASKS=7", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_NODEID=4", NULL}, -1},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=2(x", "SLURM_NODEID=0", NULL}, -1},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=4;1", "SLURM_NODEID=1", NULL}, -1},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=4", NULL}, -1},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_TASKS_PER_NODE=4", "SLURM_NODEID=0", NULL}, 1}, /* batch: local size 1 */
      {{NULL}, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dist_launch l;
    ASSERT_OK(dist_launch_detect(cases[i].env, DIST_LAUNCH_AUTO, &l));
    CU_ASSERT_EQUAL(dist__launch_node_tasks(cases[i].env, &l), cases[i].tasks);
    if (dist__launch_node_tasks(cases[i].env, &l) != cases[i].tasks) fprintf(stderr, "  ^ node tasks case %zu\n", i);
  }
}

/* The F16C loops give the scalar conversions' bits: every f16 widened (and
 * scaled), every f16's neighbourhood narrowed (midpoints between f16 values,
 * one float ulp either side, overflow, subnormals, NaNs with payloads), and
 * sums of many pairs; odd lengths exercise the 8-wide loops' tails. */
static void test_f16_loops(void) {
  if (!dist__f16_hw()) fprintf(stderr, "  (no F16C on this CPU: the scalar loops compared with themselves)\n");
  enum { N = 65536 };
  uint16_t *h = malloc(N * sizeof *h), *b1 = malloc(4 * N * sizeof *b1), *b2 = malloc(4 * N * sizeof *b2);
  float *f1 = malloc(4 * N * sizeof *f1), *f2 = malloc(4 * N * sizeof *f2), *x = malloc(4 * N * sizeof *x);
  CU_ASSERT_FATAL(h && b1 && b2 && f1 && f2 && x);
  for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
  int bad = 0;
  for (int k = 0; k < 2; k++) { /* scale 1 (exact but for NaN quieting) and 0.25 */
    float scale = k ? 0.25f : 1.0f;
    dist__f16_widen_scale(h, f1, N - 3, scale);
    dist__f16_widen_scale_scalar(h, f2, N - 3, scale);
    for (int i = 0; i < N - 3; i++)
      bad += f1[i] != f2[i] && !(isnan(f1[i]) && isnan(f2[i]));
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* Narrow: each f16 value, the midpoint to the next, and one ulp either side of it. */
  size_t m = 0;
  for (int i = 0; i < N; i++) {
    float v = dist_f16_to_f32((uint16_t)i), w = dist_f16_to_f32((uint16_t)(i + 1));
    x[m++] = v;
    if ((i & 0x7C00) != 0x7C00 && ((i + 1) & 0x7C00) != 0x7C00 && (i & 0x7FFF) != 0x7FFF) {
      float mid = v + (w - v) / 2;
      x[m++] = mid, x[m++] = nextafterf(mid, INFINITY);
      x[m++] = nextafterf(mid, -INFINITY);
    }
  }
  const float special[] = {65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e30f, -1e-30f, 5.96e-8f, 2.98e-8f, 2.99e-8f};
  for (size_t i = 0; i < sizeof special / sizeof special[0] && m < 4 * N; i++) x[m++] = special[i];
  uint32_t payload = 0x7FA00001u; /* a signalling NaN with a payload, negated too */
  memcpy(&x[m++], &payload, 4);
  payload |= 0x80000000u;
  memcpy(&x[m++], &payload, 4);
  dist__f16_narrow(x, b1, m);
  dist__f16_narrow_scalar(x, b2, m);
  bad = 0;
  for (size_t i = 0; i < m; i++) bad += b1[i] != b2[i];
  CU_ASSERT_EQUAL(bad, 0);
  /* Sums: every f16 plus a shifted copy of all f16s. */
  for (int i = 0; i < N; i++) b1[i] = b2[i] = (uint16_t)(i * 40503u);
  dist__f16_sum(h, b1, N - 5);
  dist__f16_sum_scalar(h, b2, N - 5);
  /* NaN + NaN: IEEE leaves the sign open and compilers order the scalar
   * operands as they like; any NaN is the same sum. */
  bad = 0;
  for (int i = 0; i < N; i++) {
    int nan1 = (b1[i] & 0x7C00) == 0x7C00 && (b1[i] & 0x3FF), nan2 = (b2[i] & 0x7C00) == 0x7C00 && (b2[i] & 0x3FF);
    bad += b1[i] != b2[i] && !(nan1 && nan2);
  }
  CU_ASSERT_EQUAL(bad, 0);
  free(h), free(b1), free(b2), free(f1), free(f2), free(x);
}

/* PMI_FD naming a closed descriptor: MPICH's MPI_Init would abort, so an
 * MPICH build refuses first; Open MPI never reads PMI_FD. */
static void test_pmi_fd(void) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  int mpich = strncmp(v, "MPICH", 5) == 0;
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
  char open_fd[32], closed_fd[32];
  snprintf(open_fd, sizeof open_fd, "PMI_FD=%d", fds[0]);
  snprintf(closed_fd, sizeof closed_fd, "PMI_FD=%d", fds[1]);
  close(fds[1]);
  const char *open_env[] = {open_fd, NULL}, *closed_env[] = {closed_fd, NULL}, *none[] = {NULL};
  const char *bad[] = {"PMI_FD=-1", NULL}, *text[] = {"PMI_FD=five", NULL};
  CU_ASSERT_EQUAL(dist__launch_check_pmi_fd(none), DIST_SUCCESS);
  CU_ASSERT_EQUAL(dist__launch_check_pmi_fd(open_env), DIST_SUCCESS);
  CU_ASSERT_EQUAL(dist__launch_check_pmi_fd(closed_env), mpich ? DIST_ERR_LAUNCH_MISMATCH : DIST_SUCCESS);
  if (mpich) CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), " is not an open file in this process, so MPICH"));
  CU_ASSERT_EQUAL(dist__launch_check_pmi_fd(bad), mpich ? DIST_ERR_ENVIRONMENT : DIST_SUCCESS);
  CU_ASSERT_EQUAL(dist__launch_check_pmi_fd(text), mpich ? DIST_ERR_ENVIRONMENT : DIST_SUCCESS);
  if (mpich) CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "PMI_FD='five' is not a file descriptor number"));
  close(fds[0]);
}

/* One warning per node: the node's lowest rank that fell back, the lowest
 * rank of the first pair sharing a GPU. Rows: status, leader, local rank,
 * device key, flags. */
static void test_device_notes(void) {
  /* Two nodes {0,1,2} and {3,4}; ranks 1 and 2 fell back; ranks 3 and 4 share key 9. */
  const int64_t rows[] = {0, 0, 0, 0, 0,                    0, 0, 1, 0, DIST__DEV_FELL_BACK,
                          0, 0, 2, 0, DIST__DEV_FELL_BACK,  0, 3, 0, 9, 0,
                          0, 3, 1, 9, 0};
  int a, b, n;
  CU_ASSERT_EQUAL(dist__device_notes(rows, 5, 0, &a, &b, &n), 0);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT_EQUAL(dist__device_notes(rows, 5, 1, &a, &b, &n), DIST__NOTE_FELL_BACK);
  CU_ASSERT_EQUAL(dist__device_notes(rows, 5, 2, &a, &b, &n), 0);
  CU_ASSERT_EQUAL(dist__device_notes(rows, 5, 3, &a, &b, &n), DIST__NOTE_SHARED);
  CU_ASSERT_EQUAL(a, 3);
  CU_ASSERT_EQUAL(b, 4);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_EQUAL(dist__device_notes(rows, 5, 4, &a, &b, &n), 0);
  /* Equal keys on different nodes are different GPUs' hashes only by accident
   * of this table: never reported across nodes. */
  const int64_t apart[] = {0, 0, 0, 5, 0, 0, 1, 0, 5, 0};
  CU_ASSERT_EQUAL(dist__device_notes(apart, 2, 0, &a, &b, &n), 0);
  CU_ASSERT_EQUAL(dist__device_notes(apart, 2, 1, &a, &b, &n), 0);
}

static void test_device_out_of_range(void) {
  static const int cases[][2] = {{4, 4}, {0, 0}, {9, 2}}; /* setting, visible */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dist_device d = {DIST_DEVICE_CUDA, 42};
    ASSERT_STATUS(dist__device_choose(cases[i][0], cases[i][1], "", 0, &d), DIST_ERR_SETTING);
    ASSERT_MSG_HAS("DIST_DEVICE");
    CU_ASSERT_EQUAL(d.kind, DIST_DEVICE_CUDA); /* unchanged */
    CU_ASSERT_EQUAL(d.index, 42);
  }
}

/* Which members drive one GPU, from a table of device keys (0 = CPU). */
static void test_device_shared(void) {
  const uint64_t keys[] = {0, 0, 7, 9, 7, 11}; /* world ranks 0..5 */
  int a = -1, b = -1;
  const int cpus[] = {0, 1}, distinct[] = {2, 3, 5}, pair[] = {5, 4, 3, 2}, one[] = {2};
  CU_ASSERT_FALSE(dist__device_shared(keys, cpus, 2, &a, &b)); /* CPU ranks share nothing */
  CU_ASSERT_FALSE(dist__device_shared(keys, distinct, 3, &a, &b));
  CU_ASSERT_FALSE(dist__device_shared(keys, one, 1, &a, &b));
  CU_ASSERT_TRUE(dist__device_shared(keys, pair, 4, &a, &b));
  CU_ASSERT_EQUAL(a, 2); /* world ranks, ordered, whatever the member order */
  CU_ASSERT_EQUAL(b, 4);
}

/* DIST_CUDA_BACKEND x NCCL built x GPU shared -> engine or error. */
static void test_cuda_backend_pick(void) {
  static const int cases[][4] = {/* choice, built, shared, want (-1: error) */
                                 {DIST__CUDA_AUTO, 1, 0, DIST__CUDA_NCCL},   {DIST__CUDA_AUTO, 1, 1, DIST__CUDA_STAGED},
                                 {DIST__CUDA_AUTO, 0, 0, DIST__CUDA_STAGED}, {DIST__CUDA_AUTO, 0, 1, DIST__CUDA_STAGED},
                                 {DIST__CUDA_NCCL, 1, 0, DIST__CUDA_NCCL},   {DIST__CUDA_NCCL, 1, 1, -1},
                                 {DIST__CUDA_NCCL, 0, 0, -1},                {DIST__CUDA_STAGED, 1, 0, DIST__CUDA_STAGED},
                                 {DIST__CUDA_STAGED, 1, 1, DIST__CUDA_STAGED}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    int which = 42;
    dist_status s = dist__cuda_backend_pick(cases[i][0], cases[i][1], cases[i][2], "tp", 3, 5, &which);
    if (cases[i][3] < 0) {
      CU_ASSERT_EQUAL(s, DIST_ERR_UNSUPPORTED);
      CU_ASSERT_EQUAL(which, 42);
      ASSERT_MSG_HAS("DIST_CUDA_BACKEND=nccl");
      if (cases[i][2]) ASSERT_MSG_HAS("world ranks 3 and 5 of group 'tp' drive the same GPU");
    } else {
      ASSERT_OK(s);
      CU_ASSERT_EQUAL(which, cases[i][3]);
    }
    char what[48];
    snprintf(what, sizeof what, "choice %d built %d shared %d", cases[i][0], cases[i][1], cases[i][2]);
    name_failure(before, what);
  }
}

/* What each engine can reduce itself. NCCL sums 16-bit floats (DDP's
 * compressed buckets and bf16 gradients rely on it); staged and MPI cannot,
 * so the collective layer upcasts for them. No GPU needed: the tables only. */
static void test_backend_can_reduce(void) {
  CU_ASSERT_TRUE(dist__backend_mpi.can_reduce(DIST_F32, DIST_SUM));
#ifdef HAVE_NCCL
  CU_ASSERT_TRUE(dist__backend_nccl.can_reduce(DIST_BF16, DIST_SUM));
  CU_ASSERT_TRUE(dist__backend_nccl.can_reduce(DIST_F16, DIST_SUM));
  CU_ASSERT_TRUE(dist__backend_nccl.can_reduce(DIST_C64, DIST_SUM));
  CU_ASSERT_FALSE(dist__backend_nccl.can_reduce(DIST_C64, DIST_MAX)); /* not elementwise */
  CU_ASSERT_FALSE(dist__backend_nccl.can_reduce(DIST_I32, DIST_AVG));
#endif
}

static void test_device_kind_name(void) {
  CU_ASSERT_STRING_EQUAL(dist_device_kind_name(DIST_DEVICE_CPU), "cpu");
  CU_ASSERT_STRING_EQUAL(dist_device_kind_name(DIST_DEVICE_CUDA), "cuda");
}

/* ---- strict integer parsing ---------------------------------------------- */

/* Parse into a variable pre-set to a sentinel; returns the status. */
static dist_status parse(const char *value, long min, long max, int *out) {
  *out = -12345;
  return dist__parse_int(DIST_ERR_ENVIRONMENT, "VAR", value, min, max, "ctx", out);
}

static void test_parse_int_valid(void) {
  int v;
  ASSERT_OK(parse("2147483647", 0, INT_MAX, &v));
  CU_ASSERT_EQUAL(v, INT_MAX);
  ASSERT_OK(parse("-2147483648", INT_MIN, INT_MAX, &v));
  CU_ASSERT_EQUAL(v, INT_MIN);
  ASSERT_OK(parse("0", 0, 0, &v));
  CU_ASSERT_EQUAL(v, 0);
  ASSERT_OK(parse("-5", -10, 10, &v));
  CU_ASSERT_EQUAL(v, -5);
  ASSERT_OK(parse("10", 0, 10, &v)); /* zeros inside a number are fine */
  CU_ASSERT_EQUAL(v, 10);
  ASSERT_OK(parse("-10", -10, 10, &v));
  CU_ASSERT_EQUAL(v, -10);
}

static void test_parse_int_invalid(void) {
  static const struct { const char *value; long min, max; const char *why; } cases[] = {
      {"2147483648", 0, INT_MAX, "out of range"},     /* INT_MAX + 1 */
      {"-2147483649", INT_MIN, 0, "out of range"},    /* INT_MIN - 1 */
      {"99999999999999999999", 0, INT_MAX, "out of range"}, /* overflows long too */
      {"11", 0, 10, "out of range"},
      {"-1", 0, 10, "out of range"},
      {"0x10", 0, 100, "not an integer"},
      {"5 ", 0, 10, "not an integer"},
      {" 5", 0, 10, "not an integer"},
      {"\t5", 0, 10, "not an integer"},
      {"5\n", 0, 10, "not an integer"},
      {"+", 0, 10, "not an integer"},
      {"-", 0, 10, "not an integer"},
      {"1e3", 0, 10000, "not an integer"},
      /* Only canonical decimal integers: whitespace of any kind, '+',
       * leading zeros and "-0" are typos or another program's notation. */
      {"\n5", 0, 10, "not an integer"},
      {"\r5", 0, 10, "not an integer"},
      {"\v5", 0, 10, "not an integer"},
      {"\f5", 0, 10, "not an integer"},
      {"5\r", 0, 10, "not an integer"},
      {"+7", 0, 10, "not an integer"},
      {"+0", 0, 10, "not an integer"},
      {"-0", -10, 10, "not an integer"},
      {"007", 0, 10, "not an integer"},
      {"00", 0, 10, "not an integer"},
      {"-07", -10, 10, "not an integer"},
      {"--1", -10, 10, "not an integer"},
      {"+-1", -10, 10, "not an integer"},
      {"1-", 0, 10, "not an integer"},
      {"9223372036854775808", 0, INT_MAX, "out of range"},   /* LONG_MAX + 1 */
      {"-9223372036854775809", INT_MIN, 0, "out of range"},  /* LONG_MIN - 1 */
      {"-99999999999999999999", INT_MIN, 0, "out of range"},
      {"", 0, 10, "empty"},
      {NULL, 0, 10, "empty"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    int v;
    ASSERT_STATUS(parse(cases[i].value, cases[i].min, cases[i].max, &v), DIST_ERR_ENVIRONMENT);
    ASSERT_MSG_HAS("VAR");
    ASSERT_MSG_HAS(cases[i].why);
    ASSERT_MSG_HAS("ctx");
    CU_ASSERT_EQUAL(v, -12345);
    name_failure(before, cases[i].value ? cases[i].value : "(NULL)");
  }
}

static void test_parse_int_quotes_value(void) {
  /* The message names the variable and quotes the value, control characters
   * escaped so the log line stays one line. */
  static const struct { const char *value, *quoted; } cases[] = {
      {"007", "VAR='007'"},   {"+1", "VAR='+1'"},     {"-0", "VAR='-0'"},
      {"\n1", "VAR='\\n1'"}, {"1\t", "VAR='1\\t'"}, {"\x01z", "VAR='\\x01z'"},
      {"abc", "VAR='abc' is not an integer (ctx)"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    int v;
    ASSERT_STATUS(parse(cases[i].value, 0, 10, &v), DIST_ERR_ENVIRONMENT);
    ASSERT_MSG_HAS(cases[i].quoted);
    CU_ASSERT_PTR_NULL(strchr(dist_last_error(), '\n'));
    name_failure(before, cases[i].quoted);
  }
  /* A very long value is cut, not the rest of the message. */
  char longv[3000];
  memset(longv, '7', sizeof longv - 1);
  longv[0] = 'x';
  longv[sizeof longv - 1] = '\0';
  int v;
  ASSERT_STATUS(parse(longv, 0, 10, &v), DIST_ERR_ENVIRONMENT);
  ASSERT_MSG_HAS("(ctx)");
}

static void test_parse_int_loose(void) {
  /* The quiet, lenient reading used to compare ignored launcher variables:
   * what other programs make of a number, and no last-error message. */
  long v = -1;
  dist_set_error(DIST_ERR_INTERNAL, "%s", "marker");
  CU_ASSERT_TRUE(dist__parse_int_loose("01", &v));
  CU_ASSERT_EQUAL(v, 1);
  CU_ASSERT_TRUE(dist__parse_int_loose("+2", &v));
  CU_ASSERT_EQUAL(v, 2);
  CU_ASSERT_TRUE(dist__parse_int_loose("-0", &v));
  CU_ASSERT_EQUAL(v, 0);
  CU_ASSERT_TRUE(dist__parse_int_loose(" 3", &v));
  CU_ASSERT_EQUAL(v, 3);
  v = -1;
  CU_ASSERT_FALSE(dist__parse_int_loose("1x", &v));
  CU_ASSERT_FALSE(dist__parse_int_loose("", &v));
  CU_ASSERT_FALSE(dist__parse_int_loose(NULL, &v));
  CU_ASSERT_FALSE(dist__parse_int_loose("99999999999999999999", &v));
  CU_ASSERT_EQUAL(v, -1);
  CU_ASSERT_STRING_EQUAL(dist_last_error(), "marker");
}

static void test_parse_int_status_passthrough(void) {
  /* The caller picks the code: settings errors are not environment errors. */
  int v = 0;
  ASSERT_STATUS(dist__parse_int(DIST_ERR_SETTING, "DIST_X", "x", 0, 1, "ctx", &v), DIST_ERR_SETTING);
  ASSERT_MSG_HAS("DIST_X='x'");
}

static void test_env_get(void) {
  const char *env[] = {"RANKS=9", "RANK", "RANK=3", "EMPTY=", "A=b=c", NULL};
  CU_ASSERT_STRING_EQUAL(dist__env_get(env, "RANK"), "3");
  CU_ASSERT_STRING_EQUAL(dist__env_get(env, "EMPTY"), "");
  CU_ASSERT_STRING_EQUAL(dist__env_get(env, "A"), "b=c");
  CU_ASSERT_PTR_NULL(dist__env_get(env, "RAN"));
  CU_ASSERT_PTR_NULL(dist__env_get(env, "MISSING"));
  CU_ASSERT_PTR_NULL(dist__env_get(NULL, "RANK"));
  CU_ASSERT_PTR_NULL(dist__env_get(env, NULL));
}

/* ---- driver ---------------------------------------------------------------- */

static CU_TestInfo status_tests[] = {
    {"status strings", test_status_strings},
    {"unknown status", test_status_unknown},
    {"last error per thread", test_last_error_per_thread},
    {"success keeps last error", test_success_keeps_last_error},
    {"a message built from the last one", test_error_from_last_error},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo settings_tests[] = {
    {"defaults", test_settings_defaults},
    {"DIST_LOG_LEVEL", test_settings_log_level},
    {"DIST_DEVICE", test_settings_device},
    {"method, ranks per node, port", test_settings_others},
    {"all at once", test_settings_all_at_once},
    {"invalid values", test_settings_invalid},
    {"table", test_settings_table},
    {"table entries are read", test_settings_table_is_read},
    {"print", test_settings_print},
    {"the debug log's line", test_settings_line},
    {"settings that must match, from the table", test_settings_must_match},
    {"closest setting name", test_settings_closest},
    {"unknown DIST_ names warned", test_settings_warn_unknown},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo device_tests[] = {
    {"no GPU", test_device_no_gpu},
    {"one GPU per task", test_device_one_per_task},
    {"round robin", test_device_round_robin},
    {"explicit setting", test_device_explicit},
    {"setting out of range", test_device_out_of_range},
    {"DIST_DEVICE=cuda requires a GPU", test_device_cuda_required},
    {"GPUs allocated by the environment", test_gpus_allocated},
    {"one warning per node", test_device_notes},
    {"tasks on this node", test_node_tasks},
    {"PMI_FD closed by a parent", test_pmi_fd},
    {"F16C loops give the scalar conversions' bits", test_f16_loops},
    {"kind names", test_device_kind_name},
    {"ranks sharing a GPU", test_device_shared},
    {"CUDA backend choice", test_cuda_backend_pick},
    {"what each backend reduces", test_backend_can_reduce},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo parse_tests[] = {
    {"parse_int valid", test_parse_int_valid},
    {"parse_int invalid", test_parse_int_invalid},
    {"parse_int quotes the value", test_parse_int_quotes_value},
    {"parse_int_loose", test_parse_int_loose},
    {"parse_int status", test_parse_int_status_passthrough},
    {"env_get", test_env_get},
    CU_TEST_INFO_NULL,
};


/* ---- logging --------------------------------------------------------------- */

/* Run `fn` with file descriptor `fd` (1 or 2) redirected to a temporary
 * file; return what it wrote. */
static void capture(int fd, void (*fn)(void), char *out, size_t size) {
  fflush(NULL);
  FILE *tmp = tmpfile();
  int saved = dup(fd);
  dup2(fileno(tmp), fd);
  fn();
  fflush(NULL);
  dup2(saved, fd);
  close(saved);
  rewind(tmp);
  size_t n = fread(out, 1, size - 1, tmp);
  out[n] = '\0';
  fclose(tmp);
}

static void log_some(void) {
  dist_log(DIST_LOG_WARN, "disk %d%% full", 93);
  dist_log(DIST_LOG_DEBUG, "hidden at warn");
  dist_log(DIST_LOG_ERROR, "broken");
}

static void test_log_prefix_and_levels(void) {
  char text[1024];
  dist_log_level before = dist_log_level_get();
  dist_log_level_set(DIST_LOG_WARN);
  dist__log_set_rank(3, 4);
  capture(2, log_some, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "[distmgr 3/4 WARN] disk 93% full\n[distmgr 3/4 ERROR] broken\n");
  dist_log_level_set(DIST_LOG_NONE);
  capture(2, log_some, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "");
  dist_log_level_set(DIST_LOG_DEBUG);
  dist__log_set_rank(-1, -1); /* before initialize: no rank in the prefix */
  capture(2, log_some, text, sizeof text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "[distmgr DEBUG] hidden at warn\n"));
  dist_log_level_set(before);
}

static void print_on_ranks_1_and_0(void) {
  dist__log_set_rank(1, 2);
  dist_print0("from rank 1\n");
  dist__log_set_rank(0, 2);
  dist_print0("from rank %d\n", 0);
  dist__log_set_rank(-1, -1);
}

/* dist_print0 prints on rank 0 only. */
static void test_print0(void) {
  char text[256];
  capture(1, print_on_ranks_1_and_0, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "from rank 0\n");
}

static CU_TestInfo log_tests[] = {
    {"rank prefix and levels", test_log_prefix_and_levels},
    {"print0", test_print0},
    CU_TEST_INFO_NULL,
};

/* ---- sizes that overflow (issue 18) ---------------------------------------- */

#include "mem/split.h" /* dist__split_init, dist__tensor_span, dist__mem_* */
#include "bf16_ref.h"  /* to_bf16, from_bf16: the test's own */

static const int64_t T40 = (int64_t)1 << 40;

/* dist_tensor_numel / _nbytes: -1 / SIZE_MAX when the count does not fit,
 * never a wrapped count (2^80 elements read as 0). */
static void test_numel_overflow(void) {
  static char buf[8];
  struct {
    dist_dtype dt;
    int ndim;
    int64_t shape[3];
    int64_t numel;
    size_t nbytes;
  } cases[] = {
      {DIST_F32, 2, {T40, T40}, -1, SIZE_MAX},                     /* 2^80 wrapped to 0 */
      {DIST_F32, 3, {(int64_t)1 << 31, (int64_t)1 << 31, 4}, -1, SIZE_MAX}, /* 2^64: also 0 */
      {DIST_U8, 1, {INT64_MAX}, INT64_MAX, (size_t)INT64_MAX},
      {DIST_U8, 2, {INT64_MAX, 1}, INT64_MAX, (size_t)INT64_MAX},
      {DIST_U8, 2, {INT64_MAX, 2}, -1, SIZE_MAX},                  /* wrapped to -2 */
      {DIST_F64, 1, {(int64_t)1 << 61}, (int64_t)1 << 61, SIZE_MAX}, /* bytes 2^64: wrapped to 0 */
      {DIST_F64, 1, {(int64_t)1 << 59}, (int64_t)1 << 59, (size_t)1 << 62},
      {DIST_C128, 1, {(int64_t)1 << 59}, (int64_t)1 << 59, SIZE_MAX}, /* bytes 2^63 > INT64_MAX */
      {DIST_F32, 3, {T40, T40, 0}, 0, 0},                          /* 0 elements, whatever the rest */
      {DIST_F32, 3, {0, T40, T40}, 0, 0},
      {DIST_F32, 2, {3, -2}, -1, SIZE_MAX},                        /* a negative extent: was -6 */
      {DIST_F32, 2, {3, 5}, 15, 60},
      {DIST_F32, 0, {0}, 1, 4},                                    /* a scalar */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned before = CU_get_number_of_failures();
    dist_tensor t = dist_tensor_host(buf, cases[i].dt, cases[i].ndim, cases[i].shape);
    CU_ASSERT_EQUAL(dist_tensor_numel(&t), cases[i].numel);
    CU_ASSERT_EQUAL(dist_tensor_nbytes(&t), cases[i].nbytes);
    char what[32];
    snprintf(what, sizeof what, "case %zu", i);
    name_failure(before, what);
  }
  CU_ASSERT_EQUAL(dist_tensor_numel(NULL), 0);
  CU_ASSERT_EQUAL(dist_tensor_nbytes(NULL), 0);
}

/* The split helper: sizes {8, INT64_MAX, INT64_MAX, 10} wrapped to 16 and
 * passed; so did a whole whose outer x n x inner overflows. */
static void test_split_overflow(void) {
  static char buf[64];
  dist__split s;
  int64_t wrap[4] = {8, INT64_MAX, INT64_MAX, 10};
  dist_tensor t = dist_tensor_host(buf, DIST_U8, 1, (int64_t[1]){16});
  ASSERT_STATUS(dist__split_init(&s, &t, 0, 4, wrap, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflow");
  dist_tensor wide = dist_tensor_host(buf, DIST_F32, 3, (int64_t[3]){T40, 5, T40});
  ASSERT_STATUS(dist__split_init(&s, &wide, 1, 1, (int64_t[1]){5}, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflow");
  ASSERT_STATUS(dist__split_init(&s, &wide, 1, 2, NULL, INT64_MAX), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflow");
  CU_ASSERT_EQUAL(dist__tensor_span(&wide), -1);
  /* A valid split still works: [2, 1 + 5, 3] f32 along dim 1. */
  dist_tensor ok = dist_tensor_host(buf, DIST_F32, 3, (int64_t[3]){2, 6, 3});
  CU_ASSERT_EQUAL(dist__tensor_span(&ok), 2 * 6 * 3 * 4);
  ASSERT_OK(dist__split_init(&s, &ok, 1, 2, (int64_t[2]){1, 5}, 0));
  size_t counts[2], displs[2];
  dist__split_counts(&s, counts, displs);
  CU_ASSERT_EQUAL(s.n, 6);
  CU_ASSERT_EQUAL(counts[0], 6);
  CU_ASSERT_EQUAL(counts[1], 30);
  CU_ASSERT_EQUAL(displs[1], 6);
  dist__split_free(&s);
}

/* Memory operations on sizes whose products overflow: an error, not a copy
 * of a wrapped byte count (here 0 bytes, reported as done). */
static void test_memops_overflow(void) {
  static char a[64], b[64];
  ASSERT_STATUS(dist__mem_copy2d(DIST_MEM_HOST, a, (size_t)T40, b, (size_t)T40, (size_t)T40, (size_t)T40),
                DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflow");
  ASSERT_STATUS(dist__mem_copy2d(DIST_MEM_HOST, a, (size_t)1 << 33, b, (size_t)1 << 33, (size_t)1 << 33,
                                 (size_t)1 << 31),
                DIST_ERR_INVALID_ARGUMENT); /* exactly 2^64 bytes */
  ASSERT_STATUS(dist__mem_index_select(DIST_MEM_HOST, a, b, 4, 1, (int64_t)1 << 62, 1024, NULL, 0),
                DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflow");
  ASSERT_STATUS(dist__mem_index_add(DIST_MEM_HOST, a, b, DIST_F64, 1, (int64_t)1 << 62, 1024, NULL, 0),
                DIST_ERR_INVALID_ARGUMENT);
  /* Valid ones still work. */
  memset(b, 7, sizeof b);
  ASSERT_OK(dist__mem_copy2d(DIST_MEM_HOST, a, 8, b, 16, 8, 4));
  CU_ASSERT_EQUAL(a[31], 7);
  int64_t idx[2] = {1, 0};
  ASSERT_OK(dist__mem_index_select(DIST_MEM_HOST, a, b, 4, 1, 2, 1, idx, 2));
}

/* ---- batched copies (dist__mem_copy_pieces) ---------------------------------- */

/* 70 pieces (two launches on a GPU) of sizes 0..9 elements and three big
 * ones (1, 1000, 70001), from src into dst in memory `mem`, of dtype t
 * (esize bytes), divided by d. With `shift` 1, both buffers start min(esize,
 * 8) bytes past an allocation (a c128 at an 8-byte boundary), with 2 one
 * byte past (a plain copy only), so that the device copy must use narrower
 * words. The result must equal the test's own
 * arithmetic on every element and leave every byte outside the pieces
 * alone. Returns 0 when `mem` cannot be had. */
#define NPIECES 73
static int pieces_case(dist_memory mem, dist_dtype t, int64_t d, int shift) {
  size_t es = dist_dtype_size(t), n[NPIECES], off[NPIECES], total = 1; /* element 0 stays untouched */
  for (int k = 0; k < NPIECES; k++) {
    n[k] = k < 70 ? (size_t)(k % 10) : k == 70 ? 1 : k == 71 ? 1000 : 70001;
    off[k] = total;
    total += n[k] + 1; /* a gap after each */
  }
  unsigned char *hs = malloc(total * es), *hd = malloc(total * es), *want = malloc(total * es);
  for (size_t i = 0; i < total * es; i++) hs[i] = (unsigned char)(i * 131 + 7);
  for (size_t i = 0; t == DIST_F32 && i < total; i++) /* floats in [1, 2) */
    ((uint32_t *)hs)[i] = 0x3f800000u + (uint32_t)(i * 2654435761u % 8388608u);
  for (size_t i = 0; t == DIST_BF16 && i < total; i++) ((uint16_t *)hs)[i] = (uint16_t)(0x3f80u + i % 128);
  for (size_t i = 0; t == DIST_C128 && i < 2 * total; i++) ((double *)hs)[i] = 1 + (double)(i % 4099) / 1024;
  memset(hd, 0x5a, total * es);
  memcpy(want, hd, total * es);
  for (int k = 0; k < NPIECES; k++)
    for (size_t i = off[k]; i < off[k] + n[k]; i++) {
      if (d == 1) memcpy(want + i * es, hs + i * es, es);
      else if (t == DIST_F32) ((float *)want)[i] = ((const float *)hs)[i] / (float)d;
      else if (t == DIST_C128)
        for (int c = 0; c < 2; c++) ((double *)want)[2 * i + c] = ((const double *)hs)[2 * i + c] / (double)d;
      else ((uint16_t *)want)[i] = to_bf16(from_bf16(((const uint16_t *)hs)[i]) / (float)d);
    }
  size_t at = shift == 1 ? (es < 8 ? es : 8) : shift == 2 ? 1 : 0; /* 2: off any alignment (copies only) */
  void *s = mem == DIST_MEM_HOST ? hs : NULL, *dd = mem == DIST_MEM_HOST ? hd : NULL;
  int ok = mem == DIST_MEM_HOST || (dist__mem_alloc(mem, total * es + at, &s) == DIST_SUCCESS &&
                                    dist__mem_alloc(mem, total * es + at, &dd) == DIST_SUCCESS &&
                                    dist__mem_upload(mem, (char *)s + at, hs, total * es) == DIST_SUCCESS &&
                                    dist__mem_upload(mem, (char *)dd + at, hd, total * es) == DIST_SUCCESS);
  if (ok) {
    char *sa = mem == DIST_MEM_HOST ? (char *)s : (char *)s + at, *da = mem == DIST_MEM_HOST ? (char *)dd : (char *)dd + at;
    dist__piece p[NPIECES];
    for (int k = 0; k < NPIECES; k++) p[k] = (dist__piece){da + off[k] * es, sa + off[k] * es, n[k]};
    ASSERT_OK(dist__mem_copy_pieces(mem, p, NPIECES, t, d));
    if (mem != DIST_MEM_HOST) {
      ASSERT_OK(dist__mem_download(mem, hd, da, total * es));
      ASSERT_OK(dist__mem_sync(mem));
    }
    size_t bad = 0;
    for (size_t i = 0; i < total * es; i++) bad += hd[i] != want[i];
    if (bad) fprintf(stderr, "copy_pieces %s %s / %lld: %zu of %zu bytes differ\n", mem == DIST_MEM_HOST ? "host" : "device",
                     dist_dtype_name(t), (long long)d, bad, total * es);
    CU_ASSERT_EQUAL(bad, 0);
  }
  if (mem != DIST_MEM_HOST) dist__mem_free(mem, s), dist__mem_free(mem, dd);
  free(hs), free(hd), free(want);
  return ok;
}

static void test_copy_pieces(void) {
  for (int m = 0; m < 2; m++) {
    dist_memory mem = m ? DIST_MEM_CUDA : DIST_MEM_HOST;
    if (!pieces_case(mem, DIST_F32, 1, 0)) {
      printf("(device memory: none here) ");
      break;
    }
    pieces_case(mem, DIST_F32, 1, 2);
    pieces_case(mem, DIST_C128, 1, 2);
    for (int shift = 0; shift < 2; shift++) {
      pieces_case(mem, DIST_F32, 1, shift);
      pieces_case(mem, DIST_F32, 3, shift);
      pieces_case(mem, DIST_BF16, 3, shift);
      pieces_case(mem, DIST_BF16, 1, shift);
      pieces_case(mem, DIST_C128, 1, shift);
      pieces_case(mem, DIST_C128, 3, shift);
      pieces_case(mem, DIST_U8, 1, shift);
    }
  }
  static char a[16], b[16];
  dist__piece p = {a, b, 4};
  ASSERT_STATUS(dist__mem_copy_pieces(DIST_MEM_HOST, &p, 1, DIST_F32, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("divisor 0");
  ASSERT_STATUS(dist__mem_copy_pieces(DIST_MEM_HOST, &p, 1, DIST_I32, 2), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("not a floating type");
  ASSERT_STATUS(dist__mem_copy_pieces(DIST_MEM_HOST, NULL, 2, DIST_F32, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL");
  static float fa[8], fb[8];
  dist__piece odd = {(char *)fa + 2, fb, 3};
  ASSERT_STATUS(dist__mem_copy_pieces(DIST_MEM_HOST, &odd, 1, DIST_F32, 3), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("piece 0 is not aligned to its f32 numbers");
  ASSERT_OK(dist__mem_copy_pieces(DIST_MEM_HOST, &odd, 1, DIST_F32, 1)); /* a plain copy takes any bytes */
  p.n = SIZE_MAX / 2;
  ASSERT_STATUS(dist__mem_copy_pieces(DIST_MEM_HOST, &p, 1, DIST_F32, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflows");
  ASSERT_OK(dist__mem_copy_pieces(DIST_MEM_HOST, NULL, 0, DIST_F32, 1));
}

static CU_TestInfo overflow_tests[] = {
    {"tensor numel and nbytes", test_numel_overflow},
    {"split helper", test_split_overflow},
    {"memory operations", test_memops_overflow},
    {"batched copies, host and (with a GPU) device memory", test_copy_pieces},
    CU_TEST_INFO_NULL,
};

/* ---- option structs that grow (lib/core/options.c) -------------------------- */

/* A sample option struct, and one that embeds it by value with a field after
 * it, as dist_daso_options embeds dist_ddp_options (with later fields). */
typedef struct sample_opts {
  size_t struct_size;
  int first, second;
  double third;
} sample_opts;
typedef struct sample_outer {
  size_t struct_size;
  int x;
  sample_opts inner;
  int y;
} sample_outer;

static const sample_opts SAMPLE_DEFAULTS = {.struct_size = sizeof(sample_opts), .first = 1, .second = 2, .third = 3.5};
static const sample_outer OUTER_DEFAULTS = {.struct_size = sizeof(sample_outer), .x = 7,
                                            .inner = {.struct_size = sizeof(sample_opts), .first = 1, .second = 2,
                                                      .third = 3.5},
                                            .y = 9};
static const dist__options_kind SAMPLE_KIND = DIST__OPTIONS_KIND(sample_opts, "SAMPLE_INIT", first, &SAMPLE_DEFAULTS);
static const dist__options_kind OUTER_KIND = {
    .name = "sample_outer",
    .init = "OUTER_INIT",
    .size = sizeof(sample_outer),
    .min_size = offsetof(sample_outer, x) + sizeof(int),
    .defaults = &OUTER_DEFAULTS,
    .member = &SAMPLE_KIND,
    .member_name = "inner",
    .member_offset = offsetof(sample_outer, inner),
};

static void test_options_current_and_null(void) {
  sample_opts out;
  ASSERT_OK(dist__options_copy(&SAMPLE_KIND, NULL, &out, "t"));
  CU_ASSERT(out.struct_size == sizeof out && out.first == 1 && out.second == 2 && out.third == 3.5);
  sample_opts in = {.struct_size = sizeof in, .first = 10, .second = 20, .third = 30};
  ASSERT_OK(dist__options_copy(&SAMPLE_KIND, &in, &out, "t"));
  CU_ASSERT(out.struct_size == sizeof out && out.first == 10 && out.second == 20 && out.third == 30);
}

/* A caller built against an older header: the fields its struct_size does
 * not cover take the defaults, whatever its memory holds there. */
static void test_options_older_caller(void) {
  sample_opts in = {.struct_size = offsetof(sample_opts, third), .first = 10, .second = 20, .third = 99}, out;
  ASSERT_OK(dist__options_copy(&SAMPLE_KIND, &in, &out, "t"));
  CU_ASSERT(out.struct_size == sizeof out && out.first == 10 && out.second == 20 && out.third == 3.5);
  in.struct_size = offsetof(sample_opts, second);
  ASSERT_OK(dist__options_copy(&SAMPLE_KIND, &in, &out, "t"));
  CU_ASSERT(out.first == 10 && out.second == 2 && out.third == 3.5);
}

/* A caller built against a newer header: zero bytes past this library's
 * struct are fields left at their defaults (accepted); a non-zero one is a
 * field this library cannot honour (refused, naming the struct and byte). */
static void test_options_newer_caller(void) {
  struct {
    sample_opts s;
    int64_t more[2];
  } big;
  memset(&big, 0, sizeof big);
  big.s = (sample_opts){.struct_size = sizeof big, .first = 10, .second = 20, .third = 30};
  sample_opts out;
  ASSERT_OK(dist__options_copy(&SAMPLE_KIND, &big, &out, "t"));
  CU_ASSERT(out.struct_size == sizeof out && out.first == 10 && out.third == 30);
  big.more[1] = 5;
  memset(&out, 0x5A, sizeof out);
  ASSERT_STATUS(dist__options_copy(&SAMPLE_KIND, &big, &out, "t"), DIST_ERR_INVALID_ARGUMENT);
  char byte[64];
  snprintf(byte, sizeof byte, "byte %zu of sample_opts", sizeof(sample_opts) + sizeof(int64_t));
  ASSERT_MSG_HAS(byte);
  ASSERT_MSG_HAS("newer distmgr header");
  CU_ASSERT_EQUAL(out.first, 0x5A5A5A5A); /* nothing written */
}

/* A zeroed struct (no INIT macro) and sizes no header ever had. */
static void test_options_bad_size(void) {
  sample_opts in, out;
  memset(&in, 0, sizeof in);
  memset(&out, 0x5A, sizeof out);
  ASSERT_STATUS(dist__options_copy(&SAMPLE_KIND, &in, &out, "caller_fn"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("caller_fn: sample_opts.struct_size is 0");
  ASSERT_MSG_HAS("initialize the struct with SAMPLE_INIT");
  CU_ASSERT_EQUAL(out.first, 0x5A5A5A5A);
  in.struct_size = offsetof(sample_opts, first); /* not even the first field */
  ASSERT_STATUS(dist__options_copy(&SAMPLE_KIND, &in, &out, "t"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("SAMPLE_INIT");
  in.struct_size = (size_t)1 << 40; /* garbage: an uninitialized struct */
  ASSERT_STATUS(dist__options_copy(&SAMPLE_KIND, &in, &out, "t"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("is not the size of any sample_opts");
}

/* The embedded struct is read with its own struct_size, and the fields after
 * it are found where the caller's copy of it ends. */
static void test_options_embedded(void) {
  /* The caller's header: an older inner struct (no `third`), then y. */
  typedef struct old_inner {
    size_t struct_size;
    int first, second;
  } old_inner;
  typedef struct old_outer {
    size_t struct_size;
    int x;
    old_inner inner;
    int y;
  } old_outer;
  old_outer in = {.struct_size = sizeof in, .x = 70, .inner = {.struct_size = sizeof(old_inner), .first = 10, .second = 20}, .y = 90};
  sample_outer out;
  ASSERT_OK(dist__options_copy(&OUTER_KIND, &in, &out, "t"));
  CU_ASSERT(out.struct_size == sizeof out && out.x == 70 && out.y == 90);
  CU_ASSERT(out.inner.struct_size == sizeof out.inner && out.inner.first == 10 && out.inner.second == 20 &&
            out.inner.third == 3.5);
  /* An outer struct from before y: y takes its default. */
  sample_outer cur = OUTER_DEFAULTS;
  cur.x = 71, cur.y = 91;
  cur.struct_size = offsetof(sample_outer, y);
  ASSERT_OK(dist__options_copy(&OUTER_KIND, &cur, &out, "t"));
  CU_ASSERT(out.x == 71 && out.y == 9 && out.inner.third == 3.5);
  /* The inner struct zeroed: named with its own INIT macro. */
  cur = OUTER_DEFAULTS;
  memset(&cur.inner, 0, sizeof cur.inner);
  ASSERT_STATUS(dist__options_copy(&OUTER_KIND, &cur, &out, "t"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("sample_outer.inner.struct_size is 0");
  ASSERT_MSG_HAS("SAMPLE_INIT");
  /* An inner struct from a newer header with a field set: refused. */
  struct {
    size_t struct_size;
    int x;
    struct {
      sample_opts s;
      int64_t more;
    } inner;
    int y;
  } newer;
  memset(&newer, 0, sizeof newer);
  newer.struct_size = sizeof newer;
  newer.inner.s = SAMPLE_DEFAULTS;
  newer.inner.s.struct_size = sizeof newer.inner;
  ASSERT_OK(dist__options_copy(&OUTER_KIND, &newer, &out, "t"));
  newer.inner.more = 1;
  ASSERT_STATUS(dist__options_copy(&OUTER_KIND, &newer, &out, "t"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("of sample_outer.inner");
  /* An inner size that runs past the outer struct's end. */
  cur = OUTER_DEFAULTS;
  cur.inner.struct_size = sizeof cur;
  ASSERT_STATUS(dist__options_copy(&OUTER_KIND, &cur, &out, "t"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("ends inside sample_outer.inner");
}

/* A real entry point, on the paths that fail before MPI starts. */
static void test_options_initialize(void) {
  dist_init_options o;
  memset(&o, 0, sizeof o);
  ASSERT_STATUS(dist_manager_initialize_with(&o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("dist_manager_initialize_with: dist_init_options.struct_size is 0");
  ASSERT_MSG_HAS("DIST_INIT_OPTIONS_INIT");
  /* Older caller: thread_level is not read (its garbage would be refused
   * first), method is. */
  o = (dist_init_options)DIST_INIT_OPTIONS_INIT;
  o.struct_size = offsetof(dist_init_options, thread_level);
  o.method = (dist_launch_method)99;
  o.thread_level = (dist_thread_level)77;
  ASSERT_STATUS(dist_manager_initialize_with(&o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("launch method 99");
  /* Newer caller: zero bytes past the struct are accepted (the method is
   * then checked), a non-zero one is refused. */
  struct {
    dist_init_options o;
    int32_t more[4];
  } big;
  memset(&big, 0, sizeof big);
  big.o = (dist_init_options)DIST_INIT_OPTIONS_INIT;
  big.o.struct_size = sizeof big;
  big.o.method = (dist_launch_method)99;
  ASSERT_STATUS(dist_manager_initialize_with(&big.o), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("launch method 99");
  big.more[2] = 1;
  ASSERT_STATUS(dist_manager_initialize_with(&big.o), DIST_ERR_INVALID_ARGUMENT);
  char byte[64];
  snprintf(byte, sizeof byte, "byte %zu of dist_init_options", sizeof(dist_init_options) + 2 * sizeof(int32_t));
  ASSERT_MSG_HAS(byte);
  CU_ASSERT_EQUAL(dist_manager_is_initialized(), 0);
}

static CU_TestInfo options_tests[] = {
    {"current struct and NULL", test_options_current_and_null},
    {"older caller: defaults for the missing fields", test_options_older_caller},
    {"newer caller: zero tail accepted, non-zero refused", test_options_newer_caller},
    {"struct_size 0 or impossible", test_options_bad_size},
    {"embedded struct with its own size", test_options_embedded},
    {"dist_manager_initialize_with", test_options_initialize},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"status", NULL, NULL, NULL, NULL, status_tests},
    {"settings", NULL, NULL, NULL, NULL, settings_tests},
    {"device", NULL, NULL, NULL, NULL, device_tests},
    {"parse", NULL, NULL, NULL, NULL, parse_tests},
    {"log", NULL, NULL, NULL, NULL, log_tests},
    {"overflow", NULL, NULL, NULL, NULL, overflow_tests},
    {"options", NULL, NULL, NULL, NULL, options_tests},
    CU_SUITE_INFO_NULL,
};

int main(void) { return cunit_run(suites, "test_basics", 0) != 0; }
