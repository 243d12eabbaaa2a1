/* q.h - the query library over a heapreel database (importer/schema.sql),
 * shared by trace-snap and trace-tui.
 *
 * It opens and validates a database, turns time specs into nanoseconds,
 * computes per-stack profiles (snapshot, peak, growth, steady window,
 * leaks, temporaries, top), resolves stacks to frames, aggregates profiles
 * by function or as a top-down tree, reads the timeline and the marks, and
 * writes profiles as .heap, .pb.gz, folded stacks, a text table or an SVG
 * flame graph, and the comparison of two runs' profiles (q_write_diff). It
 * narrows every question to chosen threads (q_set_threads) and counts
 * allocation sizes (q_histogram).
 *
 * Rules: every call that can fail returns 0 on success and -1 on failure,
 * leaving one line (naming the database file where it helps) in
 * q_errmsg(db); nothing here prints. The database is opened read-only and
 * never modified. SQL parameters are always bound, never pasted.
 * A q_db is not thread-safe: use one per thread.
 *
 * Times are nanoseconds on the database's axis (since meta.t0_mono_ns).
 */
#ifndef Q_H
#define Q_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The schema_version this library reads (older databases: import again). */
#define Q_SCHEMA_VERSION 4

struct q_db;                                   /* opaque handle */

/* ---- database --------------------------------------------------------- */

/* Opens path read-only and checks that it is a complete heapreel database
 * of the schema version this library reads (meta.format = 'heapreel', schema_version
 * = Q_SCHEMA_VERSION, complete = 1). On failure returns NULL and writes
 * one line naming the file into err (err may be NULL). */
struct q_db *q_open(const char *path, char *err, size_t errn);
void q_close(struct q_db *db);
const char *q_errmsg(const struct q_db *db);

struct q_process {
	int64_t pid, ppid;
	const char *exe, *cmdline;             /* may be "" */
	int64_t t_start, t_end;                /* t_end: the process's last instant */
	int64_t sample_period;                 /* 0: every allocation recorded */
	int64_t peak_t, peak_bytes, peak_objects;   /* raw (sampled) numbers */
	int64_t lost_events;
	int64_t proc;                          /* its number in the frees table */
	/* What its answers may lack (importer/schema.sql, schema version 4). */
	int64_t t_loss;                        /* events may be missing from here; Q_NEVER: none */
	bool damaged;                          /* its trace was cut: nothing after t_damaged read */
	int64_t t_damaged;                     /* <= t_end */
	int64_t unknown_frees;                 /* frees while stopped of blocks never seen */
	int64_t fork_t;                        /* a forked child: the fork's instant; else Q_NEVER */
	int inherited;                         /* Q_INHERITED_* */
};

/* An instant that never comes (no loss, not forked). */
#define Q_NEVER INT64_MAX

/* processes.inherited: what a forked child's answers hold of its parent's blocks. */
enum { Q_INHERITED_NONE, Q_INHERITED_SEEDED, Q_INHERITED_UNKNOWN };

/* All processes, ordered by t_start then pid; owned by db. */
const struct q_process *q_processes(const struct q_db *db, size_t *n);
/* The process pid, or NULL if the database has none with that pid. */
const struct q_process *q_process(const struct q_db *db, int64_t pid);
/* The default process: the run's program, which the importer names in
 * meta.peak_pid (the program the first process ran last, following its
 * execs: README "trace-import"), else the first one. NULL if none. */
const struct q_process *q_default_process(const struct q_db *db);

/* ---- time specs --------------------------------------------------------- */

/* Returned by q_time/q_window when the spec is well formed but the database
 * cannot answer it (unknown pid or mark, instant outside the trace); -1 is
 * a malformed spec or a failure. */
#define Q_NOT_FOUND (-2)

/* Resolves spec for process pid: "30s", "1.5s", "250ms", "10us", "5ns"
 * (instants on the database axis), "45%" (of the process's span from
 * t_start to t_end), "mark:LABEL" (first mark with that label), "start",
 * "end". Fails for a malformed spec, an unknown mark, or an instant outside
 * [t_start, t_end] of the process. */
