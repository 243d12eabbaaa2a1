/* fmt.c - numbers for people: times in seconds (byte sizes in binary units
 * are q_fmt_bytes', shared with trace-snap --stats).
 *
 * Used for labels and the status line only. Exact values (the table, the
 * bytes at the cursor) are printed as plain integers by the caller; this file
 * must never be the only place a number the tests check is shown.
 */
#include "tui.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_S  1000000000LL
#define NS_PER_US 1000LL

/* Cuts trailing zeros of a decimal fraction, and the dot if nothing is left. */
static void trim_zeros(char *s)
{
	char *dot = strchr(s, '.');
	if (!dot)
		return;
	char *end = s + strlen(s);
	while (end > dot + 1 && end[-1] == '0')
		end--;
	if (end == dot + 1)
		end = dot;
	*end = '\0';
}

void tui_fmt_time(char *buf, size_t n, int64_t ns)
{
	const char *sign = ns < 0 ? "-" : "";
	uint64_t a = ns < 0 ? (uint64_t)-(ns + 1) + 1 : (uint64_t)ns;
	/* Microseconds are the finest a person reads; more digits are noise. */
	uint64_t us = (a + NS_PER_US / 2) / NS_PER_US;

	snprintf(buf, n, "%s%" PRIu64 ".%06" PRIu64, sign, us / 1000000, us % 1000000);
	trim_zeros(buf);
	size_t len = strlen(buf);
	if (len + 1 < n) {
		buf[len] = 's';
		buf[len + 1] = '\0';
	}
}

void tui_fmt_time_short(char *buf, size_t n, int64_t ns)
{
	double s = (double)ns / NS_PER_S;

	if (s >= 3600.0) {
		snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
		return;
	}
	if (s > 0.0 && s < 0.1) {
		snprintf(buf, n, "%.0fms", s * 1000.0);
		return;
	}
	/* Three significant digits at most, then no trailing zeros: 2s, 2.5s, 12.3s. */
	snprintf(buf, n, "%.*f", s >= 100.0 ? 0 : s >= 10.0 ? 1 : 2, s);
	trim_zeros(buf);
	size_t len = strlen(buf);
	if (len + 1 < n) {
		buf[len] = 's';
		buf[len + 1] = '\0';
	}
}
