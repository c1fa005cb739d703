// SPDX-License-Identifier: GPL-2.0-only
/*
 * mpvlab-schedtrace: userspace of the MPTCP scheduler trace.
 *
 * Loads sched_trace.bpf.c, restricts it to one network namespace (by the
 * namespace's inode number, so concurrent runs in other namespaces never
 * mix), enters that namespace so the iter/tcp sampler sees its sockets, and
 * writes until SIGINT/SIGTERM:
 *   switches.csv, subflow_samples.csv, decisions_summary.json
 * Nothing is pinned: every BPF object goes away when this process exits,
 * even if it is killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
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

#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sched_trace.h"
#include "sched_trace.skel.h"

#define SCHEMA "mpvlab.schedtrace/1"
#define NAME_LEN 160 /* "[v6]:port-[v6]:port" fits */

static volatile sig_atomic_t stop_flag;

struct opts {
	const char *netns_path;
	unsigned long long netns_inode;
	const char *out_dir;
	const char *ready_file;
	long long t0_ns;
	bool have_t0;
	int sample_hz;
	bool bpf_stats;
};

struct sf_name {
	struct mst_key key;
	char name[NAME_LEN];
};

struct state {
	struct opts o;
	struct sched_trace_bpf *skel;
	int map_sf_fd;
	FILE *f_samples;
	FILE *f_switches;
	unsigned long long n_samples;
	unsigned long long n_switch_rows;
	unsigned long long n_sample_passes;
	/* small cache of "laddr:lport-raddr:rport" per subflow key */
	struct sf_name names[256];
	unsigned int n_names;
	/* last sampled bytes_handed_cum per subflow (from the final pass) */
	struct {
		struct mst_key key;
		__u64 cum;
	} last_cum[1024];
	unsigned int n_last_cum;
	unsigned long long user_lost;
};

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static double rel_s(const struct state *st, __u64 t_ns)
{
	return ((double)(int64_t)(t_ns - (__u64)st->o.t0_ns)) / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpvlab-schedtrace (--netns PATH | --netns-inode N) --out-dir DIR\n"
		"                         [--t0-ns MONO_NS] [--sample-hz 100] [--ready-file PATH]\n"
		"                         [--bpf-stats]\n"
		"  --netns PATH      a network namespace handle: /run/netns/NAME or /proc/PID/ns/net\n"
		"  --netns-inode N   the namespace's inode number (found under /run/netns or /proc)\n"
		"  --out-dir DIR     writes switches.csv, subflow_samples.csv, decisions_summary.json\n"
		"  --t0-ns NS        CLOCK_MONOTONIC origin of the time columns (default: start)\n"
		"  --sample-hz HZ    subflow sampling rate, 0 disables samples (default 100)\n"
		"  --ready-file P    created once tracing is attached\n"
		"  --bpf-stats       enable kernel BPF run-time stats while running and report\n"
		"                    the programs' run time in the summary\n"
		"Runs until SIGINT/SIGTERM, then writes the summary and exits 0.\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "netns", required_argument, NULL, 'n' },
		{ "netns-inode", required_argument, NULL, 'i' },
		{ "out-dir", required_argument, NULL, 'o' },
		{ "t0-ns", required_argument, NULL, 't' },
		{ "sample-hz", required_argument, NULL, 's' },
		{ "ready-file", required_argument, NULL, 'r' },
		{ "bpf-stats", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *end;
	int c;

	o->sample_hz = 100;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->netns_path = optarg;
			break;
		case 'i':
			errno = 0;
			o->netns_inode = strtoull(optarg, &end, 10);
			if (errno || *end || !o->netns_inode) {
				fprintf(stderr, "bad --netns-inode '%s'\n", optarg);
				return -1;
			}
			break;
		case 'o':
			o->out_dir = optarg;
			break;
		case 't':
			errno = 0;
			o->t0_ns = strtoll(optarg, &end, 10);
			if (errno || *end || o->t0_ns < 0) {
				fprintf(stderr, "bad --t0-ns '%s'\n", optarg);
				return -1;
			}
			o->have_t0 = true;
			break;
		case 's':
			errno = 0;
			o->sample_hz = (int)strtol(optarg, &end, 10);
			if (errno || *end || o->sample_hz < 0 || o->sample_hz > 10000) {
				fprintf(stderr, "bad --sample-hz '%s' (0..10000)\n", optarg);
				return -1;
			}
			break;
		case 'r':
			o->ready_file = optarg;
			break;
		case 'b':
			o->bpf_stats = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc || !o->out_dir || (!o->netns_path == !o->netns_inode)) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/* Find a handle for a namespace known only by inode: named namespaces first,
 * then any process living in it. */
static int open_netns_by_inode(unsigned long long ino)
{
	static const char *const dirs[] = { "/run/netns", "/var/run/netns" };
	char path[PATH_MAX];
	struct dirent *de;
	struct stat sb;
	DIR *d;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		d = opendir(dirs[i]);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dirs[i], de->d_name);
			if (stat(path, &sb) == 0 && sb.st_ino == ino) {
				closedir(d);
				return open(path, O_RDONLY | O_CLOEXEC);
			}
		}
		closedir(d);
	}
	d = opendir("/proc");
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/net", de->d_name);
		if (stat(path, &sb) == 0 && sb.st_ino == ino) {
			int fd = open(path, O_RDONLY | O_CLOEXEC);

			if (fd >= 0) {
				closedir(d);
				return fd;
			}
		}
	}
	closedir(d);
	errno = ENOENT;
	return -1;
}

