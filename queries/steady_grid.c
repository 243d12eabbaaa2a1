/* steady_grid.c - the steady windows between every two instants of a grid
 * (q_steady_grid, for trace-report), from one filtered pass over the
 * allocations (a statement per grid interval) instead of a read per
 * window, and from the same pass, when asked, the temporary allocations.
 *
 * Grid interval a is (t[a-1], t[a]] (0: up to t[0]; n: after t[n-1]); its
 * rows are an id range (ids follow t_alloc). What window (t[i], t[j]]
 * allocated is the difference of two snapshots' cumulative counts. What it
 * still holds at its end are its rows made in interval a (i < a <= j) and
 * freed in interval b > j (b = n: not by t[n-1]): only rows that outlive
 * their own interval (b > a) can be such, so the read keeps those (and
 * the temporary ones) and SQLite drops the rest, most rows of a churning
 * program, before they cost a column read each (the whole read was four
 * fifths of a report's time on 10 M allocations). Those rows are summed
 * per (stack, a, b) cell; each window adds the cells that belong to it.
 * Never: give another answer than q_steady would for the same window, or
 * than q_temporary for the temporary allocations.
 */
#include <stdlib.h>

#include "qi.h"

struct cell {
	int64_t stack;
	size_t a, b;
	int64_t objects, bytes;
};

struct cells {
	struct cell *c;
	size_t n, cap;
	struct q_map at;                       /* (stack, a, b) key -> index in c */
};

/* The first i with t[i] >= x (n if none). */
static size_t interval(const int64_t *t, size_t n, int64_t x)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int add(struct q_db *db, struct cells *cs, size_t n, int64_t stack, size_t a, size_t b,
               int64_t size)
{
	int64_t side = (int64_t)n + 1;
	if (stack < 0 || stack > (INT64_MAX - side * side) / (side * side))
		return q_fail(db, "%s: stack id %lld out of range", db->path, (long long)stack);
	int64_t key = stack * side * side + (int64_t)a * side + (int64_t)b;
	uint32_t k;
	if (!q_map_get(&cs->at, key, &k)) {
		if (q_grow(&cs->c, &cs->cap, cs->n + 1, sizeof *cs->c) ||
		    q_map_put(&cs->at, key, (uint32_t)cs->n))
			return q_fail(db, "out of memory");
		k = (uint32_t)cs->n++;
		cs->c[k] = (struct cell){ stack, a, b, 0, 0 };
	}
	cs->c[k].objects++;
	cs->c[k].bytes += size;
	return 0;
}

/* The rows of interval a (ids in (lo, hi], ending at instant end) that
 * the SQL keeps: a cell each if it outlives the interval and a is inside
 * the grid, into tmp (unless NULL) if temporary. */
static int read_interval(struct q_db *db, int64_t pid, const int64_t *t, size_t n, size_t a,
                         int64_t lo, int64_t hi, int64_t end, struct cells *cs,
                         struct q_profile *tmp)
{
	sqlite3_stmt *s = q_stmt(db, Q_ST_STEADY_GRID);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":alo"), lo);
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":ahi"), hi);
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":pid"), pid);
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":t"), end);
	bool in_grid = a > 0 && a < n;
	int rc = SQLITE_DONE, failed = 0;
	while (!failed && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t stack = sqlite3_column_int64(s, 0), size = sqlite3_column_int64(s, 1);
		if (tmp && sqlite3_column_int(s, 3) && q_temporary_add(db, tmp, stack, size))
			failed = 1;
		if (failed || !in_grid)
			continue;
		size_t b = sqlite3_column_type(s, 2) == SQLITE_NULL ? n
		         : interval(t, n, sqlite3_column_int64(s, 2));
		if (b > a)
			failed = add(db, cs, n, stack, a, b, size);
	}
	sqlite3_reset(s);
	if (failed)
		return -1;
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, "computing the steady windows");
}

/* The cells of the rows made in (t[0], t[n-1]], interval by interval,
 * and, if tmp is not NULL, tmp's rows (then the rows before t[0] and
 * after t[n-1] are read too, for those alone). */
