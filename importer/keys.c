/*
 * keys.c - the pid each trace's process gets in the database.
 *
 * Every table keys its rows by processes.pid. One process can leave several
 * traces: a program it exec'd records its own (NAME.trc.1 beside NAME.trc,
 * same pid), and a pid can come round again in a long run. Each trace is
 * its own process in the database (its own exe, modules and heap: an exec
 * replaces the address space), so the first trace of a pid (by start time)
 * keeps the pid and the n-th later one gets pid + n * IMP_IMAGE_STEP. The
 * step is above Linux's largest pid (2^22) and a power of ten, so such a
 * key is never a real pid and reads as "image n of pid P".
 *
 * The run's program (imp_main_trace) is the last image of the first
 * process: what a wrapper script or a shim exec'd is what the user ran.
 * A forked child's parent trace (imp_trace_parents) is found by its
 * parent's pid and start. Both go through the traces sorted by pid and
 * start, never by comparing every pair: a run can leave thousands.
 */
#include <stdlib.h>

#include "imp.h"

/* 10^7: above PID_MAX_LIMIT (4194304); keys stay below 2^32 up to image 428. */
#define IMP_IMAGE_STEP 10000000u

/* The order of a pid's images: trace k started before trace i (an earlier
 * start, or the same one and listed first). */
static bool started_before(const struct imp_trace *tr, size_t k, size_t i)
{
	uint64_t tk = tr[k].hdr->t0_mono_ns, ti = tr[i].hdr->t0_mono_ns;

	return tk < ti || (tk == ti && k < i);
}

/* One trace in a sorted index: by a, then b, then its index i. */
struct ix {
	uint64_t a, b;
	size_t i;
};

static int ix_cmp(const void *pa, const void *pb)
{
	const struct ix *x = pa, *y = pb;

	if (x->a != y->a)
		return x->a < y->a ? -1 : 1;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The traces by (header pid, start): a pid's images in started_before
 * order, one after the other. NULL on ENOMEM. */
static struct ix *by_pid_start(const struct imp_trace *tr, size_t ntr)
{
	struct ix *o = malloc((ntr ? ntr : 1) * sizeof *o);

	if (!o)
		return NULL;
	for (size_t i = 0; i < ntr; i++)
		o[i] = (struct ix){ tr[i].hdr->pid, tr[i].hdr->t0_mono_ns, i };
	qsort(o, ntr, sizeof *o, ix_cmp);
	return o;
}

/* Two traces given one key: the first in trace order that repeats an
 * earlier trace's key, and that earlier one (-1 if none; 0 if they all
 * differ). */
static int clash(struct imp_trace *tr, size_t ntr, struct ix *o,
		 struct imp_err *e)
{
	size_t best = SIZE_MAX, with = 0;

	for (size_t i = 0; i < ntr; i++)
		o[i] = (struct ix){ tr[i].pid, 0, i };
	qsort(o, ntr, sizeof *o, ix_cmp);
	/* in a run of equal keys, the second repeats the first */
	for (size_t j = 1; j < ntr; j++)
		if (o[j].a == o[j - 1].a && (j == 1 || o[j - 2].a != o[j].a) &&
		    o[j].i < best) {
			best = o[j].i;
			with = o[j - 1].i;
		}
	if (best == SIZE_MAX)
		return 0;
	imp_errf(e, "%s: its process key %u clashes with %s's",
		 tr[best].path, tr[best].pid, tr[with].path);
	return -1;
}

int imp_trace_keys(struct imp_trace *tr, size_t ntr, struct imp_err *e)
{
	struct ix *o = by_pid_start(tr, ntr);
	size_t first = 0, bad = SIZE_MAX;
	int rc;

	if (!o) {
		imp_errf(e, "out of memory");
		return -1;
	}
	for (size_t j = 0; j < ntr; j++) {
		if (o[j].a != o[first].a)
			first = j;
		/* j - first: how many of its pid's traces started before it */
		uint64_t key = o[j].a + (j - first) * (uint64_t)IMP_IMAGE_STEP;

		if (key > UINT32_MAX && o[j].i < bad)
			bad = o[j].i;      /* reported in trace order */
		tr[o[j].i].pid = (uint32_t)key;
	}
	if (bad != SIZE_MAX) {
		imp_errf(e, "%s: too many traces of pid %u", tr[bad].path, tr[bad].hdr->pid);
		rc = -1;
	} else {
		/* a header's pid is not trusted to stay below the step */
		rc = clash(tr, ntr, o, e);
	}
	free(o);
	return rc;
}

/* A forked child's parent: the trace of pid fork_ppid that started at
 * fork_parent_t0 (the last listed, if several), strictly before the fork,
 * which precedes the child's start: no cycle, and the seeding precedes
 * the child's events. */
int imp_trace_parents(struct imp_trace *tr, size_t ntr, struct imp_err *e)
{
	struct ix *o = by_pid_start(tr, ntr);

	if (!o) {
		imp_errf(e, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < ntr; i++) {
		struct imp_trace *c = &tr[i];
		size_t lo = 0, hi = ntr;
		/* past every trace of that pid and start */
		struct ix want = { c->fork_ppid, c->fork_parent_t0, SIZE_MAX };

		c->parent = IMP_NO_TRACE;
		if (!c->forked || c->fork_parent_t0 > c->fork_mono ||
		    c->fork_mono >= c->hdr->t0_mono_ns)
			continue;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (ix_cmp(&o[mid], &want) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo > 0 && o[lo - 1].a == want.a && o[lo - 1].b == want.b)
			c->parent = o[lo - 1].i;
	}
	free(o);
	return 0;
}

/* An exec keeps the pid and the parent, so the images of the first
 * process are the traces of its pid and ppid; the last started one (in
 * the order of its images) is the program it ran last. */
size_t imp_main_trace(const struct imp_trace *tr, size_t ntr, size_t first)
{
	const struct tf_header *f = tr[first].hdr;
	size_t last = first;

	for (size_t i = 0; i < ntr; i++)
		if (tr[i].hdr->pid == f->pid && tr[i].hdr->ppid == f->ppid &&
		    started_before(tr, last, i))
			last = i;
	return last;
}
