/* What the files of lib/rpc share: the engine's state (UCX worker, endpoints,
 * progress thread), futures, the registry and the executors. */
#ifndef DISTMGR_RPC_INTERNAL_H
#define DISTMGR_RPC_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <ucp/api/ucp.h>

#include "core/internal.h"
#include "distmgr/rpc.h"
#include "rpc/wire.h"

/* Three active-message ids, the header's kind telling messages apart within
 * each: DIST__RPC_AM_ID carries the header as UCX's user header (every
 * message that goes the long way, rendezvous included), DIST__RPC_AM_ID_NOW
 * as the first 16 bytes of the data (small messages sent from the stack,
 * send_now.c), DIST__RPC_AM_ID_TINY a tiny message (wire.h). On shared
 * memory a user header costs UCX 0.04-0.06 us a round trip more than the
 * same bytes in the data (bench/RESULTS.md, "bench/rpc"). */
#define DIST__RPC_AM_ID 0x44
#define DIST__RPC_AM_ID_NOW 0x45
#define DIST__RPC_AM_ID_TINY 0x46
/* How long a waiting caller, and the idle executor, poll the worker before
 * they sleep. */
#define DIST__RPC_SPIN_US 200
/* The longest the progress thread stays parked while another thread polls
 * (engine.c): each end of a park is a thread switch on a core that a poller
 * uses, and a message that comes while nobody polls waits at most this. */
#define DIST__RPC_PARK_US 1000
/* While calls keep coming, each park doubles up to this: every timed wake
 * stalled the call in flight by 25-60 us on the 2-core VM (engine.c). */
#define DIST__RPC_PARK_MAX_US 8000
/* Bodies up to this size are packed into one buffer and sent contiguous. */
#define DIST__RPC_PACK_MAX 4096
/* Bodies up to this size are packed inside the message itself. */
#define DIST__RPC_INLINE 256
/* Buffers (bodies, outputs) up to these sizes come from the thread's cache,
 * in two classes (an 8-byte answer held by a future takes 256 bytes). */
#define DIST__RPC_SMALL 256
#define DIST__RPC_MEDIUM 4096

/* A lock for short critical sections (the registry's registrations): a
 * pthread mutex's lock and unlock cost 40 ns a pair there. It yields now and then: a holder may be preempted. */
static inline void dist__rpc_spin_lock(atomic_int *l) {
  for (int i = 0; atomic_exchange_explicit(l, 1, memory_order_acquire);)
    while (atomic_load_explicit(l, memory_order_relaxed)) {
      if (++i % 128 == 0) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
      else __builtin_ia32_pause();
#endif
    }
}
static inline void dist__rpc_spin_unlock(atomic_int *l) { atomic_store_explicit(l, 0, memory_order_release); }

/* A message on its way out: it owns its header, meta part and (replies) the
 * output tensors until UCX reports the send complete. The fields before
 * `iov` are set for each message (send.c, out_get: a new field is set
 * there); the rest as they are used. */
typedef struct dist__rpc_out {
  dist__rpc_header h;
  size_t niov;
  void *meta; /* the meta part, or the whole body when packed */
  size_t data_bytes; /* the body's bytes after the meta part */
  int nowned;
  /* A caller waiting for its arguments to be sent (dist__rpc_send, wait=1). */
  int waited, done;
  ucs_status_t status;
  ucp_dt_iov_t iov[1 + 2 * DIST_RPC_MAX_ARGS]; /* one part: a packed body, sent contiguous */
  void *owned[DIST_RPC_MAX_ARGS]; /* freed with the message */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Alignas(64) unsigned char inline_body[DIST__RPC_INLINE]; /* meta, when it fits */
} dist__rpc_out;

struct dist_rpc_outputs {
  int n;
  dist_tensor t[DIST_RPC_MAX_ARGS];
  void *mem[DIST_RPC_MAX_ARGS];
};

#define DIST__RPC_FUTURE_INLINE 256
/* The fields before `outs` are set one by one for each call (a future is
 * reused, cache.c; dist__future_new: a new field is set there); the arrays
 * after are read only up to their counts. */
