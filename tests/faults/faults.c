/* The fault suite's program: `faults SCENARIO` runs one way a job goes wrong
 * (tests/faults/faults.sh starts it at 4 ranks and checks what every rank
 * printed). Every distmgr call prints one line
 *   "rank R: CALL -> ok"   or   "rank R: CALL -> error CODE: MESSAGE"
 * so the script can tell an error from a success on each rank. */
#include <distmgr.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int R = -1, W = 0;

static dist_status report(const char *call, dist_status s) {
  if (s) printf("rank %d: %s -> error %d: %s\n", R, call, (int)s, dist_last_error());
  else printf("rank %d: %s -> ok\n", R, call);
  fflush(stdout);
  return s;
}

static dist_status reduce(const char *group, float *x, int n) {
  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){n});
  return dist_all_reduce(group, &t, DIST_SUM);
}

/* The call the healthy ranks make while one rank misbehaves. */
static void healthy(const char *group) {
  float x[4] = {1, 1, 1, 1};
  if (report("dist_all_reduce", reduce(group, x, 4)) == DIST_SUCCESS)
    printf("rank %d: result %g (expected %d)\n", R, x[0], W);
}

static void finish(void) { report("dist_manager_finalize", dist_manager_finalize()); }

static int scenario(const char *s) {
  float x[4] = {1, 1, 1, 1}, y[16] = {0};
  if (!strcmp(s, "exit")) { /* rank 1 leaves while the others reduce */
    if (R == 1) {
      printf("rank 1: exit(1) without finalize\n");
      fflush(stdout);
      exit(1);
    }
    healthy(NULL);
  } else if (!strcmp(s, "kill")) { /* rank W-1 dies while the others reduce */
    if (R == W - 1) raise(SIGKILL);
    healthy(NULL);
  } else if (!strcmp(s, "stuck")) { /* rank W-1 is busy elsewhere far beyond DIST_TIMEOUT */
    if (R == W - 1) {
      sleep(30);
      return 0;
    }
    healthy(NULL);
  } else if (!strcmp(s, "skip")) { /* rank 2 skips a broadcast */
    dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){4});
    if (R != 2) report("dist_broadcast", dist_broadcast(NULL, &t, 0));
    healthy(NULL);
  } else if (!strcmp(s, "skip_same")) { /* rank 2 skips one of two identical reductions */
    if (R != 2) healthy(NULL);
    healthy(NULL);
    healthy(NULL);
  } else if (!strcmp(s, "other")) { /* all_to_all on rank 1, all_gather elsewhere, same shapes */
    dist_tensor in = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){W});
    dist_tensor out = dist_tensor_host(y, DIST_F32, 1, (int64_t[1]){R == 1 ? W : W * W});
    if (R == 1) report("dist_all_to_all", dist_all_to_all(NULL, &in, &out, 0));
    else report("dist_all_gather", dist_all_gather(NULL, &in, &out, 0));
  } else if (!strcmp(s, "start")) { /* non-blocking on rank 1, blocking elsewhere */
    if (R == 1) {
      dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){4});
      dist_request *q = NULL;
      if (report("dist_all_reduce_start", dist_all_reduce_start(NULL, &t, DIST_SUM, &q)) == DIST_SUCCESS)
        report("dist_request_wait", dist_request_wait(q));
    } else {
      healthy(NULL);
    }
  } else if (!strcmp(s, "shape")) { /* rank W-1 passes 3 elements, the others 4 */
    if (report("dist_all_reduce", reduce(NULL, x, R == W - 1 ? 3 : 4)) == DIST_SUCCESS) printf("rank %d: result %g\n", R, x[0]);
  } else if (!strcmp(s, "unknown")) { /* a misspelt group name on rank 1 */
    report("dist_all_reduce", reduce(R == 1 ? "wrold" : "world", x, 4));
  } else if (!strcmp(s, "barrier")) { /* a barrier on rank 1, a reduction elsewhere */
    if (R == 1) report("dist_barrier", dist_barrier(NULL));
    else healthy(NULL);
  } else if (!strcmp(s, "finalize_early")) { /* rank 1 finalizes while its pair partner reduces */
    if (report("dist_group_create_subgroup", dist_group_create_subgroup("pair", 2, NULL))) return 1;
    if (R != 1) healthy("pair");
  } else if (!strcmp(s, "after_mpi_finalize")) { /* the application finalized MPI itself */
    MPI_Finalize();
    report("dist_all_reduce", reduce(NULL, x, 4));
    return 0;
  } else {
    fprintf(stderr, "faults: unknown scenario '%s'\n", s);
    return 2;
  }
  finish();
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 2) {
    fprintf(stderr, "usage: faults SCENARIO\n");
    return 2;
  }
  /* the launcher's rank until the manager says (Open MPI, MPICH's Hydra, SLURM) */
  const char *env_rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!env_rank) env_rank = getenv("PMI_RANK");
  if (!env_rank) env_rank = getenv("SLURM_PROCID");
  R = env_rank ? atoi(env_rank) : 0;
  if (report("dist_manager_initialize", dist_manager_initialize())) return 1;
  dist_manager_rank(&R);
  dist_manager_world_size(&W);
  return scenario(argv[1]);
}
