/*
 * spill.c - scratch files: written sequentially during pass 2, read back
 * sequentially afterwards, through one buffer; records are varints (the
 * encodings are the callers'). Files are unnamed (O_TMPFILE, or created
 * 0600 and unlinked at once) beside the output, so they vanish whatever
 * happens. It must never print, and never hold more than one buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imp.h"
#include "tf_varint.h"

int imp_scratch_fd(const char *dir)
{
	char path[PATH_MAX];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != ENOENT))
		return fd;
	if ((size_t)snprintf(path, sizeof path, "%s/.trace-import-XXXXXX", dir) >=
	    sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);    /* 0600, O_EXCL */
	if (fd >= 0)
		unlink(path);
	return fd;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int imp_spill_open(struct imp_spill *s, const char *dir)
{
	memset(s, 0, sizeof *s);
	s->fd = imp_scratch_fd(dir);
	if (s->fd < 0)
		return -1;
	s->buf = malloc(IMP_SPILL_BUF);
	if (!s->buf) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void imp_spill_close(struct imp_spill *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	memset(s, 0, sizeof *s);
	s->fd = -1;
}

int imp_spill_reserve(struct imp_spill *s)
{
	if (s->n + IMP_REC_MAX > IMP_SPILL_BUF) {
		if (write_all(s->fd, s->buf, s->n))
			return -1;
		s->n = 0;
	}
	return 0;
}

int imp_spill_rewind(struct imp_spill *s)
{
	if (write_all(s->fd, s->buf, s->n))
		return -1;
	s->n = s->off = 0;
	s->eof = false;
	s->prev_id = 0;
	if (lseek(s->fd, 0, SEEK_SET) < 0)
		return -1;
	posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

int imp_spill_fill(struct imp_spill *s)
{
	if (s->eof || s->n - s->off >= IMP_REC_MAX)
		return 0;
	memmove(s->buf, s->buf + s->off, s->n - s->off);
	s->n -= s->off;
	s->off = 0;
	while (s->n < IMP_SPILL_BUF) {
		ssize_t got = read(s->fd, s->buf + s->n, IMP_SPILL_BUF - s->n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -1;
		if (got == 0) {
			s->eof = true;
			break;
		}
		s->n += (size_t)got;
	}
	return 0;
}

bool imp_get_uvs(const uint8_t **pp, const uint8_t *end, uint64_t *v, int n)
{
	const uint8_t *p = *pp;
	for (int i = 0; i < n; i++)
		if (tf_get_varint(&p, end, &v[i]) < 0)
			return false;
	*pp = p;
	return true;
}