struct dist_future {
  /* Its state, one word of bits (future.c): completion takes no lock. */
  atomic_uint state;
  atomic_int refs; /* the caller's, the in-flight table's, a running callback's */
  dist_status status;
  char *msg;
  /* A call's reply body, which its outputs view. */
  void *body;
  int nout;
  void (*then)(dist_future *, void *);
  void *then_user;
  int had_then; /* one callback per future, ever */
  /* A plain call: its id and worker, in the in-flight table. */
  uint64_t id;
  int to;
  /* A synchronous call's waiting thread while it waits (0: none). A reply
   * that this thread handles itself completes the future without locked
   * instructions: nobody else can hold it or set its callback (the future is
   * its caller's until the call returns), and its only waiter is awake. */
  uintptr_t sync_owner;
  dist_future *next_inflight;
  /* A partitioned call: its parts and reducer. */
  int nparts, pending;
  dist_future **parts;
  dist_rpc_reducer reducer;
  dist_rpc_outputs outs; /* a reduced call's outputs */
  dist_tensor out[DIST_RPC_MAX_ARGS];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* A small reply's body, copied here from UCX's buffer (engine.c): no
   * buffer to take and give back. */
  _Alignas(DIST__RPC_ALIGN) unsigned char inline_body[DIST__RPC_FUTURE_INLINE];
};

/* A future's state bits (future.c). Its one completer fills the result and
 * publishes it; it settles at once (waits return), or after the `then`
 * callback registered meanwhile, which it runs. A waiter about to sleep sets
 * SLEEPER first, so that the settling completer knows to wake it: no lock
 * or broadcast on a call whose caller spins (they cost 25 ns a round trip,
 * bench/RESULTS.md "bench/rpc"). */
enum {
  DIST__FUTURE_CB_SET = 2,
  DIST__FUTURE_PUBLISHED = 4,
  DIST__FUTURE_SETTLED = 8,
  DIST__FUTURE_SLEEPER = 16
};
/* 1 when this thread is f's synchronous waiter (dist_future.sync_owner). */
static inline int dist__future_owned(const dist_future *f) { return f->sync_owner == (uintptr_t)pthread_self(); }
static inline unsigned dist__future_state(const dist_future *f) { return atomic_load(&((dist_future *)f)->state); }
static inline int dist__future_settled(const dist_future *f) {
  return (dist__future_state(f) & DIST__FUTURE_SETTLED) != 0;
}

typedef struct dist__rpc_fn_entry {
  char name[DIST_RPC_MAX_NAME + 1];
  dist_rpc_fn fn, vjp;
  void *user, *vjp_user;
} dist__rpc_fn_entry;

/* An incoming request for an executor. A small body is copied into the job
 * itself (no buffer to take and give back, serve.c). */
#define DIST__RPC_JOB_INLINE 256
typedef struct dist__rpc_job {
  dist__rpc_header h; /* a tiny request's: kind, caller and call id only */
  int tiny;           /* the body is a tiny request (wire.h) */
  void *body; /* NULL: it could not be received (answered with an error) */
  size_t len;
  struct dist__rpc_job *next;
  _Alignas(DIST__RPC_ALIGN) unsigned char inline_body[DIST__RPC_JOB_INLINE];
} dist__rpc_job;

