/*
 * trace_record.c - trace-record: runs a program with libheapreel.so preloaded
 * and the recorder's options set, waits for it, says where the trace went
 * (and how many more the programs it exec'd and the processes it forked
 * wrote beside it) and exits with the program's status.
 *
 *   trace-record [-o PATH|DIR/] [--force] [--sample BYTES] [--paused] [--depth N]
 *                -- PROGRAM ARGS...
 *   trace-record -p PID [--for DURATION] [-o PATH|DIR/] [--force]
 *
 * -p attaches to a running process instead (trace_attach.c).
 *
 * libheapreel.so is looked for relative to this executable (the libdir of
 * its own install, or beside it in the build tree), then in the libdir it
 * was configured for (REC_LIBDIR), and preloaded by its absolute path (a
 * relative one fails in every child that changes directory). LD_PRELOAD
 * keeps what the caller had, after the library. A run's traces
 * (its forks and execs write run.trc.1, ...) go to a directory of its own:
 * DIR/ (-o ending in '/' or naming a directory: made if missing, else it
 * must be empty), by default heapreel-out/PROGRAM.YYYYmmdd-HHMMSS/ as
 * ./heapreel profile names them. -o PATH names one trace file instead
 * (%p = the pid). It says the exact command that imports the run.
 *
 * Exit status: the program's; 128 + N if signal N killed it; 127 if the
 * program could not be run; before running anything, 2 for a usage error,
 * 3 if the trace or an earlier run's PATH.N beside it exists (without
 * --force; --force replaces only traces) or the run directory is not
 * empty, 1 if it cannot record (directory missing or not writable, the
 * library not found). While waiting it ignores SIGINT and SIGQUIT (the
 * terminal sends them to the program too) and passes SIGTERM and SIGHUP
 * on.
 *
 * Must never: run the program when it cannot record it, print more than
 * one line of its own on success (a .ring left beside the trace adds one),
 * leave a run directory it made when the program could not be run, or
 * replace the caller's LD_PRELOAD.
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
#include "trace_format.h"
#include "trace_record.h"

#ifndef REC_LIBDIR
#define REC_LIBDIR "/usr/local/lib"       /* meson passes prefix/libdir */
#endif
#ifndef REC_LIBDIR_FROM_BIN
#define REC_LIBDIR_FROM_BIN "../lib"      /* meson passes libdir seen from bindir */
#endif

#define LIBREC "libheapreel.so"
#define EXIT_NOEXEC 127
#define SIGNAL_BASE 128            /* shells' convention: killed by N -> 128 + N */
#define RUN_PARENT "heapreel-out"  /* default run directories go here, as ./heapreel profile's */
#define RUN_TRACE "run.trc"        /* a run directory's first trace (then run.trc.1, ...) */
#define RUN_DB "run.db"            /* the database the printed import command writes */
#define RUN_STAMP "%Y%m%d-%H%M%S"  /* PROGRAM.STAMP: a default run directory's name */
#define RUN_DIR_MODE 0700          /* private, like the traces in it */

static const char usage_text[] =
	"usage: trace-record [options] -- PROGRAM [ARGS...]\n"
	"  -o, --output DIR/   the run's directory: made if missing, else empty;\n"
	"                      traces DIR/run.trc, and run.trc.N for its forks and\n"
	"                      execs (default heapreel-out/PROGRAM.YYYYmmdd-HHMMSS/)\n"
	"  -o, --output PATH   one trace file instead (%p = pid)\n"
	"  -f, --force         replace an existing trace file, and the traces an earlier\n"
	"                      run's forks and execs left beside it (PATH.N)\n"
	"  --sample BYTES      record a Poisson sample, one every BYTES allocated\n"
	"                      on average\n"
	"  --paused            start with recording stopped (until trace-ctl PID\n"
	"                      start, or rec_start)\n"
	"  --depth N           stack frames kept, 1 to 256 (default 64)\n"
	"  --max-size SIZE     bounded recording: the trace is a ring of SIZE bytes\n"
	"                      (K, M, G suffixes; at least 4M) keeping the latest window\n"
	"  -p, --pid PID       attach to a running process instead of running a program:\n"
	"                      record from now until Ctrl-C, --for or its end, then\n"
	"                      detach (it runs on); with -o and --force only\n"
	"  --for DURATION      with -p: record this long (60s, 1.5m, 500ms; a bare number\n"
	"                      is seconds)\n"
	"\n"
	"Exit status: the program's; 128+N if signal N killed it; 127 the program\n"
	"could not be run; before running it: 1 cannot record (directory missing\n"
	"or not writable), 2 usage error, 3 the trace or an earlier run's PATH.N\n"
	"exists (no --force) or the run directory is not empty. With -p: 0\n"
	"recorded and detached (or the process ended); 1 cannot record (also:\n"
	"gdb missing, the load failed); 2 usage; 3 as above; 4 no such process;\n"
	"6 not permitted to trace it (ptrace_scope); 7 another user's process;\n"
	"8 a static program (no dynamic loader); 9 already being recorded.\n";

