/* snap.c - trace-snap: answers one question about a heapreel database
 * (snapshot at an instant, peak, growth, steady window, leaks, temporary
 * allocations, top allocators) and writes it as .heap, .pb.gz, folded
 * stacks or a text table, or counts allocation sizes (--histogram, a
 * text table); narrowed to threads with --tid; or lists the database's
 * processes.
 *
 * The only place that prints: every failure is one line "trace-snap: ..."
 * on stderr and an exit code from the list below (README "Exit codes",
 * the same for every tool); an answer that lacks something (a loss, the
 * damage, a stopped span: q_lacks) gets one "trace-snap: warning: ..."
 * line per thing and still exits 0.
 * Never: SQL here; replace an existing file without --force, or the
 * database it reads even with it; write a binary format to a terminal.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "q.h"

enum {
	EXIT_INPUT = 1,        /* the database: missing, not ours, incomplete, unreadable */
	EXIT_USAGE = 2,        /* bad flags or a malformed time/window */
	EXIT_OUTPUT = 3,       /* the output exists, is the database, or cannot be written */
	EXIT_NOT_FOUND = 4,    /* pid, mark or instant not in the database */
};

static const char usage_text[] =
	"usage: trace-snap DB [--pid N] [--tid N[,N...]]... QUESTION [-o FILE [--force]]\n"
	"                     [--format FMT] [--metric M] [--by function|stack] [--lines]\n"
	"QUESTION: --at T | --peak | --growth T1..T2 | --steady T1..T2 | --leaks |\n"
	"          --temporary | --top [--window T1..T2] | --processes |\n"
	"          --stats [--at T | --growth T1..T2 | --steady T1..T2]\n"
	"--histogram [--at T | --peak | --growth T1..T2 | --steady T1..T2]: a text table\n"
	"   of allocation sizes (bins [1,1] [2,3] [4,7] ...; objects, bytes, top 10\n"
	"   sizes) of the blocks live at T or at the peak, of the allocations made in\n"
	"   (T1, T2], or alone of every allocation of the run\n"
	"--kind K: heap (the allocator's blocks), mmap (the program's anonymous\n"
	"   mappings), custom or all (default): only memory of that kind\n"
	"--pool NAME: only the custom blocks of the pools named NAME (rec_pool_create)\n"
	"--tid N (repeatable; N,M): only the allocations these threads made (who\n"
	"   allocated a block decides, not who freed it); --peak is then their own\n"
	"   peak, the first instant at which their live bytes are largest\n"
	"T: a number with a unit ns us ms s m h (30s 1.5m 250ms; bare: seconds, 0.5)\n"
	"   | 45% (of the trace) | mark:LABEL | start | end\n"
	"FMT: heap pb.gz folded text (default: from FILE's extension; text on stdout)\n"
	"M (folded, text): inuse_space (default) inuse_objects alloc_space alloc_objects\n"
	"--lines (folded, text): functions told apart by line, as \"function file:line\"\n"
	"-o FILE: an existing FILE is replaced only with --force, the database never\n"
	"pb.gz is binary: never written to a terminal (use -o FILE or a pipe)\n"
	"--stats: RSS and the allocator's counters beside the live heap, at T or\n"
	"   over the window (min, max, each end; alone: the whole recording), on stdout\n"
	"exit: 0 done (also when it warns what the answer lacks); 1 unusable database;\n"
	"      2 usage; 3 output not writable (exists without --force, is the\n"
	"      database, no permission, disk full); 4 not in the data (pid, tid,\n"
	"      mark, instant outside the recording)\n";

enum { OPT_AT = 256, OPT_PEAK, OPT_GROWTH, OPT_STEADY, OPT_LEAKS, OPT_TEMPORARY, OPT_TOP,
       OPT_PROCESSES, OPT_BY, OPT_WINDOW, OPT_FORMAT, OPT_PID, OPT_METRIC, OPT_FORCE,
       OPT_LINES, OPT_HELP,
       OPT_TID, OPT_HISTOGRAM, OPT_STATS, OPT_KIND, OPT_POOL };

