/*
 * trace_ctl.c - trace-ctl: controls the recorder inside a running process
 * through its control socket (recorder/control.c has the protocol).
 *
 *   trace-ctl PID start | stop | mark LABEL | flush | status | detach
 *   trace-ctl PID record --for DURATION [--sample BYTES]
 *
 * record = [sample BYTES,] start, wait DURATION, stop; SIGINT or SIGTERM
 * during the wait ends it early (still stopping the recording). It then
 * prints how long it recorded and the trace's path.
 *
 * The socket is DIR/PID.sock, DIR = $REC_CTL_DIR or /tmp/heapreel-UID. The
 * directory passes the recorder's own check (ctl_dir.c: a directory, not a
 * symlink, owned by us, mode 0700) and is reached through its descriptor;
 * the peer's credentials (SO_PEERCRED) must be PID and our uid. The
 * recorder checks ours on its side.
 *
 * status prints the recorder's answer: ok state=active|stopped sample=P trace=PATH.
 * detach (a process recorded by trace-record -p) ends its recording: the
 * recorder puts the GOT back and closes the trace, then answers (waited
 * for up to DETACH_MS: it drains what is pending first); it prints
 * ok trace=PATH.
 * Exit status (README "Exit codes", the same for every tool): 0 done; 1
 * the process is not recorded, refused, or said error; 2 usage; 4 there
 * is no such process. Every failure is one line on stderr. DURATION
 * follows the one time grammar (tf_parse_duration: 60s, 1.5m, 5).
 *
 * Before connecting it removes the sockets that killed processes left in
 * the directory (ctl_dir.c: only those of processes that are gone).
 *
 * Must never: talk to a socket in a directory that is not private.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rec.h"
#include "rec_common.h"
#include "trace_format.h"

#define EXIT_FAILED 1              /* not recorded, refused, or the recorder said error */
#define EXIT_USAGE 2
#define EXIT_NO_PROCESS 4          /* "not in the data": no process with that pid */
/* The recorder answers after its writer's current round, within ~5 ms; on a
 * machine loaded 10 times over its cores a round was seen to take over 2 s
 * (a test's trace-ctl gave up then). A process that never answers is
 * stopped or hung: said after this long. */
#define ANSWER_MS 10000
#define DETACH_MS 60000           /* a detach answers once the trace is closed */
#define LINE_BYTES 8192

static const char usage_text[] =
	"usage: trace-ctl PID start | stop | mark LABEL | flush | status | detach\n"
	"       trace-ctl PID record --for DURATION [--sample BYTES]\n"
	"DURATION: 60s, 500ms, 1.5m, 1h, 5 (a bare number is seconds;\n"
	"units ns us ms s m h)\n"
	"exit: 0 done; 1 not recorded, refused, or the recorder said error; 2 usage;\n"
	"      4 no such process\n";

static volatile sig_atomic_t interrupted;

__attribute__((format(printf, 2, 3)))
static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("trace-ctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int no_process(long pid, int *status)
{
	*status = EXIT_NO_PROCESS;
	return fail(-1, "no process %ld", pid);
}

/* Connects to PID's control socket; the descriptor, or -1 after saying
 * why with the exit status in *status. */
static int connect_to(long pid, int *status)
{
	*status = EXIT_FAILED;
	char dir[4096];
	rec_ctl_dir_path(dir, sizeof dir);
	int alive = kill((pid_t)pid, 0) == 0 || errno == EPERM;
	int dfd = rec_ctl_dir_open(dir);
	if (dfd < 0) {
		if (errno == ENOENT && !alive)
			return no_process(pid, status);
		if (errno == ENOENT)
			return fail(-1, "process %ld is not being recorded (no %s)", pid, dir);
		if (errno == EPERM)
			return fail(-1, "%s is not private (it must be owned by uid %u with mode 0700);"
				    " refusing", dir, (unsigned)geteuid());
		return fail(-1, "%s: %s (not a private control directory; refusing)", dir,
			    strerror(errno));
	}
	rec_ctl_dir_sweep(dfd, 0);   /* what killed processes left */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	rec_ctl_sock_path(sa.sun_path, sizeof sa.sun_path, dfd, (uint64_t)pid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		close(dfd);
		return fail(-1, "socket: %s", strerror(errno));
	}
	int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	int err = errno;
	close(dfd);
	if (r < 0) {
		close(fd);
		if ((err == ENOENT || err == ECONNREFUSED) && !alive)
			return no_process(pid, status);
		if (err == ENOENT || err == ECONNREFUSED)
			return fail(-1, "process %ld is not being recorded (no control socket"
				    " %s/%ld.sock)", pid, dir, pid);
		return fail(-1, "cannot connect to %s/%ld.sock: %s", dir, pid, strerror(err));
	}
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.pid != (pid_t)pid ||
	    cr.uid != geteuid()) {
		close(fd);
		return fail(-1, "%s/%ld.sock is not served by process %ld of this user; refusing",
			    dir, pid, pid);
	}
	return fd;
}

/* Sends one request and reads the answer into line; 0 (answer "ok ..."),
 * or the exit status after saying what went wrong. */
