/* screen.c - lays out and draws trace-tui's screen from struct tui_ui.
 *
 * Top to bottom: a title row, the chart (bars, axis, time labels), the
 * status line (the numbers at the cursor and the current view), the table
 * header and rows of the main pane, optionally the selected row's stack, and
 * a last row for prompts, messages and the key hint. `?` draws the help over
 * everything. Any size works; 80x24 shows a six-row chart and twelve rows.
 *
 * Never: query the database (everything drawn is already in tui_ui or the
 * data cache), or change the state it draws except the table scroll offset.
 */
#include "tui.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHART_MIN_H   3      /* bar rows, at least */
#define CHART_MAX_H   16
#define CHART_ROWS_DIV 3     /* the bars take about a third of the screen */
#define CHART_EXTRA   2      /* axis row and time label row */
#define LABEL_COLS    10     /* chart.c's y labels and their axis line */
#define MAX_INDENT    24     /* tree indentation stops growing here */
#define INDENT_STEP   2

#define MIN_COLS      40     /* below this, only a "too small" line */
#define MIN_LINES     12

bool tui_window_on(const struct tui_ui *u)
{
	return u->w1_set && u->w2_set && u->w1 != u->w2;
}

void tui_screen_init(struct tui_ui *u)
{
	const char *nc = getenv("NO_COLOR");
	u->color = has_colors() && !(nc && *nc);
	if (!u->color)
		return;
	start_color();
	use_default_colors();
	init_pair(TUI_PAIR_BAR, COLOR_GREEN, -1);
	init_pair(TUI_PAIR_CURSOR, COLOR_YELLOW, -1);
	init_pair(TUI_PAIR_PEAK, COLOR_RED, -1);
	init_pair(TUI_PAIR_MARK, COLOR_CYAN, -1);
	init_pair(TUI_PAIR_STATUS, COLOR_BLACK, COLOR_CYAN);
}

static int chart_h(void)
{
	int h = (LINES - 6) / CHART_ROWS_DIV;
	return h < CHART_MIN_H ? CHART_MIN_H : h > CHART_MAX_H ? CHART_MAX_H : h;
}

int tui_screen_chart_cols(void)
{
	int n = COLS - LABEL_COLS;
	return n < 1 ? 1 : n;
}

/* Rows: title, chart, axis, labels, status, table header, ..., last line. */
static int table_y(void) { return 1 + chart_h() + CHART_EXTRA + 2; }

int tui_screen_table_rows(const struct tui_ui *u)
{
	int n = LINES - 1 - table_y();
	if (u->show_stack)
		n -= n / 2;
	return n < 1 ? 1 : n;
}

static const char *sort_name(enum tui_sort s)
{
	return s == TUI_BY_OBJECTS ? "objects" : s == TUI_BY_ALLOCS ? "allocs" : "bytes";
}

static void view_name(const struct tui_ui *u, char *buf, size_t n)
{
	char a[32], b[32];
	if (tui_window_on(u)) {
		int64_t lo = u->w1 < u->w2 ? u->w1 : u->w2, hi = u->w1 < u->w2 ? u->w2 : u->w1;
		tui_fmt_time(a, sizeof a, lo);
		tui_fmt_time(b, sizeof b, hi);
		snprintf(buf, n, "%s %s..%s", u->win_kind == TUI_STEADY ? "steady" : "growth", a, b);
	} else {
		snprintf(buf, n, "snapshot");
	}
	size_t len = strlen(buf);
	snprintf(buf + len, n - len, ", %s, by %s", u->tree ? "tree" : "flat", sort_name(u->sort));
}

/* " ! after loss, stopped": what the snapshot at the cursor lacks, before
 * the view so that a narrow terminal cuts the view first. */
static void lack_note(unsigned lacks, char *buf, size_t n)
{
	static const struct { unsigned bit; const char *word; } words[] = {
		{ Q_LACK_LOSS, "after loss" }, { Q_LACK_DAMAGE, "after damage" },
		{ Q_LACK_STOPPED, "stopped" },
	};
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
		if (!(lacks & words[i].bit))
			continue;
		size_t len = strlen(buf);
		snprintf(buf + len, n - len, "%s%s", len ? ", " : " ! ", words[i].word);
	}
}

static void draw_status(struct tui_ui *u, int y)
{
	char t[32], hb[40], view[96], note[64], line[512];
	tui_fmt_time(t, sizeof t, u->cursor);
	view_name(u, view, sizeof view);
	lack_note(u->lacks, note, sizeof note);
	/* The size in binary units goes first when the line does not fit. */
	for (int terse = 0; terse < 2; terse++) {
		hb[0] = '\0';
		if (!terse) {
			strcpy(hb, " (");
			tui_fmt_bytes(hb + 2, sizeof hb - 3, u->live_bytes);
			strcat(hb, ")");
		}
		snprintf(line, sizeof line, " t=%s live %" PRId64 " B%s %" PRId64 " objects %" PRId64
		         " allocs%s [%s]", t, u->live_bytes, hb, u->live_objects, u->allocs, note,
		         view);
		if ((int)strlen(line) <= COLS)
			break;
	}
	attr_t a = u->color ? COLOR_PAIR(TUI_PAIR_STATUS) : A_REVERSE;
	wattron(stdscr, a);
	mvhline(y, 0, ' ', COLS);
	mvaddnstr(y, 0, line, COLS);
	wattroff(stdscr, a);
}