enum { OPT_SAMPLE = 256, OPT_PAUSED, OPT_DEPTH, OPT_MAX_SIZE, OPT_FOR, OPT_HELP };

static const struct option options[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "force", no_argument, NULL, 'f' },
	{ "sample", required_argument, NULL, OPT_SAMPLE },
	{ "paused", no_argument, NULL, OPT_PAUSED },
	{ "depth", required_argument, NULL, OPT_DEPTH },
	{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
	{ "pid", required_argument, NULL, 'p' },
	{ "for", required_argument, NULL, OPT_FOR },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 }
};

static pid_t child;

int rec_fail(int code, const char *fmt, ...)
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
	return rec_fail(-1, "%s %s: expected a number from %" PRIu64 " to %" PRIu64, opt, s, lo, hi);
}

/* Is dir/name readable? Then out holds its absolute, resolved path. */
static int file_in(const char *dir, const char *name, char *out)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", dir, name);
	return n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0 &&
	       realpath(path, out) ? 0 : -1;
}

/* This executable's directory into dir (PATH_MAX bytes); 0 or -1. */
static int own_dir(char *dir)
{
	ssize_t n = readlink("/proc/self/exe", dir, PATH_MAX - 1);
	char *slash = n > 0 ? memrchr(dir, '/', (size_t)n) : NULL;
	if (!slash)
		return -1;
	*slash = 0;
	return 0;
}

/* The library name of this trace-record's own install or build tree,
 * found from /proc/self/exe: REC_LIBDIR_FROM_BIN relative to it (an
 * install, also one staged under DESTDIR or moved), then beside it (the
 * build tree); else the configured REC_LIBDIR. out (PATH_MAX bytes) gets
 * an absolute path, since the program may change directory before it execs
 * another; 0 or -1. */
int rec_find_beside(const char *name, char *out)
{
	char self[PATH_MAX], dir[PATH_MAX];
	if (own_dir(self) == 0) {
		int m = snprintf(dir, sizeof dir, "%s/%s", self, REC_LIBDIR_FROM_BIN);
		if ((*REC_LIBDIR_FROM_BIN && m > 0 && (size_t)m < sizeof dir &&
		     file_in(dir, name, out) == 0) || file_in(self, name, out) == 0)
			return 0;
	}
	return file_in(REC_LIBDIR, name, out);
}

int rec_find_tool(const char *name, char *out)
{
	char self[PATH_MAX];
	return own_dir(self) == 0 ? file_in(self, name, out) : -1;
}

/* Is the LD_PRELOAD entry tok a libheapreel.so, whatever its directory? */
static int is_librec(const char *tok)
{
	const char *base = strrchr(tok, '/');
	return !strcmp(base ? base + 1 : tok, LIBREC);
}

/* LD_PRELOAD with lib first and the caller's entries after it, but no
 * other libheapreel.so (an installed one, say): one recorder, the one found.
 * First, because the first object that defines malloc wins: behind a
 * preloaded jemalloc or tcmalloc the recorder would see no allocation,
 * while in front of one it records them and passes them on (RTLD_NEXT). */
