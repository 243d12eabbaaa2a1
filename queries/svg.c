/* svg.c - flame graphs as standalone SVG files (flamegraph.pl's kind): one
 * box per function along a call path (flame.c's tree), as wide as its value,
 * the root ("all") at the bottom; a header saying what the graph shows and
 * what it lacks; each box's exact figures in a <title> (shown on hover).
 * Readable as it is, without JavaScript: plain rects and text, the labels
 * cut to fit. A browser runs the inlined flame.js (embedded at build time)
 * for zoom, reset and search. A comparison of two runs (diff.c) is drawn
 * with the new run's widths, growth in red and shrinkage in blue.
 *
 * Never: draw a negative width (the caller keeps only positive stacks, and
 * says what it left out), write text that is not well-formed XML (names are
 * escaped, and bytes that are not UTF-8 or are control characters become
 * '?'), or round a figure in a title (exact counts; human sizes beside).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

#define GRAPH_WIDTH 1180     /* px: the boxes' full width */
#define PAD 10               /* px: margin around the graph */
#define FRAME_H 16           /* px: one level of the call tree */
#define BOX_H 15             /* px: a box, leaving a 1 px gap above it */
#define LINE_H 17            /* px: a header line */
#define CHAR_PX 7.2          /* px: the width of a 12 px monospace character */
#define MIN_PX 0.1           /* px: the script hides boxes narrower than this */
#define LABEL_MIN 3          /* characters: fewer leave a box unlabelled */
#define LABEL_INSET 3        /* px: from a box's left edge to its label (each side) */
#define LABEL_DROP 4         /* px: from a box's bottom up to its label's baseline */
#define ELLIPSIS ".."        /* ends a label cut to fit */
#define CHANNEL_MAX 255      /* an RGB channel's largest value */
#define HOT_RED 205          /* flamegraph.pl's "hot" palette: red 205..255, */
#define HOT_RED_SPAN 50
#define HOT_GREEN_SPAN 230   /* green 0..230, */
#define HOT_BLUE_SPAN 55     /* blue 0..55 */
#define UNCHANGED "rgb(225,225,225)"   /* a comparison's box that did not change */
#define BACKGROUND "rgb(248,248,248)"
#define DIFF_SHADE_MIN 0.2   /* the palest red or blue of a comparison ... */
#define DIFF_DEPTH 175       /* ... and how far its other channels fall from 255
                                at the largest change (80: dark text stays legible) */

/* Walks the first n code points of s (all: n < 0), replacing what XML 1.0
 * cannot hold; writes them escaped to f when f is given. Returns the
 * number of code points of s. */
static size_t put_xml(const char *s, long n, FILE *f)
{
	size_t count = 0;
	const unsigned char *u = (const unsigned char *)s;
	while (*u) {
		size_t len = *u < 0x80 ? 1 : (*u & 0xe0) == 0xc0 ? 2 : (*u & 0xf0) == 0xe0 ? 3
		           : (*u & 0xf8) == 0xf0 ? 4 : 0;
		for (size_t k = 1; k < len; k++)
			if ((u[k] & 0xc0) != 0x80)
				len = 0;               /* also stops at the NUL */
		if (n >= 0 && (long)count >= n)
			f = NULL;                      /* past the cut: count only */
		if (f && (!len || (len == 1 && *u < 0x20)))
			fputc('?', f);
		else if (f && *u == '&')
			fputs("&amp;", f);
		else if (f && *u == '<')
			fputs("&lt;", f);
		else if (f && *u == '>')
			fputs("&gt;", f);
		else if (f && *u == '"')
			fputs("&quot;", f);
		else if (f)
			fwrite(u, 1, len, f);
		u += len ? len : 1;
		count++;
	}
	return count;
}

/* The box's label: the name, cut with ".." to fit w px, or nothing. */
static void put_label(const char *name, double w, FILE *f)
{
	long fit = (long)((w - 2 * LABEL_INSET) / CHAR_PX);
	if (fit < LABEL_MIN)
		return;
	if ((long)put_xml(name, -1, NULL) <= fit) {
		put_xml(name, -1, f);
		return;
	}
	put_xml(name, fit - (long)strlen(ELLIPSIS), f);
	fputs(ELLIPSIS, f);
}

