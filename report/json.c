/* json.c - the report's data as one JSON object, the page's only input
 * (report/page/page.js reads it; the shape is documented there, at
 * "The data").
 *
 * Profiles are flat arrays of five numbers per stack (dictionary index,
 * live objects, live bytes, allocated objects, allocated bytes), unbiased
 * as trace-snap's text is (q_unbias), with the sentences of what the answer
 * lacks (q_lacks) beside them. A comparison of two runs (--base) is its own
 * object: both runs' facts and answers' descriptions, the differential call
 * tree and the table of functions by change.
 * Never: write a raw '<' (the JSON sits in a <script> element: "</script>"
 * in a mark's label or a path must not end it) or a control character.
 */
#include <inttypes.h>

#include "rep.h"

/* Room for one sentence of what an answer lacks (q_lack_text cuts it). */
#define LACK_LINE 512

static void put_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20 || *c == '<' || *c == 0x7f)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

static void put_key(FILE *f, const char *key)
{
	fprintf(f, ",\"%s\":", key);
}

static void put_i64(FILE *f, const char *key, int64_t v)
{
	put_key(f, key);
	if (v == Q_NEVER)
		fputs("null", f);
	else
		fprintf(f, "%" PRId64, v);
}

static int put_lacks(struct q_db *db, FILE *f, int64_t pid, enum q_kind kind, int64_t t1,
                     int64_t t2)
{
	struct q_lack l;
	char line[LACK_LINE];
	if (q_lacks(db, pid, kind, t1, t2, &l))
		return -1;
	fputs(",\"lacks\":[", f);
	for (int i = 0; q_lack_text(&l, i, line, sizeof line); i++) {
		if (i)
			fputc(',', f);
		put_str(f, line);
	}
	fputc(']', f);
	return 0;
}

static int put_profile(struct q_db *db, FILE *f, const struct rep_dict *d,
                       const struct q_profile *p)
{
	fputs("{\"rows\":[", f);
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		fprintf(f, "%s%zu,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64, i ? "," : "",
		        rep_stack_index(d, u.stack_id), u.v[Q_INUSE_OBJECTS], u.v[Q_INUSE_BYTES],
		        u.v[Q_ALLOC_OBJECTS], u.v[Q_ALLOC_BYTES]);
	}
	fputc(']', f);
	put_i64(f, "t1", p->t1);
	put_i64(f, "t2", p->t2);
	int rc = put_lacks(db, f, p->pid, p->kind, p->t1, p->t2);
	fputc('}', f);
	return rc;
}

static void put_facts(FILE *f, const struct rep_proc *rp)
{
	const struct q_process *p = rp->proc;
	int64_t allocs = 0, frees = 0;
	for (size_t i = 0; i < rp->nbuckets; i++) {
		allocs += rp->buckets[i].allocs;
		frees += rp->buckets[i].frees;
	}
	fprintf(f, "\"pid\":%" PRId64, p->pid);
	put_i64(f, "ppid", p->ppid);
	put_key(f, "exe");
	put_str(f, p->exe);
	put_key(f, "cmdline");
	put_str(f, p->cmdline);
	put_i64(f, "t_start", p->t_start);
	put_i64(f, "t_end", p->t_end);
	put_i64(f, "sample_period", p->sample_period);
	put_i64(f, "lost_events", p->lost_events);
	put_i64(f, "peak_t", p->peak_t);
	put_i64(f, "peak_bytes", p->peak_bytes);
	put_i64(f, "allocs", allocs);
	put_i64(f, "frees", frees);
	put_i64(f, "rss_peak_t", rp->rss_peak_t);
}

/* The timeline (bucket start, live bytes at its end, largest live bytes in
 * it), the RSS samples (instant, bytes) and the marks (instant, label). */
static void put_series(FILE *f, const struct rep_proc *rp)
{
	fputs(",\"timeline\":[", f);
	for (size_t i = 0; i < rp->nbuckets; i++)
		fprintf(f, "%s%" PRId64 ",%" PRId64 ",%" PRId64, i ? "," : "", rp->buckets[i].t,
		        rp->buckets[i].live_bytes, rp->buckets[i].max_bytes);
	fputs("],\"rss\":[", f);
	for (size_t i = 0; i < rp->nrss; i++)
		fprintf(f, "%s%" PRId64 ",%" PRId64, i ? "," : "", rp->rss[i].t, rp->rss[i].value);
	fputs("],\"marks\":[", f);
	for (size_t i = 0; i < rp->nmarks; i++) {
		fprintf(f, "%s[%" PRId64 ",", i ? "," : "", rp->marks[i].t);
		put_str(f, rp->marks[i].label);
		fputc(']', f);
	}
	fputc(']', f);
}

