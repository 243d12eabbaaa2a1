/*
 * ctl_dir.c - where the control sockets live, and the check that keeps
 * them private: one definition for the recorder (control.c, which listens)
 * and trace-ctl (which connects), so both trust exactly the same thing.
 *
 * The sweep removes the sockets of processes that are gone (a killed
 * process cannot unlink its own); it is stdio- and allocation-free, as it
 * also runs inside libheapreel.so (in the writer thread).
 *
 * Must never: follow a symlink to the directory, use one that another user
 * could write to, or remove the socket of a live process.
 */
#include "rec_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_DIR_PREFIX "/tmp/heapreel-"
#define CTL_DIR_MODE 0700
#define SOCK_SUFFIX ".sock"

void rec_ctl_dir_path(char *dir, size_t size)
{
	char *e = dir + size;
	const char *env = getenv("REC_CTL_DIR");
	if (env && *env)
		rec_cat(dir, e, env);
	else
		rec_utoa(rec_cat(dir, e, CTL_DIR_PREFIX), e, geteuid());
}

int rec_ctl_dir_open(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != CTL_DIR_MODE) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

void rec_ctl_sock_path(char *out, size_t size, int dfd, uint64_t pid)
{
	char *e = out + size;
	char *p = rec_utoa(rec_cat(out, e, "/proc/self/fd/"), e, (uint64_t)dfd);
	rec_cat(rec_utoa(rec_cat(p, e, "/"), e, pid), e, SOCK_SUFFIX);
}

/* The pid a directory entry "PID.sock" names, or 0. */
static uint64_t sock_pid(const char *name)
{
	uint64_t v = 0;
	const char *p = name;
	for (; *p >= '0' && *p <= '9' && v <= INT_MAX; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return p > name && *name != '0' && v <= INT_MAX && !strcmp(p, SOCK_SUFFIX) ? v : 0;
}

/* Whether dfd's entry name is the socket of process pid, gone: no process
 * has that pid, and nothing listens on the socket (a process of another pid
 * namespace sharing the directory would). A live process between its bind
 * and its listen is refused a connection too, but its pid is alive. */
static int stale(int dfd, const char *name, uint64_t pid)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode) ||
	    st.st_uid != geteuid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	rec_ctl_sock_path(sa.sun_path, sizeof sa.sun_path, dfd, pid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	int err = errno;
	close(fd);
	return r < 0 && err == ECONNREFUSED;
}

struct sweep {
	int dfd;
	uint64_t self;
};

static int sweep_one(const char *name, void *ctx)
{
	const struct sweep *s = ctx;
	uint64_t pid = sock_pid(name);
	if (pid && pid != s->self && stale(s->dfd, name, pid))
		unlinkat(s->dfd, name, 0);
	return 0;
}

void rec_ctl_dir_sweep(int dfd, uint64_t self)
{
	struct sweep s = { dfd, self };
	rec_dir_each(dfd, ".", sweep_one, &s);
}
