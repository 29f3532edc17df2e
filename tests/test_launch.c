/* Unit tests for launch detection: dist_launch_detect() on fake environments,
 * and the launch method names. Pure: no MPI call, no manager. */
#include "core/internal.h"

#include <string.h>

#include "cunit_main.h"

/* Room for the longest fake environment in the tables below, plus the NULL. */
#define ENV_MAX 12

/* ---- helpers ------------------------------------------------------------- */

/* Fill `l` with a pattern no detection produces, so "left unchanged" is
 * visible byte for byte. */
static void fill_sentinel(dist_launch *l) { memset(l, 0xA5, sizeof *l); }

/* Detect, expecting success; `out` starts as the sentinel so every field the
 * checks read was written by the library. */
static void detect_ok(const char *const *env, dist_launch_method forced, dist_launch *out) {
  fill_sentinel(out);
  ASSERT_OK(dist_launch_detect(env, forced, out));
}

/* Print the case name after a failed check so a table row can be found. */
static void name_failure(unsigned failures_before, const char *what) {
  if (CU_get_number_of_failures() != failures_before) fprintf(stderr, "  ^ failing case: %s\n", what);
}

/* Compare every field of `got` except `note` with the expected values. */
static void expect_launch(const char *what, const dist_launch *got, dist_launch_method method, int rank, int size,
                          int local_rank, int local_size, const char *addr, int port, int batch, int join) {
  unsigned before = CU_get_number_of_failures();
  CU_ASSERT_EQUAL(got->method, method);
  CU_ASSERT_EQUAL(got->rank, rank);
  CU_ASSERT_EQUAL(got->size, size);
  CU_ASSERT_EQUAL(got->local_rank, local_rank);
  CU_ASSERT_EQUAL(got->local_size, local_size);
  CU_ASSERT_STRING_EQUAL(got->master_addr, addr);
  CU_ASSERT_EQUAL(got->master_port, port);
  CU_ASSERT_EQUAL(got->slurm_batch, batch);
  CU_ASSERT_EQUAL(got->mpi_can_join, join);
  name_failure(before, what);
}

/* Detection must fail with DIST_ERR_ENVIRONMENT, name `var` in the message and
 * leave `out` exactly as it was. */
static void expect_bad_env(const char *what, const char *const *env, dist_launch_method forced, const char *var) {
  unsigned before = CU_get_number_of_failures();
  dist_launch out, orig;
  fill_sentinel(&out);
  orig = out;
  ASSERT_STATUS(dist_launch_detect(env, forced, &out), DIST_ERR_ENVIRONMENT);
  ASSERT_MSG_HAS(var);
  CU_ASSERT_EQUAL(memcmp(&out, &orig, sizeof out), 0);
  name_failure(before, what);
}

static int note_has(const dist_launch *l, const char *text) { return strstr(l->note, text) != NULL; }

/* ---- each launcher alone --------------------------------------------------- */

