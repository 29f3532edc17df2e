/* The manager: initialize and finalize the single global state. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "board.h"
#include "coll_call.h"
#include "faults.h"
#include "half_ops.h"
#include "wait.h"

extern char **environ;

dist__manager dist__state;
static int atexit_registered;
static int finalized_once; /* to tell "before initialize" from "after finalize" */

dist_status dist__require_initialized(const char *what) {
  if (dist__state.initialized) return DIST_SUCCESS;
  if (finalized_once)
    return dist__error(DIST_ERR_NOT_INITIALIZED,
                       "%s called after dist_manager_finalize() (call dist_manager_initialize() again first)", what);
  return dist__error(DIST_ERR_NOT_INITIALIZED, "%s called before dist_manager_initialize()", what);
}

dist_status dist__require_usable(const char *what) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return dist__error(DIST_ERR_UNSUPPORTED,
                       "%s: MPI was finalized (MPI_Finalize before dist_manager_finalize?): distmgr cannot "
                       "communicate any more",
                       what);
  if (!dist__state.broken) return DIST_SUCCESS;
  return dist__error(DIST_ERR_ABORTED,
                     "%s: distmgr stopped on this rank after an earlier failure (%s); the job cannot continue: "
                     "exit (distmgr then ends the job with MPI_Abort)",
                     what, dist__state.broken_msg);
}

static const int MPI_LEVELS[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};

/* Release everything; MPI itself only at exit (see manager.h). `orderly`:
 * every rank is here too (collective frees allowed). */
static void release_state(int orderly) {
  dist__manager *m = &dist__state;
  int finalized = 0;
  dist__board_close(orderly);
  dist__faults_close();
  dist__groups_free();
  dist__half_ops_free();
  free(m->device_keys);
  m->device_keys = NULL;
  MPI_Finalized(&finalized);
  if (m->world != MPI_COMM_NULL && !finalized) MPI_Comm_free(&m->world);
  m->world = MPI_COMM_NULL;
  m->initialized = 0;
  dist__log_set_rank(-1, -1);
}

/* A distributed run that ends without a successful dist_manager_finalize
 * must not finalize MPI collectively: the other ranks may be waiting for
 * this one in a collective and MPI_Finalize would leave them there (or wait
 * for them) forever. Tell them on the fault channel, give their waits a
 * moment to report it, and end the job. */
static void end_job(void) {
  dist__manager *m = &dist__state;
  char msg[1024];
  if (m->broken)
    snprintf(msg, sizeof msg, "rank %d of %d is exiting after a failure (%s); ending the job with MPI_Abort", m->rank,
             m->size, m->broken_msg);
  else
    snprintf(msg, sizeof msg,
             "rank %d of %d exited without calling dist_manager_finalize(); ending the job with MPI_Abort (the other "
             "ranks could be waiting for it in a collective)",
             m->rank, m->size);
  fprintf(stderr, "distmgr: %s\n", msg);
  fflush(stderr);
  dist__faults_announce(DIST__FAULT_EXIT, NULL, msg);
  dist__faults_flush(1.0);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void at_exit(void) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (dist__state.initialized && dist__state.mpi_ours && dist__state.size > 1 && inited && !finalized) end_job();
  if (dist__state.initialized) release_state(1);
  if (dist__state.mpi_ours && inited && !finalized) MPI_Finalize();
}

