/*
 * text.c - building short strings (paths, the stats label, the one stderr
 * line) and reading numbers (REC_DEPTH, REC_SAMPLE, control requests)
 * without stdio: snprintf may allocate and take locks, and the recorder
 * runs inside the program's allocator. trace-record and trace-ctl use the
 * same parser, so they accept exactly what the recorder does.
 *
 * Must never: write past `end`, or leave a string unterminated.
 */
#include "rec_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

char *rec_cat(char *dst, char *end, const char *s)
{
	if (dst >= end)
		return dst;
	while (*s && dst < end - 1)
		*dst++ = *s++;
	*dst = 0;
	return dst;
}

char *rec_utoa(char *dst, char *end, uint64_t v)
{
	char digits[24];
	int n = 0;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	char rev[24];
	for (int i = 0; i < n; i++)
		rev[i] = digits[n - 1 - i];
	rev[n] = 0;
	return rec_cat(dst, end, rev);
}

int rec_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || n < lo || n > hi)
		return -1;
	*v = n;
	return 0;
}

int rec_parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	char num[32];
	size_t n = strlen(s);
	unsigned shift = 0;
	if (n && (s[n - 1] == 'K' || s[n - 1] == 'M' || s[n - 1] == 'G')) {
		shift = s[n - 1] == 'K' ? 10 : s[n - 1] == 'M' ? 20 : 30;
		n--;
	}
	if (n == 0 || n >= sizeof num)
		return -1;
	memcpy(num, s, n);
	num[n] = 0;
	uint64_t x;
	if (rec_parse_u64(num, 0, UINT64_MAX >> shift, &x) < 0 || (x << shift) < lo ||
	    (x << shift) > hi)
		return -1;
	*v = x << shift;
	return 0;
}
