#include "loss.h"

#include <inttypes.h>

/* splitmix64: tiny, seedable, and good enough for Bernoulli draws. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

double dl_uniform01(uint64_t *s)
{
	return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

void dl_loss_seed(struct dl_loss *l, uint64_t seed)
{
	l->rng = seed;
	l->bad = 0;
}

static void end_run(struct dl_loss *l)
{
	if (l->run == 0)
		return;
	l->bursts++;
	if (l->run > l->max_burst)
		l->max_burst = l->run;
	l->hist[l->run < DL_LOSS_HIST - 1 ? l->run : DL_LOSS_HIST - 1]++;
	l->run = 0;
}

int dl_loss_drop(struct dl_loss *l)
{
	int drop = 0;

	if (l->kind == DL_LOSS_NONE)
		return 0;
	l->packets++;
	if (l->kind == DL_LOSS_INDEPENDENT) {
		/* Same draw sequence as before GE existed: one uniform per
		 * packet, so old seeds drop the same packets. */
		drop = l->prob > 0.0 && dl_uniform01(&l->rng) < l->prob;
	} else {
		double u = dl_uniform01(&l->rng);

		if (l->bad)
			l->bad_packets++;
		drop = u < (l->bad ? l->loss_bad : l->loss_good);
		u = dl_uniform01(&l->rng);
		if (l->bad) {
			if (u < l->p_bg)
				l->bad = 0;
		} else if (u < l->p_gb) {
			l->bad = 1;
		}
	}
	if (drop) {
		l->lost++;
		l->run++;
	} else {
		end_run(l);
	}
	return drop;
}

void dl_loss_finish(struct dl_loss *l)
{
	end_run(l);
}

void dl_loss_model(const struct dl_loss *l, double *rate, double *mean_burst)
{
	double pg, pb, lg, lb, pl, start;

	if (l->kind == DL_LOSS_INDEPENDENT) {
		*rate = l->prob;
		*mean_burst = l->prob < 1.0 ? 1.0 / (1.0 - l->prob) : 0.0;
		return;
	}
	if (l->kind != DL_LOSS_GE || l->p_gb + l->p_bg <= 0.0) {
		*rate = 0.0;
		*mean_burst = 0.0;
		return;
	}
	/* Stationary state probabilities of the two-state chain. */
	pb = l->p_gb / (l->p_gb + l->p_bg);
	pg = 1.0 - pb;
	lg = l->loss_good;
	lb = l->loss_bad;
	pl = pg * lg + pb * lb;
	/* A burst starts at packet n when n-1 was delivered and n is lost:
	 * P = sum_s pi_s (1 - l_s) sum_s' T(s,s') l_s'. Mean burst length =
	 * P(lost) / P(burst starts). */
	start = pg * (1.0 - lg) * ((1.0 - l->p_gb) * lg + l->p_gb * lb) +
		pb * (1.0 - lb) * (l->p_bg * lg + (1.0 - l->p_bg) * lb);
	*rate = pl;
	*mean_burst = start > 0.0 ? pl / start : 0.0;
}

void dl_loss_json(FILE *f, const struct dl_loss *l)
{
	double mr, mb;
	static const char *names[] = { "none", "independent", "gilbert-elliott" };

	dl_loss_model(l, &mr, &mb);
	fprintf(f, "{\"kind\": \"%s\"", names[l->kind]);
	if (l->kind == DL_LOSS_INDEPENDENT)
		fprintf(f, ", \"probability\": %.9g", l->prob);
	if (l->kind == DL_LOSS_GE)
		fprintf(f,
			", \"p_good_to_bad\": %.9g, \"p_bad_to_good\": %.9g, \"loss_in_bad\": %.9g, \"loss_in_good\": %.9g, \"packets_in_bad\": %" PRIu64,
			l->p_gb, l->p_bg, l->loss_bad, l->loss_good, l->bad_packets);
	fprintf(f,
		", \"packets\": %" PRIu64 ", \"lost\": %" PRIu64
		", \"loss_rate\": %.9g, \"model_loss_rate\": %.9g"
		", \"bursts\": %" PRIu64 ", \"burst_mean\": %.6g, \"model_burst_mean\": %.6g"
		", \"burst_max\": %" PRIu64 ", \"burst_hist\": [",
		l->packets, l->lost,
		l->packets ? (double)l->lost / (double)l->packets : 0.0, mr,
		l->bursts, l->bursts ? (double)l->lost / (double)l->bursts : 0.0,
		mb, l->max_burst);
	/* burst_hist[i] = bursts of length i+1; the last counts >= 64 */
	for (int i = 1; i < DL_LOSS_HIST; i++)
		fprintf(f, "%s%" PRIu64, i > 1 ? ", " : "", l->hist[i]);
	fprintf(f, "]}");
}
