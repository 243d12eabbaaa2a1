/* lacks.c - what an answer lacks: the loss, the damage, the stopped spans,
 * the unknown inheritance, the custom blocks a sampled or bounded trace
 * does not hold of a process, and the heap from before an attach
 * (importer/schema.sql, schema version 4, and the heapreel.stop /
 * heapreel.start / heapreel.unrouted / heapreel.routed /
 * heapreel.custom-unrecorded / heapreel.attach marks), told as
 * sentences that trace-snap prints and writes, and that trace-tui's status
 * line shortens. README "trace-snap" says what each means.
 *
 * Never: call an answer whole when a column or a mark says otherwise, or
 * read the database per call (the marks are cached by q_marks).
 */
#include <inttypes.h>
#include <string.h>

#include "qi.h"
#include "trace_format.h"   /* the reserved marks' labels */

#define TIME_TEXT 40      /* room for a time told by q_fmt_ns */
#define EARLIER_TEXT 48   /* room for earlier()'s words */
#define FREES_TEXT 72     /* room for unknown_frees()'s words */

/* Appends the open span [t, never) to *v. */
static int open_span(struct q_span **v, size_t *n, size_t *cap, int64_t t)
{
	if (q_grow(v, cap, *n + 1, sizeof **v))
		return -1;
	(*v)[(*n)++] = (struct q_span){ t, Q_NEVER };
	return 0;
}

/* The stopped spans (a stop while stopped changes nothing) and the
 * unrouted ones (they nest: the recorder's spans may overlap, each
 * reaching back to its previous look at the loaded objects) of a process,
 * from its marks at once. */
static int load_spans(struct q_db *db, int64_t pid, struct q_pdata *pd)
{
	const struct q_mark *m;
	size_t nm, cap_s = 0, cap_u = 0;
	if (q_marks(db, pid, &m, &nm))
		return -1;
	unsigned depth = 0;
	for (size_t k = 0; k < nm; k++) {
		bool open = pd->nstopped && pd->stopped[pd->nstopped - 1].t2 == Q_NEVER;
		int r = 0;
		if (!open && !strcmp(m[k].label, TF_MARK_STOP))
			r = open_span(&pd->stopped, &pd->nstopped, &cap_s, m[k].t);
		else if (open && !strcmp(m[k].label, TF_MARK_START))
			pd->stopped[pd->nstopped - 1].t2 = m[k].t;
		else if (!strcmp(m[k].label, TF_MARK_UNROUTED) && depth++ == 0)
			r = open_span(&pd->unrouted, &pd->nunrouted, &cap_u, m[k].t);
		else if (!strcmp(m[k].label, TF_MARK_ROUTED) && depth && --depth == 0)
			pd->unrouted[pd->nunrouted - 1].t2 = m[k].t;
		if (r) {
			pd->nstopped = pd->nunrouted = 0;   /* the next call starts over */
			return q_fail(db, "%s: out of memory", db->path);
		}
	}
	pd->spans_loaded = true;
	return 0;
}

/* Process pid's data with its spans loaded, or NULL. */
static const struct q_pdata *spans_of(struct q_db *db, int64_t pid)
{
	long i = q_proc_index(db, pid);
	if (i < 0)
		return NULL;
	struct q_pdata *pd = &db->pd[i];
	return pd->spans_loaded || !load_spans(db, pid, pd) ? pd : NULL;
}

static int span_list(struct q_db *db, int64_t pid, bool unrouted, const struct q_span **out,
		     size_t *n)
{
	const struct q_pdata *pd = spans_of(db, pid);
	if (!pd)
		return -1;
	*out = unrouted ? pd->unrouted : pd->stopped;
	*n = unrouted ? pd->nunrouted : pd->nstopped;
	return 0;
}

int q_stopped(struct q_db *db, int64_t pid, const struct q_span **out, size_t *n)
{
	return span_list(db, pid, false, out, n);
}

int q_unrouted(struct q_db *db, int64_t pid, const struct q_span **out, size_t *n)
{
	return span_list(db, pid, true, out, n);
}

/* Which of spans s touch an answer over [t1, t2]: every span begun by t2
 * for a live set (blocks allocated in it may still be live after it),
 * those that meet [t1, t2] otherwise. Their number, and the last one. */
static size_t touching(const struct q_span *s, size_t n, bool live_set, int64_t t1, int64_t t2,
                       struct q_span *last)
{
	size_t met = 0;
	for (size_t k = 0; k < n; k++)
		if (s[k].t1 <= t2 && (live_set || s[k].t2 > t1)) {
			met++;
			*last = s[k];
		}
	return met;
}

