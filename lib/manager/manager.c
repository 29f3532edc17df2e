/* The manager: initialize and finalize the single global state. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "core/check.h"
#include "backend/board.h"
#include "manager/coll_call.h"
#include "backend/faults.h"
#include "backend/half_ops.h"
#include "backend/wait.h"
#include "manager/startup.h"
#ifdef HAVE_GLOO
#include "store/rendezvous.h"
#endif

extern char **environ;

static int atexit_registered;
static pid_t owner; /* the process that initialized */

static const int MPI_LEVELS[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};

/* Release everything; MPI itself only at exit (see manager.h). `orderly`:
 * every rank is here too (collective frees allowed). Else `code` and `why`
 * (this rank's failure) go to the others through the rendezvous store, when
 * there is one, so that they stop waiting for this rank. */
static void release_state(int orderly, dist_status code, const char *why) {
  dist__manager *m = &dist__state;
  int finalized = 0;
  char because[1024]; /* copied first: the frees below may set errors of their own */
  snprintf(because, sizeof because, "%s", why && *why ? why : "(no message)");
  dist__board_close(orderly);
  dist__faults_close();
  dist__groups_free();
  dist__half_ops_free();
  free(dist__engine.device_keys);
  dist__engine.device_keys = NULL;
  free(dist__engine.node_leaders);
  dist__engine.node_leaders = NULL;
  free(m->startup_rows);
  m->startup_rows = NULL;
#ifdef HAVE_GLOO
  if (dist__engine.rdzv) { /* after the groups' Gloo contexts: the store outlives them */
    if (!orderly) dist__rdzv_give_up(dist__engine.rdzv, code, because);
    dist_status closed = dist__rdzv_close(dist__engine.rdzv, orderly);
    if (closed) dist_log(DIST_LOG_WARN, "closing the rendezvous store: %s", dist_last_error());
    dist__engine.rdzv = NULL;
  }
  dist__stop_store();
#endif
  DIST_WARN_CALL(MPI_Finalized(&finalized));
  if (dist__engine.world != MPI_COMM_NULL && !finalized) DIST_WARN_CALL(MPI_Comm_free(&dist__engine.world));
  dist__engine.world = MPI_COMM_NULL;
  m->initialized = 0;
  dist__engine.up = 0;
  dist__log_set_rank(-1, -1);
}

/* A distributed run that ends without a successful dist_manager_finalize
 * must not finalize MPI collectively: the other ranks may be waiting for
 * this one in a collective and MPI_Finalize would leave them there (or wait
 * for them) forever. Tell them on the fault channel, give their waits a
 * moment to report it, and end the job. */
static void end_job(void) {
  char msg[1024];
  if (dist__engine.broken)
    snprintf(msg, sizeof msg, "rank %d of %d is exiting after a failure (%s); ending the job with MPI_Abort", dist__groups.rank,
             dist__groups.size, dist__engine.broken_msg);
  else
    snprintf(msg, sizeof msg,
             "rank %d of %d exited without calling dist_manager_finalize(); ending the job with MPI_Abort (the other "
             "ranks could be waiting for it in a collective)",
             dist__groups.rank, dist__groups.size);
  fprintf(stderr, "distmgr: %s\n", msg);
  fflush(stderr);
  dist__faults_announce(DIST__FAULT_EXIT, NULL, msg);
  dist__faults_flush(1.0);
  (void)MPI_Abort(MPI_COMM_WORLD, 1); /* does not return */
}

static void at_exit(void) {
  /* A child forked without exec exits with a copy of its parent's state:
   * the job, the store connection and the segments are the parent's. */
  if (getpid() != owner) return;
  int inited = 0, finalized = 0;
  DIST_WARN_CALL(MPI_Initialized(&inited));
  DIST_WARN_CALL(MPI_Finalized(&finalized));
  if (dist__state.initialized && dist__state.mpi_ours && dist__groups.size > 1 && inited && !finalized) end_job();
  if (dist__state.initialized) /* without MPI: no collective at exit; the others learn why through the store */
    release_state(!dist__engine.rdzv, DIST_ERR_ABORTED,
                  dist__engine.broken ? dist__engine.broken_msg : "it exited without calling dist_manager_finalize()");
  if (dist__state.mpi_ours && inited && !finalized) DIST_WARN_CALL(MPI_Finalize());
}

