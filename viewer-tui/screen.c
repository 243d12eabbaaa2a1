/* screen.c - lays out and draws trace-tui's screen from struct tui_ui.
 *
 * Top to bottom: a title row, the chart (bars, axis, time labels), the
 * status line (the numbers at the cursor, the mark there and the current
 * view with its thread filter), the table header and rows of the main pane
 * (or the size histogram, the counters at the cursor, or the list of marks
 * or of threads),
 * optionally the selected row's stack, and a last row for prompts, messages
 * (a long one takes the rows above it too) and the key hints. `?` draws the help over everything. Any size from 40x12
 * works; 80x24 shows a six-row chart and twelve rows. Lines too long for
 * the width lose words whole (title, status line, hints) or scroll sideways
 * (names, stacks), never a cut word.
 *
 * Never: query the database (everything drawn is already in tui_ui or the
 * data cache), or change the state it draws except the scroll offsets.
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
#define INDENT_ROOM_DIV 3    /* ... or at a third of the name column */
#define NAME_GAP      2      /* spaces between the numbers and the names */

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
	init_pair(TUI_PAIR_RSS, COLOR_MAGENTA, -1);
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

/* Forms of the status line and the title, longest first: each level drops
 * or shortens one more thing, so that a narrow terminal loses words whole. */
enum { FULL, NO_MIB, SHORT_VIEW, SHORT_WORDS, NO_LIVE, NO_SORT, NLEVELS };

/* "snapshot, flat, by bytes", or terse "snap flat bytes" (without the
 * sort when sort is false), then the thread filter: ", thread 12" or
 * ", 3 threads", terse " T12" or " T3". */
static void view_name(const struct tui_ui *u, bool terse, bool sort, char *buf, size_t n)
{
	char a[32], b[32];
	const char *kind = terse ? "snap" : "snapshot";
	if (tui_window_on(u)) {
		int64_t lo = u->w1 < u->w2 ? u->w1 : u->w2, hi = u->w1 < u->w2 ? u->w2 : u->w1;
		tui_fmt_time(a, sizeof a, lo);
		tui_fmt_time(b, sizeof b, hi);
		snprintf(buf, n, "%s %s..%s", u->win_kind == TUI_STEADY ? "steady"
		         : terse ? "grow" : "growth", a, b);
	} else {
		snprintf(buf, n, "%s", kind);
	}
	size_t len = strlen(buf);
	const char *shape = u->tree ? "tree" : "flat";
	if (!terse)
		len += (size_t)snprintf(buf + len, n - len, ", %s, by %s", shape, sort_name(u->sort));
	else if (sort)
		len += (size_t)snprintf(buf + len, n - len, " %s %s", shape, sort_name(u->sort));
	else
		len += (size_t)snprintf(buf + len, n - len, " %s", shape);
	size_t nf;
	const int64_t *f = tui_data_filter(u->d, &nf);
	if (nf == 1 && len < n)
		snprintf(buf + len, n - len, terse ? " T%" PRId64 : ", thread %" PRId64, f[0]);
	else if (nf > 1 && len < n)
		snprintf(buf + len, n - len, terse ? " T%zu" : ", %zu threads", nf);
}

/* " ! after loss, after stop" (terse " ! loss, stop"): what the snapshot at
 * the cursor lacks. */
static void lack_note(unsigned lacks, bool terse, char *buf, size_t n)
{
	static const struct { unsigned bit; const char *word; } words[] = {
		{ Q_LACK_LOSS, "after loss" }, { Q_LACK_DAMAGE, "after damage" },
		{ Q_LACK_STOPPED, "after stop" }, { Q_LACK_UNMAPPED, "no mmap" },
		{ Q_LACK_CUSTOM, "custom unrecorded" }, { Q_LACK_ATTACHED, "since attach" },
		{ Q_LACK_UNROUTED, "after unrouted calls" },
	};
	static const char after[] = "after ";
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
		if (!(lacks & words[i].bit))
			continue;
		const char *w = words[i].word;
		if (terse && !strncmp(w, after, sizeof after - 1))
			w += sizeof after - 1;
		size_t len = strlen(buf);
		snprintf(buf + len, n - len, "%s%s", len ? ", " : " ! ", w);
	}
}

