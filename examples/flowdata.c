/* The surrogate pipeline's HDF5 dataset (see flowdata.h) over the manager's
 * world, on either engine: Debian's parallel HDF5 through MPI-IO when MPI is
 * in use, serial HDF5 and POSIX I/O without it (Gloo under torchrun). The
 * engine-specific calls are in flowdata_io.c; the file is the same.
 *
 * Writing. flowdata_create makes the whole file (attributes, /vorticity
 * contiguous and allocated at once, /time) -- collectively with parallel
 * HDF5, or on rank 0 alone with serial HDF5 -- and closes it again: the
 * metadata is complete and the file has its full size before any field is
 * written. The fields then go straight to /vorticity's bytes (its offset from
 * H5Dget_offset, broadcast from rank 0; the file type is the native float, so
 * the bytes are the memory's), each rank its own rows with MPI_File_write_at
 * or pwrite(); flowdata_close syncs and closes, lets rank 0 record /time and
 * the statistics with serial HDF5, and renames. The reason for
 * bypassing H5Dwrite: with HDF5 1.10.8 and Open MPI 4.1 a failed collective
 * H5Dwrite is not survivable. Under ROMIO the failed write leaves a stale
 * MPI file view, so H5Fclose then writes the superblock at the data's offset,
 * fails on rank 0 only and hangs the other ranks in the metadata cache's
 * barrier; under OMPIO the aggregating writers (fcoll vulcan, dynamic,
 * dynamic_gen2) drop write()'s EFBIG and report success; and an H5Fclose that
 * failed leaves the file's ID half destroyed, crashing the library at exit.
 * Plain MPI_File_write_at returns the error under both, and a disk that fills
 * up can only hit these writes, never HDF5's metadata.
 *
 * Reading is parallel HDF5 with independent transfers (H5FD_MPIO_INDEPENDENT),
 * or without MPI serial HDF5 opening the file read-only on every rank.
 *
 * Every collective function ends with one agreement (agree.c, distmgr's own
 * collectives, either engine): an all-reduce (MINLOC) of the local statuses;
 * if any rank failed, the lowest failing rank's message is broadcast, so all
 * ranks return the same status with the same text and a failure on some
 * ranks never leaves the others waiting in a later call.
 * Failures that are the same on every rank by construction (a NULL handle, a
 * write after an agreed I/O error) return at once without communicating. */
#include "flowdata.h"
#include "agree.h"
#include "flowdata_io.h"

#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_TAG "distmgr-ns2d-1"

struct flowdata {
  flowdata_meta meta;
  char *path; /* the final name */
  char *part; /* "<path>.part" while writing; NULL for a file opened to read */
  fields_io io;
  int rank;
  /* writing */
  int64_t data_off, data_end; /* /vorticity's bytes in the file */
  int64_t rows_written;       /* by this rank, in successful writes */
  double *time;               /* from flowdata_set_time, written at close; NULL: /time stays NaN */
  dist_status failed;         /* an agreed I/O error of an earlier write (sticky) */
  char failed_msg[1024];
  /* reading */
  hid_t file, vort, tset, dxpl;
};

/* ---- errors ------------------------------------------------------------ */

__attribute__((format(printf, 3, 4))) static dist_status fail(dist_status code, const char *path, const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (path) return dist_set_error(code, "flowdata: '%s': %s", path, msg);
  return dist_set_error(code, "flowdata: %s", msg);
}

/* The innermost entry of HDF5's error stack (where the problem was found). */
typedef struct reason_buf {
  char text[320];
} reason_buf;

static herr_t reason_cb(unsigned n, const H5E_error2_t *e, void *data) {
  if (n == 0 && e && e->desc) snprintf(((reason_buf *)data)->text, sizeof((reason_buf *)data)->text, "%s", e->desc);
  return 0;
}

static const char *h5_reason(reason_buf *b) {
  b->text[0] = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, reason_cb, b);
  if (!b->text[0]) snprintf(b->text, sizeof b->text, "HDF5 reported an error");
  return b->text;
}

/* The same, plus the system's reason when the failed call left one in errno
 * (HDF5 says only "file write failed" when write() got EFBIG). Set errno = 0
 * before the call. */
static const char *io_reason(reason_buf *b, int err) {
  h5_reason(b);
  if (err) {
    size_t len = strlen(b->text);
    snprintf(b->text + len, sizeof b->text - len, " (%s)", strerror(err));
  }
  return b->text;
}

static void quiet_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* FNV-1a over a value's bytes. */
static uint64_t mix(uint64_t h, const void *p, size_t len) {
  const unsigned char *c = p;
  for (size_t i = 0; i < len; i++) h = (h ^ c[i]) * 0x100000001B3ull;
  return h;
}