int q_time(struct q_db *db, int64_t pid, const char *spec, int64_t *t);
/* "T1..T2" into two instants; fails unless T1 <= T2. */
int q_window(struct q_db *db, int64_t pid, const char *spec, int64_t *t1, int64_t *t2);

/* ---- profiles ------------------------------------------------------------- */

/* Indexes of the values of a row; the order of pprof's heap sample types
 * is alloc first, but inuse first reads better in code. */
enum { Q_INUSE_OBJECTS, Q_INUSE_BYTES, Q_ALLOC_OBJECTS, Q_ALLOC_BYTES, Q_NVAL };

struct q_row {
	int64_t stack_id;                      /* leaf node in stacks */
	int64_t v[Q_NVAL];
};

enum q_kind {
	Q_SNAPSHOT,  /* live at t2; alloc = cumulative allocations up to t2 */
	Q_PEAK,      /* a snapshot at the process's peak instant t2 */
	Q_GROWTH,    /* snapshot(t2) - snapshot(t1), both pairs; may be negative */
	Q_STEADY,    /* allocated in (t1, t2]: inuse = still live at t2, alloc = all */
	Q_LEAKS,     /* a snapshot at the end, only stacks still holding memory */
	Q_TEMPORARY, /* temporary allocations of the whole trace; inuse = alloc */
	Q_TOP,       /* allocated in [t1, t2], frees ignored; inuse = alloc */
};

/* A per-stack profile. Values are raw: for a sampled process
 * (sample_period > 0) they count sampled allocations; q_unbias() scales.
 * Rows are in no particular order, one per stack, never all zero. */
struct q_profile {
	enum q_kind kind;
	int64_t pid, sample_period;
	int64_t t1, t2;                        /* the instants the profile is about */
	unsigned kinds;                        /* q_keep_kinds' mask; 0: every kind */
	struct q_row *rows;
	size_t n, cap;
};

/* Each fills p (reusing its memory; p must be zeroed before first use) for
 * process pid. q_snapshot is meant to be called at every cursor step: it
 * reads the nearest checkpoint at or before t plus the events since, with
 * statements prepared once per handle. */
int q_snapshot(struct q_db *db, int64_t pid, int64_t t, struct q_profile *p);
int q_peak(struct q_db *db, int64_t pid, struct q_profile *p);
/* The instant q_peak is about: the process's peak, or under a thread
 * filter the first instant at which the live bytes of those threads'
 * blocks are largest (their own peak, not the process's). */
int q_peak_time(struct q_db *db, int64_t pid, int64_t *t);
int q_growth(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_profile *p);
int q_steady(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_profile *p);
int q_leaks(struct q_db *db, int64_t pid, struct q_profile *p);
int q_temporary(struct q_db *db, int64_t pid, struct q_profile *p);
int q_top(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_profile *p);
void q_profile_free(struct q_profile *p);
/* The steady windows between every two instants of t[0..n) (ascending):
 * out[k], for the k-th pair i < j in the order (0,1), (0,2) ... (1,2) ...,
 * as q_steady(t[i], t[j]) fills it, from a snapshot at each t[k] and one
 * read of the process's allocations in (t[0], t[n-1]] that keeps only the
 * rows outliving their grid interval (steady_grid.c). out holds n(n-1)/2
 * profiles, zeroed before first use. temporary, unless NULL: the process's
 * temporary allocations, as q_temporary fills it, from the same read (which
 * then reads every row of the process). */
int q_steady_grid(struct q_db *db, int64_t pid, const int64_t *t, size_t n,
                  struct q_profile *out, struct q_profile *temporary);

/* Sums of each value over the rows (raw). */
void q_totals(const struct q_profile *p, int64_t tot[Q_NVAL]);

/* Unbiased values of one row of a profile sampled every period bytes
 * (heap-formats.md §1.5: each pair scaled by 1/(1-exp(-avg/period)),
 * truncated); period 0 copies the row. */
void q_unbias(const struct q_row *in, int64_t period, struct q_row *out);

/* ---- stacks and functions -------------------------------------------------- */

struct q_frame {
	uint64_t ip;                           /* raw return address */
	int fn;                                /* function index, see q_fn_name */
	const char *function, *file;           /* file may be NULL */
	int line;                              /* 0 if unknown */
	int inline_depth;                      /* 0: the real (outermost) function */
};

