// SPDX-License-Identifier: GPL-2.0-only
/*
 * ECN marking at a shaped link without a marking qdisc: a virtual ("phantom") queue, as in
 * Gibbens & Kelly and HULL, attached at clsact egress of the device whose root qdisc is the
 * shaping tbf. Per packet, under the map's spin lock:
 *
 *     backlog = max(0, backlog - rate * (now - last)) + len
 *     if backlog > K and the packet is ECT(0)/ECT(1): bpf_skb_ecn_set_ce
 *
 * clsact egress runs just before the packet is enqueued on the root qdisc, so the virtual queue
 * sees exactly the tbf's arrivals (skb->len, the length tbf charges) and drains at the tbf's rate:
 * it is the tbf's backlog up to the tbf's token bucket (a full bucket lets `burst` bytes through
 * at once, which the virtual queue counts as queued), with the tbf's tail drop at `limit`
 * mirrored. Measured (links/ecnmark/README.md): 0.9-2.0 KB above the real backlog when the queue
 * empties now and then (the bucket), 0.75-5 KB below under a standing queue (the tbf dequeues at
 * 0.99961 x its configured rate, so the virtual queue drains a little faster).
 * It marks at enqueue on the instantaneous backlog: DCTCP-style step marking.
 *
 * The packet starts with its Ethernet header here (veth / IFB egress; the IFB case gets the
 * header pushed back by mirred). The program never drops or redirects: TC_ACT_OK always.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "ecn_vq.h"

#define ECN_MASK 3
#define ECN_CE 3
#define LONG_GAP_NS 1000000000ULL /* beyond 1 s, drain in whole seconds (no u64 overflow of rate x dt) */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vq_state);
} vq_state SEC(".maps");

/* ECN bits of the packet: 0..3, or -1 for a packet without an IP header we parse. */
static __always_inline int ecn_of(struct __sk_buff *skb)
{
	__u8 b[2];

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 1, b, 1))
			return -1;
		return b[0] & ECN_MASK;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		/* version(4) | traffic class(8) | flow label(20): ECN = low 2 bits of the class */
		if (bpf_skb_load_bytes(skb, ETH_HLEN, b, 2))
			return -1;
		return (b[1] >> 4) & ECN_MASK;
	}
	return -1;
}

SEC("tc")
int ecn_vq(struct __sk_buff *skb)
{
	__u32 key = 0;
	struct vq_state *s = bpf_map_lookup_elem(&vq_state, &key);
	__u64 now, dt, drained, backlog;
	int ecn, over, mark;

	if (!s)
		return TC_ACT_OK;
	ecn = ecn_of(skb);
	now = bpf_ktime_get_ns();

	bpf_spin_lock(&s->lock);
	if (!s->configured) {
		bpf_spin_unlock(&s->lock);
		return TC_ACT_OK;
	}
	backlog = s->backlog_bytes;
	dt = now > s->last_ns ? now - s->last_ns : 0;
	if (dt >= LONG_GAP_NS) {
		drained = s->rate_Bps * (dt / 1000000000ULL);
		backlog = backlog > drained ? backlog - drained : 0;
		s->last_ns = now;
	} else {
		/* rate <= 1.25e9 B/s (10 Gbit/s, the loader's bound) x dt < 1e9 ns: < 1.25e18, no overflow */
		drained = s->rate_Bps * dt / 1000000000ULL;
		if (backlog > drained) {
			backlog -= drained;
			/* advance `last` only by the time the whole drained bytes took: the truncated
			 * fraction carries over, so the drain rate is exact over any number of packets */
			s->last_ns += drained * 1000000000ULL / s->rate_Bps;
		} else {
			backlog = 0;
			s->last_ns = now;
		}
	}
	/* The tbf tail-drops a packet that does not fit its limit (its bfifo child: backlog + len >
	 * limit); so does the virtual queue, or under overload it would grow past the real one without
	 * bound (measured: 7.6 MB virtual against a 300 KB limit, 40 Mbit/s UDP into 25 Mbit/s). */
	if (backlog + skb->len <= s->limit_bytes)
		backlog += skb->len;
	else
		s->over_limit++;
	s->backlog_bytes = backlog;
	if (backlog > s->max_backlog_bytes)
		s->max_backlog_bytes = backlog;
	s->pkts++;
	s->bytes += skb->len;
	over = backlog > s->threshold_bytes;
	if (over)
		s->over_threshold++;
	mark = 0;
	if (ecn < 0)
		s->non_ip++;
	else if (ecn == 0)
		s->not_ect++;
	else if (ecn == ECN_CE)
		s->ce_in++;
	else {
		s->ect++;
		mark = over;
	}
	bpf_spin_unlock(&s->lock);

	/* Helpers may not be called under the lock; the counters are corrected after. */
	if (mark) {
		if (bpf_skb_ecn_set_ce(skb) == 1) {
			__sync_fetch_and_add(&s->marked, 1);
		} else {
			__sync_fetch_and_add(&s->mark_failed, 1);
		}
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
