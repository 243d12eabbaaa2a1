/* tfilter.c - the threads of a process (q_threads) and the thread and pool
 * filter (q_set_threads, q_set_filter): every profile, the peak instant and
 * the timeline of the process counting only the allocations its chosen
 * threads made, and with a pool, only the custom blocks of that pool.
 *
 * The checkpoints and the packed frees (free_blocks) know no thread and no
 * pool (a stack's custom blocks may be of several pools), so a
 * filtered answer cannot start from them: the chosen threads' allocations
 * are read once, when the filter is set, and each answer is computed from
 * them in memory. Exact; slower than a snapshot from a checkpoint (a pass
 * over those threads' allocations per answer), which is fine for a
 * question narrowed by hand.
 *
 * Never: let a block of another thread or pool into a filtered answer, or answer
 * a question about another process with the filter of this one.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* ---- the thread list ------------------------------------------------------ */

static struct q_thread *thread_of(struct q_pdata *pd, int64_t tid)
{
	for (size_t i = 0; i < pd->nthreads; i++)
		if (pd->threads[i].tid == tid)
			return &pd->threads[i];
	return NULL;
}

/* Appends a thread to pd's list; NULL: no memory. */
static struct q_thread *add_thread(struct q_pdata *pd, size_t *cap, int64_t tid,
                                   const unsigned char *name)
{
	char *nm = strdup(name ? (const char *)name : "");
	if (!nm || q_grow(&pd->threads, cap, pd->nthreads + 1, sizeof *pd->threads)) {
		free(nm);
		return NULL;
	}
	struct q_thread *t = &pd->threads[pd->nthreads++];
	*t = (struct q_thread){ tid, nm, Q_NEVER, Q_NEVER, 0 };
	return t;
}

static int cmp_thread(const void *a, const void *b)
{
	const struct q_thread *x = a, *y = b;
	if (x->t_first != y->t_first)
		return x->t_first < y->t_first ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* The threads table's rows, then each thread's allocations (a tid only the
 * allocations name, such as a forked child's inherited blocks', joins). */
static int load_threads(struct q_db *db, struct q_pdata *pd, int64_t pid)
{
	size_t cap = 0;
	int rc;
	sqlite3_stmt *s = q_stmt(db, Q_ST_THREADS);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if (!add_thread(pd, &cap, sqlite3_column_int64(s, 0), sqlite3_column_text(s, 1)))
			return q_fail(db, "out of memory");
	if (rc != SQLITE_DONE || !(s = q_stmt(db, Q_ST_THREAD_ALLOCS)))
		return rc != SQLITE_DONE ? q_sqlfail(db, "reading the threads") : -1;
	sqlite3_bind_int64(s, 1, pid);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t tid = sqlite3_column_int64(s, 0);
		struct q_thread *t = thread_of(pd, tid);
		if (!t && !(t = add_thread(pd, &cap, tid, NULL)))
			return q_fail(db, "out of memory");
		t->allocs = sqlite3_column_int64(s, 1);
		t->t_first = sqlite3_column_int64(s, 2);
		t->t_last = sqlite3_column_int64(s, 3);
	}
	if (rc != SQLITE_DONE)
		return q_sqlfail(db, "counting the threads' allocations");
	if (pd->nthreads)
		qsort(pd->threads, pd->nthreads, sizeof *pd->threads, cmp_thread);
	return 0;
}

int q_threads(struct q_db *db, int64_t pid, const struct q_thread **t, size_t *n)
{
	long i = q_proc_index(db, pid);
	if (i < 0)
		return -1;
	struct q_pdata *pd = &db->pd[i];
	if (!pd->threads_loaded) {
		if (load_threads(db, pd, pid)) {
			for (size_t k = 0; k < pd->nthreads; k++)
				free((char *)pd->threads[k].name);
			pd->nthreads = 0;              /* the next call starts over */
			return -1;
		}
		pd->threads_loaded = true;
	}
	*t = pd->threads;
	*n = pd->nthreads;
	return 0;
}

/* ---- setting the filter ------------------------------------------------------ */

