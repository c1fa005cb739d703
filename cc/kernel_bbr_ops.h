/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kernel's BBR v1 (net/ipv4/tcp_bbr.c) as kfuncs, and the struct_ops
 * callbacks a CC built on it passes straight through: bbr_s.bpf.c (BBR-S,
 * which replaces only the bandwidth estimate in cong_control) and the bench's
 * kbbr_cost.bpf.c (the kernel's bbr_main, timed). Each object defines its own
 * init and cong_control and calls KERNEL_BBR_PASSTHROUGH_OPS(prefix) for the
 * rest; its ops table names prefix##_ssthresh … prefix##_sndbuf_expand.
 */
#ifndef MPVLAB_KERNEL_BBR_OPS_H
#define MPVLAB_KERNEL_BBR_OPS_H

#define TCP_CONG_NON_RESTRICTED 0x1 /* include/net/tcp.h (a macro: not in vmlinux.h) */

extern void bbr_init(struct sock *sk) __ksym;
extern void bbr_main(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs) __ksym;
extern u32 bbr_sndbuf_expand(struct sock *sk) __ksym;
extern u32 bbr_undo_cwnd(struct sock *sk) __ksym;
extern void bbr_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym;
extern u32 bbr_ssthresh(struct sock *sk) __ksym;
extern u32 bbr_min_tso_segs(struct sock *sk) __ksym;
extern void bbr_set_state(struct sock *sk, u8 new_state) __ksym;

#define KERNEL_BBR_PASSTHROUGH_OPS(prefix)                                        \
	SEC("struct_ops/" #prefix "_ssthresh")                                    \
	u32 BPF_PROG(prefix##_ssthresh, struct sock *sk)                          \
	{                                                                         \
		return bbr_ssthresh(sk);                                          \
	}                                                                         \
	SEC("struct_ops/" #prefix "_undo_cwnd")                                   \
	u32 BPF_PROG(prefix##_undo_cwnd, struct sock *sk)                         \
	{                                                                         \
		return bbr_undo_cwnd(sk);                                         \
	}                                                                         \
	SEC("struct_ops/" #prefix "_cwnd_event")                                  \
	void BPF_PROG(prefix##_cwnd_event, struct sock *sk, enum tcp_ca_event event) \
	{                                                                         \
		bbr_cwnd_event(sk, event);                                        \
	}                                                                         \
	SEC("struct_ops/" #prefix "_set_state")                                   \
	void BPF_PROG(prefix##_set_state, struct sock *sk, u8 new_state)          \
	{                                                                         \
		bbr_set_state(sk, new_state);                                     \
	}                                                                         \
	SEC("struct_ops/" #prefix "_min_tso_segs")                                \
	u32 BPF_PROG(prefix##_min_tso_segs, struct sock *sk)                      \
	{                                                                         \
		return bbr_min_tso_segs(sk);                                      \
	}                                                                         \
	SEC("struct_ops/" #prefix "_sndbuf_expand")                               \
	u32 BPF_PROG(prefix##_sndbuf_expand, struct sock *sk)                     \
	{                                                                         \
		return bbr_sndbuf_expand(sk);                                     \
	}

#endif
