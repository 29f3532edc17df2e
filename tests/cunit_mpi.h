/* main() of every distributed CUnit test: initialize the manager, run the
 * suites (only rank 0 prints the CUnit report), finalize, and agree on the
 * verdict over the world.
 *
 * Two engines: under MPI the agreements are MPI all-reduces over
 * MPI_COMM_WORLD, the verdict's after the last finalize (MPI is still up:
 * distmgr finalizes it at exit, or the program does after cunit_mpi_run when
 * it initialized MPI itself, as an application that distmgr adopts). Without
 * MPI (torchrun's processes, Gloo: tests/torchrun-launch.sh) they are
 * dist_all_reduce calls on the world, and the verdict is agreed before the
 * last finalize, since nothing is left to agree with after it; a failure
 * after that (finalize, the after hook) shows in that rank's exit status,
 * which fails the job.
 *
 * A test describes itself in a cunit_mpi_test; fields left out take defaults:
 *
 *   int main(void) { return cunit_mpi_run(&(cunit_mpi_test){"test_x", suites, .rank = &R, .size = &W}); }
 *
 * Hooks return the failures they found (0: none). setup() may also return
 * cunit_mpi_skip(why). Its outcome is agreed over the world before the suites:
 * when it failed (or skipped) on any rank, no rank runs them, so no rank waits
 * alone in a collective. The exit status is 0, 1 (some rank failed) or 77
 * (automake's SKIP, with one line "SKIP: <name>: <why>").
 *
 * Test bodies agree through cunit_all_reduce_int/_double, cunit_all_gather_int
 * and cunit_broadcast_bytes below (distmgr's own collectives on the world:
 * either engine), and ask cunit_mpi_in_use() before touching MPI. */
#ifndef CUNIT_MPI_H
#define CUNIT_MPI_H

#include <distmgr.h>
#include <distmgr/mpi.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cunit_main.h"

