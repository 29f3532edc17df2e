/* The serving side: the executor threads that run incoming calls, and
 * their replies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distmgr/log.h"
#include "rpc/rpc_internal.h"

/* ---- running a request -------------------------------------------------------------- */

static void job_free(dist__rpc_job *j);

/* Runs the request in job j and sends its reply: outputs, or a status and a
 * message that names this worker. */
static void serve(dist__rpc_job *j) {
  /* Only what each is read by is cleared: the tensor arrays are 1.4 KB each. */
  dist__rpc_msg m, reply;
  dist__rpc_msg_clear(&reply);
  dist_rpc_outputs outs;
  outs.n = 0;
  dist__rpc_fn_entry e;
  char msg[1400];
  msg[0] = 0;
  dist_status s = j->body ? dist__rpc_decode(j->body, j->len, &m)
                          : dist__error(DIST_ERR_NO_MEMORY, "remote call: a request of %zu bytes could not be received",
                                        j->len);
  if (!s) s = dist__rpc_lookup(m.name, m.name_len, &e);
  if (!s && j->h.kind == DIST__RPC_VJP && !e.vjp)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "'%.*s' has no registered VJP", (int)m.name_len, m.name);
  int ran = 0;
  if (!s) {
    dist_rpc_args in = {j->h.caller, m.ntensors, m.t, m.extra, m.extra_len};
    dist__error_clear();
    ran = 1;
    s = j->h.kind == DIST__RPC_VJP ? e.vjp(&in, &outs, e.vjp_user) : e.fn(&in, &outs, e.user);
  }
  if (s && ran && !*dist_last_error()) /* failed without a word */
    snprintf(msg, sizeof msg, "worker%d: '%.*s' returned %d (%s) without a message", dist__rpc.rank, (int)m.name_len,
             m.name, (int)s, dist_status_string(s));
  else if (s) {
    snprintf(msg, sizeof msg, "worker%d: %s", dist__rpc.rank, dist_last_error());
  }
  if (s) {
    dist__rpc_outputs_free(&outs);
    reply.extra = msg;
    reply.extra_len = strlen(msg);
  } else {
    reply.ntensors = outs.n;
    reply.src = outs.t;
  }
  int to = j->h.caller >= 0 && j->h.caller < dist__rpc.size ? j->h.caller : -1;
  dist_status e2 = to < 0 ? DIST_ERR_BUFFER_TOO_SMALL : dist__rpc_send_now(to, DIST__RPC_REPLY, j->h.call_id, s, &reply);
  if (e2 == DIST_SUCCESS) {
    dist__rpc_outputs_free(&outs);
    job_free(j);
    return;
  }
  dist__rpc_out *o = NULL; /* the long way (large, or the answer does not encode: said below) */
  e2 = dist__rpc_out_new(DIST__RPC_REPLY, j->h.call_id, s, &reply, &o);
  if (e2) { /* the outputs do not fit a message: say so instead */
    dist__rpc_outputs_free(&outs);
    snprintf(msg, sizeof msg, "worker%d: its answer: %s", dist__rpc.rank, dist_last_error());
    dist__rpc_msg fail = {.extra = msg, .extra_len = strlen(msg)};
    if (dist__rpc_out_new(DIST__RPC_REPLY, j->h.call_id, e2, &fail, &o)) o = NULL;
  } else {
    for (int i = 0; i < outs.n; i++) o->owned[o->nowned++] = outs.mem[i];
  }
  if (o && to >= 0) dist__rpc_send(to, o, 0);
  else dist__rpc_out_free(o);
  job_free(j);
}

static dist__rpc_job *job_new(const dist__rpc_header *h) {
  dist__rpc_job *j = dist__rpc_cache_get(DIST__RPC_CACHE_JOB);
  if (!j) j = malloc(sizeof *j);
  if (!j) { /* no memory to answer with either: its caller's DIST_TIMEOUT ends it */
    dist_log(DIST_LOG_WARN, "remote call: dropped a request from worker%d: out of memory", (int)h->caller);
    return NULL;
  }
  j->h = *h;
  j->next = NULL;
  return j;
}

static void job_free(dist__rpc_job *j) {
  if (j->body != j->inline_body) dist__rpc_buf_put(j->body);
  if (!dist__rpc_cache_put(DIST__RPC_CACHE_JOB, j, free)) free(j);
}

static void push(dist__rpc_job *j);