static const struct option options[] = {
	{ "at", required_argument, NULL, OPT_AT },
	{ "peak", no_argument, NULL, OPT_PEAK },
	{ "growth", required_argument, NULL, OPT_GROWTH },
	{ "steady", required_argument, NULL, OPT_STEADY },
	{ "leaks", no_argument, NULL, OPT_LEAKS },
	{ "temporary", no_argument, NULL, OPT_TEMPORARY },
	{ "top", no_argument, NULL, OPT_TOP },
	{ "processes", no_argument, NULL, OPT_PROCESSES },
	{ "by", required_argument, NULL, OPT_BY },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "pid", required_argument, NULL, OPT_PID },
	{ "metric", required_argument, NULL, OPT_METRIC },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "tid", required_argument, NULL, OPT_TID },
	{ "histogram", no_argument, NULL, OPT_HISTOGRAM },
	{ "kind", required_argument, NULL, OPT_KIND },
	{ "pool", required_argument, NULL, OPT_POOL },
	{ 0 }
};

static const char *const metrics[Q_NVAL] = {
	[Q_INUSE_OBJECTS] = "inuse_objects", [Q_INUSE_BYTES] = "inuse_space",
	[Q_ALLOC_OBJECTS] = "alloc_objects", [Q_ALLOC_BYTES] = "alloc_space",
};

