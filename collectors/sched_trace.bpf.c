// SPDX-License-Identifier: GPL-2.0-only
/*
 * mpvlab scheduler trace: counts MPTCP scheduling decisions, the bytes each
 * decision handed to a subflow, and path switches, exactly, from the kernel.
 *
 * How (see README.md for the definitions):
 *  - tp_btf/mptcp_subflow_get_send fires at the start of the default
 *    scheduler, once for every subflow on msk->conn_list, in list order and
 *    before the scheduler picks. The event for the list's first subflow
 *    therefore marks the start of a new decision.
 *  - The scheduler's choice is not an argument, so we observe its effect:
 *    mptcp_sendmsg_frag() advances subflow->rel_write_seq by every byte it
 *    queues on that subflow. A subflow whose rel_write_seq moved since the
 *    previous decision was handed those bytes by the previous decision.
 *  - Bytes handed after the connection's last decision are picked up when
 *    the subflow changes TCP state (FIN/close), by tp_btf/inet_sock_set_state.
 *  - tp_btf/tcp_probe (every received segment of a TCP socket) snapshots a
 *    subflow's srtt/cwnd/in-flight/rates/BBR state at most once per sample
 *    period; iter/tcp does one last pass at stop.
 * fentry/kprobes are refused by lockdown on this kernel, hence tp_btf + iter.
 * Every object is named with the mst_ prefix so it can be told apart.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "sched_trace.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

char LICENSE[] SEC("license") = "GPL";

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* netns inode (struct net.ns.inum) of the namespace to trace; set before load */
const volatile __u32 target_netns_inum = 0;

/* Anything we failed to record. Must stay 0; reported in the summary. */
__u64 lost_ringbuf = 0;
__u64 lost_map_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mst_key);
	__type(value, struct mst_sf);
} mst_sf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mst_key);
	__type(value, struct mst_conn);
} mst_conn SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} mst_events SEC(".maps");

static __always_inline bool in_target_ns(const struct sock *sk)
{
	struct net *net = BPF_CORE_READ(sk, __sk_common.skc_net.net);

	return net && BPF_CORE_READ(net, ns.inum) == target_netns_inum;
}

static __always_inline void fill_tuple(struct mst_tuple *t, const struct sock *ssk)
{
	t->family = (__u8)BPF_CORE_READ(ssk, __sk_common.skc_family);
	t->lport = BPF_CORE_READ(ssk, __sk_common.skc_num);
	t->rport = bpf_ntohs(BPF_CORE_READ(ssk, __sk_common.skc_dport));
	if (t->family == AF_INET) {
		__u32 a;

		a = BPF_CORE_READ(ssk, __sk_common.skc_rcv_saddr);
		__builtin_memcpy(t->laddr, &a, 4);
		a = BPF_CORE_READ(ssk, __sk_common.skc_daddr);
		__builtin_memcpy(t->raddr, &a, 4);
	} else {
		BPF_CORE_READ_INTO(&t->laddr, ssk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&t->raddr, ssk, __sk_common.skc_v6_daddr);
	}
}

static __always_inline __u32 sf_backup(const struct mptcp_subflow_context *sf)
{
	/* the scheduler treats either flag as backup (net/mptcp/protocol.c) */
	return BPF_CORE_READ_BITFIELD_PROBED(sf, backup) |
	       BPF_CORE_READ_BITFIELD_PROBED(sf, request_bkup);
}

static __always_inline struct mst_conn *get_conn(const struct mst_key *ck, __u64 now)
{
	struct mst_conn *c = bpf_map_lookup_elem(&mst_conn, ck);

	if (c)
		return c;
	struct mst_conn nc = {};

	nc.token = ck->token;
	nc.first_ns = now;
	bpf_map_update_elem(&mst_conn, ck, &nc, BPF_NOEXIST);
	c = bpf_map_lookup_elem(&mst_conn, ck);
	if (!c)
		__sync_fetch_and_add(&lost_map_full, 1);
	return c;
}

