/* mpvlab-kping: kernel-stamped ICMP echo, the pre-check's RTT of a path as the kernel sees it.
 *
 *   mpvlab-kping --pair SRC,DST,OUT_CSV [--pair ...] --count N --interval-ms I
 *                [--tail-s S] [--wait-for-go]
 *
 * The C form of what mpvlab/runner/kping.py did (issue 36: a Python interpreter's start was ~50 ms
 * of CPU of every run's fixed cost); the same packets, stamps and CSV. Run inside the client's
 * namespace; the far end is the server's kernel answering echo requests. Both stamps are the
 * kernel's own (SO_TIMESTAMPING, software): the send stamp when the request leaves through the
 * device, the receive stamp when the reply enters the stack, so this program's scheduling delays do
 * not enter the RTT.
 *
 * CSV per pair: seq,t_send_ns,rtt_ns,user_rtt_ns — t_send_ns on CLOCK_MONOTONIC (the kernel's
 * CLOCK_REALTIME stamps converted with an offset read once, bracketed to a few µs); rtt_ns = -1 for
 * a lost probe; user_rtt_ns is what a userspace stamp (monotonic before send, after recv) would have
 * read, kept so a reader sees the noise the kernel stamps remove.
 *
 * --wait-for-go: set up (sockets bound), then start on a line from stdin; end of input before it
 * means the caller went away: exit 0 without sending and without writing anything. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ICMP_ECHO 8
#define ICMP_ECHOREPLY 0
#define PAYLOAD 56 /* ping's default: 84-byte IP packets */
#define MAX_PAIRS 16
#define MAX_COUNT 1000000

struct pair {
    struct sockaddr_in dst;
    const char *out;
    uint16_t ident;
    int fd;
    int64_t *tx, *rx, *user_tx, *user_rx; /* per seq; -1: none */
    long n_tx, n_rx;
};

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of 20 brackets (a few µs). */
static int64_t realtime_offset_ns(void)
{
    int64_t best_w = -1, best = 0;
    for (int i = 0; i < 20; i++) {
        int64_t a = mono_ns(), r = real_ns(), b = mono_ns();
        if (best_w < 0 || b - a < best_w) {
            best_w = b - a;
            best = r - (a + b) / 2;
        }
    }
    return best;
}

static uint16_t checksum(const uint8_t *p, size_t n) /* RFC 1071, as mpvlab/core/icmp.py */
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    if (n % 2)
        s += (uint32_t)p[n - 1] << 8;
    s = (s >> 16) + (s & 0xFFFF);
    s += s >> 16;
    return (uint16_t)(~s & 0xFFFF);
}

static size_t echo(uint8_t *b, uint16_t ident, uint64_t seq)
{
    b[0] = ICMP_ECHO;
    b[1] = 0;
    b[2] = b[3] = 0;
    b[4] = ident >> 8;
    b[5] = ident & 0xFF;
    b[6] = (seq >> 8) & 0xFF;
    b[7] = seq & 0xFF;
    for (int i = 0; i < 8; i++) /* the body: seq as a big-endian u64, then 0xa5 */
        b[8 + i] = (uint8_t)(seq >> (56 - 8 * i));
    memset(b + 16, 0xa5, PAYLOAD - 8);
    uint16_t c = checksum(b, 8 + PAYLOAD);
    b[2] = c >> 8;
    b[3] = c & 0xFF;
    return 8 + PAYLOAD;
}

static int64_t ts_from_cmsg(struct msghdr *m)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(c), sizeof t); /* ts[0]: the software stamp */
            if (t.tv_sec || t.tv_nsec)
                return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
        }
    }
    return -1;
}

static long ee_data(struct msghdr *m)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct sock_extended_err))) {
            struct sock_extended_err e;
            memcpy(&e, CMSG_DATA(c), sizeof e);
            return (long)e.ee_data; /* with OPT_ID: the index of the send, our seq */
        }
    }
    return -1;
}

