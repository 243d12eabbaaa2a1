/*
 * tf_reader.c - reads a trace: checks the file header, walks the segment
 * headers without decompressing, and decodes one segment at a time after
 * verifying its LZ4 frame checksums.
 *
 * Every problem becomes a status plus a tf_error naming the byte offset
 * (the segment's start for anything inside a segment); this file never
 * prints. It trusts nothing it reads: every length is checked against the
 * file size and the format's limits before it is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lz4frame.h>

#include "tf_internal.h"

struct tf_reader {
	int fd;
	uint64_t size;           /* file size at open */
	uint64_t pos;            /* offset of the next segment header */
	struct tf_header h;
	char *strings;           /* exe and cmdline, NUL-terminated */
	uint64_t *order;         /* bounded: segment offsets, oldest first */
	size_t norder, next;
	uint64_t end;            /* bounded, not wrapped: where the chain broke */
	int wrapped;
};

struct tf_decoder {
	LZ4F_dctx *dctx;
	struct tf_coldec *cols;
	struct tf_stkmodel *stk;   /* STACKS records' model */
	uint8_t *frame;          /* the compressed frame */
	size_t frame_cap;
	uint8_t *raw;            /* the decompressed payload */
	size_t raw_cap;
	struct tf_record *recs;
	size_t recs_cap;
	char *str;               /* copies of meta strings */
	size_t str_cap;
};

static int index_ring(struct tf_reader *r, struct tf_error *err);

/* Reads exactly n bytes at off; short reads are TF_E_TRUNCATED. */
static int read_at(int fd, void *buf, size_t n, uint64_t off,
		   struct tf_error *err)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = pread(fd, (char *)buf + done, n - done,
				  (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			if (err)
				err->sys_errno = errno;
			return tf_fail(err, TF_E_IO, off + done, "read failed: %s",
				       strerror(errno));
		}
		if (k == 0)
			return tf_fail(err, TF_E_TRUNCATED, off + done,
				       "file ends early");
		done += (size_t)k;
	}
	return TF_OK;
}

/* Grows *buf to at least n bytes. */
static int reserve(void **buf, size_t *cap, size_t n, size_t elem)
{
	if (n <= *cap)
		return 0;
	void *p = realloc(*buf, n * elem);
	if (!p)
		return -1;
	*buf = p;
	*cap = n;
	return 0;
}

