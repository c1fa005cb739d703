// SPDX-License-Identifier: GPL-2.0-only
/*
 * BBR-S as a BPF struct_ops tcp_congestion_ops.
 *
 * BBR-S (Vargas et al., WWW 2021) is BBR v1 with one change: the bottleneck
 * bandwidth estimate is the p-th percentile of the last N non-app-limited
 * delivery-rate samples (optionally x factor, BBR2-S style) instead of the
 * windowed max filter.  Everything else is the kernel's own BBR, called as
 * kfuncs (bbr_init, bbr_main, ...), so the state machine, pacing and cwnd code
 * are exactly stock.
 *
 * How the percentile replaces the max filter inside bbr_main (see README):
 *  1. compute this ACK's delivery-rate sample exactly as bbr_update_bw does;
 *     add it to the window if valid and not app-limited;
 *  2. preset all three entries of bbr->bw (struct minmax) to the percentile,
 *     stamped with the current round count;
 *  3. call bbr_main.  Inside, minmax_running_max(bw, sample) leaves the value
 *     at the percentile for any sample <= percentile (the window cannot expire
 *     within one round).  A sample above it would reset the filter to the
 *     sample, so for those ACKs bbr_main gets a copy of the rate_sample whose
 *     interval_us is stretched so that delivered/interval == percentile.
 *     interval_us is read by bbr_main only for that sample and for validity
 *     checks (which stay true), so nothing else changes;
 *  => every use of bbr_bw()/bbr_max_bw() in this ACK (full-pipe detection,
 *     drain, gain cycling, ack aggregation, pacing rate, cwnd) and in later
 *     cwnd_event calls sees the percentile.  A counter checks it per ACK.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "percentile.h"
#include "bbrs_state.h"
#include "kernel_bbr_ops.h"

char _license[] SEC("license") = "GPL";

#define BW_SCALE 24
#define BW_UNIT (1ULL << BW_SCALE)
#define BBR_BW_RTTS 10 /* CYCLE_LEN + 2: stock max-filter window, rounds */
#define AF_INET 2
#define AF_INET6 10

/* Per-load parameters, set by the loader before load (rodata). */
const volatile __u32 cfg_window = 100;      /* N */
const volatile __u32 cfg_pct_bp = 8500;     /* p in 1/100 % */
const volatile __u32 cfg_factor_bp = 10000; /* factor in 1/10000 */
/* Export the per-socket state at most this often (us; mode changes always). */
const volatile __u32 cfg_export_us = 1000;
/* Benchmark baseline: behave exactly as stock BBR (bbr_main only), same wrappers. */
const volatile bool cfg_passthrough = false;

__u64 next_flow_id = 0;
__u64 storage_failures = 0; /* sockets left without a window: ran as stock BBR */
__u64 pre_init_acks = 0;    /* ACKs before init (the SYN-ACK): stock bbr_main, as in tcp_bbr */

struct bbrs_sk {
	__u64 flow_id;
	__u64 last_export_us; /* tcp_mstamp of the last export */
	__u64 acks, samples, clipped, mismatch; /* see struct bbrs_state */
	__u32 bw_pct, bw_pct_raw; /* last percentile (x factor) and raw */
	__u8 last_mode;
	struct minmax shadow; /* stock BBR's max filter fed the same samples */
	struct pct_window win;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bbrs_sk);
} bbrs_sk_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BBRS_STATE_MAX_FLOWS);
	__type(key, __u64);
	__type(value, struct bbrs_state);
} bbrs_state_map SEC(".maps");

