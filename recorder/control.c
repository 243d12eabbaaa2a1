/*
 * control.c - the control channel trace-ctl talks to: a unix stream socket
 * DIR/PID.sock, served by the writer thread (never by an application
 * thread), which checks it every CHECK_ROUNDS rounds (5 to 40 ms) with a
 * non-blocking accept, so a request is answered well within 100 ms.
 *
 * DIR is $REC_CTL_DIR if set, else /tmp/heapreel-UID. It is created 0700
 * and then verified as trace-ctl verifies it (ctl_dir.c): a directory (not
 * a symlink), owned by our effective uid, mode exactly 0700; anything else
 * and the process runs without a control channel (one stderr line).
 * The socket is bound through /proc/self/fd/DIRFD/PID.sock, so it lands in
 * the directory just verified even if the path were swapped meanwhile.
 * Every connection is then checked with SO_PEERCRED: a peer whose uid is
 * not our effective uid gets "error" and is closed unheard.
 *
 * Protocol: one request line, one answer line, then the connection closes.
 *   status          -> ok state=active|stopped sample=P trace=PATH
 *   start | stop    -> ok state=active|stopped
 *   mark LABEL      -> ok
 *   flush           -> ok            (everything recorded so far is in the file)
 *   sample N        -> ok sample=N   (or error: the trace keeps its period)
 *   detach          -> ok trace=PATH (an attached process, trace-record -p:
 *                      answered once the GOT is put back and the trace
 *                      closed; the process runs on unrecorded)
 * anything else     -> error MESSAGE
 *
 * Must never: block the writer for long (a request line must arrive within
 * REQUEST_MS), or leave the socket of a process that is gone behind it:
 * the clean stop unlinks it; a forked child closes its copy of the parent's
 * socket without unlinking it and makes its own; a killed process cannot,
 * so each session's writer sweeps the directory once (ctl_dir.c) for the
 * sockets of processes that are gone, off the program's threads.
 */
#include "rec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CHECK_ROUNDS 5          /* writer rounds (1 to 8 ms each) between accepts */
#define REQUEST_MS 100          /* longest wait for a request line */
#define REQUEST_BYTES 512       /* "mark " + a label of REC_MARK_MAX, with room */
#define ACCEPTS_PER_CHECK 8     /* connections served per check at most */
#define BACKLOG 8

static int lfd = -1, dfd = -1;
static dev_t l_dev, d_dev;
static ino_t l_ino, d_ino;
static char name[32];           /* PID.sock */
static unsigned rounds;
static int swept;               /* this session swept the directory */
/* Test only (REC_TEST_DETACH_KILL, read when the channel opens): a detach
 * request kills the process instead, as an exit racing the detach would
 * end it: the connection closes unanswered, the process left a zombie. */
static int test_detach_kill;

/* The control directory, made and verified; a descriptor or -1 (said why). */
static int open_dir(void)
{
	char dir[4096];
	rec_ctl_dir_path(dir, sizeof dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rec_say("cannot create the control directory ", dir, "; no control channel");
		return -1;
	}
	int fd = rec_ctl_dir_open(dir);
	if (fd < 0)
		rec_say("control directory ", dir,
			" is not private (it must be a directory, not a symlink, owned by this"
			" user, mode 0700); no control channel");
	return fd;
}

void rec_ctl_listen(void)
{
	rounds = 0;
	swept = 0;
	test_detach_kill = getenv("REC_TEST_DETACH_KILL") != NULL;
	dfd = open_dir();
	if (dfd < 0)
		return;
	char *e = name + sizeof name;
	rec_cat(rec_utoa(name, e, (uint64_t)rec_s.pid), e, ".sock");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	rec_ctl_sock_path(sa.sun_path, sizeof sa.sun_path, dfd, (uint64_t)rec_s.pid);
	/* A socket left by a killed process with our pid; the directory is
	 * private, so whatever is there is ours. */
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
		unlinkat(dfd, name, 0);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, BACKLOG) < 0) {
		char why[160], *w = why + sizeof why;
		rec_cat(rec_cat(rec_cat(why, w, ": "), w, strerrordesc_np(errno)), w,
			"; no control channel");
		rec_say("cannot listen on the control socket ", name, why);
		if (lfd >= 0)
			close(lfd);
		close(dfd);
		lfd = dfd = -1;
		return;
	}
	lfd = rec_fd_high(lfd);
	dfd = rec_fd_high(dfd);
	rec_fd_remember(lfd, &l_dev, &l_ino);
	rec_fd_remember(dfd, &d_dev, &d_ino);
}

void rec_ctl_abandon(void)
{
	if (lfd >= 0 && rec_fd_ok(lfd, l_dev, l_ino))
		close(lfd);
	if (dfd >= 0 && rec_fd_ok(dfd, d_dev, d_ino))
		close(dfd);
	lfd = dfd = -1;
}

/* The sockets that killed processes left, once per session: from the
 * writer's first round, or when the session closes before it had one. */
