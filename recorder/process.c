/*
 * process.c - the process-lifetime calls libheapreel.so interposes so a trace is
 * closed cleanly when its process leaves without running destructors:
 * _exit and _Exit, and the exec family (execve, execv, execvp, execvpe,
 * execl, execle, execlp, fexecve).
 *
 * Before exec the trace is stopped (drained, END written, .ring unlinked);
 * the new program, still preloaded, starts its own trace (same pid: the
 * session's O_EXCL naming picks <name>.1, ...). An exec that cannot succeed
 * because its file is no executable regular file (every attempt but the
 * last of a PATH search, done by execvp or by hand as python's os.execvp
 * does) does not stop the trace: the failed exec leaves nothing and the
 * trace goes on. If an exec fails after the stop (ENOEXEC, E2BIG, a bad ELF
 * interpreter, the file gone meanwhile) the process goes on in a new trace.
 * A file made executable between the check and the exec is exec'd with the
 * trace running: its .ring is left, as after a kill.
 *
 * exit() and a return from main need nothing here: libheapreel.so's destructor
 * (session.c) runs after the program's own destructors and atexit handlers.
 * Either way the threads still running go on being recorded until the
 * process really ends (rec_session_exit).
 * Fatal signals are left alone (no handlers that change the program's
 * behaviour); what the rings hold survives in the .ring file.
 *
 * Must never: act in a vfork child (it shares our memory and would close the
 * parent's trace): rec_session_mine() compares the pid.
 */
#include "rec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static _Noreturn void leave(int status)
{
	rec_session_exit();
	if (!rec_real.exit_now)
		rec_real_resolve();
	if (rec_real.exit_now)
		rec_real.exit_now(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

REC_EXPORT void _exit(int status)
{
	leave(status);
}

REC_EXPORT void _Exit(int status)
{
	leave(status);
}

/* glibc's search path when PATH is unset (confstr's _CS_PATH). */
#define DEFAULT_PATH "/bin:/usr/bin"

/* Can an exec of path succeed? Not when it is no executable regular file. */
static int may_exec(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

/* The same for execvp(file), searching as glibc does: a file with a slash
 * is the path, else each directory of PATH (an empty one: the working
 * directory). 1 when it cannot tell (a path too long to build). */
static int may_execvp(const char *file)
{
	if (!file || !*file)
		return 0;
	if (strchr(file, '/'))
		return may_exec(file);
	const char *dirs = getenv("PATH");
	if (!dirs)
		dirs = DEFAULT_PATH;
	size_t flen = strlen(file);
	for (;;) {
		const char *end = strchrnul(dirs, ':');
		size_t dlen = (size_t)(end - dirs);
		char path[PATH_MAX];
		if (dlen + 1 + flen >= sizeof path)
			return 1;
		memcpy(path, dirs, dlen);
		path[dlen] = '/';
		memcpy(path + dlen + (dlen > 0), file, flen + 1);
		if (may_exec(path))
			return 1;
		if (!*end)
			return 0;
		dirs = end + 1;
	}
}

/* Stops our trace before an exec that may succeed; 1 if it did. */
static int before_exec(int may_succeed)
{
	if (!rec_real.execve)
		rec_real_resolve();
	if (!may_succeed || !rec_session_mine())
		return 0;
	rec_session_stop();
	return 1;
}

static int after_exec(int stopped, int r)
{
	int e = errno;
	if (stopped)
		rec_session_restart();
	errno = e;
	return r;
}

REC_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	int s = before_exec(may_exec(path));
	return after_exec(s, rec_real.execve(path, argv, envp));
}

REC_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	int s = before_exec(may_execvp(file));
	return after_exec(s, rec_real.execvpe(file, argv, envp));
}

REC_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	int s = before_exec(1);
	return after_exec(s, rec_real.fexecve(fd, argv, envp));
}

REC_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

REC_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* Counts the arguments of an execl* call, arg0 included, up to the NULL. */
static size_t count_args(const char *arg0, va_list ap)
{
	if (!arg0)
		return 0;
	size_t n = 1;
	while (va_arg(ap, char *))
		n++;
	return n;
}

#define COLLECT_ARGS(argv, arg0, ap, n) do { \
	argv[0] = (char *)(arg0); \
	for (size_t i_ = 1; i_ <= (n); i_++) \
		argv[i_] = va_arg(ap, char *); /* the last one is the NULL */ \
} while (0)

REC_EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	size_t n = count_args(arg0, ap);
	va_end(ap);
	char *argv[n + 1];
	va_start(ap, arg0);
	COLLECT_ARGS(argv, arg0, ap, n);
	va_end(ap);
	return execve(path, argv, environ);
}

REC_EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	size_t n = count_args(arg0, ap);
	va_end(ap);
	char *argv[n + 1];
	va_start(ap, arg0);
	COLLECT_ARGS(argv, arg0, ap, n);
	va_end(ap);
	return execvpe(file, argv, environ);
}

REC_EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	size_t n = count_args(arg0, ap);
	va_end(ap);
	char *argv[n + 1];
	va_start(ap, arg0);
	COLLECT_ARGS(argv, arg0, ap, n);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
