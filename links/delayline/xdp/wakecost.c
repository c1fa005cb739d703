/* mpvlab-wakecost: what one timer wake-up costs a delay line on this host (issue 36's floor).
 * Sleeps N times in ppoll for D us (SCHED_FIFO 50 unless --rt-prio 0, timer slack 1 ns, the delay
 * lines' settings) and prints JSON: CPU (getrusage user+sys) per wake-up and the wake-up lateness
 * p50/p99. A line that wakes k times per packet pays k times this before any packet work.
 * Two CPU figures: getrusage (what the lines report; on a TICK_CPU_ACCOUNTING kernel a sample
 * of whole 1/HZ ticks) and the scheduler's exact on-CPU time from /proc/self/schedstat (which
 * leaves out the interrupt work done while the CPU was still idle). */
#define _GNU_SOURCE
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long sched_ns(void)
{
	long long v = -1;
	FILE *f = fopen("/proc/self/schedstat", "r");

	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000, i;
	long long d_us = argc > 2 ? atoll(argv[2]) : 121, *late;
	int prio = argc > 3 ? atoi(argv[3]) : 50;
	struct rusage r0, r1;
	double cpu;
	long long s0, s1;

	if (n < 1 || n > 10000000 || d_us < 1 || d_us > 1000000 || prio < 0 || prio > 99) {
		fprintf(stderr, "usage: mpvlab-wakecost [N 1..1e7] [SLEEP_US 1..1e6] [RT_PRIO 0..99]\n");
		return 2;
	}
	late = calloc((size_t)n, sizeof(*late));
	if (!late)
		return 1;
	prctl(PR_SET_TIMERSLACK, 1UL);
	if (prio) {
		struct sched_param sp = {.sched_priority = prio};

		if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
			perror("SCHED_FIFO");
			return 1;
		}
	}
	getrusage(RUSAGE_SELF, &r0);
	s0 = sched_ns();
	for (i = 0; i < n; i++) {
		long long t = now_ns() + d_us * 1000;
		struct timespec ts = {.tv_sec = d_us / 1000000, .tv_nsec = (d_us % 1000000) * 1000};

		ppoll(NULL, 0, &ts, NULL);
		late[i] = now_ns() - t;
	}
	s1 = sched_ns();
	getrusage(RUSAGE_SELF, &r1);
	cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
	      (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
	qsort(late, (size_t)n, sizeof(*late), cmp);
	printf("{\"wakeups\": %ld, \"sleep_us\": %lld, \"rt_prio\": %d, \"cpu_us_per_wakeup\": %.2f, \"oncpu_us_per_wakeup\": %.2f, "
	       "\"lateness_us\": {\"p50\": %.1f, \"p99\": %.1f}}\n",
	       n, d_us, prio, cpu / (double)n, s0 < 0 || s1 < 0 ? -1.0 : (double)(s1 - s0) / 1e3 / (double)n, late[n / 2] / 1e3, late[n * 99 / 100] / 1e3);
	free(late);
	return 0;
}
