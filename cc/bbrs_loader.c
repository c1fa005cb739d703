// SPDX-License-Identifier: GPL-2.0-only
/*
 * bbrs-loader: registers the BBR-S BPF congestion control under a given name
 * for the lifetime of this process, optionally samples its per-socket state
 * into a CSV, and unregisters it on SIGTERM/SIGINT.
 *
 * Registration uses a struct_ops *link* (map created with BPF_F_LINK, then
 * BPF_LINK_CREATE), not the legacy map update: the CC is then owned by the
 * link fd, so even if this process is SIGKILLed the kernel unregisters it and
 * frees every map and program once the last socket using it closes.
 * libbpf 1.1 has no ".struct_ops.link" support, hence the manual link.
 *
 * The CC name lives in the struct_ops data section of the BPF object; libbpf
 * 1.1 offers no API to change it, so the loader patches the placeholder name
 * in a private copy of the embedded ELF image before opening it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "bbrs_state.h"
#include "percentile.h"
#include "bbr_s.skel.h"

#define U64(x) ((unsigned long long)(x))
#define PLACEHOLDER "hccbbrs_PLACEHO" /* must match bbr_s.bpf.c */
#define CC_NAME_MAX 15                /* TCP_CA_NAME_MAX - 1 */
#define ATTACH_STRUCT_OPS 44          /* enum bpf_attach_type BPF_STRUCT_OPS (6.4+) */
#ifndef BPF_F_LINK
#define BPF_F_LINK (1U << 13)
#endif

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "bbrs-loader: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static int libbpf_log(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	if (lvl == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

struct opts {
	const char *name;
	long window;
	double percentile;
	double factor;
	const char *state_csv;
	double state_hz;
	const char *ready_file;
	int passthrough;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: bbrs-loader --name NAME --window N --percentile P [--factor F]\n"
		"                   [--state-csv FILE --state-hz HZ] [--ready-file PATH]\n"
		"  NAME  CC name, 1..%d chars of [A-Za-z0-9_-]\n"
		"  N     samples in the window, 1..%u\n"
		"  P     percentile, 0..100 (resolution 0.01)\n"
		"  F     factor on the percentile, 0 < F <= 2 (resolution 1e-4, default 1)\n"
		"  HZ    state samples per second, 0 < HZ <= 1000 (default 100)\n"
		"  --passthrough  benchmark baseline: stock BBR through the same BPF wrappers\n",
		CC_NAME_MAX, PCT_MAX_N);
	exit(2);
}

static double parse_double(const char *s, const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		die("invalid %s: '%s'", what, s);
	return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "window", required_argument, NULL, 'w' },
		{ "percentile", required_argument, NULL, 'p' },
		{ "factor", required_argument, NULL, 'f' },
		{ "state-csv", required_argument, NULL, 's' },
		{ "state-hz", required_argument, NULL, 'z' },
		{ "ready-file", required_argument, NULL, 'r' },
		{ "passthrough", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, have_w = 0, have_p = 0;
	size_t i;

	o->factor = 1.0;
	o->state_hz = 100.0;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o->name = optarg; break;
		case 'w': o->window = (long)parse_double(optarg, "--window"); have_w = 1;
			  if (parse_double(optarg, "--window") != (double)o->window)
				  die("--window must be an integer");
			  break;
		case 'p': o->percentile = parse_double(optarg, "--percentile"); have_p = 1; break;
		case 'f': o->factor = parse_double(optarg, "--factor"); break;
		case 's': o->state_csv = optarg; break;
		case 'z': o->state_hz = parse_double(optarg, "--state-hz"); break;
		case 'r': o->ready_file = optarg; break;
		case 't': o->passthrough = 1; break;
		default: usage();
		}
	}
	if (optind != argc || !o->name || !have_w || !have_p)
		usage();
	if (!*o->name || strlen(o->name) > CC_NAME_MAX)
		die("--name must be 1..%d characters", CC_NAME_MAX);
	for (i = 0; o->name[i]; i++) {
		char ch = o->name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
			die("--name may only contain [A-Za-z0-9_-]");
	}
	if (o->window < 1 || o->window > (long)PCT_MAX_N)
		die("--window must be in 1..%u", PCT_MAX_N);
	if (o->percentile < 0 || o->percentile > 100)
		die("--percentile must be in 0..100");
	if (!(o->factor > 0 && o->factor <= 2))
		die("--factor must be in (0, 2]");
	if (!(o->state_hz > 0 && o->state_hz <= 1000))
		die("--state-hz must be in (0, 1000]");
}

