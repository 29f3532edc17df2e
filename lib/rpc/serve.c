/* The serving side: registered functions, the executor threads that run
 * incoming calls, and their replies. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "distmgr/coll.h"
#include "rpc/rpc_internal.h"

/* ---- the registry ------------------------------------------------------------- */

#define REGISTRY_MAX 256
static dist__rpc_fn_entry registry[REGISTRY_MAX];
static int registered;
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;

static dist_status check_name(const char *name, const char *what) {
  if (!name || !*name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: no function name", what);
  if (strlen(name) > DIST_RPC_MAX_NAME)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: name '%.20s...' is longer than %d bytes", what, name,
                       DIST_RPC_MAX_NAME);
  return DIST_SUCCESS;
}

static int find(const char *name, size_t len) {
  for (int i = 0; i < registered; i++)
    if (strlen(registry[i].name) == len && !memcmp(registry[i].name, name, len)) return i;
  return -1;
}

dist_status dist_rpc_register(const char *name, dist_rpc_fn fn, void *user) {
  DIST_CHECK(check_name(name, "dist_rpc_register"));
  if (!fn) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register: '%s' has no function", name);
  dist_status s = DIST_SUCCESS;
  pthread_mutex_lock(&registry_mu);
  if (find(name, strlen(name)) >= 0)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register: '%s' is registered already", name);
  else if (registered == REGISTRY_MAX)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register: more than %d functions", REGISTRY_MAX);
  else {
    dist__rpc_fn_entry *e = &registry[registered];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->fn = fn;
    e->user = user;
    registered++;
  }
  pthread_mutex_unlock(&registry_mu);
  return s;
}

dist_status dist_rpc_register_vjp(const char *name, dist_rpc_fn vjp, void *user) {
  DIST_CHECK(check_name(name, "dist_rpc_register_vjp"));
  if (!vjp) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register_vjp: '%s' has no function", name);
  pthread_mutex_lock(&registry_mu);
  int i = find(name, strlen(name));
  if (i >= 0) registry[i].vjp = vjp, registry[i].vjp_user = user;
  pthread_mutex_unlock(&registry_mu);
  if (i < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register_vjp: register '%s' first", name);
  return DIST_SUCCESS;
}

dist_status dist__rpc_lookup(const char *name, size_t len, dist__rpc_fn_entry *out) {
  pthread_mutex_lock(&registry_mu);
  int i = find(name, len);
  if (i >= 0) *out = registry[i];
  pthread_mutex_unlock(&registry_mu);
  if (i < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "no function '%.*s' is registered", (int)len, name);
  return DIST_SUCCESS;
}

/* Names (with whether each has a VJP) in a hash that does not depend on the
 * order of registration: a sum of per-name hashes. */
static uint64_t entry_hash(const dist__rpc_fn_entry *e) {
  uint64_t h = dist__hash(DIST__HASH_SEED, e->name, strlen(e->name));
  return e->vjp ? h * 31 + 7 : h;
}

dist_status dist_rpc_check_registry(void) {
  pthread_mutex_lock(&registry_mu);
  int64_t mine[2] = {registered, 0};
  for (int i = 0; i < registered; i++) mine[1] = (int64_t)((uint64_t)mine[1] + entry_hash(&registry[i]));
  pthread_mutex_unlock(&registry_mu);
  int64_t lo[2] = {mine[0], mine[1]}, hi[2] = {mine[0], mine[1]};
  int64_t two = 2;
  dist_tensor a = dist_tensor_host(lo, DIST_I64, 1, &two), b = dist_tensor_host(hi, DIST_I64, 1, &two);
  DIST_CHECK(dist_all_reduce(NULL, &a, DIST_MIN));
  DIST_CHECK(dist_all_reduce(NULL, &b, DIST_MAX));
  if (lo[0] == hi[0] && lo[1] == hi[1]) return DIST_SUCCESS;
  /* Which rank differs from rank 0: the lowest whose (count, hash) is not rank 0's. */
  int64_t ref[2] = {mine[0], mine[1]};
  dist_tensor r = dist_tensor_host(ref, DIST_I64, 1, &two);
  DIST_CHECK(dist_broadcast(NULL, &r, 0));
  int64_t who = (mine[0] != ref[0] || mine[1] != ref[1]) ? dist__rpc.rank : INT64_MAX;
  dist_tensor w = dist_tensor_host(&who, DIST_I64, 0, NULL);
  DIST_CHECK(dist_all_reduce(NULL, &w, DIST_MIN));
  return dist__error(DIST_ERR_MISMATCH,
                     "remote calls: worker%lld registered other functions than worker0 (%lld functions against "
                     "%lld, or other names or VJPs)",
                     (long long)who, (long long)(who == dist__rpc.rank ? mine[0] : -1), (long long)ref[0]);
}

/* ---- outputs -------------------------------------------------------------------- */

dist_status dist_rpc_output(dist_rpc_outputs *out, dist_dtype dtype, int ndim, const int64_t *shape,
                            dist_tensor *t) {
  if (!out || !t || (ndim && !shape)) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_output: NULL argument");
  if (out->n == DIST_RPC_MAX_ARGS)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_output: more than %d outputs", DIST_RPC_MAX_ARGS);
  if (!dist_dtype_size(dtype) || ndim < 0 || ndim > DIST_TENSOR_MAX_DIMS)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_output: dtype %d with %d dims", (int)dtype, ndim);
  size_t n = dist_dtype_size(dtype);
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0 || (shape[d] && n > SIZE_MAX / 2 / (size_t)shape[d]))
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_output: extent %lld in dim %d", (long long)shape[d], d);
    n *= (size_t)shape[d];
  }
  void *mem = NULL;
  if (posix_memalign(&mem, 64, n ? n : 1))
    return dist__error(DIST_ERR_NO_MEMORY, "dist_rpc_output: %zu bytes", n);
  out->mem[out->n] = mem;
  out->t[out->n] = dist_tensor_host(n ? mem : NULL, dtype, ndim, shape);
  *t = out->t[out->n++];
  return DIST_SUCCESS;
}

