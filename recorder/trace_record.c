/*
 * trace_record.c - trace-record: runs a program with libheapreel.so preloaded
 * and the recorder's options set, waits for it, says where the trace went
 * (and how many more the programs it exec'd and the processes it forked
 * wrote beside it) and exits with the program's status.
 *
 *   trace-record [-o PATH] [--sample BYTES] [--paused] [--depth N] -- PROGRAM ARGS...
 *
 * libheapreel.so is looked for relative to this executable (the libdir of
 * its own install, or beside it in the build tree), then in the libdir it
 * was configured for (REC_LIBDIR); the path preloaded is always absolute.
 * LD_PRELOAD keeps what the caller had, with the library appended. The
 * trace path is made absolute (%p = the program's pid); the default is
 * PROGRAM.%p.trc in the working directory. An existing file is never overwritten: the program is
 * not started.
 *
 * Exit status: the program's; 128 + N if signal N killed it; 2 for a usage
 * error, 127 if the program could not be run, 1 for any other failure of
 * trace-record itself. While waiting it ignores SIGINT and SIGQUIT (the
 * terminal sends them to the program too) and passes SIGTERM and SIGHUP on.
 *
 * Must never: print more than one line of its own on success, or replace
 * the caller's LD_PRELOAD.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rec_common.h"

#ifndef REC_LIBDIR
#define REC_LIBDIR "/usr/local/lib"       /* meson passes prefix/libdir */
#endif
#ifndef REC_LIBDIR_FROM_BIN
#define REC_LIBDIR_FROM_BIN "../lib"      /* meson passes libdir seen from bindir */
#endif

#define LIBREC "libheapreel.so"
#define EXIT_USAGE 2
#define EXIT_NOEXEC 127
#define SIGNAL_BASE 128            /* shells' convention: killed by N -> 128 + N */

static const char usage_text[] =
	"usage: trace-record [options] -- PROGRAM [ARGS...]\n"
	"  -o, --output PATH   trace file (%p = pid; default PROGRAM.%p.trc here)\n"
	"  --sample BYTES      record a Poisson sample, one every BYTES allocated on average\n"
	"  --paused            start with recording stopped (trace-ctl PID start, rec_start)\n"
	"  --depth N           stack frames kept, 1 to 256 (default 64)\n"
	"  --max-size SIZE     bounded recording: the trace is a ring of SIZE bytes\n"
	"                      (K, M, G suffixes; at least 4M) keeping the latest window\n";

enum { OPT_SAMPLE = 256, OPT_PAUSED, OPT_DEPTH, OPT_MAX_SIZE, OPT_HELP };

static const struct option options[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "sample", required_argument, NULL, OPT_SAMPLE },
	{ "paused", no_argument, NULL, OPT_PAUSED },
	{ "depth", required_argument, NULL, OPT_DEPTH },
	{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 }
};

static pid_t child;

__attribute__((format(printf, 2, 3)))
static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("trace-record: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

/* Checks an option's decimal value, from lo to hi: 0, or -1 after saying
 * what is wrong. */
static int number(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
	uint64_t v;
	if (rec_parse_u64(s, lo, hi, &v) == 0)
		return 0;
	return fail(-1, "%s %s: expected a number from %" PRIu64 " to %" PRIu64, opt, s, lo, hi);
}

/* Is dir/LIBREC readable? Then out holds its absolute, resolved path. */
static int lib_in(const char *dir, char *out)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", dir, LIBREC);
	return n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0 &&
	       realpath(path, out) ? 0 : -1;
}

/* The library of this trace-record's own install or build tree, found from
 * /proc/self/exe: REC_LIBDIR_FROM_BIN relative to it (an install, also one
 * staged under DESTDIR or moved), then beside it (the build tree); else the
 * configured REC_LIBDIR. out (PATH_MAX bytes) gets an absolute path, since
 * the program may change directory before it execs another; 0 or -1. */
static int find_librec(char *out)
{
	char self[PATH_MAX], dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	char *slash = n > 0 ? memrchr(self, '/', (size_t)n) : NULL;
	if (slash) {
		*slash = 0;
		int m = snprintf(dir, sizeof dir, "%s/%s", self, REC_LIBDIR_FROM_BIN);
		if ((*REC_LIBDIR_FROM_BIN && m > 0 && (size_t)m < sizeof dir && lib_in(dir, out) == 0) ||
		    lib_in(self, out) == 0)
			return 0;
	}
	return lib_in(REC_LIBDIR, out);
}

