/*
 * trace_record.h - what trace-record's two ways of recording share:
 * running a program preloaded (trace_record.c) and attaching to a running
 * process (trace_attach.c, -p): where the traces go, the one-line errors,
 * the closing lines, and the exit codes (README "Exit codes").
 */
#ifndef HEAPREEL_TRACE_RECORD_H
#define HEAPREEL_TRACE_RECORD_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define EXIT_CANNOT 1              /* cannot record (directory, library, gdb, the load) */
#define EXIT_USAGE 2
#define EXIT_EXISTS 3              /* the trace exists (no --force), run directory not empty */
#define EXIT_NO_PROCESS 4          /* -p: no such process ("not in the data") */
#define EXIT_PTRACE 6              /* -p: tracing it is not permitted (ptrace_scope, ...) */
#define EXIT_OTHER_USER 7          /* -p: the process is another user's */
#define EXIT_STATIC 8              /* -p: no dynamic loader to load the recorder with */
#define EXIT_RECORDED 9            /* -p: the process is already being recorded */

/* Where a run's traces go: tmpl, the trace path template (absolute); dir,
 * the run's own directory ("" for -o PATH); and which directories this
 * made, so that a recording that never started leaves nothing behind. */
struct rec_dest {
	char tmpl[PATH_MAX], dir[PATH_MAX], parent[PATH_MAX];
	int made_dir, made_parent;
};

/* "trace-record: " and the message on stderr; returns code. */
__attribute__((format(printf, 2, 3)))
int rec_fail(int code, const char *fmt, ...);
/* A file of trace-record's own install or build tree (the library dirs
 * as for libheapreel.so), or a tool beside trace-record, into out
 * (PATH_MAX bytes, absolute); 0 or -1. */
int rec_find_beside(const char *name, char *out);
int rec_find_tool(const char *name, char *out);
/* Chooses where the traces go (-o, else REC_OUT, else a default run
 * directory named for program) and prepares it: 0, or an exit code. */
int rec_choose_dest(struct rec_dest *d, const char *o, const char *program);
void rec_unmake(const struct rec_dest *d);     /* removes the directories d made */
/* May the trace path be written (force: replaces a trace)? 0 or an exit code. */
int rec_claim_trace(const char *path, int force);
void rec_expand(const char *tmpl, pid_t pid, char *out, size_t size);  /* %p = pid */
/* Says where the traces went and the command that imports them. */
void rec_say_traces(const struct rec_dest *dst, const char *path, const struct timespec *start);

/* trace-record -p PID (trace_attach.c): its exit code. for_ns < 0: no --for. */
struct rec_attach_opts {
	long pid;
	const char *out;
	int force;
	int64_t for_ns;
};
int rec_attach(const struct rec_attach_opts *o);

#endif
