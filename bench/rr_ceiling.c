/*
 * rr_ceiling: the kernel's request/response ceiling on this machine, for mx's
 * benchmarks to be measured against (a baseline measured in the same run).
 *
 * One process per peer, one thread each, doing exactly the work of an mx agent
 * with one worker and one unpaced flow, and nothing else: it sends 64-byte
 * requests to the other peer in batches (sendmmsg on a connected socket),
 * answers the other peer's requests in batches (recvmmsg + sendmmsg on its
 * server socket), and counts the replies to its own requests (recvmmsg). No
 * pacing, no timing of individual packets, no reports: the floor of the cost.
 * At most WINDOW requests are outstanding, so queues never overflow and
 * nothing is lost.
 *
 *   rr_ceiling <my-ip> <my-port> <peer-ip> <peer-port> <seconds> [size[/reply-size]]
 *              [gso | paced=<pps> [gso] [intervals]]
 *
 * With "gso", the same loop over the kernel's coalescing path: requests go 64
 * to a sendmsg as one UDP_SEGMENT super-datagram, both sockets read with
 * UDP_GRO, and each coalesced batch of requests is answered with one GSO
 * send: the minimal loop mx's default (GSO/GRO) mode is measured against.
 *
 * With "paced=<pps>", the minimal paced agent instead: requests to the peer at
 * <pps> (0: answer only) in batches of 2 ms of traffic (at 1,000 pps, 2 every
 * 2 ms: mx's pacer batches so), the thread asleep in epoll until the next
 * batch is due (its timeout in whole ms, rounded up, as mx's worker) or a
 * socket has something, then it sends what is due in one sendmmsg (with
 * "gso" after it: one UDP_SEGMENT send per 64, GRO reads, one GSO reply per
 * coalesced batch), answers and reads, until the sockets are empty. Its
 * bucket is mx's: a loop that wakes past the 5 ms it forgives loses what it
 * missed. With "intervals" after it, each second's requests sent, replies
 * read and worst lateness go to stderr: a paced ceiling searched on it holds
 * the rule mx's is searched by.
 * The floor of what an agent at a light load costs in CPU: measure the
 * process's CPU from outside (/proc/<pid>/stat).
 *
 * prints: round_trips_per_second=<n> (replies received per second)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define WINDOW 1024
#define MAXSIZE 65507

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int udp_socket(const char *ip, int port) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int on = 1, buf = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("bind");
        exit(2);
    }
    return fd;
}

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define GSO_SLOTS 16
#define GSO_WINDOW 8192

/* One GSO send of `count` datagrams of `size` bytes from `buf` to `to`. */
static int send_gso(int fd, char *buf, int size, int count, struct sockaddr_in *to) {
    struct iovec iov = {buf, (size_t)size * count};
    char control[CMSG_SPACE(sizeof(uint16_t))] = {0};
    struct msghdr msg = {.msg_name = to, .msg_namelen = to ? sizeof *to : 0, .msg_iov = &iov, .msg_iovlen = 1};
    if (count > 1) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        *(uint16_t *)CMSG_DATA(c) = size;
    }
    return sendmsg(fd, &msg, MSG_DONTWAIT) < 0 ? 0 : count;
}

/* Datagrams in received message `m`: its length over the GRO segment size. */
static int segments(struct mmsghdr *m) {
    int seg = m->msg_len;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m->msg_hdr); c; c = CMSG_NXTHDR(&m->msg_hdr, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) seg = *(int *)CMSG_DATA(c);
    return seg > 0 ? (m->msg_len + seg - 1) / seg : 1;
}

/* GSO sends of `count` datagrams of `size` bytes, as many per send as fit. */
static void send_gso_all(int fd, char *buf, int size, int count, struct sockaddr_in *to) {
    int most = 65507 / size < 64 ? 65507 / size : 64;
    while (count > 0) {
        int k = count < most ? count : most;
        send_gso(fd, buf, size, k, to);
        count -= k;
    }
}

