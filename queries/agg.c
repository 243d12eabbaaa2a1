/* agg.c - a per-stack profile seen by function: pprof's flat/cum table and
 * the top-down call tree. Values are unbiased here (sampled processes), so
 * every caller shows the same numbers as the writers.
 *
 * Never: count a stack twice in one function's cum (recursion), or change
 * the profile.
 */
#include <stdlib.h>
#include <string.h>

#include "qi.h"

struct sort_ctx { const struct q_db *db; int key; };

static int cmp_fn(const void *a, const void *b, void *ctx)
{
	const struct q_fn_row *x = a, *y = b;
	const struct q_db *sort_db = ((const struct sort_ctx *)ctx)->db;
	int sort_key = ((const struct sort_ctx *)ctx)->key;
	if (x->flat[sort_key] != y->flat[sort_key])
		return x->flat[sort_key] > y->flat[sort_key] ? -1 : 1;
	if (x->cum[sort_key] != y->cum[sort_key])
		return x->cum[sort_key] > y->cum[sort_key] ? -1 : 1;
	return strcmp(q_fn_name(sort_db, x->fn), q_fn_name(sort_db, y->fn));
}

/* Resolves every stack of p first, so the function count is final. */
static int resolve_all(struct q_db *db, const struct q_profile *p)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct q_frame *f;
		size_t nf;
		if (q_stack(db, p->rows[i].stack_id, &f, &nf))
			return -1;
	}
	return 0;
}

int q_by_function(struct q_db *db, const struct q_profile *p, int key, struct q_fn_table *t)
{
	t->n = 0;
	if (resolve_all(db, p))
		return -1;
	size_t nfn = (size_t)q_fn_count(db);
	int32_t *rowof = malloc((nfn + 1) * sizeof *rowof);   /* fn -> row, -1 */
	size_t *last = calloc(nfn + 1, sizeof *last);          /* stack i+1 that added cum */
	if (!rowof || !last) {
		free(rowof);
		free(last);
		return q_fail(db, "out of memory");
	}
	for (size_t k = 0; k < nfn; k++)
		rowof[k] = -1;
	for (size_t i = 0; i < p->n; i++) {
		const struct q_frame *f;
		size_t nf;
		q_stack(db, p->rows[i].stack_id, &f, &nf);   /* cached: cannot fail */
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		for (size_t j = 0; j < nf; j++) {
			int fn = f[j].fn;
			if (rowof[fn] < 0) {
				if (q_grow(&t->rows, &t->cap, t->n + 1, sizeof *t->rows)) {
					free(rowof);
					free(last);
					return q_fail(db, "out of memory");
				}
				memset(&t->rows[t->n], 0, sizeof *t->rows);
				t->rows[t->n].fn = fn;
				rowof[fn] = (int32_t)t->n++;
			}
			struct q_fn_row *r = &t->rows[rowof[fn]];
			for (int k = 0; k < Q_NVAL; k++) {
				if (j == 0)
					r->flat[k] += u.v[k];
				if (last[fn] != i + 1)
					r->cum[k] += u.v[k];
			}
			last[fn] = i + 1;
		}
	}
	free(rowof);
	free(last);
	struct sort_ctx ctx = { db, key };
	if (t->n)                      /* rows is NULL before the first row */
		qsort_r(t->rows, t->n, sizeof *t->rows, cmp_fn, &ctx);
	return 0;
}

void q_fn_table_free(struct q_fn_table *t)
{
	free(t->rows);
	memset(t, 0, sizeof *t);
}

/* Child of node parent for function fn, created if new; -1: no memory.
 * (parent, fn) pairs are found through the map keyed by both. */
static int child(struct q_tree *t, struct q_map *m, int parent, int fn)
{
	int64_t key = (int64_t)parent << 31 | (int64_t)fn;
	uint32_t k;
	if (q_map_get(m, key, &k))
		return (int)k;
	if (q_grow(&t->nodes, &t->cap, t->n + 1, sizeof *t->nodes) ||
	    q_map_put(m, key, (uint32_t)t->n))
		return -1;
	struct q_node *c = &t->nodes[t->n];
	memset(c, 0, sizeof *c);
	c->fn = fn;
	c->parent = parent;
	c->first_child = -1;
	c->next_sibling = t->nodes[parent].first_child;
	t->nodes[parent].first_child = (int)t->n;
	return (int)t->n++;
}

int q_build_tree(struct q_db *db, const struct q_profile *p, struct q_tree *t)
{
	t->n = 0;
	if (resolve_all(db, p) || q_grow(&t->nodes, &t->cap, 1, sizeof *t->nodes))
		return -1;
	memset(&t->nodes[0], 0, sizeof *t->nodes);
	t->nodes[0].fn = -1;
	t->nodes[0].parent = t->nodes[0].first_child = t->nodes[0].next_sibling = -1;
	t->n = 1;
	struct q_map m = { 0 };
	for (size_t i = 0; i < p->n; i++) {
		const struct q_frame *f;
		size_t nf;
		q_stack(db, p->rows[i].stack_id, &f, &nf);   /* cached: cannot fail */
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		int at = 0;
		for (size_t j = nf; j-- > 0; ) {          /* root first */
			if ((at = child(t, &m, at, f[j].fn)) < 0) {
				q_map_free(&m);
				return q_fail(db, "out of memory");
			}
			for (int k = 0; k < Q_NVAL; k++)
				t->nodes[at].total[k] += u.v[k];
		}
		for (int k = 0; k < Q_NVAL; k++) {
			t->nodes[at].self[k] += u.v[k];
			t->nodes[0].total[k] += u.v[k];
		}
	}
	q_map_free(&m);
	return 0;
}

void q_tree_free(struct q_tree *t)
{
	free(t->nodes);
	memset(t, 0, sizeof *t);
}
