/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Per-call cost of a congestion control's main per-ACK function, measured by
 * the BPF program itself (bench/bench_cc_cost.py). Only compiled in with
 * -DMPVLAB_COST_BENCH (cc/Makefile builds separate build/bench/ objects), so
 * the objects the platform runs carry none of it.
 *
 * Why in-program timing: this kernel refuses fentry/fexit under lockdown
 * (docs/kernel-facts.md), and the kernel's own BPF run-time statistics need a
 * host-wide switch (kernel.bpf_stats_enabled / BPF_ENABLE_STATS) that other
 * users of the host would see. Two bpf_ktime_get_ns() calls around the work
 * cost ~20-40 ns, the same for every CC timed this way.
 *
 * One array entry: call count, sum, max and a histogram of 10 ns buckets up to
 * COST_BUCKETS x 10 ns (the last bucket holds everything above). Updated with
 * atomic adds: two CPUs can run cong_control of two sockets at once.
 */
#ifndef MPVLAB_COST_BENCH_H
#define MPVLAB_COST_BENCH_H

#define COST_BUCKETS 2048   /* 10 ns each: up to 20.47 us, then the overflow bucket */
#define COST_BUCKET_NS 10

struct mpvlab_cost {
	__u64 calls;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 hist[COST_BUCKETS];
};

#ifdef __bpf__
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mpvlab_cost);
} mpvlab_cost_map SEC(".maps");

static __always_inline void cost_note(__u64 ns)
{
	__u32 k = 0;
	struct mpvlab_cost *c = bpf_map_lookup_elem(&mpvlab_cost_map, &k);
	__u64 b = ns / COST_BUCKET_NS;

	if (!c)
		return;
	if (b >= COST_BUCKETS)
		b = COST_BUCKETS - 1;
	__sync_fetch_and_add(&c->calls, 1);
	__sync_fetch_and_add(&c->sum_ns, ns);
	__sync_fetch_and_add(&c->hist[b & (COST_BUCKETS - 1)], 1);
	if (ns > c->max_ns)   /* racy by design: a max, off by at most one concurrent call */
		c->max_ns = ns;
}
#endif
#endif
