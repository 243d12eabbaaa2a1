/* lacks.c - what an answer lacks: the loss, the damage, the stopped spans,
 * the unknown inheritance, the custom blocks a sampled or bounded trace
 * does not hold of a process, and the heap from before an attach
 * (importer/schema.sql, schema version 4, and the heapreel.stop /
 * heapreel.start / heapreel.custom-unrecorded / heapreel.attach marks), told as
 * sentences that trace-snap prints and writes, and that trace-tui's status
 * line shortens. README "trace-snap" says what each means.
 *
 * Never: call an answer whole when a column or a mark says otherwise, or
 * read the database per call (the marks are cached by q_marks).
 */
#include <inttypes.h>
#include <string.h>

#include "qi.h"
#include "trace_format.h"   /* TF_MARK_RESERVED only */

#define MARK_STOP TF_MARK_RESERVED "stop"
#define MARK_START TF_MARK_RESERVED "start"

int q_stopped(struct q_db *db, int64_t pid, const struct q_span **out, size_t *n)
{
	long i = q_proc_index(db, pid);
	const struct q_mark *m;
	size_t nm, cap = 0;
	if (i < 0 || q_marks(db, pid, &m, &nm))
		return -1;
	struct q_pdata *pd = &db->pd[i];
	for (size_t k = 0; k < nm && !pd->stopped_loaded; k++) {
		bool open = pd->nstopped && pd->stopped[pd->nstopped - 1].t2 == Q_NEVER;
		if (!open && !strcmp(m[k].label, MARK_STOP)) {
			if (q_grow(&pd->stopped, &cap, pd->nstopped + 1, sizeof *pd->stopped)) {
				pd->nstopped = 0;          /* the next call starts over */
				return q_fail(db, "%s: out of memory", db->path);
			}
			pd->stopped[pd->nstopped++] = (struct q_span){ m[k].t, Q_NEVER };
		} else if (open && !strcmp(m[k].label, MARK_START)) {
			pd->stopped[pd->nstopped - 1].t2 = m[k].t;
		}
	}
	pd->stopped_loaded = true;
	*out = pd->stopped;
	*n = pd->nstopped;
	return 0;
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
	const struct q_span *s;
	size_t n;
	if (q_stopped(db, pid, &s, &n))
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
	for (size_t k = 0; k < n && !(l->what & Q_LACK_STOPPED); k++) {
		if (s[k].t1 <= t2 && s[k].t2 > t1) {   /* [stop, start) meets [t1, t2] */
			l->what |= Q_LACK_STOPPED;
			l->stopped = s[k];
		}
	}
	/* Inherited blocks were allocated before the process: only live sets
	 * hold them, never an allocation count. */
	bool live_set = kind == Q_SNAPSHOT || kind == Q_PEAK || kind == Q_GROWTH || kind == Q_LEAKS;
	if (p->inherited == Q_INHERITED_UNKNOWN && live_set)
		l->what |= Q_LACK_INHERITED;
	if (t_attach != Q_NEVER && live_set) {
		l->what |= Q_LACK_ATTACHED;
		l->t_attach = t_attach;
	}
	return 0;
}

/* Sentence about one bit of l->what. */
static void say(const struct q_lack *l, unsigned bit, char *buf, size_t n)
{
	const struct q_process *p = l->proc;
	long long pid = (long long)p->pid;
	char a[40], b[40];
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
		q_fmt_ns(a, sizeof a, l->stopped.t1);
		if (l->stopped.t2 == Q_NEVER)
			snprintf(b, sizeof b, "its end");
		else
			q_fmt_ns(b, sizeof b, l->stopped.t2);
		snprintf(buf, n, "recording of process %lld was stopped from %s to %s: blocks "
		         "allocated then are in no answer", pid, a, b);
		if (p->unknown_frees > 0) {          /* how many such blocks, at least */
			size_t len = strlen(buf);
			snprintf(buf + len, n - len, " (%" PRId64 " frees of blocks it never saw "
			         "allocated)", p->unknown_frees);
		}
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
