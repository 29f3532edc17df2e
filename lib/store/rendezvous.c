/* Rendezvous through a TCPStore (rendezvous.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "store/net.h"
#include "store/rendezvous.h"

struct dist__rdzv {
  dist__rdzv_plan plan;
  int rank, size;
  unsigned long seq;         /* exchanges so far: part of every key */
  dist__store_server *server; /* rank 0's, without an agent store */
  dist__store_client *client;
  double timeout;
  /* A rank that did not arrive within the timeout: later exchanges fail at
   * once with this (each would wait the whole timeout for it again). */
  dist_status gone;
  char gone_why[400];
};

/* The key a rank that gave up sets (dist__rdzv_give_up). */
static void gave_up_key(const dist__rdzv *r, char *out, size_t n) { snprintf(out, n, "%sgave_up", r->plan.prefix); }

/* s ended a wait because a rank gave up (its code, any) */
static int gave_up(const dist__rdzv *r, dist_status s) { return s && dist__store_saw_give_up(r->client); }

static dist_status note_gone(dist__rdzv *r, dist_status s) {
  if ((s == DIST_ERR_TIMEOUT || gave_up(r, s)) && !r->gone) {
    r->gone = s;
    snprintf(r->gone_why, sizeof r->gone_why, "%s", dist_last_error());
  }
  return s;
}

dist_status dist__rdzv_still_there(const dist__rdzv *r, const char *what) {
  if (!r || !r->gone) return DIST_SUCCESS;
  return dist__error(r->gone, "%s: not attempted, an earlier exchange failed: %s", what, r->gone_why);
}

/* Keep what a key may contain tame: letters, digits and -_. */
static void tame(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; *in && k + 1 < n; in++)
    out[k++] = (char)((*in >= 'a' && *in <= 'z') || (*in >= 'A' && *in <= 'Z') || (*in >= '0' && *in <= '9') ||
                              *in == '-' || *in == '_'
                          ? *in
                          : '_');
  out[k] = 0;
}

dist_status dist__rdzv_plan_make(const dist_launch *l, const char *const *env, dist__rdzv_plan *out) {
  if (!l->master_addr[0] || l->master_port <= 0)
    return dist__error(DIST_ERR_ENVIRONMENT,
                       "a launch without MPI needs MASTER_ADDR and MASTER_PORT for its rendezvous (launch method %s "
                       "gave %s%s port %d)",
                       dist_launch_method_name(l->method), l->master_addr[0] ? "" : "no address", l->master_addr,
                       l->master_port);
  dist__rdzv_plan p;
  memset(&p, 0, sizeof p);
  const char *agent = dist__env_get(env, "TORCHELASTIC_USE_AGENT_STORE");
  const char *server = dist__env_get(env, "DIST_STORE_SERVER");
  if (server && strcasecmp(server, "auto") && strcasecmp(server, "external"))
    return dist__error(DIST_ERR_SETTING, "DIST_STORE_SERVER='%s' is not auto or external", server);
  p.external = server && !strcasecmp(server, "external");
  p.agent_store = p.external || (agent && !strcmp(agent, "True"));
  p.torchrun = dist__env_get(env, "TORCHELASTIC_RUN_ID") != NULL;
  const char *set = dist__env_get(env, "DIST_STORE_DIALECT");
  if (set && strcmp(set, "auto")) {
    if (dist__store_dialect_parse(set, &p.dialect))
      return dist__error(DIST_ERR_SETTING,
                         "DIST_STORE_DIALECT='%s' is not a store dialect (auto, torch22, torch21, torch113 or a torch "
                         "version such as 2.5.1)",
                         set);
  } else if (!p.agent_store || dist__env_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING")) {
    p.dialect = DIST__STORE_TORCH22; /* our own server, or an agent of torch >= 2.2 */
  } else if (dist__env_get(env, "NCCL_ASYNC_ERROR_HANDLING")) {
    p.dialect = DIST__STORE_TORCH113; /* torch <= 2.1: the requests 1.13 and 2.1 share */
  } else if (p.external) {
    p.dialect = DIST__STORE_TORCH22; /* no torchrun to tell: the newest; a mismatch names DIST_STORE_DIALECT */
  } else {
    return dist__error(DIST_ERR_ENVIRONMENT,
                       "TORCHELASTIC_USE_AGENT_STORE=True, but neither TORCH_NCCL_ASYNC_ERROR_HANDLING (torch >= 2.2) "
                       "nor NCCL_ASYNC_ERROR_HANDLING (torch <= 2.1) tells which torch serves the store: set "
                       "DIST_STORE_DIALECT to the torch version");
  }
  char run[64], restart[16];
  const char *id = dist__env_get(env, "TORCHELASTIC_RUN_ID"), *rc = dist__env_get(env, "TORCHELASTIC_RESTART_COUNT");
  tame(id ? id : "none", run, sizeof run);
  tame(rc ? rc : "0", restart, sizeof restart);
  snprintf(p.prefix, sizeof p.prefix, "/distmgr/%s/%s/", run, restart);
  *out = p;
  return DIST_SUCCESS;
}

