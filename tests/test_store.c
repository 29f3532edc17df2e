/* The TCPStore-compatible store (lib/store): distmgr's client against
 * distmgr's server in every dialect, the semantics torch 1.13's server was
 * seen to have (tests/store_torch.sh checks against torch itself), and a
 * server exposed to bad peers: garbage, oversized lengths, a missing
 * VALIDATE, stalls, too many connections. No MPI. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/internal.h"
#include "cunit_main.h"
#include "store/net.h"
#include "store/rendezvous.h"
#include "store/store.h"

static dist__store_server *start(dist__store_dialect d, double stall, int max_conns) {
  dist__store_server_options o = DIST__STORE_SERVER_OPTIONS_DEFAULT;
  o.dialect = d;
  o.stall = stall;
  o.max_conns = max_conns;
  dist__store_server *s = NULL;
  ASSERT_OK(dist__store_server_start(0, &o, &s));
  return s;
}

static dist__store_client *client(dist__store_server *s, dist__store_dialect d) {
  dist__store_client *c = NULL;
  ASSERT_OK(dist__store_connect("127.0.0.1", dist__store_server_port(s), d, 5.0, &c));
  return c;
}

static void expect_value(dist__store_client *c, const char *key, const char *want) {
  uint8_t *v = NULL;
  size_t n = 0;
  ASSERT_OK(dist__store_get(c, key, 2.0, &v, &n));
  CU_ASSERT_EQUAL(n, strlen(want));
  if (v) CU_ASSERT_STRING_EQUAL((char *)v, want);
  free(v);
}

/* Every request, in each dialect, with the replies torch's server gives. */
static void test_requests(void) {
  for (int d = 0; d < DIST__STORE_DIALECTS; d++) {
    dist__store_server *s = start((dist__store_dialect)d, 30, 64);
    dist__store_client *c = client(s, (dist__store_dialect)d);
    if (!s || !c) return;
    ASSERT_OK(dist__store_set(c, "/k", "v1", 2));
    expect_value(c, "/k", "v1");
    int64_t now = 0;
    ASSERT_OK(dist__store_add(c, "/n", 7, &now));
    CU_ASSERT_EQUAL(now, 7);
    ASSERT_OK(dist__store_add(c, "/n", -9, &now));
    CU_ASSERT_EQUAL(now, -2);
    expect_value(c, "/n", "-2"); /* ADD keeps ASCII decimal, as torch does */
    int all = -1;
    const char *two[] = {"/k", "/absent"};
    ASSERT_OK(dist__store_check(c, two, 2, &all));
    CU_ASSERT_EQUAL(all, 0);
    ASSERT_OK(dist__store_check(c, two, 1, &all));
    CU_ASSERT_EQUAL(all, 1);
    int64_t keys = 0;
    ASSERT_OK(dist__store_num_keys(c, &keys));
    CU_ASSERT_EQUAL(keys, 2);
    /* COMPARE_SET: equal -> desired; different -> current; absent with
     * empty expected -> desired; absent otherwise -> expected (torch 1.13). */
    uint8_t *cur = NULL;
    size_t cl = 0;
    ASSERT_OK(dist__store_compare_set(c, "/k", "v1", 2, "v2", 2, &cur, &cl));
    CU_ASSERT(cl == 2 && !memcmp(cur, "v2", 2));
    free(cur);
    ASSERT_OK(dist__store_compare_set(c, "/k", "zz", 2, "v3", 2, &cur, &cl));
    CU_ASSERT(cl == 2 && !memcmp(cur, "v2", 2));
    free(cur);
    ASSERT_OK(dist__store_compare_set(c, "/new", "", 0, "v3", 2, &cur, &cl));
    CU_ASSERT(cl == 2 && !memcmp(cur, "v3", 2));
    free(cur);
    ASSERT_OK(dist__store_compare_set(c, "/new2", "x", 1, "v3", 2, &cur, &cl));
    CU_ASSERT(cl == 1 && !memcmp(cur, "x", 1));
    free(cur);
    int deleted = -1;
    ASSERT_OK(dist__store_delete(c, "/k", &deleted));
    CU_ASSERT_EQUAL(deleted, 1);
    ASSERT_OK(dist__store_delete(c, "/k", &deleted));
    CU_ASSERT_EQUAL(deleted, 0);
    /* Binary values and an empty one. */
    const uint8_t bin[4] = {0, 255, 0, 7};
    ASSERT_OK(dist__store_set(c, "/bin", bin, 4));
    ASSERT_OK(dist__store_set(c, "/empty", "", 0));
    uint8_t *v = NULL;
    size_t vl = 0;
    ASSERT_OK(dist__store_get(c, "/bin", 1.0, &v, &vl));
    CU_ASSERT(vl == 4 && !memcmp(v, bin, 4));
    free(v);
    expect_value(c, "/empty", "");
    CU_ASSERT_EQUAL(dist__store_server_dropped(s), 0);
    dist__store_close(c);
    dist__store_server_stop(s);
  }
}

