/* report.c - trace-report: writes one self-contained HTML page about a
 * heapreel database (a timeline to select an instant or a window in, a
 * flame graph, a table of functions, the run's facts), or with --base the
 * comparison of two runs (a differential flame graph and a table of
 * functions by change, compare.c), which works offline from file://: its
 * HTML, CSS, JavaScript and libraries are inlined at build time
 * (embed_page.py), its data is written here (rep.h).
 *
 * The only place that prints: every failure is one line "trace-report: ..."
 * on stderr and an exit code from README "Exit codes"; what the run's
 * answers lack (a loss, the damage) is one "trace-report: warning: ..."
 * line each, and shown in the page too.
 * Never: SQL here; replace an existing file without --force, or a
 * database it reads even with it (q_output_ok, q_write_atomic).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>

#include "rep.h"

enum {
	EXIT_INPUT = 1,        /* the database: missing, not ours, incomplete, unreadable */
	EXIT_USAGE = 2,        /* bad flags */
	EXIT_OUTPUT = 3,       /* the output exists, is the database, or cannot be written */
	EXIT_NOT_FOUND = 4,    /* --base: pid, mark or instant not in a database */
};

/* Room for q_open's one line about a database it refuses. */
#define OPEN_ERR 600

static const char usage[] =
	"usage: trace-report DB -o REPORT.html [--force]\n"
	"       trace-report NEW.db --base OLD.db [--base-pid N] [--pid N]\n"
	"                    [QUESTION] -o DIFF.html [--force]\n"
	"Writes one HTML page about the heapreel database DB that works offline:\n"
	"a timeline of the live heap (and RSS) where a click selects an instant and\n"
	"a drag a window (snapshot, growth or steady), buttons for the peak, the RSS\n"
	"peak, the leaks and the temporary allocations, a flame graph, a table of\n"
	"functions and the run's facts. Its selection is in the URL fragment:\n"
	"#at=T, #growth=T1..T2, #steady=T1..T2, #peak, #leaks (T as trace-snap).\n"
	"--base OLD.db: a page comparing the same question asked of OLD.db (its\n"
	"   own peak, instants, marks; its run's program or --base-pid N) and of\n"
	"   NEW.db (its run's program or --pid N): a differential flame graph (the\n"
	"   new run's widths, growth red, shrinkage blue) and a table of functions\n"
	"   by change, functions matched by function and file, as trace-snap --base\n"
	"QUESTION (with --base): --peak (default) | --at T | --growth T1..T2 |\n"
	"   --steady T1..T2 | --leaks | --temporary; T as trace-snap takes it:\n"
	"   30s 250ms 45% mark:LABEL start end\n"
	"  -o, --output FILE  the page to write (required)\n"
	"  --force            replace FILE if it exists\n"
	"  -h, --help         this text\n"
	"exit: 0 written (also when it warns what an answer lacks); 1 unusable\n"
	"      database; 2 usage; 3 output not writable (exists without --force, is\n"
	"      a database, no permission, disk full); 4 not in the data (--base:\n"
	"      pid, mark, instant outside the recording)\n";

#define fail(code, ...) q_tool_fail("trace-report", code, __VA_ARGS__)

struct args {
	const char *db, *out;
	const char *base;                      /* --base OLD.db */
	const char *arg;                       /* the question's T or T1..T2 */
	enum rep_question question;
	bool asked;                            /* a question was given */
	int64_t pid, base_pid;                 /* 0: the run's program */
	bool force;
};

/* A question's option is OPT_QUESTION + its enum rep_question. */
enum { OPT_FORCE = 256, OPT_BASE, OPT_BASE_PID, OPT_PID, OPT_QUESTION,
       OPT_LAST_QUESTION = OPT_QUESTION + REP_TEMPORARY };

static int parse_pid(const char *opt, const char *arg, int64_t *pid)
{
	char *end;
	long long v = strtoll(arg, &end, 10);
	if (end == arg || *end || v <= 0)
		return fail(EXIT_USAGE, "%s takes a process id, not '%s'", opt, arg);
	*pid = v;
	return 0;
}