static void drain(struct pair *p, long count)
{
    uint8_t buf[2048], ctl[1024];
    struct sockaddr_in from;
    struct iovec iov = {buf, sizeof buf};
    for (;;) { /* send stamps */
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
        iov.iov_len = 0;
        if (recvmsg(p->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            break;
        int64_t ts = ts_from_cmsg(&m);
        long n = ee_data(&m);
        if (ts >= 0 && n >= 0 && n < count && p->tx[n] < 0) {
            p->tx[n] = ts;
            p->n_tx++;
        }
    }
    for (;;) { /* replies */
        struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = ctl, .msg_controllen = sizeof ctl};
        iov.iov_len = sizeof buf;
        ssize_t len = recvmsg(p->fd, &m, MSG_DONTWAIT);
        if (len < 0)
            break;
        int64_t now = mono_ns();
        size_t ihl = (size_t)(buf[0] & 0x0F) * 4;
        if ((size_t)len < ihl + 16 || from.sin_addr.s_addr != p->dst.sin_addr.s_addr)
            continue;
        const uint8_t *ic = buf + ihl;
        if (ic[0] != ICMP_ECHOREPLY || ((uint16_t)(ic[4] << 8 | ic[5])) != p->ident)
            continue;
        uint64_t seq = 0;
        for (int i = 0; i < 8; i++)
            seq = seq << 8 | ic[8 + i];
        int64_t ts = ts_from_cmsg(&m);
        if (ts >= 0 && seq < (uint64_t)count && p->rx[seq] < 0) {
            p->rx[seq] = ts;
            p->user_rx[seq] = now;
            p->n_rx++;
        }
    }
}

static int write_csv(struct pair *p, long count, int64_t offset)
{
    FILE *f = fopen(p->out, "w");
    if (!f) {
        fprintf(stderr, "mpvlab-kping: cannot write %s: %s\n", p->out, strerror(errno));
        return -1;
    }
    fputs("seq,t_send_ns,rtt_ns,user_rtt_ns\n", f);
    for (long s = 0; s < count; s++) {
        int64_t tx = p->tx[s], rx = p->rx[s];
        int64_t t_send = tx >= 0 ? tx - offset : p->user_tx[s];
        int64_t rtt = (tx >= 0 && rx >= 0) ? rx - tx : -1;
        int64_t urtt = p->user_rx[s] >= 0 ? p->user_rx[s] - p->user_tx[s] : -1;
        fprintf(f, "%ld,%lld,%lld,%lld\n", s, (long long)t_send, (long long)rtt, (long long)urtt);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "mpvlab-kping: cannot write %s: %s\n", p->out, strerror(errno));
        return -1;
    }
    return 0;
}

static int usage(const char *why)
{
    fprintf(stderr, "mpvlab-kping: %s\nusage: mpvlab-kping --pair SRC,DST,OUT_CSV [--pair ...] --count N "
                    "--interval-ms I [--tail-s S] [--wait-for-go]\n", why);
    return 2;
}

