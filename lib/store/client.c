/* The store client (store.h): one blocking connection, every call bounded
 * by a deadline. A WAIT that times out is cancelled (CANCEL_WAIT, torch >=
 * 2.1) or, where the dialect has no cancel, the connection is replaced, so
 * the client stays usable either way. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include "store/bytes.h"
#include "store/net.h"
#include "store/store.h"

struct dist__store_client {
  int fd;
  char host[256];
  int port;
  char where[300]; /* "host port N" for messages */
  dist__store_dialect d;
  double timeout;
  dist__store_limits lim;
  int answered; /* a reply came on this connection: it speaks our dialect */
  char watch[DIST__STORE_WATCHES][200]; /* keys whose arrival ends every wait (dist__store_watch) */
  int gave_up;                          /* the last wait ended on a watched key */
};

static dist_status open_fd(dist__store_client *c, double deadline) {
  c->answered = 0;
  DIST_CHECK(dist__net_connect(c->host, c->port, deadline, &c->fd));
  if (c->d != DIST__STORE_TORCH22) return DIST_SUCCESS;
  uint8_t v[5] = {(uint8_t)dist__store_opcode(c->d, DIST__STORE_VALIDATE), 0xCE, 0xF7, 0x85, 0x3C}; /* magic, LE */
  dist_status s = dist__net_send(c->fd, v, sizeof v, deadline, "VALIDATE", c->where);
  if (s) close(c->fd), c->fd = -1;
  return s;
}

dist_status dist__store_connect(const char *host, int port, dist__store_dialect d, double timeout,
                                dist__store_client **out) {
  static const dist__store_limits lim = DIST__STORE_LIMITS_DEFAULT;
  *out = NULL;
  if (!host || !*host) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: no host given (MASTER_ADDR unset?)");
  if (strlen(host) >= 256) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: host name of %zu characters", strlen(host));
  if (port <= 0 || port > 65535) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: port %d is not a TCP port", port);
  if (d < 0 || d >= DIST__STORE_DIALECTS) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: unknown dialect %d", (int)d);
  if (!(timeout > 0)) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: timeout %g s is not positive", timeout);
  dist__store_client *c = calloc(1, sizeof *c);
  if (!c) return dist__error(DIST_ERR_NO_MEMORY, "store client");
  snprintf(c->host, sizeof c->host, "%s", host);
  snprintf(c->where, sizeof c->where, "%s port %d", host, port);
  c->port = port;
  c->d = d;
  c->timeout = timeout;
  c->lim = lim;
  c->fd = -1;
  dist_status s = open_fd(c, dist__net_now() + timeout);
  if (s) return free(c), s;
  *out = c;
  return DIST_SUCCESS;
}

void dist__store_close(dist__store_client *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  free(c);
}

/* ---- requests --------------------------------------------------------------- */

static int op(dist__store_client *c, dist__store_op o, dist__bytes *b) {
  uint8_t code = (uint8_t)dist__store_opcode(c->d, o);
  return dist__bytes_add(b, &code, 1);
}

static int u64(dist__bytes *b, uint64_t v) {
  uint8_t w[8];
  dist__store_put_u64(w, v);
  return dist__bytes_add(b, w, 8);
}

static int blob(dist__bytes *b, const void *p, size_t n) { return u64(b, n) || dist__bytes_add(b, p, n); }

static dist_status dialect_hint(dist__store_client *c, dist_status s);

/* A reconnect tries for at most 2 s: the server was up a moment ago, so one
 * that does not answer now has stopped (rank 0 left), and each later call
 * would otherwise wait its whole deadline for it. */
static double reconnect_deadline(double deadline) {
  double soon = dist__net_now() + 2.0;
  return deadline < soon ? deadline : soon;
}