typedef struct dist__rpc_engine {
  int on, rank, size;
  double timeout;
  ucp_context_h ctx;
  ucp_worker_h worker; /* serialized: every UCX call on it holds the worker lock */
  /* The worker lock (state.c): 0 free, 1 held, 2 held and a thread may
   * sleep on it; its holder and depth (recursive: UCX's callbacks send);
   * threads about to sleep on it, for whom pollers step aside. */
  _Alignas(64) atomic_int wword;
  atomic_uintptr_t wowner;
  int wdepth;
  atomic_int wwant;
  ucp_ep_h *ep;
  atomic_int *dead; /* per peer: its endpoint failed */
  int *dead_why;    /* per peer: UCX's status when it did */
  /* A peer was marked dead and its calls in flight are still to be failed
   * (by whoever next holds the worker lock: dist__rpc_fail_dead). */
  atomic_int fail_pending;
  int efd;
  pthread_t progress;
  atomic_int stop;
  /* executors */
  pthread_t exec[DIST_RPC_EXECUTORS];
  int nexec;
  pthread_mutex_t qmu;
  pthread_cond_t qcv;
  dist__rpc_job *qhead, *qtail;
  int qstop;
  atomic_int qlen, qspin; /* jobs queued; an executor polls the worker */
  /* The progress thread parks here (not on UCX's wakeup fd, which every
   * arriving message would fire) while another thread polls the worker. */
  pthread_mutex_t pmu;
  pthread_cond_t pcv;
  int pwoken; /* under pmu: a poller that went to sleep woke the progress thread */
  /* calls made here and not yet answered (futures by id): what shutdown
   * drains; under the worker lock (future.c) */
  dist_future *inflight;
  atomic_int *arrived; /* per rank: it entered dist_rpc_shutdown */
  /* Functions every rank registered at the same index before dist_rpc_init
   * (the first tiny_fns): tiny calls name them by index (wire.h). 0 when the
   * orders differ or the world has more ranks than a tiny request names. */
  int tiny_fns;
  unsigned tiny_in; /* tiny requests received (under the worker lock): the tests' witness */
} dist__rpc_engine;

extern dist__rpc_engine dist__rpc;

/* state.c: a monotonic clock in microseconds (the spins' and waits' limits). */
double dist__rpc_now_us(void);
/* A poll loop's limit of DIST__RPC_SPIN_US. The clock is read every 256
 * turns only, the first time to start it: clock_gettime was 7 % of a
 * spinning executor's samples when read every 16 (perf, bench/rpc_loop). */
typedef struct dist__rpc_spin {
  double t0;
  unsigned turns;
} dist__rpc_spin;
static inline int dist__rpc_spin_over(dist__rpc_spin *sp) {
  if (++sp->turns & 255) return 0;
  double now = dist__rpc_now_us();
  if (sp->t0 == 0) sp->t0 = now;
  return now - sp->t0 > DIST__RPC_SPIN_US;
}

/* state.c: polling sessions begun and ended by all threads (some thread
 * polls the worker while they differ). */
void dist__rpc_poll_counts(unsigned *begun, unsigned *ended);
void dist__rpc_wake_progress(void);
/* The worker's lock, and one turn of progress only if nobody else holds it
 * (for a thread that waits for a message that the holder may be handling).
 * Every UCX call on the worker holds it, except in dist_rpc_init before the
 * threads start. Distmgr's own recursive lock, inline: a compare-and-swap to
 * take, an exchange to give back, a futex only for a thread that has to
 * sleep (state.c). A recursive pthread mutex cost four locked instructions
 * and two calls a round trip more (bench/RESULTS.md, "bench/rpc"). */
static inline int dist__rpc_trylock(void) {
  uintptr_t me = (uintptr_t)pthread_self();
  if (atomic_load_explicit(&dist__rpc.wowner, memory_order_relaxed) == me) return dist__rpc.wdepth++, 1;
  int free_ = 0;
  if (!atomic_compare_exchange_strong_explicit(&dist__rpc.wword, &free_, 1, memory_order_acquire,
                                               memory_order_relaxed))
    return 0;
  atomic_store_explicit(&dist__rpc.wowner, me, memory_order_relaxed);
  dist__rpc.wdepth = 1;
  return 1;
}
void dist__rpc_lock_slow(void);
void dist__rpc_unlock_wake(void);
static inline void dist__rpc_lock(void) {
  if (!dist__rpc_trylock()) dist__rpc_lock_slow();
}
static inline void dist__rpc_unlock(void) {
  if (--dist__rpc.wdepth) return;
  atomic_store_explicit(&dist__rpc.wowner, 0, memory_order_relaxed);
  if (atomic_exchange_explicit(&dist__rpc.wword, 0, memory_order_release) == 2) dist__rpc_unlock_wake();
}
/* wait.c: one turn of progress, only if nobody else holds the worker lock. */
unsigned dist__rpc_try_progress(void);
/* future.c: marks a peer dead (UCX's error callback, a failed send; any
 * thread, no lock: UCX may call it from its own thread) and has its calls in
 * flight failed by dist__rpc_fail_dead, which runs with the worker lock held
 * (the in-flight table's lock) after each turn of dist__rpc_progress. */