static void fmt_addr(const struct mst_tuple *t, const __u8 *a, __u16 port, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN];

	if (t->family == AF_INET) {
		inet_ntop(AF_INET, a, ip, sizeof(ip));
		snprintf(buf, n, "%s:%u", ip, port);
	} else {
		inet_ntop(AF_INET6, a, ip, sizeof(ip));
		snprintf(buf, n, "[%s]:%u", ip, port);
	}
}

/* "laddr:lport-raddr:rport": local = the traced (sending) side */
static void fmt_tuple(const struct mst_tuple *t, char *buf, size_t n)
{
	char l[64], r[64];

	fmt_addr(t, t->laddr, t->lport, l, sizeof(l));
	fmt_addr(t, t->raddr, t->rport, r, sizeof(r));
	snprintf(buf, n, "%s-%s", l, r);
}

static bool key_eq(const struct mst_key *a, const struct mst_key *b)
{
	return a->ptr == b->ptr && a->token == b->token;
}

static const char *sf_name(struct state *st, const struct mst_key *k)
{
	struct mst_sf v;
	unsigned int i;

	for (i = 0; i < st->n_names; i++)
		if (key_eq(&st->names[i].key, k))
			return st->names[i].name;
	i = st->n_names < 256 ? st->n_names++ : (unsigned int)(k->ptr % 256);
	st->names[i].key = *k;
	if (bpf_map_lookup_elem(st->map_sf_fd, k, &v) == 0)
		fmt_tuple(&v.tuple, st->names[i].name, sizeof(st->names[i].name));
	else
		snprintf(st->names[i].name, sizeof(st->names[i].name), "unknown");
	return st->names[i].name;
}

static void write_switch(struct state *st, __u64 t_ns, __u32 token, __u64 decision,
			 __u32 from_id, const char *from, __u32 to_id, const char *to,
			 const char *how)
{
	fprintf(st->f_switches, "%.9f,%08x,%" PRIu64 ",%u,%s,%u,%s,%s\n", rel_s(st, t_ns), token,
		(uint64_t)decision, from_id, from, to_id, to, how);
	st->n_switch_rows++;
}

static void write_sample(struct state *st, const struct mst_sample *r);

