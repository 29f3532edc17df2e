/* Unit tests of models/safetensors (local: no initialize, no MPI).
 *
 * Round trip against an independent Python reader (tests/safetensors_check.py,
 * skipped visibly without python3), atomic replacement when a write fails
 * after its temporary file exists, every truncation of a valid file, 20,000
 * deterministic mutations, and hand-written bad headers with the code and
 * message each must give. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <distmgr.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cunit_main.h"
#include "safetensors.h"

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmpdir, name); }

/* Number of entries of tmpdir whose name contains ".tmp.". */
static int count_temp_files(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, ".tmp.")) n++;
  closedir(d);
  return n;
}

static int read_whole(const char *path, void **bytes, size_t *size) {
  return dist__st_read_file(path, bytes, size) == DIST_SUCCESS;
}

/* ---- the sample checkpoint ------------------------------------------------------ */

static float w1[2][3];
static double b1[5];
static int64_t step = 123456789012345LL;
static float empty_dummy[1];
static int64_t idx[4] = {-7, 0, 1LL << 40, 42};
static double cube[2][2][2];

#define NSAMPLE 6
static dist__st_tensor sample[NSAMPLE];
static const dist__st_meta sample_meta[] = {{"format", "pt"}, {"epoch", "7"}, {"note", "caf\xc3\xa9 \"quoted\""}};
#define NMETA 3

static void make_sample(void) {
  for (int i = 0; i < 6; i++) w1[i / 3][i % 3] = (float)i * 0.5f - 1.0f;
  for (int i = 0; i < 5; i++) b1[i] = 1.0 / (1 << i) - 0.25 * i;
  for (int i = 0; i < 8; i++) cube[i / 4][(i / 2) % 2][i % 2] = i % 3 == 0 ? -0.0 : ldexp(1.0 + i, -3 * i);
  const dist__st_tensor t[NSAMPLE] = {
      {.name = "w1", .dtype = DIST_F32, .ndim = 2, .shape = {2, 3}, .data = w1},
      {.name = "empty", .dtype = DIST_F32, .ndim = 2, .shape = {0, 3}, .data = empty_dummy},
      {.name = "b1", .dtype = DIST_F64, .ndim = 1, .shape = {5}, .data = b1},
      {.name = "step", .dtype = DIST_I64, .ndim = 0, .data = &step},
      {.name = "idx", .dtype = DIST_I64, .ndim = 1, .shape = {4}, .data = idx},
      {.name = "\xce\xb3.cube", .dtype = DIST_F64, .ndim = 3, .shape = {2, 2, 2}, .data = cube},
  };
  memcpy(sample, t, sizeof t);
}

static size_t elem_size(dist_dtype d) { return d == DIST_F32 ? 4 : 8; }

static int64_t numel_of(const dist__st_tensor *t) {
  int64_t n = 1;
  for (int a = 0; a < t->ndim; a++) n *= t->shape[a];
  return n;
}

static const char *dtype_text(dist_dtype d) { return d == DIST_F32 ? "F32" : d == DIST_F64 ? "F64" : d == DIST_I64 ? "I64" : "?"; }

/* Sum of the elements in double (exact for the sample values) or int64. */
static double sum_of(const dist__st_tensor *t) {
  double s = 0;
  for (int64_t i = 0; i < numel_of(t); i++) {
    if (t->dtype == DIST_F32) {
      float v;
      memcpy(&v, (const char *)t->data + 4 * i, 4);
      s += v;
    } else if (t->dtype == DIST_F64) {
      double v;
      memcpy(&v, (const char *)t->data + 8 * i, 8);
      s += v;
    } else {
      int64_t v;
      memcpy(&v, (const char *)t->data + 8 * i, 8);
      s += (double)v;
    }
  }
  return s;
}

static void write_sample(const char *path) { ASSERT_OK(dist__st_write(path, sample, NSAMPLE, sample_meta, NMETA)); }

/* ---- the independent reader ------------------------------------------------------ */