/* Another client sets key = value after 200 ms. */
typedef struct setter {
  dist__store_server *s;
  dist__store_dialect d;
  const char *key, *value;
} setter;

static void *set_later(void *arg) {
  setter *t = arg;
  dist__store_client *c = NULL;
  usleep(200000);
  if (dist__store_connect("127.0.0.1", dist__store_server_port(t->s), t->d, 5.0, &c) == DIST_SUCCESS) {
    dist__store_set(c, t->key, t->value, strlen(t->value));
    dist__store_close(c);
  }
  return NULL;
}

/* WAIT returns when another client sets the key; a timed-out WAIT names the
 * missing key and leaves the client usable (cancelled, or reconnected where
 * the dialect has no cancel). */
static void test_wait(void) {
  for (int d = 0; d < DIST__STORE_DIALECTS; d++) {
    dist__store_server *s = start((dist__store_dialect)d, 30, 64);
    dist__store_client *c = client(s, (dist__store_dialect)d);
    if (!s || !c) return;
    pthread_t t;
    setter arg = {s, (dist__store_dialect)d, "/late", "here"};
    pthread_create(&t, NULL, set_later, &arg);
    expect_value(c, "/late", "here");
    pthread_join(t, NULL);
    const char *keys[] = {"/late", "/never"};
    double t0 = dist__net_now();
    ASSERT_STATUS(dist__store_wait(c, keys, 2, 0.3), DIST_ERR_TIMEOUT);
    CU_ASSERT(dist__net_now() - t0 < 3.0);
    ASSERT_MSG_HAS("'/never'");
    CU_ASSERT_PTR_NULL(strstr(dist_last_error(), "'/late'"));
    ASSERT_OK(dist__store_set(c, "/after", "1", 1)); /* still usable */
    expect_value(c, "/after", "1");
    dist__store_close(c);
    dist__store_server_stop(s);
  }
}

/* A watched key ends a wait (in every dialect) with its value as the
 * message, well before the wait's own limit; the client stays usable, and
 * a key no longer watched ends nothing. */
static void test_watch(void) {
  for (int d = 0; d < DIST__STORE_DIALECTS; d++) {
    dist__store_server *s = start((dist__store_dialect)d, 30, 64);
    dist__store_client *c = client(s, (dist__store_dialect)d);
    if (!s || !c) return;
    dist__store_watch(c, 1, "/gave_up");
    CU_ASSERT(!dist__store_saw_give_up(c));
    pthread_t t;
    setter arg = {s, (dist__store_dialect)d, "/gave_up", "rank 1 of 2 gave up: boom"};
    pthread_create(&t, NULL, set_later, &arg);
    const char *keys[] = {"/never"};
    double t0 = dist__net_now();
    ASSERT_STATUS(dist__store_wait(c, keys, 1, 20.0), DIST_ERR_ABORTED); /* no code tag: ABORTED */
    CU_ASSERT(dist__net_now() - t0 < 3.0);
    ASSERT_MSG_HAS("rank 1 of 2 gave up: boom");
    CU_ASSERT(dist__store_saw_give_up(c));
    pthread_join(t, NULL);
    ASSERT_OK(dist__store_set(c, "/after", "1", 1)); /* still usable */
    expect_value(c, "/after", "1");
    dist__store_watch(c, 1, NULL);
    ASSERT_STATUS(dist__store_wait(c, keys, 1, 0.3), DIST_ERR_TIMEOUT);
    dist__store_close(c);
    dist__store_server_stop(s);
  }
}

