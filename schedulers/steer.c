// SPDX-License-Identifier: GPL-2.0-only
/*
 * mpvlab-steer: the steering MPTCP schedulers (minrtt, bdp, ecf: policy.c) as a steering controller
 * for a kernel whose only MPTCP scheduler is `default`.
 *
 * Loop: every --period-us, read what BPF saw of each subflow at the
 * kernel's last scheduling decision (steer.bpf.c), run the policy
 * (policy.c) per connection, and apply its allowed set as per-subflow
 * backup flags through mptcp_pm SET_FLAGS (pm_genl.c) — only where the
 * wanted flag differs from the one applied. The kernel's default scheduler
 * then gives new data only to non-backup subflows. The same process keeps
 * the userspace path manager's join duty: it is subscribed to the
 * mptcp_pm_events group, without which the server refuses MP_JOINs — and
 * its announce duty: with --announce ADDR (one per further server address,
 * `per-path` addressing) it sends an ADD_ADDR for each on every connection
 * as soon as the connection is established.
 *
 * Writes (in --out-dir): priority_changes.csv, steering.csv,
 * controller_samples.csv, pm_events.csv, announces.csv, steer_summary.json.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/mptcp.h>

#include "pm_genl.h"
#include "policy.h"
#include "steer.h"
#include "steer.skel.h"

#define MAX_SF 4096
#define MAX_CONN 256
#define MAX_LAT 65536
#define MAX_ANNOUNCE 8

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct opts {
	const char *netns, *out_dir, *ready_file, *policy;
	uint64_t t0_ns;
	uint64_t period_ns;
	uint64_t sample_period_ns;
	struct pol_params pp;
	bool observe; /* default scheduler: record only, never touch flags */
	uint32_t announce[MAX_ANNOUNCE]; /* server addresses to ADD_ADDR (network order); id = index + 1 */
	int nannounce;
};

struct sf_entry {
	struct mps_key key;
	struct mps_sf v;
};

struct applied {
	struct mps_key key;
	int backup; /* flag we last applied (or the kernel's at first sight) */
	int allowed; /* policy output last written to mps_ctrl, -1 none */
	uint32_t epoch;
};

struct conn {
	uint64_t msk;
	uint32_t token;
	struct pol_conn_state ps;
	struct applied ap[POL_MAX_SF];
	int nap;
	uint64_t priority_changes, set_errors;
	/* SET_FLAGS calls that failed because the kernel was tearing the subflow
	 * down: see AT_CLOSE_WINDOW_NS. pending_* are failures not yet explained. */
	uint64_t set_at_close, pending_errs, pending_since, closing_since;
};

/*
 * A flag flip can race the connection's close: the tick reads a subflow from
 * the BPF map, the kernel removes it, SET_FLAGS answers "subflow not found",
 * and the CLOSED / SUB_CLOSED event arrives a millisecond later. Such a failure
 * is not a steering error. A failure counts as at_close when that event comes
 * within this window before or after it; every other failure is an error.
 */
#define AT_CLOSE_WINDOW_NS 200000000ull

struct lat {
	struct mps_key key;
	uint32_t epoch;
	uint32_t subflow_id;
	uint64_t decided, assigned, wire;
};

static struct conn conns[MAX_CONN];
static int nconn;
static struct lat lats[MAX_LAT];
static int nlat;
static struct sf_entry sfs[MAX_SF];
static uint64_t set_calls, set_errs, set_at_close, set_ns_total, set_ns_max, lost_user;
static uint64_t ann_calls, ann_errs;
static FILE *f_prio, *f_steer, *f_samples, *f_ev, *f_ann;
static uint64_t t0;

static double rel_s(uint64_t ns)
{
	return ((double)(int64_t)(ns - t0)) / 1e9;
}

static void addr_str(char *buf, size_t n, uint32_t a, uint16_t p)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	snprintf(buf, n, "%s:%u", ip, p);
}

static void subflow_str(char *buf, size_t n, const struct mps_sf *s)
{
	char l[32], r[32];

	addr_str(l, sizeof(l), s->laddr, s->lport);
	addr_str(r, sizeof(r), s->raddr, s->rport);
	snprintf(buf, n, "%s-%s", l, r);
}