/* The first mark of pid labelled label, Q_NEVER if none (marks are by time). */
static int first_mark(struct q_db *db, int64_t pid, const char *label, int64_t *t)
{
	const struct q_mark *m;
	size_t nm;
	*t = Q_NEVER;
	if (q_marks(db, pid, &m, &nm))
		return -1;
	for (size_t k = 0; k < nm && *t == Q_NEVER; k++)
		if (!strcmp(m[k].label, label))
			*t = m[k].t;
	return 0;
}

int q_lacks(struct q_db *db, int64_t pid, enum q_kind kind, int64_t t1, int64_t t2,
            struct q_lack *l)
{
	int64_t t_custom, t_unmapped, t_attach;
	if (first_mark(db, pid, TF_MARK_CUSTOM_UNRECORDED, &t_custom) ||
	    first_mark(db, pid, TF_MARK_MMAP_UNRECORDED, &t_unmapped) ||
	    first_mark(db, pid, TF_MARK_ATTACH, &t_attach))
		return -1;
	const struct q_pdata *pd = spans_of(db, pid);
	if (!pd)
		return -1;
	const struct q_process *p = q_process(db, pid);
	memset(l, 0, sizeof *l);
	l->kind = kind;
	l->proc = p;
	int64_t reach = kind == Q_PEAK || kind == Q_LEAKS ? p->t_end : t2;
	if (reach >= p->t_loss)
		l->what |= Q_LACK_LOSS;
	if (p->damaged && reach >= p->t_damaged)
		l->what |= Q_LACK_DAMAGE;
	if (reach >= t_custom) {
		l->what |= Q_LACK_CUSTOM;
		l->t_custom = t_custom;
	}
	if (reach >= t_unmapped) {
		l->what |= Q_LACK_UNMAPPED;
		l->t_unmapped = t_unmapped;
	}
	/* Inherited blocks were allocated before the process: only live sets
	 * hold them, never an allocation count. */
	bool live_set = kind == Q_SNAPSHOT || kind == Q_PEAK || kind == Q_GROWTH || kind == Q_LEAKS;
	if ((l->nstopped = touching(pd->stopped, pd->nstopped, live_set, t1, reach, &l->stopped)))
		l->what |= Q_LACK_STOPPED;
	if ((l->nunrouted = touching(pd->unrouted, pd->nunrouted, live_set, t1, reach, &l->unrouted)))
		l->what |= Q_LACK_UNROUTED;
	if (p->inherited == Q_INHERITED_UNKNOWN && live_set)
		l->what |= Q_LACK_INHERITED;
	if (t_attach != Q_NEVER && live_set) {
		l->what |= Q_LACK_ATTACHED;
		l->t_attach = t_attach;
	}
	return 0;
}

/* A span's ends as "T1" and "T2" or "its end" (TIME_TEXT bytes each). */
static void span_ends(const struct q_span *s, char *a, char *b)
{
	q_fmt_ns(a, TIME_TEXT, s->t1);
	if (s->t2 == Q_NEVER)
		snprintf(b, TIME_TEXT, "its end");
	else
		q_fmt_ns(b, TIME_TEXT, s->t2);
}

/* " (and in N earlier spans)" when n spans were met, into c. */
static const char *earlier(size_t n, char c[EARLIER_TEXT])
{
	if (n < 2)
		return "";
	snprintf(c, EARLIER_TEXT, " (and in %zu earlier span%s)", n - 1, n > 2 ? "s" : "");
	return c;
}

/* " (N frees of blocks it never saw allocated)" (how many blocks allocated
 * unrecorded, at least) into d, in the first sentence about such blocks. */
static const char *unknown_frees(const struct q_lack *l, unsigned bit, char d[FREES_TEXT])
{
	unsigned first = l->what & (Q_LACK_STOPPED | Q_LACK_UNROUTED);
	if (l->proc->unknown_frees <= 0 || (first & -first) != bit)
		return "";
	snprintf(d, FREES_TEXT, " (%" PRId64 " frees of blocks it never saw allocated)",
	         l->proc->unknown_frees);
	return d;
}

