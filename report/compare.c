/* compare.c - trace-report NEW --base OLD: the same question asked of two
 * runs (each database resolves its own peak, instants and marks, as
 * trace-snap --base does), then compared by the query library's comparison
 * of two runs: the differential call tree (q_flame_add, the new run's
 * widths as trace-snap --base --format svg draws them) and the table of
 * functions by change (q_diff_functions), frames matched by function and
 * file (the caller opened both databases with q_by_files).
 *
 * Never: SQL here; match or sum frames itself (flame.c and diff.c do, so
 * that the page and trace-snap --base give one answer); print.
 */
#include <stdlib.h>
#include <string.h>

#include "rep.h"

int rep_ask(struct q_db *db, enum rep_question q, int64_t pid, int64_t t1, int64_t t2,
            struct q_profile *p)
{
	switch (q) {
	case REP_AT: return q_snapshot(db, pid, t2, p);
	case REP_GROWTH: return q_growth(db, pid, t1, t2, p);
	case REP_STEADY: return q_steady(db, pid, t1, t2, p);
	case REP_LEAKS: return q_leaks(db, pid, p);
	case REP_TEMPORARY: return q_temporary(db, pid, p);
	case REP_PEAK: break;
	}
	return q_peak(db, pid, p);
}

int rep_compare(struct rep_diff *d)
{
	struct rep_run *b = &d->run[Q_SIDE_BASE], *n = &d->run[Q_SIDE_NEW];
	for (int side = 0; side < Q_SIDES; side++) {
		struct rep_run *r = &d->run[side];
		r->facts.rss_peak_t = Q_NEVER;
		d->total[side] = q_total_unbiased(&r->p, REP_DIFF_KEY);
		if (q_timeline(r->db, r->p.pid, &r->facts.buckets, &r->facts.nbuckets) ||
		    q_flame_add(r->db, &r->p, side, REP_DIFF_KEY, &d->tree))
			return -1;
	}
	q_flame_base_only(&d->tree, REP_DIFF_KEY, &d->base_only_paths, &d->base_only_bytes);
	return q_diff_functions(b->db, &b->p, n->db, &n->p, REP_DIFF_KEY, &d->fns);
}

void rep_diff_free(struct rep_diff *d)
{
	for (int side = 0; side < Q_SIDES; side++) {
		q_profile_free(&d->run[side].p);
		q_close(d->run[side].db);
	}
	q_flame_free(&d->tree);
	q_diff_table_free(&d->fns);
	memset(d, 0, sizeof *d);
}
