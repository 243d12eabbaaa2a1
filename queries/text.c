/* text.c - the text table trace-snap prints: like `pprof --text` (flat,
 * flat%, sum%, cum, cum%, function, after a Total line), or one line per
 * stack. Values unbiased if sampled. Right after the Total line, one
 * "Warning: " line per thing the answer lacks (lacks.c), where a reader
 * stopping after a few lines still sees it.
 *
 * Never: print anything a reader of pprof's table would not expect before
 * the Total line.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "qi.h"

/* Starts each line of what the answer lacks, right after the Total line. */
#define WARNING "Warning: "

static bool is_bytes(int key)
{
	return key == Q_INUSE_BYTES || key == Q_ALLOC_BYTES;
}

static void pct(char *buf, size_t n, int64_t v, int64_t tot)
{
	snprintf(buf, n, "%.1f%%", tot ? 100.0 * (double)v / (double)tot : 0.0);
}

static int by_function(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	struct q_fn_table t = { 0 };
	if (q_by_function(db, p, key, &t))
		return -1;
	int64_t tot = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		tot += u.v[key];
	}
	fprintf(f, "Total: %" PRId64 " %s\n", tot, is_bytes(key) ? "B" : "objects");
	q_write_threads_line(db, f);
	if (q_write_lacks(db, p, WARNING, f)) {
		q_fn_table_free(&t);
		return -1;
	}
	int64_t sum = 0;
	for (size_t i = 0; i < t.n; i++) {
		const struct q_fn_row *r = &t.rows[i];
		if (!r->flat[key] && !r->cum[key])
			continue;              /* only in stacks with another value */
		char a[24], b[24], c[24];
		sum += r->flat[key];
		pct(a, sizeof a, r->flat[key], tot);
		pct(b, sizeof b, sum, tot);
		pct(c, sizeof c, r->cum[key], tot);
		fprintf(f, "%8" PRId64 " %6s %6s %8" PRId64 " %6s %s\n", r->flat[key], a, b,
		        r->cum[key], c, q_fn_name(db, r->fn));
	}
	q_fn_table_free(&t);
	return 0;
}

static int cmp_stack(const void *a, const void *b, void *ctx)
{
	const struct q_row *x = a, *y = b;
	int stack_key = *(const int *)ctx;
	if (x->v[stack_key] != y->v[stack_key])
		return x->v[stack_key] > y->v[stack_key] ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* One line per stack: the chosen value, its percentage, the other value of
 * the same pair, then the functions leaf first joined by " <- ". */
static int by_stack(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	int other = key ^ 1;                   /* objects <-> bytes of the same pair */
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
	fprintf(f, "Total: %" PRId64 " %s, %" PRId64 " %s\n", tot,
	        is_bytes(key) ? "B" : "objects", tot_other, is_bytes(other) ? "B" : "objects");
	q_write_threads_line(db, f);
	int rc = q_write_lacks(db, p, WARNING, f);
	for (size_t i = 0; i < p->n && !rc; i++) {
		const struct q_row *r = &u[i];
		const struct q_frame *fr;
		size_t nf;
		if ((rc = q_stack(db, r->stack_id, &fr, &nf)))
			break;
		char a[24];
		pct(a, sizeof a, r->v[key], tot);
		fprintf(f, "%10" PRId64 " %6s %8" PRId64 "  ", r->v[key], a, r->v[other]);
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
