/* Capacity models; see capacity.h and README.md ("Capacity").
 *
 * Trace semantics follow Mahimahi's LinkQueue (src/frontend/link_queue.cc,
 * rationalize()): at each opportunity time o, 1504 bytes may leave; the
 * packet at the head takes what it needs, a packet larger than what is left
 * continues in the next opportunity, and what is left over goes to the next
 * queued packet. When the queue is empty the rest of the opportunity is lost,
 * and opportunities with nothing queued are lost too (nothing accumulates).
 * Opportunities at times <= a packet's arrival are spent before it is
 * enqueued, so a packet can only use opportunities strictly after its
 * arrival. Its departure is the opportunity that carries its last byte. */
#define _GNU_SOURCE
#include "capacity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

/* ------------------------------------------------------------ outages */

int dl_outage_add(struct dl_outages *o, const char *arg, char *err,
		  size_t errlen)
{
	unsigned long long s, e;
	int used = 0;

	if (o->n >= DL_MAX_OUTAGES) {
		snprintf(err, errlen, "--outage: more than %d outages",
			 DL_MAX_OUTAGES);
		return -1;
	}
	if (arg[0] < '0' || arg[0] > '9' ||
	    sscanf(arg, "%llu:%llu%n", &s, &e, &used) != 2 ||
	    arg[used] != '\0' || s >= e || e > (unsigned long long)INT64_MAX / 4000) {
		snprintf(err, errlen,
			 "--outage: invalid interval '%s' (START_US:END_US, integers, START < END)",
			 arg);
		return -1;
	}
	if (o->n > 0 && (int64_t)s * 1000 < o->end_ns[o->n - 1]) {
		snprintf(err, errlen,
			 "--outage: interval '%s' starts before the previous one ends (give them sorted and disjoint)",
			 arg);
		return -1;
	}
	o->start_ns[o->n] = (int64_t)s * 1000;
	o->end_ns[o->n] = (int64_t)e * 1000;
	o->n++;
	return 0;
}

/* Index of the last outage with start <= t, or -1. */
static long outage_idx(const struct dl_outages *o, int64_t t)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->start_ns[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

int dl_outage_at(const struct dl_outages *o, int64_t t, int64_t *end)
{
	long i;

	if (!o || o->n == 0)
		return 0;
	i = outage_idx(o, t);
	if (i >= 0 && t < o->end_ns[i]) {
		if (end)
			*end = o->end_ns[i];
		return 1;
	}
	return 0;
}

int64_t dl_outage_next_start(const struct dl_outages *o, int64_t t)
{
	long i;

	if (!o || o->n == 0)
		return INT64_MAX;
	i = outage_idx(o, t) + 1;
	return (size_t)i < o->n ? o->start_ns[i] : INT64_MAX;
}

/* ------------------------------------------------------------ loading */

int dl_cap_load_trace(struct dl_capacity *c, const char *path, char *err,
		      size_t errlen)
{
	FILE *f = fopen(path, "r");
	char buf[64];
	size_t cap = 0;
	long lineno = 0;
	/* Bounded so that cycle * period stays far from int64 overflow. */
	const uint64_t max_ms = 1ULL << 36;

	if (!f) {
		snprintf(err, errlen, "trace %s: cannot open: %s", path,
			 strerror(errno));
		return -1;
	}
	c->kind = DL_CAP_TRACE;
	c->path = path;
	while (fgets(buf, sizeof(buf), f)) {
		size_t len = strlen(buf);
		uint64_t ms = 0;

		lineno++;
		if (len == sizeof(buf) - 1 && buf[len - 1] != '\n') {
			snprintf(err, errlen, "trace %s line %ld: line too long",
				 path, lineno);
			goto bad;
		}
		if (len > 0 && buf[len - 1] == '\n')
			buf[--len] = '\0';
		if (len == 0) {
			snprintf(err, errlen,
				 "trace %s line %ld: empty line (Mahimahi format: one integer millisecond timestamp per line)",
				 path, lineno);
			goto bad;
		}
		for (size_t i = 0; i < len; i++) {
			if (buf[i] < '0' || buf[i] > '9' || ms > max_ms) {
				snprintf(err, errlen,
					 "trace %s line %ld: not a non-negative integer millisecond timestamp (at most %llu)",
					 path, lineno, (unsigned long long)max_ms);
				goto bad;
			}
			ms = ms * 10 + (uint64_t)(buf[i] - '0');
		}
		if (ms > max_ms) {
			snprintf(err, errlen,
				 "trace %s line %ld: timestamp larger than %llu ms",
				 path, lineno, (unsigned long long)max_ms);
			goto bad;
		}
		if (c->n_opp > 0 && (int64_t)ms * 1000000 < c->opp_ns[c->n_opp - 1]) {
			snprintf(err, errlen,
				 "trace %s line %ld: timestamp %" PRIu64
				 " ms is smaller than the previous one (timestamps must be non-decreasing)",
				 path, lineno, ms);
			goto bad;
		}
		if (c->n_opp == DL_TRACE_MAX_LINES) {
			snprintf(err, errlen, "trace %s: more than %u lines", path,
				 DL_TRACE_MAX_LINES);
			goto bad;
		}
		if (c->n_opp == cap) {
			size_t nc = cap ? cap * 2 : 4096;
			int64_t *np = realloc(c->opp_ns, nc * sizeof(*np));

			if (!np) {
				snprintf(err, errlen, "trace %s: out of memory", path);
				goto bad;
			}
			c->opp_ns = np;
			cap = nc;
		}
		c->opp_ns[c->n_opp++] = (int64_t)ms * 1000000;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "trace %s: read error: %s", path,
			 strerror(errno));
		goto bad;
	}
	if (c->n_opp == 0) {
		snprintf(err, errlen, "trace %s: no timestamps", path);
		goto bad;
	}
	c->period_ns = c->opp_ns[c->n_opp - 1];
	if (c->period_ns == 0) {
		snprintf(err, errlen,
			 "trace %s: the last timestamp must be > 0 (it is the trace's period)",
			 path);
		goto bad;
	}
	fclose(f);
	if (c->opp_bytes == 0)
		c->opp_bytes = DL_MAHIMAHI_OPP_BYTES;
	return 0;
bad:
	fclose(f);
	free(c->opp_ns);
	c->opp_ns = NULL;
	c->n_opp = 0;
	return -1;
}

