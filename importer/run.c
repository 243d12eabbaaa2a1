/*
 * run.c - one whole import, without the command line: opens and indexes
 * every trace (pass 1, so that unusable input writes nothing), then creates
 * the database, symbolizes, replays (pass 2) and writes the processes,
 * threads, marks and meta rows. main.c is the CLI around it; the fuzz
 * target of tests/fuzz calls it directly.
 *
 * It never prints: failures come back as -1 with the message in imp_err,
 * and the output is then deleted (db.c writes a temporary file and renames
 * it only when everything is in), never left looking complete.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imp.h"

#define TIMELINE_BUCKETS 2000         /* timeline rows per process, at most ~ */
#define IMPORTER_VERSION "0.1.0"

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* NAME.trc, or NAME.trc.N: the recorder's name for a second trace of the
 * same REC_OUT (a forked child's, when REC_OUT has no %p). */
static bool is_trace_name(const char *name)
{
	const char *t = strstr(name, ".trc");

	while (t && t[4] && t[4] != '.')
		t = strstr(t + 1, ".trc");
	if (!t || t == name)
		return false;
	if (!t[4])
		return true;
	if (!t[5])
		return false;
	for (t += 5; *t; t++)
		if (*t < '0' || *t > '9')
			return false;
	return true;
}

/* DIR -> its traces (*.trc, *.trc.N), sorted. */
static int list_dir(const char *dir, char ***out, size_t *n, struct imp_err *e)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!d) {
		imp_errf(e, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char *p;

		if (!is_trace_name(de->d_name))
			continue;
		if (imp_grow(out, &cap, *n, sizeof **out) ||
		    !(p = malloc(strlen(dir) + l + 2))) {
			closedir(d);
			imp_errf(e, "%s: out of memory", dir);
			return -1;
		}
		sprintf(p, "%s/%s", dir, de->d_name);
		(*out)[(*n)++] = p;
	}
	closedir(d);
	if (!*n) {
		imp_errf(e, "%s: no trace (*.trc) in this directory", dir);
		return -1;
	}
	qsort(*out, *n, sizeof **out, by_name);
	return 0;
}

/* NAME.ring given with NAME (a shell glob such as run.trc* lists both): a
 * killed process's staging file, which is read with its trace. */
static bool ring_of_input(const char *path, char *const *inputs, size_t n)
{
	static const char suffix[] = ".ring";   /* ring.c's name for it */
	size_t l = strlen(path), k = l - (sizeof suffix - 1);

	if (l < sizeof suffix || strcmp(path + k, suffix))
		return false;
	for (size_t i = 0; i < n; i++)
		if (strlen(inputs[i]) == k && !strncmp(inputs[i], path, k))
			return true;
	return false;
}

