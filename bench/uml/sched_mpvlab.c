// SPDX-License-Identifier: GPL-2.0-only
/* mpvlab: per-packet MPTCP schedulers for the User-Mode Linux probe (issue 50).
 *
 * Built into net/mptcp (bench/uml/build.sh copies this file there; mpvlab-sched.patch adds it
 * to the Makefile) and registered at boot with mptcp_register_scheduler(), so
 * `sysctl net.mptcp.scheduler=mpv_minrtt` (or mpv_bdp) selects one per network namespace.
 *
 * Both are called by the kernel for every chunk of new data; with msk->mpv_per_skb (set in init)
 * the patched __subflow_push_pending() hands over one skb per decision, so with GSO/TSO off on the
 * interfaces a decision is one MSS-sized packet, as in the out-of-tree multipath-tcp.org kernel.
 *
 * Eligible subflow: active (join completed, TCP can send), send buffer not full
 * (sk_stream_memory_free), and congestion-window space: in-flight plus queued-but-unsent bytes
 * below cwnd x mss. Backup subflows only when no non-backup subflow is active.
 *   mpv_minrtt: the eligible subflow with the lowest smoothed RTT (srtt).
 *   mpv_bdp:    the eligible subflow with the largest bandwidth x min-RTT product; bandwidth is the
 *               max of the TCP delivery-rate samples over the last 10 s, min RTT TCP's windowed
 *               minimum (tcp_min_rtt); before a subflow's first rate sample, cwnd x mss.
 * No eligible subflow: no decision (-EINVAL); the next DATA_ACK pushes again.
 *
 * Retransmissions (data->reinject) use the kernel's own choice, mptcp_subflow_get_retrans().
 *
 * Every connection (any scheduler) logs one summary line when it is released (patched sched.c):
 * scheduler calls, data-carrying decisions, path switches, bytes per subflow id.
 *
 * mptcp.mpv_trace=1 (boot parameter or /sys/module/mptcp/parameters/mpv_trace) logs every
 * decision with the inputs it used, at KERN_INFO, so a checker can recompute it.
 */
#define pr_fmt(fmt) "mpvlab: " fmt

#include <linux/kernel.h>
#include <linux/init.h>
#include <linux/moduleparam.h>
#include <linux/time64.h>
#include <net/tcp.h>
#include "protocol.h"

static int mpv_trace;
module_param(mpv_trace, int, 0644);
MODULE_PARM_DESC(mpv_trace, "log every mpvlab scheduler decision (KERN_INFO)");

#define MPV_BW_WINDOW_US (10 * USEC_PER_SEC)

struct mpv_in {
	struct mptcp_subflow_context *subflow;
	u32 srtt_us;
	u32 min_rtt_us;
	u32 cwnd;
	u32 mss;
	u32 inflight;	/* packets */
	u32 unsent;	/* bytes queued on the subflow, not yet sent */
	u64 bdp;	/* bytes */
	bool eligible;
	bool backup;
};

/* Delivery-rate sample of the subflow's last ACK, in bytes/s; 0 when none. */
static u64 mpv_rate_sample(const struct tcp_sock *tp, u32 mss)
{
	if (!tp->rate_interval_us || !tp->rate_delivered)
		return 0;
	return div_u64((u64)tp->rate_delivered * mss * USEC_PER_SEC, tp->rate_interval_us);
}

static void mpv_read(struct mptcp_subflow_context *subflow, struct mpv_in *in)
{
	struct sock *ssk = mptcp_subflow_tcp_sock(subflow);
	const struct tcp_sock *tp = tcp_sk(ssk);
	u64 room, used, sample;
	u32 now = tcp_clock_us() & 0xffffffff;

	in->subflow = subflow;
	in->srtt_us = READ_ONCE(tp->srtt_us) >> 3;
	in->min_rtt_us = tcp_min_rtt(tp);
	in->cwnd = tcp_snd_cwnd(tp);
	in->mss = READ_ONCE(tp->mss_cache);
	in->inflight = tcp_packets_in_flight(tp);
	in->unsent = READ_ONCE(tp->write_seq) - READ_ONCE(tp->snd_nxt);
	in->backup = subflow->backup || subflow->request_bkup;

	/* windowed max of the delivery rate (the bdp scheduler's bandwidth) */
	sample = mpv_rate_sample(tp, in->mss);
	if (sample >= subflow->mpv_bw ||
	    (u32)(now - subflow->mpv_bw_stamp) > MPV_BW_WINDOW_US) {
		if (sample) {
			subflow->mpv_bw = sample;
			subflow->mpv_bw_stamp = now;
		}
	}
	if (subflow->mpv_bw && in->min_rtt_us != ~0U)
		in->bdp = div_u64(subflow->mpv_bw * in->min_rtt_us, USEC_PER_SEC);
	else
		in->bdp = (u64)in->cwnd * in->mss;

	room = (u64)in->cwnd * in->mss;
	used = (u64)in->inflight * in->mss + in->unsent;
	in->eligible = mptcp_subflow_active(subflow) &&
		       sk_stream_memory_free(ssk) && used < room;
}

