/*
 * db.c - the output database: created as OUT.tmp-PID-XXXXXX beside OUT
 * (0600, O_EXCL, so never through a planted file or symlink; PID is the
 * importer's, which holds an flock on the file until it is renamed), loaded
 * in one large transaction with the journal and syncs off, then made
 * durable, marked complete (meta complete=1, written last) and renamed over
 * OUT.
 *
 * It must never leave a file named OUT that is not complete: every failure
 * path ends in imp_db_abort, which deletes the temporary file. A killed
 * import cannot; the next import to the same OUT removes what it left (a
 * regular file whose PID is gone and that no import holds locked), never a
 * running import's file, never through a symlink. SQL parameters are
 * always bound, never pasted into SQL text.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "imp.h"

/* Page cache for the load: large enough that B-tree appends never re-read
 * pages, small enough to keep the importer's RSS modest. */
#define DB_CACHE_KIB 65536
#define DB_STMT_CACHE 32              /* distinct statements imp_db_insert keeps */
/* The temporary file: OUT TMP_TAG PID '-' XXXXXX (mkostemp's TMP_RANDOM
 * characters from TMP_CHARS); while it is finished, SQLite's rollback
 * journal is beside it, the same name + JOURNAL. */
#define TMP_TAG ".tmp-"
#define TMP_RANDOM 6
#define TMP_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#define JOURNAL "-journal"

struct stmt_slot {
	const char *sql;              /* identity: callers pass string literals */
	sqlite3_stmt *st;
};

struct imp_db {
	sqlite3 *h;
	char *out, *tmp, *dir;
	int lock_fd;                  /* the temporary file, flock'ed: "in use" */
	sqlite3_stmt *meta_st;
	struct imp_bulk bulk;         /* the source imp_bulk reads */
	struct stmt_slot cache[DB_STMT_CACHE];
	char err[256];
	bool unwritable;              /* a write to the output failed (sticky) */
};

/* The temporary path, for the signal handler: deleting it is the only
 * async-signal-safe cleanup there is. */
static volatile sig_atomic_t tmp_armed;
static char tmp_for_signal[PATH_MAX];

static void on_signal(int sig)
{
	if (tmp_armed)
		unlink(tmp_for_signal);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* An errno that only a write to a full or limited file system gives. */
static bool write_errno(int err)
{
	return err == ENOSPC || err == EFBIG || err == EDQUOT;
}

/* Keeps SQLite's last error in db->err. One that the output's file
 * system caused (disk full, file size limit, I/O error) marks the output
 * unwritable and says the system's reason where it is known: SQLite keeps
 * it for some codes only (not for SQLITE_IOERR_WRITE), so errno, read
 * first thing, when it is one that only such a write gives. */
static void note(struct imp_db *db)
{
	int err = errno;
	int code = sqlite3_extended_errcode(db->h), sys = sqlite3_system_errno(db->h);
	bool io = (code & 0xff) == SQLITE_FULL || (code & 0xff) == SQLITE_CANTOPEN ||
		  ((code & 0xff) == SQLITE_IOERR && code != SQLITE_IOERR_NOMEM);

	if (io && !sys && write_errno(err))
		sys = err;
	db->unwritable |= io;
	snprintf(db->err, sizeof db->err, "%s",
		 io && sys ? strerror(sys) : sqlite3_errmsg(db->h));
}

static int fail(struct imp_db *db, struct imp_err *e, const char *what)
{
	note(db);
	imp_errf(e, "%s: %s: %s", db->out, what, db->err);
	return -1;
}

static int exec(struct imp_db *db, const char *sql, struct imp_err *e)
{
	if (sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK)
		return fail(db, e, "sqlite");
	return 0;
}

static int prep(struct imp_db *db, const char *sql, sqlite3_stmt **st,
		struct imp_err *e)
{
	if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
			       NULL) != SQLITE_OK)
		return fail(db, e, "sqlite");
	return 0;
}

/* The pid in a directory entry's name if it is PREFIX PID '-' XXXXXX,
 * alone or + JOURNAL; else 0. */
static long tmp_owner(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);
	char *end;
	long pid;

	if (strncmp(name, prefix, n) || !isdigit((unsigned char)name[n]))
		return 0;
	errno = 0;
	pid = strtol(name + n, &end, 10);
	if (errno || pid <= 0 || pid > INT_MAX || *end != '-' ||
	    strspn(end + 1, TMP_CHARS) < TMP_RANDOM)
		return 0;
	end += 1 + TMP_RANDOM;
	return !*end || !strcmp(end, JOURNAL) ? pid : 0;
}

/* Removes the entry name of dfd, a killed import's temporary file, if it
 * is stale: its process is gone, it is a regular file of ours (opened
 * O_NOFOLLOW: a symlink is left alone), no import holds its flock (one in
 * another pid namespace would), and the name still is that file. */