static char *preload_with(const char *lib)
{
	const char *have = getenv("LD_PRELOAD");
	size_t need = strlen(lib) + (have ? strlen(have) : 0) + 2;
	char *v = malloc(need);
	char *copy = strdup(have ? have : "");
	if (!v || !copy) {
		free(v);
		free(copy);
		return NULL;
	}
	size_t n = (size_t)snprintf(v, need, "%s", lib);
	/* entries are separated by spaces or colons (ld.so(8)) */
	for (char *save, *tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save))
		if (!is_librec(tok))
			n += (size_t)snprintf(v + n, need - n, ":%s", tok);
	free(copy);
	return v;
}

/* path made absolute (relative to the working directory) in out. */
static int absolute(const char *path, char *out, size_t size)
{
	char cwd[PATH_MAX];
	int n;
	if (path[0] == '/')
		n = snprintf(out, size, "%s", path);
	else if (getcwd(cwd, sizeof cwd))
		n = snprintf(out, size, "%s/%s", cwd, path);
	else
		return -1;
	return n < 0 || (size_t)n >= size ? -1 : 0;
}



/* Does -o name a run directory (ends in '/' or is one)? */
static int names_dir(const char *o)
{
	struct stat st;
	size_t n = strlen(o);
	return (n && o[n - 1] == '/') || (stat(o, &st) == 0 && S_ISDIR(st.st_mode));
}

/* Makes the run directory dir or takes an existing empty one: 0, or an
 * exit code after one line. */
static int take_run_dir(struct rec_dest *d)
{
	if (mkdir(d->dir, RUN_DIR_MODE) == 0) {
		d->made_dir = 1;
		return 0;
	}
	if (errno != EEXIST)
		return rec_fail(EXIT_CANNOT, "cannot make the run directory %s: %s", d->dir,
			    strerror(errno));
	DIR *dir = opendir(d->dir);
	if (!dir)
		return rec_fail(EXIT_CANNOT, "%s: %s", d->dir, strerror(errno));
	struct dirent *de;
	int entries = 0;
	while ((de = readdir(dir)))
		entries += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(dir);
	if (entries)
		return rec_fail(EXIT_EXISTS, "%s is not empty: a run's traces go to a directory of "
			    "their own (choose another -o)", d->dir);
	return 0;
}

/* The default run directory, RUN_PARENT/PROGRAM.STAMP[.N] in the working
 * directory (N when another run of the same second took the name): 0, or
 * an exit code after one line. */
static int default_run_dir(struct rec_dest *d, const char *program)
{
	const char *base = strrchr(program, '/');
	char stamp[32];
	time_t now = time(NULL);
	strftime(stamp, sizeof stamp, RUN_STAMP, localtime(&now));
	if (absolute(RUN_PARENT, d->parent, sizeof d->parent) < 0)
		return rec_fail(EXIT_CANNOT, "cannot make " RUN_PARENT " absolute: %s", strerror(errno));
	if (mkdir(d->parent, RUN_DIR_MODE) == 0)
		d->made_parent = 1;
	else if (errno != EEXIST)
		return rec_fail(EXIT_CANNOT, "cannot make %s: %s", d->parent, strerror(errno));
	for (unsigned k = 0;; k++) {
		int n = k ? snprintf(d->dir, sizeof d->dir, "%s/%s.%s.%u", d->parent,
				     base ? base + 1 : program, stamp, k)
			  : snprintf(d->dir, sizeof d->dir, "%s/%s.%s", d->parent,
				     base ? base + 1 : program, stamp);
		if (n < 0 || (size_t)n >= sizeof d->dir)
			return rec_fail(EXIT_CANNOT, "%s: name too long", d->parent);
		if (mkdir(d->dir, RUN_DIR_MODE) == 0) {
			d->made_dir = 1;
			return 0;
		}
		if (errno != EEXIST)
			return rec_fail(EXIT_CANNOT, "cannot make %s: %s", d->dir, strerror(errno));
	}
}

/* Can a trace be created in the directory of the file template tmpl? 0, or
 * EXIT_CANNOT after one line: the program must not run unrecorded. */
static int writable_dir(const char *tmpl)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(tmpl, '/') - tmpl), tmpl);
	if (access(dir[0] ? dir : "/", W_OK | X_OK) != 0)
		return rec_fail(EXIT_CANNOT, "cannot record into %s: %s", dir[0] ? dir : "/",
			    strerror(errno));
	return 0;
}

