// SPDX-License-Identifier: GPL-2.0-only
/* Test fixture: writes a tcp_sock field a BPF CC may not write; the verifier
 * refuses it and bpfcc-loader must report the verifier's reason. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops/vr_cong_avoid")
void BPF_PROG(vr_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_una = 0; /* not writable from a BPF congestion control */
}

SEC("struct_ops/vr_ssthresh")
__u32 BPF_PROG(vr_ssthresh, struct sock *sk) { return tcp_reno_ssthresh(sk); }

SEC("struct_ops/vr_undo_cwnd")
__u32 BPF_PROG(vr_undo_cwnd, struct sock *sk) { return tcp_reno_undo_cwnd(sk); }

SEC(".struct_ops")
struct tcp_congestion_ops verifier_reject = {
	.cong_avoid = (void *)vr_cong_avoid,
	.ssthresh = (void *)vr_ssthresh,
	.undo_cwnd = (void *)vr_undo_cwnd,
	.name = "verifier_rej",
};