/* Frames of a stack, leaf first; an inlined chain appears innermost first,
 * ending with its inline_depth 0 frame, all with the same ip. Resolved once
 * per handle and cached: the pointer stays valid until q_close. */
int q_stack(struct q_db *db, int64_t stack_id, const struct q_frame **frames, size_t *n);
/* From now on a frame's function is told apart by its line: its name is
 * "function file:line" where the database knows the line (pprof's
 * --lines), in every output that names functions. Call it before the first
 * q_stack of the handle: resolved frames are cached. */
void q_by_lines(struct q_db *db);
/* From now on a frame's function is told apart by its source file: its name
 * is "function file" where the database knows the file, the file's last
 * component only (two builds of a program in other directories name their
 * files alike), unless q_by_lines gives file:line. What a comparison of two
 * runs matches frames by (trace-snap --base). Before the first q_stack. */
void q_by_files(struct q_db *db);
/* Function names are interned: equal names have equal indexes. */
const char *q_fn_name(const struct q_db *db, int fn);
int q_fn_count(const struct q_db *db);

/* pprof's flat/cum per function (unbiased if sampled): flat counts stacks
 * whose leaf frame is the function, cum every stack that contains it
 * (once per stack, also under recursion). */
struct q_fn_row {
	int fn;
	int64_t flat[Q_NVAL], cum[Q_NVAL];
};
struct q_fn_table {
	struct q_fn_row *rows;
	size_t n, cap;
};
/* Fills t (zeroed before first use), sorted by flat[key] descending, then
 * cum[key] descending, then name. */
int q_by_function(struct q_db *db, const struct q_profile *p, int key, struct q_fn_table *t);
void q_fn_table_free(struct q_fn_table *t);

/* Top-down call tree (unbiased if sampled): node 0 is the root (fn -1);
 * a node is a function reached through its parent's path. self = values of
 * stacks ending there, total = self + children's totals. Children are
 * linked through first_child/next_sibling (-1 ends), in no set order. */
struct q_node {
	int fn;
	int parent, first_child, next_sibling;
	int64_t self[Q_NVAL], total[Q_NVAL];
};
struct q_tree {
	struct q_node *nodes;
	size_t n, cap;
};
int q_build_tree(struct q_db *db, const struct q_profile *p, struct q_tree *t);
void q_tree_free(struct q_tree *t);

/* A call tree by function name, over one profile or two compared (flame.c):
 * node 0 is the root ("all"); a node is a function name reached through its
 * parent's path, whichever database the profile came from, so that two runs
 * meet on the same nodes. Values per side, unbiased: [Q_SIDE_BASE] the base
 * run's (zero when only one profile was added), [Q_SIDE_NEW] the profile's. */
enum { Q_SIDE_BASE, Q_SIDE_NEW, Q_SIDES };
struct q_fnode {
	const char *name;                      /* owned by its q_db: valid until q_close */
	int parent, first_child, next_sibling; /* -1 ends; children in no set order */
	int depth;                             /* the root's is 0 */
	int64_t self[Q_SIDES][Q_NVAL], total[Q_SIDES][Q_NVAL];
};
struct q_flame {
	struct q_fnode *nodes;
	size_t n, cap;
};
/* Adds profile p of db as side (Q_SIDE_*) to fl (zeroed before first use).
 * positive >= 0: only the stacks whose value of that key is positive (the
 * widths of a flame graph; a growth's shrinking stacks left out, as
 * q_folded_dropped counts them); -1: every stack. */
int q_flame_add(struct q_db *db, const struct q_profile *p, int side, int positive,
                struct q_flame *fl);
void q_flame_free(struct q_flame *fl);
/* What a graph of two runs drawn with the new run's widths does not show
 * of the base (diff.c): the paths with a value of key in the base and none
 * in the new run, counted where they leave the drawn tree, and their sum. */
void q_flame_base_only(const struct q_flame *fl, int key, int64_t *paths, int64_t *sum);

/* ---- threads ---------------------------------------------------------------- */

