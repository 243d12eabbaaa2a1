/* profile.c - the per-stack profiles: snapshot (nearest checkpoint + the
 * events since), and the questions built on it (peak, growth, leaks, top)
 * or on their own SQL (steady, temporary). Under a thread filter each
 * defers to tfilter.c, which computes the same from those threads' rows.
 *
 * Never: scan the allocations table for a snapshot (the SQL reads rowid
 * ranges bounded by checkpoints), or prepare a statement per call.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* Parameter numbers of snapshot.sql and steady.sql, by name. */
static int param(sqlite3_stmt *s, const char *name)
{
	return sqlite3_bind_parameter_index(s, name);
}

static void start(struct q_db *db, struct q_profile *p, enum q_kind kind, int64_t pid,
                  int64_t t1, int64_t t2)
{
	p->kind = kind;
	p->pid = pid;
	p->t1 = t1;
	p->t2 = t2;
	p->n = 0;
	p->kinds = 0;
	long i = q_proc_index(db, pid);
	p->sample_period = i < 0 ? 0 : db->procs[i].sample_period;
	q_map_clear(&db->rowmap);
}

struct q_row *q_prow(struct q_db *db, struct q_profile *p, int64_t stack)
{
	uint32_t k;
	if (q_map_get(&db->rowmap, stack, &k))
		return &p->rows[k];
	if (q_grow(&p->rows, &p->cap, p->n + 1, sizeof *p->rows) ||
	    q_map_put(&db->rowmap, stack, (uint32_t)p->n)) {
		q_fail(db, "out of memory");
		return NULL;
	}
	struct q_row *r = &p->rows[p->n++];
	memset(r, 0, sizeof *r);
	r->stack_id = stack;
	return r;
}

void q_pcompact(struct q_profile *p)
{
	size_t w = 0;
	for (size_t i = 0; i < p->n; i++) {
		const int64_t *v = p->rows[i].v;
		if (v[0] | v[1] | v[2] | v[3])
			p->rows[w++] = p->rows[i];
	}
	p->n = w;
}

/* Sums the rows of a statement (stack_id, then Q_NVAL values) into p. */
static int sum_rows(struct q_db *db, sqlite3_stmt *s, struct q_profile *p, const char *what)
{
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct q_row *r = q_prow(db, p, sqlite3_column_int64(s, 0));
		if (!r)
			return -1;
		for (int k = 0; k < Q_NVAL; k++)
			r->v[k] += sqlite3_column_int64(s, 1 + k);
	}
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, what);
}

