/* mpvlab-delayline: per-path one-way delay (constant or time-varying), loss
 * (independent or Gilbert-Elliott), link capacity (a Mahimahi packet-delivery
 * trace or a rate schedule, with a drop-tail queue) and outages, for a kernel
 * without netem, behind an iptables NFQUEUE rule.
 *
 * Per packet, in this order: outage (arrivals during one are dropped), loss
 * model, capacity queue (departure = the opportunity carrying its last byte),
 * then propagation delay: release target = departure + delay(departure - t0),
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

#include "capacity.h"
#include "loss.h"
#include "nfq.h"
#include "schedule.h"
#include "stats.h"

#define PROG "mpvlab-delayline"
/* Enough header to identify a flow when debugging; we never look at more,
 * and copying less keeps the per-packet cost flat at any MTU/GSO size. */
#define COPY_RANGE 64
/* Default --batch-tolerance-us. The goal for release lateness is p99 <= 200 us
 * and the wake-up itself adds ~30-50 us (p50) on this machine kind, so the
 * deliberate wait must stay below ~150 us. At 100 Mbit/s MTU packets arrive
 * every 121 us: 150 us lets each arrival's wake-up also carry the release. */
#define DL_DEFAULT_TOLERANCE_US 150
#define DL_GAP_UNKNOWN INT64_MAX

struct held {
	uint32_t id;
	uint32_t len;
	int64_t target_ns;   /* absolute CLOCK_MONOTONIC */
	uint64_t seq;        /* arrival order, 0-based (release log) */
	int64_t arrival_rel; /* relative to t0 */
	int64_t depart_rel;  /* left the capacity stage (= arrival without one) */
	uint32_t qpkts;      /* capacity queue found on arrival */
	uint32_t qbytes;
	int64_t read_wait_ns; /* read time - kernel arrival stamp; -1: none */
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
	struct dl_loss loss;
	struct dl_capacity link;
	struct dl_outages out;
	size_t next_outage;    /* first outage whose start is not yet handled */
	uint64_t drops_outage; /* arrived during an outage */
	uint64_t drops_flushed; /* waiting for the link when an outage began */
	FILE *steplog;
	FILE *rlog;
	/* Run time zero may be set after start (--t0-file + SIGUSR1): the
	 * orchestrator fixes it when the run is ready instead of guessing a
	 * lead. t0_initial_ns is the value at start, t0_set_at_ns when the
	 * last new value was applied (0 = never). */
	const char *t0_file;
	int64_t t0_initial_ns;
	int64_t t0_set_at_ns;
	uint64_t t0_updates;
	uint64_t steplog_rows;         /* rows written to the step log */
	uint64_t steplog_rows_old_t0;  /* ... of which on the clock before the last t0 move */
	/* Wake-up batching (--batch-tolerance-us): a due packet may wait up to
	 * tol_ns past its target so that one wake-up and one verdict message
	 * serve several packets. Never early: only the wake-up moves later. */
	int64_t tol_ns;
	int64_t last_read_ns;  /* read time of the latest arrival batch */
	int64_t gap_ewma_ns;   /* smoothed gap between arrival batches */
};

static volatile sig_atomic_t g_stop;
static volatile sig_atomic_t g_t0_pending;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		g_t0_pending = 1;
	else
		g_stop = 1;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Release log: one CSV line per packet at its final fate. Fates: A released
 * at its target, S released early at shutdown, L loss model, Q capacity queue
 * full, O arrived during an outage, F waiting for the link when an outage
 * began, X dropped locally (ring full). Times are ns relative to t0; -1 = n/a. */
static void log_pkt(struct dl *d, uint64_t seq, uint32_t len, int64_t arr,
		    char fate, int64_t dep, int64_t tgt, int64_t rel,
		    uint64_t qp, uint64_t qb)
{
	if (d->rlog)
		fprintf(d->rlog,
			"%" PRIu64 ",%u,%" PRId64 ",%c,%" PRId64 ",%" PRId64
			",%" PRId64 ",%" PRIu64 ",%" PRIu64 "\n",
			seq, len, arr, fate, dep, tgt, rel, qp, qb);
}

static void drop_pkt(struct dl *d, uint32_t id)
{
	d->st.drop_msgs++;
	if (dl_nfq_verdict(&d->q, id, NF_DROP) < 0)
		d->st.drops_local++;
}

/* Handle every outage that has begun by t (relative): drop what is still
 * waiting for the link (its departure lies after the outage start) and
 * reset the link. Packets that already left the link (propagating) are kept. */
