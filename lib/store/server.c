/* The store server (store.h): one thread, poll() over the listening socket,
 * a wake pipe and every connection. Requests are parsed by wire.c within the
 * limits; a peer that breaks them is dropped with a log line and the others
 * go on. Keys live in kv.c's table. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/bytes.h"
#include "store/kv.h"
#include "store/net.h"
#include "store/store.h"

#define OUT_MAX ((size_t)64 << 20) /* replies a peer leaves unread before it is dropped */

typedef struct conn {
  int fd;
  char peer[64];
  dist__bytes in, out;
  size_t out_sent;
  int validated;
  double partial_since; /* when the unfinished request in `in` began; 0: none */
  /* A WAIT in progress: the request's keys, copied. */
  dist__bytes wait_keys; /* each as u64 length + bytes */
  size_t nwait;
  int waiting;
} conn;

struct dist__store_server {
  dist__store_server_options o;
  int listen_fd, wake[2], port;
  pthread_t thread;
  atomic_int stop;
  atomic_long dropped;
  dist__kv kv;
  conn **conns;
  int nconns;
};

static void drop(dist__store_server *s, int i, const char *why) {
  conn *c = s->conns[i];
  if (why) {
    dist_log(DIST_LOG_WARN, "store: dropped the connection from %s: %s", c->peer, why);
    atomic_fetch_add(&s->dropped, 1);
  }
  close(c->fd);
  dist__bytes_free(&c->in);
  dist__bytes_free(&c->out);
  dist__bytes_free(&c->wait_keys);
  free(c);
  s->conns[i] = s->conns[--s->nconns];
}

/* ---- replies ------------------------------------------------------------ */

static int reply_u8(conn *c, uint8_t v) { return dist__bytes_add(&c->out, &v, 1); }

static int reply_i64(conn *c, int64_t v) {
  uint8_t w[8];
  dist__store_put_u64(w, (uint64_t)v);
  return dist__bytes_add(&c->out, w, 8);
}

static int reply_blob(conn *c, const uint8_t *p, size_t n) {
  uint8_t w[8];
  dist__store_put_u64(w, n);
  return dist__bytes_add(&c->out, w, 8) || dist__bytes_add(&c->out, p, n);
}

/* ---- WAIT ----------------------------------------------------------------- */

static int wait_satisfied(dist__store_server *s, const conn *c) {
  size_t at = 0;
  for (size_t k = 0; k < c->nwait; k++) {
    size_t len = (size_t)dist__store_u64(c->wait_keys.p + at);
    if (!dist__kv_get(&s->kv, c->wait_keys.p + at + 8, len, NULL, NULL)) return 0;
    at += 8 + len;
  }
  return 1;
}

static int process(dist__store_server *s, int i);

/* After a write: answer the waits it completed, then those peers' queued requests. */
static void wake_waiters(dist__store_server *s) {
  for (int i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (!c->waiting || !wait_satisfied(s, c)) continue;
    c->waiting = 0;
    c->nwait = 0;
    c->wait_keys.n = 0;
    if (reply_u8(c, DIST__STORE_STOP_WAITING)) continue; /* out of memory: process() drops it */
  }
  for (int i = 0; i < s->nconns;) /* requests queued behind a finished wait */
    if (!s->conns[i]->waiting && s->conns[i]->in.n && process(s, i) < 0) continue; /* dropped: i now holds another */
    else i++;
}

/* ---- requests ------------------------------------------------------------- */