/* Live bytes of each kind at each point, {"heap": [...], "mmap": [...],
 * "custom": [...]}; null when the database holds heap only. */
static void put_kinds(FILE *f, const struct rep_proc *rp)
{
	if (!rp->has_kinds) {
		fputs("null", f);
		return;
	}
	for (unsigned k = 0; k < Q_NKINDS; k++) {
		fprintf(f, "%s\"%s\":[", k ? "," : "{", q_kind_name(k));
		for (size_t i = 0; i < rp->npoints; i++)
			fprintf(f, "%s%" PRId64, i ? "," : "", rp->kinds[i][k]);
		fputc(']', f);
	}
	fputc('}', f);
}

static int put_proc(struct q_db *db, FILE *f, const struct rep_dict *d, const struct rep_proc *rp)
{
	const struct q_process *p = rp->proc;
	fputc('{', f);
	put_facts(f, rp);
	put_series(f, rp);
	int rc = put_lacks(db, f, p->pid, Q_LEAKS, p->t_start, p->t_end);
	fputs(",\"points\":[", f);
	for (size_t i = 0; i < rp->npoints; i++)
		fprintf(f, "%s%" PRId64, i ? "," : "", rp->points[i]);
	fputs("],\"snaps\":[", f);
	for (size_t i = 0; !rc && i < rp->npoints; i++) {
		fputs(i ? "," : "", f);
		rc = put_profile(db, f, d, &rp->snaps[i]);
	}
	fputs("],\"kinds\":", f);
	put_kinds(f, rp);
	fputs(",\"grid\":[", f);
	for (size_t i = 0; i < rp->ngrid; i++)
		fprintf(f, "%s%zu", i ? "," : "", rp->grid[i]);
	fputs("],\"steady\":[", f);
	for (size_t i = 0; !rc && i < rp->nsteady; i++) {
		fputs(i ? "," : "", f);
		rc = put_profile(db, f, d, &rp->steady[i].p);
	}
	fputs("],\"peak\":", f);
	if (!rc)
		rc = put_profile(db, f, d, &rp->peak);
	fputs(",\"leaks\":", f);
	if (!rc)
		rc = put_profile(db, f, d, &rp->leaks);
	fputs(",\"temporary\":", f);
	if (!rc)
		rc = put_profile(db, f, d, &rp->temporary);
	fputc('}', f);
	return rc;
}

/* The stacks (frame indexes, leaf first), the frames (function index,
 * file index, line: three numbers each), the function and file names. */
static int put_dict(struct q_db *db, FILE *f, const struct rep_dict *d)
{
	fputs(",\"stacks\":[", f);
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct q_frame *fr;
		size_t n;
		if (q_stack(db, d->stacks[i], &fr, &n))
			return -1;
		fputs(i ? ",[" : "[", f);
		for (size_t k = 0; k < n; k++)
			fprintf(f, "%s%zu", k ? "," : "", rep_frame_index(d, &fr[k]));
		fputc(']', f);
	}
	fputs("],\"frames\":[", f);
	for (size_t i = 0; i < d->nframes; i++)
		fprintf(f, "%s%zu,%zu,%d", i ? "," : "", rep_fn_index(d, d->frames[i].fn),
		        rep_file_index(d, d->frames[i].file), d->frames[i].line);
	fputs("],\"fns\":[", f);
	for (size_t i = 0; i < d->nfns; i++) {
		fputs(i ? "," : "", f);
		put_str(f, q_fn_name(db, d->fns[i]));
	}
	fputs("],\"files\":[", f);
	for (size_t i = 0; i < d->nfiles; i++) {
		fputs(i ? "," : "", f);
		put_str(f, d->files[i]);
	}
	fputc(']', f);
	return 0;
}

