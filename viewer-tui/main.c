/* main.c - trace-tui: scrub through a heapreel database in a terminal.
 *
 * Parses the command line, opens the database (every error is reported on
 * stderr before the screen is taken over), then runs the key loop: a key
 * changes the state in struct tui_ui, the views that depend on it are
 * re-read through data.c, and screen.c draws. A cursor step reads one
 * snapshot; the chart, the stacks' frames and a window's view are cached.
 * Prompts (search, go to, export, replace?) and the lists (help, marks,
 * threads) take the keys while open; the counters' pane (r) follows the
 * cursor. `P` reopens the database on another process; `T` narrows
 * everything to chosen threads; `h` shows the size histogram of the view.
 *
 * Never: print once curses owns the terminal (messages go to the last row);
 * read the database except through data.c.
 */
#include "tui.h"

#include <errno.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COARSE_COLS  10       /* columns per Shift+arrow / PgUp / PgDn step */
#define ESC_DELAY_MS 25       /* how long a lone Esc waits for a sequence */
#define KEY_ESC      27
#define KEY_CTRL_U   21
#define KEY_DEL      127
#define KEY_CTRL_H   8
/* The exit codes every heapreel tool shares (README "Exit codes"). */
#define EXIT_INPUT     1      /* unusable input */
#define EXIT_USAGE     2      /* unknown flag, bad value, missing argument */
#define EXIT_NOT_FOUND 4      /* not in the data: instant, mark, pid */
#define HSCROLL_STEP 16       /* characters per < / > */

static const char usage[] =
	"usage: trace-tui [--at T] [--pid N] run.db\n"
	"  --at T    start with the cursor at T (30s, 1.5m, 250ms, 0.5 = seconds, 45%,\n"
	"            mark:LABEL, start, end; default: the peak)\n"
	"  --pid N   show process N of a multi-process database (default: the program\n"
	"            the first process ran last, after its execs)\n"
	"  --bench-steps N  move the cursor N times across the trace, print the time\n"
	"            per step (query + redraw) on stderr, and exit\n"
	"Keys: press ? inside.\n"
	"Exit: 0 done, 1 unusable input (or no terminal), 2 usage, 4 the time, mark\n"
	"or pid is not in the data.\n";

static int64_t clamp(const struct tui_ui *u, int64_t t)
{
	return t < u->t_start ? u->t_start : t > u->t_end ? u->t_end : t;
}

/* The size histogram of what the main pane shows: the window's
 * allocations, or the blocks live at the cursor. */
static int refresh_hist(struct tui_ui *u, char *err, size_t errn)
{
	int64_t lo = u->w1 < u->w2 ? u->w1 : u->w2, hi = u->w1 < u->w2 ? u->w2 : u->w1;
	if (tui_window_on(u))
		return tui_data_hist(u->d, u->win_kind, lo, hi, &u->hist_data, err, errn);
	return tui_data_hist(u->d, TUI_SNAPSHOT, u->cursor, u->cursor, &u->hist_data, err, errn);
}

/* The counters at the cursor, for their pane; none, and why, when the
 * process has none. */
static void read_counters(struct tui_ui *u)
{
	if (tui_data_counters(u->d, u->cursor, &u->counters, &u->ncounters, u->counters_err,
	                      sizeof u->counters_err) == 0)
		u->counters_err[0] = '\0';
}

/* Reads the snapshot at the cursor (status line, and the main pane unless a
 * window is shown), or the window's view when rebuild_window is set. */