/* Index of the first checkpoint of pd after t (pd->nck if none). */
static size_t next_ckpt(const struct q_pdata *pd, int64_t t)
{
	size_t lo = 0, hi = pd->nck;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pd->ck[mid].t <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The checkpoint at or before t (NULL: none) and the alloc/free ids that
 * bound the events after it up to the next checkpoint. */
static const struct q_ckpt *bracket(const struct q_pdata *pd, int64_t t, int64_t *ahi,
                                    int64_t *fhi)
{
	size_t lo = next_ckpt(pd, t);
	*ahi = lo < pd->nck ? pd->ck[lo].alloc_id : INT64_MAX;
	*fhi = lo < pd->nck ? pd->ck[lo].free_id : INT64_MAX;
	return lo ? &pd->ck[lo - 1] : NULL;
}

/* The first event at or after number mid: 1 with its number and time, 0
 * if there is none, -1 on error. */
typedef int probe_fn(struct q_db *db, int64_t mid, int64_t *id, int64_t *t);

/* Allocations: rows may be missing from a range (alloc_at.sql). */
static int alloc_probe(struct q_db *db, int64_t mid, int64_t *id, int64_t *t)
{
	sqlite3_stmt *s;
	int rc = q_row1(db, Q_ST_ALLOC_AT, mid, &s, "bisecting the allocations");
	if (rc <= 0)
		return rc;
	*id = sqlite3_column_int64(s, 0);
	*t = sqlite3_column_int64(s, 1);
	return 1;
}

/* Frees: numbered without gaps; a free's time is its allocation's t_free. */
static int free_probe(struct q_db *db, int64_t mid, int64_t *id, int64_t *t)
{
	const struct q_free *f;
	int rc = q_free_get(db, mid, &f);
	if (rc <= 0)
		return rc;
	sqlite3_stmt *s;
	if ((rc = q_row1(db, Q_ST_FREE_TIME, f->alloc_id, &s, "reading a free's time")) < 0)
		return -1;
	if (!rc || sqlite3_column_type(s, 0) != SQLITE_INTEGER)
		return q_fail(db, "%s: free %lld names allocation %lld, which is missing or "
		              "was never freed", db->path, (long long)mid, (long long)f->alloc_id);
	*id = mid;
	*t = sqlite3_column_int64(s, 0);
	return 1;
}

/* The last number in [lo, hi] whose time is <= t, or lo if none is
 * (numbers ascend with time): bisection with point lookups, so the events
 * between are never read. */
static int last_at(struct q_db *db, probe_fn *probe, int64_t lo, int64_t hi, int64_t t,
                   int64_t *out)
{
	/* Invariant: events numbered <= a are at or before t; those numbered
	 * >= b are after t (or absent). */
	int64_t a = lo, b = hi == INT64_MAX ? hi : hi + 1;
	while (b - a > 1) {
		int64_t mid = a + (b - a) / 2, id = 0, at = 0;
		int rc = probe(db, mid, &id, &at);
		if (rc < 0)
			return -1;
		if (rc && at <= t)
			a = id;                  /* the event found, at or after mid */
		else
			b = mid;
	}
	*out = a;
	return 0;
}

int q_alloc_id_at(struct q_db *db, long proc, int64_t t, int64_t *id)
{
	int64_t ahi, fhi;
	const struct q_ckpt *c = bracket(&db->pd[proc], t, &ahi, &fhi);
	return last_at(db, alloc_probe, c ? c->alloc_id : 0, ahi, t, id);
}

/* Frees numbered (lo, hi] of process proc, of allocations numbered up to
 * alo, into p: sign -1 takes them off the live set (a snapshot forwards
 * from a checkpoint), +1 puts them back (backwards). */
static int add_frees(struct q_db *db, struct q_profile *p, int64_t lo, int64_t hi,
                     int64_t alo, int64_t proc, int sign)
{
	const struct q_free *f;
	int rc;
	for (int64_t id = lo + 1; id <= hi && (rc = q_free_get(db, id, &f)) != 0; id++) {
		if (rc < 0)
			return -1;
		if (f->alloc_id > alo || f->proc != proc)
			continue;
		struct q_row *r = q_prow(db, p, f->stack_id);
		if (!r)
			return -1;
		r->v[0] += sign;
		r->v[1] += sign * f->size;
	}
	return 0;
}

/* Snapshot at t from the nearer of the two checkpoints around t: forwards
 * from the previous one (snapshot.sql) or backwards from the next one
 * (snapshot_back.sql), reading only the events between t and it. */
static int snapshot_into(struct q_db *db, int64_t pid, int64_t t, struct q_profile *p,
                         enum q_kind kind)
{
	start(db, p, kind, pid, t, t);
	long i = q_proc_index(db, pid);
	int on = i < 0 ? -1 : q_tf_on(db, pid);
	if (on)
		return on < 0 ? -1 : q_tf_snapshot(db, t, p);
	const struct q_pdata *pd = &db->pd[i];
	size_t n = next_ckpt(pd, t);
	const struct q_ckpt *prev = n ? &pd->ck[n - 1] : NULL;
	const struct q_ckpt *next = n < pd->nck ? &pd->ck[n] : NULL;
	int64_t alo = prev ? prev->alloc_id : 0, flo = prev ? prev->free_id : 0;
	int64_t ahi = next ? next->alloc_id : INT64_MAX, fhi = next ? next->free_id : INT64_MAX;
	int64_t at, ft;                        /* last alloc / free id at or before t */
	if (last_at(db, alloc_probe, alo, ahi, t, &at) || last_at(db, free_probe, flo, fhi, t, &ft))
		return -1;
	bool back = next && (ahi - at) + (fhi - ft) < (at - alo) + (ft - flo);
	sqlite3_stmt *s = q_stmt(db, back ? Q_ST_SNAPSHOT_BACK : Q_ST_SNAPSHOT);
	if (!s)
		return -1;
	if (back) {
		sqlite3_bind_int64(s, param(s, ":ckpt"), next->id);
		sqlite3_bind_int64(s, param(s, ":tc"), next->t);
		sqlite3_bind_int64(s, param(s, ":alo"), at);
		sqlite3_bind_int64(s, param(s, ":ahi"), ahi);
	} else {
		sqlite3_bind_int64(s, param(s, ":ckpt"), prev ? prev->id : -1);
		sqlite3_bind_int64(s, param(s, ":t"), t);
		sqlite3_bind_int64(s, param(s, ":alo"), alo);
		sqlite3_bind_int64(s, param(s, ":ahi"), at);
	}
	sqlite3_bind_int64(s, param(s, ":pid"), pid);
	/* + frees after t up to the next checkpoint of blocks made by t
	 * (backwards: live again), or - frees from the checkpoint up to t of
	 * blocks it holds (forwards) */
	if (sum_rows(db, s, p, "computing a snapshot") ||
	    (back ? add_frees(db, p, ft, fhi, at, db->procs[i].proc, 1)
	          : add_frees(db, p, flo, ft, alo, db->procs[i].proc, -1)))
		return -1;
	q_pcompact(p);
	return 0;
}

int q_snapshot(struct q_db *db, int64_t pid, int64_t t, struct q_profile *p)
{
	return snapshot_into(db, pid, t, p, Q_SNAPSHOT);
}

int q_peak_time(struct q_db *db, int64_t pid, int64_t *t)
{
	int on = q_tf_on(db, pid);
	if (on) {
		*t = db->filt.peak_t;
		return on < 0 ? -1 : 0;
	}
	sqlite3_stmt *s = q_stmt(db, Q_ST_PEAK);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, param(s, ":pid"), pid);
	int rc = sqlite3_step(s);
	*t = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return q_proc_index(db, pid) < 0 ? -1 : q_fail(db, "%s: no peak", db->path);
	return rc == SQLITE_ROW ? 0 : q_sqlfail(db, "reading the peak");
}

