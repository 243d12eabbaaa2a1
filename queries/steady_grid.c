/* steady_grid.c - the steady windows between every two instants of a grid
 * (q_steady_grid, for trace-report), from one read of the allocations
 * instead of one per window, and from the same read, when asked, the
 * temporary allocations (a report's second read of the whole table was a
 * fifth of its time on 10 M allocations).
 *
 * An allocation made in grid interval a (t[a-1] < t_alloc <= t[a]) and
 * freed in interval b (t[b-1] < t_free <= t[b]; b = n: not by t[n-1])
 * belongs to window (t[i], t[j]] when i < a <= j, and is live at its end
 * when j < b. The read sums allocations per (stack, a, b) cell; each
 * window then adds the cells that belong to it.
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

/* One read: the cells of the rows made in (t[0], t[n-1]] and, if tmp is
 * not NULL, tmp's rows (then every row of the process is read). */
static int read_cells(struct q_db *db, int64_t pid, const int64_t *t, size_t n, struct cells *cs,
                      struct q_profile *tmp)
{
	int64_t alo = 0, ahi = INT64_MAX;
	long proc = q_proc_index(db, pid);
	if (!tmp && (q_alloc_id_at(db, proc, t[0], &alo) || q_alloc_id_at(db, proc, t[n - 1], &ahi)))
		return -1;
	sqlite3_stmt *s = q_stmt(db, Q_ST_STEADY_GRID);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":alo"), alo);
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":ahi"), ahi);
	sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":pid"), pid);
	int rc = SQLITE_DONE, failed = 0;
	while (!failed && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t stack = sqlite3_column_int64(s, 0), size = sqlite3_column_int64(s, 1);
		int64_t made = sqlite3_column_int64(s, 2);
		if (tmp && sqlite3_column_int(s, 4) && q_temporary_add(db, tmp, stack, size))
			failed = 1;
		if (failed || made <= t[0] || made > t[n - 1])
			continue;
		size_t b = sqlite3_column_type(s, 3) == SQLITE_NULL ? n
		         : interval(t, n, sqlite3_column_int64(s, 3));
		failed = add(db, cs, n, stack, interval(t, n, made), b, size);
	}
	sqlite3_reset(s);
	if (failed)
		return -1;
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, "computing the steady windows");
}

/* Window (t[i], t[j]] from the cells, as q_steady fills a profile. */
static int window(struct q_db *db, int64_t pid, const int64_t *t, size_t i, size_t j,
                  const struct cells *cs, struct q_profile *p)
{
	long k = q_proc_index(db, pid);
	*p = (struct q_profile){ .kind = Q_STEADY, .pid = pid, .t1 = t[i], .t2 = t[j],
	                         .sample_period = db->procs[k].sample_period,
	                         .rows = p->rows, .cap = p->cap };
	q_map_clear(&db->rowmap);
	for (size_t c = 0; c < cs->n; c++) {
		const struct cell *x = &cs->c[c];
		if (x->a <= i || x->a > j)
			continue;
		struct q_row *r = q_prow(db, p, x->stack);
		if (!r)
			return -1;
		r->v[Q_ALLOC_OBJECTS] += x->objects;
		r->v[Q_ALLOC_BYTES] += x->bytes;
		if (j < x->b) {
			r->v[Q_INUSE_OBJECTS] += x->objects;
			r->v[Q_INUSE_BYTES] += x->bytes;
		}
	}
	q_pcompact(p);
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
	if (temporary)
		q_temporary_begin(db, pid, temporary);
	int rc = read_cells(db, pid, t, n, &cs, temporary);
	for (size_t i = 0; !rc && i < n; i++)
		for (size_t j = i + 1; !rc && j < n; j++)
			rc = window(db, pid, t, i, j, &cs, &out[k++]);
	free(cs.c);
	q_map_free(&cs.at);
	return rc;
}
