// SPDX-License-Identifier: GPL-2.0-only
/* Test fixture: a valid congestion control plus a kprobe and a tracepoint program. The loader must
 * refuse the object before loading anything (a CC needs its struct_ops programs only), and
 * `mpvlab validate` must say so (issue 33). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

SEC("struct_ops/wk_cong_avoid")
void BPF_PROG(wk_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) { tcp_reno_cong_avoid(sk, ack, acked); }

SEC("struct_ops/wk_ssthresh")
__u32 BPF_PROG(wk_ssthresh, struct sock *sk) { return tcp_reno_ssthresh(sk); }

SEC("struct_ops/wk_undo_cwnd")
__u32 BPF_PROG(wk_undo_cwnd, struct sock *sk) { return tcp_reno_undo_cwnd(sk); }

SEC("kprobe/tcp_sendmsg")
int wk_snoop(void *ctx) { return 0; }

SEC("tracepoint/syscalls/sys_enter_openat")
int wk_trace(void *ctx) { return 0; }

SEC(".struct_ops")
struct tcp_congestion_ops with_kprobe = {
	.cong_avoid = (void *)wk_cong_avoid,
	.ssthresh = (void *)wk_ssthresh,
	.undo_cwnd = (void *)wk_undo_cwnd,
	.name = "with_kprobe",
};
