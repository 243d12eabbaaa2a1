/* chart.c - live bytes over the whole trace as a bar chart of block characters,
 * and the process's RSS (the recorder's rss_bytes samples) as a line of dots
 * over it in another colour, with a legend, when the trace has them.
 *
 * The timeline (one point per bucket: start time, maximum live bytes) and
 * the RSS samples are laid out once per terminal width into one value per
 * column each, the column's maximum, so that a cursor step redraws from the
 * cached columns and never reads the database. Both share the y axis. Rows below the bars: an axis carrying the cursor (^),
 * the peak (P), marks (M; the recorder's stop and start marks as ( and ),
 * its unrouted and routed marks as { and }) and the growth window (=), then
 * time labels. Columns where recording was stopped, or calls went
 * unrecorded, are shaded above their bars.
 *
 * Never: allocate or query while drawing; draw outside the rows it is given.
 */
#include "tui.h"
#include "trace_format.h"   /* the reserved marks' labels */

#include <stdlib.h>
#include <string.h>

#define LABEL_W   9      /* y labels: "1023 KiB" plus a space */
#define EIGHTHS   8      /* a block character has eight heights */
#define NTICKS    4      /* about this many intervals between time labels */

int tui_chart_col_of(const struct tui_chart *c, int64_t t)
{
	if (c->ncol <= 0 || c->duration <= 0)
		return 0;
	if (t <= 0)
		return 0;
	if (t >= c->duration)
		return c->ncol - 1;
	return (int)((__int128)t * c->ncol / c->duration);
}

/* The first instant of a column (rounded up, so that it maps back to it). */
int64_t tui_chart_t_of(const struct tui_chart *c, int col)
{
	if (c->ncol <= 0)
		return 0;
	return (int64_t)(((__int128)c->duration * col + c->ncol - 1) / c->ncol);
}

/* The next round number >= v: 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 or 10 times a
 * power of ten times a power of 1024, so the top label reads well ("4.00 MiB"). */
static int64_t round_up(int64_t v)
{
	static const int step[] = { 10, 15, 20, 25, 30, 40, 50, 60, 80, 100 };
	int64_t unit = 1;

	if (v <= 0)
		return 1;
	while (v / unit >= 1024)
		unit *= 1024;
	int64_t scale = unit;       /* v / scale is in [1, 1024) */
	while (v / scale >= 10)
		scale *= 10;
	for (size_t i = 0; i < sizeof step / sizeof step[0]; i++) {
		int64_t cand = (int64_t)((__int128)scale * step[i] / 10);
		if (cand >= v)
			return cand;
	}
	return scale * 10;
}

/* A round step near want (ns): 1, 2 or 5 times a power of ten. */
static int64_t tick_step(int64_t want)
{
	int64_t p = 1;
	if (want <= 0)
		return 0;
	while (p <= want / 10)
		p *= 10;
	return want < 2 * p ? p : want < 5 * p ? 2 * p : 5 * p;
}

/* The points' maximum per column into col (before the first point: none,
 * a column without a point: the last one before it); returns the largest. */
static int64_t per_column(const struct tui_chart *c, const struct tui_point *pts, size_t n,
                          int64_t none, int64_t *col)
{
	int64_t carry = none, top = 0;
	size_t i = 0;
	for (int k = 0; k < c->ncol; k++) {
		int64_t end = tui_chart_t_of(c, k + 1);
		int64_t m = carry;
		bool any = false;
		while (i < n && (pts[i].t < end || k == c->ncol - 1)) {
			if (!any || pts[i].bytes > m)
				m = pts[i].bytes;
			any = true;
			carry = pts[i].bytes;
			i++;
		}
		col[k] = m;
		if (m > top)
			top = m;
	}
	return top;
}

int tui_chart_layout(struct tui_chart *c, int ncol)
{
	if (ncol < 1)
		ncol = 1;
	int64_t *col = realloc(c->col, (size_t)ncol * sizeof *col);
	if (!col)
		return -1;
	c->col = col;
	int64_t *rcol = realloc(c->rcol, (size_t)ncol * sizeof *rcol);
	if (!rcol)
		return -1;
	c->rcol = rcol;
	c->ncol = ncol;
	/* A column with no bucket start shows the bucket it lies in. */
	int64_t top = per_column(c, c->pts, c->npts, 0, col);
	int64_t rtop = per_column(c, c->rss, c->nrss, -1, rcol);
	c->ymax = round_up(rtop > top ? rtop : top);
	return 0;
}

void tui_chart_free(struct tui_chart *c)
{
	free(c->col);
	free(c->rcol);
	c->col = c->rcol = NULL;
	c->ncol = 0;
}

