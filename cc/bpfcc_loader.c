// SPDX-License-Identifier: GPL-2.0-only
/*
 * bpfcc-loader: registers ONE BPF tcp_congestion_ops (struct_ops) object under
 * a run-scoped name for the lifetime of this process, sets its parameters,
 * optionally exports its state, and unregisters it on SIGTERM/SIGINT.
 * It loads our BBRv3 / BBRv3-S (cc/bbr3.bpf.c) and any user's own object.
 *
 * The object's convention (cc/README.md, "Your own BPF CC"):
 *  - exactly one struct_ops variable of type struct tcp_congestion_ops in
 *    section ".struct_ops" (libbpf 1.1 does not know ".struct_ops.link";
 *    the loader makes the link itself);
 *  - parameters are integer globals `const volatile <int type> mpvlab_param_NAME`
 *    (in .rodata), set with --param NAME=VALUE before load; the verifier sees
 *    them as constants; unknown names are refused;
 *  - optional export maps: mpvlab_bbr3_state (hash, struct bbr3_state) and
 *    mpvlab_bbr3_events (ring buffer, struct bbr3_event), see bbr3_state.h.
 *
 * The CC name lives in the object's .struct_ops data; libbpf 1.1 cannot change
 * it, so the loader overwrites the `name` member in a private copy of the ELF
 * image (its file offset: ELF section offset + BTF var offset + member offset).
 *
 * Registration uses a struct_ops link (map created with BPF_F_LINK, then
 * BPF_LINK_CREATE): the CC belongs to the link fd, so even SIGKILL of the
 * loader unregisters it (see bbrs_loader.c).
 *
 * Load faults end with one line naming what the kernel lacks: a kfunc that is
 * not in the kernel's BTF, a kfunc not allowed for struct_ops, a struct_ops
 * member the kernel does not have, or the verifier's reason for rejecting a
 * program (with the tail of the verifier log above it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libelf.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/btf.h>

#include "bbr3_state.h"

#define U64(x) ((unsigned long long)(x))
#define CC_NAME_MAX 15
#define ATTACH_STRUCT_OPS 44 /* enum bpf_attach_type BPF_STRUCT_OPS */
#ifndef BPF_F_LINK
#define BPF_F_LINK (1U << 13)
#endif
#define PARAM_PREFIX "mpvlab_param_"
#define MAX_PARAMS 32
#define MAX_OBJ_BYTES (64u << 20)

static volatile sig_atomic_t stop_flag;
static char *libbpf_log_buf;
static size_t libbpf_log_len, libbpf_log_cap;
static const char *obj_path_for_msgs = "?";

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "bpfcc-loader: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Keep libbpf's messages (incl. verifier logs) to explain a failed load. */
static int libbpf_log(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	char *tmp = NULL;
	int n;

	if (lvl == LIBBPF_DEBUG)
		return 0;
	n = vasprintf(&tmp, fmt, ap);
	if (n <= 0) {
		free(tmp);
		return n;
	}
	if (libbpf_log_len + (size_t)n + 1 > libbpf_log_cap) {
		size_t cap = libbpf_log_cap ? libbpf_log_cap * 2 : 65536;
		char *p;

		while (cap < libbpf_log_len + (size_t)n + 1)
			cap *= 2;
		if (cap > (16u << 20)) {
			free(tmp);
			return n; /* enough evidence kept */
		}
		p = realloc(libbpf_log_buf, cap);
		if (!p) {
			free(tmp);
			return n;
		}
		libbpf_log_buf = p;
		libbpf_log_cap = cap;
	}
	memcpy(libbpf_log_buf + libbpf_log_len, tmp, (size_t)n);
	libbpf_log_len += (size_t)n;
	libbpf_log_buf[libbpf_log_len] = 0;
	free(tmp);
	return n;
}

/* Print the last `lines` lines of the kept libbpf log to stderr. */
static void print_log_tail(int lines)
{
	const char *p;
	int seen = 0;

	if (!libbpf_log_len)
		return;
	p = libbpf_log_buf + libbpf_log_len;
	while (p > libbpf_log_buf) {
		p--;
		if (*p == '\n' && p + 1 < libbpf_log_buf + libbpf_log_len && ++seen > lines) {
			p++;
			break;
		}
	}
	fprintf(stderr, "%s", p);
	if (libbpf_log_buf[libbpf_log_len - 1] != '\n')
		fprintf(stderr, "\n");
}

