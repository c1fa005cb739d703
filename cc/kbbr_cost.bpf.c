// SPDX-License-Identifier: GPL-2.0-only
/*
 * Bench only (bench/bench_cc_cost.py): the kernel's BBR v1 (tcp_bbr.c) as a
 * BPF struct_ops whose every op is the kernel's own function (kfuncs), with
 * cong_control timing the kernel's bbr_main. It is the baseline the BPF CCs'
 * per-ACK cost is compared with, measured the same way (cost_bench.h): the
 * kernel's bbr registered under its own name cannot be timed here (fentry is
 * refused under lockdown), but the code this times is exactly that bbr_main.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "cost_bench.h"
#include "kernel_bbr_ops.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/kbbr_init")
void BPF_PROG(kbbr_init, struct sock *sk)
{
	bbr_init(sk);
}

SEC("struct_ops/kbbr_cong_control")
void BPF_PROG(kbbr_cong_control, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	__u64 t0 = bpf_ktime_get_ns();

	bbr_main(sk, ack, flag, rs);
	cost_note(bpf_ktime_get_ns() - t0);
}

KERNEL_BBR_PASSTHROUGH_OPS(kbbr)

/* bpfcc-loader writes the run-scoped name over this one before loading. */
SEC(".struct_ops")
struct tcp_congestion_ops kbbr_cost_ops = {
	.init = (void *)kbbr_init,
	.cong_control = (void *)kbbr_cong_control,
	.ssthresh = (void *)kbbr_ssthresh,
	.undo_cwnd = (void *)kbbr_undo_cwnd,
	.cwnd_event = (void *)kbbr_cwnd_event,
	.set_state = (void *)kbbr_set_state,
	.min_tso_segs = (void *)kbbr_min_tso_segs,
	.sndbuf_expand = (void *)kbbr_sndbuf_expand,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "kbbr_cost",
};
