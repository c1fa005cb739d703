// SPDX-License-Identifier: GPL-2.0-only
/*
 * BBRv3 (and BBRv3-S) as a BPF struct_ops tcp_congestion_ops, for stock
 * kernels that ship only BBR v1.  Our own code, written after the algorithm
 * of Google's v3 tcp_bbr.c (github.com/google/bbr, branch v3): the bandwidth
 * model (two-cycle max filter bw_hi, short-term lower bounds bw_lo /
 * inflight_lo, long-term upper bound inflight_hi), the 2 % loss-rate
 * threshold, the optional ECN response, the PROBE_BW sub-states DOWN, CRUISE,
 * REFILL, UP with the wall-clock probing schedule (2-3 s, or sooner by the
 * Reno-coexistence round count), PROBE_RTT every 5 s at 0.5 x BDP.
 *
 * All state lives in BPF socket storage (the 104-byte CA private area is too
 * small for v3's model plus our bookkeeping).  What v3 reads that a stock
 * kernel does not give a BPF CC, and how it is approximated here (README,
 * "BBRv3 on a stock kernel"):
 *  - rs->tx_in_flight (in-flight recorded per packet at send time):
 *    rs->prior_in_flight, the in-flight just before this ACK;
 *  - rs->lost (packets lost between the send and the ACK of this packet):
 *    tp->lost minus its value at the start of the current round trip;
 *  - the skb_marked_lost() hook (per lost packet, while probing): the ACK
 *    that marks losses (rs->losses > 0) runs the same check, with the lost
 *    prefix computed from the approximations above;
 *  - rs->is_ece / precise ECE ACKs (AccECN patches): rs->delivered_ce > 0;
 *  - the TLP-recovery event, PLB, fast_ack_mode and the fast path: absent.
 *
 * BBRv3-S (cfg_estimator = 1): max_bw is the p-th percentile of the last N
 * non-app-limited delivery-rate samples times a factor (percentile.h, the
 * same estimator as BBR-S), instead of max(bw_hi[0], bw_hi[1]).
 *
 * Parameters are per-load .rodata values named mpvlab_param_* (the
 * bpfcc-loader convention, cc/README.md).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "percentile.h"
#include "bbr3_state.h"
#ifdef MPVLAB_COST_BENCH
#include "cost_bench.h"
#endif

char _license[] SEC("license") = "GPL";

#define BW_SCALE 24
#define BW_UNIT (1ULL << BW_SCALE)
#define BBR_SCALE 8
#define BBR_UNIT (1U << BBR_SCALE)
#define USEC_PER_SEC 1000000U
#define TCP_CONG_NON_RESTRICTED 0x1
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define AF_INET6 10
#define GSO_LEGACY_MAX 65536U
#define MAX_TCP_HEADER_BYTES 320U
#define TCP_ECN_OK_FLAGS 0x11 /* RFC 3168 or AccECN negotiated */

enum { STARTUP, DRAIN, PROBE_BW, PROBE_RTT };
enum { ACKS_INIT, ACKS_REFILLING, ACKS_PROBE_STARTING, ACKS_PROBE_FEEDBACK, ACKS_PROBE_STOPPING };

/* v3's constants (bbr_* in tcp_bbr.c) */
#define MIN_RTT_WIN_US (10U * USEC_PER_SEC)
#define PROBE_RTT_MODE_US (200U * 1000U)
#define PROBE_RTT_WIN_US (5000U * 1000U)
#define PROBE_RTT_CWND_GAIN (BBR_UNIT / 2)
#define TSO_RTT_SHIFT 9
#define PACING_MARGIN_PCT 1
#define STARTUP_PACING_GAIN (BBR_UNIT * 277 / 100 + 1)
#define STARTUP_CWND_GAIN (BBR_UNIT * 2)
#define DRAIN_GAIN (BBR_UNIT * 1000 / 2885)
#define CWND_GAIN (BBR_UNIT * 2)
#define CWND_MIN_TARGET 4U
#define FULL_BW_THRESH (BBR_UNIT * 5 / 4)
#define FULL_BW_CNT 3
#define EXTRA_ACKED_GAIN BBR_UNIT
#define EXTRA_ACKED_WIN_RTTS 5
#define ACK_EPOCH_ACKED_RESET (1U << 20)
#define EXTRA_ACKED_MAX_US (100U * 1000U)
#define ECN_MAX_RTT_US 5000U
#define BETA (BBR_UNIT * 30 / 100)
#define ECN_ALPHA_GAIN (BBR_UNIT / 16)
#define ECN_ALPHA_INIT BBR_UNIT
#define ECN_FACTOR (BBR_UNIT / 3)
#define ECN_THRESH (BBR_UNIT / 2)
#define ECN_REPROBE_GAIN (BBR_UNIT / 2)
#define LOSS_THRESH (BBR_UNIT * 2 / 100)
#define FULL_LOSS_CNT 6
#define FULL_ECN_CNT 2
#define INFLIGHT_HEADROOM (BBR_UNIT * 15 / 100)
#define BW_PROBE_CWND_GAIN 1
#define BW_PROBE_MAX_ROUNDS 63U
#define BW_PROBE_RAND_ROUNDS 2U
#define BW_PROBE_BASE_US (2U * USEC_PER_SEC)
#define BW_PROBE_RAND_US (1U * USEC_PER_SEC)

/* v3's bbr_pacing_gain[] (a switch: a static const array in .rodata breaks the BTF layout) */
static __always_inline u32 probe_bw_pacing_gain(u32 phase)
{
	if (phase == BBR3_UP)
		return BBR_UNIT * 5 / 4;
	if (phase == BBR3_DOWN)
		return BBR_UNIT * 91 / 100;
	return BBR_UNIT; /* CRUISE, REFILL */
}

/* ---- per-load parameters (bpfcc-loader: --param NAME=VALUE) ---- */
const volatile __u32 mpvlab_param_estimator = 0;      /* 0: v3 max filter (bbr3), 1: percentile (bbr3-s) */
const volatile __u32 mpvlab_param_window = 100;       /* N */
const volatile __u32 mpvlab_param_percentile_bp = 8500; /* p, 1/100 % */
const volatile __u32 mpvlab_param_factor_bp = 8500;   /* factor, 1/10000 */
const volatile __u32 mpvlab_param_ecn = 0;            /* 1: v3's ECN response when ECN is negotiated */
const volatile __u32 mpvlab_param_export_us = 1000000; /* state record refresh (loader sets 1/(2 HZ)) */

__u64 next_flow_id = 0;
__u64 storage_failures = 0;
__u64 pre_init_acks = 0;
__u64 events_dropped = 0;

