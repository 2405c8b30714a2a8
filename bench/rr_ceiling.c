/*
 * rr_ceiling: the kernel's request/response ceiling on this machine, for mx's
 * benchmarks to be measured against (paired-bench.md: a baseline in the same run).
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
 *   rr_ceiling <my-ip> <my-port> <peer-ip> <peer-port> <seconds> [size]
 *
 * prints: round_trips_per_second=<n> (replies received per second)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s my-ip my-port peer-ip peer-port seconds [size]\n", argv[0]);
        return 2;
    }
    int size = argc > 6 ? atoi(argv[6]) : 64;
    double seconds = atof(argv[5]);
    int server = udp_socket(argv[1], atoi(argv[2]));
    int client = udp_socket(argv[1], 0);
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[4]))};
    inet_pton(AF_INET, argv[3], &peer.sin_addr);
    if (connect(client, (struct sockaddr *)&peer, sizeof peer) != 0) {
        perror("connect");
        return 2;
    }

    static char out[BATCH][MAXSIZE], in[BATCH][MAXSIZE];
    static struct sockaddr_in from[BATCH];
    struct iovec out_iov[BATCH], in_iov[BATCH];
    struct mmsghdr out_msg[BATCH], in_msg[BATCH];
    memset(out_msg, 0, sizeof out_msg);
    memset(in_msg, 0, sizeof in_msg);
    for (int i = 0; i < BATCH; i++) {
        out_iov[i] = (struct iovec){out[i], size};
        out_msg[i].msg_hdr.msg_iov = &out_iov[i];
        out_msg[i].msg_hdr.msg_iovlen = 1;
        in_iov[i] = (struct iovec){in[i], MAXSIZE};
        in_msg[i].msg_hdr.msg_iov = &in_iov[i];
        in_msg[i].msg_hdr.msg_iovlen = 1;
    }

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
            for (int i = 0; i < BATCH; i++) out_msg[i].msg_hdr.msg_name = NULL, out_msg[i].msg_hdr.msg_namelen = 0;
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