static int parse_header(struct tf_reader *r, struct tf_error *err)
{
	uint8_t fixed[TF_FILE_FIXED];

	if (r->size == 0)
		return tf_fail(err, TF_E_TRUNCATED, 0, "empty file");
	size_t have = r->size < TF_FILE_FIXED ? (size_t)r->size : TF_FILE_FIXED;
	int rc = read_at(r->fd, fixed, have, 0, err);
	if (rc)
		return rc;
	size_t m = have < TF_FILE_MAGIC_LEN ? have : TF_FILE_MAGIC_LEN;
	if (memcmp(fixed, TF_FILE_MAGIC, m) != 0)
		return tf_fail(err, TF_E_MAGIC, 0, "not a heapreel trace (bad magic)");
	if (have < 12)
		return tf_fail(err, TF_E_TRUNCATED, have,
			       "file ends inside the file header");
	uint32_t version = tf_get32(fixed + 8);
	if (version == 0)
		return tf_fail(err, TF_E_CORRUPT, 8, "format version 0");
	if (version > TF_VERSION)
		return tf_fail(err, TF_E_VERSION, 8,
			       "format version %u is newer than this reader's %u",
			       (uint64_t)version, (uint64_t)TF_VERSION);
	if (have < TF_FILE_FIXED)
		return tf_fail(err, TF_E_TRUNCATED, have,
			       "file ends inside the file header");

	uint32_t total = tf_get32(fixed + 12);
	uint32_t exe_n = tf_get32(fixed + 56), cmd_n = tf_get32(fixed + 60);
	if (total > TF_FILE_MAX_HEADER ||
	    (uint64_t)TF_FILE_FIXED + exe_n + cmd_n + 4 > total)
		return tf_fail(err, TF_E_CORRUPT, 12, "bad file header size %u",
			       (uint64_t)total);
	if (total > r->size)
		return tf_fail(err, TF_E_TRUNCATED, r->size,
			       "file ends inside the file header");
	uint8_t *h = malloc(total);
	if (!h)
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	rc = read_at(r->fd, h, total, 0, err);
	if (!rc && tf_crc32(h, total - 4) != tf_get32(h + total - 4))
		rc = tf_fail(err, TF_E_CORRUPT, 0, "file header checksum mismatch");
	if (!rc && !(r->strings = malloc((size_t)exe_n + cmd_n + 2)))
		rc = tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	if (rc) {
		free(h);
		return rc;
	}
	char *s = r->strings;
	memcpy(s, h + TF_FILE_FIXED, exe_n);
	s[exe_n] = '\0';
	memcpy(s + exe_n + 1, h + TF_FILE_FIXED + exe_n, cmd_n);
	s[exe_n + 1 + cmd_n] = '\0';
	r->h = (struct tf_header){
		.version = version,
		.pid = tf_get32(h + 16),
		.ppid = tf_get32(h + 20),
		.pointer_size = tf_get32(h + 24),
		.t0_mono_ns = tf_get64(h + 32),
		.t0_real_ns = tf_get64(h + 40),
		.sample_period = tf_get64(h + 48),
		.flags = tf_get32(h + 28),
		.exe = s,
		.cmdline = s + exe_n + 1,
	};
	free(h);
	r->pos = total;
	return TF_OK;
}

int tf_reader_open(struct tf_reader **rp, const char *path, struct tf_error *err)
{
	*rp = NULL;
	struct tf_reader *r = calloc(1, sizeof *r);
	if (!r)
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	struct stat st;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0 || fstat(r->fd, &st) < 0) {
		int e = errno;
		if (err)
			err->sys_errno = e;
		tf_fail(err, TF_E_IO, 0, "cannot open: %s", strerror(e));
		tf_reader_close(r);
		return TF_E_IO;
	}
	if (!S_ISREG(st.st_mode)) {
		tf_reader_close(r);
		return tf_fail(err, TF_E_IO, 0, "not a regular file");
	}
	r->size = (uint64_t)st.st_size;
	int rc = parse_header(r, err);
	if (!rc && (r->h.flags & TF_HDR_BOUNDED))
		rc = index_ring(r, err);
	if (rc) {
		tf_reader_close(r);
		return rc;
	}
	*rp = r;
	return TF_OK;
}

const struct tf_header *tf_reader_header(const struct tf_reader *r)
{
	return &r->h;
}

uint64_t tf_reader_file_size(const struct tf_reader *r)
{
	return r->size;
}

void tf_reader_close(struct tf_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r->strings);
	free(r->order);
	free(r);
}

/* Reads and checks the segment header at `at` (sizes against the file and
 * the format's limits), without touching the frame. */