void dist__rpc_mark_dead(int peer, ucs_status_t st);
void dist__rpc_fail_dead(void);
/* One turn of the worker's progress for a thread that holds its lock, then
 * the calls of peers marked dead meanwhile failed: every progressing thread
 * goes through here. */
static inline unsigned dist__rpc_progress(void) {
  unsigned n = ucp_worker_progress(dist__rpc.worker);
  if (atomic_load_explicit(&dist__rpc.fail_pending, memory_order_relaxed)) dist__rpc_fail_dead();
  return n;
}
/* The lock for a thread that only polls: when it is free, nobody waits for
 * it, and the worker is there (teardown clears it under the lock). */
static inline int dist__rpc_poll_lock(void) {
  if (atomic_load_explicit(&dist__rpc.wwant, memory_order_relaxed) ||
      atomic_load_explicit(&dist__rpc.wword, memory_order_relaxed) || !dist__rpc_trylock())
    return 0;
  if (dist__rpc.worker) return 1;
  dist__rpc_unlock();
  return 0;
}
/* A turn that found nothing ends with one spin-wait hint: the core's other
 * hardware thread (on this VM, perhaps the peer process that is answering)
 * gets the execution units meanwhile. One `pause` saved 6-8 ns a round
 * trip; four cost 50 (bench/RESULTS.md, "bench/rpc"). */
static inline void dist__rpc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}
/* A spinning thread's turn of progress: it keeps the worker lock from one
 * turn to the next (*held), rather than a compare-and-swap and an exchange
 * each turn, and gives it up as soon as another thread waits for it (wwant).
 * dist__rpc_poll_release gives it up at the end of the spin. */
static inline void dist__rpc_poll_turn(int *held) {
  if (!*held && !(*held = dist__rpc_poll_lock())) return;
  if (!dist__rpc_progress()) dist__rpc_cpu_relax();
  if (atomic_load_explicit(&dist__rpc.wwant, memory_order_relaxed)) {
    dist__rpc_unlock();
    *held = 0;
  }
}
static inline void dist__rpc_poll_release(int *held) {
  if (*held) dist__rpc_unlock();
  *held = 0;
}

/* cache.c: a thread's free lists. get: a kept object or NULL; put: 1 when
 * kept, 0 when the caller must destroy it itself. Kept objects are destroyed
 * with the `destroy` they were put with when their thread exits or flushes
 * (passed in, so that cache.c calls no file that calls it). */
typedef enum {
  DIST__RPC_CACHE_FUTURE,
  DIST__RPC_CACHE_OUT,
  DIST__RPC_CACHE_SMALL,
  DIST__RPC_CACHE_MEDIUM,
  DIST__RPC_CACHE_JOB,
  DIST__RPC_CACHE_KINDS
} dist__rpc_cache_kind;
#define DIST__RPC_CACHE_KEEP 4 /* objects kept per kind and thread */
typedef struct dist__rpc_cache_lists {
  void *obj[DIST__RPC_CACHE_KINDS][DIST__RPC_CACHE_KEEP];
  int n[DIST__RPC_CACHE_KINDS];
  void (*destroy[DIST__RPC_CACHE_KINDS])(void *);
} dist__rpc_cache_lists;

/* Everything remote calls keep per thread, in one thread-local (cache.c):
 * global-dynamic, as every thread-local of the library (one initial-exec
 * variable marks the whole library STATIC_TLS, and its 1.6 KB TLS block
 * then no longer fits glibc's static TLS room when Python loads it with
 * ctypes after torch: tests/torchrun.sh). Each access is a __tls_get_addr
 * call; one struct makes it one per function for all of these, not one per
 * variable (0.1 us a round trip, bench/RESULTS.md "bench/rpc"). */
