/* mpvlab-xdpline: a constant-delay FIFO line between two interfaces of a router namespace, built on
 * AF_XDP (prototype, issue 36; links/delayline/README.md "The best alternative this kernel allows").
 *
 * xdpline.bpf.o on the ingress device stamps each IPv4 frame's arrival (bpf_ktime_get_ns) into
 * its metadata and redirects it to this process's AF_XDP rx socket (copy mode). The process
 * holds the frames in its rx UMEM, in arrival order, with target = arrival + delay, clamped to
 * the previous target (FIFO, as the NFQUEUE line). It sleeps until a release is due - never for an
 * arrival unless nothing is held - and on each wake-up reads every arrival from the rx ring
 * without a system call, releases every due frame (Ethernet addresses rewritten, TTL
 * decremented: the line is the router's forwarding for this direction) into the egress device's
 * AF_XDP tx socket, and kicks the kernel once per 32 frames (the copy-mode transmit budget).
 *
 * The XDP program is attached through a BPF link: when the process exits, however it exits, the
 * kernel closes the link and detaches the program. Frames that reach the router's stack while no
 * line runs are forwarded undelayed unless the router drops them (the bench adds an iptables
 * FORWARD DROP rule for the ingress device, so a dead line means 100 % loss as with NFQUEUE). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <linux/if_xdp.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../src/stats.h"

#define PROG "mpvlab-xdpline"
#define FRAME_SIZE 2048u
#define TX_FRAMES 4096u
#define TX_BUDGET 32u /* copy-mode frames sent per sendto (TX_BATCH_SIZE in net/xdp/xsk.c) */
#define MAX_DELAY_US 60000000LL
#define TX_RETRY_NS 50000LL /* retry interval while the egress device takes no frames */
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

/* One mmap'ed ring: producer/consumer indices shared with the kernel. */
struct ring {
	uint32_t *producer;
	uint32_t *consumer;
	void *descs;
	uint32_t mask;
	void *map;
	size_t map_len;
};

struct xsk {
	int fd;
	uint8_t *umem;
	size_t umem_len;
	struct ring fill, comp, data; /* data = rx ring or tx ring */
};

struct held {
	uint64_t addr;
	uint32_t len;
	int64_t target_ns;
};

struct line {
	struct xsk rx, tx;
	uint32_t frames;         /* rx UMEM frames = most frames held + in the kernel's rings */
	struct held *q;          /* FIFO ring of held frames, frames entries */
	uint32_t q_head, q_len;
	uint64_t *tx_free;       /* free tx UMEM frame addresses (stack) */
	uint32_t tx_nfree;
	uint8_t dst_mac[6], src_mac[6];
	int64_t delay_ns, tol_ns, last_target_ns;
	/* counters */
	uint64_t packets, bytes, released, released_at_exit, wakeups, tx_kicks, rx_batches;
	uint64_t max_held, drops_ttl, bad_stamp, tx_errors, stamp_late_max_ns, csum_fixed;
	uint64_t tx_dev_drops, tx_stalls, dropped_at_exit;
	int tx_blocked;           /* the egress device stopped taking frames: retry soon */
	int l4_csum;             /* --l4-csum full|keep */
	struct dl_stats st;      /* lateness histogram (shared with the NFQUEUE line) */
};

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint32_t ring_peek(struct ring *r, int producer_side)
{
	/* producer side: free slots; consumer side: filled slots */
	uint32_t prod, cons;

	if (producer_side) {
		cons = __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE);
		return r->mask + 1 - (*r->producer - cons);
	}
	prod = __atomic_load_n(r->producer, __ATOMIC_ACQUIRE);
	return prod - *r->consumer;
}

static void map_ring(int fd, struct ring *r, uint32_t n, size_t esize, uint64_t pgoff,
		     const struct xdp_ring_offset *off)
{
	r->map_len = off->desc + (size_t)n * esize;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)pgoff);
	if (r->map == MAP_FAILED)
		die("mmap AF_XDP ring");
	r->producer = (uint32_t *)((uint8_t *)r->map + off->producer);
	r->consumer = (uint32_t *)((uint8_t *)r->map + off->consumer);
	r->descs = (uint8_t *)r->map + off->desc;
	r->mask = n - 1;
}

