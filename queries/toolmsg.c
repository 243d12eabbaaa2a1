/* toolmsg.c - a tool's own error line: "TOOL: message" on stderr, for the
 * commands built on this library (trace-snap, trace-report), so that each
 * says its errors in one line, named, the same way.
 *
 * Never: print more than one line, or exit (the caller returns the code).
 */
#include <stdarg.h>
#include <stdio.h>

#include "q.h"

int q_tool_fail(const char *tool, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", tool);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}