struct b3 {
	u64 flow_id;
	u64 last_export_us;
	u64 cycle_mstamp;
	u64 ack_epoch_mstamp;
	u64 min_rtt_stamp;        /* us (tcp_mstamp) instead of jiffies */
	u64 probe_rtt_min_stamp;
	u64 probe_rtt_done_stamp; /* 0: not set */
	u64 acks, rounds, rounds_lossy, rounds_over, too_high, probes;
	u32 min_rtt_us, probe_rtt_min_us;
	u32 next_rtt_delivered;
	u32 prior_cwnd, full_bw, init_cwnd;
	u32 loss_round_delivered;
	u32 undo_bw_lo, undo_inflight_lo, undo_inflight_hi;
	u32 bw_latest, bw_lo, bw_hi[2];
	u32 inflight_latest, inflight_lo, inflight_hi;
	u32 bw_probe_up_cnt, bw_probe_up_acks, probe_wait_us;
	u32 alpha_last_delivered, alpha_last_delivered_ce;
	u32 ack_epoch_acked;
	u32 extra_acked[2];
	u32 rounds_since_probe, ecn_alpha;
	u32 pacing_gain, cwnd_gain;
	u32 bw_pct, bw_pct_raw;
	/* round bookkeeping: tp->delivered / lost / delivered_ce at the round's start */
	u32 rnd_delivered0, rnd_lost0, rnd_ce0;
	u32 last_round_delivered, last_round_lost, last_round_ce;
	u8 mode, prev_ca_state, round_start, idle_restart, probe_rtt_round_done;
	u8 full_bw_reached, full_bw_cnt, full_bw_now, cycle_idx, has_seen_rtt;
	u8 loss_in_cycle, ecn_in_cycle, ecn_eligible, bw_probe_samples;
	u8 prev_probe_too_high, stopped_risky_probe, loss_round_start;
	u8 loss_in_round, ecn_in_round, ack_phase, loss_events_in_round;
	u8 startup_ecn_rounds, extra_acked_win_rtts, extra_acked_win_idx, bw_probe_up_rounds;
	u8 last_mode, last_phase;
};

/* This ACK's rate sample plus the approximated fields v3 reads. */
struct smp {
	s32 delivered, delivered_ce;
	s64 interval_us, rtt_us;
	s32 losses;
	u32 acked_sacked, prior_in_flight, prior_delivered;
	u32 tx_in_flight; /* approximation: prior_in_flight */
	s32 lost;         /* approximation: tp->lost - lost at round start */
	u32 sample_bw;
	bool is_app_limited, is_ack_delayed;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct b3);
} bbr3_sk_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pct_window);
} bbr3_pct_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BBR3_STATE_MAX_FLOWS);
	__type(key, __u64);
	__type(value, struct bbr3_state);
} mpvlab_bbr3_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} mpvlab_bbr3_events SEC(".maps");

static __always_inline u32 min_u32(u32 a, u32 b) { return a < b ? a : b; }
static __always_inline u32 max_u32(u32 a, u32 b) { return a > b ? a : b; }
static __always_inline bool before32(u32 a, u32 b) { return (s32)(a - b) < 0; }

static __always_inline u32 snd_cwnd(struct tcp_sock *tp) { return tp->snd_cwnd; }

static __always_inline void set_cwnd(struct tcp_sock *tp, u32 c)
{
	tp->snd_cwnd = c;
}

static __always_inline u32 packets_in_flight(struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

static __always_inline u32 max_bw(struct b3 *b)
{
	if (mpvlab_param_estimator && b->bw_pct)
		return b->bw_pct;
	return max_u32(b->bw_hi[0], b->bw_hi[1]);
}

static __always_inline u32 bbr_bw(struct b3 *b)
{
	return min_u32(max_bw(b), b->bw_lo);
}

static __always_inline u64 rate_bytes_per_sec(struct tcp_sock *tp, u64 rate, u32 gain, u32 margin)
{
	rate *= tp->mss_cache;
	rate *= gain;
	rate >>= BBR_SCALE;
	rate *= USEC_PER_SEC / 100 * (100 - margin);
	rate >>= BW_SCALE;
	return rate > 1 ? rate : 1;
}

static __always_inline u64 bw_to_pacing_rate(struct sock *sk, u32 bw, u32 gain)
{
	u64 rate = rate_bytes_per_sec((struct tcp_sock *)sk, bw, gain, PACING_MARGIN_PCT);
	u64 cap = sk->sk_max_pacing_rate;

	return rate < cap ? rate : cap;
}

static __always_inline void init_pacing_rate_from_rtt(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u32 rtt_us;
	u64 bw;

	if (tp->srtt_us) {
		rtt_us = max_u32(tp->srtt_us >> 3, 1);
		b->has_seen_rtt = 1;
	} else {
		rtt_us = 1000;
	}
	bw = (u64)snd_cwnd(tp) * BW_UNIT / rtt_us;
	sk->sk_pacing_rate = bw_to_pacing_rate(sk, (u32)(bw > 0xffffffffULL ? 0xffffffffULL : bw),
					       STARTUP_PACING_GAIN);
}

static __always_inline void set_pacing_rate(struct sock *sk, struct b3 *b, u32 bw, u32 gain)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u64 rate = bw_to_pacing_rate(sk, bw, gain);

	if (!b->has_seen_rtt && tp->srtt_us)
		init_pacing_rate_from_rtt(sk, b);
	if (b->full_bw_reached || rate > sk->sk_pacing_rate)
		sk->sk_pacing_rate = rate;
}

static __always_inline u32 tso_segs_goal(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u64 bytes = sk->sk_pacing_rate >> (sk->sk_pacing_shift & 63);
	u32 r = b->min_rtt_us >> TSO_RTT_SHIFT, segs, mss = tp->mss_cache ? tp->mss_cache : 1;

	if (r < 32)
		bytes += GSO_LEGACY_MAX >> r;
	if (bytes > GSO_LEGACY_MAX - 1 - MAX_TCP_HEADER_BYTES)
		bytes = GSO_LEGACY_MAX - 1 - MAX_TCP_HEADER_BYTES;
	segs = (u32)bytes / mss;
	return segs > 2 ? segs : 2; /* sysctl_tcp_min_tso_segs default */
}

static __always_inline void save_cwnd(struct tcp_sock *tp, struct b3 *b)
{
	if (b->prev_ca_state < TCP_CA_Recovery && b->mode != PROBE_RTT)
		b->prior_cwnd = snd_cwnd(tp);
	else
		b->prior_cwnd = max_u32(b->prior_cwnd, snd_cwnd(tp));
}

static __always_inline u32 bdp(struct b3 *b, u32 bw, u32 gain)
{
	u64 w;

	if (b->min_rtt_us == ~0U)
		return b->init_cwnd;
	w = (u64)bw * b->min_rtt_us;
	return (u32)((((w * gain) >> BBR_SCALE) + BW_UNIT - 1) / BW_UNIT);
}

static __always_inline u32 quantization_budget(struct sock *sk, struct b3 *b, u32 cwnd)
{
	cwnd = max_u32(cwnd, 3 * tso_segs_goal(sk, b));
	cwnd = max_u32(cwnd, CWND_MIN_TARGET);
	if (b->mode == PROBE_BW && b->cycle_idx == BBR3_UP)
		cwnd += 2;
	return cwnd;
}

static __always_inline u32 inflight(struct sock *sk, struct b3 *b, u32 bw, u32 gain)
{
	return quantization_budget(sk, b, bdp(b, bw, gain));
}

static __always_inline u32 packets_in_net_at_edt(struct sock *sk, struct b3 *b, u32 inflight_now)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u64 now_ns = tp->tcp_clock_cache, edt_ns = tp->tcp_wstamp_ns, interval_us;
	u32 delivered, at_edt = inflight_now;

	if (edt_ns < now_ns)
		edt_ns = now_ns;
	interval_us = (edt_ns - now_ns) / 1000;
	delivered = (u32)(((u64)bbr_bw(b) * interval_us) >> BW_SCALE);
	if (b->pacing_gain > BBR_UNIT)
		at_edt += tso_segs_goal(sk, b);
	return delivered >= at_edt ? 0 : at_edt - delivered;
}