static int refresh_view(struct tui_ui *u, bool rebuild_window)
{
	const struct tui_sv *sv;
	size_t n;
	char err[512];

	if (tui_window_on(u) && rebuild_window) {
		int64_t lo = u->w1 < u->w2 ? u->w1 : u->w2, hi = u->w1 < u->w2 ? u->w2 : u->w1;
		if (tui_data_view(u->d, u->win_kind, lo, hi, &sv, &n, err, sizeof err) < 0 ||
		    tui_model_build(u->model, u->d, sv, n, u->tree, u->sort, false) < 0)
			goto fail;
	}
	if (tui_data_view(u->d, TUI_SNAPSHOT, u->cursor, u->cursor, &sv, &n, err, sizeof err) < 0)
		goto fail;
	u->lacks = tui_data_lacks(u->d, u->cursor);
	u->live_bytes = u->live_objects = u->allocs = 0;
	for (size_t i = 0; i < n; i++) {
		u->live_bytes += sv[i].bytes;
		u->live_objects += sv[i].objects;
		u->allocs += sv[i].allocs;
	}
	if (u->show_counters)
		read_counters(u);
	if (!tui_window_on(u) && tui_model_build(u->model, u->d, sv, n, u->tree, u->sort, true) < 0) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	if (u->hist && refresh_hist(u, err, sizeof err) < 0)
		goto fail;

	/* Keep the selected function or node selected. */
	size_t nr;
	const struct tui_row *rows = tui_model_rows(u->model, &nr);
	for (size_t i = 0; i < nr; i++) {
		if (u->tree ? rows[i].node == u->sel_node : rows[i].fn == u->sel_fn) {
			u->sel = i;
			break;
		}
	}
	return 0;
fail:
	snprintf(u->msg, sizeof u->msg, "error: %s", err);
	return -1;
}

static void remember_selection(struct tui_ui *u)
{
	size_t n;
	const struct tui_row *rows = tui_model_rows(u->model, &n);
	if (u->sel < n) {
		u->sel_fn = rows[u->sel].fn;
		u->sel_node = rows[u->sel].node;
	}
}

static void move_cols(struct tui_ui *u, int cols)
{
	int c = tui_chart_col_of(&u->chart, u->cursor) + cols;
	if (c >= u->chart.ncol)
		u->cursor = u->t_end;
	else
		u->cursor = clamp(u, tui_chart_t_of(&u->chart, c < 0 ? 0 : c));
}

static void jump_mark(struct tui_ui *u, bool next)
{
	const struct q_mark *best = NULL;
	for (size_t i = 0; i < u->nmarks; i++) {
		const struct q_mark *m = &u->marks[i];
		if (next ? m->t > u->cursor && (!best || m->t < best->t)
		         : m->t < u->cursor && (!best || m->t >= best->t))
			best = m;
	}
	if (best) {
		u->cursor = clamp(u, best->t);
		snprintf(u->msg, sizeof u->msg, "mark %s", best->label);
	} else {
		snprintf(u->msg, sizeof u->msg, "no %s mark", next ? "next" : "previous");
	}
}

static void search(struct tui_ui *u)
{
	if (!u->search[0])
		return;
	int hit = tui_model_find(u->model, u->d, u->search, u->sel_node, u->sel_fn);
	if (hit < 0) {
		snprintf(u->msg, sizeof u->msg, "no function matches \"%s\"", u->search);
		return;
	}
	if (u->tree) {
		tui_model_reveal(u->model, hit);
		u->sel_node = hit;
	} else {
		u->sel_fn = hit;
	}
	refresh_view(u, true);
	snprintf(u->msg, sizeof u->msg, "found \"%s\" (n: next)", u->search);
}

/* "phases-6s.heap", "phases-growth-1s-3s.heap": the database's name without
 * its extension, the view and its instants, in the current directory;
 * "-tid12" or "-3tids" before the extension when a thread filter is set. */
