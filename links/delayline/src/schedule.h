/* Piecewise-constant delay schedule: parsing and lookup. */
#ifndef MPVLAB_DL_SCHEDULE_H
#define MPVLAB_DL_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

/* Largest delay accepted: a delay line holding packets for more than a
 * minute is a configuration error, and the bound keeps ns arithmetic far
 * from overflow. */
#define DL_MAX_DELAY_US (60LL * 1000 * 1000)

struct dl_point {
	int64_t t_ns;     /* start of this segment, relative to t0 */
	int64_t delay_ns; /* one-way delay for packets ARRIVING in it */
};

struct dl_schedule {
	struct dl_point *pts;
	size_t n;
	int64_t period_ns; /* 0: not periodic */
	int64_t max_delay_ns;
};

/* Parse FILE. On error returns -1 and writes a message naming the file and
 * line into err (size errlen). */
int dl_schedule_load(const char *path, struct dl_schedule *s, char *err,
		     size_t errlen);

/* The same file format with another value column (e.g. a rate schedule:
 * "t_us rate_bps"). what: label used in errors ("schedule", "rate schedule");
 * value_name: the column's name; values must lie in [min_value, max_value]
 * (file units) and are stored multiplied by scale. max_delay_ns then holds
 * the largest stored value. */
struct dl_schedule_kind {
	const char *what;
	const char *value_name;
	int64_t min_value;
	int64_t max_value;
	int64_t scale;
	const char *min_hint; /* appended to the range error, may be "" */
};
int dl_schedule_load_kind(const char *path, const struct dl_schedule_kind *k,
			  struct dl_schedule *s, char *err, size_t errlen);
/* Next breakpoint strictly after t (INT64_MAX if none: non-periodic tail). */
int64_t dl_schedule_next_break(const struct dl_schedule *s, int64_t t_rel_ns);
void dl_schedule_free(struct dl_schedule *s);

/* Delay for a packet arriving at t_rel_ns = now - t0 (may be negative:
 * periodic extension, or the first value when not periodic; after the last
 * point of a non-periodic schedule the last value holds). */
int64_t dl_schedule_delay(const struct dl_schedule *s, int64_t t_rel_ns);

#endif