bool q_key_is_bytes(int key)
{
	return key == Q_INUSE_BYTES || key == Q_ALLOC_BYTES;
}

void q_put_value(int64_t v, int key, bool sign, FILE *f)
{
	char h[Q_HUMAN_BYTES];
	fprintf(f, sign && v > 0 ? "+%" PRId64 : "%" PRId64, v);
	if (!q_key_is_bytes(key)) {
		fputs(" objects", f);
		return;
	}
	q_human_bytes(h, sizeof h, v);
	fprintf(f, " B (%s%s)", sign && v > 0 ? "+" : "", h);
}

/* flamegraph.pl's "hot" palette, the shade chosen by the name (the same
 * function has the same colour in every graph). */
static void hot_colour(const char *name, char *buf, size_t n)
{
	uint32_t h = 2166136261u;                  /* FNV-1a */
	for (const char *s = name; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	double v1 = (double)(h & 0xff) / 0xff, v2 = (double)(h >> 8 & 0xff) / 0xff;
	snprintf(buf, n, "rgb(%d,%d,%d)", HOT_RED + (int)(HOT_RED_SPAN * v2),
	         (int)(HOT_GREEN_SPAN * v1), (int)(HOT_BLUE_SPAN * v2));
}

/* Red for growth, blue for shrinkage, paler the smaller the change beside
 * the largest one; grey: unchanged. */
static void diff_colour(int64_t delta, int64_t max_abs, char *buf, size_t n)
{
	if (!delta || !max_abs) {
		snprintf(buf, n, UNCHANGED);
		return;
	}
	double s = (double)(delta < 0 ? -delta : delta) / (double)max_abs;
	int other = CHANNEL_MAX - (int)(DIFF_DEPTH * (DIFF_SHADE_MIN + (1 - DIFF_SHADE_MIN) * s));
	if (delta > 0)
		snprintf(buf, n, "rgb(%d,%d,%d)", CHANNEL_MAX, other, other);
	else
		snprintf(buf, n, "rgb(%d,%d,%d)", other, other, CHANNEL_MAX);
}

/* What a drawing needs beside the tree. */
struct draw {
	const struct q_flame *fl;
	int key;
	bool diff;
	int64_t total, max_abs;                /* the root's width; the largest |delta| */
	int max_depth;
	int top;                               /* px: y of the deepest level */
	int *kids;                             /* children sorted by name, per node */
	size_t *first_kid;                     /* index in kids of node i's first child */
};

static int64_t width_of(const struct draw *d, int node)
{
	return d->fl->nodes[node].total[Q_SIDE_NEW][d->key];
}

static int64_t delta_of(const struct draw *d, int node)
{
	const struct q_fnode *x = &d->fl->nodes[node];
	return x->total[Q_SIDE_NEW][d->key] - x->total[Q_SIDE_BASE][d->key];
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const struct q_flame *fl = ctx;
	return strcmp(fl->nodes[*(const int *)a].name, fl->nodes[*(const int *)b].name);
}

/* The children of every node, sorted by name (flamegraph.pl's order, the
 * same in every graph), and the depth and largest change. */
static int layout(struct draw *d)
{
	const struct q_flame *fl = d->fl;
	d->kids = malloc((fl->n + 1) * sizeof *d->kids);
	d->first_kid = malloc((fl->n + 1) * sizeof *d->first_kid);
	if (!d->kids || !d->first_kid)
		return -1;
	size_t at = 0;
	for (size_t i = 0; i < fl->n; i++) {
		d->first_kid[i] = at;
		for (int c = fl->nodes[i].first_child; c >= 0; c = fl->nodes[c].next_sibling)
			d->kids[at++] = c;
		qsort_r(d->kids + d->first_kid[i], at - d->first_kid[i], sizeof *d->kids, cmp_name,
		        (void *)fl);
		if (width_of(d, (int)i) > 0 && fl->nodes[i].depth > d->max_depth)
			d->max_depth = fl->nodes[i].depth;
		int64_t a = delta_of(d, (int)i) < 0 ? -delta_of(d, (int)i) : delta_of(d, (int)i);
		if (i && a > d->max_abs)
			d->max_abs = a;
	}
	d->first_kid[fl->n] = at;
	d->total = width_of(d, 0);
	return 0;
}

/* The <title>: the name, then the figures, exact. */
static void put_title(const struct draw *d, int node, FILE *f)
{
	const struct q_fnode *x = &d->fl->nodes[node];
	int64_t v = x->total[Q_SIDE_NEW][d->key];
	fputs("<title>", f);
	put_xml(x->name, -1, f);
	fputc('\n', f);
	if (d->diff) {
		fputs("new ", f);
		q_put_value(v, d->key, false, f);
		fputs(", base ", f);
		q_put_value(x->total[Q_SIDE_BASE][d->key], d->key, false, f);
		fputs(", change ", f);
		q_put_value(delta_of(d, node), d->key, true, f);
	} else {
		q_put_value(v, d->key, false, f);
		fprintf(f, ", %.2f%%; ", d->total ? 100.0 * (double)v / (double)d->total : 0.0);
		q_put_value(x->total[Q_SIDE_NEW][d->key ^ 1], d->key ^ 1, false, f);
	}
	fputs("</title>", f);
}

/* Node's box at offset o (in the graph's unit), then its children's. */
static void put_box(const struct draw *d, int node, int64_t o, FILE *f)
{
	const struct q_fnode *x = &d->fl->nodes[node];
	int64_t v = width_of(d, node);
	if (v <= 0)
		return;                        /* nothing of it in this graph */
	double scale = d->total ? (double)GRAPH_WIDTH / (double)d->total : 0;
	double bx = PAD + (double)o * scale, bw = (double)v * scale;
	int y = d->top + (d->max_depth - x->depth) * FRAME_H;
	char fill[48];                         /* "rgb(R,G,B)" for any int R, G, B */
	if (d->diff)
		diff_colour(delta_of(d, node), d->max_abs, fill, sizeof fill);
	else
		hot_colour(x->name, fill, sizeof fill);
	fprintf(f, "<g class=\"f\" data-o=\"%" PRId64 "\" data-v=\"%" PRId64 "\" data-d=\"%d\">",
	        o, v, x->depth);
	put_title(d, node, f);
	fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>"
	        "<text x=\"%.2f\" y=\"%d\">", bx, y, bw, BOX_H, fill,
	        bx + LABEL_INSET, y + BOX_H - LABEL_DROP);
	put_label(x->name, bw, f);
	fputs("</text></g>\n", f);
	for (size_t k = d->first_kid[node]; k < d->first_kid[node + 1]; k++) {
		put_box(d, d->kids[k], o, f);
		o += width_of(d, d->kids[k]) > 0 ? width_of(d, d->kids[k]) : 0;
	}
}

