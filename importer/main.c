/*
 * main.c - trace-import's command line: loads one or more traces of a run
 * (parent and forked children) into one SQLite database.
 *
 *   trace-import [--force] [-q] TRACE... OUT.db
 *   trace-import [--force] [-q] DIR OUT.db   (every DIR/ *.trc, *.trc.N)
 *
 * Exit codes (README "Exit codes", the same for every tool): 0 imported;
 * 1 unusable input, nothing written; 2 usage error; 3 output not writable
 * (it exists and --force was not given, it is one of the inputs, it is not
 * a heapreel database, its directory is not writable, the disk is full, a
 * file size limit or an I/O error stopped the writing); 5 imported, but a
 * trace had a damaged or truncated tail (everything before the damage is in
 * the database, meta.damaged=1).
 *
 * Must never: replace anything but a heapreel database, nor one of its own
 * inputs, even with --force (a forgotten OUT.db makes the last trace the
 * output). This is the only file that prints; the import itself is imp_run
 * (run.c).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "imp.h"

#define EXIT_UNUSABLE 1
#define EXIT_USAGE 2
#define EXIT_UNWRITABLE 3
#define EXIT_DAMAGED 5
#define CKPT_INTERVAL_DEFAULT 50000   /* allocations between checkpoints, at least */
#define PROGRESS_MIN_NS 100000000ull  /* redraw the progress bar at most 10/s */
#define PROGRESS_WIDTH 30             /* characters of the bar */

static const char usage_text[] =
	"usage: trace-import [options] TRACE... OUT.db\n"
	"       trace-import [options] DIR OUT.db\n"
	"Loads heapreel traces (and a killed process's leftover TRACE.ring) into\n"
	"one SQLite database: allocations paired with their frees, symbols,\n"
	"a timeline and checkpoints. DIR: every *.trc (and *.trc.N) in it.\n"
	"\n"
	"  -f, --force                   replace OUT.db if it is a heapreel database\n"
	"                                (never a trace, another file or an input)\n"
	"  -q, --quiet                   no progress bar, no summary\n"
	"  -c, --checkpoint-interval=N   allocations between checkpoints\n"
	"                                (at least; default 50000)\n"
	"  -h, --help                    this text\n"
	"\n"
	"Exit status: 0 imported; 1 unusable input (nothing written); 2 usage\n"
	"error; 3 output not writable (exists without --force, one of the inputs,\n"
	"not a heapreel database, directory not writable, disk full, file size\n"
	"limit, I/O error); 5 imported, but a trace was damaged or truncated\n"
	"(what precedes the damage is imported, meta.damaged=1).\n";

/* Pass 1 keeps every trace open until the import ends, and the symbol
 * cache each module file: a run of thousands of processes needs more file
 * descriptors than the usual soft limit (1024). The hard limit is ours to
 * take; if even that is too low, opening a trace fails with one line. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* A usage error: one line saying what is wrong, where to read more. */
__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("trace-import: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see trace-import --help)\n", stderr);
	return EXIT_USAGE;
}

struct progress {
	bool on;
	uint64_t t_start, t_last;         /* 0 until the first call; last redraw */
};

/* The recorder names the trace of a program TRACE's process exec'd (and of
 * a child it forked, when REC_OUT has no %p) TRACE.1, TRACE.2, ...: a
 * trace given alone with TRACE.1 beside it is likely one part of its run. */
static void hint_siblings(char *const *inputs, size_t n)
{
	char sib[PATH_MAX];
	struct stat sb;

	if (n != 1 || stat(inputs[0], &sb) || !S_ISREG(sb.st_mode) ||
	    snprintf(sib, sizeof sib, "%s.1", inputs[0]) >= (int)sizeof sib ||
	    stat(sib, &sb) || !S_ISREG(sb.st_mode))
		return;
	fprintf(stderr, "trace-import: %s is beside %s: likely the trace of a program it "
		"exec'd or a process it forked (trace-import %s* DB imports them together)\n",
		sib, inputs[0], inputs[0]);
}

/* Is path a database trace-import wrote (meta.format 'heapreel')? SQLite is
 * shut down again after: db.c configures it, which only works before it
 * initializes. */
static bool is_heapreel_db(const char *path)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	bool yes = false;

	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW,
			    NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, "SELECT 1 FROM meta WHERE key = 'format' AND "
			       "value = 'heapreel'", -1, &st, NULL) == SQLITE_OK)
		yes = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	sqlite3_close(h);
	sqlite3_shutdown();
	return yes;
}