void q_tf_free(struct q_tfilter *f)
{
	free(f->tids);
	free(f->pool);
	q_map_free(&f->set);
	q_map_free(&f->pools);
	free(f->b);
	free(f->fr);
	free(f->tl);
	memset(f, 0, sizeof *f);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_free(const void *a, const void *b)
{
	const struct q_tfree *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* "DB: process P had no thread T (its threads: 1, 2, ...)": as many as fit. */
static int no_thread(struct q_db *db, int64_t pid, int64_t tid, const struct q_thread *t,
                     size_t n)
{
	char list[256];
	size_t len = 0;
	list[0] = 0;
	for (size_t i = 0; i < n && len < sizeof list; i++)
		len += (size_t)snprintf(list + len, sizeof list - len, "%s%" PRId64, i ? ", " : "",
		                        t[i].tid);
	q_fail(db, "%s: process %" PRId64 " had no thread %" PRId64 " (its threads: %s)",
	       db->path, pid, tid, n ? list : "none");
	return Q_NOT_FOUND;
}

/* Does the filter keep the row s holds (thread, and pool if any)? */
static bool keeps_row(const struct q_db *db, sqlite3_stmt *s)
{
	uint32_t one;
	return q_tf_keeps(db, sqlite3_column_int64(s, 0)) &&
	       (!db->filt.pool || q_map_get(&db->filt.pools, sqlite3_column_int64(s, 6), &one));
}

/* The chosen threads' (and pool's) allocations, and their frees in time order. */
static int load_blocks(struct q_db *db, struct q_tfilter *f)
{
	size_t cap = 0, fcap = 0;
	int rc;
	sqlite3_stmt *s = q_stmt(db, f->pool ? Q_ST_POOL_BLOCKS : Q_ST_THREAD_BLOCKS);
	if (!s || q_load_kinds(db))
		return -1;
	sqlite3_bind_int64(s, 1, f->pid);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (!keeps_row(db, s))
			continue;
		struct q_tblock b = {
			.t_alloc = sqlite3_column_int64(s, 1),
			.t_free = sqlite3_column_type(s, 2) == SQLITE_NULL ? Q_NEVER
			          : sqlite3_column_int64(s, 2),
			.size = sqlite3_column_int64(s, 3),
			.stack_id = sqlite3_column_int64(s, 4),
			.temporary = sqlite3_column_int(s, 5) != 0,
		};
		/* a pool's answers peak with its own blocks, a thread's with the heap */
		b.peaked = f->pool || q_kind_of(db, b.stack_id) == Q_KIND_HEAP;
		if (q_grow(&f->b, &cap, f->nb + 1, sizeof *f->b) ||
		    (b.t_free != Q_NEVER && b.peaked &&
		     q_grow(&f->fr, &fcap, f->nfr + 1, sizeof *f->fr))) {
			sqlite3_reset(s);
			return q_fail(db, "out of memory");
		}
		f->b[f->nb++] = b;
		if (b.t_free != Q_NEVER && b.peaked)
			f->fr[f->nfr++] = (struct q_tfree){ b.t_free, b.size };
	}
	if (rc != SQLITE_DONE)
		return q_sqlfail(db, "reading the threads' allocations");
	if (f->nfr)
		qsort(f->fr, f->nfr, sizeof *f->fr, cmp_free);
	return 0;
}

/* Walks the chosen threads' events in time order, one instant at a time
 * (the allocations and the frees at an instant together: a snapshot at t
 * holds the blocks allocated at t and not those freed at t). */
struct sweep {
	const struct q_tfilter *f;
	size_t a, k;                           /* next allocation, next free */
	int64_t live, allocs, frees;           /* live bytes; events so far */
};

/* The next instant with an event, Q_NEVER when none is left. */
static int64_t next_instant(const struct sweep *w)
{
	int64_t ta = w->a < w->f->nb ? w->f->b[w->a].t_alloc : Q_NEVER;
	int64_t tf = w->k < w->f->nfr ? w->f->fr[w->k].t : Q_NEVER;
	return ta < tf ? ta : tf;
}

/* Applies every event at instant t. The peak and the timeline are the
 * heap's, as the importer's are (a mapping is in the snapshots only), or
 * under a pool filter the pool's. */
static void apply(struct sweep *w, int64_t t)
{
	for (; w->a < w->f->nb && w->f->b[w->a].t_alloc == t; w->a++)
		if (w->f->b[w->a].peaked) {
			w->live += w->f->b[w->a].size;
			w->allocs++;
		}
	for (; w->k < w->f->nfr && w->f->fr[w->k].t == t; w->k++, w->frees++)
		w->live -= w->f->fr[w->k].size;
}

/* The first instant of the largest live bytes; the process's start when
 * the threads allocated nothing. */
static int64_t peak_of(const struct q_tfilter *f, int64_t t_start)
{
	struct sweep w = { .f = f };
	int64_t best = -1, at = t_start;
	for (int64_t t; (t = next_instant(&w)) != Q_NEVER; ) {
		apply(&w, t);
		if (w.live > best) {
			best = w.live;
			at = t;
		}
	}
	return at;
}

/* Databases imported before pools existed have none. */
static bool has_pools(struct q_db *db)
{
	return sqlite3_table_column_metadata(db->sql, NULL, "pools", "name", NULL, NULL, NULL,
	                                     NULL, NULL) == SQLITE_OK;
}

/* "DB: process P had no pool NAME (its pools: a, b, ...)": as many as fit. */
static int no_pool(struct q_db *db, int64_t pid, const char *name, const char *list)
{
	q_fail(db, "%s: process %" PRId64 " had no pool '%s' (its pools: %s)", db->path, pid, name,
	       *list ? list : "none");
	return Q_NOT_FOUND;
}

/* The ids of pid's pools named name into f->pools. */
static int find_pools(struct q_db *db, struct q_tfilter *f, int64_t pid, const char *name)
{
	char list[256];
	size_t len = 0;
	int rc;
	list[0] = 0;
	if (!has_pools(db))
		return no_pool(db, pid, name, list);
	sqlite3_stmt *s = q_stmt(db, Q_ST_POOLS);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *nm = (const char *)sqlite3_column_text(s, 1);
		nm = nm ? nm : "";
		if (!strcmp(nm, name) && q_map_put(&f->pools, sqlite3_column_int64(s, 0), 1))
			return q_fail(db, "out of memory");
		if (len < sizeof list)
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
			                        nm);
	}
	if (rc != SQLITE_DONE)
		return q_sqlfail(db, "reading the pools");
	return f->pools.n ? 0 : no_pool(db, pid, name, list);
}

