/* db.c - opening and validating a heapreel database, the handle's
 * prepared statements, the per-process data kept in memory (processes,
 * checkpoint index, timeline, marks) and error messages.
 *
 * Never: write to the database (it is opened read-only), or accept one
 * that is not ours, half-written, or of a newer schema.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qi.h"

/* Read performance: the TUI snapshots the same region of the file over and
 * over; a larger page cache and a memory map keep those pages at hand. */
#define CACHE_KIB 65536
#define MMAP_BYTES (1ll << 30)
/* The largest meta.free_block believed: a row's cache is that many frees. */
#define Q_FREE_BLOCK_MAX 65536

static const char *const stmt_sql[Q_NSTMT] = {
	[Q_ST_SNAPSHOT] = q_sql_snapshot,
	[Q_ST_SNAPSHOT_BACK] = q_sql_snapshot_back,
	[Q_ST_ALLOC_AT] = q_sql_alloc_at,
	[Q_ST_FREE_BLOCK] = q_sql_free_block,
	[Q_ST_FREE_TIME] = q_sql_free_time,
	[Q_ST_PEAK] = q_sql_peak,
	[Q_ST_STEADY] = q_sql_steady,
	[Q_ST_TEMPORARY] = q_sql_temporary,
	[Q_ST_STACK_NODE] = q_sql_stack_node,
	[Q_ST_TIMELINE] = q_sql_timeline,
	[Q_ST_MARKS] = q_sql_marks,
	[Q_ST_MODULES] = q_sql_modules,
	[Q_ST_THREADS] = q_sql_threads,
	[Q_ST_THREAD_ALLOCS] = q_sql_thread_allocs,
	[Q_ST_THREAD_BLOCKS] = q_sql_thread_blocks,
	[Q_ST_HIST] = q_sql_hist,
	[Q_ST_COUNTER_NAMES] = q_sql_counter_names,
	[Q_ST_COUNTER_AT] = q_sql_counter_at,
	[Q_ST_COUNTER_RANGE] = q_sql_counter_range,
	[Q_ST_COUNTER_SERIES] = q_sql_counter_series,
	[Q_ST_STACK_KINDS] = q_sql_stack_kinds,
	[Q_ST_POOL_BLOCKS] = q_sql_pool_blocks,
	[Q_ST_POOLS] = q_sql_pools,
	[Q_ST_STEADY_GRID] = q_sql_steady_grid,
};

int q_fail(struct q_db *db, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(db->err, sizeof db->err, fmt, ap);
	va_end(ap);
	return -1;
}

int q_sqlfail(struct q_db *db, const char *what)
{
	return q_fail(db, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->sql));
}

const char *q_errmsg(const struct q_db *db)
{
	return db->err;
}

int q_grow(void *arr, size_t *cap, size_t want, size_t sz)
{
	if (want <= *cap)
		return 0;
	size_t c = *cap ? *cap : 16;
	while (c < want)
		c *= 2;
	void *p = realloc(*(void **)arr, c * sz);
	if (!p)
		return -1;
	*(void **)arr = p;
	*cap = c;
	return 0;
}

sqlite3_stmt *q_stmt(struct q_db *db, enum q_stmt which)
{
	sqlite3_stmt *s = db->st[which];
	if (!s) {
		if (sqlite3_prepare_v3(db->sql, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
		                       &s, NULL) != SQLITE_OK) {
			q_sqlfail(db, "preparing a query");
			return NULL;
		}
		db->st[which] = s;
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return s;
}

int q_row1(struct q_db *db, enum q_stmt which, int64_t arg, sqlite3_stmt **s, const char *what)
{
	if (!(*s = q_stmt(db, which)))
		return -1;
	sqlite3_bind_int64(*s, 1, arg);
	int rc = sqlite3_step(*s);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, what);
}

long q_proc_index(struct q_db *db, int64_t pid)
{
	for (size_t i = 0; i < db->nprocs; i++)
		if (db->procs[i].pid == pid)
			return (long)i;
	q_fail(db, "%s: no process with pid %lld in the database", db->path, (long long)pid);
	return -1;
}

const struct q_process *q_processes(const struct q_db *db, size_t *n)
{
	*n = db->nprocs;
	return db->procs;
}

