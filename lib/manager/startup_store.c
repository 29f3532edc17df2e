/* The manager's start-up without MPI: torchrun's workers, or any launcher
 * that sets only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The
 * rendezvous store (store/rendezvous.h) stands in for MPI's start-up
 * exchanges and Gloo for its communicators; the steps are those of the MPI
 * start-up (manager.c): every rank's status and settings in one exchange,
 * nodes from host names, devices, the start-up table, the built-in groups. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "manager/startup.h"
#include "store/rendezvous.h"

#ifdef HAVE_GLOO

extern char **environ;

#define HOST_MAX 64
#define GLOO_DEFAULT_TIMEOUT 1800.0 /* a Gloo context must have one: PyTorch's default for Gloo, 30 min */

/* The worst status in `all` (rank order): this rank's own message when it
 * failed, else one naming the rank. Every rank gets the same code. */
static dist_status worst(const int64_t *all, size_t stride, dist_status mine, const char *what) {
  int who = -1;
  int64_t code = 0;
  for (int q = 0; q < dist__groups.size; q++) {
    int64_t c = all[(size_t)q * stride];
    if (c < code) code = c, who = q;
  }
  if (!code) return DIST_SUCCESS;
  dist_status s = dist__status_valid(code) ? (dist_status)code : DIST_ERR_MISMATCH;
  if (mine) return mine == s ? mine : dist__error(s, "%s", dist_last_error());
  return dist__error(s, "%s failed on rank %d: %s; see that rank's message", what, who, dist_status_string(s));
}

/* Everyone's status, through the store (before any Gloo context exists). */
static dist_status agree(dist_status mine, const char *what) {
  int64_t me = mine, *all = calloc((size_t)dist__groups.size, sizeof *all);
  if (!all) return dist__error(DIST_ERR_NO_MEMORY, "%s: statuses", what);
  dist_status s = dist__rdzv_all_gather(dist__engine.rdzv, what, &me, sizeof me, all);
  if (!s) s = worst(all, 1, mine, what);
  free(all);
  return s ? s : mine;
}

typedef struct first_row {
  int64_t status;
  uint64_t settings; /* dist__settings_hash: the settings every rank must share */
  int64_t agent;     /* torchrun's GROUP_RANK (its agent, a "node" of its own), or -1 */
  char host[HOST_MAX];
} first_row;

/* torchrun's agent of this process: two agents on one host (srun -n 2 on a
 * node, each task running torchrun) are two nodes to torchrun, whose
 * LOCAL_RANK and LOCAL_WORLD_SIZE count each agent's processes only. */
static int64_t agent_of(void) {
  long v;
  const char *g = getenv("GROUP_RANK");
  return g && dist__parse_int_loose(g, &v) && v >= 0 ? v : -1;
}

/* Nodes from host names and torchrun's agents (or DIST_RANKS_PER_NODE
 * blocks): leader = lowest rank of my node, local rank and size by rank order. */
static dist_status nodes(const first_row *all, int *leader) {
  dist__manager *m = &dist__state;
  int me = dist__groups.rank, n = m->settings.ranks_per_node;
  *leader = -1;
  m->local_rank = m->local_size = 0;
  for (int q = 0; q < dist__groups.size; q++) {
    int same = n > 0 ? q / n == me / n : !strncmp(all[q].host, all[me].host, HOST_MAX) && all[q].agent == all[me].agent;
    if (!same) continue;
    if (*leader < 0) *leader = q;
    if (q < me) m->local_rank++;
    m->local_size++;
  }
  const dist_launch *l = &m->launch;
  if (n <= 0 && l->local_rank >= 0 && (l->local_rank != m->local_rank || l->local_size != m->local_size))
    return dist__error(DIST_ERR_LAUNCH_MISMATCH,
                       "launcher %s says local rank %d of %d, but the host names (%s) say %d of %d: ranks of one node "
                       "must report the same host name",
                       dist_launch_method_name(l->method), l->local_rank, l->local_size, all[me].host, m->local_rank,
                       m->local_size);
  return DIST_SUCCESS;
}

static dist_status first_exchange(dist_status local, int *leader) {
  first_row mine, *all = calloc((size_t)dist__groups.size, sizeof *all);
  memset(&mine, 0, sizeof mine);
  mine.status = local;
  mine.settings = local ? 0 : dist__settings_hash();
  mine.agent = agent_of();
  if (gethostname(mine.host, sizeof mine.host - 1)) snprintf(mine.host, sizeof mine.host, "?");
  if (!all) return agree(dist__error(DIST_ERR_NO_MEMORY, "start-up rows"), "starting distmgr");
  const char *what = "starting distmgr (DIST_* settings, launch detection)";
  dist_status s = dist__rdzv_all_gather(dist__engine.rdzv, what, &mine, sizeof mine, all);
  if (!s) s = worst(&all[0].status, sizeof *all / sizeof(int64_t), local, what);
  for (int q = 1; !s && q < dist__groups.size; q++)
    if (all[q].settings != all[0].settings)
      s = dist__error(DIST_ERR_SETTING,
                      "the DIST_* settings every rank must share (DIST_INIT_METHOD, DIST_RANKS_PER_NODE, DIST_VERIFY, "
                      "DIST_CUDA_BACKEND, DIST_TIMEOUT, DIST_STORE_SERVER, DIST_HOST_ENGINE) differ between rank 0 "
                      "and rank %d: set them identically for all ranks",
                      q);
  if (!s) s = agree(nodes(all, leader), "finding the nodes from host names");
  free(all);
  return s;
}

