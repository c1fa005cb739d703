// SPDX-License-Identifier: GPL-2.0-only
/*
 * Userspace driver for percentile.h, used by tests/test_cc.py to check the
 * exact code the BPF program runs against a numpy reference.
 *
 *   pct-test N P_BP < samples      (one unsigned 32-bit sample per line)
 *
 * After each sample it prints the p-th percentile of the last N samples
 * (p in hundredths of a percent, 8500 = 85 %) and the sample count.
 * It also checks the window invariant (sorted is ascending) after every insert
 * and exits 2 if it is ever broken.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "percentile.h"

static int parse_u32(const char *s, unsigned long max, __u32 *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > max)
		return -1;
	*out = (__u32)v;
	return 0;
}

int main(int argc, char **argv)
{
	static struct pct_window w;
	__u32 cap, p_bp, i;
	unsigned long long v;

	if (argc != 3 || parse_u32(argv[1], PCT_MAX_N, &cap) || cap < 1 ||
	    parse_u32(argv[2], PCT_BP_ONE, &p_bp)) {
		fprintf(stderr, "usage: %s N(1..%u) P_BP(0..%u) < samples\n", argv[0],
			PCT_MAX_N, PCT_BP_ONE);
		return 1;
	}
	pct_reset(&w, cap);
	while (scanf("%llu", &v) == 1) {
		if (v > 0xffffffffULL) {
			fprintf(stderr, "sample %llu exceeds 32 bits\n", v);
			return 1;
		}
		pct_insert(&w, (__u32)v);
		for (i = 1; i < w.n; i++) {
			if (w.sorted[i - 1] > w.sorted[i]) {
				fprintf(stderr, "window not sorted at %u\n", i);
				return 2;
			}
		}
		printf("%u %u\n", pct_value(&w, p_bp), w.n);
	}
	return 0;
}