static int seg_header(struct tf_reader *r, uint64_t at, struct tf_segment_info *si,
		      uint32_t *lap, struct tf_error *err)
{
	uint8_t h[TF_SEG_HEADER];

	if (r->size - at < TF_SEG_HEADER)
		return tf_fail(err, TF_E_TRUNCATED, at,
			       "file ends inside a segment header (%u of %u bytes)",
			       r->size - at, (uint64_t)TF_SEG_HEADER);
	int rc = read_at(r->fd, h, TF_SEG_HEADER, at, err);
	if (rc)
		return rc;
	if (tf_get32(h) != TF_SEG_MAGIC)
		return tf_fail(err, TF_E_CORRUPT, at, "bad segment magic");
	if (tf_crc32(h, TF_SEG_HEADER - 4) != tf_get32(h + 52))
		return tf_fail(err, TF_E_CORRUPT, at, "segment header checksum mismatch");
	uint32_t count = tf_get32(h + 12), raw = tf_get32(h + 40);
	uint32_t flen = tf_get32(h + 44);
	if (raw > TF_SEG_MAX_RAW || count > TF_SEG_MAX_RECORDS ||
	    count > (uint64_t)TF_SEG_RECORDS_PER_BYTE * raw ||
	    flen > 2 * (uint64_t)TF_SEG_MAX_RAW)
		return tf_fail(err, TF_E_CORRUPT, at,
			       "segment sizes out of range (%u records, %u bytes)",
			       (uint64_t)count, (uint64_t)raw);
	if (r->size - at - TF_SEG_HEADER < flen)
		return tf_fail(err, TF_E_TRUNCATED, at,
			       "file ends inside a segment (%u of %u bytes)",
			       r->size - at, (uint64_t)TF_SEG_HEADER + flen);
	*si = (struct tf_segment_info){
		.offset = at,
		.stream = tf_get32(h + 4),
		.tid = tf_get32(h + 8),
		.first_seq = tf_get64(h + 16),
		.count = count,
		.t_first = tf_get64(h + 24),
		.t_last = tf_get64(h + 32),
		.stored_bytes = TF_SEG_HEADER + flen,
	};
	*lap = tf_get32(h + 48);
	return TF_OK;
}

/* Appends the chain of intact segments of one lap starting at `at`;
 * returns where it stopped. */
static uint64_t chain(struct tf_reader *r, uint64_t at, uint32_t lap, size_t *cap)
{
	struct tf_segment_info si;
	uint32_t l;

	while (at < r->size && seg_header(r, at, &si, &l, NULL) == TF_OK && l == lap) {
		if (r->norder == *cap) {
			size_t n = *cap ? 2 * *cap : 64;
			uint64_t *o = realloc(r->order, n * sizeof *o);
			if (!o)
				return UINT64_MAX;
			r->order = o;
			*cap = n;
		}
		r->order[r->norder++] = at;
		at += si.stored_bytes;
	}
	return at;
}

/* The first intact segment header of the given lap (0: any) at or after
 * `at`, or the file size; *found gets its lap. The magic is searched a
 * buffer at a time. */
static uint64_t resync(struct tf_reader *r, uint64_t at, uint32_t lap, uint32_t *found)
{
	enum { BUF = 1 << 16 };
	uint8_t buf[BUF];
	struct tf_segment_info si;
	uint32_t l;

	while (at + TF_SEG_HEADER <= r->size) {
		size_t n = r->size - at < BUF ? (size_t)(r->size - at) : BUF;
		ssize_t got = pread(r->fd, buf, n, (off_t)at);
		if (got < 4)
			break;
		for (size_t i = 0; i + 4 <= (size_t)got; i++)
			if (tf_get32(buf + i) == TF_SEG_MAGIC &&
			    seg_header(r, at + i, &si, &l, NULL) == TF_OK &&
			    (l == lap || !lap)) {
				*found = l;
				return at + i;
			}
		at += (uint64_t)got - 3;
	}
	return r->size;
}

/* Lists a bounded trace's segments oldest first: the current lap runs from
 * the first segment to where its chain breaks; the previous lap's survivors
 * are the run of its intact segments that reaches the end of file (a break
 * in that lap only means less of it survived). A current-lap segment torn
 * at the start of the ring (killed just after wrapping) is skipped; an
 * intact current-lap segment after the break means damage there, reported
 * once the segments before it are read. */
