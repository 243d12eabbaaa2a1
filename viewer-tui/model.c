/* model.c - the main pane's rows: a per-stack view aggregated by function.
 *
 * Flat (bottom-up): one row per function; flat = what it allocated itself
 * (it is the leaf frame), cum = every stack it appears in, counted once per
 * stack. Tree (top-down): outermost caller first, one node per call path of
 * functions. Tree nodes persist for the whole session so that what the user
 * expanded stays expanded while the cursor moves; a build only resets their
 * values. A node nobody expanded or collapsed is shown open when it is its
 * parent's only child (the _start -> main chain opens by itself). In a
 * snapshot, rows with nothing live (every block freed) are left out.
 *
 * Never: read the database (frames come from data.c's cache); keep pointers
 * into data.c's view array (it is reused: the model keeps its own copy).
 */
#include "tui.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NO_NODE      (-1)
#define HASH_MIN     1024        /* initial child-lookup table size (power of 2) */

enum { OPEN_DEFAULT = -1, OPEN_NO = 0, OPEN_YES = 1 };

struct node {
	int fn, parent, first_child, next_sibling;
	int open;                    /* OPEN_* */
	unsigned stamp;              /* build that last touched it */
	int64_t flat, cum, objects, allocs;
};

struct fnagg { unsigned stamp, seen; int64_t flat, cum, objects, allocs; };

struct tui_model {
	struct node *nodes;
	int nnodes, capnodes;
	int *hash;                   /* (parent, fn) -> node, open addressing */
	size_t hashcap;
	int first_root;

	struct fnagg *fns;
	int nfns;
	int *touched;                /* functions seen in this build */
	int ntouched;

	struct tui_sv *sv;           /* a copy of the view being shown */
	size_t nsv, capsv;
	int *sv_leaf;                /* tree node of each stack's leaf */

	struct tui_row *rows;
	size_t nrows, caprows;
	unsigned stamp;
	bool tree, live_only;
	enum tui_sort sort;
	int64_t total;
};

struct tui_model *tui_model_new(void)
{
	struct tui_model *m = calloc(1, sizeof *m);
	if (m)
		m->first_root = NO_NODE;
	return m;
}

void tui_model_free(struct tui_model *m)
{
	if (!m)
		return;
	free(m->nodes);
	free(m->hash);
	free(m->fns);
	free(m->touched);
	free(m->sv_leaf);
	free(m->sv);
	free(m->rows);
	free(m);
}

static size_t hash_of(int parent, int fn, size_t cap)
{
	uint64_t h = ((uint64_t)(uint32_t)parent << 32 | (uint32_t)fn) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 17) & (cap - 1);
}

static int rehash(struct tui_model *m, size_t cap)
{
	int *h = malloc(cap * sizeof *h);
	if (!h)
		return -1;
	memset(h, 0xff, cap * sizeof *h);   /* all NO_NODE */
	for (int i = 0; i < m->nnodes; i++) {
		size_t k = hash_of(m->nodes[i].parent, m->nodes[i].fn, cap);
		while (h[k] != NO_NODE)
			k = (k + 1) & (cap - 1);
		h[k] = i;
	}
	free(m->hash);
	m->hash = h;
	m->hashcap = cap;
	return 0;
}

/* The child of parent for fn, created if new; NO_NODE when out of memory. */
static int child(struct tui_model *m, int parent, int fn)
{
	if ((size_t)m->nnodes * 2 >= m->hashcap &&
	    rehash(m, m->hashcap ? m->hashcap * 2 : HASH_MIN) < 0)
		return NO_NODE;
	size_t k = hash_of(parent, fn, m->hashcap);
	for (; m->hash[k] != NO_NODE; k = (k + 1) & (m->hashcap - 1)) {
		struct node *n = &m->nodes[m->hash[k]];
		if (n->parent == parent && n->fn == fn)
			return m->hash[k];
	}
	if (m->nnodes == m->capnodes) {
		int cap = m->capnodes ? m->capnodes * 2 : HASH_MIN;
		struct node *nn = realloc(m->nodes, (size_t)cap * sizeof *nn);
		if (!nn)
			return NO_NODE;
		m->nodes = nn;
		m->capnodes = cap;
	}
	int id = m->nnodes++;
	struct node *n = &m->nodes[id];
	*n = (struct node){ .fn = fn, .parent = parent, .first_child = NO_NODE,
	                    .open = OPEN_DEFAULT };
	int *head = parent == NO_NODE ? &m->first_root : &m->nodes[parent].first_child;
	n->next_sibling = *head;
	*head = id;
	m->hash[k] = id;
	return id;
}