int dl_cap_load_rate(struct dl_capacity *c, const char *path, char *err,
		     size_t errlen)
{
	/* 0 .. 100 Gbit/s. A zero rate holds packets (like a gap in a
	 * trace); an outage drops them. It must end somewhere, though. */
	static const struct dl_schedule_kind rate = {
		"rate schedule", "rate_bps", 0, 100000000000LL, 1, ""
	};
	int any = 0;

	c->kind = DL_CAP_RATE;
	c->path = path;
	if (dl_schedule_load_kind(path, &rate, &c->rate, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < c->rate.n; i++)
		any |= c->rate.pts[i].delay_ns > 0;
	if (c->rate.period_ns == 0 ? c->rate.pts[c->rate.n - 1].delay_ns == 0 : !any) {
		snprintf(err, errlen,
			 "rate schedule %s: the rate would stay 0 forever (%s); use an outage to cut the link",
			 path, c->rate.period_ns == 0 ? "the last point of a non-repeating schedule is 0" :
			 "every point is 0");
		dl_schedule_free(&c->rate);
		return -1;
	}
	return 0;
}

int dl_cap_init_queue(struct dl_capacity *c, size_t qcap)
{
	for (c->qcap = 1; c->qcap < qcap; c->qcap <<= 1)
		;
	c->q = calloc(c->qcap, sizeof(*c->q));
	return c->q ? 0 : -1;
}

void dl_cap_free(struct dl_capacity *c)
{
	free(c->opp_ns);
	free(c->q);
	dl_schedule_free(&c->rate);
	c->opp_ns = NULL;
	c->q = NULL;
}

/* ------------------------------------------------------------ trace engine */

int64_t dl_cap_opp_time(const struct dl_capacity *c, int64_t g)
{
	int64_t n = (int64_t)c->n_opp;
	int64_t cyc = floor_div(g, n);

	return cyc * c->period_ns + c->opp_ns[g - cyc * n];
}

/* Global index of the first opportunity with time > t. */
static int64_t first_after(const struct dl_capacity *c, int64_t t)
{
	int64_t cyc = floor_div(t, c->period_ns);
	int64_t within = t - cyc * c->period_ns;
	size_t lo = 0, hi = c->n_opp;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->opp_ns[mid] <= within)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* within < period == opp_ns[n-1], so lo < n. */
	return cyc * (int64_t)c->n_opp + (int64_t)lo;
}

/* g, or the first opportunity after it that is not inside an outage (an
 * opportunity at an outage's end is valid: outages are [start, end)). */
static int64_t valid_from(const struct dl_capacity *c, int64_t g)
{
	int64_t end;

	while (dl_outage_at(c->outages, dl_cap_opp_time(c, g), &end)) {
		int64_t h = first_after(c, end - 1);

		g = h > g ? h : g + 1;
	}
	return g;
}