static dist_status send_req(dist__store_client *c, dist__bytes *b, int oom, double deadline, const char *what) {
  /* A connection closed after a failure (a reply that could not be read) is
   * replaced: the client stays usable, e.g. to say that this rank gave up. */
  if (c->fd < 0 && !oom && open_fd(c, reconnect_deadline(deadline))) c->fd = -1;
  dist_status s = oom ? dist__error(DIST_ERR_NO_MEMORY, "store: request %s", what)
                      : c->fd < 0 ? dist__error(DIST_ERR_IO, "store at %s: not connected", c->where)
                                  : dialect_hint(c, dist__net_send(c->fd, b->p, b->n, deadline, what, c->where));
  dist__bytes_free(b);
  return s;
}

static dist_status key_ok(const char *key) {
  if (!key) return dist__error(DIST_ERR_INVALID_ARGUMENT, "store: NULL key");
  return DIST_SUCCESS;
}

/* A reply: until the first one on a connection, a failure may mean a server
 * of another dialect (torch's own parse garbage and close, or wait), so say so. */
static dist_status dialect_hint(dist__store_client *c, dist_status s) {
  if (!s || c->answered) return s;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", dist_last_error());
  return dist__error(s, "%s (no answer yet on this connection: a TCPStore of another torch version? this client speaks "
                        "%s; set DIST_STORE_DIALECT to the server's torch version)",
                     msg, dist__store_dialect_name(c->d));
}

static dist_status recv_reply(dist__store_client *c, void *p, size_t n, double deadline, const char *what) {
  dist_status s = dist__net_recv(c->fd, p, n, deadline, what, c->where);
  if (!s) c->answered = 1;
  return dialect_hint(c, s);
}

static dist_status recv_u64(dist__store_client *c, uint64_t *v, double deadline, const char *what) {
  uint8_t w[8];
  DIST_CHECK(recv_reply(c, w, 8, deadline, what));
  *v = dist__store_u64(w);
  return DIST_SUCCESS;
}

/* A length-prefixed value within the limits, malloc'd and NUL-terminated. */
static dist_status recv_blob(dist__store_client *c, uint8_t **v, size_t *n, double deadline, const char *what) {
  uint64_t len;
  DIST_CHECK(recv_u64(c, &len, deadline, what));
  if (len > c->lim.value_max)
    return dist__error(DIST_ERR_CORRUPT, "store at %s: %s of %llu bytes (more than %zu): not a TCPStore of dialect %s?",
                       c->where, what, (unsigned long long)len, c->lim.value_max, dist__store_dialect_name(c->d));
  uint8_t *p = malloc((size_t)len + 1);
  if (!p) { /* its bytes stay unread: every later reply would be read out of step */
    close(c->fd);
    c->fd = -1;
    return dist__error(DIST_ERR_NO_MEMORY, "store: %s of %llu bytes (connection to %s closed)", what,
                       (unsigned long long)len, c->where);
  }
  dist_status s = recv_reply(c, p, (size_t)len, deadline, what);
  if (s) return free(p), s;
  p[len] = 0;
  *v = p, *n = (size_t)len;
  return DIST_SUCCESS;
}

static double deadline_of(const dist__store_client *c) { return dist__net_now() + c->timeout; }

dist_status dist__store_set(dist__store_client *c, const char *key, const void *value, size_t len) {
  DIST_CHECK(key_ok(key));
  dist__bytes b = {0};
  int oom = op(c, DIST__STORE_SET, &b) || blob(&b, key, strlen(key)) || blob(&b, value, len);
  return send_req(c, &b, oom, deadline_of(c), "SET");
}

static dist_status keys_req(dist__store_client *c, dist__store_op o, const char *const *keys, size_t n, double deadline,
                            const char *what) {
  for (size_t i = 0; i < n; i++) DIST_CHECK(key_ok(keys ? keys[i] : NULL));
  dist__bytes b = {0};
  int oom = op(c, o, &b) || u64(&b, n);
  for (size_t i = 0; i < n && !oom; i++) oom = blob(&b, keys[i], strlen(keys[i]));
  return send_req(c, &b, oom, deadline, what);
}

