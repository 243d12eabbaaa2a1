/* diff.c - the difference between two runs (trace-snap --base, like pprof
 * -base but for two databases): the same question asked of each (the
 * caller's q_profiles), compared function by function and path by path,
 * frames matched by the names the outputs give them (flame.c), never by
 * address, since each run has its own layout: trace-snap names them by
 * function and file (q_by_files) or by file:line (q_by_lines). Written as
 * text (per function: base, new, change), as signed folded stacks, or as a
 * differential flame graph (svg.c: the new run's widths, growth red,
 * shrinkage blue). Values unbiased if sampled.
 *
 * Never: read one database's function index as the other's, hide what a
 * graph leaves out (paths only in the base, shrinking stacks of a growth:
 * said in its header), or change either profile.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* Starts each line of what an answer lacks; then which run it is about. */
#define WARNING "Warning: "
/* A cell holds an int64 with its sign, or "-1023.9 KiB", and the NUL. */
#define CELL 24

/* ---- per function ---------------------------------------------------- */

/* One function's row of q_by_function, in one run. */
struct side_row { const char *name; int side; const struct q_fn_row *r; };

static int cmp_side_row(const void *a, const void *b)
{
	const struct side_row *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : x->side - y->side;
}

static int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }

static int cmp_change(const void *a, const void *b)
{
	const struct q_diff_fn *x = a, *y = b;
	int64_t fx = magnitude(x->flat[Q_SIDE_NEW] - x->flat[Q_SIDE_BASE]);
	int64_t fy = magnitude(y->flat[Q_SIDE_NEW] - y->flat[Q_SIDE_BASE]);
	int64_t cx = magnitude(x->cum[Q_SIDE_NEW] - x->cum[Q_SIDE_BASE]);
	int64_t cy = magnitude(y->cum[Q_SIDE_NEW] - y->cum[Q_SIDE_BASE]);
	if (fx != fy)
		return fx > fy ? -1 : 1;
	if (cx != cy)
		return cx > cy ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Both runs' rows by name, joined: each name once, its flat and cum per side. */
static int join(struct q_db *db, struct side_row *s, size_t n, int key, struct q_diff_table *t)
{
	qsort(s, n, sizeof *s, cmp_side_row);
	for (size_t i = 0; i < n; i++) {
		if (!i || strcmp(s[i].name, s[i - 1].name)) {
			if (q_grow(&t->rows, &t->cap, t->n + 1, sizeof *t->rows))
				return q_fail(db, "out of memory");
			memset(&t->rows[t->n], 0, sizeof *t->rows);
			t->rows[t->n++].name = s[i].name;
		}
		struct q_diff_fn *r = &t->rows[t->n - 1];
		r->flat[s[i].side] = s[i].r->flat[key];
		r->cum[s[i].side] = s[i].r->cum[key];
	}
	if (t->n)
		qsort(t->rows, t->n, sizeof *t->rows, cmp_change);
	return 0;
}

int q_diff_functions(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                     const struct q_profile *p, int key, struct q_diff_table *t)
{
	struct q_fn_table ft[Q_SIDES] = { { 0 } };
	struct side_row *s = NULL;
	int rc = -1;
	t->n = 0;
	if (q_by_function(base, pb, key, &ft[Q_SIDE_BASE])) {
		q_fail(db, "%s", q_errmsg(base));
		goto out;
	}
	if (q_by_function(db, p, key, &ft[Q_SIDE_NEW]))
		goto out;
	size_t n = 0;
	if (!(s = malloc((ft[0].n + ft[1].n + 1) * sizeof *s))) {
		q_fail(db, "out of memory");
		goto out;
	}
	for (int side = 0; side < Q_SIDES; side++)
		for (size_t i = 0; i < ft[side].n; i++)
			s[n++] = (struct side_row){ q_fn_name(side ? db : base, ft[side].rows[i].fn), side,
			                            &ft[side].rows[i] };
	rc = join(db, s, n, key, t);
out:
	free(s);
	q_fn_table_free(&ft[0]);
	q_fn_table_free(&ft[1]);
	return rc;
}

void q_diff_table_free(struct q_diff_table *t)
{
	free(t->rows);
	memset(t, 0, sizeof *t);
}

/* ---- the text table ----------------------------------------------------- */

/* The column names; a human size follows each byte count. */
static const char *const col_names[] = { "base", "new", "change", "cum-change" };
#define NCOLS (int)(sizeof col_names / sizeof *col_names)

/* Whether the row shows nothing but zeros (a caller's cum, unchanged). */
static bool all_zero(const struct q_diff_fn *r)
{
	return !r->flat[Q_SIDE_BASE] && !r->flat[Q_SIDE_NEW] &&
	       r->cum[Q_SIDE_BASE] == r->cum[Q_SIDE_NEW];
}

/* The cells of line i of the table: 0 the header, else row i - 1 (bytes:
 * each value, then its human size); returns how many. */
static int line_cells(const struct q_diff_table *t, size_t i, int key, char c[2 * NCOLS][CELL])
{
	const struct q_diff_fn *r = i ? &t->rows[i - 1] : NULL;
	int n = 0;
	for (int k = 0; k < NCOLS; k++) {
		int64_t v = !r ? 0 : k == 0 ? r->flat[Q_SIDE_BASE] : k == 1 ? r->flat[Q_SIDE_NEW]
		          : k == 2 ? r->flat[Q_SIDE_NEW] - r->flat[Q_SIDE_BASE]
		          : r->cum[Q_SIDE_NEW] - r->cum[Q_SIDE_BASE];
		if (!r)
			snprintf(c[n++], CELL, "%s", col_names[k]);
		else
			snprintf(c[n++], CELL, k >= 2 && v > 0 ? "+%" PRId64 : "%" PRId64, v);
		if (q_key_is_bytes(key) && r)
			q_human_bytes(c[n++], CELL, v);
		else if (q_key_is_bytes(key))
			snprintf(c[n++], CELL, "human");
	}
	return n;
}

/* The table: the widths of the header and every row shown (first pass),
 * then each line right-aligned, the name last (second pass). */
static void put_table(const struct q_diff_table *t, int key, FILE *f)
{
	char c[2 * NCOLS][CELL];
	int w[2 * NCOLS] = { 0 };
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i <= t->n; i++) {
			if (i && all_zero(&t->rows[i - 1]))
				continue;
			int n = line_cells(t, i, key, c);
			for (int k = 0; k < n; k++) {
				if (pass)
					fprintf(f, "%s%*s", k ? " " : "", w[k], c[k]);
				else if ((int)strlen(c[k]) > w[k])
					w[k] = (int)strlen(c[k]);
			}
			if (pass)
				fprintf(f, "  %s\n", i ? t->rows[i - 1].name : "function");
		}
	}
}