int q_peak(struct q_db *db, int64_t pid, struct q_profile *p)
{
	int64_t t;
	return q_peak_time(db, pid, &t) ? -1 : snapshot_into(db, pid, t, p, Q_PEAK);
}

/* Live at the end, and only the stacks that still hold something: a stack
 * whose allocations were all freed leaked nothing. */
int q_leaks(struct q_db *db, int64_t pid, struct q_profile *p)
{
	long i = q_proc_index(db, pid);
	if (i < 0 || snapshot_into(db, pid, db->procs[i].t_end, p, Q_LEAKS))
		return -1;
	size_t w = 0;
	for (size_t k = 0; k < p->n; k++)
		if (p->rows[k].v[Q_INUSE_OBJECTS] || p->rows[k].v[Q_INUSE_BYTES])
			p->rows[w++] = p->rows[k];
	p->n = w;
	return 0;
}

/* p = p - base, stack by stack (p's map is rebuilt first). */
static int subtract(struct q_db *db, struct q_profile *p, const struct q_profile *base)
{
	q_map_clear(&db->rowmap);
	for (size_t i = 0; i < p->n; i++)
		if (q_map_put(&db->rowmap, p->rows[i].stack_id, (uint32_t)i))
			return q_fail(db, "out of memory");
	for (size_t i = 0; i < base->n; i++) {
		struct q_row *r = q_prow(db, p, base->rows[i].stack_id);
		if (!r)
			return -1;
		for (int k = 0; k < Q_NVAL; k++)
			r->v[k] -= base->rows[i].v[k];
	}
	q_pcompact(p);
	return 0;
}

int q_growth(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_profile *p)
{
	if (snapshot_into(db, pid, t1, &db->tmp, Q_SNAPSHOT) ||
	    snapshot_into(db, pid, t2, p, Q_GROWTH) || subtract(db, p, &db->tmp))
		return -1;
	p->t1 = t1;
	return 0;
}

/* Allocations in [t1, t2] = cumulative allocations up to t2 minus those up
 * to t1 - 1: two snapshots, never a scan of the window. */
int q_top(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_profile *p)
{
	if (snapshot_into(db, pid, t1 - 1, &db->tmp, Q_SNAPSHOT) ||
	    snapshot_into(db, pid, t2, p, Q_TOP) || subtract(db, p, &db->tmp))
		return -1;
	p->t1 = t1;
	for (size_t i = 0; i < p->n; i++) {
		int64_t *v = p->rows[i].v;
		v[Q_INUSE_OBJECTS] = v[Q_ALLOC_OBJECTS];
		v[Q_INUSE_BYTES] = v[Q_ALLOC_BYTES];
	}
	q_pcompact(p);
	return 0;
}

