#define _GNU_SOURCE
#include "nfq.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* A queued-packet message with a 64-byte copy range is ~200 bytes; leave
 * room for error replies that quote our (small) requests. */
#define DL_RXBUF 2048
#define DL_RXBATCH 64
#define DL_RCVBUF (64 * 1024 * 1024)

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC: of three tries, the one whose two
 * monotonic reads lie closest together (a preemption between them would
 * shift the offset by its length). */
static int64_t real_minus_mono(void)
{
	int64_t best = 0, best_span = INT64_MAX;

	for (int i = 0; i < 3; i++) {
		struct timespec a, r, b;
		int64_t ma, mb, rr;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ma = (int64_t)a.tv_sec * 1000000000LL + a.tv_nsec;
		mb = (int64_t)b.tv_sec * 1000000000LL + b.tv_nsec;
		rr = (int64_t)r.tv_sec * 1000000000LL + r.tv_nsec;
		if (mb - ma < best_span) {
			best_span = mb - ma;
			best = rr - (ma + (mb - ma) / 2);
		}
	}
	return best;
}

/* The kernel's arrival stamp of a queued packet on CLOCK_MONOTONIC, or -1.
 * NFQA_TIMESTAMP is the skb's receive time (sec, usec; CLOCK_REALTIME),
 * present when the kernel stamps received packets (net_enable_timestamp:
 * some socket asked for SO_TIMESTAMP*, as dl_nfq_open does). */
static int64_t arrival_of(struct nlattr *ts_attr, const struct dl_nfq *q)
{
	const struct nfqnl_msg_packet_timestamp *ts;
	int64_t real;

	if (!ts_attr || mnl_attr_get_payload_len(ts_attr) < sizeof(*ts))
		return -1;
	ts = mnl_attr_get_payload(ts_attr);
	real = (int64_t)be64toh(ts->sec) * 1000000000LL +
	       (int64_t)be64toh(ts->usec) * 1000LL;
	if (real <= 0)
		return -1;
	return real - q->real_minus_mono_ns;
}

static int on_packet(const struct nlmsghdr *nlh, struct dl_nfq *q,
		     int64_t now)
{
	struct nlattr *attr[NFQA_MAX + 1] = { 0 };
	struct nfqnl_msg_packet_hdr *ph;
	uint32_t len = 0;

	if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR])
		return -1;
	ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
	if (attr[NFQA_CAP_LEN])
		len = ntohl(mnl_attr_get_u32(attr[NFQA_CAP_LEN]));
	else if (attr[NFQA_PAYLOAD])
		len = mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]);
	q->cb(q->ctx, ntohl(ph->packet_id), len, now,
	      arrival_of(attr[NFQA_TIMESTAMP], q));
	return 0;
}

static void on_datagram(struct dl_nfq *q, const void *buf, size_t n,
			int64_t now)
{
	const struct nlmsghdr *nlh = buf;
	int len = (int)n;

	for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
		if (nlh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);

			if (q->ack_seq && nlh->nlmsg_seq == q->ack_seq) {
				q->ack_done = 1;
				q->ack_err = -e->error;
			} else if (e->error) {
				q->nl_errors++;
				q->last_nl_error = -e->error;
			}
			continue;
		}
		if (NFNL_SUBSYS_ID(nlh->nlmsg_type) == NFNL_SUBSYS_QUEUE &&
		    NFNL_MSG_TYPE(nlh->nlmsg_type) == NFQNL_MSG_PACKET) {
			if (on_packet(nlh, q, now) < 0)
				q->nl_errors++;
		}
	}
}

int dl_nfq_drain(struct dl_nfq *q, int max_datagrams)
{
	static char bufs[DL_RXBATCH][DL_RXBUF];
	struct mmsghdr msgs[DL_RXBATCH];
	struct iovec iov[DL_RXBATCH];
	int total = 0;

	while (total < max_datagrams) {
		int want = max_datagrams - total;
		int n, i;
		int64_t now;

		if (want > DL_RXBATCH)
			want = DL_RXBATCH;
		memset(msgs, 0, sizeof(msgs[0]) * (size_t)want);
		for (i = 0; i < want; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = DL_RXBUF;
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		n = recvmmsg(q->fd, msgs, (unsigned)want, MSG_DONTWAIT, NULL);
		q->recv_calls++;
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				break;
			if (errno == ENOBUFS) {
				/* The kernel could not deliver some messages:
				 * those packets were dropped by the kernel and
				 * show up in queue_user_dropped. */
				q->enobufs++;
				continue;
			}
			return -1;
		}
		/* One timestamp per batch: these packets were all waiting in
		 * the socket, the earliest read time is the best we know. */
		now = mono_ns();
		q->real_minus_mono_ns = real_minus_mono();
		for (i = 0; i < n; i++) {
			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
				q->truncated++;
				continue;
			}
			on_datagram(q, bufs[i], msgs[i].msg_len, now);
		}
		total += n;
		if (n < want)
			break;
	}
	return total;
}

