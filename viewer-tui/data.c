/* data.c - everything trace-tui reads from a database, through queries/q.h.
 *
 * Opens and validates the database before the screen is taken over, loads
 * the timeline, the RSS samples and marks once (the recorder's own marks other than
 * heapreel.start/stop, such as heapreel.stats, left out: they stay reachable
 * as --at mark:LABEL), and turns q's per-stack profiles into the
 * unbiased rows the model aggregates. Stacks are resolved by q_stack, which
 * caches them for the session, so a cursor step costs one q_snapshot.
 * A thread filter (q_set_threads) narrows every view, the chart and the
 * peak; the histogram of a view is q_histogram's.
 *
 * Never: write SQL (q.h has a function for everything trace-tui needs);
 * print; take over the terminal.
 */
#include "tui.h"
#include "trace_format.h"   /* the reserved marks' labels */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The recorder's marks a person wants to see: where recording stopped and
 * started again, where calls went unrecorded and where they were routed. */
static const char *const shown_reserved[] = { TF_MARK_START, TF_MARK_STOP, TF_MARK_UNROUTED,
					      TF_MARK_ROUTED };
/* The counter the chart draws beside live bytes (README "Counters"). */
#define RSS_COUNTER "rss_bytes"

static bool mark_shown(const char *label)
{
	if (strncmp(label, TF_MARK_RESERVED, sizeof TF_MARK_RESERVED - 1))
		return true;
	for (size_t i = 0; i < sizeof shown_reserved / sizeof *shown_reserved; i++)
		if (!strcmp(label, shown_reserved[i]))
			return true;
	return false;
}

struct tui_data {
	struct q_db *db;
	const char *path;
	int64_t pid, t_start, t_end, peak_t, peak_bytes, period;
	const char *exe;             /* q's string */
	const struct q_process *proc;
	const struct q_span *stopped;   /* q's array */
	size_t nstopped;
	const struct q_span *unrouted;  /* q's array */
	size_t nunrouted;
	size_t nprocs;
	struct tui_point *pts;
	size_t npts;
	struct tui_point *rss;       /* rss_bytes samples */
	size_t nrss;
	struct q_counters counters;  /* the last tui_data_counters */
	struct q_mark *marks;        /* the user's marks: owned array, q's strings */
	size_t nmarks;
	struct q_profile prof;       /* the last view read */
	struct tui_sv *sv;
	size_t cap;
};

/* The chart's points from q's timeline (filtered or not). */
static int load_points(struct tui_data *d, char *err, size_t errn)
{
	const struct q_bucket *b;
	size_t n;
	if (q_timeline(d->db, d->pid, &b, &n) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		return -1;
	}
	struct tui_point *pts = realloc(d->pts, (n ? n : 1) * sizeof *pts);
	if (!pts) {
		snprintf(err, errn, "%s: out of memory", d->path);
		return -1;
	}
	d->pts = pts;
	d->npts = n;
	for (size_t i = 0; i < n; i++)
		d->pts[i] = (struct tui_point){ b[i].t, b[i].max_bytes };
	return 0;
}

