/* A key-value store that speaks c10d's TCPStore protocol (wire.h): the
 * rendezvous of launches without MPI (torchrun). The server runs in its own
 * thread and is exposed to the network, so it bounds what peers may send and
 * drops, with a log line, a peer that sends garbage, too much, or stalls in
 * the middle of a request. The client blocks with a deadline on every call. */
#ifndef DISTMGR_STORE_H
#define DISTMGR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "store/wire.h"

typedef struct dist__store_server dist__store_server;

typedef struct dist__store_server_options {
  dist__store_dialect dialect;
  dist__store_limits limits;
  size_t request_max;  /* bytes of one request (a MULTI_SET of many values) */
  int max_conns;       /* connections beyond this are closed at once */
  double stall;        /* seconds a peer may leave a request half sent */
} dist__store_server_options;
#define DIST__STORE_SERVER_OPTIONS_DEFAULT \
  {DIST__STORE_TORCH22, DIST__STORE_LIMITS_DEFAULT, (size_t)16 << 20, 4096, 30.0}

/* Listen on every interface at `port` (0: a free port, read it back with
 * _port) and serve until stopped. */
dist_status dist__store_server_start(int port, const dist__store_server_options *o, dist__store_server **out);
int dist__store_server_port(const dist__store_server *s);
/* Peers dropped so far (garbage, limits, stalls, over the connection limit). */
long dist__store_server_dropped(const dist__store_server *s);
void dist__store_server_stop(dist__store_server *s);

typedef struct dist__store_client dist__store_client;

/* Connect to host:port, retrying until `timeout` seconds have passed (the
 * server may not be up yet); `timeout` is also every later call's deadline
 * unless the call takes its own. */
dist_status dist__store_connect(const char *host, int port, dist__store_dialect d, double timeout,
                                dist__store_client **out);
void dist__store_close(dist__store_client *c);
/* Wait, at most `timeout` seconds, until the server closes this connection
 * (stops serving): 0 when it did. */
int dist__store_wait_closed(dist__store_client *c, double timeout);
/* This end's IP address on the connection to the store (dotted or IPv6
 * text): an address the store's host routes to. 0 on success. */
int dist__store_local_addr(const dist__store_client *c, char *out, size_t n);

dist_status dist__store_set(dist__store_client *c, const char *key, const void *value, size_t len);
/* Waits until the key exists (as torch's client: WAIT, then GET); *value is
 * malloc'd (free it), NUL-terminated beyond len. */
dist_status dist__store_get(dist__store_client *c, const char *key, double timeout, uint8_t **value, size_t *len);
dist_status dist__store_add(dist__store_client *c, const char *key, int64_t delta, int64_t *now);
/* Until every key exists; DIST_ERR_TIMEOUT after `timeout` seconds, naming
 * the keys still missing, and the client stays usable. */
dist_status dist__store_wait(dist__store_client *c, const char *const *keys, size_t n, double timeout);
/* From now on every wait on c (WAIT, and GET's wait) also ends, with the
 * key's value as its message, once `key` exists (the code a "[code] " tag
 * at its start names, dist__rdzv_give_up_on; else DIST_ERR_ABORTED)
 * (NULL or "": none in this slot). Such a wait runs in slices (50 ms,
 * doubling to 1 s) and checks for the keys between them: a rank that gave
 * up sets one, so that the others stop waiting for it (rendezvous.h). Slot
 * 0: the rendezvous' own; 1: the operation under way (a Gloo connect). */
#define DIST__STORE_WATCHES 2
void dist__store_watch(dist__store_client *c, int slot, const char *key);
/* The last wait on c (WAIT, or GET's) ended on a watched key (a rank gave up). */
int dist__store_saw_give_up(const dist__store_client *c);
/* The code of a gave-up message, "[code] text" (dist__rdzv_give_up_on);
 * *msg moves past the tag. From the network: anything else, or a code that
 * is no error of distmgr's, is DIST_ERR_ABORTED with the text as it came. */
dist_status dist__store_gave_up_code(const char **msg);
dist_status dist__store_check(dist__store_client *c, const char *const *keys, size_t n, int *all_exist);
/* missing[i] = 1 for each key that does not exist: one round trip, at most
 * 5 s (a store of another dialect says so in the error). */
dist_status dist__store_missing(dist__store_client *c, const char *const *keys, size_t n, int *missing);
/* Sets `desired` when the value is `expected` (or the key is absent and
 * `expected` empty); *current (malloc'd) is the value afterwards as the
 * server reports it. */
dist_status dist__store_compare_set(dist__store_client *c, const char *key, const void *expected, size_t elen,
                                    const void *desired, size_t dlen, uint8_t **current, size_t *clen);
dist_status dist__store_num_keys(dist__store_client *c, int64_t *n);
dist_status dist__store_delete(dist__store_client *c, const char *key, int *deleted);

#endif