/* Sentence about one bit of l->what. */
static void say(const struct q_lack *l, unsigned bit, char *buf, size_t n)
{
	const struct q_process *p = l->proc;
	long long pid = (long long)p->pid;
	char a[TIME_TEXT], b[TIME_TEXT], c[EARLIER_TEXT], d[FREES_TEXT];
	switch (bit) {
	case Q_LACK_LOSS:
		q_fmt_ns(a, sizeof a, p->t_loss);
		b[0] = 0;
		if (p->lost_events > 0)
			snprintf(b, sizeof b, " (%" PRId64 " lost)", p->lost_events);
		snprintf(buf, n, "events of process %lld may be missing from %s on%s: the answer "
		         "may lack blocks, or hold blocks whose free was lost", pid, a, b);
		break;
	case Q_LACK_DAMAGE:
		q_fmt_ns(a, sizeof a, p->t_damaged);
		if (l->kind == Q_LEAKS)
			snprintf(buf, n, "the trace of process %lld was cut (damaged) after %s: these "
			         "\"leaks\" are blocks whose free was not read", pid, a);
		else
			snprintf(buf, n, "the trace of process %lld was cut (damaged) after %s: "
			         "nothing after it was read", pid, a);
		break;
	case Q_LACK_STOPPED:
		span_ends(&l->stopped, a, b);
		snprintf(buf, n, "recording of process %lld was stopped from %s to %s%s: blocks "
		         "allocated then are in no answer%s", pid, a, b, earlier(l->nstopped, c),
		         unknown_frees(l, bit, d));
		break;
	case Q_LACK_UNROUTED:
		span_ends(&l->unrouted, a, b);
		snprintf(buf, n, "some calls of process %lld reached the allocator unrecorded "
		         "from %s to %s%s (GOT entries not routed to the recorder: a library "
		         "loaded since its last look): blocks allocated then are in no answer%s, "
		         "and blocks freed then may look live",
		         pid, a, b, earlier(l->nunrouted, c), unknown_frees(l, bit, d));
		break;
	case Q_LACK_UNMAPPED:
		q_fmt_ns(a, sizeof a, l->t_unmapped);
		snprintf(buf, n, "process %lld mapped anonymous memory from %s on that its trace "
		         "does not hold (sampled or bounded): the answer lacks it (kind mmap)", pid, a);
		break;
	case Q_LACK_CUSTOM:
		q_fmt_ns(a, sizeof a, l->t_custom);
		snprintf(buf, n, "process %lld reported custom allocator blocks from %s on that its "
		         "trace does not hold (sampled or bounded): the answer lacks them", pid, a);
		break;
	case Q_LACK_ATTACHED:
		q_fmt_ns(a, sizeof a, l->t_attach);
		snprintf(buf, n, "process %lld was recorded by attaching to it at %s (trace-record "
		         "-p): the answer holds the heap allocated since the attach, not what was "
		         "live before it", pid, a);
		break;
	default:
		q_fmt_ns(a, sizeof a, p->fork_t);
		snprintf(buf, n, "process %lld was forked from %lld at %s, whose trace was not "
		         "imported: its snapshots lack the blocks it inherited from its parent",
		         pid, (long long)p->ppid, a);
		break;
	}
}

bool q_lack_text(const struct q_lack *l, int i, char *buf, size_t n)
{
	for (unsigned bit = 1; bit <= Q_LACK_LAST; bit <<= 1)
		if ((l->what & bit) && i-- == 0) {
			say(l, bit, buf, n);
			return true;
		}
	return false;
}

/* Each sentence of l as a line "PREFIX sentence" on f. */
static void write_lack(const struct q_lack *l, const char *prefix, FILE *f)
{
	char line[512];
	for (int i = 0; q_lack_text(l, i, line, sizeof line); i++)
		fprintf(f, "%s%s\n", prefix, line);
}

int q_write_lacks_of(struct q_db *db, int64_t pid, enum q_kind kind, int64_t t1, int64_t t2,
                     const char *prefix, FILE *f)
{
	struct q_lack l;
	if (q_lacks(db, pid, kind, t1, t2, &l))
		return -1;
	write_lack(&l, prefix, f);
	return 0;
}

int q_write_lacks(struct q_db *db, const struct q_profile *p, const char *prefix, FILE *f)
{
	struct q_lack l;
	if (q_lacks(db, p->pid, p->kind, p->t1, p->t2, &l))
		return -1;
	if (p->kinds && !(p->kinds & (1u << Q_KIND_MMAP)))
		l.what &= ~(unsigned)Q_LACK_UNMAPPED;
	if (p->kinds && !(p->kinds & (1u << Q_KIND_CUSTOM)))
		l.what &= ~(unsigned)Q_LACK_CUSTOM;
	write_lack(&l, prefix, f);
	return 0;
}
