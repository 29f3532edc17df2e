/* The DIST_* settings: one table of name, default, doc and parser. */
#include "core/internal.h"
#include "store/wire.h"

#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef dist_status (*setting_parser)(const char *name, const char *value, dist__settings *s);

static dist_status parse_method(const char *name, const char *value, dist__settings *s) {
  if (dist_launch_method_parse(value, &s->init_method) != DIST_SUCCESS)
    return dist__error(DIST_ERR_SETTING, "%s='%s' is not a launch method (AUTO, SINGLE, ENV, SLURM, OPENMPI, MPICH)",
                       name, value);
  return DIST_SUCCESS;
}

static dist_status parse_log_level(const char *name, const char *value, dist__settings *s) {
  static const char *const levels[] = {"none", "error", "warn", "info", "debug"};
  for (int i = 0; i < 5; i++)
    if (strcasecmp(value, levels[i]) == 0) {
      s->log_level = (dist_log_level)i;
      return DIST_SUCCESS;
    }
  int n;
  if (dist__parse_int(DIST_ERR_SETTING, name, value, 0, 4, "levels", &n))
    return dist__error(DIST_ERR_SETTING, "%s='%s' is not a log level (none, error, warn, info, debug or 0-4)", name,
                       value);
  s->log_level = (dist_log_level)n;
  return DIST_SUCCESS;
}

static dist_status parse_device(const char *name, const char *value, dist__settings *s) {
  if (strcasecmp(value, "auto") == 0) s->device = DIST__DEVICE_AUTO;
  else if (strcasecmp(value, "cpu") == 0) s->device = DIST__DEVICE_CPU;
  else if (strcasecmp(value, "cuda") == 0) s->device = DIST__DEVICE_CUDA;
  else return dist__parse_int(DIST_ERR_SETTING, name, value, 0, 1023, "expected auto, cpu, cuda or a CUDA device index", &s->device);
  return DIST_SUCCESS;
}

static dist_status parse_ranks_per_node(const char *name, const char *value, dist__settings *s) {
  return dist__parse_int(DIST_ERR_SETTING, name, value, 0, 1 << 20, "0 means: ask MPI which ranks share memory",
                         &s->ranks_per_node);
}

static dist_status parse_port(const char *name, const char *value, dist__settings *s) {
  return dist__parse_int(DIST_ERR_SETTING, name, value, 1, 65535, "a TCP port", &s->master_port);
}

static dist_status parse_verify(const char *name, const char *value, dist__settings *s) {
  return dist__parse_int(DIST_ERR_SETTING, name, value, 0, 1, "1 = check arguments across ranks, 0 = skip",
                         &s->verify);
}

static dist_status parse_rpc_tiny(const char *name, const char *value, dist__settings *s) {
  return dist__parse_int(DIST_ERR_SETTING, name, value, 0, 1, "1 = tiny messages for small remote calls, 0 = never",
                         &s->rpc_tiny);
}

/* value as the index of one of n names (any case) into *out; else an error
 * saying it is not `what`. */
static dist_status choose(const char *name, const char *value, const char *const *names, int n, const char *what,
                          int *out) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(value, names[i]) == 0) {
      *out = i;
      return DIST_SUCCESS;
    }
  return dist__error(DIST_ERR_SETTING, "%s='%s' is not %s", name, value, what);
}

static dist_status parse_cuda_backend(const char *name, const char *value, dist__settings *s) {
  static const char *const names[] = {"auto", "nccl", "staged"};
  return choose(name, value, names, 3, "a CUDA backend (auto, nccl or staged)", &s->cuda_backend);
}

static dist_status parse_nb_allreduce_min(const char *name, const char *value, dist__settings *s) {
  int n;
  if (strcasecmp(value, "auto") == 0) s->nb_allreduce_min = DIST__NB_AUTO;
  else if (strcasecmp(value, "off") == 0) s->nb_allreduce_min = DIST__NB_OFF;
  else {
    DIST_CHECK(dist__parse_int(DIST_ERR_SETTING, name, value, 1, INT_MAX, "expected auto, off or a byte count", &n));
    s->nb_allreduce_min = n;
  }
  return DIST_SUCCESS;
}