static void outage_tick(struct dl *d, int64_t t)
{
	while (d->next_outage < d->out.n && d->out.start_ns[d->next_outage] <= t) {
		int64_t s = d->out.start_ns[d->next_outage];

		while (d->count > 0) {
			struct held *h =
				&d->ring[(d->head + d->count - 1) & (d->cap - 1)];

			if (h->depart_rel <= s)
				break;
			drop_pkt(d, h->id);
			d->drops_flushed++;
			log_pkt(d, h->seq, h->len, h->arrival_rel, 'F', h->depart_rel,
				-1, -1, h->qpkts, h->qbytes);
			d->count--;
		}
		if (d->link.kind != DL_CAP_NONE)
			dl_cap_reset(&d->link, s);
		d->last_target_ns = d->count > 0 ?
			d->ring[(d->head + d->count - 1) & (d->cap - 1)].target_ns :
			INT64_MIN;
		d->next_outage++;
	}
}

/* Read time - the kernel's arrival stamp, or -1 when the packet had no usable
 * stamp. A stamp after the read by more than the stamp's 1 us resolution and
 * the clock-offset read's jitter, or more than an hour before it, is a clock
 * step, not an arrival: unusable. */
#define DL_STAMP_SLACK_NS 100000LL
#define DL_STAMP_MAX_WAIT_NS 3600000000000LL
static int64_t read_wait(struct dl *d, int64_t now, int64_t arrival)
{
	int64_t w = now - arrival;

	if (arrival < 0 || w < -DL_STAMP_SLACK_NS || w > DL_STAMP_MAX_WAIT_NS) {
		d->st.arrival_unstamped++;
		return -1;
	}
	d->st.arrival_stamped++;
	if (w < 0)
		w = 0;
	if (w > d->st.read_wait_max_ns)
		d->st.read_wait_max_ns = w;
	return w;
}