/* A raw connection to the server, for peers that misbehave. */
static int raw(dist__store_server *s) {
  int fd = -1;
  ASSERT_OK(dist__net_connect("127.0.0.1", dist__store_server_port(s), dist__net_now() + 5, &fd));
  return fd;
}

/* 1 when the server closed fd within `seconds` (reads EOF). */
static int closed_by_server(int fd, double seconds) {
  double end = dist__net_now() + seconds;
  while (dist__net_now() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char b[64];
      ssize_t k = recv(fd, b, sizeof b, 0);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return 1;
    }
  }
  return 0;
}

static void send_bytes(int fd, const void *p, size_t n) {
  CU_ASSERT_EQUAL(dist__net_send(fd, p, n, dist__net_now() + 5, "test bytes", "test"), DIST_SUCCESS);
}

/* Bad peers are dropped, each with a count; a good client goes on meanwhile. */
static void test_bad_peers(void) {
  dist__store_server *s = start(DIST__STORE_TORCH21, 0.3, 64);
  dist__store_client *good = client(s, DIST__STORE_TORCH21);
  if (!s || !good) return;
  long dropped = 0;
  /* An unknown opcode. */
  int fd = raw(s);
  send_bytes(fd, "\xee", 1);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), ++dropped);
  /* A key length of 2^63: refused from the header, nothing allocated. */
  uint8_t huge[9] = {0};
  huge[0] = 0; /* SET in torch 2.1 */
  dist__store_put_u64(huge + 1, (uint64_t)1 << 63);
  fd = raw(s);
  send_bytes(fd, huge, sizeof huge);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), ++dropped);
  /* A WAIT on 2^40 keys. */
  uint8_t many[9];
  many[0] = 5;
  dist__store_put_u64(many + 1, (uint64_t)1 << 40);
  fd = raw(s);
  send_bytes(fd, many, sizeof many);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), ++dropped);
  /* Half a request, then silence: dropped after the stall limit (0.3 s). */
  fd = raw(s);
  send_bytes(fd, "\x00\x05\x00\x00", 4);
  CU_ASSERT(closed_by_server(fd, 5));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), ++dropped);
  /* ADD to a value that is not a number. */
  ASSERT_OK(dist__store_set(good, "/text", "abc", 3));
  fd = raw(s);
  uint8_t add[1 + 8 + 5 + 8];
  add[0] = 3;
  dist__store_put_u64(add + 1, 5);
  memcpy(add + 9, "/text", 5);
  dist__store_put_u64(add + 14, 1);
  send_bytes(fd, add, sizeof add);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), ++dropped);
  /* An idle connection is not a stall. */
  fd = raw(s);
  CU_ASSERT(!closed_by_server(fd, 0.8));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), dropped);
  /* The good client was never disturbed. */
  ASSERT_OK(dist__store_set(good, "/ok", "1", 1));
  expect_value(good, "/ok", "1");
  dist__store_close(good);
  dist__store_server_stop(s);
}

/* torch >= 2.2: the first message must be VALIDATE with the magic. */
static void test_validate(void) {
  dist__store_server *s = start(DIST__STORE_TORCH22, 30, 64);
  if (!s) return;
  int fd = raw(s); /* torch 2.1's SET: no handshake */
  uint8_t set[1 + 8 + 2 + 8 + 1] = {1};
  dist__store_put_u64(set + 1, 2);
  memcpy(set + 9, "/a", 2);
  dist__store_put_u64(set + 11, 1);
  set[19] = 'x';
  send_bytes(fd, set, sizeof set);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  fd = raw(s); /* a wrong magic */
  send_bytes(fd, "\x00\x01\x02\x03\x04", 5);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), 2);
  dist__store_client *c = client(s, DIST__STORE_TORCH22); /* VALIDATE, then requests */
  if (c) ASSERT_OK(dist__store_set(c, "/a", "x", 1));
  if (c) expect_value(c, "/a", "x");
  dist__store_close(c);
  dist__store_server_stop(s);
}

