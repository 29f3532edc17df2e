/* Adopting a communicator: the application initializes MPI, splits its ranks
 * into workers of 2 (as Propulate's multi-rank workers), and each worker
 * initializes distmgr on its own communicator. distmgr must then neither
 * re-initialize nor finalize MPI. Runs at 1, 2, 3, 4 ranks (3: one worker of 1). */
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <string.h>

#include "cunit_mpi.h"

static int R, W;           /* MPI_COMM_WORLD */
static MPI_Comm worker;    /* this rank's worker */
static int wrank, wsize;   /* in the worker */

static void test_world_is_worker(void) {
  int rank, size, members[4], n, gathered[4];
  ASSERT_OK(dist_manager_rank(&rank));
  ASSERT_OK(dist_manager_world_size(&size));
  CU_ASSERT_EQUAL(rank, wrank);
  CU_ASSERT_EQUAL(size, wsize);
  /* "world" is the worker: its communicator holds exactly the worker's ranks. */
  MPI_Comm comm;
  ASSERT_OK(dist_group_comm("world", &comm));
  ASSERT_OK(dist_group_members("world", members, 4, &n));
  CU_ASSERT_EQUAL(n, wsize);
  MPI_Allgather(&R, 1, MPI_INT, gathered, 1, MPI_INT, comm);
  for (int i = 0; i < wsize; i++) {
    CU_ASSERT_EQUAL(members[i], i);           /* ranks of the manager's world */
    CU_ASSERT_EQUAL(gathered[i], R - wrank + i); /* workers are consecutive world ranks */
  }
  char line[256];
  ASSERT_OK(dist_manager_describe(line, sizeof line));
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "adopted"));
}

/* Groups inside a worker stay inside it. */
static void test_groups_in_worker(void) {
  int size, rank, members[4], n;
  ASSERT_OK(dist_group_create_subgroup("solo", 1, NULL));
  ASSERT_OK(dist_group_create_orthogonal("all", "solo"));
  ASSERT_OK(dist_group_size("all", &size));
  ASSERT_OK(dist_group_rank("solo", &rank));
  ASSERT_OK(dist_group_members("all", members, 4, &n));
  CU_ASSERT_EQUAL(size, wsize);
  CU_ASSERT_EQUAL(rank, 0);
  for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(members[i], i);
  ASSERT_OK(dist_group_size("local", &size));
  CU_ASSERT_EQUAL(size, wsize); /* one machine: the whole worker shares memory */
}

static CU_TestInfo tests[] = {{"world is the worker", test_world_is_worker},
                              {"groups inside a worker", test_groups_in_worker},
                              CU_TEST_INFO_NULL};
static CU_SuiteInfo suites[] = {{"adopt", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

/* Before initialize: MPI is the application's; a worker of 2 consecutive ranks. */
static int before(int round) {
  (void)round;
  MPI_Comm_split(MPI_COMM_WORLD, R / 2, R, &worker);
  MPI_Comm_rank(worker, &wrank);
  MPI_Comm_size(worker, &wsize);
  return dist_manager_initialize_comm(MPI_COMM_NULL, NULL) != DIST_ERR_INVALID_ARGUMENT;
}

/* After finalize: distmgr did not initialize MPI, so it must not have
 * finalized it; and initialize works again, now on the whole world. */
static int after(int round) {
  (void)round;
  int failed = 0, finalized = 1, size = 0;
  MPI_Finalized(&finalized);
  failed += finalized != 0;
  if (dist_manager_initialize() != DIST_SUCCESS || dist_manager_world_size(&size) != DIST_SUCCESS || size != W)
    failed++, fprintf(stderr, "test_adopt[rank %d/%d]: re-initialize on the world failed: %s\n", R, W,
                      dist_last_error());
  failed += dist_manager_finalize() != DIST_SUCCESS;
  return failed;
}

/* A launch without MPI (torchrun's processes on Gloo) has no communicator to
 * adopt: the manager starts as launched, and every rank skips, saying why. */
static int without_mpi(int round) {
  (void)round;
  return cunit_mpi_skip("adopting an MPI communicator needs MPI; this launch runs without it (Gloo)");
}

int main(int argc, char **argv) {
  if (cunit_mpi_launch_without_mpi())
    return cunit_mpi_run(&(cunit_mpi_test){"test_adopt", suites, .setup = without_mpi});
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &R);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  int status = cunit_mpi_run(&(cunit_mpi_test){"test_adopt", suites, .world = &worker, .before = before, .after = after});
  MPI_Comm_free(&worker);
  MPI_Finalize(); /* the application's job, not distmgr's */
  return status;
}