static int64_t key_of(enum tui_sort s, bool tree, int64_t flat, int64_t cum,
                      int64_t objects, int64_t allocs)
{
	switch (s) {
	case TUI_BY_OBJECTS: return objects;
	case TUI_BY_ALLOCS:  return allocs;
	case TUI_BY_BYTES:   break;
	}
	return tree ? cum : flat;
}

static int cmp_key(int64_t a, int64_t b) { return a > b ? -1 : a < b; }

static const struct tui_model *sort_model;   /* qsort has no context argument */

static int cmp_rows(const void *pa, const void *pb)
{
	const struct tui_row *a = pa, *b = pb;
	const struct tui_model *m = sort_model;
	int c = cmp_key(key_of(m->sort, m->tree, a->flat, a->cum, a->objects, a->allocs),
	                key_of(m->sort, m->tree, b->flat, b->cum, b->objects, b->allocs));
	if (!c)
		c = cmp_key(a->cum, b->cum);
	return c ? c : (a->fn > b->fn) - (a->fn < b->fn);
}

static int cmp_nodes(const void *pa, const void *pb)
{
	const struct tui_model *m = sort_model;
	const struct node *a = &m->nodes[*(const int *)pa], *b = &m->nodes[*(const int *)pb];
	int c = cmp_key(key_of(m->sort, true, a->flat, a->cum, a->objects, a->allocs),
	                key_of(m->sort, true, b->flat, b->cum, b->objects, b->allocs));
	return c ? c : (a->fn > b->fn) - (a->fn < b->fn);
}

static int push_row(struct tui_model *m, struct tui_row r)
{
	if (m->nrows == m->caprows) {
		size_t cap = m->caprows ? m->caprows * 2 : 256;
		struct tui_row *nr = realloc(m->rows, cap * sizeof *nr);
		if (!nr)
			return -1;
		m->rows = nr;
		m->caprows = cap;
	}
	m->rows[m->nrows++] = r;
	return 0;
}

/* Whether a row's values are worth a line: something live, or (outside a
 * snapshot) anything at all. */
static bool shown(const struct tui_model *m, int64_t cum, int64_t objects, int64_t allocs)
{
	return cum || objects || (allocs && !m->live_only);
}

static bool active(const struct tui_model *m, int id)
{
	const struct node *n = &m->nodes[id];
	return n->stamp == m->stamp && shown(m, n->cum, n->objects, n->allocs);
}

/* The active children of a node (or the roots), heaviest first; caller frees. */
static int *children(struct tui_model *m, int parent, int *count)
{
	int n = 0;
	int head = parent == NO_NODE ? m->first_root : m->nodes[parent].first_child;
	for (int c = head; c != NO_NODE; c = m->nodes[c].next_sibling)
		n += active(m, c);
	int *v = malloc((size_t)(n ? n : 1) * sizeof *v);
	if (!v)
		return NULL;
	n = 0;
	for (int c = head; c != NO_NODE; c = m->nodes[c].next_sibling)
		if (active(m, c))
			v[n++] = c;
	sort_model = m;
	qsort(v, (size_t)n, sizeof *v, cmp_nodes);
	*count = n;
	return v;
}

static bool is_open(const struct node *n, int siblings)
{
	return n->open == OPEN_DEFAULT ? siblings == 1 : n->open == OPEN_YES;
}

