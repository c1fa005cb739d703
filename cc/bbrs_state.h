/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Per-socket record the BBR-S congestion control writes (at most every
 * export interval, and on every mode change) into a BPF hash map (key: flow id, a per-load counter) and bbrs-loader samples.
 * Socket storage cannot be iterated from userspace, hence this export map.
 * Shared by bbr_s.bpf.c and bbrs_loader.c: keep it plain fixed-size types.
 */
#ifndef HCC_BBRS_STATE_H
#define HCC_BBRS_STATE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define BBRS_STATE_MAX_FLOWS 4096

struct bbrs_state {
	__u64 updated_ns;    /* when the CC last wrote this record (CLOCK_MONOTONIC, us resolution) */
	__u64 acks;          /* cong_control invocations */
	__u64 samples;       /* delivery-rate samples added to the window */
	__u64 clipped;       /* ACKs whose sample exceeded the percentile and was clipped */
	__u64 mismatch;      /* ACKs after which BBR's filter != percentile (must stay 0) */
	__u64 pacing_rate;   /* sk_pacing_rate, bytes/s */
	__u32 bw_used;       /* bandwidth bbr_main used: pkts/us << 24 */
	__u32 bw_pct;        /* percentile x factor: pkts/us << 24 */
	__u32 bw_pct_raw;    /* percentile before the factor: pkts/us << 24 */
	__u32 bw_maxfilt;    /* shadow stock max filter: pkts/us << 24 */
	__u32 min_rtt_us;
	__u32 cwnd;
	__u32 mss;
	__u32 n_samples;     /* samples currently in the window */
	__u32 _pad;
	__u16 pacing_gain;   /* BBR_UNIT = 256 */
	__u16 cwnd_gain;
	__u8 mode;           /* 0 STARTUP, 1 DRAIN, 2 PROBE_BW, 3 PROBE_RTT */
	__u8 lt_use_bw;      /* stock BBR policer mode: bw_used = lt_bw */
	__u8 closed;         /* socket released; loader writes a last row, deletes it */
	__u8 family;         /* AF_INET / AF_INET6 */
	__u16 sport, dport;  /* host byte order */
	__u8 saddr[16], daddr[16]; /* IPv4 in the first 4 bytes */
};

#endif