static int index_ring(struct tf_reader *r, struct tf_error *err)
{
	struct tf_segment_info si;
	uint32_t lap = 0, found = 0;
	size_t cap = 0, cur;
	uint64_t start = r->pos, end = start, old = r->size, next;

	if (start < r->size && seg_header(r, start, &si, &lap, NULL) != TF_OK) {
		old = resync(r, start, 0, &found);
		lap = old < r->size ? found + 1 : 0;
	} else if (lap >= 2) {
		end = chain(r, start, lap, &cap);
		if (end == UINT64_MAX)
			return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
		old = resync(r, end, lap - 1, &found);
	}
	if (lap <= 1) {                    /* never wrapped: one chain */
		r->end = lap ? chain(r, start, 1, &cap) : start;
		return r->end == UINT64_MAX ? tf_fail(err, TF_E_NOMEM, 0, "out of memory") : TF_OK;
	}
	cur = r->norder;
	for (;;) {
		r->norder = cur;
		next = chain(r, old, lap - 1, &cap);
		if (next == UINT64_MAX)
			return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
		if (next >= r->size)
			break;
		old = resync(r, next + 1, lap - 1, &found);
	}
	/* rotate: the previous lap first */
	uint64_t *tmp = malloc((cur ? cur : 1) * sizeof *tmp);
	if (!tmp)
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	memcpy(tmp, r->order, cur * sizeof *tmp);
	memmove(r->order, r->order + cur, (r->norder - cur) * sizeof *tmp);
	memcpy(r->order + r->norder - cur, tmp, cur * sizeof *tmp);
	free(tmp);
	r->wrapped = 1;
	r->end = end > start && resync(r, end, lap, &found) < r->size ? end : r->size;
	return TF_OK;
}

int tf_reader_wrapped(const struct tf_reader *r)
{
	return r->wrapped;
}

int tf_reader_next_segment(struct tf_reader *r, struct tf_segment_info *si,
			   struct tf_error *err)
{
	uint32_t lap;

	if (r->h.flags & TF_HDR_BOUNDED) {
		if (r->next < r->norder)
			return seg_header(r, r->order[r->next++], si, &lap, err);
		/* A ring that never wrapped ends like any trace: cleanly at
		 * the end of file, or at a torn segment, reported here; one
		 * that did, at the end of its newest lap, or at damage in it. */
		if (r->end >= r->size)
			return TF_DONE;
		int rc = seg_header(r, r->end, si, &lap, err);
		return rc ? rc : tf_fail(err, TF_E_CORRUPT, r->end,
					 "segment of lap %u where the ring's newest lap goes on",
					 (uint64_t)lap);
	}
	if (r->pos == r->size)
		return TF_DONE;
	int rc = seg_header(r, r->pos, si, &lap, err);
	if (rc == TF_OK)
		r->pos += si->stored_bytes;
	return rc;
}

int tf_decoder_new(struct tf_decoder **dp, struct tf_error *err)
{
	struct tf_decoder *d = calloc(1, sizeof *d);
	*dp = NULL;
	if (!d || !(d->cols = tf_coldec_new()) || !(d->stk = tf_stkmodel_new()) ||
	    LZ4F_isError(LZ4F_createDecompressionContext(&d->dctx, LZ4F_VERSION))) {
		tf_decoder_free(d);
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	}
	*dp = d;
	return TF_OK;
}

void tf_decoder_free(struct tf_decoder *d)
{
	if (!d)
		return;
	LZ4F_freeDecompressionContext(d->dctx);
	tf_coldec_free(d->cols);
	tf_stkmodel_free(d->stk);
	free(d->frame);
	free(d->raw);
	free(d->recs);
	free(d->str);
	free(d);
}

/* Decompresses the frame of si into d->raw, checking that it is one
 * complete frame of exactly the announced size. */