static __always_inline u32 extra_acked(struct b3 *b)
{
	return max_u32(b->extra_acked[0], b->extra_acked[1]);
}

static __always_inline u32 ack_aggregation_cwnd(struct b3 *b)
{
	u32 max_aggr = (u32)(((u64)bbr_bw(b) * EXTRA_ACKED_MAX_US) / BW_UNIT);
	u32 aggr = (EXTRA_ACKED_GAIN * extra_acked(b)) >> BBR_SCALE;

	return min_u32(aggr, max_aggr);
}

static __always_inline u32 probe_rtt_cwnd(struct b3 *b)
{
	return max_u32(CWND_MIN_TARGET, bdp(b, bbr_bw(b), PROBE_RTT_CWND_GAIN));
}

static __always_inline void set_cwnd_target(struct sock *sk, struct b3 *b, u32 acked, u32 bw, u32 gain)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u32 cwnd = snd_cwnd(tp), target;

	if (acked) {
		target = bdp(b, bw, gain);
		target += ack_aggregation_cwnd(b);
		target = quantization_budget(sk, b, target);
		if (b->full_bw_reached) {
			cwnd += acked;
			if (cwnd >= target)
				cwnd = target;
		} else if (cwnd < target || cwnd < 2 * b->init_cwnd) {
			cwnd += acked;
		}
		cwnd = max_u32(cwnd, CWND_MIN_TARGET);
	}
	set_cwnd(tp, min_u32(cwnd, tp->snd_cwnd_clamp));
	if (b->mode == PROBE_RTT)
		set_cwnd(tp, min_u32(snd_cwnd(tp), probe_rtt_cwnd(b)));
}

static __always_inline void reset_full_bw(struct b3 *b)
{
	b->full_bw = 0;
	b->full_bw_cnt = 0;
	b->full_bw_now = 0;
}

static __always_inline u32 target_inflight(struct sock *sk, struct b3 *b)
{
	return min_u32(inflight(sk, b, bbr_bw(b), BBR_UNIT), snd_cwnd((struct tcp_sock *)sk));
}

static __always_inline bool is_probing_bandwidth(struct b3 *b)
{
	return b->mode == STARTUP ||
	       (b->mode == PROBE_BW && (b->cycle_idx == BBR3_REFILL || b->cycle_idx == BBR3_UP));
}

static __always_inline void handle_queue_too_high_in_startup(struct sock *sk, struct b3 *b)
{
	b->full_bw_reached = 1;
	b->inflight_hi = max_u32(inflight(sk, b, max_bw(b), BBR_UNIT), b->inflight_latest);
}

static __always_inline int update_ecn_alpha(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	s32 delivered, delivered_ce;
	u64 alpha, ce_ratio;

	if (!b->ecn_eligible && mpvlab_param_ecn && (tp->ecn_flags & TCP_ECN_OK_FLAGS) &&
	    b->min_rtt_us <= ECN_MAX_RTT_US)
		b->ecn_eligible = 1;
	if (!b->ecn_eligible)
		return -1;
	delivered = (s32)(tp->delivered - b->alpha_last_delivered);
	delivered_ce = (s32)(tp->delivered_ce - b->alpha_last_delivered_ce);
	if (delivered <= 0 || delivered_ce < 0)
		return -1;
	ce_ratio = ((u64)delivered_ce << BBR_SCALE) / (u32)delivered;
	alpha = ((BBR_UNIT - ECN_ALPHA_GAIN) * (u64)b->ecn_alpha) >> BBR_SCALE;
	alpha += (ECN_ALPHA_GAIN * ce_ratio) >> BBR_SCALE;
	b->ecn_alpha = alpha < BBR_UNIT ? (u32)alpha : BBR_UNIT;
	b->alpha_last_delivered = tp->delivered;
	b->alpha_last_delivered_ce = tp->delivered_ce;
	/* ECN too high in STARTUP */
	if (!b->full_bw_reached) {
		if (ce_ratio >= ECN_THRESH)
			b->startup_ecn_rounds++;
		else
			b->startup_ecn_rounds = 0;
		if (b->startup_ecn_rounds >= FULL_ECN_CNT)
			handle_queue_too_high_in_startup(sk, b);
	}
	return (int)ce_ratio;
}

static __always_inline void raise_inflight_hi_slope(struct tcp_sock *tp, struct b3 *b)
{
	u32 growth = 1U << (b->bw_probe_up_rounds & 31), cnt;

	b->bw_probe_up_rounds = b->bw_probe_up_rounds + 1 < 30 ? b->bw_probe_up_rounds + 1 : 30;
	cnt = snd_cwnd(tp) / growth;
	b->bw_probe_up_cnt = cnt > 1 ? cnt : 1;
}

static __always_inline void probe_inflight_hi_upward(struct tcp_sock *tp, struct b3 *b, struct smp *s)
{
	u32 delta;

	if (!tp->is_cwnd_limited || snd_cwnd(tp) < b->inflight_hi)
		return;
	b->bw_probe_up_acks += s->acked_sacked;
	if (b->bw_probe_up_acks >= b->bw_probe_up_cnt && b->bw_probe_up_cnt) {
		delta = b->bw_probe_up_acks / b->bw_probe_up_cnt;
		b->bw_probe_up_acks -= delta * b->bw_probe_up_cnt;
		b->inflight_hi += delta;
	}
	if (b->round_start)
		raise_inflight_hi_slope(tp, b);
}

static __always_inline bool is_inflight_too_high(struct b3 *b, struct smp *s)
{
	u32 thresh;

	if (s->lost > 0 && s->tx_in_flight) {
		thresh = (u32)(((u64)s->tx_in_flight * LOSS_THRESH) >> BBR_SCALE);
		if ((u32)s->lost > thresh)
			return true;
	}
	if (s->delivered_ce > 0 && s->delivered > 0 && b->ecn_eligible) {
		thresh = (u32)(((u64)s->delivered * ECN_THRESH) >> BBR_SCALE);
		if ((u32)s->delivered_ce > thresh)
			return true;
	}
	return false;
}

static __always_inline u32 inflight_with_headroom(struct b3 *b)
{
	u32 headroom;
	s32 v;

	if (b->inflight_hi == ~0U)
		return ~0U;
	headroom = (u32)(((u64)b->inflight_hi * INFLIGHT_HEADROOM) >> BBR_SCALE);
	headroom = headroom > 1 ? headroom : 1;
	v = (s32)(b->inflight_hi - headroom);
	return v > (s32)CWND_MIN_TARGET ? (u32)v : CWND_MIN_TARGET;
}

static __always_inline void bound_cwnd_for_inflight_model(struct tcp_sock *tp, struct b3 *b)
{
	u32 cap = ~0U;

	if (b->mode == PROBE_BW && b->cycle_idx != BBR3_CRUISE) {
		cap = b->inflight_hi;
	} else if (b->mode == PROBE_RTT || (b->mode == PROBE_BW && b->cycle_idx == BBR3_CRUISE)) {
		cap = inflight_with_headroom(b);
	}
	cap = min_u32(cap, b->inflight_lo);
	cap = max_u32(cap, CWND_MIN_TARGET);
	set_cwnd(tp, min_u32(cap, snd_cwnd(tp)));
}