/* Connections beyond the limit are closed at once; those within keep working. */
static void test_connection_limit(void) {
  dist__store_server *s = start(DIST__STORE_TORCH21, 30, 3);
  if (!s) return;
  dist__store_client *c[3];
  for (int i = 0; i < 3; i++) c[i] = client(s, DIST__STORE_TORCH21);
  for (int i = 0; i < 3; i++) /* every one accepted before the next is tried */
    if (c[i]) ASSERT_OK(dist__store_set(c[i], "/x", "1", 1));
  int fd = raw(s);
  CU_ASSERT(closed_by_server(fd, 3));
  close(fd);
  CU_ASSERT_EQUAL(dist__store_server_dropped(s), 1);
  for (int i = 0; i < 3; i++)
    if (c[i]) expect_value(c[i], "/x", "1");
  for (int i = 0; i < 3; i++) dist__store_close(c[i]);
  dist__store_server_stop(s);
}

/* Probing MASTER_PORT (is PyTorch serving it?) must never accept a
 * connection: a rank that reached the probe's socket would see its requests
 * reset when the probe closes it (seen as a rare rendezvous failure when a
 * rank reconnected while rank 0 probed). A thread connects in a tight loop
 * while the port is probed; then a real server must read as taken. */
static atomic_int probing;
static void *hammer(void *arg) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*(int *)arg)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  long accepted = 0;
  while (atomic_load(&probing)) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) continue;
    if (!connect(fd, (struct sockaddr *)&a, sizeof a)) accepted++;
    close(fd);
  }
  return (void *)accepted;
}

static void test_port_probe(void) {
  int fd = -1, port = 0;
  ASSERT_OK(dist__net_listen(0, &fd, &port));
  close(fd);
  pthread_t t;
  atomic_store(&probing, 1);
  CU_ASSERT_FATAL(!pthread_create(&t, NULL, hammer, &port));
  int taken = 0;
  double end = dist__net_now() + 1.0;
  for (int i = 0; i < 200000 && dist__net_now() < end; i++) taken += dist__net_port_taken(port);
  atomic_store(&probing, 0);
  void *accepted;
  pthread_join(t, &accepted);
  CU_ASSERT_EQUAL(taken, 0);
  CU_ASSERT_EQUAL((long)accepted, 0);
  dist__store_server *s = start(DIST__STORE_TORCH22, 30, 8);
  if (!s) return;
  CU_ASSERT(dist__net_port_taken(dist__store_server_port(s)));
  dist__store_server_stop(s);
}

/* No server: the connect gives up at its deadline with a message naming the
 * address; bad arguments are errors, not crashes. */
static void test_client_errors(void) {
  int fd = -1, port = 0;
  ASSERT_OK(dist__net_listen(0, &fd, &port)); /* a port surely free once closed */
  close(fd);
  dist__store_client *c = NULL;
  double t0 = dist__net_now();
  ASSERT_STATUS(dist__store_connect("127.0.0.1", port, DIST__STORE_TORCH21, 0.5, &c), DIST_ERR_TIMEOUT);
  CU_ASSERT(dist__net_now() - t0 < 3.0);
  ASSERT_MSG_HAS("127.0.0.1 port");
  CU_ASSERT_PTR_NULL(c);
  ASSERT_STATUS(dist__store_connect("no-such-host.invalid", 29500, DIST__STORE_TORCH21, 0.5, &c), DIST_ERR_ENVIRONMENT);
  ASSERT_STATUS(dist__store_connect("127.0.0.1", 0, DIST__STORE_TORCH21, 1, &c), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__store_connect("127.0.0.1", 70000, DIST__STORE_TORCH21, 1, &c), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__store_connect(NULL, 29500, DIST__STORE_TORCH21, 1, &c), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist__store_connect("127.0.0.1", 29500, (dist__store_dialect)9, 1, &c), DIST_ERR_INVALID_ARGUMENT);
  /* A server that vanishes: the next call fails with an error, no hang. */
  dist__store_server *s = start(DIST__STORE_TORCH21, 30, 8);
  c = client(s, DIST__STORE_TORCH21);
  dist__store_server_stop(s);
  if (c) {
    int64_t n;
    dist_status st = dist__store_num_keys(c, &n);
    CU_ASSERT(st == DIST_ERR_IO || st == DIST_ERR_TIMEOUT);
  }
  dist__store_close(c);
  ASSERT_STATUS(dist__store_server_start(-1, NULL, &s), DIST_ERR_INVALID_ARGUMENT);
}