/* DIST_ERR_MISMATCH on every rank unless every rank passed the same hash. */
static dist_status same_everywhere(uint64_t h, const char *path, const char *what) {
  /* The minimum of h and of ~h (as i64: ~ reverses the order) is a rank's own
   * on every rank only when all are equal. */
  int64_t v[2] = {(int64_t)h, (int64_t)~h}, two = 2;
  dist_tensor t = dist_tensor_host(v, DIST_I64, 1, &two);
  dist_status st = dist_all_reduce(NULL, &t, DIST_MIN);
  if (st) return st;
  if (v[0] != (int64_t)h || v[1] != (int64_t)~h) return fail(DIST_ERR_MISMATCH, path, "the ranks passed different %s", what);
  return DIST_SUCCESS;
}

/* ---- the meta ----------------------------------------------------------- */

typedef enum { A_I64, A_INT, A_U64, A_F64 } attr_kind;
typedef struct attr_def {
  const char *name;
  attr_kind kind;
  size_t off;
} attr_def;

#define ATTR(field, kind) {#field, kind, offsetof(flowdata_meta, field)}
static const attr_def ATTRS[] = {
    ATTR(n, A_I64),       ATTR(trajectories, A_I64), ATTR(snapshots, A_I64), ATTR(train_trajectories, A_I64),
    ATTR(dt_snapshot, A_F64), ATTR(dt_solver, A_F64), ATTR(nu, A_F64),       ATTR(force_amp, A_F64),
    ATTR(force_k, A_INT), ATTR(k0, A_F64),           ATTR(energy, A_F64),    ATTR(burn_in, A_F64),
    ATTR(seed, A_U64),    ATTR(mean, A_F64),         ATTR(std, A_F64),       ATTR(delta_std, A_F64),
};
#define NATTRS (sizeof ATTRS / sizeof ATTRS[0])

static uint64_t meta_hash(const flowdata_meta *m, const char *path) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < NATTRS; i++) {
    const char *p = (const char *)m + ATTRS[i].off;
    h = mix(h, p, ATTRS[i].kind == A_INT ? sizeof(int) : 8);
  }
  return mix(h, path, strlen(path));
}

/* A caller's meta (where = "", code DIST_ERR_INVALID_ARGUMENT) or one read
 * from a file (where = " in the file", code DIST_ERR_CORRUPT). */
static dist_status check_meta(const char *path, const flowdata_meta *m, const char *where, dist_status code) {
  if (m->n < 4)
    return fail(code, path, "n = %lld%s must be >= 4", (long long)m->n, where);
  if (m->trajectories < 1 || m->snapshots < 1)
    return fail(code, path, "trajectories = %lld, snapshots = %lld%s: both must be >= 1",
                (long long)m->trajectories, (long long)m->snapshots, where);
  if (m->train_trajectories < 1 || m->train_trajectories > m->trajectories)
    return fail(code, path, "train_trajectories = %lld%s must be in [1, trajectories = %lld]",
                (long long)m->train_trajectories, where, (long long)m->trajectories);
  int64_t x;
  if (__builtin_mul_overflow(m->n, m->n, &x) || __builtin_mul_overflow(x, m->snapshots, &x) ||
      __builtin_mul_overflow(x, m->trajectories, &x) || __builtin_mul_overflow(x, (int64_t)sizeof(float), &x))
    return fail(code, path,
                "%lld trajectories x %lld snapshots x %lld x %lld floats%s: the size overflows 64 bits",
                (long long)m->trajectories, (long long)m->snapshots, (long long)m->n, (long long)m->n, where);
  if (m->force_k < 1) return fail(code, path, "force_k = %d%s must be >= 1", m->force_k, where);
  for (size_t i = 0; i < NATTRS; i++)
    if (ATTRS[i].kind == A_F64) {
      double v = *(const double *)((const char *)m + ATTRS[i].off);
      if (!isfinite(v)) return fail(code, path, "%s = %g%s is not finite", ATTRS[i].name, v, where);
    }
  if (m->std < 0 || m->delta_std < 0)
    return fail(code, path, "std = %g, delta_std = %g%s: they must be >= 0", m->std, m->delta_std, where);
  return DIST_SUCCESS;
}

/* ---- HDF5 helpers --------------------------------------------------------- */

static hid_t mem_type(attr_kind k) {
  switch (k) {
  case A_I64: return H5T_NATIVE_INT64;
  case A_INT: return H5T_NATIVE_INT;
  case A_U64: return H5T_NATIVE_UINT64;
  default: return H5T_NATIVE_DOUBLE;
  }
}

static hid_t file_type(attr_kind k) {
  switch (k) {
  case A_I64:
  case A_INT: return H5T_STD_I64LE;
  case A_U64: return H5T_STD_U64LE;
  default: return H5T_IEEE_F64LE;
  }
}

/* Create (or, create = 0, overwrite) a scalar attribute on the root. */
static herr_t put_attr(hid_t file, const char *name, hid_t ftype, hid_t mtype, const void *value, int create) {
  hid_t a = -1, sp = -1;
  herr_t e = -1;
  if (create) {
    if ((sp = H5Screate(H5S_SCALAR)) >= 0) a = H5Acreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
  } else {
    a = H5Aopen(file, name, H5P_DEFAULT);
  }
  if (a >= 0) e = H5Awrite(a, mtype, value);
  if (a >= 0 && H5Aclose(a) < 0) e = -1;
  if (sp >= 0) H5Sclose(sp);
  return e;
}

