/* Launch detection (pure): environment -> dist_launch. Precedence is
 * documented in include/distmgr/launch.h. */
#include "core/internal.h"

#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Variables each launcher sets; NULL where it has none. */
typedef struct launcher_vars {
  dist_launch_method method;
  const char *rank, *size, *size_alt, *local_rank, *local_size;
} launcher_vars;

static const launcher_vars LAUNCHERS[] = {
    {DIST_LAUNCH_OPENMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {DIST_LAUNCH_MPICH, "PMI_RANK", "PMI_SIZE", NULL, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {DIST_LAUNCH_ENV, "RANK", "WORLD_SIZE", NULL, "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {DIST_LAUNCH_SLURM, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", NULL},
};
#define NLAUNCHERS (sizeof LAUNCHERS / sizeof LAUNCHERS[0])

static const launcher_vars *vars_of(dist_launch_method m) {
  for (size_t i = 0; i < NLAUNCHERS; i++)
    if (LAUNCHERS[i].method == m) return &LAUNCHERS[i];
  return NULL;
}

const char *dist_launch_method_name(dist_launch_method m) {
  switch (m) {
    case DIST_LAUNCH_AUTO: return "AUTO";
    case DIST_LAUNCH_SINGLE: return "SINGLE";
    case DIST_LAUNCH_ENV: return "ENV";
    case DIST_LAUNCH_SLURM: return "SLURM";
    case DIST_LAUNCH_OPENMPI: return "OPENMPI";
    case DIST_LAUNCH_MPICH: return "MPICH";
  }
  return "UNKNOWN";
}

dist_status dist_launch_method_parse(const char *name, dist_launch_method *out) {
  static const struct { const char *name; dist_launch_method m; } names[] = {
      {"AUTO", DIST_LAUNCH_AUTO},   {"SINGLE", DIST_LAUNCH_SINGLE},   {"ENV", DIST_LAUNCH_ENV},
      {"TORCHRUN", DIST_LAUNCH_ENV}, {"SLURM", DIST_LAUNCH_SLURM},    {"OPENMPI", DIST_LAUNCH_OPENMPI},
      {"MPIRUN", DIST_LAUNCH_OPENMPI}, {"MPICH", DIST_LAUNCH_MPICH}};
  if (!name || !out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_launch_method_parse: NULL argument");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(name, names[i].name) == 0) {
      *out = names[i].m;
      return DIST_SUCCESS;
    }
  return dist__error(DIST_ERR_INVALID_ARGUMENT,
                     "unknown launch method '%s' (expected AUTO, SINGLE, ENV, SLURM, OPENMPI or MPICH)", name);
}

static dist_status get_int(const char *const *env, const char *var, long min, const char *ctx, int *out) {
  return dist__parse_int(DIST_ERR_ENVIRONMENT, var, dist__env_get(env, var), min, INT_MAX, ctx, out);
}

/* Rank and size of launcher `v`; `batch` SLURM scripts are rank 0 of 1. */
static dist_status read_rank_size(const char *const *env, const launcher_vars *v, const char *ctx, dist_launch *l) {
  const char *size_var = dist__env_get(env, v->size) || !v->size_alt ? v->size : v->size_alt;
  if (!dist__env_get(env, v->rank))
    return dist__error(DIST_ERR_ENVIRONMENT, "%s is missing (%s)", v->rank, ctx);
  if (!dist__env_get(env, size_var))
    return dist__error(DIST_ERR_ENVIRONMENT, "%s is missing%s%s%s (%s)", v->size, v->size_alt ? " (and so is " : "",
                       v->size_alt ? v->size_alt : "", v->size_alt ? ")" : "", ctx);
  DIST_CHECK(get_int(env, v->rank, 0, ctx, &l->rank));
  DIST_CHECK(get_int(env, size_var, 1, ctx, &l->size));
  if (l->rank >= l->size)
    return dist__error(DIST_ERR_ENVIRONMENT, "%s=%d is not below %s=%d (%s)", v->rank, l->rank, size_var, l->size,
                       ctx);
  return DIST_SUCCESS;
}

static dist_status read_local(const char *const *env, const launcher_vars *v, const char *ctx, dist_launch *l) {
  l->local_rank = l->local_size = -1;
  if (v->local_rank && dist__env_get(env, v->local_rank)) DIST_CHECK(get_int(env, v->local_rank, 0, ctx, &l->local_rank));
  if (v->local_size && dist__env_get(env, v->local_size)) DIST_CHECK(get_int(env, v->local_size, 1, ctx, &l->local_size));
  if (l->local_rank >= l->size)
    return dist__error(DIST_ERR_ENVIRONMENT, "%s=%d is not below the world size %d (%s)", v->local_rank, l->local_rank,
                       l->size, ctx);
  if (l->local_size > l->size)
    return dist__error(DIST_ERR_ENVIRONMENT, "%s=%d exceeds the world size %d (%s)", v->local_size, l->local_size,
                       l->size, ctx);
  if (l->local_rank >= 0 && l->local_size > 0 && l->local_rank >= l->local_size)
    return dist__error(DIST_ERR_ENVIRONMENT, "%s=%d is not below %s=%d (%s)", v->local_rank, l->local_rank,
                       v->local_size, l->local_size, ctx);
  return DIST_SUCCESS;
}

static dist_status read_master(const char *const *env, dist_launch_method m, const char *ctx, dist_launch *l) {
  const char *var = "MASTER_ADDR", *addr = dist__env_get(env, var);
  /* SLURM: the launch node runs rank 0's srun; absent under plain sbatch. */
  if ((!addr || !*addr) && m == DIST_LAUNCH_SLURM) addr = dist__env_get(env, var = "SLURM_LAUNCH_NODE_IPADDR");
  if (addr && strlen(addr) >= DIST_ADDR_MAX)
    return dist__error(DIST_ERR_ENVIRONMENT, "%s is %zu characters; the limit is %d (%s)", var, strlen(addr),
                       DIST_ADDR_MAX - 1, ctx);
  snprintf(l->master_addr, sizeof l->master_addr, "%s", addr ? addr : "");
  l->master_port = 0;
  if (dist__env_get(env, "MASTER_PORT"))
    return dist__parse_int(DIST_ERR_ENVIRONMENT, "MASTER_PORT", dist__env_get(env, "MASTER_PORT"), 1, 65535, ctx,
                           &l->master_port);
  return DIST_SUCCESS;
}

static const char *size_value(const char *const *env, const launcher_vars *v) {
  const char *s = dist__env_get(env, v->size);
  return s || !v->size_alt ? s : dist__env_get(env, v->size_alt);
}

/* A launcher is present when its rank variable is set: the rank is what a
 * launcher sets per process. A size variable alone (WORLD_SIZE left in the
 * shell, SLURM_NTASKS in an salloc shell) marks nothing. */
static int present(const char *const *env, const launcher_vars *v) { return dist__env_get(env, v->rank) != NULL; }

/* Set but not chosen: worth a note when its rank or size variable is set,
 * except SLURM's task count alone, which every salloc shell has. */
static int mentioned(const char *const *env, const launcher_vars *v) {
  return present(env, v) || (v->method != DIST_LAUNCH_SLURM && size_value(env, v) != NULL);
}

/* Does text `value` mean the number `want`, as the program that set it
 * would read it ("01" is 1)? Parsed quietly: a variable we ignore must not
 * overwrite the thread's last error. */
static int means(const char *value, int want) {
  long v;
  return dist__parse_int_loose(value, &v) && v == want;
}

/* Note other launchers' variables that disagree with the chosen launch. */
static void note_disagreement(const char *const *env, dist_launch *l) {
  for (size_t i = 0; i < NLAUNCHERS; i++) {
    const launcher_vars *v = &LAUNCHERS[i];
    const char *rv = dist__env_get(env, v->rank), *sv = size_value(env, v);
    if (v->method == l->method || !mentioned(env, v)) continue;
    if (rv && sv && means(rv, l->rank) && means(sv, l->size)) continue;
    if (l->method == DIST_LAUNCH_SINGLE)
      snprintf(l->note, sizeof l->note, "%s variables ignored (rank %.40s, size %.40s): without %s no launcher is "
               "detected; running as a single process", dist_launch_method_name(v->method), rv ? rv : "unset",
               sv ? sv : "unset", v->rank);
    else
      snprintf(l->note, sizeof l->note, "%s variables ignored (rank %.40s, size %.40s): %s takes precedence",
               dist_launch_method_name(v->method), rv ? rv : "unset", sv ? sv : "unset",
               dist_launch_method_name(l->method));
    return;
  }
}

/* SINGLE forced while a launcher says its world has n > 1 processes: each
 * of them will run alone. (A batch script's SLURM variables announce one.) */
static void warn_forced_single(const char *const *env, dist_launch *l) {
  for (size_t i = 0; i < NLAUNCHERS; i++) {
    const launcher_vars *v = &LAUNCHERS[i];
    const char *rv = dist__env_get(env, v->rank), *sv = size_value(env, v);
    long n;
    if (!rv || !sv || !dist__parse_int_loose(sv, &n) || n < 2) continue;
    if (v->method == DIST_LAUNCH_SLURM && !dist__env_get(env, "SLURM_STEP_ID") && !dist__env_get(env, "SLURM_STEPID"))
      continue;
    snprintf(l->warning, sizeof l->warning,
             "launch method SINGLE was forced (DIST_INIT_METHOD), but %s says rank %.20s of %ld: every process "
             "started by that launcher runs alone, as %ld independent one-process jobs",
             dist_launch_method_name(v->method), rv, n, n);
    return;
  }
}

static dist_status detect_method(const char *const *env, dist_launch_method m, dist_launch *l) {
  char ctx[64];
  snprintf(ctx, sizeof ctx, "launch method %s", dist_launch_method_name(m));
  memset(l, 0, sizeof *l);
  l->method = m;
  l->mpi_can_join = 1;
  if (m == DIST_LAUNCH_SINGLE) {
    l->rank = 0;
    l->size = l->local_size = 1;
    l->local_rank = 0;
    return read_master(env, m, ctx, l);
  }
  const launcher_vars *v = vars_of(m);
  if (m == DIST_LAUNCH_SLURM && !dist__env_get(env, "SLURM_STEP_ID") && !dist__env_get(env, "SLURM_STEPID")) {
    /* Batch script: one process, whatever SLURM_NTASKS says about the allocation. */
    if (!dist__env_get(env, "SLURM_PROCID")) return dist__error(DIST_ERR_ENVIRONMENT, "SLURM_PROCID is missing (%s)", ctx);
    int procid;
    DIST_CHECK(get_int(env, "SLURM_PROCID", 0, ctx, &procid));
    l->slurm_batch = 1;
    l->rank = 0;
    l->size = l->local_size = 1;
    l->local_rank = 0;
    const char *tasks = size_value(env, v);
    long n;
    if (tasks && dist__parse_int_loose(tasks, &n) && n > 1)
      snprintf(l->warning, sizeof l->warning,
               "SLURM_NTASKS=%ld but this is the batch script itself, not an srun step: only this one process runs; "
               "start the program with srun (or mpirun) inside the script to run %ld ranks", n, n);
  } else {
    DIST_CHECK(read_rank_size(env, v, ctx, l));
    DIST_CHECK(read_local(env, v, ctx, l));
  }
  /* torchrun processes have no MPI runtime to join (launchers.md). */
  if (m == DIST_LAUNCH_ENV && l->size > 1) l->mpi_can_join = 0;
  DIST_CHECK(read_master(env, m, ctx, l));
  note_disagreement(env, l);
  return DIST_SUCCESS;
}

dist_status dist_launch_detect(const char *const *env, dist_launch_method forced, dist_launch *out) {
  if (!out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_launch_detect: out is NULL");
  static const char *const empty[] = {NULL};
  if (!env) env = empty;
  dist_launch_method m = forced;
  if (m < DIST_LAUNCH_AUTO || m > DIST_LAUNCH_MPICH)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_launch_detect: unknown method %d", (int)m);
  if (m == DIST_LAUNCH_AUTO) {
    m = DIST_LAUNCH_SINGLE;
    /* torchrun's own children: an outer launcher's variables (srun's PMI_RANK,
     * mpirun's OMPI_*) were inherited from the task that ran torchrun. */
    if (dist__env_get(env, "TORCHELASTIC_RUN_ID") && present(env, vars_of(DIST_LAUNCH_ENV))) m = DIST_LAUNCH_ENV;
    for (size_t i = 0; i < NLAUNCHERS && m == DIST_LAUNCH_SINGLE; i++)
      if (present(env, &LAUNCHERS[i])) {
        m = LAUNCHERS[i].method;
        break;
      }
  }
  dist_launch l;
  DIST_CHECK(detect_method(env, m, &l));
  /* Detected, not forced: say which leftover variables were passed over. */
  if (forced == DIST_LAUNCH_AUTO && m == DIST_LAUNCH_SINGLE) note_disagreement(env, &l);
  if (forced == DIST_LAUNCH_SINGLE) warn_forced_single(env, &l);
  *out = l;
  return DIST_SUCCESS;
}

/* A value quoted in a message: at most 40 characters, control bytes as '?'. */
static void quote(char *out, size_t n, const char *name, const char *value) {
  char v[41];
  size_t k = 0;
  for (; value[k] && k < sizeof v - 1; k++) v[k] = (unsigned char)value[k] < 32 || value[k] == 127 ? '?' : value[k];
  v[k] = 0;
  snprintf(out, n, "%s=%s%s", name, v, value[k] ? "..." : "");
}

int dist__gpus_allocated(const char *const *env, char *what, size_t n) {
  static const char *const lists[] = {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"};
  static const char *const counts[] = {"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK"};
  snprintf(what, n, "%s", "");
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    const char *v = dist__env_get(env, lists[i]);
    /* Empty, "-1" and SLURM's "NoDevFiles" mean no device. */
    if (v && *v && strcmp(v, "NoDevFiles") != 0 && strncmp(v, "-1", 2) != 0) return quote(what, n, lists[i], v), 1;
  }
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    const char *v = dist__env_get(env, counts[i]);
    long k;
    if (v && dist__parse_int_loose(v, &k) && k > 0) return quote(what, n, counts[i], v), 1;
  }
  return 0;
}

int dist__launch_node_tasks(const char *const *env, const dist_launch *l) {
  if (l->local_size > 0) return l->local_size;
  const char *list = dist__env_get(env, "SLURM_STEP_TASKS_PER_NODE");
  long node;
  if (l->method != DIST_LAUNCH_SLURM || l->slurm_batch || !list ||
      !dist__parse_int_loose(dist__env_get(env, "SLURM_NODEID"), &node) || node < 0)
    return -1;
  /* "4", "2(x3),1": tasks per node, runs of equal nodes as N(xK). */
  const char *p = list;
  while (*p) {
    char *end;
    long tasks = strtol(p, &end, 10), times = 1;
    if (end == p || tasks < 0 || tasks > INT_MAX) return -1;
    p = end;
    if (strncmp(p, "(x", 2) == 0) {
      times = strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || times < 1) return -1;
      p = end + 1;
    }
    if (node < times) return (int)tasks;
    node -= times;
    if (*p == ',') p++;
    else if (*p) return -1;
  }
  return -1;
}
