/* stats.c - trace-snap --stats: the process's counters (RSS and the
 * allocator's own figures, sampled by the recorder: importer/schema.sql
 * table counters) beside the live heap and the program's live mappings
 * (kind.c) the events give, at an instant or
 * over a window, and what the process holds that the program does not
 * use.
 *
 * A counter's value at T is its last sample at or before T (it holds
 * until the next one, REC_STATS_MS later); each value is printed with the
 * instant it was read, so the answer says how old it is. Over a window:
 * the value at each end, and the minimum and maximum over the window (the
 * value at T1 and every sample after it up to T2).
 *
 * Never: print to stderr (trace-snap does), or guess a value where no
 * sample was read yet.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

#define NS_PER_S 1e9
#define CELL_W 28                      /* "1099511627776 (1.0 TiB)" and a margin */
#define NAME_W 34                      /* tcmalloc.pageheap_unmapped_bytes */
#define WARNING "Warning: "
#define RSS_NAME "rss_bytes"
#define RSS_PREFIX "rss_"

/* rss_bytes first (the figure the question is about), then its parts,
 * then the allocator's figures, each by name. */
static int rank(const char *name)
{
	return !strcmp(name, RSS_NAME) ? 0 : !strncmp(name, RSS_PREFIX, strlen(RSS_PREFIX)) ? 1 : 2;
}

static int by_rank_then_name(const void *a, const void *b)
{
	const struct q_counter *x = a, *y = b;
	int rx = rank(x->name), ry = rank(y->name);
	return rx != ry ? rx - ry : strcmp(x->name, y->name);
}

/* The last sample of counter name at or before t: 1 (*when, *value), 0:
 * none, -1: error. */
static int value_at(struct q_db *db, int64_t pid, const char *name, int64_t t,
                    int64_t *when, int64_t *value)
{
	sqlite3_stmt *s = q_stmt(db, Q_ST_COUNTER_AT);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, t);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return q_sqlfail(db, "reading a counter");
	*when = sqlite3_column_int64(s, 0);
	*value = sqlite3_column_int64(s, 1);
	return 1;
}

/* min and max over [t1, t2] of c. */
static int range(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_counter *c)
{
	sqlite3_stmt *s = q_stmt(db, Q_ST_COUNTER_RANGE);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	sqlite3_bind_text(s, 2, c->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, t1);
	sqlite3_bind_int64(s, 4, t2);
	if (sqlite3_step(s) != SQLITE_ROW)
		return q_sqlfail(db, "reading a counter's range");
	int64_t lo = sqlite3_column_int64(s, 0), hi = sqlite3_column_int64(s, 1);
	bool any = sqlite3_column_int64(s, 2) > 0;
	c->has_range = c->known || any;
	c->min = c->known ? c->at_t1 : lo;
	c->max = c->known ? c->at_t1 : hi;
	if (any && lo < c->min)
		c->min = lo;
	if (any && hi > c->max)
		c->max = hi;
	return 0;
}

/* Databases imported before the table existed lack it. */
static bool has_table(struct q_db *db)
{
	return sqlite3_table_column_metadata(db->sql, NULL, "counters", NULL, NULL, NULL, NULL,
	                                     NULL, NULL) == SQLITE_OK;
}

/* The names of pid's counters into out. */
static int names(struct q_db *db, int64_t pid, struct q_counters *out)
{
	if (!has_table(db))
		return q_fail(db, "%s: no counters table (imported by an older trace-import: "
		              "import the trace again)", db->path);
	sqlite3_stmt *s = q_stmt(db, Q_ST_COUNTER_NAMES);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	int rc;
	out->n = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (q_grow(&out->c, &out->cap, out->n + 1, sizeof *out->c))
			return q_fail(db, "out of memory");
		struct q_counter *c = &out->c[out->n++];
		memset(c, 0, sizeof *c);
		const unsigned char *name = sqlite3_column_text(s, 0);
		snprintf(c->name, sizeof c->name, "%s", name ? (const char *)name : "");
	}
	if (rc != SQLITE_DONE)
		return q_sqlfail(db, "reading the counters' names");
	if (!out->n) {
		q_fail(db, "%s: process %" PRId64 " has no counters (recorded with "
		       "REC_STATS_MS=0, or by an older recorder)", db->path, pid);
		return Q_NOT_FOUND;
	}
	qsort(out->c, out->n, sizeof *out->c, by_rank_then_name);
	return 0;
}

int q_counters(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, struct q_counters *out)
{
	int rc = names(db, pid, out);
	if (rc)
		return rc;
	for (size_t i = 0; i < out->n; i++) {
		struct q_counter *c = &out->c[i];
		int k1 = value_at(db, pid, c->name, t1, &c->t1_read, &c->at_t1);
		int k2 = value_at(db, pid, c->name, t2, &c->t2_read, &c->at_t2);
		if (k1 < 0 || k2 < 0)
			return -1;
		c->known = k1;
		c->known2 = k2;
		if (range(db, pid, t1, t2, c))
			return -1;
	}
	return 0;
}

void q_counters_free(struct q_counters *c)
{
	free(c->c);
	memset(c, 0, sizeof *c);
}