static void propose_name(const struct tui_ui *u, char *buf, size_t n)
{
	const char *base = strrchr(u->dbname, '/');
	base = base ? base + 1 : u->dbname;
	const char *dot = strrchr(base, '.');
	int len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
	char a[32], b[32], thr[40] = "";
	size_t nf;
	const int64_t *f = tui_data_filter(u->d, &nf);
	if (nf == 1)
		snprintf(thr, sizeof thr, "-tid%" PRId64, f[0]);
	else if (nf > 1)
		snprintf(thr, sizeof thr, "-%zutids", nf);
	if (tui_window_on(u)) {
		tui_fmt_time(a, sizeof a, u->w1 < u->w2 ? u->w1 : u->w2);
		tui_fmt_time(b, sizeof b, u->w1 < u->w2 ? u->w2 : u->w1);
		snprintf(buf, n, "%.*s-%s-%s-%s%s.heap", len, base,
		         u->win_kind == TUI_STEADY ? "steady" : "growth", a, b, thr);
	} else {
		tui_fmt_time(a, sizeof a, u->cursor);
		snprintf(buf, n, "%.*s-%s%s.heap", len, base, a, thr);
	}
}

static void do_export(struct tui_ui *u, const char *path, bool replace)
{
	char err[512];
	enum tui_kind k = tui_window_on(u) ? u->win_kind : TUI_SNAPSHOT;
	int64_t lo = u->w1 < u->w2 ? u->w1 : u->w2, hi = u->w1 < u->w2 ? u->w2 : u->w1;
	if (k == TUI_SNAPSHOT)
		lo = hi = u->cursor;
	int rc = tui_data_export(u->d, k, lo, hi, path, replace, err, sizeof err);
	if (rc == TUI_EXPORT_EXISTS) {
		snprintf(u->export_path, sizeof u->export_path, "%s", path);
		u->prompt = TUI_PROMPT_REPLACE;
		u->input[0] = '\0';
	} else if (rc < 0) {
		snprintf(u->msg, sizeof u->msg, "export failed: %s", err);
	} else {
		snprintf(u->msg, sizeof u->msg, "wrote %s", path);
	}
}

static void go_to(struct tui_ui *u, const char *spec)
{
	char err[512];
	int64_t t;
	if (tui_data_time(u->d, spec, &t, err, sizeof err) < 0) {
		snprintf(u->msg, sizeof u->msg, "go to %s: %s", spec, err);
		return;
	}
	u->cursor = clamp(u, t);
	refresh_view(u, false);
}

/* Enter on a prompt: what the line was read for. */
static void prompt_done(struct tui_ui *u, enum tui_prompt p)
{
	switch (p) {
	case TUI_PROMPT_SEARCH:
		snprintf(u->search, sizeof u->search, "%s", u->input);
		search(u);
		break;
	case TUI_PROMPT_EXPORT:  do_export(u, u->input, false); break;
	case TUI_PROMPT_GOTO:    go_to(u, u->input); break;
	case TUI_PROMPT_REPLACE: case TUI_PROMPT_NONE: break;
	}
}

/* A key while a prompt is open: edit the line, Enter runs it, Esc cancels.
 * "replace?" takes one key: y replaces, any other keeps the file. */
static void prompt_key(struct tui_ui *u, int ch)
{
	size_t len = strlen(u->input);
	if (u->prompt == TUI_PROMPT_REPLACE) {
		u->prompt = TUI_PROMPT_NONE;
		if (ch == 'y' || ch == 'Y')
			do_export(u, u->export_path, true);
		else
			snprintf(u->msg, sizeof u->msg, "%s kept, nothing written", u->export_path);
	} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		enum tui_prompt p = u->prompt;
		u->prompt = TUI_PROMPT_NONE;
		if (u->input[0])
			prompt_done(u, p);
	} else if (ch == KEY_ESC) {
		u->prompt = TUI_PROMPT_NONE;
	} else if (ch == KEY_BACKSPACE || ch == KEY_DEL || ch == KEY_CTRL_H) {
		if (len)
			u->input[len - 1] = '\0';
	} else if (ch == KEY_CTRL_U) {
		u->input[0] = '\0';
	} else if (ch >= ' ' && ch < KEY_DEL && len + 1 < sizeof u->input) {
		u->input[len] = (char)ch;
		u->input[len + 1] = '\0';
	}
}

