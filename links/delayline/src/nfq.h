/* Thin NFQUEUE layer over libmnl + libnetfilter_queue's nlmsg helpers. */
#ifndef MPVLAB_DL_NFQ_H
#define MPVLAB_DL_NFQ_H

#include <stddef.h>
#include <stdint.h>

struct mnl_socket;

/* Called for every queued packet: its id, full length, the time it was read
 * (CLOCK_MONOTONIC ns) and the kernel's arrival stamp of the packet
 * (NFQA_TIMESTAMP, the skb's receive time, moved to CLOCK_MONOTONIC; -1 when
 * the message carried none). */
typedef void (*dl_pkt_cb)(void *ctx, uint32_t id, uint32_t len, int64_t now,
			  int64_t arrival);

struct dl_nfq {
	struct mnl_socket *nl;
	int fd;
	unsigned portid;
	unsigned queue;
	uint32_t seq;
	dl_pkt_cb cb;
	void *ctx;
	/* Counters the caller folds into its stats. */
	uint64_t enobufs;
	uint64_t recv_calls; /* recvmmsg system calls made */
	uint64_t truncated;
	uint64_t nl_errors;  /* NLMSG_ERROR replies to verdicts */
	/* CLOCK_REALTIME - CLOCK_MONOTONIC (ns), read beside every batch: the
	 * kernel stamps packets on the real-time clock. */
	int64_t real_minus_mono_ns;
	int last_nl_error;
	/* Set while waiting for a config ACK. */
	uint32_t ack_seq;
	int ack_done;
	int ack_err;
};

/* Open, set a 64 MB receive buffer, bind QUEUE with copy mode "packet"
 * limited to copy_range bytes, queue maxlen, and NFQA_CFG_F_GSO if gso (else
 * the kernel segments GSO skbs and queues every MTU-sized segment). */
int dl_nfq_open(struct dl_nfq *q, unsigned queue, unsigned maxlen,
		unsigned copy_range, int gso, dl_pkt_cb cb, void *ctx,
		char *err, size_t errlen);
/* Read everything available without blocking (up to a bounded number of
 * datagrams so releases are not starved). Returns datagrams read, or -1 on
 * a fatal socket error. */
int dl_nfq_drain(struct dl_nfq *q, int max_datagrams);
/* Verdict for one id. */
int dl_nfq_verdict(struct dl_nfq *q, uint32_t id, int verdict);
/* Verdict for every queued id <= max_id (kernel VERDICT_BATCH). */
int dl_nfq_verdict_batch(struct dl_nfq *q, uint32_t max_id, int verdict);
/* Kernel counters of this queue from /proc/net/netfilter/nfnetlink_queue. */
int dl_nfq_proc_counters(unsigned queue, int64_t *queue_dropped,
			 int64_t *user_dropped);
void dl_nfq_close(struct dl_nfq *q);

#endif
