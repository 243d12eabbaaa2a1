/*
 * trace_attach.c - trace-record -p PID: records a process that is already
 * running, from now until Ctrl-C, --for DURATION or the process's end, then
 * detaches and leaves it running unrecorded.
 *
 * Loading: gdb in batch mode (as heaptrack does) stops the process, calls
 * dlopen in it for libheapreel-attach.so, then the library's
 * heapreel_attach(TRACE), which starts the trace and routes the allocation
 * calls through the GOT (attach.c), and detaches. Why gdb and not a ptrace
 * injector of our own: gdb stops every thread, calls a function in the
 * process with the right ABI (stack alignment, red zone, an interrupted
 * system call restarted afterwards), finds dlopen without debug
 * information and puts every register back on any error, on every
 * architecture Debian ships; our own would redo that for x86_64 alone, its
 * bugs ours, inside someone's running service. The price is a dependency
 * (Debian's gdb; ./heapreel setup installs it) and gdb's start-up time,
 * during which the process runs; it is stopped only while gdb reads its
 * libraries and makes the two calls, which it makes only once the thread
 * is out of the allocator and the loader (SAFE_POINT_PY says why and how).
 * Detaching needs no ptrace: `trace-ctl
 * PID detach` asks the recorder, whose writer thread puts the GOT back and
 * closes the trace (control.c).
 *
 * No timeout stops gdb: the other threads run during its calls, and
 * dlopen waits while one of them holds the loader's lock (inside dlopen,
 * or a dl_iterate_phdr callback). Interrupting gdb then has it undo the
 * call, and that leaves the process holding dl_load_lock (dlopen takes it
 * before it waits for dl_load_write_lock, and the lock counts its owner
 * thread): every later dlopen by another thread would wait for ever. So
 * trace-record waits as long as the call does, Ctrl-C included.
 *
 * A second attach later finds the library loaded: dlopen returns it, and
 * heapreel_attach starts a new trace (no second copy is ever loaded: the
 * path of the one mapped is used).
 *
 * Refusals, one line each, with exit codes of their own (README "Exit
 * codes"): no such process (4); ptrace not permitted (6, naming
 * /proc/sys/kernel/yama/ptrace_scope and its value when it is set); a
 * process of another user (7); a statically linked program, or one
 * without the dynamic loader (8); a process already recorded (9:
 * libheapreel.so preloaded, or attached and not yet detached); gdb
 * missing, or the load failing (1).
 *
 * Must never: load a second recorder into a process, kill the process, or
 * leave it stopped.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <elf.h>

#include "trace_record.h"

#define LIB_ATTACH "libheapreel-attach.so"
#define LIB_PRELOAD "/libheapreel.so"      /* a preloaded recorder, as mapped */
#define PTRACE_SCOPE "/proc/sys/kernel/yama/ptrace_scope"
#define GDB "gdb"
#define OUTPUT_MAX 65536                   /* gdb's and trace-ctl's output kept */
#define RTLD_NOW_VALUE 2                   /* dlopen's RTLD_NOW, written into gdb's call */
#define NO_HANDLE (-100)                   /* the gdb call's answer when dlopen failed */
#define RESULT_TAG "heapreel-attach "     /* the line gdb prints with the answer */
#define UNSAFE_TAG "heapreel-unsafe"      /* what it prints when it found no safe point */
#define NO_PYTHON "Python scripting is not supported"  /* gdb-minimal's answer */
#define EXIT_GRACE_MS 2000                 /* an exit under way ends within this */
#define EXEC_WAIT_MS 2000                  /* an exec under way ends within this */
#define EXEC_STEP_NS 1000000L              /* looked at this often meanwhile */

/* heapreel_attach's answers (recorder/rec_internal.h REC_ATTACH_*). */
#define ANSWER_PRELOADED (-1)
#define ANSWER_BUSY (-2)

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* The first line of path into buf (no newline): its length, or -1. */
static ssize_t first_line(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return (ssize_t)strlen(buf);
}

/* Runs argv with stdout and stderr into out (NUL-terminated, cut at
 * size - 1), in a process group of its own (Ctrl-C is ours to handle);
 * its exit status, or -1 if it could not be run. */
