/* flame.c - a call tree by function name over one profile or two (the base
 * run and the new one), for flame graphs (svg.c) and the comparison of two
 * runs (diff.c). Each profile's tree comes from agg.c (q_build_tree, values
 * unbiased) and is merged in by the names along each path, as the text and
 * folded outputs name functions: two runs with different address layouts,
 * in two databases with their own function indexes, meet on the same
 * boxes.
 *
 * Never: match frames by address or by a database's function index (each
 * database numbers its own), or keep a pointer into a q_tree.
 */
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* A new node under parent (-1: the root), zero; -1: no memory. */
static int add_node(struct q_flame *fl, int parent, const char *name)
{
	if (q_grow(&fl->nodes, &fl->cap, fl->n + 1, sizeof *fl->nodes))
		return -1;
	struct q_fnode *c = &fl->nodes[fl->n];
	memset(c, 0, sizeof *c);
	c->name = name;
	c->parent = parent;
	c->first_child = c->next_sibling = -1;
	if (parent >= 0) {
		c->depth = fl->nodes[parent].depth + 1;
		c->next_sibling = fl->nodes[parent].first_child;
		fl->nodes[parent].first_child = (int)fl->n;
	}
	return (int)fl->n++;
}

/* parent's child called name, added if new; -1: no memory. */
static int child_named(struct q_flame *fl, int parent, const char *name)
{
	for (int c = fl->nodes[parent].first_child; c >= 0; c = fl->nodes[c].next_sibling)
		if (!strcmp(fl->nodes[c].name, name))
			return c;
	return add_node(fl, parent, name);
}

/* The rows of p whose value of key (unbiased) is positive, into out (its
 * own rows; the rest copied). -1: no memory. */
static int positive_rows(const struct q_profile *p, int key, struct q_profile *out)
{
	*out = *p;
	out->rows = malloc((p->n + 1) * sizeof *out->rows);
	out->n = 0;
	out->cap = p->n + 1;
	if (!out->rows)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		if (u.v[key] > 0)
			out->rows[out->n++] = p->rows[i];
	}
	return 0;
}

int q_flame_add(struct q_db *db, const struct q_profile *p, int side, int positive,
                struct q_flame *fl)
{
	struct q_tree t = { 0 };
	struct q_profile kept = { 0 };
	if (!fl->n && add_node(fl, -1, "all") < 0)
		return q_fail(db, "out of memory");
	if (positive >= 0 && positive_rows(p, positive, &kept))
		return q_fail(db, "out of memory");
	int built = q_build_tree(db, positive >= 0 ? &kept : p, &t);
	free(kept.rows);
	if (built) {
		q_tree_free(&t);
		return -1;
	}
	/* q_build_tree makes a node after its parent: at[parent] is known */
	int *at = malloc(t.n * sizeof *at);
	int rc = at ? 0 : -1;
	for (size_t i = 0; i < t.n && !rc; i++) {
		const struct q_node *src = &t.nodes[i];
		at[i] = i ? child_named(fl, at[src->parent], q_fn_name(db, src->fn)) : 0;
		if (at[i] < 0) {
			rc = -1;
			break;
		}
		struct q_fnode *dst = &fl->nodes[at[i]];
		for (int k = 0; k < Q_NVAL; k++) {
			dst->self[side][k] += src->self[k];
			dst->total[side][k] += src->total[k];
		}
	}
	free(at);
	q_tree_free(&t);
	return rc ? q_fail(db, "out of memory") : 0;
}

void q_flame_free(struct q_flame *fl)
{
	free(fl->nodes);
	memset(fl, 0, sizeof *fl);
}