/* The drawing itself, under the header's lines head. */
static int draw(struct q_db *db, const struct q_flame *fl, bool diff, int key, const char *head,
                FILE *f)
{
	struct draw d = { .fl = fl, .key = key, .diff = diff };
	if (layout(&d)) {
		free(d.kids);
		free(d.first_kid);
		return q_fail(db, "out of memory");
	}
	int nhead = 0;
	for (const char *s = head; *s; s++)
		nhead += *s == '\n';
	d.top = PAD + (nhead + 1) * LINE_H + PAD;
	int height = d.top + (d.max_depth + 1) * FRAME_H + LINE_H + PAD;
	int width = GRAPH_WIDTH + 2 * PAD;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
	        "height=\"%d\" viewBox=\"0 0 %d %d\" onload=\"init()\" data-total=\"%" PRId64 "\" "
	        "data-graph-width=\"%d\" data-pad=\"%d\" data-char-px=\"%g\" data-min-px=\"%g\" "
	        "data-inset=\"%d\" data-label-min=\"%d\">\n"
	        "<style>text{font-family:monospace;font-size:12px} g.f{cursor:pointer} "
	        "g.f:hover rect{stroke:#000;stroke-width:0.5} #reset,#search{cursor:pointer}"
	        "</style>\n<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n"
	        "<rect width=\"100%%\" height=\"100%%\" fill=\"" BACKGROUND "\"/>\n",
	        width, height, width, height, d.total, GRAPH_WIDTH, PAD, CHAR_PX, MIN_PX,
	        LABEL_INSET, LABEL_MIN, q_js_flame);
	int y = PAD + LINE_H;
	for (const char *s = head; *s; y += LINE_H) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);   /* the last line may lack one */
		char *line = strndup(s, len);
		fprintf(f, "<text class=\"head\" x=\"%d\" y=\"%d\">", PAD, y);
		if (line)
			put_xml(line, -1, f);
		fputs("</text>\n", f);
		free(line);
		s += len + (nl != NULL);
	}
	fprintf(f, "<text id=\"reset\" x=\"%d\" y=\"%d\" style=\"display:none\">Reset zoom</text>\n"
	        "<text id=\"search\" x=\"%d\" y=\"%d\" text-anchor=\"end\">Search</text>\n"
	        "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"></text>\n<g id=\"frames\">\n",
	        PAD, y, width - PAD, y, width - PAD, height - PAD);
	put_box(&d, 0, 0, f);
	fputs("</g>\n</svg>\n", f);
	free(d.kids);
	free(d.first_kid);
	return 0;
}

