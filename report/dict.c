/* dict.c - the one stack and frame dictionary the report's profiles share:
 * each profile names a stack by its index in dict.stacks, a stack is a
 * list of frame indexes, a frame names a function and a file by index.
 * Every list is sorted and unique, so an index is a binary search away and
 * the page carries each name once.
 *
 * Never: SQL here (frames come from q_stack); keep a pointer into a frame
 * past q_close (the strings are the db's).
 */
#include <stdlib.h>
#include <string.h>

#include "rep.h"

int rep_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* NULL (no file) sorts first. */
static int cmp_file(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

static int cmp_files(const void *a, const void *b)
{
	return cmp_file(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_frame(const void *a, const void *b)
{
	const struct rep_frame *x = a, *y = b;
	if (x->fn != y->fn)
		return (x->fn > y->fn) - (x->fn < y->fn);
	int c = cmp_file(x->file, y->file);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

size_t rep_sort_unique(void *base, size_t n, size_t sz, int (*cmp)(const void *, const void *))
{
	char *b = base;
	qsort(b, n, sz, cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (!u || cmp(b + (u - 1) * sz, b + i * sz))
			memmove(b + u++ * sz, b + i * sz, sz);
	return u;
}

static size_t count_rows(const struct rep_proc *rp)
{
	size_t n = rp->peak.n + rp->leaks.n + rp->temporary.n;
	for (size_t i = 0; i < rp->npoints; i++)
		n += rp->snaps[i].n;
	for (size_t i = 0; i < rp->nsteady; i++)
		n += rp->steady[i].p.n;
	return n;
}

static size_t put_stacks(int64_t *out, const struct q_profile *p)
{
	for (size_t i = 0; i < p->n; i++)
		out[i] = p->rows[i].stack_id;
	return p->n;
}

/* Every stack id any profile of r names, sorted, once. */
static int gather_stacks(struct rep_report *r)
{
	size_t n = 0;
	for (size_t k = 0; k < r->nprocs; k++)
		n += count_rows(&r->procs[k]);
	int64_t *s = malloc((n ? n : 1) * sizeof *s);
	if (!s)
		return -1;
	size_t m = 0;
	for (size_t k = 0; k < r->nprocs; k++) {
		const struct rep_proc *rp = &r->procs[k];
		m += put_stacks(s + m, &rp->peak);
		m += put_stacks(s + m, &rp->leaks);
		m += put_stacks(s + m, &rp->temporary);
		for (size_t i = 0; i < rp->npoints; i++)
			m += put_stacks(s + m, &rp->snaps[i]);
		for (size_t i = 0; i < rp->nsteady; i++)
			m += put_stacks(s + m, &rp->steady[i].p);
	}
	r->dict.stacks = s;
	r->dict.nstacks = rep_sort_unique(s, m, sizeof *s, rep_cmp_i64);
	return 0;
}

/* The frames of every stack, then their functions and files. */
static int gather_frames(struct q_db *db, struct rep_dict *d)
{
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct q_frame *f;
		size_t nf;
		if (q_stack(db, d->stacks[i], &f, &nf))
			return -1;
		if (n + nf > cap) {
			cap = 2 * (n + nf);
			struct rep_frame *v = realloc(d->frames, cap * sizeof *v);
			if (!v)
				return -1;
			d->frames = v;
		}
		for (size_t k = 0; k < nf; k++)
			d->frames[n++] = (struct rep_frame){ f[k].fn, f[k].file, f[k].line };
	}
	d->nframes = rep_sort_unique(d->frames, n, sizeof *d->frames, cmp_frame);
	d->fns = malloc((d->nframes ? d->nframes : 1) * sizeof *d->fns);
	d->files = malloc((d->nframes ? d->nframes : 1) * sizeof *d->files);
	if (!d->fns || !d->files)
		return -1;
	for (size_t i = 0; i < d->nframes; i++) {
		d->fns[i] = d->frames[i].fn;
		d->files[i] = d->frames[i].file;
	}
	d->nfns = rep_sort_unique(d->fns, d->nframes, sizeof *d->fns, cmp_int);
	d->nfiles = rep_sort_unique(d->files, d->nframes, sizeof *d->files, cmp_files);
	return 0;
}

int rep_dict_build(struct q_db *db, struct rep_report *r)
{
	return gather_stacks(r) || gather_frames(db, &r->dict) ? -1 : 0;
}

size_t rep_stack_index(const struct rep_dict *d, int64_t stack_id)
{
	const int64_t *hit = bsearch(&stack_id, d->stacks, d->nstacks, sizeof stack_id, rep_cmp_i64);
	return (size_t)(hit - d->stacks);
}

size_t rep_frame_index(const struct rep_dict *d, const struct q_frame *f)
{
	struct rep_frame key = { f->fn, f->file, f->line };
	const struct rep_frame *hit = bsearch(&key, d->frames, d->nframes, sizeof key, cmp_frame);
	return (size_t)(hit - d->frames);
}

size_t rep_fn_index(const struct rep_dict *d, int fn)
{
	const int *hit = bsearch(&fn, d->fns, d->nfns, sizeof fn, cmp_int);
	return (size_t)(hit - d->fns);
}

size_t rep_file_index(const struct rep_dict *d, const char *file)
{
	const char *const *hit = bsearch(&file, d->files, d->nfiles, sizeof file, cmp_files);
	return (size_t)(hit - d->files);
}
