/* mpvlab-delayline: per-path one-way delay (constant or time-varying) and
 * i.i.d. loss for a kernel without netem, behind an iptables NFQUEUE rule.
 *
 * Every queued packet gets a release target = arrival + delay(arrival - t0),
 * clamped to be no earlier than the previous packet's target, so the line is
 * FIFO and never reorders. Held packets live in a ring buffer; we sleep in
 * ppoll until the earliest target (or a new packet) and then accept all due
 * packets with one VERDICT_BATCH message (ids are assigned in arrival order,
 * so "every id <= last due id" is exactly the due set). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "nfq.h"
#include "schedule.h"
#include "stats.h"

#define PROG "mpvlab-delayline"
/* Enough header to identify a flow when debugging; we never look at more,
 * and copying less keeps the per-packet cost flat at any MTU/GSO size. */
#define COPY_RANGE 64

struct held {
	uint32_t id;
	uint32_t len;
	int64_t target_ns;
};

struct dl {
	struct dl_nfq q;
	struct dl_schedule sched;
	struct dl_stats st;
	struct held *ring;
	size_t cap, head, count; /* cap is a power of two */
	int64_t t0_ns;
	int64_t last_target_ns;
	int64_t last_delay_ns;
	int have_delay;
	double loss;
	uint64_t rng;
	FILE *steplog;
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* splitmix64: tiny, seedable, and good enough for Bernoulli drops. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
	return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static void on_packet(void *ctx, uint32_t id, uint32_t len, int64_t now)
{
	struct dl *d = ctx;
	int64_t delay, target;
	struct held *h;

	d->st.packets++;
	d->st.bytes += len;
	if (d->loss > 0.0 && uniform01(&d->rng) < d->loss) {
		if (dl_nfq_verdict(&d->q, id, NF_DROP) < 0)
			d->st.drops_local++;
		d->st.drops_loss++;
		return;
	}
	delay = dl_schedule_delay(&d->sched, now - d->t0_ns);
	if (!d->have_delay || delay != d->last_delay_ns) {
		if (d->have_delay)
			d->st.delay_steps++;
		d->have_delay = 1;
		d->last_delay_ns = delay;
		if (d->steplog)
			fprintf(d->steplog, "%" PRId64 ",%" PRId64 "\n",
				now - d->t0_ns, delay / 1000);
	}
	target = now + delay;
	if (target < d->last_target_ns)
		target = d->last_target_ns; /* FIFO: never overtake */
	d->last_target_ns = target;
	if (d->count == d->cap) {
		/* Cannot happen while cap >= kernel maxlen; be loud anyway. */
		dl_nfq_verdict(&d->q, id, NF_DROP);
		d->st.drops_local++;
		return;
	}
	h = &d->ring[(d->head + d->count) & (d->cap - 1)];
	h->id = id;
	h->len = len;
	h->target_ns = target;
	d->count++;
	if (d->count > d->st.max_queued)
		d->st.max_queued = d->count;
}

/* Accept every held packet whose target has passed (all of them if force).
 * Returns -1 if the verdict could not be sent. */
static int release_due(struct dl *d, int force)
{
	int64_t now = mono_ns();
	uint32_t last_id = 0;
	size_t n = 0;

	while (d->count > 0) {
		struct held *h = &d->ring[d->head];

		if (!force && h->target_ns > now)
			break;
		if (!force)
			dl_stats_late(&d->st, now - h->target_ns);
		last_id = h->id;
		d->head = (d->head + 1) & (d->cap - 1);
		d->count--;
		n++;
	}
	if (n == 0)
		return 0;
	d->st.accepted += n;
	d->st.verdict_msgs++;
	return dl_nfq_verdict_batch(&d->q, last_id, NF_ACCEPT);
}

static int write_ready_file(const char *path)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " --queue NUM --schedule FILE [--t0-ns MONOTONIC_NS]\n"
		"        [--loss PROB --seed N] [--maxlen N] [--rt-prio P]\n"
		"        [--ready-file PATH] [--stats FILE] [--step-log FILE]\n"
		"       " PROG " --check --schedule FILE   (validate and print the schedule)\n");
}

