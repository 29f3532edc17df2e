/* The surrogate pipeline's dataset: vorticity trajectories of examples/ns2d
 * in one HDF5 file, written and read in parallel, each rank its own rows:
 * MPI-IO through Debian's parallel HDF5 when MPI is in use, serial HDF5 and
 * pwrite() without it (torchrun, Gloo); the same file either way.
 *
 * File layout (h5py: f["vorticity"][traj, snap] is one n x n field):
 *   /vorticity  float32 [trajectories, snapshots, n, n]  (row = x, column = y)
 *   /time       float64 [snapshots]   time of each snapshot after the burn-in
 *   root attributes (scalars): format = "distmgr-ns2d-1", n, trajectories,
 *     snapshots, train_trajectories (the first ones; the rest are held out),
 *     dt_snapshot, dt_solver, nu, force_amp, force_k, k0, energy, burn_in,
 *     seed, and the training set's statistics mean, std (of the vorticity)
 *     and delta_std (of one snapshot step's change, omega(t+dt) - omega(t)).
 *
 * A file is written under "<path>.part" and renamed to <path> by
 * flowdata_close, so a crash never leaves a half-written file under the
 * final name. */
#ifndef DISTMGR_EXAMPLES_FLOWDATA_H
#define DISTMGR_EXAMPLES_FLOWDATA_H

#include <stdint.h>

#include <distmgr.h>

typedef struct flowdata_meta {
  int64_t n, trajectories, snapshots, train_trajectories;
  double dt_snapshot, dt_solver, nu, force_amp;
  int force_k;
  double k0, energy, burn_in;
  uint64_t seed;
  double mean, std, delta_std; /* set through flowdata_set_stats */
} flowdata_meta;

typedef struct flowdata flowdata;

/* Create the file (collective over the world; same meta on every rank).
 * Checks the meta (sizes >= 1, n >= 4, train_trajectories in
 * [1, trajectories], sizes that do not overflow, force_k >= 1, finite reals,
 * std and delta_std >= 0); the same checks apply to a file's attributes in
 * flowdata_open. Ranks that pass different meta all get DIST_ERR_MISMATCH. */
dist_status flowdata_create(const char *path, const flowdata_meta *meta, flowdata **out);

/* Write one box of the dataset: rows [row0, row0 + rows) of snapshot `snap`
 * of trajectory `traj` (rows x n floats). Collective over the world: every
 * rank calls it the same number of times; a rank with nothing to write
 * passes rows = 0 (data may then be NULL). */
dist_status flowdata_write(flowdata *f, int64_t traj, int64_t snap, int64_t row0, int64_t rows, const float *data);

/* Record the snapshot times (snapshots doubles, same on every rank) and the
 * training statistics. Collective. */
dist_status flowdata_set_time(flowdata *f, const double *time);
dist_status flowdata_set_stats(flowdata *f, double mean, double std, double delta_std);

/* Flush, close and (written files) rename <path>.part to <path>. Collective.
 * An error (e.g. the disk filled up) removes the .part file and names the
 * cause; the file under <path>, if any, is left as it was. So does a written
 * file whose fields were not all written (fewer rows written, summed over the
 * ranks, than trajectories x snapshots x n): that is how a writer abandons a
 * file. A file opened for reading is just closed. NULL: nothing to do. */
dist_status flowdata_close(flowdata *f);

/* Open for reading (collective over the world): checks the format tag, the
 * attributes and the dataset's shape against each other; a missing, foreign
 * or corrupt file is an error on every rank naming the file and the problem. */
dist_status flowdata_open(const char *path, flowdata **out);
const flowdata_meta *flowdata_meta_get(const flowdata *f);

/* Read rows [row0, row0 + rows) of one snapshot into out (rows x n floats).
 * Local (independent I/O): any rank, any box, any number of times. */
dist_status flowdata_read(flowdata *f, int64_t traj, int64_t snap, int64_t row0, int64_t rows, float *out);
dist_status flowdata_read_time(flowdata *f, double *time); /* snapshots doubles; local */

#endif