/* A key while the help is shown: Up/Down scroll it, any other closes it. */
static void help_key(struct tui_ui *u, int ch)
{
	if (ch == KEY_DOWN || ch == KEY_NPAGE || ch == ' ')
		u->help_top += ch == KEY_DOWN ? 1 : tui_screen_table_rows(u);
	else if (ch == KEY_UP || ch == KEY_PPAGE)
		u->help_top -= ch == KEY_UP ? 1 : tui_screen_table_rows(u);
	else
		u->help = false;
}

/* A key while the list of marks is open: select, Enter goes there. */
static void marks_key(struct tui_ui *u, int ch)
{
	if (ch == KEY_DOWN && u->mark_sel + 1 < u->nmarks) {
		u->mark_sel++;
	} else if (ch == KEY_UP && u->mark_sel > 0) {
		u->mark_sel--;
	} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		u->mark_list = false;
		if (u->mark_sel < u->nmarks) {
			u->cursor = clamp(u, u->marks[u->mark_sel].t);
			snprintf(u->msg, sizeof u->msg, "mark %s", u->marks[u->mark_sel].label);
			refresh_view(u, false);
		}
	} else if (ch != KEY_DOWN && ch != KEY_UP) {
		u->mark_list = false;
	}
}

/* Opens the list of marks on the one at or before the cursor. */
static void open_marks(struct tui_ui *u)
{
	const struct q_mark *m = tui_mark_before(u);
	u->mark_list = true;
	u->mark_sel = m ? (size_t)(m - u->marks) : 0;
}

static void open_prompt(struct tui_ui *u, enum tui_prompt prompt)
{
	u->prompt = prompt;
	u->input[0] = '\0';
}

static void relayout(struct tui_ui *u);

/* Opens the list of threads, each ticked if the filter keeps it. */
static void open_threads(struct tui_ui *u)
{
	char err[512];
	size_t nf;
	const int64_t *f = tui_data_filter(u->d, &nf);
	if (!u->threads && tui_data_threads(u->d, &u->threads, &u->nthreads, err, sizeof err) < 0) {
		snprintf(u->msg, sizeof u->msg, "error: %s", err);
		return;
	}
	bool *p = realloc(u->picked, (u->nthreads ? u->nthreads : 1) * sizeof *p);
	if (!p) {
		snprintf(u->msg, sizeof u->msg, "error: out of memory");
		return;
	}
	u->picked = p;
	for (size_t i = 0; i < u->nthreads; i++) {
		p[i] = false;
		for (size_t k = 0; k < nf; k++)
			p[i] |= f[k] == u->threads[i].tid;
	}
	u->thread_list = true;
	if (u->thread_sel >= u->nthreads)
		u->thread_sel = 0;
}

/* Narrows everything to the ticked threads (none: all of them). */
static void apply_threads(struct tui_ui *u)
{
	char err[512];
	int64_t *tids = calloc(u->nthreads ? u->nthreads : 1, sizeof *tids);
	size_t n = 0;
	if (!tids) {
		snprintf(u->msg, sizeof u->msg, "error: out of memory");
		return;
	}
	for (size_t i = 0; i < u->nthreads; i++)
		if (u->picked[i])
			tids[n++] = u->threads[i].tid;
	if (tui_data_set_threads(u->d, tids, n, err, sizeof err) < 0)
		snprintf(u->msg, sizeof u->msg, "error: %s", err);
	else
		snprintf(u->msg, sizeof u->msg, n ? "%zu thread%s of %zu" : "all threads", n,
		         n == 1 ? "" : "s", u->nthreads);
	free(tids);
	tui_data_peak(u->d, &u->peak_t, &u->peak_bytes);
	u->chart.pts = tui_data_timeline(u->d, &u->chart.npts);
	relayout(u);
	refresh_view(u, true);
}