/* Chooses where the traces go (-o, else REC_OUT, else a default run
 * directory) and prepares it: 0, or an exit code after one line. */
int rec_choose_dest(struct rec_dest *d, const char *o, const char *program)
{
	int rc;
	if (o && !names_dir(o)) {
		if (absolute(o, d->tmpl, sizeof d->tmpl) < 0)
			return rec_fail(EXIT_CANNOT, "cannot make the trace path absolute: %s",
				    strerror(errno));
		return writable_dir(d->tmpl);
	}
	if (o && absolute(o, d->dir, sizeof d->dir) < 0)
		return rec_fail(EXIT_CANNOT, "cannot make the run directory absolute: %s",
			    strerror(errno));
	if ((rc = o ? take_run_dir(d) : default_run_dir(d, program)))
		return rc;
	size_t n = strlen(d->dir);
	while (n > 1 && d->dir[n - 1] == '/')
		d->dir[--n] = 0;
	if (snprintf(d->tmpl, sizeof d->tmpl, "%s/" RUN_TRACE, d->dir) >= (int)sizeof d->tmpl)
		return rec_fail(EXIT_CANNOT, "%s: name too long", d->dir);
	return 0;
}

/* Removes the directories d made: the program never ran, nothing is in them. */
void rec_unmake(const struct rec_dest *d)
{
	if (d->made_dir)
		rmdir(d->dir);
	if (d->made_parent)
		rmdir(d->parent);
}

/* Does the file at dirfd/name begin with magic? --force replaces only
 * traces (TF_FILE_MAGIC) and their rings (TF_RING_MAGIC). */
static int has_magic(int dirfd, const char *name, const void *magic, size_t len)
{
	char head[16];
	int fd = len > sizeof head ? -1 : openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, head, len);
	close(fd);
	return n == (ssize_t)len && !memcmp(head, magic, len);
}

static int is_trace_at(int dirfd, const char *name)
{
	return has_magic(dirfd, name, TF_FILE_MAGIC, TF_FILE_MAGIC_LEN);
}

static int is_ring_at(int dirfd, const char *name)
{
	uint64_t magic = TF_RING_MAGIC;
	return has_magic(dirfd, name, &magic, sizeof magic);
}

/* Is name base.N (1) or base.N.ring (2), what the forked and exec'd
 * processes of a run recorded as base write beside it (session.c)? */
static int child_name(const char *base, const char *name)
{
	size_t b = strlen(base), n;
	if (strncmp(name, base, b) || name[b] != '.' || !(n = strspn(name + b + 1, "0123456789")))
		return 0;
	name += b + 1 + n;
	return !*name ? 1 : !strcmp(name, ".ring") ? 2 : 0;
}

/* Traces an earlier run left beside path (path.N and their rings): this
 * run's children would be numbered after them and the import command's
 * glob would take them in. Without force they make the run refuse; with
 * force they go with the trace they belonged to, but only when every one
 * is a trace or a ring (checked before anything is removed). */
static int claim_children(const char *path, int force)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 1, slash ? path : ".");
	DIR *d = opendir(dir);
	if (!d)
		return 0;      /* the directory's own errors are reported when the trace is opened */
	int rc = 0, k;
	struct dirent *de;
	for (int removing = 0; !rc && removing < 2; removing++, rewinddir(d))
		while (!rc && (de = readdir(d))) {
			if (!(k = child_name(base, de->d_name)))
				continue;
			const char *n = de->d_name + strlen(base) + 1;   /* N or N.ring */
			if (!force)
				rc = rec_fail(EXIT_EXISTS, "%s.%s exists, left by an earlier run; not "
					      "recording beside it (--force replaces that run)", path, n);
			else if (!removing && !(k == 1 ? is_trace_at(dirfd(d), de->d_name)
						       : is_ring_at(dirfd(d), de->d_name)))
				rc = rec_fail(EXIT_EXISTS, "%s.%s exists and is not a trace; not "
					      "replacing the run, even with --force", path, n);
			else if (removing && unlinkat(dirfd(d), de->d_name, 0) && errno != ENOENT)
				rc = rec_fail(EXIT_CANNOT, "cannot replace %s.%s: %s", path, n,
					      strerror(errno));
		}
	closedir(d);
	return rc;
}

