/* Launch detection: a pure function from an environment to a launch
 * description. It makes no MPI call, so every launcher is testable with a
 * fake environment.
 *
 * A launcher is marked by its rank variable: a size variable alone
 * (WORLD_SIZE left over in a shell, SLURM_NTASKS in an salloc shell) selects
 * nothing. Precedence when no method is forced (first match wins):
 *   0. ENV        RANK and TORCHELASTIC_RUN_ID present: torchrun started this
 *                 process, and any other launcher's variables were inherited
 *                 from the task that ran torchrun (srun --mpi=pmi2's PMI_RANK,
 *                 mpirun's OMPI_*).
 *   1. Open MPI   OMPI_COMM_WORLD_RANK present. Wins over SLURM_* (stale
 *                 SLURM_PROCID=0 when mpirun runs inside an sbatch allocation)
 *                 and over torchrun-style RANK/WORLD_SIZE.
 *   2. MPICH      PMI_RANK present (Hydra mpiexec, or srun --mpi=pmi2: SLURM's
 *                 PMI-2 plugin sets PMI_RANK too, so an MPICH program under
 *                 srun --mpi=pmi2 is detected as MPICH, with the same ranks).
 *   3. ENV        RANK present (torchrun). torchrun inside an sbatch/srun
 *                 allocation is the inner launcher, so it wins over SLURM_*.
 *   4. SLURM      SLURM_PROCID present. With SLURM_STEP_ID (an srun step) the
 *                 task's rank/size come from SLURM_PROCID/SLURM_NTASKS; without
 *                 it the process is an sbatch batch script: rank 0 of 1.
 *   5. SINGLE     none of the above: one process.
 * The MPI launchers come first because their variables are set per process by
 * the launcher that started this very process, and MPI_Init will agree with
 * them. When another launcher's rank or size variable is also set and does
 * not mean the same rank and size, detection still succeeds and records a
 * note (see `note`); so does a size variable passed over for SINGLE.
 * Launches that run fewer processes than the environment announces record a
 * `warning`: an sbatch batch script with SLURM_NTASKS > 1 (only the script
 * runs), and SINGLE forced while a launcher says its world has n > 1.
 *
 * Numbers are canonical decimal integers: digits only, "0" or without a
 * leading zero; no '+', no white space of any kind. */
#ifndef DISTMGR_LAUNCH_H
#define DISTMGR_LAUNCH_H

#include "distmgr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dist_launch_method {
  DIST_LAUNCH_AUTO = 0, /* detect (only as an input) */
  DIST_LAUNCH_SINGLE,
  DIST_LAUNCH_ENV, /* torchrun / torch.distributed "env://" variables */
  DIST_LAUNCH_SLURM,
  DIST_LAUNCH_OPENMPI,
  DIST_LAUNCH_MPICH
} dist_launch_method;

#define DIST_ADDR_MAX 256

typedef struct dist_launch {
  dist_launch_method method;
  int rank, size;              /* world rank and size as the launcher sees them */
  int local_rank, local_size;  /* -1 when the launcher does not say */
  char master_addr[DIST_ADDR_MAX]; /* "" when the launcher does not say */
  int master_port;                 /* 0 when the launcher does not say */
  int slurm_batch;             /* 1: SLURM batch script without an srun step */
  int mpi_can_join;            /* 1: MPI_Init of these processes forms this world */
  char note[256];              /* why other launchers' variables were ignored, or "" */
  char warning[256];           /* fewer processes run than announced (see above), or "" */
} dist_launch;

/* Describe the launch from `env`, a NULL-terminated list of "NAME=value"
 * strings (as `environ`). `forced` = DIST_LAUNCH_AUTO applies the precedence
 * above; any other value reads only that launcher's variables. Malformed values
 * (non-numeric, not canonical, negative, overflow, empty, rank >= size, local
 * rank >= local size, a required variable missing) return DIST_ERR_ENVIRONMENT
 * naming the variable and quoting its value. `out` is written only on
 * success. Pure; local. */
dist_status dist_launch_detect(const char *const *env, dist_launch_method forced, dist_launch *out);

/* "SINGLE", "ENV", "SLURM", "OPENMPI", "MPICH" ("AUTO" for DIST_LAUNCH_AUTO). */
const char *dist_launch_method_name(dist_launch_method method);

/* Inverse of dist_launch_method_name, case-insensitive; also accepts
 * "torchrun" for ENV and "mpirun" for OPENMPI. Local. */
dist_status dist_launch_method_parse(const char *name, dist_launch_method *out);

#ifdef __cplusplus
}
#endif
#endif