const struct q_mark *tui_mark_before(const struct tui_ui *u)
{
	const struct q_mark *best = NULL;
	for (size_t i = 0; i < u->nmarks; i++)
		if (u->marks[i].t <= u->cursor && (!best || u->marks[i].t >= best->t))
			best = &u->marks[i];
	return best;
}

/* " mark steady (4.8s)", terse " @steady", with the label cut to at most
 * label_max characters (a '~' says so). */
static void mark_note(const struct tui_ui *u, bool terse, size_t label_max, char *buf, size_t n)
{
	const struct q_mark *m = tui_mark_before(u);
	char t[32], label[TUI_INPUT_MAX];
	buf[0] = '\0';
	if (!m)
		return;
	snprintf(label, sizeof label, "%s", m->label);
	if (strlen(label) > label_max && label_max > 0 && label_max < sizeof label) {
		label[label_max - 1] = '~';
		label[label_max] = '\0';
	}
	tui_fmt_time(t, sizeof t, m->t);
	if (terse)
		snprintf(buf, n, " @%s", label);
	else
		snprintf(buf, n, " mark %s (%s)", label, t);
}

static void status_line(struct tui_ui *u, int level, size_t label_max, char *line, size_t n)
{
	char t[32], hb[40] = "", view[96], note[64], mark[TUI_INPUT_MAX + 48];
	tui_fmt_time(t, sizeof t, u->cursor);
	view_name(u, level >= SHORT_VIEW, level < NO_SORT, view, sizeof view);
	lack_note(u->lacks, level >= SHORT_WORDS, note, sizeof note);
	mark_note(u, level >= SHORT_WORDS, label_max, mark, sizeof mark);
	if (level < NO_MIB) {
		strcpy(hb, " (");
		tui_fmt_bytes(hb + 2, sizeof hb - 3, u->live_bytes);
		strcat(hb, ")");
	}
	snprintf(line, n, " t=%s %s%" PRId64 " B%s %" PRId64 " %s %" PRId64 " allocs%s%s [%s]", t,
	         level >= NO_LIVE ? "" : "live ", u->live_bytes, hb, u->live_objects,
	         level >= SHORT_WORDS ? "obj" : "objects", u->allocs, note, mark, view);
}

static void draw_status(struct tui_ui *u, int y)
{
	char line[1024];
	int level = FULL;
	for (; level < NLEVELS; level++) {
		status_line(u, level, TUI_INPUT_MAX, line, sizeof line);
		if ((int)strlen(line) <= COLS)
			break;
	}
	if (level == NLEVELS) {     /* still too long: the mark's label gives way */
		level = NLEVELS - 1;
		size_t over = strlen(line) - (size_t)COLS;
		const struct q_mark *m = tui_mark_before(u);
		size_t len = m ? strlen(m->label) : 0;
		status_line(u, level, len > over + 1 ? len - over : 1, line, sizeof line);
	}
	attr_t a = u->color ? COLOR_PAIR(TUI_PAIR_STATUS) : A_REVERSE;
	wattron(stdscr, a);
	mvhline(y, 0, ' ', COLS);
	mvaddnstr(y, 0, line, COLS);
	wattroff(stdscr, a);
}

/* The flags of the whole process: "  DAMAGED (read to 8s)" ..., terse
 * "  DAMAGED@8s". */
static void process_flags(const struct q_process *p, bool terse, char *buf, size_t n)
{
	char t[32];
	size_t len = 0;
	buf[0] = '\0';
	if (p->damaged) {
		tui_fmt_time(t, sizeof t, p->t_damaged);
		len += (size_t)snprintf(buf + len, n - len, terse ? "  DAMAGED@%s"
		                        : "  DAMAGED (read to %s)", t);
	}
	if (p->t_loss != Q_NEVER && len < n) {
		tui_fmt_time(t, sizeof t, p->t_loss);
		len += (size_t)snprintf(buf + len, n - len, terse ? "  LOST@%s"
		                        : "  EVENTS LOST (from %s)", t);
	}
	if (p->inherited == Q_INHERITED_UNKNOWN && len < n)
		snprintf(buf + len, n - len, terse ? "  INHERITED?" : "  INHERITED BLOCKS UNKNOWN");
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b && b[1] ? b + 1 : path;
}