static dist_status parse_timeout(const char *name, const char *value, dist__settings *s) {
  char *end = NULL;
  /* Plain decimal seconds ("2", "0.5"); strtod alone would take hex and exponents. */
  double t = value[0] >= '0' && value[0] <= '9' && strspn(value, "0123456789.") == strlen(value) ? strtod(value, &end) : -1;
  if (strcasecmp(value, "off") == 0) t = 0, end = (char *)value + 3;
  if (!end || *end || t < 0 || t > 1e6)
    return dist__error(DIST_ERR_SETTING, "%s='%s' is not a timeout (seconds from 0 to 1e6, or off)", name, value);
  s->timeout = t;
  return DIST_SUCCESS;
}

static dist_status parse_store_dialect(const char *name, const char *value, dist__settings *s) {
  dist__store_dialect d;
  if (strcasecmp(value, "auto") == 0) s->store_dialect = -1;
  else if (dist__store_dialect_parse(value, &d) == 0) s->store_dialect = (int)d;
  else
    return dist__error(DIST_ERR_SETTING,
                       "%s='%s' is not a store dialect (auto, torch22, torch21, torch113, or a torch version such as "
                       "2.5.1)",
                       name, value);
  return DIST_SUCCESS;
}

static dist_status parse_store_server(const char *name, const char *value, dist__settings *s) {
  if (strcasecmp(value, "auto") && strcasecmp(value, "external"))
    return dist__error(DIST_ERR_SETTING, "%s='%s' is not auto or external", name, value);
  s->store_external = !strcasecmp(value, "external");
  return DIST_SUCCESS;
}

static dist_status parse_host_engine(const char *name, const char *value, dist__settings *s) {
  static const char *const names[] = {"auto", "mpi", "gloo"};
  return choose(name, value, names, 3, "a host engine (auto, mpi or gloo)", &s->host_engine);
}

static dist_status parse_round(const char *name, const char *value, dist__settings *s) {
  static const char *const names[] = {"p2p", "auto"};
  return choose(name, value, names, 2, "a round engine (auto or p2p)", &s->round_shm);
}

static dist_status parse_shm(const char *name, const char *value, dist__settings *s) {
  static const char *const names[] = {"off", "auto"};
  return choose(name, value, names, 2, "auto or off", &s->shm_data);
}

/* Where a parsed value lands, so that code comparing settings across ranks
 * reads them from this table rather than from a list of its own. */
enum { INT, LLONG, DOUBLE };
#define AT(field, type) offsetof(dist__settings, field), type

/* One row per setting: adding one is a field in dist__settings and a row
 * here. MATCH: every rank must use the same value (checked at initialize,
 * settings_agree.c); LOCAL: may differ between ranks. */