/* One AF_XDP socket with its own UMEM of `frames` frames, bound in copy mode to queue 0 of ifindex. */
static void xsk_open(struct xsk *x, unsigned ifindex, uint32_t frames, int is_rx)
{
	struct xdp_umem_reg mr;
	struct xdp_mmap_offsets off;
	struct sockaddr_xdp sa;
	socklen_t ol = sizeof(off);
	int n = (int)frames;

	x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->fd < 0)
		die("socket(AF_XDP) (kernel without CONFIG_XDP_SOCKETS?)");
	x->umem_len = (size_t)frames * FRAME_SIZE;
	x->umem = mmap(NULL, x->umem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (x->umem == MAP_FAILED)
		die("mmap UMEM");
	memset(&mr, 0, sizeof(mr));
	mr.addr = (uint64_t)(uintptr_t)x->umem;
	mr.len = x->umem_len;
	mr.chunk_size = FRAME_SIZE;
	mr.headroom = 0;
	if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr)))
		die("XDP_UMEM_REG");
	if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) ||
	    setsockopt(x->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)))
		die("XDP fill/completion ring size");
	if (setsockopt(x->fd, SOL_XDP, is_rx ? XDP_RX_RING : XDP_TX_RING, &n, sizeof(n)))
		die("XDP rx/tx ring size");
	if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol))
		die("XDP_MMAP_OFFSETS");
	map_ring(x->fd, &x->fill, frames, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING, &off.fr);
	map_ring(x->fd, &x->comp, frames, sizeof(uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr);
	if (is_rx)
		map_ring(x->fd, &x->data, frames, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING, &off.rx);
	else
		map_ring(x->fd, &x->data, frames, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING, &off.tx);
	memset(&sa, 0, sizeof(sa));
	sa.sxdp_family = AF_XDP;
	sa.sxdp_ifindex = ifindex;
	sa.sxdp_queue_id = 0;
	sa.sxdp_flags = XDP_COPY;
	/* A socket closed a moment ago (a previous line on this device) releases its hold on the
	 * queue after an RCU grace period and a work item: EBUSY until then, so retry for 3 s. */
	for (int tries = 0; bind(x->fd, (struct sockaddr *)&sa, sizeof(sa)); tries++) {
		if (errno != EBUSY || tries >= 300)
			die("bind AF_XDP socket (copy mode, queue 0)");
		usleep(10000);
	}
}

static void fill_give(struct line *ln, uint64_t addr)
{
	struct ring *f = &ln->rx.fill;

	((uint64_t *)f->descs)[*f->producer & f->mask] = addr;
	__atomic_store_n(f->producer, *f->producer + 1, __ATOMIC_RELEASE);
}

/* Read every arrival waiting in the rx ring (no system call). */
static void read_arrivals(struct line *ln)
{
	struct ring *r = &ln->rx.data;
	uint32_t n = ring_peek(r, 0), i;
	int64_t now = n ? now_ns() : 0;

	if (!n)
		return;
	ln->rx_batches++;
	for (i = 0; i < n; i++) {
		struct xdp_desc *d = &((struct xdp_desc *)r->descs)[(*r->consumer + i) & r->mask];
		int64_t stamp, tgt;
		struct held *h;
		uint64_t s;

		memcpy(&s, ln->rx.umem + d->addr - sizeof(s), sizeof(s)); /* the XDP program's stamp */
		stamp = (int64_t)s;
		if (stamp > now || stamp < now - 10000000000LL) {
			ln->bad_stamp++; /* no stamp: count the delay from now */
			stamp = now;
		} else if ((uint64_t)(now - stamp) > ln->stamp_late_max_ns) {
			ln->stamp_late_max_ns = (uint64_t)(now - stamp);
		}
		tgt = stamp + ln->delay_ns;
		if (tgt < ln->last_target_ns)
			tgt = ln->last_target_ns; /* FIFO: never before the previous packet */
		ln->last_target_ns = tgt;
		h = &ln->q[(ln->q_head + ln->q_len) % ln->frames];
		h->addr = d->addr;
		h->len = d->len;
		h->target_ns = tgt;
		ln->q_len++;
		ln->packets++;
		ln->bytes += d->len;
	}
	__atomic_store_n(r->consumer, *r->consumer + n, __ATOMIC_RELEASE);
	if (ln->q_len > ln->max_held)
		ln->max_held = ln->q_len;
}