/* The output imp_run may create or replace: 0, or EXIT_UNWRITABLE after one
 * line saying why not. An existing one is replaced only with --force and
 * only if it is a heapreel database that is not one of the inputs (the
 * forgotten-OUT.db mistake makes the last trace the output). */
static int check_output(const struct imp_run *r)
{
	struct stat out, in;
	char dir[PATH_MAX];

	if (lstat(r->out, &out) == 0) {
		for (size_t i = 0; i < r->ninputs; i++)
			if (stat(r->inputs[i], &in) == 0 && in.st_dev == out.st_dev &&
			    in.st_ino == out.st_ino) {
				fprintf(stderr, "trace-import: %s: is one of the inputs; not "
					"replacing it (the database comes last: trace-import "
					"TRACE... OUT.db)\n", r->out);
				return EXIT_UNWRITABLE;
			}
		if (!r->force) {
			fprintf(stderr, "trace-import: %s: exists (--force replaces a "
				"heapreel database)\n", r->out);
			return EXIT_UNWRITABLE;
		}
		if (!S_ISREG(out.st_mode) || !is_heapreel_db(r->out)) {
			fprintf(stderr, "trace-import: %s: exists and is not a heapreel "
				"database; not replacing it, even with --force\n", r->out);
			return EXIT_UNWRITABLE;
		}
	}
	snprintf(dir, sizeof dir, "%s", r->out);
	if (access(dirname(dir), W_OK | X_OK) != 0) {
		fprintf(stderr, "trace-import: %s: cannot create it in %s: %s\n",
			r->out, dir, strerror(errno));
		return EXIT_UNWRITABLE;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	uint64_t t = now_ns();
	double frac, rate, eta;
	char bar[PROGRESS_WIDTH + 1];
	int i, fill;

	if (!p->on)
		return;
	if (!p->t_start)
		p->t_start = t;
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
	fprintf(stderr, "\rtrace-import: events [%s] %3.0f%% %6.2f M/s ETA %.0f s \033[K",
		bar, frac * 100, rate / 1e6, eta);
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
	bool quiet = false;
	struct imp_run r = { .o.ckpt_interval = CKPT_INTERVAL_DEFAULT };
	struct progress pg = {0};
	struct imp_err e = { .msg = "" };
	uint64_t started = now_ns();
	int c, rc = EXIT_UNUSABLE;

	opterr = 0;                       /* usage errors: one line of ours */
	while ((c = getopt_long(argc, argv, ":fqc:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			r.force = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'c': {
			char *end;

			errno = 0;
			r.o.ckpt_interval = strtoull(optarg, &end, 10);
			if (errno || *end || !r.o.ckpt_interval || optarg[0] == '-') {
				fprintf(stderr, "trace-import: --checkpoint-interval: "
					"not a positive number: %s\n", optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case ':':      /* it was the last argument */
			return usage_error("option %s needs a value", argv[optind - 1]);
		default:       /* a short option's letter, or a whole long one */
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind < 2)
		return usage_error("%s", argc == optind ? "no trace and no database given" :
				   "give the traces (or their directory), then the database");
	r.out = argv[argc - 1];
	r.inputs = &argv[optind];
	r.ninputs = (size_t)(argc - 1 - optind);

	if ((rc = check_output(&r)))
		return rc;
	/* A file size limit (ulimit -f) then fails a write with EFBIG, which
	 * is reported and the temporary file removed, instead of killing the
	 * import. */
	signal(SIGXFSZ, SIG_IGN);
	raise_fd_limit();
	pg.on = !quiet && isatty(2);
	r.o.progress = progress;
	r.o.progress_ctx = &pg;
	if (imp_run(&r, &e))
		goto fail;
	if (pg.on)
		fputs("\r\033[K", stderr);
	for (size_t i = 0; i < r.ntr; i++)
		if (r.tr[i].damaged)
			fprintf(stderr, "trace-import: %s; imported up to the "
				"damage (meta.damaged=1)\n", r.tr[i].damage);
	if (!quiet) {
		double secs = (double)(now_ns() - started) / 1e9;
		char peak[32];

		const struct imp_proc_stats *run = &r.ps[r.main];

		human_bytes(peak, sizeof peak, run->peak_bytes);
		fprintf(stderr, "trace-import: %s: %" PRIu64 " events, %" PRIu64
			" allocations, %" PRIu64 " stack nodes, %" PRIu64
			" threads, %zu process%s, %.3f s recorded\n", r.out,
			r.tot.events, r.tot.allocations, r.nodes, r.nthreads, r.ntr,
			r.ntr == 1 ? "" : "es", (double)r.o.duration / 1e9);
		if (r.ntr > 1)
			fprintf(stderr, "trace-import: the run's program (what trace-snap "
				"and trace-tui show without --pid) is pid %" PRIu32 ", %s; "
				"trace-snap %s --processes lists all %zu\n",
				r.tr[r.main].pid, r.tr[r.main].hdr->exe, r.out, r.ntr);
		fprintf(stderr, "trace-import: peak %s (%" PRIu64 " bytes, %" PRIu64
			" objects) at %.6f s; %" PRIu64 " unmatched frees; "
			"imported in %.2f s (%.2f M events/s)\n", peak,
			run->peak_bytes, run->peak_objects, (double)run->peak_t / 1e9,
			r.tot.unmatched_frees, secs,
			secs > 0 ? (double)r.tot.events / secs / 1e6 : 0.0);
		if (r.tot.inherited)
			fprintf(stderr, "trace-import: forked children start with the %" PRIu64
				" blocks they inherited, from their parents' traces\n",
				r.tot.inherited);
		if (r.tot.inherited_frees)
			fprintf(stderr, "trace-import: %" PRIu64 " frees of blocks forked children "
				"inherited from a parent whose trace is not imported (processes."
				"inherited=2): not unmatched; import it with them to pair them\n",
				r.tot.inherited_frees);
		for (size_t i = 0; i < r.ntr; i++)
			if (r.tr[i].keyed)
				fprintf(stderr, "trace-import: %s: bounded trace: its oldest "
					"part was overwritten; exact from %.6f s to the end "
					"(keyframe %" PRIu32 ")\n", r.tr[i].path,
					(double)(r.tr[i].window + r.tr[i].shift) / 1e9,
					r.tr[i].key_id);
		if (r.tr[r.main].attach_t != IMP_NO_TIME)
			fprintf(stderr, "trace-import: recorded by attaching to the running "
				"process (trace-record -p) at %.6f s: it holds the heap allocated "
				"since; %" PRIu64 " frees of blocks allocated before "
				"(meta.frees_before_attach), not unmatched\n",
				(double)(r.tr[r.main].attach_t + r.tr[r.main].shift) / 1e9,
				r.tot.frees_before_attach);
		uint64_t unknown = 0;
		for (size_t i = 0; i < r.ntr; i++)
			unknown += r.ps[i].unknown_frees;
		if (unknown)
			fprintf(stderr, "trace-import: %" PRIu64 " frees of blocks allocated while "
				"recording was stopped or not yet started, or by calls not yet "
				"routed (processes.unknown_frees); not unmatched\n", unknown);
		for (size_t i = 0; i < r.ntr; i++) {
			const struct imp_trace *t = &r.tr[i];

			if (t->after_detach)
				fprintf(stderr, "trace-import: %s: the recording ends at the detach "
					"(%.6f s): %" PRIu64 " events after it left out\n", t->path,
					(double)(t->t_detach + t->shift) / 1e9, t->after_detach);
			if (t->recovered || t->lost)
				fprintf(stderr, "trace-import: %s: %" PRIu64
					" events recovered from %s.ring, %" PRIu64
					" lost\n", t->path, t->recovered, t->path, t->lost);
			if (t->lost && t->t_loss != IMP_NO_TIME)
				fprintf(stderr, "trace-import: %s: answers from %.6f s on may "
					"lack the %" PRIu64 " lost events (trace-snap says so)\n",
					t->path, (double)(t->t_loss + t->shift) / 1e9, t->lost);
			if (r.ps[i].missed_frees)
				fprintf(stderr, "trace-import: %s: %" PRIu64 " frees missing (an "
					"address allocated again while live, meta.missed_frees): "
					"answers from %.6f s on may hold freed blocks (trace-snap "
					"says so)\n", t->path, r.ps[i].missed_frees,
					(double)(t->t_loss + t->shift) / 1e9);
		}
		if (r.sst.unresolved)
			fprintf(stderr, "trace-import: %" PRIu64 " of %" PRIu64
				" return addresses unresolved (named module+offset)%s\n",
				r.sst.unresolved, r.sst.ips, r.sst.mismatched ?
				"; some modules changed since recording (build id)" : "");
		hint_siblings(r.inputs, r.ninputs);
	}
	rc = r.damaged ? EXIT_DAMAGED : 0;
	goto done;
fail:
	if (pg.on)
		fputs("\r\033[K", stderr);
	fprintf(stderr, "trace-import: %s\n", e.msg);
	rc = e.unwritable ? EXIT_UNWRITABLE : EXIT_UNUSABLE;
done:
	imp_run_free(&r);
	return rc;
}
