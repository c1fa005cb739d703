#define _GNU_SOURCE
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int dl_stats_init(struct dl_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->kernel_queue_dropped = -1;
	st->kernel_user_dropped = -1;
	st->hist = calloc(DL_HIST_BUCKETS, sizeof(*st->hist));
	st->hist_arr = calloc(DL_HIST_BUCKETS, sizeof(*st->hist_arr));
	return st->hist && st->hist_arr ? 0 : -1;
}

void dl_stats_free(struct dl_stats *st)
{
	free(st->hist);
	free(st->hist_arr);
	st->hist = NULL;
	st->hist_arr = NULL;
}

static double quantile_us(const uint32_t *hist, uint64_t n, double q)
{
	uint64_t rank, seen = 0;
	size_t i;

	if (n == 0)
		return 0.0;
	/* Nearest-rank definition: smallest x with at least q*n samples <= x. */
	rank = (uint64_t)(q * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < DL_HIST_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= rank)
			return (double)i;
	}
	return (double)(DL_HIST_BUCKETS - 1);
}

double dl_stats_quantile_us(const struct dl_stats *st, double q)
{
	return quantile_us(st->hist, st->late_n, q);
}

double dl_stats_arrival_quantile_us(const struct dl_stats *st, double q)
{
	return quantile_us(st->hist_arr, st->late_arr_n, q);
}

int dl_stats_write_json(const char *path, const struct dl_stats *st,
			const struct dl_run_info *ri)
{
	char tmp[4096];
	FILE *f;
	double mean_us = st->late_n ? st->late_sum_ns / st->late_n / 1e3 : 0.0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "{\n");
	fprintf(f, "  \"queue\": %u,\n", ri->queue);
	fprintf(f, "  \"schedule\": \"");
	for (const char *p = ri->schedule; *p; p++) {
		if (*p == '"' || *p == '\\')
			fputc('\\', f);
		if ((unsigned char)*p >= 0x20)
			fputc(*p, f);
	}
	fprintf(f, "\",\n");
	fprintf(f, "  \"t0_ns\": %" PRId64 ",\n", ri->t0_ns);
	fprintf(f, "  \"start_ns\": %" PRId64 ",\n", ri->start_ns);
	fprintf(f, "  \"end_ns\": %" PRId64 ",\n", ri->end_ns);
	fprintf(f, "  \"loss\": %.9g,\n", ri->loss);
	fprintf(f, "  \"seed\": %" PRIu64 ",\n", ri->seed);
	fprintf(f, "  \"maxlen\": %u,\n", ri->maxlen);
	fprintf(f, "  \"rt_prio\": %d,\n", ri->rt_prio);
	fprintf(f, "  \"packets\": %" PRIu64 ",\n", st->packets);
	fprintf(f, "  \"bytes\": %" PRIu64 ",\n", st->bytes);
	fprintf(f, "  \"accepted\": %" PRIu64 ",\n", st->accepted);
	fprintf(f, "  \"drops_loss\": %" PRIu64 ",\n", st->drops_loss);
	fprintf(f, "  \"drops_overflow\": %" PRId64 ",\n",
		st->kernel_queue_dropped);
	fprintf(f, "  \"drops_netlink\": %" PRId64 ",\n",
		st->kernel_user_dropped);
	fprintf(f, "  \"drops_local\": %" PRIu64 ",\n", st->drops_local);
	fprintf(f, "  \"enobufs\": %" PRIu64 ",\n", st->enobufs);
	fprintf(f, "  \"truncated\": %" PRIu64 ",\n", st->truncated);
	fprintf(f, "  \"max_queued\": %" PRIu64 ",\n", st->max_queued);
	fprintf(f, "  \"delay_steps\": %" PRIu64 ",\n", st->delay_steps);
	fprintf(f, "  \"verdict_msgs\": %" PRIu64 ",\n", st->verdict_msgs);
	fprintf(f, "  \"drop_msgs\": %" PRIu64 ",\n", st->drop_msgs);
	fprintf(f, "  \"wakeups\": %" PRIu64 ",\n", st->wakeups);
	fprintf(f, "  \"recv_calls\": %" PRIu64 ",\n", st->recv_calls);
	fprintf(f, "  \"batch_tolerance_us\": %.3f,\n",
		(double)ri->batch_tolerance_ns / 1e3);
	{
		/* The line's own cost, so every run shows CPU per packet. */
		struct rusage ru;
		double u = -1.0, sy = -1.0;

		if (getrusage(RUSAGE_SELF, &ru) == 0) {
			u = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
			sy = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		}
		fprintf(f, "  \"cpu_user_s\": %.6f,\n", u);
		fprintf(f, "  \"cpu_sys_s\": %.6f,\n", sy);
		fprintf(f, "  \"cpu_us_per_packet\": %.3f,\n",
			u >= 0 && st->packets ? (u + sy) * 1e6 / (double)st->packets : 0.0);
		fprintf(f, "  \"packets_per_verdict_msg\": %.3f,\n",
			st->verdict_msgs + st->drop_msgs ?
			(double)st->packets / (double)(st->verdict_msgs + st->drop_msgs) : 0.0);
	}
	if (ri->extra)
		ri->extra(f, ri->extra_ctx);
	fprintf(f, "  \"arrival_stamped\": %" PRIu64 ",\n", st->arrival_stamped);
	fprintf(f, "  \"arrival_unstamped\": %" PRIu64 ",\n", st->arrival_unstamped);
	fprintf(f, "  \"read_wait_us_max\": %.3f,\n", (double)st->read_wait_max_ns / 1e3);
	fprintf(f, "  \"lateness_from_arrival_us\": {\"n\": %" PRIu64
		   ", \"mean\": %.3f, \"p50\": %.0f, \"p99\": %.0f, \"max\": %.3f},\n",
		st->late_arr_n, st->late_arr_n ? st->late_arr_sum_ns / st->late_arr_n / 1e3 : 0.0,
		dl_stats_arrival_quantile_us(st, 0.50), dl_stats_arrival_quantile_us(st, 0.99),
		(double)st->late_arr_max_ns / 1e3);
	fprintf(f, "  \"lateness_us\": {\"n\": %" PRIu64
		   ", \"mean\": %.3f, \"p50\": %.0f, \"p99\": %.0f, \"max\": %.3f}\n",
		st->late_n, mean_us, dl_stats_quantile_us(st, 0.50),
		dl_stats_quantile_us(st, 0.99), (double)st->late_max_ns / 1e3);
	fprintf(f, "}\n");
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fclose(f);
		unlink(tmp);
		return -1;
	}
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}