static const char *const blocks_utf8[EIGHTHS + 1] = {
	" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"
};

/* The recorder's stop and start marks enclose a shaded stopped span,
 * "(░░)"; its unrouted and routed marks, a shaded unrouted one, "{░░}". */
static chtype mark_glyph(const char *label)
{
	if (!strcmp(label, TF_MARK_STOP))
		return '(';
	if (!strcmp(label, TF_MARK_START))
		return ')';
	if (!strcmp(label, TF_MARK_UNROUTED))
		return '{';
	if (!strcmp(label, TF_MARK_ROUTED))
		return '}';
	return 'M';
}

/* Whether one of spans s meets [a, b). */
static bool spans_meet(const struct q_span *s, size_t n, int64_t a, int64_t b)
{
	for (size_t i = 0; i < n; i++)
		if (s[i].t1 < b && s[i].t2 > a)
			return true;
	return false;
}

/* Whether column k meets a stopped or unrouted span. */
static bool col_shaded(const struct tui_chart *c, const struct tui_chart_marks *m, int k)
{
	int64_t a = tui_chart_t_of(c, k), b = tui_chart_t_of(c, k + 1);
	return spans_meet(m->stopped, m->nstopped, a, b) ||
	       spans_meet(m->unrouted, m->nunrouted, a, b);
}

/* The empty part of a column where allocations went unrecorded. */
static void put_shade(WINDOW *w, int y, int x, bool utf8)
{
	if (utf8)
		mvwaddstr(w, y, x, "\u2591");
	else
		mvwaddch(w, y, x, ':');
}

/* The eighths of h rows that v fills, at least one when v > 0. */
static int64_t eighths(const struct tui_chart *c, int64_t v, int h)
{
	int64_t e = (int64_t)((__int128)v * h * EIGHTHS / (c->ymax ? c->ymax : 1));
	return v > 0 && e == 0 ? 1 : e;
}

/* The RSS dot of column k, in the row its value reaches, over the bar. */
static void put_rss(WINDOW *w, const struct tui_chart *c, int k, int y, int h, int x,
                    bool utf8, bool color)
{
	if (c->rcol[k] < 0)
		return;         /* before the first sample */
	int64_t e = eighths(c, c->rcol[k], h);
	int r = h - 1 - (int)((e > 0 ? e - 1 : 0) / EIGHTHS);
	attr_t a = A_BOLD | (color ? COLOR_PAIR(TUI_PAIR_RSS) : 0);
	wattron(w, a);
	if (utf8)
		mvwaddstr(w, y + r, x, "\u2022");
	else
		mvwaddch(w, y + r, x, '*');
	wattroff(w, a);
}

/* "▆ live  • RSS" at the right end of the top row. */
static void put_legend(WINDOW *w, int y, int width, bool utf8, bool color)
{
	static const char live[] = " live ", rss[] = " RSS ";
	int x = width - (int)(sizeof live - 1 + sizeof rss - 1 + 2);
	if (x < LABEL_W + 1)
		return;
	attr_t bar = color ? COLOR_PAIR(TUI_PAIR_BAR) : 0;
	attr_t dot = A_BOLD | (color ? COLOR_PAIR(TUI_PAIR_RSS) : 0);
	wattron(w, bar);
	mvwaddstr(w, y, x, utf8 ? blocks_utf8[EIGHTHS - 2] : "#");
	wattroff(w, bar);
	mvwaddstr(w, y, x + 1, live);
	wattron(w, dot);
	mvwaddstr(w, y, x + (int)sizeof live, utf8 ? "\u2022" : "*");
	wattroff(w, dot);
	mvwaddstr(w, y, x + (int)sizeof live + 1, rss);
}

static void put_cell(WINDOW *w, int y, int x, int fill, bool utf8)
{
	if (utf8)
		mvwaddstr(w, y, x, blocks_utf8[fill]);
	else
		mvwaddch(w, y, x, fill >= EIGHTHS / 2 ? '#' : fill > 0 ? '.' : ' ');
}

