/* Counters and the release-lateness histogram, written as JSON at exit. */
#ifndef MPVLAB_DL_STATS_H
#define MPVLAB_DL_STATS_H

#include <stdint.h>
#include <stdio.h>

/* 1 us buckets up to 100 ms; later releases go to the last bucket (their
 * exact maximum is still kept in late_max_ns). */
#define DL_HIST_BUCKETS 100001

struct dl_stats {
	uint64_t packets;       /* packets received from the queue */
	uint64_t bytes;         /* their full lengths (NFQA_CAP_LEN) */
	uint64_t accepted;      /* released with NF_ACCEPT */
	uint64_t drops_loss;    /* dropped by the random-loss model */
	uint64_t drops_local;   /* dropped here: ring full, bad message */
	uint64_t enobufs;       /* netlink receive overruns seen (kernel drops) */
	uint64_t truncated;     /* netlink messages truncated (our bug) */
	uint64_t max_queued;    /* most packets held at once */
	uint64_t delay_steps;   /* changes of the applied delay value */
	uint64_t verdict_msgs;  /* batch verdict messages sent */
	uint64_t drop_msgs;     /* single NF_DROP verdict messages sent */
	uint64_t wakeups;       /* returns from ppoll (timer, packet or signal) */
	uint64_t recv_calls;    /* recvmmsg system calls */
	/* From /proc/net/netfilter/nfnetlink_queue before unbinding. */
	int64_t kernel_queue_dropped;      /* queue full (maxlen) */
	int64_t kernel_user_dropped;       /* netlink delivery failed */
	/* Release lateness = actual verdict time - target, per packet. */
	uint64_t late_n;
	double late_sum_ns;
	int64_t late_max_ns;
	uint32_t *hist;         /* DL_HIST_BUCKETS counters */
	/* Lateness from the kernel's arrival stamp = verdict time - (target +
	 * (kernel arrival - read time)): what the packet waited beyond its
	 * delay counted from when it reached the queue, not from when this
	 * process read it. A line that was stopped (SIGSTOP, a host stall)
	 * reads late and shows it here, not in late_*. Packets without a
	 * usable stamp are counted in arrival_unstamped and left out. */
	uint64_t arrival_stamped;
	uint64_t arrival_unstamped;
	int64_t read_wait_max_ns;   /* largest read time - kernel arrival */
	uint64_t late_arr_n;
	double late_arr_sum_ns;
	int64_t late_arr_max_ns;
	uint32_t *hist_arr;
};

int dl_stats_init(struct dl_stats *st);
void dl_stats_free(struct dl_stats *st);
static inline void dl_stats_late(struct dl_stats *st, int64_t late_ns)
{
	int64_t us;

	if (late_ns < 0)
		late_ns = 0; /* cannot happen: we never release early */
	st->late_n++;
	st->late_sum_ns += (double)late_ns;
	if (late_ns > st->late_max_ns)
		st->late_max_ns = late_ns;
	us = late_ns / 1000;
	if (us >= DL_HIST_BUCKETS)
		us = DL_HIST_BUCKETS - 1;
	st->hist[us]++;
}
static inline void dl_stats_late_arrival(struct dl_stats *st, int64_t late_ns)
{
	int64_t us;

	if (late_ns < 0)
		late_ns = 0; /* the stamp's 1 us resolution */
	st->late_arr_n++;
	st->late_arr_sum_ns += (double)late_ns;
	if (late_ns > st->late_arr_max_ns)
		st->late_arr_max_ns = late_ns;
	us = late_ns / 1000;
	if (us >= DL_HIST_BUCKETS)
		us = DL_HIST_BUCKETS - 1;
	st->hist_arr[us]++;
}
/* Quantile q in [0,1] of lateness, in us (bucket resolution 1 us). */
double dl_stats_quantile_us(const struct dl_stats *st, double q);
/* The same of lateness from the kernel's arrival stamp. */
double dl_stats_arrival_quantile_us(const struct dl_stats *st, double q);

struct dl_run_info {
	unsigned queue;
	int64_t t0_ns;
	int64_t start_ns;
	int64_t end_ns;
	double loss;
	uint64_t seed;
	unsigned maxlen;
	int rt_prio;
	int64_t batch_tolerance_ns; /* --batch-tolerance-us */
	const char *schedule;
	/* Optional: writes more '  "key": value,\n' lines into the object. */
	void (*extra)(FILE *f, void *ctx);
	void *extra_ctx;
};

/* Write atomically (tmp + rename) so readers never see half a file. */
int dl_stats_write_json(const char *path, const struct dl_stats *st,
			const struct dl_run_info *ri);

#endif