/* Copy the quoted name after `key` in s (e.g. "kfunc 'x'") into out. */
static int quoted_after(const char *s, const char *key, char *out, size_t outsz)
{
	const char *p = strstr(s, key), *q;
	size_t n;

	if (!p)
		return 0;
	p += strlen(key);
	q = strchr(p, '\'');
	if (!q)
		q = p + strcspn(p, " \n:");
	n = (size_t)(q - p);
	if (n >= outsz)
		n = outsz - 1;
	memcpy(out, p, n);
	out[n] = 0;
	return 1;
}

/* The last meaningful line of the verifier log (the reason), or NULL. */
static int verifier_reason(char *prog, size_t progsz, char *reason, size_t rsz)
{
	const char *begin, *end, *p, *line_end, *best = NULL;
	size_t best_len = 0;

	begin = NULL;
	for (p = libbpf_log_buf; (p = strstr(p, "-- BEGIN PROG LOAD LOG --")); p++)
		begin = p;
	if (!begin)
		return 0;
	end = strstr(begin, "-- END PROG LOAD LOG --");
	if (!end)
		return 0;
	/* "libbpf: prog 'NAME': -- BEGIN PROG LOAD LOG --" */
	{
		const char *ls = begin;

		while (ls > libbpf_log_buf && ls[-1] != '\n')
			ls--;
		if (!quoted_after(ls, "prog '", prog, progsz))
			snprintf(prog, progsz, "?");
	}
	p = strchr(begin, '\n');
	while (p && p < end) {
		p++;
		line_end = strchr(p, '\n');
		if (!line_end || line_end > end)
			line_end = end;
		if (line_end > p && strncmp(p, "processed ", 10) && strncmp(p, "verification time", 17) &&
		    strncmp(p, "stack depth", 11) && strncmp(p, "-- END", 6))
			best = p, best_len = (size_t)(line_end - p);
		p = line_end < end ? line_end : NULL;
	}
	if (!best)
		return 0;
	if (best_len >= rsz)
		best_len = rsz - 1;
	memcpy(reason, best, best_len);
	reason[best_len] = 0;
	return 1;
}

/* A load failed: say what the kernel lacks, in one line, after the evidence. */
static void die_load(int err)
{
	char a[256], b[512];
	const char *log = libbpf_log_buf ? libbpf_log_buf : "";

	print_log_tail(40);
	if (strstr(log, "extern (func ksym) '") && strstr(log, "not found in kernel")) {
		quoted_after(strstr(log, "extern (func ksym) '"), "extern (func ksym) '", a, sizeof(a));
		die("cannot load %s: the kernel lacks kfunc '%s' (not in its BTF, /sys/kernel/btf/vmlinux): "
		    "this object needs a kernel that exports it", obj_path_for_msgs, a);
	}
	if (strstr(log, "extern (var ksym) '")) {
		quoted_after(strstr(log, "extern (var ksym) '"), "extern (var ksym) '", a, sizeof(a));
		die("cannot load %s: the kernel lacks the kernel symbol '%s' (not in its BTF)",
		    obj_path_for_msgs, a);
	}
	if (strstr(log, "calling kernel function ") && strstr(log, "is not allowed")) {
		quoted_after(strstr(log, "calling kernel function "), "calling kernel function ", a, sizeof(a));
		die("cannot load %s: this kernel does not allow kfunc '%s' in struct_ops congestion-control "
		    "programs (not in its kfunc set for BPF_PROG_TYPE_STRUCT_OPS)", obj_path_for_msgs, a);
	}
	if (strstr(log, "is not found in kernel BTF")) {
		die("cannot load %s: the kernel lacks struct_ops support for this type "
		    "(struct not found in its BTF): %s", obj_path_for_msgs, "see the libbpf message above");
	}
	if (strstr(log, "Cannot find member ")) {
		quoted_after(strstr(log, "Cannot find member "), "Cannot find member ", a, sizeof(a));
		die("cannot load %s: the kernel's struct tcp_congestion_ops lacks member '%s'",
		    obj_path_for_msgs, a);
	}
	if (verifier_reason(a, sizeof(a), b, sizeof(b)))
		die("cannot load %s: the kernel's verifier rejected program '%s': %s",
		    obj_path_for_msgs, a, b);
	die("cannot load %s (needs root, BTF at /sys/kernel/btf/vmlinux and BPF struct_ops for "
	    "tcp_congestion_ops): %s", obj_path_for_msgs, strerror(err < 0 ? -err : err));
}