__attribute__((format(printf, 2, 3)))
static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("trace-snap: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

struct args {
	const char *db, *out, *arg, *window;
	const char *pool;                      /* --pool NAME */
	int question, format, metric;
	unsigned kinds;                        /* --kind: a mask of enum q_alloc_kind */
	bool by_stack, have_pid, force, lines, histogram, stats;
	int64_t pid;
	int64_t *tids;                         /* --tid, in the order given */
	size_t ntids, captids;
};

/* --tid N or N,M,...: appends each thread id to a->tids. */
static int parse_tids(struct args *a, const char *arg)
{
	const char *p = arg;
	char *end;
	do {
		long long v = strtoll(p, &end, 10);
		if (end == p || (*end && *end != ',') || v <= 0)
			return fail(EXIT_USAGE, "--tid takes thread ids (N or N,M), not '%s'", arg);
		if (a->ntids == a->captids) {
			size_t cap = a->captids ? 2 * a->captids : 8;
			int64_t *t = realloc(a->tids, cap * sizeof *t);
			if (!t)
				return fail(EXIT_USAGE, "out of memory");
			a->tids = t;
			a->captids = cap;
		}
		a->tids[a->ntids++] = v;
		p = end + (*end == ',');
	} while (*end);                        /* after a comma, another id */
	return 0;
}

/* --histogram writes text only: a format or an extension naming another
 * one is the user's mistake. */
static int histogram_format(struct args *a)
{
	int by_path = a->out ? q_format_by_path(a->out) : -1;
	if ((a->format >= 0 && a->format != Q_FMT_TEXT) || (by_path >= 0 && by_path != Q_FMT_TEXT))
		return fail(EXIT_USAGE, "--histogram writes a text table: --format text or a "
		            "file not named .heap, .pb.gz or .folded");
	a->format = Q_FMT_TEXT;
	return 0;
}

/* --stats takes an instant or a window (or neither: the whole recording)
 * of the whole process, and prints a table on stdout. */
static int check_stats(const struct args *a)
{
	if (a->question && a->question != OPT_AT && a->question != OPT_GROWTH &&
	    a->question != OPT_STEADY)
		return fail(EXIT_USAGE, "--stats goes with --at T, --growth T1..T2 or "
		            "--steady T1..T2 only");
	if (a->out || a->format >= 0 || a->window || a->lines || a->force)
		return fail(EXIT_USAGE, "--stats prints a table on stdout: no -o, --format, "
		            "--window, --lines or --force");
	if (a->ntids || a->histogram)
		return fail(EXIT_USAGE, "--stats is about the whole process: no --tid or --histogram");
	return 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	int c, rc;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", options, NULL)) != -1) {
		switch (c) {
		case OPT_AT: case OPT_PEAK: case OPT_GROWTH: case OPT_STEADY: case OPT_LEAKS:
		case OPT_TEMPORARY: case OPT_TOP: case OPT_PROCESSES:
			if (a->question)
				return fail(EXIT_USAGE, "give only one question");
			a->question = c;
			a->arg = optarg;
			break;
		case OPT_BY:
			if (strcmp(optarg, "function") && strcmp(optarg, "stack"))
				return fail(EXIT_USAGE, "--by takes function or stack, not '%s'", optarg);
			a->by_stack = !strcmp(optarg, "stack");
			break;
		case OPT_WINDOW:
			a->window = optarg;
			break;
		case 'o':
			a->out = optarg;
			break;
		case OPT_FORMAT:
			if ((a->format = q_format_by_name(optarg)) < 0)
				return fail(EXIT_USAGE, "unknown format '%s' (heap, pb.gz, folded, text)",
				            optarg);
			break;
		case OPT_PID: {
			char *end;
			long long v = strtoll(optarg, &end, 10);
			if (!*optarg || *end || v <= 0)
				return fail(EXIT_USAGE, "--pid takes a process id, not '%s'", optarg);
			a->pid = v;
			a->have_pid = true;
			break;
		}
		case OPT_METRIC:
			a->metric = -1;
			for (int k = 0; k < Q_NVAL; k++)
				if (!strcmp(optarg, metrics[k]))
					a->metric = k;
			if (a->metric < 0)
				return fail(EXIT_USAGE, "unknown metric '%s'", optarg);
			break;
		case OPT_FORCE:
			a->force = true;
			break;
		case OPT_LINES:
			a->lines = true;
			break;
		case OPT_TID:
			if ((rc = parse_tids(a, optarg)))
				return rc;
			break;
		case OPT_HISTOGRAM:
			a->histogram = true;
			break;
		case OPT_STATS:
			a->stats = true;
			break;
		case OPT_KIND:
			if (q_kind_parse(optarg, &a->kinds))
				return fail(EXIT_USAGE, "--kind takes heap, mmap, custom or all, not '%s'",
				            optarg);
			break;
		case OPT_POOL:
			a->pool = optarg;
			break;
		case OPT_HELP: case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case ':':
			return fail(EXIT_USAGE, "option %s needs a value", argv[optind - 1]);
		default:
			return fail(EXIT_USAGE, "unknown option '%s' (see --help)", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return fail(EXIT_USAGE, "%s", optind < argc ? "give exactly one database (see --help)"
		                                            : "no database given (see --help)");
	a->db = argv[optind];
	if (a->kinds != Q_KINDS_ALL && (a->stats || a->histogram || a->question == OPT_PROCESSES))
		return fail(EXIT_USAGE, "--kind goes with the per-stack questions, not with "
		            "--stats, --histogram or --processes");
	if (a->pool && (a->stats || a->histogram || a->question == OPT_PROCESSES))
		return fail(EXIT_USAGE, "--pool goes with the per-stack questions, not with "
		            "--stats, --histogram or --processes");
	if (a->stats)
		return check_stats(a);
	if (a->histogram && a->question != 0 && a->question != OPT_AT && a->question != OPT_PEAK &&
	    a->question != OPT_GROWTH && a->question != OPT_STEADY)
		return fail(EXIT_USAGE, "--histogram goes with --at, --peak, --growth, --steady, "
		            "or alone (the whole run)");
	if (a->histogram && (rc = histogram_format(a)))
		return rc;
	if (!a->question && !a->histogram)
		return fail(EXIT_USAGE, "no question given: --at, --peak, --growth, --steady, "
		            "--leaks, --temporary, --top, --histogram, --stats or --processes");
	if (a->question == OPT_PROCESSES && (a->out || a->format >= 0 || a->have_pid))
		return fail(EXIT_USAGE, "--processes prints a table on stdout: no -o, --format "
		            "or --pid");
	if (a->question == OPT_PROCESSES && a->ntids)
		return fail(EXIT_USAGE, "--processes lists every process: no --tid");
	if (a->window && a->question != OPT_TOP)
		return fail(EXIT_USAGE, "--window goes with --top");
	if (a->out && a->format < 0 && (a->format = q_format_by_path(a->out)) < 0)
		return fail(EXIT_USAGE, "%s: cannot tell the format from the extension "
		            "(.heap, .pb.gz, .folded, .txt); use --format", a->out);
	if (a->format < 0)
		a->format = Q_FMT_TEXT;
	if (a->force && !a->out)
		return fail(EXIT_USAGE, "--force goes with -o FILE");
	if (a->lines && a->format != Q_FMT_TEXT && a->format != Q_FMT_FOLDED)
		return fail(EXIT_USAGE, "--lines goes with the text and folded formats");
	if (a->format == Q_FMT_PB_GZ && !a->out && isatty(STDOUT_FILENO))
		return fail(EXIT_USAGE, "--format pb.gz is binary: not written to a terminal "
		            "(use -o FILE or a pipe)");
	return 0;
}

/* Exit code for a q_time/q_window failure. */
static int time_fail(struct q_db *db, int rc)
{
	return fail(rc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_USAGE, "%s", q_errmsg(db));
}

/* .heap and folded stacks have no negative values: say what a growth
 * loses in them. */
static void warn_dropped(const struct q_profile *p, int format, int metric)
{
	int64_t stacks = 0, sum = 0;
	const char *unit = "bytes";
	if (format == Q_FMT_HEAP) {
		q_heap_dropped(p, &stacks, &sum);
	} else if (format == Q_FMT_FOLDED) {
		q_folded_dropped(p, metric, &stacks, &sum);
		if (metric == Q_INUSE_OBJECTS || metric == Q_ALLOC_OBJECTS)
			unit = "objects";
	}
	if (stacks)
		fprintf(stderr, "trace-snap: warning: %s has no negative values: %lld stack%s "
		        "that shrank by %lld %s in all %s left out (--format text or pb.gz "
		        "shows them)\n", format == Q_FMT_HEAP ? ".heap" : "folded",
		        (long long)stacks, stacks == 1 ? "" : "s", (long long)sum, unit,
		        stacks == 1 ? "is" : "are");
}

/* --processes: every process of the database, the default one starred. */
static int list_processes(struct q_db *db)
{
	size_t n;
	const struct q_process *ps = q_processes(db, &n), *def = q_default_process(db);
	printf("  %10s %10s %12s %14s %10s  %s\n", "pid", "ppid", "start (s)", "peak (bytes)",
	       "human", "executable");
	for (size_t i = 0; i < n; i++) {
		char h[Q_HUMAN_BYTES];
		q_human_bytes(h, sizeof h, ps[i].peak_bytes);
		printf("%c %10lld %10lld %12.6f %14lld %10s  %s\n", &ps[i] == def ? '*' : ' ',
		       (long long)ps[i].pid, (long long)ps[i].ppid, (double)ps[i].t_start / 1e9,
		       (long long)ps[i].peak_bytes, h, ps[i].exe);
	}
	printf("* the run's program, which the other questions are about without --pid\n");
	return fflush(stdout) || ferror(stdout) ? fail(EXIT_OUTPUT, "writing to stdout failed") : 0;
}

/* Writes the answer: to FILE (-o) or stdout; what it cannot carry and
 * what the answer lacks as warnings on stderr. Returns the exit code. */
static int emit(struct q_db *db, const struct args *a, int rc,
                int (*to_file)(struct q_db *, const struct args *, const void *),
                int (*to_stream)(struct q_db *, const struct args *, const void *, FILE *),
                const void *answer)
{
	if (rc)
		return fail(EXIT_INPUT, "%s", q_errmsg(db));
	if (a->out) {
		rc = to_file(db, a, answer);
		return rc ? fail(rc == Q_OUTPUT ? EXIT_OUTPUT : EXIT_INPUT, "%s", q_errmsg(db)) : 0;
	}
	if (to_stream(db, a, answer, stdout))
		return fail(ferror(stdout) ? EXIT_OUTPUT : EXIT_INPUT, "%s", q_errmsg(db));
	if (fflush(stdout) || ferror(stdout))
		return fail(EXIT_OUTPUT, "writing to stdout failed");
	return 0;
}

static int profile_file(struct q_db *db, const struct args *a, const void *p)
{
	return q_write_file(db, p, a->format, a->metric, a->by_stack, a->out, a->force);
}

static int profile_stream(struct q_db *db, const struct args *a, const void *p, FILE *f)
{
	return q_write(db, p, a->format, a->metric, a->by_stack, f);
}

/* A per-stack profile: the question a asks about pid over [t1, t2]. */
static int profile(struct q_db *db, const struct args *a, int64_t pid, int64_t t1, int64_t t2)
{
	struct q_profile p = { 0 };
	int rc = 0;
	switch (a->question) {
	case OPT_AT: rc = q_snapshot(db, pid, t2, &p); break;
	case OPT_PEAK: rc = q_peak(db, pid, &p); break;
	case OPT_GROWTH: rc = q_growth(db, pid, t1, t2, &p); break;
	case OPT_STEADY: rc = q_steady(db, pid, t1, t2, &p); break;
	case OPT_LEAKS: rc = q_leaks(db, pid, &p); break;
	case OPT_TEMPORARY: rc = q_temporary(db, pid, &p); break;
	case OPT_TOP: rc = q_top(db, pid, t1, t2, &p); break;
	}
	if (!rc)
		rc = q_keep_kinds(db, &p, a->kinds);
	/* the .heap, .pb.gz and folded outputs cannot carry the warnings */
	if (!rc) {
		warn_dropped(&p, a->format, a->metric);
		rc = q_write_lacks(db, &p, "trace-snap: warning: ", stderr);
	}
	rc = emit(db, a, rc, profile_file, profile_stream, &p);
	q_profile_free(&p);
	return rc;
}

static int hist_file(struct q_db *db, const struct args *a, const void *h)
{
	return q_write_hist_file(db, h, a->out, a->force);
}

static int hist_stream(struct q_db *db, const struct args *a, const void *h, FILE *f)
{
	(void)a;
	return q_write_hist(db, h, f);
}

/* --histogram: of the instant (--at, --peak), the window (--growth,
 * --steady: what it allocated) or, alone, the whole run. */
static int histogram(struct q_db *db, const struct args *a, int64_t pid, int64_t t1, int64_t t2)
{
	struct q_hist h;
	enum q_kind kind = Q_TOP;
	int rc = 0;
	if (a->question == OPT_AT)
		kind = Q_SNAPSHOT;
	else if (a->question == OPT_PEAK && !(rc = q_peak_time(db, pid, &t2)))
		kind = Q_PEAK;
	else if (a->question == OPT_GROWTH || a->question == OPT_STEADY)
		kind = Q_STEADY;
	if (!rc && !(rc = q_histogram(db, pid, kind, t1, t2, &h)))
		rc = q_write_hist_lacks(db, &h, "trace-snap: warning: ", stderr);
	return emit(db, a, rc, hist_file, hist_stream, &h);
}

/* Opens the database and answers what a asks; returns the exit code. */
/* --stats: over [t1, t2], or at t2 with --at. */
static int stats(struct q_db *db, const struct args *a, int64_t pid, int64_t t1, int64_t t2)
{
	bool window = a->question != OPT_AT;
	struct q_profile lk = { .kind = window ? Q_GROWTH : Q_SNAPSHOT, .pid = pid,
	                        .t1 = window ? t1 : t2, .t2 = t2 };
	int rc = q_write_lacks(db, &lk, "trace-snap: warning: ", stderr);
	if (!rc)
		rc = q_write_stats(db, pid, lk.t1, t2, window, stdout);
	if (rc)
		return fail(rc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_INPUT, "%s", q_errmsg(db));
	if (fflush(stdout) || ferror(stdout))
		return fail(EXIT_OUTPUT, "writing to stdout failed");
	return 0;
}

static int answer(const struct args *a)
{
	int rc = 0;
	char err[600];
	struct q_db *db = q_open(a->db, err, sizeof err);
	if (!db)
		return fail(EXIT_INPUT, "%s", err);
	if (a->lines)
		q_by_lines(db);
	if (a->question == OPT_PROCESSES) {
		rc = list_processes(db);
		q_close(db);
		return rc;
	}
	const struct q_process *proc = a->have_pid ? q_process(db, a->pid) : q_default_process(db);
	if (!proc) {
		if (a->have_pid)
			rc = fail(EXIT_NOT_FOUND, "%s: no process with pid %lld in the database", a->db,
			          (long long)a->pid);
		else
			rc = fail(EXIT_NOT_FOUND, "%s: the database holds no process", a->db);
		q_close(db);
		return rc;
	}
	/* The output and the instants first: their failures are the user's. */
	if (a->out && q_output_ok(db, a->out, a->force)) {
		rc = fail(EXIT_OUTPUT, "%s", q_errmsg(db));
		q_close(db);
		return rc;
	}
	int64_t pid = proc->pid, t1 = proc->t_start, t2 = proc->t_end;
	if (a->question == OPT_AT)
		rc = q_time(db, pid, a->arg, &t2);
	else if (a->question == OPT_GROWTH || a->question == OPT_STEADY)
		rc = q_window(db, pid, a->arg, &t1, &t2);
	else if (a->question == OPT_TOP && a->window)
		rc = q_window(db, pid, a->window, &t1, &t2);
	if (rc) {
		rc = time_fail(db, rc);
	} else if ((a->ntids || a->pool) &&
	           (rc = q_set_filter(db, pid, a->tids, a->ntids, a->pool))) {
		rc = fail(rc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_INPUT, "%s", q_errmsg(db));
	} else {
		rc = a->stats ? stats(db, a, pid, t1, t2)
		   : a->histogram ? histogram(db, a, pid, t1, t2) : profile(db, a, pid, t1, t2);
	}
	q_close(db);
	return rc;
}

int main(int argc, char **argv)
{
	struct args a = { .format = -1, .metric = Q_INUSE_BYTES, .kinds = Q_KINDS_ALL };
	int rc = parse(argc, argv, &a);
	if (!rc)
		rc = answer(&a);
	free(a.tids);
	return rc;
}