/* at_exit for this process (not for a child forked later). */
static void watch_exit(void) {
  owner = getpid();
  if (!atexit_registered && atexit(at_exit) == 0) atexit_registered = 1;
}

static dist_status start_mpi(MPI_Comm adopt, dist_thread_level level) {
  dist__manager *m = &dist__state;
  int inited = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  DIST_MPI_CALL(MPI_Finalized(&finalized));
  if (finalized) return dist__error(DIST_ERR_UNSUPPORTED, "MPI was already finalized; it cannot be initialized again");
  DIST_MPI_CALL(MPI_Initialized(&inited));
  if (!inited) {
    if (adopt != MPI_COMM_WORLD)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "adopting a communicator requires MPI to be initialized first");
    /* Open MPI 4.1's non-blocking all-reduce (libnbc, which DDP buckets use)
     * picks a binomial tree below 4 ranks or in place: about 2.5x slower than
     * MPI_Allreduce on large buffers here. Rabenseifner's algorithm matches
     * it. Only a default: the user's own setting wins, other MPIs ignore it. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    /* More ranks than cores on this node (srun --overcommit; Open MPI's own
     * mpirun already does this when oversubscribed): busy-polling ranks steal
     * each other's cores, and start-up took 1.4 s instead of 0.27 s for 4
     * ranks on 2 cores (bench/RESULTS.md). Also only a default. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && dist__launch_node_tasks((const char *const *)environ, &m->launch) > cores)
      setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    DIST_CHECK(dist__launch_check_pmi_fd((const char *const *)environ));
    DIST_MPI_CALL(MPI_Init_thread(NULL, NULL, MPI_LEVELS[level], &provided));
    m->mpi_ours = 1;
  } else {
    DIST_MPI_CALL(MPI_Query_thread(&provided));
  }
  watch_exit();
  if (provided < MPI_LEVELS[level])
    return dist__error(DIST_ERR_UNSUPPORTED, "MPI provides thread level %d, less than the requested %d", provided,
                       MPI_LEVELS[level]);
  DIST_MPI_CALL(MPI_Comm_dup(adopt, &dist__engine.world));
  DIST_MPI_CALL(MPI_Comm_set_errhandler(dist__engine.world, MPI_ERRORS_RETURN));
  m->adopted = adopt != MPI_COMM_WORLD;
  return DIST_SUCCESS;
}

/* DIST_NB_ALLREDUCE_MIN. Open MPI 4.1's non-blocking all-reduce with libnbc's
 * Rabenseifner (set above) takes 0.64-0.70 of its blocking one's time from
 * 1 MiB up on two nodes of 2 ranks over TCP, and 0.78-1.01 on shared memory
 * (bench/RESULTS.md). With libnbc's default tree below 4 ranks it would be
 * slower, hence "auto" checks the algorithm. Blocking and non-blocking
 * collectives do not match each other, so the resolved value is one of the
 * settings every rank must share (settings_agree.c). Local. */
static void resolve_nb_allreduce(void) {
  dist__manager *m = &dist__state;
  long long set = m->settings.nb_allreduce_min;
  size_t v = SIZE_MAX;
  if (set > 0) v = (size_t)set;
  else if (set == DIST__NB_AUTO) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    const char *alg = getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    int good = alg && (!strcmp(alg, "1") || !strcmp(alg, "3") || !strcmp(alg, "ring") || !strcmp(alg, "rabenseifner"));
    if (good && MPI_Get_library_version(version, &len) == MPI_SUCCESS && strstr(version, "Open MPI")) v = 1u << 20;
  }
  dist__engine.nb_allreduce_min = v;
}

/* Everything local before the first exchange, in one agreement round: the
 * settings read, launch detection and the launcher-against-MPI check (any
 * may fail on one rank only) and the hash of the settings that must match. */