static void test_env_torchrun(void) {
  const char *env[] = {"RANK=3",           "WORLD_SIZE=8",        "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                       "MASTER_ADDR=node0", "MASTER_PORT=29500", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  /* torchrun workers have no MPI runtime to join when there are several. */
  expect_launch("torchrun", &l, DIST_LAUNCH_ENV, 3, 8, 1, 2, "node0", 29500, 0, 0);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_slurm_srun_step(void) {
  const char *env[] = {"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1",
                       "SLURM_STEP_ID=0", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  /* SLURM has no local-size variable in the set we read: -1 means unknown. */
  expect_launch("srun", &l, DIST_LAUNCH_SLURM, 5, 8, 1, -1, "10.0.0.1", 0, 0, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_slurm_nprocs(void) {
  /* Older SLURM sets only SLURM_NPROCS. */
  const char *env[] = {"SLURM_PROCID=2", "SLURM_NPROCS=4", "SLURM_LOCALID=0", "SLURM_LAUNCH_NODE_IPADDR=10.0.0.2",
                       "SLURM_STEP_ID=3", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("srun NPROCS", &l, DIST_LAUNCH_SLURM, 2, 4, 0, -1, "10.0.0.2", 0, 0, 1);
}

static void test_slurm_ntasks_preferred(void) {
  /* Both set and different: the current name wins over the legacy one. */
  const char *env[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_NPROCS=9", "SLURM_STEP_ID=0", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.size, 3);
}

static void test_openmpi(void) {
  const char *env[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("openmpi", &l, DIST_LAUNCH_OPENMPI, 2, 4, 0, 2, "", 0, 0, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_mpich(void) {
  const char *env[] = {"PMI_RANK=1", "PMI_SIZE=3", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=3", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("mpich", &l, DIST_LAUNCH_MPICH, 1, 3, 1, 3, "", 0, 0, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_empty_is_single(void) {
  const char *env[] = {NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("empty", &l, DIST_LAUNCH_SINGLE, 0, 1, 0, 1, "", 0, 0, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_unrelated_names_ignored(void) {
  /* Names that merely start or end like RANK must not count as RANK. */
  const char *env[] = {"RANKS=4", "MY_RANK=1", "RANK", "XWORLD_SIZE=2", "OMPI_COMM_WORLD_RANKX=1", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_SINGLE);
}

static void test_boundaries_accepted(void) {
  const char *big[] = {"RANK=2147483646", "WORLD_SIZE=2147483647", "MASTER_PORT=65535", NULL};
  const char *low[] = {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=1", NULL};
  dist_launch l;
  detect_ok(big, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.rank, 2147483646);
  CU_ASSERT_EQUAL(l.size, 2147483647);
  CU_ASSERT_EQUAL(l.master_port, 65535);
  detect_ok(low, DIST_LAUNCH_AUTO, &l);
  expect_launch("low", &l, DIST_LAUNCH_ENV, 0, 1, -1, -1, "", 1, 0, 1);
}

static void test_master_addr_limit(void) {
  /* DIST_ADDR_MAX - 1 characters fit; one more does not. */
  static char fits[16 + DIST_ADDR_MAX], over[16 + DIST_ADDR_MAX];
  int n = snprintf(fits, sizeof fits, "MASTER_ADDR=");
  memset(fits + n, 'a', DIST_ADDR_MAX - 1);
  fits[n + DIST_ADDR_MAX - 1] = '\0';
  memcpy(over, fits, sizeof fits); /* the same, one character longer */
  over[n + DIST_ADDR_MAX - 1] = 'a';
  over[n + DIST_ADDR_MAX] = '\0';
  const char *ok_env[] = {"RANK=0", "WORLD_SIZE=1", fits, NULL};
  const char *bad_env[] = {"RANK=0", "WORLD_SIZE=1", over, NULL};
  dist_launch l;
  detect_ok(ok_env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(strlen(l.master_addr), DIST_ADDR_MAX - 1);
  expect_bad_env("MASTER_ADDR of 256 chars", bad_env, DIST_LAUNCH_AUTO, "MASTER_ADDR");
}

/* ---- precedence ------------------------------------------------------------ */

static void test_mpirun_in_sbatch(void) {
  /* sbatch leaves SLURM_PROCID=0 for the batch script; mpirun's processes
   * inherit it, but OMPI_* is what this process really is. */
  const char *no_step[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_LOCALID=0",
                           "SLURM_NTASKS=2", NULL};
  const char *step[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_LOCALID=0",
                        "SLURM_NTASKS=2", "SLURM_STEP_ID=0", NULL};
  dist_launch l;
  detect_ok(no_step, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_EQUAL(l.rank, 1);
  CU_ASSERT_EQUAL(l.size, 2);
  CU_ASSERT_EQUAL(l.slurm_batch, 0);
  CU_ASSERT_TRUE(note_has(&l, "SLURM"));
  detect_ok(step, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_EQUAL(l.rank, 1);
  CU_ASSERT_EQUAL(l.size, 2);
  CU_ASSERT_TRUE(note_has(&l, "SLURM"));
}

static void test_mpirun_in_sbatch_agreeing(void) {
  /* Rank 0 of 2 matches the stale SLURM values: nothing worth a note. */
  const char *env[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_NTASKS=2", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_plain_sbatch(void) {
  /* The batch script itself: one process, whatever the allocation holds. */
  const char *env[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("sbatch", &l, DIST_LAUNCH_SLURM, 0, 1, 0, 1, "", 0, 1, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_slurm_stepid_alias(void) {
  /* SLURM_STEPID (no underscore) also marks an srun step. */
  const char *env[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEPID=0", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("STEPID", &l, DIST_LAUNCH_SLURM, 1, 2, -1, -1, "", 0, 0, 1);
}

static void test_torchrun_with_ompi(void) {
  const char *disagree[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "RANK=0", "WORLD_SIZE=4", NULL};
  const char *agree[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "RANK=1", "WORLD_SIZE=2", NULL};
  dist_launch l;
  detect_ok(disagree, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_EQUAL(l.rank, 1);
  CU_ASSERT_EQUAL(l.size, 2);
  /* OMPI wins even though torchrun's WORLD_SIZE > 1 would forbid joining. */
  CU_ASSERT_EQUAL(l.mpi_can_join, 1);
  CU_ASSERT_TRUE(note_has(&l, "ENV"));
  detect_ok(agree, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_torchrun_children(void) {
  /* torchrun's children (TORCHELASTIC_RUN_ID) inherit the outer launcher's
   * variables of the task that ran torchrun: srun --mpi=pmi2's PMI_RANK,
   * mpirun's OMPI_*. torchrun's RANK is what they are. */
  const char *pmi2[] = {"TORCHELASTIC_RUN_ID=none", "RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                        "PMI_RANK=1", "PMI_SIZE=2", "PMI_FD=5", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0",
                        NULL};
  const char *ompi[] = {"TORCHELASTIC_RUN_ID=x", "RANK=1", "WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0",
                        "OMPI_COMM_WORLD_SIZE=1", NULL};
  /* The marker alone (no RANK) selects nothing. */
  const char *marker_only[] = {"TORCHELASTIC_RUN_ID=x", "PMI_RANK=1", "PMI_SIZE=2", NULL};
  dist_launch l;
  detect_ok(pmi2, DIST_LAUNCH_AUTO, &l);
  expect_launch("torchrun under srun pmi2", &l, DIST_LAUNCH_ENV, 3, 4, 1, 2, "", 0, 0, 0);
  CU_ASSERT_TRUE(note_has(&l, "MPICH"));
  detect_ok(ompi, DIST_LAUNCH_AUTO, &l);
  expect_launch("torchrun under mpirun", &l, DIST_LAUNCH_ENV, 1, 2, -1, -1, "", 0, 0, 0);
  detect_ok(marker_only, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_MPICH);
  /* Forcing still wins (one torchrun process per srun task). */
  detect_ok(pmi2, DIST_LAUNCH_SLURM, &l);
  expect_launch("forced SLURM", &l, DIST_LAUNCH_SLURM, 1, 2, -1, -1, "", 0, 0, 1);
}

static void test_mpich_over_env_and_slurm(void) {
  /* srun --mpi=pmi2 sets PMI_* next to SLURM_*: MPICH ranks first. */
  const char *env[] = {"PMI_RANK=1", "PMI_SIZE=2", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_MPICH);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_torchrun_in_sbatch(void) {
  const char *env[] = {"RANK=1", "WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_ENV);
  CU_ASSERT_EQUAL(l.rank, 1);
  CU_ASSERT_EQUAL(l.size, 2);
  CU_ASSERT_EQUAL(l.slurm_batch, 0);
  CU_ASSERT_TRUE(note_has(&l, "SLURM"));
}

static void test_env_mpi_can_join(void) {
  const char *many[] = {"RANK=0", "WORLD_SIZE=2", NULL};
  const char *one[] = {"RANK=0", "WORLD_SIZE=1", NULL};
  dist_launch l;
  detect_ok(many, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.mpi_can_join, 0);
  detect_ok(one, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.mpi_can_join, 1);
}

static void test_salloc_shell(void) {
  /* salloc exports the allocation's task count but launches no task. */
  const char *env[] = {"SLURM_NTASKS=4", "SLURM_NPROCS=4", "SLURM_JOB_ID=7", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("salloc", &l, DIST_LAUNCH_SINGLE, 0, 1, 0, 1, "", 0, 0, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_slurm_master_addr(void) {
  const char *both[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1",
                        "MASTER_ADDR=head", "MASTER_PORT=4000", NULL};
  const char *empty_master[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0",
                                "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1", "MASTER_ADDR=", NULL};
  dist_launch l;
  detect_ok(both, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_STRING_EQUAL(l.master_addr, "head");
  CU_ASSERT_EQUAL(l.master_port, 4000);
  /* An empty MASTER_ADDR says nothing; the launch node is still known. */
  detect_ok(empty_master, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_STRING_EQUAL(l.master_addr, "10.0.0.1");
}

static void test_launch_node_only_for_slurm(void) {
  /* SLURM_LAUNCH_NODE_IPADDR describes srun, not an mpirun inside it. */
  const char *env[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_STRING_EQUAL(l.master_addr, "");
}

static void test_size_alone_marks_nothing(void) {
  /* Only a rank variable marks a launcher: a size variable left over in the
   * shell must not hide the real launcher or break a single process. */
  const char *srun[] = {"WORLD_SIZE=4", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", NULL};
  const char *torchrun[] = {"OMPI_COMM_WORLD_SIZE=8", "RANK=1", "WORLD_SIZE=2", NULL};
  const char *sbatch[] = {"PMI_SIZE=4", "SLURM_PROCID=0", "SLURM_NTASKS=4", NULL};
  const char *alone[] = {"WORLD_SIZE=4", NULL};
  const char *pmi_alone[] = {"PMI_SIZE=3", NULL};
  dist_launch l;
  detect_ok(srun, DIST_LAUNCH_AUTO, &l);
  expect_launch("WORLD_SIZE left over under srun", &l, DIST_LAUNCH_SLURM, 1, 2, -1, -1, "", 0, 0, 1);
  CU_ASSERT_TRUE(note_has(&l, "ENV variables ignored (rank unset, size 4)"));
  detect_ok(torchrun, DIST_LAUNCH_AUTO, &l);
  expect_launch("OMPI size left over under torchrun", &l, DIST_LAUNCH_ENV, 1, 2, -1, -1, "", 0, 0, 0);
  CU_ASSERT_TRUE(note_has(&l, "OPENMPI"));
  detect_ok(sbatch, DIST_LAUNCH_AUTO, &l);
  expect_launch("PMI_SIZE left over in sbatch", &l, DIST_LAUNCH_SLURM, 0, 1, 0, 1, "", 0, 1, 1);
  CU_ASSERT_TRUE(note_has(&l, "MPICH"));
  detect_ok(alone, DIST_LAUNCH_AUTO, &l);
  expect_launch("WORLD_SIZE alone", &l, DIST_LAUNCH_SINGLE, 0, 1, 0, 1, "", 0, 0, 1);
  CU_ASSERT_TRUE(note_has(&l, "ENV variables ignored (rank unset, size 4)"));
  CU_ASSERT_TRUE(note_has(&l, "RANK"));
  detect_ok(pmi_alone, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_SINGLE);
  CU_ASSERT_TRUE(note_has(&l, "MPICH"));
}

static void test_note_compares_values(void) {
  /* RANK=01 and WORLD_SIZE=+2 mean what OMPI says, as torchrun's Python reads
   * them: no "ignored" note for numbers that agree. */
  const char *same[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "RANK=01", "WORLD_SIZE=+2", NULL};
  const char *junk[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "RANK=1x", "WORLD_SIZE=2", NULL};
  const char *slurm[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=00", "SLURM_NTASKS=2",
                         NULL};
  dist_launch l;
  detect_ok(same, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_STRING_EQUAL(l.note, "");
  detect_ok(slurm, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_STRING_EQUAL(l.note, "");
  /* Unparsable ignored values are noted, and parsing them quietly leaves the
   * thread's last error alone. */
  dist_set_error(DIST_ERR_INTERNAL, "%s", "marker");
  detect_ok(junk, DIST_LAUNCH_AUTO, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_OPENMPI);
  CU_ASSERT_TRUE(note_has(&l, "ENV variables ignored (rank 1x, size 2)"));
  CU_ASSERT_STRING_EQUAL(dist_last_error(), "marker");
}

static void test_canonical_boundaries(void) {
  /* The strict grammar still takes "0" and big plain numbers. */
  const char *env[] = {"RANK=0", "WORLD_SIZE=10", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=10", "MASTER_PORT=10", NULL};
  const char *slurm[] = {"SLURM_PROCID=10", "SLURM_NTASKS=100", "SLURM_STEP_ID=0", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_AUTO, &l);
  expect_launch("zeros inside numbers", &l, DIST_LAUNCH_ENV, 0, 10, 0, 10, "", 10, 0, 0);
  detect_ok(slurm, DIST_LAUNCH_AUTO, &l);
  expect_launch("SLURM 10 of 100", &l, DIST_LAUNCH_SLURM, 10, 100, -1, -1, "", 0, 0, 1);
}

/* ---- forced method --------------------------------------------------------- */

static void test_forced_slurm(void) {
  const char *env[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=3", "SLURM_NTASKS=4",
                       "SLURM_LOCALID=1", "SLURM_STEP_ID=0", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_SLURM, &l);
  expect_launch("forced SLURM", &l, DIST_LAUNCH_SLURM, 3, 4, 1, -1, "", 0, 0, 1);
  CU_ASSERT_TRUE(note_has(&l, "OPENMPI"));
}

static void test_forced_single(void) {
  const char *env[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=3", "SLURM_NTASKS=4",
                       "SLURM_STEP_ID=0", "RANK=1", "WORLD_SIZE=2", "PMI_RANK=1", "PMI_SIZE=2", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_SINGLE, &l);
  expect_launch("forced SINGLE", &l, DIST_LAUNCH_SINGLE, 0, 1, 0, 1, "", 0, 0, 1);
  CU_ASSERT_STRING_EQUAL(l.note, "");
}

static void test_forced_single_ignores_bad_ranks(void) {
  /* Forcing SINGLE is the way out of a broken launcher environment. */
  const char *env[] = {"RANK=abc", "WORLD_SIZE=0", "OMPI_COMM_WORLD_RANK=x", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_SINGLE, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_SINGLE);
  CU_ASSERT_EQUAL(l.size, 1);
}

static void test_forced_env_and_mpi(void) {
  const char *env[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "RANK=0", "WORLD_SIZE=1", NULL};
  const char *pmi[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "PMI_RANK=0", "PMI_SIZE=3", NULL};
  dist_launch l;
  detect_ok(env, DIST_LAUNCH_ENV, &l);
  expect_launch("forced ENV", &l, DIST_LAUNCH_ENV, 0, 1, -1, -1, "", 0, 0, 1);
  detect_ok(pmi, DIST_LAUNCH_MPICH, &l);
  CU_ASSERT_EQUAL(l.method, DIST_LAUNCH_MPICH);
  CU_ASSERT_EQUAL(l.size, 3);
}

static void test_forced_missing(void) {
  const char *slurm[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
  const char *empty[] = {NULL};
  expect_bad_env("forced ENV, RANK missing", slurm, DIST_LAUNCH_ENV, "RANK");
  expect_bad_env("forced OPENMPI, none set", slurm, DIST_LAUNCH_OPENMPI, "OMPI_COMM_WORLD_RANK");
  expect_bad_env("forced MPICH, none set", empty, DIST_LAUNCH_MPICH, "PMI_RANK");
  expect_bad_env("forced SLURM, none set", empty, DIST_LAUNCH_SLURM, "SLURM_PROCID");
}

/* ---- malformed values ------------------------------------------------------ */

typedef struct bad_case {
  const char *what;
  const char *env[ENV_MAX]; /* unused slots are NULL, which ends the list */
  dist_launch_method forced;
  const char *var; /* must appear in the message */
} bad_case;

static const bad_case BAD[] = {
    /* ENV */
    {"RANK non-numeric", {"RANK=abc", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK trailing junk", {"RANK=1x", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK leading space", {"RANK= 1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK negative", {"RANK=-1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK overflow", {"RANK=99999999999", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK empty", {"RANK=", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"WORLD_SIZE non-numeric", {"RANK=0", "WORLD_SIZE=two"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"WORLD_SIZE zero", {"RANK=0", "WORLD_SIZE=0"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"WORLD_SIZE negative", {"RANK=0", "WORLD_SIZE=-2"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"WORLD_SIZE overflow", {"RANK=0", "WORLD_SIZE=99999999999"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"WORLD_SIZE empty", {"RANK=0", "WORLD_SIZE="}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"RANK == WORLD_SIZE", {"RANK=2", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK > WORLD_SIZE", {"RANK=5", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"LOCAL_RANK >= WORLD_SIZE without a local size", {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=9"}, DIST_LAUNCH_AUTO,
     "LOCAL_RANK"},
    {"SLURM_LOCALID >= SLURM_NTASKS", {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_LOCALID=7"},
     DIST_LAUNCH_AUTO, "SLURM_LOCALID"},
    {"LOCAL_RANK non-numeric", {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=x", "LOCAL_WORLD_SIZE=2"}, DIST_LAUNCH_AUTO,
     "LOCAL_RANK"},
    {"LOCAL_RANK negative", {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=-1"}, DIST_LAUNCH_AUTO, "LOCAL_RANK"},
    {"LOCAL_RANK >= LOCAL_WORLD_SIZE", {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"},
     DIST_LAUNCH_AUTO, "LOCAL_RANK"},
    {"LOCAL_WORLD_SIZE > WORLD_SIZE", {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=8"},
     DIST_LAUNCH_AUTO, "LOCAL_WORLD_SIZE"},
    {"LOCAL_WORLD_SIZE zero", {"RANK=0", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=0"}, DIST_LAUNCH_AUTO,
     "LOCAL_WORLD_SIZE"},
    {"LOCAL_WORLD_SIZE empty", {"RANK=0", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE="}, DIST_LAUNCH_AUTO,
     "LOCAL_WORLD_SIZE"},
    {"MASTER_PORT zero", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=0"}, DIST_LAUNCH_AUTO, "MASTER_PORT"},
    {"MASTER_PORT 70000", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=70000"}, DIST_LAUNCH_AUTO, "MASTER_PORT"},
    {"MASTER_PORT non-numeric", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=http"}, DIST_LAUNCH_AUTO, "MASTER_PORT"},
    {"MASTER_PORT empty", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT="}, DIST_LAUNCH_AUTO, "MASTER_PORT"},
    {"MASTER_PORT bad under SLURM", {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0", "MASTER_PORT=-5"},
     DIST_LAUNCH_AUTO, "MASTER_PORT"},
    {"RANK without WORLD_SIZE", {"RANK=0"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"WORLD_SIZE without RANK (forced)", {"WORLD_SIZE=2"}, DIST_LAUNCH_ENV, "RANK is missing"},
    {"LOCAL_RANK is not RANK", {"LOCAL_RANK=0", "WORLD_SIZE=2"}, DIST_LAUNCH_ENV, "RANK is missing"},
    /* Only canonical decimal integers: no whitespace of any kind, no '+',
     * no leading zeros, no "-0". */
    {"RANK leading newline", {"RANK=\n1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='\\n1'"},
    {"RANK leading CR", {"RANK=\r1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='\\r1'"},
    {"RANK leading VT", {"RANK=\v1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='\\v1'"},
    {"RANK leading FF", {"RANK=\f1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='\\f1'"},
    {"RANK leading tab", {"RANK=\t1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='\\t1'"},
    {"RANK trailing newline", {"RANK=1\n", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK"},
    {"RANK plus sign", {"RANK=+1", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='+1'"},
    {"RANK minus zero", {"RANK=-0", "WORLD_SIZE=2"}, DIST_LAUNCH_AUTO, "RANK='-0'"},
    {"RANK leading zeros", {"RANK=007", "WORLD_SIZE=8"}, DIST_LAUNCH_AUTO, "RANK='007'"},
    {"RANK double zero", {"RANK=00", "WORLD_SIZE=8"}, DIST_LAUNCH_AUTO, "RANK='00'"},
    {"WORLD_SIZE plus sign", {"RANK=0", "WORLD_SIZE=+2"}, DIST_LAUNCH_AUTO, "WORLD_SIZE='+2'"},
    {"WORLD_SIZE leading zero", {"RANK=0", "WORLD_SIZE=02"}, DIST_LAUNCH_AUTO, "WORLD_SIZE='02'"},
    {"WORLD_SIZE leading newline", {"RANK=0", "WORLD_SIZE=\n2"}, DIST_LAUNCH_AUTO, "WORLD_SIZE"},
    {"LOCAL_RANK plus sign", {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=+0"}, DIST_LAUNCH_AUTO, "LOCAL_RANK='+0'"},
    {"LOCAL_WORLD_SIZE leading zero", {"RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=01"}, DIST_LAUNCH_AUTO,
     "LOCAL_WORLD_SIZE='01'"},
    {"MASTER_PORT plus sign", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=+80"}, DIST_LAUNCH_AUTO, "MASTER_PORT='+80'"},
    {"MASTER_PORT leading zero", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=080"}, DIST_LAUNCH_AUTO,
     "MASTER_PORT='080'"},
    {"MASTER_PORT leading FF", {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=\f80"}, DIST_LAUNCH_AUTO, "MASTER_PORT"},
    {"OMPI rank minus zero", {"OMPI_COMM_WORLD_RANK=-0", "OMPI_COMM_WORLD_SIZE=2"}, DIST_LAUNCH_AUTO,
     "OMPI_COMM_WORLD_RANK='-0'"},
    {"PMI_SIZE leading CR", {"PMI_RANK=0", "PMI_SIZE=\r2"}, DIST_LAUNCH_AUTO, "PMI_SIZE"},
    {"SLURM_PROCID leading zeros (batch)", {"SLURM_PROCID=00", "SLURM_NTASKS=2"}, DIST_LAUNCH_AUTO,
     "SLURM_PROCID='00'"},
    {"SLURM_NTASKS plus sign (step)", {"SLURM_PROCID=0", "SLURM_NTASKS=+2", "SLURM_STEP_ID=0"}, DIST_LAUNCH_AUTO,
     "SLURM_NTASKS='+2'"},
    {"SLURM_PROCID leading VT (forced)", {"SLURM_PROCID=\v0", "SLURM_NTASKS=1"}, DIST_LAUNCH_SLURM, "SLURM_PROCID"},
    /* Open MPI */
    {"OMPI rank without size", {"OMPI_COMM_WORLD_RANK=0"}, DIST_LAUNCH_AUTO, "OMPI_COMM_WORLD_SIZE"},
    {"OMPI size without rank (forced)", {"OMPI_COMM_WORLD_SIZE=2"}, DIST_LAUNCH_OPENMPI, "OMPI_COMM_WORLD_RANK"},
    {"OMPI rank non-numeric", {"OMPI_COMM_WORLD_RANK=abc", "OMPI_COMM_WORLD_SIZE=2"}, DIST_LAUNCH_AUTO,
     "OMPI_COMM_WORLD_RANK"},
    {"OMPI rank >= size", {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2"}, DIST_LAUNCH_AUTO,
     "OMPI_COMM_WORLD_RANK"},
    {"OMPI local rank >= local size",
     {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
      "OMPI_COMM_WORLD_LOCAL_SIZE=1"},
     DIST_LAUNCH_AUTO, "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"OMPI local size > size",
     {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=3"}, DIST_LAUNCH_AUTO,
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"OMPI bad, stale SLURM fine",
     {"OMPI_COMM_WORLD_RANK=1x", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_NTASKS=2"}, DIST_LAUNCH_AUTO,
     "OMPI_COMM_WORLD_RANK"},
    /* MPICH */
    {"PMI_SIZE without PMI_RANK (forced)", {"PMI_SIZE=2"}, DIST_LAUNCH_MPICH, "PMI_RANK"},
    {"PMI_RANK without PMI_SIZE", {"PMI_RANK=0"}, DIST_LAUNCH_AUTO, "PMI_SIZE"},
    {"PMI_SIZE non-numeric", {"PMI_RANK=0", "PMI_SIZE=abc"}, DIST_LAUNCH_AUTO, "PMI_SIZE"},
    {"MPI_LOCALRANKID negative", {"PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=-1"}, DIST_LAUNCH_AUTO,
     "MPI_LOCALRANKID"},
    {"MPI_LOCALNRANKS > PMI_SIZE", {"PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALNRANKS=4"}, DIST_LAUNCH_AUTO,
     "MPI_LOCALNRANKS"},
    /* SLURM */
    {"SLURM step without task count", {"SLURM_PROCID=0", "SLURM_STEP_ID=0"}, DIST_LAUNCH_AUTO, "SLURM_NTASKS"},
    {"SLURM_PROCID non-numeric (step)", {"SLURM_PROCID=abc", "SLURM_NTASKS=2", "SLURM_STEP_ID=0"},
     DIST_LAUNCH_AUTO, "SLURM_PROCID"},
    {"SLURM_PROCID non-numeric (batch)", {"SLURM_PROCID=abc", "SLURM_NTASKS=2"}, DIST_LAUNCH_AUTO, "SLURM_PROCID"},
    {"SLURM_PROCID empty (batch)", {"SLURM_PROCID=", "SLURM_NTASKS=2"}, DIST_LAUNCH_AUTO, "SLURM_PROCID"},
    {"SLURM_PROCID >= SLURM_NTASKS", {"SLURM_PROCID=3", "SLURM_NTASKS=2", "SLURM_STEP_ID=0"}, DIST_LAUNCH_AUTO,
     "SLURM_PROCID"},
    {"SLURM_NTASKS zero", {"SLURM_PROCID=0", "SLURM_NTASKS=0", "SLURM_STEP_ID=0"}, DIST_LAUNCH_AUTO,
     "SLURM_NTASKS"},
    {"SLURM_NPROCS overflow", {"SLURM_PROCID=0", "SLURM_NPROCS=99999999999", "SLURM_STEP_ID=0"}, DIST_LAUNCH_AUTO,
     "SLURM_NPROCS"},
    {"SLURM_LOCALID non-numeric", {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=x", "SLURM_STEP_ID=0"},
     DIST_LAUNCH_AUTO, "SLURM_LOCALID"},
};

static void test_malformed_values(void) {
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++)
    expect_bad_env(BAD[i].what, BAD[i].env, BAD[i].forced, BAD[i].var);
}

static void test_long_launch_node_addr(void) {
  /* The SLURM fallback address has the same limit as MASTER_ADDR. */
  static char addr[64 + 300];
  int n = snprintf(addr, sizeof addr, "SLURM_LAUNCH_NODE_IPADDR=");
  memset(addr + n, 'h', 300);
  addr[n + 300] = '\0';
  const char *env[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0", addr, NULL};
  expect_bad_env("SLURM_LAUNCH_NODE_IPADDR of 300 chars", env, DIST_LAUNCH_AUTO, "SLURM_LAUNCH_NODE_IPADDR");
}

static void test_long_master_addr(void) {
  static char addr[64 + 300];
  int n = snprintf(addr, sizeof addr, "MASTER_ADDR=");
  memset(addr + n, 'm', 300);
  addr[n + 300] = '\0';
  const char *env[] = {"RANK=0", "WORLD_SIZE=2", addr, NULL};
  expect_bad_env("MASTER_ADDR of 300 chars", env, DIST_LAUNCH_AUTO, "MASTER_ADDR");
}

static void test_error_names_value(void) {
  /* The header promises the value too, so a typo can be spotted. */
  const char *env[] = {"RANK=0", "WORLD_SIZE=7q", NULL};
  expect_bad_env("value in message", env, DIST_LAUNCH_AUTO, "7q");
}

/* ---- arguments ------------------------------------------------------------- */

static void test_null_out(void) {
  const char *env[] = {"RANK=0", "WORLD_SIZE=1", NULL};
  ASSERT_STATUS(dist_launch_detect(env, DIST_LAUNCH_AUTO, NULL), DIST_ERR_INVALID_ARGUMENT);
}

static void test_null_env(void) {
  dist_launch l;
  detect_ok(NULL, DIST_LAUNCH_AUTO, &l);
  expect_launch("NULL env", &l, DIST_LAUNCH_SINGLE, 0, 1, 0, 1, "", 0, 0, 1);
}

static void test_bad_forced(void) {
  const char *env[] = {NULL};
  dist_launch l, orig;
  fill_sentinel(&l);
  orig = l;
  ASSERT_STATUS(dist_launch_detect(env, (dist_launch_method)99, &l), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist_launch_detect(env, (dist_launch_method)-1, &l), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(memcmp(&l, &orig, sizeof l), 0);
}

/* ---- method names ---------------------------------------------------------- */

static const dist_launch_method ALL_METHODS[] = {DIST_LAUNCH_AUTO,  DIST_LAUNCH_SINGLE,  DIST_LAUNCH_ENV,
                                                 DIST_LAUNCH_SLURM, DIST_LAUNCH_OPENMPI, DIST_LAUNCH_MPICH};
#define NMETHODS (sizeof ALL_METHODS / sizeof ALL_METHODS[0])

/* `s` with every letter flipped to the other case. */
static void flip_case(const char *s, char *out, size_t n) {
  size_t i = 0;
  for (; s[i] && i + 1 < n; i++) {
    char c = s[i];
    out[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
  }
  out[i] = '\0';
}

static void test_method_names(void) {
  CU_ASSERT_STRING_EQUAL(dist_launch_method_name(DIST_LAUNCH_AUTO), "AUTO");
  CU_ASSERT_STRING_EQUAL(dist_launch_method_name(DIST_LAUNCH_SINGLE), "SINGLE");
  CU_ASSERT_STRING_EQUAL(dist_launch_method_name(DIST_LAUNCH_ENV), "ENV");
  CU_ASSERT_STRING_EQUAL(dist_launch_method_name(DIST_LAUNCH_SLURM), "SLURM");
  CU_ASSERT_STRING_EQUAL(dist_launch_method_name(DIST_LAUNCH_OPENMPI), "OPENMPI");
  CU_ASSERT_STRING_EQUAL(dist_launch_method_name(DIST_LAUNCH_MPICH), "MPICH");
  CU_ASSERT_PTR_NOT_NULL(dist_launch_method_name((dist_launch_method)99));
}

static void test_method_round_trip(void) {
  for (size_t i = 0; i < NMETHODS; i++) {
    const char *name = dist_launch_method_name(ALL_METHODS[i]);
    char flipped[32];
    dist_launch_method m = (dist_launch_method)-1;
    ASSERT_OK(dist_launch_method_parse(name, &m));
    CU_ASSERT_EQUAL(m, ALL_METHODS[i]);
    flip_case(name, flipped, sizeof flipped);
    m = (dist_launch_method)-1;
    ASSERT_OK(dist_launch_method_parse(flipped, &m));
    CU_ASSERT_EQUAL(m, ALL_METHODS[i]);
  }
}

static void test_method_aliases(void) {
  static const struct { const char *name; dist_launch_method m; } aliases[] = {
      {"torchrun", DIST_LAUNCH_ENV}, {"TorchRun", DIST_LAUNCH_ENV}, {"mpirun", DIST_LAUNCH_OPENMPI},
      {"MPIRUN", DIST_LAUNCH_OPENMPI}, {"OpenMPI", DIST_LAUNCH_OPENMPI}, {"slurm", DIST_LAUNCH_SLURM}};
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    dist_launch_method m = (dist_launch_method)-1;
    ASSERT_OK(dist_launch_method_parse(aliases[i].name, &m));
    CU_ASSERT_EQUAL(m, aliases[i].m);
  }
}

static void test_method_parse_errors(void) {
  static const char *const bad[] = {"nope", "", "slurm ", "mpi", "OPENMPI2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dist_launch_method m = DIST_LAUNCH_MPICH;
    ASSERT_STATUS(dist_launch_method_parse(bad[i], &m), DIST_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(m, DIST_LAUNCH_MPICH); /* unchanged */
  }
  dist_launch_method m;
  ASSERT_STATUS(dist_launch_method_parse("nope", &m), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("nope");
  ASSERT_STATUS(dist_launch_method_parse(NULL, &m), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist_launch_method_parse("ENV", NULL), DIST_ERR_INVALID_ARGUMENT);
}

/* ---- driver ---------------------------------------------------------------- */

static CU_TestInfo launcher_tests[] = {
    {"ENV (torchrun)", test_env_torchrun},
    {"SLURM srun step", test_slurm_srun_step},
    {"SLURM with SLURM_NPROCS", test_slurm_nprocs},
    {"SLURM_NTASKS over SLURM_NPROCS", test_slurm_ntasks_preferred},
    {"Open MPI", test_openmpi},
    {"MPICH/Hydra", test_mpich},
    {"empty env is SINGLE", test_empty_is_single},
    {"look-alike names ignored", test_unrelated_names_ignored},
    {"boundary values accepted", test_boundaries_accepted},
    {"MASTER_ADDR length limit", test_master_addr_limit},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo precedence_tests[] = {
    {"mpirun inside sbatch", test_mpirun_in_sbatch},
    {"mpirun inside sbatch, agreeing", test_mpirun_in_sbatch_agreeing},
    {"plain sbatch", test_plain_sbatch},
    {"SLURM_STEPID alias", test_slurm_stepid_alias},
    {"torchrun vars next to OMPI", test_torchrun_with_ompi},
    {"torchrun's children over inherited launchers", test_torchrun_children},
    {"MPICH over SLURM", test_mpich_over_env_and_slurm},
    {"torchrun inside sbatch", test_torchrun_in_sbatch},
    {"ENV mpi_can_join", test_env_mpi_can_join},
    {"salloc shell", test_salloc_shell},
    {"MASTER_ADDR over launch node", test_slurm_master_addr},
    {"launch node only for SLURM", test_launch_node_only_for_slurm},
    {"a size variable alone marks nothing", test_size_alone_marks_nothing},
    {"note compares values, quietly", test_note_compares_values},
    {"canonical numbers accepted", test_canonical_boundaries},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo forced_tests[] = {
    {"forced SLURM", test_forced_slurm},
    {"forced SINGLE", test_forced_single},
    {"forced SINGLE, broken env", test_forced_single_ignores_bad_ranks},
    {"forced ENV and MPICH", test_forced_env_and_mpi},
    {"forced, variables missing", test_forced_missing},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo malformed_tests[] = {
    {"malformed values", test_malformed_values},
    {"MASTER_ADDR too long", test_long_master_addr},
    {"SLURM_LAUNCH_NODE_IPADDR too long", test_long_launch_node_addr},
    {"message names the value", test_error_names_value},
    {"NULL out", test_null_out},
    {"NULL env", test_null_env},
    {"bad forced method", test_bad_forced},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo name_tests[] = {
    {"method names", test_method_names},
    {"name/parse round trip", test_method_round_trip},
    {"aliases", test_method_aliases},
    {"parse errors", test_method_parse_errors},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"launchers", NULL, NULL, NULL, NULL, launcher_tests},
    {"precedence", NULL, NULL, NULL, NULL, precedence_tests},
    {"forced", NULL, NULL, NULL, NULL, forced_tests},
    {"malformed", NULL, NULL, NULL, NULL, malformed_tests},
    {"names", NULL, NULL, NULL, NULL, name_tests},
    CU_SUITE_INFO_NULL,
};

int main(void) { return cunit_run(suites, "test_launch", 0) != 0; }
