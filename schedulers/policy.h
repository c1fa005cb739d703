/*
 * Scheduling policies (minrtt, bdp, ecf), independent of the mechanism that
 * applies them: input is what the kernel shows of each subflow, output is
 * the set of subflows allowed to receive new data. Today the controller
 * applies that set as backup flags; an in-kernel BPF scheduler (where a
 * kernel offers bpf_struct_ops for MPTCP schedulers) would call the same
 * logic per decision.
 */
#ifndef MPVLAB_POLICY_H
#define MPVLAB_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#define POL_MAX_SF 8

enum pol_kind { POL_MINRTT = 1, POL_BDP = 2, POL_ECF = 3 };

struct pol_params {
	enum pol_kind kind;
	uint64_t release_ns; /* a limited subflow counts as limited this long after it last was */
	double hysteresis; /* bdp: switch when another estimate exceeds the current by this fraction;
			    * ecf: beta, the margin that keeps it waiting once it waits */
	uint64_t bw_window_ns; /* bdp: window of the max filter on delivery-rate samples */
	uint64_t backlog_ns; /* unsent data worth more than this at the subflow's rate = limited */
	uint64_t probe_interval_ns; /* an excluded subflow idle this long is opened for probe_ns (0 = never) */
	uint64_t probe_ns;
	uint64_t dwell_ns; /* bdp: no switch within this time of the previous choice (estimates settle) */
	uint64_t exhaust_ns; /* a subflow opens the next one only once limited this long (breaks < 1/4 of it do not count) */
	bool sndbuf_bounded; /* sk_sndbuf is a fixed bound (SO_SNDBUF), not autotuned: see pol_limited_now() */
};

/* One subflow as the kernel shows it (filled by the mechanism). */
struct pol_sf_in {
	uint64_t key; /* stable identity within the connection */
	bool usable; /* established, not closed */
	uint32_t srtt_us, min_rtt_us;
	uint32_t cwnd, in_flight, unsent;
	uint32_t wmem_queued, sndbuf, mss;
	uint32_t snd_wnd, unacked; /* peer's receive window; bytes sent, not yet acked */
	uint32_t rtt_dev_us; /* mean deviation of the RTT */
	uint32_t msk_unsent; /* connection's data not yet handed to any subflow (same on all its subflows) */
	uint64_t delivery_Bps; /* last delivery-rate sample, bytes/s; 0 = none */
	uint64_t pacing_Bps; /* sk_pacing_rate, bytes/s; 0 or ~0 = unset */
	bool is_bbr;
	uint64_t bbr_bw_Bps;
	uint32_t bbr_min_rtt_us;
	uint64_t last_data_ns; /* last time it was handed data (0 = never) */
};

/* Per-subflow memory of a policy. */
struct pol_sf_state {
	uint64_t key;
	uint64_t last_limited_ns; /* last time it counted as exhausted */
	uint64_t limited_since_ns; /* start of the current limited stretch (0 = none yet) */
	uint64_t limited_last_ns; /* last tick it was limited */
	uint64_t bw_max_Bps, bw_max_t_ns; /* windowed max of delivery-rate samples */
	uint64_t est_bytes; /* last BDP estimate */
	int est_src; /* 0 none, 1 bbr, 2 delivery x min_rtt, 3 cwnd x mss (no sample yet) */
	uint64_t first_ns, probe_start_ns, probe_until_ns;
};

struct pol_conn_state {
	int n;
	struct pol_sf_state sf[POL_MAX_SF];
	uint64_t preferred; /* key of the preferred subflow, 0 = none yet */
	uint64_t preferred_since_ns;
	int usable; /* usable subflows at the last decision */
	uint64_t preferred_changes;
	uint64_t probes;
	bool ecf_waiting; /* ecf: the last test chose to wait for the fastest subflow (adds beta) */
};

struct pol_out {
	bool allowed[POL_MAX_SF];
	bool limited[POL_MAX_SF];
	bool probing[POL_MAX_SF];
	uint64_t est_bytes[POL_MAX_SF];
	int est_src[POL_MAX_SF];
	int preferred; /* index into the input array, -1 none */
	char reason[96];
};

/* Receive-window-limited subflows are never "limited" here: the MPTCP
 * receive window is shared by all subflows, so another path cannot help.
 * (A guard from reasoning: with a slow reader and a 32 KB receive buffer the
 * MPTCP layer already held the data back and minrtt kept 99.3 % on its path
 * with or without this test.)
 * Window- or buffer-limited otherwise: the subflow has unsent data it may not send
 * (in-flight reached cwnd), or the kernel would refuse it more data within two segments
 * (wmem_queued >= sndbuf, sk_stream_memory_free()'s test; within 3 MSS when the buffer is a fixed bound), or it holds more
 * unsent data than it sends in backlog_ns (measured here: with TCP small
 * queues and internal pacing a saturated subflow sits at in-flight < cwnd
 * with a standing backlog of unsent data, so the cwnd test alone never fires). */
bool pol_limited_now(const struct pol_params *p, const struct pol_sf_in *in);

void pol_decide(const struct pol_params *p, struct pol_conn_state *st, const struct pol_sf_in *in,
		int n, uint64_t now_ns, struct pol_out *out);

#endif