static int send_nlh(struct dl_nfq *q, struct nlmsghdr *nlh)
{
	if (mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	return 0;
}

int dl_nfq_verdict(struct dl_nfq *q, uint32_t id, int verdict)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT, q->queue);

	nfq_nlmsg_verdict_put(nlh, (int)id, verdict);
	return send_nlh(q, nlh);
}

int dl_nfq_verdict_batch(struct dl_nfq *q, uint32_t max_id, int verdict)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh =
		nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT_BATCH, q->queue);

	nfq_nlmsg_verdict_put(nlh, (int)max_id, verdict);
	return send_nlh(q, nlh);
}

/* Send a config message with NLM_F_ACK and wait (bounded) for its ACK,
 * handing any packet that arrives meanwhile to the callback. */
static int config_ack(struct dl_nfq *q, struct nlmsghdr *nlh)
{
	int64_t deadline = mono_ns() + 2000000000LL;

	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = ++q->seq;
	q->ack_seq = nlh->nlmsg_seq;
	q->ack_done = 0;
	q->ack_err = 0;
	if (send_nlh(q, nlh) < 0)
		return -errno;
	while (!q->ack_done) {
		struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
		int64_t left = deadline - mono_ns();

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(left / 1000000 + 1)) < 0 &&
		    errno != EINTR)
			return -errno;
		if (dl_nfq_drain(q, DL_RXBATCH) < 0)
			return -errno;
	}
	q->ack_seq = 0;
	return -q->ack_err;
}

int dl_nfq_open(struct dl_nfq *q, unsigned queue, unsigned maxlen,
		unsigned copy_range, int gso, dl_pkt_cb cb, void *ctx,
		char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	int rcvbuf = DL_RCVBUF, r;

	memset(q, 0, sizeof(*q));
	q->queue = queue;
	q->cb = cb;
	q->ctx = ctx;
	q->nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!q->nl) {
		snprintf(err, errlen, "cannot open NETLINK_NETFILTER socket: %s",
			 strerror(errno));
		return -1;
	}
	q->fd = mnl_socket_get_fd(q->nl);
	if (mnl_socket_bind(q->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(err, errlen, "cannot bind netlink socket: %s",
			 strerror(errno));
		goto fail;
	}
	q->portid = mnl_socket_get_portid(q->nl);
	/* FORCE ignores rmem_max (we are root); a deep buffer absorbs bursts
	 * while we sleep in ppoll, otherwise the kernel drops packets. */
	if (setsockopt(q->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)) < 0) {
		snprintf(err, errlen,
			 "cannot set netlink SO_RCVBUFFORCE to %d bytes: %s (need CAP_NET_ADMIN)",
			 rcvbuf, strerror(errno));
		goto fail;
	}
	/* Ask the kernel to stamp received packets (net_enable_timestamp, a
	 * switch every SO_TIMESTAMP* socket turns on, the VoIP probe's
	 * receiver too): the stamp, NFQA_TIMESTAMP, is each packet's arrival,
	 * from which lateness is measured. Without it a packet left waiting in
	 * this socket while the line was stopped looks on time. */
	{
		int one = 1;

		if (setsockopt(q->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one,
			       sizeof(one)) < 0) {
			snprintf(err, errlen, "cannot set SO_TIMESTAMPNS on the netlink socket: %s",
				 strerror(errno));
			goto fail;
		}
	}
	q->real_minus_mono_ns = real_minus_mono();
	/* One message binds and configures, so no packet is ever queued with
	 * the defaults (full copy, maxlen 1024). */
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, queue);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, (int)copy_range);
	nfq_nlmsg_cfg_put_qmaxlen(nlh, maxlen);
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(gso ? NFQA_CFG_F_GSO : 0));
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_GSO));
	r = config_ack(q, nlh);
	if (r < 0) {
		snprintf(err, errlen,
			 "cannot bind NFQUEUE %u: %s%s", queue, strerror(-r),
			 r == -EBUSY ? " (another process is bound to this queue number in this network namespace)"
				     : r == -EPERM ? " (need CAP_NET_ADMIN)" : "");
		goto fail;
	}
	return 0;
fail:
	mnl_socket_close(q->nl);
	q->nl = NULL;
	return -1;
}

int dl_nfq_proc_counters(unsigned queue, int64_t *queue_dropped,
			 int64_t *user_dropped)
{
	FILE *f = fopen("/proc/net/netfilter/nfnetlink_queue", "r");
	char line[256];
	int found = -1;

	if (!f)
		return -1;
	/* Fields: queue portid total copy_mode copy_range queue_dropped
	 * user_dropped id_sequence 1 */
	while (fgets(line, sizeof(line), f)) {
		unsigned qn, portid, total, mode, range, idseq;
		long long qd, ud;

		if (sscanf(line, "%u %u %u %u %u %lld %lld %u", &qn, &portid,
			   &total, &mode, &range, &qd, &ud, &idseq) == 8 &&
		    qn == queue) {
			*queue_dropped = qd;
			*user_dropped = ud;
			found = 0;
		}
	}
	fclose(f);
	return found;
}

void dl_nfq_close(struct dl_nfq *q)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;

	if (!q->nl)
		return;
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, q->queue);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_UNBIND);
	send_nlh(q, nlh);
	mnl_socket_close(q->nl);
	q->nl = NULL;
}
