/* snap.c - trace-snap: answers one question about a heapreel database
 * (snapshot at an instant, peak, growth, steady window, leaks, temporary
 * allocations, top allocators) and writes it as .heap, .pb.gz, folded
 * stacks, a text table or an SVG flame graph, or counts allocation sizes
 * (--histogram, a text table); narrowed to threads with --tid; compares
 * the same question in two databases (--base: text, folded or svg); or
 * lists the database's processes.
 *
 * The only place that prints: every failure is one line "trace-snap: ..."
 * on stderr and an exit code from the list below (README "Exit codes",
 * the same for every tool); an answer that lacks something (a loss, the
 * damage, a stopped span: q_lacks) gets one "trace-snap: warning: ..."
 * line per thing and still exits 0.
 * Never: SQL here; replace an existing file without --force, or the
 * database it reads even with it; write a binary format or an SVG to a
 * terminal.
 */
#include <getopt.h>
#include <limits.h>
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
	"                     [--base OLD.db [--base-pid N]]\n"
	"QUESTION: --at T | --peak | --growth T1..T2 | --steady T1..T2 | --leaks |\n"
	"          --temporary | --top [--window T1..T2] | --processes |\n"
	"          --stats [--at T | --growth T1..T2 | --steady T1..T2]\n"
	"--histogram [--at T | --peak | --growth T1..T2 | --steady T1..T2]: a text table\n"
	"   of allocation sizes (bins [1,1] [2,3] [4,7] ...; objects, bytes, top 10\n"
	"   sizes) of the blocks live at T or at the peak, of the allocations made in\n"
	"   (T1, T2], or alone of every allocation of the run\n"
	"--kind K: heap (the allocator's blocks), mmap (the program's anonymous\n"
	"   mappings), custom or all (default): only memory of that kind\n"
	"--base OLD.db [--base-pid N]: the change from the same question asked of\n"
	"   OLD.db (its own peak, instants, marks; its run's program or process N),\n"
	"   functions matched by function and file; as text (per function: base,\n"
	"   new, change), folded (signed) or svg (differential: the new run's widths)\n"
	"--pool NAME: only the custom blocks of the pools named NAME (rec_pool_create)\n"
	"--tid N (repeatable; N,M): only the allocations these threads made (who\n"
	"   allocated a block decides, not who freed it); --peak is then their own\n"
	"   peak, the first instant at which their live bytes are largest\n"
	"T: a number with a unit ns us ms s m h (30s 1.5m 250ms; bare: seconds, 0.5)\n"
	"   | 45% (of the trace) | mark:LABEL | start | end\n"
	"FMT: heap pb.gz folded text svg (default: from FILE's extension; text on stdout)\n"
	"M (folded, text, svg): inuse_space (default) inuse_objects alloc_space\n"
	"   alloc_objects\n"
	"--lines (folded, text, svg): functions told apart by line, as\n"
	"   \"function file:line\"\n"
	"-o FILE: an existing FILE is replaced only with --force, the database never\n"
	"pb.gz and svg: never written to a terminal (use -o FILE or a pipe)\n"
	"--stats: RSS and the allocator's counters beside the live heap, at T or\n"
	"   over the window (min, max, each end; alone: the whole recording), on stdout\n"
	"exit: 0 done (also when it warns what the answer lacks); 1 unusable database;\n"
	"      2 usage; 3 output not writable (exists without --force, is the\n"
	"      database, no permission, disk full); 4 not in the data (pid, tid,\n"
	"      mark, instant outside the recording)\n";

