/* collect.c - what the report precomputes for each process of a database
 * (rep.h says which instants and windows), through the query library.
 *
 * A failure returns -1 with q_errmsg(db) saying why, or empty when memory
 * ran out (the caller says so).
 * Never: SQL here; keep a profile whose question failed (the whole report
 * fails instead: a page must not show an answer it could not compute).
 */
#include <stdlib.h>
#include <string.h>

#include "rep.h"

/* The counter the timeline's RSS line and the "RSS peak" button read
 * (importer/schema.sql, counters: what the recorder samples). */
#define REP_RSS_COUNTER "rss_bytes"

/* Point k of n spread evenly over [t_start, t_end], both ends included. */
static int64_t even(const struct q_process *p, size_t k, size_t n)
{
	return p->t_start + (int64_t)((__int128)(p->t_end - p->t_start) * (int64_t)k /
	                              (int64_t)(n - 1));
}

/* The instant of the largest RSS sample (the first of equals). */
static void rss_peak(struct rep_proc *rp)
{
	rp->rss_peak_t = Q_NEVER;
	int64_t best = -1;
	for (size_t i = 0; i < rp->nrss; i++)
		if (rp->rss[i].value > best) {
			best = rp->rss[i].value;
			rp->rss_peak_t = rp->rss[i].t;
		}
}

/* rp->points: the even instants, the marks, the peak, the RSS peak;
 * sorted, each once, all inside the process's span. */
static int choose_points(struct rep_proc *rp)
{
	const struct q_process *p = rp->proc;
	size_t marks = rp->nmarks < REP_MAX_MARKS ? rp->nmarks : REP_MAX_MARKS, n = 0;
	int64_t *t = malloc((REP_POINTS + marks + 2) * sizeof *t);
	if (!t)
		return -1;
	for (size_t k = 0; k < REP_POINTS; k++)
		t[n++] = even(p, k, REP_POINTS);
	for (size_t k = 0; k < marks; k++)
		if (rp->marks[k].t >= p->t_start && rp->marks[k].t <= p->t_end)
			t[n++] = rp->marks[k].t;
	t[n++] = p->peak_t;
	if (rp->rss_peak_t >= p->t_start && rp->rss_peak_t <= p->t_end)
		t[n++] = rp->rss_peak_t;
	rp->points = t;
	rp->npoints = rep_sort_unique(t, n, sizeof *t, rep_cmp_i64);
	return 0;
}

/* The index of instant x in rp->points (x is one of them). */
static size_t point_index(const struct rep_proc *rp, int64_t x)
{
	const int64_t *hit = bsearch(&x, rp->points, rp->npoints, sizeof x, rep_cmp_i64);
	return (size_t)(hit - rp->points);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x > y) - (x < y);
}

/* rp->grid: the steady grid's instants as indexes into rp->points. */
static int choose_grid(struct rep_proc *rp)
{
	size_t max = REP_STEADY_GRID + 1 + REP_STEADY_MARKS, n = 0;
	size_t *g = malloc(max * sizeof *g);
	if (!g)
		return -1;
	for (size_t k = 0; k < REP_STEADY_GRID; k++)
		g[n++] = point_index(rp, even(rp->proc, k * (REP_POINTS - 1) / (REP_STEADY_GRID - 1),
		                              REP_POINTS));
	g[n++] = point_index(rp, rp->proc->peak_t);
	for (size_t k = 0; k < rp->nmarks && k < REP_STEADY_MARKS; k++)
		if (rp->marks[k].t >= rp->proc->t_start && rp->marks[k].t <= rp->proc->t_end)
			g[n++] = point_index(rp, rp->marks[k].t);
	rp->grid = g;
	rp->ngrid = rep_sort_unique(g, n, sizeof *g, cmp_size);
	return 0;
}

static int snapshots(struct q_db *db, struct rep_proc *rp)
{
	rp->snaps = calloc(rp->npoints, sizeof *rp->snaps);
	rp->kinds = calloc(rp->npoints, sizeof *rp->kinds);
	if (!rp->snaps || !rp->kinds)
		return -1;
	for (size_t i = 0; i < rp->npoints; i++) {
		if (q_snapshot(db, rp->proc->pid, rp->points[i], &rp->snaps[i]))
			return -1;
		int more = q_kind_totals(db, &rp->snaps[i], Q_INUSE_BYTES, rp->kinds[i]);
		if (more < 0)
			return -1;
		rp->has_kinds |= more;
	}
	return 0;
}

/* The steady windows, and the temporary allocations from the same read. */
static int steady_windows(struct q_db *db, struct rep_proc *rp)
{
	size_t n = rp->ngrid * (rp->ngrid - 1) / 2;
	int64_t *t = malloc((rp->ngrid ? rp->ngrid : 1) * sizeof *t);
	rp->steady = calloc(n ? n : 1, sizeof *rp->steady);
	struct q_profile *p = calloc(n ? n : 1, sizeof *p);
	int rc = t && rp->steady && p ? 0 : -1;
	for (size_t i = 0; !rc && i < rp->ngrid; i++)
		t[i] = rp->points[rp->grid[i]];
	if (!rc)
		rc = q_steady_grid(db, rp->proc->pid, t, rp->ngrid, p, &rp->temporary);
	for (size_t i = 0, k = 0; rp->steady && p && i < rp->ngrid; i++)
		for (size_t j = i + 1; j < rp->ngrid; j++, k++)
			rp->steady[rp->nsteady++] = (struct rep_steady){ i, j, p[k] };
	free(t);
	free(p);
	return rc;
}

static int collect_proc(struct q_db *db, struct rep_proc *rp)
{
	int64_t pid = rp->proc->pid;
	if (q_timeline(db, pid, &rp->buckets, &rp->nbuckets) ||
	    q_marks(db, pid, &rp->marks, &rp->nmarks) ||
	    q_counter_series(db, pid, REP_RSS_COUNTER, &rp->rss, &rp->nrss))
		return -1;
	rss_peak(rp);
	if (choose_points(rp) || choose_grid(rp) || snapshots(db, rp) || steady_windows(db, rp))
		return -1;
	return q_peak(db, pid, &rp->peak) || q_leaks(db, pid, &rp->leaks) ? -1 : 0;
}

int rep_collect(struct q_db *db, struct rep_report *r)
{
	const struct q_process *procs = q_processes(db, &r->nprocs);
	r->procs = calloc(r->nprocs ? r->nprocs : 1, sizeof *r->procs);
	if (!r->procs)
		return -1;
	for (size_t i = 0; i < r->nprocs; i++) {
		r->procs[i].proc = &procs[i];
		if (collect_proc(db, &r->procs[i]))
			return -1;
	}
	return 0;
}

void rep_free(struct rep_report *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rep_proc *rp = &r->procs[i];
		free(rp->rss);
		for (size_t k = 0; rp->snaps && k < rp->npoints; k++)
			q_profile_free(&rp->snaps[k]);
		for (size_t k = 0; k < rp->nsteady; k++)
			q_profile_free(&rp->steady[k].p);
		q_profile_free(&rp->peak);
		q_profile_free(&rp->leaks);
		q_profile_free(&rp->temporary);
		free(rp->points);
		free(rp->snaps);
		free(rp->kinds);
		free(rp->grid);
		free(rp->steady);
	}
	free(r->procs);
	free(r->dict.stacks);
	free(r->dict.frames);
	free(r->dict.fns);
	free(r->dict.files);
	memset(r, 0, sizeof *r);
}
