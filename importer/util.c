/*
 * util.c - the few helpers every importer file uses: error formatting and
 * array growth. Never prints, never exits.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imp.h"

#define GROW_MIN 16                   /* first capacity of a grown array */

void imp_errf(struct imp_err *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
}

int imp_grow(void *v, size_t *cap, size_t n, size_t sz)
{
	void **pv = v;
	size_t c = *cap ? *cap : GROW_MIN;
	void *p;

	if (n < *cap)
		return 0;
	while (c <= n)
		c *= 2;
	p = realloc(*pv, c * sz);
	if (!p)
		return -1;
	memset((char *)p + *cap * sz, 0, (c - *cap) * sz);
	*pv = p;
	*cap = c;
	return 0;
}

char *imp_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}