static const char *const what_counted[Q_NVAL] = {
	[Q_INUSE_OBJECTS] = "live objects", [Q_INUSE_BYTES] = "live bytes",
	[Q_ALLOC_OBJECTS] = "allocated objects", [Q_ALLOC_BYTES] = "allocated bytes",
};

void q_describe(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	char a[40], b[40];
	q_fmt_ns(a, sizeof a, p->t1);
	q_fmt_ns(b, sizeof b, p->t2);
	fprintf(f, "%s of process %" PRId64 " (%s): ", what_counted[key], p->pid, db->path);
	switch (p->kind) {
	case Q_SNAPSHOT: fprintf(f, "the live set at %s", b); break;
	case Q_PEAK: fprintf(f, "the live set at the peak, %s", b); break;
	case Q_GROWTH: fprintf(f, "the growth from %s to %s", a, b); break;
	case Q_STEADY: fprintf(f, "the steady window (%s, %s]", a, b); break;
	case Q_LEAKS: fprintf(f, "the leaks, live at the end (%s)", b); break;
	case Q_TEMPORARY: fputs("the temporary allocations of the whole trace", f); break;
	case Q_TOP: fprintf(f, "every allocation in [%s, %s]", a, b); break;
	}
}

void q_describe_dropped(const struct q_profile *p, int key, const char *prefix, FILE *f)
{
	int64_t stacks, sum;
	q_folded_dropped(p, key, &stacks, &sum);
	if (!stacks)
		return;
	fprintf(f, "%s%" PRId64 " stack%s that shrank by ", prefix, stacks, stacks == 1 ? "" : "s");
	q_put_value(sum, key, false, f);
	fprintf(f, " in all %s not drawn (a width cannot be negative; --format text shows "
	        "them)\n", stacks == 1 ? "is" : "are");
}

int q_svg_draw(struct q_db *db, const struct q_flame *fl, bool diff, int key,
               int (*head)(struct q_db *db, const void *ctx, FILE *f), const void *ctx, FILE *f)
{
	char *text = NULL;
	size_t len;
	FILE *h = open_memstream(&text, &len);
	if (!h)
		return q_fail(db, "out of memory");
	int rc = head(db, ctx, h);
	if (fclose(h) && !rc)
		rc = q_fail(db, "out of memory");
	if (!rc)
		rc = draw(db, fl, diff, key, text, f);
	free(text);
	return rc;
}

/* What the header of a one-profile graph needs. */
struct one {
	const struct q_profile *p;
	const struct q_flame *fl;
	int key;
};

/* The header of a one-profile graph: what it shows, its total, the threads
 * it is narrowed to, what it lacks. */
static int svg_head(struct q_db *db, const void *ctx, FILE *f)
{
	const struct one *o = ctx;
	fputs("Flame graph of the ", f);
	q_describe(db, o->p, o->key, f);
	fputs("\nTotal: ", f);
	q_put_value(o->fl->nodes[0].total[Q_SIDE_NEW][o->key], o->key, false, f);
	fputc('\n', f);
	q_write_threads_line(db, f);
	q_describe_dropped(o->p, o->key, "Left out: ", f);
	return q_write_lacks(db, o->p, "Warning: ", f);
}

int q_write_svg(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	struct q_flame fl = { 0 };
	struct one o = { p, &fl, key };
	int rc = q_flame_add(db, p, Q_SIDE_NEW, key, &fl);
	if (!rc)
		rc = q_svg_draw(db, &fl, false, key, svg_head, &o, f);
	q_flame_free(&fl);
	return rc;
}
