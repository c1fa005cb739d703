/* Schedule file format (written by the Python orchestration):
 *
 *   # comment
 *   period_us 20000000      # optional, default 0 = not periodic
 *   0 60000                 # t_us delay_us
 *   10000000 0
 *
 * Points are piecewise constant, the first t must be 0 and t strictly
 * increases; with a period every t must be < period. */
#define _GNU_SOURCE
#include "schedule.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *what, const char *path,
		long line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(err, errlen, "%s %s line %ld: %s", what, path, line,
			 msg);
	else
		snprintf(err, errlen, "%s %s: %s", what, path, msg);
	return -1;
}

/* Strict non-negative decimal integer: no sign, no junk, no overflow. */
static int parse_u64(const char *tok, int64_t max, int64_t *out)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)tok[0]))
		return -1;
	errno = 0;
	v = strtoull(tok, &end, 10);
	if (errno || *end != '\0' || v > (unsigned long long)max)
		return -1;
	*out = (int64_t)v;
	return 0;
}

int dl_schedule_load(const char *path, struct dl_schedule *s, char *err,
		     size_t errlen)
{
	static const struct dl_schedule_kind delay = {
		"schedule", "delay_us", 0, DL_MAX_DELAY_US, 1000, ""
	};

	return dl_schedule_load_kind(path, &delay, s, err, errlen);
}

int dl_schedule_load_kind(const char *path, const struct dl_schedule_kind *k,
			  struct dl_schedule *s, char *err, size_t errlen)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0, ncap = 0;
	long lineno = 0;
	int have_period = 0;
	/* t values are bounded so that t_ns and period_ns fit comfortably. */
	const int64_t max_t_us = INT64_MAX / 4000;

	memset(s, 0, sizeof(*s));
	f = fopen(path, "r");
	if (!f)
		return fail(err, errlen, k->what, path, 0, "cannot open: %s",
			    strerror(errno));

	while (getline(&line, &cap, f) >= 0) {
		char *tok[4];
		int ntok = 0;
		char *p, *save = NULL;
		int64_t a, b;

		lineno++;
		p = strchr(line, '#');
		if (p)
			*p = '\0';
		for (p = strtok_r(line, " \t\r\n", &save); p;
		     p = strtok_r(NULL, " \t\r\n", &save)) {
			if (ntok == 3)
				break;
			tok[ntok++] = p;
		}
		if (ntok == 0)
			continue;
		if (ntok != 2) {
			fail(err, errlen, k->what, path, lineno,
			     "expected 2 fields ('t_us %s' or 'period_us N'), got %d",
			     k->value_name, ntok);
			goto bad;
		}
		if (strcmp(tok[0], "period_us") == 0) {
			if (have_period || s->n > 0) {
				fail(err, errlen, k->what, path, lineno,
				     "period_us must appear once, before the points");
				goto bad;
			}
			if (parse_u64(tok[1], max_t_us, &a)) {
				fail(err, errlen, k->what, path, lineno,
				     "period_us '%s' is not a non-negative integer",
				     tok[1]);
				goto bad;
			}
			s->period_ns = a * 1000;
			have_period = 1;
			continue;
		}
		if (parse_u64(tok[0], max_t_us, &a)) {
			fail(err, errlen, k->what, path, lineno,
			     "t_us '%s' is not a non-negative integer (or unknown keyword)",
			     tok[0]);
			goto bad;
		}
		if (parse_u64(tok[1], k->max_value, &b) || b < k->min_value) {
			fail(err, errlen, k->what, path, lineno,
			     "%s '%s' is not an integer in [%lld, %lld]%s",
			     k->value_name, tok[1], (long long)k->min_value,
			     (long long)k->max_value, k->min_hint);
			goto bad;
		}
		if (s->n == 0 && a != 0) {
			fail(err, errlen, k->what, path, lineno,
			     "first point must have t_us 0, got %" PRId64, a);
			goto bad;
		}
		if (s->n > 0 && a * 1000 <= s->pts[s->n - 1].t_ns) {
			fail(err, errlen, k->what, path, lineno,
			     "t_us %" PRId64 " is not greater than the previous point",
			     a);
			goto bad;
		}
		if (s->period_ns > 0 && a * 1000 >= s->period_ns) {
			fail(err, errlen, k->what, path, lineno,
			     "t_us %" PRId64 " is not inside the period (%" PRId64 " us)",
			     a, s->period_ns / 1000);
			goto bad;
		}
		if (s->n == ncap) {
			size_t nc = ncap ? ncap * 2 : 16;
			struct dl_point *np = realloc(s->pts, nc * sizeof(*np));

			if (!np) {
				fail(err, errlen, k->what, path, lineno, "out of memory");
				goto bad;
			}
			s->pts = np;
			ncap = nc;
		}
		s->pts[s->n].t_ns = a * 1000;
		s->pts[s->n].delay_ns = b * k->scale;
		if (b * k->scale > s->max_delay_ns)
			s->max_delay_ns = b * k->scale;
		s->n++;
	}
	if (ferror(f)) {
		fail(err, errlen, k->what, path, 0, "read error: %s", strerror(errno));
		goto bad;
	}
	if (s->n == 0) {
		fail(err, errlen, k->what, path, 0, "no points (need at least '0 %s')",
		     k->value_name);
		goto bad;
	}
	free(line);
	fclose(f);
	return 0;
bad:
	free(line);
	fclose(f);
	dl_schedule_free(s);
	return -1;
}

void dl_schedule_free(struct dl_schedule *s)
{
	free(s->pts);
	memset(s, 0, sizeof(*s));
}

int64_t dl_schedule_delay(const struct dl_schedule *s, int64_t t)
{
	size_t lo, hi;

	if (s->period_ns > 0) {
		t %= s->period_ns;
		if (t < 0)
			t += s->period_ns; /* periodic extension before t0 */
	} else if (t < 0) {
		return s->pts[0].delay_ns;
	}
	/* Last point with t_ns <= t (pts[0].t_ns == 0 <= t). */
	lo = 0;
	hi = s->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->pts[mid].t_ns <= t)
			lo = mid;
		else
			hi = mid;
	}
	return s->pts[lo].delay_ns;
}

int64_t dl_schedule_next_break(const struct dl_schedule *s, int64_t t)
{
	size_t lo = 0, hi = s->n;
	int64_t base = 0;

	if (s->period_ns > 0) {
		int64_t cyc = t / s->period_ns;

		if (t % s->period_ns < 0)
			cyc--;
		base = cyc * s->period_ns;
		t -= base;
	} else if (t < 0) {
		return 0;
	}
	/* First point with t_ns > t. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->pts[mid].t_ns <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->n)
		return base + s->pts[lo].t_ns;
	return s->period_ns > 0 ? base + s->period_ns : INT64_MAX;
}