SEC("tp_btf/mptcp_subflow_get_send")
int BPF_PROG(mst_sched, struct mptcp_subflow_context *subflow)
{
	struct sock *ssk = subflow->tcp_sock;
	struct sock *sk = subflow->conn;
	struct mptcp_sock *msk;
	struct mst_key ck = {}, sk_key = {};
	struct mst_conn *c;
	struct mst_sf *s;
	__u64 now, didx;
	__u32 seq, delta;
	bool first;

	if (!ssk || !sk || !in_target_ns(ssk))
		return 0;
	msk = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct mptcp_sock));
	now = bpf_ktime_get_ns();
	ck.ptr = (__u64)sk;
	ck.token = msk->token;
	/* list_head node is the first member of the subflow context */
	first = (__u64)msk->conn_list.next == (__u64)subflow;

	c = get_conn(&ck, now);
	if (!c)
		return 0;
	if (first) {
		c->decisions++;
		c->prev_decision_ns = c->cur_decision_ns;
		c->cur_decision_ns = now;
		c->msk_bytes_sent = msk->bytes_sent;
		c->msk_bytes_retrans = msk->bytes_retrans;
	}
	c->last_ns = now;

	sk_key.ptr = (__u64)subflow;
	sk_key.token = ck.token;
	seq = subflow->rel_write_seq;
	s = bpf_map_lookup_elem(&mst_sf, &sk_key);
	if (!s) {
		/* first sight: the baseline. For connections opened while we
		 * trace, no data can have been handed before the first decision. */
		struct mst_sf ns = {};

		ns.conn = ck;
		fill_tuple(&ns.tuple, ssk);
		ns.subflow_id = subflow->subflow_id;
		ns.base_seq = seq;
		ns.last_seq = seq;
		ns.backup = sf_backup(subflow);
		ns.decisions = c->decisions ? 1 : 0;
		ns.first_ns = now;
		ns.last_ns = now;
		if (bpf_map_update_elem(&mst_sf, &sk_key, &ns, BPF_NOEXIST))
			__sync_fetch_and_add(&lost_map_full, 1);
		return 0;
	}
	if (c->decisions)
		s->decisions++;
	s->last_ns = now;
	s->backup = sf_backup(subflow);

	delta = seq - s->last_seq;
	if (delta == 0 || (__s32)delta < 0)
		return 0;
	s->last_seq = seq;
	s->handed += delta;

	/* The bytes were queued after the previous decision of this
	 * connection started (this event belongs to decision c->decisions). */
	if (c->decisions < 2)
		return 0; /* handed before we saw any decision: bytes only */
	didx = c->decisions - 1;
	s->data_decisions++;
	s->last_data_ns = c->prev_decision_ns;
	if (c->last_data_decision != didx) {
		c->data_decisions++;
		c->last_data_decision = didx;
	} else {
		c->multi_sf_decisions++;
	}
	if (c->last_data_sf.ptr && c->last_data_sf.ptr != sk_key.ptr) {
		struct mst_event *e;
		struct mst_sf *from;

		c->switches++;
		e = bpf_ringbuf_reserve(&mst_events, sizeof(*e), 0);
		if (!e) {
			__sync_fetch_and_add(&lost_ringbuf, 1);
		} else {
			e->type = MST_EV_SWITCH;
			e->token = ck.token;
			e->t_ns = c->prev_decision_ns;
			e->decision = didx;
			e->conn = ck;
			e->from_sf = c->last_data_sf;
			e->to_sf = sk_key;
			from = bpf_map_lookup_elem(&mst_sf, &c->last_data_sf);
			e->from_id = from ? from->subflow_id : 0;
			e->to_id = s->subflow_id;
			bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
		}
	}
	c->last_data_sf = sk_key;
	return 0;
}

/* Catch the bytes handed after a connection's last decision: no further
 * decision will observe them, but the subflow changes state when it closes. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(mst_sf_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct mptcp_subflow_context *sf;
	struct mptcp_sock *msk;
	struct tcp_sock *tp;
	struct mst_key key = {};
	struct mst_sf *s;
	struct mst_conn *c;
	struct sock *conn;
	void *ulp;

	if (sk->sk_protocol != IPPROTO_TCP || !in_target_ns(sk))
		return 0;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	if (!tp->is_mptcp)
		return 0;
	ulp = tp->inet_conn.icsk_ulp_data;
	if (!ulp)
		return 0;
	sf = bpf_rdonly_cast(ulp, bpf_core_type_id_kernel(struct mptcp_subflow_context));
	conn = sf->conn;
	if (!conn)
		return 0;
	msk = bpf_rdonly_cast(conn, bpf_core_type_id_kernel(struct mptcp_sock));
	key.ptr = (__u64)ulp;
	key.token = msk->token;
	s = bpf_map_lookup_elem(&mst_sf, &key);
	if (!s)
		return 0;
	s->final_seq = sf->rel_write_seq;
	s->final_ns = bpf_ktime_get_ns();
	s->final_valid = 1;
	c = bpf_map_lookup_elem(&mst_conn, &s->conn);
	if (c) {
		c->final_bytes_sent = msk->bytes_sent;
		c->final_bytes_retrans = msk->bytes_retrans;
	}
	return 0;
}

/* Snapshot of one subflow. Works on a trusted tcp_sock (iter) or on an
 * rdonly-cast one (tcp_probe); inlined, so each caller is verified on its own. */