/* A key while the list of threads is open: Space ticks, Enter applies. */
static void threads_key(struct tui_ui *u, int ch)
{
	if (ch == KEY_DOWN && u->thread_sel + 1 < u->nthreads) {
		u->thread_sel++;
	} else if (ch == KEY_UP && u->thread_sel > 0) {
		u->thread_sel--;
	} else if (ch == ' ' && u->thread_sel < u->nthreads) {
		u->picked[u->thread_sel] = !u->picked[u->thread_sel];
	} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		u->thread_list = false;
		apply_threads(u);
	} else if (ch != KEY_DOWN && ch != KEY_UP) {
		u->thread_list = false;
	}
}

static void relayout(struct tui_ui *u)
{
	if (tui_chart_layout(&u->chart, tui_screen_chart_cols()) < 0)
		snprintf(u->msg, sizeof u->msg, "error: out of memory");
}

/* What the state keeps of the process u->d shows; the cursor at its peak,
 * the first question people bring (its start shows nothing live). */
static void load_process(struct tui_ui *u)
{
	tui_data_process(u->d, &u->pid, &u->exe, &u->nprocs);
	tui_data_span(u->d, &u->t_start, &u->t_end);
	tui_data_peak(u->d, &u->peak_t, &u->peak_bytes);
	u->marks = tui_data_marks(u->d, &u->nmarks);
	u->proc = tui_data_proc(u->d);
	u->stopped = tui_data_stopped(u->d, &u->nstopped);
	u->unrouted = tui_data_unrouted(u->d, &u->nunrouted);
	u->chart.pts = tui_data_timeline(u->d, &u->chart.npts);
	u->chart.rss = tui_data_rss(u->d, &u->chart.nrss);
	u->chart.duration = u->t_end;
	u->cursor = clamp(u, u->peak_t);
}

/* Shows the next process of the database that allocated (in the order of
 * q_processes, wrapping round); the window and the selection start afresh. */
static void switch_process(struct tui_ui *u)
{
	char err[512];
	int64_t pid = u->pid;
	for (size_t i = 0; i + 1 < u->nprocs; i++) {
		pid = tui_data_next_pid(u->d, pid);
		bool no_pid;
		struct tui_data *d = tui_data_open(u->dbname, pid, &no_pid, err, sizeof err);
		if (!d)
			continue;           /* nothing allocated there: the next one */
		struct tui_model *m = tui_model_new();
		if (!m) {
			tui_data_close(d);
			snprintf(u->msg, sizeof u->msg, "error: out of memory");
			return;
		}
		tui_model_free(u->model);
		tui_data_close(u->d);
		u->d = d;
		u->model = m;
		load_process(u);
		u->threads = NULL;          /* the new process's, when the list opens */
		u->thread_sel = 0;
		u->w1_set = u->w2_set = false;
		u->sel = u->top = 0;
		u->sel_fn = u->sel_node = -1;
		relayout(u);
		refresh_view(u, true);
		snprintf(u->msg, sizeof u->msg, "process %lld", (long long)u->pid);
		return;
	}
	snprintf(u->msg, sizeof u->msg, u->nprocs > 1 ? "no other process allocated anything"
	                                              : "the database holds one process");
}

