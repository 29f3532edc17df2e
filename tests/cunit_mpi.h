/* main() of every distributed CUnit test: initialize the manager, run the
 * suites (only rank 0 prints the CUnit report), finalize, and agree on the
 * verdict with an MPI all-reduce over MPI_COMM_WORLD (still up: distmgr
 * finalizes MPI at exit, or the program does after cunit_mpi_run when it
 * initialized MPI itself, as an application that distmgr adopts).
 *
 * A test describes itself in a cunit_mpi_test; fields left out take defaults:
 *
 *   int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_x", suites, .rank = &R, .size = &W}); }
 *
 * Hooks return the failures they found (0: none). setup() may also return
 * cunit_mpi_skip(why). Its outcome is agreed over the world before the suites:
 * when it failed (or skipped) on any rank, no rank runs them, so no rank waits
 * alone in a collective. The exit status is 0, 1 (some rank failed) or 77
 * (automake's SKIP, with one line "SKIP: <name>: <why>"). */
#ifndef CUNIT_MPI_H
#define CUNIT_MPI_H

#include <distmgr.h>
#include <distmgr/mpi.h>
#include <limits.h>
#include <mpi.h>

#include "cunit_main.h"

typedef struct cunit_mpi_test {
  const char *name;     /* the program: prefix of the report lines */
  CU_SuiteInfo *suites;
  int *rank, *size;     /* if set, MPI_COMM_WORLD's rank and size, once MPI is up */
  int rounds;           /* initialize, run and finalize this many times (0: once) */
  const dist_init_options *options; /* NULL: dist_manager_initialize() */
  MPI_Comm *world;      /* set: dist_manager_initialize_comm(*world, options), read after before() */
  int (*before)(int round); /* before initialize (MPI may not be up yet) */
  int (*setup)(int round);  /* after initialize, on every rank; agreed, see above */
  int (*after)(int round);  /* after finalize */
} cunit_mpi_test;

#define CUNIT_MPI_SKIP (-1)
static const char *cunit_mpi_name = "?";  /* the running test's name, for hooks' messages */
static const char *cunit_mpi_why = NULL; /* this rank's reason to skip */

/* What setup() returns to skip the test on every rank, saying why (NULL:
 * along with a rank that says why). */
static inline int cunit_mpi_skip(const char *why) {
  cunit_mpi_why = why;
  return CUNIT_MPI_SKIP;
}

/* setup()'s outcome over the world: 0 run, 1 skip (the lowest rank with a
 * reason gives it), 2 some rank failed. Collective over MPI_COMM_WORLD. */
static inline int cunit_mpi_agree_setup(int mine, int rank) {
  int state = mine > 0 ? 2 : mine == CUNIT_MPI_SKIP, all = 0, first = INT_MAX;
  int who = state == 1 && cunit_mpi_why ? rank : INT_MAX;
  MPI_Allreduce(&state, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&who, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all == 1 && rank == (first == INT_MAX ? 0 : first))
    printf("SKIP: %s: %s\n", cunit_mpi_name, cunit_mpi_why ? cunit_mpi_why : "(no reason given)");
  if (all == 2 && rank == 0) printf("%s: setup failed on some rank; no rank runs the suites\n", cunit_mpi_name);
  return all;
}

/* Runs the test; returns the process exit status. */
static inline int cunit_mpi_run(const cunit_mpi_test *t) {
  int rank = 0, size = 1, up = 0, down = 0, failed = 0, skipped = 0;
  cunit_mpi_name = t->name;
  for (int round = 0; round < (t->rounds > 0 ? t->rounds : 1) && !skipped; round++) {
    if (t->before) failed += t->before(round);
    dist_status s = t->world     ? dist_manager_initialize_comm(*t->world, t->options)
                    : t->options ? dist_manager_initialize_with(t->options)
                                 : dist_manager_initialize();
    if (s != DIST_SUCCESS) { /* the same code on every rank */
      fprintf(stderr, "%s: initialize: %s (%s)\n", t->name, dist_status_string(s), dist_last_error());
      failed++;
      break;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (t->rank) *t->rank = rank;
    if (t->size) *t->size = size;
    int mine = t->setup ? t->setup(round) : 0;
    failed += mine > 0 ? mine : 0;
    int agreed = cunit_mpi_agree_setup(mine, rank);
    skipped = agreed == 1;
    if (agreed == 0) {
      char tag[96];
      if (t->rounds > 1) snprintf(tag, sizeof tag, "%s[round %d, rank %d/%d]", t->name, round, rank, size);
      else snprintf(tag, sizeof tag, "%s[rank %d/%d]", t->name, rank, size);
      int f = cunit_run(t->suites, tag, rank != 0);
      failed += f < 0 ? 1 : f; /* -1: a CUnit error */
    }
    if (dist_manager_finalize() != DIST_SUCCESS) failed++;
    if (t->after) failed += t->after(round);
  }
  MPI_Initialized(&up);
  if (up) MPI_Finalized(&down);
  if (!up || down) return 1; /* initialize failed before MPI was up: nothing to agree with */
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d failure(s) over %d rank(s)%s\n", t->name, total, size, skipped ? ", skipped" : "");
  /* Now, not at exit: distmgr's exit handler finalizes MPI first, and Open
   * MPI's output forwarding can drop what a process writes after that (a CI
   * run lost this very line, exit status 0). */
  fflush(stdout);
  return total ? 1 : skipped ? 77 : 0;
}

/* The common case: no hooks. */
static inline int cunit_mpi_main(CU_SuiteInfo *suites, const char *name, int *rank, int *size) {
  return cunit_mpi_run(&(cunit_mpi_test){.name = name, .suites = suites, .rank = rank, .size = size});
}

#endif
