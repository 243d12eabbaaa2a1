/* hist.c - the histogram of allocation sizes (q_histogram): for the blocks
 * live at an instant, the allocations of a window or of the whole run,
 * counted per exact size, then binned by powers of two and ranked.
 *
 * A sampled process is unbiased per exact size (q_unbias with that size as
 * the average), so a bin's and the totals' estimates are sums of those.
 *
 * Never: count a block of a thread the filter leaves out, or round a
 * number of an unsampled process.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "qi.h"

/* One exact size and how many blocks had it. */
struct size_count { int64_t size, objects; };

struct sizes {
	struct size_count *c;
	size_t n, cap;
	struct q_map at;                       /* size -> index in c */
};

static int count_size(struct q_db *db, struct sizes *s, int64_t size)
{
	uint32_t k;
	if (q_map_get(&s->at, size, &k)) {
		s->c[k].objects++;
		return 0;
	}
	if (q_grow(&s->c, &s->cap, s->n + 1, sizeof *s->c) ||
	    q_map_put(&s->at, size, (uint32_t)s->n))
		return q_fail(db, "out of memory");
	s->c[s->n++] = (struct size_count){ size, 1 };
	return 0;
}

/* Reads the sizes of the blocks h is about. */
static int read_sizes(struct q_db *db, const struct q_hist *h, struct sizes *s)
{
	bool live = h->kind == Q_SNAPSHOT || h->kind == Q_PEAK;
	/* (t1, t2]: an instant counts every block made by it, the whole run's
	 * [t1, t2] starts one nanosecond earlier */
	int64_t after = live ? INT64_MIN : h->kind == Q_TOP ? h->t1 - 1 : h->t1;
	sqlite3_stmt *st = q_stmt(db, Q_ST_HIST);
	if (!st)
		return -1;
	sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":pid"), h->pid);
	sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":t1"), after);
	sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":t2"), h->t2);
	sqlite3_bind_int(st, sqlite3_bind_parameter_index(st, ":live"), live);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (q_tf_keeps(db, sqlite3_column_int64(st, 1)) &&
		    count_size(db, s, sqlite3_column_int64(st, 0))) {
			sqlite3_reset(st);
			return -1;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : q_sqlfail(db, "counting allocation sizes");
}

/* Bin of a size: 0 for 0, else its bit length (1 -> 1, 2..3 -> 2, ...). */
static int bin_of(int64_t size)
{
	return size <= 0 ? 0 : 64 - __builtin_clzll((unsigned long long)size);
}

int64_t q_hist_bin_max(int k)
{
	return k <= 0 ? 0 : k >= 63 ? INT64_MAX : ((int64_t)1 << k) - 1;
}

static int cmp_top(const void *a, const void *b)
{
	const struct q_hist_count *x = a, *y = b;
	if (x->objects != y->objects)
		return x->objects > y->objects ? -1 : 1;
	return x->size < y->size ? -1 : x->size > y->size;
}

int q_histogram(struct q_db *db, int64_t pid, enum q_kind kind, int64_t t1, int64_t t2,
                struct q_hist *h)
{
	long i = q_proc_index(db, pid);
	if (i < 0 || q_tf_on(db, pid) < 0)
		return -1;
	if (kind != Q_SNAPSHOT && kind != Q_PEAK && kind != Q_STEADY && kind != Q_TOP)
		return q_fail(db, "a histogram is of an instant, a window or the whole run");
	memset(h, 0, sizeof *h);
	h->kind = kind;
	h->pid = pid;
	h->t1 = t1;
	h->t2 = t2;
	h->sample_period = db->procs[i].sample_period;
	for (int k = 0; k < Q_HIST_BINS; k++)
		h->bin[k].size = k ? q_hist_bin_max(k - 1) + 1 : 0;
	struct sizes s = { 0 };
	int rc = read_sizes(db, h, &s);
	struct q_hist_count *all = rc ? NULL : malloc((s.n + 1) * sizeof *all);
	if (!rc && !all)
		rc = q_fail(db, "out of memory");
	for (size_t k = 0; !rc && k < s.n; k++) {
		struct q_row in = { .v = { [Q_ALLOC_OBJECTS] = s.c[k].objects,
		                           [Q_ALLOC_BYTES] = s.c[k].objects * s.c[k].size } }, u;
		q_unbias(&in, h->sample_period, &u);
		all[k] = (struct q_hist_count){ s.c[k].size, u.v[Q_ALLOC_OBJECTS],
		                                u.v[Q_ALLOC_BYTES] };
		struct q_hist_count *b = &h->bin[bin_of(s.c[k].size)];
		b->objects += all[k].objects;
		b->bytes += all[k].bytes;
		h->objects += all[k].objects;
		h->bytes += all[k].bytes;
	}
	if (!rc && s.n) {
		qsort(all, s.n, sizeof *all, cmp_top);
		h->ntop = s.n < Q_HIST_TOP ? s.n : Q_HIST_TOP;
		memcpy(h->top, all, h->ntop * sizeof *all);
	}
	free(all);
	free(s.c);
	q_map_free(&s.at);
	return rc;
}
