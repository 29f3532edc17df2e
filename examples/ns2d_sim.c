/* ns2d_sim: the surrogate pipeline's data. Runs examples/ns2d (forced 2-D
 * Navier-Stokes, Kolmogorov flow) from random initial fields and writes
 * --trajectories trajectories of --snapshots vorticity snapshots, --interval
 * apart after a --burn-in, into one HDF5 file (examples/flowdata.h) with the
 * training set's statistics.
 *
 *   ns2d_sim --out FILE [--n 64] [--trajectories 40] [--held-out 8]
 *            [--snapshots 21] [--interval T] [--dt DT] [--nu NU] [--force AMP]
 *            [--kf 4] [--k0 K0] [--energy E] [--burn-in T] [--seed 1]
 *            [--ensembles E] [--quiet]
 *
 * The world is a mesh of --ensembles groups ("ensemble" axis) of world/E
 * ranks ("sim_spatial" axis, consecutive ranks): trajectory t is solved by
 * ensemble t % E, the grid's rows split over that ensemble's ranks (unevenly
 * where n does not divide). The last --held-out trajectories are held out;
 * the statistics (mean and std of the vorticity, delta_std of the change
 * over one interval) are those of the others, of the float32 values written.
 *
 * Defaults (n = 64; the 2/3 rule keeps |k_x|, |k_y| <= 21), chosen by runs
 * checked with h5py (spectra, max |u|, change per interval, dt halving):
 *   --force 1     unit forcing, the curl of sin(4y) along x: speeds O(1), one
 *                 time unit is about an eddy turnover at the forcing scale.
 *   --kf 4        four forcing wavelengths across the box (Chandler & Kerswell's
 *                 Kolmogorov flow).
 *   --nu 0.02     Re = 1/nu = 50 in their units: a chaotic, bursting flow that
 *                 stays unsteady however long it runs (at nu = 0.03 it settles
 *                 into a nearly steady state within ~100 time units), yet the
 *                 spectrum's energy in the last shells before the cutoff
 *                 (|k| in 18..21) is ~1e-6 of the total: resolved at 64 x 64.
 *   --dt 0.02     max|u| ~ 4 gives max|u| kmax dt ~ 1.6, inside RK4's limit
 *                 2.8 (viscosity is exact); after 17 time units the fields
 *                 differ from dt = 0.005 by 3e-5 (relative L2).
 *   --interval 0.2  10 steps; the field changes by ~20 % RMS per interval
 *                 (7-44 % over bursts and lulls) and decorrelates to ~0.5 over
 *                 the 20 intervals: visible motion, a smooth map to learn.
 *   --k0 2, --energy 0.8  a random start at the scales and energy of the
 *                 forced flow (E ~ 0.8, enstrophy / E ~ 4, i.e. |k| ~ 2),
 *                 so a short burn-in reaches its statistics (8 trajectories:
 *                 std 2.46 and change 18 % per interval after 15 time units,
 *                 2.41 and 16 % after 300; from k0 = 4 the enstrophy was still
 *                 ~60 % high after 15).
 *   --burn-in 15  750 steps: the start is forgotten, the run stays short.
 * A default run (40 trajectories x 21 snapshots, 950 steps each) took 16 s at
 * 4 ranks on 2 cores (oversubscribed; 28 s while other jobs loaded them), 11 s
 * at 1 rank; the fields are the same, bit for bit, at 1, 3 and 4 ranks and
 * with --ensembles 2. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <distmgr.h>

#include "agree.h"
#include "cli.h"
#include "flowdata.h"
#include "ns2d.h"

#define PROG "ns2d_sim"

typedef struct options {
  const char *out;
  int64_t n, trajectories, held_out, snapshots, kf, seed, ensembles;
  double interval, dt, nu, force, k0, energy, burn_in;
  int quiet, help;
} options;

static const char *USAGE =
    "usage: " PROG " --out FILE [--n 64] [--trajectories 40] [--held-out 8] [--snapshots 21] [--interval 0.2]\n"
    "       [--dt 0.02] [--nu 0.02] [--force 1] [--kf 4] [--k0 2] [--energy 0.8] [--burn-in 15] [--seed 1]\n"
    "       [--ensembles 1] [--quiet]\n";

/* Reads the command line (the same on every rank, so every rank reaches the
 * same verdict without communicating). */