static dist_status first_round(dist_status read, dist_status detected) {
  dist__manager *m = &dist__state;
  dist_status mine = read ? read : detected;
  if (!mine) mine = dist__launch_check_world(&m->launch, m->launch_forced, (const char *const *)environ);
  if (!mine) resolve_nb_allreduce();
  if (!mine) {
    m->startup_rows = malloc(sizeof(int64_t) * DIST__ROW_WORDS * (size_t)dist__groups.size);
    if (!m->startup_rows) mine = dist__error(DIST_ERR_NO_MEMORY, "start-up table for %d ranks", dist__groups.size);
  }
  int differs = 0;
  dist_status s = dist__agree_status_hash(dist__engine.world, mine, mine ? 0 : dist__settings_hash(),
                                          "starting distmgr (DIST_* settings, launch detection, launcher check)",
                                          &differs);
  return differs ? dist__settings_name_difference() : s;
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
  int rc = MPI_Bcast(&mine, sizeof mine, MPI_BYTE, 0, dist__engine.world);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Bcast (master address)");
  memcpy(m->master_addr, mine.host, sizeof mine.host);
  m->master_port = mine.port;
  return DIST_SUCCESS;
}

/* This rank's device (DIST_DEVICE, visible GPUs, local rank) and its row
 * flags: a CUDA build that falls back to the CPU although the launcher or the
 * environment allocated GPUs is flagged, so that one rank per node says so. */
static dist_status choose_device(int64_t *flags) {
  dist__manager *m = &dist__state;
  char why[160], given[96];
  int visible = dist__device_visible_count(why, sizeof why);
  DIST_CHECK(dist__device_choose(m->settings.device, visible, why, m->local_rank, &m->device));
  *flags = 0;
  if (m->device.kind == DIST_DEVICE_CPU && m->settings.device == DIST__DEVICE_AUTO && visible == 0) {
    int allocated = dist__gpus_allocated((const char *const *)environ, given, sizeof given);
#ifdef HAVE_CUDA
    if (allocated) *flags |= DIST__DEV_FELL_BACK;
#endif
    snprintf(m->cpu_reason, sizeof m->cpu_reason, "%s%s%s", allocated ? given : "", allocated ? " but " : "", why);
    dist_log(DIST_LOG_INFO, "running on the CPU: %s", m->cpu_reason);
  }
  return dist__device_select(&m->device);
}

/* The one all-gather of start-up (state.h: the start-up table): each rank's
 * status so far, node leader, local rank and device. Then every rank builds
 * the nodes, the built-in groups and the device table from it. */
static dist_status gather_ranks(void) {
  dist__manager *m = &dist__state;
  int64_t row[DIST__ROW_WORDS] = {0}, *rows = m->startup_rows;
  MPI_Comm node_comm = MPI_COMM_NULL;
  int leader = -1;
  dist_status mine = dist__topology_node(&node_comm, &leader);
  if (!mine) mine = choose_device(&row[DIST__ROW_DEVFLAGS]);
  row[DIST__ROW_STATUS] = mine;
  row[DIST__ROW_LEADER] = leader;
  row[DIST__ROW_LRANK] = m->local_rank;
  row[DIST__ROW_DEVKEY] = mine ? 0 : (int64_t)dist__device_key(&m->device, dist__groups.rank);
  int rc = MPI_Allgather(row, DIST__ROW_WORDS, MPI_INT64_T, rows, DIST__ROW_WORDS, MPI_INT64_T, dist__engine.world);
  if (rc != MPI_SUCCESS && !mine) mine = dist__mpi_error(rc, "MPI_Allgather (start-up table)");
  for (int q = 0; !mine && q < dist__groups.size; q++) {
    int64_t code = rows[(size_t)q * DIST__ROW_WORDS + DIST__ROW_STATUS];
    if (code)
      mine = dist__error(code < 0 && dist__status_valid(code) ? (dist_status)code : DIST_ERR_MISMATCH,
                         "starting distmgr (node layout, device choice) failed on rank %d: %s; see that rank's "
                         "message",
                         q, code < 0 && dist__status_valid(code) ? dist_status_string((dist_status)code)
                                                                 : "a malformed status word");
  }
  if (mine) { /* every rank saw the same rows: all leave here together */
    if (node_comm != MPI_COMM_NULL) MPI_Comm_free(&node_comm);
    return mine;
  }
  dist_status s = dist__topology_groups(rows, &node_comm);
  dist__engine.device_keys = malloc(sizeof *dist__engine.device_keys * (size_t)dist__groups.size);
  if (!s && !dist__engine.device_keys) s = dist__error(DIST_ERR_NO_MEMORY, "device table for %d ranks", dist__groups.size);
  for (int q = 0; !s && q < dist__groups.size; q++) dist__engine.device_keys[q] = (uint64_t)rows[(size_t)q * DIST__ROW_WORDS + DIST__ROW_DEVKEY];
  s = dist__agree(dist__engine.world, s, "building the built-in groups");
  return s ? s : dist__groups_open_rounds(0);
}

