/*
 * Drives schedulers/policy.c's ecf policy with scripted states of two subflows, one policy tick
 * per input line (tests/test_schedulers.py). Subflow 0 is the fast one (lower srtt).
 *
 *   ecf_driver BETA < lines
 *   line: N|C SRTT_F_US CWND_F INFLIGHT_F UNSENT_F SRTT_S_US CWND_S UNSENT_S MSK_UNSENT DEV_F_US DEV_S_US
 *   N starts a new connection (fresh policy state), C continues the previous one.
 *
 * Prints per line: allowed1=<0|1> preferred=<index> reason=<policy.c's reason, spaces as _>
 * No probes, no release hold, no exhaust time: the slower subflow is open exactly when the fast
 * one is limited now and ECF's test says so.
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

int main(int argc, char **argv)
{
	struct pol_params p = {0};
	struct pol_conn_state st = {0};
	struct pol_sf_in in[2];
	struct pol_out out;
	char line[512], mode;
	uint64_t t = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: ecf_driver BETA < lines\n");
		return 2;
	}
	p.kind = POL_ECF;
	p.hysteresis = atof(argv[1]);
	p.backlog_ns = 20 * MS;
	p.bw_window_ns = 10000 * MS;
	memset(in, 0, sizeof(in));
	for (int i = 0; i < 2; i++) {
		in[i].key = (uint64_t)i + 1;
		in[i].usable = true;
		in[i].mss = 1448;
		in[i].sndbuf = 1 << 22;
		in[i].snd_wnd = 1 << 22;
		in[i].delivery_Bps = 375000;
	}
	while (fgets(line, sizeof(line), stdin)) {
		unsigned srtt_f, cwnd_f, infl_f, unsent_f, srtt_s, cwnd_s, unsent_s, msk, dev_f, dev_s;

		if (sscanf(line, " %c %u %u %u %u %u %u %u %u %u %u", &mode, &srtt_f, &cwnd_f, &infl_f, &unsent_f,
			   &srtt_s, &cwnd_s, &unsent_s, &msk, &dev_f, &dev_s) != 11 ||
		    (mode != 'N' && mode != 'C')) {
			fprintf(stderr, "ecf_driver: bad line: %s", line);
			return 2;
		}
		if (mode == 'N')
			memset(&st, 0, sizeof(st));
		in[0].srtt_us = srtt_f;
		in[0].cwnd = cwnd_f;
		in[0].in_flight = infl_f;
		in[0].unsent = unsent_f;
		in[0].unacked = infl_f * in[0].mss;
		in[1].srtt_us = srtt_s;
		in[1].cwnd = cwnd_s;
		in[1].in_flight = 0;
		in[1].unsent = unsent_s;
		in[0].msk_unsent = in[1].msk_unsent = msk;
		in[0].rtt_dev_us = dev_f;
		in[1].rtt_dev_us = dev_s;
		pol_decide(&p, &st, in, 2, ++t * MS, &out);
		for (char *c = out.reason; *c; c++)
			if (*c == ' ')
				*c = '_';
		printf("allowed1=%d preferred=%d reason=%s\n", out.allowed[1], out.preferred, out.reason);
	}
	return 0;
}
