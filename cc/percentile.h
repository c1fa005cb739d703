/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Sliding-window percentile for BBR-S, plain C shared by the BPF congestion
 * control (bbr_s.bpf.c) and the userspace test build (pct_cli.c).
 *
 * Why a sorted mirror of the ring: the percentile is read on every ACK, so it
 * must be O(1); keeping `sorted` ordered costs one binary search (find the
 * evicted value) plus a shift of only the entries between the evicted value's
 * slot and the new value's slot, usually far fewer than N.
 *
 * Every loop goes through PCT_LOOP so that BPF uses bpf_loop() (the verifier
 * cannot unroll/walk a 1024-iteration loop within its instruction budget) and
 * userspace uses a plain for loop with identical semantics (callback returns 1
 * to stop).  Indices are masked with PCT_MASK before every array access: that
 * is what lets the verifier prove bounds, and it is a no-op for valid indices.
 *
 * Percentile definition: numpy's default ("linear", Hyndman & Fan type 7):
 * virtual index h = (n-1)*p/100 over the ascending samples, linear
 * interpolation between floor(h) and floor(h)+1, result rounded down.
 * p is given in hundredths of a percent (85 % -> 8500) so that no floating
 * point is needed in BPF.
 */
#ifndef HCC_PERCENTILE_H
#define HCC_PERCENTILE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define PCT_MAX_N 1024u /* power of two: PCT_MASK bounds every index */
#define PCT_MASK (PCT_MAX_N - 1)
#define PCT_BP_ONE 10000u /* p = 100 % in hundredths of a percent */
#define PCT_BSEARCH_STEPS 12u /* > log2(PCT_MAX_N) + 1 */

struct pct_window {
	__u32 cap;  /* N: how many most recent samples are kept (1..PCT_MAX_N) */
	__u32 n;    /* valid samples so far (<= cap) */
	__u32 head; /* ring slot the next sample goes to (oldest once full) */
	__u32 _pad;
	__u32 ring[PCT_MAX_N];   /* samples in arrival order */
	__u32 sorted[PCT_MAX_N]; /* the same n samples, ascending */
};

#ifdef __bpf__
#define PCT_LOOP(nr, cb, ctx) bpf_loop((nr), (cb), (ctx), 0)
#else
static inline long pct_loop_user(__u32 nr, long (*cb)(__u32, void *), void *ctx)
{
	__u32 i;

	for (i = 0; i < nr; i++)
		if (cb(i, ctx))
			return (long)i + 1;
	return nr;
}
#define PCT_LOOP(nr, cb, ctx) pct_loop_user((nr), (cb), (ctx))
#endif

struct pct_ctx {
	struct pct_window *w;
	__u32 start; /* slot of the hole when the loop starts (never changed) */
	__u32 end;   /* slot where the hole stopped: val goes there */
	__u32 val;   /* value being inserted */
	__u32 up;    /* 1: hole moves towards larger values */
};

/*
 * The hole moves up to PCT_UNROLL slots per loop callback: with bpf_loop the
 * per-iteration cost is an indirect call, so batching cuts the overhead of a
 * typical 30-slot move by about PCT_UNROLL times.
 *
 * The hole's position is derived from the loop index (start +/- i*UNROLL + j)
 * instead of being carried in ctx: the verifier then sees an unknown index
 * and checks the callback once, rather than walking every constant position
 * ("sequence of jumps is too complex").
 */
#define PCT_UNROLL 16u
#ifdef __clang__
#define PCT_PRAGMA_UNROLL _Pragma("unroll")
#else
#define PCT_PRAGMA_UNROLL
#endif

/* Hole at pos: move sorted[pos+1] into it unless val belongs at pos (-> 1). */
static inline int pct_up_at(struct pct_ctx *c, __u32 pos)
{
	__u32 k = pos + 1, v;

	if (k >= c->w->n)
		return 1;
	v = c->w->sorted[k & PCT_MASK];
	if (v >= c->val)
		return 1;
	c->w->sorted[pos & PCT_MASK] = v;
	return 0;
}