static __always_inline void init_lower_bounds(struct tcp_sock *tp, struct b3 *b, bool init_bw)
{
	if (init_bw && b->bw_lo == ~0U)
		b->bw_lo = max_bw(b);
	if (b->inflight_lo == ~0U)
		b->inflight_lo = snd_cwnd(tp);
}

static __always_inline void adapt_lower_bounds(struct tcp_sock *tp, struct b3 *b)
{
	u32 ecn_inflight_lo = ~0U, cut;

	if (is_probing_bandwidth(b))
		return;
	if (b->ecn_in_round) {
		init_lower_bounds(tp, b, false);
		cut = BBR_UNIT - ((b->ecn_alpha * ECN_FACTOR) >> BBR_SCALE);
		ecn_inflight_lo = (u32)(((u64)b->inflight_lo * cut) >> BBR_SCALE);
	}
	if (b->loss_in_round) {
		init_lower_bounds(tp, b, true);
		cut = BBR_UNIT - BETA;
		b->bw_lo = max_u32(b->bw_latest, (u32)(((u64)b->bw_lo * cut) >> BBR_SCALE));
		b->inflight_lo = max_u32(b->inflight_latest, (u32)(((u64)b->inflight_lo * cut) >> BBR_SCALE));
	}
	b->inflight_lo = min_u32(b->inflight_lo, ecn_inflight_lo);
	b->bw_lo = max_u32(1, b->bw_lo);
}

static __always_inline void reset_lower_bounds(struct b3 *b)
{
	b->bw_lo = ~0U;
	b->inflight_lo = ~0U;
}

static __always_inline void reset_congestion_signals(struct b3 *b)
{
	b->loss_in_round = 0;
	b->ecn_in_round = 0;
	b->loss_in_cycle = 0;
	b->ecn_in_cycle = 0;
	b->bw_latest = 0;
	b->inflight_latest = 0;
}

static __always_inline void pick_probe_wait(struct b3 *b)
{
	b->rounds_since_probe = bpf_get_prandom_u32() % BW_PROBE_RAND_ROUNDS;
	b->probe_wait_us = BW_PROBE_BASE_US + bpf_get_prandom_u32() % BW_PROBE_RAND_US;
}

static __always_inline void start_bw_probe_refill(struct tcp_sock *tp, struct b3 *b, u32 up_rounds)
{
	reset_lower_bounds(b);
	b->bw_probe_up_rounds = (u8)up_rounds;
	b->bw_probe_up_acks = 0;
	b->stopped_risky_probe = 0;
	b->ack_phase = ACKS_REFILLING;
	b->next_rtt_delivered = tp->delivered;
	b->cycle_idx = BBR3_REFILL;
}

static __always_inline void start_bw_probe_up(struct tcp_sock *tp, struct b3 *b, struct smp *s)
{
	b->ack_phase = ACKS_PROBE_STARTING;
	b->next_rtt_delivered = tp->delivered;
	b->cycle_mstamp = tp->tcp_mstamp;
	reset_full_bw(b);
	b->full_bw = s->sample_bw;
	b->cycle_idx = BBR3_UP;
	b->probes++;
	raise_inflight_hi_slope(tp, b);
}

static __always_inline void start_bw_probe_down(struct tcp_sock *tp, struct b3 *b)
{
	reset_congestion_signals(b);
	b->bw_probe_up_cnt = ~0U;
	pick_probe_wait(b);
	b->cycle_mstamp = tp->tcp_mstamp;
	b->ack_phase = ACKS_PROBE_STOPPING;
	b->next_rtt_delivered = tp->delivered;
	b->cycle_idx = BBR3_DOWN;
}

static __always_inline void start_bw_probe_cruise(struct b3 *b)
{
	if (b->inflight_lo != ~0U)
		b->inflight_lo = min_u32(b->inflight_lo, b->inflight_hi);
	b->cycle_idx = BBR3_CRUISE;
}

static __always_inline void handle_inflight_too_high(struct sock *sk, struct b3 *b, struct smp *s)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	b->prev_probe_too_high = 1;
	b->bw_probe_samples = 0;
	b->too_high++;
	if (!s->is_app_limited)
		b->inflight_hi = max_u32(s->tx_in_flight,
					 (u32)(((u64)target_inflight(sk, b) * (BBR_UNIT - BETA)) >> BBR_SCALE));
	if (b->mode == PROBE_BW && b->cycle_idx == BBR3_UP)
		start_bw_probe_down(tp, b);
}

/* v3's bbr_inflight_hi_from_lost_skb for a 1-packet skb, on approximated tx_in_flight / lost. */
static __always_inline u32 inflight_hi_from_lost(struct smp *s)
{
	s32 inflight_prev = (s32)s->tx_in_flight - 1, lost_prev = s->lost - 1;
	u64 budget, prefix;

	if (inflight_prev < 0 || lost_prev < 0)
		return ~0U;
	budget = ((u64)inflight_prev * LOSS_THRESH + BBR_UNIT - 1) >> BBR_SCALE;
	if ((u64)lost_prev >= budget)
		prefix = 0;
	else
		prefix = ((budget - lost_prev) << BBR_SCALE) / (BBR_UNIT - LOSS_THRESH);
	return (u32)(inflight_prev + prefix);
}

static __always_inline bool adapt_upper_bounds(struct sock *sk, struct b3 *b, struct smp *s)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (b->ack_phase == ACKS_PROBE_STARTING && b->round_start)
		b->ack_phase = ACKS_PROBE_FEEDBACK;
	if (b->ack_phase == ACKS_PROBE_STOPPING && b->round_start) {
		b->bw_probe_samples = 0;
		b->ack_phase = ACKS_INIT;
		if (b->mode == PROBE_BW && !s->is_app_limited && b->bw_hi[1]) {
			b->bw_hi[0] = b->bw_hi[1]; /* advance the max filter */
			b->bw_hi[1] = 0;
		}
		if (b->mode == PROBE_BW && b->stopped_risky_probe && !b->prev_probe_too_high) {
			start_bw_probe_refill(tp, b, 0);
			return true;
		}
	}
	if (is_inflight_too_high(b, s)) {
		if (b->bw_probe_samples)
			handle_inflight_too_high(sk, b, s);
	} else {
		if (b->inflight_hi == ~0U)
			return false;
		if (s->tx_in_flight > b->inflight_hi)
			b->inflight_hi = s->tx_in_flight;
		if (b->mode == PROBE_BW && b->cycle_idx == BBR3_UP)
			probe_inflight_hi_upward(tp, b, s);
	}
	return false;
}

static __always_inline u32 ilog2_u32(u32 v)
{
	u32 r = 0;

	if (v >= 1U << 16) { v >>= 16; r += 16; }
	if (v >= 1U << 8) { v >>= 8; r += 8; }
	if (v >= 1U << 4) { v >>= 4; r += 4; }
	if (v >= 1U << 2) { v >>= 2; r += 2; }
	if (v >= 1U << 1) { r += 1; }
	return r;
}

static __always_inline bool check_time_to_probe_bw(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	u32 rounds;

	if (b->ecn_eligible && b->ecn_in_cycle && !b->loss_in_cycle &&
	    icsk->icsk_ca_state == TCP_CA_Open) {
		start_bw_probe_refill(tp, b, ilog2_u32((u32)(((u64)b->inflight_hi * ECN_REPROBE_GAIN) >> BBR_SCALE)));
		return true;
	}
	rounds = min_u32(BW_PROBE_MAX_ROUNDS, target_inflight(sk, b));
	if ((s64)(tp->tcp_mstamp - (b->cycle_mstamp + b->probe_wait_us)) > 0 ||
	    b->rounds_since_probe >= rounds) {
		start_bw_probe_refill(tp, b, 0);
		return true;
	}
	return false;
}

