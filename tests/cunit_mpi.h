/* main() of a distributed CUnit test: initialize the manager, run the
 * suites (only rank 0 prints the CUnit report), finalize, and agree on the
 * verdict over MPI (still up: distmgr finalizes MPI at exit). */
#ifndef CUNIT_MPI_H
#define CUNIT_MPI_H

#include <distmgr.h>
#include <mpi.h>

#include "cunit_main.h"

/* Returns the process exit code; rank and size are set before the suites run. */
static inline int cunit_mpi_main(CU_SuiteInfo *suites, const char *name, int *rank, int *size) {
  dist_status s = dist_manager_initialize();
  if (s != DIST_SUCCESS) {
    fprintf(stderr, "%s: initialize: %s (%s)\n", name, dist_status_string(s), dist_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, size);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  char tag[64];
  snprintf(tag, sizeof tag, "%s[rank %d/%d]", name, *rank, *size);
  int failed = cunit_run(suites, tag, *rank != 0);
  if (dist_manager_finalize() != DIST_SUCCESS) failed++;
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (*rank == 0) printf("%s: %d failure(s) over %d rank(s)\n", name, total, *size);
  /* Now, not at exit: distmgr's exit handler finalizes MPI first, and Open
   * MPI's output forwarding can drop what a process writes after that (a CI
   * run lost this very line, exit status 0). */
  fflush(stdout);
  return total != 0;
}

#endif