static void remove_if_stale(int dfd, const char *name, long pid)
{
	struct stat sb, now;
	int fd;

	if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
		return;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
	    !flock(fd, LOCK_EX | LOCK_NB) &&
	    !fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) &&
	    now.st_dev == sb.st_dev && now.st_ino == sb.st_ino)
		unlinkat(dfd, name, 0);
	close(fd);
}

/* What imports to out that were killed left beside it. Best effort: an
 * unreadable directory leaves them, and then creating ours fails anyway. */
static void remove_stale(const struct imp_db *db)
{
	const char *base = strrchr(db->out, '/');
	char prefix[NAME_MAX + sizeof TMP_TAG];
	struct dirent *de;
	DIR *d;
	long pid;
	int dfd;

	base = base ? base + 1 : db->out;
	if (strlen(base) >= NAME_MAX)
		return;
	strcat(strcpy(prefix, base), TMP_TAG);
	dfd = open(db->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)))
		if ((pid = tmp_owner(de->d_name, prefix)))
			remove_if_stale(dfd, de->d_name, pid);
	closedir(d);
}

int imp_db_create(struct imp_db **dbp, const char *out, bool force,
		  struct imp_err *e)
{
	struct imp_db *db = calloc(1, sizeof *db);
	struct sigaction sa;
	struct stat sb;
	char *d;
	int fd;

	*dbp = NULL;
	/* One thread at a time uses the connection (pass 2 hands it to the
	 * inserter of sink.c, then takes it back): no connection mutexes, no
	 * memory statistics (a lock per allocation). Only possible before
	 * SQLite initializes. */
	sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	if (!db) {
		imp_errf(e, "%s: out of memory", out);
		return -1;
	}
	db->lock_fd = -1;
	db->out = strdup(out);
	/* OUT.tmp-PID-XXXXXX: a pid has at most 10 digits */
	db->tmp = malloc(strlen(out) + sizeof TMP_TAG "4294967295-XXXXXX");
	d = strdup(out);
	if (!db->out || !db->tmp || !d) {
		free(d);
		imp_errf(e, "%s: out of memory", out);
		goto err;
	}
	db->dir = strdup(dirname(d));
	free(d);
	if (!db->dir) {
		imp_errf(e, "%s: out of memory", out);
		goto err;
	}
	if (lstat(out, &sb) == 0) {
		if (!force) {
			imp_errf(e, "%s: exists (use --force to overwrite)", out);
			goto err;
		}
		if (!S_ISREG(sb.st_mode)) {
			imp_errf(e, "%s: exists and is not a regular file", out);
			goto err;
		}
	}
	remove_stale(db);
	sprintf(db->tmp, "%s" TMP_TAG "%ld-XXXXXX", out, (long)getpid());
	fd = mkostemp(db->tmp, O_CLOEXEC);   /* 0600, O_EXCL */
	if (fd < 0) {
		imp_errf(e, "%s: cannot create %s: %s", out, db->tmp,
			 strerror(errno));
		e->unwritable = true;
		db->tmp[0] = 0;
		goto err;
	}
	db->lock_fd = fd;
	flock(fd, LOCK_EX);   /* new, so no one else holds it: never waits */
	if (strlen(db->tmp) < sizeof tmp_for_signal) {
		strcpy(tmp_for_signal, db->tmp);
		tmp_armed = 1;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
	}
	if (sqlite3_open_v2(db->tmp, &db->h, SQLITE_OPEN_READWRITE |
			    SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		imp_errf(e, "%s: cannot open: %s", db->tmp,
			 db->h ? sqlite3_errmsg(db->h) : "out of memory");
		goto err;
	}
	if (exec(db, "PRAGMA page_size=8192; PRAGMA journal_mode=OFF;"
		 "PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE;"
		 "PRAGMA temp_store=MEMORY;", e))
		goto err;
	{
		char sql[64];

		snprintf(sql, sizeof sql, "PRAGMA cache_size=-%d", DB_CACHE_KIB);
		if (exec(db, sql, e))
			goto err;
	}
	if (imp_bulk_register(db->h, &db->bulk) != SQLITE_OK) {
		fail(db, e, "sqlite");
		goto err;
	}
	if (exec(db, imp_sql_schema, e) || exec(db, "BEGIN", e) ||
	    prep(db, "INSERT OR REPLACE INTO meta VALUES(?,?)", &db->meta_st, e))
		goto err;
	*dbp = db;
	return 0;
err:
	imp_db_blame(db, e);     /* disk full while making the schema */
	imp_db_abort(db);
	return -1;
}

static sqlite3_stmt *cached(struct imp_db *db, const char *sql)
{
	int i;

	for (i = 0; i < DB_STMT_CACHE && db->cache[i].sql; i++)
		if (db->cache[i].sql == sql)
			return db->cache[i].st;
	if (i == DB_STMT_CACHE)
		return NULL;       /* a programming error: too many statements */
	if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT,
			       &db->cache[i].st, NULL) != SQLITE_OK)
		return NULL;
	db->cache[i].sql = sql;
	return db->cache[i].st;
}