/* The flags of the whole process: "  DAMAGED (read to 8s)" ... */
static void process_flags(const struct q_process *p, char *buf, size_t n)
{
	char t[32];
	size_t len = 0;
	buf[0] = '\0';
	if (p->damaged) {
		tui_fmt_time(t, sizeof t, p->t_damaged);
		len += (size_t)snprintf(buf + len, n - len, "  DAMAGED (read to %s)", t);
	}
	if (p->t_loss != Q_NEVER && len < n) {
		tui_fmt_time(t, sizeof t, p->t_loss);
		len += (size_t)snprintf(buf + len, n - len, "  EVENTS LOST (from %s)", t);
	}
	if (p->inherited == Q_INHERITED_UNKNOWN && len < n)
		snprintf(buf + len, n - len, "  INHERITED BLOCKS UNKNOWN");
}

static void draw_title(const struct tui_ui *u)
{
	char dur[32], pb[32], pt[32], proc[128] = "", flags[128], line[512];
	tui_fmt_time(dur, sizeof dur, u->t_end - u->t_start);
	tui_fmt_bytes(pb, sizeof pb, u->peak_bytes);
	tui_fmt_time(pt, sizeof pt, u->peak_t);
	if (u->nprocs > 1) {          /* which one of the run's processes */
		const char *base = strrchr(u->exe, '/');
		snprintf(proc, sizeof proc, "  %s [pid %lld]", base ? base + 1 : u->exe,
		         (long long)u->pid);
	}
	process_flags(u->proc, flags, sizeof flags);
	snprintf(line, sizeof line, "trace-tui %s%s%s  duration %s  peak %s at %s  (? for help)",
	         u->dbname, proc, flags, dur, pb, pt);
	mvhline(0, 0, ' ', COLS);
	attron(A_BOLD);
	mvaddnstr(0, 0, line, COLS);
	attroff(A_BOLD);
}

static void pct(char *buf, size_t n, int64_t v, int64_t total)
{
	if (total == 0)
		snprintf(buf, n, "%s", "");
	else
		snprintf(buf, n, "%5.1f%%", 100.0 * (double)v / (double)total);
}

static void draw_table(struct tui_ui *u, int y, int nrows)
{
	size_t n;
	const struct tui_row *rows = tui_model_rows(u->model, &n);
	char line[1024], fp[16];

	attron(A_UNDERLINE);
	snprintf(line, sizeof line, "%12s %6s %12s %9s %10s  %s", u->tree ? "self" : "flat",
	         u->tree ? "self%" : "flat%", "cum", "objects", "allocs",
	         u->tree ? "call tree (Enter expands)" : "function");
	mvhline(y, 0, ' ', COLS);
	mvaddnstr(y, 0, line, COLS);
	attroff(A_UNDERLINE);

	if (u->sel >= n)
		u->sel = n ? n - 1 : 0;
	if (u->sel < u->top)
		u->top = u->sel;
	if (u->sel >= u->top + (size_t)nrows)
		u->top = u->sel - (size_t)nrows + 1;

	int64_t total = tui_model_total(u->model);
	for (int r = 0; r < nrows; r++) {
		size_t i = u->top + (size_t)r;
		move(y + 1 + r, 0);
		clrtoeol();
		if (i >= n) {
			if (i == 0)
				mvaddnstr(y + 1, 0, "  (nothing live in this view)", COLS);
			continue;
		}
		const struct tui_row *row = &rows[i];
		pct(fp, sizeof fp, row->flat, total);
		int ind = row->depth * INDENT_STEP;
		ind = ind > MAX_INDENT ? MAX_INDENT : ind;
		const char *mark = !u->tree ? "" : !row->has_children ? "  "
		                   : row->expanded ? "- " : "+ ";
		snprintf(line, sizeof line, "%12" PRId64 " %6s %12" PRId64 " %9" PRId64 " %10" PRId64
		         "  %*s%s%s", row->flat, fp, row->cum, row->objects, row->allocs,
		         ind, "", mark, tui_data_fn_name(u->d, row->fn));
		if (i == u->sel)
			attron(A_REVERSE);
		mvaddnstr(y + 1 + r, 0, line, COLS);
		if (i == u->sel) {
			int len = (int)strlen(line);
			if (len < COLS)
				mvhline(y + 1 + r, len, ' ', COLS - len);
			attroff(A_REVERSE);
		}
	}
}