/* A question option: one at most, with --base. */
static int parse_question(struct args *a, int opt, const char *name)
{
	if (a->asked)
		return fail(EXIT_USAGE, "one question at most (--%s is the second; see --help)", name);
	a->question = (enum rep_question)(opt - OPT_QUESTION);
	a->asked = true;
	a->arg = optarg;
	return 0;
}

/* What only a comparison takes. */
static int check_base(const struct args *a)
{
	if (a->base)
		return 0;
	if (a->asked || a->pid || a->base_pid)
		return fail(EXIT_USAGE, "%s goes with --base (a report shows every question)",
		            a->asked ? "a question" : a->pid ? "--pid" : "--base-pid");
	return 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "help", no_argument, NULL, 'h' },
		{ "base", required_argument, NULL, OPT_BASE },
		{ "base-pid", required_argument, NULL, OPT_BASE_PID },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "peak", no_argument, NULL, OPT_QUESTION + REP_PEAK },
		{ "at", required_argument, NULL, OPT_QUESTION + REP_AT },
		{ "growth", required_argument, NULL, OPT_QUESTION + REP_GROWTH },
		{ "steady", required_argument, NULL, OPT_QUESTION + REP_STEADY },
		{ "leaks", no_argument, NULL, OPT_QUESTION + REP_LEAKS },
		{ "temporary", no_argument, NULL, OPT_QUESTION + REP_TEMPORARY },
		{ 0 },
	};
	int c, at, rc = 0;
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, "ho:", opts, &at)) != -1) {
		switch (c) {
		case 'o': a->out = optarg; break;
		case OPT_FORCE: a->force = true; break;
		case OPT_BASE: a->base = optarg; break;
		case OPT_BASE_PID: rc = parse_pid("--base-pid", optarg, &a->base_pid); break;
		case OPT_PID: rc = parse_pid("--pid", optarg, &a->pid); break;
		case 'h': fputs(usage, stdout); exit(0);
		default:
			if (c >= OPT_QUESTION && c <= OPT_LAST_QUESTION) {
				rc = parse_question(a, c, opts[at].name);
				break;
			}
			return fail(EXIT_USAGE, "unknown or incomplete option '%s' (see --help)",
			            argv[optind - 1]);
		}
	}
	if (rc)
		return rc;
	if (optind != argc - 1)
		return fail(EXIT_USAGE, "expected one database (see --help)");
	a->db = argv[optind];
	if (!a->out)
		return fail(EXIT_USAGE, "-o REPORT.html is required (see --help)");
	return check_base(a);
}

/* The page: its first part, the data, the rest (rep_page.c, generated). */
static int write_page(struct q_db *db, const void *ctx, FILE *f)
{
	fputs(rep_page_head, f);
	int rc = rep_write_json(db, ctx, f);
	fputs(rep_page_tail, f);
	return rc;
}

/* One warning line per thing the whole run's answers lack, per process. */
static int warn_lacks(struct q_db *db, const struct rep_report *r)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (q_write_lacks(db, &r->procs[i].peak, "trace-report: warning: ", stderr))
			return -1;
	return 0;
}

static int report(const struct args *a)
{
	char err[OPEN_ERR];
	struct q_db *db = q_open(a->db, err, sizeof err);
	if (!db)
		return fail(EXIT_INPUT, "%s", err);
	struct rep_report r = { .db_path = a->db };
	int rc = q_output_ok(db, a->out, a->force);
	if (rc) {
		rc = fail(EXIT_OUTPUT, "%s", q_errmsg(db));
	} else if (rep_collect(db, &r) || rep_dict_build(db, &r) || warn_lacks(db, &r)) {
		rc = fail(EXIT_INPUT, "%s", *q_errmsg(db) ? q_errmsg(db) : "out of memory");
	} else if ((rc = q_write_atomic(db, a->out, a->force, write_page, &r))) {
		rc = fail(rc == Q_OUTPUT ? EXIT_OUTPUT : EXIT_INPUT, "%s", q_errmsg(db));
	}
	rep_free(&r);
	q_close(db);
	return rc;
}