static void title_line(const struct tui_ui *u, int level, char *line, size_t n)
{
	char dur[32], pb[32], pt[32], proc[128] = "", flags[128];
	tui_fmt_time(dur, sizeof dur, u->t_end - u->t_start);
	tui_fmt_bytes(pb, sizeof pb, u->peak_bytes);
	tui_fmt_time(pt, sizeof pt, u->peak_t);
	if (u->nprocs > 1)            /* which one of the run's processes */
		snprintf(proc, sizeof proc, "  %s [pid %lld]", base_name(u->exe), (long long)u->pid);
	process_flags(u->proc, level >= SHORT_WORDS, flags, sizeof flags);
	snprintf(line, n, "%s%s%s%s  %s%s  peak %s%s%s%s", level >= SHORT_VIEW ? "" : "trace-tui ",
	         level >= NO_MIB ? base_name(u->dbname) : u->dbname, proc, flags,
	         level >= SHORT_WORDS ? "" : "duration ", dur, pb, level >= SHORT_WORDS ? "@" : " at ",
	         pt, level == FULL ? "  (? for help)" : "");
}

static void draw_title(const struct tui_ui *u)
{
	char line[1024];
	for (int level = FULL; level < NLEVELS; level++) {
		title_line(u, level, line, sizeof line);
		if ((int)strlen(line) <= COLS)
			break;
	}
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
		snprintf(buf, n, "%.1f%%", 100.0 * (double)v / (double)total);
}

/* The table's number columns, each as wide as its widest value or header,
 * so that the names get what is left. */
enum { C_FLAT, C_PCT, C_CUM, C_OBJECTS, C_ALLOCS, NCOLS };

struct cols { int w[NCOLS]; int name_x; };

static void row_cells(const struct tui_row *r, int64_t total, char cell[NCOLS][32])
{
	snprintf(cell[C_FLAT], 32, "%" PRId64, r->flat);
	pct(cell[C_PCT], 32, r->flat, total);
	snprintf(cell[C_CUM], 32, "%" PRId64, r->cum);
	snprintf(cell[C_OBJECTS], 32, "%" PRId64, r->objects);
	snprintf(cell[C_ALLOCS], 32, "%" PRId64, r->allocs);
}

static void table_cols(const struct tui_ui *u, const char *const head[NCOLS], struct cols *c)
{
	size_t n;
	const struct tui_row *rows = tui_model_rows(u->model, &n);
	int64_t total = tui_model_total(u->model);
	char cell[NCOLS][32];
	for (int k = 0; k < NCOLS; k++)
		c->w[k] = (int)strlen(head[k]);
	for (size_t i = 0; i < n; i++) {
		row_cells(&rows[i], total, cell);
		for (int k = 0; k < NCOLS; k++)
			if ((int)strlen(cell[k]) > c->w[k])
				c->w[k] = (int)strlen(cell[k]);
	}
	c->name_x = NAME_GAP - 1;
	for (int k = 0; k < NCOLS; k++)
		c->name_x += c->w[k] + 1;
}

/* A row's number cells, right-aligned in their columns. */
static void put_cells(int y, const struct cols *c, char cell[NCOLS][32])
{
	int x = 0;
	for (int k = 0; k < NCOLS; k++) {
		mvprintw(y, x, "%*s", c->w[k], cell[k]);
		x += c->w[k] + 1;
	}
}

/* The name column (or a stack or mark line) from character hscroll on, like
 * less -S, but a text scrolls only as far as its end shows and one that fits
 * never moves. An ellipsis at an edge says that the text goes on past it. */
static void put_name(const struct tui_ui *u, int y, int x, const char *text)
{
	int room = COLS - x, len = (int)strlen(text);
	if (room < 1)
		return;
	int max = len > room ? len - room + 1 : 0;
	int off = u->hscroll < max ? u->hscroll : max;
	mvaddnstr(y, x, text + off, room);
	const char *more = u->utf8 ? "\u2026" : "$";
	if (off > 0)
		mvaddstr(y, x, more);
	if (len - off > room)
		mvaddstr(y, COLS - 1, more);
}

/* Indentation, expansion sign and name of a row. */
static void name_text(const struct tui_ui *u, const struct tui_row *row, int room,
                      char *buf, size_t n)
{
	int ind = row->depth * INDENT_STEP, max = room / INDENT_ROOM_DIV;
	ind = ind > MAX_INDENT ? MAX_INDENT : ind;
	ind = ind > max ? max : ind;
	const char *mark = !u->tree ? "" : !row->has_children ? "  " : row->expanded ? "- " : "+ ";
	snprintf(buf, n, "%*s%s%s", ind, "", mark, tui_data_fn_name(u->d, row->fn));
}

