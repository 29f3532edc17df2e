/* The engine-specific half of examples/flowdata.c: which HDF5 driver opens
 * the file, and how each rank writes its fields' bytes.
 *
 * With MPI: parallel HDF5 (the MPI-IO driver on the manager's world) and one
 * MPI file shared by the ranks, written with MPI_File_write_at.
 * Without MPI (Gloo under torchrun; MPI is never initialized): serial HDF5
 * with its default driver -- Debian's parallel HDF5 library runs so as long
 * as no MPI-IO property is set -- and each rank its own descriptor, written
 * with pwrite(). Both write the same bytes at the same offsets.
 *
 * Calls fill `why` (a reason, no file name) and return -1 on failure, 0 on
 * success; flowdata.c turns that into its agreed errors. */
#ifndef DISTMGR_EXAMPLES_FLOWDATA_IO_H
#define DISTMGR_EXAMPLES_FLOWDATA_IO_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include <distmgr.h>
#include <distmgr/mpi.h>

typedef struct fields_io {
  int mpi;       /* 1: the manager runs on MPI */
  MPI_Comm comm; /* the world's communicator (MPI only) */
  MPI_File fh;   /* MPI */
  int fd;        /* POSIX; -1 when closed */
} fields_io;

/* The manager's engine, nothing open. Local. */
dist_status fields_io_init(fields_io *io);

/* HDF5 property lists for the engine: file access (the world's MPI-IO, or
 * the default serial driver) and reads (independent transfers under MPI).
 * -1 on failure (HDF5's error stack says why). */
hid_t fields_io_file_access(const fields_io *io);
hid_t fields_io_read_transfer(const fields_io *io);

/* Every rank creates the file (parallel HDF5, collective) under MPI; only
 * rank 0 without it (serial HDF5 must not see two writers). */
int fields_io_creates(const fields_io *io, int rank);

/* Open the existing file for the fields (collective under MPI). */
int fields_io_open(fields_io *io, const char *path, char *why, size_t len);
/* count floats at byte offset off; a short write is a failure. */
int fields_io_write_at(fields_io *io, int64_t off, const float *data, int64_t count, char *why, size_t len);
/* sync = 1: the data on disk first ("syncing ..." in why), then close
 * ("closing ..."). Closes even after a failed sync. Collective under MPI. */
int fields_io_close(fields_io *io, int sync, char *why, size_t len);
/* Close without syncing, errors ignored (an abandoned file). Collective under MPI. */
void fields_io_abandon(fields_io *io);

#endif
