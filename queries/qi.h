/* qi.h - what the files of the query library share and nobody else sees:
 * the q_db handle, the small integer hash map, the embedded SQL texts and
 * the error helpers. Public API: q.h.
 *
 * Never: include this from trace-snap's main or from trace-tui.
 */
#ifndef QI_H
#define QI_H

#include <sqlite3.h>
#include <sys/types.h>

#include "q.h"

/* ---- embedded SQL (generated from queries/NAME.sql by embed_sql.py) ---- */
extern const char q_sql_snapshot[], q_sql_snapshot_back[], q_sql_alloc_at[], q_sql_free_block[],
	q_sql_free_time[],
	q_sql_steady[], q_sql_temporary[], q_sql_peak[],
	q_sql_meta[], q_sql_processes[], q_sql_checkpoints[], q_sql_stack_node[],
	q_sql_timeline[], q_sql_marks[], q_sql_modules[], q_sql_threads[],
	q_sql_thread_allocs[], q_sql_thread_blocks[], q_sql_hist[], q_sql_counter_names[],
	q_sql_counter_at[], q_sql_counter_range[], q_sql_counter_series[], q_sql_stack_kinds[],
	q_sql_pool_blocks[], q_sql_pools[], q_sql_steady_grid[];

/* ---- int64 -> uint32 open-addressing map ------------------------------- */
struct q_map {
	int64_t *keys;
	uint32_t *vals;
	size_t cap, n;                         /* cap: a power of two or 0 */
};
/* 1 and *val set if key is in the map, else 0. */
int q_map_get(const struct q_map *m, int64_t key, uint32_t *val);
int q_map_put(struct q_map *m, int64_t key, uint32_t val);   /* -1: no memory */
void q_map_clear(struct q_map *m);
void q_map_free(struct q_map *m);

/* ---- the handle ----------------------------------------------------------- */
struct q_ckpt { int64_t id, t, alloc_id, free_id; };

struct q_pdata {                       /* per process, parallel to procs */
	struct q_ckpt *ck;
	size_t nck;
	struct q_bucket *tl;
	size_t ntl;
	bool tl_loaded;
	struct q_mark *marks;
	size_t nmarks;
	bool marks_loaded;
	struct q_span *stopped, *unrouted;     /* from the marks, on first use */
	size_t nstopped, nunrouted;
	bool spans_loaded;
	struct q_thread *threads;              /* q_threads, on first use */
	size_t nthreads;
	bool threads_loaded;
};

/* A cached trie node: its parent and the frame it carries. */
struct q_node_c {
	int64_t parent;                        /* 0: root side */
	struct q_frame frame;
};

/* A resolved stack, leaf first. */
struct q_stack_c {
	size_t n;
	struct q_frame *frames;
};

enum q_stmt {
	Q_ST_SNAPSHOT, Q_ST_SNAPSHOT_BACK, Q_ST_ALLOC_AT, Q_ST_FREE_BLOCK, Q_ST_FREE_TIME, Q_ST_PEAK, Q_ST_STEADY, Q_ST_TEMPORARY, Q_ST_STACK_NODE, Q_ST_TIMELINE,
	Q_ST_MARKS, Q_ST_MODULES, Q_ST_THREADS, Q_ST_THREAD_ALLOCS, Q_ST_THREAD_BLOCKS, Q_ST_HIST,
	Q_ST_COUNTER_NAMES, Q_ST_COUNTER_AT, Q_ST_COUNTER_RANGE, Q_ST_COUNTER_SERIES,
	Q_ST_STACK_KINDS, Q_ST_POOL_BLOCKS, Q_ST_POOLS, Q_ST_STEADY_GRID,
	Q_NSTMT
};

/* One free of free_blocks (frees.c). */
struct q_free {
	int64_t alloc_id, size, stack_id, proc;
};

/* One allocation of the threads a filter keeps (tfilter.c). */
struct q_tblock {
	int64_t t_alloc, t_free;               /* t_free: Q_NEVER if never freed */
	int64_t size, stack_id;
	bool temporary;
	bool peaked;                           /* in the peak and the timeline: kind heap,
	                                          or under a pool filter its custom blocks */
};
/* A free of those threads' heap blocks: the sweeps (peak, timeline) need them
 * in time order. */
struct q_tfree { int64_t t, size; };

/* The thread and pool filter (q_set_filter): the allocations of the chosen
 * threads (and pool) of one process, read once, so that every profile is
 * computed from them in memory (the checkpoints and free_blocks know no
 * thread and no pool). */
