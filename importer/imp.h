/*
 * imp.h - the internal interfaces between trace-import's files.
 *
 * Data flows: input.c (+ ring.c) index the traces and load their meta
 * streams (pass 1); symbols.c turns stack nodes into frames and stacks rows;
 * merge.c merges every event stream by time (pass 2); replay.c pairs
 * allocations with frees (livetab.c) and produces the time-ordered tables,
 * the two big ones through a second thread (sink.c, chan.c), the others
 * through scratch files (spill.c); db.c owns
 * the SQLite file, bulk.c feeds its big tables. Only main.c prints;
 * everything else returns -1 and fills a struct imp_err whose message
 * already names the file (and the byte offset where relevant), ready to be
 * printed after "trace-import: ".
 */
#ifndef HEAPREEL_IMP_H
#define HEAPREEL_IMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

#define IMP_ERR_MAX 512
/* Fibonacci hashing: multiply by 2^64 / golden ratio, keep high bits. */
#define IMP_HASH_MUL 0x9E3779B97F4A7C15ull
#define IMP_NO_TIME UINT64_MAX      /* "not known" / "never" for times */

struct imp_err {
	char msg[IMP_ERR_MAX];
	bool unwritable;              /* the output could not be written (disk
	                                 full, file size limit, I/O): exit 3 */
};