static void on_packet(void *ctx, uint32_t id, uint32_t len, int64_t now,
		      int64_t arrival)
{
	struct dl *d = ctx;
	int64_t wait = read_wait(d, now, arrival);
	int64_t delay, target, rel = now - d->t0_ns, depart = rel;
	uint64_t seq = d->st.packets, qp = 0, qb = 0;
	struct held *h;

	d->st.packets++;
	d->st.bytes += len;
	/* Packets read by one recvmmsg share a read time: the gap between
	 * read times says how soon the next arrival will wake us anyway. */
	if (now != d->last_read_ns) {
		if (d->last_read_ns == INT64_MIN)
			; /* first arrival: no gap yet */
		else if (d->gap_ewma_ns == DL_GAP_UNKNOWN)
			d->gap_ewma_ns = now - d->last_read_ns;
		else
			d->gap_ewma_ns += (now - d->last_read_ns - d->gap_ewma_ns) / 8;
		d->last_read_ns = now;
	}
	outage_tick(d, rel);
	if (dl_outage_at(&d->out, rel, NULL)) {
		drop_pkt(d, id);
		d->drops_outage++;
		log_pkt(d, seq, len, rel, 'O', -1, -1, -1, 0, 0);
		return;
	}
	if (dl_loss_drop(&d->loss)) {
		drop_pkt(d, id);
		d->st.drops_loss++;
		log_pkt(d, seq, len, rel, 'L', -1, -1, -1, 0, 0);
		return;
	}
	if (d->count == d->cap) {
		/* Cannot happen while cap >= kernel maxlen; be loud anyway. */
		drop_pkt(d, id);
		d->st.drops_local++;
		log_pkt(d, seq, len, rel, 'X', -1, -1, -1, 0, 0);
		return;
	}
	if (d->link.kind != DL_CAP_NONE &&
	    dl_cap_arrive(&d->link, rel, len, &depart, &qp, &qb)) {
		drop_pkt(d, id);
		log_pkt(d, seq, len, rel, 'Q', -1, -1, -1, qp, qb);
		return;
	}
	/* Propagation delay is chosen by the time the packet leaves the link
	 * (without a capacity model: its arrival). */
	delay = dl_schedule_delay(&d->sched, depart);
	if (!d->have_delay || delay != d->last_delay_ns) {
		if (d->have_delay)
			d->st.delay_steps++;
		d->have_delay = 1;
		d->last_delay_ns = delay;
		if (d->steplog) {
			fprintf(d->steplog, "%" PRId64 ",%" PRId64 "\n", depart,
				delay / 1000);
			d->steplog_rows++;
		}
	}
	target = d->t0_ns + depart + delay;
	if (target < d->last_target_ns)
		target = d->last_target_ns; /* FIFO: never overtake */
	d->last_target_ns = target;
	h = &d->ring[(d->head + d->count) & (d->cap - 1)];
	h->id = id;
	h->len = len;
	h->target_ns = target;
	h->seq = seq;
	h->arrival_rel = rel;
	h->depart_rel = depart;
	h->qpkts = (uint32_t)qp;
	h->qbytes = qb > UINT32_MAX ? UINT32_MAX : (uint32_t)qb;
	h->read_wait_ns = wait;
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

	if (!force)
		outage_tick(d, now - d->t0_ns);
	while (d->count > 0) {
		struct held *h = &d->ring[d->head];

		if (!force && h->target_ns > now)
			break;
		if (!force) {
			dl_stats_late(&d->st, now - h->target_ns);
			if (h->read_wait_ns >= 0)
				dl_stats_late_arrival(&d->st, now - h->target_ns + h->read_wait_ns);
		}
		log_pkt(d, h->seq, h->len, h->arrival_rel, force ? 'S' : 'A',
			h->depart_rel, h->target_ns - d->t0_ns, now - d->t0_ns,
			h->qpkts, h->qbytes);
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

/* When to wake for the held packets. Without a tolerance: at the head's
 * target. With one (T): if arrivals come more often than T, an arrival will
 * wake us within T anyway and release_due runs on every wake-up, so the timer
 * is only a backstop at head + T; otherwise wake at the latest held target
 * not beyond head + T, so packets whose targets lie that close are accepted
 * by one wake-up and one verdict message. Either way no packet is released
 * early and none later than T after its target (plus wake-up latency). */
static int64_t next_wake(struct dl *d)
{
	int64_t head = d->ring[d->head].target_ns, limit, wake = head;

	if (d->tol_ns == 0)
		return head;
	limit = head + d->tol_ns;
	if (d->gap_ewma_ns < d->tol_ns)
		return limit;
	for (size_t i = 1; i < d->count; i++) {
		int64_t t = d->ring[(d->head + i) & (d->cap - 1)].target_ns;

		if (t > limit)
			break;
		wake = t;
	}
	return wake;
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

/* Run time zero moves by delta: every time kept relative to t0 moves by -delta,
 * so what was decided in absolute time (held packets' targets, the capacity
 * model's queued departures) stays put. Outages are on the run's clock: those
 * not yet begun on the new clock (now_rel) are still to come. */
static void shift_clock(struct dl *d, int64_t delta, int64_t now_rel)
{
	for (size_t i = 0; i < d->count; i++) {
		struct held *h = &d->ring[(d->head + i) & (d->cap - 1)];

		h->arrival_rel -= delta;
		h->depart_rel -= delta;
	}
	if (d->link.kind != DL_CAP_NONE)
		dl_cap_shift(&d->link, delta);
	d->next_outage = 0;
	while (d->next_outage < d->out.n && d->out.start_ns[d->next_outage] <= now_rel)
		d->next_outage++;
}

/* SIGUSR1: read the new run time zero from --t0-file (one integer, CLOCK_MONOTONIC
 * ns), apply it to packets arriving from now on (held packets keep their
 * targets) and acknowledge by writing "<t0-file>.ack" atomically with the same
 * value, so the caller knows the line follows it before that instant comes. */
static int apply_t0_file(struct dl *d)
{
	char tmp[4096], ack[4096];
	long long v;
	FILE *f;

	if (!d->t0_file) {
		fprintf(stderr, PROG ": SIGUSR1 without --t0-file\n");
		return 0;
	}
	f = fopen(d->t0_file, "r");
	if (!f || fscanf(f, "%lld", &v) != 1 || v <= 0) {
		fprintf(stderr, PROG ": cannot read t0 from %s\n", d->t0_file);
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	shift_clock(d, (int64_t)v - d->t0_ns, mono_ns() - (int64_t)v);
	d->t0_ns = (int64_t)v;
	d->t0_set_at_ns = mono_ns();
	d->t0_updates++;
	d->have_delay = 0; /* the step log restarts on the new clock */
	d->steplog_rows_old_t0 = d->steplog_rows;
	if (d->steplog)
		fflush(d->steplog);
	if (snprintf(ack, sizeof(ack), "%s.ack", d->t0_file) >= (int)sizeof(ack) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", ack, (int)getpid()) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%lld\n", v);
	if (fclose(f) != 0 || rename(tmp, ack) != 0) {
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
		"        [--t0-file PATH]  (SIGUSR1: read a new t0 from PATH, ack in PATH.ack)\n"
		"        [--ge-p P --ge-r R --ge-loss-bad X --ge-loss-good Y]  (Gilbert-Elliott instead of --loss)\n"
		"        [--capacity-trace FILE [--opportunity-bytes N] | --rate-schedule FILE]\n"
		"        [--packet-overhead N] [--queue-packets N] [--queue-bytes N]\n"
		"        [--outage START_US:END_US ...] [--release-log FILE]\n"
		"        [--batch-tolerance-us T]  (a due packet may wait up to T us so wake-ups serve several; default 150, 0 = wake at every target)\n"
		"       " PROG " --check --schedule FILE   (validate and print the schedule)\n"
		"       " PROG " --loss-selftest N (--loss P | --ge-...) [--seed S]  (run the loss model N times, print JSON)\n");
}

static int parse_prob_arg(const char *name, const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || *end || end == s || !(*out >= 0.0) || *out > 1.0) {
		fprintf(stderr, PROG ": %s: invalid probability '%s' (0..1)\n",
			name, s);
		return -1;
	}
	return 0;
}

/* Extra stats sections: capacity, outages, loss model. */
static void write_extra(FILE *f, void *ctx)
{
	struct dl *d = ctx;
	static const char *kinds[] = { "none", "trace", "rate" };
	const struct dl_capacity *c = &d->link;

	fprintf(f, "  \"t0_initial_ns\": %" PRId64 ",\n", d->t0_initial_ns);
	fprintf(f, "  \"t0_set_at_ns\": %" PRId64 ",\n", d->t0_set_at_ns);
	fprintf(f, "  \"t0_updates\": %" PRIu64 ",\n", d->t0_updates);
	fprintf(f, "  \"step_log_rows_before_t0_move\": %" PRIu64 ",\n",
		d->steplog_rows_old_t0);
	fprintf(f, "  \"drops_queue\": %" PRIu64 ",\n", c->queue_drops);
	fprintf(f, "  \"drops_outage\": %" PRIu64 ",\n", d->drops_outage);
	fprintf(f, "  \"drops_outage_flushed\": %" PRIu64 ",\n",
		d->drops_flushed);
	fprintf(f, "  \"capacity\": {\"kind\": \"%s\"", kinds[c->kind]);
	if (c->kind != DL_CAP_NONE) {
		fprintf(f, ", \"file\": \"");
		for (const char *p = c->path; *p; p++) {
			if (*p == '"' || *p == '\\')
				fputc('\\', f);
			if ((unsigned char)*p >= 0x20)
				fputc(*p, f);
		}
		fprintf(f, "\"");
		if (c->kind == DL_CAP_TRACE)
			fprintf(f,
				", \"opportunities_in_trace\": %zu, \"period_ms\": %" PRId64
				", \"opportunity_bytes\": %u, \"opportunities_used\": %" PRIu64,
				c->n_opp, c->period_ns / 1000000, c->opp_bytes,
				c->opportunities_used);
		fprintf(f,
			", \"packet_overhead\": %u, \"queue_limit_packets\": %" PRIu64
			", \"queue_limit_bytes\": %" PRIu64 ", \"served_packets\": %" PRIu64
			", \"served_bytes\": %" PRIu64 ", \"queue_drops\": %" PRIu64
			", \"max_queue_packets\": %" PRIu64 ", \"max_queue_bytes\": %" PRIu64,
			c->overhead, c->limit_packets, c->limit_bytes,
			c->served_packets, c->served_bytes, c->queue_drops,
			c->max_q_packets, c->max_q_bytes);
	}
	fprintf(f, "},\n  \"outages_us\": [");
	for (size_t i = 0; i < d->out.n; i++)
		fprintf(f, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
			d->out.start_ns[i] / 1000, d->out.end_ns[i] / 1000);
	fprintf(f, "],\n  \"loss_model\": ");
	dl_loss_finish(&d->loss);
	dl_loss_json(f, &d->loss);
	fprintf(f, ",\n");
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

/* The command line. The parse step fills this and the loss and capacity
 * settings of struct dl; the build step reads it; so does the summary. */
struct cli {
	const char *sched_path, *ready, *stats_path, *steplog_path,
		   *trace_path, *rate_path, *rlog_path;
	uint64_t queue, t0, seed, maxlen, rtprio, opp_bytes, overhead,
		 selftest, tol_us;
	int have_t0, check, have_overhead, nge; /* nge: bit per --ge-* given */
};

/* parse_cli() and build() return GO_ON to go on, else main's exit status. */
#define GO_ON (-1)

static const struct option long_opts[] = {
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
	{ "ge-p", required_argument, 0, 1001 },
	{ "ge-r", required_argument, 0, 1002 },
	{ "ge-loss-bad", required_argument, 0, 1003 },
	{ "ge-loss-good", required_argument, 0, 1004 },
	{ "capacity-trace", required_argument, 0, 1005 },
	{ "rate-schedule", required_argument, 0, 1006 },
	{ "opportunity-bytes", required_argument, 0, 1007 },
	{ "packet-overhead", required_argument, 0, 1008 },
	{ "queue-packets", required_argument, 0, 1009 },
	{ "queue-bytes", required_argument, 0, 1010 },
	{ "outage", required_argument, 0, 1011 },
	{ "release-log", required_argument, 0, 1012 },
	{ "loss-selftest", required_argument, 0, 1013 },
	{ "t0-file", required_argument, 0, 1014 },
	{ "batch-tolerance-us", required_argument, 0, 1015 },
	{ "help", no_argument, 0, 'h' },
	{ 0, 0, 0, 0 },
};

/* One option: GO_ON, or the exit status (0 after --help, 2 on a bad value). */
static int parse_option(int opt, const char *arg, struct cli *o, struct dl *d)
{
	double prob;
	uint64_t u64;
	char err[512];

	switch (opt) {
	case 'q':
		if (parse_u64_arg("--queue", arg, 65535, &o->queue))
			return 2;
		break;
	case 's':
		o->sched_path = arg;
		break;
	case 't':
		if (parse_u64_arg("--t0-ns", arg, INT64_MAX / 2, &o->t0))
			return 2;
		o->have_t0 = 1;
		break;
	case 'l':
		if (parse_prob_arg("--loss", arg, &d->loss.prob))
			return 2;
		if (d->loss.prob > 0.0)
			d->loss.kind = DL_LOSS_INDEPENDENT;
		break;
	case 1001: case 1002: case 1003: case 1004: {
		static const char *nm[] = { "--ge-p", "--ge-r",
					    "--ge-loss-bad", "--ge-loss-good" };
		double *dst[] = { &d->loss.p_gb, &d->loss.p_bg,
				  &d->loss.loss_bad, &d->loss.loss_good };

		if (parse_prob_arg(nm[opt - 1001], arg, &prob))
			return 2;
		*dst[opt - 1001] = prob;
		o->nge |= 1 << (opt - 1001);
		break;
	}
	case 1005:
		o->trace_path = arg;
		break;
	case 1006:
		o->rate_path = arg;
		break;
	case 1007:
		if (parse_u64_arg("--opportunity-bytes", arg, 1 << 20, &o->opp_bytes))
			return 2;
		if (o->opp_bytes < 1) {
			fprintf(stderr, PROG ": --opportunity-bytes must be >= 1\n");
			return 2;
		}
		break;
	case 1008:
		if (parse_u64_arg("--packet-overhead", arg, 1024, &o->overhead))
			return 2;
		o->have_overhead = 1;
		break;
	case 1009:
		if (parse_u64_arg("--queue-packets", arg, 1u << 24, &u64))
			return 2;
		d->link.limit_packets = u64;
		break;
	case 1010:
		if (parse_u64_arg("--queue-bytes", arg, 1ULL << 34, &u64))
			return 2;
		d->link.limit_bytes = u64;
		break;
	case 1011:
		if (dl_outage_add(&d->out, arg, err, sizeof(err)) < 0) {
			fprintf(stderr, PROG ": %s\n", err);
			return 2;
		}
		break;
	case 1012:
		o->rlog_path = arg;
		break;
	case 1014:
		d->t0_file = arg;
		break;
	case 1015:
		if (parse_u64_arg("--batch-tolerance-us", arg, 10000, &o->tol_us))
			return 2;
		break;
	case 1013:
		if (parse_u64_arg("--loss-selftest", arg, 1ULL << 40, &o->selftest))
			return 2;
		break;
	case 'S':
		if (parse_u64_arg("--seed", arg, UINT64_MAX, &o->seed))
			return 2;
		break;
	case 'm':
		if (parse_u64_arg("--maxlen", arg, 1u << 24, &o->maxlen))
			return 2;
		if (o->maxlen < 1) {
			fprintf(stderr, PROG ": --maxlen must be >= 1\n");
			return 2;
		}
		break;
	case 'r':
		if (parse_u64_arg("--rt-prio", arg, 99, &o->rtprio))
			return 2;
		break;
	case 'R':
		o->ready = arg;
		break;
	case 'o':
		o->stats_path = arg;
		break;
	case 'L':
		o->steplog_path = arg;
		break;
	case 'c':
		o->check = 1;
		break;
	case 'h':
		usage(stdout);
		return 0;
	default:
		usage(stderr);
		return 2;
	}
	return GO_ON;
}

/* Parse: the command line into `o` and d's loss/capacity/outage settings,
 * each value checked on its own (combinations are the build step's). */
static int parse_cli(int argc, char **argv, struct cli *o, struct dl *d)
{
	int opt, rc;

	*o = (struct cli){ .queue = UINT64_MAX, .seed = 1, .maxlen = 65536,
			   .rtprio = 50, .opp_bytes = DL_MAHIMAHI_OPP_BYTES,
			   .tol_us = DL_DEFAULT_TOLERANCE_US };
	while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1)
		if ((rc = parse_option(opt, optarg, o, d)) != GO_ON)
			return rc;
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return GO_ON;
}

/* The loss model the options chose (Gilbert-Elliott needs all four of its
 * options and no --loss), seeded. */
static int build_loss(const struct cli *o, struct dl *d)
{
	if (o->nge != 0) {
		if (o->nge != 15 || d->loss.kind == DL_LOSS_INDEPENDENT) {
			fprintf(stderr,
				PROG ": Gilbert-Elliott needs all of --ge-p --ge-r --ge-loss-bad --ge-loss-good, and no --loss\n");
			return 2;
		}
		if (d->loss.p_gb <= 0.0 || d->loss.p_bg <= 0.0) {
			fprintf(stderr,
				PROG ": --ge-p and --ge-r must be > 0 (otherwise the chain never changes state)\n");
			return 2;
		}
		d->loss.kind = DL_LOSS_GE;
	}
	dl_loss_seed(&d->loss, o->seed);
	return GO_ON;
}

/* The capacity stage: a Mahimahi trace or a rate schedule (or none). */
static int build_capacity(const struct cli *o, struct dl *d)
{
	char err[512];

	if (o->trace_path && o->rate_path) {
		fprintf(stderr, PROG ": give --capacity-trace or --rate-schedule, not both\n");
		return 2;
	}
	if (!o->trace_path && !o->rate_path &&
	    (d->link.limit_packets || d->link.limit_bytes || o->have_overhead)) {
		fprintf(stderr, PROG ": --queue-packets/--queue-bytes/--packet-overhead need a capacity (--capacity-trace or --rate-schedule)\n");
		return 2;
	}
	if (o->trace_path) {
		d->link.opp_bytes = (uint32_t)o->opp_bytes;
		if (dl_cap_load_trace(&d->link, o->trace_path, err, sizeof(err)) < 0) {
			fprintf(stderr, PROG ": %s\n", err);
			return 2;
		}
		d->link.overhead = o->have_overhead ? (uint32_t)o->overhead : DL_MAHIMAHI_OVERHEAD;
	}
	if (o->rate_path) {
		if (dl_cap_load_rate(&d->link, o->rate_path, err, sizeof(err)) < 0) {
			fprintf(stderr, PROG ": %s\n", err);
			return 2;
		}
		d->link.overhead = (uint32_t)o->overhead;
	}
	d->link.outages = &d->out;
	return GO_ON;
}

/* --check: the schedule as loaded, as JSON on stdout. */
static void print_schedule(const struct dl_schedule *sc)
{
	printf("{\"period_us\": %" PRId64 ", \"max_delay_us\": %" PRId64
	       ", \"points\": [",
	       sc->period_ns / 1000, sc->max_delay_ns / 1000);
	for (size_t i = 0; i < sc->n; i++)
		printf("%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
		       sc->pts[i].t_ns / 1000,
		       sc->pts[i].delay_ns / 1000);
	printf("]}\n");
}

/* The held-packet ring and the two optional logs. */
static int build_buffers(const struct cli *o, struct dl *d)
{
	/* Ring at least as large as the kernel queue, so it cannot overflow. */
	for (d->cap = 1; d->cap < o->maxlen; d->cap <<= 1)
		;
	d->ring = calloc(d->cap, sizeof(*d->ring));
	if (!d->ring || dl_stats_init(&d->st) < 0 ||
	    (d->link.kind != DL_CAP_NONE && dl_cap_init_queue(&d->link, d->cap) < 0)) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	if (o->rlog_path) {
		d->rlog = fopen(o->rlog_path, "w");
		if (!d->rlog) {
			fprintf(stderr, PROG ": cannot open release log %s: %s\n",
				o->rlog_path, strerror(errno));
			return 1;
		}
		setvbuf(d->rlog, NULL, _IOFBF, 1 << 20);
		fprintf(d->rlog, "seq,len,arrival_ns,fate,depart_ns,target_ns,release_ns,q_packets,q_bytes\n");
	}
	if (o->steplog_path) {
		d->steplog = fopen(o->steplog_path, "w");
		if (!d->steplog) {
			fprintf(stderr, PROG ": cannot open step log %s: %s\n",
				o->steplog_path, strerror(errno));
			return 1;
		}
		fprintf(d->steplog, "t_ns_rel,delay_us\n");
	}
	return GO_ON;
}

/* Timing: 1 ns timer slack (default 50 us would be added to every
 * wake-up), real-time priority so a busy 2-core machine cannot delay
 * our wake-ups by a scheduler tick, and no page faults later. */
static int build_timing(const struct cli *o)
{
	if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) < 0) {
		fprintf(stderr, PROG ": PR_SET_TIMERSLACK failed: %s\n",
			strerror(errno));
		return 1;
	}
	if (o->rtprio > 0) {
		struct sched_param sp = { .sched_priority = (int)o->rtprio };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
			fprintf(stderr,
				PROG ": cannot set SCHED_FIFO priority %d: %s (use --rt-prio 0 to run without real-time priority)\n",
				(int)o->rtprio, strerror(errno));
			return 1;
		}
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		fprintf(stderr, PROG ": warning: mlockall failed: %s\n",
			strerror(errno));
	return GO_ON;
}

/* Signals are only delivered inside ppoll (no lost wake-ups): blocked
 * here, `orig` is the mask ppoll waits with. */
static void block_signals(sigset_t *orig)
{
	struct sigaction sa;
	sigset_t block;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, orig);
	sigdelset(orig, SIGTERM);
	sigdelset(orig, SIGINT);
	sigdelset(orig, SIGUSR1);
}

