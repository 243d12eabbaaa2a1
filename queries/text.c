/* text.c - the text table trace-snap prints: like `pprof --text` (flat,
 * flat%, sum%, cum, cum%, function, after a Total line), or one line per
 * stack. Values unbiased if sampled. Right after the Total line, a
 * "Kinds: " line splitting it by kind of memory (heap, mmap, custom) when
 * the database holds more than heap (kind.c), then one
 * "Warning: " line per thing the answer lacks (lacks.c), where a reader
 * stopping after a few lines still sees it; then a header row naming the
 * columns, then the rows. Every byte count is exact, with the same size in
 * binary units (1 KiB = 1024 B) in a "human" column beside it. The number
 * columns are as wide as their widest value or name, so that a row of
 * typical values leaves most of 80 columns to the name, always the last
 * column and never cut (README "Text output").
 *
 * Never: print a size only in human form (scripts parse the exact numbers),
 * cut a name, or print anything a reader of pprof's table would not expect
 * before the Total line.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* Starts each line of what the answer lacks, right after the Total line. */
#define WARNING "Warning: "
/* Binary units: each one 1024 of the one before. */
#define UNIT_STEP 1024
/* Number columns of the widest table: bytes by function (flat, human,
 * flat%, sum%, cum, human, cum%). */
#define COLS_MAX 7
/* A cell holds an int64, "-1023.9 KiB" or "-100.0%", and the NUL. */
#define CELL 24

void q_human_bytes(char *buf, size_t n, int64_t bytes)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	const size_t units = sizeof unit / sizeof *unit;
	const char *sign = bytes < 0 ? "-" : "";
	uint64_t v = bytes < 0 ? -(uint64_t)bytes : (uint64_t)bytes;
	if (v < UNIT_STEP) {
		snprintf(buf, n, "%s%" PRIu64 " B", sign, v);
		return;
	}
	/* Rounded to a tenth in integers (no overflow: v % div * 10 < 2^64);
	 * a unit whose rounded value reaches 1024.0 gives way to the next. */
	uint64_t div = UNIT_STEP, tenths;
	size_t u = 1;
	for (;;) {
		tenths = v / div * 10 + (v % div * 10 + div / 2) / div;
		if (tenths < UNIT_STEP * 10 || u + 1 == units)
			break;
		div *= UNIT_STEP;
		u++;
	}
	snprintf(buf, n, "%s%" PRIu64 ".%" PRIu64 " %s", sign, tenths / 10, tenths % 10,
	         unit[u]);
}

static bool is_bytes(int key)
{
	return key == Q_INUSE_BYTES || key == Q_ALLOC_BYTES;
}

/* "Total: " figures: "N B (human)" or "N objects", the exact N first. */
static void put_amount(FILE *f, int64_t v, bool bytes)
{
	char h[Q_HUMAN_BYTES];
	if (!bytes) {
		fprintf(f, "%" PRId64 " objects", v);
		return;
	}
	q_human_bytes(h, sizeof h, v);
	fprintf(f, "%" PRId64 " B (%s)", v, h);
}

/* Right after the Total line, when the database holds memory of other
 * kinds than heap: "Kinds: heap ..., mmap ..., custom ...". */
static int kinds_line(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	int64_t tot[Q_NKINDS];
	int rc = q_kind_totals(db, p, key, tot);
	if (rc <= 0)
		return rc;
	fputs("Kinds:", f);
	for (unsigned k = 0; k < Q_NKINDS; k++) {
		fprintf(f, "%s %s ", k ? "," : "", q_kind_name(k));
		put_amount(f, tot[k], is_bytes(key));
	}
	fputc('\n', f);
	return 0;
}

/* The number cells of one row (or the header's names) and how wide each
 * column has to be for all of them. */
struct row {
	int n;
	char cell[COLS_MAX][CELL];
};
struct table {
	int width[COLS_MAX];
};

static void add(struct row *r, const char *s)
{
	snprintf(r->cell[r->n++], CELL, "%s", s);
}

/* The exact count, and for bytes its human form in the next column. */
static void add_value(struct row *r, int64_t v, bool bytes)
{
	snprintf(r->cell[r->n++], CELL, "%" PRId64, v);
	if (bytes)
		q_human_bytes(r->cell[r->n++], CELL, v);
}

static void add_pct(struct row *r, int64_t v, int64_t tot)
{
	snprintf(r->cell[r->n++], CELL, "%.1f%%", tot ? 100.0 * (double)v / (double)tot : 0.0);
}

static void fit(struct table *t, const struct row *r)
{
	for (int i = 0; i < r->n; i++) {
		int w = (int)strlen(r->cell[i]);
		if (w > t->width[i])
			t->width[i] = w;
	}
}

/* The number cells right-aligned, then the gap before the name. */
static void put(FILE *f, const struct table *t, const struct row *r)
{
	for (int i = 0; i < r->n; i++)
		fprintf(f, "%s%*s", i ? " " : "", t->width[i], r->cell[i]);
	fputs("  ", f);
}

static void function_header(struct row *r, bool bytes)
{
	add(r, "flat");
	if (bytes)
		add(r, "human");
	add(r, "flat%");
	add(r, "sum%");
	add(r, "cum");
	if (bytes)
		add(r, "human");
	add(r, "cum%");
}