/* Right after the Total line: which run is which, then what each lacks. */
static int put_runs(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                    const struct q_profile *p, int key, FILE *f)
{
	fputs("Base: ", f);
	q_describe(base, pb, key, f);
	fputs("\nNew: ", f);
	q_describe(db, p, key, f);
	fputc('\n', f);
	if (q_write_lacks(base, pb, WARNING "base: ", f))
		return q_fail(db, "%s", q_errmsg(base));
	return q_write_lacks(db, p, WARNING "new: ", f);
}

/* "Total: CHANGE, from BASE in the base to NEW in the new run". */
static void put_total(int64_t b, int64_t n, int key, FILE *f)
{
	fputs("Total: ", f);
	q_put_value(n - b, key, true, f);
	fputs(", from ", f);
	q_put_value(b, key, false, f);
	fputs(" in the base to ", f);
	q_put_value(n, key, false, f);
	fputs(" in the new run\n", f);
}

int64_t q_total_unbiased(const struct q_profile *p, int key)
{
	int64_t sum = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		sum += u.v[key];
	}
	return sum;
}

static int diff_text(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                     const struct q_profile *p, int key, FILE *f)
{
	struct q_diff_table t = { 0 };
	int rc = q_diff_functions(base, pb, db, p, key, &t);
	if (!rc) {
		put_total(q_total_unbiased(pb, key), q_total_unbiased(p, key), key, f);
		rc = put_runs(base, pb, db, p, key, f);
	}
	if (!rc)
		put_table(&t, key, f);
	q_diff_table_free(&t);
	return rc;
}

/* ---- folded stacks, signed ------------------------------------------------ */