static __always_inline void update_cycle_phase(struct sock *sk, struct b3 *b, struct smp *s)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	bool done = false;
	u32 infl, bw;

	if (!b->full_bw_reached)
		return;
	if (adapt_upper_bounds(sk, b, s))
		return;
	if (b->mode != PROBE_BW)
		return;
	infl = packets_in_net_at_edt(sk, b, s->prior_in_flight);
	bw = max_bw(b);
	switch (b->cycle_idx) {
	case BBR3_CRUISE:
		check_time_to_probe_bw(sk, b);
		break;
	case BBR3_REFILL:
		if (b->round_start) {
			b->bw_probe_samples = 1;
			start_bw_probe_up(tp, b, s);
		}
		break;
	case BBR3_UP:
		if (b->prev_probe_too_high && infl >= b->inflight_hi) {
			b->stopped_risky_probe = 1;
			done = true;
		} else if (tp->is_cwnd_limited && snd_cwnd(tp) >= b->inflight_hi) {
			reset_full_bw(b);
			b->full_bw = s->sample_bw;
		} else if (b->full_bw_now) {
			done = true;
		}
		if (done) {
			b->prev_probe_too_high = 0;
			start_bw_probe_down(tp, b);
		}
		break;
	case BBR3_DOWN:
		if (check_time_to_probe_bw(sk, b))
			break;
		if (infl <= inflight_with_headroom(b) && infl <= inflight(sk, b, bw, BBR_UNIT))
			start_bw_probe_cruise(b);
		break;
	}
}

static __always_inline void exit_probe_rtt(struct tcp_sock *tp, struct b3 *b)
{
	reset_lower_bounds(b);
	if (b->full_bw_reached) {
		b->mode = PROBE_BW;
		start_bw_probe_down(tp, b);
		start_bw_probe_cruise(b);
	} else {
		b->mode = STARTUP;
	}
}

static __always_inline void check_probe_rtt_done(struct tcp_sock *tp, struct b3 *b)
{
	if (!(b->probe_rtt_done_stamp && (s64)(tp->tcp_mstamp - b->probe_rtt_done_stamp) > 0))
		return;
	b->probe_rtt_min_stamp = tp->tcp_mstamp;
	set_cwnd(tp, max_u32(snd_cwnd(tp), b->prior_cwnd));
	exit_probe_rtt(tp, b);
}

static __always_inline void update_min_rtt(struct sock *sk, struct b3 *b, struct smp *s)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	bool probe_rtt_expired, min_rtt_expired;
	u32 pif;

	probe_rtt_expired = (s64)(tp->tcp_mstamp - (b->probe_rtt_min_stamp + PROBE_RTT_WIN_US)) > 0;
	if (s->rtt_us >= 0 && (s->rtt_us < b->probe_rtt_min_us ||
			       (probe_rtt_expired && !s->is_ack_delayed))) {
		b->probe_rtt_min_us = (u32)s->rtt_us;
		b->probe_rtt_min_stamp = tp->tcp_mstamp;
	}
	min_rtt_expired = (s64)(tp->tcp_mstamp - (b->min_rtt_stamp + MIN_RTT_WIN_US)) > 0;
	if (b->probe_rtt_min_us <= b->min_rtt_us || min_rtt_expired) {
		b->min_rtt_us = b->probe_rtt_min_us;
		b->min_rtt_stamp = b->probe_rtt_min_stamp;
	}
	if (probe_rtt_expired && !b->idle_restart && b->mode != PROBE_RTT) {
		b->mode = PROBE_RTT;
		save_cwnd(tp, b);
		b->probe_rtt_done_stamp = 0;
		b->ack_phase = ACKS_PROBE_STOPPING;
		b->next_rtt_delivered = tp->delivered;
	}
	if (b->mode == PROBE_RTT) {
		/* Ignore low rate samples during this mode. */
		pif = packets_in_flight(tp);
		tp->app_limited = (tp->delivered + pif) ? (tp->delivered + pif) : 1;
		if (!b->probe_rtt_done_stamp && pif <= probe_rtt_cwnd(b)) {
			b->probe_rtt_done_stamp = tp->tcp_mstamp + PROBE_RTT_MODE_US;
			b->probe_rtt_round_done = 0;
			b->next_rtt_delivered = tp->delivered;
		} else if (b->probe_rtt_done_stamp) {
			if (b->round_start)
				b->probe_rtt_round_done = 1;
			if (b->probe_rtt_round_done)
				check_probe_rtt_done(tp, b);
		}
	}
	if (s->delivered > 0)
		b->idle_restart = 0;
}

static __always_inline void update_gains(struct b3 *b)
{
	switch (b->mode) {
	case STARTUP:
		b->pacing_gain = STARTUP_PACING_GAIN;
		b->cwnd_gain = STARTUP_CWND_GAIN;
		break;
	case DRAIN:
		b->pacing_gain = DRAIN_GAIN;
		b->cwnd_gain = STARTUP_CWND_GAIN;
		break;
	case PROBE_BW:
		b->pacing_gain = probe_bw_pacing_gain(b->cycle_idx);
		b->cwnd_gain = CWND_GAIN;
		if (b->cycle_idx == BBR3_UP)
			b->cwnd_gain += BBR_UNIT * BW_PROBE_CWND_GAIN / 4;
		break;
	default:
		b->pacing_gain = BBR_UNIT;
		b->cwnd_gain = BBR_UNIT;
	}
}

static __always_inline void update_ack_aggregation(struct tcp_sock *tp, struct b3 *b, struct smp *s)
{
	u32 epoch_us, expected, extra, thresh = EXTRA_ACKED_WIN_RTTS;
	u32 idx;

	if (s->acked_sacked == 0 || s->delivered < 0 || s->interval_us <= 0)
		return;
	if (b->round_start) {
		b->extra_acked_win_rtts = b->extra_acked_win_rtts < 0x1f ? b->extra_acked_win_rtts + 1 : 0x1f;
		if (!b->full_bw_reached)
			thresh = 1;
		if (b->extra_acked_win_rtts >= thresh) {
			b->extra_acked_win_rtts = 0;
			b->extra_acked_win_idx = b->extra_acked_win_idx ? 0 : 1;
			b->extra_acked[b->extra_acked_win_idx & 1] = 0;
		}
	}
	epoch_us = (u32)(tp->delivered_mstamp - b->ack_epoch_mstamp);
	expected = (u32)(((u64)bbr_bw(b) * epoch_us) / BW_UNIT);
	if (b->ack_epoch_acked <= expected || b->ack_epoch_acked + s->acked_sacked >= ACK_EPOCH_ACKED_RESET) {
		b->ack_epoch_acked = 0;
		b->ack_epoch_mstamp = tp->delivered_mstamp;
		expected = 0;
	}
	b->ack_epoch_acked = min_u32(0xFFFFF, b->ack_epoch_acked + s->acked_sacked);
	extra = b->ack_epoch_acked - expected;
	extra = min_u32(extra, snd_cwnd(tp));
	idx = b->extra_acked_win_idx & 1;
	if (extra > b->extra_acked[idx])
		b->extra_acked[idx] = extra;
}