/* Handle one parsed request; 0, or -1 with *why when the peer must go. */
static int handle(dist__store_server *s, conn *c, const dist__store_req *r, const uint8_t *buf, const char **why) {
  static char text[160];
  const uint8_t *k = r->arg[0], *v;
  size_t kl = r->len[0], vl;
  int wrote = 0, fail = 0;
  if (s->o.dialect == DIST__STORE_TORCH22 && !c->validated && r->op != DIST__STORE_VALIDATE)
    return *why = "its first request was not VALIDATE (a client of torch < 2.2, or not a TCPStore client)", -1;
  switch (r->op) {
    case DIST__STORE_VALIDATE:
      if (r->word != DIST__STORE_MAGIC || c->validated) return *why = "a wrong or repeated VALIDATE", -1;
      c->validated = 1;
      break;
    case DIST__STORE_SET:
      fail = dist__kv_set(&s->kv, k, kl, r->arg[1], r->len[1]);
      wrote = 1;
      break;
    case DIST__STORE_COMPARE_SET: {
      /* torch's rule: absent and expected empty, or equal: take desired; the
       * reply is the value now (for an absent key and a non-empty expected
       * value, torch replies `expected`). */
      int have = dist__kv_get(&s->kv, k, kl, &v, &vl);
      if ((!have && !r->len[1]) || (have && vl == r->len[1] && !memcmp(v, r->arg[1], vl))) {
        fail = dist__kv_set(&s->kv, k, kl, r->arg[2], r->len[2]) || reply_blob(c, r->arg[2], r->len[2]);
        wrote = 1;
      } else if (have) fail = reply_blob(c, v, vl);
      else fail = reply_blob(c, r->arg[1], r->len[1]);
      break;
    }
    case DIST__STORE_GET:
      /* Absent: an empty value (torch's libuv server; its older one drops the peer). */
      fail = dist__kv_get(&s->kv, k, kl, &v, &vl) ? reply_blob(c, v, vl) : reply_blob(c, NULL, 0);
      break;
    case DIST__STORE_ADD: {
      int64_t cur = 0;
      if (dist__kv_get(&s->kv, k, kl, &v, &vl) && dist__kv_decimal(v, vl, &cur))
        return *why = "ADD to a key whose value is not a decimal integer", -1;
      if (__builtin_add_overflow(cur, r->delta, &cur)) return *why = "ADD overflows int64", -1;
      char d[24];
      int n = snprintf(d, sizeof d, "%lld", (long long)cur);
      fail = dist__kv_set(&s->kv, k, kl, (const uint8_t *)d, (size_t)n) || reply_i64(c, cur);
      wrote = 1;
      break;
    }
    case DIST__STORE_CHECK:
    case DIST__STORE_WAIT: {
      int all = 1;
      for (size_t i = 0; i < r->nargs && all; i++) {
        dist__store_req_arg(buf, r, i, &v, &vl);
        all = dist__kv_get(&s->kv, v, vl, NULL, NULL);
      }
      if (r->op == DIST__STORE_CHECK) fail = reply_u8(c, all ? DIST__STORE_READY : 1);
      else if (all) fail = reply_u8(c, DIST__STORE_STOP_WAITING);
      else {
        c->wait_keys.n = 0;
        for (size_t i = 0; i < r->nargs && !fail; i++) {
          uint8_t w[8];
          dist__store_req_arg(buf, r, i, &v, &vl);
          dist__store_put_u64(w, vl);
          fail = dist__bytes_add(&c->wait_keys, w, 8) || dist__bytes_add(&c->wait_keys, v, vl);
        }
        c->nwait = r->nargs;
        c->waiting = !fail;
      }
      break;
    }
    case DIST__STORE_NUM_KEYS:
      fail = reply_i64(c, (int64_t)s->kv.count);
      break;
    case DIST__STORE_DELETE_KEY:
      fail = reply_i64(c, dist__kv_delete(&s->kv, k, kl));
      break;
    case DIST__STORE_APPEND: {
      if (dist__kv_get(&s->kv, k, kl, &v, &vl) && vl + r->len[1] > s->o.limits.value_max)
        return *why = "APPEND beyond the value limit", -1;
      fail = dist__kv_append(&s->kv, k, kl, r->arg[1], r->len[1]);
      wrote = 1;
      break;
    }
    case DIST__STORE_MULTI_GET:
      for (size_t i = 0; i < r->nargs && !fail; i++) {
        const uint8_t *key;
        size_t klen;
        dist__store_req_arg(buf, r, i, &key, &klen);
        fail = dist__kv_get(&s->kv, key, klen, &v, &vl) ? reply_blob(c, v, vl) : reply_blob(c, NULL, 0);
      }
      break;
    case DIST__STORE_MULTI_SET:
      for (size_t i = 0; i + 1 < r->nargs && !fail; i += 2) {
        const uint8_t *key;
        size_t klen;
        dist__store_req_arg(buf, r, i, &key, &klen);
        dist__store_req_arg(buf, r, i + 1, &v, &vl);
        fail = dist__kv_set(&s->kv, key, klen, v, vl);
      }
      wrote = 1;
      break;
    case DIST__STORE_CANCEL_WAIT:
      c->waiting = 0;
      c->nwait = 0;
      fail = reply_u8(c, DIST__STORE_WAIT_CANCELED);
      break;
    case DIST__STORE_PING: {
      uint8_t w[4] = {(uint8_t)r->word, (uint8_t)(r->word >> 8), (uint8_t)(r->word >> 16), (uint8_t)(r->word >> 24)};
      fail = dist__bytes_add(&c->out, w, 4);
      break;
    }
    case DIST__STORE_WATCH_KEY:
    case DIST__STORE_OPS:
      snprintf(text, sizeof text, "request %d is not supported by distmgr's store", (int)r->op);
      return *why = text, -1;
  }
  if (fail) return *why = "out of memory for its request", -1;
  return wrote;
}

