/* Internal declarations shared by the files of lib/ (prefix dist__). */
#ifndef DISTMGR_INTERNAL_H
#define DISTMGR_INTERNAL_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stddef.h>

#include "distmgr.h"

/* Record `fmt` as this thread's last error and return `status`. Called by the
 * place that detects an error; callers pass the code up. */
dist_status dist__error(dist_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empties this thread's last error: code that runs a user's function and
 * must tell whether it set a message. */
void dist__error_clear(void);
/* Put back a message saved from dist_last_error() (not logged): after a
 * step that failed only on the way to a success (a wait's slice). */
void dist__error_restore(const char *text);

/* Prefix this thread's last error with context ("subgroup 'g' of 'world'")
 * and return `status`. */
dist_status dist__error_context(dist_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Is `code` one of the dist_status values? Decoded codes from other ranks
 * are checked with it before use. */
int dist__status_valid(long code);

/* Return on failure: DIST_CHECK(call) passes the code up. */
#define DIST_CHECK(call)                    \
  do {                                      \
    dist_status dist__s = (call);           \
    if (dist__s != DIST_SUCCESS) return dist__s; \
  } while (0)

/* Value of NAME in a NULL-terminated "NAME=value" list, or NULL. */
const char *dist__env_get(const char *const *env, const char *name);

/* Strict decimal integer in [min, max]. Errors name `var`, its value and
 * `context` ("launch method ENV"); status is DIST_ERR_ENVIRONMENT or
 * DIST_ERR_SETTING as the caller chooses. */
dist_status dist__parse_int(dist_status status, const char *var, const char *value, long min, long max,
                            const char *context, int *out);

/* 1 and *out when `value` is a whole number as other programs read it
 * (strtol: white space, '+', leading zeros allowed); else 0. Quiet: no
 * last-error message. For comparing variables that are ignored. */
int dist__parse_int_loose(const char *value, long *out);

/* A public option struct (size_t struct_size first) as the library reads it:
 * README, "Option structs". Each module describes its own with
 * DIST__OPTIONS_KIND beside the entry points that take it. */
typedef struct dist__options_kind {
  const char *name;     /* "dist_ddp_options" */
  const char *init;     /* "DIST_DDP_OPTIONS_INIT" */
  size_t size;          /* sizeof in this library */
  size_t min_size;      /* struct_size and the first field: every version has them */
  const void *defaults; /* made by `init` */
  /* An option struct embedded by value (dist_daso_options.local), or NULL.
   * The caller's copy of it is as long as its own struct_size says, and the
   * fields after it start where that copy ends. */
  const struct dist__options_kind *member;
  const char *member_name;
  size_t member_offset;
} dist__options_kind;

#define DIST__OPTIONS_KIND(type, init_name, first_field, defaults_ptr)                                    \
  {#type, init_name, sizeof(type), offsetof(type, first_field) + sizeof(((type *)0)->first_field), defaults_ptr, \
   NULL, NULL, 0}

/* Copy the caller's option struct `in` (NULL: the defaults) into `out`, a
 * whole struct of this library's size: the caller's fields where its
 * struct_size covers them (an older header), the defaults for the rest; the
 * bytes of a newer header beyond this library's fields must all be zero.
 * out's struct_size (and its member's) is this library's. Errors
 * (DIST_ERR_INVALID_ARGUMENT, prefixed with `what`): struct_size 0 or too
 * small (says to initialize with the INIT macro), or a non-zero byte past
 * this library's fields (names the struct and the byte's offset). `out` is
 * written only on success. Local. */
dist_status dist__options_copy(const dist__options_kind *kind, const void *in, void *out, const char *what);

/* Logging: the manager tells the log layer who we are. */
void dist__log_set_rank(int rank, int size);

/* Settings read once from an environment (see settings.c for the table). */
typedef struct dist__settings {
  dist_launch_method init_method; /* DIST_INIT_METHOD */
  dist_log_level log_level;       /* DIST_LOG_LEVEL */
  int device;                     /* DIST_DEVICE: -2 auto, -1 cpu, >= 0 CUDA index */
  int ranks_per_node;             /* DIST_RANKS_PER_NODE: 0 = from MPI shared memory */
  int master_port;                /* DIST_MASTER_PORT */
  int verify;                     /* DIST_VERIFY: cross-rank argument check before collectives */
  int round_shm;                  /* DIST_ROUND: 1 = auto (shared memory on one node), 0 = p2p */
  int shm_data;                   /* DIST_SHM_DATA: 1 = auto (node-local groups' host data through shared memory without MPI), 0 = off */
  int cuda_backend;               /* DIST_CUDA_BACKEND: DIST__CUDA_* */
  long long nb_allreduce_min;     /* DIST_NB_ALLREDUCE_MIN: bytes; DIST__NB_AUTO or DIST__NB_OFF */
  double timeout;                 /* DIST_TIMEOUT: seconds; 0 = off */
  int store_dialect;              /* DIST_STORE_DIALECT: -1 auto, else a dist__store_dialect */
  int store_external;             /* DIST_STORE_SERVER: 1 = external */
  int host_engine;                /* DIST_HOST_ENGINE: DIST__HOST_* */
  int rpc_tiny;                   /* DIST_RPC_TINY: 1 = small remote calls in the tiny layout */
} dist__settings;

#define DIST__HOST_AUTO 0 /* MPI, and Gloo for the torchrun-style launches MPI cannot join */
#define DIST__HOST_MPI 1
#define DIST__HOST_GLOO 2 /* launches without MPI: the store rendezvous and Gloo */

#define DIST__NB_AUTO (-1LL)
#define DIST__NB_OFF (-2LL)

#define DIST__CUDA_AUTO 0   /* NCCL when built with it, else staged */
#define DIST__CUDA_NCCL 1
#define DIST__CUDA_STAGED 2 /* through host memory and MPI */

#define DIST__DEVICE_AUTO (-2)
#define DIST__DEVICE_CPU (-1)
#define DIST__DEVICE_CUDA (-3) /* DIST_DEVICE=cuda: a GPU or an error */

dist_status dist__settings_read(const char *const *env, dist__settings *out);
/* One DIST_LOG_WARN line for each DIST_* name in `env` that is not a
 * setting, with the closest setting's name when it is a likely typo. */
void dist__settings_warn_unknown(const char *const *env);
/* Every setting of the table with the value in force, as the environment
 * gives it or "(default)": "DIST_INIT_METHOD=AUTO (default) DIST_VERIFY=0 ...".
 * Truncated to n bytes; returns buf. */
char *dist__settings_line(const char *const *env, char *buf, size_t n);
/* The setting name closest to `name` (edit distance, at most 3) into `out`;
 * returns the distance, or -1 (and "") when none is that close. Pure. */
int dist__settings_closest(const char *name, char *out, size_t n);
/* 1 when setting i (table order) must be the same on every rank, with its
 * name and value as parsed in s; 0 otherwise or out of range. */
int dist__settings_must_match(int i, const dist__settings *s, const char **name, double *value);

/* Device choice from the DIST_DEVICE setting, the number of visible CUDA
 * devices (`why`: the reason when 0) and the local rank. Pure. */
dist_status dist__device_choose(int setting, int visible, const char *why, int local_rank, dist_device *out);
/* Visible CUDA devices; 0 without CUDA or devices, with the reason in `why`. */
int dist__device_visible_count(char *why, size_t n);
/* Did the launcher or the environment give this process GPUs
 * (CUDA_VISIBLE_DEVICES naming devices, SLURM's GPU variables)? Then 1 with
 * the variable and its value in `what`. Pure. */
int dist__gpus_allocated(const char *const *env, char *what, size_t n);
/* Processes the launcher starts on this node: its local size, or for an srun
 * step SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID; -1 if unknown.
 * Pure. */
int dist__launch_node_tasks(const char *const *env, const dist_launch *l);
/* With MPICH, PMI_FD must name an open descriptor (its MPI_Init aborts
 * otherwise): DIST_ERR_LAUNCH_MISMATCH naming who closed it. No MPI call but
 * MPI_Get_library_version. */
dist_status dist__launch_check_pmi_fd(const char *const *env);
dist_status dist__device_select(const dist_device *d); /* cudaSetDevice for CUDA */
/* A key equal on two ranks only when they drive one physical GPU (a hash of
 * its UUID, unique across nodes); 0 for the CPU. */
uint64_t dist__device_key(const dist_device *d, int rank); /* rank: for a key no other rank has */
/* Do two of the n members (world ranks) drive one GPU? Then 1, with the first
 * such pair of world ranks in *a < *b. Pure. */
int dist__device_shared(const uint64_t *keys, const int *members, int n, int *a, int *b);
/* The CUDA backend for a group: DIST__CUDA_NCCL or DIST__CUDA_STAGED from the
 * DIST_CUDA_BACKEND choice, whether NCCL was built, and whether two members
 * (world ranks a, b) share a GPU, which NCCL refuses. Auto then means staged;
 * a forced nccl is an error naming the group and the ranks. Pure. */
dist_status dist__cuda_backend_pick(int choice, int built_nccl, int shared, const char *group, int a, int b,
                                    int *which);

#endif
