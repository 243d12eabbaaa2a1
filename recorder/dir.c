/*
 * dir.c - the names in a directory, without opendir (which allocates):
 * getdents64 into a buffer on the stack. Shared by libheapreel.so, which reads
 * directories inside a program (its own threads in /proc/self/task, the
 * control directory's stale sockets), and trace-ctl.
 *
 * Must never: allocate, use stdio, or move the offset of a descriptor the
 * caller keeps (it reads through one of its own).
 */
#include "rec_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#define DIR_BUF 4096               /* getdents64 batch, on the stack */

int rec_dir_each(int dfd, const char *path, int (*fn)(const char *name, void *ctx), void *ctx)
{
	int fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[DIR_BUF] __attribute__((aligned(8)));
	ssize_t n;
	int stop = 0;
	while (!stop && (n = getdents64(fd, buf, sizeof buf)) > 0) {
		for (ssize_t off = 0; off < n && !stop;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);
			off += de->d_reclen;
			stop = fn(de->d_name, ctx);
		}
	}
	close(fd);
	return stop ? 1 : n < 0 ? -1 : 0;
}