typedef struct dist__rpc_thread {
  dist__rpc_cache_lists cache; /* cache.c */
  int cache_state;             /* cache.c: 0 new, 1 emptied at thread exit (pthread key), 2 keeps nothing */
  int in_callback;             /* future.c: inside a completion callback */
  int polling;                 /* serve.c: the executor that polls the worker */
  struct dist__rpc_job *handed; /* serve.c: a request it received itself */
  struct dist__rpc_poll_slot *poll_slot; /* state.c: this thread's polling counters */
  int no_slot;                 /* state.c: none left for it */
  uint64_t next_id, end_id;    /* request.c: its block of call ids */
  dist_autograd_ctx *autograd; /* autograd.c: the context recording on it */
  dist__rpc_dcache dcache;     /* serve.c, engine.c: the last message it decoded (wire.h) */
  dist__rpc_job own_job;       /* serve.c: a small request the polling executor received itself */
} dist__rpc_thread;
extern _Thread_local dist__rpc_thread dist__rpc_me;

/* Each polling thread counts its sessions in a cache line of its own, with
 * plain stores: a shared counter took two locked instructions per wait, four
 * a round trip. Threads beyond the slots share one, with locked adds
 * (state.c). The progress thread sums them when it wakes (engine.c). */
typedef struct dist__rpc_poll_slot {
  _Alignas(64) atomic_uint begins;
  atomic_uint ends;
} dist__rpc_poll_slot;
dist__rpc_poll_slot *dist__rpc_poll_slot_new(dist__rpc_thread *me);
static inline void dist__rpc_poll_count(atomic_uint *c, int shared) {
  if (shared) atomic_fetch_add(c, 1);
  else atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_release);
}
/* A thread starts or stops polling the worker. `blocking`: it stops in
 * order to sleep until someone else progresses the worker, so the progress
 * thread is woken if it parked (engine.c). Inline: two calls and two
 * thread-local look-ups a wait less. */
static inline void dist__rpc_poll_begin(void) {
  dist__rpc_thread *me = &dist__rpc_me;
  dist__rpc_poll_slot *s = me->poll_slot ? me->poll_slot : dist__rpc_poll_slot_new(me);
  dist__rpc_poll_count(&s->begins, me->no_slot);
}
static inline void dist__rpc_poll_end(int blocking) {
  dist__rpc_thread *me = &dist__rpc_me;
  dist__rpc_poll_slot *s = me->poll_slot ? me->poll_slot : dist__rpc_poll_slot_new(me);
  dist__rpc_poll_count(&s->ends, me->no_slot);
  if (blocking) dist__rpc_wake_progress();
}

/* Inline: as calls through the PLT, the 14 gets and puts of a round trip
 * were 19 % of its path without the network (perf, bench/RESULTS.md
 * "bench/rpc"). */
int dist__rpc_cache_put_slow(dist__rpc_cache_kind k, void *p, void (*destroy)(void *));
static inline void *dist__rpc_cache_get(dist__rpc_cache_kind k) {
  dist__rpc_cache_lists *l = &dist__rpc_me.cache;
  return l->n[k] ? l->obj[k][--l->n[k]] : NULL;
}
static inline int dist__rpc_cache_put(dist__rpc_cache_kind k, void *p, void (*destroy)(void *)) {
  dist__rpc_thread *me = &dist__rpc_me;
  if (me->cache_state != 1) return dist__rpc_cache_put_slow(k, p, destroy);
  if (me->cache.n[k] == DIST__RPC_CACHE_KEEP) return 0;
  me->cache.destroy[k] = destroy;
  me->cache.obj[k][me->cache.n[k]++] = p;
  return 1;
}
void dist__rpc_cache_flush(void);

/* registry.c: the entry of the functions registered as `name` (entries are
 * only appended and never move). Its VJP may be set later: read it with
 * dist__rpc_entry_vjp. */
dist_status dist__rpc_lookup(const char *name, size_t len, const dist__rpc_fn_entry **out);
/* A name's index in the registry (-1: none), the entry at an index with
 * its name's length (NULL: none), and the hash of the first DIST__RPC_TINY_FNS names in order
 * (*count: how many) that dist_rpc_init agrees on for tiny calls. */