struct q_thread {
	int64_t tid;
	const char *name;                      /* "" if the trace named none */
	int64_t t_first, t_last;               /* Q_NEVER: it never allocated */
	int64_t allocs;                        /* its allocations (raw: sampled ones) */
};
/* The threads of process pid (the threads table, and any tid its
 * allocations name that the table lacks), by first allocation then tid;
 * owned by db. Counting the allocations reads the process's whole
 * allocations table once (it has no index by thread). */
int q_threads(struct q_db *db, int64_t pid, const struct q_thread **t, size_t *n);

/* From now on every profile of process pid (q_snapshot ... q_top, and so
 * q_peak_time), its timeline and its histograms count only the
 * allocations made by the threads tids[0..n) (a block freed by another
 * thread still counts: who allocated it decides); n = 0 lifts the filter.
 * A question about another process fails while a filter is set. Exact:
 * the allocations of those threads are read once, here, and every answer
 * is computed from them in memory, about 40 bytes per allocation kept and
 * 16 per free of one (the checkpoints and the packed frees know no thread). Returns Q_NOT_FOUND
 * for a tid the process never had (db->err lists its threads), -1 on
 * failure; either way the filter is lifted. */
int q_set_threads(struct q_db *db, int64_t pid, const int64_t *tids, size_t n);
/* The same, and with pool set, only the custom blocks of the pools of that
 * name (schema.sql pools): Q_NOT_FOUND if the process has none. */
int q_set_filter(struct q_db *db, int64_t pid, const int64_t *tids, size_t n, const char *pool);

/* Kinds of memory (schema.sql allocations.kind), and sets of them as bit
 * masks (1 << kind). kind.c. */
enum q_alloc_kind { Q_KIND_HEAP, Q_KIND_MMAP, Q_KIND_CUSTOM, Q_NKINDS };
#define Q_KINDS_ALL ((1u << Q_NKINDS) - 1)
/* "heap", "mmap", "custom" or "all" into *mask; -1 for another name. */
int q_kind_parse(const char *name, unsigned *mask);
const char *q_kind_name(unsigned kind);
/* Keeps only p's rows of the kinds in mask (a stack is of one kind). */
int q_keep_kinds(struct q_db *db, struct q_profile *p, unsigned mask);
/* p's value `key` (unbiased) per kind into tot. Returns 1 when the
 * database holds memory of other kinds than heap (the split is worth
 * showing), 0 when not, -1 on error. */
int q_kind_totals(struct q_db *db, const struct q_profile *p, int key, int64_t tot[Q_NKINDS]);
/* The filter in force: its tids (sorted) and process; n = 0 if none. */
const int64_t *q_thread_filter(const struct q_db *db, int64_t *pid, size_t *n);

/* ---- histogram of allocation sizes ------------------------------------------ */

/* Sizes binned by powers of two: bin 0 holds size 0 (malloc(0)), bin k >= 1
 * the sizes 2^(k-1) .. 2^k - 1: [1, 1], [2, 3], [4, 7], [8, 15], ... */
#define Q_HIST_BINS 64
/* The most frequent exact sizes kept, by objects. */
#define Q_HIST_TOP 10

struct q_hist_count {
	int64_t size;                          /* a bin: its smallest size */
	int64_t objects, bytes;
};

/* What the histogram counts, by kind: Q_SNAPSHOT or Q_PEAK, the blocks live
 * at t2; Q_STEADY, the allocations made in (t1, t2]; Q_TOP, those made in
 * [t1, t2] (t_start..t_end: the whole run). Exact numbers, unbiased per
 * exact size when the process was sampled (q_unbias: then estimates). */
struct q_hist {
	enum q_kind kind;
	int64_t pid, t1, t2, sample_period;
	struct q_hist_count bin[Q_HIST_BINS];
	struct q_hist_count top[Q_HIST_TOP];   /* objects descending, then size */
	size_t ntop;
	int64_t objects, bytes;                /* the totals */
};
/* Fills h for process pid, honouring the thread filter. Reads the
 * process's allocations once (sizes are in no checkpoint). */
int q_histogram(struct q_db *db, int64_t pid, enum q_kind kind, int64_t t1, int64_t t2,
                struct q_hist *h);