static herr_t put_format(hid_t file) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0) return -1;
  herr_t e = H5Tset_size(t, H5T_VARIABLE);
  if (e >= 0) e = H5Tset_cset(t, H5T_CSET_UTF8);
  const char *tag = FORMAT_TAG;
  if (e >= 0) e = put_attr(file, "format", t, t, &tag, 1);
  H5Tclose(t);
  return e;
}

static dist_status write_stats(hid_t file, const char *name, const flowdata_meta *m, int create) {
  const double v[3] = {m->mean, m->std, m->delta_std};
  static const char *names[3] = {"mean", "std", "delta_std"};
  for (int i = 0; i < 3; i++)
    if (put_attr(file, names[i], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v[i], create) < 0) {
      reason_buf b;
      return fail(DIST_ERR_IO, name, "writing attribute '%s': %s", names[i], h5_reason(&b));
    }
  return DIST_SUCCESS;
}

static void close_reader(flowdata *f) {
  if (f->vort >= 0) H5Dclose(f->vort);
  if (f->tset >= 0) H5Dclose(f->tset);
  if (f->dxpl >= 0) H5Pclose(f->dxpl);
  if (f->file >= 0) H5Fclose(f->file);
  f->vort = f->tset = f->dxpl = f->file = -1;
}

static void free_handle(flowdata *f) {
  free(f->path);
  free(f->part);
  free(f->time);
  free(f);
}

static flowdata *new_handle(const char *path, const fields_io *io, int writing) {
  flowdata *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->io = *io;
  dist_manager_rank(&f->rank);
  f->file = f->vort = f->tset = f->dxpl = -1;
  size_t len = strlen(path);
  f->path = malloc(len + 1);
  if (f->path) memcpy(f->path, path, len + 1);
  if (writing && (f->part = malloc(len + 6))) snprintf(f->part, len + 6, "%s.part", path);
  if (!f->path || (writing && !f->part)) {
    free_handle(f);
    return NULL;
  }
  return f;
}

/* The box [traj, snap, row0 .. row0 + rows) of f; `what` = "write" / "read". */
static dist_status check_box(const flowdata *f, const char *what, int64_t traj, int64_t snap, int64_t row0, int64_t rows,
                             const void *data) {
  const flowdata_meta *m = &f->meta;
  const char *name = f->part ? f->part : f->path;
  if (rows < 0) return fail(DIST_ERR_INVALID_ARGUMENT, name, "%s: rows = %lld is negative", what, (long long)rows);
  if (rows == 0) return DIST_SUCCESS;
  if (!data) return fail(DIST_ERR_INVALID_ARGUMENT, name, "%s: NULL data for %lld rows", what, (long long)rows);
  if (traj < 0 || traj >= m->trajectories || snap < 0 || snap >= m->snapshots || row0 < 0 || rows > m->n ||
      row0 > m->n - rows)
    return fail(DIST_ERR_INVALID_ARGUMENT, name,
                "%s: box out of range: trajectory %lld, snapshot %lld, rows [%lld, %lld + %lld) of a dataset of %lld "
                "trajectories x %lld snapshots x %lld rows",
                what, (long long)traj, (long long)snap, (long long)row0, (long long)row0, (long long)rows,
                (long long)m->trajectories, (long long)m->snapshots, (long long)m->n);
  return DIST_SUCCESS;
}

/* ---- writing -------------------------------------------------------------- */

/* Everything but the fields in the created file, and close it. Local (serial
 * HDF5) or collective (parallel HDF5) as the file was created. */