/* ---- --base: comparing two runs ------------------------------------------ */

static int write_diff_page(struct q_db *db, const void *ctx, FILE *f)
{
	(void)db;
	fputs(rep_page_head, f);
	int rc = rep_write_diff_json(ctx, f);
	fputs(rep_page_tail, f);
	return rc;
}

/* Opens one run's database, its frames named by function and file (as
 * trace-snap --base), and finds its process. Returns the exit code; a
 * failure's line names the database. */
static int open_run(const char *path, bool base, int64_t pid, struct rep_run *r)
{
	char err[OPEN_ERR];
	r->db_path = path;
	if (!(r->db = q_open(path, err, sizeof err)))
		return fail(EXIT_INPUT, "%s%s", base ? "--base " : "", err);
	q_by_files(r->db);
	r->facts.proc = pid ? q_process(r->db, pid) : q_default_process(r->db);
	if (r->facts.proc)
		return 0;
	if (pid)
		return fail(EXIT_NOT_FOUND, "%s: no process with pid %lld in the database", path,
		            (long long)pid);
	return fail(EXIT_NOT_FOUND, "%s: the database holds no process", path);
}

/* The question of a asked of run r, in its own instants. */
static int ask_run(const struct args *a, bool base, struct rep_run *r)
{
	const struct q_process *p = r->facts.proc;
	int64_t t1 = p->t_start, t2 = p->t_end;
	int rc = 0;
	if (a->question == REP_AT)
		rc = q_time(r->db, p->pid, a->arg, &t2);
	else if (a->question == REP_GROWTH || a->question == REP_STEADY)
		rc = q_window(r->db, p->pid, a->arg, &t1, &t2);
	if (rc)
		return fail(rc == Q_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_USAGE, "%s%s%s%s",
		            base ? "--base " : "", base ? r->db_path : "", base ? ": " : "",
		            q_errmsg(r->db));
	if (rep_ask(r->db, a->question, p->pid, t1, t2, &r->p))
		return fail(EXIT_INPUT, "%s", q_errmsg(r->db));
	return q_write_lacks(r->db, &r->p, base ? "trace-report: warning: base: "
	                                        : "trace-report: warning: new: ", stderr)
	       ? fail(EXIT_INPUT, "%s", q_errmsg(r->db)) : 0;
}

/* trace-report NEW --base OLD: the output first (its failures are the
 * user's), then each run's answer, then the comparison. */
static int compare(const struct args *a)
{
	struct rep_diff d = { 0 };
	struct rep_run *b = &d.run[Q_SIDE_BASE], *n = &d.run[Q_SIDE_NEW];
	int rc = open_run(a->db, false, a->pid, n);
	if (!rc)
		rc = open_run(a->base, true, a->base_pid, b);
	if (!rc && (q_output_ok(n->db, a->out, a->force) || q_output_ok(b->db, a->out, a->force)))
		rc = fail(EXIT_OUTPUT, "%s", *q_errmsg(n->db) ? q_errmsg(n->db) : q_errmsg(b->db));
	if (!rc)
		rc = ask_run(a, true, b);
	if (!rc)
		rc = ask_run(a, false, n);
	if (!rc && rep_compare(&d))
		rc = fail(EXIT_INPUT, "%s", *q_errmsg(b->db) ? q_errmsg(b->db)
		                          : *q_errmsg(n->db) ? q_errmsg(n->db) : "out of memory");
	if (!rc && (rc = q_write_atomic(n->db, a->out, a->force, write_diff_page, &d)))
		rc = fail(rc == Q_OUTPUT ? EXIT_OUTPUT : EXIT_INPUT, "%s", q_errmsg(n->db));
	rep_diff_free(&d);
	return rc;
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	int rc = parse(argc, argv, &a);
	return rc ? rc : a.base ? compare(&a) : report(&a);
}