/* The largest size of bin k. */
int64_t q_hist_bin_max(int k);
/* The histogram as text: what it counts, the threads (if filtered), a
 * Total line, a "Warning: " line per thing it lacks, the bins from the
 * first to the last one used (size range, objects, %, bytes and their
 * human size, a bar of objects), then the most frequent sizes. */
int q_write_hist(struct q_db *db, const struct q_hist *h, FILE *f);
/* q_write_hist to path, atomically, as q_write_file writes. */
int q_write_hist_file(struct q_db *db, const struct q_hist *h, const char *path, bool force);
/* Each sentence of what h lacks as a line "PREFIX sentence" on f. */
int q_write_hist_lacks(struct q_db *db, const struct q_hist *h, const char *prefix, FILE *f);

/* ---- timeline and marks --------------------------------------------------- */

struct q_bucket {
	int64_t t;                             /* bucket start */
	int64_t live_bytes, live_objects;      /* at the bucket's end */
	int64_t max_bytes, allocs, frees;
};
struct q_mark {
	int64_t t;
	const char *label;
};
/* Owned by db, valid until q_close; loaded on first use. Under a thread
 * filter, the same buckets counting only those threads' blocks (valid
 * until the filter changes; max_bytes: the largest at an instant). */
int q_timeline(struct q_db *db, int64_t pid, const struct q_bucket **b, size_t *n);
int q_marks(struct q_db *db, int64_t pid, const struct q_mark **m, size_t *n);

/* ---- counters: RSS and the allocator's own figures over time -------------
 * Sampled by the recorder every REC_STATS_MS (importer/schema.sql, table
 * counters); a sample's value holds until the counter's next one. */
struct q_counter {
	char name[64];                         /* cut if longer */
	bool known;                            /* a sample at or before t1 */
	int64_t t1_read, at_t1;                /* that sample: when read, its value */
	bool known2;                           /* a sample at or before t2 */
	int64_t t2_read, at_t2;
	int64_t min, max;                      /* over [t1, t2]: the value at t1 (if
	                                          known) and every sample in (t1, t2] */
	bool has_range;                        /* min and max are set */
};
struct q_counters {
	struct q_counter *c;                   /* rss_* first, then by name */
	size_t n, cap;
};
/* The counters of process pid over [t1, t2] (t1 = t2: at an instant) into
 * out (zeroed before first use). Q_NOT_FOUND: the process has none
 * (recorded with REC_STATS_MS=0); -1 also for a database imported before
 * the table existed (db->err says to import again). */
int q_counters(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_counters *out);
void q_counters_free(struct q_counters *c);
struct q_sample { int64_t t, value; };
/* Every sample of counter name of process pid, in time order, into *s
 * (malloc'd: the caller frees it) and *n; none (0, *n = 0) in a database
 * without the counters table. */
int q_counter_series(struct q_db *db, int64_t pid, const char *name, struct q_sample **s,
                     size_t *n);
/* What trace-snap --stats prints, over [t1, t2] or at t1 = t2 when !window:
 * live heap bytes from the events (unbiased if sampled), every counter
 * (bytes and a binary size), and rss_bytes - (live heap + live mmap), what
 * the process holds but the program does not use; then a "Warning: " line
 * per thing the live heap lacks. Q_NOT_FOUND as q_counters. */
int q_write_stats(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, bool window, FILE *f);

/* ---- what an answer lacks ------------------------------------------------ */

/* A stretch where recording was stopped: from a heapreel.stop mark to the
 * next heapreel.start mark of the process (t2 = Q_NEVER: never restarted).
 * Blocks allocated inside it are unknown to the trace. */
struct q_span { int64_t t1, t2; };
/* The stopped spans of process pid, in time order; owned by db. */
int q_stopped(struct q_db *db, int64_t pid, const struct q_span **s, size_t *n);
/* Its unrouted spans (heapreel.unrouted .. heapreel.routed: calls reached
 * the allocator unrecorded; they may nest), in order of their starts;
 * owned by db. */
int q_unrouted(struct q_db *db, int64_t pid, const struct q_span **s, size_t *n);

