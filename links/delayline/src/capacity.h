/* Link capacity in front of the delay: a drop-tail queue served either by
 * Mahimahi-style delivery opportunities (a packet-delivery trace) or by a
 * piecewise-constant rate (a fluid serialiser), with outage intervals in
 * which the link carries nothing.
 *
 * Every function takes times relative to the run's t0 (ns). The line is FIFO
 * and a packet's departure from the link depends only on earlier packets and
 * its own arrival, so the departure is computed when the packet arrives; the
 * main loop then holds it until departure + propagation delay. */
#ifndef MPVLAB_DL_CAPACITY_H
#define MPVLAB_DL_CAPACITY_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

/* Mahimahi's LinkQueue::PACKET_SIZE: its TUN device is opened without
 * IFF_NO_PI, so every packet it reads carries a 4-byte packet-information
 * header and an MTU-sized (1500-byte) IP packet is 1504 bytes: exactly one
 * delivery opportunity. We see IP packets, so a packet costs IP length + 4. */
#define DL_MAHIMAHI_OPP_BYTES 1504u
#define DL_MAHIMAHI_OVERHEAD 4u
/* Trace files bigger than this are refused (the shipped ones are <= 1.2 MB). */
#define DL_TRACE_MAX_LINES (4u * 1024 * 1024)
#define DL_MAX_OUTAGES 4096

enum dl_cap_kind { DL_CAP_NONE = 0, DL_CAP_TRACE, DL_CAP_RATE };

struct dl_outages {
	int64_t start_ns[DL_MAX_OUTAGES]; /* [start, end), sorted, disjoint */
	int64_t end_ns[DL_MAX_OUTAGES];
	size_t n;
};

/* Parse "START_US:END_US" and append it; the list must stay sorted and
 * disjoint. Returns -1 with a message in err. */
int dl_outage_add(struct dl_outages *o, const char *arg, char *err,
		  size_t errlen);
/* 1 if t lies in an outage (then *end is its end), else 0. */
int dl_outage_at(const struct dl_outages *o, int64_t t, int64_t *end);
/* Start of the first outage starting strictly after t, or INT64_MAX. */
int64_t dl_outage_next_start(const struct dl_outages *o, int64_t t);

struct dl_qentry {
	int64_t start_ns; /* when the link starts serving it (leaves the queue) */
	uint32_t cost;    /* bytes it counts in the queue */
};

struct dl_capacity {
	enum dl_cap_kind kind;
	const char *path;
	/* trace: opportunity times (ns, non-decreasing), period = last one */
	int64_t *opp_ns;
	size_t n_opp;
	int64_t period_ns;
	uint32_t opp_bytes;
	/* rate: bit/s, piecewise constant (stored in dl_schedule.delay_ns) */
	struct dl_schedule rate;
	uint32_t overhead; /* added to each packet's IP length */
	const struct dl_outages *outages;
	/* drop-tail queue in front of the link; 0 = no limit of that kind */
	uint64_t limit_packets;
	uint64_t limit_bytes;
	/* state: trace */
	int have_cur;
	int64_t cur_g;     /* global index of the last opportunity used */
	uint32_t cur_left; /* bytes left in it */
	/* state: rate */
	int64_t last_finish_ns;
	/* packets queued but not yet being served (FIFO of start times) */
	struct dl_qentry *q;
	size_t qcap, qhead, qcount;
	uint64_t qbytes;
	/* counters */
	uint64_t served_packets;
	uint64_t served_bytes; /* sum of costs */
	uint64_t opportunities_used;
	uint64_t queue_drops;
	uint64_t max_q_packets;
	uint64_t max_q_bytes;
};

/* Load a Mahimahi packet-delivery trace: one non-negative integer (ms) per
 * line, non-decreasing, no empty lines, the last one > 0. */
int dl_cap_load_trace(struct dl_capacity *c, const char *path, char *err,
		      size_t errlen);
/* Load a rate schedule ("t_us rate_bps" lines, see schedule.c). */
int dl_cap_load_rate(struct dl_capacity *c, const char *path, char *err,
		     size_t errlen);
/* Allocate the queue FIFO (qcap >= the kernel queue maxlen). */
int dl_cap_init_queue(struct dl_capacity *c, size_t qcap);
void dl_cap_free(struct dl_capacity *c);

/* Time of global opportunity index g (the trace repeats every period). */
int64_t dl_cap_opp_time(const struct dl_capacity *c, int64_t g);

/* A packet of ip_len bytes arrives at t (relative ns). Returns 1 if the
 * drop-tail queue refuses it, else 0 and its departure time from the link in
 * *depart. *qpkts and *qbytes receive the queue occupancy it found. */
int dl_cap_arrive(struct dl_capacity *c, int64_t t, uint32_t ip_len,
		  int64_t *depart, uint64_t *qpkts, uint64_t *qbytes);
/* The link goes away at t (an outage starts): forget the queue and any
 * partly used opportunity; the caller drops the packets still waiting. */
void dl_cap_reset(struct dl_capacity *c, int64_t t);
/* Run time zero moved later by delta: relative times shift by -delta so every
 * absolute instant already decided stays put; a trace restarts on the new clock. */
void dl_cap_shift(struct dl_capacity *c, int64_t delta);

#endif
