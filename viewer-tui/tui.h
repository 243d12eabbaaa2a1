/* tui.h - the pieces of trace-tui and the few types they share.
 *
 * trace-tui is split by idea: fmt.c formats numbers for people, chart.c
 * turns the timeline into columns and draws them, model.c turns a per-stack
 * profile into function rows (flat) or a call tree, data.c is the only file
 * that calls the query library (queries/q.h; others use its types), screen.c lays out and
 * draws everything, and main.c owns the state, the keys and the loop.
 *
 * Never: SQL here or in any file but data.c; drawing outside screen.c and
 * chart.c; printing to stderr once the screen is taken over.
 */
#ifndef TUI_H
#define TUI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <curses.h>

#include "q.h"

/* ---- fmt.c -------------------------------------------------------------- */

/* "512 B", "1.50 KiB", "12.0 MiB", "320 GiB"; negative values keep the sign. */
void tui_fmt_bytes(char *buf, size_t n, int64_t bytes);
/* "0s", "1.5s", "12.345678s": nanoseconds as seconds, trailing zeros cut. */
void tui_fmt_time(char *buf, size_t n, int64_t ns);
/* A short axis label for ns, at most 7 characters ("12.5s", "1h02m"). */
void tui_fmt_time_short(char *buf, size_t n, int64_t ns);

/* ---- data.c: what trace-tui reads, all through queries/q.h --------------- */

struct tui_point { int64_t t, bytes; };            /* one timeline bucket */

/* One stack's line of the current view, unbiased if the trace is sampled. */
struct tui_sv {
	int64_t stack_id;
	int64_t bytes, objects;        /* live (or the window's difference) */
	int64_t allocs;                /* allocations up to the instant (or in the window) */
};

enum tui_kind { TUI_SNAPSHOT, TUI_GROWTH, TUI_STEADY };

struct tui_data;                                   /* opaque, see data.c */

/* Opens path, checks it is a complete heapreel database whose process (pid,
 * or the run's program if pid < 0: q_default_process) made at least one
 * allocation; on failure returns NULL, writes one line naming the file into
 * err and sets *no_pid when the database has no process pid. */
struct tui_data *tui_data_open(const char *path, int64_t pid, bool *no_pid, char *err,
                               size_t errn);
void tui_data_close(struct tui_data *d);

/* The process shown (its executable may be "") and how many the database
 * holds. */
void tui_data_process(const struct tui_data *d, int64_t *pid, const char **exe, size_t *nprocs);
/* The process after pid in the database's order (q_processes), wrapping
 * round; pid itself when it is the only one. */
int64_t tui_data_next_pid(const struct tui_data *d, int64_t pid);
/* The process's span, its peak, timeline (bucket start, max bytes) and marks. */
void tui_data_span(const struct tui_data *d, int64_t *t_start, int64_t *t_end);
void tui_data_peak(const struct tui_data *d, int64_t *t, int64_t *bytes);
const struct tui_point *tui_data_timeline(const struct tui_data *d, size_t *n);
/* The process's RSS over time (its rss_bytes samples: t, bytes); none when
 * it was recorded without counters. */
const struct tui_point *tui_data_rss(const struct tui_data *d, size_t *n);
/* The counters at t (each one's last sample at or before t), owned by d
 * until the next call: 0, Q_NOT_FOUND (the process has none), -1 (err). */
int tui_data_counters(struct tui_data *d, int64_t t, const struct q_counter **c, size_t *n,
                      char *err, size_t errn);
const struct q_mark *tui_data_marks(const struct tui_data *d, size_t *n);

/* The process as q describes it: what its answers lack (damaged, t_loss, ...). */
const struct q_process *tui_data_proc(const struct tui_data *d);
/* The stopped spans (heapreel.stop .. heapreel.start), in time order. */
const struct q_span *tui_data_stopped(const struct tui_data *d, size_t *n);
/* The unrouted spans (heapreel.unrouted .. heapreel.routed). */
const struct q_span *tui_data_unrouted(const struct tui_data *d, size_t *n);
/* What the snapshot at t lacks: Q_LACK_* bits (q_lacks). */
unsigned tui_data_lacks(struct tui_data *d, int64_t t);

/* Parses a time spec as trace-snap does ("30s", "45%", "mark:L", "end"):
 * 0, or q_time's failure (Q_NOT_FOUND: well formed, but not in the data). */
int tui_data_time(struct tui_data *d, const char *spec, int64_t *t, char *err, size_t errn);