static int open_pair(struct pair *p, char *spec, uint16_t ident, long count)
{
    char *src = spec, *dst = strchr(spec, ','), *out;
    if (!dst || !(out = strchr(dst + 1, ',')))
        return -1;
    *dst++ = 0;
    *out++ = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    p->dst = (struct sockaddr_in){.sin_family = AF_INET};
    if (inet_pton(AF_INET, src, &sa.sin_addr) != 1 || inet_pton(AF_INET, dst, &p->dst.sin_addr) != 1 || !*out)
        return -1;
    p->out = out;
    p->ident = ident;
    p->fd = socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_ICMP);
    if (p->fd < 0) {
        perror("mpvlab-kping: socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)");
        exit(1);
    }
    int flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
                SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    if (bind(p->fd, (struct sockaddr *)&sa, sizeof sa) < 0) { /* only replies to this path's address */
        fprintf(stderr, "mpvlab-kping: bind %s: %s\n", src, strerror(errno));
        exit(1);
    }
    if (setsockopt(p->fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) < 0) {
        perror("mpvlab-kping: setsockopt(SO_TIMESTAMPING)");
        exit(1);
    }
    int64_t **arrays[] = {&p->tx, &p->rx, &p->user_tx, &p->user_rx};
    for (int i = 0; i < 4; i++) {
        *arrays[i] = malloc(sizeof(int64_t) * (size_t)count);
        if (!*arrays[i]) {
            fputs("mpvlab-kping: out of memory\n", stderr);
            exit(1);
        }
        for (long s = 0; s < count; s++)
            (*arrays[i])[s] = -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char *specs[MAX_PAIRS];
    int n_pairs = 0, wait_for_go = 0;
    long count = -1;
    double interval_ms = -1, tail_s = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--wait-for-go")) {
            wait_for_go = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage("an option lacks its value");
        char *v = argv[++i], *end;
        if (!strcmp(a, "--pair")) {
            if (n_pairs == MAX_PAIRS)
                return usage("too many --pair");
            specs[n_pairs++] = v;
        } else if (!strcmp(a, "--count")) {
            count = strtol(v, &end, 10);
            if (*end || count < 0 || count > MAX_COUNT)
                return usage("--count: a whole number 0..1000000");
        } else if (!strcmp(a, "--interval-ms")) {
            interval_ms = strtod(v, &end);
            if (*end || !(interval_ms > 0))
                return usage("--interval-ms: a positive number");
        } else if (!strcmp(a, "--tail-s")) {
            tail_s = strtod(v, &end);
            if (*end || !(tail_s >= 0))
                return usage("--tail-s: a number >= 0");
        } else {
            return usage("unknown option");
        }
    }
    if (!n_pairs || count < 0 || interval_ms < 0)
        return usage("--pair, --count and --interval-ms are required");
    struct pair ps[MAX_PAIRS] = {0};
    uint16_t base = getpid() & 0xFFFF;
    for (int i = 0; i < n_pairs; i++)
        if (open_pair(&ps[i], specs[i], (uint16_t)(base + i), count) < 0)
            return usage("--pair is SRC,DST,OUT_CSV with IPv4 addresses");
    int64_t offset = realtime_offset_ns();
    if (wait_for_go) {
        char line[64];
        if (!fgets(line, sizeof line, stdin))
            return 0; /* the caller went away before the check began: nothing to measure */
    }
    int64_t step = (int64_t)(interval_ms * 1e6);
    int64_t t_next = mono_ns();
    int64_t end = t_next + count * step + (int64_t)(tail_s * 1e9);
    long seq = 0;
    struct pollfd fds[MAX_PAIRS];
    for (int i = 0; i < n_pairs; i++)
        fds[i] = (struct pollfd){.fd = ps[i].fd, .events = POLLIN | POLLERR};
    uint8_t pkt[8 + PAYLOAD];
    for (;;) {
        int64_t now = mono_ns();
        if (seq < count && now >= t_next) {
            for (int i = 0; i < n_pairs; i++) {
                size_t n = echo(pkt, ps[i].ident, (uint64_t)seq);
                ps[i].user_tx[seq] = mono_ns();
                /* A failed send ends the check, as the Python form's exception did: the n-th send
                 * stamp must be the n-th echo (OPT_ID), which a skipped send would shift. */
                if (sendto(ps[i].fd, pkt, n, 0, (struct sockaddr *)&ps[i].dst, sizeof ps[i].dst) < 0) {
                    fprintf(stderr, "mpvlab-kping: sendto: %s\n", strerror(errno));
                    return 1;
                }
            }
            seq++;
            t_next += step;
            continue;
        }
        int all = seq >= count;
        for (int i = 0; i < n_pairs && all; i++)
            all = ps[i].n_rx >= count && ps[i].n_tx >= count;
        if (now >= end || all)
            break;
        int64_t wake = seq < count ? t_next : end;
        struct timespec to = {(wake - now) / 1000000000, (wake - now) % 1000000000};
        if (ppoll(fds, (nfds_t)n_pairs, &to, NULL) < 0 && errno != EINTR) {
            perror("mpvlab-kping: ppoll");
            return 1;
        }
        for (int i = 0; i < n_pairs; i++)
            if (fds[i].revents)
                drain(&ps[i], count);
    }
    int rc = 0;
    for (int i = 0; i < n_pairs; i++) {
        drain(&ps[i], count);
        if (write_csv(&ps[i], count, offset) < 0)
            rc = 1;
    }
    return rc;
}