static int tree_rows(struct tui_model *m, int parent, int depth)
{
	int n;
	int *v = children(m, parent, &n);
	if (!v)
		return -1;
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		struct node *nd = &m->nodes[v[i]];
		int nkids = 0;
		for (int c = nd->first_child; c != NO_NODE; c = m->nodes[c].next_sibling)
			nkids += active(m, c);
		bool open = nkids && is_open(nd, n);
		rc = push_row(m, (struct tui_row){ .fn = nd->fn, .node = v[i], .depth = depth,
		                                   .has_children = nkids > 0, .expanded = open,
		                                   .flat = nd->flat, .cum = nd->cum,
		                                   .objects = nd->objects, .allocs = nd->allocs });
		if (rc == 0 && open)
			rc = tree_rows(m, v[i], depth + 1);
	}
	free(v);
	return rc;
}

static int grow_fns(struct tui_model *m, int want)
{
	if (want <= m->nfns)
		return 0;
	struct fnagg *f = realloc(m->fns, (size_t)want * sizeof *f);
	int *t = realloc(m->touched, (size_t)want * sizeof *t);
	if (f)
		m->fns = f;
	if (t)
		m->touched = t;
	if (!f || !t)
		return -1;
	memset(f + m->nfns, 0, (size_t)(want - m->nfns) * sizeof *f);
	m->nfns = want;
	return 0;
}

int tui_model_build(struct tui_model *m, struct tui_data *d, const struct tui_sv *sv,
                    size_t n, bool tree, enum tui_sort sort, bool live_only)
{
	if (n > m->capsv) {
		int *leaf = realloc(m->sv_leaf, n * sizeof *leaf);
		if (leaf)
			m->sv_leaf = leaf;
		struct tui_sv *cp = realloc(m->sv, n * sizeof *cp);
		if (cp)
			m->sv = cp;
		if (!leaf || !cp)
			return -1;
		m->capsv = n;
	}
	if (n)
		memcpy(m->sv, sv, n * sizeof *sv);
	m->nsv = n;
	int *leaf = m->sv_leaf;
	m->tree = tree;
	m->live_only = live_only;
	m->sort = sort;
	m->nrows = 0;
	m->ntouched = 0;
	m->total = 0;
	if (++m->stamp == 0)
		m->stamp = 1;

	for (size_t i = 0; i < n; i++) {
		const struct q_frame *fr;
		size_t nfr;
		if (tui_data_stack(d, sv[i].stack_id, &fr, &nfr) < 0)
			return -1;
		if (grow_fns(m, tui_data_fn_count(d)) < 0)
			return -1;
		m->total += sv[i].bytes;
		leaf[i] = NO_NODE;
		if (nfr == 0)
			continue;
		if (tree) {
			int node = NO_NODE;
			for (size_t k = nfr; k-- > 0;) {
				node = child(m, node, fr[k].fn);
				if (node == NO_NODE)
					return -1;
				struct node *nd = &m->nodes[node];
				if (nd->stamp != m->stamp) {
					nd->stamp = m->stamp;
					nd->flat = nd->cum = nd->objects = nd->allocs = 0;
				}
				nd->cum += sv[i].bytes;
				nd->objects += sv[i].objects;
				nd->allocs += sv[i].allocs;
			}
			m->nodes[node].flat += sv[i].bytes;
			leaf[i] = node;
			continue;
		}
		/* Flat: objects and allocations are the leaf's, like flat bytes. */
		for (size_t k = 0; k < nfr; k++) {
			struct fnagg *f = &m->fns[fr[k].fn];
			if (f->stamp != m->stamp) {
				*f = (struct fnagg){ .stamp = m->stamp };
				m->touched[m->ntouched++] = fr[k].fn;
			}
			if (f->seen == (unsigned)i + 1 && k > 0)
				continue;           /* recursion: once per stack */
			f->seen = (unsigned)i + 1;
			f->cum += sv[i].bytes;
			if (k == 0) {
				f->flat += sv[i].bytes;
				f->objects += sv[i].objects;
				f->allocs += sv[i].allocs;
			}
		}
	}

	if (tree)
		return tree_rows(m, NO_NODE, 0);
	for (int i = 0; i < m->ntouched; i++) {
		const struct fnagg *f = &m->fns[m->touched[i]];
		if (!f->flat && !shown(m, f->cum, f->objects, f->allocs))
			continue;
		if (push_row(m, (struct tui_row){ .fn = m->touched[i], .node = NO_NODE,
		                                  .flat = f->flat, .cum = f->cum,
		                                  .objects = f->objects, .allocs = f->allocs }) < 0)
			return -1;
	}
	sort_model = m;
	if (m->nrows)               /* rows is NULL before the first row */
		qsort(m->rows, m->nrows, sizeof *m->rows, cmp_rows);
	return 0;
}

