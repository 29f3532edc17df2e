/* examples/flowdata.c, the surrogate pipeline's HDF5 dataset, on either
 * engine (MPI-IO and parallel HDF5 under mpirun; serial HDF5 and pwrite()
 * under the torchrun LAUNCHER, Gloo): a
 * dataset written with a row split over all ranks (uneven at 3) reads back
 * bit for bit with every reader count and as whole fields; ranks writing
 * different trajectories in one call (some with nothing); and bad input:
 * missing, foreign, untagged, mismatched and truncated files, boxes out of
 * range, NULL pointers, bad meta, and a write that runs out of file size
 * (RLIMIT_FSIZE) -- the same error on every rank, the .part file removed
 * and a file already at the path left as it was. */
#include <dirent.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../examples/flowdata.h"
#include "cunit_mpi.h"

static int R, W;
static char dir[256];

/* <temp dir>/<name>, the directory made by rank 0 on first use. */
static const char *tmp(const char *name) {
  static char buf[4][512];
  static int next;
  if (!dir[0]) {
    if (R == 0) {
      snprintf(dir, sizeof dir, "%s/test_flowdata.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
      if (!mkdtemp(dir)) dir[0] = 0;
    }
    cunit_broadcast_bytes(dir, sizeof dir, 0);
  }
  char *b = buf[next++ % 4];
  snprintf(b, sizeof buf[0], "%s/%s", dir, name);
  return b;
}

static int clean_dir(void) {
  cunit_barrier();
  if (R == 0 && dir[0]) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(tmp(e->d_name));
    if (d) closedir(d);
    rmdir(dir);
  }
  return 0;
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Rank 0 writes `text` to path; everyone waits. */
static void put_text(const char *path, const char *text) {
  if (R == 0) {
    FILE *fp = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fputs(text, fp);
    fclose(fp);
  }
  cunit_barrier();
}

static int has_text(const char *path, const char *text) {
  char buf[256] = "";
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  size_t got = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[got] = 0;
  return !strcmp(buf, text);
}

/* The value written at (traj, snap, row, col): exactly representable or not,
 * compared bit for bit after the round trip. */
static float value(int64_t t, int64_t s, int64_t r, int64_t c) {
  return (float)(sin(0.37 * (double)r + 1.1 * (double)c) * (1.0 + (double)t) + 0.01 * (double)s - 3.0 * (double)t);
}

static void fill(float *buf, int64_t n, int64_t t, int64_t s, int64_t r0, int64_t rows) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < n; c++) buf[r * n + c] = value(t, s, r0 + r, c);
}

/* Rows of rank p of q for n rows: the first n % q ranks get one more. */
static void split(int64_t n, int q, int p, int64_t *r0, int64_t *rows) {
  int64_t base = n / q, extra = n % q;
  *rows = base + (p < extra);
  *r0 = p * base + (p < extra ? p : extra);
}

static int same_bits(const float *a, const float *b, int64_t count) { return !memcmp(a, b, sizeof(float) * (size_t)count); }

static flowdata_meta small_meta(int64_t n, int64_t T, int64_t S) {
  flowdata_meta m;
  memset(&m, 0, sizeof m);
  m.n = n, m.trajectories = T, m.snapshots = S, m.train_trajectories = T > 1 ? T - 1 : 1;
  m.dt_snapshot = 0.5, m.dt_solver = 0.01, m.nu = 1e-3, m.force_amp = 0.1, m.force_k = 4;
  m.k0 = 4, m.energy = 0.5, m.burn_in = 10, m.seed = 0xFFFFFFFFFFFFFFF0ull;
  return m;
}

/* A complete dataset written with this rank count's row split. */
static int write_split(const char *path, const flowdata_meta *m) {
  flowdata *f = NULL;
  dist_status st = flowdata_create(path, m, &f);
  ASSERT_OK(st);
  if (st) return 0;
  int64_t r0, rows;
  split(m->n, W, R, &r0, &rows);
  float *buf = malloc(sizeof(float) * (size_t)((rows ? rows : 1) * m->n));
  for (int64_t t = 0; t < m->trajectories; t++)
    for (int64_t s = 0; s < m->snapshots; s++) {
      fill(buf, m->n, t, s, r0, rows);
      ASSERT_OK(flowdata_write(f, t, s, r0, rows, rows ? buf : NULL));
    }
  free(buf);
  double *time = malloc(sizeof(double) * (size_t)m->snapshots);
  for (int64_t s = 0; s < m->snapshots; s++) time[s] = 10.0 + 0.5 * (double)s;
  ASSERT_OK(flowdata_set_time(f, time));
  free(time);
  ASSERT_OK(flowdata_set_stats(f, 1.25, 2.5, 0.125));
  ASSERT_OK(flowdata_close(f));
  return 1;
}