/* A view: TUI_SNAPSHOT reads t2 only, the others the window (t1, t2].
 * The array lives until the next call. */
int tui_data_view(struct tui_data *d, enum tui_kind kind, int64_t t1, int64_t t2,
                  const struct tui_sv **out, size_t *n, char *err, size_t errn);

/* Frames of a stack, leaf first, resolved once per session (q caches them). */
int tui_data_stack(struct tui_data *d, int64_t stack_id, const struct q_frame **f, size_t *n);
const char *tui_data_fn_name(const struct tui_data *d, int fn);
int tui_data_fn_count(const struct tui_data *d);

/* Writes a view to path in the format its extension names (.heap, .pb.gz,
 * .folded, .txt). Returns 0, -1 with err set, or TUI_EXPORT_EXISTS when path
 * exists and replace is false. Never writes over the database itself. */
#define TUI_EXPORT_EXISTS 1
int tui_data_export(struct tui_data *d, enum tui_kind kind, int64_t t1, int64_t t2,
                    const char *path, bool replace, char *err, size_t errn);

/* The process's threads with their names and allocation counts. */
int tui_data_threads(struct tui_data *d, const struct q_thread **t, size_t *n, char *err,
                     size_t errn);
/* Narrows every view, the chart and the peak to the threads tids[0..n)
 * (n = 0: all threads again); on failure all threads are shown again. */
int tui_data_set_threads(struct tui_data *d, const int64_t *tids, size_t n, char *err,
                         size_t errn);
/* The threads the views are narrowed to, sorted; n = 0: all. */
const int64_t *tui_data_filter(const struct tui_data *d, size_t *n);
/* The allocation sizes of a view: TUI_SNAPSHOT the blocks live at t2, a
 * window the allocations made in (t1, t2]. */
int tui_data_hist(struct tui_data *d, enum tui_kind kind, int64_t t1, int64_t t2,
                  struct q_hist *h, char *err, size_t errn);

/* Colour pairs, set up by screen.c when colours are used. */
enum { TUI_PAIR_BAR = 1, TUI_PAIR_CURSOR, TUI_PAIR_PEAK, TUI_PAIR_MARK, TUI_PAIR_STATUS,
       TUI_PAIR_RSS };

/* ---- chart.c ------------------------------------------------------------- */

struct tui_chart {
	const struct tui_point *pts;
	size_t npts;
	int64_t duration;           /* x axis spans [0, duration] (the process's end) */
	const struct tui_point *rss; /* the RSS line: samples (t, bytes), maybe none */
	size_t nrss;
	int ncol;                   /* columns laid out by tui_chart_layout */
	int64_t *col;               /* per column: the maximum live bytes */
	int64_t *rcol;              /* per column: the maximum RSS, -1 before its first sample */
	int64_t ymax;               /* top of the y axis (a round number) */
};

int tui_chart_layout(struct tui_chart *c, int ncol);
void tui_chart_free(struct tui_chart *c);
int tui_chart_col_of(const struct tui_chart *c, int64_t t);
int64_t tui_chart_t_of(const struct tui_chart *c, int col);

/* What the chart shows besides the curve. */
struct tui_chart_marks {
	int64_t cursor, peak_t;
	const struct q_mark *marks;
	size_t nmarks;
	bool window;                /* highlight [w1, w2] on the axis */
	int64_t w1, w2;
	const struct q_span *stopped;   /* shaded: recording was stopped */
	size_t nstopped;
	const struct q_span *unrouted;  /* shaded: calls went unrecorded */
	size_t nunrouted;
};

/* Draws the chart with its y labels into rows [y, y+h) of w, h >= 3,
 * followed by one x axis row (so it uses h+1 rows); with an RSS line, its
 * legend at the right end of the top row. */
void tui_chart_draw(WINDOW *w, const struct tui_chart *c, const struct tui_chart_marks *m,
                    int y, int h, int width, bool utf8, bool color);

/* ---- model.c ------------------------------------------------------------- */

enum tui_sort { TUI_BY_BYTES, TUI_BY_OBJECTS, TUI_BY_ALLOCS };

struct tui_row {
	int fn;                     /* function index */
	int node;                   /* tree node index, -1 in the flat view */
	int depth;                  /* tree depth, 0 in the flat view */
	bool has_children, expanded;
	int64_t flat, cum, objects, allocs;
};

struct tui_model;

struct tui_model *tui_model_new(void);
void tui_model_free(struct tui_model *m);

