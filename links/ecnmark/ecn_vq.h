/* SPDX-License-Identifier: GPL-2.0-only */
/* The one map value shared by ecn_vq.bpf.c (writer) and ecnmark_loader.c (config, reader). */
#ifndef MPVLAB_ECN_VQ_H
#define MPVLAB_ECN_VQ_H

#ifndef __KERNEL__
#include <linux/types.h>
#endif

struct vq_state {
	struct bpf_spin_lock lock;
	__u32 configured;        /* set by the loader; the program passes packets untouched until then */
	/* configuration (written once by the loader before attaching) */
	__u64 rate_Bps;          /* drain rate, bytes per second: the tbf's rate / 8 */
	__u64 threshold_bytes;   /* K: mark ECT packets while the virtual backlog exceeds it */
	__u64 limit_bytes;       /* the tbf's limit: an arrival that would overflow it is not queued (tbf drops it) */
	/* the virtual queue */
	__u64 backlog_bytes;     /* after the last arrival (including it) */
	__u64 last_ns;           /* CLOCK_MONOTONIC of the last arrival */
	__u64 max_backlog_bytes;
	/* counters (packets) */
	__u64 pkts, bytes;
	__u64 ect;               /* ECT(0) or ECT(1) on arrival */
	__u64 not_ect;           /* IP, not-ECT: never marked */
	__u64 ce_in;             /* already CE on arrival: not counted as ECT, not re-marked */
	__u64 non_ip;            /* ARP etc.: no ECN field; counted in the virtual queue all the same */
	__u64 marked;            /* ECT packets this program set to CE */
	__u64 mark_failed;       /* bpf_skb_ecn_set_ce refused a packet parsed as ECT (expected 0) */
	__u64 over_threshold;    /* arrivals that found backlog > K (marked or not) */
	__u64 over_limit;        /* arrivals the tbf's limit would tail-drop: left out of the virtual queue */
};

#endif