static int check_input(const char *path, struct imp_err *e)
{
	struct stat sb;

	if (stat(path, &sb)) {
		imp_errf(e, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		imp_errf(e, "%s: not a regular file", path);
		return -1;
	}
	if (sb.st_size == 0) {
		imp_errf(e, "%s: byte 0: empty file, not a trace", path);
		return -1;
	}
	return 0;
}

static int write_threads(struct imp_db *db, const struct imp_trace *tr)
{
	for (size_t i = 0; i < tr->nstreams; i++) {
		const struct imp_stream *s = &tr->streams[i];
		uint64_t first = s->t_first, last = s->t_last, lost = s->lost;
		const char *name = NULL;
		size_t k;

		/* Several streams of one tid (reused ids): one row, the first. */
		for (k = 0; k < i; k++)
			if (tr->streams[k].tid == s->tid)
				break;
		if (k < i)
			continue;
		for (k = i + 1; k < tr->nstreams; k++) {
			const struct imp_stream *o = &tr->streams[k];

			if (o->tid == s->tid)
				lost += o->lost;
			if (o->tid != s->tid || o->t_first == IMP_NO_TIME)
				continue;
			if (first == IMP_NO_TIME || o->t_first < first)
				first = o->t_first;
			if (o->t_last > last)
				last = o->t_last;
		}
		for (k = 0; k < tr->nthreads; k++)
			if (tr->threads[k].tid == s->tid)
				name = tr->threads[k].name;
		if (imp_db_insert(db, "INSERT INTO threads(pid, tid, name, t_first, t_last, "
				  "lost_events) VALUES(?,?,?,?,?,?)",
				  first == IMP_NO_TIME ? "uutnnu" : "uutuuu",
				  (uint64_t)tr->pid, (uint64_t)s->tid, name,
				  first, last, lost))
			return -1;
	}
	/* Named threads that never allocated. */
	for (size_t k = 0; k < tr->nthreads; k++) {
		size_t i;

		for (i = 0; i < tr->nstreams; i++)
			if (tr->streams[i].tid == tr->threads[k].tid)
				break;
		if (i == tr->nstreams &&
		    imp_db_insert(db, "INSERT INTO threads(pid, tid, name, t_first, t_last) VALUES(?,?,?,?,?)",
				  "uutnn", (uint64_t)tr->pid,
				  (uint64_t)tr->threads[k].tid, tr->threads[k].name))
			return -1;
	}
	return 0;
}

/* The sampling period of a trace: the header's, unless the recorder set
 * one at run time before recording anything (trace-ctl record --sample),
 * which it notes as a mark TF_MARK_SAMPLE "N" (the last one counts; the
 * recorder refuses a change once allocations are recorded, so one period
 * holds for every event of a trace). */
static uint64_t sample_period(const struct imp_trace *tr)
{
	static const char prefix[] = TF_MARK_SAMPLE;
	uint64_t period = tr->hdr->sample_period;

	for (size_t i = 0; i < tr->nmarks; i++) {
		const char *l = tr->marks[i].label, *num = l + sizeof prefix - 1;
		char *end;

		if (strncmp(l, prefix, sizeof prefix - 1))
			continue;
		errno = 0;
		unsigned long long v = strtoull(num, &end, 10);
		if (!errno && !*end && end != num && *num != '-')
			period = v;
	}
	return period;
}

/* processes.inherited of forked child i, its parent's decided first: its
 * parent's live set at the fork is known when the parent's trace is here
 * (started before the child's, the fork inside it), replayed exactly at
 * the fork (not from a bounded trace's later window, not past a damaged
 * tail) and not itself missing what it inherited; and the child's own
 * replay starts at its start (a wrapped bounded child's keyframe knows
 * nothing of those blocks). */
static uint8_t inheritance(struct imp_trace *tr, size_t ntr, size_t i)
{
	struct imp_trace *c = &tr[i], *p;

	if (!c->forked || c->inherited != IMP_INHERIT_NONE)
		return c->inherited;
	c->inherited = IMP_INHERIT_UNKNOWN;
	if (c->parent == IMP_NO_TRACE || c->keyed)
		return c->inherited;
	p = &tr[c->parent];
	c->fork_at = c->fork_mono - p->hdr->t0_mono_ns + p->shift;
	if ((p->keyed && p->window + p->shift > c->fork_at) ||
	    (p->damaged && p->t_max + p->shift < c->fork_at) ||
	    (p->t_loss != IMP_NO_TIME && p->t_loss + p->shift <= c->fork_at) ||
	    inheritance(tr, ntr, c->parent) == IMP_INHERIT_UNKNOWN)
		return c->inherited;
	return c->inherited = IMP_INHERIT_SEEDED;
}

/* proc: the process's number in free_blocks (its trace's index); t0: the
 * common axis's CLOCK_MONOTONIC origin. */
static int write_process(struct imp_db *db, const struct imp_trace *tr,
			 const struct imp_proc_stats *ps, uint64_t proc, uint64_t t0)
{
	const struct tf_header *h = tr->hdr;
	uint64_t t_end = tr->t_detach != IMP_NO_TIME ? tr->t_detach + tr->shift :
			 tr->t_end != IMP_NO_TIME ? tr->t_end + tr->shift : ps->t_end;
	char *real = realpath(tr->path, NULL);
	int rc;

	/* a bounded trace starts where its replay is exact; a child that
	 * inherited its parent's heap, at the fork */
	uint64_t t_start = tr->keyed ? tr->window + tr->shift : tr->shift;
	if (tr->inherited == IMP_INHERIT_SEEDED)
		t_start = tr->fork_at;
	/* the fork on the common axis: before its start when the parent's
	 * trace is not here, and then possibly before 0 */
	int64_t fork_t = (int64_t)(tr->fork_mono - t0);

	if (ps->t_end > t_end)
		t_end = ps->t_end;
	rc = imp_db_insert(db, "INSERT INTO processes(pid, ppid, exe, cmdline, trace_path, t_start, "
			   "t_end, sample_period, peak_t, peak_bytes, peak_objects, lost_events, "
			   "recovered, proc, inherited, fork_t) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			   tr->forked ? "uutttuuuuuuuuuui" : "uutttuuuuuuuuuun",
			   (uint64_t)tr->pid, (uint64_t)h->ppid,
			   h->exe, h->cmdline, real ? real : tr->path, t_start,
			   t_end, sample_period(tr), ps->peak_t, ps->peak_bytes,
			   ps->peak_objects, tr->lost, tr->recovered, proc,
			   (uint64_t)tr->inherited, fork_t);
	free(real);
	/* what its answers may lack (trace axis + shift = common axis; -1:
	 * nothing); a loss from the trace's first instant is one from the
	 * process's start, which a seeded child's fork may precede */
	uint64_t t_loss = tr->t_loss + tr->shift;
	if (tr->t_loss == 0 && t_start < t_loss)
		t_loss = t_start;
	if (!rc)
		rc = imp_db_insert(db, "UPDATE processes SET t_loss = NULLIF(?, -1), damaged = ?, "
				   "t_damaged = NULLIF(?, -1), unknown_frees = ? WHERE pid = ?", "iuiuu",
				   tr->t_loss == IMP_NO_TIME ? (int64_t)-1 : (int64_t)t_loss,
				   (uint64_t)tr->damaged,
				   tr->damaged ? (int64_t)(tr->t_damaged + tr->shift) : (int64_t)-1,
				   ps->unknown_frees, (uint64_t)tr->pid);
	if (rc || write_threads(db, tr))
		return -1;
	for (size_t i = 0; i < tr->nmarks; i++)
		if (imp_db_insert(db, "INSERT INTO marks VALUES(?,?,?)", "uut",
				  (uint64_t)tr->pid, tr->marks[i].t + tr->shift,
				  tr->marks[i].label))
			return -1;
	for (size_t i = 0; i < tr->npools; i++)
		if (imp_db_insert(db, "INSERT OR REPLACE INTO pools VALUES(?,?,?)", "uut",
				  (uint64_t)tr->pid, (uint64_t)tr->pools[i].id, tr->pools[i].name))
			return -1;
	return 0;
}

struct meta_kv {
	const char *key;
	uint64_t value;
};

static int write_meta(struct imp_db *db, const struct imp_run *r)
{
	const struct imp_trace *tr = r->tr;
	const struct imp_proc_stats *ps = r->ps;
	const struct imp_totals *tot = &r->tot;
	const struct imp_replay_opts *o = &r->o;
	size_t first = r->first, run = r->main;
	uint64_t lost = 0, recovered = 0, window = 0;

	for (size_t i = 0; i < r->ntr; i++) {
		lost += tr[i].lost;
		recovered += tr[i].recovered;
		if (tr[i].keyed && tr[i].window + tr[i].shift > window)
			window = tr[i].window + tr[i].shift;
	}
	const struct meta_kv kv[] = {
		{ "schema_version", 4 },
		{ "free_block", IMP_FREE_BLOCK },
		{ "t0_mono_ns", tr[first].hdr->t0_mono_ns },
		{ "t0_real_ns", tr[first].hdr->t0_real_ns },
		{ "duration_ns", o->duration },
		{ "peak_t", ps[run].peak_t },
		{ "peak_bytes", ps[run].peak_bytes },
		{ "peak_objects", ps[run].peak_objects },
		{ "peak_pid", tr[run].pid },
		{ "events", tot->events },
		{ "allocations", tot->allocations },
		{ "frees", tot->frees },
		{ "unmatched_frees", tot->unmatched_frees },
		{ "missed_frees", tot->missed_frees },
		{ "inherited_blocks", tot->inherited },
		{ "inherited_frees", tot->inherited_frees },
		{ "frees_before_attach", tot->frees_before_attach },
		{ "lost_events", lost },
		{ "recovered_events", recovered },
		{ "clamped_times", tot->clamped },
		{ "damaged", r->damaged },
		{ "checkpoint_interval", o->ckpt_interval },
		{ "timeline_bucket_ns", o->bucket_ns },
		{ "window_start_ns", window },  /* bounded traces: exact from here on */
		{ "counter_values_unnamed", r->counters_unnamed },
	};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
		if (imp_db_meta(db, kv[i].key, (int64_t)kv[i].value))
			return -1;
	/* an attached run's program: the attach, on the common axis */
	if (tr[run].attach_t != IMP_NO_TIME &&
	    imp_db_meta(db, "attach_t", (int64_t)(tr[run].attach_t + tr[run].shift)))
		return -1;
	if (imp_db_insert(db, "INSERT OR REPLACE INTO meta VALUES(?,?)", "tt",
			  "format", "heapreel") ||
	    imp_db_insert(db, "INSERT OR REPLACE INTO meta VALUES(?,?)", "tt",
			  "importer_version", IMPORTER_VERSION))
		return -1;
	return 0;
}

int imp_run(struct imp_run *r, struct imp_err *e)
{
	struct imp_ids ids = {0};
	struct imp_db *db = NULL;
	struct imp_symcache *syms = NULL;
	char **inputs = r->inputs;
	size_t ninputs = r->ninputs;
	uint64_t t0 = UINT64_MAX, tmax = 0;
	struct imp_trace *tr;
	struct imp_replay_opts *o = &r->o;

	if (ninputs == 1) {
		struct stat sb;

		if (stat(inputs[0], &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (list_dir(inputs[0], &r->listed, &r->nlisted, e))
				return -1;
			inputs = r->listed;
			ninputs = r->nlisted;
		}
	}
	tr = r->tr = calloc(ninputs, sizeof *r->tr);
	r->ps = calloc(ninputs, sizeof *r->ps);
	if (!r->tr || !r->ps) {
		imp_errf(e, "out of memory");
		return -1;
	}

	/* Pass 1: every trace is opened and indexed before anything is
	 * written, so unusable input leaves no output at all. */
	for (size_t k = 0; k < ninputs; k++) {
		const char *path = inputs[k];

		if (ring_of_input(path, inputs, ninputs))
			continue;
		/* counted before it is opened: imp_run_free closes it either way */
		struct imp_trace *t = &tr[r->ntr++];

		if (check_input(path, e) || imp_trace_open(t, path, e))
			return -1;
		if (imp_trace_scan(t, e) || imp_ring_recover(t, e))
			return -1;
		if (t->hdr->t0_mono_ns < t0) {
			t0 = t->hdr->t0_mono_ns;
			r->first = r->ntr - 1;
		}
	}
	if (imp_trace_keys(tr, r->ntr, e) || imp_trace_parents(tr, r->ntr, e))
		return -1;
	r->main = imp_main_trace(tr, r->ntr, r->first);
	for (size_t i = 0; i < r->ntr; i++) {
		tr[i].shift = tr[i].hdr->t0_mono_ns - t0;
		if (tr[i].t_max + tr[i].shift > tmax)
			tmax = tr[i].t_max + tr[i].shift;
		o->total_events += tr[i].events;
		for (size_t k = 0; k < tr[i].nnodes; k++)
			r->nodes += tr[i].nodes[k].present;
	}
	for (size_t i = 0; i < r->ntr; i++)
		inheritance(tr, r->ntr, i);
	/* Without overflow, even for times near 2^64 (a damaged trace):
	 * bucket_ns 0 or tiny would mean a division by zero or 2^64 rows. */
	o->duration = tmax == UINT64_MAX ? tmax : tmax + 1;
	o->bucket_ns = o->duration / TIMELINE_BUCKETS +
		       (o->duration % TIMELINE_BUCKETS != 0);

	if (imp_db_create(&db, r->out, r->force, e))
		return -1;
	if (imp_symcache_new(&syms)) {
		imp_errf(e, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < r->ntr; i++)
		if (imp_symcache_add(syms, &tr[i])) {
			imp_errf(e, "out of memory");
			goto fail;
		}
	for (size_t i = 0; i < r->ntr; i++)
		if (imp_symbolize(db, syms, &tr[i], &ids, &r->sst, e))
			goto fail;
	imp_symcache_free(syms);
	syms = NULL;
	if (imp_replay(db, tr, r->ntr, o, r->ps, &r->tot, e))
		goto fail;
	for (size_t i = 0; i < r->ntr; i++) {
		if (write_process(db, &tr[i], &r->ps[i], i, t0) ||
		    imp_counters_write(db, &tr[i], &r->counters_unnamed))
			goto dbfail;
		r->damaged |= tr[i].damaged;
		r->nthreads += tr[i].nstreams;
	}
	if (write_meta(db, r))
		goto dbfail;
	if (imp_db_finish(db, e))
		goto fail;         /* imp_db_abort below deletes the file */
	return 0;
dbfail:
	imp_errf(e, "%s: sqlite: %s", r->out, imp_db_errmsg(db));
fail:
	imp_db_blame(db, e);   /* one line for every way it could not be written */
	imp_symcache_free(syms);
	imp_db_abort(db);
	return -1;
}

void imp_run_free(struct imp_run *r)
{
	for (size_t i = 0; i < r->ntr; i++)
		imp_trace_close(&r->tr[i]);
	for (size_t i = 0; i < r->nlisted; i++)
		free(r->listed[i]);
	free(r->listed);
	free(r->tr);
	free(r->ps);
}