static __always_inline void check_full_bw_reached(struct b3 *b, struct smp *s)
{
	u32 thresh;

	if (b->full_bw_now || s->is_app_limited)
		return;
	thresh = (u32)(((u64)b->full_bw * FULL_BW_THRESH) >> BBR_SCALE);
	if (s->sample_bw >= thresh) {
		reset_full_bw(b);
		b->full_bw = s->sample_bw;
		return;
	}
	if (!b->round_start)
		return;
	b->full_bw_cnt++;
	b->full_bw_now = b->full_bw_cnt >= FULL_BW_CNT;
	b->full_bw_reached |= b->full_bw_now;
}

static __always_inline void check_drain(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (b->mode == STARTUP && b->full_bw_reached) {
		b->mode = DRAIN;
		tp->snd_ssthresh = inflight(sk, b, max_bw(b), BBR_UNIT);
		reset_congestion_signals(b);
	}
	if (b->mode == DRAIN &&
	    packets_in_net_at_edt(sk, b, packets_in_flight(tp)) <= inflight(sk, b, max_bw(b), BBR_UNIT)) {
		b->mode = PROBE_BW;
		start_bw_probe_down(tp, b);
	}
}

static __always_inline void check_loss_too_high_in_startup(struct sock *sk, struct b3 *b, struct smp *s)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	if (b->full_bw_reached)
		return;
	if (s->losses && b->loss_events_in_round < 0xf)
		b->loss_events_in_round++;
	if (b->loss_round_start && icsk->icsk_ca_state == TCP_CA_Recovery &&
	    b->loss_events_in_round >= FULL_LOSS_CNT && is_inflight_too_high(b, s)) {
		handle_queue_too_high_in_startup(sk, b);
		return;
	}
	if (b->loss_round_start)
		b->loss_events_in_round = 0;
}

/* ---- BBRv3-S: percentile over the sample history ---- */

/* Insert one sample (0: none) and return the p-th percentile (0: no samples yet). A global
 * (non-static) function: the verifier checks it once, on its own, instead of at every path of
 * cong_control that reaches it; inlined there, the window's bpf_loop pushed the verifier past its
 * one-million-instruction budget ("BPF program is too large") for bbr3-s. */
__noinline __u32 bbr3_pct_step(struct pct_window *w, __u32 sample, __u32 p_bp)
{
	if (!w)
		return 0;
	if (sample)
		pct_insert(w, sample);
	return pct_value(w, p_bp);
}

/* The sample the percentile window gets for this ACK (0: none).
 *
 * A delivery-rate sample measures the path only when the sender offered more than the path
 * carried. While we pace below our own raw estimate - every PROBE_BW phase but UP once the factor
 * is < 1 (CRUISE paces at 0.85 x p x 0.99), DRAIN, PROBE_RTT's cwnd of 4 - a sample at or above
 * the rate we paced at says only "the path carries at least what we sent". Entered as is, such
 * samples pulled the percentile down to the pacing rate, which is factor x percentile: a
 * geometric decline per window (N = 100: ~2 rounds) that only the rare UP phases held up, at
 * ~0.3 of the link (cc/README.md, "BBRv3-S"). A max filter (v3, BBR v1) is blind to such low
 * samples; a percentile is not. So they are censored the way BBR treats app-limited samples: they
 * may not lower the estimate - entered as the current raw percentile (a neutral sample). A sample
 * below the pacing rate (the path delivered less than we sent: a real limit) or above the raw
 * percentile (a probe got more through) is entered as is; app-limited samples stay out. */
static __always_inline __u32 pct_sample(struct b3 *b, struct smp *s)
{
	u64 pace_bw;

	if (!(s->interval_us > 0 && s->acked_sacked) || s->is_app_limited)
		return 0;
	if (!b->bw_pct_raw || s->sample_bw >= b->bw_pct_raw)
		return s->sample_bw;
	if (b->mode == PROBE_RTT)
		return b->bw_pct_raw;
	/* the rate in effect (set on the previous ACK): bw x pacing_gain x (1 - margin) */
	pace_bw = ((u64)bbr_bw(b) * b->pacing_gain >> BBR_SCALE) * (100 - PACING_MARGIN_PCT) / 100;
	if (pace_bw < b->bw_pct_raw && s->sample_bw >= pace_bw)
		return b->bw_pct_raw;
	return s->sample_bw;
}

static __always_inline void pct_update(struct sock *sk, struct b3 *b, struct smp *s)
{
	struct pct_window *w;
	__u32 v;
	u64 t;

	if (!mpvlab_param_estimator)
		return;
	w = bpf_sk_storage_get(&bbr3_pct_map, sk, 0, 0);
	if (!w)
		return;
	v = bbr3_pct_step(w, pct_sample(b, s), mpvlab_param_percentile_bp);
	if (!v)
		return;
	b->bw_pct_raw = v;
	t = (u64)b->bw_pct_raw * mpvlab_param_factor_bp / PCT_BP_ONE;
	b->bw_pct = t > 0xffffffffULL ? 0xffffffffU : (u32)(t ? t : 1);
}

/* ---- export ---- */
static __always_inline void fill_tuple(struct sock *sk, struct bbr3_state *r)
{
	struct sock_common *c = &sk->__sk_common;

	r->family = (__u8)c->skc_family;
	r->sport = c->skc_num;
	r->dport = __builtin_bswap16(c->skc_dport);
	if (c->skc_family == AF_INET6) {
		__builtin_memcpy(r->saddr, &c->skc_v6_rcv_saddr, 16);
		__builtin_memcpy(r->daddr, &c->skc_v6_daddr, 16);
	} else {
		__builtin_memcpy(r->saddr, &c->skc_rcv_saddr, 4);
		__builtin_memcpy(r->daddr, &c->skc_daddr, 4);
	}
}

static __always_inline u8 phase_of(struct b3 *b)
{
	return b->mode == PROBE_BW ? b->cycle_idx : BBR3_PHASE_NONE;
}

static __noinline void export_state(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct bbr3_state *r;
	struct pct_window *w;

	b->last_export_us = tp->tcp_mstamp;
	r = bpf_map_lookup_elem(&mpvlab_bbr3_state, &b->flow_id);
	if (!r)
		return;
	r->updated_ns = tp->tcp_mstamp * 1000;
	r->acks = b->acks;
	r->rounds = b->rounds;
	r->rounds_lossy = b->rounds_lossy;
	r->rounds_over = b->rounds_over;
	r->too_high = b->too_high;
	r->probes = b->probes;
	r->pacing_rate = sk->sk_pacing_rate;
	r->bw = bbr_bw(b);
	r->max_bw = max_bw(b);
	r->bw_hi0 = b->bw_hi[0];
	r->bw_hi1 = b->bw_hi[1];
	r->bw_lo = b->bw_lo;
	r->inflight_lo = b->inflight_lo;
	r->inflight_hi = b->inflight_hi;
	r->bw_pct = b->bw_pct;
	r->bw_pct_raw = b->bw_pct_raw;
	r->n_samples = 0;
	if (mpvlab_param_estimator) {
		w = bpf_sk_storage_get(&bbr3_pct_map, sk, 0, 0);
		if (w)
			r->n_samples = w->n;
	}
	r->min_rtt_us = b->min_rtt_us;
	r->cwnd = snd_cwnd(tp);
	r->inflight = packets_in_flight(tp);
	r->mss = tp->mss_cache;
	r->last_round_delivered = b->last_round_delivered;
	r->last_round_lost = b->last_round_lost;
	r->last_round_ce = b->last_round_ce;
	r->ecn_alpha = b->ecn_alpha;
	r->pacing_gain = (u16)b->pacing_gain;
	r->cwnd_gain = (u16)b->cwnd_gain;
	r->mode = b->mode;
	r->phase = phase_of(b);
	r->ecn_eligible = b->ecn_eligible;
}