struct q_tfilter {
	int64_t pid;
	int64_t *tids;                         /* ntids == 0: every thread */
	size_t ntids;
	struct q_map set;                      /* tid -> 1 */
	char *pool;                            /* --pool NAME; NULL: every block */
	struct q_map pools;                    /* pools.id -> 1: the pools named so */
	struct q_tblock *b;                    /* in allocation (id) order */
	size_t nb;
	struct q_tfree *fr;                    /* in time order */
	size_t nfr;
	int64_t peak_t;
	struct q_bucket *tl;                   /* the timeline, on first use */
	size_t ntl;
	bool tl_loaded;
};

/* The frees: how they are packed, and the one row decoded (frees.c). */
struct q_frees {
	int64_t total, per_row;                /* meta.frees, meta.free_block */
	int64_t row;                           /* the row in f, -1: none */
	uint32_t n;
	struct q_free *f;                      /* per_row of them */
};

struct q_db {
	sqlite3 *sql;
	char *path;
	dev_t dev;                             /* the database file's, at q_open */
	ino_t ino;
	char err[512];
	sqlite3_stmt *st[Q_NSTMT];             /* prepared once, on first use */
	struct q_process *procs;
	struct q_pdata *pd;
	size_t nprocs;
	int64_t duration;                      /* meta.duration_ns, 0 if absent */
	int64_t main_pid;                      /* meta.peak_pid, 0 if absent */
	int64_t damaged;                       /* meta.damaged, 0 if absent */
	bool by_lines;                         /* q_by_lines: names carry file:line */
	bool by_files;                         /* q_by_files: names carry the file's name */
	struct q_map rowmap;                   /* stack_id -> profile row */
	struct q_profile tmp;                  /* the other snapshot of growth/top */
	struct q_map nodemap;                  /* trie node id -> nodes[] */
	struct q_node_c *nodes;
	size_t nnodes, capnodes;
	struct q_map stackmap;                 /* stack id -> stacks[] */
	struct q_stack_c *stacks;
	size_t nstacks, capstacks;
	char **fns;                            /* interned function names */
	size_t nfns, capfns;
	struct q_map fnmap;                    /* name hash -> chain head in fns */
	uint32_t *fnnext;                      /* hash chain, parallel to fns */
	struct q_frees frees;
	int64_t bucket_ns;                     /* meta.timeline_bucket_ns, 0 if absent */
	struct q_tfilter filt;
	struct q_map kinds;                    /* stack id -> kind, not heap's (kind.c) */
	bool kinds_loaded;
};

