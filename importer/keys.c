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
 */
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

int imp_trace_keys(struct imp_trace *tr, size_t ntr, struct imp_err *e)
{
	for (size_t i = 0; i < ntr; i++) {
		const struct tf_header *h = tr[i].hdr;
		uint64_t image = 0;

		for (size_t k = 0; k < ntr; k++)
			if (tr[k].hdr->pid == h->pid && started_before(tr, k, i))
				image++;
		uint64_t key = h->pid + image * IMP_IMAGE_STEP;
		if (key > UINT32_MAX) {
			imp_errf(e, "%s: too many traces of pid %u", tr[i].path, h->pid);
			return -1;
		}
		tr[i].pid = (uint32_t)key;
	}
	/* a header's pid is not trusted to stay below the step */
	for (size_t i = 0; i < ntr; i++)
		for (size_t k = 0; k < i; k++)
			if (tr[k].pid == tr[i].pid) {
				imp_errf(e, "%s: its process key %u clashes with %s's",
					 tr[i].path, tr[i].pid, tr[k].path);
				return -1;
			}
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
