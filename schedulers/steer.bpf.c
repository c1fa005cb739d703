// SPDX-License-Identifier: GPL-2.0-only
/*
 * mpvlab steering controller, kernel side (observation only; the kernel
 * offers no BPF MPTCP scheduler here, so decisions are applied from
 * userspace through per-subflow backup flags).
 *
 *  - tp_btf/mptcp_subflow_get_send fires at the start of the default
 *    scheduler, once per subflow on msk->conn_list. At each firing we store
 *    the subflow's state for the controller, and we detect what the previous
 *    decision handed to the subflow (advance of rel_write_seq, as in
 *    collectors/sched_trace.bpf.c). Those bytes are checked against the
 *    policy that was in force when that previous decision ran
 *    (conformance), and the first data handed after the controller chose
 *    the subflow closes the "decision -> assignment" steering interval.
 *  - tp_btf/net_dev_xmit closes "assignment -> wire": the first segment of
 *    the subflow at or beyond the write sequence the new data started at.
 *  - tp_btf/inet_sock_set_state marks subflows that left ESTABLISHED.
 * Only sockets of one network namespace (the sender's) are considered.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "steer.h"

#define AF_INET 2
#define IPPROTO_TCP 6
#define TCP_ESTABLISHED 1

char LICENSE[] SEC("license") = "GPL";

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

const volatile __u32 target_netns_inum = 0;
__u64 lost_ringbuf = 0;
__u64 lost_map_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mps_key);
	__type(value, struct mps_sf);
} mps_sf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mps_key);
	__type(value, struct mps_ctrl);
} mps_ctrl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* msk address */
	__type(value, struct mps_conn);
} mps_conn SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} mps_events SEC(".maps");

static __always_inline bool in_target_ns(const struct sock *sk)
{
	struct net *net = BPF_CORE_READ(sk, __sk_common.skc_net.net);

	return net && BPF_CORE_READ(net, ns.inum) == target_netns_inum;
}

static __always_inline void emit(__u32 type, __u32 epoch, const struct mps_key *k, __u64 decided,
				 __u64 t)
{
	struct mps_event *e = bpf_ringbuf_reserve(&mps_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_ringbuf, 1);
		return;
	}
	e->type = type;
	e->epoch = epoch;
	e->key = *k;
	e->decided_ns = decided;
	e->t_ns = t;
	bpf_ringbuf_submit(e, 0); /* wake the controller: steering events are rare */
}

static __always_inline void snapshot(struct mps_sf *s, struct mptcp_subflow_context *subflow,
				     struct sock *ssk, struct mptcp_sock *msk)
{
	struct tcp_sock *tp = bpf_rdonly_cast(ssk, bpf_core_type_id_kernel(struct tcp_sock));
	struct inet_connection_sock *icsk = &tp->inet_conn;
	const struct tcp_congestion_ops *ops;
	char ca[5] = {};

	s->tcp_state = ssk->__sk_common.skc_state;
	s->srtt_us = tp->srtt_us >> 3;
	s->rtt_dev_us = tp->mdev_us >> 2; /* mdev_us holds 4 x the mean deviation */
	s->msk_unsent = (__u32)(msk->write_seq - msk->snd_nxt);
	s->min_rtt_us = tp->rtt_min.s[0].v;
	s->cwnd = tp->snd_cwnd;
	s->in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	s->unsent = tp->write_seq - tp->snd_nxt;
	s->snd_wnd = tp->snd_wnd;
	s->unacked = tp->snd_nxt - tp->snd_una;
	s->wmem_queued = ssk->sk_wmem_queued;
	s->sndbuf = ssk->sk_sndbuf;
	s->mss = tp->mss_cache;
	s->rate_delivered = tp->rate_delivered;
	s->rate_interval_us = tp->rate_interval_us;
	s->rate_app_limited = BPF_CORE_READ_BITFIELD_PROBED(tp, rate_app_limited);
	s->pacing_rate = ssk->sk_pacing_rate;
	s->backup = BPF_CORE_READ_BITFIELD_PROBED(subflow, backup) |
		    BPF_CORE_READ_BITFIELD_PROBED(subflow, request_bkup);
	s->write_seq_at_eval = tp->write_seq;
	ops = icsk->icsk_ca_ops;
	if (!ops)
		return;
	bpf_probe_read_kernel_str(ca, sizeof(ca), ops->name);
	/* the kernel's bbr and the project's BBR-S ("bbrs_<id>", which runs the
	 * kernel's bbr_main on the same struct bbr) keep struct bbr in ca_priv */
	if (ca[0] == 'b' && ca[1] == 'b' && ca[2] == 'r' && (ca[3] == 0 || (ca[3] == 's' && ca[4] == '_'))) {
		struct bbr *b = bpf_rdonly_cast(icsk->icsk_ca_priv, bpf_core_type_id_kernel(struct bbr));

		s->is_bbr = 1;
		s->bbr_bw_raw = b->bw.s[0].v;
		s->bbr_min_rtt_us = b->min_rtt_us;
	}
}