static void draw_table(struct tui_ui *u, int y, int nrows)
{
	size_t n;
	const struct tui_row *rows = tui_model_rows(u->model, &n);
	char text[1024], cell[NCOLS][32];
	const char *const head[NCOLS] = { u->tree ? "self" : "flat", u->tree ? "self%" : "flat%",
	                                   "cum", "objects", "allocs" };
	struct cols c;
	table_cols(u, head, &c);
	int room = COLS - c.name_x;

	/* No scrolling past the end of the longest name. */
	int longest = 0;
	for (size_t i = 0; i < n; i++) {
		name_text(u, &rows[i], room, text, sizeof text);
		if ((int)strlen(text) > longest)
			longest = (int)strlen(text);
	}
	if (u->hscroll > longest - room + 1)
		u->hscroll = longest - room + 1;
	if (u->hscroll < 0)
		u->hscroll = 0;

	attron(A_UNDERLINE);
	mvhline(y, 0, ' ', COLS);
	for (int k = 0; k < NCOLS; k++)
		snprintf(cell[k], sizeof cell[k], "%s", head[k]);
	put_cells(y, &c, cell);
	static const char tree_long[] = "call tree (Enter expands)";
	mvaddnstr(y, c.name_x, !u->tree ? "function" : room >= (int)sizeof tree_long - 1 ? tree_long
	                                  : "call tree", room);
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
		if (i == u->sel) {
			attron(A_REVERSE);
			mvhline(y + 1 + r, 0, ' ', COLS);
		}
		row_cells(&rows[i], total, cell);
		put_cells(y + 1 + r, &c, cell);
		name_text(u, &rows[i], room, text, sizeof text);
		put_name(u, y + 1 + r, c.name_x, text);
		if (i == u->sel)
			attroff(A_REVERSE);
	}
}

/* Clears rows [y, y + rows) and writes title underlined on the first. */
static void pane_title(int y, int rows, const char *title)
{
	for (int r = 0; r < rows; r++) {
		move(y + r, 0);
		clrtoeol();
	}
	attron(A_UNDERLINE);
	mvhline(y, 0, ' ', COLS);
	mvaddnstr(y, 0, title, COLS);
	attroff(A_UNDERLINE);
}

static void draw_stack(struct tui_ui *u, int y, int nrows)
{
	size_t n;
	const struct tui_row *rows = tui_model_rows(u->model, &n);
	char line[1024];

	pane_title(y, nrows, "heaviest stack through the selected row (leaf first)");
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
		put_name(u, y + 1 + k, 0, line);
		attroff(A_BOLD);
	}
}

/* The counters at the cursor (r), over the main pane: each one's last
 * sample at or before the cursor, in bytes and a binary size, and when it
 * was read. */
static void draw_counters(struct tui_ui *u, int y, int nrows)
{
	char t[32], human[32], line[256];
	for (int r = 0; r <= nrows; r++) {
		move(y + r, 0);
		clrtoeol();
	}
	attron(A_UNDERLINE);
	mvhline(y, 0, ' ', COLS);
	tui_fmt_time(t, sizeof t, u->cursor);
	snprintf(line, sizeof line, "counters at %s (r: close)", t);
	mvaddnstr(y, 0, u->counters_err[0] ? u->counters_err : line, COLS);
	attroff(A_UNDERLINE);
	for (int r = 0; r < nrows && (size_t)r < u->ncounters; r++) {
		const struct q_counter *c = &u->counters[r];
		if (!c->known) {
			snprintf(line, sizeof line, "%-34s  no sample yet", c->name);
		} else {
			tui_fmt_bytes(human, sizeof human, c->at_t1);
			tui_fmt_time(t, sizeof t, c->t1_read);
			snprintf(line, sizeof line, "%-34s %14" PRId64 " %10s  read at %s", c->name,
			         c->at_t1, human, t);
		}
		put_name(u, y + 1 + r, 0, line);
	}
}