int dist__rpc_fn_index(const char *name, size_t len);
const dist__rpc_fn_entry *dist__rpc_entry_at(int i, size_t *name_len);
uint64_t dist__rpc_registry_order(int *count);
static inline dist_rpc_fn dist__rpc_entry_vjp(const dist__rpc_fn_entry *e) {
  return __atomic_load_n(&e->vjp, __ATOMIC_ACQUIRE); /* its user was stored before it */
}
uint64_t dist__rpc_registry_hash(int *count);
dist_status dist__rpc_registry_name(int i, char *buf, size_t cap);

/* buffers.c: message bodies and output tensors (64-byte aligned; large ones
 * are kept for reuse, a larger one replacing the smallest kept when all
 * places are taken); drain frees the kept ones. */
void *dist__rpc_buf_get_slow(size_t n);
void dist__rpc_buf_put_slow(void *p);
void dist__rpc_buf_destroy(void *p);
void dist__rpc_buf_drain(void);
#define DIST__RPC_BUF_HEAD 64 /* the capacity, before the 64-byte aligned memory */
/* The bytes a buffer of dist__rpc_buf_get can hold (a cached or kept one: more than asked). */
static inline size_t dist__rpc_buf_capacity(const void *p) {
  size_t c;
  memcpy(&c, (const char *)p - DIST__RPC_BUF_HEAD, sizeof c);
  return c;
}
/* The small class inline, from the thread's cache (as the cache's own). */
static inline void *dist__rpc_buf_get(size_t n) {
  void *p = n <= DIST__RPC_SMALL ? dist__rpc_cache_get(DIST__RPC_CACHE_SMALL) : NULL;
  return p ? p : dist__rpc_buf_get_slow(n);
}
static inline void dist__rpc_buf_put(void *p) {
  if (p && dist__rpc_buf_capacity(p) == DIST__RPC_SMALL &&
      dist__rpc_cache_put(DIST__RPC_CACHE_SMALL, p, dist__rpc_buf_destroy))
    return;
  dist__rpc_buf_put_slow(p);
}

/* send.c: UCX's status as a distmgr error. */
dist_status dist__rpc_ucx_error(ucs_status_t st, const char *what);

/* send.c: sends header + meta + tensors (and frees `o` when done). With
 * wait, returns only once the tensors' memory may be reused. */
dist_status dist__rpc_send(int to, dist__rpc_out *o, int wait);
/* A message for header kind/id/status and message m (its meta encoded). */
dist_status dist__rpc_out_new(dist__rpc_kind kind, uint64_t id, dist_status status, const dist__rpc_msg *m,
                              dist__rpc_out **out);
void dist__rpc_out_free(dist__rpc_out *o);
/* The header of a message of kind/id: a reply carries the call's status, a
 * request its sender's rank. */
static inline dist__rpc_header dist__rpc_header_make(dist__rpc_kind kind, uint64_t id, dist_status status) {
  dist__rpc_header h = {.magic = DIST__RPC_MAGIC, .version = DIST__RPC_VERSION, .kind = (uint8_t)kind, .call_id = id};
  if (kind == DIST__RPC_REPLY) h.status = status;
  else h.caller = dist__rpc.rank;
  return h;
}
/* send.c: the tensors' data of m, each padded, at `at` (nbytes: each one's
 * bytes, from dist__rpc_encode_meta_n). */
void dist__rpc_pack_data(char *at, const dist__rpc_msg *m, const size_t *nbytes);
/* send_now.c: kind/id/status and m in one go from this thread's stack, when
 * the message is small and UCX completes the send at once: no message
 * object, no completion. DIST_ERR_BUFFER_TOO_SMALL (no message set) when it
 * is not such a message, or UCX did not send it at once: send it with
 * dist__rpc_out_new and dist__rpc_send. Otherwise the encoder's error (m
 * does not encode). In two steps for a caller that sends under a hold of
 * the worker lock it takes for more (request.c): encode (no lock), then
 * send (the lock held). */