static void draw_stack(struct tui_ui *u, int y, int nrows)
{
	size_t n;
	const struct tui_row *rows = tui_model_rows(u->model, &n);
	char line[1024];

	for (int r = 0; r < nrows; r++) {
		move(y + r, 0);
		clrtoeol();
	}
	attron(A_UNDERLINE);
	mvhline(y, 0, ' ', COLS);
	mvaddnstr(y, 0, "heaviest stack through the selected row (leaf first)", COLS);
	attroff(A_UNDERLINE);
	if (u->sel >= n)
		return;
	int64_t sid = tui_model_stack_of(u->model, u->d, &rows[u->sel]);
	const struct q_frame *fr = NULL;
	size_t nfr = 0;
	if (sid < 0 || tui_data_stack(u->d, sid, &fr, &nfr) < 0)
		nfr = 0;
	for (int k = 0; (size_t)k < nfr && k + 1 < nrows; k++) {
		const struct q_frame *f = &fr[k];
		if (f->file && f->line > 0)
			snprintf(line, sizeof line, "  #%-2d %s  %s:%d", k, f->function, f->file, f->line);
		else if (f->file)
			snprintf(line, sizeof line, "  #%-2d %s  %s", k, f->function, f->file);
		else
			snprintf(line, sizeof line, "  #%-2d %s  0x%" PRIx64, k, f->function, f->ip);
		if (f->fn == rows[u->sel].fn)
			attron(A_BOLD);
		mvaddnstr(y + 1 + k, 0, line, COLS);
		attroff(A_BOLD);
	}
}

static const char *const help_text[] = {
	"trace-tui keys",
	"  Left / Right       move the cursor one chart column",
	"  Shift+Left/Right   ten columns (also PgUp / PgDn)",
	"  Home / End         start / end of the trace",
	"  p                  jump to the peak",
	"  m / M              next / previous mark",
	"  [ / ]              window start / end at the cursor; the main pane shows it",
	"  g / w              window shows growth (live at end - live at start) / steady",
	"                     (allocated inside the window and still live at its end)",
	"  c                  clear the window: back to the snapshot at the cursor",
	"  Up / Down, u / d   select a row, a page of rows up / down",
	"  Enter / Space      expand or collapse a tree node",
	"  t                  tree (top-down) or flat (bottom-up by function)",
	"  s                  sort by bytes, objects, allocations",
	"  f                  show or hide the selected row's stack with file:line",
	"  / , n              search a function, next match",
	"  e                  export the current view to a .heap file",
	"  ?                  this help           q   quit",
	"flat: the function's own bytes; cum: with its callees; objects and allocs",
	"(allocations so far) are the function's own.",
	"Status \"! after loss / after damage / stopped\": the live set at the cursor may",
	"lack blocks (events lost, trace cut, recording stopped: shaded on the chart).",
	"Press any key.",
};

static void draw_help(void)
{
	int n = (int)(sizeof help_text / sizeof help_text[0]);
	for (int r = 0; r < LINES; r++) {
		move(r, 0);
		clrtoeol();
		if (r < n)
			mvaddnstr(r, 0, help_text[r], COLS);
	}
}

void tui_screen_draw(struct tui_ui *u)
{
	erase();
	if (COLS < MIN_COLS || LINES < MIN_LINES) {
		mvprintw(0, 0, "terminal too small (%dx%d)", MIN_COLS, MIN_LINES);
		refresh();
		return;
	}
	if (u->help) {
		draw_help();
		refresh();
		return;
	}
	int h = chart_h();
	draw_title(u);
	struct tui_chart_marks cm = {
		.cursor = u->cursor, .peak_t = u->peak_t, .marks = u->marks, .nmarks = u->nmarks,
		.window = u->w1_set || u->w2_set,
		.w1 = u->w1_set ? u->w1 : u->w2, .w2 = u->w2_set ? u->w2 : u->w1,
		.stopped = u->stopped, .nstopped = u->nstopped,
	};
	if (cm.w1 > cm.w2) {
		int64_t t = cm.w1;
		cm.w1 = cm.w2;
		cm.w2 = t;
	}
	tui_chart_draw(stdscr, &u->chart, &cm, 1, h, COLS, u->utf8, u->color);
	draw_status(u, 1 + h + CHART_EXTRA);

	int ty = table_y() - 1;
	int nrows = tui_screen_table_rows(u);
	draw_table(u, ty, nrows);
	if (u->show_stack)
		draw_stack(u, ty + 1 + nrows, LINES - 1 - (ty + 1 + nrows));

	move(LINES - 1, 0);
	clrtoeol();
	if (u->prompt) {
		mvprintw(LINES - 1, 0, "%s%s", u->prompt == TUI_PROMPT_SEARCH ? "/" : "export .heap to: ",
		         u->input);
		curs_set(1);
	} else {
		curs_set(0);
		mvaddnstr(LINES - 1, 0, u->msg[0] ? u->msg
		          : "?:help q:quit arrows:step p:peak m:mark [ ]:window t:tree s:sort /:find e:export",
		          COLS);
	}
	refresh();
}