/* Parse and handle what conns[i] sent; -1 when it was dropped. */
static int process(dist__store_server *s, int i) {
  conn *c = s->conns[i];
  size_t at = 0;
  int wrote = 0;
  while (at < c->in.n && (!c->waiting || c->in.p[at] == dist__store_opcode(s->o.dialect, DIST__STORE_CANCEL_WAIT))) {
    dist__store_req r;
    size_t used;
    char why[160];
    dist__store_parse_result pr =
        dist__store_parse(s->o.dialect, &s->o.limits, c->in.p + at, c->in.n - at, &r, &used, why, sizeof why);
    if (pr == DIST__STORE_BAD) return drop(s, i, why), -1;
    if (pr == DIST__STORE_MORE) {
      if (c->in.n - at > s->o.request_max) {
        snprintf(why, sizeof why, "a request of more than %zu bytes", s->o.request_max);
        return drop(s, i, why), -1;
      }
      break;
    }
    const char *bad = NULL;
    int w = handle(s, c, &r, c->in.p + at, &bad);
    if (w < 0) return drop(s, i, bad), -1;
    wrote |= w;
    at += used;
  }
  dist__bytes_consume(&c->in, at);
  c->partial_since = c->in.n && !c->waiting ? (c->partial_since ? c->partial_since : dist__net_now()) : 0;
  if (c->out.n - c->out_sent > OUT_MAX) return drop(s, i, "it does not read its replies"), -1;
  if (wrote) wake_waiters(s);
  return 0;
}

/* ---- the loop --------------------------------------------------------------- */

static void accept_one(dist__store_server *s) {
  struct sockaddr_storage a;
  socklen_t al = sizeof a;
  int fd = accept(s->listen_fd, (struct sockaddr *)&a, &al);
  if (fd < 0) return;
  char peer[64];
  dist__net_peer_name(&a, peer, sizeof peer);
  if (s->nconns >= s->o.max_conns) {
    dist_log(DIST_LOG_WARN, "store: refused %s: already %d connections (the limit)", peer, s->o.max_conns);
    atomic_fetch_add(&s->dropped, 1);
    close(fd);
    return;
  }
  conn *c = calloc(1, sizeof *c);
  conn **grown = c ? realloc(s->conns, sizeof *s->conns * (size_t)(s->nconns + 1)) : NULL;
  if (!grown) {
    free(c);
    close(fd);
    return;
  }
  s->conns = grown;
  dist__net_nonblocking(fd);
  c->fd = fd;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  s->conns[s->nconns++] = c;
}

static void read_from(dist__store_server *s, int i) {
  conn *c = s->conns[i];
  uint8_t chunk[65536];
  ssize_t got = recv(c->fd, chunk, sizeof chunk, 0);
  if (got <= 0) {
    if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) drop(s, i, NULL); /* closed */
    return;
  }
  if (dist__bytes_add(&c->in, chunk, (size_t)got)) drop(s, i, "out of memory for its input");
  else process(s, i);
}

static void write_to(dist__store_server *s, int i) {
  conn *c = s->conns[i];
  ssize_t sent = send(c->fd, c->out.p + c->out_sent, c->out.n - c->out_sent, MSG_NOSIGNAL);
  if (sent < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) drop(s, i, NULL);
    return;
  }
  c->out_sent += (size_t)sent;
  if (c->out_sent == c->out.n) c->out.n = c->out_sent = 0;
}