/* May the trace path be written? 0, or an exit code after one line. With
 * force an existing trace, its leftover .ring and the traces its run's
 * children wrote beside it are removed (the recorder never writes over a
 * file); nothing but a trace or its ring is ever replaced. */
int rec_claim_trace(const char *path, int force)
{
	struct stat st;
	char ring[PATH_MAX];
	if (lstat(path, &st) != 0)
		return claim_children(path, force);
	if (!force)
		return rec_fail(EXIT_EXISTS, "%s already exists; not replacing it (--force replaces "
			    "a trace)", path);
	if (!S_ISREG(st.st_mode) || !is_trace_at(AT_FDCWD, path))
		return rec_fail(EXIT_EXISTS, "%s exists and is not a trace; not replacing it, even "
			    "with --force", path);
	int rc = claim_children(path, force);
	if (rc)
		return rc;
	snprintf(ring, sizeof ring, "%s.ring", path);
	if (unlink(path) != 0 || (lstat(ring, &st) == 0 && S_ISREG(st.st_mode) && unlink(ring)))
		return rec_fail(EXIT_CANNOT, "cannot replace %s: %s", path, strerror(errno));
	return 0;
}

/* tmpl with every %p replaced by pid. */
void rec_expand(const char *tmpl, pid_t pid, char *out, size_t size)
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

/* Prints s as one shell word, quoted if it holds anything but plain
 * characters; with glob, each %p becomes an unquoted '*'. */
static void put_word(const char *s, int glob)
{
	static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_./:%+=@,-";
	int quote = s[strspn(s, plain)] != 0;
	if (quote)
		fputc('\'', stderr);
	for (; *s; s++) {
		if (glob && s[0] == '%' && s[1] == 'p') {
			fputs(quote ? "'*'" : "*", stderr);
			s++;
		} else if (*s == '\'') {
			fputs("'\\''", stderr);
		} else {
			fputc(*s, stderr);
		}
	}
	if (quote)
		fputc('\'', stderr);
}

/* Ends a line with the command that imports the run: its directory, else
 * the trace (with more: every trace of its template) into PATH.db. */
static void put_import(const char *tmpl, const char *path, const char *dir, int more)
{
	char db[PATH_MAX + sizeof "/" RUN_DB];   /* a directory or trace path and the suffix */
	fputs("trace-import ", stderr);
	if (*dir) {
		put_word(dir, 0);
		fputc(' ', stderr);
		snprintf(db, sizeof db, "%s/" RUN_DB, dir);
	} else {
		size_t n = strlen(path), ext = strlen(".trc");
		if (n > ext && !strcmp(path + n - ext, ".trc"))
			n -= ext;
		snprintf(db, sizeof db, "%.*s.db", (int)n, path);
		put_word(more && strstr(tmpl, "%p") ? tmpl : path, 1);
		fputs(more ? "* " : " ", stderr);
	}
	put_word(db, 0);
	fputc('\n', stderr);
}

/* Says where the run's traces went: the first process's, and those of the
 * programs it exec'd and the processes it forked, when they went to the
 * same directory (files of the template written since the run started). */