/* Sets db->err from a format, returns -1. */
int q_fail(struct q_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "PATH: what: sqlite's message", returns -1. */
int q_sqlfail(struct q_db *db, const char *what);
/* The prepared statement, reset and with bindings cleared; NULL on error. */
sqlite3_stmt *q_stmt(struct q_db *db, enum q_stmt which);
/* Statement which with parameter 1 = arg, stepped once: 1 at its row (in
 * *s), 0 if there is none, -1 on error (db->err says what failed). */
int q_row1(struct q_db *db, enum q_stmt which, int64_t arg, sqlite3_stmt **s, const char *what);
/* Index of pid in db->procs, or -1 with db->err set. */
long q_proc_index(struct q_db *db, int64_t pid);
/* Grows *arr (of *cap elements of size sz) to hold want; -1: no memory. */
int q_grow(void *arr, size_t *cap, size_t want, size_t sz);

/* ns as seconds with every digit: "12.000000345s". */
void q_fmt_ns(char *buf, size_t n, int64_t ns);

/* Free number id: 1 and *f (valid until the next call), 0 if there is no
 * such free, -1 on error (db->err set). */
int q_free_get(struct q_db *db, int64_t id, const struct q_free **f);

/* ---- the thread filter (tfilter.c), which profile.c and db.c defer to ---- */
/* 0: no filter; 1: a filter on process pid; -1 (db->err set): a filter on
 * another process, which this question cannot honour. */
int q_tf_on(struct q_db *db, int64_t pid);
/* Whether tid passes the filter (every tid when there is none). */
bool q_tf_keeps(const struct q_db *db, int64_t tid);
/* The filtered counterparts of profile.c's: rows summed into p, which
 * start() prepared. */
int q_tf_snapshot(struct q_db *db, int64_t t, struct q_profile *p);
int q_tf_steady(struct q_db *db, int64_t t1, int64_t t2, struct q_profile *p);
int q_tf_temporary(struct q_db *db, struct q_profile *p);
/* The filtered timeline, over the buckets of the process's own (all, n). */
int q_tf_timeline(struct q_db *db, const struct q_bucket *all, size_t n,
                  const struct q_bucket **b, size_t *nb);
void q_tf_free(struct q_tfilter *f);
/* The line "Threads: 12 (worker-0), 13 (worker-1)" (names where known)
 * on f when a filter is set: text answers say which threads they cover. */
void q_write_threads_line(struct q_db *db, FILE *f);

/* ---- helpers between files ------------------------------------------------ */
/* The row of stack in p, created zero if new; NULL: no memory. */
struct q_row *q_prow(struct q_db *db, struct q_profile *p, int64_t stack);
/* The id of the last allocation at or before t (of any process: ids follow
 * t_alloc), bisected inside the checkpoint interval of process index proc
 * that holds t (profile.c): a window's rows are those in (id(t1), id(t2)]. */
int q_alloc_id_at(struct q_db *db, long proc, int64_t t, int64_t *id);
/* Drops rows whose values are all zero (the row map is stale afterwards). */
void q_pcompact(struct q_profile *p);
/* q_temporary's parts (profile.c), for the report's one read of the
 * allocations (steady_grid.c): p made an empty temporary profile of
 * process pid (which exists), then one temporary allocation added. */
void q_temporary_begin(struct q_db *db, int64_t pid, struct q_profile *p);
int q_temporary_add(struct q_db *db, struct q_profile *p, int64_t stack, int64_t size);
/* db->kinds: stack id -> kind, for the stacks that are not heap's (kind.c;
 * once per handle). Then q_kind_of tells a stack's kind (Q_KIND_*). */
int q_load_kinds(struct q_db *db);
unsigned q_kind_of(const struct q_db *db, int64_t stack);
/* A profile with nothing but what q_lacks reads (kind, pid, t1, t2). */
int q_write_lacks_of(struct q_db *db, int64_t pid, enum q_kind kind, int64_t t1, int64_t t2,
                     const char *prefix, FILE *f);
struct q_module {
	char *path;                            /* " (deleted)" already cut */
	char *build_id;                        /* NULL if unknown */
	int64_t start, end, offset;
	char perms[8];
};
/* The modules of process pid by address (caller frees with q_modules_free). */
int q_modules(struct q_db *db, int64_t pid, struct q_module **m, size_t *n);
void q_modules_free(struct q_module *m, size_t n);
/* ---- flame graphs (svg.c) --------------------------------------------------- */
/* flame.js, the script every SVG inlines (embedded at build time). */
extern const char q_js_flame[];
/* Draws fl as an SVG flame graph on f: widths from total[Q_SIDE_NEW][key]
 * (never negative: the caller adds positive stacks only), coloured by the
 * change from the base when diff, under a header of the lines that
 * head(db, ctx, stream) writes (each ending in '\n'). */
int q_svg_draw(struct q_db *db, const struct q_flame *fl, bool diff, int key,
               int (*head)(struct q_db *db, const void *ctx, FILE *f), const void *ctx, FILE *f);
/* What p is, in one line without its end: "live bytes of process 12
 * (run.db): the live set at 1.000000000s". */
void q_describe(struct q_db *db, const struct q_profile *p, int key, FILE *f);
/* "PREFIX N stacks that shrank by ... are not drawn\n" when p has stacks
 * whose value of key is negative (q_folded_dropped); nothing otherwise. */
void q_describe_dropped(const struct q_profile *p, int key, const char *prefix, FILE *f);

/* "25000 B (24.4 KiB)" or "5 objects", the value of key v; sign: a "+"
 * before a positive v (a change). */
void q_put_value(int64_t v, int key, bool sign, FILE *f);
/* Whether key counts bytes (else objects). */
bool q_key_is_bytes(int key);
/* A function's name in a folded stack: ';' and line breaks become '_'. */
void q_put_folded_name(const char *s, FILE *f);

/* Rows of p in a stable order: inuse bytes, then alloc bytes descending,
 * then stack id; caller frees. NULL: no memory (db->err set). */
const struct q_row **q_sorted_rows(struct q_db *db, const struct q_profile *p);
/* Frames of one real frame (an ip's inline chain) start at i and end at the
 * first frame with inline_depth 0; returns the index after it. */
size_t q_group_end(const struct q_frame *f, size_t n, size_t i);

#endif
