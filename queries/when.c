/* when.c - instants ("30s", "1.5m", "2h", "0.5" (seconds), "250ms", "45%",
 * "mark:LABEL", "start", "end") and "T1..T2" windows to nanoseconds.
 *
 * Durations follow the one grammar of every command (tf_parse_duration:
 * exact decimal conversion, never through floating point, so "1.5s" is
 * 1500000000 ns; a bare number is seconds).
 * Never: accept trailing junk, or an instant outside the process's span.
 */
#include <stdlib.h>
#include <string.h>

#include "qi.h"
#include "trace_format.h"

#define NS_PER_S 1000000000ll

static int bad(struct q_db *db, const char *spec)
{
	return q_fail(db, "malformed time '%s' (expected e.g. 30s, 1.5m, 2h, 0.5 (seconds), "
	              "250ms, 10us, 5ns, 45%%, mark:LABEL, start, end)", spec);
}

void q_fmt_ns(char *buf, size_t n, int64_t ns)
{
	snprintf(buf, n, "%lld.%09llds", (long long)(ns / NS_PER_S), (long long)(ns % NS_PER_S));
}

int q_time(struct q_db *db, int64_t pid, const char *spec, int64_t *t)
{
	long i = q_proc_index(db, pid);
	if (i < 0)
		return Q_NOT_FOUND;
	const struct q_process *p = &db->procs[i];
	__int128 v;
	if (!strcmp(spec, "start")) {
		v = p->t_start;
	} else if (!strcmp(spec, "end")) {
		v = p->t_end;
	} else if (!strncmp(spec, "mark:", 5)) {
		const struct q_mark *m;
		size_t n;
		if (q_marks(db, pid, &m, &n))
			return -1;
		size_t k = 0;
		while (k < n && strcmp(m[k].label, spec + 5))
			k++;
		if (k == n) {
			q_fail(db, "%s: no mark '%s' in process %lld", db->path, spec + 5,
			       (long long)pid);
			return Q_NOT_FOUND;
		}
		v = m[k].t;
	} else if (spec[0] && spec[strlen(spec) - 1] == '%') {
		int64_t mant;
		int dec;
		const char *end = tf_parse_decimal(spec, &mant, &dec);
		if (!end || strcmp(end, "%"))
			return bad(db, spec);
		v = (__int128)(p->t_end - p->t_start) * mant / (100 * (__int128)tf_pow10(dec));
		if (v > p->t_end - p->t_start) {
			q_fail(db, "time '%s' is outside the trace (0%%..100%%)", spec);
			return Q_NOT_FOUND;
		}
		v += p->t_start;
	} else {
		int64_t ns;
		if (tf_parse_duration(spec, &ns))
			return bad(db, spec);
		v = ns;
	}
	if (v < p->t_start || v > p->t_end) {
		char a[40], b[40];
		q_fmt_ns(a, sizeof a, p->t_start);
		q_fmt_ns(b, sizeof b, p->t_end);
		q_fail(db, "time '%s' is outside the trace of process %lld (%s..%s)", spec,
		       (long long)pid, a, b);
		return Q_NOT_FOUND;
	}
	*t = (int64_t)v;
	return 0;
}

int q_window(struct q_db *db, int64_t pid, const char *spec, int64_t *t1, int64_t *t2)
{
	const char *dots = strstr(spec, "..");
	if (!dots)
		return q_fail(db, "malformed window '%s' (expected T1..T2, e.g. 10s..20s)", spec);
	char *first = strndup(spec, (size_t)(dots - spec));
	if (!first)
		return q_fail(db, "out of memory");
	int rc = q_time(db, pid, first, t1);
	free(first);
	if (rc || (rc = q_time(db, pid, dots + 2, t2)))
		return rc;
	if (*t1 > *t2)
		return q_fail(db, "window '%s' ends before it starts", spec);
	return 0;
}
