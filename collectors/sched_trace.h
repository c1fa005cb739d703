/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Records shared between sched_trace.bpf.c (kernel side) and sched_trace.c
 * (userspace). Plain fixed-size structs so both sides agree on the layout
 * without any serialisation code.
 */
#ifndef MPVLAB_SCHED_TRACE_H
#define MPVLAB_SCHED_TRACE_H

#define MST_CA_NAME_LEN 16

/*
 * Subflows and connections are keyed by the kernel object address plus the
 * MPTCP token: an address alone can be reused by a later connection after the
 * old one is freed; the (address, token) pair cannot collide in practice.
 */
struct mst_key {
	__u64 ptr;
	__u32 token;
	__u32 pad;
};

struct mst_tuple {
	__u8 family; /* AF_INET (2) or AF_INET6 (10) */
	__u8 pad[3];
	__u16 lport; /* host order */
	__u16 rport; /* host order */
	__u8 laddr[16]; /* IPv4 in the first 4 bytes */
	__u8 raddr[16];
};

/* Per-subflow accounting, written only by the scheduler tracepoint (which the
 * kernel serialises per connection under the msk lock), except the final_*
 * fields, written only by the state-change hook. */
struct mst_sf {
	struct mst_key conn;
	struct mst_tuple tuple;
	__u32 subflow_id; /* kernel's per-connection subflow id */
	__u32 base_seq; /* rel_write_seq at first sight */
	__u32 last_seq; /* rel_write_seq at the last decision seen */
	__u32 final_seq; /* rel_write_seq at the last state change */
	__u32 final_valid;
	__u32 backup; /* backup || request_bkup at the last decision */
	__u64 handed; /* bytes handed, summed at decisions (u64: no wrap) */
	__u64 decisions; /* decisions in which this subflow was evaluated */
	__u64 data_decisions; /* decisions after which it was handed data */
	__u64 first_ns;
	__u64 last_ns;
	__u64 last_data_ns;
	__u64 final_ns;
	__u64 last_sample_ns; /* written only by the tcp_probe sampler */
};

struct mst_conn {
	__u32 token;
	__u32 pad;
	__u64 decisions;
	__u64 data_decisions;
	__u64 switches;
	__u64 multi_sf_decisions; /* data-carrying decisions that fed >1 subflow */
	__u64 cur_decision_ns; /* start of the current decision */
	__u64 prev_decision_ns; /* start of the previous decision */
	__u64 last_data_decision; /* index (1-based) of the last data decision */
	struct mst_key last_data_sf;
	__u64 first_ns;
	__u64 last_ns;
	__u64 msk_bytes_sent; /* msk->bytes_sent at the last decision */
	__u64 msk_bytes_retrans;
	__u64 final_bytes_sent; /* same, at the last subflow state change */
	__u64 final_bytes_retrans;
};

enum mst_event_type {
	MST_EV_SWITCH = 1,
	MST_EV_SAMPLE = 2,
};

struct mst_event {
	__u32 type;
	__u32 token;
	__u64 t_ns; /* start of the decision after which the new subflow got data */
	__u64 decision; /* that decision's 1-based index within the connection */
	struct mst_key conn;
	struct mst_key from_sf;
	struct mst_key to_sf;
	__u32 from_id;
	__u32 to_id;
};

/* A subflow snapshot: from tcp_probe (rate-limited per subflow) through the
 * ring buffer, or from the final iter/tcp pass. */
struct mst_sample {
	__u32 type; /* MST_EV_SAMPLE */
	__u32 source; /* 0 = ACK (tcp_probe), 1 = final pass (iter/tcp) */
	__u64 t_ns;
	struct mst_key sf;
	struct mst_tuple tuple;
	__u32 subflow_id;
	__u32 state;
	__u32 srtt_us; /* already >> 3 */
	__u32 snd_cwnd;
	__u32 packets_out;
	__u32 sacked_out;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 rate_delivered;
	__u32 rate_interval_us;
	__u32 rate_app_limited;
	__u32 mss_cache;
	__u64 pacing_rate; /* bytes/s */
	__u64 bytes_handed_cum;
	__u32 wmem_queued;
	__u32 backup;
	char ca_name[MST_CA_NAME_LEN];
	__u32 is_bbr;
	__u32 bbr_bw_raw; /* pkts/us << 24 (kernel BW_SCALE) */
	__u32 bbr_min_rtt_us;
	__u32 bbr_mode;
	__u32 bbr_pacing_gain; /* << 8 (BBR_SCALE) */
	__u32 bbr_cwnd_gain;
};

#endif
