/*
 * fuzz_reader.c - fuzz target of the trace reader (trace-format/): the
 * input (fz.h) becomes a trace file in a memfd, which the reader opens by
 * its /proc/self/fd path; every segment header is walked, every segment
 * decoded and every field of every record read, so that a sanitizer sees
 * any use of memory the reader did not initialise or own.
 *
 * It must never stop at an error other than the reader's own: the reader
 * is expected to refuse bad input with a status, never to crash or leak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fz.h"
#include "trace_format.h"

/* Folds every field into a value the compiler cannot drop. */
static volatile uint64_t sink;

static void touch(const struct tf_record *r)
{
	uint64_t h = r->kind ^ r->fn ^ r->stream ^ r->tid ^ r->seq ^ r->t ^
		     r->t2 ^ r->addr ^ r->old_addr ^ r->size ^ r->stack ^
		     r->id ^ r->parent ^ r->ip ^ r->count ^ r->file_offset ^
		     r->perms;

	if (r->str)
		h += strlen(r->str);
	for (uint32_t i = 0; r->build_id && i < r->build_id_len; i++)
		h += r->build_id[i];
	h += strlen(tf_kind_name(r->kind)) + strlen(tf_fn_name(r->fn));
	sink += h;
}

/* One decoder for every input, as the importer keeps one per stream for
 * many segments: that is how it is used, and a fresh one per input (200 KiB
 * of tables) would cost more than most decodes. */
static void read_trace(struct tf_decoder *d, const char *path)
{
	struct tf_reader *r;
	struct tf_segment_info si;
	struct tf_error e;
	int rc = tf_reader_open(&r, path, &e);

	sink += strlen(tf_status_name(rc));
	if (rc)
		return;
	const struct tf_header *h = tf_reader_header(r);
	sink += h->version + h->pid + h->ppid + h->pointer_size + h->t0_mono_ns +
		h->t0_real_ns + h->sample_period + strlen(h->exe) +
		strlen(h->cmdline) + tf_reader_file_size(r);
	while ((rc = tf_reader_next_segment(r, &si, &e)) == TF_OK) {
		const struct tf_record *recs;

		sink += si.offset + si.stream + si.tid + si.first_seq +
			si.t_first + si.t_last + si.stored_bytes;
		if (tf_decode_segment(r, d, &si, &recs, &e) != TF_OK) {
			sink += e.offset + strlen(e.msg);
			continue;   /* the next header may still be fine */
		}
		for (uint32_t i = 0; i < si.count; i++)
			touch(&recs[i]);
	}
	sink += e.offset + (rc == TF_DONE ? 0 : strlen(e.msg));
	tf_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static struct tf_decoder *d;
	struct tf_error e;
	char path[64];
	uint8_t *file;
	size_t len;

	if (fd < 0 && (fd = memfd_create("fuzz-trace", MFD_CLOEXEC)) < 0)
		abort();
	if (!d && tf_decoder_new(&d, &e) != TF_OK)
		abort();
	if (fz_trace_bytes(data, size, &file, &len))
		return 0;
	if (ftruncate(fd, 0) || (len && pwrite(fd, file, len, 0) != (ssize_t)len))
		abort();
	free(file);
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	read_trace(d, path);
	return 0;
}
