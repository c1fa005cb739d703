// SPDX-License-Identifier: GPL-2.0-only
/*
 * mpvlab-ecnmark: attach the virtual-queue ECN marker (ecn_vq.bpf.c) at clsact egress of one
 * device for the lifetime of this process, sample its virtual backlog, and on SIGTERM/SIGINT write
 * its counters and detach it.
 *
 *   mpvlab-ecnmark --obj build/ecn_vq.bpf.o --dev IF --rate-bit R --threshold-bytes K --limit-bytes L --name NAME
 *                  --ready-file F --stats F.json [--samples F.csv --sample-us N]
 *
 * Samples: t_mono_ns (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns and of the platform's run time
 * zero, which may move after the marker starts), the virtual backlog then, and the counters.
 *
 * Run-scoped names: the program and its map are both created under NAME (e.g. ecnvq_<runid>),
 * so `bpftool prog/map show` names the run. libbpf 1.1 cannot rename either, so the object is
 * loaded once by libbpf (relocations, BTF) and then the program is loaded again from its final
 * instructions under NAME, with its map reference pointed at a map created under NAME with the
 * object's BTF (the spin lock in the value needs it); the libbpf copies are closed.
 * Nothing is pinned: the tc filter holds the program and the program its map, so a SIGKILLed
 * loader leaves only the filter, which goes with the device (the run's namespace; ledger).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "ecn_vq.h"

#define HANDLE 0xec1
#define PRIORITY 1
#define LOG_SZ (1u << 20)

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mpvlab-ecnmark: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static char libbpf_buf[16384];
static size_t libbpf_len;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	int n;

	if (level == LIBBPF_DEBUG)
		return 0;
	if (libbpf_len >= sizeof(libbpf_buf) - 1)
		libbpf_len = 0; /* keep the tail */
	n = vsnprintf(libbpf_buf + libbpf_len, sizeof(libbpf_buf) - libbpf_len, fmt, ap);
	if (n > 0)
		libbpf_len += (size_t)n < sizeof(libbpf_buf) - libbpf_len ? (size_t)n : sizeof(libbpf_buf) - libbpf_len - 1;
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || *s == '-' || v < lo || v > hi)
		die("%s %s: expected an integer in %" PRIu64 " .. %" PRIu64, opt, s, lo, hi);
	return v;
}

static int map_read(int fd, struct vq_state *v)
{
	__u32 key = 0;

	return bpf_map_lookup_elem_flags(fd, &key, v, BPF_F_LOCK);
}

/* The virtual backlog now: the last arrival's backlog drained at the rate since. */
static uint64_t backlog_now(const struct vq_state *v, uint64_t now)
{
	uint64_t dt = now > v->last_ns ? now - v->last_ns : 0;
	double drained = (double)v->rate_Bps * (double)dt / 1e9;

	return drained >= (double)v->backlog_bytes ? 0 : v->backlog_bytes - (uint64_t)drained;
}