static void sweep_once(void)
{
	if (swept || dfd < 0 || !rec_fd_ok(dfd, d_dev, d_ino))
		return;
	swept = 1;
	rec_ctl_dir_sweep(dfd, (uint64_t)rec_s.pid);
}

void rec_ctl_close(void)
{
	sweep_once();
	if (dfd >= 0 && rec_fd_ok(dfd, d_dev, d_ino))
		unlinkat(dfd, name, 0);
	rec_ctl_abandon();
}

static void answer(int c, const char *a, const char *b)
{
	char line[8192], *e = line + sizeof line - 1;
	char *p = rec_cat(rec_cat(line, e, a), e, b);
	*p++ = '\n';
	ssize_t r = send(c, line, (size_t)(p - line), MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)r;
}

/* Reads one request line into buf; 0, or -1 if none came in time. */
static int read_request(int c, char *buf, size_t size)
{
	size_t n = 0;
	while (n < size - 1) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		if (poll(&pf, 1, REQUEST_MS) <= 0)
			return -1;
		ssize_t r = recv(c, buf + n, size - 1 - n, MSG_DONTWAIT);
		if (r <= 0)
			return r == 0 && n ? (buf[n] = 0, 0) : -1;
		n += (size_t)r;
		buf[n] = 0;
		char *nl = memchr(buf, '\n', n);
		if (nl) {
			*nl = 0;
			return 0;
		}
	}
	return -1;
}

static const char *state_word(void)
{
	return rec_ctl_active() ? "state=active" : "state=stopped";
}

static void serve(int c)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != geteuid()) {
		answer(c, "error permission denied: not the user recording this process", "");
		return;
	}
	char req[REQUEST_BYTES];
	if (read_request(c, req, sizeof req) < 0)
		return;
	char num[64], *ne = num + sizeof num;
	if (!strcmp(req, "status")) {
		char st[4200], *se = st + sizeof st;
		char *p = rec_utoa(rec_cat(rec_cat(st, se, state_word()), se, " sample="), se,
				   rec_ctl_period());
		rec_cat(rec_cat(p, se, " trace="), se, rec_s.trace_path);
		answer(c, "ok ", st);
		return;
	}
	if (!strcmp(req, "start") || !strcmp(req, "stop")) {
		int r = req[2] == 'a' ? rec_ctl_start(0) : rec_ctl_stop(0);
		answer(c, r < 0 ? "error the trace is closed" : "ok ", r < 0 ? "" : state_word());
		return;
	}
	if (!strncmp(req, "mark ", 5) && req[5]) {
		answer(c, rec_ctl_mark(req + 5, 0) < 0 ? "error the trace is closed" : "ok", "");
		return;
	}
	if (!strcmp(req, "flush")) {
		rec_ctl_drain_marks();
		answer(c, rec_writer_sync() < 0 ? "error writing the trace failed" : "ok", "");
		return;
	}
	if (!strcmp(req, "detach")) {
		if (test_detach_kill)
			raise(SIGKILL);
		int keep = fcntl(c, F_DUPFD_CLOEXEC, 0);   /* answered when the trace is closed */
		if (keep < 0) {
			answer(c, "error out of descriptors", "");
		} else if (rec_session_detach_begin() < 0) {
			close(keep);
			answer(c, "error not attached (a preloaded process records until it ends;"
			       " trace-ctl stop pauses it)", "");
		} else {
			rec_writer_detach(keep);
		}
		return;
	}
	if (!strncmp(req, "sample ", 7)) {
		uint64_t v, have;
		int rc;
		if (rec_parse_u64(req + 7, 0, REC_PERIOD_MAX, &v) < 0) {
			answer(c, "error the sampling period must be a number of bytes up to 2^40", "");
		} else if ((rc = rec_ctl_set_period(v, &have)) < 0) {
			rec_utoa(num, ne, have);
			answer(c, rc == -2 ? "error cannot map the sampled-address set; sample period "
				: "error allocations were recorded with sample period ", num);
		} else {
			rec_utoa(rec_cat(num, ne, "sample="), ne, v);
			answer(c, "ok ", num);
		}
		return;
	}
	answer(c, "error unknown request: ", req);
}

void rec_ctl_detached(int c)
{
	answer(c, "ok trace=", rec_s.trace_path);
	close(c);
}

/* Serves the connections waiting, unless the program closed our socket. */
static void accept_requests(void)
{
	if (!rec_fd_ok(lfd, l_dev, l_ino)) {
		lfd = -1; /* no channel any more */
		return;
	}
	for (unsigned k = 0; k < ACCEPTS_PER_CHECK; k++) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			break;
		serve(c);
		close(c);
	}
}

void rec_ctl_round(void)
{
	sweep_once();
	if (lfd >= 0 && ++rounds % CHECK_ROUNDS == 0)
		accept_requests();
	rec_ctl_drain_marks();
	rec_ctl_serve_flush();
}