void tui_chart_draw(WINDOW *w, const struct tui_chart *c, const struct tui_chart_marks *m,
                    int y, int h, int width, bool utf8, bool color)
{
	int x0 = LABEL_W + 1;
	int ncol = width - x0;
	char lbl[32];

	if (ncol < 1 || h < 1)
		return;

	/* y labels: top, middle, zero. */
	for (int r = 0; r < h; r++) {
		mvwhline(w, y + r, 0, ' ', LABEL_W);
		if (utf8)
			mvwaddstr(w, y + r, LABEL_W, "\u2502");
		else
			mvwaddch(w, y + r, LABEL_W, '|');
	}
	tui_fmt_bytes(lbl, sizeof lbl, c->ymax);
	mvwprintw(w, y, 0, "%*s", LABEL_W - 1, lbl);
	if (h >= 5) {
		tui_fmt_bytes(lbl, sizeof lbl, c->ymax / 2);
		mvwprintw(w, y + h / 2, 0, "%*s", LABEL_W - 1, lbl);
	}
	mvwprintw(w, y + h - 1, 0, "%*s", LABEL_W - 1, "0 B");

	int cur = tui_chart_col_of(c, m->cursor);
	int peak = tui_chart_col_of(c, m->peak_t);
	for (int k = 0; k < ncol && k < c->ncol; k++) {
		int64_t e = eighths(c, c->col[k], h);      /* anything live shows */
		attr_t a = 0;
		if (k == cur)
			a = A_REVERSE | (color ? COLOR_PAIR(TUI_PAIR_CURSOR) : A_BOLD);
		else if (color)
			a = COLOR_PAIR(k == peak ? TUI_PAIR_PEAK : TUI_PAIR_BAR);
		bool shade = col_shaded(c, m, k);
		wattron(w, a);
		for (int r = 0; r < h; r++) {
			int64_t level = (int64_t)(h - 1 - r) * EIGHTHS;
			int64_t fill = e - level;
			fill = fill < 0 ? 0 : fill > EIGHTHS ? EIGHTHS : fill;
			if (k == cur && fill == 0)
				put_cell(w, y + r, x0 + k, 0, false);
			else if (shade && fill == 0)
				put_shade(w, y + r, x0 + k, utf8);
			else
				put_cell(w, y + r, x0 + k, (int)fill, utf8);
		}
		wattroff(w, a);
		if (c->nrss && k != cur)
			put_rss(w, c, k, y, h, x0 + k, utf8, color);
	}
	if (c->nrss)
		put_legend(w, y, width, utf8, color);

	/* Axis row: window, marks, peak, cursor, later ones drawn over earlier. */
	int ay = y + h;
	mvwhline(w, ay, 0, ' ', width);
	if (utf8) {
		mvwaddstr(w, ay, LABEL_W, "\u2514");
		for (int k = 0; k < ncol; k++)
			mvwaddstr(w, ay, x0 + k, "\u2500");
	} else {
		mvwaddch(w, ay, LABEL_W, '+');
		mvwhline(w, ay, x0, '-', ncol);
	}
	if (m->window) {
		int a = tui_chart_col_of(c, m->w1), b = tui_chart_col_of(c, m->w2);
		for (int k = a; k <= b && k < ncol; k++)
			mvwaddch(w, ay, x0 + k, '=');
	}
	if (color)
		wattron(w, COLOR_PAIR(TUI_PAIR_MARK));
	for (size_t i = 0; i < m->nmarks; i++)
		mvwaddch(w, ay, x0 + tui_chart_col_of(c, m->marks[i].t), mark_glyph(m->marks[i].label));
	if (color)
		wattroff(w, COLOR_PAIR(TUI_PAIR_MARK));
	wattron(w, A_BOLD | (color ? COLOR_PAIR(TUI_PAIR_PEAK) : 0));
	mvwaddch(w, ay, x0 + peak, 'P');
	wattroff(w, A_BOLD | (color ? COLOR_PAIR(TUI_PAIR_PEAK) : 0));
	wattron(w, A_BOLD);
	mvwaddch(w, ay, x0 + cur, '^');
	wattroff(w, A_BOLD);

	/* Time labels: both ends, and round instants between where they fit. */
	int ly = ay + 1;
	mvwhline(w, ly, 0, ' ', width);
	tui_fmt_time_short(lbl, sizeof lbl, 0);
	mvwaddstr(w, ly, x0, lbl);
	int free_from = x0 + (int)strlen(lbl) + 1;
	tui_fmt_time_short(lbl, sizeof lbl, c->duration);
	int end_x = width - (int)strlen(lbl);
	mvwaddstr(w, ly, end_x, lbl);
	int64_t step = tick_step(c->duration / NTICKS);
	for (int64_t t = step; step > 0 && t < c->duration; t += step) {
		tui_fmt_time_short(lbl, sizeof lbl, t);
		int len = (int)strlen(lbl);
		int x = x0 + tui_chart_col_of(c, t) - len / 2;
		if (x < free_from || x + len >= end_x)
			continue;
		mvwaddstr(w, ly, x, lbl);
		free_from = x + len + 1;
	}
}