/* Said once per node, at the default level: GPUs allocated but unusable, and
 * ranks that share a GPU. */
static void device_notes(void) {
  dist__manager *m = &dist__state;
  int a, b, n;
  int notes = dist__device_notes(m->startup_rows, dist__groups.size, dist__groups.rank, &a, &b, &n);
  if (notes & DIST__NOTE_FELL_BACK)
    dist_log(DIST_LOG_WARN,
             "GPUs were allocated but CUDA cannot be used on this node (%s): its ranks run on the CPU; set "
             "DIST_DEVICE=cuda to make this an error, or DIST_DEVICE=cpu if the CPU is intended",
             m->cpu_reason);
  if (notes & DIST__NOTE_SHARED)
    dist_log(DIST_LOG_WARN,
             "world ranks %d and %d drive the same GPU (%d ranks on this node): they take turns on it, and device "
             "collectives of groups holding both go through host memory (NCCL refuses shared GPUs); start one rank "
             "per GPU for full speed",
             a, b, n);
}

static void log_settings(void) {
  char line[2048];
  dist_log(DIST_LOG_DEBUG, "settings: %s", dist__settings_line((const char *const *)environ, line, sizeof line));
}

/* Steps before MPI: settings, then launch detection, purely local. */
static dist_status read_settings(void) {
  dist__manager *m = &dist__state;
  DIST_CHECK(dist__settings_read((const char *const *)environ, &m->settings));
  dist__engine.timeout = m->settings.timeout; /* what the engines obey, given once */
  dist__engine.cuda_backend = m->settings.cuda_backend;
  dist__engine.round_shm = m->settings.round_shm;
  dist__engine.shm_data = m->settings.shm_data;
  dist_log_level_set(m->settings.log_level);
  log_settings();
  return DIST_SUCCESS;
}

static dist_status detect(const dist_init_options *o) {
  dist__manager *m = &dist__state;
  dist_launch_method forced = o->method != DIST_LAUNCH_AUTO ? o->method : m->settings.init_method;
  m->launch_forced = forced != DIST_LAUNCH_AUTO;
  DIST_CHECK(dist_launch_detect((const char *const *)environ, forced, &m->launch));
  dist__engine.node_tasks = dist__launch_node_tasks((const char *const *)environ, &m->launch);
  if (m->launch.note[0]) dist_log(DIST_LOG_INFO, "%s", m->launch.note);
  if (m->launch.warning[0]) dist_log(DIST_LOG_WARN, "%s", m->launch.warning);
  /* Gloo when asked, and by default for the processes MPI cannot join (torchrun's). */
  int forced_gloo = m->settings.host_engine == DIST__HOST_GLOO;
  if (forced_gloo || (m->settings.host_engine == DIST__HOST_AUTO && !m->launch.mpi_can_join)) {
#ifdef HAVE_GLOO
    if (m->launch.method != DIST_LAUNCH_ENV)
      return dist__error(DIST_ERR_UNSUPPORTED,
                         "DIST_HOST_ENGINE=gloo needs a torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, "
                         "MASTER_PORT); this one is %s",
                         dist_launch_method_name(m->launch.method));
    m->without_mpi = 1;
    return DIST_SUCCESS;
#else
    if (forced_gloo)
      return dist__error(DIST_ERR_UNSUPPORTED, "DIST_HOST_ENGINE=gloo, but this distmgr was built without Gloo "
                                               "(configure found no libgloo-dev)");
#endif
  }
  if (!m->launch.mpi_can_join) return dist__launch_refuse_torchrun(&m->launch, (const char *const *)environ);
  return DIST_SUCCESS;
}

static dist_status finish_initialize(void);

static const dist_init_options init_defaults = DIST_INIT_OPTIONS_INIT;
static const dist__options_kind init_options_kind =
    DIST__OPTIONS_KIND(dist_init_options, "DIST_INIT_OPTIONS_INIT", method, &init_defaults);