struct param_arg {
	char name[64];
	long long value;
	int used;
};

struct opts {
	const char *obj;
	const char *name;
	struct param_arg params[MAX_PARAMS];
	int nparams;
	const char *state_csv;
	const char *events_csv;
	double state_hz;
	const char *ready_file;
	int check; /* --check: inspect the object and the parameters, load nothing */
};

static void usage(void)
{
	fprintf(stderr,
		"usage: bpfcc-loader --obj FILE.bpf.o --name NAME [--param NAME=INT]...\n"
		"                    [--state-csv FILE] [--events-csv FILE] [--state-hz HZ] [--ready-file PATH]\n"
		"  NAME    CC name to register, 1..%d chars of [A-Za-z0-9_-]\n"
		"  --param sets the object's `const volatile mpvlab_param_NAME` global (integers)\n"
		"  HZ      state samples per second, 0 < HZ <= 1000 (default 100)\n"
		"  --check inspect only (exactly one tcp_congestion_ops, struct_ops programs only, the\n"
		"          parameters exist and fit): print {\"params\": {...}} and load nothing\n",
		CC_NAME_MAX);
	exit(2);
}

static int valid_ident(const char *s, size_t max, int allow_dash)
{
	size_t i;

	if (!*s || strlen(s) > max)
		return 0;
	for (i = 0; s[i]; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || (allow_dash && c == '-')))
			return 0;
	}
	return 1;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "obj", required_argument, NULL, 'o' },
		{ "name", required_argument, NULL, 'n' },
		{ "param", required_argument, NULL, 'p' },
		{ "state-csv", required_argument, NULL, 's' },
		{ "events-csv", required_argument, NULL, 'e' },
		{ "state-hz", required_argument, NULL, 'z' },
		{ "ready-file", required_argument, NULL, 'r' },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *eq, *end;
	int c, i;

	o->state_hz = 100.0;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'o': o->obj = optarg; break;
		case 'n': o->name = optarg; break;
		case 'p':
			if (o->nparams >= MAX_PARAMS)
				die("at most %d --param", MAX_PARAMS);
			eq = strchr(optarg, '=');
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof(o->params[0].name))
				die("--param expects NAME=INTEGER, got '%s'", optarg);
			memcpy(o->params[o->nparams].name, optarg, (size_t)(eq - optarg));
			o->params[o->nparams].name[eq - optarg] = 0;
			if (!valid_ident(o->params[o->nparams].name, 50, 0))
				die("--param name '%s': only [A-Za-z0-9_]", o->params[o->nparams].name);
			errno = 0;
			o->params[o->nparams].value = strtoll(eq + 1, &end, 0);
			if (errno || end == eq + 1 || *end)
				die("--param %s: value '%s' is not an integer", o->params[o->nparams].name, eq + 1);
			for (i = 0; i < o->nparams; i++)
				if (!strcmp(o->params[i].name, o->params[o->nparams].name))
					die("--param %s given twice", o->params[i].name);
			o->nparams++;
			break;
		case 's': o->state_csv = optarg; break;
		case 'e': o->events_csv = optarg; break;
		case 'z': o->state_hz = strtod(optarg, &end);
			  if (*end || !isfinite(o->state_hz))
				  die("invalid --state-hz '%s'", optarg);
			  break;
		case 'r': o->ready_file = optarg; break;
		case 'c': o->check = 1; break;
		default: usage();
		}
	}
	if (optind != argc || !o->obj || !o->name)
		usage();
	if (!valid_ident(o->name, CC_NAME_MAX, 1))
		die("--name must be 1..%d characters of [A-Za-z0-9_-]", CC_NAME_MAX);
	if (!(o->state_hz > 0 && o->state_hz <= 1000))
		die("--state-hz must be in (0, 1000]");
}