static __always_inline void fill_sample(struct mst_sample *r, struct tcp_sock *tp,
					struct mptcp_subflow_context *sf,
					const struct mst_sf *s, const struct mst_key *key)
{
	struct inet_connection_sock *icsk = &tp->inet_conn;
	struct sock *sk = (struct sock *)tp;
	const struct tcp_congestion_ops *ops;
	__u32 seq;

	r->type = MST_EV_SAMPLE;
	r->t_ns = bpf_ktime_get_ns();
	r->sf = *key;
	r->tuple = s->tuple;
	r->subflow_id = s->subflow_id;
	r->state = sk->__sk_common.skc_state;
	r->srtt_us = tp->srtt_us >> 3;
	r->snd_cwnd = tp->snd_cwnd;
	r->packets_out = tp->packets_out;
	r->sacked_out = tp->sacked_out;
	r->lost_out = tp->lost_out;
	r->retrans_out = tp->retrans_out;
	r->rate_delivered = tp->rate_delivered;
	r->rate_interval_us = tp->rate_interval_us;
	r->rate_app_limited = BPF_CORE_READ_BITFIELD_PROBED(tp, rate_app_limited);
	r->mss_cache = tp->mss_cache;
	r->pacing_rate = sk->sk_pacing_rate;
	r->wmem_queued = sk->sk_wmem_queued;
	r->backup = sf_backup(sf);
	/*
	 * cumulative = bytes counted at decisions + anything queued since. The
	 * decision program may be updating handed/last_seq on another CPU, so
	 * read only handed (one 8-byte load) and the constant base: the low 32
	 * bits of handed are always (u32)(last_seq - base_seq), and
	 * rel_write_seq only grows, so the current offset from base either
	 * continues them or has wrapped once more.
	 */
	{
		__u64 h = *(volatile __u64 *)&s->handed;
		__u32 cur;

		seq = sf->rel_write_seq;
		cur = seq - s->base_seq;
		r->bytes_handed_cum = (h & ~0xffffffffULL) + cur;
		if (cur < (__u32)h)
			r->bytes_handed_cum += 1ULL << 32;
	}

	ops = icsk->icsk_ca_ops;
	if (!ops)
		return;
	bpf_probe_read_kernel_str(r->ca_name, sizeof(r->ca_name), ops->name);
	/* only the kernel's own BBR (tcp_bbr.c) keeps struct bbr in ca_priv */
	if (r->ca_name[0] == 'b' && r->ca_name[1] == 'b' && r->ca_name[2] == 'r' &&
	    r->ca_name[3] == 0) {
		struct bbr *b = bpf_rdonly_cast(icsk->icsk_ca_priv,
						bpf_core_type_id_kernel(struct bbr));

		r->is_bbr = 1;
		r->bbr_bw_raw = b->bw.s[0].v;
		r->bbr_min_rtt_us = b->min_rtt_us;
		r->bbr_mode = BPF_CORE_READ_BITFIELD_PROBED(b, mode);
		r->bbr_pacing_gain = BPF_CORE_READ_BITFIELD_PROBED(b, pacing_gain);
		r->bbr_cwnd_gain = BPF_CORE_READ_BITFIELD_PROBED(b, cwnd_gain);
	}
}

/* Map a TCP socket to its traced subflow record, or NULL. */
static __always_inline struct mst_sf *lookup_subflow(struct tcp_sock *tp, struct mst_key *key,
						     struct mptcp_subflow_context **sfp)
{
	struct mptcp_subflow_context *sf;
	struct mptcp_sock *msk;
	struct sock *conn;
	void *ulp;

	if (!tp->is_mptcp)
		return NULL;
	ulp = tp->inet_conn.icsk_ulp_data;
	if (!ulp)
		return NULL;
	sf = bpf_rdonly_cast(ulp, bpf_core_type_id_kernel(struct mptcp_subflow_context));
	conn = sf->conn;
	if (!conn)
		return NULL;
	msk = bpf_rdonly_cast(conn, bpf_core_type_id_kernel(struct mptcp_sock));
	key->ptr = (__u64)ulp;
	key->token = msk->token;
	*sfp = sf;
	return bpf_map_lookup_elem(&mst_sf, key);
}

/* Periodic samples: tcp_probe fires for every segment a TCP socket receives
 * in ESTABLISHED (tcp_rcv_established), i.e. on the sender's ACKs. We keep at
 * most one sample per subflow per period. (iter/tcp at 100 Hz would walk the
 * host-wide established hash, 262144 buckets here: ~2 ms per pass, ~20 % CPU.) */
const volatile __u64 sample_period_ns = 0;

SEC("tp_btf/tcp_probe")
int BPF_PROG(mst_probe, struct sock *sk, const struct sk_buff *skb)
{
	struct mptcp_subflow_context *sf = NULL;
	struct mst_key key = {};
	struct mst_sample *r;
	struct tcp_sock *tp;
	struct mst_sf *s;
	__u64 now;

	if (!sample_period_ns || !in_target_ns(sk))
		return 0;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	s = lookup_subflow(tp, &key, &sf);
	if (!s || !sf)
		return 0;
	now = bpf_ktime_get_ns();
	if (now - s->last_sample_ns < sample_period_ns)
		return 0;
	s->last_sample_ns = now;
	r = bpf_ringbuf_reserve(&mst_events, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&lost_ringbuf, 1);
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_sample(r, tp, sf, s, &key);
	r->source = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Final pass at stop over the TCP sockets of the namespace the iterator was
 * created in (userspace does setns() first): picks up the bytes handed since
 * the last decision of connections that are still open. */
SEC("iter/tcp")
int mst_final(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct mptcp_subflow_context *sf = NULL;
	struct mst_sample r = {};
	struct mst_key key = {};
	struct tcp_sock *tp;
	struct mst_sf *s;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	s = lookup_subflow(tp, &key, &sf);
	if (!s || !sf)
		return 0;
	fill_sample(&r, tp, sf, s, &key);
	r.source = 1;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
