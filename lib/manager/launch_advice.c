/* Launches that cannot work, told as what is true and what to do: torchrun
 * (alone or under srun), and a launcher whose processes MPI did not join
 * (a program built with another MPI than the launcher's, or srun with the
 * wrong PMI plugin). Called by initialize; no communication. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "manager/state.h"

typedef enum { MPI_OTHER, MPI_OPEN, MPI_MPICH } mpi_family;

/* The MPI this program runs, as its library names itself: "Open MPI v4.1.4"
 * (first line up to the comma), "MPICH 4.0.2" ("MPICH Version:  4.0.2"). */
static mpi_family mpi_library(char *out, size_t n) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) v[0] = 0; /* allowed before MPI_Init; unknown then */
  v[strcspn(v, ",\n")] = 0;
  if (strncmp(v, "MPICH Version:", 14) == 0) {
    snprintf(out, n, "MPICH %s", v + 14 + strspn(v + 14, " \t"));
    return MPI_MPICH;
  }
  snprintf(out, n, "%s", v[0] ? v : "unknown MPI");
  return strstr(v, "Open MPI") ? MPI_OPEN : strstr(v, "MPICH") ? MPI_MPICH : MPI_OTHER;
}

/* How processes of this program's MPI are started. */
static const char *own_launchers(mpi_family f) {
  switch (f) {
    case MPI_OPEN: return "Open MPI's mpirun, or srun --mpi=pmix";
    case MPI_MPICH: return "MPICH's mpiexec (Hydra), or srun --mpi=pmi2";
    default: return "the mpiexec of the MPI it was built with";
  }
}

static const char *env_or(const char *const *env, const char *name, const char *fallback) {
  const char *v = dist__env_get(env, name);
  return v && *v ? v : fallback;
}

static int under_srun(const char *const *env) {
  return dist__env_get(env, "SLURM_PROCID") &&
         (dist__env_get(env, "SLURM_STEP_ID") || dist__env_get(env, "SLURM_STEPID"));
}

/* Why MPI must run torchrun's processes here (Gloo would, otherwise), and
 * the way out that does not change the launch. */
static const char *why_mpi(void) {
#ifdef HAVE_GLOO
  return "DIST_HOST_ENGINE=mpi, but MPI cannot join torchrun's processes (torchrun starts them without an MPI "
         "runtime)";
#else
  return "this distmgr was built without Gloo (configure found no libgloo-dev), and MPI cannot join torchrun's "
         "processes (torchrun starts them without an MPI runtime)";
#endif
}

static const char *way_out(void) {
#ifdef HAVE_GLOO
  return "; or leave DIST_HOST_ENGINE unset: torchrun's processes then run on Gloo, without MPI";
#else
  return "; or rebuild distmgr with libgloo-dev: torchrun's processes then run on Gloo, without MPI";
#endif
}

dist_status dist__launch_refuse_torchrun(const dist_launch *l, const char *const *env) {
  char lib[96];
  mpi_family f = mpi_library(lib, sizeof lib);
  if (under_srun(env)) {
    /* MPICH joins srun through PMI-2, whose connection torchrun closes. */
    char why[256] = "";
    if (f == MPI_MPICH)
      snprintf(why, sizeof why, "; it also closes the PMI connection srun gives each task, so this program's MPI "
               "(%s) cannot start under torchrun at all", lib);
    const char *works = f == MPI_MPICH ? "" : ", or keep torchrun with one process per srun task (--nproc-per-node=1) "
                                              "and set DIST_INIT_METHOD=SLURM";
    return dist__error(DIST_ERR_UNSUPPORTED,
                       "launched by torchrun under srun (torchrun rank %d of %d, srun task %.16s of %.16s): %s%s; "
                       "what works with MPI: let srun start one process per rank (srun -n %d --mpi=%s PROGRAM)%s%s",
                       l->rank, l->size, env_or(env, "SLURM_PROCID", "?"), env_or(env, "SLURM_NTASKS", "?"), why_mpi(),
                       why, l->size, f == MPI_MPICH ? "pmi2" : "pmix", works, way_out());
  }
  const char *outer = dist__env_get(env, "OMPI_COMM_WORLD_RANK") ? "OMPI_COMM_WORLD"
                      : dist__env_get(env, "PMI_RANK")           ? "PMI"
                                                                  : NULL;
  if (outer) {
    char rv[32], sv[32];
    snprintf(rv, sizeof rv, "%s_RANK", outer);
    snprintf(sv, sizeof sv, "%s_SIZE", outer);
    return dist__error(DIST_ERR_UNSUPPORTED,
                       "launched by torchrun under an MPI launcher (torchrun rank %d of %d, %s=%.16s of %s=%.16s): "
                       "%s; what works with MPI: let the MPI launcher start one process per rank (mpirun -n %d "
                       "PROGRAM, or mpiexec -n %d PROGRAM for MPICH)%s",
                       l->rank, l->size, rv, env_or(env, rv, "?"), sv, env_or(env, sv, "?"), why_mpi(), l->size,
                       l->size, way_out());
  }
  return dist__error(DIST_ERR_UNSUPPORTED,
                     "launched by torchrun-style variables (WORLD_SIZE=%d) without an MPI launcher: %s; launch with "
                     "'mpirun -n %d' or 'srun -n %d' instead%s",
                     l->size, why_mpi(), l->size, l->size, way_out());
}