int main(int argc, char **argv)
{
	const char *obj_path = NULL, *dev = NULL, *name = NULL, *ready = NULL, *stats = NULL, *samples = NULL;
	uint64_t rate_bit = 0, threshold = 0, limit = 0, sample_us = 10000;
	static const struct option opts[] = {
		{"obj", required_argument, 0, 'o'},       {"dev", required_argument, 0, 'd'},
		{"rate-bit", required_argument, 0, 'r'},  {"threshold-bytes", required_argument, 0, 'k'},
		{"name", required_argument, 0, 'n'},      {"ready-file", required_argument, 0, 'R'},
		{"stats", required_argument, 0, 's'},     {"samples", required_argument, 0, 'S'},
		{"sample-us", required_argument, 0, 'u'}, {"limit-bytes", required_argument, 0, 'l'},
		{0, 0, 0, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'o': obj_path = optarg; break;
		case 'd': dev = optarg; break;
		case 'r': rate_bit = parse_u64("--rate-bit", optarg, 8000, 10000000000ULL); break;
		case 'k': threshold = parse_u64("--threshold-bytes", optarg, 1, 1ULL << 30); break;
		case 'l': limit = parse_u64("--limit-bytes", optarg, 1514, 1ULL << 40); break;
		case 'n': name = optarg; break;
		case 'R': ready = optarg; break;
		case 's': stats = optarg; break;
		case 'S': samples = optarg; break;
		case 'u': sample_us = parse_u64("--sample-us", optarg, 100, 10000000); break;
		default: die("unknown option (see the comment at the top of ecnmark_loader.c)");
		}
	}
	if (!obj_path || !dev || !rate_bit || !threshold || !limit || !name || !ready || !stats)
		die("--obj, --dev, --rate-bit, --threshold-bytes, --limit-bytes, --name, --ready-file and --stats are required");
	{
		regex_t re;
		int bad;

		regcomp(&re, "^[a-z][a-z0-9_]{0,14}$", REG_EXTENDED | REG_NOSUB);
		bad = regexec(&re, name, 0, NULL, 0);
		regfree(&re);
		if (bad)
			die("--name %s: expected [a-z][a-z0-9_]{0,14} (a BPF object name)", name);
	}
	unsigned int ifindex = if_nametoindex(dev);
	if (!ifindex)
		die("no interface %s in this network namespace", dev);

	libbpf_set_print(libbpf_print);
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	if (!obj)
		die("cannot open %s: %s", obj_path, strerror(errno));
	if (bpf_object__load(obj))
		die("the kernel refused the ECN marker program (%s): %s", obj_path, libbpf_buf);
	struct bpf_map *map = bpf_object__find_map_by_name(obj, "vq_state");
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, "ecn_vq");
	if (!map || !prog)
		die("%s has no map vq_state / program ecn_vq", obj_path);

	LIBBPF_OPTS(bpf_map_create_opts, mopts, .btf_fd = bpf_object__btf_fd(obj),
		    .btf_key_type_id = bpf_map__btf_key_type_id(map),
		    .btf_value_type_id = bpf_map__btf_value_type_id(map));
	int map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, name, sizeof(__u32), sizeof(struct vq_state), 1, &mopts);
	if (map_fd < 0)
		die("cannot create map %s: %s", name, strerror(errno));

	size_t n = bpf_program__insn_cnt(prog);
	struct bpf_insn *insns = calloc(n, sizeof(*insns));
	if (!insns)
		die("out of memory");
	memcpy(insns, bpf_program__insns(prog), n * sizeof(*insns));
	int old_fd = bpf_map__fd(map), patched = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (insns[i].code == (BPF_LD | BPF_DW | BPF_IMM) && insns[i].src_reg == BPF_PSEUDO_MAP_FD &&
		    insns[i].imm == old_fd) {
			insns[i].imm = map_fd;
			patched++;
		}
	}
	if (!patched)
		die("no reference to map vq_state in the loaded program (libbpf changed how it relocates?)");
	char *log = calloc(1, LOG_SZ);
	LIBBPF_OPTS(bpf_prog_load_opts, popts, .log_buf = log, .log_size = LOG_SZ, .log_level = 0);
	int prog_fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, name, "GPL", insns, n, &popts);
	if (prog_fd < 0) {
		popts.log_level = 1;
		prog_fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, name, "GPL", insns, n, &popts);
		if (prog_fd < 0) {
			size_t len = strlen(log);
			die("the kernel refused the ECN marker program under %s (%s): ...%s", name, strerror(errno),
			    len > 2000 ? log + len - 2000 : log);
		}
	}
	free(insns);
	bpf_object__close(obj);

	struct vq_state cfg;
	__u32 key = 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.configured = 1;
	cfg.rate_Bps = rate_bit / 8;
	cfg.threshold_bytes = threshold;
	cfg.limit_bytes = limit;
	cfg.last_ns = mono_ns();
	if (bpf_map_update_elem(map_fd, &key, &cfg, BPF_F_LOCK))
		die("cannot configure map %s: %s", name, strerror(errno));

	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = (int)ifindex, .attach_point = BPF_TC_EGRESS);
	int rc = bpf_tc_hook_create(&hook);
	int created_clsact = rc == 0;
	if (rc && rc != -EEXIST)
		die("cannot add a clsact qdisc to %s: %s (the kernel needs CONFIG_NET_SCH_INGRESS)", dev, strerror(-rc));
	LIBBPF_OPTS(bpf_tc_opts, topts, .handle = HANDLE, .priority = PRIORITY, .prog_fd = prog_fd);
	rc = bpf_tc_attach(&hook, &topts);
	if (rc)
		die("cannot attach the ECN marker at %s egress: %s (the kernel needs CONFIG_NET_CLS_BPF)", dev,
		    strerror(-rc));

	struct bpf_prog_info pinfo;
	struct bpf_map_info minfo;
	__u32 plen = sizeof(pinfo), mlen = sizeof(minfo);
	memset(&pinfo, 0, sizeof(pinfo));
	memset(&minfo, 0, sizeof(minfo));
	bpf_obj_get_info_by_fd(prog_fd, &pinfo, &plen);
	bpf_obj_get_info_by_fd(map_fd, &minfo, &mlen);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	FILE *csv = NULL;
	if (samples) {
		csv = fopen(samples, "w");
		if (!csv)
			die("cannot write %s: %s", samples, strerror(errno));
		fprintf(csv, "t_mono_ns,vq_backlog_bytes,pkts,ect,not_ect,marked\n");
	}
	/* Written to a temporary name and renamed: the runner waits for the ready file to exist and then
	 * reads the ids from it, so it must never see the file before its contents (an empty file read
	 * between fopen and fclose failed a test with IndexError). The cc loaders do the same. */
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", ready) >= (int)sizeof(tmp))
		die("--ready-file path too long");
	FILE *rf = fopen(tmp, "w");
	if (!rf)
		die("cannot write %s: %s", tmp, strerror(errno));
	fprintf(rf, "%u %u\n", pinfo.id, minfo.id);
	if (fclose(rf) || rename(tmp, ready))
		die("cannot write %s: %s", ready, strerror(errno));

	struct vq_state v;
	uint64_t next = mono_ns();
	while (!stop_flag) {
		if (csv) {
			uint64_t now = mono_ns();
			if (map_read(map_fd, &v) == 0)
				fprintf(csv, "%" PRIu64 ",%" PRIu64 ",%llu,%llu,%llu,%llu\n",
					now, backlog_now(&v, now),
					(unsigned long long)v.pkts, (unsigned long long)v.ect,
					(unsigned long long)v.not_ect, (unsigned long long)v.marked);
			next += sample_us * 1000ULL;
			now = mono_ns();
			if (next > now) {
				struct timespec ts = {.tv_sec = (time_t)((next - now) / 1000000000ULL),
						      .tv_nsec = (long)((next - now) % 1000000000ULL)};
				nanosleep(&ts, NULL);
			} else {
				next = now; /* late: no burst of catch-up rows */
			}
		} else {
			pause();
		}
	}

	/* Detach first, then read: no packet is counted after the numbers are taken. */
	LIBBPF_OPTS(bpf_tc_opts, dopts, .handle = HANDLE, .priority = PRIORITY);
	int drc = bpf_tc_detach(&hook, &dopts);
	if (created_clsact) {
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&hook);
	}
	if (csv)
		fclose(csv);
	if (map_read(map_fd, &v))
		die("cannot read map %s: %s", name, strerror(errno));
	FILE *sf = fopen(stats, "w");
	if (!sf)
		die("cannot write %s: %s", stats, strerror(errno));
	fprintf(sf,
		"{\"name\": \"%s\", \"dev\": \"%s\", \"prog_id\": %u, \"map_id\": %u, \"rate_bit\": %" PRIu64
		", \"threshold_bytes\": %" PRIu64 ", \"pkts\": %llu, \"bytes\": %llu, \"ect\": %llu, "
		"\"not_ect\": %llu, \"ce_in\": %llu, \"non_ip\": %llu, \"marked\": %llu, \"mark_failed\": %llu, "
		"\"over_threshold\": %llu, \"over_limit\": %llu, \"limit_bytes\": %" PRIu64 ", "
		"\"max_backlog_bytes\": %llu, \"detached\": %s}\n",
		name, dev, pinfo.id, minfo.id, rate_bit, threshold, (unsigned long long)v.pkts,
		(unsigned long long)v.bytes, (unsigned long long)v.ect, (unsigned long long)v.not_ect,
		(unsigned long long)v.ce_in, (unsigned long long)v.non_ip, (unsigned long long)v.marked,
		(unsigned long long)v.mark_failed, (unsigned long long)v.over_threshold,
		(unsigned long long)v.over_limit, limit, (unsigned long long)v.max_backlog_bytes, drc == 0 ? "true" : "false");
	fclose(sf);
	return drc == 0 ? 0 : 1;
}