static int on_event(void *ctx, void *data, size_t len)
{
	struct state *st = ctx;
	const struct mst_event *e = data;
	char from[NAME_LEN];

	if (len >= sizeof(struct mst_sample) && e->type == MST_EV_SAMPLE) {
		write_sample(st, data);
		return 0;
	}
	if (len < sizeof(*e) || e->type != MST_EV_SWITCH)
		return 0;
	snprintf(from, sizeof(from), "%s", sf_name(st, &e->from_sf));
	write_switch(st, e->t_ns, e->token, e->decision, e->from_id, from, e->to_id,
		     sf_name(st, &e->to_sf), "decision");
	return 0;
}

static const char *bbr_mode_name(__u32 m)
{
	static const char *const n[] = { "STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT" };

	return m < 4 ? n[m] : "UNKNOWN";
}

static void remember_cum(struct state *st, const struct mst_key *k, __u64 cum)
{
	unsigned int i;

	for (i = 0; i < st->n_last_cum; i++) {
		if (key_eq(&st->last_cum[i].key, k)) {
			st->last_cum[i].cum = cum;
			return;
		}
	}
	if (st->n_last_cum < sizeof(st->last_cum) / sizeof(st->last_cum[0])) {
		st->last_cum[st->n_last_cum].key = *k;
		st->last_cum[st->n_last_cum].cum = cum;
		st->n_last_cum++;
	}
}

static void write_sample(struct state *st, const struct mst_sample *r)
{
	char tuple[NAME_LEN];
	long long in_flight;
	double deliv = NAN, pacing = NAN;

	fmt_tuple(&r->tuple, tuple, sizeof(tuple));
	/* tcp_packets_in_flight(): packets_out - (sacked_out + lost_out) + retrans_out */
	in_flight = (long long)r->packets_out - ((long long)r->sacked_out + r->lost_out) +
		    r->retrans_out;
	/* as tcp_get_info(): rate_delivered * mss * 1e6 / rate_interval_us bytes/s */
	if (r->rate_interval_us)
		deliv = (double)r->rate_delivered * r->mss_cache * 1e6 / r->rate_interval_us * 8.0;
	if (r->pacing_rate != ~0ULL && r->pacing_rate != 0xffffffffULL)
		pacing = (double)r->pacing_rate * 8.0;
	fprintf(st->f_samples, "%.9f,%s,%08x,%u,%s,%u,%u,%u,%lld,%.0f,%.0f,%" PRIu64 ",%u,%u,%u,%s,",
		rel_s(st, r->t_ns), r->source ? "final" : "ack", r->sf.token, r->subflow_id,
		tuple, r->state, r->srtt_us,
		r->snd_cwnd, in_flight, deliv, pacing, (uint64_t)r->bytes_handed_cum, r->wmem_queued,
		r->backup, r->rate_app_limited, r->ca_name);
	if (r->is_bbr) {
		/* bbr_get_info(): bw * mss * 1e6 >> BW_SCALE(24) bytes/s */
		double bw = (double)r->bbr_bw_raw * r->mss_cache * 1e6 / (double)(1u << 24) * 8.0;

		fprintf(st->f_samples, "%.0f,%u,%s,%.4f,%.4f\n", bw, r->bbr_min_rtt_us,
			bbr_mode_name(r->bbr_mode), r->bbr_pacing_gain / 256.0,
			r->bbr_cwnd_gain / 256.0);
	} else {
		fputs(",,,,\n", st->f_samples);
	}
	st->n_samples++;
	remember_cum(st, &r->sf, r->bytes_handed_cum);
}

/* The final pass of iter/tcp (the iterator is created in the target
 * namespace, which this process entered). */