/* Handles one key; returns false to quit. */
static bool key(struct tui_ui *u, int ch)
{
	size_t nrows;
	tui_model_rows(u->model, &nrows);
	int page = tui_screen_table_rows(u);
	bool step = false, rebuild = false;

	if (ch == KEY_RESIZE) {
		relayout(u);
		return true;
	}
	if (u->prompt) {
		prompt_key(u, ch);
		return true;
	}
	if (u->help) {
		help_key(u, ch);
		return true;
	}
	if (u->mark_list) {
		marks_key(u, ch);
		return true;
	}
	if (u->thread_list) {
		threads_key(u, ch);
		return true;
	}
	u->msg[0] = '\0';
	switch (ch) {
	case 'q': case 'Q':
		return false;
	case KEY_LEFT:   move_cols(u, -1); step = true; break;
	case KEY_RIGHT:  move_cols(u, 1); step = true; break;
	case KEY_SLEFT: case KEY_PPAGE: move_cols(u, -COARSE_COLS); step = true; break;
	case KEY_SRIGHT: case KEY_NPAGE: move_cols(u, COARSE_COLS); step = true; break;
	case KEY_HOME:   u->cursor = u->t_start; step = true; break;
	case KEY_END:    u->cursor = u->t_end; step = true; break;
	case 'p':        u->cursor = clamp(u, u->peak_t); step = true; break;
	case 'm':        jump_mark(u, true); step = true; break;
	case 'M':        jump_mark(u, false); step = true; break;
	case '[':        u->w1 = u->cursor; u->w1_set = true; rebuild = true; break;
	case ']':        u->w2 = u->cursor; u->w2_set = true; rebuild = true; break;
	case 'g': case 'w':
		u->win_kind = ch == 'g' ? TUI_GROWTH : TUI_STEADY;
		if (!tui_window_on(u))
			snprintf(u->msg, sizeof u->msg, "%s view: set the window with [ and ]",
			         ch == 'g' ? "growth" : "steady");
		rebuild = true;
		break;
	case 'c':        u->w1_set = u->w2_set = false; rebuild = true; break;
	case 't':        u->tree = !u->tree; rebuild = true; break;
	case 's':        u->sort = (u->sort + 1) % (TUI_BY_ALLOCS + 1); rebuild = true; break;
	case 'f':        u->show_stack = !u->show_stack; break;
	case 'r':                        /* the counters' pane and the histogram take turns */
		u->show_counters = !u->show_counters;
		if (u->show_counters) {
			u->hist = false;
			read_counters(u);
		}
		break;
	case '?':        u->help = true; u->help_top = 0; break;
	case '/':        open_prompt(u, TUI_PROMPT_SEARCH); break;
	case 'n':        search(u); break;
	case 'e':
		open_prompt(u, TUI_PROMPT_EXPORT);
		propose_name(u, u->input, sizeof u->input);
		break;
	case 'a':        open_prompt(u, TUI_PROMPT_GOTO); break;
	case 'l':        open_marks(u); break;
	case 'P':        switch_process(u); break;
	case 'T':        open_threads(u); break;
	case 'h':
		u->hist = !u->hist;
		u->hist_top = 0;
		u->show_counters = false;
		rebuild = true;
		break;
	case '<':        u->hscroll -= HSCROLL_STEP; break;
	case '>':        u->hscroll += HSCROLL_STEP; break;
	case KEY_UP:     if (u->hist) u->hist_top--; else if (u->sel) u->sel--; break;
	case KEY_DOWN:   if (u->hist) u->hist_top++; else if (u->sel + 1 < nrows) u->sel++; break;
	case 'u':        u->sel = u->sel > (size_t)page ? u->sel - (size_t)page : 0; break;
	case 'd':
		u->sel += (size_t)page;
		if (u->sel >= nrows)
			u->sel = nrows ? nrows - 1 : 0;
		break;
	case '\n': case '\r': case ' ': case KEY_ENTER: {
		const struct tui_row *rows = tui_model_rows(u->model, &nrows);
		if (u->tree && u->sel < nrows && rows[u->sel].has_children) {
			tui_model_toggle(u->model, rows[u->sel].node);
			rebuild = true;
		}
		break;
	}
	default: break;
	}
	remember_selection(u);
	if (step || rebuild)
		refresh_view(u, rebuild);
	return true;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* --bench-steps: n evenly spaced cursor positions, each read and drawn. */
static int bench(struct tui_ui *u, long n, double *median, double *max)
{
	double *ms = malloc((size_t)n * sizeof *ms);
	if (!ms)
		return -1;
	for (long i = 0; i < n; i++) {
		double t0 = now_ms();
		u->cursor = u->t_start + (int64_t)((__int128)(u->t_end - u->t_start) * (i + 1) / n);
		if (refresh_view(u, false) < 0) {
			free(ms);
			return -1;
		}
		tui_screen_draw(u);
		ms[i] = now_ms() - t0;
	}
	qsort(ms, (size_t)n, sizeof *ms, cmp_double);
	*median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
	*max = ms[n - 1];
	free(ms);
	return 0;
}

static bool parse_long(const char *s, long *v)
{
	char *end;
	errno = 0;
	*v = strtol(s, &end, 10);
	return errno == 0 && end != s && !*end;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *at = NULL;
	long pid = -1, bench_steps = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		}
		if ((!strcmp(a, "--at") || !strcmp(a, "--pid") || !strcmp(a, "--bench-steps")) &&
		    i + 1 >= argc) {
			fprintf(stderr, "trace-tui: %s needs a value\n", a);
			return EXIT_USAGE;
		}
		if (!strcmp(a, "--at")) {
			at = argv[++i];
		} else if (!strcmp(a, "--pid")) {
			if (!parse_long(argv[++i], &pid) || pid < 0) {
				fprintf(stderr, "trace-tui: --pid %s: not a process id\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (!strcmp(a, "--bench-steps")) {
			if (!parse_long(argv[++i], &bench_steps) || bench_steps < 1) {
				fprintf(stderr, "trace-tui: --bench-steps %s: not a positive count\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "trace-tui: unknown option %s\n%s", a, usage);
			return EXIT_USAGE;
		} else if (path) {
			fprintf(stderr, "trace-tui: one database only (%s and %s)\n", path, a);
			return EXIT_USAGE;
		} else {
			path = a;
		}
	}
	if (!path) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}

	char err[512];
	struct tui_ui u = { .dbname = path, .sel_node = -1, .sel_fn = -1, .win_kind = TUI_GROWTH };
	bool no_pid;
	u.d = tui_data_open(path, pid, &no_pid, err, sizeof err);
	if (!u.d) {
		fprintf(stderr, "trace-tui: %s\n", err);
		return no_pid ? EXIT_NOT_FOUND : EXIT_INPUT;
	}
	load_process(&u);
	int trc = at ? tui_data_time(u.d, at, &u.cursor, err, sizeof err) : 0;
	if (trc < 0) {
		fprintf(stderr, "trace-tui: --at %s: %s\n", at, err);
		tui_data_close(u.d);
		return trc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_USAGE;
	}
	u.model = tui_model_new();
	if (!u.model) {
		fprintf(stderr, "trace-tui: out of memory\n");
		tui_data_close(u.d);
		return EXIT_INPUT;
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "trace-tui: needs a terminal on stdin and stdout\n");
		tui_model_free(u.model);
		tui_data_close(u.d);
		return EXIT_INPUT;
	}

	setlocale(LC_ALL, "");
	u.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
	initscr();
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	set_escdelay(ESC_DELAY_MS);
	curs_set(0);
	tui_screen_init(&u);
	relayout(&u);
	refresh_view(&u, true);
	tui_screen_draw(&u);

	int rc = 0;
	double med = 0, max = 0;
	if (bench_steps) {
		rc = bench(&u, bench_steps, &med, &max);
	} else {
		for (;;) {
			errno = 0;
			int ch = getch();
			if (ch == ERR && errno == EINTR)
				continue;
			if (ch == ERR)
				break;      /* the terminal is gone */
			if (!key(&u, ch))
				break;
			tui_screen_draw(&u);
		}
	}
	endwin();
	if (bench_steps && rc == 0)
		fprintf(stderr, "trace-tui: %ld steps (query + redraw): median %.2f ms, max %.2f ms\n",
		        bench_steps, med, max);
	else if (rc < 0)
		fprintf(stderr, "trace-tui: %s\n", u.msg);
	tui_chart_free(&u.chart);
	free(u.picked);
	tui_model_free(u.model);
	tui_data_close(u.d);
	return rc < 0 ? EXIT_INPUT : 0;
}