dist_status dist__rdzv_open(const dist_launch *l, const char *const *env, double timeout, dist__rdzv **out) {
  *out = NULL;
  dist__rdzv_plan plan;
  DIST_CHECK(dist__rdzv_plan_make(l, env, &plan));
  dist__rdzv *r = calloc(1, sizeof *r);
  if (!r) return dist__error(DIST_ERR_NO_MEMORY, "rendezvous");
  r->plan = plan;
  /* The agent's store outlives an initialize: each one of this process (the
   * same count on every rank) gets keys of its own. */
  static unsigned long opened;
  size_t used = strlen(r->plan.prefix);
  snprintf(r->plan.prefix + used, sizeof r->plan.prefix - used, "%lu/", opened++);
  r->rank = l->rank;
  r->size = l->size;
  r->timeout = timeout;
  dist_status s = DIST_SUCCESS;
  /* torch >= 2 leaves MASTER_PORT to the workers' rank 0: taken there, it is
   * the store PyTorch's init_process_group serves in this very process. */
  if (!plan.agent_store && l->rank == 0 && plan.torchrun && dist__net_port_taken(l->master_port)) {
    dist_log(DIST_LOG_INFO, "MASTER_PORT=%d is taken under torchrun: using the store served there (PyTorch's)",
             l->master_port);
    r->plan.agent_store = r->plan.external = 1;
  }
  if (!r->plan.agent_store && l->rank == 0) {
    dist__store_server_options o = DIST__STORE_SERVER_OPTIONS_DEFAULT;
    o.dialect = plan.dialect;
    s = dist__store_server_start(l->master_port, &o, &r->server);
    if (s) s = dist__error_context(s, "rank 0 serving the rendezvous store on MASTER_PORT=%d", l->master_port);
  }
  /* Rank 0 reaches its own server on the loopback: MASTER_ADDR may name an
   * interface that does not route back to this host. */
  if (!s) s = dist__store_connect(r->server ? "127.0.0.1" : l->master_addr, l->master_port, plan.dialect, timeout, &r->client);
  if (s) {
    const char *whose = r->plan.external ? "an external" : r->plan.agent_store ? "torchrun's agent" : "rank 0's";
    dist__store_server_stop(r->server);
    free(r);
    return dist__error_context(s, "rendezvous of rank %d of %d (%s store)", l->rank, l->size, whose);
  }
  char key[200];
  gave_up_key(r, key, sizeof key);
  dist__store_watch(r->client, 0, key);
  *out = r;
  return DIST_SUCCESS;
}

void dist__rdzv_give_up_on(dist__rdzv *r, const char *key, dist_status code, const char *why) {
  if (!r || !r->client || r->size < 2) return;
  char msg[1024], mine[1024];
  /* "[code] message": dist__store_watch's reader returns the code */
  snprintf(msg, sizeof msg, "[%d] rank %d of %d gave up: %s", (int)(code ? code : DIST_ERR_ABORTED), r->rank, r->size,
           why && *why ? why : "(no message)");
  snprintf(mine, sizeof mine, "%s", dist_last_error()); /* a failed request must not replace this rank's own */
  uint8_t *now = NULL;
  size_t len = 0;
  /* set only where absent: the first rank's message is kept */
  (void)dist__store_compare_set(r->client, key, "", 0, msg, strlen(msg), &now, &len);
  free(now);
  dist__error_restore(mine);
}