dist_status dist__store_missing(dist__store_client *c, const char *const *keys, size_t n, int *missing) {
  /* One CHECK per key, all sent before any answer is read: one round trip,
   * and a short deadline, since this mostly runs after something timed out. */
  double deadline = dist__net_now() + (c->timeout < 5 ? c->timeout : 5);
  for (size_t i = 0; i < n; i++) DIST_CHECK(keys_req(c, DIST__STORE_CHECK, &keys[i], 1, deadline, "CHECK"));
  for (size_t i = 0; i < n; i++) {
    uint8_t r;
    dist_status s = recv_reply(c, &r, 1, deadline, "CHECK's answer");
    if (s == DIST_ERR_TIMEOUT)
      return dist__error(DIST_ERR_TIMEOUT,
                         "store at %s does not answer CHECK: a TCPStore of another torch version than this "
                         "client's dialect %s, or not a TCPStore? (set DIST_STORE_DIALECT to the server's torch "
                         "version)",
                         c->where, dist__store_dialect_name(c->d));
    if (s) return s;
    if (r > 1) return dist__error(DIST_ERR_CORRUPT, "store at %s: CHECK answered %u", c->where, r);
    missing[i] = r != DIST__STORE_READY;
  }
  return DIST_SUCCESS;
}

/* Names of the keys still missing, for a timeout's message. */
static void missing_names(dist__store_client *c, const char *const *keys, size_t n, char *out, size_t cap) {
  int *miss = calloc(n ? n : 1, sizeof *miss);
  out[0] = 0;
  if (!miss || c->fd < 0 || dist__store_missing(c, keys, n, miss)) {
    snprintf(out, cap, "(which ones is unknown: %s)", miss ? dist_last_error() : "out of memory");
    free(miss);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n && k < cap; i++)
    if (miss[i]) k += (size_t)snprintf(out + k, cap - k, "%s'%s'", k ? ", " : "", keys[i]);
  free(miss);
}

void dist__store_watch(dist__store_client *c, int slot, const char *key) {
  if (c && slot >= 0 && slot < DIST__STORE_WATCHES) snprintf(c->watch[slot], sizeof c->watch[slot], "%s", key ? key : "");
}

static int watching(const dist__store_client *c) {
  for (int i = 0; i < DIST__STORE_WATCHES; i++)
    if (c->watch[i][0]) return 1;
  return 0;
}

/* One WAIT, its answer awaited until `until`: DIST_ERR_TIMEOUT (the client
 * usable again) or the outcome. The request itself may take until `deadline`
 * (the whole wait's): a request cut off halfway would leave the connection
 * out of step. */
static dist_status wait_until(dist__store_client *c, const char *const *keys, size_t n, double until, double deadline) {
  dist_status sent = keys_req(c, DIST__STORE_WAIT, keys, n, deadline, "WAIT");
  if (sent) { /* perhaps cut off halfway: the next request goes on a fresh connection */
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    return sent;
  }
  if (dist__net_now() >= until) until = dist__net_now() + 0.001; /* the send took the slice: just a look */
  uint8_t r;
  dist_status s = recv_reply(c, &r, 1, until, "WAIT's answer");
  if (!s) return r == DIST__STORE_STOP_WAITING ? DIST_SUCCESS
                                               : dist__error(DIST_ERR_CORRUPT, "store at %s: WAIT answered %u", c->where, r);
  if (s != DIST_ERR_TIMEOUT) return s;
  /* Give the wait up, so that the connection can be used again. */
  double grace = dist__net_now() + c->timeout;
  int cancel = dist__store_opcode(c->d, DIST__STORE_CANCEL_WAIT);
  dist__bytes b = {0};
  int reusable = 0;
  if (cancel >= 0 && !op(c, DIST__STORE_CANCEL_WAIT, &b) && !send_req(c, &b, 0, grace, "CANCEL_WAIT")) {
    /* STOP_WAITING may have crossed the cancel on the wire: absorb it. */
    uint8_t a = 0xFF;
    while (!recv_reply(c, &a, 1, grace, "CANCEL_WAIT's answer") && a == DIST__STORE_STOP_WAITING)
      a = 0xFF;
    reusable = a == DIST__STORE_WAIT_CANCELED;
  } else dist__bytes_free(&b);
  if (!reusable) { /* no cancel in this dialect (or it failed): a fresh connection */
    close(c->fd);
    c->fd = -1;
    if (open_fd(c, reconnect_deadline(grace))) c->fd = -1;
  }
  return DIST_ERR_TIMEOUT;
}