typedef struct cunit_mpi_test {
  const char *name;     /* the program: prefix of the report lines */
  CU_SuiteInfo *suites;
  int *rank, *size;     /* if set, MPI_COMM_WORLD's rank and size once MPI is up (without MPI: the manager's world) */
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
static int cunit_mpi_without = 0;        /* the manager runs without MPI (Gloo); set at each initialize */
static int cunit_mpi_errors = 0;         /* failed helper collectives outside a CUnit test */

/* What setup() returns to skip the test on every rank, saying why (NULL:
 * along with a rank that says why). */
static inline int cunit_mpi_skip(const char *why) {
  cunit_mpi_why = why;
  return CUNIT_MPI_SKIP;
}

/* 1 when the running manager uses MPI, 0 without it (torchrun's processes on
 * Gloo): then no MPI call may be made, MPI_Init never ran. Valid from setup()
 * on. The public sign is the host engine of the world ("gloo" without MPI). */
static inline int cunit_mpi_in_use(void) { return !cunit_mpi_without; }

static inline int cunit_mpi_query_without(void) {
  const char *engine = NULL;
  return dist_coll_backend(NULL, DIST_MEM_HOST, &engine) == DIST_SUCCESS && strcmp(engine, "mpi") != 0;
}

/* For a program that would initialize MPI itself (before the manager is up):
 * 1 when distmgr will start without MPI in this launch, where MPI_Init must
 * not run: torchrun's processes (more than one: MPI cannot join them), or any
 * torchrun-style launch with DIST_HOST_ENGINE=gloo. */
static inline int cunit_mpi_launch_without_mpi(void) {
  extern char **environ;
  dist_launch l;
  const char *engine = getenv("DIST_HOST_ENGINE");
  if (dist_launch_detect((const char *const *)environ, DIST_LAUNCH_AUTO, &l) != DIST_SUCCESS) return 0;
  return l.method == DIST_LAUNCH_ENV && (!l.mpi_can_join || (engine && strcasecmp(engine, "gloo") == 0));
}

/* A helper collective failed: a CUnit failure inside a test, else counted
 * into the rank's failures by cunit_mpi_run. */
static inline void cunit_mpi_helper_failed(const char *what, const char *file, int line) {
  fprintf(stderr, "%s: %s at %s:%d: %s\n", cunit_mpi_name, what, file, line, dist_last_error());
  if (CU_get_current_test()) CU_assertImplementation(CU_FALSE, (unsigned)line, what, file, "", CU_FALSE);
  else cunit_mpi_errors++;
}

/* v reduced over the manager's world (either engine). */
#define cunit_all_reduce_int(v, op) cunit_all_reduce_int_((v), (op), __FILE__, __LINE__)
static inline int cunit_all_reduce_int_(int v, dist_reduce_op op, const char *file, int line) {
  int32_t x = v;
  int64_t one = 1;
  dist_tensor t = dist_tensor_host(&x, DIST_I32, 1, &one);
  if (dist_all_reduce(NULL, &t, op) != DIST_SUCCESS) cunit_mpi_helper_failed("cunit_all_reduce_int", file, line);
  return x;
}
#define cunit_all_reduce_double(v, op) cunit_all_reduce_double_((v), (op), __FILE__, __LINE__)
static inline double cunit_all_reduce_double_(double v, dist_reduce_op op, const char *file, int line) {
  int64_t one = 1;
  dist_tensor t = dist_tensor_host(&v, DIST_F64, 1, &one);
  if (dist_all_reduce(NULL, &t, op) != DIST_SUCCESS) cunit_mpi_helper_failed("cunit_all_reduce_double", file, line);
  return v;
}
/* all[r] = world rank r's v (all: world-size entries). */
#define cunit_all_gather_int(v, all) cunit_all_gather_int_((v), (all), __FILE__, __LINE__)
static inline void cunit_all_gather_int_(int v, int *all, const char *file, int line) {
  int size = 1;
  int32_t x = v;
  int64_t one = 1, n;
  dist_manager_world_size(&size);
  n = size;
  dist_tensor in = dist_tensor_host(&x, DIST_I32, 1, &one), out = dist_tensor_host(all, DIST_I32, 1, &n);
  if (dist_all_gather(NULL, &in, &out, 0) != DIST_SUCCESS) cunit_mpi_helper_failed("cunit_all_gather_int", file, line);
}
/* n bytes of world rank `root`'s buf to every rank. */
#define cunit_broadcast_bytes(buf, n, root) cunit_broadcast_bytes_((buf), (n), (root), __FILE__, __LINE__)
static inline void cunit_broadcast_bytes_(void *buf, size_t n, int root, const char *file, int line) {
  int64_t len = (int64_t)n;
  dist_tensor t = dist_tensor_host(buf, DIST_U8, 1, &len);
  if (dist_broadcast(NULL, &t, root) != DIST_SUCCESS) cunit_mpi_helper_failed("cunit_broadcast_bytes", file, line);
}
#define cunit_barrier() cunit_barrier_(__FILE__, __LINE__)
static inline void cunit_barrier_(const char *file, int line) {
  if (dist_barrier(NULL) != DIST_SUCCESS) cunit_mpi_helper_failed("cunit_barrier", file, line);
}

/* The harness's own all-reduce of one int over the world: MPI_COMM_WORLD
 * under MPI (as always: it spans every worker of test_adopt), the manager's
 * world without it. A failed one counts as a failure (*ok = 0). */
static inline int cunit_mpi_reduce(int v, MPI_Op mop, dist_reduce_op op, int *ok) {
  int all = v;
  if (!cunit_mpi_without) {
    MPI_Allreduce(&v, &all, 1, MPI_INT, mop, MPI_COMM_WORLD);
    return all;
  }
  int32_t x = v;
  int64_t one = 1;
  dist_tensor t = dist_tensor_host(&x, DIST_I32, 1, &one);
  if (dist_all_reduce(NULL, &t, op) != DIST_SUCCESS) {
    fprintf(stderr, "%s: the harness's all-reduce failed: %s\n", cunit_mpi_name, dist_last_error());
    cunit_mpi_errors++;
    *ok = 0;
    return v;
  }
  return x;
}

/* setup()'s outcome over the world: 0 run, 1 skip (the lowest rank with a
 * reason gives it), 2 some rank failed. Collective over the world. */
static inline int cunit_mpi_agree_setup(int mine, int rank) {
  int state = mine > 0 ? 2 : mine == CUNIT_MPI_SKIP, ok = 1;
  int who = state == 1 && cunit_mpi_why ? rank : INT_MAX;
  int all = cunit_mpi_reduce(state, MPI_MAX, DIST_MAX, &ok);
  int first = cunit_mpi_reduce(who, MPI_MIN, DIST_MIN, &ok);
  if (!ok) return 2; /* cannot tell: this rank does not run the suites */
  if (all == 1 && rank == (first == INT_MAX ? 0 : first))
    printf("SKIP: %s: %s\n", cunit_mpi_name, cunit_mpi_why ? cunit_mpi_why : "(no reason given)");
  if (all == 2 && rank == 0) printf("%s: setup failed on some rank; no rank runs the suites\n", cunit_mpi_name);
  return all;
}

/* Runs the test; returns the process exit status. */
static inline int cunit_mpi_run(const cunit_mpi_test *t) {
  int rank = 0, size = 1, up = 0, down = 0, failed = 0, skipped = 0;
  int nrounds = t->rounds > 0 ? t->rounds : 1, total = -1; /* total: the failures agreed without MPI */
  cunit_mpi_name = t->name;
  for (int round = 0; round < nrounds && !skipped; round++) {
    if (t->before) failed += t->before(round);
    dist_status s = t->world     ? dist_manager_initialize_comm(*t->world, t->options)
                    : t->options ? dist_manager_initialize_with(t->options)
                                 : dist_manager_initialize();
    if (s != DIST_SUCCESS) { /* the same code on every rank */
      fprintf(stderr, "%s: initialize: %s (%s)\n", t->name, dist_status_string(s), dist_last_error());
      failed++;
      break;
    }
    cunit_mpi_without = cunit_mpi_query_without();
    if (cunit_mpi_without) {
      dist_manager_rank(&rank);
      dist_manager_world_size(&size);
    } else {
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
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
    failed += cunit_mpi_errors;
    cunit_mpi_errors = 0;
    if (cunit_mpi_without && (skipped || round == nrounds - 1)) { /* the last round: agree while the world is up */
      int ok = 1;
      total = cunit_mpi_reduce(failed, MPI_SUM, DIST_SUM, &ok);
      if (!ok) total = failed + 1; /* this rank cannot know the others': it fails */
      failed = 0; /* from here on: this rank's own, after the agreement */
    }
    if (dist_manager_finalize() != DIST_SUCCESS) failed++;
    if (t->after) failed += t->after(round);
  }
  if (total >= 0) { /* without MPI */
    if (rank == 0)
      printf("%s: %d failure(s) over %d rank(s)%s%s\n", t->name, total, size, skipped ? ", skipped" : "",
             failed ? ", and more on rank 0 after finalize" : "");
    if (failed) fprintf(stderr, "%s[rank %d/%d]: %d failure(s) after the last finalize\n", t->name, rank, size, failed);
    fflush(stdout);
    return total || failed ? 1 : skipped ? 77 : 0;
  }
  MPI_Initialized(&up);
  if (up) MPI_Finalized(&down);
  if (!up || down) return 1; /* initialize failed before MPI was up: nothing to agree with */
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  total = 0;
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