enum {
	Q_LACK_LOSS = 1,        /* reaches t_loss: events may be missing */
	Q_LACK_DAMAGE = 2,      /* reaches t_damaged: what followed was not read */
	Q_LACK_STOPPED = 4,     /* meets a stopped span (a live set: one begun by its end) */
	Q_LACK_INHERITED = 8,   /* a live set of a forked child whose inherited blocks are unknown */
	Q_LACK_UNMAPPED = 16,   /* reaches the first anonymous mapping not recorded (sampled) */
	Q_LACK_CUSTOM = 32,     /* reaches the first custom allocator call not recorded */
	Q_LACK_ATTACHED = 64,   /* a live set of a process recorded by attaching (trace-record
	                           -p): what it allocated before the attach is unknown */
	Q_LACK_UNROUTED = 128,  /* as STOPPED, a span where some object's calls reached the
	                           allocator unrecorded (heapreel.unrouted .. routed) */
	Q_LACK_LAST = Q_LACK_UNROUTED
};

struct q_lack {
	unsigned what;                         /* Q_LACK_* bits; 0: the answer is whole */
	enum q_kind kind;
	const struct q_process *proc;          /* owned by db */
	struct q_span stopped;                 /* Q_LACK_STOPPED: the last span met */
	size_t nstopped;                       /* how many met */
	struct q_span unrouted;                /* Q_LACK_UNROUTED: the last span met */
	size_t nunrouted;
	int64_t t_custom;                      /* Q_LACK_CUSTOM: from when */
	int64_t t_unmapped;                    /* Q_LACK_UNMAPPED: from when */
	int64_t t_attach;                      /* Q_LACK_ATTACHED: the attach */
};

/* What an answer of this kind about process pid over [t1, t2] (t1 = t2:
 * an instant) lacks. Q_PEAK and Q_LEAKS are about the whole trace (its
 * maximum, what is still live at its end), so a loss or the damage
 * anywhere touches them; the others reach up to t2. In memory: cheap
 * enough for every cursor step. */
int q_lacks(struct q_db *db, int64_t pid, enum q_kind kind, int64_t t1, int64_t t2,
            struct q_lack *l);
/* Sentence i (0, 1, ...) of what l says into buf (one line, no newline);
 * false once there is none. */
bool q_lack_text(const struct q_lack *l, int i, char *buf, size_t n);
/* Each sentence of what profile p lacks as a line "PREFIX sentence" on f
 * (not Q_LACK_UNMAPPED nor Q_LACK_CUSTOM when p keeps no memory of that
 * kind: --kind heap). */
int q_write_lacks(struct q_db *db, const struct q_profile *p, const char *prefix, FILE *f);

/* ---- writers ---------------------------------------------------------------- */

enum q_format { Q_FMT_HEAP, Q_FMT_PB_GZ, Q_FMT_FOLDED, Q_FMT_TEXT, Q_FMT_SVG };

/* "heap", "pb.gz", "folded", "text", "svg" -> format; -1 if none. */
int q_format_by_name(const char *name);
/* From a file name's extension (.heap, .pb.gz, .folded, .txt, .svg); -1 if none. */
int q_format_by_path(const char *path);

/* Writers to an open stream; errors of the stream are the caller's to check
 * (ferror/fclose) except for the pb.gz compressor's own.
 * key (Q_INUSE_BYTES, ...) picks the value of folded and text outputs. */
int q_write_heap(struct q_db *db, const struct q_profile *p, FILE *f);
/* What q_write_heap leaves out of p because the format has no negative
 * counts: the stacks whose live pair shrank (a growth), and by how many
 * bytes in all (unbiased if sampled). */
void q_heap_dropped(const struct q_profile *p, int64_t *stacks, int64_t *bytes);
int q_write_pb_gz(struct q_db *db, const struct q_profile *p, FILE *f);
int q_write_folded(struct q_db *db, const struct q_profile *p, int key, FILE *f);
/* What q_write_folded leaves out of p because its values cannot be
 * negative: the stacks whose value of key shrank (a growth), and by how
 * much in all (unbiased if sampled). */
void q_folded_dropped(const struct q_profile *p, int key, int64_t *stacks, int64_t *sum);
/* by_stack: one line per stack (its functions, leaf first) instead of the
 * pprof-style per-function table. After the Total line, a "Warning: " line
 * for each sentence of what the answer lacks (q_lacks). */