static __always_inline void emit(struct sock *sk, struct b3 *b, u32 kind, u8 to_mode, u8 to_phase)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct bbr3_event *e;

	e = bpf_ringbuf_reserve(&mpvlab_bbr3_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&events_dropped, 1);
		return;
	}
	e->t_ns = bpf_ktime_get_ns();
	e->flow_id = b->flow_id;
	e->kind = kind;
	e->bw = bbr_bw(b);
	e->inflight_hi = b->inflight_hi;
	e->inflight_lo = b->inflight_lo;
	e->cwnd = snd_cwnd(tp);
	e->mss = tp->mss_cache;
	e->round_delivered = b->last_round_delivered;
	e->round_lost = b->last_round_lost;
	e->round_ce = b->last_round_ce;
	e->from_mode = b->last_mode;
	e->from_phase = b->last_phase;
	e->to_mode = to_mode;
	e->to_phase = to_phase;
	bpf_ringbuf_submit(e, 0);
}

/* After any entry point that may change the mode: log the change, refresh the record. */
static __always_inline void note_state(struct sock *sk, struct b3 *b, bool force)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u8 ph = phase_of(b);
	bool changed = b->mode != b->last_mode || ph != b->last_phase;

	if (changed) {
		emit(sk, b, BBR3_EV_TRANSITION, b->mode, ph);
		b->last_mode = b->mode;
		b->last_phase = ph;
	}
	if (force || changed || tp->tcp_mstamp - b->last_export_us >= mpvlab_param_export_us)
		export_state(sk, b);
}

/* Per packet-timed round: loss / CE accounting (export) and the snapshot for rs->lost. */
static __always_inline void account_round(struct sock *sk, struct b3 *b)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	u32 d = tp->delivered - b->rnd_delivered0, l = tp->lost - b->rnd_lost0;

	b->last_round_delivered = d;
	b->last_round_lost = l;
	b->last_round_ce = tp->delivered_ce - b->rnd_ce0;
	b->rnd_delivered0 = tp->delivered;
	b->rnd_lost0 = tp->lost;
	b->rnd_ce0 = tp->delivered_ce;
	b->rounds++;
	if (l) {
		b->rounds_lossy++;
		/* loss rate lost / (delivered + lost) above LOSS_THRESH / BBR_UNIT */
		if ((u64)l * BBR_UNIT > (u64)(d + l) * LOSS_THRESH)
			b->rounds_over++;
	}
	if (l || b->last_round_ce)
		emit(sk, b, BBR3_EV_LOSS_ROUND, b->mode, phase_of(b));
}

SEC("struct_ops/bbr3_init")
void BPF_PROG(bbr3_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct bbr3_state fresh = {};
	struct pct_window *w;
	struct b3 *b;

	b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!b) {
		__sync_fetch_and_add(&storage_failures, 1);
		return;
	}
	__builtin_memset(b, 0, sizeof(*b));
	if (mpvlab_param_estimator) {
		w = bpf_sk_storage_get(&bbr3_pct_map, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!w) {
			__sync_fetch_and_add(&storage_failures, 1);
			bpf_sk_storage_delete(&bbr3_sk_map, sk);
			return;
		}
		pct_reset(w, mpvlab_param_window);
	}
	b->flow_id = __sync_fetch_and_add(&next_flow_id, 1);
	b->init_cwnd = min_u32(0x7f, snd_cwnd(tp));
	b->prior_cwnd = tp->prior_cwnd;
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	b->next_rtt_delivered = tp->delivered;
	b->prev_ca_state = TCP_CA_Open;
	b->probe_rtt_min_us = tp->rtt_min.s[0].v;
	b->probe_rtt_min_stamp = tp->tcp_mstamp;
	b->min_rtt_us = tp->rtt_min.s[0].v;
	b->min_rtt_stamp = tp->tcp_mstamp;
	init_pacing_rate_from_rtt(sk, b);
	b->mode = STARTUP;
	b->ack_epoch_mstamp = tp->tcp_mstamp;
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	b->loss_round_delivered = tp->delivered + 1;
	b->bw_lo = ~0U;
	b->inflight_lo = ~0U;
	b->inflight_hi = ~0U;
	b->bw_probe_up_cnt = ~0U;
	b->ecn_alpha = ECN_ALPHA_INIT;
	b->rnd_delivered0 = tp->delivered;
	b->rnd_lost0 = tp->lost;
	b->rnd_ce0 = tp->delivered_ce;
	update_gains(b);
	b->last_mode = STARTUP;
	b->last_phase = BBR3_PHASE_NONE;

	fill_tuple(sk, &fresh);
	fresh.updated_ns = tp->tcp_mstamp * 1000;
	fresh.mss = tp->mss_cache;
	fresh.mode = STARTUP;
	fresh.phase = BBR3_PHASE_NONE;
	fresh.bw_lo = fresh.inflight_lo = fresh.inflight_hi = ~0U;
	bpf_map_update_elem(&mpvlab_bbr3_state, &b->flow_id, &fresh, BPF_ANY);
	export_state(sk, b);
}

SEC("struct_ops/bbr3_release")
void BPF_PROG(bbr3_release, struct sock *sk)
{
	struct bbr3_state *r;
	struct b3 *b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, 0);

	if (!b)
		return;
	export_state(sk, b);
	r = bpf_map_lookup_elem(&mpvlab_bbr3_state, &b->flow_id);
	if (r)
		r->closed = 1;
}

/* v3's bbr_main. Inlined into the struct_ops program below, which (in the bench-only build,
 * -DMPVLAB_COST_BENCH, cost_bench.h) times it. */
