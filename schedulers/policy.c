/* The decision logic of the minrtt, bdp and ecf schedulers (see policy.h). */
#include "policy.h"

#include <stdio.h>
#include <string.h>

bool pol_limited_now(const struct pol_params *p, const struct pol_sf_in *in)
{
	bool window = in->in_flight >= in->cwnd && in->unsent > 0;
	/* An autotuned sk_sndbuf grows while the subflow needs more (tcp_sndbuf_expand), so only the
	 * kernel's own test (sk_stream_memory_free) means full: a small early buffer sits near full
	 * all through slow start, and counting that as limited spilled the startup onto the other
	 * path (measured: bdp's share on its path 0.87 instead of 0.94). A fixed bound cannot grow:
	 * there a bulk sender kept its subflow at wmem_queued 109736 of sk_sndbuf 112500 (the rest of
	 * the connection's equally bounded buffer held), the exact test fired in 37 % of samples and
	 * bdp never opened the second path; within two segments (in skb truesize, ~3 MSS) is full. */
	uint64_t slack = p->sndbuf_bounded ? 3ull * in->mss : 0;
	bool buffer = in->sndbuf && (uint64_t)in->wmem_queued + slack >= in->sndbuf;
	uint64_t rate = in->delivery_Bps;
	uint64_t backlog;

	/* The receiver, not the path, holds the data back (a zero window included: a player that
	 * stopped reading closes it, and that must not open a second path). */
	if ((uint64_t)in->unacked + in->mss > in->snd_wnd)
		return false;
	if (in->pacing_Bps && in->pacing_Bps != ~0ull && in->pacing_Bps > rate)
		rate = in->pacing_Bps; /* the faster of the two: the conservative threshold */
	backlog = rate * p->backlog_ns / 1000000000ull;
	if (backlog < 4ull * in->mss)
		backlog = 4ull * in->mss;
	return window || buffer || in->unsent > backlog;
}

static struct pol_sf_state *state_for(struct pol_conn_state *st, uint64_t key)
{
	for (int i = 0; i < st->n; i++)
		if (st->sf[i].key == key)
			return &st->sf[i];
	if (st->n >= POL_MAX_SF)
		return NULL;
	memset(&st->sf[st->n], 0, sizeof(st->sf[0]));
	st->sf[st->n].key = key;
	return &st->sf[st->n++];
}

/* BBR's own model when the CC is BBR (bw x min_rtt); otherwise the windowed
 * max delivery rate x TCP's min RTT; before any rate sample, what TCP is
 * allowed in flight (cwnd x mss), the only capacity belief it has then. */
static uint64_t bdp_estimate(const struct pol_params *p, struct pol_sf_state *s,
			     const struct pol_sf_in *in, uint64_t now, int *src)
{
	if (in->is_bbr && in->bbr_bw_Bps && in->bbr_min_rtt_us && in->bbr_min_rtt_us != ~0u) {
		*src = 1;
		return in->bbr_bw_Bps * in->bbr_min_rtt_us / 1000000;
	}
	if (in->delivery_Bps) {
		if (in->delivery_Bps >= s->bw_max_Bps || now - s->bw_max_t_ns > p->bw_window_ns) {
			s->bw_max_Bps = in->delivery_Bps;
			s->bw_max_t_ns = now;
		}
	}
	if (s->bw_max_Bps && in->min_rtt_us && in->min_rtt_us != ~0u) {
		*src = 2;
		return s->bw_max_Bps * in->min_rtt_us / 1000000;
	}
	*src = 3;
	return (uint64_t)in->cwnd * in->mss;
}

/* ECF (Lim et al., "ECF: An MPTCP Path Scheduler to Manage Heterogeneous Paths", CoNEXT 2017,
 * Algorithm 1). The fastest subflow f (lowest srtt) is unavailable; should the slower s get data?
 * k bytes wait to be sent. Waiting for f takes n = 1 + k / cwnd_f rounds of rtt_f; sending on s
 * takes rtt_s + delta (delta: the larger RTT deviation). If waiting is faster (with beta added
 * while it already waits, against flapping), s is still used unless its own share would take
 * longer than f's next two rounds: k / cwnd_s x rtt_s >= 2 rtt_f + delta. Returns true to use s. */