static const char *find_script(void) {
  static char buf[1024];
  const char *env = getenv("SAFETENSORS_CHECK");
  if (env && access(env, R_OK) == 0) return env;
  const char *srcdir = getenv("srcdir");
  const char *cands[] = {srcdir, ".", "..", "../.."};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
    if (!cands[i]) continue;
    snprintf(buf, sizeof buf, "%s/tests/safetensors_check.py", cands[i]);
    if (access(buf, R_OK) == 0) return buf;
  }
  return NULL;
}

/* Run the Python reader on `path`; its JSON output, or NULL (after a printed SKIP
 * when python3 is missing, *skipped = 1). */
static json_t *python_read(const char *path, int *skipped) {
  *skipped = 0;
  if (system("command -v python3 >/dev/null 2>&1") != 0) {
    printf("SKIP: python3 not found (the independent reader check did not run)\n");
    *skipped = 1;
    return NULL;
  }
  const char *script = find_script();
  if (!script) {
    fprintf(stderr, "tests/safetensors_check.py not found (set srcdir or SAFETENSORS_CHECK)\n");
    return NULL;
  }
  char cmd[2600];
  snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", script, path);
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  char *out = NULL;
  size_t len = 0, cap = 0;
  for (int c; (c = fgetc(p)) != EOF;) {
    if (len + 1 >= cap) {
      cap = cap ? 2 * cap : 4096;
      char *grown = realloc(out, cap);
      if (!grown) break;
      out = grown;
    }
    out[len++] = (char)c;
  }
  int rc = pclose(p);
  json_t *j = NULL;
  if (rc == 0 && out) {
    json_error_t e;
    j = json_loadb(out, len, 0, &e);
    if (!j) fprintf(stderr, "python reader printed unparsable output: %s\n", e.text);
  } else {
    fprintf(stderr, "python reader failed (status %d) on %s\n", rc, path);
  }
  free(out);
  return j;
}

/* ---- round trip ------------------------------------------------------------------ */