const struct q_process *q_process(const struct q_db *db, int64_t pid)
{
	for (size_t i = 0; i < db->nprocs; i++)
		if (db->procs[i].pid == pid)
			return &db->procs[i];
	return NULL;
}

/* The importer decides which process is the run's program (it follows the
 * execs in the traces' headers: importer/keys.c) and stores its pid as
 * meta.peak_pid; a database without it has the first process. */
const struct q_process *q_default_process(const struct q_db *db)
{
	const struct q_process *p = db->main_pid ? q_process(db, db->main_pid) : NULL;
	return p ? p : db->nprocs ? &db->procs[0] : NULL;
}

static char *dup_text(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);
	return strdup(t ? (const char *)t : "");
}

/* One meta value: 1 found (type in *type), 0 absent, -1 error. */
static int meta(struct q_db *db, sqlite3_stmt *s, const char *key, int64_t *num,
                char *txt, size_t txtn)
{
	sqlite3_reset(s);
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return q_sqlfail(db, "reading meta");
	if (num)
		*num = sqlite3_column_int64(s, 0);
	if (txt) {
		const unsigned char *t = sqlite3_column_text(s, 0);
		snprintf(txt, txtn, "%s", t ? (const char *)t : "");
	}
	return 1;
}

static int check_meta(struct q_db *db)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db->sql, q_sql_meta, -1, &s, NULL) != SQLITE_OK)
		return q_fail(db, "%s: not a heapreel database (%s)", db->path,
		              sqlite3_errmsg(db->sql));
	char fmt[64];
	int64_t ver = 0, complete = 0;
	int rc = meta(db, s, "format", NULL, fmt, sizeof fmt);
	if (rc == 0 || (rc > 0 && strcmp(fmt, "heapreel")))
		rc = q_fail(db, "%s: not a heapreel database (no meta.format 'heapreel')", db->path);
	if (rc > 0 && (rc = meta(db, s, "schema_version", &ver, NULL, 0)) == 0)
		rc = q_fail(db, "%s: not a heapreel database (no schema_version)", db->path);
	if (rc > 0 && ver > Q_SCHEMA_VERSION)
		rc = q_fail(db, "%s: written by a newer heapreel (schema version %lld; this "
		            "version reads up to %d)", db->path, (long long)ver, Q_SCHEMA_VERSION);
	if (rc > 0 && ver < 1)
		rc = q_fail(db, "%s: not a heapreel database (schema_version %lld)", db->path,
		            (long long)ver);
	if (rc > 0 && ver < Q_SCHEMA_VERSION)
		rc = q_fail(db, "%s: written by an older trace-import (schema version %lld; this "
		            "version reads %d): import the trace again", db->path, (long long)ver,
		            Q_SCHEMA_VERSION);
	if (rc > 0 && ((rc = meta(db, s, "complete", &complete, NULL, 0)) == 0 || complete != 1))
		rc = q_fail(db, "%s: incomplete database (the import did not finish)", db->path);
	if (rc > 0 && (rc = meta(db, s, "duration_ns", &db->duration, NULL, 0)) == 0)
		rc = 1;
	if (rc > 0 && (rc = meta(db, s, "peak_pid", &db->main_pid, NULL, 0)) == 0)
		rc = 1;
	if (rc > 0 && (rc = meta(db, s, "damaged", &db->damaged, NULL, 0)) == 0)
		rc = 1;
	if (rc > 0 && (rc = meta(db, s, "timeline_bucket_ns", &db->bucket_ns, NULL, 0)) == 0)
		rc = 1;
	/* the packing of free_blocks, which the importer always writes */
	db->frees.row = -1;
	if (rc > 0) {
		struct q_frees *f = &db->frees;
		int n = meta(db, s, "frees", &f->total, NULL, 0);
		int per = n < 0 ? n : meta(db, s, "free_block", &f->per_row, NULL, 0);
		if (per < 0)
			rc = -1;
		else if (!n || !per || f->total < 0 || f->per_row < 1 || f->per_row > Q_FREE_BLOCK_MAX)
			rc = q_fail(db, "%s: damaged database (meta frees or free_block missing or "
			            "wrong)", db->path);
	}
	sqlite3_finalize(s);
	return rc < 0 ? -1 : 0;
}