/* At most HELP_COLS wide: it is read whole in a 60-column terminal. */
static const char *const help_text[] = {
	"trace-tui keys",
	"  Left / Right      move the cursor one chart column",
	"  Shift+Left/Right  ten columns (also PgUp / PgDn)",
	"  Home / End        start / end of the trace",
	"  p                 jump to the peak",
	"  a                 go to a time (30s, 1.5m, 45%, mark:L)",
	"  m / M             next / previous mark",
	"  l                 list the marks; Enter goes to one",
	"  P                 the next process of the database",
	"  [ / ]             window start / end at the cursor:",
	"                    the main pane shows the window",
	"  g / w             window shows growth (live at end -",
	"                    live at start) / steady (allocated",
	"                    inside, still live at its end)",
	"  c                 clear the window: back to the snapshot",
	"  Up / Down, u / d  select a row, a page up / down",
	"  < / >             scroll the function names sideways",
	"  Enter / Space     expand or collapse a tree node",
	"  t                 tree (top-down) or flat (by function)",
	"  s                 sort by bytes, objects, allocations",
	"  f                 the selected row's stack, file:line",
	"  / , n             search a function, next match",
	"  e                 export the view (.heap .pb.gz",
	"                    .folded .txt .svg: the extension)",
	"  T                 threads: Space picks, Enter shows",
	"                    only theirs (none picked: all)",
	"  h                 the view's allocation sizes",
	"  r                 counters at the cursor (RSS: the dots)",
	"  ?                 this help         q   quit",
	"flat: the function's own bytes; cum: with its callees;",
	"objects and allocs (allocations so far): its own.",
	"A snapshot lists only what has something live.",
	"Status: the mark at or before the cursor (@label when",
	"short); \"! after loss / after damage / after stop\":",
	"the live set may lack blocks (events lost, trace cut,",
	"recording stopped: shaded on the chart, ( and ) mark",
	"where it stopped and started again; calls unrouted:",
	"shaded too, { and } on the axis); \"! no mmap\" and",
	"\"! custom unrecorded\": mappings or custom blocks that",
	"a sampled (or bounded) trace could not hold; others:",
	"\"! since attach\", \"! unrouted calls\" (trace-snap(1)).",
};

int tui_screen_help_lines(void)
{
	return (int)(sizeof help_text / sizeof help_text[0]);
}

static void draw_help(struct tui_ui *u)
{
	int n = tui_screen_help_lines(), rows = LINES - 1;
	if (u->help_top > n - rows)
		u->help_top = n - rows;
	if (u->help_top < 0)
		u->help_top = 0;
	for (int r = 0; r < rows && u->help_top + r < n; r++)
		mvaddnstr(r, 0, help_text[u->help_top + r], COLS);
	mvaddnstr(LINES - 1, 0, n > rows ? "Up/Down: scroll, any other key: close"
	                                  : "Press any key.", COLS);
}

/* The marks with their times, over the main pane; the selected one is
 * where Enter goes. */
static void draw_marks(struct tui_ui *u, int y, int nrows)
{
	char t[32], line[TUI_INPUT_MAX + 64];
	pane_title(y, nrows + 1, u->nmarks ? "marks (Enter: go, Esc: close)" : "no marks");
	size_t top = u->mark_sel >= (size_t)nrows ? u->mark_sel - (size_t)nrows + 1 : 0;
	for (int r = 0; r < nrows && top + (size_t)r < u->nmarks; r++) {
		size_t i = top + (size_t)r;
		tui_fmt_time(t, sizeof t, u->marks[i].t);
		snprintf(line, sizeof line, "%12s  %s", t, u->marks[i].label);
		if (i == u->mark_sel)
			attron(A_REVERSE);
		put_name(u, y + 1 + r, 0, line);
		if (i == u->mark_sel)
			attroff(A_REVERSE);
	}
}

/* The threads of the process, ticked if picked; the selected one is where
 * Space ticks. */
static void draw_threads(struct tui_ui *u, int y, int nrows)
{
	char t[32], line[512];
	pane_title(y, nrows + 1, "threads (Space: pick, Enter: show; none: all)");
	size_t top = u->thread_sel >= (size_t)nrows ? u->thread_sel - (size_t)nrows + 1 : 0;
	for (int r = 0; r < nrows && top + (size_t)r < u->nthreads; r++) {
		size_t i = top + (size_t)r;
		const struct q_thread *th = &u->threads[i];
		if (th->t_first == Q_NEVER)
			snprintf(t, sizeof t, "-");
		else
			tui_fmt_time(t, sizeof t, th->t_first);
		snprintf(line, sizeof line, "[%c] %8" PRId64 " %9" PRId64 " allocs from %-8s %s",
		         u->picked[i] ? 'x' : ' ', th->tid, th->allocs, t, th->name);
		if (i == u->thread_sel)
			attron(A_REVERSE);
		put_name(u, y + 1 + r, 0, line);
		if (i == u->thread_sel)
			attroff(A_REVERSE);
	}
}