static int final_pass(struct state *st)
{
	static char buf[65536];
	size_t have = 0;
	ssize_t n;
	int fd;

	fd = bpf_iter_create(bpf_link__fd(st->skel->links.mst_final));
	if (fd < 0) {
		fprintf(stderr, "bpf_iter_create: %s\n", strerror(errno));
		return -1;
	}
	for (;;) {
		n = read(fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t off = 0;

		while (have - off >= sizeof(struct mst_sample)) {
			struct mst_sample r;

			memcpy(&r, buf + off, sizeof(r));
			write_sample(st, &r);
			off += sizeof(r);
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	if (n < 0)
		fprintf(stderr, "iter read: %s\n", strerror(errno));
	if (have)
		st->user_lost++;
	close(fd);
	st->n_sample_passes++;
	return 0;
}

struct sf_rec {
	struct mst_key key;
	struct mst_sf v;
	__u64 tail;
};

struct conn_rec {
	struct mst_key key;
	struct mst_conn v;
};

static int cmp_sf(const void *a, const void *b)
{
	const struct sf_rec *x = a, *y = b;

	if (x->v.conn.token != y->v.conn.token)
		return x->v.conn.token < y->v.conn.token ? -1 : 1;
	if (x->v.subflow_id != y->v.subflow_id)
		return x->v.subflow_id < y->v.subflow_id ? -1 : 1;
	return x->v.first_ns < y->v.first_ns ? -1 : x->v.first_ns > y->v.first_ns;
}

static int cmp_conn(const void *a, const void *b)
{
	const struct conn_rec *x = a, *y = b;

	return x->v.first_ns < y->v.first_ns ? -1 : x->v.first_ns > y->v.first_ns;
}

static void *dump_map(int fd, size_t ksz, size_t vsz, size_t rec_sz, size_t *count)
{
	char key[64], next[64];
	size_t n = 0, cap = 64;
	char *arr = calloc(cap, rec_sz);
	bool first = true;

	if (!arr)
		return NULL;
	for (;;) {
		if (bpf_map_get_next_key(fd, first ? NULL : key, next))
			break;
		first = false;
		memcpy(key, next, ksz);
		if (n == cap) {
			char *na = realloc(arr, cap * 2 * rec_sz);

			if (!na)
				break;
			memset(na + cap * rec_sz, 0, cap * rec_sz);
			arr = na;
			cap *= 2;
		}
		memcpy(arr + n * rec_sz, key, ksz);
		if (bpf_map_lookup_elem(fd, key, arr + n * rec_sz + ksz) == 0)
			n++;
	}
	(void)vsz;
	*count = n;
	return arr;
}

static void json_time(FILE *f, const struct state *st, const char *name, __u64 t_ns, bool comma)
{
	if (t_ns)
		fprintf(f, "\"%s\": %.9f%s", name, rel_s(st, t_ns), comma ? ", " : "");
	else
		fprintf(f, "\"%s\": null%s", name, comma ? ", " : "");
}

static void prog_stats(FILE *f, struct bpf_program *p, bool comma)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len)) {
		fprintf(f, "\"%s\": null%s", bpf_program__name(p), comma ? ", " : "");
		return;
	}
	fprintf(f, "\"%s\": {\"run_cnt\": %llu, \"run_time_ns\": %llu}%s", bpf_program__name(p),
		(unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns,
		comma ? ", " : "");
}

static int write_summary(struct state *st, int64_t start_ns, int64_t end_ns, bool stats_on)
{
	char path[PATH_MAX], tmp[PATH_MAX], name[NAME_LEN];
	size_t nsf = 0, nconn = 0, i, j;
	struct sf_rec *sfs;
	struct conn_rec *conns;
	struct rusage ru;
	FILE *f;
	unsigned long long lost_rb = st->skel->bss->lost_ringbuf;
	unsigned long long lost_map = st->skel->bss->lost_map_full;

	sfs = dump_map(st->map_sf_fd, sizeof(struct mst_key), sizeof(struct mst_sf),
		       sizeof(struct sf_rec), &nsf);
	conns = dump_map(bpf_map__fd(st->skel->maps.mst_conn), sizeof(struct mst_key),
			 sizeof(struct mst_conn), sizeof(struct conn_rec), &nconn);
	if (!sfs || !conns) {
		fprintf(stderr, "out of memory reading maps\n");
		return -1;
	}
	qsort(sfs, nsf, sizeof(*sfs), cmp_sf);
	qsort(conns, nconn, sizeof(*conns), cmp_conn);

	/*
	 * Bytes handed after a connection's last decision are seen by no
	 * decision. Take them from the last state change of the subflow or the
	 * last sample, whichever saw more, and attribute them to that last
	 * decision (it is the only one that can have handed them).
	 */
	for (i = 0; i < nsf; i++) {
		struct sf_rec *s = &sfs[i];
		__u64 tail = 0;

		if (s->v.final_valid) {
			__s32 d = (__s32)(s->v.final_seq - s->v.last_seq);

			if (d > 0)
				tail = (__u64)d;
		}
		for (j = 0; j < st->n_last_cum; j++) {
			if (key_eq(&st->last_cum[j].key, &s->key) &&
			    st->last_cum[j].cum > s->v.handed + tail)
				tail = st->last_cum[j].cum - s->v.handed;
		}
		s->tail = tail;
	}
	for (i = 0; i < nconn; i++) {
		struct conn_rec *c = &conns[i];
		bool tail_decision_counted = false;

		for (j = 0; j < nsf; j++) {
			struct sf_rec *s = &sfs[j];

			if (!key_eq(&s->v.conn, &c->key) || !s->tail)
				continue;
			s->v.handed += s->tail;
			if (c->v.decisions < 1)
				continue;
			s->v.data_decisions++;
			s->v.last_data_ns = c->v.cur_decision_ns;
			if (!tail_decision_counted) {
				c->v.data_decisions++;
				tail_decision_counted = true;
			} else {
				c->v.multi_sf_decisions++;
			}
			if (c->v.last_data_sf.ptr && !key_eq(&c->v.last_data_sf, &s->key)) {
				char from[NAME_LEN];
				__u32 from_id = 0;

				for (size_t k = 0; k < nsf; k++)
					if (key_eq(&sfs[k].key, &c->v.last_data_sf))
						from_id = sfs[k].v.subflow_id;
				snprintf(from, sizeof(from), "%s", sf_name(st, &c->v.last_data_sf));
				c->v.switches++;
				write_switch(st, c->v.cur_decision_ns, c->key.token, c->v.decisions,
					     from_id, from, s->v.subflow_id, sf_name(st, &s->key),
					     "tail");
			}
			c->v.last_data_sf = s->key;
		}
	}

	if (snprintf(path, sizeof(path) - 8, "%s/decisions_summary.json", st->o.out_dir) >=
	    (int)sizeof(path) - 8) {
		fprintf(stderr, "--out-dir too long\n");
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%.4000s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "cannot write %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "{\n  \"schema\": \"%s\",\n", SCHEMA);
	fprintf(f, "  \"netns_inode\": %llu,\n  \"t0_ns\": %lld,\n", st->o.netns_inode,
		st->o.t0_ns);
	fprintf(f, "  \"start_t\": %.9f,\n  \"stop_t\": %.9f,\n", rel_s(st, (__u64)start_ns),
		rel_s(st, (__u64)end_ns));
	fprintf(f, "  \"sample_hz\": %d,\n  \"samples\": %llu,\n",
		st->o.sample_hz, st->n_samples);
	fprintf(f, "  \"definitions\": {\n"
		   "    \"decision\": \"one run of the kernel's default MPTCP scheduler "
		   "(mptcp_subflow_get_send) for a connection; detected by the "
		   "mptcp_subflow_get_send tracepoint firing for the first subflow of the "
		   "connection's subflow list\",\n"
		   "    \"subflow_decisions\": \"decisions in which the subflow was evaluated "
		   "(the tracepoint fires once per listed subflow per decision)\",\n"
		   "    \"bytes_handed\": \"bytes the MPTCP layer queued on the subflow while "
		   "tracing: the advance of subflow->rel_write_seq (includes MPTCP-level "
		   "re-sends, the retransmit timer's and those after a subflow is marked "
		   "stale or closes; excludes TCP retransmissions and SYN/FIN)\",\n"
		   "    \"data_carrying_decision\": \"a decision after whose start, and before "
		   "the next decision of the same connection, rel_write_seq of at least one "
		   "subflow advanced; that subflow was handed data by this decision\",\n"
		   "    \"path_switch\": \"two consecutive data-carrying decisions of one "
		   "connection whose data went to different subflows (if one decision fed "
		   "several subflows they are ordered by subflow list position and each "
		   "change counts)\",\n"
		   "    \"multi_subflow_handings\": \"extra subflows fed by one data-carrying "
		   "decision beyond the first (the default scheduler feeds one; nonzero means "
		   "reinjections or delegated pushes)\",\n"
		   "    \"time\": \"seconds since t0_ns on CLOCK_MONOTONIC; a switch's t is the "
		   "start of the decision that handed data to the new subflow\"\n  },\n");
	fprintf(f, "  \"lost_events\": {\"ringbuf\": %llu, \"map_full\": %llu, "
		   "\"userspace\": %llu, \"total\": %llu},\n",
		lost_rb, lost_map, st->user_lost, lost_rb + lost_map + st->user_lost);
	fprintf(f, "  \"collector_cpu_s\": %.6f,\n",
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
			ru.ru_stime.tv_usec / 1e6);
	fprintf(f, "  \"bpf_stats\": ");
	if (stats_on) {
		fprintf(f, "{");
		prog_stats(f, st->skel->progs.mst_sched, true);
		prog_stats(f, st->skel->progs.mst_sf_state, true);
		prog_stats(f, st->skel->progs.mst_probe, true);
		prog_stats(f, st->skel->progs.mst_final, false);
		fprintf(f, "},\n");
	} else {
		fprintf(f, "null,\n");
	}

	unsigned long long tot_dec = 0, tot_data = 0, tot_sw = 0, tot_bytes = 0;

	fprintf(f, "  \"connections\": [");
	for (i = 0; i < nconn; i++) {
		const struct conn_rec *c = &conns[i];
		unsigned long long cbytes = 0;
		bool fin = c->v.final_bytes_sent >= c->v.msk_bytes_sent && c->v.final_bytes_sent;

		for (j = 0; j < nsf; j++)
			if (key_eq(&sfs[j].v.conn, &c->key))
				cbytes += sfs[j].v.handed;
		tot_dec += c->v.decisions;
		tot_data += c->v.data_decisions;
		tot_sw += c->v.switches;
		tot_bytes += cbytes;
		fprintf(f, "%s\n    {\"conn\": \"%08x\", \"token\": %u, \"decisions\": %llu, "
			   "\"data_carrying_decisions\": %llu, \"bytes_handed\": %llu, "
			   "\"path_switches\": %llu, \"multi_subflow_handings\": %llu, "
			   "\"msk_bytes_sent\": %llu, \"msk_bytes_retrans\": %llu, ",
			i ? "," : "", c->key.token, c->key.token,
			(unsigned long long)c->v.decisions,
			(unsigned long long)c->v.data_decisions, cbytes,
			(unsigned long long)c->v.switches,
			(unsigned long long)c->v.multi_sf_decisions,
			(unsigned long long)(fin ? c->v.final_bytes_sent : c->v.msk_bytes_sent),
			(unsigned long long)(fin ? c->v.final_bytes_retrans
						  : c->v.msk_bytes_retrans));
		json_time(f, st, "first_t", c->v.first_ns, true);
		json_time(f, st, "last_t", c->v.last_ns, true);
		fprintf(f, "\n     \"subflows\": [");
		bool firstsf = true;

		for (j = 0; j < nsf; j++) {
			const struct sf_rec *s = &sfs[j];
			char l[64], r[64];

			if (!key_eq(&s->v.conn, &c->key))
				continue;
			fmt_tuple(&s->v.tuple, name, sizeof(name));
			fmt_addr(&s->v.tuple, s->v.tuple.laddr, s->v.tuple.lport, l, sizeof(l));
			fmt_addr(&s->v.tuple, s->v.tuple.raddr, s->v.tuple.rport, r, sizeof(r));
			fprintf(f, "%s\n       {\"subflow_id\": %u, \"subflow\": \"%s\", "
				   "\"local\": \"%s\", \"remote\": \"%s\", \"decisions\": %llu, "
				   "\"data_carrying_decisions\": %llu, \"bytes_handed\": %llu, "
				   "\"bytes_after_last_decision\": %llu, \"backup\": %s, ",
				firstsf ? "" : ",", s->v.subflow_id, name, l, r,
				(unsigned long long)s->v.decisions,
				(unsigned long long)s->v.data_decisions,
				(unsigned long long)s->v.handed, (unsigned long long)s->tail,
				s->v.backup ? "true" : "false");
			json_time(f, st, "first_t", s->v.first_ns, true);
			json_time(f, st, "last_t", s->v.last_ns, true);
			json_time(f, st, "last_data_t", s->v.last_data_ns, true);
			json_time(f, st, "closed_t", s->v.final_valid ? s->v.final_ns : 0, false);
			fprintf(f, "}");
			firstsf = false;
		}
		fprintf(f, "]}");
	}
	fprintf(f, "\n  ],\n");
	fprintf(f, "  \"totals\": {\"connections\": %zu, \"subflows\": %zu, \"decisions\": %llu, "
		   "\"data_carrying_decisions\": %llu, \"path_switches\": %llu, "
		   "\"bytes_handed\": %llu, \"switch_rows\": %llu}\n}\n",
		nconn, nsf, tot_dec, tot_data, tot_sw, tot_bytes, st->n_switch_rows);
	free(sfs);
	free(conns);
	if (fclose(f) || rename(tmp, path)) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static FILE *open_out(const char *dir, const char *name, const char *header)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
		return NULL;
	}
	/* line-buffered would cost a write per row; a big buffer and a flush
	 * per sampling pass keep the files current at low cost */
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	fputs(header, f);
	return f;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

int main(int argc, char **argv)
{
	static struct state st;
	struct ring_buffer *rb = NULL;
	struct sigaction sa = {};
	struct stat sb;
	int ns_fd = -1, stats_fd = -1, err = 1;
	int64_t start_ns;

	if (parse_args(argc, argv, &st.o))
		return 2;
	if (st.o.netns_path) {
		ns_fd = open(st.o.netns_path, O_RDONLY | O_CLOEXEC);
		if (ns_fd < 0 || fstat(ns_fd, &sb)) {
			fprintf(stderr, "cannot open netns %s: %s\n", st.o.netns_path,
				strerror(errno));
			return 1;
		}
		st.o.netns_inode = sb.st_ino;
	} else {
		ns_fd = open_netns_by_inode(st.o.netns_inode);
		if (ns_fd < 0) {
			fprintf(stderr,
				"no handle for netns inode %llu under /run/netns or /proc/*/ns/net "
				"(needed to sample its sockets): %s\n",
				st.o.netns_inode, strerror(errno));
			return 1;
		}
	}
	if (mkdir(st.o.out_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "cannot create %s: %s\n", st.o.out_dir, strerror(errno));
		return 1;
	}
	start_ns = mono_ns();
	if (!st.o.have_t0)
		st.o.t0_ns = start_ns;

	libbpf_set_print(libbpf_print);
	st.skel = sched_trace_bpf__open();
	if (!st.skel) {
		fprintf(stderr, "cannot open BPF object: %s\n", strerror(errno));
		return 1;
	}
	st.skel->rodata->target_netns_inum = (__u32)st.o.netns_inode;
	st.skel->rodata->sample_period_ns =
		st.o.sample_hz ? 1000000000ULL / (unsigned)st.o.sample_hz : 0;
	if (sched_trace_bpf__load(st.skel)) {
		fprintf(stderr, "cannot load BPF programs (needs BTF, tp_btf, iter/tcp and the "
				"bpf_rdonly_cast kfunc; see messages above): %s\n",
			strerror(errno));
		goto out;
	}
	if (sched_trace_bpf__attach(st.skel)) {
		fprintf(stderr, "cannot attach to tp_btf/mptcp_subflow_get_send, "
				"tp_btf/inet_sock_set_state or iter/tcp: %s\n",
			strerror(errno));
		goto out;
	}
	st.map_sf_fd = bpf_map__fd(st.skel->maps.mst_sf);
	if (st.o.bpf_stats) {
		/* kernel-wide, but only while this fd is open: restored on exit */
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0)
			fprintf(stderr, "warning: cannot enable BPF run-time stats: %s\n",
				strerror(errno));
	}
	/* iter/tcp walks the namespace of the process creating the iterator */
	if (setns(ns_fd, CLONE_NEWNET)) {
		fprintf(stderr, "setns(%s): %s\n", st.o.netns_path ? st.o.netns_path : "inode",
			strerror(errno));
		goto out;
	}
	st.f_samples = open_out(st.o.out_dir, "subflow_samples.csv",
				"t,source,conn,subflow_id,subflow,tcp_state,srtt_us,cwnd,"
				"packets_in_flight,delivery_rate_bps,pacing_rate_bps,"
				"bytes_handed_cum,wmem_queued,backup,app_limited,ca,bbr_bw_bps,"
				"bbr_min_rtt_us,bbr_mode,bbr_pacing_gain,bbr_cwnd_gain\n");
	st.f_switches = open_out(st.o.out_dir, "switches.csv",
				 "t,conn,decision,from_subflow_id,from_subflow,to_subflow_id,"
				 "to_subflow,detected_at\n");
	if (!st.f_samples || !st.f_switches)
		goto out;
	rb = ring_buffer__new(bpf_map__fd(st.skel->maps.mst_events), on_event, &st, NULL);
	if (!rb) {
		fprintf(stderr, "ring_buffer__new: %s\n", strerror(errno));
		goto out;
	}

	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (st.o.ready_file) {
		char tmp[PATH_MAX];
		FILE *rf;

		snprintf(tmp, sizeof(tmp), "%.4000s.tmp", st.o.ready_file);
		rf = fopen(tmp, "w");
		if (!rf || fprintf(rf, "%d %u\n", getpid(), (unsigned)st.o.netns_inode) < 0 ||
		    fclose(rf) || rename(tmp, st.o.ready_file)) {
			fprintf(stderr, "cannot write ready file %s: %s\n", st.o.ready_file,
				strerror(errno));
			goto out;
		}
	}

	/* Events are submitted without wakeups (cheaper in the kernel); drain
	 * the ring every 50 ms, far within its 4 MiB. */
	while (!stop_flag) {
		int r = ring_buffer__poll(rb, 50);

		if (r < 0 && r != -EINTR) {
			fprintf(stderr, "ring_buffer__poll: %d\n", r);
			break;
		}
		r = ring_buffer__consume(rb);
		if (r < 0) {
			fprintf(stderr, "ring_buffer__consume: %d\n", r);
			break;
		}
		fflush(st.f_samples);
		fflush(st.f_switches);
	}
	/* final: drain events, one iter pass (catches open connections' bytes
	 * handed since their last decision), then the summary */
	ring_buffer__consume(rb);
	final_pass(&st);
	ring_buffer__consume(rb);
	if (write_summary(&st, start_ns, mono_ns(), stats_fd >= 0) == 0)
		err = 0;
out:
	if (st.f_samples && fclose(st.f_samples))
		err = 1;
	if (st.f_switches && fclose(st.f_switches))
		err = 1;
	ring_buffer__free(rb);
	sched_trace_bpf__destroy(st.skel);
	if (stats_fd >= 0)
		close(stats_fd);
	if (ns_fd >= 0)
		close(ns_fd);
	return err;
}