static int ask(long pid, const char *req, char *line, size_t size)
{
	int wait_ms = strcmp(req, "detach") ? ANSWER_MS : DETACH_MS;
	int status;
	int fd = connect_to(pid, &status);
	if (fd < 0)
		return status;
	char msg[LINE_BYTES];
	int n = snprintf(msg, sizeof msg, "%s\n", req);
	if (send(fd, msg, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return fail(1, "process %ld: sending the request: %s", pid, strerror(errno));
	}
	size_t got = 0;
	line[0] = 0;
	while (got < size - 1 && !memchr(line, '\n', got)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int pr = poll(&pf, 1, wait_ms);
		if (pr <= 0) {
			close(fd);
			return fail(1, "process %ld did not answer within %d ms", pid, wait_ms);
		}
		ssize_t r = recv(fd, line + got, size - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		line[got] = 0;
	}
	close(fd);
	char *nl = strchr(line, '\n');
	if (!nl)
		return fail(1, "process %ld closed the connection without an answer", pid);
	*nl = 0;
	if (!strncmp(line, "ok", 2) && (line[2] == 0 || line[2] == ' '))
		return 0;
	return fail(1, "process %ld: %s", pid, strncmp(line, "error ", 6) ? line : line + 6);
}

/* record's options: *ns from --for, *sample from --sample (NULL if not
 * given); 0, or the exit status after saying what is wrong. */
static int record_options(int argc, char **argv, int64_t *ns, const char **sample)
{
	*ns = -1;
	*sample = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--for") && i + 1 < argc) {
			if (tf_parse_duration(argv[++i], ns))
				return fail(EXIT_USAGE, "--for %s: expected a duration like 60s, 500ms,"
					    " 1.5m, 1h or 5 (seconds)", argv[i]);
		} else if (!strcmp(argv[i], "--sample") && i + 1 < argc) {
			*sample = argv[++i];
			uint64_t v;
			if (rec_parse_u64(*sample, 0, REC_PERIOD_MAX, &v) < 0)
				return fail(EXIT_USAGE, "--sample %s: expected a number of bytes up to 2^40",
					    *sample);
		} else {
			return fail(EXIT_USAGE, "record: unexpected %s (usage: record --for DURATION"
				    " [--sample BYTES])", argv[i]);
		}
	}
	return *ns < 0 ? fail(EXIT_USAGE, "record needs --for DURATION") : 0;
}

static int record(long pid, int argc, char **argv)
{
	int64_t ns;
	const char *sample;
	int rc = record_options(argc, argv, &ns, &sample);
	if (rc)
		return rc;
	/* The trace's path, for the closing line: the status answer's last
	 * field, "trace=PATH" (asked first: a process not recorded fails here,
	 * before anything changes). */
	char status[LINE_BYTES], line[LINE_BYTES], req[64];
	if ((rc = ask(pid, "status", status, sizeof status)))
		return rc;
	const char *trace = strstr(status, " trace=");
	if (sample) {
		snprintf(req, sizeof req, "sample %s", sample);
		if ((rc = ask(pid, req, line, sizeof line)))
			return rc;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if ((rc = ask(pid, "start", line, sizeof line)))
		return rc;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct timespec left = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
	while (!interrupted && nanosleep(&left, &left) < 0 && errno == EINTR)
		;
	if ((rc = ask(pid, "stop", line, sizeof line)))
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("recorded process %ld for %.3f s%s; its trace: %s (written as the process runs;"
	       " trace-ctl %ld flush writes out what is pending)\n", pid,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       interrupted ? " (interrupted)" : "", trace ? trace + 7 : "?", pid);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc < 3) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	char *end;
	errno = 0;
	long pid = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || pid <= 0)
		return fail(EXIT_USAGE, "%s: not a process id", argv[1]);
	const char *cmd = argv[2];
	char line[LINE_BYTES], req[LINE_BYTES];
	int rc;
	if (!strcmp(cmd, "record"))
		return record(pid, argc - 3, argv + 3);
	if (!strcmp(cmd, "mark")) {
		if (argc != 4 || !argv[3][0])
			return fail(EXIT_USAGE, "mark needs one LABEL (quote it if it has spaces)");
		if (strlen(argv[3]) > REC_MARK_MAX || strchr(argv[3], '\n'))
			return fail(EXIT_USAGE, "mark: the label must be one line of at most %d bytes",
				    REC_MARK_MAX);
		snprintf(req, sizeof req, "mark %s", argv[3]);
		return ask(pid, req, line, sizeof line);
	}
	if (argc != 3 || (strcmp(cmd, "start") && strcmp(cmd, "stop") && strcmp(cmd, "flush") &&
			  strcmp(cmd, "status") && strcmp(cmd, "detach")))
		return fail(EXIT_USAGE, "unknown command '%s' (start, stop, mark LABEL, flush, status,"
			    " detach, record --for DURATION)", cmd);
	if ((rc = ask(pid, cmd, line, sizeof line)))
		return rc;
	if (!strcmp(cmd, "status") || !strcmp(cmd, "detach"))
		printf("%s\n", line);  /* the recorder's answer, "ok state=..." / "ok trace=..." */
	return 0;
}