static int inflate(struct tf_decoder *d, const struct tf_segment_info *si,
		   size_t flen, size_t raw, struct tf_error *err)
{
	size_t in_done = 0, out_done = 0, hint = 1;
	LZ4F_resetDecompressionContext(d->dctx);
	while (hint != 0 && in_done < flen) {
		size_t in = flen - in_done, out = raw - out_done;
		hint = LZ4F_decompress(d->dctx, d->raw + out_done, &out,
				       d->frame + in_done, &in, NULL);
		if (LZ4F_isError(hint))
			return tf_fail(err, TF_E_CORRUPT, si->offset,
				       "segment of stream %u: LZ4 frame: %s",
				       (uint64_t)si->stream, LZ4F_getErrorName(hint));
		if (in == 0 && out == 0)
			break;
		in_done += in;
		out_done += out;
	}
	if (hint != 0 || in_done != flen || out_done != raw)
		return tf_fail(err, TF_E_CORRUPT, si->offset,
			       "segment of stream %u: LZ4 frame incomplete or of the wrong size",
			       (uint64_t)si->stream);
	return TF_OK;
}

/* Readers plan with an event segment's header time range (merges key on
 * t_first, timelines span up to t_last): a record outside it is corrupt. */
static int check_times(const struct tf_segment_info *si, const struct tf_record *recs,
		       struct tf_error *err)
{
	for (uint32_t i = 0; i < si->count; i++) {
		const struct tf_record *x = &recs[i];
		uint64_t t2 = x->kind == TF_REALLOC ? x->t2 : x->t;
		if (x->t < si->t_first || x->t > si->t_last ||
		    t2 < si->t_first || t2 > si->t_last)
			return tf_fail(err, TF_E_CORRUPT, si->offset,
				       "segment of stream %u: record %u: time "
				       "outside the segment's range",
				       (uint64_t)si->stream, (uint64_t)i);
	}
	return TF_OK;
}

int tf_decode_segment(struct tf_reader *r, struct tf_decoder *d,
		      const struct tf_segment_info *si,
		      const struct tf_record **recs, struct tf_error *err)
{
	uint8_t h[TF_SEG_HEADER];
	int rc = read_at(r->fd, h, TF_SEG_HEADER, si->offset, err);
	if (rc)
		return rc;
	/* si may come from a caller's copy: re-read the sizes from the file. */
	if (tf_get32(h) != TF_SEG_MAGIC ||
	    tf_crc32(h, TF_SEG_HEADER - 4) != tf_get32(h + 52) ||
	    tf_get32(h + 12) != si->count)
		return tf_fail(err, TF_E_CORRUPT, si->offset, "segment header changed");
	size_t raw = tf_get32(h + 40), flen = tf_get32(h + 44);
	if (raw > TF_SEG_MAX_RAW || si->count > TF_SEG_MAX_RECORDS ||
	    si->count > (uint64_t)TF_SEG_RECORDS_PER_BYTE * raw)
		return tf_fail(err, TF_E_CORRUPT, si->offset, "segment sizes out of range");
	if (reserve((void **)&d->frame, &d->frame_cap, flen, 1) ||
	    reserve((void **)&d->raw, &d->raw_cap, raw ? raw : 1, 1) ||
	    reserve((void **)&d->recs, &d->recs_cap, si->count ? si->count : 1,
		    sizeof *d->recs) ||
	    reserve((void **)&d->str, &d->str_cap, raw + 2 * (size_t)si->count + 1, 1))
		return tf_fail(err, TF_E_NOMEM, si->offset, "out of memory");
	if ((rc = read_at(r->fd, d->frame, flen, si->offset + TF_SEG_HEADER, err)))
		return rc == TF_E_TRUNCATED ? tf_fail(err, rc, si->offset,
				"file ends inside a segment") : rc;
	if ((rc = inflate(d, si, flen, raw, err)))
		return rc;
	if (si->stream == 0)
		rc = tf_meta_decode(si, d->raw, raw, d->recs, d->str, d->stk, err);
	else if (!(rc = tf_coldec_decode(d->cols, si, d->raw, raw, d->recs, err)))
		rc = check_times(si, d->recs, err);
	if (rc)
		return rc;
	*recs = d->recs;
	return TF_OK;
}
