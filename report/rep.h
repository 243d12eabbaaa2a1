/* rep.h - what the files of trace-report share: the report's data, computed
 * from a database through the query library (q.h), its stack and frame
 * dictionary, and the writer of the page's JSON.
 *
 * The report precomputes, per process: the timeline, the RSS samples, the
 * marks, snapshots at REP_POINTS even instants plus every mark, the peak
 * and the RSS peak, with their live bytes per kind of memory (growth
 * between two of them is their difference, exact), steady windows between
 * every two instants of a coarser grid, and the exact peak, leaks and
 * temporary profiles. The page shows an
 * instant or window between precomputed ones as the nearest and says so.
 *
 * With --base, the page compares two runs instead (compare.c): the same
 * question asked of each database, compared through the query library's
 * comparison of two runs (q_flame_add, q_diff_functions: frames matched by
 * function and file, as trace-snap --base).
 *
 * Never: SQL here (every question goes through q.h); print anything (each
 * failure leaves one line in q_errmsg(db)).
 */
#ifndef REP_H
#define REP_H

#include <stdbool.h>
#include <stdio.h>

#include "q.h"

/* Snapshot instants spread evenly over a process's span: one every 1 % of
 * it, so a click lands at most half a percent from a precomputed one. */
#define REP_POINTS 101
/* Steady windows are computed between every two instants of a coarser grid
 * (pairs grow as its square): this many even instants, plus the peak and
 * the first REP_STEADY_MARKS marks. */
#define REP_STEADY_GRID 9
#define REP_STEADY_MARKS 8
/* Marks beyond this many get no snapshot of their own (the nearest shows). */
#define REP_MAX_MARKS 64

struct rep_steady {                    /* the window between grid[i] and grid[j] */
	size_t i, j;
	struct q_profile p;
};

struct rep_proc {
	const struct q_process *proc;          /* owned by the db */
	const struct q_bucket *buckets;        /* owned by the db */
	size_t nbuckets;
	const struct q_mark *marks;            /* owned by the db */
	size_t nmarks;
	struct q_sample *rss;                  /* rss_bytes samples; NULL if none */
	size_t nrss;
	int64_t rss_peak_t;                    /* Q_NEVER: no RSS samples */
	int64_t *points;                       /* the snapshot instants, ascending */
	struct q_profile *snaps;               /* one per point */
	int64_t (*kinds)[Q_NKINDS];            /* per point: live bytes of each kind */
	bool has_kinds;                        /* the database holds more than heap */
	size_t npoints;
	size_t *grid;                          /* steady grid: indexes into points */
	size_t ngrid;
	struct rep_steady *steady;             /* ngrid * (ngrid - 1) / 2, i < j */
	size_t nsteady;
	struct q_profile peak, leaks, temporary;
};

struct rep_frame { int fn; const char *file; int line; };

/* Every stack the profiles name, and the frames, functions and files of
 * those stacks, each sorted and unique, so that an index is found by
 * binary search. */
struct rep_dict {
	int64_t *stacks;
	size_t nstacks;
	struct rep_frame *frames;
	size_t nframes;
	int *fns;
	size_t nfns;
	const char **files;
	size_t nfiles;
};

struct rep_report {
	const char *db_path;
	struct rep_proc *procs;
	size_t nprocs;
	struct rep_dict dict;
};

/* The questions trace-report --base asks of both runs, as trace-snap's. */
enum rep_question { REP_PEAK, REP_AT, REP_GROWTH, REP_STEADY, REP_LEAKS, REP_TEMPORARY };

/* One run of a comparison: its database, process and answer. */
struct rep_run {
	const char *db_path;
	struct q_db *db;
	struct rep_proc facts;                 /* proc and buckets only: the run's facts */
	struct q_profile p;
};

/* trace-report NEW --base OLD: run[Q_SIDE_BASE] is OLD, run[Q_SIDE_NEW] NEW. */
struct rep_diff {
	struct rep_run run[Q_SIDES];
	struct q_flame tree;                   /* both answers' call trees by name */
	struct q_diff_table fns;               /* per function, by the size of the change */
	int64_t total[Q_SIDES];                /* live bytes of each answer (unbiased) */
	int64_t base_only_paths, base_only_bytes;   /* of the base, not in the tree's widths */
};

/* The value the comparison shows: live bytes, as trace-snap's default. */
#define REP_DIFF_KEY Q_INUSE_BYTES

/* compare.c: the answer to question q over [t1, t2] of process pid. */
int rep_ask(struct q_db *db, enum rep_question q, int64_t pid, int64_t t1, int64_t t2,
            struct q_profile *p);
/* Compares d's two answers (asked before); an error is left in the db of
 * the run it is about. */
int rep_compare(struct rep_diff *d);
void rep_diff_free(struct rep_diff *d);

/* collect.c: fills r with every process's data (r zeroed before). */
int rep_collect(struct q_db *db, struct rep_report *r);
void rep_free(struct rep_report *r);
/* dict.c: r->dict from the stacks r's profiles name. */
int rep_dict_build(struct q_db *db, struct rep_report *r);
/* qsort's order of int64_t. */
int rep_cmp_i64(const void *a, const void *b);
/* Sorts base (n items of size sz) and keeps each item once; the new count. */
size_t rep_sort_unique(void *base, size_t n, size_t sz, int (*cmp)(const void *, const void *));
/* The index of an item the dictionary holds (it must hold it). */
size_t rep_stack_index(const struct rep_dict *d, int64_t stack_id);
size_t rep_frame_index(const struct rep_dict *d, const struct q_frame *f);
size_t rep_fn_index(const struct rep_dict *d, int fn);
size_t rep_file_index(const struct rep_dict *d, const char *file);
/* json.c: r as one JSON object on f, with every '<' escaped so that it
 * can sit inside a <script> element. */
int rep_write_json(struct q_db *db, const struct rep_report *r, FILE *f);
/* The comparison of two runs as the page's JSON, the same way. */
int rep_write_diff_json(const struct rep_diff *d, FILE *f);

/* rep_page.c, generated by embed_page.py from page/: the page before and
 * after its data. */
extern const char rep_page_head[], rep_page_tail[];

#endif
