// SPDX-License-Identifier: GPL-2.0-only
/* Test fixture: calls a kfunc no kernel exports; bpfcc-loader must name it. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void mpvlab_no_such_kfunc(struct sock *sk) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops/mk_cong_avoid")
void BPF_PROG(mk_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	mpvlab_no_such_kfunc(sk);
}

SEC("struct_ops/mk_ssthresh")
__u32 BPF_PROG(mk_ssthresh, struct sock *sk) { return tcp_reno_ssthresh(sk); }

SEC("struct_ops/mk_undo_cwnd")
__u32 BPF_PROG(mk_undo_cwnd, struct sock *sk) { return tcp_reno_undo_cwnd(sk); }

SEC(".struct_ops")
struct tcp_congestion_ops missing_kfunc = {
	.cong_avoid = (void *)mk_cong_avoid,
	.ssthresh = (void *)mk_ssthresh,
	.undo_cwnd = (void *)mk_undo_cwnd,
	.name = "missing_kfunc",
};