/* LD_PRELOAD with lib appended (once). */
static char *preload_with(const char *lib)
{
	const char *have = getenv("LD_PRELOAD");
	size_t need = strlen(lib) + (have ? strlen(have) : 0) + 2;
	char *v = malloc(need);
	if (!v)
		return NULL;
	if (!have || !*have) {
		snprintf(v, need, "%s", lib);
		return v;
	}
	/* entries are separated by spaces or colons (ld.so(8)) */
	char *copy = strdup(have);
	if (!copy) {
		free(v);
		return NULL;
	}
	int present = 0;
	for (char *save, *tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save))
		present |= !strcmp(tok, lib);
	free(copy);
	if (present)
		snprintf(v, need, "%s", have);
	else
		snprintf(v, need, "%s:%s", have, lib);
	return v;
}

/* The trace path template made absolute: out must hold PATH_MAX. */
static int absolute(const char *tmpl, const char *program, char *out, size_t size)
{
	char def[PATH_MAX];
	if (!tmpl) {
		const char *base = strrchr(program, '/');
		snprintf(def, sizeof def, "%s.%%p.trc", base ? base + 1 : program);
		tmpl = def;
	}
	if (tmpl[0] == '/') {
		snprintf(out, size, "%s", tmpl);
		return 0;
	}
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof cwd))
		return -1;
	int n = snprintf(out, size, "%s/%s", cwd, tmpl);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* tmpl with every %p replaced by pid. */
static void expand(const char *tmpl, pid_t pid, char *out, size_t size)
{
	size_t o = 0;
	for (const char *s = tmpl; *s && o + 1 < size; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			int n = snprintf(out + o, size - o, "%d", (int)pid);
			o += n > 0 ? (size_t)n : 0;
			s++;
		} else {
			out[o++] = *s;
		}
	}
	out[o < size ? o : size - 1] = 0;
}

/* Does name fit the template's last component pat, where %p stands for a
 * pid, with the ".N" an exec'd program's (or a pid-less fork child's) trace
 * adds (session.c)? */
static int of_template(const char *pat, const char *name)
{
	static const char digits[] = "0123456789";
	while (*pat) {
		if (pat[0] == '%' && pat[1] == 'p') {
			size_t n = strspn(name, digits);
			if (!n)
				return 0;
			name += n;
			pat += 2;
		} else if (*pat++ != *name++) {
			return 0;
		}
	}
	if (!*name)
		return 1;
	return name[0] == '.' && name[1] && !name[1 + strspn(name + 1, digits)];
}

/* Shorter names first, so NAME.2 comes before NAME.10 and pid 99 before 100. */
static int name_before(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	return la != lb ? la < lb : strcmp(a, b) < 0;
}

static int before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec != b->tv_sec ? a->tv_sec < b->tv_sec : a->tv_nsec < b->tv_nsec;
}

/* Says where the run's traces went: the first process's, and those of the
 * programs it exec'd and the processes it forked, when they went to the
 * same directory (files of the template written since the run started). */
static void say_traces(const char *tmpl, const char *path, const struct timespec *start)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "trace-record: no trace was written to %s\n", path);
		return;
	}
	const char *slash = strrchr(tmpl, '/'), *base = strrchr(path, '/') + 1;
	char dir[PATH_MAX], first[NAME_MAX + 1] = "", second[NAME_MAX + 1] = "";
	snprintf(dir, sizeof dir, "%.*s", (int)(base - path), path);
	size_t more = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, base) || !of_template(slash + 1, de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) || before(&st.st_mtim, start))
			continue;
		more++;
		if (!*first || name_before(de->d_name, first)) {
			snprintf(second, sizeof second, "%s", first);
			snprintf(first, sizeof first, "%s", de->d_name);
		} else if (!*second || name_before(de->d_name, second)) {
			snprintf(second, sizeof second, "%s", de->d_name);
		}
	}
	if (d)
		closedir(d);
	/* without %p they are all PATH.N: a glob names them (the importer reads
	 * a .ring the glob also lists with its trace) */
	int fixed = !strstr(slash + 1, "%p");
	if (!more)
		fprintf(stderr, "trace-record: trace written to %s\n", path);
	else
		fprintf(stderr, "trace-record: %zu traces written: %s, and beside it %zu of the "
			"programs it exec'd and the processes it forked (%s%s%s%s); import them "
			"together: trace-import %s%s DB\n", more + 1, path, more, first,
			more > 1 ? ", " : "", more > 1 ? second : "", more > 2 ? ", ..." : "",
			fixed ? path : "TRACE...", fixed ? "*" : "");
	char ring[PATH_MAX];
	if ((size_t)snprintf(ring, sizeof ring, "%s.ring", path) < sizeof ring &&
	    lstat(ring, &st) == 0)
		fprintf(stderr, "trace-record: %s is beside it: what the program's threads "
			"recorded after it began to exit (or was killed, or could not write "
			"the trace); trace-import reads it with the trace\n", ring);
}