static int parse_u64_arg(const char *name, const char *s, uint64_t max,
			 uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (s[0] < '0' || s[0] > '9')
		goto bad;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, PROG ": %s: invalid value '%s' (integer 0..%llu)\n",
		name, s, (unsigned long long)max);
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "queue", required_argument, 0, 'q' },
		{ "schedule", required_argument, 0, 's' },
		{ "t0-ns", required_argument, 0, 't' },
		{ "loss", required_argument, 0, 'l' },
		{ "seed", required_argument, 0, 'S' },
		{ "maxlen", required_argument, 0, 'm' },
		{ "rt-prio", required_argument, 0, 'r' },
		{ "ready-file", required_argument, 0, 'R' },
		{ "stats", required_argument, 0, 'o' },
		{ "step-log", required_argument, 0, 'L' },
		{ "check", no_argument, 0, 'c' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	static struct dl d;
	const char *sched_path = NULL, *ready = NULL, *stats_path = NULL,
		   *steplog_path = NULL;
	uint64_t queue = UINT64_MAX, t0 = 0, seed = 1, maxlen = 65536,
		 rtprio = 50;
	int have_t0 = 0, check = 0, opt, rc = 0;
	char err[512];
	char *end;
	struct dl_run_info ri;
	sigset_t block, orig;
	struct sigaction sa;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'q':
			if (parse_u64_arg("--queue", optarg, 65535, &queue))
				return 2;
			break;
		case 's':
			sched_path = optarg;
			break;
		case 't':
			if (parse_u64_arg("--t0-ns", optarg, INT64_MAX / 2, &t0))
				return 2;
			have_t0 = 1;
			break;
		case 'l':
			errno = 0;
			d.loss = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(d.loss >= 0.0) ||
			    d.loss > 1.0) {
				fprintf(stderr,
					PROG ": --loss: invalid probability '%s' (0..1)\n",
					optarg);
				return 2;
			}
			break;
		case 'S':
			if (parse_u64_arg("--seed", optarg, UINT64_MAX, &seed))
				return 2;
			break;
		case 'm':
			if (parse_u64_arg("--maxlen", optarg, 1u << 24, &maxlen))
				return 2;
			if (maxlen < 1) {
				fprintf(stderr, PROG ": --maxlen must be >= 1\n");
				return 2;
			}
			break;
		case 'r':
			if (parse_u64_arg("--rt-prio", optarg, 99, &rtprio))
				return 2;
			break;
		case 'R':
			ready = optarg;
			break;
		case 'o':
			stats_path = optarg;
			break;
		case 'L':
			steplog_path = optarg;
			break;
		case 'c':
			check = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!sched_path) {
		fprintf(stderr, PROG ": --schedule FILE is required\n");
		usage(stderr);
		return 2;
	}
	if (dl_schedule_load(sched_path, &d.sched, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	if (check) {
		printf("{\"period_us\": %" PRId64 ", \"max_delay_us\": %" PRId64
		       ", \"points\": [",
		       d.sched.period_ns / 1000, d.sched.max_delay_ns / 1000);
		for (size_t i = 0; i < d.sched.n; i++)
			printf("%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
			       d.sched.pts[i].t_ns / 1000,
			       d.sched.pts[i].delay_ns / 1000);
		printf("]}\n");
		dl_schedule_free(&d.sched);
		return 0;
	}
	if (queue == UINT64_MAX) {
		fprintf(stderr, PROG ": --queue NUM is required\n");
		usage(stderr);
		return 2;
	}

	/* Ring at least as large as the kernel queue, so it cannot overflow. */
	for (d.cap = 1; d.cap < maxlen; d.cap <<= 1)
		;
	d.ring = calloc(d.cap, sizeof(*d.ring));
	if (!d.ring || dl_stats_init(&d.st) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	d.rng = seed;
	if (steplog_path) {
		d.steplog = fopen(steplog_path, "w");
		if (!d.steplog) {
			fprintf(stderr, PROG ": cannot open step log %s: %s\n",
				steplog_path, strerror(errno));
			return 1;
		}
		fprintf(d.steplog, "t_ns_rel,delay_us\n");
	}

	/* Timing: 1 ns timer slack (default 50 us would be added to every
	 * wake-up), real-time priority so a busy 2-core machine cannot delay
	 * our wake-ups by a scheduler tick, and no page faults later. */
	if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) < 0) {
		fprintf(stderr, PROG ": PR_SET_TIMERSLACK failed: %s\n",
			strerror(errno));
		return 1;
	}
	if (rtprio > 0) {
		struct sched_param sp = { .sched_priority = (int)rtprio };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
			fprintf(stderr,
				PROG ": cannot set SCHED_FIFO priority %d: %s (use --rt-prio 0 to run without real-time priority)\n",
				(int)rtprio, strerror(errno));
			return 1;
		}
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		fprintf(stderr, PROG ": warning: mlockall failed: %s\n",
			strerror(errno));

	/* Signals are only delivered inside ppoll (no lost wake-ups). */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &orig);
	sigdelset(&orig, SIGTERM);
	sigdelset(&orig, SIGINT);

	memset(&ri, 0, sizeof(ri));
	ri.start_ns = mono_ns();
	d.t0_ns = have_t0 ? (int64_t)t0 : ri.start_ns;
	d.last_target_ns = INT64_MIN;

	if (dl_nfq_open(&d.q, (unsigned)queue, (unsigned)maxlen, COPY_RANGE,
			on_packet, &d, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 1;
	}
	if (ready && write_ready_file(ready) < 0) {
		fprintf(stderr, PROG ": cannot write ready file %s: %s\n", ready,
			strerror(errno));
		dl_nfq_close(&d.q);
		return 1;
	}

	while (!g_stop) {
		struct pollfd pfd = { .fd = d.q.fd, .events = POLLIN };
		struct timespec ts, *tsp = NULL;
		int r;

		if (release_due(&d, 0) < 0) {
			fprintf(stderr, PROG ": sending verdict failed: %s\n",
				strerror(errno));
			rc = 1;
			break;
		}
		if (d.count > 0) {
			int64_t wait = d.ring[d.head].target_ns - mono_ns();

			if (wait < 0)
				wait = 0;
			ts.tv_sec = wait / 1000000000LL;
			ts.tv_nsec = wait % 1000000000LL;
			tsp = &ts;
		}
		r = ppoll(&pfd, 1, tsp, &orig);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, PROG ": ppoll: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		if (r > 0 && dl_nfq_drain(&d.q, 256) < 0) {
			fprintf(stderr, PROG ": netlink receive failed: %s\n",
				strerror(errno));
			rc = 1;
			break;
		}
	}

	/* Shutdown: take what is already queued to us, let everything held go
	 * now, then read the kernel's drop counters before the queue goes. */
	dl_nfq_drain(&d.q, 1 << 20);
	release_due(&d, 1);
	dl_nfq_proc_counters((unsigned)queue, &d.st.kernel_queue_dropped,
			     &d.st.kernel_user_dropped);
	d.st.enobufs = d.q.enobufs;
	d.st.truncated = d.q.truncated;
	d.st.drops_local += d.q.nl_errors;
	dl_nfq_close(&d.q);
	if (d.q.nl_errors)
		fprintf(stderr, PROG ": %" PRIu64 " netlink errors (last: %s)\n",
			d.q.nl_errors, strerror(d.q.last_nl_error));

	ri.queue = (unsigned)queue;
	ri.t0_ns = d.t0_ns;
	ri.end_ns = mono_ns();
	ri.loss = d.loss;
	ri.seed = seed;
	ri.maxlen = (unsigned)maxlen;
	ri.rt_prio = (int)rtprio;
	ri.schedule = sched_path;
	if (d.steplog && fclose(d.steplog) != 0) {
		fprintf(stderr, PROG ": writing step log failed: %s\n",
			strerror(errno));
		rc = 1;
	}
	if (stats_path && dl_stats_write_json(stats_path, &d.st, &ri) < 0) {
		fprintf(stderr, PROG ": cannot write stats %s: %s\n", stats_path,
			strerror(errno));
		rc = 1;
	}
	dl_stats_free(&d.st);
	dl_schedule_free(&d.sched);
	free(d.ring);
	return rc;
}
