/* libFuzzer target for launch detection (lib/launch/launch.c, lib/core/env.c).
 *
 * The input becomes an environment (tests/fuzz/env_input.h: one "NAME=value"
 * per line). dist_launch_detect runs with every method, AUTO included. A
 * failure must be DIST_ERR_ENVIRONMENT with a message naming the launch
 * method and leave the output alone. A success is checked against a
 * reference written here from the header's rules: the method AUTO picks,
 * 0 <= rank < size, local values inside the world, every number read equal
 * to its variable's text (only canonical integers are accepted), the master
 * address and port, the batch case, mpi_can_join, no last error written;
 * the GPU-allocation reading (dist__gpus_allocated) quotes printably.
 * AUTO must equal the forced method it picks, and each call must repeat
 * exactly. Any violation aborts, so the fuzzer reports it.
 *
 * Build and run: make fuzz (or make check: tests/fuzz/run.sh). Seeds:
 * tests/fuzz/corpus/fuzz_launch/. */
#include <stdint.h>
#include <string.h>

#include "distmgr.h"
#include "core/internal.h"
#include "env_input.h"

typedef struct ref_vars {
  dist_launch_method method;
  const char *rank, *size, *size_alt, *local_rank, *local_size;
} ref_vars;

/* In AUTO's order of precedence. */
static const ref_vars REF[] = {
    {DIST_LAUNCH_OPENMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {DIST_LAUNCH_MPICH, "PMI_RANK", "PMI_SIZE", NULL, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {DIST_LAUNCH_ENV, "RANK", "WORLD_SIZE", NULL, "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {DIST_LAUNCH_SLURM, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", NULL},
};
#define NREF (sizeof REF / sizeof REF[0])

static const ref_vars *ref_of(dist_launch_method m) {
  for (size_t i = 0; i < NREF; i++)
    if (REF[i].method == m) return &REF[i];
  return NULL;
}

static dist_launch_method expected_method(char *const *env, dist_launch_method forced) {
  if (forced != DIST_LAUNCH_AUTO) return forced;
  if (env_lookup(env, "TORCHELASTIC_RUN_ID") && env_lookup(env, "RANK")) return DIST_LAUNCH_ENV;
  for (size_t i = 0; i < NREF; i++)
    if (env_lookup(env, REF[i].rank)) return REF[i].method;
  return DIST_LAUNCH_SINGLE;
}

static void check_success(char *const *env, dist_launch_method forced, const dist_launch *l) {
  dist_launch_method m = expected_method(env, forced);
  CHECK(l->method == m);
  CHECK(l->size >= 1 && l->rank >= 0 && l->rank < l->size);
  CHECK(l->local_rank == -1 || (l->local_rank >= 0 && l->local_rank < l->size));
  CHECK(l->local_size == -1 || (l->local_size >= 1 && l->local_size <= l->size));
  CHECK(l->local_rank < 0 || l->local_size < 0 || l->local_rank < l->local_size);
  CHECK(memchr(l->master_addr, '\0', sizeof l->master_addr) != NULL);
  CHECK(memchr(l->note, '\0', sizeof l->note) != NULL);
  CHECK(memchr(l->warning, '\0', sizeof l->warning) != NULL);
  CHECK(l->master_port >= 0 && l->master_port <= 65535);
  CHECK(l->slurm_batch == 0 || l->slurm_batch == 1);
  CHECK(l->mpi_can_join == !(m == DIST_LAUNCH_ENV && l->size > 1));
  if (forced == DIST_LAUNCH_SINGLE) CHECK(l->note[0] == '\0');

  /* Master address and port. */
  const char *port = env_lookup(env, "MASTER_PORT"), *addr = env_lookup(env, "MASTER_ADDR");
  if (port) CHECK(canonical_is(port, l->master_port) && l->master_port >= 1);
  else CHECK(l->master_port == 0);
  if ((!addr || !*addr) && m == DIST_LAUNCH_SLURM && env_lookup(env, "SLURM_LAUNCH_NODE_IPADDR"))
    addr = env_lookup(env, "SLURM_LAUNCH_NODE_IPADDR");
  CHECK(strcmp(l->master_addr, addr ? addr : "") == 0);

  int batch = m == DIST_LAUNCH_SLURM && !env_lookup(env, "SLURM_STEP_ID") && !env_lookup(env, "SLURM_STEPID");
  CHECK(l->slurm_batch == batch);
  if (m == DIST_LAUNCH_SINGLE || batch) {
    CHECK(l->rank == 0 && l->size == 1 && l->local_rank == 0 && l->local_size == 1);
    if (batch) { /* SLURM_PROCID must still be a valid rank */
      const char *procid = env_lookup(env, "SLURM_PROCID");
      CHECK(procid && procid[0] >= '0' && procid[0] <= '9');
      CHECK(canonical_is(procid, strtol(procid, NULL, 10)));
    }
    return;
  }
  /* Every number read is its variable's text, canonically. */
  const ref_vars *v = ref_of(m);
  CHECK(v != NULL);
  CHECK(canonical_is(env_lookup(env, v->rank), l->rank));
  const char *size = env_lookup(env, v->size);
  if (!size && v->size_alt) size = env_lookup(env, v->size_alt);
  CHECK(canonical_is(size, l->size));
  const char *lr = v->local_rank ? env_lookup(env, v->local_rank) : NULL;
  const char *ls = v->local_size ? env_lookup(env, v->local_size) : NULL;
  CHECK(lr ? canonical_is(lr, l->local_rank) : l->local_rank == -1);
  CHECK(ls ? canonical_is(ls, l->local_size) : l->local_size == -1);
}

static void check_failure(char *const *env, dist_launch_method forced, dist_status st, const dist_launch *l,
                          const dist_launch *sentinel) {
  CHECK(st == DIST_ERR_ENVIRONMENT);
  const char *msg = dist_last_error();
  CHECK(msg[0] != '\0');
  CHECK(strchr(msg, '\n') == NULL); /* values are quoted with escapes */
  char ctx[64];
  snprintf(ctx, sizeof ctx, "(launch method %s)", dist_launch_method_name(expected_method(env, forced)));
  CHECK(strstr(msg, ctx) != NULL);
  CHECK(memcmp(l, sentinel, sizeof *l) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char **env = env_from_input(data, size);
  const char *const *cenv = (const char *const *)env;
  static const dist_launch_method methods[] = {DIST_LAUNCH_AUTO,  DIST_LAUNCH_SINGLE,  DIST_LAUNCH_ENV,
                                               DIST_LAUNCH_SLURM, DIST_LAUNCH_OPENMPI, DIST_LAUNCH_MPICH};
  dist_launch results[6];
  dist_status status[6];
  for (int i = 0; i < 6; i++) {
    dist_launch sentinel, again;
    memset(&sentinel, 0xA5, sizeof sentinel);
    results[i] = sentinel;
    dist_set_error(DIST_SUCCESS, "%s", "");
    status[i] = dist_launch_detect(cenv, methods[i], &results[i]);
    if (status[i] == DIST_SUCCESS) {
      CHECK(dist_last_error()[0] == '\0'); /* notes are made quietly */
      check_success(env, methods[i], &results[i]);
    } else {
      check_failure(env, methods[i], status[i], &results[i], &sentinel);
    }
    /* The same call again gives the same answer. */
    again = sentinel;
    CHECK(dist_launch_detect(cenv, methods[i], &again) == status[i]);
    CHECK(memcmp(&again, &results[i], sizeof again) == 0);
  }
  if (status[0] == DIST_SUCCESS) {
    int tasks = dist__launch_node_tasks(cenv, &results[0]);
    CHECK(tasks == -1 || tasks >= 0);
  }
  /* GPU allocation: a quoted variable exactly when given, printable, bounded. */
  char what[96];
  memset(what, 0x5A, sizeof what);
  int given = dist__gpus_allocated(cenv, what, sizeof what);
  CHECK(given == 0 || given == 1);
  CHECK(memchr(what, '\0', sizeof what) != NULL);
  CHECK(given == (what[0] != '\0'));
  for (const char *c = what; *c; c++) CHECK((unsigned char)*c >= 32 && *c != 127);
  /* AUTO is the forced method it picks (SINGLE differs only in its note). */
  dist_launch_method picked = expected_method(env, DIST_LAUNCH_AUTO);
  int j = (int)picked; /* methods[] is in enum order */
  CHECK(methods[j] == picked);
  CHECK(status[0] == status[j]);
  if (status[0] == DIST_SUCCESS && picked != DIST_LAUNCH_SINGLE)
    CHECK(memcmp(&results[0], &results[j], sizeof results[0]) == 0);
  free(env);
  return 0;
}
