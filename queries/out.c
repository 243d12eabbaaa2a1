/* out.c - choosing a writer by name or file extension, and writing a
 * profile to a file atomically.
 *
 * Never: create the output through a planted symlink or leave a partial
 * file under the requested name (a new 0600 file, O_EXCL, renamed over the
 * target only once complete).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qi.h"

static const struct { const char *name, *ext; } formats[] = {
	[Q_FMT_HEAP] = { "heap", ".heap" },
	[Q_FMT_PB_GZ] = { "pb.gz", ".pb.gz" },
	[Q_FMT_FOLDED] = { "folded", ".folded" },
	[Q_FMT_TEXT] = { "text", ".txt" },
};
#define NFORMATS (int)(sizeof formats / sizeof *formats)

int q_format_by_name(const char *name)
{
	for (int i = 0; i < NFORMATS; i++)
		if (!strcmp(name, formats[i].name))
			return i;
	return -1;
}

int q_format_by_path(const char *path)
{
	size_t n = strlen(path);
	for (int i = 0; i < NFORMATS; i++) {
		size_t e = strlen(formats[i].ext);
		if (n > e && !strcmp(path + n - e, formats[i].ext))
			return i;
	}
	return -1;
}

int q_write(struct q_db *db, const struct q_profile *p, enum q_format fmt, int key,
            bool by_stack, FILE *f)
{
	switch (fmt) {
	case Q_FMT_HEAP: return q_write_heap(db, p, f);
	case Q_FMT_PB_GZ: return q_write_pb_gz(db, p, f);
	case Q_FMT_FOLDED: return q_write_folded(db, p, key, f);
	case Q_FMT_TEXT: return q_write_text(db, p, key, by_stack, f);
	}
	return q_fail(db, "unknown output format %d", (int)fmt);
}

int q_write_file(struct q_db *db, const struct q_profile *p, enum q_format fmt, int key,
                 bool by_stack, const char *path)
{
	size_t n = strlen(path);
	char *tmp = malloc(n + sizeof ".XXXXXX");
	if (!tmp)
		return q_fail(db, "out of memory");
	memcpy(tmp, path, n);
	memcpy(tmp + n, ".XXXXXX", sizeof ".XXXXXX");
	int fd = mkostemp(tmp, O_CLOEXEC);     /* mode 0600, O_EXCL */
	if (fd < 0) {
		int e = errno;
		free(tmp);
		return q_fail(db, "%s: %s", path, strerror(e));
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		unlink(tmp);
		free(tmp);
		return q_fail(db, "%s: %s", path, strerror(e));
	}
	int rc = q_write(db, p, fmt, key, by_stack, f);
	int werr = ferror(f) ? errno : 0;
	if (fclose(f) && !werr)
		werr = errno ? errno : EIO;
	if (!rc && werr)
		rc = q_fail(db, "%s: %s", path, strerror(werr));
	if (!rc && rename(tmp, path))
		rc = q_fail(db, "%s: %s", path, strerror(errno));
	if (rc)
		unlink(tmp);
	free(tmp);
	return rc;
}