static int run_captured(char *const argv[], char *out, size_t size)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t c = fork();
	if (c < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (c == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t r;
	char sink[4096];
	while ((r = read(p[0], got < size - 1 ? out + got : sink,
			 got < size - 1 ? size - 1 - got : sizeof sink)) != 0) {
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && got < size - 1)
			got += (size_t)r;
	}
	out[got] = 0;
	close(p[0]);
	int status;
	while (waitpid(c, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Is prog on PATH (or a path that can be run)? */
static int on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char dir[PATH_MAX];
	for (const char *s = path ? path : "/usr/bin:/bin"; *s;) {
		size_t n = strcspn(s, ":");
		if (snprintf(dir, sizeof dir, "%.*s/%s", (int)n, s, prog) < (int)sizeof dir &&
		    access(dir, X_OK) == 0)
			return 1;
		s += n + (s[n] == ':');
	}
	return 0;
}

/* The path of the first mapping of process pid whose path ends in tail,
 * into out; 1 if found. */
static int mapped(long pid, const char *tail, char *out, size_t size)
{
	char path[64], line[PATH_MAX + 256];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	FILE *f = fopen(path, "re");
	size_t t = strlen(tail);
	int found = 0;
	while (f && !found && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *file = strchr(line, '/');
		size_t n = file ? strlen(file) : 0;
		if (n >= t && !strcmp(file + n - t, tail)) {
			snprintf(out, size, "%s", file);
			found = 1;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* has_loader's answer for a process whose exec is under way. */
#define LOADER_NOT_YET 2

/* Does process pid run with a dynamic loader (its auxv's AT_BASE, the
 * interpreter's address, is not 0)? 1, 0, -1: unknown, or LOADER_NOT_YET:
 * its auxv is empty, as while an exec builds the new program's (a process
 * just spawned: its parent may run on before that, as after vfork). */
static int has_loader(long pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/auxv", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	uintptr_t av[2];
	int rc = -1, entries = 0;
	while (read(fd, av, sizeof av) == (ssize_t)sizeof av && av[0] != AT_NULL) {
		entries++;
		if (av[0] == AT_BASE)
			rc = av[1] != 0;
	}
	close(fd);
	if (!entries)
		return LOADER_NOT_YET;
	return rc < 0 ? 0 : rc;   /* no AT_BASE at all: no interpreter either */
}

/* has_loader, once an exec under way has ended (EXEC_WAIT_MS at most). */
static int loader_after_exec(long pid)
{
	int loader = has_loader(pid);
	for (long waited = 0; loader == LOADER_NOT_YET && waited < EXEC_WAIT_MS * 1000000L;
	     waited += EXEC_STEP_NS) {
		struct timespec step = { 0, EXEC_STEP_NS };
		nanosleep(&step, NULL);
		loader = has_loader(pid);
	}
	return loader;
}

/* The refusals that need no gdb: 0, or an exit code after one line. */
static int check_process(long pid, char *lib, size_t lib_size, const char *ctl)
{
	char path[64], mine[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%ld", pid);
	if (stat(path, &st) != 0)
		return rec_fail(EXIT_NO_PROCESS, "no process %ld", pid);
	if (st.st_uid != geteuid())
		return rec_fail(EXIT_OTHER_USER, "process %ld belongs to uid %u, not to you (uid %u):"
				" run trace-record -p as its user", pid, (unsigned)st.st_uid,
				(unsigned)geteuid());
	int loader = loader_after_exec(pid);
	if (loader < 0)
		return rec_fail(EXIT_NO_PROCESS, "cannot read /proc/%ld/auxv: %s (has it gone?)", pid,
				strerror(errno));
	if (loader == LOADER_NOT_YET)
		return rec_fail(EXIT_CANNOT, "process %ld is still starting: its exec has not"
				" finished after %d ms", pid, EXEC_WAIT_MS);
	if (!loader)
		return rec_fail(EXIT_STATIC, "process %ld runs a statically linked program (no"
				" dynamic loader): no library can be loaded into it", pid);
	if (mapped(pid, LIB_PRELOAD, mine, sizeof mine))
		return rec_fail(EXIT_RECORDED, "process %ld is already being recorded: %s is"
				" preloaded into it (trace-ctl %ld controls it)", pid, mine, pid);
	if (mapped(pid, "/" LIB_ATTACH, mine, sizeof mine)) {
		char out[OUTPUT_MAX], pidstr[32];
		snprintf(pidstr, sizeof pidstr, "%ld", pid);
		char *const argv[] = { (char *)ctl, pidstr, "status", NULL };
		if (run_captured(argv, out, sizeof out) == 0)
			return rec_fail(EXIT_RECORDED, "process %ld is already being recorded by an"
					" attach (trace-ctl %ld detach ends it)", pid, pid);
		snprintf(lib, lib_size, "%s", mine);   /* loaded before: that copy, never a second */
	}
	return 0;
}

/* Why gdb could not attach, from its output: an exit code after one line. */
static int ptrace_refused(long pid, const char *out)
{
	char scope[32];
	if (first_line(PTRACE_SCOPE, scope, sizeof scope) > 0 && strcmp(scope, "0"))
		return rec_fail(EXIT_PTRACE, "not permitted to trace process %ld: %s is %s (1: only"
				" a parent may trace its child; 2: only root; 3: nobody); allow it"
				" with: sudo sysctl kernel.yama.ptrace_scope=0", pid, PTRACE_SCOPE, scope);
	const char *why = strstr(out, "ptrace:");
	return rec_fail(EXIT_PTRACE, "not permitted to trace process %ld (%.*s): a container or"
			" security module forbids ptrace, or the process is being traced already",
			pid, why ? (int)strcspn(why, "\n") : 0, why ? why : "");
}

/* gdb's calls run in the thread it stopped, wherever it stopped it. Inside
 * malloc or free the dlopen's own allocations, and the strings gdb puts in
 * the process, re-enter the allocator half way through an operation:
 * stopped between reading a tcache bin's head and unlinking it, the
 * thread's malloc and the call's both get the same block (shown with gdb on
 * glibc 2.36), and a program that mostly allocates crashed in 4 of 20
 * attaches; stopped holding an arena's lock, the call waits for ever.
 * Inside the dynamic loader, a dlopen would change the list of objects
 * under a dlopen or dl_iterate_phdr of the same thread. So this gdb Python
 * first lets the thread run out of the frames that are in libc or the
 * object that defines malloc (jemalloc's, say) and of every frame of the
 * loader, one `finish` at a time (at most SAFE_FINISHES), and sets
 * $hr_safe. A thread that waits in a system call of its own in libc (not
 * one of the allocator's: mmap, mprotect, munmap, brk, mremap, madvise)
 * is called there, as before: `finish` could wait for ever, and nothing
 * is half done. An allocator linked into the executable is not seen. */
#define SAFE_FINISHES "64"   /* frames a thread is let out of, at most */
#define SAFE_POINT_PY \
	"python exec(\"" \
	"import gdb\\n" \
	"def obj(a):\\n return gdb.solib_name(a) or ''\\n" \
	"def base(n):\\n return n.rsplit('/', 1)[-1]\\n" \
	"try:\\n alloc = obj(int(gdb.parse_and_eval('(long)&malloc')))\\n" \
	"except gdb.error:\\n alloc = ''\\n" \
	"def risky():\\n" \
	" f = gdb.newest_frame()\\n" \
	" inner = obj(f.pc())\\n" \
	" k = 0\\n" \
	" while f is not None and k < 512:\\n" \
	"  if base(obj(f.pc())).startswith('ld-linux'):\\n   return True\\n" \
	"  f = f.older()\\n  k += 1\\n" \
	" if inner == '' or not (base(inner).startswith('libc.so') or inner == alloc):\\n" \
	"  return False\\n" \
	" nr = int(gdb.parse_and_eval('$orig_rax'))\\n" \
	" return nr < 0 or nr in (9, 10, 11, 12, 25, 28)\\n" \
	"safe = 0\\n" \
	"for i in range(" SAFE_FINISHES "):\\n" \
	" try:\\n  r = risky()\\n" \
	" except gdb.error:\\n  break\\n" \
	" if not r:\\n  safe = 1\\n  break\\n" \
	" try:\\n  gdb.execute('finish', to_string=True)\\n" \
	" except gdb.error:\\n  break\\n" \
	"gdb.set_convenience_variable('hr_safe', safe)\\n" \
	"if not safe:\\n print('" UNSAFE_TAG "')\\n" \
	"\")"

/* Loads lib into process pid and calls heapreel_attach(trace) there, with
 * gdb: 0, or an exit code after one line. */
static int inject(long pid, const char *lib, const char *trace)
{
	if (strpbrk(lib, "\"\\\n") || strpbrk(trace, "\"\\\n"))
		return rec_fail(EXIT_CANNOT, "%s or %s holds a quote, backslash or newline, which"
				" the injection cannot pass", lib, trace);
	char pidstr[32], load[PATH_MAX + 128], call[PATH_MAX + 256];
	snprintf(pidstr, sizeof pidstr, "%ld", pid);
	snprintf(load, sizeof load, "set $h = $hr_safe == 1 ?"
		 " ((void *(*)(const char *, int))dlopen)(\"%s\", %d) : (void *)0",
		 lib, RTLD_NOW_VALUE);
	snprintf(call, sizeof call, "set $r = $h ? ((int (*)(const char *))((void *(*)(void *,"
		 " const char *))dlsym)($h, \"heapreel_attach\"))(\"%s\") : %d", trace, NO_HANDLE);
	/* No debug information is read (the process is stopped while gdb
	 * reads, and the calls need none: a second less). The program's own
	 * signals reach it during the calls (its handlers run, the call goes
	 * on); a fault inside a call unwinds it instead of killing the
	 * program. */
	char *const argv[] = {
		GDB, "-n", "-q", "-batch", "-iex", "set debuginfod enabled off",
		"-iex", "set debug-file-directory /nonexistent",
		"-iex", "set unwindonsignal on", "-p", pidstr,
		"-ex", "handle all nostop noprint pass",
		"-ex", "handle SIGSEGV SIGBUS SIGILL SIGFPE SIGABRT stop print nopass",
		"-ex", SAFE_POINT_PY,
		"-ex", "call $hr_safe == 1 ? ((char *(*)(void))dlerror)() : (char *)0", /* no stale error */
		"-ex", load, "-ex", call,
		/* No string literal once the trace runs: gdb would malloc it in
		 * the process, a block of gdb's recorded (printf "%s" of NULL
		 * prints "(null)") */
		"-ex", "printf \"" RESULT_TAG "%d %s\\n\", $r, $h || $hr_safe != 1 ? (char *)0 :"
		" ((char *(*)(void))dlerror)()", NULL,
	};
	static char out[OUTPUT_MAX];
	int rc = run_captured(argv, out, sizeof out);
	if (strstr(out, NO_PYTHON))
		return rec_fail(EXIT_CANNOT, "this gdb has no Python, which attaching needs to stop"
				" process %ld outside its allocator: apt-get install gdb", pid);
	if (strstr(out, UNSAFE_TAG))
		return rec_fail(EXIT_CANNOT, "process %ld stayed inside its allocator or the dynamic"
				" loader while gdb let it run out: nothing was loaded; try again", pid);
	const char *res = strstr(out, RESULT_TAG);
	if (!res) {
		if (strstr(out, "ptrace: Operation not permitted"))
			return ptrace_refused(pid, out);
		if (strstr(out, "No such process") || kill((pid_t)pid, 0) != 0)
			return rec_fail(EXIT_NO_PROCESS, "no process %ld (it ended)", pid);
		if (strstr(out, "\"dlopen\""))
			return rec_fail(EXIT_STATIC, "process %ld has no dlopen (no dynamic loader in"
					" it): no library can be loaded into it", pid);
		const char *last = out + strlen(out);
		while (last > out && last[-1] == '\n')
			last--;
		const char *from = last;
		while (from > out && from[-1] != '\n')
			from--;
		return rec_fail(EXIT_CANNOT, "gdb could not load %s into process %ld (exit %d): %.*s",
				lib, pid, rc, (int)(last - from), from);
	}
	long answer = strtol(res + strlen(RESULT_TAG), NULL, 10);
	if (answer == NO_HANDLE) {
		const char *why = strchr(res + strlen(RESULT_TAG), ' ');
		return rec_fail(EXIT_CANNOT, "process %ld could not load %s:%.*s", pid, lib,
				why ? (int)strcspn(why, "\n") : 0, why ? why : "");
	}
	if (answer == ANSWER_PRELOADED || answer == ANSWER_BUSY)
		return rec_fail(EXIT_RECORDED, "process %ld is already being recorded", pid);
	if (answer != 0)
		return rec_fail(EXIT_CANNOT, "the recorder in process %ld could not start a trace"
				" (its own stderr says why)", pid);
	return 0;
}

/* Waits until the process ends, --for passes (ns < 0: no limit), or a
 * signal; 1 if the process ended. */
static int wait_end(long pid, int64_t ns)
{
	int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)(ns / 1000000000);
	end.tv_nsec += (long)(ns % 1000000000);
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	int ended = 0;
	while (!interrupted && !ended) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t left = ns < 0 ? -1 : (int64_t)(end.tv_sec - now.tv_sec) * 1000 +
					   (end.tv_nsec - now.tv_nsec) / 1000000;
		if (ns >= 0 && left <= 0)
			break;
		/* without a pidfd (an old kernel), look every 100 ms */
		struct pollfd pf = { .fd = pfd, .events = POLLIN };
		int step = pfd < 0 ? 100 : left < 0 || left > INT_MAX ? -1 : (int)left;
		if (pfd < 0 && left >= 0 && left < step)
			step = (int)left;
		int r = poll(pfd < 0 ? NULL : &pf, pfd < 0 ? 0 : 1, step);
		ended = pfd < 0 ? kill((pid_t)pid, 0) != 0 && errno == ESRCH : r > 0;
	}
	if (pfd >= 0)
		close(pfd);
	return ended;
}

/* Does process pid end within ms, or has it ended (a zombie its parent has
 * not reaped yet counts: kill(pid, 0) still finds it)? Without a pidfd (an
 * old kernel, as wait_end allows) only a reaped process is seen as ended. */
static int ends_within(long pid, int ms)
{
	int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (pfd < 0)
		return errno == ESRCH || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
	struct pollfd pf = { .fd = pfd, .events = POLLIN };
	int r = poll(&pf, 1, ms);
	close(pfd);
	return r > 0;
}

/* Asks the recorder to detach; the trace's path into trace (as the
 * recorder named it). 0, or an exit code after one line. */
static int detach(long pid, const char *ctl, char *trace, size_t size, int *ended)
{
	static char out[OUTPUT_MAX];
	char pidstr[32];
	snprintf(pidstr, sizeof pidstr, "%ld", pid);
	char *const argv[] = { (char *)ctl, pidstr, "detach", NULL };
	int rc = run_captured(argv, out, sizeof out);
	const char *ok = strstr(out, "ok trace=");
	if (rc == 0 && ok) {
		snprintf(trace, size, "%.*s", (int)strcspn(ok + 9, "\n"), ok + 9);
		return 0;
	}
	/* Its exit may have begun as the request came: its descriptors close
	 * (the connection unanswered) before it becomes a zombie. */
	if (ends_within(pid, EXIT_GRACE_MS)) {
		*ended = 1;
		return 0;               /* its exit closed the trace */
	}
	return rec_fail(EXIT_CANNOT, "cannot detach from process %ld: %.*s", pid,
			(int)strcspn(out, "\n"), out);
}

int rec_attach(const struct rec_attach_opts *o)
{
	char lib[PATH_MAX], ctl[PATH_MAX], comm[64], path[64];
	long pid = o->pid;
	if (rec_find_beside(LIB_ATTACH, lib) < 0)
		return rec_fail(EXIT_CANNOT, "cannot find %s in trace-record's own install or build"
				" tree", LIB_ATTACH);
	if (rec_find_tool("trace-ctl", ctl) < 0)
		return rec_fail(EXIT_CANNOT, "cannot find trace-ctl beside trace-record");
	int rc = check_process(pid, lib, sizeof lib, ctl);
	if (rc)
		return rc;
	if (!on_path(GDB))
		return rec_fail(EXIT_CANNOT, "gdb is not installed (attaching loads the recorder"
				" with it): ./heapreel setup, or apt-get install gdb");
	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	if (first_line(path, comm, sizeof comm) <= 0)
		return rec_fail(EXIT_NO_PROCESS, "no process %ld", pid);
	static struct rec_dest dst;
	char trace[PATH_MAX];
	if ((rc = rec_choose_dest(&dst, o->out, comm)))
		return rc;
	rec_expand(dst.tmpl, (pid_t)pid, trace, sizeof trace);
	if ((rc = rec_claim_trace(trace, o->force))) {
		rec_unmake(&dst);
		return rc;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct timespec start;
	clock_gettime(CLOCK_REALTIME_COARSE, &start);
	if ((rc = inject(pid, lib, trace))) {
		rec_unmake(&dst);
		return rc;
	}
	fprintf(stderr, "trace-record: attached to process %ld (%s); recording until %s\n", pid,
		comm, o->for_ns >= 0 ? "--for passes, Ctrl-C or its end" : "Ctrl-C or its end");
	int ended = wait_end(pid, o->for_ns);
	if (!ended && (rc = detach(pid, ctl, trace, sizeof trace, &ended)))
		return rc;
	if (ended)
		fprintf(stderr, "trace-record: process %ld ended\n", pid);
	rec_say_traces(&dst, trace, &start);
	return 0;
}
