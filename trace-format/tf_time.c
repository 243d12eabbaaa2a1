/*
 * tf_time.c - the one time grammar of every heapreel command: a duration
 * is a decimal number ("5", "1.5", ".5") with a unit ns, us, ms, s, m or h;
 * a bare number means seconds (README "Times").
 *
 * The conversion is exact: the digits are read as an integer and a count
 * of decimals, multiplied by the unit and divided by the power of ten in
 * 128-bit integers, never through floating point, so "1.5m" is exactly
 * 90000000000 ns (fractions of a nanosecond are truncated).
 * Never: accept a sign, an exponent, white space, trailing junk, or a value
 * that does not fit an int64 of nanoseconds; print anything.
 */
#include "trace_format.h"

#include <stdbool.h>
#include <string.h>

#define MAX_DECIMALS 18                /* 10^18 is the largest power of ten in an int64 */

static const struct { const char *suffix; int64_t ns; } units[] = {
	{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
	{ "m", 60ll * 1000000000 }, { "h", 3600ll * 1000000000 },
	{ "", 1000000000 },            /* a bare number: seconds */
};

const char *tf_parse_decimal(const char *s, int64_t *mant, int *decimals)
{
	bool digits = false;
	int dec = -1;
	int64_t m = 0;
	for (;; s++) {
		if (*s == '.' && dec < 0) {
			dec = 0;
			continue;
		}
		if (*s < '0' || *s > '9')
			break;
		if (dec >= 0)
			dec++;
		if (dec > MAX_DECIMALS || m > (INT64_MAX - (*s - '0')) / 10)
			return NULL;
		m = m * 10 + (*s - '0');
		digits = true;
	}
	if (!digits || dec == 0)
		return NULL;
	*mant = m;
	*decimals = dec < 0 ? 0 : dec;
	return s;
}

int64_t tf_pow10(int k)
{
	int64_t p = 1;
	while (k-- > 0)
		p *= 10;
	return p;
}

int tf_parse_duration(const char *s, int64_t *ns)
{
	int64_t mant;
	int dec;
	const char *end = tf_parse_decimal(s, &mant, &dec);
	if (!end)
		return -1;
	for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
		if (strcmp(end, units[u].suffix))
			continue;
		__int128 v = (__int128)mant * units[u].ns / tf_pow10(dec);
		if (v > INT64_MAX)
			return -1;
		*ns = (int64_t)v;
		return 0;
	}
	return -1;
}