const struct tui_row *tui_model_rows(const struct tui_model *m, size_t *n)
{
	*n = m->nrows;
	return m->rows;
}

int64_t tui_model_total(const struct tui_model *m) { return m->total; }

void tui_model_toggle(struct tui_model *m, int node)
{
	if (node < 0 || node >= m->nnodes)
		return;
	struct node *n = &m->nodes[node];
	int siblings = 0;
	int head = n->parent == NO_NODE ? m->first_root : m->nodes[n->parent].first_child;
	for (int c = head; c != NO_NODE; c = m->nodes[c].next_sibling)
		siblings += active(m, c);
	n->open = is_open(n, siblings) ? OPEN_NO : OPEN_YES;
}

void tui_model_reveal(struct tui_model *m, int node)
{
	if (node < 0 || node >= m->nnodes)
		return;
	for (int p = m->nodes[node].parent; p != NO_NODE; p = m->nodes[p].parent)
		m->nodes[p].open = OPEN_YES;
}

static bool matches(struct tui_data *d, int fn, const char *needle)
{
	return strcasestr(tui_data_fn_name(d, fn), needle) != NULL;
}

/* Depth-first, heaviest first, over every active node: the first match after
 * `after` (or the first match at all, to wrap around). */
static int find_dfs(struct tui_model *m, struct tui_data *d, int parent, const char *needle,
                    int after, bool *passed, int *first)
{
	int n;
	int *v = children(m, parent, &n);
	if (!v)
		return NO_NODE;
	int hit = NO_NODE;
	for (int i = 0; i < n && hit == NO_NODE; i++) {
		if (matches(d, m->nodes[v[i]].fn, needle)) {
			if (*first == NO_NODE)
				*first = v[i];
			if (*passed)
				hit = v[i];
		}
		if (v[i] == after)
			*passed = true;
		if (hit == NO_NODE)
			hit = find_dfs(m, d, v[i], needle, after, passed, first);
	}
	free(v);
	return hit;
}

int tui_model_find(struct tui_model *m, struct tui_data *d, const char *needle,
                   int after_node, int after_fn)
{
	if (m->tree) {
		bool passed = after_node == NO_NODE;
		int first = NO_NODE;
		int hit = find_dfs(m, d, NO_NODE, needle, after_node, &passed, &first);
		return hit != NO_NODE ? hit : first;
	}
	size_t start = 0;
	for (size_t i = 0; i < m->nrows; i++)
		if (m->rows[i].fn == after_fn)
			start = i + 1;
	for (size_t k = 0; k < m->nrows; k++) {
		const struct tui_row *r = &m->rows[(start + k) % m->nrows];
		if (matches(d, r->fn, needle))
			return r->fn;
	}
	return NO_NODE;
}

static int64_t mag(int64_t v) { return v < 0 ? -v : v; }

int64_t tui_model_stack_of(const struct tui_model *m, struct tui_data *d, const struct tui_row *r)
{
	int64_t best = -1, best_v = -1;
	for (size_t i = 0; i < m->nsv; i++) {
		bool through = false;
		if (r->node != NO_NODE) {
			for (int p = m->sv_leaf[i]; p != NO_NODE && !through; p = m->nodes[p].parent)
				through = p == r->node;
		} else {
			const struct q_frame *fr;
			size_t nfr = 0;
			if (tui_data_stack(d, m->sv[i].stack_id, &fr, &nfr) < 0)
				nfr = 0;
			for (size_t k = 0; k < nfr && !through; k++)
				through = fr[k].fn == r->fn;
		}
		if (through && mag(m->sv[i].bytes) > best_v) {
			best_v = mag(m->sv[i].bytes);
			best = m->sv[i].stack_id;
		}
	}
	return best;
}