/* Each path whose own value changed: its names root first, the change. */
static int diff_folded(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                       const struct q_profile *p, int key, FILE *f)
{
	struct q_flame fl = { 0 };
	int rc = q_flame_add(base, pb, Q_SIDE_BASE, -1, &fl);
	if (rc)
		q_fail(db, "%s", q_errmsg(base));
	else
		rc = q_flame_add(db, p, Q_SIDE_NEW, -1, &fl);
	int *path = rc ? NULL : malloc((fl.n + 1) * sizeof *path);
	if (!rc && !path)
		rc = q_fail(db, "out of memory");
	for (size_t i = 0; i < fl.n && !rc; i++) {
		const struct q_fnode *x = &fl.nodes[i];
		int64_t change = x->self[Q_SIDE_NEW][key] - x->self[Q_SIDE_BASE][key];
		if (!change)
			continue;
		size_t depth = 0;
		for (int at = (int)i; at > 0; at = fl.nodes[at].parent)
			path[depth++] = at;
		if (!depth)
			fputs("[unknown]", f);         /* a stack without frames, as folded.c */
		while (depth--) {
			q_put_folded_name(fl.nodes[path[depth]].name, f);
			if (depth)
				fputc(';', f);
		}
		fprintf(f, " %" PRId64 "\n", change);
	}
	free(path);
	q_flame_free(&fl);
	return rc;
}

/* ---- the differential flame graph ------------------------------------- */

void q_flame_base_only(const struct q_flame *fl, int key, int64_t *paths, int64_t *sum)
{
	*paths = *sum = 0;
	for (size_t i = 1; i < fl->n; i++) {
		const struct q_fnode *x = &fl->nodes[i];
		if (x->total[Q_SIDE_NEW][key] <= 0 && x->total[Q_SIDE_BASE][key] > 0 &&
		    fl->nodes[x->parent].total[Q_SIDE_NEW][key] > 0) {
			++*paths;
			*sum += x->total[Q_SIDE_BASE][key];
		}
	}
}

/* What the header of a differential graph needs. */
struct two {
	struct q_db *base;
	const struct q_profile *pb, *p;
	const struct q_flame *fl;
	int key;
};

static int svg_head(struct q_db *db, const void *ctx, FILE *f)
{
	const struct two *t = ctx;
	int64_t paths, sum;
	fputs("Differential flame graph: widths from the new run, growth red, shrinkage blue\n",
	      f);
	put_total(t->fl->nodes[0].total[Q_SIDE_BASE][t->key],
	          t->fl->nodes[0].total[Q_SIDE_NEW][t->key], t->key, f);
	q_flame_base_only(t->fl, t->key, &paths, &sum);
	if (paths) {
		fprintf(f, "Left out: %" PRId64 " call path%s of the base with nothing in the new run "
		        "(", paths, paths == 1 ? "" : "s");
		q_put_value(sum, t->key, false, f);
		fputs(" in the base) not drawn (--format text shows them)\n", f);
	}
	q_describe_dropped(t->pb, t->key, "Left out: base: ", f);
	q_describe_dropped(t->p, t->key, "Left out: new: ", f);
	return put_runs(t->base, t->pb, db, t->p, t->key, f);
}

static int diff_svg(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                    const struct q_profile *p, int key, FILE *f)
{
	struct q_flame fl = { 0 };
	struct two t = { base, pb, p, &fl, key };
	int rc = q_flame_add(base, pb, Q_SIDE_BASE, key, &fl);
	if (rc)
		q_fail(db, "%s", q_errmsg(base));
	else if (!(rc = q_flame_add(db, p, Q_SIDE_NEW, key, &fl)))
		rc = q_svg_draw(db, &fl, true, key, svg_head, &t, f);
	q_flame_free(&fl);
	return rc;
}

int q_write_diff(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                 const struct q_profile *p, enum q_format fmt, int key, FILE *f)
{
	switch (fmt) {
	case Q_FMT_TEXT: return diff_text(base, pb, db, p, key, f);
	case Q_FMT_FOLDED: return diff_folded(base, pb, db, p, key, f);
	case Q_FMT_SVG: return diff_svg(base, pb, db, p, key, f);
	default: return q_fail(db, "a comparison of two runs is written as text, folded or svg");
	}
}

/* What q_write_diff_file passes through q_write_atomic. */
struct diff_out {
	struct q_db *base;
	const struct q_profile *pb, *p;
	enum q_format fmt;
	int key;
};

static int write_diff(struct q_db *db, const void *ctx, FILE *f)
{
	const struct diff_out *o = ctx;
	return q_write_diff(o->base, o->pb, db, o->p, o->fmt, o->key, f);
}

int q_write_diff_file(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                      const struct q_profile *p, enum q_format fmt, int key, const char *path,
                      bool force)
{
	if (q_output_ok(base, path, force)) {
		q_fail(db, "%s", q_errmsg(base));
		return Q_OUTPUT;
	}
	struct diff_out o = { base, pb, p, fmt, key };
	return q_write_atomic(db, path, force, write_diff, &o);
}