/* The rows of the per-function table with a value: measured into t, and
 * printed too when f is given (the second pass). */
static void function_rows(struct q_db *db, const struct q_fn_table *ft, int key, int64_t tot,
                          struct table *t, FILE *f)
{
	int64_t sum = 0;
	for (size_t i = 0; i < ft->n; i++) {
		const struct q_fn_row *fr = &ft->rows[i];
		if (!fr->flat[key] && !fr->cum[key])
			continue;              /* only in stacks with another value */
		struct row r = { 0 };
		sum += fr->flat[key];
		add_value(&r, fr->flat[key], is_bytes(key));
		add_pct(&r, fr->flat[key], tot);
		add_pct(&r, sum, tot);
		add_value(&r, fr->cum[key], is_bytes(key));
		add_pct(&r, fr->cum[key], tot);
		fit(t, &r);
		if (f) {
			put(f, t, &r);
			fprintf(f, "%s\n", q_fn_name(db, fr->fn));
		}
	}
}

/* The lines between the Total line and the table: the split by kind, the
 * threads a filter keeps, and what the answer lacks. */
static int after_total(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	int rc = kinds_line(db, p, key, f);
	q_write_threads_line(db, f);
	return rc ? rc : q_write_lacks(db, p, WARNING, f);
}

static int by_function(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	struct q_fn_table ft = { 0 };
	if (q_by_function(db, p, key, &ft))
		return -1;
	int64_t tot = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		tot += u.v[key];
	}
	fputs("Total: ", f);
	put_amount(f, tot, is_bytes(key));
	fputc('\n', f);
	int rc = after_total(db, p, key, f);
	if (!rc) {
		struct table t = { 0 };
		struct row h = { 0 };
		function_header(&h, is_bytes(key));
		fit(&t, &h);
		function_rows(db, &ft, key, tot, &t, NULL);
		put(f, &t, &h);
		fputs("function\n", f);
		function_rows(db, &ft, key, tot, &t, f);
	}
	q_fn_table_free(&ft);
	return rc;
}

static int cmp_stack(const void *a, const void *b, void *ctx)
{
	const struct q_row *x = a, *y = b;
	int stack_key = *(const int *)ctx;
	if (x->v[stack_key] != y->v[stack_key])
		return x->v[stack_key] > y->v[stack_key] ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static void stack_header(struct row *r, int key)
{
	int other = key ^ 1;                   /* objects <-> bytes of the same pair */
	add(r, is_bytes(key) ? "bytes" : "objects");
	if (is_bytes(key))
		add(r, "human");
	add(r, is_bytes(key) ? "bytes%" : "objects%");
	add(r, is_bytes(other) ? "bytes" : "objects");
	if (is_bytes(other))
		add(r, "human");
}

/* A per-stack row: the chosen value (and its human form), its percentage,
 * the other value of the same pair (and its human form). */
static void stack_row(struct row *out, const struct q_row *r, int key, int64_t tot)
{
	add_value(out, r->v[key], is_bytes(key));
	add_pct(out, r->v[key], tot);
	add_value(out, r->v[key ^ 1], is_bytes(key ^ 1));
}

/* One line per stack: the cells of stack_row, then the functions leaf
 * first joined by " <- ". */
static int by_stack(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	int other = key ^ 1;
	struct q_row *u = malloc((p->n + 1) * sizeof *u);
	if (!u)
		return q_fail(db, "out of memory");
	int64_t tot = 0, tot_other = 0;
	for (size_t i = 0; i < p->n; i++) {
		q_unbias(&p->rows[i], p->sample_period, &u[i]);
		tot += u[i].v[key];
		tot_other += u[i].v[other];
	}
	qsort_r(u, p->n, sizeof *u, cmp_stack, &key);
	fputs("Total: ", f);
	put_amount(f, tot, is_bytes(key));
	fputs(", ", f);
	put_amount(f, tot_other, is_bytes(other));
	fputc('\n', f);
	int rc = after_total(db, p, key, f);
	struct table t = { 0 };
	struct row h = { 0 };
	stack_header(&h, key);
	fit(&t, &h);
	for (size_t i = 0; i < p->n; i++) {
		struct row r = { 0 };
		stack_row(&r, &u[i], key, tot);
		fit(&t, &r);
	}
	if (!rc) {
		put(f, &t, &h);
		fputs("stack, leaf first\n", f);
	}
	for (size_t i = 0; i < p->n && !rc; i++) {
		const struct q_frame *fr;
		size_t nf;
		if ((rc = q_stack(db, u[i].stack_id, &fr, &nf)))
			break;
		struct row r = { 0 };
		stack_row(&r, &u[i], key, tot);
		put(f, &t, &r);
		for (size_t j = 0; j < nf; j++)
			fprintf(f, "%s%s", j ? " <- " : "", fr[j].function);
		fputc('\n', f);
	}
	free(u);
	return rc;
}

int q_write_text(struct q_db *db, const struct q_profile *p, int key, bool by_stack_, FILE *f)
{
	return by_stack_ ? by_stack(db, p, key, f) : by_function(db, p, key, f);
}