static void *run(void *arg) {
  dist__store_server *s = arg;
  struct pollfd *p = NULL;
  while (!atomic_load(&s->stop)) {
    struct pollfd *grown = realloc(p, sizeof *p * (size_t)(s->nconns + 2));
    if (!grown) { /* keep serving with what we have */
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
      continue;
    }
    p = grown;
    p[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    p[1] = (struct pollfd){s->listen_fd, POLLIN, 0};
    int n = s->nconns;
    for (int i = 0; i < n; i++)
      p[i + 2] = (struct pollfd){s->conns[i]->fd, (short)(POLLIN | (s->conns[i]->out.n ? POLLOUT : 0)), 0};
    if (poll(p, (nfds_t)n + 2, 100) < 0 && errno != EINTR) break;
    /* Connections by fd: the array shifts as peers are dropped. */
    for (int j = n - 1; j >= 0; j--) {
      if (!p[j + 2].revents) continue;
      int i = 0;
      while (i < s->nconns && s->conns[i]->fd != p[j + 2].fd) i++;
      if (i == s->nconns) continue;
      if (p[j + 2].revents & POLLOUT) write_to(s, i);
      if (i < s->nconns && s->conns[i]->fd == p[j + 2].fd && (p[j + 2].revents & (POLLIN | POLLHUP | POLLERR)))
        read_from(s, i);
    }
    if (p[1].revents & POLLIN) accept_one(s);
    double t = dist__net_now();
    for (int i = s->nconns - 1; i >= 0; i--)
      if (s->conns[i]->partial_since && t - s->conns[i]->partial_since > s->o.stall) {
        char why[96];
        snprintf(why, sizeof why, "it left a request unfinished for more than %g s", s->o.stall);
        drop(s, i, why);
      }
  }
  free(p);
  return NULL;
}

dist_status dist__store_server_start(int port, const dist__store_server_options *o, dist__store_server **out) {
  static const dist__store_server_options defaults = DIST__STORE_SERVER_OPTIONS_DEFAULT;
  *out = NULL;
  if (port < 0 || port > 65535) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: port %d is not a TCP port", port);
  dist__store_server *s = calloc(1, sizeof *s);
  if (!s) return dist__error(DIST_ERR_NO_MEMORY, "store server");
  s->o = o ? *o : defaults;
  s->wake[0] = s->wake[1] = -1;
  dist_status st = dist__net_listen(port, &s->listen_fd, &s->port);
  if (!st && pipe(s->wake)) st = dist__error(DIST_ERR_IO, "store: pipe: %s", strerror(errno));
  if (!st && dist__kv_init(&s->kv)) st = dist__error(DIST_ERR_NO_MEMORY, "store: key table");
  if (!st && pthread_create(&s->thread, NULL, run, s)) st = dist__error(DIST_ERR_INTERNAL, "store: pthread_create failed");
  if (st) {
    if (s->listen_fd > 0) close(s->listen_fd);
    if (s->wake[0] >= 0) close(s->wake[0]), close(s->wake[1]);
    dist__kv_free(&s->kv);
    free(s);
    return st;
  }
  dist_log(DIST_LOG_DEBUG, "store: serving the %s protocol on port %d", dist__store_dialect_name(s->o.dialect), s->port);
  *out = s;
  return DIST_SUCCESS;
}

int dist__store_server_port(const dist__store_server *s) { return s->port; }

long dist__store_server_dropped(const dist__store_server *s) { return atomic_load(&((dist__store_server *)s)->dropped); }

void dist__store_server_stop(dist__store_server *s) {
  if (!s) return;
  atomic_store(&s->stop, 1);
  ssize_t w = write(s->wake[1], "x", 1);
  (void)w; /* the loop also wakes every 100 ms */
  pthread_join(s->thread, NULL);
  /* No new connection first: a client that sees its connection end may
   * reconnect at once, and must then find nobody (or the next server). */
  close(s->listen_fd);
  while (s->nconns) drop(s, s->nconns - 1, NULL);
  free(s->conns);
  close(s->wake[0]);
  close(s->wake[1]);
  dist__kv_free(&s->kv);
  free(s);
}