int dist__store_saw_give_up(const dist__store_client *c) { return c && c->gave_up; }

/* A watched key's value as an error, if one has arrived. */
static dist_status watched(dist__store_client *c) {
  for (int i = 0; i < DIST__STORE_WATCHES; i++) {
    const char *k = c->watch[i];
    int there = 0;
    if (!k[0] || dist__store_check(c, &k, 1, &there) || !there) continue; /* the wait goes on */
    char saved[DIST__STORE_WATCHES][200];
    memcpy(saved, c->watch, sizeof saved);
    memset(c->watch, 0, sizeof c->watch); /* the GET's own wait must not look again */
    uint8_t *v = NULL;
    size_t len = 0;
    dist_status s = dist__store_get(c, saved[i], 0, &v, &len);
    memcpy(c->watch, saved, sizeof saved);
    const char *msg = s ? "a rank gave up (its message could not be read)" : (const char *)v;
    dist_status code = dist__store_gave_up_code(&msg); /* before msg is read: it moves past the tag */
    s = dist__error(code, "%s", msg);
    c->gave_up = 1;
    free(v);
    return s;
  }
  return DIST_SUCCESS;
}

dist_status dist__store_wait(dist__store_client *c, const char *const *keys, size_t n, double timeout) {
  double deadline = dist__net_now() + (timeout > 0 ? timeout : c->timeout), slice = 0.05;
  c->gave_up = 0; /* it tells of the last wait only */
  char before[1024]; /* a slice that ran out is no failure: its message must not replace the last one */
  snprintf(before, sizeof before, "%s", dist_last_error());
  for (;;) {
    /* Watching: in slices (50 ms, doubling to 1 s), looking for the key between them. */
    double until = watching(c) && dist__net_now() + slice < deadline ? dist__net_now() + slice : deadline;
    dist_status s = wait_until(c, keys, n, until, deadline);
    if (s != DIST_ERR_TIMEOUT) return s;
    if (until >= deadline) break;
    DIST_CHECK(watched(c));
    dist__error_restore(before);
    slice = slice < 0.5 ? 2 * slice : 1.0;
  }
  char names[512];
  missing_names(c, keys, n, names, sizeof names);
  return dist__error(DIST_ERR_TIMEOUT, "store at %s: waited %g s for key%s %s", c->where,
                     timeout > 0 ? timeout : c->timeout, n > 1 ? "s" : "", names[0] ? names : "(arrived just now)");
}

dist_status dist__store_get(dist__store_client *c, const char *key, double timeout, uint8_t **value, size_t *len) {
  DIST_CHECK(key_ok(key));
  DIST_CHECK(dist__store_wait(c, &key, 1, timeout));
  dist__bytes b = {0};
  double deadline = deadline_of(c);
  int oom = op(c, DIST__STORE_GET, &b) || blob(&b, key, strlen(key));
  DIST_CHECK(send_req(c, &b, oom, deadline, "GET"));
  return recv_blob(c, value, len, deadline, "GET's value");
}

