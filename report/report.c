/* report.c - trace-report: writes one self-contained HTML page about a
 * heapreel database (a timeline to select an instant or a window in, a
 * flame graph, a table of functions, the run's facts), which works offline
 * from file://: its HTML, CSS, JavaScript and libraries are inlined at
 * build time (embed_page.py), its data is written here (rep.h).
 *
 * The only place that prints: every failure is one line "trace-report: ..."
 * on stderr and an exit code from README "Exit codes"; what the run's
 * answers lack (a loss, the damage) is one "trace-report: warning: ..."
 * line each, and shown in the page too.
 * Never: SQL here; replace an existing file without --force, or the
 * database it reads even with it (q_write_atomic).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>

#include "rep.h"

enum {
	EXIT_INPUT = 1,        /* the database: missing, not ours, incomplete, unreadable */
	EXIT_USAGE = 2,        /* bad flags */
	EXIT_OUTPUT = 3,       /* the output exists, is the database, or cannot be written */
};

/* Room for q_open's one line about a database it refuses. */
#define OPEN_ERR 600

static const char usage[] =
	"usage: trace-report DB -o REPORT.html [--force]\n"
	"Writes one HTML page about the heapreel database DB that works offline:\n"
	"a timeline of the live heap (and RSS) where a click selects an instant and\n"
	"a drag a window (snapshot, growth or steady), buttons for the peak, the RSS\n"
	"peak, the leaks and the temporary allocations, a flame graph, a table of\n"
	"functions and the run's facts. Its selection is in the URL fragment:\n"
	"#at=T, #growth=T1..T2, #steady=T1..T2, #peak, #leaks (T as trace-snap).\n"
	"  -o, --output FILE  the page to write (required)\n"
	"  --force            replace FILE if it exists\n"
	"  -h, --help         this text\n";

#define fail(code, ...) q_tool_fail("trace-report", code, __VA_ARGS__)

struct args {
	const char *db, *out;
	bool force;
};

enum { OPT_FORCE = 256 };

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': a->out = optarg; break;
		case OPT_FORCE: a->force = true; break;
		case 'h': fputs(usage, stdout); exit(0);
		default:
			return fail(EXIT_USAGE, "unknown or incomplete option '%s' (see --help)",
			            argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return fail(EXIT_USAGE, "expected one database (see --help)");
	a->db = argv[optind];
	if (!a->out)
		return fail(EXIT_USAGE, "-o REPORT.html is required (see --help)");
	return 0;
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

int main(int argc, char **argv)
{
	struct args a = { 0 };
	int rc = parse(argc, argv, &a);
	return rc ? rc : report(&a);
}
