/*
 * out_dir.c - opening the directory a trace is created in without going
 * through a symbolic link another user planted in a shared directory.
 *
 * REC_OUT often points into a world-writable sticky directory such as
 * /tmp, where anyone can leave a symbolic link under a name we are about
 * to use. O_NOFOLLOW (session.c) covers the last component only; the
 * directories on the way are walked here one component at a time, each
 * opened O_PATH|O_NOFOLLOW relative to the one checked before it (so
 * nothing can be swapped in between), and a symbolic link among them is
 * followed only where the kernel's fs.protected_symlinks would follow it:
 * its directory is not both sticky and world-writable, or the link is ours,
 * or it belongs to the directory's owner. That sysctl is often off; this
 * check does not depend on it.
 *
 * Must never: allocate (it runs in the constructor and after fork).
 */
#include "rec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_BYTES 4096
#define LINKS_MAX 40                   /* links followed in one walk, as the kernel */

/* May a walk follow the link `link` found in directory dfd? */
static int may_follow(int dfd, const struct stat *link)
{
	struct stat dir;
	if (fstat(dfd, &dir) < 0)
		return 0;
	int shared = (dir.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH);
	return !shared || link->st_uid == geteuid() || link->st_uid == dir.st_uid;
}

/* Replaces todo (the components still to walk, from `rest` on) with
 * target/rest; 0, or -1 if it does not fit. */
static int prepend(char *todo, const char *rest, const char *target)
{
	char buf[PATH_BYTES], *e = buf + sizeof buf, *p = buf;
	p = rec_cat(rec_cat(rec_cat(p, e, target), e, "/"), e, rest);
	if (p + 1 >= e)
		return -1;
	memcpy(todo, buf, (size_t)(p - buf) + 1);
	return 0;
}

/* Where the walk goes from the symbolic link fd (found in directory dfd):
 * 0 with the new components in todo, or -1 with errno, or -2 if the link
 * was planted. */
static int follow(int dfd, int fd, const struct stat *st, char *todo, const char *rest,
		  unsigned *links)
{
	char target[PATH_BYTES];
	if (!may_follow(dfd, st))
		return -2;
	if (++*links > LINKS_MAX) {
		errno = ELOOP;
		return -1;
	}
	ssize_t len = readlinkat(fd, "", target, sizeof target);
	if (len < 0)
		return -1;
	if (len == 0 || (size_t)len == sizeof target) {
		errno = len ? ENAMETOOLONG : ENOENT;
		return -1;
	}
	target[len] = 0;
	if (prepend(todo, rest, target) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int rec_out_dir_open(const char *path, const char **leaf)
{
	const char *slash = strrchr(path, '/');
	*leaf = slash ? slash + 1 : path;
	size_t n = slash ? (size_t)(slash - path) + 1 : 0;
	char todo[PATH_BYTES];
	if (n >= sizeof todo) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(todo, path, n);
	todo[n] = 0;
	int dfd = open(todo[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	unsigned links = 0;
	char *p = todo;
	int rc = -1;
	while (dfd >= 0) {
		while (*p == '/')
			p++;
		if (!*p)
			return dfd;
		char *end = strchr(p, '/');
		if (end)
			*end = 0;
		char *rest = end ? end + 1 : p + strlen(p);
		if (!strcmp(p, ".")) {
			p = rest;
			continue;
		}
		int fd = openat(dfd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0)
			break;
		if (fstat(fd, &st) < 0) {
			close(fd);
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			close(dfd);
			dfd = fd;
			p = rest;
			continue;
		}
		errno = ENOTDIR;
		rc = S_ISLNK(st.st_mode) ? follow(dfd, fd, &st, todo, rest, &links) : -1;
		close(fd);
		if (rc < 0)
			break;
		p = todo;
		if (todo[0] == '/') {
			close(dfd);
			dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		}
	}
	int err = errno;
	if (dfd >= 0)
		close(dfd);
	errno = err;
	return rc == -2 ? -2 : -1;
}