int q_write_text(struct q_db *db, const struct q_profile *p, int key, bool by_stack, FILE *f);
/* A flame graph (svg.c): a standalone SVG of p's stacks by value of key,
 * readable without JavaScript, zoom and search with it; the header says
 * what p is and what it lacks, and what a growth's shrinking stacks (left
 * out: widths cannot be negative) amount to. */
int q_write_svg(struct q_db *db, const struct q_profile *p, int key, FILE *f);
/* ---- comparing two runs (diff.c) ------------------------------------------
 * The same question asked of two databases (trace-snap --base): base and pb
 * the earlier run and its answer, db and p the new one. Frames are matched
 * by their names as the outputs give them (with q_by_files, function and
 * file; with q_by_lines, function file:line), never by address. Errors
 * are left in db. */
struct q_diff_fn {
	const char *name;                      /* owned by one of the q_dbs */
	int64_t flat[Q_SIDES], cum[Q_SIDES];   /* as q_by_function, per run */
};
struct q_diff_table {
	struct q_diff_fn *rows;
	size_t n, cap;
};
/* Every function of either run (unbiased if sampled) into t (zeroed
 * before first use), by the size of its flat change, then of its cum
 * change, largest first, then name. */
int q_diff_functions(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                     const struct q_profile *p, int key, struct q_diff_table *t);
void q_diff_table_free(struct q_diff_table *t);
/* The sum of key over p's rows, unbiased if sampled: a side's Total. */
int64_t q_total_unbiased(const struct q_profile *p, int key);
/* The comparison as text (a Total line with the change and both totals,
 * Base: and New: lines, Warning: lines of what each lacks, then per
 * function base, new, change and cum-change), folded stacks whose values
 * are changes (signed, one line per path that changed), or svg (a
 * differential flame graph: the new run's widths, growth red, shrinkage
 * blue, the base's paths absent from the new run counted in its header).
 * Another format fails. */
int q_write_diff(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                 const struct q_profile *p, enum q_format fmt, int key, FILE *f);
/* q_write_diff to path as q_write_file writes, refusing either database. */
int q_write_diff_file(struct q_db *base, const struct q_profile *pb, struct q_db *db,
                      const struct q_profile *p, enum q_format fmt, int key, const char *path,
                      bool force);

/* bytes for people, in binary units rounded to a tenth ("1.5 MiB", "-20.5
 * KiB"; "512 B" below 1 KiB): shown beside the exact count, never instead. */
void q_human_bytes(char *buf, size_t n, int64_t bytes);
#define Q_HUMAN_BYTES 16   /* room for any of them: "-1023.9 KiB" and the NUL */
int q_write(struct q_db *db, const struct q_profile *p, enum q_format fmt, int key,
            bool by_stack, FILE *f);

/* Returned by q_output_ok and q_write_file when the output cannot be
 * written (it exists, it is the database, no permission, disk full), as
 * opposed to -1: the database could not be read. */
#define Q_OUTPUT (-3)

/* 0 if path may be written: it does not exist, or it exists and force is
 * set; Q_OUTPUT (db->err says why) if it exists without force or if it is
 * the database being read, under any name (same device and inode, also
 * through a symlink), which even force never replaces. */
int q_output_ok(struct q_db *db, const char *path, bool force);

/* Writes the profile to path atomically: a new 0600 file next to it
 * (O_EXCL, so never through a planted symlink), moved to path once
 * complete; a failure leaves no file behind. Refuses what q_output_ok
 * refuses; without force, a file that appears at path meanwhile is not
 * replaced either (the move itself refuses). */
int q_write_file(struct q_db *db, const struct q_profile *p, enum q_format fmt, int key,
                 bool by_stack, const char *path, bool force);
/* "tool: message" (printf's fmt) as one line on stderr; returns code. */
__attribute__((format(printf, 3, 4)))
int q_tool_fail(const char *tool, int code, const char *fmt, ...);

/* Writes with writer(db, ctx, f) to path atomically, as q_write_file says
 * (trace-report writes its page so). */
int q_write_atomic(struct q_db *db, const char *path, bool force,
                   int (*writer)(struct q_db *db, const void *ctx, FILE *f), const void *ctx);

#endif
