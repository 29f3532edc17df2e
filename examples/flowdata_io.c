/* The engine-specific I/O of the surrogate pipeline's dataset (see
 * flowdata_io.h; why the fields bypass H5Dwrite: flowdata.c). */
#include "flowdata_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

dist_status fields_io_init(fields_io *io) {
  memset(io, 0, sizeof *io);
  io->fh = MPI_FILE_NULL, io->comm = MPI_COMM_NULL, io->fd = -1;
  const char *engine = NULL;
  dist_status st = dist_coll_backend(NULL, DIST_MEM_HOST, &engine);
  if (st) return st;
  io->mpi = strcmp(engine, "mpi") == 0; /* else gloo or shm: no MPI in the job */
  return io->mpi ? dist_group_comm(NULL, &io->comm) : DIST_SUCCESS;
}

hid_t fields_io_file_access(const fields_io *io) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0 || !io->mpi) return fapl;
  if (H5Pset_fapl_mpio(fapl, io->comm, MPI_INFO_NULL) < 0) {
    H5Pclose(fapl);
    return -1;
  }
  return fapl;
}

hid_t fields_io_read_transfer(const fields_io *io) {
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0 || !io->mpi) return dxpl;
  if (H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) < 0) {
    H5Pclose(dxpl);
    return -1;
  }
  return dxpl;
}

int fields_io_creates(const fields_io *io, int rank) { return io->mpi || rank == 0; }

/* ---- MPI-IO ---------------------------------------------------------------- */

static void mpi_reason(char *buf, size_t len, int rc, int err) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int tl = 0;
  MPI_Error_string(rc, text, &tl);
  if (err)
    snprintf(buf, len, "%s (%s)", text, strerror(err));
  else
    snprintf(buf, len, "%s", text);
}

static int mpi_open(fields_io *io, const char *path, char *why, size_t len) {
  int rc = MPI_File_open(io->comm, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &io->fh);
  if (rc == MPI_SUCCESS) return 0;
  io->fh = MPI_FILE_NULL;
  char text[MPI_MAX_ERROR_STRING + 64];
  mpi_reason(text, sizeof text, rc, 0);
  snprintf(why, len, "MPI_File_open for the fields: %s", text);
  return -1;
}

static int mpi_write_at(fields_io *io, int64_t off, const float *data, int64_t total, char *why, size_t len) {
  /* In pieces of at most 2^30 floats (MPI counts are int). */
  for (int64_t done = 0; done < total;) {
    int count = (int)(total - done < (1 << 30) ? total - done : (1 << 30)), got = -1;
    MPI_Status status;
    errno = 0;
    int rc = MPI_File_write_at(io->fh, (MPI_Offset)(off + done * (int64_t)sizeof(float)), data + done, count, MPI_FLOAT,
                               &status);
    int err = errno;
    if (rc == MPI_SUCCESS) MPI_Get_count(&status, MPI_FLOAT, &got);
    if (rc != MPI_SUCCESS || got != count) {
      if (rc != MPI_SUCCESS)
        mpi_reason(why, len, rc, err);
      else
        snprintf(why, len, "%d of %d floats written%s%s%s", got, count, err ? " (" : "", err ? strerror(err) : "",
                 err ? ")" : ""); /* OMPIO: success, short count */
      return -1;
    }
    done += count;
  }
  return 0;
}

static int mpi_close(fields_io *io, int sync, char *why, size_t len) {
  char text[MPI_MAX_ERROR_STRING + 64];
  int bad = 0;
  errno = 0;
  int rc = sync ? MPI_File_sync(io->fh) : MPI_SUCCESS; /* collective: data on disk before the rename */
  int err = errno;
  if (rc != MPI_SUCCESS) {
    mpi_reason(text, sizeof text, rc, err);
    snprintf(why, len, "syncing the fields to disk: %s", text);
    bad = 1;
  }
  rc = MPI_File_close(&io->fh);
  if (rc != MPI_SUCCESS && !bad) {
    mpi_reason(text, sizeof text, rc, 0);
    snprintf(why, len, "closing the MPI file: %s", text);
    bad = 1;
  }
  return bad ? -1 : 0;
}

/* ---- POSIX, without MPI ------------------------------------------------------ */

static int posix_open(fields_io *io, const char *path, char *why, size_t len) {
  io->fd = open(path, O_WRONLY | O_CLOEXEC);
  if (io->fd >= 0) return 0;
  snprintf(why, len, "opening for the fields: %s", strerror(errno));
  return -1;
}

/* pwrite() may write less than asked (a disk filling up mid-way): go on from
 * there; the next call then names the cause (ENOSPC, EFBIG). */
static int posix_write_at(fields_io *io, int64_t off, const float *data, int64_t count, char *why, size_t len) {
  const char *p = (const char *)data;
  const size_t want = (size_t)count * sizeof(float);
  for (size_t done = 0; done < want;) {
    size_t piece = want - done < ((size_t)1 << 30) ? want - done : ((size_t)1 << 30);
    ssize_t w = pwrite(io->fd, p + done, piece, (off_t)(off + (int64_t)done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { /* 0: no progress and no reason; do not spin */
      snprintf(why, len, "%zu of %zu bytes written (%s)", done, want, w < 0 ? strerror(errno) : "pwrite wrote nothing");
      return -1;
    }
    done += (size_t)w;
  }
  return 0;
}

static int posix_close(fields_io *io, int sync, char *why, size_t len) {
  int bad = 0;
  if (sync && fsync(io->fd) != 0) { /* data on disk before the rename; a delayed ENOSPC shows here */
    snprintf(why, len, "syncing the fields to disk: %s", strerror(errno));
    bad = 1;
  }
  if (close(io->fd) != 0 && !bad) {
    snprintf(why, len, "closing the file: %s", strerror(errno));
    bad = 1;
  }
  io->fd = -1;
  return bad ? -1 : 0;
}

/* ---- either ------------------------------------------------------------------ */

int fields_io_open(fields_io *io, const char *path, char *why, size_t len) {
  return io->mpi ? mpi_open(io, path, why, len) : posix_open(io, path, why, len);
}

int fields_io_write_at(fields_io *io, int64_t off, const float *data, int64_t count, char *why, size_t len) {
  return io->mpi ? mpi_write_at(io, off, data, count, why, len) : posix_write_at(io, off, data, count, why, len);
}

int fields_io_close(fields_io *io, int sync, char *why, size_t len) {
  return io->mpi ? mpi_close(io, sync, why, len) : posix_close(io, sync, why, len);
}

void fields_io_abandon(fields_io *io) {
  if (io->mpi && io->fh != MPI_FILE_NULL) MPI_File_close(&io->fh);
  if (!io->mpi && io->fd >= 0) close(io->fd);
  io->fd = -1;
}