static int read_cells(struct q_db *db, int64_t pid, const int64_t *t, size_t n, struct cells *cs,
                      struct q_profile *tmp)
{
	long proc = q_proc_index(db, pid);
	int64_t lo = 0, hi;
	for (size_t a = 0; a <= n; a++, lo = hi) {
		if (a == n)
			hi = INT64_MAX;
		else if (q_alloc_id_at(db, proc, t[a], &hi))
			return -1;
		if ((tmp || (a > 0 && a < n)) &&
		    read_interval(db, pid, t, n, a, lo, hi, a < n ? t[a] : INT64_MAX, cs, tmp))
			return -1;
	}
	return 0;
}

/* Window (t[i], t[j]] as q_steady fills a profile: allocated, the
 * difference of the snapshots at t[j] and t[i]; live at t[j], the cells. */
static int window(struct q_db *db, int64_t pid, const int64_t *t, size_t i, size_t j,
                  const struct q_profile *snap, const struct cells *cs, struct q_profile *p)
{
	long k = q_proc_index(db, pid);
	*p = (struct q_profile){ .kind = Q_STEADY, .pid = pid, .t1 = t[i], .t2 = t[j],
	                         .sample_period = db->procs[k].sample_period,
	                         .rows = p->rows, .cap = p->cap };
	q_map_clear(&db->rowmap);
	for (int side = 0; side < 2; side++) {
		const struct q_profile *s = &snap[side ? i : j];
		int64_t sign = side ? -1 : 1;
		for (size_t r = 0; r < s->n; r++) {
			struct q_row *w = q_prow(db, p, s->rows[r].stack_id);
			if (!w)
				return -1;
			w->v[Q_ALLOC_OBJECTS] += sign * s->rows[r].v[Q_ALLOC_OBJECTS];
			w->v[Q_ALLOC_BYTES] += sign * s->rows[r].v[Q_ALLOC_BYTES];
		}
	}
	for (size_t c = 0; c < cs->n; c++) {
		const struct cell *x = &cs->c[c];
		if (x->a <= i || x->a > j || x->b <= j)
			continue;
		struct q_row *r = q_prow(db, p, x->stack);
		if (!r)
			return -1;
		r->v[Q_INUSE_OBJECTS] += x->objects;
		r->v[Q_INUSE_BYTES] += x->bytes;
	}
	q_pcompact(p);
	return 0;
}

/* snap[k]: the snapshot at t[k], for its cumulative allocation counts. */
static int grid_snapshots(struct q_db *db, int64_t pid, const int64_t *t, size_t n,
                          struct q_profile *snap)
{
	for (size_t k = 0; k < n; k++)
		if (q_snapshot(db, pid, t[k], &snap[k]))
			return -1;
	return 0;
}

int q_steady_grid(struct q_db *db, int64_t pid, const int64_t *t, size_t n, struct q_profile *out,
                  struct q_profile *temporary)
{
	if (q_proc_index(db, pid) < 0)
		return q_fail(db, "%s: no process with pid %lld", db->path, (long long)pid);
	int on = q_tf_on(db, pid);
	size_t k = 0;
	if (on < 0)
		return -1;
	if (on || n < 2) {                     /* a thread filter (or no window): one by one */
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				if (q_steady(db, pid, t[i], t[j], &out[k++]))
					return -1;
		return temporary ? q_temporary(db, pid, temporary) : 0;
	}
	struct cells cs = { 0 };
	struct q_profile *snap = calloc(n, sizeof *snap);
	int rc = snap ? grid_snapshots(db, pid, t, n, snap) : q_fail(db, "out of memory");
	if (!rc && temporary)
		q_temporary_begin(db, pid, temporary);
	if (!rc)
		rc = read_cells(db, pid, t, n, &cs, temporary);
	for (size_t i = 0; !rc && i < n; i++)
		for (size_t j = i + 1; !rc && j < n; j++)
			rc = window(db, pid, t, i, j, snap, &cs, &out[k++]);
	for (size_t i = 0; snap && i < n; i++)
		q_profile_free(&snap[i]);
	free(snap);
	free(cs.c);
	q_map_free(&cs.at);
	return rc;
}