static __always_inline void cong_control(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct smp s = {};
	struct b3 *b;
	u32 bw;

	b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, 0);
	if (!b) {
		/* the SYN-ACK reaches cong_control before init (v3: "!initialized") */
		__sync_fetch_and_add(&pre_init_acks, 1);
		return;
	}
	s.delivered = rs->delivered;
	s.delivered_ce = rs->delivered_ce;
	s.interval_us = rs->interval_us;
	s.rtt_us = rs->rtt_us;
	s.losses = rs->losses;
	s.acked_sacked = rs->acked_sacked;
	s.prior_in_flight = rs->prior_in_flight;
	s.prior_delivered = rs->prior_delivered;
	s.is_app_limited = rs->is_app_limited;
	s.is_ack_delayed = rs->is_ack_delayed;
	b->acks++;

	/* round start (bbr_update_round_start) */
	b->round_start = 0;
	if (s.interval_us > 0 && !before32(s.prior_delivered, b->next_rtt_delivered)) {
		b->next_rtt_delivered = tp->delivered;
		b->round_start = 1;
	}
	/* Approximations of v3's per-packet fields (see the file comment). */
	s.tx_in_flight = s.prior_in_flight;
	s.lost = (s32)(tp->lost - b->rnd_lost0);
	if (b->round_start) {
		account_round(sk, b);
		b->rounds_since_probe = b->rounds_since_probe < 0xff ? b->rounds_since_probe + 1 : 0xff;
		update_ecn_alpha(sk, b);
	}
	b->ecn_in_round |= (b->ecn_eligible && s.delivered_ce > 0);

	/* bbr_calculate_bw_sample */
	if (s.interval_us > 0 && s.delivered >= 0) {
		u64 v = ((u64)s.delivered * BW_UNIT + (u64)s.interval_us - 1) / (u64)s.interval_us;

		s.sample_bw = v > 0xffffffffULL ? 0xffffffffU : (u32)v;
	}
	/* bbr_update_latest_delivery_signals */
	b->loss_round_start = 0;
	if (s.interval_us > 0 && s.acked_sacked) {
		b->bw_latest = max_u32(b->bw_latest, s.sample_bw);
		b->inflight_latest = max_u32(b->inflight_latest, (u32)s.delivered);
		if (!before32(s.prior_delivered, b->loss_round_delivered)) {
			b->loss_round_delivered = tp->delivered;
			b->loss_round_start = 1;
		}
	}

	/* skb_marked_lost() stand-in: this ACK marked packets lost (bbr_note_loss). */
	if (s.losses > 0) {
		if (!b->loss_in_round)
			b->loss_round_delivered = tp->delivered;
		b->loss_in_round = 1;
		b->loss_in_cycle = 1;
		if (b->bw_probe_samples && is_inflight_too_high(b, &s)) {
			struct smp l = s;

			l.tx_in_flight = inflight_hi_from_lost(&s);
			handle_inflight_too_high(sk, b, &l);
		}
	}

	/* bbr_update_model */
	if (s.interval_us > 0 && s.acked_sacked) {
		if (!s.is_app_limited || s.sample_bw >= max_u32(b->bw_hi[0], b->bw_hi[1]))
			b->bw_hi[1] = max_u32(s.sample_bw, b->bw_hi[1]);
		pct_update(sk, b, &s);
		b->loss_in_round |= (s.losses > 0);
		if (b->loss_round_start) {
			adapt_lower_bounds(tp, b);
			b->loss_in_round = 0;
			b->ecn_in_round = 0;
		}
	}
	update_ack_aggregation(tp, b, &s);
	check_loss_too_high_in_startup(sk, b, &s);
	check_full_bw_reached(b, &s);
	check_drain(sk, b);
	update_cycle_phase(sk, b, &s);
	update_min_rtt(sk, b, &s);

	update_gains(b);
	bw = bbr_bw(b);
	set_pacing_rate(sk, b, bw, b->pacing_gain);
	set_cwnd_target(sk, b, s.acked_sacked, bw, b->cwnd_gain);
	bound_cwnd_for_inflight_model(tp, b);

	/* bbr_advance_latest_delivery_signals */
	if (b->loss_round_start) {
		b->bw_latest = s.sample_bw;
		b->inflight_latest = (u32)s.delivered;
	}
	b->prev_ca_state = icsk->icsk_ca_state;
	b->loss_in_cycle |= s.lost > 0;
	b->ecn_in_cycle |= s.delivered_ce > 0;
	note_state(sk, b, false);
}

SEC("struct_ops/bbr3_cong_control")
void BPF_PROG(bbr3_cong_control, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
#ifdef MPVLAB_COST_BENCH
	__u64 t0 = bpf_ktime_get_ns();
#endif
	cong_control(sk, ack, flag, rs);
#ifdef MPVLAB_COST_BENCH
	cost_note(bpf_ktime_get_ns() - t0);
#endif
}

SEC("struct_ops/bbr3_ssthresh")
u32 BPF_PROG(bbr3_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct b3 *b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, 0);

	if (b) {
		save_cwnd(tp, b);
		b->undo_bw_lo = b->bw_lo;
		b->undo_inflight_lo = b->inflight_lo;
		b->undo_inflight_hi = b->inflight_hi;
	}
	return tp->snd_ssthresh;
}

SEC("struct_ops/bbr3_undo_cwnd")
u32 BPF_PROG(bbr3_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct b3 *b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, 0);

	u32 c;

	if (!b) {
		c = snd_cwnd(tp);
		asm volatile("" : "+r"(c)); /* keep the two loads apart (verifier: one insn, one pointer type) */
		return c;
	}
	reset_full_bw(b);
	b->loss_in_round = 0;
	b->bw_lo = max_u32(b->bw_lo, b->undo_bw_lo);
	b->inflight_lo = max_u32(b->inflight_lo, b->undo_inflight_lo);
	b->inflight_hi = max_u32(b->inflight_hi, b->undo_inflight_hi);
	c = b->prior_cwnd;
	asm volatile("" : "+r"(c));
	return c;
}

SEC("struct_ops/bbr3_cwnd_event")
void BPF_PROG(bbr3_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct b3 *b;

	if (event != CA_EVENT_TX_START || !tp->app_limited)
		return;
	b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, 0);
	if (!b)
		return;
	b->idle_restart = 1;
	b->ack_epoch_mstamp = tp->tcp_mstamp;
	b->ack_epoch_acked = 0;
	if (b->mode == PROBE_BW)
		set_pacing_rate(sk, b, bbr_bw(b), BBR_UNIT);
	else if (b->mode == PROBE_RTT)
		check_probe_rtt_done(tp, b);
	note_state(sk, b, false);
}

SEC("struct_ops/bbr3_set_state")
void BPF_PROG(bbr3_set_state, struct sock *sk, u8 new_state)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct b3 *b = bpf_sk_storage_get(&bbr3_sk_map, sk, 0, 0);

	if (!b)
		return;
	if (new_state == TCP_CA_Loss) {
		b->prev_ca_state = TCP_CA_Loss;
		reset_full_bw(b);
		if (!is_probing_bandwidth(b) && b->inflight_lo == ~0U)
			b->inflight_lo = max_u32(snd_cwnd(tp), b->prior_cwnd);
	} else if (b->prev_ca_state == TCP_CA_Loss) {
		set_cwnd(tp, max_u32(snd_cwnd(tp), b->prior_cwnd));
	}
}

SEC("struct_ops/bbr3_min_tso_segs")
u32 BPF_PROG(bbr3_min_tso_segs, struct sock *sk)
{
	/* v1's rule (v3 replaces the tso_segs hook, which stock kernels lack) */
	return sk->sk_pacing_rate < (1200000 >> 3) ? 1 : 2;
}

SEC("struct_ops/bbr3_sndbuf_expand")
u32 BPF_PROG(bbr3_sndbuf_expand, struct sock *sk)
{
	return 3;
}

/* bpfcc-loader writes the run-scoped name over this one before loading. */
SEC(".struct_ops")
struct tcp_congestion_ops bbr3_ops = {
	.init = (void *)bbr3_init,
	.release = (void *)bbr3_release,
	.cong_control = (void *)bbr3_cong_control,
	.ssthresh = (void *)bbr3_ssthresh,
	.undo_cwnd = (void *)bbr3_undo_cwnd,
	.cwnd_event = (void *)bbr3_cwnd_event,
	.set_state = (void *)bbr3_set_state,
	.min_tso_segs = (void *)bbr3_min_tso_segs,
	.sndbuf_expand = (void *)bbr3_sndbuf_expand,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "bbr3",
};
