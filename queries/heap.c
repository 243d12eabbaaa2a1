/* heap.c - the gperftools heap profile text format (.heap), read by
 * google-pprof, jeprof and Go pprof (see heap-formats.md §1 and §6).
 *
 * Header `@ heapprofile` when every allocation was recorded, `@ heap_v2/P`
 * with raw sampled numbers when the process was sampled every P bytes (the
 * readers unbias). One line per stack, leaf first, addresses in lowercase
 * hex, one per real frame (an inlined chain shares one ip): the callers'
 * raw return addresses, the leaf's minus one (see leaf_address). Then
 * MAPPED_LIBRARIES rebuilt from the module records.
 *
 * Go pprof derives its sample types from the header (§1.2, §6.6): when the
 * alloc pair equals the inuse pair (a snapshot before any free; --top and
 * --temporary, which put their allocation counts in both pairs so that
 * every reader's default view shows them) Go shows two types, objects and
 * space, instead of four, and its -base cannot mix the two kinds. The
 * numbers are never altered to avoid this; the .pb.gz output always has
 * the four types.
 *
 * Never: write a count of 0 with non-zero bytes or a negative pair (Go
 * rejects the file, Perl drops the line silently), an empty stack, or
 * anything but sample lines before MAPPED_LIBRARIES.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>

#include "qi.h"

/* A pair that says a stack shrank: no reader accepts it. */
static bool negative_pair(int64_t n, int64_t b)
{
	return b < 0 || (b == 0 && n < 0);
}

/* A pair the readers accept: negative growth is cut to 0 (as pprof's
 * --drop_negative), and bytes without a count (a stack whose objects were
 * replaced by larger ones in a growth window) get a count of 1. */
static void fix_pair(int64_t *n, int64_t *b)
{
	if (negative_pair(*n, *b)) {
		*n = *b = 0;
	} else if (*n <= 0 && *b > 0) {
		*n = 1;
	} else if (*n < 0) {
		*n = 0;
	}
}

/* Every frame is a return address: the instruction after the call, which
 * at -O2 may belong to the next statement. The readers move callers back
 * into the call themselves (google-pprof and jeprof subtract 1 from every
 * frame but the leaf, Go pprof from every frame: heap-formats.md §1.4), so
 * those stay raw, or they would land before the call. The Perl tools look
 * the leaf up as is, so google-pprof and jeprof showed the statement after
 * the allocating call; written minus one, it is the call for them, and
 * minus two for Go pprof, still inside the call (a call instruction is at
 * least 2 bytes on x86-64, 4 on arm64). */
static uint64_t leaf_address(uint64_t ip)
{
	return ip - 1;
}

void q_heap_dropped(const struct q_profile *p, int64_t *stacks, int64_t *bytes)
{
	*stacks = *bytes = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row r;
		q_unbias(&p->rows[i], p->sample_period, &r);
		if (negative_pair(r.v[Q_INUSE_OBJECTS], r.v[Q_INUSE_BYTES])) {
			++*stacks;
			*bytes -= r.v[Q_INUSE_BYTES];
		}
	}
}

static int cmp_rows(const void *a, const void *b)
{
	const struct q_row *x = *(const struct q_row *const *)a, *y = *(const struct q_row *const *)b;
	static const int order[] = { Q_INUSE_BYTES, Q_ALLOC_BYTES, Q_INUSE_OBJECTS, Q_ALLOC_OBJECTS };
	for (size_t i = 0; i < sizeof order / sizeof *order; i++)
		if (x->v[order[i]] != y->v[order[i]])
			return x->v[order[i]] > y->v[order[i]] ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

const struct q_row **q_sorted_rows(struct q_db *db, const struct q_profile *p)
{
	const struct q_row **r = malloc((p->n + 1) * sizeof *r);
	if (!r) {
		q_fail(db, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < p->n; i++)
		r[i] = &p->rows[i];
	qsort(r, p->n, sizeof *r, cmp_rows);
	return r;
}

int q_write_heap(struct q_db *db, const struct q_profile *p, FILE *f)
{
	long pi = q_proc_index(db, p->pid);
	if (pi < 0)
		return -1;
	const struct q_row **rows = q_sorted_rows(db, p);
	struct q_row *fixed = malloc((p->n + 1) * sizeof *fixed);
	if (!rows || !fixed) {
		free(rows);
		free(fixed);
		return q_fail(db, "out of memory");
	}
	/* First pass: the lines as written, for the header's sums. */
	int64_t tot[Q_NVAL] = { 0 };
	size_t nfixed = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct q_frame *fr;
		size_t nf;
		if (q_stack(db, rows[i]->stack_id, &fr, &nf)) {
			free(rows);
			free(fixed);
			return -1;
		}
		struct q_row r = *rows[i];
		fix_pair(&r.v[Q_INUSE_OBJECTS], &r.v[Q_INUSE_BYTES]);
		fix_pair(&r.v[Q_ALLOC_OBJECTS], &r.v[Q_ALLOC_BYTES]);
		if (!nf || !(r.v[0] | r.v[1] | r.v[2] | r.v[3]))
			continue;                      /* no stack: no reader keeps it */
		fixed[nfixed++] = r;
		for (int k = 0; k < Q_NVAL; k++)
			tot[k] += r.v[k];
	}
	free(rows);
	char type[48] = "heapprofile";
	if (p->sample_period > 0)
		snprintf(type, sizeof type, "heap_v2/%" PRId64, p->sample_period);
	fprintf(f, "heap profile: %6" PRId64 ": %8" PRId64 " [%6" PRId64 ": %8" PRId64 "] @ %s\n",
	        tot[Q_INUSE_OBJECTS], tot[Q_INUSE_BYTES], tot[Q_ALLOC_OBJECTS],
	        tot[Q_ALLOC_BYTES], type);
	for (size_t i = 0; i < nfixed; i++) {
		const struct q_row *r = &fixed[i];
		const struct q_frame *fr;
		size_t nf;
		q_stack(db, r->stack_id, &fr, &nf);          /* cached above */
		fprintf(f, "%6" PRId64 ": %8" PRId64 " [%6" PRId64 ": %8" PRId64 "] @",
		        r->v[Q_INUSE_OBJECTS], r->v[Q_INUSE_BYTES], r->v[Q_ALLOC_OBJECTS],
		        r->v[Q_ALLOC_BYTES]);
		for (size_t j = 0; j < nf; j = q_group_end(fr, nf, j))
			fprintf(f, " 0x%" PRIx64, j ? fr[j].ip : leaf_address(fr[j].ip));
		fputc('\n', f);
	}
	free(fixed);
	struct q_module *m;
	size_t nm;
	if (q_modules(db, p->pid, &m, &nm))
		return -1;
	fputs("\nMAPPED_LIBRARIES:\n", f);
	for (size_t i = 0; i < nm; i++)
		fprintf(f, "%" PRIx64 "-%" PRIx64 " %s %08" PRIx64 " 00:00 0 %s\n",
		        (uint64_t)m[i].start, (uint64_t)m[i].end, m[i].perms,
		        (uint64_t)m[i].offset, m[i].path);
	q_modules_free(m, nm);
	return 0;
}