static void test_dialect_names(void) {
  static const struct { const char *text; int ok; dist__store_dialect want; } cases[] = {
      {"torch113", 1, DIST__STORE_TORCH113}, {"torch21", 1, DIST__STORE_TORCH21}, {"torch22", 1, DIST__STORE_TORCH22},
      {"1.13.0a0+gitunknown", 1, DIST__STORE_TORCH113}, {"2.0.1", 1, DIST__STORE_TORCH113},
      {"2.1.2", 1, DIST__STORE_TORCH21}, {"2.2.0", 1, DIST__STORE_TORCH22}, {"2.5.1+cu121", 1, DIST__STORE_TORCH22},
      {"", 0, 0}, {"2", 0, 0}, {"2.", 0, 0}, {"x.1", 0, 0}, {"torch", 0, 0}, {"0.4", 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dist__store_dialect d = (dist__store_dialect)-1;
    int r = dist__store_dialect_parse(cases[i].text, &d);
    CU_ASSERT_EQUAL(r == 0, cases[i].ok);
    if (cases[i].ok) CU_ASSERT_EQUAL(d, cases[i].want);
  }
  CU_ASSERT_EQUAL(dist__store_dialect_parse(NULL, &(dist__store_dialect){0}), -1);
  /* The opcodes of torch 1.13 seen on the wire (tests/store_torch.sh). */
  CU_ASSERT_EQUAL(dist__store_opcode(DIST__STORE_TORCH113, DIST__STORE_DELETE_KEY), 8);
  CU_ASSERT_EQUAL(dist__store_opcode(DIST__STORE_TORCH21, DIST__STORE_DELETE_KEY), 7);
  CU_ASSERT_EQUAL(dist__store_opcode(DIST__STORE_TORCH22, DIST__STORE_SET), 1);
  CU_ASSERT_EQUAL(dist__store_opcode(DIST__STORE_TORCH113, DIST__STORE_CANCEL_WAIT), -1);
}

/* Who serves the store and in which dialect, from the environment alone. */
static void test_plan(void) {
  dist_launch l = {.method = DIST_LAUNCH_ENV, .rank = 1, .size = 2, .master_addr = "10.0.0.1", .master_port = 29500};
  static const struct {
    const char *env[4];
    dist_status want;
    int agent, external;
    dist__store_dialect dialect;
  } cases[] = {
      {{NULL}, DIST_SUCCESS, 0, 0, DIST__STORE_TORCH22}, /* bare launcher: rank 0 serves distmgr's own */
      {{"TORCHELASTIC_USE_AGENT_STORE=True", "NCCL_ASYNC_ERROR_HANDLING=1"}, DIST_SUCCESS, 1, 0, DIST__STORE_TORCH113},
      {{"TORCHELASTIC_USE_AGENT_STORE=True", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"}, DIST_SUCCESS, 1, 0, DIST__STORE_TORCH22},
      {{"TORCHELASTIC_USE_AGENT_STORE=True"}, DIST_ERR_ENVIRONMENT, 0, 0, 0}, /* which torch? */
      {{"TORCHELASTIC_USE_AGENT_STORE=True", "DIST_STORE_DIALECT=2.1.0"}, DIST_SUCCESS, 1, 0, DIST__STORE_TORCH21},
      {{"DIST_STORE_SERVER=external"}, DIST_SUCCESS, 1, 1, DIST__STORE_TORCH22},
      {{"DIST_STORE_SERVER=External", "DIST_STORE_DIALECT=1.13"}, DIST_SUCCESS, 1, 1, DIST__STORE_TORCH113},
      {{"DIST_STORE_SERVER=auto"}, DIST_SUCCESS, 0, 0, DIST__STORE_TORCH22},
      {{"DIST_STORE_SERVER=rank1"}, DIST_ERR_SETTING, 0, 0, 0},
      {{"DIST_STORE_DIALECT=3"}, DIST_ERR_SETTING, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dist__rdzv_plan p;
    memset(&p, 0x5a, sizeof p);
    dist_status s = dist__rdzv_plan_make(&l, cases[i].env, &p);
    CU_ASSERT_EQUAL(s, cases[i].want);
    if (s) continue;
    CU_ASSERT_EQUAL(p.agent_store, cases[i].agent);
    CU_ASSERT_EQUAL(p.external, cases[i].external);
    CU_ASSERT_EQUAL(p.dialect, cases[i].dialect);
    CU_ASSERT_STRING_EQUAL(p.prefix, "/distmgr/none/0/");
  }
  dist_launch no_port = l;
  no_port.master_port = 0;
  ASSERT_STATUS(dist__rdzv_plan_make(&no_port, cases[0].env, &(dist__rdzv_plan){0}), DIST_ERR_ENVIRONMENT);
}

/* Rank 0 of 2 alone: the first exchange waits its timeout and names rank 1;
 * every later one fails at once with that, instead of waiting again (start-up
 * has several in a row, and Gloo's connections after them). */
static void test_rdzv_gone(void) {
  int fd = -1, port = 0;
  ASSERT_OK(dist__net_listen(0, &fd, &port));
  close(fd);
  dist_launch l = {.method = DIST_LAUNCH_ENV, .rank = 0, .size = 2, .master_addr = "127.0.0.1", .master_port = port};
  const char *env[] = {NULL};
  dist__rdzv *r = NULL;
  ASSERT_OK(dist__rdzv_open(&l, env, 0.5, &r));
  if (!r) return;
  int64_t mine = 7, all[2];
  double t0 = dist__net_now();
  ASSERT_STATUS(dist__rdzv_all_gather(r, "first", &mine, sizeof mine, all), DIST_ERR_TIMEOUT);
  CU_ASSERT(dist__net_now() - t0 >= 0.4);
  CU_ASSERT(strstr(dist_last_error(), "first: rank 1 did not arrive within 0.5 s") != NULL);
  ASSERT_OK(dist__rdzv_still_there(NULL, "no rendezvous"));
  t0 = dist__net_now();
  ASSERT_STATUS(dist__rdzv_all_gather(r, "second", &mine, sizeof mine, all), DIST_ERR_TIMEOUT);
  CU_ASSERT(strstr(dist_last_error(), "second: not attempted, an earlier exchange failed: first: rank 1") != NULL);
  ASSERT_STATUS(dist__rdzv_broadcast(r, "third", 1, &mine, sizeof mine), DIST_ERR_TIMEOUT);
  ASSERT_STATUS(dist__rdzv_barrier(r, "fourth"), DIST_ERR_TIMEOUT);
  ASSERT_STATUS(dist__rdzv_still_there(r, "fifth"), DIST_ERR_TIMEOUT);
  CU_ASSERT(dist__net_now() - t0 < 0.2);
  dist__rdzv_close(r, 0);
}

typedef struct quitter {
  dist__rdzv *r1;
  char key[256];
} quitter;

static void *rank1_gives_up(void *arg) {
  quitter *q = arg;
  usleep(200000);
  dist__rdzv_give_up_on(q->r1, q->key, DIST_ERR_NO_MEMORY, "injected: out of memory");
  return NULL;
}

/* The code of a gave-up message: "[code] text" gives that code (an error of
 * distmgr's) and the text alone; anything else from the network, the
 * value as it came with DIST_ERR_ABORTED. */
static void test_give_up_codes(void) {
  dist__store_server *s = start(DIST__STORE_TORCH22, 30, 64);
  dist__store_client *c = client(s, DIST__STORE_TORCH22);
  if (!s || !c) return;
  struct {
    const char *value, *message;
    dist_status code;
  } cases[] = {
      {"[-15] rank 1 of 2 gave up: boom", "rank 1 of 2 gave up: boom", DIST_ERR_NO_MEMORY},
      {"[-19] rank 1 of 2 gave up: late", "rank 1 of 2 gave up: late", DIST_ERR_TIMEOUT},
      {"[5] five", "[5] five", DIST_ERR_ABORTED},             /* not an error code */
      {"[0] zero", "[0] zero", DIST_ERR_ABORTED},             /* success is no give-up's code */
      {"[-999] far", "[-999] far", DIST_ERR_ABORTED},         /* no such code */
      {"[-15]tight", "[-15]tight", DIST_ERR_ABORTED},         /* no blank after the tag */
      {"[-15", "[-15", DIST_ERR_ABORTED},                     /* cut short */
      {"[] empty", "[] empty", DIST_ERR_ABORTED},
      {"[-99999999999999999999] big", "[-99999999999999999999] big", DIST_ERR_ABORTED},
  };
  const char *keys[] = {"/never"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char key[32];
    snprintf(key, sizeof key, "/gave_up/%zu", i);
    ASSERT_OK(dist__store_set(c, key, cases[i].value, strlen(cases[i].value)));
    dist__store_watch(c, 0, key);
    ASSERT_STATUS(dist__store_wait(c, keys, 1, 5.0), cases[i].code);
    CU_ASSERT_STRING_EQUAL(dist_last_error(), cases[i].message);
    if (strcmp(dist_last_error(), cases[i].message)) fprintf(stderr, "case %zu: %s\n", i, dist_last_error());
  }
  dist__store_watch(c, 0, NULL);
  dist__store_close(c);
  dist__store_server_stop(s);
}

/* Rank 1 of 2 gives up while rank 0 waits for it in an exchange: rank 0's
 * exchange ends at once (not at its 20 s limit) with rank 1's message, and
 * later ones fail at once. (Both ranks in this process: each open gets a key
 * prefix of its own, so rank 1 says it on rank 0's key.) */
static void test_rdzv_give_up(void) {
  int fd = -1, port = 0;
  ASSERT_OK(dist__net_listen(0, &fd, &port));
  close(fd);
  dist_launch l0 = {.method = DIST_LAUNCH_ENV, .rank = 0, .size = 2, .master_addr = "127.0.0.1", .master_port = port};
  dist_launch l1 = l0;
  l1.rank = 1;
  const char *env[] = {NULL};
  dist__rdzv *r0 = NULL, *r1 = NULL;
  ASSERT_OK(dist__rdzv_open(&l0, env, 20.0, &r0));
  ASSERT_OK(dist__rdzv_open(&l1, env, 20.0, &r1));
  if (!r0 || !r1) return;
  quitter q = {r1, ""};
  snprintf(q.key, sizeof q.key, "%sgave_up", dist__rdzv_prefix(r0));
  pthread_t t;
  pthread_create(&t, NULL, rank1_gives_up, &q);
  int64_t mine = 7, all[2];
  double t0 = dist__net_now();
  ASSERT_STATUS(dist__rdzv_all_gather(r0, "first", &mine, sizeof mine, all), DIST_ERR_NO_MEMORY); /* rank 1's code */
  CU_ASSERT(dist__net_now() - t0 < 3.0);
  ASSERT_MSG_HAS("first: rank 1 of 2 gave up: injected: out of memory");
  pthread_join(t, NULL);
  t0 = dist__net_now();
  ASSERT_STATUS(dist__rdzv_barrier(r0, "second"), DIST_ERR_NO_MEMORY);
  ASSERT_MSG_HAS("second: not attempted, an earlier exchange failed: first: rank 1 of 2 gave up");
  CU_ASSERT(dist__net_now() - t0 < 0.2);
  dist__rdzv_close(r1, 0);
  dist__rdzv_close(r0, 0);
}

static CU_TestInfo tests[] = {
    {"dialect names and opcodes", test_dialect_names},
    {"rendezvous plan: who serves, which dialect", test_plan},
    {"every request, every dialect", test_requests},
    {"WAIT, and a WAIT that times out", test_wait},
    {"bad peers are dropped", test_bad_peers},
    {"VALIDATE first (torch >= 2.2)", test_validate},
    {"connection limit", test_connection_limit},
    {"client errors", test_client_errors},
    {"probing a port accepts no connection", test_port_probe},
    {"after a rank did not arrive, later exchanges fail at once", test_rdzv_gone},
    {"a watched key ends a wait", test_watch},
    {"a rank that gives up ends the others' exchange at once", test_rdzv_give_up},
    {"a give-up's code, and values that carry none", test_give_up_codes},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {{"store", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) {
  /* The server's "dropped the connection" lines below are expected. */
  return cunit_run(suites, "test_store", 0) != 0;
}
