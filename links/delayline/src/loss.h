/* Loss models of one direction: independent (Bernoulli) and Gilbert-Elliott,
 * with the achieved loss rate and loss-burst lengths recorded. */
#ifndef MPVLAB_DL_LOSS_H
#define MPVLAB_DL_LOSS_H

#include <stdint.h>
#include <stdio.h>

enum dl_loss_kind { DL_LOSS_NONE = 0, DL_LOSS_INDEPENDENT, DL_LOSS_GE };

/* Burst lengths 1..DL_LOSS_HIST-1 are counted exactly, longer ones in the
 * last bucket (their maximum is kept separately). */
#define DL_LOSS_HIST 65

struct dl_loss {
	enum dl_loss_kind kind;
	double prob;          /* independent: drop probability */
	/* Gilbert-Elliott, two states Good/Bad. For every packet: it is lost
	 * with the loss probability of the current state, then the state moves
	 * (Good->Bad with p_gb, Bad->Good with p_bg). Literature names:
	 * p = p_gb, r = p_bg, 1-h = loss_bad, 1-k = loss_good. Starts Good. */
	double p_gb, p_bg, loss_bad, loss_good;
	int bad;
	uint64_t rng;         /* splitmix64 state, seeded from --seed */
	/* achieved */
	uint64_t packets, lost, bad_packets;
	uint64_t bursts, run, max_burst;
	uint64_t hist[DL_LOSS_HIST];
};

void dl_loss_seed(struct dl_loss *l, uint64_t seed);
/* 1 = drop this packet. */
int dl_loss_drop(struct dl_loss *l);
/* Close a burst still open (call before reporting). */
void dl_loss_finish(struct dl_loss *l);
/* Stationary loss rate and mean loss-burst length of the model. */
void dl_loss_model(const struct dl_loss *l, double *rate, double *mean_burst);
/* The "loss_model" JSON object (no trailing newline). */
void dl_loss_json(FILE *f, const struct dl_loss *l);
double dl_uniform01(uint64_t *s);

#endif