static struct conn *conn_for(uint64_t msk, uint32_t token)
{
	for (int i = 0; i < nconn; i++)
		if (conns[i].msk == msk && conns[i].token == token)
			return &conns[i];
	if (nconn >= MAX_CONN) {
		lost_user++;
		return NULL;
	}
	memset(&conns[nconn], 0, sizeof(conns[0]));
	conns[nconn].msk = msk;
	conns[nconn].token = token;
	return &conns[nconn++];
}

static struct applied *applied_for(struct conn *c, const struct mps_key *k, const struct mps_sf *s)
{
	for (int i = 0; i < c->nap; i++)
		if (c->ap[i].key.ptr == k->ptr && c->ap[i].key.token == k->token)
			return &c->ap[i];
	if (c->nap >= POL_MAX_SF)
		return NULL;
	c->ap[c->nap].key = *k;
	c->ap[c->nap].backup = (int)s->backup;
	c->ap[c->nap].allowed = -1;
	c->ap[c->nap].epoch = 0;
	return &c->ap[c->nap++];
}

static int handle_event(void *ctx, void *data, size_t len)
{
	const struct mps_event *e = data;

	(void)ctx;
	if (len < sizeof(*e))
		return 0;
	if (e->type == MPS_EV_ASSIGN) {
		if (nlat >= MAX_LAT) {
			lost_user++;
			return 0;
		}
		lats[nlat].key = e->key;
		lats[nlat].epoch = e->epoch;
		lats[nlat].decided = e->decided_ns;
		lats[nlat].assigned = e->t_ns;
		lats[nlat].wire = 0;
		lats[nlat].subflow_id = 0;
		for (int i = 0; i < nconn; i++)
			if (conns[i].token == e->key.token)
				lats[nlat].subflow_id = 0; /* filled at write time */
		nlat++;
	} else if (e->type == MPS_EV_WIRE) {
		for (int i = nlat - 1; i >= 0; i--)
			if (lats[i].key.ptr == e->key.ptr && lats[i].key.token == e->key.token &&
			    lats[i].epoch == e->epoch && !lats[i].wire) {
				lats[i].wire = e->t_ns;
				break;
			}
	}
	return 0;
}

static int read_subflows(int fd)
{
	struct mps_key k, next;
	int n = 0;
	void *prev = NULL;

	while (n < MAX_SF && bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &sfs[n].v) == 0) {
			sfs[n].key = next;
			n++;
		}
		k = next;
		prev = &k;
	}
	return n;
}

static void to_pol_input(const struct mps_sf *s, uint64_t key, struct pol_sf_in *in)
{
	memset(in, 0, sizeof(*in));
	in->key = key;
	in->usable = !s->closed && s->tcp_state == 1;
	in->srtt_us = s->srtt_us;
	in->min_rtt_us = s->min_rtt_us;
	in->cwnd = s->cwnd;
	in->in_flight = s->in_flight;
	in->unsent = s->unsent;
	in->wmem_queued = s->wmem_queued;
	in->sndbuf = s->sndbuf;
	in->snd_wnd = s->snd_wnd;
	in->unacked = s->unacked;
	in->rtt_dev_us = s->rtt_dev_us;
	in->msk_unsent = s->msk_unsent;
	in->mss = s->mss;
	if (s->rate_interval_us)
		in->delivery_Bps = (uint64_t)s->rate_delivered * s->mss * 1000000ull / s->rate_interval_us;
	in->pacing_Bps = s->pacing_rate;
	in->last_data_ns = s->last_data_ns;
	in->is_bbr = s->is_bbr;
	/* bbr_get_info(): bw * mss * USEC_PER_SEC >> BW_SCALE (24) */
	in->bbr_bw_Bps = ((uint64_t)s->bbr_bw_raw * s->mss * 1000000ull) >> 24;
	in->bbr_min_rtt_us = s->bbr_min_rtt_us;
}

static void write_ctrl(int fd, const struct mps_key *k, struct applied *a, int allowed, uint64_t now)
{
	struct mps_ctrl c = {0};

	if (allowed && a->allowed == 0)
		a->epoch++; /* newly chosen: a steering interval starts now */
	a->allowed = allowed;
	c.allowed = (uint32_t)allowed;
	c.epoch = a->epoch;
	c.decided_ns = now;
	bpf_map_update_elem(fd, k, &c, BPF_ANY);
}