/* MPICH's MPI_Init aborts the process when PMI_FD names a closed file: a
 * parent between the launcher and this process (torchrun, a shell that
 * closes descriptors) dropped the PMI connection the launcher gave it. */
dist_status dist__launch_check_pmi_fd(const char *const *env) {
  char lib[96];
  const char *v = dist__env_get(env, "PMI_FD");
  long fd;
  if (!v || mpi_library(lib, sizeof lib) != MPI_MPICH) return DIST_SUCCESS;
  if (!dist__parse_int_loose(v, &fd) || fd < 0 || fd > INT_MAX)
    return dist__error(DIST_ERR_ENVIRONMENT, "PMI_FD='%.20s' is not a file descriptor number (%s reads it in MPI_Init)",
                       v, lib);
  if (fcntl((int)fd, F_GETFD) != -1) return DIST_SUCCESS;
  return dist__error(DIST_ERR_LAUNCH_MISMATCH,
                     "PMI_FD=%ld is not an open file in this process, so %s's MPI_Init would abort: a process between "
                     "the launcher and this one (torchrun, or a shell that closes descriptors) dropped the PMI "
                     "connection the launcher gave it; start the program directly from its launcher (mpiexec -n N "
                     "PROGRAM, or srun -n N --mpi=pmi2 PROGRAM)",
                     fd, lib);
}

/* MPI sees a world of one, the launcher announced n > 1. */
static dist_status not_joined(const dist_launch *l, const char *const *env, int rank) {
  char lib[96], started[160], fix[320];
  mpi_family f = mpi_library(lib, sizeof lib);
  switch (l->method) {
    case DIST_LAUNCH_OPENMPI:
      snprintf(started, sizeof started, "Open MPI's mpirun started it");
      snprintf(fix, sizeof fix, "%s",
               f == MPI_OPEN ? "was it the mpirun of another Open MPI installation, or a child process of a rank (a shell, "
                               "system())? Start it with the mpirun of the Open MPI it was linked with"
                             : "start it with its own MPI's launcher, or rebuild distmgr and the program with Open MPI "
                               "(mpicc.openmpi)");
      break;
    case DIST_LAUNCH_MPICH:
      snprintf(started, sizeof started, "a PMI launcher (MPICH's mpiexec, or srun --mpi=pmi2) started it");
      snprintf(fix, sizeof fix, "%s",
               f == MPI_MPICH ? "was it the mpiexec of another MPICH installation, or a child process of a rank? Start it "
                                "with the mpiexec of the MPICH it was linked with"
                              : "start it with its own MPI's launcher, or rebuild distmgr and the program with MPICH "
                                "(mpicc.mpich)");
      break;
    default: {
      const char *plugin = env_or(env, "SLURM_MPI_TYPE", "none");
      snprintf(started, sizeof started, "srun started it with the MPI plugin '%.32s'", plugin);
      snprintf(fix, sizeof fix,
               "srun must start it with the plugin its MPI speaks: srun --mpi=%s (srun --mpi=list shows this "
               "cluster's), or set MpiDefault in slurm.conf",
               f == MPI_MPICH ? "pmi2" : "pmix");
      break;
    }
  }
  return dist__error(DIST_ERR_LAUNCH_MISMATCH,
                     "launcher %s says rank %d of %d, but MPI sees a world of 1 process (rank %d): %s, and this "
                     "program's MPI (%s, started by %s) did not join it; %s. DIST_INIT_METHOD cannot help: it would "
                     "run %d independent one-process jobs",
                     dist_launch_method_name(l->method), l->rank, l->size, rank, started, lib, own_launchers(f), fix,
                     l->size);
}

dist_status dist__launch_check_world(const dist_launch *l, int forced, const char *const *env) {
  int rank, size;
  DIST_MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DIST_MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (rank == l->rank && size == l->size) return DIST_SUCCESS;
  if (size == 1 && l->size > 1) return not_joined(l, env, rank);
  const char *why;
  if (l->method == DIST_LAUNCH_ENV && under_srun(env))
    why = forced ? "torchrun's variables describe its own processes, not srun's tasks; with one process per srun task "
                   "use DIST_INIT_METHOD=SLURM"
                 : "torchrun under srun: torchrun's variables describe its own processes, not srun's tasks; with one "
                   "process per srun task set DIST_INIT_METHOD=SLURM";
  else if (forced)
    why = "the forced launch method does not describe this launch; was it forced by mistake?";
  else
    why = "were these variables left over from another launch? then force the right one with DIST_INIT_METHOD";
  return dist__error(DIST_ERR_LAUNCH_MISMATCH, "launcher %s says rank %d of %d, MPI says rank %d of %d (%s)",
                     dist_launch_method_name(l->method), l->rank, l->size, rank, size, why);
}