/* true when a is a better choice than b for this scheduler */
typedef bool (*mpv_better_fn)(const struct mpv_in *a, const struct mpv_in *b);

static bool mpv_minrtt_better(const struct mpv_in *a, const struct mpv_in *b)
{
	return a->srtt_us < b->srtt_us;
}

static bool mpv_bdp_better(const struct mpv_in *a, const struct mpv_in *b)
{
	return a->bdp > b->bdp;
}

static int mpv_get_subflow(struct mptcp_sock *msk, struct mptcp_sched_data *data,
			   mpv_better_fn better, const char *name)
{
	struct mpv_in in[MPTCP_SUBFLOWS_MAX];
	struct mptcp_subflow_context *subflow;
	int n = 0, i, best = -1, nr_active = 0;
	struct sock *ssk;

	if (data->reinject) {
		ssk = mptcp_subflow_get_retrans(msk);
		if (!ssk)
			return -EINVAL;
		mptcp_subflow_set_scheduled(mptcp_subflow_ctx(ssk), true);
		return 0;
	}

	mptcp_for_each_subflow(msk, subflow) {
		if (n == MPTCP_SUBFLOWS_MAX)
			break;
		mpv_read(subflow, &in[n]);
		if (mptcp_subflow_active(subflow) && !in[n].backup)
			nr_active++;
		n++;
	}
	for (i = 0; i < n; i++) {
		if (!in[i].eligible || (nr_active && in[i].backup))
			continue;
		if (best < 0 || better(&in[i], &in[best]))
			best = i;
	}
	msk->mpv_calls++;
	if (mpv_trace) {
		/* one line per decision: the inputs of every subflow and the choice */
		char buf[384];
		int off = 0;

		for (i = 0; i < n && off < sizeof(buf); i++)
			off += scnprintf(buf + off, sizeof(buf) - off,
					 " sf%u=%u,%u,%u,%u,%u,%u,%llu,%d,%d",
					 in[i].subflow->subflow_id, in[i].srtt_us,
					 in[i].min_rtt_us, in[i].cwnd, in[i].mss,
					 in[i].inflight, in[i].unsent, in[i].bdp,
					 in[i].eligible, in[i].backup);
		pr_info("dec %s t=%llu tok=%08x choice=%d%s\n", name,
			tcp_clock_us(), msk->token,
			best < 0 ? -1 : (int)in[best].subflow->subflow_id, buf);
	}
	if (best < 0)
		return -EINVAL;
	mptcp_subflow_set_scheduled(in[best].subflow, true);
	return 0;
}

static int mpv_minrtt_get_subflow(struct mptcp_sock *msk, struct mptcp_sched_data *data)
{
	return mpv_get_subflow(msk, data, mpv_minrtt_better, "mpv_minrtt");
}

static int mpv_bdp_get_subflow(struct mptcp_sock *msk, struct mptcp_sched_data *data)
{
	return mpv_get_subflow(msk, data, mpv_bdp_better, "mpv_bdp");
}

static void mpv_init(struct mptcp_sock *msk)
{
	msk->mpv_per_skb = 1;
}

static struct mptcp_sched_ops mpv_minrtt = {
	.get_subflow	= mpv_minrtt_get_subflow,
	.init		= mpv_init,
	.name		= "mpv_minrtt",
	.owner		= THIS_MODULE,
};

static struct mptcp_sched_ops mpv_bdp = {
	.get_subflow	= mpv_bdp_get_subflow,
	.init		= mpv_init,
	.name		= "mpv_bdp",
	.owner		= THIS_MODULE,
};

static int __init mpv_sched_register(void)
{
	int err = mptcp_register_scheduler(&mpv_minrtt);

	if (!err)
		err = mptcp_register_scheduler(&mpv_bdp);
	pr_info("schedulers mpv_minrtt, mpv_bdp registered: %d\n", err);
	return err;
}
late_initcall(mpv_sched_register);