static int gso_loop(int server, int client, int size, int reply_size, double seconds) {
    int on = 1;
    setsockopt(server, SOL_UDP, UDP_GRO, &on, sizeof on);
    setsockopt(client, SOL_UDP, UDP_GRO, &on, sizeof on);
    int per_send = 65507 / size < 64 ? 65507 / size : 64;
    static char out[65536], in[GSO_SLOTS][65536], control[GSO_SLOTS][64];
    static struct sockaddr_in from[GSO_SLOTS];
    struct iovec iov[GSO_SLOTS];
    struct mmsghdr msg[GSO_SLOTS];
    uint64_t outstanding = 0, replies = 0, replies_at_start = 0;
    double start = now(), measure_from = start + 0.5, end = start + seconds, last_reply = start;
    int started = 0;
    while (now() < end) {
        if (!started && now() >= measure_from) {
            started = 1;
            replies_at_start = replies;
            measure_from = now();
        }
        if (outstanding + per_send <= GSO_WINDOW) outstanding += send_gso(client, out, size, per_send, NULL);
        for (int pass = 0; pass < 2; pass++) {
            int fd = pass == 0 ? server : client;
            for (int i = 0; i < GSO_SLOTS; i++) {
                iov[i] = (struct iovec){in[i], sizeof in[i]};
                msg[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof from[i],
                                                 .msg_iov = &iov[i], .msg_iovlen = 1,
                                                 .msg_control = control[i], .msg_controllen = sizeof control[i]};
            }
            int n = recvmmsg(fd, msg, GSO_SLOTS, MSG_DONTWAIT, NULL);
            if (pass == 0) {
                /* Answer each coalesced batch with one GSO send to its sender. */
                for (int i = 0; i < n; i++) send_gso_all(server, out, reply_size, segments(&msg[i]), &from[i]);
            } else if (n > 0) {
                for (int i = 0; i < n; i++) {
                    int k = segments(&msg[i]);
                    replies += k;
                    outstanding -= (uint64_t)k > outstanding ? outstanding : (uint64_t)k;
                }
                last_reply = now();
            } else if ((n < 0 && errno == ECONNREFUSED) || now() - last_reply > 0.1) {
                outstanding = 0;
                last_reply = now();
            }
        }
    }
    printf("round_trips_per_second=%.0f\n", (replies - replies_at_start) / (now() - measure_from));
    return 0;
}

/* Points each of BATCH messages at its own buffer, `len` bytes, through `iov`. */
static void point_at(struct mmsghdr *msg, struct iovec *iov, char (*buf)[MAXSIZE], size_t len) {
    memset(msg, 0, BATCH * sizeof *msg);
    for (int i = 0; i < BATCH; i++) {
        iov[i] = (struct iovec){buf[i], len};
        msg[i].msg_hdr.msg_iov = &iov[i];
        msg[i].msg_hdr.msg_iovlen = 1;
    }
}

