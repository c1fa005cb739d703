/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Records shared between steer.bpf.c (kernel side) and the controller
 * (userspace). Fixed-size structs: both sides agree on the layout.
 * All BPF objects of the controller are named mps_*.
 */
#ifndef MPVLAB_STEER_H
#define MPVLAB_STEER_H

/* Subflow key: kernel address of the subflow context + MPTCP token (an
 * address alone could be reused by a later connection). */
struct mps_key {
	__u64 ptr;
	__u32 token;
	__u32 pad;
};

/* What the kernel saw of one subflow, written by BPF at every scheduling
 * decision (tp_btf/mptcp_subflow_get_send) and read by the controller. */
struct mps_sf {
	__u64 msk; /* kernel address of the MPTCP socket (groups subflows) */
	__u32 token;
	__u32 subflow_id;
	__u32 laddr, raddr; /* IPv4, network order */
	__u16 lport, rport; /* host order */
	__u32 tcp_state;
	__u32 closed; /* set by inet_sock_set_state when it leaves ESTABLISHED */
	/* state snapshot at the last decision in which it was evaluated */
	__u64 eval_ns;
	__u32 srtt_us;
	__u32 min_rtt_us; /* tcp_sock.rtt_min (windowed min, tcp_min_rtt_wlen) */
	__u32 cwnd;
	__u32 in_flight; /* packets_out - (sacked_out + lost_out) + retrans_out */
	__u32 unsent; /* write_seq - snd_nxt, bytes queued but not sent */
	__u32 wmem_queued;
	__u32 sndbuf;
	__u32 mss;
	__u32 rate_delivered; /* last delivery-rate sample: packets ... */
	__u32 rate_interval_us; /* ... over this interval */
	__u32 rate_app_limited;
	__u32 backup; /* backup || request_bkup, as the scheduler reads it */
	__u64 pacing_rate; /* bytes/s */
	__u32 is_bbr; /* icsk_ca_priv holds struct bbr (kernel bbr or BBR-S) */
	__u32 bbr_bw_raw; /* pkts/us << 24 */
	__u32 bbr_min_rtt_us;
	__u32 snd_wnd; /* peer's receive window (bytes) */
	__u32 unacked; /* snd_nxt - snd_una (bytes) */
	__u32 rtt_dev_us; /* mean deviation of the RTT (tcp_sock.mdev_us / 4) */
	/* assignment accounting (advance of rel_write_seq between decisions) */
	__u32 last_seq;
	__u32 write_seq_at_eval; /* tcp write_seq when last evaluated */
	__u32 allowed_at_eval; /* controller's policy at the last evaluation: 1/0, 2 = no policy yet */
	__u32 epoch_at_eval;
	__u64 decisions;
	__u64 bytes_handed;
	__u64 bytes_conf; /* handed while the policy allowed this subflow */
	__u64 bytes_nonconf; /* handed while the policy excluded it */
	__u64 bytes_unmanaged; /* handed before the controller had decided */
	__u64 data_dec_conf, data_dec_nonconf, data_dec_unmanaged;
	__u64 last_data_ns;
	/* on the wire (net_dev_xmit, data segments incl. retransmissions): payload bytes sent while the
	 * policy allowed / excluded this subflow, or before it decided */
	__u64 wire_allowed, wire_excluded, wire_unmanaged;
	/* steering: first assignment / first wire packet after being chosen */
	__u32 assign_epoch_done;
	__u32 wire_epoch_pending;
	__u32 wire_target_seq;
	__u32 msk_unsent; /* connection level: msk write_seq - snd_nxt, not yet handed to any subflow */
};

/* Per connection: kernel-observed path switches (data went to a different
 * subflow than the previous data-carrying decision). */
struct mps_conn {
	__u64 data_decisions;
	__u64 switches;
	__u64 last_data_sf;
};

/* Written by the controller, read by BPF. */
struct mps_ctrl {
	__u32 allowed; /* policy includes this subflow in its allowed set */
	__u32 epoch; /* bumped each time the policy newly chooses it */
	__u64 decided_ns; /* CLOCK_MONOTONIC time of that choice */
};

enum { MPS_EV_ASSIGN = 1, MPS_EV_WIRE = 2 };

struct mps_event {
	__u32 type;
	__u32 epoch;
	struct mps_key key;
	__u64 decided_ns;
	__u64 t_ns; /* assignment: start of the decision that handed data; wire: packet left the NIC */
};

#endif