/* Private copy of the embedded ELF with the placeholder CC name replaced. */
static void *patched_elf(const void *data, size_t sz, const char *name)
{
	const char *p = data, *hit = NULL, *end = p + sz;
	size_t plen = sizeof(PLACEHOLDER); /* includes the NUL */
	char *copy;

	while ((p = memmem(p, (size_t)(end - p), PLACEHOLDER, plen))) {
		if (hit)
			die("internal: CC name placeholder occurs twice in the BPF object");
		hit = p;
		p += plen;
	}
	if (!hit)
		die("internal: CC name placeholder not found in the BPF object");
	copy = malloc(sz);
	if (!copy)
		die("out of memory");
	memcpy(copy, data, sz);
	memset(copy + (hit - (const char *)data), 0, plen);
	memcpy(copy + (hit - (const char *)data), name, strlen(name));
	return copy;
}

static int struct_ops_link_create(int map_fd)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = map_fd; /* aliases link_create.map_fd */
	attr.link_create.attach_type = ATTACH_STRUCT_OPS;
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
}

static __u32 fd_id(int fd, int is_map)
{
	struct bpf_map_info mi;
	struct bpf_prog_info pi;
	__u32 len;

	if (is_map) {
		memset(&mi, 0, sizeof(mi));
		len = sizeof(mi);
		return bpf_obj_get_info_by_fd(fd, &mi, &len) ? 0 : mi.id;
	}
	memset(&pi, 0, sizeof(pi));
	len = sizeof(pi);
	return bpf_obj_get_info_by_fd(fd, &pi, &len) ? 0 : pi.id;
}