static void pass_on(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	const char *out = getenv("REC_OUT"), *sample = NULL, *depth = NULL, *max_size = NULL;
	int paused = 0, c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:h", options, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case OPT_SAMPLE:
			if (number("--sample", optarg, 0, REC_PERIOD_MAX) < 0)
				return EXIT_USAGE;
			sample = optarg;
			break;
		case OPT_PAUSED:
			paused = 1;
			break;
		case OPT_DEPTH:
			if (number("--depth", optarg, 1, REC_DEPTH_MAX) < 0)
				return EXIT_USAGE;
			depth = optarg;
			break;
		case OPT_MAX_SIZE: {
			uint64_t v;
			if (rec_parse_size(optarg, REC_MAX_SIZE_MIN, REC_MAX_SIZE_MAX, &v) < 0)
				return fail(EXIT_USAGE, "--max-size %s: expected a size of at least 4M"
					    " (bytes, or a number with K, M or G)", optarg);
			max_size = optarg;
			break;
		}
		case 'h':
		case OPT_HELP:
			fputs(usage_text, stdout);
			return 0;
		case ':':
			return fail(EXIT_USAGE, "%s needs a value (--help for usage)", argv[optind - 1]);
		default:
			return fail(EXIT_USAGE, "unknown option %s (--help for usage)", argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	char **prog = argv + optind;

	char lib[PATH_MAX], tmpl[PATH_MAX];
	if (find_librec(lib) < 0)
		return fail(1, "cannot find %s in trace-record's own install or build tree, nor in %s", LIBREC, REC_LIBDIR);
	if (absolute(out, prog[0], tmpl, sizeof tmpl) < 0)
		return fail(1, "cannot make the trace path absolute: %s", strerror(errno));
	char *preload = preload_with(lib);
	if (!preload || setenv("LD_PRELOAD", preload, 1) || setenv("REC_OUT", tmpl, 1) ||
	    (sample && setenv("REC_SAMPLE", sample, 1)) ||
	    (paused && setenv("REC_PAUSED", "1", 1)) || (depth && setenv("REC_DEPTH", depth, 1)) ||
	    (max_size && setenv("REC_MAX_SIZE", max_size, 1)))
		return fail(1, "out of memory");
	free(preload);

	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	struct sigaction sa = { .sa_handler = pass_on };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	/* The child reports a failure before or at exec through this pipe;
	 * a successful exec closes it (O_CLOEXEC) unwritten. */
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return fail(1, "cannot make a pipe: %s", strerror(errno));
	char path[PATH_MAX];
	struct timespec start;
	/* file times come from the coarse clock, which may lag the fine one */
	clock_gettime(CLOCK_REALTIME_COARSE, &start);
	child = fork();
	if (child < 0)
		return fail(1, "cannot start %s: %s", prog[0], strerror(errno));
	if (child == 0) {
		close(report[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		expand(tmpl, getpid(), path, sizeof path);
		struct stat st;
		if (lstat(path, &st) == 0) {
			fail(0, "%s already exists; not overwriting it (choose another -o)", path);
		} else {
			execvp(prog[0], prog);
			fail(0, "cannot run %s: %s", prog[0], strerror(errno));
		}
		ssize_t w = write(report[1], "x", 1);
		(void)w;
		_exit(EXIT_NOEXEC);
	}
	close(report[1]);
	char byte;
	ssize_t failed;
	while ((failed = read(report[0], &byte, 1)) < 0 && errno == EINTR)
		;
	close(report[0]);
	int status;
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return fail(1, "waiting for %s: %s", prog[0], strerror(errno));
	int code = WIFSIGNALED(status) ? SIGNAL_BASE + WTERMSIG(status) : WEXITSTATUS(status);
	if (failed > 0)
		return code; /* the program never ran: the child said why */
	expand(tmpl, child, path, sizeof path);
	say_traces(tmpl, path, &start);
	return code;
}
