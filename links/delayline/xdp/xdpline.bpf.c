// SPDX-License-Identifier: GPL-2.0-only
/* XDP half of mpvlab-xdpline: stamp every IPv4 frame's arrival time into the frame's metadata
 * area and hand the frame to the line's AF_XDP socket. The stamp is taken here, in the ingress
 * device's receive path, so user space may read its rx ring late (only when it wakes to release
 * packets) and still count the delay from the true arrival. Everything that is not IPv4 (ARP)
 * goes on to the router's stack. A frame that cannot be stamped or handed over is dropped, not
 * passed: a packet must never cross the line without its delay. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} xdpline_xsks SEC(".maps");

/* [0] frames that could not get a metadata stamp (dropped) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} xdpline_cnt SEC(".maps");

SEC("xdp")
int xdpline_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u64 *meta;
	__u32 zero = 0;
	__u64 *cnt;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)))
		goto nostamp;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		goto nostamp;
	*meta = bpf_ktime_get_ns(); /* CLOCK_MONOTONIC, as the line's clock */
	/* The line binds queue 0 only (it refuses devices with more rx queues). */
	return bpf_redirect_map(&xdpline_xsks, 0, XDP_DROP);
nostamp:
	cnt = bpf_map_lookup_elem(&xdpline_cnt, &zero);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