SEC("tp_btf/mptcp_subflow_get_send")
int BPF_PROG(mps_sched, struct mptcp_subflow_context *subflow)
{
	struct sock *ssk = subflow->tcp_sock;
	struct sock *sk = subflow->conn;
	struct mptcp_sock *msk;
	struct mps_key key = {};
	struct mps_ctrl *ctrl;
	struct mps_conn *c;
	struct mps_sf *s;
	__u32 seq, delta;
	__u64 now;

	if (!ssk || !sk || !in_target_ns(ssk))
		return 0;
	msk = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct mptcp_sock));
	now = bpf_ktime_get_ns();
	key.ptr = (__u64)subflow;
	key.token = msk->token;
	seq = subflow->rel_write_seq;
	s = bpf_map_lookup_elem(&mps_sf, &key);
	if (!s) {
		struct mps_sf ns = {};

		ns.msk = (__u64)sk;
		ns.token = key.token;
		ns.subflow_id = subflow->subflow_id;
		ns.laddr = BPF_CORE_READ(ssk, __sk_common.skc_rcv_saddr);
		ns.raddr = BPF_CORE_READ(ssk, __sk_common.skc_daddr);
		ns.lport = BPF_CORE_READ(ssk, __sk_common.skc_num);
		ns.rport = bpf_ntohs(BPF_CORE_READ(ssk, __sk_common.skc_dport));
		ns.last_seq = seq;
		ns.allowed_at_eval = 2;
		if (bpf_map_update_elem(&mps_sf, &key, &ns, BPF_NOEXIST))
			__sync_fetch_and_add(&lost_map_full, 1);
		s = bpf_map_lookup_elem(&mps_sf, &key);
		if (!s)
			return 0;
		snapshot(s, subflow, ssk, msk);
		s->eval_ns = now;
		return 0;
	}

	/* Bytes queued on the subflow since its previous evaluation were handed
	 * by the decision that evaluated it then (the default scheduler feeds
	 * the subflow it returned; nothing else queues data on it). */
	delta = seq - s->last_seq;
	if (delta && (__s32)delta > 0) {
		s->last_seq = seq;
		s->bytes_handed += delta;
		s->last_data_ns = s->eval_ns;
		if (s->allowed_at_eval == 1) {
			s->bytes_conf += delta;
			s->data_dec_conf++;
		} else if (s->allowed_at_eval == 0) {
			s->bytes_nonconf += delta;
			s->data_dec_nonconf++;
		} else {
			s->bytes_unmanaged += delta;
			s->data_dec_unmanaged++;
		}
		c = bpf_map_lookup_elem(&mps_conn, &s->msk);
		if (!c) {
			struct mps_conn nc = {};

			bpf_map_update_elem(&mps_conn, &s->msk, &nc, BPF_NOEXIST);
			c = bpf_map_lookup_elem(&mps_conn, &s->msk);
		}
		if (c) {
			c->data_decisions++;
			if (c->last_data_sf && c->last_data_sf != key.ptr)
				c->switches++;
			c->last_data_sf = key.ptr;
		}
		/* first data after the controller chose this subflow */
		ctrl = bpf_map_lookup_elem(&mps_ctrl, &key);
		if (ctrl && s->epoch_at_eval && s->assign_epoch_done != s->epoch_at_eval &&
		    s->allowed_at_eval == 1 && s->eval_ns >= ctrl->decided_ns) {
			s->assign_epoch_done = s->epoch_at_eval;
			s->wire_epoch_pending = s->epoch_at_eval;
			s->wire_target_seq = s->write_seq_at_eval;
			emit(MPS_EV_ASSIGN, s->epoch_at_eval, &key, ctrl->decided_ns, s->eval_ns);
		}
	}
	s->decisions++;
	s->eval_ns = now;
	ctrl = bpf_map_lookup_elem(&mps_ctrl, &key);
	if (ctrl) {
		s->allowed_at_eval = ctrl->allowed ? 1 : 0;
		s->epoch_at_eval = ctrl->epoch;
	}
	snapshot(s, subflow, ssk, msk);
	return 0;
}