static dist_status start_mpi(MPI_Comm adopt, dist_thread_level level) {
  dist__manager *m = &dist__state;
  int inited = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Finalized(&finalized);
  if (finalized) return dist__error(DIST_ERR_UNSUPPORTED, "MPI was already finalized; it cannot be initialized again");
  MPI_Initialized(&inited);
  if (!inited) {
    if (adopt != MPI_COMM_WORLD)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "adopting a communicator requires MPI to be initialized first");
    /* Open MPI 4.1's non-blocking all-reduce (libnbc, which DDP buckets use)
     * picks a binomial tree below 4 ranks or in place: about 2.5x slower than
     * MPI_Allreduce on large buffers here. Rabenseifner's algorithm matches
     * it. Only a default: the user's own setting wins, other MPIs ignore it. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    int rc = MPI_Init_thread(NULL, NULL, MPI_LEVELS[level], &provided);
    if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Init_thread");
    m->mpi_ours = 1;
  } else {
    MPI_Query_thread(&provided);
  }
  if (!atexit_registered && atexit(at_exit) == 0) atexit_registered = 1;
  if (provided < MPI_LEVELS[level])
    return dist__error(DIST_ERR_UNSUPPORTED, "MPI provides thread level %d, less than the requested %d", provided,
                       MPI_LEVELS[level]);
  int rc = MPI_Comm_dup(adopt, &m->world);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Comm_dup (world)");
  MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
  m->adopted = adopt != MPI_COMM_WORLD;
  return DIST_SUCCESS;
}

/* DIST_NB_ALLREDUCE_MIN. Open MPI 4.1's non-blocking all-reduce with libnbc's
 * Rabenseifner (set above) takes 0.64-0.70 of its blocking one's time from
 * 1 MiB up on two nodes of 2 ranks over TCP, and 0.78-1.01 on shared memory
 * (bench/RESULTS.md). With libnbc's default tree below 4 ranks it would be
 * slower, hence "auto" checks the algorithm. Blocking and non-blocking
 * collectives do not match each other, so all ranks take the smallest threshold. */
static dist_status resolve_nb_allreduce(void) {
  dist__manager *m = &dist__state;
  long long set = m->settings.nb_allreduce_min;
  unsigned long long mine = ULLONG_MAX, all = ULLONG_MAX;
  if (set > 0) mine = (unsigned long long)set;
  else if (set == DIST__NB_AUTO) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    const char *alg = getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    int good = alg && (!strcmp(alg, "1") || !strcmp(alg, "3") || !strcmp(alg, "ring") || !strcmp(alg, "rabenseifner"));
    if (good && MPI_Get_library_version(version, &len) == MPI_SUCCESS && strstr(version, "Open MPI"))
      mine = 1u << 20;
  }
  int rc = MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, m->world);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Allreduce (DIST_NB_ALLREDUCE_MIN)");
  m->nb_allreduce_min = all >= SIZE_MAX ? SIZE_MAX : (size_t)all;
  return DIST_SUCCESS;
}

/* The launcher's rank/size must be MPI_COMM_WORLD's. */
static dist_status check_launcher_world(void) {
  const dist_launch *l = &dist__state.launch;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == l->rank && size == l->size) return DIST_SUCCESS;
  return dist__error(DIST_ERR_LAUNCH_MISMATCH,
                     "launcher %s says rank %d of %d, MPI says rank %d of %d (was the program started by the "
                     "launcher that set these variables? force one with DIST_INIT_METHOD)",
                     dist_launch_method_name(l->method), l->rank, l->size, rank, size);
}

/* Master address and port as rank 0 sees them (its launcher's, else its host
 * name), broadcast so that every rank reports the same and environments that
 * differ between ranks cannot make some ranks skip the broadcast. */
static dist_status find_master(void) {
  dist__manager *m = &dist__state;
  struct { char host[DIST_ADDR_MAX]; int port; } mine;
  memset(&mine, 0, sizeof mine);
  if (m->launch.master_addr[0]) {
    memcpy(mine.host, m->launch.master_addr, sizeof mine.host);
  } else {
    int len = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS)
      snprintf(mine.host, sizeof mine.host, "%.*s", (int)sizeof mine.host - 1, name);
  }
  mine.port = m->launch.master_port ? m->launch.master_port : m->settings.master_port;
  int rc = MPI_Bcast(&mine, sizeof mine, MPI_BYTE, 0, m->world);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Bcast (master address)");
  memcpy(m->master_addr, mine.host, sizeof mine.host);
  m->master_port = mine.port;
  return DIST_SUCCESS;
}

/* Every rank learns which GPU each rank drives, so that a group can tell
 * without communicating whether two of its members share one (NCCL refuses
 * that; backend.c then stages device collectives through host MPI). */
static dist_status share_device_keys(void) {
  dist__manager *m = &dist__state;
  uint64_t mine = dist__device_key(&m->device);
  m->device_keys = malloc(sizeof *m->device_keys * (size_t)m->size);
  dist_status s = dist__agree(m->world, m->device_keys ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "device keys"),
                              "allocating the device table");
  if (s) return s;
  int rc = MPI_Allgather(&mine, 1, MPI_UINT64_T, m->device_keys, 1, MPI_UINT64_T, m->world);
  return rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, "MPI_Allgather (device keys)");
}

static dist_status choose_device(void) {
  dist__manager *m = &dist__state;
  DIST_CHECK(dist__device_choose(m->settings.device, dist__device_visible_count(), m->local_rank, &m->device));
  return dist__device_select(&m->device);
}

static void log_settings(void) {
  const dist__settings *s = &dist__state.settings;
  dist_log(DIST_LOG_DEBUG, "settings: DIST_INIT_METHOD=%s DIST_LOG_LEVEL=%d DIST_DEVICE=%d DIST_RANKS_PER_NODE=%d DIST_MASTER_PORT=%d",
           dist_launch_method_name(s->init_method), (int)s->log_level, s->device, s->ranks_per_node, s->master_port);
}

/* Steps before MPI: settings, then launch detection, purely local. */
static dist_status read_settings(void) {
  dist__manager *m = &dist__state;
  DIST_CHECK(dist__settings_read((const char *const *)environ, &m->settings));
  dist_log_level_set(m->settings.log_level);
  log_settings();
  return DIST_SUCCESS;
}