static int step(struct imp_db *db, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		note(db);
		return -1;
	}
	return 0;
}

int imp_db_insert(struct imp_db *db, const char *sql, const char *types, ...)
{
	sqlite3_stmt *st = cached(db, sql);
	va_list ap;
	int i, rc = 0;

	if (!st) {
		note(db);
		return -1;
	}
	va_start(ap, types);
	for (i = 0; types[i] && !rc; i++) {
		switch (types[i]) {
		case 'i':
			rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
			break;
		case 'u':
			rc = sqlite3_bind_int64(st, i + 1,
						(int64_t)va_arg(ap, uint64_t));
			break;
		case 'z': {
			int64_t v = va_arg(ap, int64_t);

			rc = v ? sqlite3_bind_int64(st, i + 1, v)
			       : sqlite3_bind_null(st, i + 1);
			break;
		}
		case 'b': {                    /* a blob: pointer, then size_t length */
			const void *p = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);

			rc = sqlite3_bind_blob64(st, i + 1, p, n, SQLITE_STATIC);
			break;
		}
		case 't': {
			const char *s = va_arg(ap, const char *);

			rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT)
			       : sqlite3_bind_null(st, i + 1);
			break;
		}
		default:
			rc = sqlite3_bind_null(st, i + 1);
			break;
		}
	}
	va_end(ap);
	if (rc != SQLITE_OK) {
		note(db);
		sqlite3_reset(st);
		return -1;
	}
	return step(db, st);
}

int imp_db_bulk(struct imp_db *db, const char *sql,
		int (*next)(void *, int64_t *, uint32_t *), void *ctx)
{
	int rc;

	db->bulk.next = next;
	db->bulk.ctx = ctx;
	rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
	db->bulk.next = NULL;
	if (rc != SQLITE_OK) {
		note(db);
		return -1;
	}
	return 0;
}

int imp_db_meta(struct imp_db *db, const char *key, int64_t value)
{
	sqlite3_stmt *st = db->meta_st;

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, value);
	return step(db, st);
}

/* Makes the renamed file and its directory entry reach the disk. */
static int sync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_RDONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int imp_db_finish(struct imp_db *db, struct imp_err *e)
{
	sqlite3_stmt *st = db->meta_st;

	/* Indexes: none; every table is read in the order it was written
	 * (see schema.sql), so no index has to be built from unsorted data. */
	if (exec(db, "COMMIT", e) ||
	    exec(db, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;"
		 "PRAGMA locking_mode=NORMAL;", e))
		return -1;
	sqlite3_bind_text(st, 1, "complete", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, 1);
	if (step(db, st)) {
		imp_errf(e, "%s: sqlite: %s", db->out, db->err);
		return -1;
	}
	for (int i = 0; i < DB_STMT_CACHE && db->cache[i].sql; i++)
		sqlite3_finalize(db->cache[i].st);
	memset(db->cache, 0, sizeof db->cache);
	sqlite3_finalize(db->meta_st);
	db->meta_st = NULL;
	if (sqlite3_close(db->h) != SQLITE_OK)
		return fail(db, e, "close");
	db->h = NULL;
	if (sync_path(db->tmp, 0) || rename(db->tmp, db->out)) {
		snprintf(db->err, sizeof db->err, "%s", strerror(errno));
		db->unwritable = true;
		imp_errf(e, "%s: %s", db->out, db->err);
		return -1;
	}
	tmp_armed = 0;
	db->tmp[0] = 0;
	sync_path(db->dir, O_DIRECTORY);
	imp_db_abort(db);          /* frees what is left */
	return 0;
}

void imp_db_abort(struct imp_db *db)
{
	if (!db)
		return;
	for (int i = 0; i < DB_STMT_CACHE && db->cache[i].sql; i++)
		sqlite3_finalize(db->cache[i].st);
	sqlite3_finalize(db->meta_st);
	if (db->h)
		sqlite3_close(db->h);
	if (db->tmp && db->tmp[0]) {
		tmp_armed = 0;
		unlink(db->tmp);
	}
	if (db->lock_fd >= 0)
		close(db->lock_fd);   /* only now: a close drops SQLite's POSIX locks */
	free(db->out);
	free(db->tmp);
	free(db->dir);
	free(db);
}

uint64_t imp_db_last_rowid(const struct imp_db *db)
{
	return (uint64_t)sqlite3_last_insert_rowid(db->h);
}

const char *imp_db_path(const struct imp_db *db)
{
	return db->out;
}

const char *imp_db_errmsg(const struct imp_db *db)
{
	return db->err;
}

void imp_db_blame(const struct imp_db *db, struct imp_err *e)
{
	if (db->unwritable) {
		imp_errf(e, "%s: cannot write it: %s", db->out, db->err);
		e->unwritable = true;
	}
}

const char *imp_db_dir(const struct imp_db *db)
{
	return db->dir;
}