int q_counter_series(struct q_db *db, int64_t pid, const char *name, struct q_sample **out,
                     size_t *n)
{
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	if (!has_table(db))
		return 0;
	sqlite3_stmt *s = q_stmt(db, Q_ST_COUNTER_SERIES);
	if (!s)
		return -1;
	sqlite3_bind_int64(s, 1, pid);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (q_grow(out, &cap, *n + 1, sizeof **out))
			return q_fail(db, "out of memory");
		(*out)[(*n)++] = (struct q_sample){ sqlite3_column_int64(s, 0),
		                                    sqlite3_column_int64(s, 1) };
	}
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, "reading a counter's samples");
}

/* Live bytes at t from the events (unbiased if sampled), per kind. */
static int live_at(struct q_db *db, int64_t pid, int64_t t, int64_t bytes[Q_NKINDS])
{
	struct q_profile p = { 0 };
	int rc = q_snapshot(db, pid, t, &p);
	if (!rc)
		rc = q_kind_totals(db, &p, Q_INUSE_BYTES, bytes) < 0 ? -1 : 0;
	q_profile_free(&p);
	return rc;
}

/* "BYTES (SIZE)" in a column, or "-" when not known. */
static void cell(FILE *f, bool known, int64_t v)
{
	char human[Q_HUMAN_BYTES], both[64] = "-";
	if (known) {
		q_human_bytes(human, sizeof human, v);
		snprintf(both, sizeof both, "%" PRId64 " (%s)", v, human);
	}
	fprintf(f, " %*s", CELL_W, both);
}

/* What the process holds that the program does not use: resident memory
 * that is neither live heap nor the program's live mappings. */
static int64_t unused(int64_t rss, int64_t heap, int64_t mmap)
{
	return rss - (heap + mmap);
}

static const struct q_counter *rss_of(const struct q_counters *cs)
{
	for (size_t i = 0; i < cs->n; i++)
		if (!strcmp(cs->c[i].name, RSS_NAME))
			return &cs->c[i];
	return NULL;
}

/* The table: at an instant, a value per row and when it was read; over a
 * window, the value at each end, the minimum and the maximum. */
static void table(FILE *f, const struct q_counters *cs, int64_t t1, int64_t t2,
                  const int64_t live[2][Q_NKINDS], bool sampled, bool is_window)
{
	if (is_window) {
		char a[40], b[40];
		snprintf(a, sizeof a, "at %.6f s", (double)t1 / NS_PER_S);
		snprintf(b, sizeof b, "at %.6f s", (double)t2 / NS_PER_S);
		fprintf(f, "From %.6f s to %.6f s\n", (double)t1 / NS_PER_S, (double)t2 / NS_PER_S);
		fprintf(f, "%-*s %*s %*s %*s %*s\n", NAME_W, "", CELL_W, a, CELL_W, b,
		        CELL_W, "min", CELL_W, "max");
	} else {
		fprintf(f, "At %.6f s\n", (double)t2 / NS_PER_S);
	}
	fprintf(f, "%-*s", NAME_W, sampled ? "live heap (events, estimated)" : "live heap (events)");
	cell(f, true, live[0][Q_KIND_HEAP]);
	if (is_window) {
		cell(f, true, live[1][Q_KIND_HEAP]);
		fputs("  (min, max: trace-snap --peak, trace-tui)", f);
	}
	fputc('\n', f);
	fprintf(f, "%-*s", NAME_W, "live mmap (events)");
	cell(f, true, live[0][Q_KIND_MMAP]);
	if (is_window)
		cell(f, true, live[1][Q_KIND_MMAP]);
	fputs("  the program's anonymous mappings\n", f);
	for (size_t i = 0; i < cs->n; i++) {
		const struct q_counter *c = &cs->c[i];
		fprintf(f, "%-*s", NAME_W, c->name);
		cell(f, c->known, c->at_t1);
		if (is_window) {
			cell(f, c->known2, c->at_t2);
			cell(f, c->has_range, c->min);
			cell(f, c->has_range, c->max);
		} else if (c->known) {
			fprintf(f, "  read at %.6f s", (double)c->t1_read / NS_PER_S);
		} else {
			fputs("  no sample yet", f);
		}
		fputc('\n', f);
	}
	const struct q_counter *rss = rss_of(cs);
	fprintf(f, "%-*s", NAME_W, "unused: rss - live heap - mmap");
	cell(f, rss && rss->known, rss ? unused(rss->at_t1, live[0][Q_KIND_HEAP],
	                                        live[0][Q_KIND_MMAP]) : 0);
	if (is_window)
		cell(f, rss && rss->known2, rss ? unused(rss->at_t2, live[1][Q_KIND_HEAP],
		                                         live[1][Q_KIND_MMAP]) : 0);
	fputs("  held by the process, not in use by the program\n", f);
}

int q_write_stats(struct q_db *db, int64_t pid, int64_t t1, int64_t t2, bool is_window, FILE *f)
{
	struct q_counters cs = { 0 };
	int64_t live[2][Q_NKINDS];
	const struct q_process *p = q_process(db, pid);
	int rc = q_counters(db, pid, t1, t2, &cs);
	if (!rc && (live_at(db, pid, t1, live[0]) ||
	            (is_window && live_at(db, pid, t2, live[1]))))
		rc = -1;
	if (rc) {
		q_counters_free(&cs);
		return rc;
	}
	table(f, &cs, t1, t2, live, p && p->sample_period > 0, is_window);
	q_counters_free(&cs);
	struct q_profile lk = { .kind = is_window ? Q_GROWTH : Q_SNAPSHOT, .pid = pid,
	                        .t1 = t1, .t2 = t2 };
	return q_write_lacks(db, &lk, WARNING, f);
}