enum { LOCAL = 0, MATCH = 1 };
static const struct {
  dist_setting_info info;
  setting_parser parse;
  size_t offset;
  int type;
  int must_match;
} TABLE[] = {
    {{"DIST_INIT_METHOD", "AUTO",
      "launch method: AUTO (detect), SINGLE, ENV (torchrun), SLURM, OPENMPI or MPICH"},
     parse_method, AT(init_method, INT), MATCH},
    {{"DIST_LOG_LEVEL", "warn", "log threshold: none, error, warn, info or debug (or 0-4)"}, parse_log_level,
     AT(log_level, INT), LOCAL},
    {{"DIST_DEVICE", "auto",
      "device: auto (local rank mod visible CUDA devices; CPU if none, with a warning when GPUs were allocated), "
      "cuda (as auto, but no usable GPU is an error), cpu, or a CUDA device index"},
     parse_device, AT(device, INT), LOCAL},
    {{"DIST_RANKS_PER_NODE", "0",
      "treat each N consecutive world ranks as one node (simulated nodes); 0 = real nodes from MPI shared memory"},
     parse_ranks_per_node, AT(ranks_per_node, INT), MATCH},
    {{"DIST_MASTER_PORT", "12355", "master port reported when the launcher sets no MASTER_PORT"}, parse_port,
     AT(master_port, INT), LOCAL},
    {{"DIST_VERIFY", "1",
      "1: every collective first agrees across ranks that all arguments are valid and match (errors, not hangs); "
      "0: skip that small all-reduce"},
     parse_verify, AT(verify, INT), MATCH},
    {{"DIST_ROUND", "auto",
      "how a group's check round (DIST_VERIFY, and every agreement point) travels: auto (through an MPI "
      "shared-memory window when all the group's members share one node, else point-to-point messages) or p2p "
      "(messages always)"},
     parse_round, AT(round_shm, INT), MATCH},
    {{"DIST_SHM_DATA", "auto",
      "launches without MPI: host-memory collectives of a group whose members share one node go through a "
      "shared-memory segment (auto) instead of Gloo's TCP (off)"},
     parse_shm, AT(shm_data, INT), MATCH},
    {{"DIST_CUDA_BACKEND", "auto", "device-memory collectives: auto (NCCL if built with it; staged for a group with two ranks on one GPU), nccl, or staged "
      "(copied through host memory and MPI)"},
     parse_cuda_backend, AT(cuda_backend, INT), MATCH},
    /* Must match too, as the threshold it resolves to (settings_agree.c). */
    {{"DIST_NB_ALLREDUCE_MIN", "auto",
      "blocking host all-reduces of at least this many bytes run as MPI_Iallreduce + MPI_Wait: auto (1 MiB with "
      "Open MPI when libnbc's all-reduce is Rabenseifner or ring, which distmgr sets by default; else off), off, "
      "or a byte count"},
     parse_nb_allreduce_min, AT(nb_allreduce_min, LLONG), LOCAL},
    {{"DIST_TIMEOUT", "off",
      "seconds a collective, wait or group creation may take before it fails on every live rank, naming the "
      "ranks that did not arrive; off (0) = wait forever"},
     parse_timeout, AT(timeout, DOUBLE), MATCH},
    {{"DIST_STORE_DIALECT", "auto",
      "launches without MPI: the TCPStore protocol of torchrun's agent store: auto (from the NCCL variables "
      "torchrun sets), torch22 (torch >= 2.2), torch21, torch113 (torch <= 2.0), or a torch version"},
     parse_store_dialect, AT(store_dialect, INT), LOCAL},
    {{"DIST_STORE_SERVER", "auto",
      "launches without MPI: who serves the rendezvous store at MASTER_ADDR:MASTER_PORT: auto (torchrun's agent "
      "when it says so, else distmgr's rank 0), or external (another program of the job, e.g. PyTorch's rank 0 "
      "after init_process_group: distmgr only connects)"},
     parse_store_server, AT(store_external, INT), MATCH},
    {{"DIST_HOST_ENGINE", "auto",
      "host-memory engine: auto (MPI; Gloo for torchrun's processes, which MPI cannot join), mpi, or gloo: a "
      "torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) runs without MPI, through a TCPStore "
      "rendezvous and Gloo"},
     parse_host_engine, AT(host_engine, INT), MATCH},
    {{"DIST_RPC_TINY", "1",
      "1: a remote call with no options and at most one argument of rank 0 or 1 and 8 bytes, to a function every "
      "rank registered in the same order before dist_rpc_init, travels as a 24-byte message, and so does its "
      "answer when it is one such tensor; 0: every call in the general layout"},
     parse_rpc_tiny, AT(rpc_tiny, INT), LOCAL},
};
#define NSETTINGS ((int)(sizeof TABLE / sizeof TABLE[0]))

int dist_settings_count(void) { return NSETTINGS; }

int dist__settings_must_match(int i, const dist__settings *s, const char **name, double *value) {
  if (i < 0 || i >= NSETTINGS || !TABLE[i].must_match) return 0;
  const char *field = (const char *)s + TABLE[i].offset;
  switch (TABLE[i].type) {
    case INT: *value = *(const int *)field; break;
    case LLONG: *value = (double)*(const long long *)field; break;
    default: *value = *(const double *)field; break;
  }
  *name = TABLE[i].info.name;
  return 1;
}

const dist_setting_info *dist_settings_get(int i) { return i >= 0 && i < NSETTINGS ? &TABLE[i].info : NULL; }

dist_status dist__settings_read(const char *const *env, dist__settings *out) {
  dist__settings s;
  /* Defaults go through the same parsers as user values. */
  for (int i = 0; i < NSETTINGS; i++)
    if (TABLE[i].parse(TABLE[i].info.name, TABLE[i].info.default_value, &s) != DIST_SUCCESS)
      return dist__error(DIST_ERR_INTERNAL, "default of %s does not parse", TABLE[i].info.name);
  for (int i = 0; i < NSETTINGS; i++) {
    const char *v = dist__env_get(env, TABLE[i].info.name);
    if (v) DIST_CHECK(TABLE[i].parse(TABLE[i].info.name, v, &s));
  }
  *out = s;
  return DIST_SUCCESS;
}