/* util.c */
void imp_errf(struct imp_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Grows *v (elements of size sz) so that index n fits; -1 on ENOMEM. */
int imp_grow(void *v, size_t *cap, size_t n, size_t sz);
char *imp_strdup(const char *s);      /* NULL stays NULL; NULL on ENOMEM */

/* ---- pass 1: what a trace holds (input.c, ring.c) --------------------- */
struct imp_node {                     /* one stack trie node of a trace */
	uint64_t ip;
	uint32_t parent;
	uint32_t present;             /* 1 if the trace defined this id */
};

struct imp_module {
	uint64_t start, end, file_offset, t_load;
	uint32_t perms;
	char *path;
	uint8_t *build_id;
	uint32_t build_id_len;
	int64_t db_id;                /* modules.id once written */
};

struct imp_thread {
	uint32_t tid;
	char *name;
};

struct imp_mark {
	uint64_t t;
	char *label;
};

struct imp_pool {                     /* a POOL record: a custom allocator's pool */
	uint32_t id;
	char *name;
};

struct imp_stream {                   /* one thread's event stream */
	uint32_t stream, tid;
	struct tf_segment_info *segs; /* in seq order */
	size_t nsegs, capsegs;
	struct tf_record *ring;       /* events recovered from the .ring, after segs */
	size_t nring, capring;
	struct tf_record *pre;        /* a bounded trace's keyframe events, before segs */
	size_t npre, cappre;
	uint64_t cut;                 /* records before this seq are in the keyframe */
	uint64_t lost;                /* events counted lost in its ring (.ring file) */
	uint64_t last_alloc;          /* replay: id of this thread's last allocation */
	uint64_t t_first, t_last;     /* replay: times seen (common axis) */
	uint32_t gidx;                /* replay: index over all traces' streams */
};

struct imp_trace {
	char *path;
	struct tf_reader *rd;
	const struct tf_header *hdr;  /* owned by rd */
	uint64_t shift;               /* added to every time: common axis */
	struct imp_stream *streams;
	size_t nstreams, capstreams;
	struct imp_node *nodes;       /* index = node id */
	size_t nnodes;
	struct imp_module *mods;
	size_t nmods, capmods;
	struct imp_thread *threads;
	size_t nthreads, capthreads;
	struct imp_mark *marks;
	size_t nmarks, capmarks;
	struct imp_pool *pools;
	size_t npools, cappools;
	uint64_t events;              /* event records (trace segments + ring) */
	uint64_t lost;                /* LOST records, and the .ring file's counts */
	uint64_t lost_total;          /* largest total a LOST record gave */
	uint64_t t_loss;              /* earliest instant an event may be missing from
	                                 (trace axis), or IMP_NO_TIME */
	uint64_t t_damaged;           /* damaged: latest time read before the damage */
	uint64_t recovered;           /* events taken from the .ring */
	uint64_t t_max;               /* latest time seen in pass 1 (trace axis) */
	uint64_t t_end;               /* END record's time, or IMP_NO_TIME */
	uint64_t attach_t;            /* its heapreel.attach mark (trace-record -p),
	                                 or IMP_NO_TIME: not an attached trace */
	uint64_t t_detach;            /* its heapreel.detach mark, or IMP_NO_TIME:
	                                 the recording ends there (replay.c) */
	uint64_t after_detach;        /* events left out for being after it */
	bool damaged;
	char damage[IMP_ERR_MAX];     /* first damage found, printable */
	bool wrapped;                 /* bounded trace whose oldest part is gone */
	uint32_t key_id;              /* keyframe being read (wrapped), 0 = none */
	bool keyed;                   /* key_id was read whole: replay starts there */
	uint64_t window;              /* keyed: replay is exact from here (trace axis) */
	uint32_t *node_db;            /* node id -> stacks.id (0 = none) */
	uint32_t unknown_stack;       /* stacks.id of "[unknown]": stack 0, bad ids */
	uint32_t db_first, db_count;  /* this trace's stacks.id range */
	uint32_t pid;                 /* its process's processes.pid (keys.c) */
	/* A forked child's trace (FORK record): its parent's trace is the one
	 * of pid fork_ppid and t0 fork_parent_t0; fork_mono is the fork's
	 * CLOCK_MONOTONIC instant. run.c sets the rest. */
	bool forked;
	uint32_t fork_ppid;
	uint64_t fork_parent_t0, fork_mono;
	size_t parent;                /* index of the parent's trace, or IMP_NO_TRACE */
	uint8_t inherited;            /* processes.inherited: enum imp_inherited */
	uint64_t fork_at;             /* IMP_INHERIT_SEEDED: the fork, common axis */
	struct imp_counters *counters; /* its COUNTER and SAMPLE records (counters.c) */
};

#define IMP_NO_TRACE SIZE_MAX
enum imp_inherited {                  /* processes.inherited (schema.sql) */
	IMP_INHERIT_NONE = 0,         /* not a forked child */
	IMP_INHERIT_SEEDED = 1,       /* starts with its parent's live set at the fork */
	IMP_INHERIT_UNKNOWN = 2,      /* its parent's live set at the fork is not known */
};

/* Opens the trace and checks its header: -1 if unusable (exit 1). */
int imp_trace_open(struct imp_trace *tr, const char *path, struct imp_err *e);
/* Pass 1: indexes every segment and loads the meta stream. Damage after
 * the header sets tr->damaged and stops the scan there (not an error);
 * -1 only for out of memory or an unreadable file. */
int imp_trace_scan(struct imp_trace *tr, struct imp_err *e);
void imp_trace_close(struct imp_trace *tr);
/* Finds or adds the stream; NULL on ENOMEM. */
struct imp_stream *imp_trace_stream(struct imp_trace *tr, uint32_t stream,
				    uint32_t tid);
int imp_trace_node(struct imp_trace *tr, uint32_t id, uint32_t parent,
		   uint64_t ip);
int imp_trace_thread(struct imp_trace *tr, uint32_t tid, const char *name);
/* Sets every trace's pid key: -1 (e) if two cannot be told apart. */
int imp_trace_keys(struct imp_trace *tr, size_t ntr, struct imp_err *e);
/* Sets every forked child's parent (IMP_NO_TRACE: not here, or not
 * before it, and for traces not forked); -1 (e) on ENOMEM. */
int imp_trace_parents(struct imp_trace *tr, size_t ntr, struct imp_err *e);
/* The run's program: the trace of the program the process of trace
 * `first` ran last (itself, or the last program it exec'd). */
size_t imp_main_trace(const struct imp_trace *tr, size_t ntr, size_t first);

/* counters.c: a COUNTER or SAMPLE record of the trace (pass 1); -1 on
 * ENOMEM. */
int imp_counters_add(struct imp_trace *tr, const struct tf_record *r);
/* Its counters rows; values of counters no COUNTER record names are
 * counted in *unnamed. -1: the database failed. */
struct imp_db;
int imp_counters_write(struct imp_db *db, struct imp_trace *tr, uint64_t *unnamed);
void imp_counters_free(struct imp_trace *tr);

/* ring.c: takes what a killed process left in TRACE.ring (if the file
 * exists and belongs to this trace). -1 only for ENOMEM / unreadable. */
int imp_ring_recover(struct imp_trace *tr, struct imp_err *e);

/* ---- the database (db.c) ---------------------------------------------- */
struct imp_db;

/* Creates OUT.tmp-PID-XXXXXX next to out (0600, O_EXCL) and the schema,
 * after removing the temporary files of killed imports to out; refuses an
 * existing out unless force. */
int imp_db_create(struct imp_db **db, const char *out, bool force,
		  struct imp_err *e);
/* Inserts one row through a cached prepared statement. types: one char per
 * parameter: 'i' int64_t, 'u' uint64_t, 'z' int64_t with 0 -> NULL,
 * 't' const char * (NULL -> NULL), 'b' a blob (const void *, then its
 * size_t length), 'n' NULL (no argument). */
int imp_db_insert(struct imp_db *db, const char *sql, const char *types, ...);
/* Bulk loading: runs sql (an INSERT ... SELECT c0, c1, ... FROM imp_bulk)
 * with the rows the callback produces. */
#define IMP_BULK_COLS 12
struct imp_bulk {
	/* 1: vals (and nulls, bit i = column i is NULL) filled; 0: no more
	 * rows; -1: error, described by the callback's owner. */
	int (*next)(void *ctx, int64_t *vals, uint32_t *nulls);
	void *ctx;
};
int imp_db_bulk(struct imp_db *db, const char *sql,
		int (*next)(void *, int64_t *, uint32_t *), void *ctx);
/* The rowid of the last row inserted (0 if none yet). */
uint64_t imp_db_last_rowid(const struct imp_db *db);
struct sqlite3;
/* bulk.c: the imp_bulk virtual table, reading from *src. */
int imp_bulk_register(struct sqlite3 *h, struct imp_bulk *src);
int imp_db_meta(struct imp_db *db, const char *key, int64_t value);
/* Indexes, durable settings, meta complete=1, close, rename over out. */
int imp_db_finish(struct imp_db *db, struct imp_err *e);
/* Closes and deletes the temporary file. */
void imp_db_abort(struct imp_db *db);
const char *imp_db_path(const struct imp_db *db); /* the final path */
const char *imp_db_errmsg(const struct imp_db *db); /* last SQLite error */
/* If a write to the database failed (disk full, file size limit, I/O
 * error): e says so in one line naming it and the reason, and marks the
 * output unwritable (exit 3) whatever error e held. */
void imp_db_blame(const struct imp_db *db, struct imp_err *e);
/* Directory to put scratch files in (the output's). */
const char *imp_db_dir(const struct imp_db *db);

extern const char imp_sql_schema[];   /* schema.c, generated from schema.sql by embed_sql.py */

/* ---- symbolization (symbols.c) ----------------------------------------- */
struct imp_ids {                      /* next free row ids, shared by traces */
	int64_t module, frame, stack;
};
struct imp_symstats {
	uint64_t ips, unresolved, frames, stacks, mismatched;
};
/* Every module file an import reads, opened once, and the symbols of the
 * addresses looked up in it so far: shared by the import's traces. */
struct imp_symcache;
int imp_symcache_new(struct imp_symcache **c);     /* -1 on ENOMEM */
void imp_symcache_free(struct imp_symcache *c);    /* NULL is fine */
/* Opens the files at the trace's module paths: every trace's, before any
 * is symbolized, so that a module is found by its build id wherever the
 * import has that file, whatever the order of the traces. -1 on ENOMEM. */
int imp_symcache_add(struct imp_symcache *c, const struct imp_trace *tr);
/* Writes modules, frames and stacks rows for the trace and fills
 * tr->node_db, db_first/db_count and unknown_stack. */
int imp_symbolize(struct imp_db *db, struct imp_symcache *cache,
		  struct imp_trace *tr, struct imp_ids *ids,
		  struct imp_symstats *st, struct imp_err *e);
/* The stacks.id an event's stack id stands for ("[unknown]" for 0 and
 * ids the trace never defined). */
static inline uint32_t imp_stack_of(const struct imp_trace *tr, uint32_t stack)
{
	if (stack < tr->nnodes && tr->node_db[stack])
		return tr->node_db[stack];
	return tr->unknown_stack;
}

/* ---- pass 2: the merge (merge.c) --------------------------------------- */
enum imp_ev_kind { IMP_FREE = 0, IMP_ALLOC = 1 }; /* frees first at equal t */
/* What an event does to the program's anonymous mappings (an ALLOC record
 * whose fn is mmap, mremap or munmap: FORMAT.md "Mappings") or to a custom
 * allocator's blocks (fns custom_*, pool_destroy: "Custom blocks"), or
 * nothing: a heap event. */
enum imp_region { IMP_NOT_REGION = 0, IMP_MAP, IMP_REMAP, IMP_UNMAP,
		  IMP_CUSTOM, IMP_CUSTOM_END, IMP_POOL_END };
/* Does it end something (ordered as a free)? */
static inline bool imp_region_ends(unsigned region)
{
	return region == IMP_UNMAP || region == IMP_CUSTOM_END || region == IMP_POOL_END;
}
/* allocations.kind (schema.sql) */
enum imp_alloc_kind { IMP_KIND_HEAP = 0, IMP_KIND_MMAP = 1, IMP_KIND_CUSTOM = 2 };

struct imp_ev {
	uint64_t t;                   /* common axis */
	uint64_t t_stamp;             /* t as recorded, before the merge clamped it */
	uint64_t addr, size;
	uint32_t stack;               /* trace node id */
	uint8_t kind;                 /* enum imp_ev_kind */
	uint8_t from_realloc;
	uint8_t region;               /* enum imp_region */
	uint32_t pool;                /* custom: the block's pool, 0 = none */
	struct imp_stream *st;
};

struct imp_merge;
int imp_merge_open(struct imp_merge **m, struct imp_trace *tr, size_t ntr,
		   struct imp_err *e);
/* 1: *ev filled; 0: all streams done; -1: error (e). A segment that fails
 * to decode ends its stream and marks its trace damaged. */
int imp_merge_next(struct imp_merge *m, struct imp_ev *ev, struct imp_err *e);
/* Time of the event the next imp_merge_next returns, IMP_NO_TIME at end. */
uint64_t imp_merge_peek(struct imp_merge *m);
/* The address and stream of the event the next imp_merge_next returns, if
 * already decoded (to prefetch its address table slot). */
bool imp_merge_peek_addr(const struct imp_merge *m, uint64_t *addr,
			 struct imp_stream **st);
uint64_t imp_merge_records(const struct imp_merge *m); /* records consumed */
uint64_t imp_merge_clamped(const struct imp_merge *m); /* times moved forward */
void imp_merge_close(struct imp_merge *m);

/* ---- chan.c: buffers from one producer thread to one consumer ---------- */
struct imp_chan;
int imp_chan_new(struct imp_chan **c, size_t nbufs, size_t bufsize);
/* Producer: an empty buffer (waits while all are in flight); NULL once
 * the consumer aborted. */
uint8_t *imp_chan_buf(struct imp_chan *c);
void imp_chan_send(struct imp_chan *c, uint8_t *buf, size_t n);
void imp_chan_close(struct imp_chan *c);  /* producer: no more buffers */
/* Consumer: the next buffer and its length; NULL after close. */
uint8_t *imp_chan_recv(struct imp_chan *c, size_t *n);
void imp_chan_done(struct imp_chan *c, uint8_t *buf); /* consumer: reuse it */
void imp_chan_abort(struct imp_chan *c);  /* consumer: stops reading */
void imp_chan_free(struct imp_chan *c);   /* both sides finished */

/* ---- sink.c: the allocations and frees rows, inserted by a second thread */
struct imp_alloc_row {                /* one allocations row */
	uint64_t t, t_free, addr, size;
	uint32_t stack, tid, pid;
	bool freed, temporary, from_realloc;
	uint8_t kind;                 /* enum imp_alloc_kind */
	uint32_t pool;                /* kind custom: pools.id, 0 = none */
};

struct imp_free_row {                 /* one free, as free_blocks packs it */
	uint64_t alloc_id, size;
	uint32_t stack, proc;
};
/* Frees per row of free_blocks (schema.sql; meta.free_block): a row of
 * about 2 KiB, inside one 8 KiB page. */
#define IMP_FREE_BLOCK 256

struct imp_sink;
/* Starts the inserter: until imp_sink_end, it is db's only user. t_last:
 * no event is later. */
int imp_sink_open(struct imp_sink **s, struct imp_db *db, uint64_t t_last,
		  struct imp_err *e);
/* Allocation id (the previous one's + 1), not yet freed. */
int imp_sink_alloc(struct imp_sink *s, uint64_t id, const struct imp_alloc_row *a);
/* Free number id (the previous one's + 1), and its allocation's t_free. */
int imp_sink_free(struct imp_sink *s, uint64_t id, const struct imp_free_row *f,
		  uint64_t t, bool temporary);
/* After the last event, for every allocation still live. */
int imp_sink_unfreed(struct imp_sink *s, uint64_t id);
/* Sends what is left and waits until every row is in. */
int imp_sink_end(struct imp_sink *s);
void imp_sink_close(struct imp_sink *s);  /* NULL is fine */

/* ---- spill.c: sequential scratch files, varint records ----------------- */
#define IMP_SPILL_BUF (1u << 20)      /* scratch buffer, bytes */
#define IMP_REC_MAX 64                /* longest record: 6 varints of 10 bytes */

struct imp_spill {
	int fd;
	uint8_t *buf;
	size_t n, off;                /* bytes in buf; read position */
	bool eof;                     /* reading: the rest of the file is in buf */
	uint64_t prev_id;             /* the encoder's delta base (rewind resets) */
};

/* All return -1 with errno set on failure. */
int imp_scratch_fd(const char *dir);  /* unnamed, 0600, gone when closed */
int imp_spill_open(struct imp_spill *s, const char *dir);
void imp_spill_close(struct imp_spill *s);
int imp_spill_reserve(struct imp_spill *s); /* room for one record at buf + n */
int imp_spill_rewind(struct imp_spill *s);  /* done writing: read from the start */
int imp_spill_fill(struct imp_spill *s);    /* one whole record at buf + off */
/* Reads n varints (tf_varint.h) from [*p, end); false if they do not fit
 * or one is damaged. */
bool imp_get_uvs(const uint8_t **p, const uint8_t *end, uint64_t *v, int n);

/* ---- livetab.c: address -> live allocation, per process ---------------- */
struct imp_live {                     /* id 0 = empty slot */
	uint64_t addr, id, size;
	uint32_t stack;               /* stacks.id */
	uint32_t stream;              /* gidx of the allocating thread */
};

struct imp_livetab {
	struct imp_live *tab;
	size_t cap, n;                /* cap: a power of two */
};

int imp_live_init(struct imp_livetab *t);
void imp_live_free(struct imp_livetab *t);
int imp_live_insert(struct imp_livetab *t, const struct imp_live *l);
void imp_live_erase(struct imp_livetab *t, struct imp_live *l);

static inline size_t imp_live_slot(const struct imp_livetab *t, uint64_t addr)
{
	return (size_t)(((addr >> 4) * IMP_HASH_MUL) >> 20) & (t->cap - 1);
}

static inline struct imp_live *imp_live_find(struct imp_livetab *t,
					     uint64_t addr)
{
	size_t i = imp_live_slot(t, addr);

	while (t->tab[i].id) {
		if (t->tab[i].addr == addr)
			return &t->tab[i];
		i = (i + 1) & (t->cap - 1);
	}
	return NULL;
}

/* ---- pass 2: replay (replay.c) ----------------------------------------- */
struct imp_proc_stats {              /* per trace, filled by replay */
	uint64_t t_end;               /* last event (common axis) */
	uint64_t peak_t, peak_bytes, peak_objects;
	uint64_t allocs, frees, unmatched_frees, missed_frees;
	uint64_t unknown_frees;       /* of blocks allocated while not recording */
	uint64_t inherited;           /* blocks seeded from the parent (in allocs) */
	uint64_t inherited_frees;     /* frees of inherited blocks not known */
	uint64_t frees_before_attach; /* an attached trace's frees of unknown blocks */
};

struct imp_totals {
	uint64_t events, allocations, frees, unmatched_frees, missed_frees;
	uint64_t inherited, inherited_frees; /* as in struct imp_proc_stats */
	uint64_t frees_before_attach;
	uint64_t checkpoints, checkpoint_rows, clamped;
};

typedef void imp_progress_fn(void *ctx, uint64_t done, uint64_t total);

struct imp_replay_opts {
	uint64_t duration;            /* common axis: last time + 1 */
	uint64_t bucket_ns;           /* timeline bucket */
	uint64_t ckpt_interval;       /* minimum allocations between checkpoints */
	uint64_t total_events;        /* for progress */
	imp_progress_fn *progress;
	void *progress_ctx;
};

/* Runs pass 2 and writes allocations, frees, timeline, checkpoints. */
int imp_replay(struct imp_db *db, struct imp_trace *tr, size_t ntr,
	       const struct imp_replay_opts *o, struct imp_proc_stats *ps,
	       struct imp_totals *tot, struct imp_err *e);

/* ---- one whole import (run.c) ------------------------------------------ */
struct imp_run {
	/* set by the caller */
	char **inputs;                /* traces, or one directory of traces */
	size_t ninputs;
	const char *out;
	bool force;                   /* replace an existing out */
	struct imp_replay_opts o;     /* the caller sets ckpt_interval and progress
				         (may be NULL); imp_run the rest */
	/* results, valid until imp_run_free (also after a failure) */
	struct imp_trace *tr;
	struct imp_proc_stats *ps;
	size_t ntr, first;            /* traces opened; the earliest one */
	size_t main;                  /* the run's program (imp_main_trace) */
	struct imp_totals tot;
	struct imp_symstats sst;
	uint64_t nodes, nthreads;     /* stack nodes defined; event streams */
	bool damaged;                 /* a trace had a damaged tail */
	uint64_t counters_unnamed;    /* counter values no COUNTER record named */
	char **listed;                /* a directory's traces */
	size_t nlisted;
};

/* Imports r->inputs into r->out: 0 done (r->damaged says whether a tail
 * was lost), -1 on failure (e), with out left untouched. */
int imp_run(struct imp_run *r, struct imp_err *e);
void imp_run_free(struct imp_run *r);

#endif