/* Hole at pos: move sorted[pos-1] into it unless val belongs at pos (-> 1). */
static inline int pct_down_at(struct pct_ctx *c, __u32 pos)
{
	__u32 v;

	if (pos == 0)
		return 1;
	v = c->w->sorted[(pos - 1) & PCT_MASK];
	if (v <= c->val)
		return 1;
	c->w->sorted[pos & PCT_MASK] = v;
	return 0;
}

/*
 * One callback for both directions: bpf_loop() is inlined by the verifier
 * only when every call site passes the same callback, and clang merges the
 * call sites of an if/else into one.  An out-of-line bpf_loop costs an
 * indirect (retpoline) call per iteration.
 */
static long pct_shift_cb(__u32 i, void *arg)
{
	struct pct_ctx *c = arg;
	__u32 base, j;

	if (c->up) {
		base = c->start + i * PCT_UNROLL;
PCT_PRAGMA_UNROLL
		for (j = 0; j < PCT_UNROLL; j++) {
			if (pct_up_at(c, base + j)) {
				c->end = base + j;
				return 1;
			}
		}
	} else {
		base = c->start - i * PCT_UNROLL;
PCT_PRAGMA_UNROLL
		for (j = 0; j < PCT_UNROLL; j++) {
			if (pct_down_at(c, base - j)) {
				c->end = base - j;
				return 1;
			}
		}
	}
	return 0;
}

/* lower_bound: first index in sorted[0, n) whose value is >= val. */
static inline __u32 pct_lower_bound(const struct pct_window *w, __u32 n, __u32 val)
{
	__u32 lo = 0, hi = n, mid, i;

	/* Fixed trip count (no data-dependent loop) keeps the verifier happy. */
	for (i = 0; i < PCT_BSEARCH_STEPS; i++) {
		if (lo >= hi)
			break;
		mid = (lo + hi) >> 1;
		if (w->sorted[mid & PCT_MASK] < val)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Enough callback iterations to move the hole across the whole window. */
#define PCT_SHIFT_LOOPS(n) ((n) / PCT_UNROLL + 1)

static inline void pct_reset(struct pct_window *w, __u32 cap)
{
	if (cap < 1)
		cap = 1;
	if (cap > PCT_MAX_N)
		cap = PCT_MAX_N;
	w->cap = cap;
	w->n = 0;
	w->head = 0;
}

/* Add one sample; once n == cap the oldest sample is evicted. */
static inline void pct_insert(struct pct_window *w, __u32 val)
{
	struct pct_ctx c = { .w = w, .val = val };
	__u32 old;

	if (w->cap < 1 || w->cap > PCT_MAX_N)
		return; /* never initialised: refuse rather than corrupt */
	if (w->n < w->cap) {
		/* Grow: the hole starts just past the last sorted entry. */
		c.start = c.end = w->n;
		w->n = w->n + 1;
	} else {
		old = w->ring[w->head & PCT_MASK];
		/* Find a slot holding the evicted value; it becomes the hole. */
		c.start = c.end = pct_lower_bound(w, w->n, old);
		c.up = val >= old;
	}
	PCT_LOOP(PCT_SHIFT_LOOPS(w->n), pct_shift_cb, &c);
	w->sorted[c.end & PCT_MASK] = val;
	w->ring[w->head & PCT_MASK] = val;
	w->head = w->head + 1 >= w->cap ? 0 : w->head + 1;
}

/* p-th percentile (p in hundredths of a percent) of the current samples. */
static inline __u32 pct_value(const struct pct_window *w, __u32 p_bp)
{
	__u64 h, frac;
	__u32 k, lo, hi;

	if (w->n == 0)
		return 0;
	if (p_bp > PCT_BP_ONE)
		p_bp = PCT_BP_ONE;
	h = (__u64)(w->n - 1) * p_bp;
	k = (__u32)(h / PCT_BP_ONE);
	frac = h % PCT_BP_ONE;
	lo = w->sorted[k & PCT_MASK];
	if (frac == 0 || k + 1 >= w->n)
		return lo;
	hi = w->sorted[(k + 1) & PCT_MASK];
	return lo + (__u32)((__u64)(hi - lo) * frac / PCT_BP_ONE);
}

#endif /* HCC_PERCENTILE_H */