/* Ready file: JSON with the kernel ids of everything this load created. */
static void write_ready(const char *path, const char *name, struct bbr_s_bpf *skel,
			__u32 link_id)
{
	char tmp[4096];
	struct bpf_program *prog;
	struct bpf_map *map;
	const char *sep = "";
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		die("--ready-file path too long");
	f = fopen(tmp, "w");
	if (!f)
		die("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f, "{\"name\": \"%s\", \"pid\": %d, \"link_id\": %u, \"map_ids\": [",
		name, (int)getpid(), link_id);
	bpf_object__for_each_map(map, skel->obj) {
		fprintf(f, "%s%u", sep, fd_id(bpf_map__fd(map), 1));
		sep = ", ";
	}
	fprintf(f, "], \"prog_ids\": [");
	sep = "";
	bpf_object__for_each_program(prog, skel->obj) {
		fprintf(f, "%s%u", sep, fd_id(bpf_program__fd(prog), 0));
		sep = ", ";
	}
	fprintf(f, "]}\n");
	if (fclose(f) || rename(tmp, path))
		die("cannot write %s: %s", path, strerror(errno));
}

static const char *mode_name(unsigned m)
{
	static const char *const names[] = { "STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT" };

	return m < 4 ? names[m] : "UNKNOWN";
}

/* BBR bandwidth unit (packets/us << 24) to bit/s, for this socket's MSS. */
static double bw_bps(__u32 bw, __u32 mss)
{
	return (double)bw * mss * 8.0 * 1e6 / (double)(1u << 24);
}

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static void sample_state(int map_fd, FILE *csv)
{
	__u64 key, next, t = now_ns(), closed[64];
	struct bbrs_state s;
	char sa[INET6_ADDRSTRLEN], da[INET6_ADDRSTRLEN];
	int has_key = 0, nclosed = 0, af, i;

	while (bpf_map_get_next_key(map_fd, has_key ? &key : NULL, &next) == 0) {
		key = next;
		has_key = 1;
		if (bpf_map_lookup_elem(map_fd, &key, &s))
			continue; /* deleted meanwhile */
		af = s.family == 10 ? AF_INET6 : AF_INET;
		inet_ntop(af, s.saddr, sa, sizeof(sa));
		inet_ntop(af, s.daddr, da, sizeof(da));
		fprintf(csv,
			"%llu,%llu,%s,%u,%s,%u,%.0f,%.0f,%u,%s,%.4f,%.4f,%u,%u,"
			"%.0f,%.0f,%u,%llu,%u,%llu,%llu,%llu,%llu,%llu,%u\n",
			U64(t), U64(key), sa, s.sport, da, s.dport, bw_bps(s.bw_used, s.mss),
			bw_bps(s.bw_maxfilt, s.mss), s.min_rtt_us, mode_name(s.mode),
			s.pacing_gain / 256.0, s.cwnd_gain / 256.0, s.cwnd, s.n_samples,
			bw_bps(s.bw_pct, s.mss), bw_bps(s.bw_pct_raw, s.mss), s.lt_use_bw, U64(s.pacing_rate * 8), s.mss,
			U64(s.acks), U64(s.samples), U64(s.clipped), U64(s.mismatch),
			U64(s.updated_ns), s.closed);
		if (s.closed && nclosed < 64)
			closed[nclosed++] = key;
	}
	/* A closed flow got its final row: drop it so the map cannot fill up. */
	for (i = 0; i < nclosed; i++)
		bpf_map_delete_elem(map_fd, &closed[i]);
	fflush(csv);
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct bbr_s_bpf *skel;
	struct sigaction sa;
	struct timespec period;
	void *elf;
	FILE *csv = NULL;
	int err, link_fd;

	parse_args(argc, argv, &o);
	libbpf_set_print(libbpf_log);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	skel = calloc(1, sizeof(*skel));
	if (!skel || bbr_s_bpf__create_skeleton(skel))
		die("cannot create BPF skeleton");
	elf = patched_elf(skel->skeleton->data, skel->skeleton->data_sz, o.name);
	skel->skeleton->data = elf;
	err = bpf_object__open_skeleton(skel->skeleton, NULL);
	if (err)
		die("cannot open BPF object: %s", strerror(-err));

	skel->rodata->cfg_window = (__u32)o.window;
	skel->rodata->cfg_pct_bp = (__u32)lround(o.percentile * 100.0);
	skel->rodata->cfg_factor_bp = (__u32)lround(o.factor * 10000.0);
	skel->rodata->cfg_passthrough = o.passthrough;
	/* Twice the sampling rate keeps rows at most half a period stale; without a
	 * CSV nobody reads the map, so refresh it only once a second. */
	skel->rodata->cfg_export_us = o.state_csv ? (__u32)(1e6 / (2.0 * o.state_hz)) : 1000000;
	if (bpf_map__set_map_flags(skel->maps.bbrs_ops,
				   bpf_map__map_flags(skel->maps.bbrs_ops) | BPF_F_LINK))
		die("cannot set BPF_F_LINK on the struct_ops map");

	err = bbr_s_bpf__load(skel);
	if (err)
		die("cannot load BBR-S (needs root, BTF and the kernel's bbr kfuncs "
		    "bbr_init/bbr_main/...; see libbpf messages above): %s", strerror(-err));

	/* Initialise the struct_ops value (with BPF_F_LINK this only prepares it)... */
	{
		struct bpf_link *prep = bpf_map__attach_struct_ops(skel->maps.bbrs_ops);

		if (!prep)
			die("cannot prepare struct_ops map: %s", strerror(errno));
		/* the libbpf "link" is just the map fd; no detach needed for BPF_F_LINK maps */
		free(prep);
	}
	/* ...and the link registers it: the CC now exists until link_fd closes. */
	link_fd = struct_ops_link_create(bpf_map__fd(skel->maps.bbrs_ops));
	if (link_fd < 0) {
		if (errno == EEXIST)
			die("a congestion control named '%s' is already registered", o.name);
		die("cannot register congestion control '%s' (struct_ops link): %s",
		    o.name, strerror(errno));
	}

	if (o.state_csv) {
		csv = fopen(o.state_csv, "w");
		if (!csv)
			die("cannot open %s: %s", o.state_csv, strerror(errno));
		fprintf(csv, "t_ns,flow_id,saddr,sport,daddr,dport,bw_est_bps,max_filter_bw_bps,"
			     "min_rtt_us,mode,pacing_gain,cwnd_gain,cwnd,n_samples,"
			     "percentile_bw_bps,raw_percentile_bw_bps,lt_use_bw,pacing_rate_bps,mss,acks,samples,"
			     "clipped,mismatch,updated_ns,closed\n");
		fflush(csv);
	}
	if (o.ready_file) {
		struct bpf_link_info li;
		__u32 len = sizeof(li);

		memset(&li, 0, sizeof(li));
		write_ready(o.ready_file, o.name, skel,
			    bpf_obj_get_info_by_fd(link_fd, &li, &len) ? 0 : li.id);
	}
	fprintf(stderr, "bbrs-loader: registered '%s' window=%ld percentile=%.2f factor=%.4f%s\n",
		o.name, o.window, o.percentile, o.factor,
		o.passthrough ? " PASSTHROUGH (stock BBR, for benchmarks)" : "");

	period.tv_sec = (time_t)(1.0 / o.state_hz);
	period.tv_nsec = (long)((1.0 / o.state_hz - (double)period.tv_sec) * 1e9);
	while (!stop_flag) {
		if (csv)
			sample_state(bpf_map__fd(skel->maps.bbrs_state_map), csv);
		if (csv)
			nanosleep(&period, NULL); /* EINTR on SIGTERM ends the wait early */
		else
			pause();
	}
	if (csv) {
		sample_state(bpf_map__fd(skel->maps.bbrs_state_map), csv);
		fclose(csv);
	}
	if (skel->bss->storage_failures)
		fprintf(stderr, "bbrs-loader: warning: %llu sockets ran as stock BBR "
			"(socket storage allocation failed at init)\n",
			U64(skel->bss->storage_failures));
	close(link_fd); /* unregisters the CC */
	bbr_s_bpf__destroy(skel);
	free(elf);
	if (o.ready_file)
		unlink(o.ready_file);
	fprintf(stderr, "bbrs-loader: unregistered '%s'\n", o.name);
	return 0;
}