static dist_status initialize(MPI_Comm adopt, const dist_init_options *options, const char *what) {
  dist__manager *m = &dist__state;
  dist_init_options o;
  if (m->initialized) {
    dist_log(DIST_LOG_DEBUG, "dist_manager_initialize: already initialized");
    return DIST_SUCCESS;
  }
  DIST_CHECK(dist__options_copy(&init_options_kind, options, &o, what));
  if (o.thread_level < DIST_THREAD_SINGLE || o.thread_level > DIST_THREAD_MULTIPLE)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "thread level %d is not a dist_thread_level", (int)o.thread_level);
  if (o.method < DIST_LAUNCH_AUTO || o.method > DIST_LAUNCH_MPICH)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "launch method %d is not a dist_launch_method", (int)o.method);
  if (adopt == MPI_COMM_NULL) return dist__error(DIST_ERR_INVALID_ARGUMENT, "cannot adopt MPI_COMM_NULL as the world");

  int mpi_ours = m->mpi_ours; /* survives re-initialization */
  memset(m, 0, sizeof *m);
  dist__engine_reset();
  memset(&dist__groups, 0, sizeof dist__groups);
  m->mpi_ours = mpi_ours;
  dist__engine.world = dist__engine.faults = MPI_COMM_NULL;
  /* Detection is local and may fail on one rank only (one malformed
   * variable). MPI_Init is safe under any launcher, so join MPI first and let
   * all ranks agree on the outcome: nobody is left waiting in a collective. */
  dist_status read = read_settings();
  dist_status detected = read ? DIST_SUCCESS : detect(&o);
  dist_launch seen;
  if (read && !dist_launch_detect((const char *const *)environ, DIST_LAUNCH_AUTO, &seen) && !seen.mpi_can_join)
    return read; /* a bad setting under torchrun: MPI_Init would only abort (see below) */
  /* torchrun's processes: MPI_Init could only abort (under srun they all
   * inherit one task's PMI identity), and there is no MPI world to agree in. */
  if (detected && !read && m->launch.method == DIST_LAUNCH_ENV && !m->launch.mpi_can_join) return detected;
#ifdef HAVE_GLOO
  if (m->without_mpi) {
    if (adopt != MPI_COMM_WORLD)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "DIST_HOST_ENGINE=gloo: there is no MPI communicator to adopt");
    dist_status s = dist__start_store(detected, choose_device);
    if (s) {
      release_state(0, s, dist_last_error());
      return s;
    }
    watch_exit();
    return finish_initialize();
  }
#endif
  DIST_CHECK(start_mpi(adopt, o.thread_level));
  /* A failure joins the first round as this rank's own (never a return before it). */
  if (!read) read = DIST_MPI_STATUS(MPI_Comm_size(dist__engine.world, &dist__groups.size), "MPI_Comm_size (world)");
  dist_status s = first_round(read, detected);
  if (!s) s = gather_ranks();
  if (!s) s = find_master();
  if (!s) s = dist__agree(dist__engine.world, dist__faults_open(), "opening the fault channel");
  if (!s && dist__engine.timeout > 0)
    s = dist__agree(dist__engine.world, dist__board_open(), "opening the progress board for DIST_TIMEOUT");
  if (s) {
    release_state(0, s, dist_last_error());
    return s;
  }
  return finish_initialize();
}

/* The steps after either start-up (MPI's, or the store's). Local. */
static dist_status finish_initialize(void) {
  dist__manager *m = &dist__state;
  dist__log_set_rank(dist__groups.rank, dist__groups.size);
  device_notes();
  free(m->startup_rows);
  m->startup_rows = NULL;
  dist__settings_warn_unknown((const char *const *)environ); /* a misspelt DIST_ name would be ignored */
  m->initialized = 1;
  dist__engine.up = 1;
  char line[512];
  dist_manager_describe(line, sizeof line);
  dist_log(DIST_LOG_INFO, "initialized: %s", line);
  return DIST_SUCCESS;
}

dist_status dist_manager_initialize(void) { return initialize(MPI_COMM_WORLD, NULL, "dist_manager_initialize"); }

dist_status dist_manager_initialize_with(const dist_init_options *options) {
  return initialize(MPI_COMM_WORLD, options, "dist_manager_initialize_with");
}

dist_status dist_manager_initialize_comm(MPI_Comm world, const dist_init_options *options) {
  return initialize(world, options, "dist_manager_initialize_comm");
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
  dist__faults_drain(5.0);
  release_state(1, DIST_SUCCESS, NULL);
  dist__finalized_once = 1;
  return DIST_SUCCESS;
}

int dist_manager_is_initialized(void) { return dist__state.initialized; }