static const char *const NAMES[4] = {"world", "local", "cross", "self"};

/* Gloo writes to its peers' sockets without MSG_NOSIGNAL: when a peer dies,
 * the next write raises SIGPIPE, whose default kills this process before
 * the call can return its error. Python ignores SIGPIPE (so torch's
 * processes never see this); a C program left at the default gets the same
 * while distmgr runs without MPI, and it back at finalize. */
static int sigpipe_ours;

static void ignore_sigpipe(void) {
  struct sigaction old;
  if (sigaction(SIGPIPE, NULL, &old) || old.sa_handler != SIG_DFL) return; /* the program chose: keep it */
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigpipe_ours = !sigaction(SIGPIPE, &ign, NULL);
  if (sigpipe_ours) dist_log(DIST_LOG_DEBUG, "SIGPIPE ignored while distmgr runs on Gloo (a dead peer is an error, not a kill)");
}

void dist__stop_store(void) {
  if (!sigpipe_ours) return;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, NULL);
  sigpipe_ours = 0;
}

dist_status dist__start_store(dist_status local, dist_status (*choose_device)(int64_t *flags)) {
  dist__manager *m = &dist__state;
  const dist_launch *l = &m->launch;
  dist__groups.rank = l->rank;
  dist__groups.size = l->size;
  dist__engine.gloo_timeout = dist__engine.timeout > 0 ? dist__engine.timeout : GLOO_DEFAULT_TIMEOUT;
  dist__engine.nb_allreduce_min = SIZE_MAX; /* an MPI switch; Gloo's calls all block */
  ignore_sigpipe();
  /* Without the store there is nobody to agree with: each rank fails on its own, in time. */
  DIST_CHECK(dist__rdzv_open(l, (const char *const *)environ, dist__engine.gloo_timeout, &dist__engine.rdzv));
  int leader = -1;
  dist_status s = first_exchange(local, &leader);
  if (s) return s;
  /* The start-up table, as the MPI start-up builds it (device notes read it). */
  int64_t row[DIST__ROW_WORDS] = {0};
  dist_status mine = choose_device(&row[DIST__ROW_DEVFLAGS]);
  row[DIST__ROW_STATUS] = mine;
  row[DIST__ROW_LEADER] = leader;
  row[DIST__ROW_LRANK] = m->local_rank;
  row[DIST__ROW_DEVKEY] = mine ? 0 : (int64_t)dist__device_key(&m->device, dist__groups.rank);
  m->startup_rows = malloc(sizeof(int64_t) * DIST__ROW_WORDS * (size_t)dist__groups.size);
  dist__engine.device_keys = malloc(sizeof *dist__engine.device_keys * (size_t)dist__groups.size);
  dist__engine.node_leaders = malloc(sizeof *dist__engine.node_leaders * (size_t)dist__groups.size);
  if (!mine && (!m->startup_rows || !dist__engine.device_keys || !dist__engine.node_leaders))
    mine = dist__error(DIST_ERR_NO_MEMORY, "start-up table for %d ranks", dist__groups.size);
  mine = agree(mine, "choosing devices");
  if (mine) return mine;
  s = dist__rdzv_all_gather(dist__engine.rdzv, "the start-up table", row, sizeof row, m->startup_rows);
  if (s) return s;
  for (int q = 0; q < dist__groups.size; q++) {
    dist__engine.device_keys[q] = (uint64_t)m->startup_rows[(size_t)q * DIST__ROW_WORDS + DIST__ROW_DEVKEY];
    dist__engine.node_leaders[q] = m->startup_rows[(size_t)q * DIST__ROW_WORDS + DIST__ROW_LEADER];
  }
  /* The built-in groups, each copy a Gloo context met through the store. */
  dist__layout layouts[4];
  s = dist__topology_layouts(m->startup_rows, layouts);
  /* Connects only when every rank has its layouts: a connect waits for each
   * member of the copy (dist__group_add_all does the same). */
  const dist_status laid = agree(s, "laying out the built-in groups");
  s = laid;
  for (int k = 0; !laid && k < 4; k++) {
    dist_status r = dist__group_keep_gloo(NAMES[k], k ? 0 : -1, &layouts[k], s);
    if (!s) s = r;
  }
  for (int k = 0; k < 4; k++) dist__layout_free(&layouts[k]); /* no-ops for those the table took over */
  if (!laid) s = agree(s, "connecting the built-in groups (Gloo)");
  if (s) return s;
  DIST_CHECK(dist__groups_open_rounds(0));
  snprintf(m->master_addr, sizeof m->master_addr, "%s", l->master_addr);
  m->master_port = l->master_port;
  dist_log(DIST_LOG_INFO, "started without MPI: rendezvous at %s port %d, Gloo for host memory", m->master_addr,
           m->master_port);
  return DIST_SUCCESS;
}
#endif
