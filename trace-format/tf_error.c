/*
 * tf_error.c - fills struct tf_error. The formatter understands only "%s"
 * and "%u" (uint64_t) so that it never allocates and never touches stdio:
 * the writer reports errors from inside a traced process.
 */
#include <stdarg.h>

#include "tf_internal.h"

static size_t put_str(char *out, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		out[at++] = *s++;
	return at;
}

static size_t put_u64(char *out, size_t at, size_t cap, uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at + 1 < cap)
		out[at++] = tmp[--n];
	return at;
}

int tf_fail(struct tf_error *err, int status, uint64_t offset,
	    const char *fmt, ...)
{
	if (!err)
		return status;
	va_list ap;
	size_t at = 0, cap = sizeof err->msg;
	va_start(ap, fmt);
	for (const char *f = fmt; *f && at + 1 < cap; f++) {
		if (f[0] == '%' && f[1] == 's') {
			at = put_str(err->msg, at, cap, va_arg(ap, const char *));
			f++;
		} else if (f[0] == '%' && f[1] == 'u') {
			at = put_u64(err->msg, at, cap, va_arg(ap, uint64_t));
			f++;
		} else {
			err->msg[at++] = *f;
		}
	}
	va_end(ap);
	err->msg[at] = '\0';
	err->offset = offset;
	if (status != TF_E_IO)
		err->sys_errno = 0;
	return status;
}