int q_set_threads(struct q_db *db, int64_t pid, const int64_t *tids, size_t n)
{
	return q_set_filter(db, pid, tids, n, NULL);
}

int q_set_filter(struct q_db *db, int64_t pid, const int64_t *tids, size_t n, const char *pool)
{
	struct q_tfilter *f = &db->filt;
	q_tf_free(f);
	if (!n && !pool)
		return 0;
	const struct q_thread *t;
	size_t nt;
	long pi = q_proc_index(db, pid);
	if (pi < 0 || q_threads(db, pid, &t, &nt))
		return -1;
	if (pool) {
		int rc = find_pools(db, f, pid, pool);
		if (rc || !(f->pool = strdup(pool))) {
			q_tf_free(f);
			return rc ? rc : q_fail(db, "out of memory");
		}
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < nt && t[k].tid != tids[i])
			k++;
		if (k == nt) {
			q_tf_free(f);
			return no_thread(db, pid, tids[i], t, nt);
		}
	}
	if (!(f->tids = malloc((n ? n : 1) * sizeof *f->tids))) {
		q_tf_free(f);
		return q_fail(db, "out of memory");
	}
	if (n) {
		memcpy(f->tids, tids, n * sizeof *tids);
		qsort(f->tids, n, sizeof *f->tids, cmp_i64);
	}
	f->pid = pid;
	for (size_t i = 0; i < n; i++) {
		if (i && f->tids[i] == f->tids[i - 1])
			continue;                      /* --tid 5 --tid 5 */
		f->tids[f->ntids++] = f->tids[i];
		if (q_map_put(&f->set, f->tids[i], 1)) {
			q_tf_free(f);
			return q_fail(db, "out of memory");
		}
	}
	if (load_blocks(db, f)) {
		q_tf_free(f);
		return -1;
	}
	f->peak_t = peak_of(f, db->procs[pi].t_start);
	return 0;
}

const int64_t *q_thread_filter(const struct q_db *db, int64_t *pid, size_t *n)
{
	*pid = db->filt.pid;
	*n = db->filt.ntids;
	return db->filt.tids;
}