static dist_status fill_layout(flowdata *f, hid_t file) {
  const flowdata_meta *m = &f->meta;
  reason_buf b;
  dist_status st = DIST_SUCCESS;
  if (put_format(file) < 0) st = fail(DIST_ERR_IO, f->part, "writing attribute 'format': %s", h5_reason(&b));
  for (size_t i = 0; !st && i < NATTRS; i++) {
    if (!strcmp(ATTRS[i].name, "mean")) break; /* the statistics follow, written by write_stats */
    const char *p = (const char *)m + ATTRS[i].off;
    int64_t wide;
    const void *v = p;
    hid_t mt = mem_type(ATTRS[i].kind);
    if (ATTRS[i].kind == A_INT) wide = *(const int *)p, v = &wide, mt = H5T_NATIVE_INT64;
    if (put_attr(file, ATTRS[i].name, file_type(ATTRS[i].kind), mt, v, 1) < 0)
      st = fail(DIST_ERR_IO, f->part, "writing attribute '%s': %s", ATTRS[i].name, h5_reason(&b));
  }
  if (!st) st = write_stats(file, f->part, m, 1);

  hsize_t dims[4] = {(hsize_t)m->trajectories, (hsize_t)m->snapshots, (hsize_t)m->n, (hsize_t)m->n};
  const double unset = NAN; /* /time until flowdata_set_time */
  hid_t space = H5Screate_simple(4, dims, NULL), tspace = H5Screate_simple(1, dims + 1, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), tcpl = H5Pcreate(H5P_DATASET_CREATE), vort = -1, tset = -1;
  herr_t e = (st || space < 0 || tspace < 0 || dcpl < 0 || tcpl < 0) ? -1 : 0;
  if (e >= 0) e = H5Pset_layout(dcpl, H5D_CONTIGUOUS);
  if (e >= 0) e = H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
  if (e >= 0) e = H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER); /* every box gets written */
  if (e >= 0) e = H5Pset_layout(tcpl, H5D_CONTIGUOUS);
  if (e >= 0) e = H5Pset_fill_value(tcpl, H5T_NATIVE_DOUBLE, &unset);
  if (e >= 0) e = H5Pset_fill_time(tcpl, H5D_FILL_TIME_ALLOC);
  /* The native float is IEEE binary32 in this machine's byte order: the
   * fields' bytes go to the file as they are in memory. */
  if (e >= 0 && (vort = H5Dcreate2(file, "vorticity", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0) e = -1;
  if (e >= 0 && (tset = H5Dcreate2(file, "time", H5T_IEEE_F64LE, tspace, H5P_DEFAULT, tcpl, H5P_DEFAULT)) < 0) e = -1;
  haddr_t off = e >= 0 ? H5Dget_offset(vort) : HADDR_UNDEF;
  if (!st && e < 0) st = fail(DIST_ERR_IO, f->part, "creating the datasets: %s", h5_reason(&b));
  if (!st && off == HADDR_UNDEF) st = fail(DIST_ERR_INTERNAL, f->part, "/vorticity has no place in the file after creation");
  if (!st) f->data_off = (int64_t)off;
  if (space >= 0) H5Sclose(space);
  if (tspace >= 0) H5Sclose(tspace);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (tcpl >= 0) H5Pclose(tcpl);
  if (vort >= 0) H5Dclose(vort);
  if (tset >= 0) H5Dclose(tset);
  if (H5Fclose(file) < 0 && !st) st = fail(DIST_ERR_IO, f->part, "closing after creation: %s", h5_reason(&b));
  return st;
}

/* The file without the fields: every rank with parallel HDF5, rank 0 alone
 * with serial HDF5 (the others wait in the agreements); then every rank has
 * /vorticity's place from rank 0. */
static dist_status create_layout(flowdata *f) {
  const flowdata_meta *m = &f->meta;
  reason_buf b;
  const int creator = fields_io_creates(&f->io, f->rank);
  hid_t fapl = -1, file = -1;
  dist_status st = DIST_SUCCESS;
  if (creator) {
    if ((fapl = fields_io_file_access(&f->io)) < 0)
      st = fail(DIST_ERR_IO, f->part, "%sfile access list: %s", f->io.mpi ? "MPI-IO " : "", h5_reason(&b));
    else if ((file = H5Fcreate(f->part, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0)
      st = fail(DIST_ERR_IO, f->part, "cannot create the HDF5 file: %s", h5_reason(&b));
    if (fapl >= 0) H5Pclose(fapl);
  }
  if ((st = agree_status(NULL, st))) return st;
  if (creator) st = fill_layout(f, file);
  if ((st = agree_status(NULL, st))) return st;
  int64_t one = 1;
  dist_tensor t = dist_tensor_host(&f->data_off, DIST_I64, 1, &one);
  if ((st = dist_broadcast(NULL, &t, 0))) return st;
  f->data_end = f->data_off + m->trajectories * m->snapshots * m->n * m->n * (int64_t)sizeof(float);
  return DIST_SUCCESS;
}

dist_status flowdata_create(const char *path, const flowdata_meta *meta, flowdata **out) {
  quiet_hdf5();
  fields_io io;
  dist_status st = fields_io_init(&io);
  if (st) return st;
  if (!path || !meta || !out)
    st = fail(DIST_ERR_INVALID_ARGUMENT, NULL, "create: NULL %s", !path ? "path" : !meta ? "meta" : "output handle");
  else if (!*path)
    st = fail(DIST_ERR_INVALID_ARGUMENT, NULL, "create: empty path");
  else
    st = check_meta(path, meta, "", DIST_ERR_INVALID_ARGUMENT);
  if ((st = agree_status(NULL, st))) return st;
  if ((st = same_everywhere(meta_hash(meta, path), path, "paths or metadata to flowdata_create"))) return st;

  flowdata *f = new_handle(path, &io, 1);
  st = f ? DIST_SUCCESS : fail(DIST_ERR_NO_MEMORY, path, "create: handle");
  if (f) {
    f->meta = *meta;
    if (f->rank == 0) { /* a clear reason (errno) for an unwritable place before HDF5 tries */
      FILE *fp = fopen(f->part, "w");
      if (!fp)
        st = fail(DIST_ERR_IO, f->part, "cannot create: %s", strerror(errno));
      else
        fclose(fp);
    }
  }
  if (!(st = agree_status(NULL, st))) st = create_layout(f);
  if (!st) {
    char why[1024];
    if (fields_io_open(&f->io, f->part, why, sizeof why)) st = fail(DIST_ERR_IO, f->part, "%s", why);
    if ((st = agree_status(NULL, st))) fields_io_abandon(&f->io);
  }
  if (st) {
    if (f) {
      dist_barrier(NULL); /* every rank is done with the file */
      if (f->rank == 0) unlink(f->part);
      free_handle(f);
    }
    return st;
  }
  *out = f;
  return DIST_SUCCESS;
}

/* An agreed I/O error makes the file unusable: later calls repeat it. */
static dist_status note_failure(flowdata *f, dist_status st) {
  if (st == DIST_ERR_IO && !f->failed) {
    f->failed = st;
    snprintf(f->failed_msg, sizeof f->failed_msg, "%s", dist_last_error());
  }
  return st;
}

static dist_status writable(const flowdata *f, const char *what) {
  if (!f) return fail(DIST_ERR_INVALID_ARGUMENT, NULL, "%s: NULL handle", what);
  if (!f->part) return fail(DIST_ERR_INVALID_ARGUMENT, f->path, "%s: the file is open for reading", what);
  if (f->failed) return dist_set_error(f->failed, "%s", f->failed_msg);
  return DIST_SUCCESS;
}

dist_status flowdata_write(flowdata *f, int64_t traj, int64_t snap, int64_t row0, int64_t rows, const float *data) {
  dist_status st = writable(f, "write");
  if (st) return st;
  st = check_box(f, "write", traj, snap, row0, rows, data);
  const int64_t n = f->meta.n;
  int64_t off = f->data_off + ((traj * f->meta.snapshots + snap) * n + row0) * n * (int64_t)sizeof(float);
  char why[1024];
  if (!st && rows > 0 && fields_io_write_at(&f->io, off, data, rows * n, why, sizeof why))
    st = fail(DIST_ERR_IO, f->part, "writing trajectory %lld, snapshot %lld, rows [%lld, %lld): %s", (long long)traj,
              (long long)snap, (long long)row0, (long long)(row0 + rows), why);
  st = note_failure(f, agree_status(NULL, st));
  if (!st) f->rows_written += rows;
  return st;
}

dist_status flowdata_set_time(flowdata *f, const double *time) {
  dist_status st = writable(f, "set_time");
  if (st) return st;
  const int64_t S = f->meta.snapshots;
  if (!time) st = fail(DIST_ERR_INVALID_ARGUMENT, f->part, "set_time: NULL time array");
  for (int64_t i = 0; !st && i < S; i++)
    if (!isfinite(time[i]))
      st = fail(DIST_ERR_INVALID_ARGUMENT, f->part, "set_time: time[%lld] = %g is not finite", (long long)i, time[i]);
  double *copy = st ? NULL : malloc(sizeof(double) * (size_t)S);
  if (!st && !copy) st = fail(DIST_ERR_NO_MEMORY, f->part, "set_time: %lld doubles", (long long)S);
  if (!(st = agree_status(NULL, st)))
    st = same_everywhere(mix(0xCBF29CE484222325ull, time, sizeof(double) * (size_t)S), f->part,
                         "time arrays to flowdata_set_time");
  if (st) {
    free(copy);
    return st;
  }
  memcpy(copy, time, sizeof(double) * (size_t)S);
  free(f->time);
  f->time = copy;
  return DIST_SUCCESS;
}

dist_status flowdata_set_stats(flowdata *f, double mean, double std, double delta_std) {
  dist_status st = writable(f, "set_stats");
  if (st) return st;
  if (!isfinite(mean) || !isfinite(std) || !isfinite(delta_std) || std < 0 || delta_std < 0)
    st = fail(DIST_ERR_INVALID_ARGUMENT, f->part,
              "set_stats: mean = %g, std = %g, delta_std = %g (need finite values, std and delta_std >= 0)", mean, std,
              delta_std);
  if ((st = agree_status(NULL, st))) return st;
  const double v[3] = {mean, std, delta_std};
  if ((st = same_everywhere(mix(0xCBF29CE484222325ull, v, sizeof v), f->part, "statistics to flowdata_set_stats")))
    return st;
  f->meta.mean = mean, f->meta.std = std, f->meta.delta_std = delta_std;
  return DIST_SUCCESS;
}

/* Rank 0, serial HDF5, after every rank closed its file for the fields: /time
 * and the statistics (in place: both have their space since creation), then
 * check that the file holds all of the fields' bytes. */
static dist_status finish(flowdata *f) {
  reason_buf b;
  dist_status st = DIST_SUCCESS;
  hid_t file = H5Fopen(f->part, H5F_ACC_RDWR, H5P_DEFAULT), tset = -1;
  if (file < 0) return fail(DIST_ERR_IO, f->part, "reopening to finish: %s", h5_reason(&b));
  st = write_stats(file, f->part, &f->meta, 0);
  if (!st && f->time) {
    errno = 0;
    if ((tset = H5Dopen2(file, "time", H5P_DEFAULT)) < 0 ||
        H5Dwrite(tset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, f->time) < 0)
      st = fail(DIST_ERR_IO, f->part, "writing /time: %s", io_reason(&b, errno));
  }
  if (tset >= 0) H5Dclose(tset);
  errno = 0;
  if (H5Fclose(file) < 0 && !st) st = fail(DIST_ERR_IO, f->part, "closing: %s", io_reason(&b, errno));
  struct stat sb;
  if (!st && stat(f->part, &sb) != 0) st = fail(DIST_ERR_IO, f->part, "after closing: %s", strerror(errno));
  if (!st && (int64_t)sb.st_size < f->data_end)
    st = fail(DIST_ERR_IO, f->part, "the file ends at byte %lld, before the end of its data at %lld", (long long)sb.st_size,
              (long long)f->data_end);
  return st;
}

static dist_status close_writer(flowdata *f) {
  dist_status st = DIST_SUCCESS;
  char why[1024];
  /* The data on disk before the rename (not after an agreed write error). */
  if (fields_io_close(&f->io, !f->failed, why, sizeof why)) st = fail(DIST_ERR_IO, f->part, "%s", why);
  st = agree_status(NULL, st); /* also: every rank has closed the file */
  if (!st && f->failed) st = dist_set_error(f->failed, "%s", f->failed_msg);
  int64_t total = f->rows_written, want = f->meta.trajectories * f->meta.snapshots * f->meta.n, one = 1;
  dist_tensor t = dist_tensor_host(&total, DIST_I64, 1, &one);
  if (!st) st = dist_all_reduce(NULL, &t, DIST_SUM);
  if (!st && total < want)
    st = fail(DIST_ERR_INVALID_ARGUMENT, f->part,
              "incomplete: %lld of the %lld rows of the fields were written; the file is removed, not published",
              (long long)total, (long long)want);
  if (f->rank == 0) {
    if (!st) st = finish(f);
    if (!st && rename(f->part, f->path) != 0)
      st = fail(DIST_ERR_IO, f->path, "renaming '%s' to it: %s", f->part, strerror(errno));
    if (st) unlink(f->part);
  }
  return agree_status(NULL, st);
}

dist_status flowdata_close(flowdata *f) {
  if (!f) return DIST_SUCCESS;
  quiet_hdf5();
  dist_status st = DIST_SUCCESS;
  if (f->part) {
    st = close_writer(f);
  } else {
    close_reader(f); /* read-only: nothing to lose; collective as the open was */
    st = agree_status(NULL, DIST_SUCCESS);
  }
  free_handle(f);
  return st;
}

/* ---- reading -------------------------------------------------------------- */

/* Local checks before HDF5 touches the file: it exists, is a regular file and
 * carries HDF5's signature (at 0, 512, 1024, ... as with a user block). */
static dist_status precheck(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return fail(DIST_ERR_IO, path, "cannot open: %s", strerror(errno));
  if (!S_ISREG(sb.st_mode)) return fail(DIST_ERR_INVALID_ARGUMENT, path, "not a regular file");
  FILE *fp = fopen(path, "rb");
  if (!fp) return fail(DIST_ERR_IO, path, "cannot open: %s", strerror(errno));
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  int found = 0;
  for (long long off = 0; !found && off + 8 <= (long long)sb.st_size; off = off ? 2 * off : 512) {
    unsigned char buf[8];
    if (fseeko(fp, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, 8, fp) != 8) break;
    found = !memcmp(buf, sig, 8);
  }
  fclose(fp);
  if (!found)
    return fail(DIST_ERR_CORRUPT, path, "not an HDF5 file (no HDF5 signature in its %lld bytes)", (long long)sb.st_size);
  return DIST_SUCCESS;
}

static dist_status read_format(flowdata *f) {
  reason_buf b;
  if (H5Aexists(f->file, "format") <= 0)
    return fail(DIST_ERR_CORRUPT, f->path, "no 'format' attribute: not a dataset of distmgr's ns2d_sim (expected format "
                "'%s')", FORMAT_TAG);
  hid_t a = H5Aopen(f->file, "format", H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1, mt = -1;
  char text[128] = "";
  dist_status st = DIST_SUCCESS;
  if (t < 0) {
    st = fail(DIST_ERR_CORRUPT, f->path, "attribute 'format': %s", h5_reason(&b));
  } else if (H5Tget_class(t) != H5T_STRING) {
    st = fail(DIST_ERR_CORRUPT, f->path, "attribute 'format' is not a string (expected '%s')", FORMAT_TAG);
  } else if (H5Tis_variable_str(t) > 0) {
    char *s = NULL;
    mt = H5Tcopy(H5T_C_S1);
    if (mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(t)) < 0 || H5Aread(a, mt, &s) < 0)
      st = fail(DIST_ERR_CORRUPT, f->path, "reading attribute 'format': %s", h5_reason(&b));
    else
      snprintf(text, sizeof text, "%s", s ? s : "");
    if (s) H5free_memory(s);
  } else {
    size_t size = H5Tget_size(t);
    char *s = calloc(1, size + 1);
    mt = H5Tcopy(H5T_C_S1);
    if (!s || mt < 0 || H5Tset_size(mt, size) < 0 || H5Tset_cset(mt, H5Tget_cset(t)) < 0 ||
        H5Tset_strpad(mt, H5Tget_strpad(t)) < 0 || H5Aread(a, mt, s) < 0)
      st = fail(DIST_ERR_CORRUPT, f->path, "reading attribute 'format': %s", h5_reason(&b));
    else
      snprintf(text, sizeof text, "%s", s);
    free(s);
  }
  if (mt >= 0) H5Tclose(mt);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  if (!st && strcmp(text, FORMAT_TAG))
    st = fail(DIST_ERR_CORRUPT, f->path, "format is '%s', expected '%s'", text, FORMAT_TAG);
  return st;
}

static dist_status read_attr(flowdata *f, const attr_def *d) {
  reason_buf b;
  if (H5Aexists(f->file, d->name) <= 0) return fail(DIST_ERR_CORRUPT, f->path, "missing attribute '%s'", d->name);
  hid_t a = H5Aopen(f->file, d->name, H5P_DEFAULT), sp = a >= 0 ? H5Aget_space(a) : -1, t = a >= 0 ? H5Aget_type(a) : -1;
  dist_status st = DIST_SUCCESS;
  H5T_class_t want = d->kind == A_F64 ? H5T_FLOAT : H5T_INTEGER;
  char *p = (char *)&f->meta + d->off;
  if (sp < 0 || t < 0)
    st = fail(DIST_ERR_CORRUPT, f->path, "attribute '%s': %s", d->name, h5_reason(&b));
  else if (H5Sget_simple_extent_npoints(sp) != 1)
    st = fail(DIST_ERR_CORRUPT, f->path, "attribute '%s' is not a scalar", d->name);
  else if (H5Tget_class(t) != want)
    st = fail(DIST_ERR_CORRUPT, f->path, "attribute '%s' is not %s", d->name, want == H5T_FLOAT ? "a real number" : "an integer");
  else if (d->kind == A_INT) {
    int64_t v;
    if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0)
      st = fail(DIST_ERR_CORRUPT, f->path, "reading attribute '%s': %s", d->name, h5_reason(&b));
    else if (v < INT_MIN || v > INT_MAX)
      st = fail(DIST_ERR_CORRUPT, f->path, "attribute '%s' = %lld does not fit an int", d->name, (long long)v);
    else
      *(int *)p = (int)v;
  } else if (H5Aread(a, mem_type(d->kind), p) < 0) {
    st = fail(DIST_ERR_CORRUPT, f->path, "reading attribute '%s': %s", d->name, h5_reason(&b));
  }
  if (t >= 0) H5Tclose(t);
  if (sp >= 0) H5Sclose(sp);
  if (a >= 0) H5Aclose(a);
  return st;
}

/* Open dataset `name` and check it is real-valued with the expected shape. */
static dist_status open_dataset(flowdata *f, const char *name, int rank, const hsize_t *want, hid_t *out) {
  reason_buf b;
  if (H5Lexists(f->file, name, H5P_DEFAULT) <= 0) return fail(DIST_ERR_CORRUPT, f->path, "missing dataset /%s", name);
  hid_t d = H5Dopen2(f->file, name, H5P_DEFAULT);
  if (d < 0) return fail(DIST_ERR_CORRUPT, f->path, "/%s is not a readable dataset: %s", name, h5_reason(&b));
  hid_t sp = H5Dget_space(d), t = H5Dget_type(d);
  hsize_t dims[8] = {0};
  int got = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
  dist_status st = DIST_SUCCESS;
  if (t < 0 || got < 0 || got > 8 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0)
    st = fail(DIST_ERR_CORRUPT, f->path, "dataset /%s: %s", name, h5_reason(&b));
  else if (H5Tget_class(t) != H5T_FLOAT)
    st = fail(DIST_ERR_CORRUPT, f->path, "dataset /%s is not real-valued", name);
  if (!st) {
    int same = got == rank;
    for (int i = 0; same && i < rank; i++) same = dims[i] == want[i];
    if (!same) {
      char have[200] = "", exp[200] = "";
      for (int i = 0; i < got; i++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
      for (int i = 0; i < rank; i++)
        snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%llu", i ? ", " : "", (unsigned long long)want[i]);
      st = fail(DIST_ERR_CORRUPT, f->path, "dataset /%s has shape [%s], but the attributes say [%s]", name, have, exp);
    }
  }
  if (t >= 0) H5Tclose(t);
  if (sp >= 0) H5Sclose(sp);
  if (st)
    H5Dclose(d);
  else
    *out = d;
  return st;
}

static dist_status read_layout(flowdata *f) {
  dist_status st = read_format(f);
  for (size_t i = 0; !st && i < NATTRS; i++) st = read_attr(f, &ATTRS[i]);
  if (!st) st = check_meta(f->path, &f->meta, " in the file", DIST_ERR_CORRUPT);
  if (st) return st;
  const flowdata_meta *m = &f->meta;
  hsize_t dims[4] = {(hsize_t)m->trajectories, (hsize_t)m->snapshots, (hsize_t)m->n, (hsize_t)m->n};
  if ((st = open_dataset(f, "vorticity", 4, dims, &f->vort))) return st;
  if ((st = open_dataset(f, "time", 1, dims + 1, &f->tset))) return st;
  reason_buf b;
  if ((f->dxpl = fields_io_read_transfer(&f->io)) < 0)
    return fail(DIST_ERR_IO, f->path, "transfer property list: %s", h5_reason(&b));
  return DIST_SUCCESS;
}

dist_status flowdata_open(const char *path, flowdata **out) {
  quiet_hdf5();
  fields_io io;
  dist_status st = fields_io_init(&io);
  if (st) return st;
  int rank = 0;
  dist_manager_rank(&rank);
  if (!path || !out)
    st = fail(DIST_ERR_INVALID_ARGUMENT, NULL, "open: NULL %s", !path ? "path" : "output handle");
  else if (rank == 0)
    st = precheck(path);
  if ((st = agree_status(NULL, st))) return st;
  if ((st = same_everywhere(mix(0xCBF29CE484222325ull, path, strlen(path)), path, "paths to flowdata_open")))
    return st;

  flowdata *f = new_handle(path, &io, 0);
  if ((st = agree_status(NULL, f ? DIST_SUCCESS : fail(DIST_ERR_NO_MEMORY, path, "open: handle")))) {
    if (f) free_handle(f);
    return st;
  }
  reason_buf b;
  hid_t fapl = fields_io_file_access(&io); /* serial HDF5: concurrent read-only opens are fine */
  if (fapl < 0)
    st = fail(DIST_ERR_IO, path, "%sfile access list: %s", io.mpi ? "MPI-IO " : "", h5_reason(&b));
  else if ((f->file = H5Fopen(path, H5F_ACC_RDONLY, fapl)) < 0)
    st = fail(DIST_ERR_CORRUPT, path, "HDF5 cannot open it (truncated or corrupt?): %s", h5_reason(&b));
  if (fapl >= 0) H5Pclose(fapl);
  if ((st = agree_status(NULL, st)) == DIST_SUCCESS) st = agree_status(NULL, read_layout(f));
  if (st) {
    close_reader(f);
    free_handle(f);
    return st;
  }
  *out = f;
  return DIST_SUCCESS;
}

const flowdata_meta *flowdata_meta_get(const flowdata *f) { return f ? &f->meta : NULL; }

static dist_status readable(const flowdata *f, const char *what) {
  if (!f) return fail(DIST_ERR_INVALID_ARGUMENT, NULL, "%s: NULL handle", what);
  if (f->part) return fail(DIST_ERR_INVALID_ARGUMENT, f->part, "%s: the file is open for writing (close it, then open it)", what);
  return DIST_SUCCESS;
}

dist_status flowdata_read(flowdata *f, int64_t traj, int64_t snap, int64_t row0, int64_t rows, float *out) {
  dist_status st = readable(f, "read");
  if (!st) st = check_box(f, "read", traj, snap, row0, rows, out);
  if (st || rows == 0) return st;
  quiet_hdf5();
  hsize_t count = (hsize_t)rows * (hsize_t)f->meta.n;
  hsize_t start[4] = {(hsize_t)traj, (hsize_t)snap, (hsize_t)row0, 0};
  hsize_t box[4] = {1, 1, (hsize_t)rows, (hsize_t)f->meta.n};
  hid_t fs = H5Dget_space(f->vort), ms = H5Screate_simple(1, &count, NULL);
  reason_buf b;
  if (fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, box, NULL) < 0 ||
      H5Dread(f->vort, H5T_NATIVE_FLOAT, ms, fs, f->dxpl, out) < 0)
    st = fail(DIST_ERR_IO, f->path, "reading trajectory %lld, snapshot %lld, rows [%lld, %lld): %s", (long long)traj,
              (long long)snap, (long long)row0, (long long)(row0 + rows), h5_reason(&b));
  if (fs >= 0) H5Sclose(fs);
  if (ms >= 0) H5Sclose(ms);
  return st;
}

dist_status flowdata_read_time(flowdata *f, double *time) {
  dist_status st = readable(f, "read_time");
  if (st) return st;
  if (!time) return fail(DIST_ERR_INVALID_ARGUMENT, f->path, "read_time: NULL time array");
  quiet_hdf5();
  reason_buf b;
  if (H5Dread(f->tset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, f->dxpl, time) < 0)
    return fail(DIST_ERR_IO, f->path, "reading /time: %s", h5_reason(&b));
  return DIST_SUCCESS;
}