static dist_status parse(int argc, char **argv, options *o) {
  *o = (options){NULL, 64, 40, 8, 21, 4, 1, 1, 0.2, 0.02, 0.02, 1.0, 2.0, 0.8, 15.0, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    dist_status st = DIST_SUCCESS;
    int used = 1;
    if (!strcmp(a, "--quiet"))
      o->quiet = 1, used = 0;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      o->help = 1, used = 0;
    else if (!strcmp(a, "--out")) {
      if (!v || !*v) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--out needs a file name");
      o->out = v;
    } else if (!strcmp(a, "--n"))
      st = cli_int(a, v, 8, 8192, &o->n);
    else if (!strcmp(a, "--trajectories"))
      st = cli_int(a, v, 2, 1000000, &o->trajectories);
    else if (!strcmp(a, "--held-out"))
      st = cli_int(a, v, 1, 999999, &o->held_out);
    else if (!strcmp(a, "--snapshots"))
      st = cli_int(a, v, 2, 1000000, &o->snapshots);
    else if (!strcmp(a, "--kf"))
      st = cli_int(a, v, 1, 10000, &o->kf);
    else if (!strcmp(a, "--seed"))
      st = cli_int(a, v, 0, INT64_MAX, &o->seed);
    else if (!strcmp(a, "--ensembles"))
      st = cli_int(a, v, 1, 1 << 20, &o->ensembles);
    else if (!strcmp(a, "--interval"))
      st = cli_real(a, v, 1e-12, 1e9, &o->interval);
    else if (!strcmp(a, "--dt"))
      st = cli_real(a, v, 1e-12, 1e9, &o->dt);
    else if (!strcmp(a, "--nu"))
      st = cli_real(a, v, 1e-12, 1e9, &o->nu);
    else if (!strcmp(a, "--force"))
      st = cli_real(a, v, 0, 1e9, &o->force);
    else if (!strcmp(a, "--k0"))
      st = cli_real(a, v, 1e-12, 1e9, &o->k0);
    else if (!strcmp(a, "--energy"))
      st = cli_real(a, v, 1e-12, 1e9, &o->energy);
    else if (!strcmp(a, "--burn-in"))
      st = cli_real(a, v, 0, 1e9, &o->burn_in);
    else
      return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "unknown option '%s'\n%s", a, USAGE);
    if (st) return st;
    i += used;
  }
  if (o->help) return DIST_SUCCESS;
  if (!o->out) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--out FILE is required\n%s", USAGE);
  if (o->n % 2) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--n %lld must be even", (long long)o->n);
  if (o->held_out > o->trajectories - 1)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--held-out %lld must be in [1, trajectories - 1 = %lld]",
                          (long long)o->held_out, (long long)(o->trajectories - 1));
  if (3 * o->kf > o->n)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--kf %lld is above the dealiasing cutoff n/3 = %lld",
                          (long long)o->kf, (long long)(o->n / 3));
  if (3 * o->k0 > (double)o->n)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--k0 %g is above the dealiasing cutoff n/3 = %lld", o->k0,
                          (long long)(o->n / 3));
  if (o->interval < o->dt * 0.5)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--interval %g is shorter than one step (--dt %g)", o->interval, o->dt);
  if (o->interval / o->dt > 1e8 || o->burn_in / o->dt > 1e12)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--interval %g or --burn-in %g is too many steps of --dt %g",
                          o->interval, o->burn_in, o->dt);
  return DIST_SUCCESS;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Sums over the training trajectories' values, of their one-interval changes,
 * and per round the progress of each ensemble's trajectory. */
typedef struct sums {
  double v1, v2, nv, d1, d2, nd;
} sums;

typedef struct run {
  options o;
  int rank, size, ens, nens, srank; /* my ensemble, their count, my rank in the ensemble */
  int64_t steps_interval, steps_burn, rows, row0;
  ns2d *sim;
  flowdata *file;
  double *w;  /* my rows, double */
  float *cur, *prev;
  sums s;
} run;

/* One trajectory of this ensemble (active) or the matching number of empty
 * writes (inactive); progress[0..3] = energy after the burn-in, energy at the
 * end, sum of squared changes, sum of squared values (for the RMS relative
 * change per interval). */