static int64_t trace_serve(struct dl_capacity *c, int64_t t, uint32_t cost,
			   int64_t *start)
{
	int64_t g;
	uint32_t left;

	if (c->have_cur && c->cur_left > 0 && dl_cap_opp_time(c, c->cur_g) > t) {
		/* Queued while the previous packet was being carried by an
		 * opportunity after our arrival: use its leftover bytes. */
		g = c->cur_g;
		left = c->cur_left;
	} else {
		if (c->have_cur && dl_cap_opp_time(c, c->cur_g) > t)
			g = c->cur_g + 1;
		else
			g = first_after(c, t);
		g = valid_from(c, g);
		left = c->opp_bytes;
		c->opportunities_used++;
	}
	*start = dl_cap_opp_time(c, g);
	while (cost > left) {
		cost -= left;
		g = valid_from(c, g + 1);
		left = c->opp_bytes;
		c->opportunities_used++;
	}
	left -= cost;
	c->have_cur = 1;
	c->cur_g = g;
	c->cur_left = left;
	return dl_cap_opp_time(c, g);
}

/* ------------------------------------------------------------ rate engine */

/* Serialise cost bytes starting at s at the scheduled rate, skipping
 * outages. Capacity is counted in bit*ns so every step is exact. */
static int64_t rate_serve(struct dl_capacity *c, int64_t s, uint32_t cost)
{
	__int128 need = (__int128)cost * 8 * 1000000000;
	int64_t t = s, end;

	for (;;) {
		int64_t r, nb, ob;

		if (dl_outage_at(c->outages, t, &end)) {
			t = end;
			continue;
		}
		r = dl_schedule_delay(&c->rate, t); /* bit/s */
		nb = dl_schedule_next_break(&c->rate, t);
		ob = dl_outage_next_start(c->outages, t);
		if (ob < nb)
			nb = ob;
		if (r == 0) { /* finite: checked at load */
			t = nb;
			continue;
		}
		if (nb == INT64_MAX || (__int128)r * (nb - t) >= need)
			return t + (int64_t)((need + r - 1) / r);
		need -= (__int128)r * (nb - t);
		t = nb;
	}
}

/* ------------------------------------------------------------ queue */

int dl_cap_arrive(struct dl_capacity *c, int64_t t, uint32_t ip_len,
		  int64_t *depart, uint64_t *qpkts, uint64_t *qbytes)
{
	uint32_t cost = ip_len + c->overhead;
	int64_t start, finish;
	struct dl_qentry *e;

	/* Packets whose service started at or before t have left the queue
	 * (Mahimahi runs rationalize(now) before enqueueing). */
	while (c->qcount > 0 && c->q[c->qhead].start_ns <= t) {
		c->qbytes -= c->q[c->qhead].cost;
		c->qhead = (c->qhead + 1) & (c->qcap - 1);
		c->qcount--;
	}
	*qpkts = c->qcount;
	*qbytes = c->qbytes;
	/* Drop-tail exactly like Mahimahi's DropTailPacketQueue::enqueue:
	 * accept iff the queue with this packet stays within every limit. */
	if ((c->limit_packets && c->qcount + 1 > c->limit_packets) ||
	    (c->limit_bytes && c->qbytes + cost > c->limit_bytes) ||
	    c->qcount == c->qcap) {
		c->queue_drops++;
		return 1;
	}
	if (c->kind == DL_CAP_TRACE) {
		finish = trace_serve(c, t, cost, &start);
	} else {
		start = t > c->last_finish_ns ? t : c->last_finish_ns;
		finish = rate_serve(c, start, cost);
		c->last_finish_ns = finish;
	}
	c->served_packets++;
	c->served_bytes += cost;
	if (start > t) {
		e = &c->q[(c->qhead + c->qcount) & (c->qcap - 1)];
		e->start_ns = start;
		e->cost = cost;
		c->qcount++;
		c->qbytes += cost;
		if (c->qcount > c->max_q_packets)
			c->max_q_packets = c->qcount;
		if (c->qbytes > c->max_q_bytes)
			c->max_q_bytes = c->qbytes;
	}
	*depart = finish;
	return 0;
}

void dl_cap_reset(struct dl_capacity *c, int64_t t)
{
	c->qhead = c->qcount = 0;
	c->qbytes = 0;
	c->have_cur = 0;
	c->cur_left = 0;
	c->last_finish_ns = t;
}

void dl_cap_shift(struct dl_capacity *c, int64_t delta)
{
	for (size_t i = 0; i < c->qcount; i++)
		c->q[(c->qhead + i) & (c->qcap - 1)].start_ns -= delta;
	if (c->kind == DL_CAP_TRACE) {
		/* The trace's opportunities are on the t0 clock: the next packet
		 * takes the first one after its arrival on the new clock. (Before
		 * t0 is fixed the link carries only the pre-run check, drained by
		 * then; a packet still queued keeps its departure.) */
		c->have_cur = 0;
		c->cur_left = 0;
	} else {
		c->last_finish_ns -= delta;
	}
}