void rec_say_traces(const struct rec_dest *dst, const char *path, const struct timespec *start)
{
	const char *tmpl = dst->tmpl;
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
	/* a glob names them all (the importer reads a .ring the glob also
	 * lists with its trace) */
	if (!more)
		fprintf(stderr, "trace-record: trace written to %s; import it: ", path);
	else
		fprintf(stderr, "trace-record: %zu traces written: %s, and beside it %zu of the "
			"programs it exec'd and the processes it forked (%s%s%s%s); import them "
			"together: ", more + 1, path, more, first,
			more > 1 ? ", " : "", more > 1 ? second : "", more > 2 ? ", ..." : "");
	put_import(tmpl, path, dst->dir, more > 0);
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
	const char *out = NULL, *sample = NULL, *depth = NULL, *max_size = NULL;
	int paused = 0, force = 0, c, rc;
	struct rec_attach_opts at = { .pid = -1, .for_ns = -1 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:fhp:", options, NULL)) != -1) {
		switch (c) {
		case 'p': {
			uint64_t v;
			if (rec_parse_u64(optarg, 1, INT32_MAX, &v) < 0)
				return rec_fail(EXIT_USAGE, "-p %s: not a process id", optarg);
			at.pid = (long)v;
			break;
		}
		case OPT_FOR:
			if (tf_parse_duration(optarg, &at.for_ns))
				return rec_fail(EXIT_USAGE, "--for %s: expected a duration like 60s, 500ms,"
						" 1.5m, 1h or 5 (seconds)", optarg);
			break;
		case 'o':
			out = optarg;
			break;
		case 'f':
			force = 1;
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
				return rec_fail(EXIT_USAGE, "--max-size %s: expected a size of at least 4M"
					    " (bytes, or a number with K, M or G)", optarg);
			max_size = optarg;
			break;
		}
		case 'h':
		case OPT_HELP:
			fputs(usage_text, stdout);
			return 0;
		case ':':
			return rec_fail(EXIT_USAGE, "%s needs a value (--help for usage)", argv[optind - 1]);
		default:
			return rec_fail(EXIT_USAGE, "unknown option %s (--help for usage)", argv[optind - 1]);
		}
	}
	if (at.pid > 0) {
		if (optind < argc || sample || paused || depth || max_size)
			return rec_fail(EXIT_USAGE, "-p PID takes only --for, -o and --force (no program,"
					" --sample, --paused, --depth or --max-size)");
		at.out = out;
		at.force = force;
		return rec_attach(&at);
	}
	if (at.for_ns >= 0)
		return rec_fail(EXIT_USAGE, "--for goes with -p PID (trace-ctl PID record --for"
				" records a preloaded process for a while)");
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	char **prog = argv + optind;

	char lib[PATH_MAX];
	static struct rec_dest dst;
	if (rec_find_beside(LIBREC, lib) < 0)
		return rec_fail(EXIT_CANNOT, "cannot find %s in trace-record's own install or build tree, nor in %s",
			    LIBREC, REC_LIBDIR);
	if (!out && getenv("REC_OUT") && *getenv("REC_OUT"))
		out = getenv("REC_OUT");
	if ((rc = rec_choose_dest(&dst, out, prog[0])))
		return rc;
	char *preload = preload_with(lib);
	if (!preload || setenv("LD_PRELOAD", preload, 1) || setenv("REC_OUT", dst.tmpl, 1) ||
	    (sample && setenv("REC_SAMPLE", sample, 1)) ||
	    (paused && setenv("REC_PAUSED", "1", 1)) || (depth && setenv("REC_DEPTH", depth, 1)) ||
	    (max_size && setenv("REC_MAX_SIZE", max_size, 1)))
		return rec_fail(EXIT_CANNOT, "out of memory");
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
		return rec_fail(EXIT_CANNOT, "cannot make a pipe: %s", strerror(errno));
	char path[PATH_MAX];
	struct timespec start;
	/* file times come from the coarse clock, which may lag the fine one */
	clock_gettime(CLOCK_REALTIME_COARSE, &start);
	child = fork();
	if (child < 0)
		return rec_fail(EXIT_CANNOT, "cannot start %s: %s", prog[0], strerror(errno));
	if (child == 0) {
		close(report[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		rec_expand(dst.tmpl, getpid(), path, sizeof path);
		if (!(rc = rec_claim_trace(path, force))) {
			execvp(prog[0], prog);
			rc = rec_fail(EXIT_NOEXEC, "cannot run %s: %s", prog[0], strerror(errno));
		}
		ssize_t w = write(report[1], "x", 1);
		(void)w;
		_exit(rc);
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
			return rec_fail(EXIT_CANNOT, "waiting for %s: %s", prog[0], strerror(errno));
	int code = WIFSIGNALED(status) ? SIGNAL_BASE + WTERMSIG(status) : WEXITSTATUS(status);
	if (failed > 0) {
		rec_unmake(&dst);
		return code; /* the program never ran: the child said why */
	}
	rec_expand(dst.tmpl, child, path, sizeof path);
	rec_say_traces(&dst, path, &start);
	return code;
}