/* Rebuilds rows from a view; frames come from the data cache. live_only
 * (a snapshot) leaves out rows with no live byte and no live object. */
int tui_model_build(struct tui_model *m, struct tui_data *d, const struct tui_sv *sv,
                    size_t n, bool tree, enum tui_sort sort, bool live_only);
const struct tui_row *tui_model_rows(const struct tui_model *m, size_t *n);
int64_t tui_model_total(const struct tui_model *m);       /* sum of bytes */
/* Flips a tree node's expansion; rows are rebuilt by the next build. */
void tui_model_toggle(struct tui_model *m, int node);
/* Expands every ancestor of node so that it becomes a visible row. */
void tui_model_reveal(struct tui_model *m, int node);
/* First tree node (depth first, heaviest first) or function whose name
 * contains needle (case-insensitive), after the given row; -1 if none.
 * Returns the node (tree) or function index (flat). */
int tui_model_find(struct tui_model *m, struct tui_data *d, const char *needle,
                   int after_node, int after_fn);
/* The heaviest stack of the view passing through a row: -1 if none. */
int64_t tui_model_stack_of(const struct tui_model *m, struct tui_data *d, const struct tui_row *r);

/* ---- screen.c: the state drawn on screen --------------------------------- */

#define TUI_INPUT_MAX 256
#define TUI_MSG_MAX   1024     /* room for an error line of q plus our words */

enum tui_prompt {
	TUI_PROMPT_NONE, TUI_PROMPT_SEARCH, TUI_PROMPT_EXPORT, TUI_PROMPT_REPLACE, TUI_PROMPT_GOTO
};

struct tui_ui {
	struct tui_data *d;
	const char *dbname;
	struct tui_chart chart;
	struct tui_model *model;
	int64_t t_start, t_end, peak_t, peak_bytes;   /* the process's span and peak */
	int64_t pid;                /* the process shown: named when there are several */
	const char *exe;
	size_t nprocs;
	const struct q_mark *marks;
	size_t nmarks;

	const struct q_process *proc;   /* what its answers lack */
	const struct q_span *stopped, *unrouted;
	size_t nstopped, nunrouted;

	int64_t cursor;
	int64_t live_bytes, live_objects, allocs;   /* at the cursor */
	unsigned lacks;             /* Q_LACK_* bits of the snapshot at the cursor */
	enum tui_kind win_kind;     /* TUI_GROWTH or TUI_STEADY */
	bool w1_set, w2_set;        /* '[' and ']' */
	int64_t w1, w2;
	bool tree;
	enum tui_sort sort;

	size_t sel, top;            /* selected row, first row shown */
	int sel_fn, sel_node;       /* the selection, kept across rebuilds */
	bool show_stack, help, utf8, color;
	int help_top;               /* first help line shown */
	int hscroll;                /* columns of function names scrolled away */
	bool mark_list;             /* the list of marks is open */
	bool show_counters;         /* the counters at the cursor replace the table */
	const struct q_counter *counters;   /* read at the cursor while shown */
	size_t ncounters;
	char counters_err[TUI_MSG_MAX];     /* why there are none */
	size_t mark_sel;            /* its selected mark */
	bool thread_list;           /* the list of threads is open */
	const struct q_thread *threads;   /* the process's, once the list was opened */
	size_t nthreads, thread_sel;
	bool *picked;               /* per thread: ticked in the list */
	bool hist;                  /* the main pane shows the view's size histogram */
	struct q_hist hist_data;
	int hist_top;               /* first bin row shown */

	enum tui_prompt prompt;     /* what the line being read is for */
	char input[TUI_INPUT_MAX];
	char search[TUI_INPUT_MAX];
	char export_path[TUI_INPUT_MAX];   /* waiting for "replace?" */
	char msg[TUI_MSG_MAX];
};

/* True when both window ends are set: the main pane shows the window. */
bool tui_window_on(const struct tui_ui *u);
/* Sets up colours (if wanted and available) after initscr. */
void tui_screen_init(struct tui_ui *u);
/* Rows the table shows at the current size (for paging and scrolling). */
int tui_screen_table_rows(const struct tui_ui *u);
/* Chart columns at the current size. */
int tui_screen_chart_cols(void);
void tui_screen_draw(struct tui_ui *u);
/* Lines of the help text (for scrolling it). */
int tui_screen_help_lines(void);
/* The mark at the cursor or the nearest before it; NULL if none. */
const struct q_mark *tui_mark_before(const struct tui_ui *u);

#endif
