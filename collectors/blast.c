/* mpvlab-blast: the pre-check's UDP sender (mpvlab/runner/precheck.py, rate_check), run inside a
 * server namespace, one process for all its paths:
 *
 *   mpvlab-blast --fill EXCESS,SECONDS --hold EXCESS --frame-bits N --port P --to DST,RATE_BPS,SECONDS [--to ...]
 *
 * The C form of what mpvlab/runner/blast.py ran in a Python interpreter (issue 36: ~50 ms of CPU of
 * every run's fixed cost). The pacing constants are not here: blast.py owns them and passes them,
 * so the sender and the verdict (which reads FRAME_BITS) cannot disagree.
 *
 * Paced UDP to a port nothing listens on (1472-byte payloads: 1514-byte frames), to each target at
 * once: EXCESS x rate for the fill's SECONDS, then the hold's EXCESS x rate for the target's
 * SECONDS. Each is paced by the total due so far (checked every 0.5 ms), so a stall is caught up at
 * once: the tbf drops what its buffer cannot hold, and the intervals the queue ran empty are left
 * out of the measurement. A failed send (full socket buffer, an ICMP error returned) is counted as
 * sent and pacing goes on. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define MAX_TARGETS 16
#define PAYLOAD_BYTES 1472

struct target {
    struct sockaddr_in dst;
    double rate_bps, seconds;
    long sent;
    int fd;
};

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int usage(const char *why)
{
    fprintf(stderr, "mpvlab-blast: %s\nusage: mpvlab-blast --fill EXCESS,SECONDS --hold EXCESS --frame-bits N "
                    "--port P --to DST,RATE_BPS,SECONDS [--to ...]\n", why);
    return 2;
}

static int number(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    return *s && !*end && *out >= 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct target ts[MAX_TARGETS];
    int n = 0;
    double fill_excess = -1, fill_s = -1, hold_excess = -1, frame_bits = -1, port = -1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage("an option lacks its value");
        const char *a = argv[i];
        char *v = argv[i + 1], *comma = strchr(v, ',');
        if (!strcmp(a, "--fill")) {
            if (!comma)
                return usage("--fill is EXCESS,SECONDS");
            *comma = 0;
            if (number(v, &fill_excess) || number(comma + 1, &fill_s))
                return usage("--fill is EXCESS,SECONDS");
        } else if (!strcmp(a, "--hold")) {
            if (number(v, &hold_excess))
                return usage("--hold is a number");
        } else if (!strcmp(a, "--frame-bits")) {
            if (number(v, &frame_bits) || frame_bits <= 0)
                return usage("--frame-bits is a positive number");
        } else if (!strcmp(a, "--port")) {
            if (number(v, &port) || port < 1 || port > 65535)
                return usage("--port is 1..65535");
        } else if (!strcmp(a, "--to")) {
            char *rate = comma, *secs = comma ? strchr(comma + 1, ',') : NULL;
            if (n == MAX_TARGETS)
                return usage("too many --to");
            if (!rate || !secs)
                return usage("--to is DST,RATE_BPS,SECONDS");
            *rate++ = 0;
            *secs++ = 0;
            struct target *t = &ts[n];
            t->dst = (struct sockaddr_in){.sin_family = AF_INET};
            if (inet_pton(AF_INET, v, &t->dst.sin_addr) != 1 || number(rate, &t->rate_bps) ||
                number(secs, &t->seconds))
                return usage("--to is DST,RATE_BPS,SECONDS with an IPv4 address");
            t->sent = 0;
            n++;
        } else {
            return usage("unknown option");
        }
    }
    if (!n || fill_excess < 0 || hold_excess < 0 || frame_bits < 0 || port < 0)
        return usage("--fill, --hold, --frame-bits, --port and at least one --to are required");
    for (int i = 0; i < n; i++) {
        ts[i].dst.sin_port = htons((unsigned short)port);
        ts[i].fd = socket(AF_INET, SOCK_DGRAM, 0);
        int sndbuf = 4 << 20;
        if (ts[i].fd < 0 || setsockopt(ts[i].fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) < 0) {
            perror("mpvlab-blast: socket");
            return 1;
        }
    }
    static const char payload[PAYLOAD_BYTES];
    const struct timespec tick = {0, 500000};
    double start = mono_s();
    for (;;) {
        double el = mono_s() - start;
        int active = 0;
        for (int i = 0; i < n; i++) {
            struct target *t = &ts[i];
            if (el >= fill_s + t->seconds)
                continue;
            active = 1;
            double filled = (el < fill_s ? el : fill_s) * fill_excess;
            double held = el > fill_s ? el - fill_s : 0.0;
            long due = (long)((filled + held * hold_excess) * t->rate_bps / frame_bits) + 1;
            for (; t->sent < due; t->sent++)
                (void)sendto(t->fd, payload, sizeof payload, 0, (struct sockaddr *)&t->dst, sizeof t->dst);
        }
        if (!active)
            return 0;
        nanosleep(&tick, NULL);
    }
}