static void tx_reap(struct line *ln)
{
	struct ring *c = &ln->tx.comp;
	uint32_t n = ring_peek(c, 0), i;

	for (i = 0; i < n; i++)
		ln->tx_free[ln->tx_nfree++] = ((uint64_t *)c->descs)[(*c->consumer + i) & c->mask];
	__atomic_store_n(c->consumer, *c->consumer + n, __ATOMIC_RELEASE);
}

/* Hand the tx ring to the kernel until it is empty (copy mode sends TX_BUDGET frames per call).
 * Returns -1 when the device stops taking frames (a call that consumes nothing: the veth's
 * receive ring is full, NETDEV_TX_BUSY); the frames stay queued and the caller retries later. */
static int tx_kick(struct line *ln)
{
	struct ring *t = &ln->tx.data;
	int rc = 0;

	while (*t->producer != __atomic_load_n(t->consumer, __ATOMIC_ACQUIRE)) {
		uint32_t before = *t->consumer;
		int r;

		ln->tx_kicks++;
		r = (int)sendto(ln->tx.fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		if (r < 0 && errno == EBUSY)
			ln->tx_dev_drops++; /* NET_XMIT_DROP: the device took the frame and dropped it */
		else if (r < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EINTR && !ln->tx_errors++)
			fprintf(stderr, PROG ": sendto (tx kick): %s\n", strerror(errno)); /* counted, said once */
		if (__atomic_load_n(t->consumer, __ATOMIC_ACQUIRE) == before) {
			ln->tx_stalls++;
			rc = -1;
			break;
		}
	}
	tx_reap(ln);
	return rc;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	uint64_t acc = sum;
	uint16_t w;

	for (; n >= 2; p += 2, n -= 2) {
		memcpy(&w, p, 2);
		acc += w;
	}
	if (n)
		acc += *p; /* last odd byte, low-address byte first: little endian host order */
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return (uint32_t)acc;
}

/* Recompute a TCP or UDP checksum in full. A sender's veth leaves it partial (CHECKSUM_PARTIAL:
 * only the pseudo-header sum is in the field, the rest is "offloaded"); the skb's checksum state
 * does not travel through XDP into an AF_XDP socket, so the frame this line sends must carry a
 * complete checksum or the receiver drops it. Fragments and UDP without checksum stay as they are. */
static void l4_checksum(struct line *ln, struct iphdr *ip, size_t ip_room)
{
	size_t ihl = (size_t)ip->ihl * 4, tot = ntohs(ip->tot_len), l4len;
	uint8_t *l4 = (uint8_t *)ip + ihl;
	uint16_t *field, old, ph[2];
	uint32_t sum;

	if (ihl < sizeof(*ip) || tot > ip_room || tot <= ihl || (ntohs(ip->frag_off) & 0x3fff))
		return;
	l4len = tot - ihl;
	if (ip->protocol == IPPROTO_TCP && l4len >= 20)
		field = (uint16_t *)(l4 + 16);
	else if (ip->protocol == IPPROTO_UDP && l4len >= 8 && ((uint16_t *)l4)[3] != 0)
		field = (uint16_t *)(l4 + 6);
	else
		return;
	old = *field;
	*field = 0;
	ph[0] = htons(ip->protocol);
	ph[1] = htons((uint16_t)l4len);
	sum = csum_add(0, (const uint8_t *)&ip->saddr, 8);
	sum = csum_add(sum, (const uint8_t *)ph, 4);
	sum = csum_add(sum, l4, l4len);
	*field = (uint16_t)~sum;
	if (ip->protocol == IPPROTO_UDP && *field == 0)
		*field = 0xffff;
	if (*field != old)
		ln->csum_fixed++;
}

/* Copy one held frame into a tx frame, make it a forwarded frame and queue it for transmission.
 * Returns 0 when the device cannot take more now (no tx frame or ring slot even after a kick). */
static int tx_one(struct line *ln, const struct held *h)
{
	struct ring *t = &ln->tx.data;
	struct xdp_desc *d;
	uint8_t *p;
	struct iphdr *ip;
	uint32_t sum;
	uint64_t a;

	if (!ln->tx_nfree || ring_peek(t, 1) == 0) {
		tx_kick(ln);
		if (!ln->tx_nfree || ring_peek(t, 1) == 0)
			return 0;
	}
	a = ln->tx_free[--ln->tx_nfree];
	p = ln->tx.umem + a;
	memcpy(p, ln->rx.umem + h->addr, h->len);
	memcpy(p, ln->dst_mac, 6);
	memcpy(p + 6, ln->src_mac, 6);
	ip = (struct iphdr *)(p + sizeof(struct ethhdr));
	if (h->len < sizeof(struct ethhdr) + sizeof(*ip) || ip->ttl <= 1) {
		ln->drops_ttl++; /* a router would send ICMP time exceeded; the prototype drops */
		ln->tx_free[ln->tx_nfree++] = a;
		return 1;
	}
	/* TTL - 1 with an incremental checksum update (RFC 1624) */
	ip->ttl--;
	/* one's-complement addition works in either byte order: add the change in network order */
	sum = (uint32_t)ip->check + htons(0x0100);
	ip->check = (uint16_t)(sum + (sum >> 16));
	if (ln->l4_csum)
		l4_checksum(ln, ip, h->len - sizeof(struct ethhdr));
	d = &((struct xdp_desc *)t->descs)[*t->producer & t->mask];
	d->addr = a;
	d->len = h->len;
	d->options = 0;
	__atomic_store_n(t->producer, *t->producer + 1, __ATOMIC_RELEASE);
	return 1;
}

/* Release every held frame whose target has passed (all of them at exit), in order, as far as
 * the egress device takes them; sets tx_blocked when it stopped taking them. */
static void release_due(struct line *ln, int all)
{
	int64_t now = now_ns();
	int n = 0;

	ln->tx_blocked = 0;
	while (ln->q_len) {
		struct held *h = &ln->q[ln->q_head];

		if (!all && h->target_ns > now)
			break;
		if (!tx_one(ln, h)) {
			ln->tx_blocked = 1; /* the frame stays held, first in line */
			break;
		}
		if (h->target_ns <= now)
			dl_stats_late(&ln->st, now - h->target_ns);
		else
			ln->released_at_exit++;
		fill_give(ln, h->addr);
		ln->q_head = (ln->q_head + 1) % ln->frames;
		ln->q_len--;
		ln->released++;
		n++;
	}
	if (n && tx_kick(ln))
		ln->tx_blocked = 1;
}

/* Next wake-up: the latest held target not beyond head target + tolerance, so one wake-up releases
 * every frame due within the tolerance (lateness added <= tolerance, order unchanged). */
static int64_t next_wake(const struct line *ln)
{
	int64_t head = ln->q[ln->q_head].target_ns, w = head;
	uint32_t i;

	for (i = 1; i < ln->q_len; i++) {
		int64_t t = ln->q[(ln->q_head + i) % ln->frames].target_ns;

		if (t > head + ln->tol_ns)
			break;
		w = t;
	}
	return w;
}

static int parse_mac(const char *s, uint8_t m[6])
{
	unsigned v[6];
	int i;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (i = 0; i < 6; i++)
		m[i] = (uint8_t)v[i];
	return 0;
}

static void dev_mac(const char *dev, uint8_t m[6])
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr))
		die("SIOCGIFHWADDR (egress device MAC)");
	memcpy(m, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
}