void dist__rdzv_give_up(dist__rdzv *r, dist_status code, const char *why) {
  if (!r || !r->client) return;
  char key[200];
  gave_up_key(r, key, sizeof key);
  dist__store_watch(r->client, 0, NULL); /* no waits of its own from here */
  dist__store_watch(r->client, 1, NULL);
  dist__rdzv_give_up_on(r, key, code, why);
}

/* The key of rank q's part of exchange `seq`. */
static void key_of(const dist__rdzv *r, unsigned long seq, int q, char *out, size_t n) {
  snprintf(out, n, "%s%lu/%d", r->plan.prefix, seq, q);
}

/* Wait for every rank's key of exchange `seq`; on timeout name who is missing. */
static dist_status wait_all(dist__rdzv *r, unsigned long seq, const char *what) {
  char (*keys)[200] = malloc(sizeof *keys * (size_t)r->size);
  const char **ptr = malloc(sizeof *ptr * (size_t)r->size);
  if (!keys || !ptr) return free(keys), free(ptr), dist__error(DIST_ERR_NO_MEMORY, "rendezvous keys");
  for (int q = 0; q < r->size; q++) key_of(r, seq, q, keys[q], sizeof keys[q]), ptr[q] = keys[q];
  dist_status s = dist__store_wait(r->client, ptr, (size_t)r->size, r->timeout);
  if (gave_up(r, s)) s = dist__error_context(s, "%s", what);
  else if (s == DIST_ERR_TIMEOUT) {
    char ranks[256] = "";
    size_t k = 0;
    int missing = 0, *miss = calloc((size_t)r->size, sizeof *miss);
    dist_status probe = miss ? dist__store_missing(r->client, ptr, (size_t)r->size, miss) : DIST_ERR_NO_MEMORY;
    for (int q = 0; !probe && q < r->size && k < sizeof ranks; q++)
      if (miss[q]) k += (size_t)snprintf(ranks + k, sizeof ranks - k, "%s%d", missing++ ? "," : "", q);
    if (probe) snprintf(ranks, sizeof ranks, "unknown (%s)", miss ? dist_last_error() : "out of memory");
    free(miss);
    s = dist__error(DIST_ERR_TIMEOUT, "%s: rank%s %s did not arrive within %g s (DIST_TIMEOUT)", what,
                    missing > 1 ? "s" : "", ranks, r->timeout);
  }
  free(keys);
  free(ptr);
  return s;
}

dist_status dist__rdzv_all_gather(dist__rdzv *r, const char *what, const void *mine, size_t len, void *all) {
  DIST_CHECK(dist__rdzv_still_there(r, what));
  unsigned long seq = r->seq++;
  char key[200];
  key_of(r, seq, r->rank, key, sizeof key);
  if (dist__fault("rdzv_set")) return dist__error(DIST_ERR_NO_MEMORY, "%s: injected fault (rdzv_set)", what); /* tests */
  DIST_CHECK(dist__store_set(r->client, key, mine, len));
  DIST_CHECK(note_gone(r, wait_all(r, seq, what)));
  for (int q = 0; q < r->size; q++) {
    uint8_t *v;
    size_t n;
    key_of(r, seq, q, key, sizeof key);
    DIST_CHECK(note_gone(r, dist__store_get(r->client, key, r->timeout, &v, &n)));
    if (n != len) {
      free(v);
      return dist__error(DIST_ERR_MISMATCH, "%s: rank %d sent %zu bytes, this rank %zu: ranks are at different steps",
                         what, q, n, len);
    }
    if (len) memcpy((char *)all + (size_t)q * len, v, len);
    free(v);
  }
  return DIST_SUCCESS;
}