void q_write_threads_line(struct q_db *db, FILE *f)
{
	const struct q_tfilter *tf = &db->filt;
	const struct q_thread *t;
	size_t nt;
	if (tf->pool)
		fprintf(f, "Pool: %s\n", tf->pool);
	if (!tf->ntids || q_threads(db, tf->pid, &t, &nt))
		return;                        /* loaded by q_set_threads: cannot fail */
	for (size_t i = 0; i < tf->ntids; i++) {
		const char *name = "";
		for (size_t k = 0; k < nt; k++)
			if (t[k].tid == tf->tids[i])
				name = t[k].name;
		fprintf(f, "%s%" PRId64 "%s%s%s", i ? ", " : "Threads: ", tf->tids[i],
		        *name ? " (" : "", name, *name ? ")" : "");
	}
	fputc('\n', f);
}

/* ---- the answers ------------------------------------------------------------------ */

int q_tf_on(struct q_db *db, int64_t pid)
{
	if (!db->filt.ntids && !db->filt.pool)
		return 0;
	if (db->filt.pid == pid)
		return 1;
	return q_fail(db, "%s: the thread filter is set for process %" PRId64 ", not %" PRId64,
	              db->path, db->filt.pid, pid);
}

bool q_tf_keeps(const struct q_db *db, int64_t tid)
{
	uint32_t one;
	return !db->filt.ntids || q_map_get(&db->filt.set, tid, &one);
}

/* Adds block b to p: allocated, and live too when live is set. */
static int add_block(struct q_db *db, struct q_profile *p, const struct q_tblock *b, bool live)
{
	struct q_row *r = q_prow(db, p, b->stack_id);
	if (!r)
		return -1;
	r->v[Q_ALLOC_OBJECTS]++;
	r->v[Q_ALLOC_BYTES] += b->size;
	r->v[Q_INUSE_OBJECTS] += live;
	r->v[Q_INUSE_BYTES] += live ? b->size : 0;
	return 0;
}

/* The blocks allocated in (after, t], live when not freed by t. */
static int sum_window(struct q_db *db, int64_t after, int64_t t, struct q_profile *p)
{
	const struct q_tfilter *f = &db->filt;
	for (size_t i = 0; i < f->nb && f->b[i].t_alloc <= t; i++)
		if (f->b[i].t_alloc > after && add_block(db, p, &f->b[i], f->b[i].t_free > t))
			return -1;
	q_pcompact(p);
	return 0;
}

int q_tf_snapshot(struct q_db *db, int64_t t, struct q_profile *p)
{
	return sum_window(db, INT64_MIN, t, p);
}

int q_tf_steady(struct q_db *db, int64_t t1, int64_t t2, struct q_profile *p)
{
	return sum_window(db, t1, t2, p);
}

/* A temporary allocation counts as live, as in q_temporary. */
int q_tf_temporary(struct q_db *db, struct q_profile *p)
{
	const struct q_tfilter *f = &db->filt;
	for (size_t i = 0; i < f->nb; i++)
		if (f->b[i].temporary && add_block(db, p, &f->b[i], true))
			return -1;
	return 0;
}

/* Each bucket of the process's timeline again, from the chosen threads'
 * events: live bytes and objects at its end, the largest live bytes at an
 * instant inside it (or carried into it), its allocations and frees. */
int q_tf_timeline(struct q_db *db, const struct q_bucket *all, size_t n,
                  const struct q_bucket **out, size_t *nout)
{
	struct q_tfilter *f = &db->filt;
	if (!f->tl_loaded) {
		if (n && db->bucket_ns <= 0)
			return q_fail(db, "%s: damaged database (no meta.timeline_bucket_ns)", db->path);
		if (n && !(f->tl = calloc(n, sizeof *f->tl)))
			return q_fail(db, "out of memory");
		struct sweep w = { .f = f };
		int64_t objects = 0;
		for (size_t i = 0; i < n; i++) {
			struct q_bucket *k = &f->tl[i];
			int64_t end = all[i].t + db->bucket_ns, a0 = w.allocs, f0 = w.frees;
			k->t = all[i].t;
			k->max_bytes = w.live;
			for (int64_t t; (t = next_instant(&w)) < end; ) {
				apply(&w, t);
				if (w.live > k->max_bytes)
					k->max_bytes = w.live;
			}
			k->allocs = w.allocs - a0;
			k->frees = w.frees - f0;
			objects += k->allocs - k->frees;
			k->live_bytes = w.live;
			k->live_objects = objects;
		}
		f->ntl = n;
		f->tl_loaded = true;
	}
	*out = f->tl;
	*nout = f->ntl;
	return 0;
}