static __always_inline struct mps_sf *sf_of_sock(const struct sock *sk, struct mps_key *key)
{
	struct mptcp_subflow_context *sf;
	struct mptcp_sock *msk;
	struct tcp_sock *tp;
	struct sock *conn;
	void *ulp;

	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
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
	return bpf_map_lookup_elem(&mps_sf, key);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(mps_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct mps_key key = {};
	struct mps_sf *s;

	if (sk->sk_protocol != IPPROTO_TCP || !in_target_ns(sk))
		return 0;
	s = sf_of_sock(sk, &key);
	if (s) {
		s->tcp_state = newstate;
		if (newstate != TCP_ESTABLISHED)
			s->closed = 1;
	}
	return 0;
}

/* The first segment of a newly chosen subflow that carries the new data
 * leaves the sender's interface: end of the steering interval. */
SEC("tp_btf/net_dev_xmit")
int BPF_PROG(mps_xmit, struct sk_buff *skb, int rc, struct net_device *dev, unsigned int len)
{
	struct mps_key key = {};
	struct mps_sf *s;
	struct sock *sk;
	unsigned char *head;
	__u16 th_off, mac_off;
	__u32 seq_be, seq;
	__u8 doff;
	__s32 payload;

	if (rc != 0)
		return 0;
	sk = skb->sk;
	if (!sk)
		return 0;
	if (BPF_CORE_READ(dev, nd_net.net, ns.inum) != target_netns_inum)
		return 0;
	if (BPF_CORE_READ(sk, __sk_common.skc_family) != AF_INET ||
	    BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	s = sf_of_sock(sk, &key);
	if (!s)
		return 0;
	head = BPF_CORE_READ(skb, head);
	th_off = BPF_CORE_READ(skb, transport_header);
	mac_off = BPF_CORE_READ(skb, mac_header);
	if (bpf_probe_read_kernel(&seq_be, 4, head + th_off + 4) ||
	    bpf_probe_read_kernel(&doff, 1, head + th_off + 12))
		return 0;
	payload = (__s32)len - (__s32)(th_off - mac_off) - (__s32)((doff >> 4) * 4);
	if (payload <= 0)
		return 0;
	{
		struct mps_ctrl *ctrl = bpf_map_lookup_elem(&mps_ctrl, &key);

		if (!ctrl)
			__sync_fetch_and_add(&s->wire_unmanaged, payload);
		else if (ctrl->allowed)
			__sync_fetch_and_add(&s->wire_allowed, payload);
		else
			__sync_fetch_and_add(&s->wire_excluded, payload);
	}
	if (!s->wire_epoch_pending)
		return 0;
	seq = bpf_ntohl(seq_be);
	if ((__s32)(seq + (__u32)payload - s->wire_target_seq) <= 0)
		return 0; /* older data, queued before the choice */
	emit(MPS_EV_WIRE, s->wire_epoch_pending, &key, 0, bpf_ktime_get_ns());
	s->wire_epoch_pending = 0;
	return 0;
}