/* What the histogram counts: "live at 6s", "made in 2s..6s". */
static void hist_what(const struct tui_ui *u, char *buf, size_t n)
{
	char a[32], b[32];
	const struct q_hist *h = &u->hist_data;
	tui_fmt_time(a, sizeof a, h->t1);
	tui_fmt_time(b, sizeof b, h->t2);
	if (h->kind == Q_SNAPSHOT)
		snprintf(buf, n, "sizes live at %s", b);
	else
		snprintf(buf, n, "sizes made in %s..%s", a, b);
}

/* "top: 1000 B x5, 100 B x3": the most frequent sizes that fit whole. */
static void hist_top_sizes(const struct q_hist *h, char *buf, size_t n)
{
	size_t len = (size_t)snprintf(buf, n, "most frequent:");
	for (size_t i = 0; i < h->ntop; i++) {
		char s[32], item[64];
		tui_fmt_bytes(s, sizeof s, h->top[i].size);
		int k = snprintf(item, sizeof item, "%s %s x%" PRId64, i ? "," : "", s, h->top[i].objects);
		if (len + (size_t)k >= (size_t)COLS || len + (size_t)k >= n)
			break;
		memcpy(buf + len, item, (size_t)k + 1);
		len += (size_t)k;
	}
}

/* The histogram of the view: a row per power-of-two bin used (size range,
 * objects, bytes in binary units, a bar of objects as wide as the room
 * left; the empty bins left out, so that it is read whole on a small
 * terminal), then the most frequent sizes. */
static void draw_hist(struct tui_ui *u, int y, int nrows)
{
	const struct q_hist *h = &u->hist_data;
	char range[48], obj[32], by[32], line[128];
	int used[Q_HIST_BINS], nused = 0, wr = (int)strlen("size"), wo = (int)strlen("objects");
	int wb = (int)strlen("bytes");
	int64_t most = 0;
	for (int k = 0; k < Q_HIST_BINS; k++) {
		const struct q_hist_count *c = &h->bin[k];
		if (!c->objects)
			continue;
		used[nused++] = k;
		most = c->objects > most ? c->objects : most;
		int w = snprintf(range, sizeof range, "%" PRId64 "..%" PRId64, c->size, q_hist_bin_max(k));
		wr = w > wr ? w : wr;
		w = snprintf(obj, sizeof obj, "%" PRId64, c->objects);
		wo = w > wo ? w : wo;
		tui_fmt_bytes(by, sizeof by, c->bytes);
		wb = (int)strlen(by) > wb ? (int)strlen(by) : wb;
	}
	pane_title(y, nrows + 1, "");
	hist_what(u, line, sizeof line);
	attron(A_UNDERLINE);
	mvprintw(y, 0, "%*s %*s %*s  ", wr, "size", wo, "objects", wb, "bytes");
	addnstr(line, COLS - (wr + wo + wb + 4));
	attroff(A_UNDERLINE);
	if (!nused) {
		mvaddnstr(y + 1, 0, "  (no block in this view)", COLS);
		return;
	}
	int rows = nused + 1 < nrows ? nused : nrows - 1;
	if (u->hist_top > nused - rows)
		u->hist_top = nused - rows;
	if (u->hist_top < 0)
		u->hist_top = 0;
	int room = COLS - (wr + wo + wb + 4);
	for (int r = 0; r < rows; r++) {
		int k = used[u->hist_top + r];
		const struct q_hist_count *c = &h->bin[k];
		snprintf(range, sizeof range, "%" PRId64 "..%" PRId64, c->size, q_hist_bin_max(k));
		tui_fmt_bytes(by, sizeof by, c->bytes);
		mvprintw(y + 1 + r, 0, "%*s %*" PRId64 " %*s  ", wr, range, wo, c->objects, wb, by);
		int64_t bar = room > 0 ? c->objects * room / most : 0;
		if (u->color)
			attron(COLOR_PAIR(TUI_PAIR_BAR));
		for (int64_t i = 0; i < bar || (i == 0 && c->objects && room > 0); i++)
			addch('#');
		if (u->color)
			attroff(COLOR_PAIR(TUI_PAIR_BAR));
	}
	hist_top_sizes(h, line, sizeof line);
	mvaddnstr(y + 1 + rows, 0, line, COLS);
}