/* Columns 12.. of processes.sql: what the process's answers may lack. An
 * importer that counted lost events without their instant leaves t_loss
 * NULL: then any of its events may be missing. A damaged trace read up to
 * an unknown instant was read up to its last event (t_end). */
static void lacks_of(sqlite3_stmt *s, struct q_process *p)
{
	p->t_loss = sqlite3_column_type(s, 12) != SQLITE_NULL ? sqlite3_column_int64(s, 12)
	            : p->lost_events > 0 ? p->t_start : Q_NEVER;
	p->damaged = sqlite3_column_int64(s, 13) != 0;
	p->t_damaged = sqlite3_column_type(s, 14) == SQLITE_NULL ? p->t_end
	               : sqlite3_column_int64(s, 14);
	if (p->t_damaged > p->t_end)
		p->t_damaged = p->t_end;
	p->unknown_frees = sqlite3_column_int64(s, 15);
	p->fork_t = sqlite3_column_type(s, 16) == SQLITE_NULL ? Q_NEVER
	            : sqlite3_column_int64(s, 16);
	p->inherited = sqlite3_column_int(s, 17);
}

/* meta.damaged says a trace was damaged; an importer that does not say
 * which process's leaves every process under suspicion. */
static void damaged_unnamed(struct q_db *db)
{
	if (!db->damaged)
		return;
	for (size_t i = 0; i < db->nprocs; i++)
		if (db->procs[i].damaged)
			return;
	for (size_t i = 0; i < db->nprocs; i++)
		db->procs[i].damaged = true;
}

static int load_processes(struct q_db *db)
{
	sqlite3_stmt *s;
	size_t cap = 0;
	if (sqlite3_prepare_v2(db->sql, q_sql_processes, -1, &s, NULL) != SQLITE_OK)
		return q_sqlfail(db, "reading processes");
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (q_grow(&db->procs, &cap, db->nprocs + 1, sizeof *db->procs))
			break;
		struct q_process *p = &db->procs[db->nprocs++];
		p->pid = sqlite3_column_int64(s, 0);
		p->ppid = sqlite3_column_int64(s, 1);
		p->exe = dup_text(s, 2);
		p->cmdline = dup_text(s, 3);
		p->t_start = sqlite3_column_int64(s, 4);
		/* A process without an END record ends at the database's end. */
		p->t_end = sqlite3_column_type(s, 5) == SQLITE_NULL ? db->duration
		                                                    : sqlite3_column_int64(s, 5);
		if (p->t_end < p->t_start)
			p->t_end = p->t_start;
		p->sample_period = sqlite3_column_int64(s, 6);
		p->peak_t = sqlite3_column_int64(s, 7);
		p->peak_bytes = sqlite3_column_int64(s, 8);
		p->peak_objects = sqlite3_column_int64(s, 9);
		p->lost_events = sqlite3_column_int64(s, 10);
		p->proc = sqlite3_column_int64(s, 11);
		lacks_of(s, p);
		if (!p->exe || !p->cmdline)
			break;
	}
	sqlite3_finalize(s);
	if (rc == SQLITE_ROW)
		return q_fail(db, "%s: out of memory", db->path);
	if (rc != SQLITE_DONE)
		return q_sqlfail(db, "reading processes");
	damaged_unnamed(db);
	db->pd = calloc(db->nprocs ? db->nprocs : 1, sizeof *db->pd);
	return db->pd ? 0 : q_fail(db, "%s: out of memory", db->path);
}

static int load_checkpoints(struct q_db *db)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db->sql, q_sql_checkpoints, -1, &s, NULL) != SQLITE_OK)
		return q_sqlfail(db, "reading the checkpoint index");
	int rc;
	long at = -1;
	int64_t at_pid = 0;
	size_t cap = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t pid = sqlite3_column_int64(s, 0);
		if (at < 0 || pid != at_pid) {
			at_pid = pid;
			at = -1;
			cap = 0;
			for (size_t i = 0; i < db->nprocs; i++)
				if (db->procs[i].pid == pid)
					at = (long)i;
			if (at < 0)
				continue;       /* checkpoints of no known process: unused */
		}
		struct q_pdata *pd = &db->pd[at];
		if (q_grow(&pd->ck, &cap, pd->nck + 1, sizeof *pd->ck))
			break;
		struct q_ckpt *c = &pd->ck[pd->nck++];
		c->id = sqlite3_column_int64(s, 1);
		c->t = sqlite3_column_int64(s, 2);
		c->alloc_id = sqlite3_column_int64(s, 3);
		c->free_id = sqlite3_column_int64(s, 4);
	}
	sqlite3_finalize(s);
	if (rc == SQLITE_ROW)
		return q_fail(db, "%s: out of memory", db->path);
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, "reading the checkpoint index");
}