static void test_round_trip(void) {
  char path[512];
  path_in_tmp(path, sizeof path, "ckpt.safetensors");
  write_sample(path);
  CU_ASSERT_EQUAL(count_temp_files(), 0);

  void *bytes = NULL;
  size_t size = 0;
  CU_ASSERT_FATAL(read_whole(path, &bytes, &size));
  CU_ASSERT_FATAL(size >= 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | ((unsigned char *)bytes)[i];
  CU_ASSERT_EQUAL(hlen % 8, 0);
  CU_ASSERT(hlen <= size - 8);

  dist__st_file *f = NULL;
  ASSERT_OK(dist__st_parse(bytes, size, path, &f));
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_EQUAL(dist__st_count(f), NSAMPLE);
  size_t data_total = 0;
  for (int i = 0; i < NSAMPLE; i++) {
    dist__st_tensor got, at;
    ASSERT_OK(dist__st_find(f, sample[i].name, &got));
    CU_ASSERT_STRING_EQUAL(got.name, sample[i].name);
    CU_ASSERT_EQUAL(got.dtype, sample[i].dtype);
    CU_ASSERT_EQUAL(got.ndim, sample[i].ndim);
    for (int a = 0; a < got.ndim; a++) CU_ASSERT_EQUAL(got.shape[a], sample[i].shape[a]);
    size_t nbytes = (size_t)numel_of(&sample[i]) * elem_size(sample[i].dtype);
    CU_ASSERT_EQUAL(got.nbytes, nbytes);
    CU_ASSERT(got.nbytes == 0 || memcmp(got.data, sample[i].data, nbytes) == 0); /* bit-identical */
    data_total += got.nbytes;
    /* Data order is the order written (the empty tensor sorts before the one at its offset). */
    ASSERT_OK(dist__st_at(f, i, &at));
    CU_ASSERT_STRING_EQUAL(at.name, sample[i].name);
    CU_ASSERT_PTR_EQUAL(at.data, got.data);
  }
  CU_ASSERT_EQUAL(data_total, size - 8 - hlen);
  for (int m = 0; m < NMETA; m++) {
    const char *v = dist__st_meta_get(f, sample_meta[m].key);
    CU_ASSERT(v && strcmp(v, sample_meta[m].value) == 0);
  }
  CU_ASSERT_PTR_NULL(dist__st_meta_get(f, "absent"));
  dist__st_tensor none;
  ASSERT_STATUS(dist__st_find(f, "nope", &none), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS("no tensor 'nope' in ");
  ASSERT_MSG_HAS("ckpt.safetensors");

  /* The independent reader: names, dtypes, shapes, sizes, sums and metadata. */
  int skipped;
  json_t *py = python_read(path, &skipped);
  if (!skipped) {
    CU_ASSERT_FATAL(py != NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(py, "header_len")), (json_int_t)hlen);
    json_t *meta = json_object_get(py, "metadata");
    CU_ASSERT_EQUAL(json_object_size(meta), NMETA);
    for (int m = 0; m < NMETA; m++) {
      const char *v = json_string_value(json_object_get(meta, sample_meta[m].key));
      CU_ASSERT(v && strcmp(v, sample_meta[m].value) == 0);
    }
    json_t *ts = json_object_get(py, "tensors");
    CU_ASSERT_EQUAL_FATAL(json_array_size(ts), NSAMPLE);
    for (int i = 0; i < NSAMPLE; i++) {
      json_t *e = json_array_get(ts, (size_t)i);
      const char *name = json_string_value(json_object_get(e, "name"));
      const char *dtype = json_string_value(json_object_get(e, "dtype"));
      CU_ASSERT(name && strcmp(name, sample[i].name) == 0);
      CU_ASSERT(dtype && strcmp(dtype, dtype_text(sample[i].dtype)) == 0);
      json_t *shape = json_object_get(e, "shape");
      CU_ASSERT_EQUAL(json_array_size(shape), (size_t)sample[i].ndim);
      for (int a = 0; a < sample[i].ndim; a++)
        CU_ASSERT_EQUAL(json_integer_value(json_array_get(shape, (size_t)a)), sample[i].shape[a]);
      CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "nbytes")),
                      (json_int_t)(numel_of(&sample[i]) * (int64_t)elem_size(sample[i].dtype)));
      double want = sum_of(&sample[i]), got = json_number_value(json_object_get(e, "sum"));
      if (fabs(got - want) > 1e-12 * (1 + fabs(want)))
        fprintf(stderr, "tensor %s: python sum %.17g, C sum %.17g\n", sample[i].name, got, want);
      CU_ASSERT(fabs(got - want) <= 1e-12 * (1 + fabs(want)));
    }
    json_decref(py);
  }
  dist__st_free(f);
  free(bytes);
  unlink(path);
}

/* An empty checkpoint (no tensors, no metadata) is a valid file. */
static void test_empty_file(void) {
  char path[512];
  path_in_tmp(path, sizeof path, "empty.safetensors");
  ASSERT_OK(dist__st_write(path, NULL, 0, NULL, 0));
  void *bytes;
  size_t size;
  CU_ASSERT_FATAL(read_whole(path, &bytes, &size));
  CU_ASSERT_EQUAL(size, 16); /* "{}" padded to 8 */
  dist__st_file *f = NULL;
  ASSERT_OK(dist__st_parse(bytes, size, path, &f));
  CU_ASSERT_EQUAL(dist__st_count(f), 0);
  dist__st_free(f);
  free(bytes);
  unlink(path);
}

/* ---- atomicity --------------------------------------------------------------------- */

static int same_file(const char *path, const void *bytes, size_t size) {
  void *now;
  size_t n;
  if (!read_whole(path, &now, &n)) return 0;
  int same = n == size && memcmp(now, bytes, size) == 0;
  free(now);
  return same;
}