int q_steady(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_profile *p)
{
	start(db, p, Q_STEADY, pid, t1, t2);
	long i = q_proc_index(db, pid);
	int on = i < 0 ? -1 : q_tf_on(db, pid);
	sqlite3_stmt *s;
	if (on)
		return on < 0 ? -1 : q_tf_steady(db, t1, t2, p);
	/* Exact rowid bounds of the window. */
	int64_t at[2];
	if (q_alloc_id_at(db, i, t1, &at[0]) || q_alloc_id_at(db, i, t2, &at[1]))
		return -1;
	if (!(s = q_stmt(db, Q_ST_STEADY)))
		return -1;
	sqlite3_bind_int64(s, param(s, ":alo"), at[0]);
	sqlite3_bind_int64(s, param(s, ":ahi"), at[1]);
	sqlite3_bind_int64(s, param(s, ":t1"), t1);
	sqlite3_bind_int64(s, param(s, ":t2"), t2);
	sqlite3_bind_int64(s, param(s, ":pid"), pid);
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct q_row *r = q_prow(db, p, sqlite3_column_int64(s, 0));
		if (!r)
			return -1;
		int64_t size = sqlite3_column_int64(s, 1);
		int live = sqlite3_column_int(s, 2);
		r->v[Q_ALLOC_OBJECTS]++;
		r->v[Q_ALLOC_BYTES] += size;
		r->v[Q_INUSE_OBJECTS] += live;
		r->v[Q_INUSE_BYTES] += live ? size : 0;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return q_sqlfail(db, "computing the steady window");
	q_pcompact(p);
	return 0;
}

void q_temporary_begin(struct q_db *db, int64_t pid, struct q_profile *p)
{
	long i = q_proc_index(db, pid);
	start(db, p, Q_TEMPORARY, pid, db->procs[i].t_start, db->procs[i].t_end);
}

int q_temporary_add(struct q_db *db, struct q_profile *p, int64_t stack, int64_t size)
{
	struct q_row *r = q_prow(db, p, stack);
	if (!r)
		return -1;
	r->v[Q_ALLOC_OBJECTS]++;
	r->v[Q_ALLOC_BYTES] += size;
	r->v[Q_INUSE_OBJECTS]++;
	r->v[Q_INUSE_BYTES] += size;
	return 0;
}

int q_temporary(struct q_db *db, int64_t pid, struct q_profile *p)
{
	sqlite3_stmt *s;
	if (q_proc_index(db, pid) < 0 || !(s = q_stmt(db, Q_ST_TEMPORARY)))
		return -1;
	q_temporary_begin(db, pid, p);
	int on = q_tf_on(db, pid);
	if (on)
		return on < 0 ? -1 : q_tf_temporary(db, p);
	sqlite3_bind_int64(s, param(s, ":pid"), pid);
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if (q_temporary_add(db, p, sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1)))
			break;
	sqlite3_reset(s);
	if (rc == SQLITE_ROW)
		return -1;
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, "computing temporary allocations");
}

void q_profile_free(struct q_profile *p)
{
	free(p->rows);
	p->rows = NULL;
	p->n = p->cap = 0;
}

void q_totals(const struct q_profile *p, int64_t tot[Q_NVAL])
{
	for (int k = 0; k < Q_NVAL; k++)
		tot[k] = 0;
	for (size_t i = 0; i < p->n; i++)
		for (int k = 0; k < Q_NVAL; k++)
			tot[k] += p->rows[i].v[k];
}

/* heap-formats.md §1.5, per pair; truncation as Go pprof does. */
static void unbias_pair(int64_t n, int64_t b, int64_t period, int64_t *on, int64_t *ob)
{
	if (period <= 1 || n == 0) {
		*on = n;
		*ob = b;
		return;
	}
	double avg = (double)b / (double)n;
	if (avg <= 0) {                /* a growth row with mixed signs: no model */
		*on = n;
		*ob = b;
		return;
	}
	double scale = 1.0 / (1.0 - exp(-avg / (double)period));
	*on = (int64_t)((double)n * scale);
	*ob = (int64_t)((double)b * scale);
}

void q_unbias(const struct q_row *in, int64_t period, struct q_row *out)
{
	out->stack_id = in->stack_id;
	unbias_pair(in->v[Q_INUSE_OBJECTS], in->v[Q_INUSE_BYTES], period,
	            &out->v[Q_INUSE_OBJECTS], &out->v[Q_INUSE_BYTES]);
	unbias_pair(in->v[Q_ALLOC_OBJECTS], in->v[Q_ALLOC_BYTES], period,
	            &out->v[Q_ALLOC_OBJECTS], &out->v[Q_ALLOC_BYTES]);
}
