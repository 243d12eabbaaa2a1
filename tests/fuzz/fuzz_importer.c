/*
 * fuzz_importer.c - fuzz target of trace-import on whole files: the input
 * is a trace (fz.h), optionally followed by FZ_RING_MARK and the bytes of
 * its leftover .ring staging file; both are written into a private
 * temporary directory and imported with imp_run, as `trace-import -q
 * -c CKPT run.trc run.db` would, into a database that is deleted after.
 *
 * It must never hide a failure of the importer other than the refusals it
 * is designed to give (imp_run returning -1): crashes, sanitizer reports,
 * leaks and hangs are what it looks for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz.h"
#include "imp.h"

/* Small, so that a few hundred events already make checkpoints. */
#define FZ_CKPT_INTERVAL 16

static char dir[64], trc[96], ring[96], db[96];

static void remove_files(void)
{
	unlink(trc);
	unlink(ring);
	unlink(db);
}

static void remove_dir(void)
{
	remove_files();
	rmdir(dir);
}

static void setup(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(dir, sizeof dir, "%s/hr-fuzz-XXXXXX", base);
	if (!mkdtemp(dir))
		abort();
	snprintf(trc, sizeof trc, "%s/run.trc", dir);
	snprintf(ring, sizeof ring, "%s/run.trc.ring", dir);
	snprintf(db, sizeof db, "%s/run.db", dir);
	atexit(remove_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *mark = memmem(data, size, FZ_RING_MARK, FZ_RING_MARK_LEN);
	size_t tsize = mark ? (size_t)(mark - data) : size;
	char *inputs[] = { trc };
	struct imp_run r = {
		.inputs = inputs, .ninputs = 1, .out = db,
		.o.ckpt_interval = FZ_CKPT_INTERVAL,
	};
	struct imp_err e;
	uint8_t *file;
	size_t len;

	if (!dir[0])
		setup();
	if (fz_trace_bytes(data, tsize, &file, &len))
		return 0;
	if (fz_write_file(trc, file, len) ||
	    (mark && fz_write_file(ring, mark + FZ_RING_MARK_LEN,
				   size - tsize - FZ_RING_MARK_LEN)))
		abort();
	free(file);
	imp_run(&r, &e);
	imp_run_free(&r);
	remove_files();
	return 0;
}
