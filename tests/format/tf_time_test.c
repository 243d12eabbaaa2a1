/*
 * tf_time_test.c - unit test of the time grammar (trace-format/tf_time.c):
 * every unit, fractions, a bare number as seconds, exact conversion where
 * a double would round, the int64 limit, and what must be refused. Exits 1
 * naming the first case that fails.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace_format.h"

#define NS_PER_S 1000000000ll

static int failures;

static void good(const char *s, int64_t want)
{
	int64_t got = -1;
	if (tf_parse_duration(s, &got) || got != want) {
		fprintf(stderr, "tf_parse_duration(\"%s\"): got %" PRId64 ", want %" PRId64 "\n",
			s, got, want);
		failures++;
	}
}

static void refused(const char *s)
{
	int64_t got = 7;
	if (!tf_parse_duration(s, &got) || got != 7) {
		fprintf(stderr, "tf_parse_duration(\"%s\"): accepted (%" PRId64 ")\n", s, got);
		failures++;
	}
}

int main(void)
{
	good("5", 5 * NS_PER_S);
	good("0.5", NS_PER_S / 2);
	good(".5", NS_PER_S / 2);
	good("1.5s", 1500000000);
	good("250ms", 250000000);
	good("10us", 10000);
	good("5ns", 5);
	good("1m", 60 * NS_PER_S);
	good("1.5m", 90 * NS_PER_S);
	good("2h", 7200 * NS_PER_S);
	good("0.1s", 100000000);              /* 0.1 has no exact double */
	good("0.000000001", 1);
	good("0.0000000019", 1);              /* below a nanosecond: truncated */
	good("007s", 7 * NS_PER_S);
	good("0", 0);
	good("9223372036.854775807", INT64_MAX);
	good("2562047h", 2562047ll * 3600 * NS_PER_S);
	good("000000000000000000000000001ns", 1);  /* leading zeros cost nothing */
	refused("9223372036.854775808");
	refused("2562048h");
	refused("9223372036854775808ns");     /* its digits overflow an int64 */
	refused("0.0000000000000000001");     /* 19 decimals */
	static const char *const bad[] = { "", ".", "1.", "s", "-1s", "+1s", "1e3", "1 s", " 1s",
		"1s ", "1.5sec", "1.2.3", "0x10", "5d", "1S", "%", "5%", "inf", "nan" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(bad[i]);
	if (failures)
		return 1;
	printf("tf_time: all cases pass\n");
	return 0;
}