static void test_split_round_trip(void) {
  const char *path = tmp("split.h5");
  char part[600];
  snprintf(part, sizeof part, "%s.part", path);
  put_text(path, "an older file\n"); /* replaced at close, not before */
  flowdata_meta m = small_meta(12, 3, 4);
  flowdata *f = NULL;
  ASSERT_OK(flowdata_create(path, &m, &f));
  CU_ASSERT(has_text(path, "an older file\n"));
  CU_ASSERT(exists(part));
  cunit_barrier();
  float row[12];
  fill(row, 12, 0, 0, 0, 1);
  ASSERT_OK(flowdata_write(f, 0, 0, 0, R == 0 ? 1 : 0, row));
  /* Not every field written: abandoned, the older file stays. */
  ASSERT_STATUS(flowdata_close(f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("incomplete: 1 of the 144 rows");
  CU_ASSERT(has_text(path, "an older file\n"));
  CU_ASSERT(!exists(part));
  if (!write_split(path, &m)) return;
  CU_ASSERT(!exists(part));
  CU_ASSERT(!has_text(path, "an older file\n"));

  f = NULL;
  ASSERT_OK(flowdata_open(path, &f));
  if (!f) return;
  const flowdata_meta *g = flowdata_meta_get(f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT(g->n == 12 && g->trajectories == 3 && g->snapshots == 4 && g->train_trajectories == 2);
  CU_ASSERT(g->dt_snapshot == 0.5 && g->dt_solver == 0.01 && g->nu == 1e-3 && g->force_amp == 0.1 && g->force_k == 4);
  CU_ASSERT(g->k0 == 4 && g->energy == 0.5 && g->burn_in == 10 && g->seed == 0xFFFFFFFFFFFFFFF0ull);
  CU_ASSERT(g->mean == 1.25 && g->std == 2.5 && g->delta_std == 0.125);
  double time[4];
  ASSERT_OK(flowdata_read_time(f, time));
  for (int s = 0; s < 4; s++) CU_ASSERT(time[s] == 10.0 + 0.5 * s);

  const int64_t n = 12;
  float got[144], want[144];
  int bad = 0;
  for (int q = 1; q <= W; q++) /* the first q ranks read q's split */
    if (R < q) {
      int64_t r0, rows;
      split(n, q, R, &r0, &rows);
      for (int64_t t = 0; t < 3; t++)
        for (int64_t s = 0; s < 4; s++) {
          memset(got, 0xff, sizeof got);
          ASSERT_OK(flowdata_read(f, t, s, r0, rows, got));
          fill(want, n, t, s, r0, rows);
          bad += !same_bits(got, want, rows * n);
        }
    }
  for (int64_t t = 0; t < 3; t++) /* every rank: whole fields, and one odd box */
    for (int64_t s = 0; s < 4; s++) {
      ASSERT_OK(flowdata_read(f, t, s, 0, n, got));
      fill(want, n, t, s, 0, n);
      bad += !same_bits(got, want, n * n);
    }
  ASSERT_OK(flowdata_read(f, 2, 3, 11, 1, got));
  fill(want, n, 2, 3, 11, 1);
  bad += !same_bits(got, want, n);
  ASSERT_OK(flowdata_read(f, 1, 1, 5, 0, NULL)); /* nothing to read */
  if (bad) fprintf(stderr, "rank %d: %d boxes differ from what was written\n", R, bad);
  CU_ASSERT(bad == 0);
  ASSERT_OK(flowdata_close(f));
}

/* Ensemble style: in one call the ranks write different trajectories (whole
 * fields, or the two halves of one), and ranks out of work pass rows = 0. */
static void test_ensemble_write(void) {
  const char *path = tmp("ensemble.h5");
  const int64_t n = 8, T = 5, S = 2;
  flowdata_meta m = small_meta(n, T, S);
  flowdata *f = NULL;
  ASSERT_OK(flowdata_create(path, &m, &f));
  if (!f) return;
  float buf[64];
  /* Rounds of W trajectories: rank p writes trajectory round * W + p if it exists. */
  for (int64_t round = 0; round * W < T; round++)
    for (int64_t s = 0; s < S; s++) {
      int64_t t = round * W + R, rows = t < T ? n : 0;
      fill(buf, n, t, s, 0, rows);
      ASSERT_OK(flowdata_write(f, t < T ? t : -1, s, 0, rows, rows ? buf : NULL));
    }
  ASSERT_OK(flowdata_set_time(f, (double[]){0, 1}));
  ASSERT_OK(flowdata_close(f));
  f = NULL;
  ASSERT_OK(flowdata_open(path, &f));
  if (!f) return;
  float got[64];
  int bad = 0;
  for (int64_t t = 0; t < T; t++)
    for (int64_t s = 0; s < S; s++) {
      ASSERT_OK(flowdata_read(f, t, s, 0, n, got));
      fill(buf, n, t, s, 0, n);
      bad += !same_bits(got, buf, n * n);
    }
  CU_ASSERT(bad == 0);
  double time[2];
  ASSERT_OK(flowdata_read_time(f, time));
  CU_ASSERT(time[0] == 0 && time[1] == 1);
  ASSERT_OK(flowdata_close(f));
}

/* Bad files: each open fails on every rank, naming the file and the problem. */
static void expect_open_fails(const char *path, dist_status code, const char *text) {
  flowdata *f = NULL;
  ASSERT_STATUS(flowdata_open(path, &f), code);
  ASSERT_MSG_HAS(path);
  ASSERT_MSG_HAS(text);
  CU_ASSERT_PTR_NULL(f);
  CU_ASSERT(cunit_all_reduce_int(f == NULL, DIST_SUM) == W);
}

/* Rank 0 writes an HDF5 file with raw calls: a dataset, an int64 attribute n,
 * and (format != NULL) a format attribute. */
static void raw_hdf5(const char *path, const char *format) {
  if (R == 0) {
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    hsize_t dims[4] = {1, 1, 8, 8};
    hid_t ds = H5Screate_simple(4, dims, NULL);
    hid_t d = H5Dcreate2(file, "vorticity", H5T_IEEE_F32LE, ds, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int64_t n = 8;
    hid_t a = H5Acreate2(file, "n", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT(H5Awrite(a, H5T_NATIVE_INT64, &n) >= 0);
    H5Aclose(a);
    if (format) {
      hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, strlen(format));
      a = H5Acreate2(file, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
      CU_ASSERT(H5Awrite(a, t, format) >= 0);
      H5Aclose(a);
      H5Tclose(t);
    }
    H5Dclose(d);
    H5Sclose(ds);
    H5Sclose(sp);
    CU_ASSERT(H5Fclose(file) >= 0);
  }
  cunit_barrier();
}

/* Rank 0 edits a good file with raw calls: overwrite int64 attribute `name`
 * (value >= 0), delete it (value = -1) or replace it by an int64 (-2). */
static void edit_attr(const char *path, const char *name, int64_t value) {
  if (R == 0) {
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    if (value < 0) {
      CU_ASSERT(H5Adelete(file, name) >= 0);
      if (value == -2) {
        hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(file, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        CU_ASSERT(H5Awrite(a, H5T_NATIVE_INT64, &value) >= 0);
        H5Aclose(a);
        H5Sclose(sp);
      }
    } else {
      hid_t a = H5Aopen(file, name, H5P_DEFAULT);
      CU_ASSERT(H5Awrite(a, H5T_NATIVE_INT64, &value) >= 0);
      H5Aclose(a);
    }
    CU_ASSERT(H5Fclose(file) >= 0);
  }
  cunit_barrier();
}

static void test_bad_files(void) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  expect_open_fails(tmp("no_such_file.h5"), DIST_ERR_IO, "No such file");
  const char *text = tmp("text.h5");
  put_text(text, "this is not HDF5, just some text that is long enough to hold a signature\n");
  expect_open_fails(text, DIST_ERR_CORRUPT, "not an HDF5 file");
  expect_open_fails(dir, DIST_ERR_INVALID_ARGUMENT, "not a regular file");

  const char *untagged = tmp("untagged.h5"), *other = tmp("other.h5");
  raw_hdf5(untagged, NULL);
  expect_open_fails(untagged, DIST_ERR_CORRUPT, "no 'format' attribute");
  raw_hdf5(other, "other-format-7");
  expect_open_fails(other, DIST_ERR_CORRUPT, "format is 'other-format-7'");

  /* A good file, then broken in turn. */
  const char *good = tmp("good.h5");
  flowdata_meta m = small_meta(8, 2, 3);
  if (!write_split(good, &m)) return;
  flowdata *f = NULL;
  ASSERT_OK(flowdata_open(good, &f));
  ASSERT_OK(flowdata_close(f));
  edit_attr(good, "snapshots", 4);
  expect_open_fails(good, DIST_ERR_CORRUPT, "dataset /vorticity has shape [2, 3, 8, 8], but the attributes say [2, 4, 8, 8]");
  edit_attr(good, "snapshots", 3);
  edit_attr(good, "train_trajectories", 0);
  expect_open_fails(good, DIST_ERR_CORRUPT, "train_trajectories = 0 in the file");
  edit_attr(good, "train_trajectories", 1);
  ASSERT_OK(flowdata_open(good, &f)); /* repaired */
  ASSERT_OK(flowdata_close(f));
  edit_attr(good, "delta_std", -1);
  expect_open_fails(good, DIST_ERR_CORRUPT, "missing attribute 'delta_std'");
  edit_attr(good, "nu", -2); /* read before delta_std */
  expect_open_fails(good, DIST_ERR_CORRUPT, "attribute 'nu' is not a real number");

  const char *cut = tmp("truncated.h5");
  if (!write_split(cut, &m)) return;
  if (R == 0) {
    struct stat sb;
    CU_ASSERT(stat(cut, &sb) == 0 && sb.st_size > 2000);
    CU_ASSERT(truncate(cut, sb.st_size / 2) == 0);
  }
  cunit_barrier();
  expect_open_fails(cut, DIST_ERR_CORRUPT, "truncated");
}

static void test_bad_arguments(void) {
  flowdata_meta m = small_meta(8, 2, 2);
  flowdata *f = NULL;
  const char *path = tmp("args.h5");
  ASSERT_STATUS(flowdata_create(NULL, &m, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL path");
  ASSERT_STATUS(flowdata_create(path, NULL, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL meta");
  ASSERT_STATUS(flowdata_create(path, &m, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_open(NULL, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_open(path, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL output handle");
  /* Only one rank passes NULL: all ranks fail alike, none hangs. */
  ASSERT_STATUS(flowdata_create(path, R == W - 1 ? NULL : &m, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL meta");
  CU_ASSERT_PTR_NULL(f);
  float x[64];
  ASSERT_STATUS(flowdata_read(NULL, 0, 0, 0, 1, x), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_write(NULL, 0, 0, 0, 1, x), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_set_time(NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_read_time(NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NULL(flowdata_meta_get(NULL));
  ASSERT_OK(flowdata_close(NULL));

  flowdata_meta b = m;
  b.n = 2;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("n = 2 must be >= 4");
  b = m, b.train_trajectories = 0;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("train_trajectories = 0");
  b = m, b.train_trajectories = 3;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  b = m, b.snapshots = 0;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  b = m, b.n = (int64_t)1 << 20, b.trajectories = (int64_t)1 << 20, b.snapshots = (int64_t)1 << 10;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflows");
  b = m, b.n = (int64_t)1 << 32;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("overflows");
  b = m, b.force_k = 0;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("force_k = 0");
  b = m, b.std = -1;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  b = m, b.nu = NAN;
  ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("nu = nan is not finite");
  if (W > 1) {
    b = m, b.seed = (uint64_t)R;
    ASSERT_STATUS(flowdata_create(path, &b, &f), DIST_ERR_MISMATCH);
    ASSERT_MSG_HAS("different");
  }
  ASSERT_STATUS(flowdata_create(tmp("no_such_dir/x.h5"), &m, &f), DIST_ERR_IO);
  ASSERT_MSG_HAS("no_such_dir/x.h5.part");
  ASSERT_MSG_HAS("No such file or directory");
  CU_ASSERT_PTR_NULL(f);
  CU_ASSERT(!exists(path) && !exists(tmp("args.h5.part")));

  /* Boxes out of range, on one rank while the others write good boxes. */
  ASSERT_OK(flowdata_create(path, &m, &f));
  if (!f) return;
  fill(x, 8, 0, 0, 0, 8);
  int64_t r0, rows;
  split(8, W, R, &r0, &rows);
  for (int k = 0; k < 6; k++) {
    int64_t t = 0, s = 0, a = r0, c = rows;
    const char *text = k == 4 ? "rows = -1" : k == 5 ? "NULL data" : "out of range";
    if (R == W - 1) switch (k) {
      case 0: t = 2; break;
      case 1: s = -1; break;
      case 2: a = 8 - rows + 1, c = rows ? rows : 1; break;
      case 3: c = 9, a = 0; break;
      case 4: c = -1; break;
      case 5: c = 1, a = 0; break;
      }
    ASSERT_STATUS(flowdata_write(f, t, s, a, c, (R == W - 1 && k == 5) ? NULL : x + a * 8), DIST_ERR_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(text);
    ASSERT_MSG_HAS("args.h5.part");
  }
  ASSERT_OK(flowdata_write(f, 0, 0, r0, rows, x + r0 * 8)); /* a bad box does not spoil the file */
  ASSERT_STATUS(flowdata_set_time(f, R == 0 ? NULL : (double[]){1, 2}), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_set_time(f, (double[]){1, NAN}), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("time[1] = nan");
  if (W > 1) ASSERT_STATUS(flowdata_set_time(f, (double[]){1, R}), DIST_ERR_MISMATCH);
  ASSERT_STATUS(flowdata_set_stats(f, 0, -1, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("std = -1");
  ASSERT_STATUS(flowdata_read(f, 0, 0, 0, 1, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("open for writing");
  ASSERT_STATUS(flowdata_read_time(f, NULL), DIST_ERR_INVALID_ARGUMENT);
  for (int64_t t = 0; t < 2; t++) /* the rest, so that the file is complete */
    for (int64_t s = 0; s < 2; s++)
      if (t || s) ASSERT_OK(flowdata_write(f, t, s, r0, rows, x + r0 * 8));
  ASSERT_OK(flowdata_close(f));

  f = NULL;
  ASSERT_OK(flowdata_open(path, &f));
  if (!f) return;
  float y[64];
  ASSERT_STATUS(flowdata_read(f, 2, 0, 0, 8, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("box out of range: trajectory 2");
  ASSERT_STATUS(flowdata_read(f, 0, 2, 0, 8, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_read(f, 0, 0, 1, 8, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_read(f, 0, 0, -1, 1, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_read(f, 0, 0, INT64_MAX, 2, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(flowdata_write(f, 0, 0, 0, 8, y), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("open for reading");
  ASSERT_STATUS(flowdata_set_stats(f, 0, 1, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("open for reading");
  ASSERT_OK(flowdata_read(f, 0, 0, 0, 8, y));
  CU_ASSERT(same_bits(x, y, 64));
  ASSERT_OK(flowdata_close(f));
}

/* /vorticity's byte offset in the file, read by rank 0 with serial HDF5. */
static int64_t vorticity_offset(const char *path) {
  int64_t off = -1;
  if (R == 0) {
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = file >= 0 ? H5Dopen2(file, "vorticity", H5P_DEFAULT) : -1;
    haddr_t a = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
    if (a != HADDR_UNDEF) off = (int64_t)a;
    if (d >= 0) H5Dclose(d);
    if (file >= 0) H5Fclose(file);
  }
  cunit_broadcast_bytes(&off, sizeof off, 0);
  return off;
}

/* The disk "fills up" (RLIMIT_FSIZE, SIGXFSZ ignored so write() fails with
 * EFBIG) after a few snapshots: the same error on every rank from then on,
 * close removes the .part file, and the older file at the path stays.
 * limit > 0: the file size limit; limit < 0: -limit bytes into rank 0's box
 * of the third snapshot, where a write stops part-way (pwrite() returns a
 * short count, and the next call EFBIG: its message says how far it got). */
static void write_until_full(const char *name, int64_t limit) {
  const char *path = tmp(name);
  char part[600];
  snprintf(part, sizeof part, "%s.part", path);
  put_text(path, "the previous dataset\n");
  const int64_t n = 32, T = 2, S = 4; /* 4 KiB a field, 32 KiB in all */
  flowdata_meta m = small_meta(n, T, S);
  flowdata *f = NULL;
  ASSERT_OK(flowdata_create(path, &m, &f));
  if (!f) return;
  int64_t r0, rows;
  split(n, W, R, &r0, &rows);
  const int part_way = limit < 0;
  if (part_way) {
    int64_t off = vorticity_offset(part);
    CU_ASSERT_FATAL(off > 0);
    limit = off + 2 * n * n * (int64_t)sizeof(float) - limit; /* rank 0's rows start each field */
  }
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = (rlim_t)limit;
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  CU_ASSERT(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  float *buf = malloc(sizeof(float) * (size_t)(n * n));
  int first_fail = -1, k = 0, failures = 0;
  char first_msg[1024] = "";
  for (int64_t t = 0; t < T; t++)
    for (int64_t s = 0; s < S; s++, k++) {
      fill(buf, n, t, s, r0, rows);
      dist_status st = flowdata_write(f, t, s, r0, rows, buf);
      if (st) {
        failures++;
        CU_ASSERT(st == DIST_ERR_IO);
        if (first_fail < 0) {
          first_fail = k;
          snprintf(first_msg, sizeof first_msg, "%s", dist_last_error());
          ASSERT_MSG_HAS(part);
          ASSERT_MSG_HAS("writing trajectory");
          /* (OMPIO reports a write cut short as a short count, without errno's reason) */
          if (!part_way || !cunit_mpi_in_use()) ASSERT_MSG_HAS("File too large");
          if (R == 0) printf("\n  (the failed write said: %s)\n", dist_last_error());
        }
      }
    }
  free(buf);
  dist_status st = flowdata_close(f);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  CU_ASSERT(st == DIST_ERR_IO);
  ASSERT_MSG_HAS(part);
  /* Failed mid-way (not at the first write), at the same write on every rank,
   * and every later write failed too. */
  CU_ASSERT(first_fail > 0);
  CU_ASSERT(failures == T * S - first_fail);
  CU_ASSERT(cunit_all_reduce_int(first_fail, DIST_MIN) == cunit_all_reduce_int(first_fail, DIST_MAX));
  if (part_way) CU_ASSERT(first_fail == 2);
  if (part_way && !cunit_mpi_in_use()) { /* pwrite(): rank 0's message, how far it got */
    char want[64];
    snprintf(want, sizeof want, "rows [0, %lld): 100 of %lld bytes written (File too large)", (long long)(n / W + (n % W > 0)),
             (long long)((n / W + (n % W > 0)) * n * (int64_t)sizeof(float)));
    CU_ASSERT_PTR_NOT_NULL(strstr(first_msg, want));
  }
  cunit_barrier();
  CU_ASSERT(!exists(part));
  CU_ASSERT(has_text(path, "the previous dataset\n"));
  /* With room again the same path works. */
  CU_ASSERT(write_split(path, &m));
  ASSERT_OK(flowdata_open(path, &f));
  ASSERT_OK(flowdata_close(f));
}

static void test_write_fails(void) { write_until_full("full.h5", 16384); }
static void test_write_cut_short(void) { write_until_full("short.h5", -100); }

static CU_TestInfo tests[] = {
    {"row-split write, read back by every reader count", test_split_round_trip},
    {"ensemble write: different trajectories per rank, some empty", test_ensemble_write},
    {"missing, foreign, untagged, mismatched and truncated files", test_bad_files},
    {"NULL pointers, bad meta, boxes out of range", test_bad_arguments},
    {"a write running out of file size", test_write_fails},
    {"a write cut short part-way through a box", test_write_cut_short},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {{"flowdata", NULL, clean_dir, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_flowdata", suites, .rank = &R, .size = &W}); }