static int paced_loop(int server, int client, int size, int reply_size, double rate, int gso, int intervals,
                      double seconds) {
    static char out[BATCH][MAXSIZE], in[BATCH][MAXSIZE], control[BATCH][64];
    static struct sockaddr_in from[BATCH];
    struct iovec out_iov[BATCH], reply_iov[BATCH], in_iov[BATCH];
    struct mmsghdr out_msg[BATCH], reply_msg[BATCH], in_msg[BATCH];
    point_at(out_msg, out_iov, out, size);
    point_at(reply_msg, reply_iov, out, reply_size);
    point_at(in_msg, in_iov, in, MAXSIZE);
    int on = 1;
    if (gso) {
        setsockopt(server, SOL_UDP, UDP_GRO, &on, sizeof on);
        setsockopt(client, SOL_UDP, UDP_GRO, &on, sizeof on);
    }
    /* Datagrams one send carries: a GSO send up to 64 (and 64 KiB), a sendmmsg BATCH. */
    int per_send = gso ? (65507 / size < 64 ? 65507 / size : 64) : BATCH;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = server};
    epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev);
    ev.data.fd = client;
    epoll_ctl(ep, EPOLL_CTL_ADD, client, &ev);
    uint64_t sent = 0, replies = 0;
    double batch = rate * 0.002 < 1 ? 1 : (double)(uint64_t)(rate * 0.002);
    /* The bucket mx's pacer keeps (src/agent/pacing.rs; the original tool's 5 ms bucket): tokens accrue at
     * the rate, capped at the batch, the 1 ms the epoll timeout rounds up to
     * and 5 ms of lateness (at least 2 packets). A loop that wakes later loses
     * what it missed, as mx's flows do, rather than bursting to catch up: so a
     * ceiling searched on this loop and one searched on mx hold the same rule. */
    double burst = batch + rate * 0.001 + (rate * 0.005 > 2 ? rate * 0.005 : 2);
    double tokens = 0;
    double start = now(), end = start + seconds, last = start;
    /* "intervals": each second from the start, on stderr, the requests sent
     * and replies read in it, and how late the loop came to a due batch at
     * worst (mx's host row's behind_ms). */
    uint64_t tick_sent = 0, tick_replies = 0;
    double behind = 0;
    int tick = 1;
    struct epoll_event ready[2];
    for (;;) {
        double t = now();
        if (t >= end) break;
        if (intervals && t >= start + tick) {
            fprintf(stderr, "interval=%d sent=%llu replies=%llu behind_ms=%.1f\n", tick,
                    (unsigned long long)tick_sent, (unsigned long long)tick_replies, behind * 1e3);
            tick_sent = tick_replies = 0;
            behind = 0;
            tick++;
        }
        if (rate > 0) {
            double due = tokens >= batch ? last : last + (batch - tokens) / rate;
            if (t - due > behind) behind = t - due;
            tokens += (t - last) * rate;
            if (tokens > burst) tokens = burst;
            last = t;
            if (tokens >= batch) {
                /* At most mx's MAX_PER_PASS a pass (pacing.rs): then the sockets are read. */
                uint64_t n = tokens < 4096 ? (uint64_t)tokens : 4096;
                for (uint64_t done = 0; done < n;) {
                    int k = n - done < (uint64_t)per_send ? (int)(n - done) : per_send;
                    if (gso) {
                        send_gso(client, out[0], size, k, NULL);
                    } else {
                        int r = sendmmsg(client, out_msg, k, MSG_DONTWAIT);
                        (void)r;
                    }
                    done += k; /* a refused send is not retried: the replies say what came back */
                }
                tokens -= n;
                sent += n;
                tick_sent += n;
            }
        }
        double next = rate > 0 ? last + (tokens >= batch ? 0 : (batch - tokens) / rate) : end;
        if (next > end) next = end;
        if (intervals && next > start + tick) next = start + tick;
        int timeout = (int)((next - now()) * 1000.0 + 0.999);
        int n = epoll_wait(ep, ready, 2, timeout < 0 ? 0 : timeout);
        for (int e = 0; e < n; e++) {
            int fd = ready[e].data.fd;
            int got, reads = 0;
            /* Up to mx's MAX_READS_PER_PASS (16) reads a socket a pass (src/agent/worker/): then the sends that are due. */
            do {
                for (int i = 0; i < BATCH; i++) {
                    in_iov[i].iov_len = MAXSIZE;
                    in_msg[i].msg_hdr.msg_name = fd == server ? &from[i] : NULL;
                    in_msg[i].msg_hdr.msg_namelen = fd == server ? sizeof from[i] : 0;
                    in_msg[i].msg_hdr.msg_control = gso ? control[i] : NULL;
                    in_msg[i].msg_hdr.msg_controllen = gso ? sizeof control[i] : 0;
                }
                got = recvmmsg(fd, in_msg, gso ? GSO_SLOTS : BATCH, MSG_DONTWAIT, NULL);
                if (got <= 0) break;
                if (fd == client) {
                    for (int i = 0; i < got; i++) {
                        int k = gso ? segments(&in_msg[i]) : 1;
                        replies += k;
                        tick_replies += k;
                    }
                } else if (gso) {
                    for (int i = 0; i < got; i++) send_gso_all(server, out[0], reply_size, segments(&in_msg[i]), &from[i]);
                } else {
                    for (int i = 0; i < got; i++) {
                        reply_msg[i].msg_hdr.msg_name = &from[i];
                        reply_msg[i].msg_hdr.msg_namelen = sizeof from[i];
                    }
                    sendmmsg(server, reply_msg, got, MSG_DONTWAIT);
                }
            } while (got == (gso ? GSO_SLOTS : BATCH) && ++reads < 16);
        }
    }
    printf("round_trips_per_second=%.0f\n", replies / (now() - start));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s my-ip my-port peer-ip peer-port seconds [size]\n", argv[0]);
        return 2;
    }
    int size = argc > 6 ? atoi(argv[6]) : 64;
    const char *slash = argc > 6 ? strchr(argv[6], '/') : NULL;
    int reply_size = slash ? atoi(slash + 1) : size;
    double seconds = atof(argv[5]);
    int server = udp_socket(argv[1], atoi(argv[2]));
    int client = udp_socket(argv[1], 0);
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[4]))};
    inet_pton(AF_INET, argv[3], &peer.sin_addr);
    if (connect(client, (struct sockaddr *)&peer, sizeof peer) != 0) {
        perror("connect");
        return 2;
    }
    if (argc > 7 && strcmp(argv[7], "gso") == 0) return gso_loop(server, client, size, reply_size, seconds);
    if (argc > 7 && strncmp(argv[7], "paced=", 6) == 0) {
        int gso = 0, intervals = 0;
        for (int i = 8; i < argc; i++) {
            gso |= strcmp(argv[i], "gso") == 0;
            intervals |= strcmp(argv[i], "intervals") == 0;
        }
        return paced_loop(server, client, size, reply_size, atof(argv[7] + 6), gso, intervals, seconds);
    }

    static char out[BATCH][MAXSIZE], in[BATCH][MAXSIZE];
    static struct sockaddr_in from[BATCH];
    struct iovec out_iov[BATCH], reply_iov[BATCH], in_iov[BATCH];
    struct mmsghdr out_msg[BATCH], in_msg[BATCH];
    point_at(out_msg, out_iov, out, size);
    point_at(in_msg, in_iov, in, MAXSIZE);
    /* Replies go out of out_msg too, pointed at these. */
    for (int i = 0; i < BATCH; i++) reply_iov[i] = (struct iovec){out[i], reply_size};

    /* Wait for the peer: the first requests may hit a port not yet bound. */
    uint64_t outstanding = 0, replies = 0;
    double start = now(), measure_from = start + 0.5, end = start + seconds;
    uint64_t replies_at_start = 0;
    int started = 0;
    double last_reply = start;
    while (now() < end) {
        if (!started && now() >= measure_from) {
            started = 1;
            replies_at_start = replies;
            measure_from = now();
        }
        /* Requests, while the window allows. */
        if (outstanding + BATCH <= WINDOW) {
            for (int i = 0; i < BATCH; i++) {
                out_msg[i].msg_hdr.msg_name = NULL, out_msg[i].msg_hdr.msg_namelen = 0;
                out_msg[i].msg_hdr.msg_iov = &out_iov[i];
            }
            int n = sendmmsg(client, out_msg, BATCH, MSG_DONTWAIT);
            if (n > 0) outstanding += n;
        }
        /* Answer the peer's requests. */
        for (int i = 0; i < BATCH; i++) {
            in_iov[i].iov_len = MAXSIZE;
            in_msg[i].msg_hdr.msg_name = &from[i];
            in_msg[i].msg_hdr.msg_namelen = sizeof from[i];
        }
        int n = recvmmsg(server, in_msg, BATCH, MSG_DONTWAIT, NULL);
        if (n > 0) {
            for (int i = 0; i < n; i++) {
                out_msg[i].msg_hdr.msg_name = &from[i];
                out_msg[i].msg_hdr.msg_namelen = sizeof from[i];
                out_msg[i].msg_hdr.msg_iov = &reply_iov[i];
            }
            sendmmsg(server, out_msg, n, MSG_DONTWAIT);
        }
        /* Replies to ours. */
        for (int i = 0; i < BATCH; i++) {
            in_iov[i].iov_len = MAXSIZE;
            in_msg[i].msg_hdr.msg_name = NULL;
            in_msg[i].msg_hdr.msg_namelen = 0;
        }
        n = recvmmsg(client, in_msg, BATCH, MSG_DONTWAIT, NULL);
        if (n > 0) {
            replies += n;
            outstanding -= (uint64_t)n > outstanding ? outstanding : (uint64_t)n;
            last_reply = now();
        } else if ((n < 0 && errno == ECONNREFUSED) || now() - last_reply > 0.1) {
            /* Requests lost before the peer bound its port would hold the
               window shut forever: those are gone, reopen it. */
            outstanding = 0;
            last_reply = now();
        }
    }
    double elapsed = now() - measure_from;
    printf("round_trips_per_second=%.0f\n", (replies - replies_at_start) / elapsed);
    return 0;
}