static void *read_file(const char *path, size_t *sz)
{
	struct stat st;
	void *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die("cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		die("%s is not a regular file", path);
	if (st.st_size <= 0 || (unsigned long long)st.st_size > MAX_OBJ_BYTES)
		die("%s: size %lld outside 1..%u bytes", path, (long long)st.st_size, MAX_OBJ_BYTES);
	buf = malloc((size_t)st.st_size);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		die("cannot read %s", path);
	close(fd);
	*sz = (size_t)st.st_size;
	return buf;
}

/* Skip typedef/const/volatile. */
static const struct btf_type *resolve(const struct btf *btf, __u32 *id)
{
	const struct btf_type *t = btf__type_by_id(btf, *id);

	while (t && (btf_kind(t) == BTF_KIND_TYPEDEF || btf_kind(t) == BTF_KIND_CONST ||
		     btf_kind(t) == BTF_KIND_VOLATILE)) {
		*id = t->type;
		t = btf__type_by_id(btf, *id);
	}
	return t;
}

/* File offset of the struct_ops variable's `name` member; its current name in *old. */
static size_t find_name_offset(const void *elf_buf, size_t sz, const char *path, char *old, size_t oldsz)
{
	struct bpf_object *obj;
	const struct btf *btf;
	const struct btf_type *sec, *t;
	const struct btf_var_secinfo *vs;
	const struct btf_member *m;
	struct bpf_map *map;
	Elf *elf;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx, sec_off = 0, var_off = 0, name_off = 0;
	const char *ops_name = NULL;
	int nops = 0, found = 0, i;
	__u32 id;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "mpvlab_inspect");

	obj = bpf_object__open_mem(elf_buf, sz, &oo);
	if (!obj) {
		print_log_tail(20);
	{
		char why[128];

		libbpf_strerror(errno, why, sizeof(why)); /* libbpf's own codes (4000+) too */
		die("%s is not a BPF object libbpf can open: %s", path, why);
	}
	}
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS) {
			nops++;
			ops_name = bpf_map__name(map);
		}
	}
	if (nops != 1)
		die("%s declares %d struct_ops variables; exactly one `struct tcp_congestion_ops` in "
		    "SEC(\".struct_ops\") is required", path, nops);
	btf = bpf_object__btf(obj);
	if (!btf)
		die("%s has no BTF (build it with clang -g)", path);
	sec = btf__type_by_id(btf, btf__find_by_name_kind(btf, ".struct_ops", BTF_KIND_DATASEC));
	if (!sec || btf__find_by_name_kind(btf, ".struct_ops", BTF_KIND_DATASEC) <= 0)
		die("%s: no \".struct_ops\" section (SEC(\".struct_ops.link\") is not supported by this "
		    "libbpf; use SEC(\".struct_ops\"))", path);
	vs = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(btf, vs->type);

		if (strcmp(btf__name_by_offset(btf, v->name_off), ops_name))
			continue;
		id = v->type;
		t = resolve(btf, &id);
		if (!t || btf_kind(t) != BTF_KIND_STRUCT ||
		    strcmp(btf__name_by_offset(btf, t->name_off), "tcp_congestion_ops"))
			die("%s: struct_ops variable '%s' is not a struct tcp_congestion_ops", path, ops_name);
		var_off = vs->offset;
		m = btf_members(t);
		for (int j = 0; j < btf_vlen(t); j++, m++)
			if (!strcmp(btf__name_by_offset(btf, m->name_off), "name")) {
				name_off = btf_member_bit_offset(t, j) / 8;
				found = 1;
			}
	}
	if (!found)
		die("%s: cannot locate the name of struct_ops variable '%s'", path, ops_name);
	bpf_object__close(obj);

	if (elf_version(EV_CURRENT) == EV_NONE)
		die("libelf initialisation failed");
	elf = elf_memory((char *)elf_buf, sz);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		die("%s: not an ELF file", path);
	found = 0;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && !strcmp(n, ".struct_ops")) {
			sec_off = sh.sh_offset;
			if (var_off + name_off + 16 > sh.sh_size || sec_off + sh.sh_size > sz)
				die("%s: malformed .struct_ops section", path);
			found = 1;
		}
	}
	elf_end(elf);
	if (!found)
		die("%s: no .struct_ops section in the ELF file", path);
	memcpy(old, (const char *)elf_buf + sec_off + var_off + name_off, oldsz - 1);
	old[oldsz - 1] = 0;
	return sec_off + var_off + name_off;
}

struct param_slot {
	char name[64];
	__u32 off, size;
	int is_signed;
	long long value; /* effective (default or set) */
};

