/* A rank that fails in a launch without MPI tells the others through the
 * store (tests/torchrun.sh runs this under a bare launcher, DIST_TIMEOUT=30):
 *   gives_up SITE SKIP init   the last rank fails start-up at SITE (rdzv_set:
 *                             a rendezvous exchange; gloo_connect: a built-in
 *                             group's connect) after SKIP hits that pass;
 *   gives_up SITE SKIP group  start-up succeeds, then the last rank fails in
 *                             a subgroup's creation; the job goes on: a second
 *                             creation works and finalize too;
 *   gives_up - 0 exit         the last rank returns from main after
 *                             initialize, without dist_manager_finalize; the
 *                             others then run the "group" calls.
 * GIVES_UP_RANK: the failing rank instead of the last; GIVES_UP_GROUP: the
 * subgroups' size instead of the world's (several copies: those without the
 * failing rank connect, those with it stop).
 * Each rank prints "gives_up: rank R: CALL -> ok" or "-> error: [STATUS] MESSAGE".
 * The script checks that every rank got its error within seconds, not at
 * DIST_TIMEOUT, the others naming the rank that gave up. */
#include <distmgr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char *dist__fault_site; /* lib/core/fault.h: test-only injection */
extern int dist__fault_skip;

static int R;

static dist_status say(const char *call, dist_status s) {
  if (s) printf("gives_up: rank %d: %s -> error: [%s] %s\n", R, call, dist_status_string(s), dist_last_error());
  else printf("gives_up: rank %d: %s -> ok\n", R, call);
  fflush(stdout);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 4) return fprintf(stderr, "usage: gives_up SITE SKIP init|group\n"), 2;
  const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE"), *f = getenv("GIVES_UP_RANK"), *g = getenv("GIVES_UP_GROUP");
  R = r ? atoi(r) : 0;
  const int last = R == (f ? atoi(f) : (w ? atoi(w) : 1) - 1), at_init = !strcmp(argv[3], "init");
  if (last && at_init) dist__fault_site = argv[1], dist__fault_skip = atoi(argv[2]);
  if (say("dist_manager_initialize", dist_manager_initialize())) return 0;
  if (last && !strcmp(argv[3], "exit")) return 0; /* without dist_manager_finalize */
  if (!at_init) {
    int size = 0;
    dist_manager_world_size(&size);
    if (g) size = atoi(g);
    if (last) dist__fault_site = argv[1], dist__fault_skip = atoi(argv[2]);
    say("dist_group_create_subgroup", dist_group_create_subgroup("first", size, NULL));
    dist__fault_site = NULL;
    say("dist_group_create_subgroup again", dist_group_create_subgroup("second", size, NULL));
    float x = 1;
    dist_tensor t = dist_tensor_host(&x, DIST_F32, 1, (int64_t[1]){1});
    if (!say("dist_all_reduce on it", dist_all_reduce("second", &t, DIST_SUM)) && x != (float)size)
      printf("gives_up: rank %d: WRONG sum %g\n", R, (double)x);
  }
  say("dist_manager_finalize", dist_manager_finalize());
  return 0;
}