static dist_status detect(const dist_init_options *o) {
  dist__manager *m = &dist__state;
  dist_launch_method forced = o->method != DIST_LAUNCH_AUTO ? o->method : m->settings.init_method;
  DIST_CHECK(dist_launch_detect((const char *const *)environ, forced, &m->launch));
  if (m->launch.note[0]) dist_log(DIST_LOG_INFO, "%s", m->launch.note);
  if (!m->launch.mpi_can_join)
    return dist__error(DIST_ERR_UNSUPPORTED,
                       "launched by torchrun-style variables (WORLD_SIZE=%d) without an MPI launcher: MPI cannot "
                       "join processes it did not start; launch with 'mpirun -n %d' or 'srun -n %d' instead",
                       m->launch.size, m->launch.size, m->launch.size);
  return DIST_SUCCESS;
}

static dist_status initialize(MPI_Comm adopt, const dist_init_options *options) {
  dist__manager *m = &dist__state;
  dist_init_options o = DIST_INIT_OPTIONS_INIT;
  if (m->initialized) {
    dist_log(DIST_LOG_DEBUG, "dist_manager_initialize: already initialized");
    return DIST_SUCCESS;
  }
  if (options) o = *options;
  if (o.thread_level < DIST_THREAD_SINGLE || o.thread_level > DIST_THREAD_MULTIPLE)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "thread level %d is not a dist_thread_level", (int)o.thread_level);
  if (o.method < DIST_LAUNCH_AUTO || o.method > DIST_LAUNCH_MPICH)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "launch method %d is not a dist_launch_method", (int)o.method);
  if (adopt == MPI_COMM_NULL) return dist__error(DIST_ERR_INVALID_ARGUMENT, "cannot adopt MPI_COMM_NULL as the world");

  int mpi_ours = m->mpi_ours; /* survives re-initialization */
  memset(m, 0, sizeof *m);
  m->mpi_ours = mpi_ours;
  m->world = m->faults = MPI_COMM_NULL;
  /* Detection is local and may fail on one rank only (one malformed
   * variable). MPI_Init is safe under any launcher, so join MPI first and let
   * all ranks agree on the outcome: nobody is left waiting in a collective. */
  dist_status read = read_settings();
  dist_status detected = read ? DIST_SUCCESS : detect(&o);
  DIST_CHECK(start_mpi(adopt, o.thread_level));
  dist_status s = dist__agree(m->world, read, "reading the DIST_* settings");
  if (!s) s = dist__settings_agree();
  if (!s) s = dist__agree(m->world, detected, "launch detection");
  if (!s) s = dist__agree(m->world, check_launcher_world(), "checking the launcher against MPI");
  if (!s) s = resolve_nb_allreduce();
  if (!s) s = dist__topology_setup();
  if (!s) s = dist__agree(m->world, choose_device(), "selecting the device");
  if (!s) s = share_device_keys();
  if (!s) s = find_master();
  if (!s) s = dist__faults_open();
  if (!s) s = dist__board_open();
  if (s) {
    release_state(0);
    return s;
  }
  dist__log_set_rank(m->rank, m->size);
  dist__settings_warn_unknown((const char *const *)environ); /* a misspelt DIST_ name would be ignored */
  m->initialized = 1;
  char line[512];
  dist_manager_describe(line, sizeof line);
  dist_log(DIST_LOG_INFO, "initialized: %s", line);
  return DIST_SUCCESS;
}

dist_status dist_manager_initialize(void) { return initialize(MPI_COMM_WORLD, NULL); }

dist_status dist_manager_initialize_with(const dist_init_options *options) {
  return initialize(MPI_COMM_WORLD, options);
}

dist_status dist_manager_initialize_comm(MPI_Comm world, const dist_init_options *options) {
  return initialize(world, options);
}

dist_status dist_manager_finalize(void) {
  const char *what = "dist_manager_finalize";
  DIST_CHECK(dist__require_initialized(what));
  dist__call c;
  /* After a failure the communicators may be in use by abandoned requests:
   * nothing collective any more; the job ends at exit (end_job). */
  DIST_CHECK(dist__call_begin(&c, what, NULL));
  /* Ranks waiting for this one in a collective elsewhere fail instead of hanging. */
  dist__faults_announce(DIST__FAULT_FINALIZE, NULL, "dist_manager_finalize");
  /* Finalize is collective: the check round (always made) doubles as the
   * barrier that keeps a rank from freeing what another is still using. */
  dist_status s = dist__call_verify_always(&c, DIST_SUCCESS);
  if (s) return dist__break(s);
  release_state(1);
  finalized_once = 1;
  return DIST_SUCCESS;
}

int dist_manager_is_initialized(void) { return dist__state.initialized; }