/* The object's mpvlab_param_* rodata variables. */
static int list_params(struct bpf_object *obj, struct param_slot *slots, int max, void **rodata)
{
	const struct btf *btf = bpf_object__btf(obj);
	const struct btf_type *sec;
	const struct btf_var_secinfo *vs;
	struct bpf_map *map, *ro = NULL;
	size_t ro_sz = 0;
	int n = 0, i, id;

	*rodata = NULL;
	bpf_object__for_each_map(map, obj)
		if (bpf_map__is_internal(map)) {
			const char *mn = bpf_map__name(map);
			size_t l = strlen(mn);

			/* ".rodata" itself, not ".rodata.str1.1" etc. */
			if (l >= 7 && !strcmp(mn + l - 7, ".rodata"))
				ro = map;
		}
	if (!ro || !btf)
		return 0;
	*rodata = (void *)bpf_map__initial_value(ro, &ro_sz);
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (id <= 0 || !*rodata)
		return 0;
	sec = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(btf, vs->type), *t;
		const char *vn = btf__name_by_offset(btf, v->name_off);
		__u32 tid = v->type;

		if (strncmp(vn, PARAM_PREFIX, strlen(PARAM_PREFIX)) || n >= max)
			continue;
		t = resolve(btf, &tid);
		if (!t || btf_kind(t) != BTF_KIND_INT || !(t->size == 1 || t->size == 2 || t->size == 4 || t->size == 8) ||
		    vs->offset + t->size > ro_sz)
			die("%s: parameter %s must be an integer of 1, 2, 4 or 8 bytes", obj_path_for_msgs, vn);
		snprintf(slots[n].name, sizeof(slots[n].name), "%s", vn + strlen(PARAM_PREFIX));
		slots[n].off = vs->offset;
		slots[n].size = t->size;
		slots[n].is_signed = !!(btf_int_encoding(t) & BTF_INT_SIGNED);
		{
			const unsigned char *p = (const unsigned char *)*rodata + vs->offset;
			unsigned long long u = 0;

			memcpy(&u, p, t->size); /* little endian (x86) */
			if (slots[n].is_signed && t->size < 8 && (u >> (t->size * 8 - 1)) & 1)
				u |= ~0ULL << (t->size * 8);
			slots[n].value = (long long)u;
		}
		n++;
	}
	return n;
}

static void set_param(void *rodata, struct param_slot *s, long long v)
{
	long long lo, hi;

	if (s->size == 8) {
		lo = s->is_signed ? LLONG_MIN : 0;
		hi = LLONG_MAX;
	} else if (s->is_signed) {
		hi = (1LL << (s->size * 8 - 1)) - 1;
		lo = -hi - 1;
	} else {
		lo = 0;
		hi = (long long)((1ULL << (s->size * 8)) - 1);
	}
	if (v < lo || v > hi)
		die("--param %s=%lld outside [%lld, %lld] (%s %u-byte integer)", s->name, v, lo, hi,
		    s->is_signed ? "signed" : "unsigned", s->size);
	memcpy((char *)rodata + s->off, &v, s->size);
	s->value = v;
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

static void write_ready(const char *path, const char *name, struct bpf_object *obj, __u32 link_id,
			struct param_slot *slots, int nslots)
{
	char tmp[PATH_MAX + 8];
	struct bpf_program *prog;
	struct bpf_map *map;
	const char *sep = "";
	FILE *f;
	int i;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		die("--ready-file path too long");
	f = fopen(tmp, "w");
	if (!f)
		die("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f, "{\"name\": \"%s\", \"pid\": %d, \"link_id\": %u, \"map_ids\": [", name, (int)getpid(), link_id);
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__fd(map) < 0)
			continue;
		fprintf(f, "%s%u", sep, fd_id(bpf_map__fd(map), 1));
		sep = ", ";
	}
	fprintf(f, "], \"prog_ids\": [");
	sep = "";
	bpf_object__for_each_program(prog, obj) {
		if (bpf_program__fd(prog) < 0)
			continue;
		fprintf(f, "%s%u", sep, fd_id(bpf_program__fd(prog), 0));
		sep = ", ";
	}
	fprintf(f, "], \"params\": {");
	for (i = 0; i < nslots; i++)
		fprintf(f, "%s\"%s\": %lld", i ? ", " : "", slots[i].name, slots[i].value);
	fprintf(f, "}}\n");
	if (fclose(f) || rename(tmp, path))
		die("cannot write %s: %s", path, strerror(errno));
}

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static double bw_bps(__u32 bw, __u32 mss)
{
	return (double)bw * mss * 8.0 * 1e6 / (double)(1u << 24);
}

static const char *mode_name(unsigned m)
{
	static const char *const n[] = { "STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT" };

	return m < 4 ? n[m] : "UNKNOWN";
}

