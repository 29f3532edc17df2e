/* netrelay -- a link with delay (and optional rate) between two TAP devices.
 *
 * tests/two-nodes.sh uses it where the kernel has no netem: the two simulated
 * nodes are joined by two TAP devices instead of a veth, and this program moves
 * each Ethernet frame from one to the other after a fixed one-way delay, as a
 * cable plus switch would. With a rate, a frame also waits for the link to be
 * free and for its own serialisation time, so the link behaves like a NIC of
 * that speed with a bounded transmit queue (backpressure, then the kernel's
 * own queue drops, as with tbf).
 *
 *   netrelay [--daemon] --delay-us D [--rate-mbit R] [--queue-us Q] TAP0 TAP1
 *
 * The TAP devices are created (not persistent: they vanish when this process
 * ends) in the caller's network namespace; the caller moves one to the other
 * namespace and configures addresses. With --daemon the command returns once
 * both devices exist and the relay keeps running in the background, until
 * SIGTERM/SIGINT, or until a device goes away (its namespace deleted). It
 * asks for SCHED_FIFO so that ranks spinning in MPI do not add scheduling
 * delay to the link (a warning if it cannot); so it must never spin.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME 65550      /* largest TAP MTU plus the Ethernet header */
#define SLOTS 2048           /* frames in flight per direction */

struct frame {
    int64_t due_ns;          /* when it leaves the far end of the link */
    int len;
    unsigned char *data;
};

/* One direction of the link: frames read from `in`, written to `out` when due. */
struct lane {
    int in, out;
    struct frame q[SLOTS];
    int head, count;
    int64_t link_free_ns;    /* when the sender's serialiser is idle again */
    uint64_t frames, bytes, dropped;
};

static volatile sig_atomic_t stop;
static int gone; /* a device failed: stop, never spin (we run SCHED_FIFO) */
static int hiccup; /* a device reported an error but still exists: pause, then go on */

/* An error from a device that still exists is passing: moving the second TAP
 * device into the other namespace, or bringing a link up, can make it report
 * one (a loaded CI pass saw the relay stop there, and both devices vanish
 * with it). Gone only when the kernel has detached it (namespace deleted). */
