/* TCP plumbing of the store (net.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/net.h"

double dist__net_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void dist__net_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int one = 1; /* requests are small: no Nagle delay */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void dist__net_peer_name(const struct sockaddr_storage *a, char *out, size_t n) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
  } else if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
  }
  snprintf(out, n, "%s port %d", host, port);
}

/* One socket of `family` bound to `port`, listening if `listening`; -1 and
 * errno on failure. */
static int bind_on(int family, int port, int listening) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage a;
  memset(&a, 0, sizeof a);
  socklen_t al;
  if (family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); /* IPv4 peers too */
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_any;
    v6->sin6_port = htons((uint16_t)port);
    al = sizeof *v6;
  } else {
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    v4->sin_port = htons((uint16_t)port);
    al = sizeof *v4;
  }
  if (bind(fd, (struct sockaddr *)&a, al) || (listening && listen(fd, 1024))) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

dist_status dist__net_listen(int port, int *fd, int *bound) {
  *fd = bind_on(AF_INET6, port, 1);
  if (*fd < 0 && errno != EADDRINUSE) *fd = bind_on(AF_INET, port, 1); /* a host without IPv6 */
  if (*fd < 0)
    return dist__error(DIST_ERR_IO, "store: cannot listen on port %d: %s%s", port, strerror(errno),
                       errno == EADDRINUSE ? " (another process holds it: torchrun's agent store, an earlier job, or a PyTorch program of this job serving "
                                              "its own store, which DIST_STORE_SERVER=external makes distmgr use)"
                                           : "");
  struct sockaddr_storage a;
  socklen_t al = sizeof a;
  getsockname(*fd, (struct sockaddr *)&a, &al);
  *bound = ntohs(a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port : ((struct sockaddr_in *)&a)->sin_port);
  dist__net_nonblocking(*fd);
  return DIST_SUCCESS;
}

/* bind() alone meets a listener's EADDRINUSE (SO_REUSEADDR does not lift
 * that); listening too would, for a moment, accept a rank that is
 * reconnecting, and reset it on close. */
int dist__net_port_taken(int port) {
  int fd = bind_on(AF_INET6, port, 0);
  if (fd < 0 && errno != EADDRINUSE) fd = bind_on(AF_INET, port, 0);
  if (fd >= 0) close(fd);
  return fd < 0 && errno == EADDRINUSE;
}

/* Wait until fd is ready for `events` or the deadline: 1 ready, 0 timed out, -1 error. */
static int ready(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - dist__net_now();
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

/* One non-blocking connect attempt to `ai`: 0 connected, else errno. */
static int attempt(const struct addrinfo *ai, double deadline, int *fd) {
  *fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (*fd < 0) return errno;
  dist__net_nonblocking(*fd);
  int e = 0;
  if (connect(*fd, ai->ai_addr, ai->ai_addrlen)) {
    e = errno;
    if (e == EINPROGRESS) {
      socklen_t el = sizeof e;
      e = ready(*fd, POLLOUT, deadline) > 0 ? (getsockopt(*fd, SOL_SOCKET, SO_ERROR, &e, &el) ? errno : e) : ETIMEDOUT;
    }
  }
  if (e) close(*fd), *fd = -1;
  return e;
}

dist_status dist__net_connect(const char *host, int port, double deadline, int *fd) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints, *list = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host, service, &hints, &list);
  if (gai)
    return dist__error(DIST_ERR_ENVIRONMENT, "store: cannot resolve '%s' (MASTER_ADDR?): %s", host, gai_strerror(gai));
  int last = 0;
  long pause_us = 10000;
  for (;;) {
    for (const struct addrinfo *ai = list; ai; ai = ai->ai_next)
      if (!(last = attempt(ai, deadline, fd))) {
        freeaddrinfo(list);
        return DIST_SUCCESS;
      }
    double left = deadline - dist__net_now();
    if (left <= 0) break;
    /* The server may not be up yet: try again, a little slower each time. */
    struct timespec ts = {0, (left * 1e6 < pause_us ? (long)(left * 1e6) : pause_us) * 1000};
    nanosleep(&ts, NULL);
    if (pause_us < 200000) pause_us *= 2;
  }
  freeaddrinfo(list);
  return dist__error(DIST_ERR_TIMEOUT, "store: no store answered at %s port %d in time (last attempt: %s)", host, port,
                     strerror(last));
}

dist_status dist__net_send(int fd, const void *p, size_t n, double deadline, const char *what, const char *where) {
  const char *b = p;
  while (n) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k > 0) {
      b += k, n -= (size_t)k;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return dist__error(DIST_ERR_IO, "store at %s: sending %s: %s", where, what, strerror(errno));
    if (!ready(fd, POLLOUT, deadline))
      return dist__error(DIST_ERR_TIMEOUT, "store at %s: sending %s did not finish in time", where, what);
  }
  return DIST_SUCCESS;
}

dist_status dist__net_recv(int fd, void *p, size_t n, double deadline, const char *what, const char *where) {
  char *b = p;
  while (n) {
    ssize_t k = recv(fd, b, n, 0);
    if (k > 0) {
      b += k, n -= (size_t)k;
      continue;
    }
    if (k == 0) return dist__error(DIST_ERR_IO, "store at %s closed the connection before %s", where, what);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return dist__error(DIST_ERR_IO, "store at %s: receiving %s: %s", where, what, strerror(errno));
    int r = ready(fd, POLLIN, deadline);
    if (r == 0) return dist__error(DIST_ERR_TIMEOUT, "store at %s: no %s in time", where, what);
    if (r < 0) return dist__error(DIST_ERR_IO, "store at %s: poll: %s", where, strerror(errno));
  }
  return DIST_SUCCESS;
}