int rep_write_json(struct q_db *db, const struct rep_report *r, FILE *f)
{
	const struct q_process *def = q_default_process(db);
	fputs("{\"db\":", f);
	put_str(f, r->db_path);
	put_i64(f, "default_pid", def ? def->pid : Q_NEVER);
	fputs(",\"procs\":[", f);
	int rc = 0;
	for (size_t i = 0; !rc && i < r->nprocs; i++) {
		fputs(i ? "," : "", f);
		rc = put_proc(db, f, &r->dict, &r->procs[i]);
	}
	fputc(']', f);
	if (!rc)
		rc = put_dict(db, f, &r->dict);
	fputs("}", f);
	return rc;
}

/* ---- the comparison of two runs (--base) ------------------------------------ */

/* The question of a comparison, as the page names it (enum q_kind). */
static const char *const question_names[] = {
	[Q_SNAPSHOT] = "at", [Q_PEAK] = "peak", [Q_GROWTH] = "growth", [Q_STEADY] = "steady",
	[Q_LEAKS] = "leaks", [Q_TEMPORARY] = "temporary", [Q_TOP] = "top",
};

/* One run's side: its facts, the question and its instants, the stacks
 * that shrank (a growth: not in the tree's widths) and their sum, what its
 * answer lacks. */
static int put_run(FILE *f, const struct rep_run *r)
{
	int64_t stacks, sum;
	q_folded_dropped(&r->p, REP_DIFF_KEY, &stacks, &sum);
	fputc('{', f);
	put_facts(f, &r->facts);
	put_key(f, "db");
	put_str(f, r->db_path);
	put_key(f, "question");
	put_str(f, question_names[r->p.kind]);
	put_i64(f, "t1", r->p.t1);
	put_i64(f, "t2", r->p.t2);
	fprintf(f, ",\"shrank\":[%" PRId64 ",%" PRId64 "]", stacks, sum);
	int rc = put_lacks(r->db, f, r->p.pid, r->p.kind, r->p.t1, r->p.t2);
	fputc('}', f);
	return rc;
}

/* The call tree by name, a node after its parent: per node its parent's
 * index (-1: the root), its name, then live bytes and objects in the base
 * and in the new run (unbiased). */
static void put_tree(FILE *f, const struct q_flame *t)
{
	fputs(",\"tree\":[", f);
	for (size_t i = 0; i < t->n; i++) {
		const struct q_fnode *x = &t->nodes[i];
		fprintf(f, "%s[%d,", i ? "," : "", x->parent);
		put_str(f, x->name);
		fprintf(f, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]",
		        x->total[Q_SIDE_BASE][Q_INUSE_BYTES], x->total[Q_SIDE_BASE][Q_INUSE_OBJECTS],
		        x->total[Q_SIDE_NEW][Q_INUSE_BYTES], x->total[Q_SIDE_NEW][Q_INUSE_OBJECTS]);
	}
	fputc(']', f);
}

/* Per function, by the size of its change: name, flat in the base, flat
 * in the new run, cum in the base, cum in the new run (live bytes). */
static void put_functions(FILE *f, const struct q_diff_table *t)
{
	fputs(",\"functions\":[", f);
	for (size_t i = 0; i < t->n; i++) {
		const struct q_diff_fn *r = &t->rows[i];
		fputs(i ? ",[" : "[", f);
		put_str(f, r->name);
		fprintf(f, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", r->flat[Q_SIDE_BASE],
		        r->flat[Q_SIDE_NEW], r->cum[Q_SIDE_BASE], r->cum[Q_SIDE_NEW]);
	}
	fputc(']', f);
}

int rep_write_diff_json(const struct rep_diff *d, FILE *f)
{
	const struct rep_run *n = &d->run[Q_SIDE_NEW];
	fputs("{\"db\":", f);
	put_str(f, n->db_path);
	fputs(",\"procs\":[],\"diff\":{\"runs\":[", f);
	int rc = put_run(f, &d->run[Q_SIDE_BASE]);
	fputc(',', f);
	rc = rc ? rc : put_run(f, n);
	fprintf(f, "],\"total\":[%" PRId64 ",%" PRId64 "],\"base_only\":[%" PRId64 ",%" PRId64 "]",
	        d->total[Q_SIDE_BASE], d->total[Q_SIDE_NEW], d->base_only_paths,
	        d->base_only_bytes);
	put_tree(f, &d->tree);
	put_functions(f, &d->fns);
	fputs("}}", f);
	return rc;
}