static int rx_queues(const char *dev)
{
	char path[128];
	int n = 0, i;

	for (i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "/sys/class/net/%s/queues/rx-%d", dev, i);
		if (access(path, F_OK))
			break;
		n++;
	}
	return n;
}

static void write_stats(const char *path, struct line *ln, const char *in, const char *out,
			int64_t start, int64_t end, uint64_t nostamp, const struct xdp_statistics *xs)
{
	struct rusage ru;
	char tmp[PATH_MAX];
	double u, s;
	FILE *f;

	getrusage(RUSAGE_SELF, &ru);
	u = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	s = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		die("stats file");
	fprintf(f, "{\n  \"backend\": \"xdp\",\n  \"in\": \"%s\",\n  \"out\": \"%s\",\n", in, out);
	fprintf(f, "  \"delay_us\": %lld,\n  \"batch_tolerance_us\": %lld,\n  \"frames\": %u,\n",
		(long long)(ln->delay_ns / 1000), (long long)(ln->tol_ns / 1000), ln->frames);
	fprintf(f, "  \"start_ns\": %lld,\n  \"end_ns\": %lld,\n", (long long)start, (long long)end);
	fprintf(f, "  \"packets\": %llu,\n  \"bytes\": %llu,\n  \"released\": %llu,\n"
		"  \"released_at_exit\": %llu,\n",
		(unsigned long long)ln->packets, (unsigned long long)ln->bytes,
		(unsigned long long)ln->released, (unsigned long long)ln->released_at_exit);
	fprintf(f, "  \"wakeups\": %llu,\n  \"tx_kicks\": %llu,\n  \"rx_batches\": %llu,\n"
		"  \"max_queued\": %llu,\n",
		(unsigned long long)ln->wakeups, (unsigned long long)ln->tx_kicks,
		(unsigned long long)ln->rx_batches, (unsigned long long)ln->max_held);
	fprintf(f, "  \"packets_per_wakeup\": %.3f,\n  \"packets_per_tx_kick\": %.3f,\n",
		ln->wakeups ? (double)ln->released / (double)ln->wakeups : 0.0,
		ln->tx_kicks ? (double)ln->released / (double)ln->tx_kicks : 0.0);
	fprintf(f, "  \"tx_dev_drops\": %llu,\n  \"tx_stalls\": %llu,\n  \"dropped_at_exit\": %llu,\n",
		(unsigned long long)ln->tx_dev_drops, (unsigned long long)ln->tx_stalls,
		(unsigned long long)ln->dropped_at_exit);
	fprintf(f, "  \"drops_ttl\": %llu,\n  \"tx_errors\": %llu,\n  \"bad_stamp\": %llu,\n"
		"  \"drops_nostamp\": %llu,\n  \"stamp_to_read_max_us\": %.1f,\n"
		"  \"l4_csum\": \"%s\",\n  \"csum_rewritten\": %llu,\n",
		(unsigned long long)ln->drops_ttl, (unsigned long long)ln->tx_errors,
		(unsigned long long)ln->bad_stamp, (unsigned long long)nostamp,
		(double)ln->stamp_late_max_ns / 1e3, ln->l4_csum ? "full" : "keep",
		(unsigned long long)ln->csum_fixed);
	/* the kernel's AF_XDP rx counters: ring full = the line held too many frames (--frames) */
	fprintf(f, "  \"xsk_rx_dropped\": %llu,\n  \"xsk_rx_ring_full\": %llu,\n"
		"  \"xsk_rx_fill_ring_empty\": %llu,\n  \"xsk_rx_invalid_descs\": %llu,\n",
		(unsigned long long)xs->rx_dropped, (unsigned long long)xs->rx_ring_full,
		(unsigned long long)xs->rx_fill_ring_empty_descs, (unsigned long long)xs->rx_invalid_descs);
	fprintf(f, "  \"cpu_user_s\": %.6f,\n  \"cpu_sys_s\": %.6f,\n  \"cpu_us_per_packet\": %.3f,\n",
		u, s, ln->packets ? (u + s) * 1e6 / (double)ln->packets : 0.0);
	fprintf(f, "  \"lateness_us\": {\"n\": %llu, \"mean\": %.3f, \"p50\": %.1f, \"p99\": %.1f, \"max\": %.3f}\n}\n",
		(unsigned long long)ln->st.late_n, ln->st.late_n ? ln->st.late_sum_ns / 1e3 / (double)ln->st.late_n : 0.0,
		dl_stats_quantile_us(&ln->st, 0.5), dl_stats_quantile_us(&ln->st, 0.99),
		(double)ln->st.late_max_ns / 1e3);
	if (fclose(f) || rename(tmp, path))
		die("writing stats");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: " PROG " --in DEV --out DEV --dst-mac MAC --delay-us D\n"
		"        [--batch-tolerance-us T (0..10000, default 150)] [--frames N (power of 2, 64..65536, default 8192)]\n"
		"        [--l4-csum full|keep (default full: recompute TCP/UDP checksums)]\n"
		"        [--rt-prio P (default 50; 0 = normal)] [--bpf-obj FILE] [--ready-file PATH] [--stats FILE]\n");
	exit(2);
}