enum { OPT_AT = 256, OPT_PEAK, OPT_GROWTH, OPT_STEADY, OPT_LEAKS, OPT_TEMPORARY, OPT_TOP,
       OPT_PROCESSES, OPT_BY, OPT_WINDOW, OPT_FORMAT, OPT_PID, OPT_METRIC, OPT_FORCE,
       OPT_LINES, OPT_HELP,
       OPT_TID, OPT_HISTOGRAM, OPT_STATS, OPT_KIND, OPT_BASE, OPT_BASE_PID, OPT_POOL };

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
	{ "base", required_argument, NULL, OPT_BASE },
	{ "base-pid", required_argument, NULL, OPT_BASE_PID },
	{ "pool", required_argument, NULL, OPT_POOL },
	{ 0 }
};

static const char *const metrics[Q_NVAL] = {
	[Q_INUSE_OBJECTS] = "inuse_objects", [Q_INUSE_BYTES] = "inuse_space",
	[Q_ALLOC_OBJECTS] = "alloc_objects", [Q_ALLOC_BYTES] = "alloc_space",
};

#define fail(code, ...) q_tool_fail("trace-snap", code, __VA_ARGS__)

struct args {
	const char *db, *out, *arg, *window;
	const char *base;                      /* --base: the database compared with */
	const char *pool;                      /* --pool NAME */
	int question, format, metric;
	unsigned kinds;                        /* --kind: a mask of enum q_alloc_kind */
	bool by_stack, have_pid, force, lines, histogram, stats;
	int64_t pid, base_pid;                 /* base_pid 0: its run's program */
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

/* A process id given with option opt. */
static int parse_pid(const char *opt, const char *arg, int64_t *pid)
{
	char *end;
	long long v = strtoll(arg, &end, 10);
	if (!*arg || *end || v <= 0)
		return fail(EXIT_USAGE, "%s takes a process id, not '%s'", opt, arg);
	*pid = v;
	return 0;
}

/* --base compares per-stack questions of two runs, whose threads differ. */
static int check_base(const struct args *a)
{
	if (!a->base)
		return a->base_pid ? fail(EXIT_USAGE, "--base-pid goes with --base") : 0;
	if (a->stats || a->histogram || a->question == OPT_PROCESSES || a->ntids || a->pool)
		return fail(EXIT_USAGE, "--base compares per-stack questions: no --stats, "
		            "--histogram, --processes, --tid or --pool");
	if (a->format != Q_FMT_TEXT && a->format != Q_FMT_FOLDED && a->format != Q_FMT_SVG)
		return fail(EXIT_USAGE, "--base writes text, folded or svg (.heap and pb.gz "
		            "hold one profile)");
	if (a->by_stack)
		return fail(EXIT_USAGE, "--base compares functions: no --by stack");
	return 0;
}

/* --histogram writes text only: a format or an extension naming another
 * one is the user's mistake. */
static int histogram_format(struct args *a)
{
	int by_path = a->out ? q_format_by_path(a->out) : -1;
	if ((a->format >= 0 && a->format != Q_FMT_TEXT) || (by_path >= 0 && by_path != Q_FMT_TEXT))
		return fail(EXIT_USAGE, "--histogram writes a text table: --format text or a "
		            "file not named .heap, .pb.gz, .folded or .svg");
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
				return fail(EXIT_USAGE, "unknown format '%s' (heap, pb.gz, folded, text, svg)",
				            optarg);
			break;
		case OPT_PID:
			if ((rc = parse_pid("--pid", optarg, &a->pid)))
				return rc;
			a->have_pid = true;
			break;
		case OPT_BASE:
			a->base = optarg;
			break;
		case OPT_BASE_PID:
			if ((rc = parse_pid("--base-pid", optarg, &a->base_pid)))
				return rc;
			break;
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
		return a->base ? check_base(a) : check_stats(a);
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
		            "(.heap, .pb.gz, .folded, .txt, .svg); use --format", a->out);
	if (a->format < 0)
		a->format = Q_FMT_TEXT;
	if (a->force && !a->out)
		return fail(EXIT_USAGE, "--force goes with -o FILE");
	if (a->lines && a->format != Q_FMT_TEXT && a->format != Q_FMT_FOLDED &&
	    a->format != Q_FMT_SVG)
		return fail(EXIT_USAGE, "--lines goes with the text, folded and svg formats");
	if ((a->format == Q_FMT_PB_GZ || a->format == Q_FMT_SVG) && !a->out &&
	    isatty(STDOUT_FILENO))
		return fail(EXIT_USAGE, "--format %s: not written to a terminal (use -o FILE or a pipe)",
		            a->format == Q_FMT_PB_GZ ? "pb.gz" : "svg");
	return check_base(a);
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

/* The per-stack profile the question a asks about pid over [t1, t2], of
 * the kinds asked, into p. */
static int ask(struct q_db *db, const struct args *a, int64_t pid, int64_t t1, int64_t t2,
               struct q_profile *p)
{
	int rc = 0;
	switch (a->question) {
	case OPT_AT: rc = q_snapshot(db, pid, t2, p); break;
	case OPT_PEAK: rc = q_peak(db, pid, p); break;
	case OPT_GROWTH: rc = q_growth(db, pid, t1, t2, p); break;
	case OPT_STEADY: rc = q_steady(db, pid, t1, t2, p); break;
	case OPT_LEAKS: rc = q_leaks(db, pid, p); break;
	case OPT_TEMPORARY: rc = q_temporary(db, pid, p); break;
	case OPT_TOP: rc = q_top(db, pid, t1, t2, p); break;
	}
	return rc ? rc : q_keep_kinds(db, p, a->kinds);
}

/* A per-stack profile: the question a asks about pid over [t1, t2]. */
static int profile(struct q_db *db, const struct args *a, int64_t pid, int64_t t1, int64_t t2)
{
	struct q_profile p = { 0 };
	int rc = ask(db, a, pid, t1, t2, &p);
	/* the .heap, .pb.gz and folded outputs cannot carry the warnings */
	if (!rc) {
		warn_dropped(&p, a->format, a->metric);
		rc = q_write_lacks(db, &p, "trace-snap: warning: ", stderr);
	}
	rc = emit(db, a, rc, profile_file, profile_stream, &p);
	q_profile_free(&p);
	return rc;
}

/* The base run's side of a comparison: its database and answer. */
struct base {
	struct q_db *db;
	struct q_profile p;
};

/* What emit passes to the writers of a comparison. */
struct pair {
	const struct base *b;
	const struct q_profile *p;             /* the new run's answer */
};

static int diff_file(struct q_db *db, const struct args *a, const void *ctx)
{
	const struct pair *x = ctx;
	return q_write_diff_file(x->b->db, &x->b->p, db, x->p, a->format, a->metric, a->out,
	                         a->force);
}

static int diff_stream(struct q_db *db, const struct args *a, const void *ctx, FILE *f)
{
	const struct pair *x = ctx;
	return q_write_diff(x->b->db, &x->b->p, db, x->p, a->format, a->metric, f);
}

/* --base: the question of pid over [t1, t2] compared with b's answer. */
static int compare(struct q_db *db, const struct args *a, struct base *b, int64_t pid,
                   int64_t t1, int64_t t2)
{
	struct q_profile p = { 0 };
	if (q_write_lacks(b->db, &b->p, "trace-snap: warning: base: ", stderr))
		return fail(EXIT_INPUT, "%s", q_errmsg(b->db));
	int rc = ask(db, a, pid, t1, t2, &p);
	if (!rc)
		rc = q_write_lacks(db, &p, "trace-snap: warning: new: ", stderr);
	struct pair x = { b, &p };
	rc = emit(db, a, rc, diff_file, diff_stream, &x);
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

/* Opens the database at path, by lines if asked. Returns the exit code. */
static int open_db(const struct args *a, const char *path, struct q_db **db)
{
	char err[600];
	if (!(*db = q_open(path, err, sizeof err)))
		return fail(EXIT_INPUT, "%s%s", path == a->base ? "--base " : "", err);
	if (a->lines)
		q_by_lines(*db);
	else if (a->base)
		q_by_files(*db);                   /* two runs' frames meet by function and file */
	return 0;
}

/* The process a question is about: pid, or the run's program (pid 0). */
static int find_process(struct q_db *db, const char *path, int64_t pid,
                        const struct q_process **proc)
{
	if ((*proc = pid ? q_process(db, pid) : q_default_process(db)))
		return 0;
	if (pid)
		return fail(EXIT_NOT_FOUND, "%s: no process with pid %lld in the database", path,
		            (long long)pid);
	return fail(EXIT_NOT_FOUND, "%s: the database holds no process", path);
}

/* The instants of the question in proc: [t1, t2], the whole process unless
 * the question names them (each database resolves its own marks, peaks
 * and percentages). A failure's line starts with who (the base: "--base
 * DB: "). */
static int instants(struct q_db *db, const struct args *a, const struct q_process *proc,
                    const char *who, int64_t *t1, int64_t *t2)
{
	int rc = 0;
	*t1 = proc->t_start;
	*t2 = proc->t_end;
	if (a->question == OPT_AT)
		rc = q_time(db, proc->pid, a->arg, t2);
	else if (a->question == OPT_GROWTH || a->question == OPT_STEADY)
		rc = q_window(db, proc->pid, a->arg, t1, t2);
	else if (a->question == OPT_TOP && a->window)
		rc = q_window(db, proc->pid, a->window, t1, t2);
	if (rc)
		return fail(rc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_USAGE, "%s%s", who, q_errmsg(db));
	return 0;
}

/* --base: the same question asked of the base run, into b. */
static int ask_base(const struct args *a, struct base *b)
{
	const struct q_process *proc;
	int64_t t1, t2;
	int rc = open_db(a, a->base, &b->db);
	if (!rc)
		rc = find_process(b->db, a->base, a->base_pid, &proc);
	if (!rc && a->out && q_output_ok(b->db, a->out, a->force))
		rc = fail(EXIT_OUTPUT, "%s", q_errmsg(b->db));
	char who[PATH_MAX + 16];
	snprintf(who, sizeof who, "--base %s: ", a->base);
	if (!rc)
		rc = instants(b->db, a, proc, who, &t1, &t2);
	if (!rc && ask(b->db, a, proc->pid, t1, t2, &b->p))
		rc = fail(EXIT_INPUT, "%s", q_errmsg(b->db));
	return rc;
}

/* Opens the database(s) and answers what a asks; returns the exit code. */
static int answer(const struct args *a)
{
	struct q_db *db;
	int rc = open_db(a, a->db, &db);
	if (rc)
		return rc;
	if (a->question == OPT_PROCESSES) {
		rc = list_processes(db);
		q_close(db);
		return rc;
	}
	const struct q_process *proc;
	struct base b = { 0 };
	int64_t t1, t2;
	/* The output and the instants first: their failures are the user's. */
	rc = find_process(db, a->db, a->have_pid ? a->pid : 0, &proc);
	if (!rc && a->out && q_output_ok(db, a->out, a->force))
		rc = fail(EXIT_OUTPUT, "%s", q_errmsg(db));
	if (!rc)
		rc = instants(db, a, proc, "", &t1, &t2);
	if (!rc && a->base)
		rc = ask_base(a, &b);
	if (!rc && (a->ntids || a->pool) &&
	    (rc = q_set_filter(db, proc->pid, a->tids, a->ntids, a->pool)))
		rc = fail(rc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_INPUT, "%s", q_errmsg(db));
	if (!rc)
		rc = a->base ? compare(db, a, &b, proc->pid, t1, t2)
		   : a->stats ? stats(db, a, proc->pid, t1, t2)
		   : a->histogram ? histogram(db, a, proc->pid, t1, t2)
		   : profile(db, a, proc->pid, t1, t2);
	q_profile_free(&b.p);
	q_close(b.db);
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