static void tick(const struct opts *o, struct steer_bpf *skel, struct pm *pm, uint64_t now, bool sample)
{
	int n = read_subflows(bpf_map__fd(skel->maps.mps_sf));
	int ctrl_fd = bpf_map__fd(skel->maps.mps_ctrl);
	bool done[MAX_SF] = {0};

	for (int i = 0; i < n; i++) {
		struct pol_sf_in in[POL_MAX_SF];
		int idx[POL_MAX_SF], m = 0;
		struct pol_out out;
		struct conn *c;

		if (done[i])
			continue;
		for (int j = i; j < n && m < POL_MAX_SF; j++) {
			if (done[j] || sfs[j].v.msk != sfs[i].v.msk || sfs[j].key.token != sfs[i].key.token)
				continue;
			done[j] = true;
			idx[m] = j;
			to_pol_input(&sfs[j].v, sfs[j].key.ptr, &in[m]);
			m++;
		}
		c = conn_for(sfs[i].v.msk, sfs[i].key.token);
		if (!c)
			continue;
		{
			bool any = false;

			for (int k = 0; k < m; k++)
				any |= in[k].usable;
			if (!any)
				continue; /* connection over: leave it alone */
		}
		if (o->observe) {
			memset(&out, 0, sizeof(out));
			for (int k = 0; k < m; k++)
				out.limited[k] = pol_limited_now(&o->pp, &in[k]);
		} else {
			pol_decide(&o->pp, &c->ps, in, m, now, &out);
		}
		/* policy output first (conformance reference), then the flags:
		 * opening before closing, so that never all are backup */
		for (int pass = 0; pass < 2 && !o->observe; pass++) {
			for (int k = 0; k < m; k++) {
				const struct sf_entry *e = &sfs[idx[k]];
				struct applied *a = applied_for(c, &e->key, &e->v);
				int want_backup = !out.allowed[k];
				uint64_t t1, t2;
				char sfname[64];
				int ret;

				if (!a || !in[k].usable)
					continue;
				if (pass == 0 && a->allowed != (int)out.allowed[k])
					write_ctrl(ctrl_fd, &e->key, a, out.allowed[k], now);
				if (want_backup == a->backup || (pass == 0) != (want_backup == 0))
					continue;
				t1 = mono_ns();
				ret = pm_set_backup(pm, e->key.token, e->v.laddr, e->v.lport, e->v.raddr, e->v.rport,
						    want_backup);
				t2 = mono_ns();
				set_calls++;
				set_ns_total += t2 - t1;
				if (t2 - t1 > set_ns_max)
					set_ns_max = t2 - t1;
				if (ret == 0) {
					a->backup = want_backup;
					c->priority_changes++;
				} else if (c->closing_since && now - c->closing_since <= AT_CLOSE_WINDOW_NS) {
					set_at_close++;
					c->set_at_close++;
				} else {
					set_errs++;
					c->set_errors++;
					if (c->pending_errs && now - c->pending_since > AT_CLOSE_WINDOW_NS)
						c->pending_errs = 0;
					if (!c->pending_errs)
						c->pending_since = now;
					c->pending_errs++;
				}
				subflow_str(sfname, sizeof(sfname), &e->v);
				fprintf(f_prio, "%.6f,%08x,%u,%s,%d,%s,%.1f,%u,%u,%d,%llu,\"%s\"\n", rel_s(now),
					e->key.token, e->v.subflow_id, sfname, want_backup,
					ret == 0 ? "ok" : (pm->err[0] ? pm->err : strerror(-ret)),
					(double)(t2 - t1) / 1e3,
					out.preferred >= 0 ? sfs[idx[out.preferred]].v.subflow_id : 0, in[k].srtt_us,
					out.limited[k], (unsigned long long)out.est_bytes[k], out.reason);
			}
		}
		if (sample) {
			for (int k = 0; k < m; k++) {
				const struct mps_sf *s = &sfs[idx[k]].v;

				if (!in[k].usable)
					continue;
				fprintf(f_samples, "%.6f,%08x,%u,%u,%u,%u,%u,%u,%u,%u,%llu,%llu,%d,%d,%d,%u,%llu\n",
					rel_s(now), s->token, s->subflow_id, s->srtt_us, s->min_rtt_us, s->cwnd,
					s->in_flight, s->unsent, s->wmem_queued, s->sndbuf,
					(unsigned long long)(in[k].delivery_Bps * 8),
					(unsigned long long)out.est_bytes[k], out.est_src[k], out.limited[k],
					o->observe ? -1 : (int)out.allowed[k], s->backup,
					(unsigned long long)s->bytes_handed);
			}
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void stats_json(FILE *f, const char *name, double *v, int n)
{
	fprintf(f, "    \"%s\": {\"n\": %d", name, n);
	if (n) {
		qsort(v, (size_t)n, sizeof(double), cmp_double);
		fprintf(f, ", \"min\": %.3f, \"p50\": %.3f, \"p95\": %.3f, \"max\": %.3f", v[0], v[n / 2],
			v[(int)(0.95 * (n - 1) + 0.5)], v[n - 1]);
	}
	fprintf(f, "}");
}

static uint32_t sf_id_of(const struct mps_key *k, int n)
{
	for (int i = 0; i < n; i++)
		if (sfs[i].key.ptr == k->ptr && sfs[i].key.token == k->token)
			return sfs[i].v.subflow_id;
	return 0;
}

static int write_summary(const struct opts *o, struct steer_bpf *skel, uint32_t inum, double cpu_s,
			 const char *path)
{
	int n = read_subflows(bpf_map__fd(skel->maps.mps_sf));
	int conn_fd = bpf_map__fd(skel->maps.mps_conn);
	static double d2a[MAX_LAT], a2w[MAX_LAT], d2w[MAX_LAT];
	int nd2a = 0, na2w = 0, nd2w = 0;
	uint64_t conf = 0, nonconf = 0, unman = 0, dconf = 0, dnonconf = 0, wa = 0, we = 0, wu = 0;
	char tmp[1100];
	FILE *f;

	for (int i = 0; i < nlat; i++) {
		struct lat *l = &lats[i];

		fprintf(f_steer, "%.6f,%08x,%u,%u,%.3f,%s", rel_s(l->decided), l->key.token, sf_id_of(&l->key, n),
			l->epoch, (double)(int64_t)(l->assigned - l->decided) / 1e6, "");
		d2a[nd2a++] = (double)(int64_t)(l->assigned - l->decided) / 1e6;
		if (l->wire) {
			a2w[na2w++] = (double)(int64_t)(l->wire - l->assigned) / 1e6;
			d2w[nd2w++] = (double)(int64_t)(l->wire - l->decided) / 1e6;
			fprintf(f_steer, "%.3f,%.3f\n", a2w[na2w - 1], d2w[nd2w - 1]);
		} else {
			fprintf(f_steer, ",\n");
		}
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "{\n  \"schema\": \"mpvlab.steer/1\",\n  \"policy\": \"%s\",\n", o->policy);
	fprintf(f, "  \"mechanism\": \"%s\",\n",
		o->observe ? "none: kernel default scheduler, observed only"
			   : "userspace steering: per-subflow backup flags via mptcp_pm SET_FLAGS (userspace PM) on the kernel default scheduler");
	fprintf(f, "  \"params\": {\"period_us\": %llu, \"release_ms\": %.3f, \"hysteresis\": %.4f, \"backlog_ms\": %.3f, \"bw_window_ms\": %.1f, \"probe_interval_ms\": %.1f, \"probe_ms\": %.1f, \"dwell_ms\": %.1f, \"exhaust_ms\": %.1f, \"sndbuf_bounded\": %s},\n",
		(unsigned long long)(o->period_ns / 1000), (double)o->pp.release_ns / 1e6, o->pp.hysteresis,
		(double)o->pp.backlog_ns / 1e6,
		(double)o->pp.bw_window_ns / 1e6, (double)o->pp.probe_interval_ns / 1e6, (double)o->pp.probe_ns / 1e6,
		(double)o->pp.dwell_ns / 1e6, (double)o->pp.exhaust_ns / 1e6,
		o->pp.sndbuf_bounded ? "true" : "false");
	fprintf(f, "  \"netns_inode\": %u,\n  \"t0_ns\": %llu,\n  \"controller_cpu_s\": %.3f,\n", inum,
		(unsigned long long)t0, cpu_s);
	fprintf(f, "  \"set_flags\": {\"calls\": %llu, \"errors\": %llu, \"at_close\": %llu, \"mean_us\": %.1f, \"max_us\": %.1f},\n",
		(unsigned long long)set_calls, (unsigned long long)set_errs, (unsigned long long)set_at_close,
		set_calls ? (double)set_ns_total / (double)set_calls / 1e3 : 0.0, (double)set_ns_max / 1e3);
	fprintf(f, "  \"announce\": {\"addresses\": [");
	for (int i = 0; i < o->nannounce; i++) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &o->announce[i], ip, sizeof(ip));
		fprintf(f, "%s\"%s\"", i ? ", " : "", ip);
	}
	fprintf(f, "], \"calls\": %llu, \"errors\": %llu},\n", (unsigned long long)ann_calls,
		(unsigned long long)ann_errs);
	fprintf(f, "  \"lost_events\": {\"ringbuf\": %llu, \"map_full\": %llu, \"userspace\": %llu},\n",
		(unsigned long long)skel->bss->lost_ringbuf, (unsigned long long)skel->bss->lost_map_full,
		(unsigned long long)lost_user);
	fprintf(f, "  \"connections\": [");
	{
		bool firstc = true;
		bool seen[MAX_SF] = {0};

		for (int i = 0; i < n; i++) {
			struct mps_conn hc = {0};
			struct conn *c = NULL;

			if (seen[i])
				continue;
			bpf_map_lookup_elem(conn_fd, &sfs[i].v.msk, &hc);
			for (int j = 0; j < nconn; j++)
				if (conns[j].msk == sfs[i].v.msk && conns[j].token == sfs[i].key.token)
					c = &conns[j];
			fprintf(f, "%s\n    {\"token\": \"%08x\", \"data_decisions\": %llu, \"path_switches\": %llu, "
				   "\"preferred_changes\": %llu, \"probes\": %llu, \"priority_changes\": %llu, \"set_flags_errors\": %llu, \"set_flags_at_close\": %llu, "
				   "\"subflows\": [",
				firstc ? "" : ",", sfs[i].key.token, (unsigned long long)hc.data_decisions,
				(unsigned long long)hc.switches, c ? (unsigned long long)c->ps.preferred_changes : 0ull,
				c ? (unsigned long long)c->ps.probes : 0ull,
				c ? (unsigned long long)c->priority_changes : 0ull,
				c ? (unsigned long long)c->set_errors : 0ull,
				c ? (unsigned long long)c->set_at_close : 0ull);
			firstc = false;
			bool firsts = true;

			for (int j = i; j < n; j++) {
				const struct mps_sf *s = &sfs[j].v;
				char name[64];

				if (seen[j] || s->msk != sfs[i].v.msk || sfs[j].key.token != sfs[i].key.token)
					continue;
				seen[j] = true;
				subflow_str(name, sizeof(name), s);
				fprintf(f, "%s\n      {\"subflow_id\": %u, \"subflow\": \"%s\", \"bytes_handed\": %llu, "
					   "\"bytes_conformant\": %llu, \"bytes_nonconformant\": %llu, \"bytes_unmanaged\": %llu, "
					   "\"data_decisions_conformant\": %llu, \"data_decisions_nonconformant\": %llu, "
					   "\"wire_bytes_allowed\": %llu, \"wire_bytes_excluded\": %llu, \"wire_bytes_unmanaged\": %llu, "
					   "\"decisions\": %llu, \"sndbuf\": %u, \"backup_at_end\": %u, \"ca_is_bbr\": %u}",
					firsts ? "" : ",", s->subflow_id, name, (unsigned long long)s->bytes_handed,
					(unsigned long long)s->bytes_conf, (unsigned long long)s->bytes_nonconf,
					(unsigned long long)s->bytes_unmanaged, (unsigned long long)s->data_dec_conf,
					(unsigned long long)s->data_dec_nonconf, (unsigned long long)s->wire_allowed,
					(unsigned long long)s->wire_excluded, (unsigned long long)s->wire_unmanaged,
					(unsigned long long)s->decisions, s->sndbuf,
					s->backup, s->is_bbr);
				firsts = false;
				conf += s->bytes_conf;
				nonconf += s->bytes_nonconf;
				unman += s->bytes_unmanaged;
				dconf += s->data_dec_conf;
				dnonconf += s->data_dec_nonconf;
				wa += s->wire_allowed;
				we += s->wire_excluded;
				wu += s->wire_unmanaged;
			}
			fprintf(f, "]}");
		}
	}
	fprintf(f, "\n  ],\n");
	fprintf(f, "  \"conformance\": {\"bytes_conformant\": %llu, \"bytes_nonconformant\": %llu, "
		   "\"bytes_unmanaged\": %llu, \"by_bytes\": ",
		(unsigned long long)conf, (unsigned long long)nonconf, (unsigned long long)unman);
	if (conf + nonconf)
		fprintf(f, "%.5f", (double)conf / (double)(conf + nonconf));
	else
		fprintf(f, "null");
	fprintf(f, ", \"by_decisions\": ");
	if (dconf + dnonconf)
		fprintf(f, "%.5f", (double)dconf / (double)(dconf + dnonconf));
	else
		fprintf(f, "null");
	fprintf(f, ", \"wire_bytes_allowed\": %llu, \"wire_bytes_excluded\": %llu, \"wire_bytes_unmanaged\": %llu, "
		   "\"on_wire\": ", (unsigned long long)wa, (unsigned long long)we, (unsigned long long)wu);
	if (wa + we)
		fprintf(f, "%.5f},\n", (double)wa / (double)(wa + we));
	else
		fprintf(f, "null},\n");
	fprintf(f, "  \"steering_latency_ms\": {\n");
	stats_json(f, "decision_to_assignment", d2a, nd2a);
	fprintf(f, ",\n");
	stats_json(f, "assignment_to_wire", a2w, na2w);
	fprintf(f, ",\n");
	stats_json(f, "decision_to_wire", d2w, nd2w);
	fprintf(f, "\n  }\n}\n");
	fclose(f);
	return rename(tmp, path);
}

static FILE *open_out(const char *dir, const char *name, const char *header)
{
	char p[1024];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (!f) {
		fprintf(stderr, "mpvlab-steer: cannot write %s: %s\n", p, strerror(errno));
		exit(1);
	}
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	fprintf(f, "%s\n", header);
	return f;
}

/* The kernel is closing (a subflow of) this connection: failures just before
 * this are the close race, not errors (AT_CLOSE_WINDOW_NS). */
static void note_closing(uint32_t token, uint64_t now)
{
	for (int j = 0; j < nconn; j++) {
		struct conn *c = &conns[j];

		if (c->token != token)
			continue;
		c->closing_since = now;
		if (c->pending_errs && now - c->pending_since <= AT_CLOSE_WINDOW_NS) {
			c->set_errors -= c->pending_errs;
			set_errs -= c->pending_errs;
			c->set_at_close += c->pending_errs;
			set_at_close += c->pending_errs;
		}
		c->pending_errs = 0;
	}
}

struct announce_ctx {
	const struct opts *o;
	struct pm *pm;
};

/* The userspace PM's announce duty: once a connection is established (the
 * peer can then take an ADD_ADDR), announce every further server address. */
static void on_pm_event(void *data, uint8_t type, uint32_t token)
{
	struct announce_ctx *a = data;

	if ((type == MPTCP_EVENT_CLOSED || type == MPTCP_EVENT_SUB_CLOSED) && token) {
		note_closing(token, mono_ns());
		return;
	}
	if (type != MPTCP_EVENT_ESTABLISHED || !token)
		return;
	for (int i = 0; i < a->o->nannounce; i++) {
		char ip[INET_ADDRSTRLEN];
		uint64_t t_call = mono_ns();
		int ret = pm_announce(a->pm, token, a->o->announce[i], (uint8_t)(i + 1));
		uint64_t dt = mono_ns() - t_call;

		ann_calls++;
		if (ret)
			ann_errs++;
		inet_ntop(AF_INET, &a->o->announce[i], ip, sizeof(ip));
		fprintf(f_ann, "%.6f,%08x,%s,%d,%s,%.1f\n", rel_s(t_call), token, ip, i + 1,
			ret ? (a->pm->err[0] ? a->pm->err : strerror(-ret)) : "ok", (double)dt / 1e3);
		fflush(f_ann);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: mpvlab-steer --netns PATH --out-dir DIR --policy minrtt|bdp|ecf|observe\n"
		"          [--t0-ns MONO_NS] [--period-us 1000] [--release-ms 250] [--hysteresis 0.25]\n"
		"          [--backlog-ms 20] [--probe-interval-ms 2000] [--probe-ms 100] [--dwell-ms 1000] [--exhaust-ms 0] [--sndbuf-bounded] [--bw-window-ms 10000] [--sample-hz 20] [--ready-file PATH]\n"
		"          [--announce IPV4]...   (server addresses to ADD_ADDR on every connection; id 1, 2, ... in order)\n");
	exit(2);
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_DEBUG ? 0 : vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"netns", 1, 0, 'n'}, {"out-dir", 1, 0, 'o'}, {"policy", 1, 0, 'p'},
		{"t0-ns", 1, 0, 't'}, {"period-us", 1, 0, 'P'}, {"release-ms", 1, 0, 'r'},
		{"hysteresis", 1, 0, 'h'}, {"bw-window-ms", 1, 0, 'w'}, {"sample-hz", 1, 0, 's'},
		{"ready-file", 1, 0, 'R'}, {"backlog-ms", 1, 0, 'b'},
		{"probe-interval-ms", 1, 0, 'I'}, {"probe-ms", 1, 0, 'D'},
		{"dwell-ms", 1, 0, 'W'}, {"exhaust-ms", 1, 0, 'E'}, {"sndbuf-bounded", 0, 0, 'S'}, {"announce", 1, 0, 'A'}, {0, 0, 0, 0}};
	struct opts o = {0};
	struct steer_bpf *skel;
	struct ring_buffer *rb;
	struct pm pm = {0};
	struct announce_ctx actx = {&o, &pm};
	struct stat st;
	double sample_hz = 20;
	uint64_t last_tick = 0, last_sample = 0;
	int c, nsfd;
	char path[1024];

	o.period_ns = 1000000;
	o.pp.release_ns = 250000000;
	o.pp.hysteresis = 0.25;
	o.pp.backlog_ns = 20000000;
	o.pp.probe_interval_ns = 2000000000ull;
	o.pp.probe_ns = 100000000ull;
	o.pp.dwell_ns = 1000000000ull;
	o.pp.bw_window_ns = 10000000000ull;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o.netns = optarg; break;
		case 'o': o.out_dir = optarg; break;
		case 'p': o.policy = optarg; break;
		case 't': o.t0_ns = strtoull(optarg, NULL, 10); break;
		case 'P': o.period_ns = strtoull(optarg, NULL, 10) * 1000; break;
		case 'r': o.pp.release_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'h': o.pp.hysteresis = atof(optarg); break;
		case 'w': o.pp.bw_window_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 's': sample_hz = atof(optarg); break;
		case 'R': o.ready_file = optarg; break;
		case 'b': o.pp.backlog_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'I': o.pp.probe_interval_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'D': o.pp.probe_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'W': o.pp.dwell_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'E': o.pp.exhaust_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'S': o.pp.sndbuf_bounded = true; break;
		case 'A':
			if (o.nannounce == MAX_ANNOUNCE || inet_pton(AF_INET, optarg, &o.announce[o.nannounce]) != 1) {
				fprintf(stderr, "mpvlab-steer: --announce wants an IPv4 address (at most %d): %s\n",
					MAX_ANNOUNCE, optarg);
				usage();
			}
			o.nannounce++;
			break;
		default: usage();
		}
	}
	if (!o.netns || !o.out_dir || !o.policy || o.period_ns < 100000 || o.pp.hysteresis < 0)
		usage();
	if (o.nannounce && !strcmp(o.policy, "observe")) {
		fprintf(stderr, "mpvlab-steer: --announce needs the userspace path manager (minrtt|bdp), not observe\n");
		usage();
	}
	if (!strcmp(o.policy, "minrtt"))
		o.pp.kind = POL_MINRTT;
	else if (!strcmp(o.policy, "bdp"))
		o.pp.kind = POL_BDP;
	else if (!strcmp(o.policy, "ecf"))
		o.pp.kind = POL_ECF;
	else if (!strcmp(o.policy, "observe"))
		o.observe = true;
	else
		usage();
	t0 = o.t0_ns ? o.t0_ns : mono_ns();

	nsfd = open(o.netns, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || fstat(nsfd, &st) < 0) {
		fprintf(stderr, "mpvlab-steer: cannot open netns %s: %s\n", o.netns, strerror(errno));
		return 1;
	}
	/* genetlink is per namespace: the path manager we talk to is the sender's */
	if (setns(nsfd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "mpvlab-steer: setns %s: %s\n", o.netns, strerror(errno));
		return 1;
	}
	close(nsfd);
	if (!o.observe) {
		char pmt[16] = "";
		FILE *pf = fopen("/proc/sys/net/mptcp/pm_type", "r");

		if (!pf || !fgets(pmt, sizeof(pmt), pf) || atoi(pmt) != 1) {
			fprintf(stderr, "mpvlab-steer: net.mptcp.pm_type is %s in %s; steering needs the userspace path "
					"manager (pm_type=1) so that SET_FLAGS can address single subflows\n",
				pmt[0] ? pmt : "unreadable", o.netns);
			return 1;
		}
		fclose(pf);
		if (pm_open(&pm) < 0) {
			fprintf(stderr, "mpvlab-steer: %s\n", pm.err);
			return 1;
		}
	}

	libbpf_set_print(libbpf_quiet);
	skel = steer_bpf__open();
	if (!skel) {
		fprintf(stderr, "mpvlab-steer: cannot open BPF object\n");
		return 1;
	}
	skel->rodata->target_netns_inum = (uint32_t)st.st_ino;
	if (steer_bpf__load(skel) || steer_bpf__attach(skel)) {
		fprintf(stderr, "mpvlab-steer: cannot load/attach BPF programs (tp_btf mptcp_subflow_get_send, "
				"inet_sock_set_state, net_dev_xmit): %s\n", strerror(errno));
		return 1;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.mps_events), handle_event, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "mpvlab-steer: ring buffer: %s\n", strerror(errno));
		return 1;
	}
	f_prio = open_out(o.out_dir, "priority_changes.csv",
			  "t,conn,subflow_id,subflow,backup,result,call_us,preferred_subflow_id,srtt_us,limited,est_bdp_bytes,reason");
	f_steer = open_out(o.out_dir, "steering.csv",
			   "t_decided,conn,subflow_id,epoch,decision_to_assignment_ms,assignment_to_wire_ms,decision_to_wire_ms");
	f_samples = open_out(o.out_dir, "controller_samples.csv",
			     "t,conn,subflow_id,srtt_us,min_rtt_us,cwnd,in_flight,unsent_bytes,wmem_queued,sndbuf,"
			     "delivery_rate_bps,est_bdp_bytes,est_src,limited,allowed,backup,bytes_handed_cum");
	f_ev = open_out(o.out_dir, "pm_events.csv", "t,event,attrs");
	f_ann = open_out(o.out_dir, "announces.csv", "t,conn,addr,id,result,call_us");
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (o.ready_file) {
		char tmp[1100];
		FILE *rf;

		snprintf(tmp, sizeof(tmp), "%s.tmp", o.ready_file);
		rf = fopen(tmp, "w");
		if (!rf || fprintf(rf, "%d %u\n", getpid(), (unsigned)st.st_ino) < 0 || fclose(rf) ||
		    rename(tmp, o.ready_file)) {
			fprintf(stderr, "mpvlab-steer: cannot write ready file\n");
			return 1;
		}
	}
	while (!stop_flag) {
		uint64_t now;
		int wait_ms = (int)(o.period_ns / 1000000);

		ring_buffer__poll(rb, wait_ms > 0 ? wait_ms : 1);
		if (!o.observe)
			pm_drain_events(&pm, f_ev, t0, on_pm_event, &actx);
		now = mono_ns();
		if (now - last_tick >= o.period_ns) {
			bool sample = sample_hz > 0 && now - last_sample >= (uint64_t)(1e9 / sample_hz);

			tick(&o, skel, &pm, now, sample);
			last_tick = now;
			if (sample)
				last_sample = now;
		}
	}
	ring_buffer__consume(rb);
	{
		struct rusage ru;
		double cpu;

		getrusage(RUSAGE_SELF, &ru);
		cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
		      (double)ru.ru_stime.tv_usec / 1e6;
		snprintf(path, sizeof(path), "%s/steer_summary.json", o.out_dir);
		if (write_summary(&o, skel, (uint32_t)st.st_ino, cpu, path)) {
			fprintf(stderr, "mpvlab-steer: cannot write %s\n", path);
			return 1;
		}
	}
	fclose(f_prio);
	fclose(f_steer);
	fclose(f_samples);
	fclose(f_ev);
	fclose(f_ann);
	ring_buffer__free(rb);
	steer_bpf__destroy(skel);
	pm_close(&pm);
	return 0;
}