static dist_status trajectory(run *r, int64_t traj, int active, double progress[4]) {
  const options *o = &r->o;
  const int64_t n = o->n, count = r->rows * n;
  const int train = traj < o->trajectories - o->held_out;
  dist_status st = DIST_SUCCESS;
  double z;
  if (active) {
    uint64_t seed = splitmix64((uint64_t)o->seed * 0x100000001B3ull + (uint64_t)traj);
    st = ns2d_random_init(r->sim, seed, o->k0, o->energy);
    for (int64_t left = r->steps_burn; !st && left > 0; left -= 1 << 30)
      st = ns2d_step(r->sim, (int)(left < (1 << 30) ? left : (1 << 30)));
    if (!st) st = ns2d_diagnostics(r->sim, &progress[0], &z);
  }
  for (int64_t snap = 0; snap < o->snapshots; snap++) {
    if (active && !st && snap > 0) st = ns2d_step(r->sim, (int)r->steps_interval);
    if (active && !st) st = ns2d_get_vorticity(r->sim, r->w);
    int finite = 1;
    if (active && !st) {
      for (int64_t i = 0; i < count; i++) {
        r->cur[i] = (float)r->w[i];
        finite &= isfinite(r->cur[i]);
      }
      if (!finite)
        st = dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                            "trajectory %lld blew up (non-finite vorticity) at snapshot %lld: lower --dt or raise --nu",
                            (long long)traj, (long long)snap);
    }
    /* A failure anywhere stops every rank before the collective write. */
    if ((st = agree_status(NULL, st))) return st;
    int64_t rows = active ? r->rows : 0;
    if ((st = flowdata_write(r->file, active ? traj : 0, snap, r->row0, rows, r->cur))) return st;
    if (!active) continue;
    for (int64_t i = 0; i < count; i++) {
      double v = r->cur[i], d = snap > 0 ? v - (double)r->prev[i] : 0;
      if (train) r->s.v1 += v, r->s.v2 += v * v;
      if (snap > 0) {
        if (train) r->s.d1 += d, r->s.d2 += d * d;
        progress[2] += d * d;
        progress[3] += (double)r->prev[i] * r->prev[i];
      }
    }
    if (train) r->s.nv += (double)count, r->s.nd += snap > 0 ? (double)count : 0;
    float *t = r->cur;
    r->cur = r->prev, r->prev = t;
  }
  if (active) st = ns2d_diagnostics(r->sim, &progress[1], &z);
  if (r->srank != 0) progress[0] = progress[1] = 0; /* counted once per ensemble */
  return agree_status(NULL, st);
}

/* Seconds on a monotonic clock (no MPI_Wtime: MPI is not up under torchrun). */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* v summed over the world, in place (distmgr's all-reduce: either engine). */
static dist_status sum_world(double *v, int64_t count) {
  dist_tensor t = dist_tensor_host(v, DIST_F64, 1, &count);
  return dist_all_reduce(NULL, &t, DIST_SUM);
}

static dist_status simulate(run *r, double *elapsed) {
  const options *o = &r->o;
  double t0 = now();
  int sizes[2] = {(int)o->ensembles, r->size / (int)o->ensembles};
  const char *names[2] = {"ensemble", "sim_spatial"};
  dist_status st = dist_group_create_mesh(NULL, 2, sizes, names);
  if (!st) st = dist_group_rank("ensemble", &r->ens);
  if (!st) st = dist_group_rank("sim_spatial", &r->srank);
  r->nens = (int)o->ensembles;
  if (st) return st;
  ns2d_config c = NS2D_CONFIG_INIT;
  c.n = o->n, c.nu = o->nu, c.dt = o->dt, c.force_amp = o->force, c.force_k = (int)o->kf, c.group = "sim_spatial";
  if ((st = agree_status(NULL, ns2d_create(&c, &r->sim)))) return st;
  r->rows = ns2d_rows(r->sim), r->row0 = ns2d_row_offset(r->sim);
  size_t cnt = (size_t)((r->rows > 0 ? r->rows : 1) * o->n);
  r->w = malloc(sizeof(double) * cnt);
  r->cur = malloc(sizeof(float) * cnt), r->prev = malloc(sizeof(float) * cnt);
  st = (r->w && r->cur && r->prev) ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "field buffers");
  if ((st = agree_status(NULL, st))) return st;

  flowdata_meta m;
  memset(&m, 0, sizeof m);
  m.n = o->n, m.trajectories = o->trajectories, m.snapshots = o->snapshots;
  m.train_trajectories = o->trajectories - o->held_out;
  m.dt_snapshot = (double)r->steps_interval * o->dt, m.dt_solver = o->dt, m.nu = o->nu, m.force_amp = o->force;
  m.force_k = (int)o->kf, m.k0 = o->k0, m.energy = o->energy, m.burn_in = (double)r->steps_burn * o->dt;
  m.seed = (uint64_t)o->seed;
  if ((st = flowdata_create(o->out, &m, &r->file))) return st;

  const int E = r->nens;
  double *prog = calloc((size_t)(4 * E), sizeof(double));
  if ((st = agree_status(NULL, prog ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "progress")))) return st;
  for (int64_t round = 0; !st && round * E < o->trajectories; round++) {
    memset(prog, 0, sizeof(double) * (size_t)(4 * E));
    int64_t traj = round * E + r->ens;
    st = trajectory(r, traj, traj < o->trajectories, prog + 4 * r->ens);
    if (st || (st = sum_world(prog, 4 * E))) break;
    for (int e = 0; !o->quiet && r->rank == 0 && e < E && round * E + e < o->trajectories; e++) {
      const double *p = prog + 4 * e;
      printf(PROG ": trajectory %lld/%lld (%s, ensemble %d): energy %.4g -> %.4g, change per interval %.1f %%, %.1f s\n",
             (long long)(round * E + e + 1), (long long)o->trajectories,
             round * E + e < o->trajectories - o->held_out ? "train" : "held out", e, p[0], p[1],
             100 * sqrt(p[2] / (p[3] > 0 ? p[3] : 1)), now() - t0);
      fflush(stdout);
    }
  }
  free(prog);
  if (st) return st;

  double s[6] = {r->s.v1, r->s.v2, r->s.nv, r->s.d1, r->s.d2, r->s.nd};
  if ((st = sum_world(s, 6))) return st;
  double mean = s[0] / s[2], std = sqrt(fmax(s[1] / s[2] - mean * mean, 0));
  double dmean = s[3] / s[5], dstd = sqrt(fmax(s[4] / s[5] - dmean * dmean, 0));
  double *time = malloc(sizeof(double) * (size_t)o->snapshots);
  if ((st = agree_status(NULL, time ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "time array")))) return st;
  for (int64_t i = 0; i < o->snapshots; i++) time[i] = (double)i * m.dt_snapshot;
  st = flowdata_set_time(r->file, time);
  free(time);
  if (!st) st = flowdata_set_stats(r->file, mean, std, dstd);
  if (st) return st;
  st = flowdata_close(r->file);
  r->file = NULL;
  *elapsed = now() - t0;
  if (!st && r->rank == 0)
    printf(PROG ": wrote %s: %lld trajectories x %lld snapshots of %lldx%lld (%lld train, %lld held out), mean %.4g std "
           "%.4g delta_std %.4g (change per interval %.1f %%), %.1f s\n",
           o->out, (long long)o->trajectories, (long long)o->snapshots, (long long)o->n, (long long)o->n,
           (long long)(o->trajectories - o->held_out), (long long)o->held_out, mean, std, dstd, 100 * dstd / std,
           *elapsed);
  return st;
}