dist_status dist__rdzv_broadcast(dist__rdzv *r, const char *what, int root, void *buf, size_t len) {
  if (root < 0 || root >= r->size)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: root %d of %d ranks", what, root, r->size);
  DIST_CHECK(dist__rdzv_still_there(r, what));
  unsigned long seq = r->seq++;
  char key[200];
  key_of(r, seq, root, key, sizeof key);
  if (r->rank == root) return dist__store_set(r->client, key, buf, len);
  uint8_t *v;
  size_t n;
  dist_status s = dist__store_get(r->client, key, r->timeout, &v, &n);
  if (gave_up(r, s)) return note_gone(r, dist__error_context(s, "%s", what));
  if (s == DIST_ERR_TIMEOUT)
    return note_gone(r, dist__error(DIST_ERR_TIMEOUT, "%s: rank %d (the root) did not arrive within %g s (DIST_TIMEOUT)",
                                    what, root, r->timeout));
  if (s) return s;
  if (n != len) s = dist__error(DIST_ERR_MISMATCH, "%s: the root sent %zu bytes, this rank expects %zu", what, n, len);
  else if (len) memcpy(buf, v, len);
  free(v);
  return s;
}

dist_status dist__rdzv_barrier(dist__rdzv *r, const char *what) {
  DIST_CHECK(dist__rdzv_still_there(r, what));
  unsigned long seq = r->seq++;
  char key[200];
  key_of(r, seq, r->rank, key, sizeof key);
  DIST_CHECK(dist__store_set(r->client, key, "", 0));
  return note_gone(r, wait_all(r, seq, what));
}

dist__store_client *dist__rdzv_client(dist__rdzv *r) { return r->client; }

const char *dist__rdzv_prefix(const dist__rdzv *r) { return r->plan.prefix; }

/* After a failure: each rank counts itself out, and rank 0's own server
 * serves until every other rank has (at most 2 s), since they may still be
 * reading what a rank that gave up said. */
static void linger(dist__rdzv *r) {
  char left[200];
  snprintf(left, sizeof left, "%sleft", r->plan.prefix);
  if (!r->server) {
    (void)dist__store_add(r->client, left, 1, NULL);
    return;
  }
  int64_t n = 0;
  for (double end = dist__net_now() + 2.0; dist__net_now() < end; usleep(10000))
    if (dist__store_add(r->client, left, 0, &n) || n >= r->size - 1) return;
}

/* Rank 0's server must outlive every other rank's last request: after the
 * barrier each other rank counts itself out, the last one says so, and
 * rank 0 stops serving only then. */
dist_status dist__rdzv_close(dist__rdzv *r, int orderly) {
  if (!r) return DIST_SUCCESS;
  dist_status s = orderly ? dist__rdzv_barrier(r, "closing the rendezvous") : DIST_ERR_ABORTED;
  if (orderly && s) dist__rdzv_give_up(r, s, dist_last_error()); /* the others are in the barrier */
  char count[200], last[200];
  snprintf(count, sizeof count, "%s%lu/closing", r->plan.prefix, r->seq); /* seq: same on every rank */
  snprintf(last, sizeof last, "%s%lu/closed", r->plan.prefix, r->seq);
  if ((!orderly || s) && r->size > 1) linger(r);
  if (!s && r->size > 1) {
    if (r->rank != 0) {
      int64_t out = 0;
      s = dist__store_add(r->client, count, 1, &out);
      if (!s && out == r->size - 1) s = dist__store_set(r->client, last, "", 0);
      /* Rank 0's own server: return only once it is gone, so that a next
       * initialize cannot reach it as it stops (it would reset the connection). */
      if (!s && !r->plan.agent_store && dist__store_wait_closed(r->client, r->timeout))
        s = dist__error(DIST_ERR_TIMEOUT, "closing the rendezvous: rank 0's store still served after %g s", r->timeout);
    } else {
      const char *keys[] = {last};
      s = dist__store_wait(r->client, keys, 1, r->timeout);
    }
  }
  dist__store_close(r->client);
  dist__store_server_stop(r->server);
  free(r);
  return orderly ? s : DIST_SUCCESS;
}