static bool ecf_use_slower(const struct pol_params *p, struct pol_conn_state *st, const struct pol_sf_in *f,
			   const struct pol_sf_in *s, double k, char *why, size_t len)
{
	double mss = f->mss ? f->mss : 1448;
	double cwnd_f = (f->cwnd ? f->cwnd : 1) * mss, cwnd_s = (s->cwnd ? s->cwnd : 1) * mss;
	double delta = f->rtt_dev_us > s->rtt_dev_us ? f->rtt_dev_us : s->rtt_dev_us;
	double wait_f = (1.0 + k / cwnd_f) * f->srtt_us;
	double via_s = s->srtt_us + delta;

	if (wait_f < (1.0 + (st->ecf_waiting ? p->hysteresis : 0.0)) * via_s) {
		if (k / cwnd_s * s->srtt_us >= 2.0 * f->srtt_us + delta) {
			st->ecf_waiting = true;
			snprintf(why, len, "; ecf wait %.0f < %.0f us", wait_f, via_s);
			return false;
		}
		snprintf(why, len, "; ecf slower %.0f us ok", k / cwnd_s * s->srtt_us);
		return true;
	}
	st->ecf_waiting = false;
	snprintf(why, len, "; ecf slower %.0f < wait %.0f us", via_s, wait_f);
	return true;
}