dist_status dist__store_add(dist__store_client *c, const char *key, int64_t delta, int64_t *now) {
  DIST_CHECK(key_ok(key));
  dist__bytes b = {0};
  double deadline = deadline_of(c);
  int oom = op(c, DIST__STORE_ADD, &b) || blob(&b, key, strlen(key)) || u64(&b, (uint64_t)delta);
  DIST_CHECK(send_req(c, &b, oom, deadline, "ADD"));
  uint64_t v;
  DIST_CHECK(recv_u64(c, &v, deadline, "ADD's value"));
  if (now) *now = (int64_t)v;
  return DIST_SUCCESS;
}

dist_status dist__store_check(dist__store_client *c, const char *const *keys, size_t n, int *all_exist) {
  double deadline = deadline_of(c);
  DIST_CHECK(keys_req(c, DIST__STORE_CHECK, keys, n, deadline, "CHECK"));
  uint8_t r;
  DIST_CHECK(recv_reply(c, &r, 1, deadline, "CHECK's answer"));
  if (r > 1) return dist__error(DIST_ERR_CORRUPT, "store at %s: CHECK answered %u", c->where, r);
  *all_exist = r == DIST__STORE_READY;
  return DIST_SUCCESS;
}

dist_status dist__store_compare_set(dist__store_client *c, const char *key, const void *expected, size_t elen,
                                    const void *desired, size_t dlen, uint8_t **current, size_t *clen) {
  DIST_CHECK(key_ok(key));
  dist__bytes b = {0};
  double deadline = deadline_of(c);
  int oom = op(c, DIST__STORE_COMPARE_SET, &b) || blob(&b, key, strlen(key)) || blob(&b, expected, elen) ||
            blob(&b, desired, dlen);
  DIST_CHECK(send_req(c, &b, oom, deadline, "COMPARE_SET"));
  return recv_blob(c, current, clen, deadline, "COMPARE_SET's value");
}

dist_status dist__store_num_keys(dist__store_client *c, int64_t *n) {
  dist__bytes b = {0};
  double deadline = deadline_of(c);
  DIST_CHECK(send_req(c, &b, op(c, DIST__STORE_NUM_KEYS, &b), deadline, "GETNUMKEYS"));
  uint64_t v;
  DIST_CHECK(recv_u64(c, &v, deadline, "GETNUMKEYS's count"));
  *n = (int64_t)v;
  return DIST_SUCCESS;
}

dist_status dist__store_delete(dist__store_client *c, const char *key, int *deleted) {
  DIST_CHECK(key_ok(key));
  dist__bytes b = {0};
  double deadline = deadline_of(c);
  int oom = op(c, DIST__STORE_DELETE_KEY, &b) || blob(&b, key, strlen(key));
  DIST_CHECK(send_req(c, &b, oom, deadline, "DELETE_KEY"));
  uint64_t v;
  DIST_CHECK(recv_u64(c, &v, deadline, "DELETE_KEY's count"));
  if (deleted) *deleted = v != 0;
  return DIST_SUCCESS;
}

int dist__store_local_addr(const dist__store_client *c, char *out, size_t n) {
  struct sockaddr_storage a;
  socklen_t len = sizeof a;
  if (!c || c->fd < 0 || getsockname(c->fd, (struct sockaddr *)&a, &len) != 0) return -1;
  const void *ip = a.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&a)->sin6_addr
                                            : (const void *)&((struct sockaddr_in *)&a)->sin_addr;
  return inet_ntop(a.ss_family, ip, out, (socklen_t)n) ? 0 : -1;
}

int dist__store_wait_closed(dist__store_client *c, double timeout) {
  double deadline = dist__net_now() + timeout;
  char junk[64];
  while (c && c->fd >= 0) {
    double left = deadline - dist__net_now();
    if (left <= 0) return -1;
    struct pollfd p = {c->fd, POLLIN, 0};
    int k = poll(&p, 1, (int)(left * 1e3) + 1);
    if (k < 0 && errno != EINTR) return -1;
    if (k <= 0) continue;
    ssize_t n = read(c->fd, junk, sizeof junk); /* nothing is due: only the end */
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return 0;
  }
  return 0;
}
