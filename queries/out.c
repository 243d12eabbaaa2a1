/* out.c - choosing a writer by name or file extension, and writing a
 * profile to a file atomically.
 *
 * Never: create the output through a planted symlink, leave a partial
 * file under the requested name (a new 0600 file, O_EXCL, moved to the
 * target only once complete), replace an existing file unless forced, or
 * replace the database being read, whatever it is called; nor leave the
 * temporary file behind, on an error or a signal (SIGKILL aside).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qi.h"

/* The temporary file's name: the output's and a random part (mkostemp). */
#define TEMP_SUFFIX ".XXXXXX"

static const struct { const char *name, *ext; } formats[] = {
	[Q_FMT_HEAP] = { "heap", ".heap" },
	[Q_FMT_PB_GZ] = { "pb.gz", ".pb.gz" },
	[Q_FMT_FOLDED] = { "folded", ".folded" },
	[Q_FMT_TEXT] = { "text", ".txt" },
	[Q_FMT_SVG] = { "svg", ".svg" },
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
	case Q_FMT_SVG: return q_write_svg(db, p, key, f);
	}
	return q_fail(db, "unknown output format %d", (int)fmt);
}

int q_output_ok(struct q_db *db, const char *path, bool force)
{
	struct stat st;
	/* stat follows a symlink to the database; lstat sees a dangling one */
	if (!stat(path, &st) && st.st_dev == db->dev && st.st_ino == db->ino) {
		q_fail(db, "%s: is the database being read (%s); never overwritten", path,
		       db->path);
		return Q_OUTPUT;
	}
	if (!force && !lstat(path, &st)) {
		q_fail(db, "%s: already exists; not overwritten", path);
		return Q_OUTPUT;
	}
	return 0;
}

/* Moves the complete temporary file tmp to path; without force, atomically
 * refuses a path that exists. */
static int move_into_place(struct q_db *db, const char *tmp, const char *path, bool force)
{
	if (!renameat2(AT_FDCWD, tmp, AT_FDCWD, path, force ? 0 : RENAME_NOREPLACE))
		return 0;
	if (errno == EEXIST)
		q_fail(db, "%s: already exists; not overwritten", path);
	else
		q_fail(db, "%s: %s", path, strerror(errno));
	return Q_OUTPUT;
}

/* mkostemp's template beside path: path.XXXXXX, its file name cut so that
 * the whole stays a valid name (a path whose name is already near
 * NAME_MAX can still be written). NULL: no memory. */
static char *temp_name(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(path), keep = NAME_MAX - (sizeof TEMP_SUFFIX - 1);
	if (strlen(base) > keep)
		n = (size_t)(base - path) + keep;
	char *tmp = malloc(n + sizeof TEMP_SUFFIX);
	if (tmp) {
		memcpy(tmp, path, n);
		memcpy(tmp + n, TEMP_SUFFIX, sizeof TEMP_SUFFIX);
	}
	return tmp;
}

/* Signals that would end the process between the temporary file's creation
 * and its move or removal, leaving it behind: held until then (a Ctrl-C
 * during the write takes effect right after it). SIGXFSZ is ignored instead,
 * so that the file size limit is a write error (EFBIG), as a full disk is,
 * not a kill. SIGKILL alone can still leave the temporary file. */
struct held {
	sigset_t mask;
	struct sigaction xfsz;
};

static void hold_signals(struct held *h)
{
	static const int ending[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t s;
	sigemptyset(&s);
	for (size_t i = 0; i < sizeof ending / sizeof *ending; i++)
		sigaddset(&s, ending[i]);
	sigprocmask(SIG_BLOCK, &s, &h->mask);
	struct sigaction ignore = { .sa_handler = SIG_IGN };
	sigaction(SIGXFSZ, &ignore, &h->xfsz);
}

static void release_signals(const struct held *h)
{
	sigaction(SIGXFSZ, &h->xfsz, NULL);
	sigprocmask(SIG_SETMASK, &h->mask, NULL);
}

/* Creates the temporary file tmp (temp_name's template) and writes into
 * it with writer; on failure removes it again. */
static int write_temp(struct q_db *db, const char *path, char *tmp,
                      int (*writer)(struct q_db *db, const void *ctx, FILE *f), const void *ctx)
{
	int fd = mkostemp(tmp, O_CLOEXEC);     /* mode 0600, O_EXCL */
	if (fd < 0) {
		q_fail(db, "%s: %s", path, strerror(errno));
		return Q_OUTPUT;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		q_fail(db, "%s: %s", path, strerror(errno));
		close(fd);
		unlink(tmp);
		return Q_OUTPUT;
	}
	int rc = writer(db, ctx, f);
	int werr = ferror(f) ? (errno ? errno : EIO) : 0;
	if (fclose(f) && !werr)
		werr = errno ? errno : EIO;
	if (werr) {                            /* the output's fault, even if a writer saw it */
		q_fail(db, "%s: %s", path, strerror(werr));
		rc = Q_OUTPUT;
	}
	if (rc)
		unlink(tmp);
	return rc;
}

int q_write_atomic(struct q_db *db, const char *path, bool force,
                   int (*writer)(struct q_db *db, const void *ctx, FILE *f), const void *ctx)
{
	int rc = q_output_ok(db, path, force);
	if (rc)
		return rc;
	char *tmp = temp_name(path);
	if (!tmp)
		return q_fail(db, "out of memory");
	struct held h;
	hold_signals(&h);
	rc = write_temp(db, path, tmp, writer, ctx);
	if (!rc && (rc = move_into_place(db, tmp, path, force)))
		unlink(tmp);
	release_signals(&h);
	free(tmp);
	return rc;
}

/* What q_write_file passes through q_write_atomic. */
struct profile_out {
	const struct q_profile *p;
	enum q_format fmt;
	int key;
	bool by_stack;
};

static int write_profile(struct q_db *db, const void *ctx, FILE *f)
{
	const struct profile_out *o = ctx;
	return q_write(db, o->p, o->fmt, o->key, o->by_stack, f);
}

int q_write_file(struct q_db *db, const struct q_profile *p, enum q_format fmt, int key,
                 bool by_stack, const char *path, bool force)
{
	struct profile_out o = { p, fmt, key, by_stack };
	return q_write_atomic(db, path, force, write_profile, &o);
}