void pol_decide(const struct pol_params *p, struct pol_conn_state *st, const struct pol_sf_in *in,
		int n, uint64_t now, struct pol_out *out)
{
	int order[POL_MAX_SF], m = 0;
	struct pol_sf_state *ss[POL_MAX_SF];
	bool held[POL_MAX_SF];
	bool exhausted;
	int pref = -1;

	memset(out, 0, sizeof(*out));
	out->preferred = -1;
	if (n > POL_MAX_SF)
		n = POL_MAX_SF;
	for (int i = 0; i < n; i++) {
		ss[i] = state_for(st, in[i].key);
		if (ss[i] && !ss[i]->first_ns)
			ss[i]->first_ns = now;
		out->limited[i] = pol_limited_now(p, &in[i]);
		/* Exhausted: limited for exhaust_ns with no break longer than exhaust_ns / 4 (0: at
		 * once). A burst the path drains within it is the path's to carry; only a backlog that
		 * outlasts it opens the next path (bdp's stickiness; minrtt opens at once). Breaks are
		 * tolerated because a saturated subflow's limited-ness flips per ACK (measured: a bulk
		 * sender with a bounded send buffer sat at wmem_queued a segment below sk_sndbuf,
		 * limited in 37 % of samples, and an unbroken-stretch rule never opened the next path). */
		exhausted = out->limited[i];
		if (ss[i]) {
			if (out->limited[i]) {
				if (!ss[i]->limited_since_ns || now - ss[i]->limited_last_ns > p->exhaust_ns / 4)
					ss[i]->limited_since_ns = now;
				ss[i]->limited_last_ns = now;
			}
			exhausted = out->limited[i] && now - ss[i]->limited_since_ns >= p->exhaust_ns;
			if (exhausted)
				ss[i]->last_limited_ns = now;
		}
		/* exhausted, or was within release_ns: avoids flapping per ACK */
		held[i] = exhausted ||
			  (ss[i] && ss[i]->last_limited_ns && now - ss[i]->last_limited_ns < p->release_ns);
		if (p->kind == POL_BDP && ss[i]) {
			out->est_bytes[i] = bdp_estimate(p, ss[i], &in[i], now, &out->est_src[i]);
			ss[i]->est_bytes = out->est_bytes[i];
			ss[i]->est_src = out->est_src[i];
		}
		if (in[i].usable && ss[i])
			order[m++] = i;
	}
	if (!m) {
		snprintf(out->reason, sizeof(out->reason), "no usable subflow");
		return;
	}
	/* a choice made before a subflow joined was no choice between them */
	if (m > st->usable)
		st->preferred_since_ns = 0;
	st->usable = m;
	/* rank the usable subflows: minrtt and ecf by srtt ascending, bdp by estimate descending */
	for (int a = 1; a < m; a++) {
		int v = order[a], b = a - 1;

		while (b >= 0) {
			int u = order[b];
			bool after = p->kind != POL_BDP ? in[u].srtt_us > in[v].srtt_us
							 : out->est_bytes[u] < out->est_bytes[v];
			if (!after)
				break;
			order[b + 1] = u;
			b--;
		}
		order[b + 1] = v;
	}
	if (p->kind != POL_BDP) {
		pref = order[0];
		snprintf(out->reason, sizeof(out->reason), "lowest srtt %u us", in[pref].srtt_us);
	} else {
		/* sticky: keep the current choice unless it is gone or another
		 * estimate exceeds it by the hysteresis */
		int cur = -1;

		for (int k = 0; k < m; k++)
			if (in[order[k]].key == st->preferred)
				cur = order[k];
		pref = order[0];
		if (cur >= 0 && cur != pref &&
		    ((double)out->est_bytes[pref] <= (double)out->est_bytes[cur] * (1.0 + p->hysteresis) ||
		     now - st->preferred_since_ns < p->dwell_ns))
			pref = cur;
		if (pref != order[0]) {
			/* move the sticky choice to the front of the ranking */
			int k = 0;

			while (order[k] != pref)
				k++;
			for (; k > 0; k--)
				order[k] = order[k - 1];
			order[0] = pref;
		}
		snprintf(out->reason, sizeof(out->reason), "bdp %llu B (src %d)",
			 (unsigned long long)out->est_bytes[pref], out->est_src[pref]);
	}
	if (in[pref].key != st->preferred) {
		if (st->preferred)
			st->preferred_changes++;
		st->preferred = in[pref].key;
		st->preferred_since_ns = now;
	}
	out->preferred = pref;
	/* the preferred subflow, and the next ones while each before is limited (ecf: and only
	 * where the data would complete earlier than by waiting for the fastest) */
	out->allowed[order[0]] = true;
	for (int k = 0; k + 1 < m && held[order[k]]; k++) {
		size_t l = strlen(out->reason);

		if (p->kind == POL_ECF) {
			double queued = in[order[0]].msk_unsent;

			for (int j = 0; j < m; j++)
				queued += in[order[j]].unsent;
			if (!ecf_use_slower(p, st, &in[order[0]], &in[order[k + 1]], queued,
					    out->reason + l, sizeof(out->reason) - l))
				break;
		} else if (k == 0) {
			snprintf(out->reason + l, sizeof(out->reason) - l, "; preferred limited");
		}
		out->allowed[order[k + 1]] = true;
	}
	/* A subflow that gets no data gets no RTT or rate samples either: its
	 * srtt would stay at whatever it was when it was excluded. So an
	 * excluded subflow idle for probe_interval is opened for probe_ns
	 * (several RTT samples; srtt moves 1/8 per sample). */
	if (!p->probe_interval_ns)
		return;
	for (int k = 0; k < m; k++) {
		int i = order[k];
		struct pol_sf_state *s = ss[i];
		uint64_t last = in[i].last_data_ns > s->first_ns ? in[i].last_data_ns : s->first_ns;

		if (out->allowed[i])
			continue;
		if (now >= s->probe_until_ns && now - last > p->probe_interval_ns &&
		    now - s->probe_start_ns > p->probe_interval_ns) {
			s->probe_start_ns = now;
			s->probe_until_ns = now + p->probe_ns;
			st->probes++;
		}
		if (now < s->probe_until_ns) {
			size_t l = strlen(out->reason);

			out->allowed[i] = true;
			out->probing[i] = true;
			snprintf(out->reason + l, sizeof(out->reason) - l, "; probe");
		}
	}
}
