/* The store rendezvous under a real torchrun (tests/torchrun.sh), no MPI:
 * every rank all-gathers (rank, size, host), checks the order, takes a
 * broadcast from the last rank, meets at a barrier and closes. Prints one
 * line per rank; exit status 0 when every check held. DIST_TIMEOUT (seconds,
 * default 30) bounds each exchange; a failure prints distmgr's message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "store/rendezvous.h"

extern char **environ;

typedef struct me {
  int rank, size;
  char host[64];
} me;

static dist__rdzv *rdzv; /* closed (not collectively) on a failure: nothing leaks */
static void *rows;

static int fail(const char *what) {
  fprintf(stderr, "torchrun_rdzv: %s failed: %s\n", what, dist_last_error());
  dist__rdzv_close(rdzv, 0);
  free(rows);
  return 1;
}

int main(void) {
  const char *const *env = (const char *const *)environ;
  dist_launch l;
  if (dist_launch_detect(env, DIST_LAUNCH_ENV, &l)) return fail("launch");
  const char *t = getenv("DIST_TIMEOUT");
  double timeout = t ? atof(t) : 30;
  dist__rdzv *r;
  if (dist__rdzv_open(&l, env, timeout, &r)) return fail("open");
  rdzv = r;
  dist__rdzv_plan plan;
  dist__rdzv_plan_make(&l, env, &plan);
  me mine = {l.rank, l.size, ""}, *all = calloc((size_t)l.size, sizeof *all);
  rows = all;
  if (!all) return fail("calloc");
  gethostname(mine.host, sizeof mine.host - 1);
  int bad = 0;
  if (dist__rdzv_all_gather(r, "all-gather", &mine, sizeof mine, all)) return fail("all-gather");
  for (int q = 0; q < l.size; q++) bad += all[q].rank != q || all[q].size != l.size || strcmp(all[q].host, mine.host);
  char msg[32] = "";
  if (l.rank == l.size - 1) snprintf(msg, sizeof msg, "from rank %d", l.rank);
  if (dist__rdzv_broadcast(r, "broadcast", l.size - 1, msg, sizeof msg)) return fail("broadcast");
  char want[32];
  snprintf(want, sizeof want, "from rank %d", l.size - 1);
  bad += strcmp(msg, want) != 0;
  if (dist__rdzv_barrier(r, "barrier")) return fail("barrier");
  rdzv = NULL;
  if (dist__rdzv_close(r, 1)) return fail("close");
  printf("torchrun_rdzv: rank %d of %d %s (%s store, dialect %s)\n", l.rank, l.size, bad ? "FAILED" : "ok",
         plan.agent_store ? "torchrun's agent" : "rank 0's", dist__store_dialect_name(plan.dialect));
  free(all);
  rows = NULL;
  return bad != 0;
}
