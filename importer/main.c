/*
 * main.c - trace-import's command line: loads one or more traces of a run
 * (parent and forked children) into one SQLite database.
 *
 *   trace-import [--force] [-q] TRACE... OUT.db
 *   trace-import [--force] [-q] DIR OUT.db   (every DIR/ *.trc, *.trc.N)
 *
 * Exit codes: 0 imported; 1 unusable input or output, nothing written;
 * 2 imported, but a trace had a damaged or truncated tail (everything
 * before the damage is in the database, meta.damaged=1); 64 usage error.
 *
 * This is the only file that prints. It must never leave OUT looking
 * complete after a failure (db.c writes a temporary file and renames it).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "imp.h"

#define EXIT_UNUSABLE 1
#define EXIT_DAMAGED 2
#define EXIT_USAGE 64
#define TIMELINE_BUCKETS 2000         /* timeline rows per process, at most ~ */
#define CKPT_INTERVAL_DEFAULT 50000   /* allocations between checkpoints, at least */
#define PROGRESS_MIN_NS 100000000ull  /* redraw the progress bar at most 10/s */
#define PROGRESS_WIDTH 30             /* characters of the bar */
#define IMPORTER_VERSION "0.1.0"

static const char usage_text[] =
	"usage: trace-import [options] TRACE... OUT.db\n"
	"       trace-import [options] DIR OUT.db\n"
	"Loads heapreel traces (and a killed process's leftover TRACE.ring) into\n"
	"one SQLite database: allocations paired with their frees, symbols,\n"
	"a timeline and checkpoints. DIR: every *.trc (and *.trc.N) in it.\n"
	"\n"
	"  -f, --force                   overwrite OUT.db if it exists\n"
	"  -q, --quiet                   no progress bar, no summary\n"
	"  -c, --checkpoint-interval=N   allocations between checkpoints\n"
	"                                (at least; default 50000)\n"
	"  -h, --help                    this text\n"
	"\n"
	"Exit status: 0 imported; 1 unusable input or output (nothing written);\n"
	"2 imported, but a trace was damaged or truncated (what precedes the\n"
	"damage is imported, meta.damaged=1); 64 usage error.\n";

struct progress {
	bool on;
	int phase;
	uint64_t t_start, t_last;         /* of the current phase; last redraw */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void progress(void *ctx, int phase, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	uint64_t t = now_ns();
	double frac, rate, eta;
	char bar[PROGRESS_WIDTH + 1];
	int i, fill;

	if (!p->on)
		return;
	if (phase != p->phase) {           /* rates are per phase */
		p->phase = phase;
		p->t_start = t;
	}
	if (t - p->t_last < PROGRESS_MIN_NS || t == p->t_start)
		return;
	p->t_last = t;
	frac = total ? (double)done / (double)total : 0;
	if (frac > 1)
		frac = 1;
	rate = (double)done / ((double)(t - p->t_start) / 1e9);
	eta = rate > 0 ? (double)(total - (done < total ? done : total)) / rate : 0;
	fill = (int)(frac * PROGRESS_WIDTH);
	for (i = 0; i < PROGRESS_WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[PROGRESS_WIDTH] = 0;
	fprintf(stderr, "\rtrace-import: %s [%s] %3.0f%% %6.2f M/s ETA %.0f s \033[K",
		phase == IMP_PHASE_MERGE ? "events     " : "allocations",
		bar, frac * 100, rate / 1e6, eta);
}

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
		uint64_t first = s->t_first, last = s->t_last;
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
		if (imp_db_insert(db, "INSERT INTO threads VALUES(?,?,?,?,?)",
				  first == IMP_NO_TIME ? "uutnn" : "uutuu",
				  (uint64_t)tr->hdr->pid, (uint64_t)s->tid, name,
				  first, last))
			return -1;
	}
	/* Named threads that never allocated. */
	for (size_t k = 0; k < tr->nthreads; k++) {
		size_t i;

		for (i = 0; i < tr->nstreams; i++)
			if (tr->streams[i].tid == tr->threads[k].tid)
				break;
		if (i == tr->nstreams &&
		    imp_db_insert(db, "INSERT INTO threads VALUES(?,?,?,?,?)",
				  "uutnn", (uint64_t)tr->hdr->pid,
				  (uint64_t)tr->threads[k].tid, tr->threads[k].name))
			return -1;
	}
	return 0;
}