static const char *phase_name(unsigned p)
{
	static const char *const n[] = { "UP", "DOWN", "CRUISE", "REFILL" };

	return p < 4 ? n[p] : "";
}

/* "" for the unset marker ~0 */
static const char *u32_or_empty(__u32 v, char *buf, size_t n)
{
	if (v == ~0U)
		return "";
	snprintf(buf, n, "%u", v);
	return buf;
}

static const char *bw_or_empty(__u32 v, __u32 mss, char *buf, size_t n)
{
	if (v == ~0U)
		return "";
	snprintf(buf, n, "%.0f", bw_bps(v, mss));
	return buf;
}

struct tuple_cache {
	__u64 flow_id;
	char sa[INET6_ADDRSTRLEN], da[INET6_ADDRSTRLEN];
	__u16 sport, dport;
};

#define TUPLES 8192
static struct tuple_cache tuples[TUPLES]; /* events carry only the flow id */

static void remember_tuple(__u64 key, const struct bbr3_state *s, const char *sa, const char *da)
{
	struct tuple_cache *t = &tuples[key % TUPLES];

	t->flow_id = key + 1; /* 0: empty */
	snprintf(t->sa, sizeof(t->sa), "%s", sa);
	snprintf(t->da, sizeof(t->da), "%s", da);
	t->sport = s->sport;
	t->dport = s->dport;
}

static void sample_state(int map_fd, FILE *csv)
{
	__u64 key, next, t = now_ns(), closed[64];
	struct bbr3_state s;
	char sa[INET6_ADDRSTRLEN], da[INET6_ADDRSTRLEN], b1[32], b2[32], b3[32];
	int has_key = 0, nclosed = 0, af, i;

	while (bpf_map_get_next_key(map_fd, has_key ? &key : NULL, &next) == 0) {
		double loss_rate;

		key = next;
		has_key = 1;
		if (bpf_map_lookup_elem(map_fd, &key, &s))
			continue;
		af = s.family == 10 ? AF_INET6 : AF_INET;
		inet_ntop(af, s.saddr, sa, sizeof(sa));
		inet_ntop(af, s.daddr, da, sizeof(da));
		remember_tuple(key, &s, sa, da);
		loss_rate = s.last_round_delivered + s.last_round_lost ?
			(double)s.last_round_lost / (s.last_round_delivered + s.last_round_lost) : 0.0;
		fprintf(csv,
			"%llu,%llu,%s,%u,%s,%u,%s,%s,%.0f,%.0f,%.0f,%.0f,%s,%s,%s,%u,%.4f,%.4f,%u,%u,"
			"%u,%u,%u,%.5f,%.4f,%u,%.0f,%.0f,%u,%llu,%u,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%u\n",
			U64(t), U64(key), sa, s.sport, da, s.dport,
			mode_name(s.mode), phase_name(s.phase),
			bw_bps(s.bw, s.mss), bw_bps(s.max_bw, s.mss), bw_bps(s.bw_hi0, s.mss), bw_bps(s.bw_hi1, s.mss),
			bw_or_empty(s.bw_lo, s.mss, b1, sizeof(b1)),
			u32_or_empty(s.inflight_lo, b2, sizeof(b2)), u32_or_empty(s.inflight_hi, b3, sizeof(b3)),
			s.min_rtt_us, s.pacing_gain / 256.0, s.cwnd_gain / 256.0, s.cwnd, s.inflight,
			s.last_round_delivered, s.last_round_lost, s.last_round_ce, loss_rate,
			s.ecn_alpha / 256.0, s.ecn_eligible,
			bw_bps(s.bw_pct, s.mss), bw_bps(s.bw_pct_raw, s.mss), s.n_samples,
			U64(s.pacing_rate * 8), s.mss, U64(s.acks), U64(s.rounds), U64(s.rounds_lossy),
			U64(s.rounds_over), U64(s.too_high), U64(s.probes), U64(s.updated_ns), s.closed);
		if (s.closed && nclosed < 64)
			closed[nclosed++] = key;
	}
	for (i = 0; i < nclosed; i++)
		bpf_map_delete_elem(map_fd, &closed[i]);
	fflush(csv);
}