/* The key hints that fit on the last row, most useful first. */
static void draw_hints(void)
{
	static const char *const hint[] = {
		"?:help", "q:quit", "arrows:step", "a:go to", "m:mark", "l:marks", "p:peak",
		"[ ]:window", "t:tree", "<>:scroll", "s:sort", "/:find", "e:export", "T:threads",
		"h:sizes",
	};
	int x = 0;
	for (size_t i = 0; i < sizeof hint / sizeof *hint; i++) {
		int len = (int)strlen(hint[i]);
		if (x + len > COLS)
			break;
		mvaddstr(LINES - 1, x, hint[i]);
		x += len + 1;
	}
}

/* The length of the message's row that starts at s, at most width: whole
 * words where they fit; a word wider than the screen (a long path) fills
 * the row and goes on in the next. *next is where the row after it starts. */
static int msg_row(const char *s, int width, const char **next)
{
	int len = (int)strlen(s);
	if (len > width) {
		int sp = width;
		while (sp > 0 && s[sp] != ' ')
			sp--;
		bool wide = strcspn(s + sp + 1, " ") > (size_t)width;  /* the word cut */
		len = sp > 0 && !wide ? sp : width;
	}
	*next = s + len;
	while (**next == ' ')
		(*next)++;
	return len;
}

/* The message on as many rows as it takes at the bottom, over the end of
 * the main pane (it goes at the next key): never cut at the width. A
 * message taller than the screen shows its beginning. */
static void draw_msg(const char *msg)
{
	int rows = 0;
	for (const char *s = msg; *s; rows++)
		msg_row(s, COLS, &s);
	int y = rows < LINES ? LINES - rows : 0;
	for (const char *s = msg; *s && y < LINES; y++) {
		const char *row = s;
		int len = msg_row(row, COLS, &s);
		move(y, 0);
		clrtoeol();
		addnstr(row, len);
	}
}

static const char *prompt_text(const struct tui_ui *u, char *buf, size_t n)
{
	switch (u->prompt) {
	case TUI_PROMPT_SEARCH:  return "/";
	case TUI_PROMPT_EXPORT:  return "export (.heap .pb.gz .folded .txt): ";
	case TUI_PROMPT_GOTO:    return "go to (30s, 45%, mark:L, end): ";
	case TUI_PROMPT_REPLACE:
		snprintf(buf, n, "%s exists: replace it? (y/N) ", u->export_path);
		return buf;
	case TUI_PROMPT_NONE:    break;
	}
	return "";
}

/* The prompt and what is typed; when too long, the end of the input shows.
 * A prompt wider than the screen (a file to replace, with its long path)
 * takes the rows above, as a message does. */
static void draw_prompt(const struct tui_ui *u)
{
	char buf[TUI_INPUT_MAX + 64];
	const char *p = prompt_text(u, buf, sizeof buf);
	int plen = (int)strlen(p), ilen = (int)strlen(u->input);
	int room = COLS - 1 - plen;          /* the terminal's cursor takes the last cell */
	if (room < 1) {
		draw_msg(p);
		return;
	}
	mvaddstr(LINES - 1, 0, p);
	addstr(u->input + (ilen > room ? ilen - room : 0));
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
		draw_help(u);
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
		.unrouted = u->unrouted, .nunrouted = u->nunrouted,
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
	if (u->mark_list) {
		draw_marks(u, ty, LINES - 2 - ty);
	} else if (u->thread_list) {
		draw_threads(u, ty, LINES - 2 - ty);
	} else if (u->hist) {
		draw_hist(u, ty, LINES - 2 - ty);
	} else if (u->show_counters) {
		draw_counters(u, ty, LINES - 2 - ty);
	} else {
		draw_table(u, ty, nrows);
		if (u->show_stack)
			draw_stack(u, ty + 1 + nrows, LINES - 1 - (ty + 1 + nrows));
	}

	move(LINES - 1, 0);
	clrtoeol();
	curs_set(u->prompt ? 1 : 0);
	if (u->prompt)
		draw_prompt(u);
	else if (u->msg[0])
		draw_msg(u->msg);
	else
		draw_hints();
	refresh();
}