static int write_process(struct imp_db *db, const struct imp_trace *tr,
			 const struct imp_proc_stats *ps)
{
	const struct tf_header *h = tr->hdr;
	uint64_t t_end = tr->t_end != IMP_NO_TIME ? tr->t_end + tr->shift : ps->t_end;
	char *real = realpath(tr->path, NULL);
	int rc;

	if (ps->t_end > t_end)
		t_end = ps->t_end;
	rc = imp_db_insert(db, "INSERT INTO processes VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
			   "uutttuuuuuuuu", (uint64_t)h->pid, (uint64_t)h->ppid,
			   h->exe, h->cmdline, real ? real : tr->path, tr->shift,
			   t_end, h->sample_period, ps->peak_t, ps->peak_bytes,
			   ps->peak_objects, tr->lost, tr->recovered);
	free(real);
	if (rc || write_threads(db, tr))
		return -1;
	for (size_t i = 0; i < tr->nmarks; i++)
		if (imp_db_insert(db, "INSERT INTO marks VALUES(?,?,?)", "uut",
				  (uint64_t)h->pid, tr->marks[i].t + tr->shift,
				  tr->marks[i].label))
			return -1;
	return 0;
}

struct meta_kv {
	const char *key;
	uint64_t value;
};

static int write_meta(struct imp_db *db, const struct imp_trace *tr, size_t ntr,
		      size_t first, const struct imp_proc_stats *ps,
		      const struct imp_totals *tot, const struct imp_replay_opts *o)
{
	uint64_t lost = 0, recovered = 0;
	bool damaged = false;

	for (size_t i = 0; i < ntr; i++) {
		lost += tr[i].lost;
		recovered += tr[i].recovered;
		damaged |= tr[i].damaged;
	}
	const struct meta_kv kv[] = {
		{ "schema_version", 1 },
		{ "t0_mono_ns", tr[first].hdr->t0_mono_ns },
		{ "t0_real_ns", tr[first].hdr->t0_real_ns },
		{ "duration_ns", o->duration },
		{ "peak_t", ps[first].peak_t },
		{ "peak_bytes", ps[first].peak_bytes },
		{ "peak_objects", ps[first].peak_objects },
		{ "peak_pid", tr[first].hdr->pid },
		{ "events", tot->events },
		{ "allocations", tot->allocations },
		{ "frees", tot->frees },
		{ "unmatched_frees", tot->unmatched_frees },
		{ "missed_frees", tot->missed_frees },
		{ "lost_events", lost },
		{ "recovered_events", recovered },
		{ "clamped_times", tot->clamped },
		{ "damaged", damaged },
		{ "checkpoint_interval", o->ckpt_interval },
		{ "timeline_bucket_ns", o->bucket_ns },
	};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
		if (imp_db_meta(db, kv[i].key, (int64_t)kv[i].value))
			return -1;
	if (imp_db_insert(db, "INSERT OR REPLACE INTO meta VALUES(?,?)", "tt",
			  "format", "heapreel") ||
	    imp_db_insert(db, "INSERT OR REPLACE INTO meta VALUES(?,?)", "tt",
			  "importer_version", IMPORTER_VERSION))
		return -1;
	return 0;
}