void dist__rpc_outputs_free(dist_rpc_outputs *o) {
  for (int i = 0; i < o->n; i++) free(o->mem[i]);
  memset(o, 0, sizeof *o);
}

dist_status dist_rpc_fail(dist_status status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dist__error(status ? status : DIST_ERR_INTERNAL, "%s", msg);
}

/* ---- running a request -------------------------------------------------------------- */

/* Runs the request in job j and sends its reply: outputs, or a status and a
 * message that names this worker. */
static void serve(dist__rpc_job *j) {
  dist__rpc_msg m, reply = {0};
  dist_rpc_outputs outs = {0};
  dist__rpc_fn_entry e;
  char msg[1400] = "";
  dist_status s = j->body ? dist__rpc_decode(j->body, j->h.body_len, &m)
                          : dist__error(DIST_ERR_CORRUPT, "remote call: a request of %llu bytes disagreed with its header",
                                        (unsigned long long)j->h.body_len);
  if (!s) s = dist__rpc_lookup(m.name, m.name_len, &e);
  if (!s && j->h.kind == DIST__RPC_VJP && !e.vjp)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "'%.*s' has no registered VJP", (int)m.name_len, m.name);
  if (!s) {
    dist_rpc_args in = {j->h.caller, m.ntensors, m.t, m.extra, m.extra_len};
    s = j->h.kind == DIST__RPC_VJP ? e.vjp(&in, &outs, e.vjp_user) : e.fn(&in, &outs, e.user);
  }
  if (s) {
    snprintf(msg, sizeof msg, "worker%d: %s", dist__rpc.rank, dist_last_error());
    dist__rpc_outputs_free(&outs);
    reply.extra = msg;
    reply.extra_len = strlen(msg);
  } else {
    reply.ntensors = outs.n;
    memcpy(reply.t, outs.t, sizeof outs.t[0] * (size_t)outs.n);
  }
  dist__rpc_out *o = NULL;
  dist_status e2 = dist__rpc_out_new(DIST__RPC_REPLY, j->h.call_id, s, &reply, &o);
  if (e2) { /* the outputs do not fit a message: say so instead */
    dist__rpc_outputs_free(&outs);
    snprintf(msg, sizeof msg, "worker%d: its answer: %s", dist__rpc.rank, dist_last_error());
    dist__rpc_msg fail = {.extra = msg, .extra_len = strlen(msg)};
    if (dist__rpc_out_new(DIST__RPC_REPLY, j->h.call_id, e2, &fail, &o)) o = NULL;
  } else {
    for (int i = 0; i < outs.n; i++) o->owned[o->nowned++] = outs.mem[i];
  }
  if (o && j->h.caller >= 0 && j->h.caller < dist__rpc.size) dist__rpc_send(j->h.caller, o, 0);
  else dist__rpc_out_free(o);
  free(j->body);
  free(j);
  atomic_fetch_sub(&dist__rpc.calls_in, 1);
}