static void test_atomic(void) {
  char path[512];
  path_in_tmp(path, sizeof path, "atomic.safetensors");
  write_sample(path);
  void *a;
  size_t asize;
  CU_ASSERT_FATAL(read_whole(path, &a, &asize));

  /* 1. The data write fails after the temporary file exists: a file size limit
   * well below the big tensor makes write() fail with EFBIG. */
  size_t big_n = 1 << 16;
  double *big = calloc(big_n, sizeof *big);
  CU_ASSERT_FATAL(big != NULL);
  dist__st_tensor bt = {.name = "big", .dtype = DIST_F64, .ndim = 1, .shape = {(int64_t)big_n}, .data = big};
  struct rlimit old, low;
  CU_ASSERT_FATAL(getrlimit(RLIMIT_FSIZE, &old) == 0);
  low = old;
  low.rlim_cur = 4096;
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  CU_ASSERT_FATAL(setrlimit(RLIMIT_FSIZE, &low) == 0);
  dist_status st = dist__st_write(path, &bt, 1, NULL, 0);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  ASSERT_STATUS(st, DIST_ERR_IO);
  ASSERT_MSG_HAS("write failed");
  ASSERT_MSG_HAS(".tmp.");
  CU_ASSERT(same_file(path, a, asize));
  CU_ASSERT_EQUAL(count_temp_files(), 0);
  free(big);

  /* 2. The rename fails: the target is a non-empty directory. */
  char dir[512], inner[600];
  path_in_tmp(dir, sizeof dir, "isdir.safetensors");
  CU_ASSERT_FATAL(mkdir(dir, 0755) == 0);
  snprintf(inner, sizeof inner, "%s/keep", dir);
  FILE *k = fopen(inner, "w");
  CU_ASSERT_FATAL(k != NULL);
  fclose(k);
  ASSERT_STATUS(dist__st_write(dir, sample, NSAMPLE, NULL, 0), DIST_ERR_IO);
  ASSERT_MSG_HAS("cannot rename");
  struct stat sb;
  CU_ASSERT(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
  CU_ASSERT(access(inner, F_OK) == 0);
  CU_ASSERT_EQUAL(count_temp_files(), 0);
  unlink(inner);
  rmdir(dir);

  /* 3. Bad arguments are refused before any file is created. */
  dist__st_tensor bad[2] = {sample[0], sample[2]};
  bad[1].dtype = DIST_BF16;
  ASSERT_STATUS(dist__st_write(path, bad, 2, NULL, 0), DIST_ERR_UNSUPPORTED);
  ASSERT_MSG_HAS("bf16");
  bad[1] = sample[2];
  bad[1].data = NULL;
  ASSERT_STATUS(dist__st_write(path, bad, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL data");
  CU_ASSERT(same_file(path, a, asize));
  CU_ASSERT_EQUAL(count_temp_files(), 0);

  /* 4. A directory that does not exist: nothing to clean up, a clear IO error. */
  char nodir[512];
  path_in_tmp(nodir, sizeof nodir, "no/such/dir.safetensors");
  ASSERT_STATUS(dist__st_write(nodir, sample, 1, NULL, 0), DIST_ERR_IO);
  ASSERT_MSG_HAS("No such file or directory");
  free(a);
  unlink(path);
}

static void test_write_arguments(void) {
  char path[512];
  path_in_tmp(path, sizeof path, "args.safetensors");
  dist__st_tensor t[2] = {sample[0], sample[2]};
  ASSERT_STATUS(dist__st_write(NULL, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_write(path, t, -1, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_write(path, NULL, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 1), DIST_ERR_INVALID_ARGUMENT);
  t[1].name = "w1";
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("'w1' given twice");
  t[1].name = "__metadata__";
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  t[1].name = "";
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  t[1].name = "bad\xff";
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("UTF-8");
  t[1] = sample[2];
  t[1].dtype = (dist_dtype)99;
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  t[1].dtype = DIST_I32;
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_UNSUPPORTED);
  ASSERT_MSG_HAS("i32");
  t[1] = sample[2];
  t[1].ndim = 9;
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  t[1].ndim = 1;
  t[1].shape[0] = -5;
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("negative");
  t[1].ndim = 3;
  t[1].shape[0] = t[1].shape[1] = t[1].shape[2] = (int64_t)1 << 40;
  ASSERT_STATUS(dist__st_write(path, t, 2, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("too large");
  dist__st_meta m[2] = {{"k", "v"}, {"k", "w"}};
  ASSERT_STATUS(dist__st_write(path, sample, 1, m, 2), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("'k' given twice");
  m[1].key = "j";
  m[1].value = NULL;
  ASSERT_STATUS(dist__st_write(path, sample, 1, m, 2), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT(access(path, F_OK) != 0);
  CU_ASSERT_EQUAL(count_temp_files(), 0);
}

static void test_query_arguments(void) {
  dist__st_tensor t;
  dist__st_file *f = NULL;
  CU_ASSERT_EQUAL(dist__st_count(NULL), -1);
  ASSERT_STATUS(dist__st_at(NULL, 0, &t), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_find(NULL, "x", &t), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NULL(dist__st_meta_get(NULL, "x"));
  dist__st_free(NULL);
  ASSERT_STATUS(dist__st_parse(NULL, 16, "x", &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_parse("12345678", 8, "x", NULL), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NULL(f);

  char path[512];
  path_in_tmp(path, sizeof path, "q.safetensors");
  write_sample(path);
  void *bytes;
  size_t size;
  CU_ASSERT_FATAL(read_whole(path, &bytes, &size));
  ASSERT_OK(dist__st_parse(bytes, size, "q", &f));
  ASSERT_STATUS(dist__st_at(f, -1, &t), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_at(f, NSAMPLE, &t), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_at(f, 0, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__st_find(f, NULL, &t), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NULL(dist__st_meta_get(f, NULL));
  dist__st_free(f);
  free(bytes);
  unlink(path);

  void *b = (void *)1;
  size_t s = 7;
  path_in_tmp(path, sizeof path, "does-not-exist");
  ASSERT_STATUS(dist__st_read_file(path, &b, &s), DIST_ERR_IO);
  ASSERT_MSG_HAS("No such file or directory");
  ASSERT_MSG_HAS("does-not-exist");
  CU_ASSERT(b == (void *)1 && s == 7); /* outputs untouched on failure */
  ASSERT_STATUS(dist__st_read_file(tmpdir, &b, &s), DIST_ERR_IO);
  ASSERT_STATUS(dist__st_read_file(NULL, &b, &s), DIST_ERR_INVALID_ARGUMENT);
}

/* ---- hostile input ------------------------------------------------------------------ */

/* Checks that a successful parse of buf[0..size) is self-consistent; 1 if so. */
static int invariants_hold(const unsigned char *buf, size_t size, const dist__st_file *f) {
  int n = dist__st_count(f);
  if (n < 0) return 0;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
  const unsigned char *expect = buf + 8 + hlen;
  for (int i = 0; i < n; i++) {
    dist__st_tensor t, byname;
    if (dist__st_at(f, i, &t) != DIST_SUCCESS) return 0;
    if (t.dtype != DIST_F32 && t.dtype != DIST_F64 && t.dtype != DIST_I64) return 0;
    if (t.ndim < 0 || t.ndim > DIST_TENSOR_MAX_DIMS) return 0;
    uint64_t numel = 1;
    for (int a = 0; a < t.ndim; a++) {
      if (t.shape[a] < 0) return 0;
      numel *= (uint64_t)t.shape[a];
    }
    const unsigned char *d = t.data;
    if (t.nbytes != numel * elem_size(t.dtype)) return 0;
    if (d < buf + 8 + hlen || d > buf + size || t.nbytes > (size_t)(buf + size - d)) return 0;
    if (d != expect) return 0; /* contiguous, in data order */
    expect = d + t.nbytes;
    if (dist__st_find(f, t.name, &byname) != DIST_SUCCESS || byname.data != t.data) return 0;
  }
  return expect == buf + size; /* no hole at the end */
}

/* Parse an exact-size heap copy (so a sanitizer sees any read past the end). */
static dist_status parse_copy(const void *src, size_t size, const char *what, int *invariants_ok) {
  unsigned char *copy = malloc(size ? size : 1);
  if (!copy) return DIST_ERR_NO_MEMORY;
  if (size) memcpy(copy, src, size);
  dist_set_error(DIST_SUCCESS, "%s", "");
  dist__st_file *f = NULL;
  dist_status st = dist__st_parse(copy, size, what, &f);
  *invariants_ok = st == DIST_SUCCESS ? invariants_hold(copy, size, f) : dist_last_error()[0] != '\0' && f == NULL;
  dist__st_free(f);
  free(copy);
  return st;
}

static void sample_bytes(void **bytes, size_t *size) {
  char path[512];
  path_in_tmp(path, sizeof path, "sample.safetensors");
  write_sample(path);
  CU_ASSERT_FATAL(read_whole(path, bytes, size));
  unlink(path);
}

static void test_truncation(void) {
  void *bytes;
  size_t size;
  sample_bytes(&bytes, &size);
  int ok;
  int succeeded = 0, bad = 0;
  for (size_t len = 0; len < size; len++) {
    dist_status st = parse_copy(bytes, len, "cut", &ok);
    succeeded += st == DIST_SUCCESS;
    bad += !ok || st != DIST_ERR_CORRUPT;
  }
  CU_ASSERT_EQUAL(succeeded, 0);
  CU_ASSERT_EQUAL(bad, 0);
  ASSERT_OK(parse_copy(bytes, size, "whole", &ok));
  CU_ASSERT(ok);
  free(bytes);
}

static uint64_t rng_state;
static uint64_t rng(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rng() % n) : 0; }

static void test_mutations(void) {
  void *orig;
  size_t osize;
  sample_bytes(&orig, &osize);
  const unsigned char *o = orig;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | o[i];
  size_t digits[4096], ndigits = 0;
  for (size_t i = 8; i < 8 + hlen && ndigits < 4096; i++)
    if (o[i] >= '0' && o[i] <= '9') digits[ndigits++] = i;
  size_t cap = 2 * osize + 64;
  unsigned char *m = malloc(cap);
  CU_ASSERT_FATAL(m != NULL);

  rng_state = 20240611;
  int successes = 0, errors = 0, broken = 0, unexpected_code = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t size = osize;
    memcpy(m, o, osize);
    int nmut = 1 + (int)below(3);
    for (int k = 0; k < nmut; k++) {
      switch (below(6)) {
      case 0: /* flip a bit anywhere */
        if (size) m[below(size)] ^= (unsigned char)(1u << below(8));
        break;
      case 1: /* a random byte in the header */
        if (size > 8) m[8 + below(size - 8 < hlen ? size - 8 : hlen)] = (unsigned char)rng();
        break;
      case 2: /* another digit in the header */
        if (ndigits) {
          size_t at = digits[below(ndigits)];
          if (at < size) m[at] = (unsigned char)('0' + below(10));
        }
        break;
      case 3: { /* a different header length */
        uint64_t v;
        switch (below(4)) {
        case 0: v = hlen + below(17) - 8; break;
        case 1: v = below(size + 1); break;
        case 2: v = rng(); break;
        default: v = hlen ^ ((uint64_t)1 << below(64)); break;
        }
        if (size >= 8)
          for (int i = 0; i < 8; i++) m[i] = (unsigned char)(v >> (8 * i));
        break;
      }
      case 4: { /* splice: overwrite a range with another range of the original */
        size_t len = below(32), from = below(osize), to = below(size);
        if (from + len > osize) len = osize - from;
        if (to + len > size) len = size - to;
        memcpy(m + to, o + from, len);
        break;
      }
      default: { /* insert or delete a range */
        size_t at = below(size + 1), len = 1 + below(16);
        if (below(2) && size + len <= cap) {
          memmove(m + at + len, m + at, size - at);
          for (size_t i = 0; i < len; i++) m[at + i] = (unsigned char)(below(2) ? rng() : ' ');
          size += len;
        } else {
          if (at + len > size) len = size - at;
          memmove(m + at, m + at + len, size - at - len);
          size -= len;
        }
        break;
      }
      }
    }
    int ok;
    dist_status st = parse_copy(m, size, "mutant", &ok);
    if (st == DIST_SUCCESS)
      successes++;
    else
      errors++;
    if (st != DIST_SUCCESS && st != DIST_ERR_CORRUPT && st != DIST_ERR_UNSUPPORTED) unexpected_code++;
    if (!ok) {
      if (broken < 5) fprintf(stderr, "mutation %d: status %d, invariants broken (%s)\n", iter, (int)st, dist_last_error());
      broken++;
    }
  }
  printf("\n    mutations: %d parsed, %d rejected ", successes, errors);
  CU_ASSERT_EQUAL(broken, 0);
  CU_ASSERT_EQUAL(unexpected_code, 0);
  CU_ASSERT(successes > 0); /* both paths were exercised */
  CU_ASSERT(errors > 0);
  free(m);
  free(orig);
}

typedef struct bad_case {
  const char *header;
  size_t data_len;
  long long hlen_delta; /* added to the true header length */
  dist_status code;
  const char *msg;
} bad_case;

#define T32(n, b, e) "\"" n "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" #b "," #e "]}"

static const bad_case BAD[] = {
    {"hello", 0, 0, DIST_ERR_CORRUPT, "header is not valid JSON"},
    {"[1, 2]", 0, 0, DIST_ERR_CORRUPT, "header is a JSON array, not an object"},
    {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, DIST_ERR_CORRUPT, "tensor 'a' has no dtype"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, 0, DIST_ERR_CORRUPT, "tensor 'a' has no shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0, DIST_ERR_CORRUPT, "shape[0] = -2 is negative"},
    {"{" T32("a", 0, 8) "}", 4, 0, DIST_ERR_CORRUPT, "tensor 'a' data_offsets [0, 8] exceed the data area (4 bytes"},
    {"{" T32("a", 0, 8) "," T32("b", 4, 12) "}", 12, 0, DIST_ERR_CORRUPT,
     "tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]"},
    {"{" T32("a", 0, 8) "," T32("b", 12, 20) "}", 20, 0, DIST_ERR_CORRUPT, "hole in the data area: bytes [8, 12)"},
    {"{" T32("a", 0, 8) "}", 12, 0, DIST_ERR_CORRUPT, "bytes [8, 12) after the last tensor"},
    {"{\"__metadata__\":{\"k\":1}," T32("a", 0, 8) "}", 8, 0, DIST_ERR_CORRUPT,
     "__metadata__ value of 'k' is a JSON integer, not a string"},
    {"{\"__metadata__\":[]," T32("a", 0, 8) "}", 8, 0, DIST_ERR_CORRUPT, "__metadata__ is a JSON array, not an object"},
    {"{" T32("a", 0, 8) "}", 8, 100, DIST_ERR_CORRUPT, "is larger than the"},
    {"{" T32("a", 0, 8) "," T32("a", 8, 16) "}", 16, 0, DIST_ERR_CORRUPT, "duplicate object key"},
    {"{\"w1\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,100]}}", 100, 0, DIST_ERR_CORRUPT,
     "bad.safetensors: tensor 'w1' data_offsets [0, 100] do not match shape [2, 3] of F32 (24 bytes)"},
    {"{\"h\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, 0, DIST_ERR_UNSUPPORTED,
     "tensor 'h' has dtype BF16"},
    {"{\"h\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, 0, DIST_ERR_CORRUPT, "unknown dtype 'Q7'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, 0, DIST_ERR_CORRUPT,
     "has 9 dims (at most 8)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, 0, DIST_ERR_CORRUPT,
     "shape[0] is a JSON real number, not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8, 0, DIST_ERR_CORRUPT,
     "data_offsets is not an array of 2 integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, 0, DIST_ERR_CORRUPT, "0 <= begin <= end"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", 0, 0, DIST_ERR_CORRUPT,
     "too large"},
    {"{\"a\":7}", 0, 0, DIST_ERR_CORRUPT, "tensor 'a' is a JSON integer, not an object"},
    {"{\"a\xff\":1}", 0, 0, DIST_ERR_CORRUPT, "header is not valid JSON"},
    {"{\"a\":\"\\u0000\"}", 0, 0, DIST_ERR_CORRUPT, "header is not valid JSON"},
    {"{} x", 0, 0, DIST_ERR_CORRUPT, "header is not valid JSON"},
    {"{}", 4, 0, DIST_ERR_CORRUPT, "bytes [0, 4) after the last tensor"},
    {"", 0, 0, DIST_ERR_CORRUPT, "header is not valid JSON"},
};

static void test_bad_headers(void) {
  for (size_t c = 0; c < sizeof BAD / sizeof BAD[0]; c++) {
    const bad_case *k = &BAD[c];
    size_t hl = strlen(k->header), size = 8 + hl + k->data_len;
    unsigned char *buf = calloc(1, size);
    CU_ASSERT_FATAL(buf != NULL);
    uint64_t declared = (uint64_t)((long long)hl + k->hlen_delta);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(declared >> (8 * i));
    memcpy(buf + 8, k->header, hl);
    dist__st_file *f = NULL;
    dist_status st = dist__st_parse(buf, size, "bad.safetensors", &f);
    if (st != k->code || !strstr(dist_last_error(), k->msg) || !strstr(dist_last_error(), "bad.safetensors"))
      fprintf(stderr, "case %zu (%s): status %d, message '%s'; expected %d with '%s'\n", c, k->header, (int)st,
              dist_last_error(), (int)k->code, k->msg);
    CU_ASSERT_EQUAL(st, k->code);
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), k->msg));
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "bad.safetensors"));
    CU_ASSERT_PTR_NULL(f);
    dist__st_free(f);
    free(buf);
  }

  /* Under 8 bytes, and a header length over the 100 MiB limit (the buffer is
   * big enough, so only the limit can refuse it). */
  dist__st_file *f = NULL;
  ASSERT_STATUS(dist__st_parse("\x02\0\0\0", 4, "short", &f), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS("4 bytes are too few");
  size_t huge = ((size_t)100 << 20) + 1;
  unsigned char *big = calloc(1, 8 + huge);
  CU_ASSERT_FATAL(big != NULL);
  for (int i = 0; i < 8; i++) big[i] = (unsigned char)((uint64_t)huge >> (8 * i));
  ASSERT_STATUS(dist__st_parse(big, 8 + huge, "big", &f), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS("over the 100 MiB limit");
  free(big);

  /* Good variants: an empty object, a padded header, zero-size tensors
   * sharing an offset, and extra keys in an entry. */
  static const char *const good[] = {
      "{}",
      "{" T32("a", 0, 8) "}        ",
      "{\"z\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[8,8]},\"y\":{\"dtype\":\"F64\",\"shape\":[3,0],"
      "\"data_offsets\":[8,8]}," T32("a", 0, 8) "}",
      "{\"__metadata__\":{},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":null}}",
  };
  for (size_t c = 0; c < sizeof good / sizeof good[0]; c++) {
    size_t hl = strlen(good[c]), size = 8 + hl + (c == 0 ? 0 : 8);
    unsigned char *buf = calloc(1, size);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, good[c], hl);
    ASSERT_OK(dist__st_parse(buf, size, "good", &f));
    CU_ASSERT(f && invariants_hold(buf, size, f));
    dist__st_free(f);
    f = NULL;
    free(buf);
  }
}

static CU_TestInfo st_tests[] = {
    {"round trip, python reader agrees", test_round_trip},
    {"empty checkpoint", test_empty_file},
    {"failed writes leave the old file", test_atomic},
    {"write argument checks", test_write_arguments},
    {"query argument checks", test_query_arguments},
    {"every truncation is an error", test_truncation},
    {"20000 mutations", test_mutations},
    {"hand-written bad headers", test_bad_headers},
    CU_TEST_INFO_NULL};

static int suite_init(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/test_safetensors.XXXXXX", base && base[0] ? base : "/tmp");
  if (!mkdtemp(tmpdir)) return -1;
  make_sample();
  return 0;
}

static int suite_clean(void) {
  DIR *d = opendir(tmpdir);
  if (d) {
    char p[600];
    for (struct dirent *e; (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  return rmdir(tmpdir) == 0 ? 0 : -1;
}

static CU_SuiteInfo suites[] = {{"safetensors", suite_init, suite_clean, NULL, NULL, st_tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_run(suites, "test_safetensors", 0) != 0; }
