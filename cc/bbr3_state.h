/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the BBRv3 / BBRv3-S BPF congestion control (bbr3.bpf.c) exports to
 * bpfcc-loader: a per-socket state record in a hash map (key: flow id, a
 * per-load counter; socket storage cannot be iterated from userspace) and
 * events in a ring buffer (every mode / PROBE_BW sub-state change, every
 * round trip that saw a loss or a CE mark).  Shared by the BPF object and the
 * loader: plain fixed-size types only.
 */
#ifndef MPVLAB_BBR3_STATE_H
#define MPVLAB_BBR3_STATE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define BBR3_STATE_MAX_FLOWS 4096
#define BBR3_PHASE_NONE 255 /* sub-state outside PROBE_BW */

/* PROBE_BW sub-states: the values of v3's cycle_idx */
#define BBR3_UP 0
#define BBR3_DOWN 1
#define BBR3_CRUISE 2
#define BBR3_REFILL 3

#define BBR3_EV_TRANSITION 1
#define BBR3_EV_LOSS_ROUND 2

struct bbr3_state {
	__u64 updated_ns;     /* when the CC last wrote this record (CLOCK_MONOTONIC, us resolution) */
	__u64 acks;           /* cong_control invocations */
	__u64 rounds;         /* packet-timed round trips */
	__u64 rounds_lossy;   /* rounds with >= 1 packet marked lost */
	__u64 rounds_over;    /* rounds whose loss rate exceeded the 2 % threshold */
	__u64 too_high;       /* times inflight_hi was cut (loss/ECN rate too high while probing) */
	__u64 probes;         /* PROBE_UP phases started */
	__u64 pacing_rate;    /* sk_pacing_rate, bytes/s */
	__u32 bw;             /* bw used: min(max_bw, bw_lo), pkts/us << 24 */
	__u32 max_bw;         /* max_bw: max(bw_hi) (bbr3) or the percentile x factor (bbr3-s) */
	__u32 bw_hi0, bw_hi1; /* v3's two-cycle max filter */
	__u32 bw_lo;          /* ~0: unset */
	__u32 inflight_lo;    /* packets, ~0: unset */
	__u32 inflight_hi;    /* packets, ~0: unset */
	__u32 bw_pct;         /* percentile x factor (bbr3-s), 0 for bbr3 */
	__u32 bw_pct_raw;     /* percentile before the factor */
	__u32 n_samples;      /* samples in the percentile window */
	__u32 min_rtt_us;
	__u32 cwnd;
	__u32 inflight;       /* tcp_packets_in_flight at the last ACK */
	__u32 mss;
	__u32 last_round_delivered; /* packets delivered in the last completed round */
	__u32 last_round_lost;      /* packets marked lost in it */
	__u32 last_round_ce;        /* packets delivered with CE in it */
	__u32 ecn_alpha;            /* BBR_UNIT = 256 */
	__u16 pacing_gain;    /* BBR_UNIT = 256 */
	__u16 cwnd_gain;
	__u8 mode;            /* 0 STARTUP, 1 DRAIN, 2 PROBE_BW, 3 PROBE_RTT */
	__u8 phase;           /* PROBE_BW sub-state (BBR3_UP...), BBR3_PHASE_NONE otherwise */
	__u8 ecn_eligible;
	__u8 closed;          /* socket released; the loader writes a last row, deletes it */
	__u8 family;          /* AF_INET / AF_INET6 */
	__u8 _pad[3];
	__u16 sport, dport;   /* host byte order */
	__u8 saddr[16], daddr[16]; /* IPv4 in the first 4 bytes */
};

struct bbr3_event {
	__u64 t_ns;           /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 flow_id;
	__u32 kind;           /* BBR3_EV_* */
	__u32 bw;             /* pkts/us << 24 */
	__u32 inflight_hi, inflight_lo, cwnd, mss;
	__u32 round_delivered, round_lost, round_ce; /* BBR3_EV_LOSS_ROUND */
	__u8 from_mode, from_phase, to_mode, to_phase;
};

#endif