void dist__rpc_enqueue(const dist__rpc_header *h, void *body) {
  dist__rpc_job *j = malloc(sizeof *j);
  if (!j) {
    free(body);
    atomic_fetch_sub(&dist__rpc.calls_in, 1);
    return;
  }
  j->h = *h;
  j->body = body;
  j->next = NULL;
  pthread_mutex_lock(&dist__rpc.qmu);
  if (dist__rpc.qtail) dist__rpc.qtail->next = j;
  else dist__rpc.qhead = j;
  dist__rpc.qtail = j;
  pthread_cond_signal(&dist__rpc.qcv);
  pthread_mutex_unlock(&dist__rpc.qmu);
}

static void *executor_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&dist__rpc.qmu);
    while (!dist__rpc.qhead && !dist__rpc.qstop) pthread_cond_wait(&dist__rpc.qcv, &dist__rpc.qmu);
    dist__rpc_job *j = dist__rpc.qhead;
    if (j) {
      dist__rpc.qhead = j->next;
      if (!dist__rpc.qhead) dist__rpc.qtail = NULL;
    }
    pthread_mutex_unlock(&dist__rpc.qmu);
    if (!j) return NULL;
    serve(j);
  }
}

dist_status dist__rpc_exec_start(void) {
  pthread_mutex_init(&dist__rpc.qmu, NULL);
  pthread_cond_init(&dist__rpc.qcv, NULL);
  for (int i = 0; i < DIST_RPC_EXECUTORS; i++) {
    if (pthread_create(&dist__rpc.exec[i], NULL, executor_main, NULL))
      return dist__error(DIST_ERR_INTERNAL, "dist_rpc_init: executor thread %d could not start", i);
    dist__rpc.nexec++;
  }
  return DIST_SUCCESS;
}

void dist__rpc_exec_stop(void) {
  if (!dist__rpc.nexec) return;
  pthread_mutex_lock(&dist__rpc.qmu);
  dist__rpc.qstop = 1;
  pthread_cond_broadcast(&dist__rpc.qcv);
  pthread_mutex_unlock(&dist__rpc.qmu);
  for (int i = 0; i < dist__rpc.nexec; i++) pthread_join(dist__rpc.exec[i], NULL);
  dist__rpc.nexec = 0;
  for (dist__rpc_job *j = dist__rpc.qhead, *n; j; j = n) n = j->next, free(j->body), free(j);
  dist__rpc.qhead = dist__rpc.qtail = NULL;
  pthread_mutex_destroy(&dist__rpc.qmu);
  pthread_cond_destroy(&dist__rpc.qcv);
}
