/*
 * Drives schedulers/policy.c with a scripted limited / not-limited history of the preferred
 * subflow and reports when the policy opened the second one (tests/test_schedulers.py).
 *
 *   policy_driver [--sndbuf-bounded] minrtt|bdp EXHAUST_MS RELEASE_MS SEGMENT...
 *   SEGMENT: L<ms> (preferred subflow limited by its backlog), U<ms> (not limited), or B<ms> (its
 *   send buffer two MSS short of sk_sndbuf, nothing else limiting), e.g. L150 U20 L250
 *
 * One policy tick per millisecond, as the controller's default period. Prints
 *   first_open_ms=<first tick at which subflow 1 was allowed, -1 never> open_ticks=<ticks allowed>
 *   preferred=<index of the preferred subflow at the end>
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

static void set_state(struct pol_sf_in *sf, char kind)
{
	/* L: limited by its backlog, 100 KB unsent against 20 ms x 375 kB/s = 7.5 KB */
	sf->unsent = kind == 'L' ? 100000 : 0;
	sf->in_flight = kind == 'L' ? 20 : 2;
	sf->wmem_queued = kind == 'B' ? sf->sndbuf - 2 * sf->mss : 0;
}

int main(int argc, char **argv)
{
	struct pol_params p = {0};
	struct pol_conn_state st = {0};
	struct pol_sf_in in[2];
	struct pol_out out;
	long first_open = -1, open_ticks = 0, t = 0;

	if (argc > 1 && !strcmp(argv[1], "--sndbuf-bounded")) {
		p.sndbuf_bounded = true;
		argv++;
		argc--;
	}
	if (argc < 5 || (strcmp(argv[1], "minrtt") && strcmp(argv[1], "bdp"))) {
		fprintf(stderr, "usage: policy_driver [--sndbuf-bounded] minrtt|bdp EXHAUST_MS RELEASE_MS SEGMENT...\n");
		return 2;
	}
	p.kind = strcmp(argv[1], "bdp") ? POL_MINRTT : POL_BDP;
	p.exhaust_ns = strtoull(argv[2], NULL, 10) * MS;
	p.release_ns = strtoull(argv[3], NULL, 10) * MS;
	p.hysteresis = 0.25;
	p.bw_window_ns = 10000 * MS;
	p.backlog_ns = 20 * MS;
	p.probe_interval_ns = 0; /* no probes: only exhaustion may open subflow 1 */

	/* Subflow 0 is both the lower-RTT (minrtt) and the larger-BDP (bdp) choice: BBR's model,
	 * 3 Mbit/s on both, min RTT 100 ms on 0 and 20 ms on 1, but srtt lower on 0. */
	memset(in, 0, sizeof(in));
	for (int i = 0; i < 2; i++) {
		in[i].key = (uint64_t)i + 1;
		in[i].usable = true;
		in[i].cwnd = 40;
		in[i].mss = 1448;
		in[i].sndbuf = 1 << 20;
		in[i].snd_wnd = 1 << 20;
		in[i].delivery_Bps = 375000;
		in[i].is_bbr = true;
		in[i].bbr_bw_Bps = 375000;
	}
	in[0].srtt_us = 10000;
	in[0].min_rtt_us = in[0].bbr_min_rtt_us = 100000;
	in[1].srtt_us = 40000;
	in[1].min_rtt_us = in[1].bbr_min_rtt_us = 20000;

	for (int a = 4; a < argc; a++) {
		char kind = argv[a][0];
		long len = atol(argv[a] + 1);

		if ((kind != 'L' && kind != 'U' && kind != 'B') || len <= 0) {
			fprintf(stderr, "policy_driver: bad segment %s (L<ms>, U<ms> or B<ms>)\n", argv[a]);
			return 2;
		}
		set_state(&in[0], kind);
		for (long k = 0; k < len; k++, t++) {
			pol_decide(&p, &st, in, 2, (uint64_t)(t + 1) * MS, &out);
			if (out.allowed[1]) {
				if (first_open < 0)
					first_open = t;
				open_ticks++;
			}
		}
	}
	printf("first_open_ms=%ld open_ticks=%ld preferred=%d\n", first_open, open_ticks, out.preferred);
	return 0;
}