static void device_error(int fd)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    if (ioctl(fd, TUNGETIFF, &ifr) < 0)
        gone = 1;
    else
        hiccup = 1;
}
static void on_signal(int sig) { (void)sig; stop = 1; }

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int tap_open(const char *name)
{
    struct ifreq ifr;
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "netrelay: cannot open /dev/net/tun: %s\n", strerror(errno));
        return -1;
    }
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (strlen(name) >= IFNAMSIZ) {
        fprintf(stderr, "netrelay: interface name '%s' is longer than %d\n", name, IFNAMSIZ - 1);
        close(fd);
        return -1;
    }
    strcpy(ifr.ifr_name, name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        fprintf(stderr, "netrelay: cannot create TAP device '%s': %s\n", name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads what `in` has while the queue (and, with a rate, the backlog) has room. */
static void lane_read(struct lane *l, int64_t delay_ns, double ns_per_byte, int64_t queue_ns)
{
    while (l->count < SLOTS) {
        int64_t now = now_ns();
        if (ns_per_byte > 0 && l->link_free_ns - now > queue_ns)
            return; /* the transmit queue is full: leave the rest in the kernel */
        struct frame *f = &l->q[(l->head + l->count) % SLOTS];
        ssize_t n = read(l->in, f->data, MAX_FRAME);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            device_error(l->in);
        if (n <= 0)
            return; /* EAGAIN: nothing more now */
        int64_t leave = now;
        if (ns_per_byte > 0) {
            /* 24 bytes of preamble, FCS and gap per frame on the wire */
            int64_t start = l->link_free_ns > now ? l->link_free_ns : now;
            leave = start + (int64_t)((double)(n + 24) * ns_per_byte);
            l->link_free_ns = leave;
        }
        f->len = (int)n;
        f->due_ns = leave + delay_ns;
        l->count++;
    }
}

/* Writes every due frame; returns ns until the next one is due (-1: none). */
static int64_t lane_write(struct lane *l)
{
    while (l->count > 0) {
        struct frame *f = &l->q[l->head];
        int64_t wait = f->due_ns - now_ns();
        if (wait > 0)
            return wait;
        ssize_t n = write(l->out, f->data, (size_t)f->len);
        if (n < 0 && errno == EAGAIN)
            return 20000; /* the far end is busy: try again shortly */
        if (n < 0 && errno != EINTR && errno != ENOBUFS && errno != ENOMEM)
            device_error(l->out);
        if (n < 0)
            l->dropped++;
        else {
            l->frames++;
            l->bytes += (uint64_t)n;
        }
        l->head = (l->head + 1) % SLOTS;
        l->count--;
    }
    return -1;
}

static int parse_num(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "netrelay: %s '%s' must be a number >= 0\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: netrelay [--daemon] --delay-us D [--rate-mbit R] [--queue-us Q] TAP0 TAP1\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double delay_us = -1, rate_mbit = 0, queue_us = 5000;
    int daemon_mode = 0, i;
    const char *names[2] = {NULL, NULL};
    int nnames = 0;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--daemon"))
            daemon_mode = 1;
        else if (!strcmp(argv[i], "--delay-us") && i + 1 < argc) {
            if (parse_num("--delay-us", argv[++i], &delay_us)) return 2;
        } else if (!strcmp(argv[i], "--rate-mbit") && i + 1 < argc) {
            if (parse_num("--rate-mbit", argv[++i], &rate_mbit)) return 2;
        } else if (!strcmp(argv[i], "--queue-us") && i + 1 < argc) {
            if (parse_num("--queue-us", argv[++i], &queue_us)) return 2;
        } else if (argv[i][0] == '-' || nnames == 2)
            usage();
        else
            names[nnames++] = argv[i];
    }
    if (nnames != 2 || delay_us < 0)
        usage();

    int fd0 = tap_open(names[0]);
    int fd1 = fd0 < 0 ? -1 : tap_open(names[1]);
    if (fd1 < 0)
        return 1;

    static struct lane lanes[2];
    lanes[0].in = fd0; lanes[0].out = fd1;
    lanes[1].in = fd1; lanes[1].out = fd0;
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < SLOTS; s++)
            if (!(lanes[l].q[s].data = malloc(MAX_FRAME))) {
                fprintf(stderr, "netrelay: out of memory for the frame queues\n");
                return 1;
            }

    struct sched_param sp = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
        fprintf(stderr, "netrelay: warning: no SCHED_FIFO (%s): delays may grow under load\n",
                strerror(errno));
    prctl(PR_SET_TIMERSLACK, 1UL);

    if (daemon_mode) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "netrelay: fork failed: %s\n", strerror(errno));
            return 1;
        }
        if (pid > 0)
            return 0; /* the devices exist; the child relays */
        setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0); dup2(null, 1); dup2(null, 2);
            if (null > 2) close(null);
        }
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);

    const int64_t delay_ns = (int64_t)(delay_us * 1000.0);
    const double ns_per_byte = rate_mbit > 0 ? 8000.0 / rate_mbit : 0;
    const int64_t queue_ns = (int64_t)(queue_us * 1000.0);
    while (!stop) {
        int64_t next = -1;
        struct pollfd p[2];
        for (int l = 0; l < 2; l++) {
            int64_t w = lane_write(&lanes[l]);
            if (w >= 0 && (next < 0 || w < next))
                next = w;
            p[l].fd = lanes[l].in;
            p[l].events = 0;
            int full = lanes[l].count == SLOTS ||
                       (ns_per_byte > 0 && lanes[l].link_free_ns - now_ns() > queue_ns);
            if (!full)
                p[l].events = POLLIN;
            else if (ns_per_byte > 0 && lanes[l].count < SLOTS) {
                /* wake when the transmit queue has drained below its limit */
                int64_t w2 = lanes[l].link_free_ns - queue_ns - now_ns();
                if (w2 < 0) w2 = 0;
                if (next < 0 || w2 < next) next = w2;
            }
        }
        struct timespec ts, *tp = NULL;
        if (next >= 0) {
            ts.tv_sec = next / 1000000000;
            ts.tv_nsec = next % 1000000000;
            tp = &ts;
        }
        int r = ppoll(p, 2, tp, NULL);
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "netrelay: poll failed: %s\n", strerror(errno));
            return 1;
        }
        for (int l = 0; l < 2; l++) {
            if (p[l].revents & POLLNVAL)
                gone = 1;
            else if (p[l].revents & (POLLERR | POLLHUP))
                device_error(p[l].fd);
            else if (p[l].revents & POLLIN)
                lane_read(&lanes[l], delay_ns, ns_per_byte, queue_ns);
        }
        if (gone) {
            fprintf(stderr, "netrelay: a TAP device went away: stopping\n");
            return 1;
        }
        if (hiccup) { /* never spin on an error that lasts */
            hiccup = 0;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    }
    return 0;
}