static int on_event(void *ctx, void *data, size_t len)
{
	FILE *f = ctx;
	const struct bbr3_event *e = data;
	const struct tuple_cache *t;
	char b1[32], b2[32];

	if (len < sizeof(*e))
		return 0;
	t = &tuples[e->flow_id % TUPLES];
	if (t->flow_id != e->flow_id + 1)
		t = NULL;
	fprintf(f, "%llu,%llu,%s,%u,%s,%u,%s,%s,%s,%s,%s,%.0f,%s,%s,%u,%u,%u,%u\n",
		U64(e->t_ns), U64(e->flow_id), t ? t->sa : "", t ? t->sport : 0, t ? t->da : "",
		t ? t->dport : 0,
		e->kind == BBR3_EV_TRANSITION ? "transition" : "loss_round",
		mode_name(e->from_mode), phase_name(e->from_phase), mode_name(e->to_mode), phase_name(e->to_phase),
		bw_bps(e->bw, e->mss), u32_or_empty(e->inflight_hi, b1, sizeof(b1)),
		u32_or_empty(e->inflight_lo, b2, sizeof(b2)), e->cwnd,
		e->round_delivered, e->round_lost, e->round_ce);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct param_slot slots[MAX_PARAMS];
	struct bpf_object *obj;
	struct bpf_map *ops = NULL, *map, *state_map = NULL, *events_map = NULL;
	struct ring_buffer *rb = NULL;
	struct sigaction sa;
	struct timespec period;
	FILE *csv = NULL, *evf = NULL;
	char oldname[16];
	void *elf, *rodata;
	size_t sz, name_at;
	int err, link_fd, nslots, i, j;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "mpvlab_cc");

	parse_args(argc, argv, &o);
	obj_path_for_msgs = o.obj;
	libbpf_set_print(libbpf_log);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	elf = read_file(o.obj, &sz);
	name_at = find_name_offset(elf, sz, o.obj, oldname, sizeof(oldname));
	memset((char *)elf + name_at, 0, 16);
	memcpy((char *)elf + name_at, o.name, strlen(o.name));

	obj = bpf_object__open_mem(elf, sz, &oo);
	if (!obj)
		die("cannot open %s: %s", o.obj, strerror(errno));
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS)
			ops = map;
		if (!strcmp(bpf_map__name(map), "mpvlab_bbr3_state"))
			state_map = map;
		if (!strcmp(bpf_map__name(map), "mpvlab_bbr3_events"))
			events_map = map;
	}
	nslots = list_params(obj, slots, MAX_PARAMS, &rodata);
	for (i = 0; i < o.nparams; i++) {
		for (j = 0; j < nslots; j++)
			if (!strcmp(slots[j].name, o.params[i].name))
				break;
		if (j == nslots) {
			char known[1024] = "";

			for (j = 0; j < nslots; j++)
				snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
					 j ? ", " : "", slots[j].name);
			die("%s has no parameter '%s' (a `const volatile` global named %s%s); it declares: %s",
			    o.obj, o.params[i].name, PARAM_PREFIX, o.params[i].name, nslots ? known : "none");
		}
		set_param(rodata, &slots[j], o.params[i].value);
		o.params[i].used = 1;
	}
	/* A congestion control needs its struct_ops programs only: an object that also holds kprobe,
	 * tracepoint or any other programs is refused before anything is loaded (libbpf would load
	 * them all as root even though nothing attaches them). */
	{
		struct bpf_program *prog;

		bpf_object__for_each_program(prog, obj) {
			enum bpf_prog_type pt = bpf_program__type(prog);

			if (pt != BPF_PROG_TYPE_STRUCT_OPS) {
				const char *ts = libbpf_bpf_prog_type_str(pt);

				die("%s: program '%s' (section %s) is of type %s; a congestion control object may "
				    "hold only struct_ops programs (SEC(\"struct_ops/...\"))", o.obj,
				    bpf_program__name(prog), bpf_program__section_name(prog), ts ? ts : "unknown");
			}
		}
	}
	if (o.check) {
		printf("{\"struct_ops\": \"%s\", \"params\": {", oldname);
		for (j = 0; j < nslots; j++)
			printf("%s\"%s\": %lld", j ? ", " : "", slots[j].name, slots[j].value);
		printf("}}\n");
		bpf_object__close(obj);
		return 0;
	}
	if (o.state_csv) {
		if (!state_map)
			die("--state-csv: %s exports no state (no map named mpvlab_bbr3_state)", o.obj);
		/* refresh the record twice per sampling period unless set explicitly */
		for (j = 0; j < nslots; j++) {
			int given = 0;

			for (i = 0; i < o.nparams; i++)
				given |= !strcmp(o.params[i].name, "export_us");
			if (!strcmp(slots[j].name, "export_us") && !given)
				set_param(rodata, &slots[j], (long long)(1e6 / (2.0 * o.state_hz)));
		}
	}
	if (o.events_csv && !events_map)
		die("--events-csv: %s exports no events (no ring buffer named mpvlab_bbr3_events)", o.obj);
	if (bpf_map__set_map_flags(ops, bpf_map__map_flags(ops) | BPF_F_LINK))
		die("cannot set BPF_F_LINK on the struct_ops map");

	err = bpf_object__load(obj);
	if (err)
		die_load(err);
	{
		struct bpf_link *prep = bpf_map__attach_struct_ops(ops);

		if (!prep)
			die("cannot prepare struct_ops map: %s", strerror(errno));
		free(prep); /* with BPF_F_LINK this is just the map fd; nothing to detach */
	}
	link_fd = struct_ops_link_create(bpf_map__fd(ops));
	if (link_fd < 0) {
		if (errno == EEXIST)
			die("a congestion control named '%s' is already registered", o.name);
		die("cannot register congestion control '%s' (struct_ops link): %s", o.name, strerror(errno));
	}
	if (o.state_csv) {
		csv = fopen(o.state_csv, "w");
		if (!csv)
			die("cannot open %s: %s", o.state_csv, strerror(errno));
		fprintf(csv, "t_ns,flow_id,saddr,sport,daddr,dport,mode,phase,bw_est_bps,max_bw_bps,"
			     "bw_hi0_bps,bw_hi1_bps,bw_lo_bps,inflight_lo,inflight_hi,min_rtt_us,"
			     "pacing_gain,cwnd_gain,cwnd,inflight,round_delivered,round_lost,round_ce,"
			     "loss_rate_round,ecn_alpha,ecn_eligible,percentile_bw_bps,raw_percentile_bw_bps,"
			     "n_samples,pacing_rate_bps,mss,acks,rounds,rounds_lossy,rounds_over_thresh,"
			     "inflight_too_high,probes,updated_ns,closed\n");
		fflush(csv);
	}
	if (o.events_csv) {
		evf = fopen(o.events_csv, "w");
		if (!evf)
			die("cannot open %s: %s", o.events_csv, strerror(errno));
		fprintf(evf, "t_ns,flow_id,saddr,sport,daddr,dport,kind,from_mode,from_phase,to_mode,"
			     "to_phase,bw_est_bps,inflight_hi,inflight_lo,cwnd,round_delivered,round_lost,round_ce\n");
		rb = ring_buffer__new(bpf_map__fd(events_map), on_event, evf, NULL);
		if (!rb)
			die("cannot open the event ring buffer: %s", strerror(errno));
	}
	if (o.ready_file) {
		struct bpf_link_info li;
		__u32 len = sizeof(li);

		memset(&li, 0, sizeof(li));
		write_ready(o.ready_file, o.name, obj, bpf_obj_get_info_by_fd(link_fd, &li, &len) ? 0 : li.id,
			    slots, nslots);
	}
	fprintf(stderr, "bpfcc-loader: registered '%s' from %s (was '%s')", o.name, o.obj, oldname);
	for (j = 0; j < nslots; j++)
		fprintf(stderr, " %s=%lld", slots[j].name, slots[j].value);
	fprintf(stderr, "\n");

	period.tv_sec = (time_t)(1.0 / o.state_hz);
	period.tv_nsec = (long)((1.0 / o.state_hz - (double)period.tv_sec) * 1e9);
	while (!stop_flag) {
		if (csv)
			sample_state(bpf_map__fd(state_map), csv);
		if (rb) {
			ring_buffer__poll(rb, (int)(1000.0 / o.state_hz) > 0 ? (int)(1000.0 / o.state_hz) : 1);
			fflush(evf);
		} else if (csv) {
			nanosleep(&period, NULL);
		} else {
			pause();
		}
	}
	if (csv) {
		sample_state(bpf_map__fd(state_map), csv);
		fclose(csv);
	}
	if (rb) {
		ring_buffer__consume(rb);
		ring_buffer__free(rb);
		fclose(evf);
	}
	close(link_fd); /* unregisters the CC */
	bpf_object__close(obj);
	free(elf);
	if (o.ready_file)
		unlink(o.ready_file);
	fprintf(stderr, "bpfcc-loader: unregistered '%s'\n", o.name);
	return 0;
}