void dist__rpc_enqueue(const dist__rpc_header *h, void *body, size_t len) {
  dist__rpc_job *j = job_new(h);
  if (!j) return dist__rpc_buf_put(body);
  j->body = body;
  j->len = len;
  push(j);
}

void dist__rpc_enqueue_copy(const dist__rpc_header *h, const void *data, size_t len) {
  dist__rpc_job *j = job_new(h);
  if (!j) return;
  if (len) memcpy(j->inline_body, data, len);
  j->body = j->inline_body;
  j->len = len;
  push(j);
}

/* The executor that polls the worker keeps a request it received itself
 * (dist__rpc_me.handed), off the queue and its lock (it runs it next). */
static void push(dist__rpc_job *j) {
  if (dist__rpc_me.polling && !dist__rpc_me.handed) {
    dist__rpc_me.handed = j;
    return;
  }
  pthread_mutex_lock(&dist__rpc.qmu);
  if (dist__rpc.qtail) dist__rpc.qtail->next = j;
  else dist__rpc.qhead = j;
  dist__rpc.qtail = j;
  atomic_fetch_add(&dist__rpc.qlen, 1);
  /* An executor polling the worker takes it (it looks at the queue under
   * qmu before it sleeps): waking a sleeping one instead cost a thread
   * switch per call (bench/RESULTS.md, "bench/rpc"). */
  if (!atomic_load(&dist__rpc.qspin)) pthread_cond_signal(&dist__rpc.qcv);
  pthread_mutex_unlock(&dist__rpc.qmu);
}

/* One idle executor at a time polls the worker for DIST__RPC_SPIN_US before
 * it sleeps: a request it receives there is queued and taken by itself, so
 * a call that follows another soon costs no thread wake-up on this side. */
static void spin_for_work(void) {
  if (atomic_exchange(&dist__rpc.qspin, 1)) return; /* another one spins */
  dist__rpc_poll_begin();
  dist__rpc_me.polling = 1;
  /* One TLS look-up, not one a turn: opaque, or GCC recomputes the address
   * in the loop (a __tls_get_addr call a turn, 12 % of a spinning
   * executor's samples, perf). */
  dist__rpc_job *const *mine = &dist__rpc_me.handed;
  __asm__("" : "+r"(mine));
  dist__rpc_spin sp = {0, 0};
  int held = 0;
  while (!*mine && !atomic_load(&dist__rpc.qlen) && !dist__rpc.qstop) {
    dist__rpc_poll_turn(&held);
    if (dist__rpc_spin_over(&sp)) break;
  }
  dist__rpc_poll_release(&held);
  dist__rpc_me.polling = 0;
  atomic_store(&dist__rpc.qspin, 0);
  /* Requests queued while it spun woke nobody: one of them must not wait for
   * the one this executor runs (it may depend on it). */
  if (*mine && atomic_load(&dist__rpc.qlen)) {
    pthread_mutex_lock(&dist__rpc.qmu);
    pthread_cond_signal(&dist__rpc.qcv);
    pthread_mutex_unlock(&dist__rpc.qmu);
  }
  dist__rpc_poll_end(!*mine && !atomic_load(&dist__rpc.qlen)); /* idle: to sleep */
}

static void *executor_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "dist-rpc-exec");
  for (;;) {
    spin_for_work();
    if (dist__rpc_me.handed) {
      dist__rpc_job *j = dist__rpc_me.handed;
      dist__rpc_me.handed = NULL;
      serve(j);
      continue;
    }
    pthread_mutex_lock(&dist__rpc.qmu);
    while (!dist__rpc.qhead && !dist__rpc.qstop) pthread_cond_wait(&dist__rpc.qcv, &dist__rpc.qmu);
    dist__rpc_job *j = dist__rpc.qhead;
    if (j) {
      dist__rpc.qhead = j->next;
      if (!dist__rpc.qhead) dist__rpc.qtail = NULL;
      else pthread_cond_signal(&dist__rpc.qcv); /* more queued: another executor */
      atomic_fetch_sub(&dist__rpc.qlen, 1);
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
  for (dist__rpc_job *j = dist__rpc.qhead, *n; j; j = n) n = j->next, job_free(j);
  dist__rpc.qhead = dist__rpc.qtail = NULL;
  pthread_mutex_destroy(&dist__rpc.qmu);
  pthread_cond_destroy(&dist__rpc.qcv);
}
