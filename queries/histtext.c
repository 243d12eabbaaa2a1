/* histtext.c - the histogram of allocation sizes as a text table (trace-snap
 * --histogram): a line saying what it counts, the threads when filtered, a
 * Total line, a "Warning: " line per thing the answer lacks, the bins with
 * objects, bytes (and their size in binary units) and a bar of objects,
 * then the most frequent exact sizes.
 *
 * Never: print a number other than the one q_histogram counted (the human
 * size goes beside the exact bytes, never instead of them).
 */
#include <inttypes.h>

#include "qi.h"

/* Starts each line of what the answer lacks, as in text.c. */
#define WARNING "Warning: "
/* Width of the longest bar, in characters. */
#define BAR_WIDTH 40
static double pct(int64_t v, int64_t tot)
{
	return tot ? 100.0 * (double)v / (double)tot : 0.0;
}

/* What h counts, in words. */
static void heading(const struct q_hist *h, FILE *f)
{
	char a[40], b[40];
	q_fmt_ns(a, sizeof a, h->t1);
	q_fmt_ns(b, sizeof b, h->t2);
	fprintf(f, "Allocation sizes of process %" PRId64 ": ", h->pid);
	switch (h->kind) {
	case Q_SNAPSHOT: fprintf(f, "blocks live at %s\n", b); break;
	case Q_PEAK: fprintf(f, "blocks live at the peak, %s\n", b); break;
	case Q_STEADY: fprintf(f, "allocations made in (%s, %s]\n", a, b); break;
	default: fprintf(f, "every allocation of the run (%s to %s)\n", a, b); break;
	}
}

int q_write_hist_lacks(struct q_db *db, const struct q_hist *h, const char *prefix, FILE *f)
{
	return q_write_lacks_of(db, h->pid, h->kind, h->t1, h->t2, prefix, f);
}

/* "[lo, hi]" of bin k. */
static int range_of(char *buf, size_t n, const struct q_hist *h, int k)
{
	return snprintf(buf, n, "[%" PRId64 ", %" PRId64 "]", h->bin[k].size, q_hist_bin_max(k));
}

/* The bins from the first to the last one used, the empty ones between
 * kept so that the shape shows; the range column as wide as its widest. */
static void bins(const struct q_hist *h, FILE *f)
{
	static const char title[] = "size (bytes)";
	int first = Q_HIST_BINS, last = -1, width = (int)sizeof title - 1;
	int64_t most = 0;
	char range[48], hs[Q_HUMAN_BYTES];
	for (int k = 0; k < Q_HIST_BINS; k++) {
		if (!h->bin[k].objects)
			continue;
		first = first < k ? first : k;
		last = k;
		most = h->bin[k].objects > most ? h->bin[k].objects : most;
		int w = range_of(range, sizeof range, h, k);
		width = w > width ? w : width;
	}
	fprintf(f, "%*s %10s %6s %12s %9s  %s\n", width, title, "objects", "%", "bytes", "",
	        "objects");
	for (int k = first; k <= last; k++) {
		const struct q_hist_count *c = &h->bin[k];
		range_of(range, sizeof range, h, k);
		q_human_bytes(hs, sizeof hs, c->bytes);
		fprintf(f, "%*s %10" PRId64 " %5.1f%% %12" PRId64 " %9s", width, range, c->objects,
		        pct(c->objects, h->objects), c->bytes, hs);
		int64_t bar = c->objects * BAR_WIDTH / most;
		if (c->objects)
			fputs("  ", f);
		for (int64_t i = 0; i < bar || (i == 0 && c->objects); i++)
			fputc('#', f);          /* a bin with objects shows at least one */
		fputc('\n', f);
	}
}

static void top_sizes(const struct q_hist *h, FILE *f)
{
	fprintf(f, "\nMost frequent sizes (top %d by objects):\n", Q_HIST_TOP);
	fprintf(f, "%20s %10s %6s %12s\n", "size (bytes)", "objects", "%", "bytes");
	for (size_t i = 0; i < h->ntop; i++) {
		const struct q_hist_count *c = &h->top[i];
		fprintf(f, "%20" PRId64 " %10" PRId64 " %5.1f%% %12" PRId64 "\n", c->size, c->objects,
		        pct(c->objects, h->objects), c->bytes);
	}
}

int q_write_hist(struct q_db *db, const struct q_hist *h, FILE *f)
{
	char hs[Q_HUMAN_BYTES];
	heading(h, f);
	q_write_threads_line(db, f);
	q_human_bytes(hs, sizeof hs, h->bytes);
	fprintf(f, "Total: %" PRId64 " objects, %" PRId64 " B (%s)\n", h->objects, h->bytes, hs);
	if (h->sample_period > 0)
		fprintf(f, "Sampled every %" PRId64 " bytes: counts unbiased per size (estimates)\n",
		        h->sample_period);
	if (q_write_hist_lacks(db, h, WARNING, f))
		return -1;
	bins(h, f);
	top_sizes(h, f);
	return 0;
}

static int write_hist(struct q_db *db, const void *h, FILE *f)
{
	return q_write_hist(db, h, f);
}

int q_write_hist_file(struct q_db *db, const struct q_hist *h, const char *path, bool force)
{
	return q_write_atomic(db, path, force, write_hist, h);
}