int main(int argc, char **argv) {
  dist_status st = dist_manager_initialize();
  if (st) {
    fprintf(stderr, PROG ": %s\n", dist_last_error());
    return 1;
  }
  run r;
  memset(&r, 0, sizeof r);
  dist_manager_rank(&r.rank);
  dist_manager_world_size(&r.size);
  int code = 0;
  st = parse(argc, argv, &r.o);
  if (!st && r.o.help) {
    if (r.rank == 0) fputs(USAGE, stdout);
    dist_manager_finalize();
    return 0;
  }
  if (!st && r.size % r.o.ensembles)
    st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--ensembles %lld must divide the number of ranks %d",
                        (long long)r.o.ensembles, r.size);
  if (!st) {
    double si = r.o.interval / r.o.dt, sb = r.o.burn_in / r.o.dt;
    r.steps_interval = llround(si), r.steps_burn = llround(sb);
    if (r.rank == 0 && fabs(si - (double)r.steps_interval) > 1e-9 * si)
      printf(PROG ": --interval %g is not a multiple of --dt %g: using %lld steps = %g\n", r.o.interval, r.o.dt,
             (long long)r.steps_interval, (double)r.steps_interval * r.o.dt);
    if (r.rank == 0 && fabs(sb - (double)r.steps_burn) > 1e-9 * (sb > 1 ? sb : 1))
      printf(PROG ": --burn-in %g is not a multiple of --dt %g: using %lld steps = %g\n", r.o.burn_in, r.o.dt,
             (long long)r.steps_burn, (double)r.steps_burn * r.o.dt);
  }
  if (st) {
    code = 2; /* a bad command line: the same verdict on every rank */
  } else {
    double elapsed = 0;
    st = simulate(&r, &elapsed);
    if (st) code = 1;
  }
  if (st && r.rank == 0) fprintf(stderr, PROG ": %s\n", dist_last_error());
  if (r.file) flowdata_close(r.file); /* after a failure: incomplete, so removed */
  ns2d_destroy(r.sim);
  free(r.w), free(r.cur), free(r.prev);
  dist_manager_finalize();
  return code;
}