/* Build: check the options together, load the models, then (unless a
 * one-shot mode answers and exits: --loss-selftest, --check) allocate,
 * set timing and signals, fix t0, bind the queue and say ready. */
static int build(const struct cli *o, struct dl *d, struct dl_run_info *ri,
		 sigset_t *orig)
{
	char err[512];
	int rc;

	if ((rc = build_loss(o, d)) != GO_ON)
		return rc;
	if (o->selftest) {
		/* The packet path's own loss code, without a queue: a fast,
		 * deterministic check of the achieved rate and bursts. */
		for (uint64_t i = 0; i < o->selftest; i++)
			dl_loss_drop(&d->loss);
		dl_loss_finish(&d->loss);
		dl_loss_json(stdout, &d->loss);
		printf("\n");
		return 0;
	}
	if ((rc = build_capacity(o, d)) != GO_ON)
		return rc;
	if (!o->sched_path) {
		fprintf(stderr, PROG ": --schedule FILE is required\n");
		usage(stderr);
		return 2;
	}
	if (dl_schedule_load(o->sched_path, &d->sched, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	if (o->check) {
		print_schedule(&d->sched);
		dl_schedule_free(&d->sched);
		return 0;
	}
	if (o->queue == UINT64_MAX) {
		fprintf(stderr, PROG ": --queue NUM is required\n");
		usage(stderr);
		return 2;
	}
	if ((rc = build_buffers(o, d)) != GO_ON || (rc = build_timing(o)) != GO_ON)
		return rc;
	block_signals(orig);

	memset(ri, 0, sizeof(*ri));
	ri->start_ns = mono_ns();
	d->t0_ns = o->have_t0 ? (int64_t)o->t0 : ri->start_ns;
	d->t0_initial_ns = d->t0_ns;
	d->last_target_ns = INT64_MIN;
	d->tol_ns = (int64_t)o->tol_us * 1000;
	d->last_read_ns = INT64_MIN;
	d->gap_ewma_ns = DL_GAP_UNKNOWN; /* treated as sparse traffic */

	/* With a capacity model the kernel must hand us MTU-sized packets
	 * (Mahimahi reads them from a TUN device): without F_GSO it segments
	 * GSO skbs before queueing. Delay-only lines keep GSO skbs whole. */
	if (dl_nfq_open(&d->q, (unsigned)o->queue, (unsigned)o->maxlen, COPY_RANGE,
			d->link.kind == DL_CAP_NONE, on_packet, d, err,
			sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 1;
	}
	if (o->ready && write_ready_file(o->ready) < 0) {
		fprintf(stderr, PROG ": cannot write ready file %s: %s\n", o->ready,
			strerror(errno));
		dl_nfq_close(&d->q);
		return 1;
	}
	return GO_ON;
}

/* Loop: release what is due, sleep until the next target (or an outage
 * start, a packet, a signal), take new packets; until SIGTERM/SIGINT.
 * Returns 0, or 1 after a failure that ended it. */
static int run_loop(struct dl *d, const sigset_t *orig)
{
	while (!g_stop) {
		struct pollfd pfd = { .fd = d->q.fd, .events = POLLIN };
		struct timespec ts, *tsp = NULL;
		int r;

		if (release_due(d, 0) < 0) {
			fprintf(stderr, PROG ": sending verdict failed: %s\n",
				strerror(errno));
			return 1;
		}
		if (d->count > 0) {
			int64_t wake = next_wake(d), wait;

			/* An outage start must drop what waits for the link. */
			if (d->next_outage < d->out.n &&
			    d->t0_ns + d->out.start_ns[d->next_outage] < wake)
				wake = d->t0_ns + d->out.start_ns[d->next_outage];
			wait = wake - mono_ns();

			if (wait < 0)
				wait = 0;
			ts.tv_sec = wait / 1000000000LL;
			ts.tv_nsec = wait % 1000000000LL;
			tsp = &ts;
		}
		r = ppoll(&pfd, 1, tsp, orig);
		d->st.wakeups++;
		if (g_t0_pending) {
			g_t0_pending = 0;
			if (apply_t0_file(d) < 0)
				return 1;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, PROG ": ppoll: %s\n", strerror(errno));
			return 1;
		}
		if (r > 0 && dl_nfq_drain(&d->q, 256) < 0) {
			fprintf(stderr, PROG ": netlink receive failed: %s\n",
				strerror(errno));
			return 1;
		}
	}
	return 0;
}

/* Shutdown: take what is already queued to us, let everything held go
 * now, then read the kernel's drop counters before the queue goes; close
 * the logs and write the statistics. Returns the exit status. */
static int finish(const struct cli *o, struct dl *d, struct dl_run_info *ri,
		  int rc)
{
	dl_nfq_drain(&d->q, 1 << 20);
	release_due(d, 1);
	dl_nfq_proc_counters((unsigned)o->queue, &d->st.kernel_queue_dropped,
			     &d->st.kernel_user_dropped);
	d->st.enobufs = d->q.enobufs;
	d->st.truncated = d->q.truncated;
	d->st.recv_calls = d->q.recv_calls;
	d->st.drops_local += d->q.nl_errors;
	dl_nfq_close(&d->q);
	if (d->q.nl_errors)
		fprintf(stderr, PROG ": %" PRIu64 " netlink errors (last: %s)\n",
			d->q.nl_errors, strerror(d->q.last_nl_error));

	ri->queue = (unsigned)o->queue;
	ri->t0_ns = d->t0_ns;
	ri->end_ns = mono_ns();
	ri->loss = d->loss.kind == DL_LOSS_INDEPENDENT ? d->loss.prob : 0.0;
	ri->extra = write_extra;
	ri->extra_ctx = d;
	ri->seed = o->seed;
	ri->maxlen = (unsigned)o->maxlen;
	ri->rt_prio = (int)o->rtprio;
	ri->batch_tolerance_ns = d->tol_ns;
	ri->schedule = o->sched_path;
	if (d->rlog && fclose(d->rlog) != 0) {
		fprintf(stderr, PROG ": writing release log failed: %s\n",
			strerror(errno));
		rc = 1;
	}
	if (d->steplog && fclose(d->steplog) != 0) {
		fprintf(stderr, PROG ": writing step log failed: %s\n",
			strerror(errno));
		rc = 1;
	}
	if (o->stats_path && dl_stats_write_json(o->stats_path, &d->st, ri) < 0) {
		fprintf(stderr, PROG ": cannot write stats %s: %s\n", o->stats_path,
			strerror(errno));
		rc = 1;
	}
	dl_stats_free(&d->st);
	dl_schedule_free(&d->sched);
	dl_cap_free(&d->link);
	free(d->ring);
	return rc;
}

/* parse -> build -> loop -> finish (Mahimahi's shells have the same shape). */
int main(int argc, char **argv)
{
	static struct dl d;
	struct cli o;
	struct dl_run_info ri;
	sigset_t orig;
	int rc;

	if ((rc = parse_cli(argc, argv, &o, &d)) != GO_ON)
		return rc;
	if ((rc = build(&o, &d, &ri, &orig)) != GO_ON)
		return rc;
	rc = run_loop(&d, &orig);
	return finish(&o, &d, &ri, rc);
}