/* The rss_bytes samples, as the chart's points: 0, or -1 with err set. */
static int load_rss(struct tui_data *d, char *err, size_t errn)
{
	struct q_sample *s;
	size_t n;
	if (q_counter_series(d->db, d->pid, RSS_COUNTER, &s, &n) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		return -1;
	}
	d->rss = malloc((n ? n : 1) * sizeof *d->rss);
	if (!d->rss) {
		free(s);
		snprintf(err, errn, "%s: out of memory", d->path);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		d->rss[i] = (struct tui_point){ s[i].t, s[i].value };
	d->nrss = n;
	free(s);
	return 0;
}

/* Resolves every stack that ever allocated (the rows of the snapshot at the
 * end) while the user still waits for the screen: otherwise the first cursor
 * steps would pay for it. It also brings the checkpoints into the cache. */
static int warm(struct tui_data *d)
{
	const struct q_frame *f;
	size_t n;
	if (q_snapshot(d->db, d->pid, d->t_end, &d->prof) < 0)
		return -1;
	for (size_t i = 0; i < d->prof.n; i++)
		if (q_stack(d->db, d->prof.rows[i].stack_id, &f, &n) < 0)
			return -1;
	return 0;
}

struct tui_data *tui_data_open(const char *path, int64_t pid, bool *no_pid, char *err,
                               size_t errn)
{
	*no_pid = false;
	struct tui_data *d = calloc(1, sizeof *d);
	if (!d) {
		snprintf(err, errn, "%s: out of memory", path);
		return NULL;
	}
	d->path = path;
	d->db = q_open(path, err, errn);
	if (!d->db) {
		free(d);
		return NULL;
	}
	const struct q_process *p = pid < 0 ? q_default_process(d->db) : q_process(d->db, pid);
	if (!p) {
		if (pid < 0)
			snprintf(err, errn, "%s: the database holds no process", path);
		else
			snprintf(err, errn, "%s: no process with pid %lld", path, (long long)pid);
		*no_pid = pid >= 0;
		goto fail;
	}
	d->pid = p->pid;
	d->exe = p->exe;
	d->proc = p;
	q_processes(d->db, &d->nprocs);
	d->t_start = p->t_start;
	d->t_end = p->t_end;
	d->peak_t = p->peak_t;
	d->peak_bytes = p->peak_bytes;
	d->period = p->sample_period;

	const struct q_bucket *b;
	const struct q_mark *all;
	size_t nall;
	/* The spans now: later q_lacks calls then cannot fail. */
	if (q_timeline(d->db, d->pid, &b, &d->npts) < 0 ||
	    q_marks(d->db, d->pid, &all, &nall) < 0 ||
	    q_stopped(d->db, d->pid, &d->stopped, &d->nstopped) < 0 ||
	    q_unrouted(d->db, d->pid, &d->unrouted, &d->nunrouted) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		goto fail;
	}
	d->marks = malloc((nall ? nall : 1) * sizeof *d->marks);
	if (!d->marks) {
		snprintf(err, errn, "%s: out of memory", path);
		goto fail;
	}
	for (size_t i = 0; i < nall; i++)
		if (mark_shown(all[i].label))
			d->marks[d->nmarks++] = all[i];
	int64_t allocs = 0;
	for (size_t i = 0; i < d->npts; i++)
		allocs += b[i].allocs;
	if (allocs == 0) {
		snprintf(err, errn, "%s: the trace holds no allocations (pid %lld)%s", path,
		         (long long)d->pid, p->damaged ? ": it was cut (damaged) before any was read"
		                                       : "");
		goto fail;
	}
	if (load_points(d, err, errn) < 0)
		goto fail;
	if (load_rss(d, err, errn) < 0)
		goto fail;
	if (warm(d) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		goto fail;
	}
	return d;
fail:
	q_profile_free(&d->prof);
	q_close(d->db);
	free(d->pts);
	free(d->rss);
	free(d->marks);
	free(d);
	return NULL;
}

void tui_data_close(struct tui_data *d)
{
	if (!d)
		return;
	q_profile_free(&d->prof);
	q_counters_free(&d->counters);
	q_close(d->db);
	free(d->pts);
	free(d->rss);
	free(d->marks);
	free(d->sv);
	free(d);
}

void tui_data_process(const struct tui_data *d, int64_t *pid, const char **exe, size_t *nprocs)
{
	*pid = d->pid;
	*exe = d->exe;
	*nprocs = d->nprocs;
}

void tui_data_span(const struct tui_data *d, int64_t *t_start, int64_t *t_end)
{
	*t_start = d->t_start;
	*t_end = d->t_end;
}

void tui_data_peak(const struct tui_data *d, int64_t *t, int64_t *bytes)
{
	*t = d->peak_t;
	*bytes = d->peak_bytes;
}

int64_t tui_data_next_pid(const struct tui_data *d, int64_t pid)
{
	size_t n;
	const struct q_process *p = q_processes(d->db, &n);
	for (size_t i = 0; i < n; i++)
		if (p[i].pid == pid)
			return p[(i + 1) % n].pid;
	return n ? p[0].pid : pid;
}

const struct tui_point *tui_data_timeline(const struct tui_data *d, size_t *n)
{
	*n = d->npts;
	return d->pts;
}

const struct tui_point *tui_data_rss(const struct tui_data *d, size_t *n)
{
	*n = d->nrss;
	return d->rss;
}

int tui_data_counters(struct tui_data *d, int64_t t, const struct q_counter **c, size_t *n,
                      char *err, size_t errn)
{
	int rc = q_counters(d->db, d->pid, t, t, &d->counters);
	*c = rc ? NULL : d->counters.c;
	*n = rc ? 0 : d->counters.n;
	if (rc)
		snprintf(err, errn, "%s", q_errmsg(d->db));
	return rc;
}

const struct q_mark *tui_data_marks(const struct tui_data *d, size_t *n)
{
	*n = d->nmarks;
	return d->marks;
}

const struct q_process *tui_data_proc(const struct tui_data *d)
{
	return d->proc;
}

const struct q_span *tui_data_stopped(const struct tui_data *d, size_t *n)
{
	*n = d->nstopped;
	return d->stopped;
}

const struct q_span *tui_data_unrouted(const struct tui_data *d, size_t *n)
{
	*n = d->nunrouted;
	return d->unrouted;
}

unsigned tui_data_lacks(struct tui_data *d, int64_t t)
{
	struct q_lack l;
	return q_lacks(d->db, d->pid, Q_SNAPSHOT, t, t, &l) < 0 ? 0 : l.what;
}

int tui_data_time(struct tui_data *d, const char *spec, int64_t *t, char *err, size_t errn)
{
	int rc = q_time(d->db, d->pid, spec, t);
	if (rc < 0)
		snprintf(err, errn, "%s", q_errmsg(d->db));
	return rc;
}

static int query(struct tui_data *d, struct q_profile *p, enum tui_kind kind, int64_t t1, int64_t t2)
{
	switch (kind) {
	case TUI_GROWTH: return q_growth(d->db, d->pid, t1, t2, p);
	case TUI_STEADY: return q_steady(d->db, d->pid, t1, t2, p);
	case TUI_SNAPSHOT: break;
	}
	return q_snapshot(d->db, d->pid, t2, p);
}

int tui_data_view(struct tui_data *d, enum tui_kind kind, int64_t t1, int64_t t2,
                  const struct tui_sv **out, size_t *n, char *err, size_t errn)
{
	if (query(d, &d->prof, kind, t1, t2) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		return -1;
	}
	if (d->prof.n > d->cap) {
		struct tui_sv *sv = realloc(d->sv, d->prof.n * sizeof *sv);
		if (!sv) {
			snprintf(err, errn, "%s: out of memory", d->path);
			return -1;
		}
		d->sv = sv;
		d->cap = d->prof.n;
	}
	for (size_t i = 0; i < d->prof.n; i++) {
		struct q_row r;
		q_unbias(&d->prof.rows[i], d->period, &r);
		d->sv[i] = (struct tui_sv){ .stack_id = r.stack_id, .bytes = r.v[Q_INUSE_BYTES],
		                            .objects = r.v[Q_INUSE_OBJECTS],
		                            .allocs = r.v[Q_ALLOC_OBJECTS] };
	}
	*out = d->sv;
	*n = d->prof.n;
	return 0;
}

int tui_data_stack(struct tui_data *d, int64_t stack_id, const struct q_frame **f, size_t *n)
{
	return q_stack(d->db, stack_id, f, n);
}

const char *tui_data_fn_name(const struct tui_data *d, int fn) { return q_fn_name(d->db, fn); }

int tui_data_fn_count(const struct tui_data *d) { return q_fn_count(d->db); }

int tui_data_export(struct tui_data *d, enum tui_kind kind, int64_t t1, int64_t t2,
                    const char *path, bool replace, char *err, size_t errn)
{
	struct stat st;
	int fmt = q_format_by_path(path);
	if (fmt < 0) {
		snprintf(err, errn, "%s: unknown extension (use .heap, .pb.gz, .folded, .txt or .svg)", path);
		return -1;
	}
	/* q_write_file renames over path: never replace a file by surprise,
	 * and never the database, even when asked (q_output_ok with force
	 * refuses only the database; its message, naming both paths, would
	 * not fit the status line) */
	if (q_output_ok(d->db, path, true) < 0) {
		snprintf(err, errn, "%s: is the database being read, not overwritten", path);
		return -1;
	}
	if (!replace && lstat(path, &st) == 0)
		return TUI_EXPORT_EXISTS;
	struct q_profile p = { 0 };
	int rc = query(d, &p, kind, t1, t2);
	if (rc == 0)
		rc = q_write_file(d->db, &p, fmt, Q_INUSE_BYTES, false, path, replace);
	if (rc < 0)
		snprintf(err, errn, "%s", q_errmsg(d->db));
	q_profile_free(&p);
	return rc;
}

int tui_data_threads(struct tui_data *d, const struct q_thread **t, size_t *n, char *err,
                     size_t errn)
{
	if (q_threads(d->db, d->pid, t, n) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		return -1;
	}
	return 0;
}

/* The peak of what the filter keeps: its instant (q_peak_time) and the
 * live bytes then. */
static int filtered_peak(struct tui_data *d)
{
	int64_t tot[Q_NVAL];
	if (q_peak(d->db, d->pid, &d->prof) < 0)
		return -1;
	q_totals(&d->prof, tot);
	d->peak_t = d->prof.t2;
	d->peak_bytes = tot[Q_INUSE_BYTES];
	return 0;
}

int tui_data_set_threads(struct tui_data *d, const int64_t *tids, size_t n, char *err,
                         size_t errn)
{
	int rc = q_set_threads(d->db, d->pid, tids, n);
	if (rc == 0 && n)
		rc = filtered_peak(d);
	if (rc < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		q_set_threads(d->db, d->pid, NULL, 0);   /* all threads again */
		n = 0;
	}
	if (!n) {
		d->peak_t = d->proc->peak_t;
		d->peak_bytes = d->proc->peak_bytes;
	}
	return load_points(d, err, errn) < 0 || rc < 0 ? -1 : 0;
}

const int64_t *tui_data_filter(const struct tui_data *d, size_t *n)
{
	int64_t pid;
	return q_thread_filter(d->db, &pid, n);
}

int tui_data_hist(struct tui_data *d, enum tui_kind kind, int64_t t1, int64_t t2,
                  struct q_hist *h, char *err, size_t errn)
{
	if (q_histogram(d->db, d->pid, kind == TUI_SNAPSHOT ? Q_SNAPSHOT : Q_STEADY, t1, t2, h) < 0) {
		snprintf(err, errn, "%s", q_errmsg(d->db));
		return -1;
	}
	return 0;
}