static long long num_arg(const char *s, const char *name, long long lo, long long hi)
{
	char *e;
	long long v;

	errno = 0;
	v = strtoll(s, &e, 10);
	if (errno || *e || e == s || v < lo || v > hi) {
		fprintf(stderr, PROG ": %s must be an integer in %lld..%lld, got '%s'\n", name, lo, hi, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"in", 1, 0, 'i'}, {"out", 1, 0, 'o'}, {"dst-mac", 1, 0, 'm'}, {"delay-us", 1, 0, 'd'},
		{"batch-tolerance-us", 1, 0, 't'}, {"frames", 1, 0, 'f'}, {"rt-prio", 1, 0, 'p'},
		{"bpf-obj", 1, 0, 'b'}, {"l4-csum", 1, 0, 'c'}, {"ready-file", 1, 0, 'r'}, {"stats", 1, 0, 's'}, {0, 0, 0, 0}};
	const char *in = NULL, *out = NULL, *mac = NULL, *obj_path = NULL, *ready = NULL, *stats = NULL;
	char exe_obj[PATH_MAX];
	long long delay_us = -1, tol_us = 150, frames = 8192, rt = 50;
	struct line ln;
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_link *link;
	struct xdp_statistics xs;
	struct sigaction sa;
	sigset_t block, orig;
	unsigned in_idx, out_idx;
	int64_t start;
	uint64_t nostamp = 0;
	uint32_t i, key = 0;
	int c, map_fd, nq, l4_full = 1;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i': in = optarg; break;
		case 'o': out = optarg; break;
		case 'm': mac = optarg; break;
		case 'd': delay_us = num_arg(optarg, "--delay-us", 0, MAX_DELAY_US); break;
		case 't': tol_us = num_arg(optarg, "--batch-tolerance-us", 0, 10000); break;
		case 'f': frames = num_arg(optarg, "--frames", 64, 65536); break;
		case 'p': rt = num_arg(optarg, "--rt-prio", 0, 99); break;
		case 'b': obj_path = optarg; break;
		case 'c':
			if (strcmp(optarg, "full") && strcmp(optarg, "keep")) {
				fprintf(stderr, PROG ": --l4-csum must be full or keep, got '%s'\n", optarg);
				return 2;
			}
			l4_full = !strcmp(optarg, "full");
			break;
		case 'r': ready = optarg; break;
		case 's': stats = optarg; break;
		default: usage();
		}
	}
	if (!in || !out || !mac || delay_us < 0 || optind != argc)
		usage();
	if (frames & (frames - 1)) {
		fprintf(stderr, PROG ": --frames must be a power of 2, got %lld\n", frames);
		return 2;
	}
	memset(&ln, 0, sizeof(ln));
	if (parse_mac(mac, ln.dst_mac)) {
		fprintf(stderr, PROG ": --dst-mac must be aa:bb:cc:dd:ee:ff, got '%s'\n", mac);
		return 2;
	}
	in_idx = if_nametoindex(in);
	out_idx = if_nametoindex(out);
	if (!in_idx || !out_idx) {
		fprintf(stderr, PROG ": no such device: %s\n", !in_idx ? in : out);
		return 1;
	}
	nq = rx_queues(in);
	if (nq != 1) {
		fprintf(stderr, PROG ": %s has %d rx queues; the line binds queue 0 only and needs exactly one\n", in, nq);
		return 1;
	}
	dev_mac(out, ln.src_mac);
	ln.frames = (uint32_t)frames;
	ln.l4_csum = l4_full;
	ln.delay_ns = delay_us * 1000;
	ln.tol_ns = tol_us * 1000;
	ln.last_target_ns = INT64_MIN;
	ln.q = calloc(ln.frames, sizeof(*ln.q));
	ln.tx_free = calloc(TX_FRAMES, sizeof(*ln.tx_free));
	if (!ln.q || !ln.tx_free || dl_stats_init(&ln.st))
		die("calloc");

	prctl(PR_SET_TIMERSLACK, 1UL);
	if (rt > 0) {
		struct sched_param sp = {.sched_priority = (int)rt};

		if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
			fprintf(stderr, PROG ": cannot set SCHED_FIFO priority %lld: %s (use --rt-prio 0)\n", rt, strerror(errno));
			return 1;
		}
	}

	/* Sockets first, then the program: no frame is redirected before a socket is in the map. */
	xsk_open(&ln.rx, in_idx, ln.frames, 1);
	xsk_open(&ln.tx, out_idx, TX_FRAMES, 0);
	for (i = 0; i < ln.frames; i++)
		fill_give(&ln, (uint64_t)i * FRAME_SIZE);
	for (i = 0; i < TX_FRAMES; i++)
		ln.tx_free[ln.tx_nfree++] = (uint64_t)i * FRAME_SIZE;

	if (!obj_path) {
		ssize_t n = readlink("/proc/self/exe", exe_obj, sizeof(exe_obj) - 32);

		if (n <= 0)
			die("readlink /proc/self/exe");
		exe_obj[n] = 0;
		strcpy(strrchr(exe_obj, '/') + 1, "xdpline.bpf.o");
		obj_path = exe_obj;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, PROG ": cannot load %s (BPF object)\n", obj_path);
		return 1;
	}
	map_fd = bpf_object__find_map_fd_by_name(obj, "xdpline_xsks");
	prog = bpf_object__find_program_by_name(obj, "xdpline_rx");
	if (map_fd < 0 || !prog) {
		fprintf(stderr, PROG ": %s lacks xdpline_xsks or xdpline_rx\n", obj_path);
		return 1;
	}
	if (bpf_map_update_elem(map_fd, &key, &ln.rx.fd, 0))
		die("XSKMAP update");
	/* A BPF link: the kernel detaches the program when the last fd closes (exit, crash, SIGKILL). */
	link = bpf_program__attach_xdp(prog, (int)in_idx);
	if (!link) {
		fprintf(stderr, PROG ": cannot attach XDP to %s: %s\n", in, strerror(errno));
		return 1;
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		fprintf(stderr, PROG ": mlockall: %s (continuing)\n", strerror(errno));

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &orig);
	sigdelset(&orig, SIGTERM);
	sigdelset(&orig, SIGINT);

	if (ready) {
		char tmp[PATH_MAX];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) || rename(tmp, ready))
			die("ready file");
	}
	start = now_ns();
	while (!stop_flag) {
		struct pollfd pfd = {.fd = ln.rx.fd, .events = POLLIN};
		struct timespec ts, *tsp = NULL;
		int r;

		read_arrivals(&ln);
		release_due(&ln, 0);
		if (ln.q_len || ln.tx_blocked) {
			/* sleep for the next release only; arrivals wait in the rx ring, stamped */
			int64_t d = ln.q_len ? next_wake(&ln) - now_ns() : 0;

			/* A device that takes no frames (veth's receive ring full: it stops its tx queue
			 * until the receiver drains it) gets TX_RETRY_NS, never a busy loop: at SCHED_FIFO
			 * that loop would starve the very receiver that must drain it. */
			if (ln.tx_blocked)
				d = TX_RETRY_NS;
			else if (d <= 0)
				continue;
			ts.tv_sec = d / 1000000000LL;
			ts.tv_nsec = d % 1000000000LL;
			tsp = &ts;
			r = ppoll(NULL, 0, tsp, &orig);
		} else {
			r = ppoll(&pfd, 1, NULL, &orig); /* nothing held: the next arrival wakes us */
		}
		ln.wakeups++;
		if (r < 0 && errno != EINTR)
			die("ppoll");
	}
	/* Shutdown: detach first (no new arrivals), read what came, release everything at once. */
	bpf_link__destroy(link);
	read_arrivals(&ln);
	for (i = 0; i < 1000; i++) { /* up to ~1 s for a device that takes frames slowly */
		release_due(&ln, 1);
		if (!ln.q_len && !ln.tx_blocked)
			break;
		usleep(1000);
	}
	ln.dropped_at_exit = ln.q_len;
	{
		socklen_t l = sizeof(xs);
		int cfd = bpf_object__find_map_fd_by_name(obj, "xdpline_cnt");

		memset(&xs, 0, sizeof(xs));
		if (getsockopt(ln.rx.fd, SOL_XDP, XDP_STATISTICS, &xs, &l))
			memset(&xs, 0xff, sizeof(xs));
		if (cfd < 0 || bpf_map_lookup_elem(cfd, &key, &nostamp))
			nostamp = UINT64_MAX;
	}
	if (stats)
		write_stats(stats, &ln, in, out, start, now_ns(), nostamp, &xs);
	bpf_object__close(obj);
	return 0;
}
