/* TCP sockets for the store: listening, connecting with a deadline, and
 * blocking sends and receives bounded by a deadline (poll). */
#ifndef DISTMGR_STORE_NET_H
#define DISTMGR_STORE_NET_H

#include <stddef.h>
#include <sys/socket.h>

#include "core/internal.h"

/* Seconds on a monotonic clock. */
double dist__net_now(void);
/* Every interface (IPv6 and IPv4 where the host has both), `port` (0: any
 * free one); *fd non-blocking, *bound the port it got. */
dist_status dist__net_listen(int port, int *fd, int *bound);
/* 1 when another socket listens on `port` here (binding it fails with EADDRINUSE). */
int dist__net_port_taken(int port);
void dist__net_nonblocking(int fd);
void dist__net_peer_name(const struct sockaddr_storage *a, char *out, size_t n);
/* Connect to host:port, retrying refused or unreachable attempts until the
 * deadline; the error names host, port and the last failure. */
dist_status dist__net_connect(const char *host, int port, double deadline, int *fd);
/* All n bytes, or DIST_ERR_TIMEOUT / DIST_ERR_IO naming `what` and `where`. */
dist_status dist__net_send(int fd, const void *p, size_t n, double deadline, const char *what, const char *where);
dist_status dist__net_recv(int fd, void *p, size_t n, double deadline, const char *what, const char *where);

#endif