struct q_db *q_open(const char *path, char *err, size_t errn)
{
	struct q_db *db = calloc(1, sizeof *db);
	struct stat st;
	if (!db || !(db->path = strdup(path))) {
		if (err)
			snprintf(err, errn, "%s: out of memory", path);
		free(db);
		return NULL;
	}
	int rc = 0;
	/* SQLite would report a missing file as "unable to open database file". */
	if (stat(path, &st))
		rc = q_fail(db, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = q_fail(db, "%s: not a regular file", path);
	/* NOMUTEX: a connection is only ever used by one thread; the
	 * serialized mode's lock per call was a tenth of a snapshot. */
	else if (sqlite3_open_v2(path, &db->sql, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
				 NULL) != SQLITE_OK)
		rc = q_sqlfail(db, "cannot open");
	if (!rc) {
		db->dev = st.st_dev;   /* what q_output_ok compares an output with */
		db->ino = st.st_ino;
		char pragma[96];
		snprintf(pragma, sizeof pragma, "PRAGMA cache_size=-%d; PRAGMA mmap_size=%lld;",
		         CACHE_KIB, MMAP_BYTES);
		sqlite3_exec(db->sql, pragma, NULL, NULL, NULL);  /* only speed depends on it */
		/* One read transaction for the connection's life: otherwise every
		 * statement takes and drops the file lock and looks for a hot
		 * journal, 4 syscalls each, half of a snapshot's time. */
		sqlite3_exec(db->sql, "BEGIN", NULL, NULL, NULL);
		rc = check_meta(db);
	}
	if (!rc)
		rc = load_processes(db);
	if (!rc)
		rc = load_checkpoints(db);
	if (rc) {
		if (err)
			snprintf(err, errn, "%s", db->err);
		q_close(db);
		return NULL;
	}
	return db;
}

void q_close(struct q_db *db)
{
	if (!db)
		return;
	for (int i = 0; i < Q_NSTMT; i++)
		sqlite3_finalize(db->st[i]);
	sqlite3_close(db->sql);
	for (size_t i = 0; i < db->nprocs; i++) {
		free((char *)db->procs[i].exe);
		free((char *)db->procs[i].cmdline);
		free(db->pd[i].ck);
		free(db->pd[i].tl);
		for (size_t j = 0; j < db->pd[i].nmarks; j++)
			free((char *)db->pd[i].marks[j].label);
		free(db->pd[i].marks);
		free(db->pd[i].stopped);
		free(db->pd[i].unrouted);
		for (size_t j = 0; j < db->pd[i].nthreads; j++)
			free((char *)db->pd[i].threads[j].name);
		free(db->pd[i].threads);
	}
	q_tf_free(&db->filt);
	free(db->procs);
	free(db->pd);
	q_map_free(&db->rowmap);
	q_map_free(&db->kinds);
	q_profile_free(&db->tmp);
	q_map_free(&db->nodemap);
	for (size_t i = 0; i < db->nnodes; i++)
		free((char *)db->nodes[i].frame.file);
	free(db->nodes);
	q_map_free(&db->stackmap);
	for (size_t i = 0; i < db->nstacks; i++)
		free(db->stacks[i].frames);
	free(db->stacks);
	for (size_t i = 0; i < db->nfns; i++)
		free(db->fns[i]);
	free(db->fns);
	free(db->fnnext);
	free(db->frees.f);
	q_map_free(&db->fnmap);
	free(db->path);
	free(db);
}

/* ---- timeline and marks: loaded on first use ------------------------------ */

int q_timeline(struct q_db *db, int64_t pid, const struct q_bucket **b, size_t *n)
{
	long i = q_proc_index(db, pid);
	if (i < 0)
		return -1;
	struct q_pdata *pd = &db->pd[i];
	if (!pd->tl_loaded) {
		sqlite3_stmt *s = q_stmt(db, Q_ST_TIMELINE);
		if (!s)
			return -1;
		sqlite3_bind_int64(s, 1, pid);
		size_t cap = 0;
		int rc;
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			if (q_grow(&pd->tl, &cap, pd->ntl + 1, sizeof *pd->tl))
				return q_fail(db, "%s: out of memory", db->path);
			struct q_bucket *k = &pd->tl[pd->ntl++];
			k->t = sqlite3_column_int64(s, 0);
			k->live_bytes = sqlite3_column_int64(s, 1);
			k->live_objects = sqlite3_column_int64(s, 2);
			k->max_bytes = sqlite3_column_int64(s, 3);
			k->allocs = sqlite3_column_int64(s, 4);
			k->frees = sqlite3_column_int64(s, 5);
		}
		if (rc != SQLITE_DONE)
			return q_sqlfail(db, "reading the timeline");
		pd->tl_loaded = true;
	}
	int on = q_tf_on(db, pid);
	if (on)
		return on < 0 ? -1 : q_tf_timeline(db, pd->tl, pd->ntl, b, n);
	*b = pd->tl;
	*n = pd->ntl;
	return 0;
}