#define DIST__RPC_NOW_MAX 256 /* bytes of a body sent from the stack */
typedef struct dist__rpc_small {
  /* The header right before the body: the two go out as one buffer. */
  dist__rpc_header h;
  _Alignas(DIST__RPC_ALIGN) unsigned char body[DIST__RPC_NOW_MAX];
  size_t len; /* the body's */
  int tiny;   /* body holds a tiny message (wire.h) of len bytes instead, h unused */
} dist__rpc_small;
_Static_assert(offsetof(dist__rpc_small, body) == sizeof(dist__rpc_header), "a small message's header and body touch");
/* tiny: try the tiny layout first (a request: when its function has an
 * agreed index; a reply: only to a tiny request, and only a success). */
dist_status dist__rpc_small_encode(dist__rpc_small *sm, int to, dist__rpc_kind kind, uint64_t id, dist_status status,
                                   const dist__rpc_msg *m, int tiny);
dist_status dist__rpc_small_send(const dist__rpc_small *sm, int to);
dist_status dist__rpc_send_now(int to, dist__rpc_kind kind, uint64_t id, dist_status status, const dist__rpc_msg *m,
                               int tiny);

/* serve.c: a request to run (on an executor) */
void dist__rpc_enqueue(const dist__rpc_header *h, void *body, size_t len);
/* The same for a body of up to DIST__RPC_JOB_INLINE bytes, copied from `data`. */
void dist__rpc_enqueue_copy(const dist__rpc_header *h, const void *data, size_t len, int tiny);
dist_status dist__rpc_exec_start(void);
void dist__rpc_exec_stop(void);

/* future.c */
dist_future *dist__future_new(void);
/* 1 inside a dist_future_then callback run by a completion: the thread may
 * be inside the worker's progress, so it must neither wait nor progress. */
static inline int dist__future_in_callback(void) { return dist__rpc_me.in_callback; }
void dist__future_release(dist_future *f);
/* dist_future_wait for a thread that may hold the worker lock (held: from
 * dist__rpc_call), which it gives back. */
dist_status dist__future_wait_held(dist_future *f, int held);
/* Completes f with status and message (may be NULL), outputs from body
 * (taken over, NULL for none) or from outs (taken over). Runs its callback. */
void dist__future_complete(dist_future *f, dist_status s, const char *msg, void *body, const dist__rpc_msg *m,
                           dist_rpc_outputs *outs);
/* The success of a call whose outputs (nout) were decoded into f->out from
 * body (taken over), completed by its synchronous waiter itself
 * (dist__future_owned): plain stores, and the in-flight table's reference
 * dropped. 0 (nothing done) when it is not such a completion. */
int dist__future_complete_owned(dist_future *f, void *body, int nout);
/* The in-flight table, its callers holding the worker lock: add a new
 * future, not yet shared, before sending; take by id on a reply. */
void dist__inflight_add(dist_future *f);
dist_future *dist__inflight_take(uint64_t id);
/* Fails every call in flight to `peer` (-1: to every peer). */
void dist__inflight_fail(int peer, dist_status s, const char *why);
int dist__inflight_count(void);

/* outputs.c */
void dist__rpc_outputs_free(dist_rpc_outputs *o);

/* request.c: a call of `kind` (a function or its VJP) named name (of
 * name_len bytes), its arguments checked. held (may be NULL): set to 1 when
 * the call went out with the worker lock kept, for dist__future_wait_held. */
dist_status dist__rpc_call(dist__rpc_kind kind, int to, const char *name, size_t name_len, const dist_tensor *args,
                           int nargs, const void *opts, size_t opts_bytes, dist_future **out, int *held);

/* autograd.c: records a call made under this thread's context. */
void dist__autograd_record_on(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                           size_t opts_bytes, dist_future *f);
static inline void dist__autograd_record(int to, const char *name, const dist_tensor *args, int nargs,
                                         const void *opts, size_t opts_bytes, dist_future *f) {
  if (dist__rpc_me.autograd) dist__autograd_record_on(to, name, args, nargs, opts, opts_bytes, f);
}

#endif
