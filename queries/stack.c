/* stack.c - stack ids to frames (leaf first), with every trie node and
 * every resolved stack cached for the life of the handle, and function
 * names interned to small integers for the by-function views.
 *
 * A stack starts at the allocation function's caller: the recorder already
 * starts at malloc's caller, and here the global C++ operator new and
 * new[] (every variant: nothrow, aligned, ...) are dropped from the leaf
 * end, as heaptrack does when it reads a trace, so that C++ programs are
 * not all blamed on operator new. Here and not in the recorder (which must
 * not get slower) nor in the database (which keeps what was recorded).
 *
 * Never: hand out a pointer that a later call can move (each resolved
 * stack is its own allocation; node and name arrays are internal).
 */
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* Guards against a corrupt trie with a cycle. */
#define MAX_DEPTH 65536

/* The global allocation operators, as the importer demangles them:
 * "operator new(unsigned long)", "operator new[](unsigned long,
 * std::nothrow_t const&)", ... A class's own Foo::operator new is the
 * program's code and stays. */
static bool is_operator_new(const char *fn)
{
	return !strncmp(fn, "operator new(", 13) || !strncmp(fn, "operator new[](", 15);
}

/* How many frames at the leaf end of f belong to operator new: whole real
 * frames (an inline chain ends at its inline_depth 0 frame, the function
 * that was called), never all of them. */
static size_t operator_new_frames(const struct q_db *db, const struct q_frame *f, size_t n)
{
	size_t skip = 0;
	for (size_t end; skip < n; skip = end) {
		end = q_group_end(f, n, skip);
		if (end == n || !is_operator_new(db->fns[f[end - 1].fn]))
			break;
	}
	return skip;
}

static int64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;          /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (int64_t)(h >> 1);                     /* never INT64_MIN */
}

/* Index of name among the interned functions, added if new; -1: no memory. */
static int intern(struct q_db *db, const char *name)
{
	int64_t h = name_hash(name);
	uint32_t k;
	int found = q_map_get(&db->fnmap, h, &k);
	for (uint32_t i = k; found && i != UINT32_MAX; i = db->fnnext[i])
		if (!strcmp(db->fns[i], name))
			return (int)i;
	size_t cap = db->capfns;
	if (q_grow(&db->fns, &cap, db->nfns + 1, sizeof *db->fns) ||
	    q_grow(&db->fnnext, &db->capfns, db->nfns + 1, sizeof *db->fnnext))
		return -1;
	char *copy = strdup(name);
	if (!copy || q_map_put(&db->fnmap, h, (uint32_t)db->nfns)) {
		free(copy);
		return -1;
	}
	db->fns[db->nfns] = copy;
	db->fnnext[db->nfns] = found ? k : UINT32_MAX;
	return (int)db->nfns++;
}

void q_by_lines(struct q_db *db)
{
	db->by_lines = true;
}

void q_by_files(struct q_db *db)
{
	db->by_files = true;
}

/* The frame's function name as interned: with its file:line under
 * q_by_lines when both are known, with its file's name under q_by_files
 * when the file is known; -1: no memory. */
static int intern_frame(struct q_db *db, const char *fn, const char *file, int line)
{
	char *name;
	int made;
	if (db->by_lines && file && line > 0)
		made = asprintf(&name, "%s %s:%d", fn, file, line);
	else if (db->by_files && file && *file)
		made = asprintf(&name, "%s %s", fn, strrchr(file, '/') ? strrchr(file, '/') + 1 : file);
	else
		return intern(db, fn);
	if (made < 0)
		return -1;
	int k = intern(db, name);
	free(name);
	return k;
}

const char *q_fn_name(const struct q_db *db, int fn)
{
	return fn >= 0 && (size_t)fn < db->nfns ? db->fns[fn] : "";
}

int q_fn_count(const struct q_db *db)
{
	return (int)db->nfns;
}

/* The cached node id; -1 on error. */
static long node(struct q_db *db, int64_t id)
{
	uint32_t k;
	if (q_map_get(&db->nodemap, id, &k))
		return k;
	sqlite3_stmt *s = q_stmt(db, Q_ST_STACK_NODE);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, id);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(s);
		return q_fail(db, "%s: stack node %lld is missing", db->path, (long long)id);
	}
	if (rc != SQLITE_ROW) {
		q_sqlfail(db, "reading a stack");
		sqlite3_reset(s);
		return -1;
	}
	if (q_grow(&db->nodes, &db->capnodes, db->nnodes + 1, sizeof *db->nodes)) {
		sqlite3_reset(s);
		return q_fail(db, "out of memory");
	}
	struct q_node_c *c = &db->nodes[db->nnodes];
	memset(c, 0, sizeof *c);
	c->parent = sqlite3_column_int64(s, 0);
	c->frame.ip = (uint64_t)sqlite3_column_int64(s, 2);
	const char *fn = (const char *)sqlite3_column_text(s, 3);
	const char *file = (const char *)sqlite3_column_text(s, 4);
	c->frame.line = sqlite3_column_int(s, 5);
	c->frame.inline_depth = sqlite3_column_int(s, 6);
	c->frame.fn = intern_frame(db, fn ? fn : "", file, c->frame.line);
	int bad = c->frame.fn < 0 || (file && !(c->frame.file = strdup(file)));
	sqlite3_reset(s);
	if (bad || q_map_put(&db->nodemap, id, (uint32_t)db->nnodes)) {
		free((char *)c->frame.file);
		return q_fail(db, "out of memory");
	}
	return (long)db->nnodes++;
}

int q_stack(struct q_db *db, int64_t stack_id, const struct q_frame **frames, size_t *n)
{
	uint32_t k;
	if (!q_map_get(&db->stackmap, stack_id, &k)) {
		size_t len = 0, cap = 0;
		struct q_frame *f = NULL;
		for (int64_t id = stack_id; id; ) {
			long i = node(db, id);
			if (i < 0 || len >= MAX_DEPTH ||
			    q_grow(&f, &cap, len + 1, sizeof *f)) {
				free(f);
				if (i >= 0)
					q_fail(db, "%s: stack %lld is too deep or out of memory",
					       db->path, (long long)stack_id);
				return -1;
			}
			f[len++] = db->nodes[i].frame;
			id = db->nodes[i].parent;
		}
		size_t skip = operator_new_frames(db, f, len);
		if (skip) {
			memmove(f, f + skip, (len - skip) * sizeof *f);
			len -= skip;
		}
		if (q_grow(&db->stacks, &db->capstacks, db->nstacks + 1, sizeof *db->stacks) ||
		    q_map_put(&db->stackmap, stack_id, (uint32_t)db->nstacks)) {
			free(f);
			return q_fail(db, "out of memory");
		}
		db->stacks[db->nstacks].frames = f;
		db->stacks[db->nstacks].n = len;
		k = (uint32_t)db->nstacks++;
	}
	/* Names are interned once and never move; fill the pointers now that
	 * no further interning can realloc the array. */
	struct q_stack_c *sc = &db->stacks[k];
	for (size_t i = 0; i < sc->n; i++)
		sc->frames[i].function = db->fns[sc->frames[i].fn];
	*frames = sc->frames;
	*n = sc->n;
	return 0;
}

size_t q_group_end(const struct q_frame *f, size_t n, size_t i)
{
	while (i < n && f[i].inline_depth > 0)
		i++;
	return i < n ? i + 1 : n;
}