static void human_bytes(char *out, size_t n, uint64_t b)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	const int units = sizeof unit / sizeof unit[0];
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < units - 1) {  /* binary units */
		v /= 1024;
		u++;
	}
	snprintf(out, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "checkpoint-interval", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool force = false, quiet = false, damaged = false;
	uint64_t ckpt = CKPT_INTERVAL_DEFAULT;
	struct imp_trace *tr = NULL;
	struct imp_proc_stats *ps = NULL;
	struct imp_totals tot = {0};
	struct imp_symstats sst = {0};
	struct imp_ids ids = {0};
	struct imp_replay_opts o = {0};
	struct progress pg = {0};
	struct imp_db *db = NULL;
	struct imp_err e = {{0}};
	char **inputs, **listed = NULL;
	size_t ninputs, ntr = 0, first = 0, nlisted = 0;
	const char *out;
	uint64_t t0 = UINT64_MAX, tmax = 0, nodes = 0, nthreads = 0;
	uint64_t started = now_ns();
	int c, rc = EXIT_UNUSABLE;

	while ((c = getopt_long(argc, argv, "fqc:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			force = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'c': {
			char *end;

			errno = 0;
			ckpt = strtoull(optarg, &end, 10);
			if (errno || *end || !ckpt || optarg[0] == '-') {
				fprintf(stderr, "trace-import: --checkpoint-interval: "
					"not a positive number: %s\n", optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	out = argv[argc - 1];
	inputs = &argv[optind];
	ninputs = (size_t)(argc - 1 - optind);

	if (!force && access(out, F_OK) == 0) {
		fprintf(stderr, "trace-import: %s: exists (use --force to overwrite)\n",
			out);
		return EXIT_UNUSABLE;
	}
	if (ninputs == 1) {
		struct stat sb;

		if (stat(inputs[0], &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (list_dir(inputs[0], &listed, &nlisted, &e))
				goto fail;
			inputs = listed;
			ninputs = nlisted;
		}
	}
	tr = calloc(ninputs, sizeof *tr);
	ps = calloc(ninputs, sizeof *ps);
	if (!tr || !ps) {
		imp_errf(&e, "out of memory");
		goto fail;
	}

	/* Pass 1: every trace is opened and indexed before anything is
	 * written, so unusable input leaves no output at all. */
	for (ntr = 0; ntr < ninputs; ntr++) {
		struct imp_trace *t = &tr[ntr];

		if (check_input(inputs[ntr], &e) ||
		    imp_trace_open(t, inputs[ntr], &e)) {
			ntr++;
			goto fail;
		}
		for (size_t k = 0; k < ntr; k++)
			if (tr[k].hdr->pid == t->hdr->pid) {
				imp_errf(&e, "%s: pid %u was already imported from %s",
					 t->path, t->hdr->pid, tr[k].path);
				ntr++;
				goto fail;
			}
		if (imp_trace_scan(t, &e) || imp_ring_recover(t, &e)) {
			ntr++;
			goto fail;
		}
		if (t->hdr->t0_mono_ns < t0) {
			t0 = t->hdr->t0_mono_ns;
			first = ntr;
		}
	}
	for (size_t i = 0; i < ntr; i++) {
		tr[i].shift = tr[i].hdr->t0_mono_ns - t0;
		if (tr[i].t_max + tr[i].shift > tmax)
			tmax = tr[i].t_max + tr[i].shift;
		o.total_events += tr[i].events;
		for (size_t k = 0; k < tr[i].nnodes; k++)
			nodes += tr[i].nodes[k].present;
	}
	o.duration = tmax + 1;
	o.bucket_ns = (o.duration + TIMELINE_BUCKETS - 1) / TIMELINE_BUCKETS;
	o.ckpt_interval = ckpt;
	pg.on = !quiet && isatty(2);
	pg.t_start = pg.t_last = now_ns();
	o.progress = progress;
	o.progress_ctx = &pg;

	if (imp_db_create(&db, out, force, &e))
		goto fail;
	for (size_t i = 0; i < ntr; i++)
		if (imp_symbolize(db, &tr[i], &ids, &sst, &e))
			goto fail;
	if (imp_replay(db, tr, ntr, &o, ps, &tot, &e))
		goto fail;
	for (size_t i = 0; i < ntr; i++) {
		if (write_process(db, &tr[i], &ps[i]))
			goto dbfail;
		damaged |= tr[i].damaged;
		nthreads += tr[i].nstreams;
	}
	if (write_meta(db, tr, ntr, first, ps, &tot, &o))
		goto dbfail;
	if (imp_db_finish(db, &e))
		goto fail;         /* imp_db_abort below deletes the file */
	db = NULL;
	if (pg.on)
		fputs("\r\033[K", stderr);
	for (size_t i = 0; i < ntr; i++)
		if (tr[i].damaged)
			fprintf(stderr, "trace-import: %s; imported up to the "
				"damage (meta.damaged=1)\n", tr[i].damage);
	if (!quiet) {
		double secs = (double)(now_ns() - started) / 1e9;
		char peak[32];

		human_bytes(peak, sizeof peak, ps[first].peak_bytes);
		fprintf(stderr, "trace-import: %s: %" PRIu64 " events, %" PRIu64
			" allocations, %" PRIu64 " stack nodes, %" PRIu64
			" threads, %zu process%s, %.3f s recorded\n", out,
			tot.events, tot.allocations, nodes, nthreads, ntr,
			ntr == 1 ? "" : "es", (double)o.duration / 1e9);
		fprintf(stderr, "trace-import: peak %s (%" PRIu64 " bytes, %" PRIu64
			" objects) at %.6f s; %" PRIu64 " unmatched frees; "
			"imported in %.2f s (%.2f M events/s)\n", peak,
			ps[first].peak_bytes, ps[first].peak_objects,
			(double)ps[first].peak_t / 1e9, tot.unmatched_frees, secs,
			secs > 0 ? (double)tot.events / secs / 1e6 : 0.0);
		for (size_t i = 0; i < ntr; i++)
			if (tr[i].recovered || tr[i].lost)
				fprintf(stderr, "trace-import: %s: %" PRIu64
					" events recovered from %s.ring, %" PRIu64
					" lost\n", tr[i].path, tr[i].recovered,
					tr[i].path, tr[i].lost);
		if (sst.unresolved)
			fprintf(stderr, "trace-import: %" PRIu64 " of %" PRIu64
				" return addresses unresolved (named module+offset)%s\n",
				sst.unresolved, sst.ips, sst.mismatched ?
				"; some modules changed since recording (build id)" : "");
	}
	rc = damaged ? EXIT_DAMAGED : 0;
	goto done;
dbfail:
	imp_errf(&e, "%s: sqlite: %s", out, imp_db_errmsg(db));
fail:
	if (pg.on)
		fputs("\r\033[K", stderr);
	fprintf(stderr, "trace-import: %s\n", e.msg);
	rc = EXIT_UNUSABLE;
done:
	imp_db_abort(db);
	for (size_t i = 0; i < ntr; i++)
		imp_trace_close(&tr[i]);
	for (size_t i = 0; i < nlisted; i++)
		free(listed[i]);
	free(listed);
	free(tr);
	free(ps);
	return rc;
}