static __always_inline struct bbr *bbr_of(struct sock *sk)
{
	return (struct bbr *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* Same semantics as the kernel's minmax_running_max (lib/win_minmax.c). */
static __always_inline void shadow_running_max(struct minmax *m, u32 win, u32 t, u32 v)
{
	u32 dt;

	if (v >= m->s[0].v || t - m->s[2].t > win) {
		m->s[0].t = m->s[1].t = m->s[2].t = t;
		m->s[0].v = m->s[1].v = m->s[2].v = v;
		return;
	}
	if (v >= m->s[1].v) {
		m->s[2].t = m->s[1].t = t;
		m->s[2].v = m->s[1].v = v;
	} else if (v >= m->s[2].v) {
		m->s[2].t = t;
		m->s[2].v = v;
	}
	dt = t - m->s[0].t;
	if (dt > win) {
		m->s[0] = m->s[1];
		m->s[1] = m->s[2];
		m->s[2].t = t;
		m->s[2].v = v;
		if (t - m->s[0].t > win) {
			m->s[0] = m->s[1];
			m->s[1] = m->s[2];
			m->s[2].t = t;
			m->s[2].v = v;
		}
	} else if (m->s[1].v == m->s[0].v && dt > win / 4) {
		m->s[2].t = m->s[1].t = t;
		m->s[2].v = m->s[1].v = v;
	} else if (m->s[2].v == m->s[1].v && dt > win / 2) {
		m->s[2].t = t;
		m->s[2].v = v;
	}
}

static __always_inline void fill_tuple(struct sock *sk, struct bbrs_state *s)
{
	struct sock_common *c = &sk->__sk_common;

	s->family = (__u8)c->skc_family;
	s->sport = c->skc_num;
	s->dport = __builtin_bswap16(c->skc_dport);
	if (c->skc_family == AF_INET6) {
		__builtin_memcpy(s->saddr, &c->skc_v6_rcv_saddr, 16);
		__builtin_memcpy(s->daddr, &c->skc_v6_daddr, 16);
	} else {
		__builtin_memcpy(s->saddr, &c->skc_rcv_saddr, 4);
		__builtin_memcpy(s->daddr, &c->skc_daddr, 4);
	}
}

/* Copy this socket's state into the export map (read by the loader). */
static __noinline void export_state(struct sock *sk, struct bbrs_sk *st)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct bbr *bbr = bbr_of(sk);
	struct bbrs_state *s;

	st->last_export_us = tp->tcp_mstamp;
	st->last_mode = bbr->mode;
	s = bpf_map_lookup_elem(&bbrs_state_map, &st->flow_id);
	if (!s)
		return;
	s->updated_ns = tp->tcp_mstamp * 1000;
	s->acks = st->acks;
	s->samples = st->samples;
	s->clipped = st->clipped;
	s->mismatch = st->mismatch;
	s->bw_used = bbr->lt_use_bw ? bbr->lt_bw : bbr->bw.s[0].v;
	s->bw_pct = st->bw_pct;
	s->bw_pct_raw = st->bw_pct_raw;
	s->bw_maxfilt = st->shadow.s[0].v;
	s->min_rtt_us = bbr->min_rtt_us;
	s->cwnd = tp->snd_cwnd;
	s->mss = tp->mss_cache;
	s->pacing_rate = sk->sk_pacing_rate;
	s->n_samples = st->win.n;
	s->pacing_gain = bbr->pacing_gain;
	s->cwnd_gain = bbr->cwnd_gain;
	s->mode = bbr->mode;
	s->lt_use_bw = bbr->lt_use_bw;
}

SEC("struct_ops/bbrs_init")
void BPF_PROG(bbrs_init, struct sock *sk)
{
	struct bbrs_state fresh = {};
	struct bbrs_sk *st;

	bbr_init(sk);
	st = bpf_sk_storage_get(&bbrs_sk_map, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		__sync_fetch_and_add(&storage_failures, 1);
		return;
	}
	/* A socket may be re-initialised (CC switched back): start clean. */
	st->flow_id = __sync_fetch_and_add(&next_flow_id, 1);
	__builtin_memset(&st->shadow, 0, sizeof(st->shadow));
	st->last_export_us = 0;
	st->acks = st->samples = st->clipped = st->mismatch = 0;
	st->last_mode = 0;
	st->bw_pct = st->bw_pct_raw = 0;
	pct_reset(&st->win, cfg_window);
	fill_tuple(sk, &fresh);
	fresh.updated_ns = ((struct tcp_sock *)sk)->tcp_mstamp * 1000;
	fresh.mss = ((struct tcp_sock *)sk)->mss_cache;
	bpf_map_update_elem(&bbrs_state_map, &st->flow_id, &fresh, BPF_ANY);
}

SEC("struct_ops/bbrs_release")
void BPF_PROG(bbrs_release, struct sock *sk)
{
	struct bbrs_state *s;
	struct bbrs_sk *st;

	st = bpf_sk_storage_get(&bbrs_sk_map, sk, 0, 0);
	if (!st)
		return;
	export_state(sk, st); /* final counters */
	s = bpf_map_lookup_elem(&bbrs_state_map, &st->flow_id);
	if (s)
		s->closed = 1;
}

SEC("struct_ops/bbrs_cong_control")
void BPF_PROG(bbrs_cong_control, struct sock *sk, u32 ack, int flag,
	      const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct bbr *bbr = bbr_of(sk);
	struct rate_sample rs2;
	struct bbrs_sk *st;
	s32 delivered = rs->delivered;
	long interval = rs->interval_us;
	bool app_limited = rs->is_app_limited;
	bool valid = delivered >= 0 && interval > 0;
	u64 meas = 0, target64;
	u32 target = 0, raw = 0, rtt_cnt;
	bool use_pct, clipped = false;

	if (cfg_passthrough) {
		bbr_main(sk, ack, flag, rs);
		return;
	}
	st = bpf_sk_storage_get(&bbrs_sk_map, sk, 0, 0);
	if (!st) {
		/* tcp_ack() processes the SYN-ACK before tcp_init_transfer() calls
		 * init, so the first ACK of an active open arrives here. */
		__sync_fetch_and_add(&pre_init_acks, 1);
		bbr_main(sk, ack, flag, rs);
		return;
	}
	if (valid) {
		/* bbr_update_bw's sample: packets per us, << BW_SCALE */
		meas = (u64)delivered * BW_UNIT / (u64)interval;
		if (meas > 0xffffffffULL)
			meas = 0xffffffffULL;
		if (!app_limited)
			pct_insert(&st->win, (u32)meas);
	}
	/*
	 * Until the first non-app-limited sample there is nothing to take a
	 * percentile of; the stock filter runs (on app-limited samples only).
	 */
	use_pct = st->win.n > 0;
	if (use_pct) {
		raw = pct_value(&st->win, cfg_pct_bp);
		target64 = (u64)raw * cfg_factor_bp / PCT_BP_ONE;
		target = target64 > 0xffffffffULL ? 0xffffffff : (u32)target64;
		rtt_cnt = bbr->rtt_cnt;
		bbr->bw.s[0].t = rtt_cnt;
		bbr->bw.s[0].v = target;
		bbr->bw.s[1].t = rtt_cnt;
		bbr->bw.s[1].v = target;
		bbr->bw.s[2].t = rtt_cnt;
		bbr->bw.s[2].v = target;
	}
	if (use_pct && valid && meas > target) {
		/* Same ACK, but a sample of exactly (or just under) the target. */
		__builtin_memset(&rs2, 0, sizeof(rs2));
		rs2.prior_mstamp = rs->prior_mstamp;
		rs2.prior_delivered = rs->prior_delivered;
		rs2.prior_delivered_ce = rs->prior_delivered_ce;
		rs2.delivered = delivered;
		rs2.delivered_ce = rs->delivered_ce;
		rs2.interval_us = target ?
			(long)(((u64)delivered * BW_UNIT + target - 1) / target) :
			(long)(1ULL << 62);
		rs2.snd_interval_us = rs->snd_interval_us;
		rs2.rcv_interval_us = rs->rcv_interval_us;
		rs2.rtt_us = rs->rtt_us;
		rs2.losses = rs->losses;
		rs2.acked_sacked = rs->acked_sacked;
		rs2.prior_in_flight = rs->prior_in_flight;
		rs2.last_end_seq = rs->last_end_seq;
		rs2.is_app_limited = rs->is_app_limited;
		rs2.is_retrans = rs->is_retrans;
		rs2.is_ack_delayed = rs->is_ack_delayed;
		bbr_main(sk, ack, flag, &rs2);
		clipped = true;
	} else {
		bbr_main(sk, ack, flag, rs);
	}

	/* Stock BBR's filter on the same samples, for comparison only. */
	if (valid && (!app_limited || meas >= st->shadow.s[0].v))
		shadow_running_max(&st->shadow, BBR_BW_RTTS, bbr->rtt_cnt, (u32)meas);

	st->acks++;
	if (valid && !app_limited)
		st->samples++;
	if (clipped)
		st->clipped++;
	if (use_pct && bbr->bw.s[0].v != target)
		st->mismatch++;
	st->bw_pct = target;
	st->bw_pct_raw = raw;
	/*
	 * The export map is read at most state_hz times a second, so writing it
	 * on every ACK (a hash lookup plus a 128-byte record) is wasted work;
	 * tcp_mstamp is the ACK's own microsecond clock, so the check is free.
	 */
	if (tp->tcp_mstamp - st->last_export_us >= cfg_export_us || bbr->mode != st->last_mode)
		export_state(sk, st);
}

/* ssthresh, undo_cwnd, cwnd_event, set_state, min_tso_segs, sndbuf_expand: the kernel's own. */
KERNEL_BBR_PASSTHROUGH_OPS(bbrs)

/* The loader replaces the placeholder name in the ELF image before opening. */
SEC(".struct_ops")
struct tcp_congestion_ops bbrs_ops = {
	.init = (void *)bbrs_init,
	.release = (void *)bbrs_release,
	.cong_control = (void *)bbrs_cong_control,
	.ssthresh = (void *)bbrs_ssthresh,
	.undo_cwnd = (void *)bbrs_undo_cwnd,
	.cwnd_event = (void *)bbrs_cwnd_event,
	.set_state = (void *)bbrs_set_state,
	.min_tso_segs = (void *)bbrs_min_tso_segs,
	.sndbuf_expand = (void *)bbrs_sndbuf_expand,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "hccbbrs_PLACEHO",
};
