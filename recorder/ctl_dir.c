/*
 * ctl_dir.c - where the control sockets live, and the check that keeps
 * them private: one definition for the recorder (control.c, which listens)
 * and trace-ctl (which connects), so both trust exactly the same thing.
 *
 * Must never: follow a symlink to the directory, or use one that another
 * user could write to.
 */
#include "rec_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_DIR_PREFIX "/tmp/heapreel-"
#define CTL_DIR_MODE 0700

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
	rec_cat(rec_utoa(rec_cat(p, e, "/"), e, pid), e, ".sock");
}