int q_marks(struct q_db *db, int64_t pid, const struct q_mark **m, size_t *n)
{
	long i = q_proc_index(db, pid);
	if (i < 0)
		return -1;
	struct q_pdata *pd = &db->pd[i];
	if (!pd->marks_loaded) {
		sqlite3_stmt *s = q_stmt(db, Q_ST_MARKS);
		if (!s)
			return -1;
		sqlite3_bind_int64(s, 1, pid);
		size_t cap = 0;
		int rc;
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			char *label;
			if (q_grow(&pd->marks, &cap, pd->nmarks + 1, sizeof *pd->marks) ||
			    !(label = dup_text(s, 1)))
				return q_fail(db, "%s: out of memory", db->path);
			pd->marks[pd->nmarks].t = sqlite3_column_int64(s, 0);
			pd->marks[pd->nmarks++].label = label;
		}
		if (rc != SQLITE_DONE)
			return q_sqlfail(db, "reading the marks");
		pd->marks_loaded = true;
	}
	*m = pd->marks;
	*n = pd->nmarks;
	return 0;
}

/* ---- modules --------------------------------------------------------------- */

#define DELETED_SUFFIX " (deleted)"

int q_modules(struct q_db *db, int64_t pid, struct q_module **out, size_t *n)
{
	sqlite3_stmt *s = q_stmt(db, Q_ST_MODULES);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	struct q_module *m = NULL;
	size_t len = 0, cap = 0;
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (q_grow(&m, &cap, len + 1, sizeof *m))
			break;
		struct q_module *x = &m[len];
		memset(x, 0, sizeof *x);
		if (!(x->path = dup_text(s, 0)))
			break;
		len++;
		/* The kernel marks a replaced binary; readers need the plain path. */
		size_t pl = strlen(x->path), dl = strlen(DELETED_SUFFIX);
		if (pl > dl && !strcmp(x->path + pl - dl, DELETED_SUFFIX))
			x->path[pl - dl] = 0;
		if (sqlite3_column_type(s, 1) != SQLITE_NULL && !(x->build_id = dup_text(s, 1)))
			break;
		x->start = sqlite3_column_int64(s, 2);
		x->end = sqlite3_column_int64(s, 3);
		x->offset = sqlite3_column_int64(s, 4);
		const unsigned char *perms = sqlite3_column_text(s, 5);
		snprintf(x->perms, sizeof x->perms, "%s", perms ? (const char *)perms : "----");
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		q_modules_free(m, len);
		return rc == SQLITE_ROW ? q_fail(db, "out of memory")
		                        : q_sqlfail(db, "reading the modules");
	}
	*out = m;
	*n = len;
	return 0;
}

void q_modules_free(struct q_module *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].path);
		free(m[i].build_id);
	}
	free(m);
}