/* Edit distance between a[0..la) and b[0..lb): insertions, deletions,
 * substitutions and swaps of neighbours ("VERFIY"), letters compared without
 * case. Names longer than 63 characters are too far from every setting. */
#define NAME_MAX_CMP 63
static int distance(const char *a, size_t la, const char *b, size_t lb) {
  if (la > NAME_MAX_CMP || lb > NAME_MAX_CMP) return INT_MAX;
  int rows[3][NAME_MAX_CMP + 1], *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int ca = toupper((unsigned char)a[i - 1]), cb = toupper((unsigned char)b[j - 1]);
      int d = prev[j - 1] + (ca != cb);
      if (prev[j] + 1 < d) d = prev[j] + 1;
      if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
      if (i > 1 && j > 1 && ca == toupper((unsigned char)b[j - 2]) && toupper((unsigned char)a[i - 2]) == cb &&
          prev2[j - 2] + 1 < d)
        d = prev2[j - 2] + 1;
      cur[j] = d;
    }
    int *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  return prev[lb];
}

/* Closest setting to name[0..len) within distance 3: its index, or -1. */
#define CLOSE_ENOUGH 3
static int closest(const char *name, size_t len, int *dist) {
  int best = -1, bestd = CLOSE_ENOUGH + 1;
  for (int i = 0; i < NSETTINGS; i++) {
    size_t lt = strlen(TABLE[i].info.name);
    if ((len > lt ? len - lt : lt - len) > CLOSE_ENOUGH) continue;
    int d = distance(name, len, TABLE[i].info.name, lt);
    if (d < bestd) best = i, bestd = d;
  }
  *dist = bestd;
  return best;
}

int dist__settings_closest(const char *name, char *out, size_t n) {
  int d, i = name ? closest(name, strlen(name), &d) : -1;
  if (out && n) snprintf(out, n, "%s", i >= 0 ? TABLE[i].info.name : "");
  return i >= 0 ? d : -1;
}

void dist__settings_warn_unknown(const char *const *env) {
  for (; env && *env; env++) {
    const char *e = *env, *eq = strchr(e, '=');
    if (strncmp(e, "DIST_", 5) != 0 || !eq) continue;
    size_t len = (size_t)(eq - e);
    int known = 0;
    for (int i = 0; i < NSETTINGS && !known; i++)
      known = strlen(TABLE[i].info.name) == len && strncmp(TABLE[i].info.name, e, len) == 0;
    if (known) continue;
    /* The name as printed: at most 64 characters, unprintable ones as '?'. */
    char name[NAME_MAX_CMP + 2];
    size_t k = 0;
    for (; k < len && k <= NAME_MAX_CMP; k++) name[k] = e[k] > 32 && e[k] < 127 ? e[k] : '?';
    name[k] = '\0';
    int d, i = closest(e, len, &d);
    if (i >= 0) {
      dist_log(DIST_LOG_WARN, "%s%s is not a distmgr setting (did you mean %s?); see dist_settings_print", name,
               k < len ? "..." : "", TABLE[i].info.name);
    } else {
      char list[512];
      size_t o = 0;
      for (int j = 0; j < NSETTINGS && o < sizeof list; j++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", TABLE[j].info.name);
      dist_log(DIST_LOG_WARN, "%s%s is not a distmgr setting (known settings: %s); see dist_settings_print", name,
               k < len ? "..." : "", list);
    }
  }
}

char *dist__settings_line(const char *const *env, char *buf, size_t n) {
  size_t k = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < NSETTINGS && k < n; i++) {
    const char *v = dist__env_get(env, TABLE[i].info.name);
    int w = snprintf(buf + k, n - k, "%s%s=%s%s", i ? " " : "", TABLE[i].info.name, v ? v : TABLE[i].info.default_value,
                     v ? "" : " (default)");
    if (w < 0) break;
    k += (size_t)w;
  }
  return buf;
}

void dist_settings_print(FILE *out) {
  fprintf(out, "%-20s %-8s %-10s %s\n", "setting", "default", "value", "meaning");
  for (int i = 0; i < NSETTINGS; i++) {
    const char *v = getenv(TABLE[i].info.name);
    fprintf(out, "%-20s %-8s %-10s %s\n", TABLE[i].info.name, TABLE[i].info.default_value, v ? v : "(unset)",
            TABLE[i].info.doc);
  }
}
