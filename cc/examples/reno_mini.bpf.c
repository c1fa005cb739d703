// SPDX-License-Identifier: GPL-2.0-only
/*
 * A tiny Reno-like congestion control: the worked example of a user's own
 * BPF CC for mpvlab (cc/README.md, "Your own BPF CC").
 *
 * The convention bpfcc-loader follows:
 *  1. exactly one `struct tcp_congestion_ops` in SEC(".struct_ops"); its
 *     .name is replaced by the run-scoped name at load time;
 *  2. parameters are `const volatile` integer globals named mpvlab_param_*;
 *     the scenario's `cc: {bpf: ..., params: {beta_pct: 70}}` sets them
 *     before load (unknown names are refused, values range-checked);
 *  3. everything else is plain libbpf C (clang -O2 -g -target bpf).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

/* Multiplicative decrease on loss, in percent of cwnd (Reno: 50). */
const volatile __u32 mpvlab_param_beta_pct = 50;
/* Additive increase per RTT in congestion avoidance, packets (Reno: 1). */
const volatile __u32 mpvlab_param_ai_pkts = 1;

static __always_inline __u32 max_u32(__u32 a, __u32 b) { return a > b ? a : b; }

SEC("struct_ops/reno_mini_init")
void BPF_PROG(reno_mini_init, struct sock *sk)
{
}

SEC("struct_ops/reno_mini_ssthresh")
__u32 BPF_PROG(reno_mini_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = (struct tcp_sock *)sk;

	return max_u32(tp->snd_cwnd * mpvlab_param_beta_pct / 100, 2);
}

SEC("struct_ops/reno_mini_cong_avoid")
void BPF_PROG(reno_mini_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (!tp->is_cwnd_limited)
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh) {          /* slow start */
		tp->snd_cwnd = tp->snd_cwnd + acked;
		if (tp->snd_cwnd > tp->snd_ssthresh)
			tp->snd_cwnd = tp->snd_ssthresh;
		return;
	}
	/* congestion avoidance: ai_pkts per cwnd of ACKed packets */
	tp->snd_cwnd_cnt += acked * mpvlab_param_ai_pkts;
	if (tp->snd_cwnd_cnt >= tp->snd_cwnd) {
		tp->snd_cwnd_cnt -= tp->snd_cwnd;
		tp->snd_cwnd = tp->snd_cwnd + 1;
	}
	if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
}

SEC("struct_ops/reno_mini_undo_cwnd")
__u32 BPF_PROG(reno_mini_undo_cwnd, struct sock *sk)
{
	const struct tcp_sock *tp = (struct tcp_sock *)sk;

	return max_u32(tp->snd_cwnd, tp->prior_cwnd);
}

SEC(".struct_ops")
struct tcp_congestion_ops reno_mini = {
	.init = (void *)reno_mini_init,
	.ssthresh = (void *)reno_mini_ssthresh,
	.cong_avoid = (void *)reno_mini_cong_avoid,
	.undo_cwnd = (void *)reno_mini_undo_cwnd,
	.name = "reno_mini",
};
