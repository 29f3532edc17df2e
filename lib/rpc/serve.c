/* The serving side: the executor threads that run incoming calls, and
 * their replies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distmgr/log.h"
#include "rpc/rpc_internal.h"

/* ---- running a request -------------------------------------------------------------- */

static void job_free(dist__rpc_job *j);

/* The answer to job j's request when it failed (s) or its outputs could not
 * be sent at once: an error message that names this worker, or the outputs
 * the long way (large, or they do not encode: said instead). */
static void answer_slow(dist__rpc_job *j, int to, dist_status s, int ran, const dist__rpc_msg *m,
                        dist_rpc_outputs *outs) {
  char msg[1400];
  dist__rpc_msg reply; /* its tensors are read up to ntensors only */
  dist__rpc_msg_clear(&reply);
  if (s) {
    if (ran && !*dist_last_error()) /* failed without a word */
      snprintf(msg, sizeof msg, "worker%d: '%.*s' returned %d (%s) without a message", dist__rpc.rank,
               (int)m->name_len, m->name, (int)s, dist_status_string(s));
    else
      snprintf(msg, sizeof msg, "worker%d: %s", dist__rpc.rank, dist_last_error());
    dist__rpc_outputs_free(outs);
    reply.extra = msg;
    reply.extra_len = strlen(msg);
    if (to >= 0 && !dist__rpc_send_now(to, DIST__RPC_REPLY, j->h.call_id, s, &reply, 0)) return;
  } else {
    reply.ntensors = outs->n;
    reply.src = outs->t;
  }
  dist__rpc_out *o = NULL;
  dist_status e2 = dist__rpc_out_new(DIST__RPC_REPLY, j->h.call_id, s, &reply, &o);
  if (e2) { /* the answer does not fit a message: say so instead */
    dist__rpc_outputs_free(outs);
    snprintf(msg, sizeof msg, "worker%d: its answer: %s", dist__rpc.rank, dist_last_error());
    dist__rpc_msg fail = {.extra = msg, .extra_len = strlen(msg)};
    if (dist__rpc_out_new(DIST__RPC_REPLY, j->h.call_id, e2, &fail, &o)) o = NULL;
  } else {
    for (int i = 0; i < outs->n; i++) o->owned[o->nowned++] = outs->mem[i];
    outs->n = 0;
  }
  if (o && to >= 0) dist__rpc_send(to, o, 0);
  else dist__rpc_out_free(o);
}

/* A tiny request (wire.h): its function by index, its tensor. */
static dist_status decode_tiny(dist__rpc_job *j, dist__rpc_msg *m, const dist__rpc_fn_entry **e) {
  dist__rpc_tiny th;
  m->src = NULL;
  m->name = NULL;
  m->name_len = 0;
  m->extra = NULL;
  m->extra_len = 0;
  m->ntensors = 0;
  DIST_CHECK(dist__rpc_tiny_decode(j->body, j->len, &th, &m->t[0]));
  /* Any index below the registry's count names the same function here as
   * on the caller: it sends tiny calls only after dist_rpc_init agreed on
   * the order (engine.c). */
  if (th.kind != DIST__RPC_REQUEST || !(*e = dist__rpc_entry_at(th.fn, &m->name_len)))
    return dist__error(DIST_ERR_CORRUPT, "remote call: a tiny request for function index %d (kind %d)", th.fn,
                       (int)th.kind);
  m->name = (*e)->name;
  m->ntensors = th.ntensors;
  return DIST_SUCCESS;
}

/* Runs the request in job j and sends its reply: outputs, or a status and a
 * message that names this worker. The success of a small answer is the
 * path every quick call takes: nothing else on it. */
static void serve(dist__rpc_job *j) {
  dist__rpc_msg m; /* its tensors are read up to ntensors only: no clear */
  dist_rpc_outputs outs;
  outs.n = 0;
  const dist__rpc_fn_entry *e = NULL;
  dist_status s;
  if (j->tiny) {
    s = decode_tiny(j, &m, &e);
  } else {
    s = j->body ? dist__rpc_decode_cached(&dist__rpc_me.dcache, j->body, j->len, &m, m.t)
                : dist__error(DIST_ERR_NO_MEMORY, "remote call: a request of %zu bytes could not be received", j->len);
    if (!s) s = dist__rpc_lookup(m.name, m.name_len, &e);
  }
  int ran = 0;
  if (!s) {
    int vjp = j->h.kind == DIST__RPC_VJP;
    dist_rpc_fn fn = vjp ? dist__rpc_entry_vjp(e) : e->fn;
    if (!fn) {
      s = dist__error(DIST_ERR_INVALID_ARGUMENT, "'%.*s' has no registered VJP", (int)m.name_len, m.name);
    } else {
      dist_rpc_args in = {j->h.caller, m.ntensors, m.t, m.extra, m.extra_len};
      dist__error_clear();
      ran = 1;
      s = fn(&in, &outs, vjp ? e->vjp_user : e->user);
    }
  }
  int to = j->h.caller >= 0 && j->h.caller < dist__rpc.size ? j->h.caller : -1;
  if (!s && to >= 0) {
    dist__rpc_msg reply;
    reply.name = NULL, reply.name_len = 0, reply.extra = NULL, reply.extra_len = 0;
    reply.ntensors = outs.n;
    reply.src = outs.t;
    if (!dist__rpc_send_now(to, DIST__RPC_REPLY, j->h.call_id, DIST_SUCCESS, &reply, j->tiny)) {
      dist__rpc_outputs_free(&outs);
      job_free(j);
      return;
    }
  }
  answer_slow(j, to, s, ran, &m, &outs);
  dist__rpc_outputs_free(&outs);
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
  j->tiny = 0;
  j->next = NULL;
  return j;
}

static void job_free(dist__rpc_job *j) {
  if (j == &dist__rpc_me.own_job) return;
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

void dist__rpc_enqueue_copy(const dist__rpc_header *h, const void *data, size_t len, int tiny) {
  /* The polling executor runs what it received itself next (push), in its
   * thread's own job rather than one from the cache. */
  dist__rpc_thread *me = &dist__rpc_me;
  int own = me->polling && !me->handed;
  dist__rpc_job *j = own ? &me->own_job : job_new(h);
  if (!j) return;
  j->h = *h;
  j->next = NULL;
  j->tiny = tiny;
  if (len) memcpy(j->inline_body, data, len);
  j->body = j->inline_body;
  j->len = len;
  if (own) me->handed = j;
  else push(j);
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
