/*
 * tf_writer.c - appends a trace: the file header, one segment per batch of
 * events of a stream (at most TF_SEG_EVENTS events each), the queued meta
 * records of stream 0 (runs of STACK records packed as STACKS records,
 * tf_stacks.c), and END. A bounded writer (tf_writer_bound) wraps
 * to the start of the ring when a segment would end past the bound and
 * stamps every segment with its lap.
 *
 * A segment can also be encoded apart (tf_segenc_events, on any thread,
 * one tf_segenc per thread) and appended later (tf_writer_put): the
 * recorder encodes on two threads when it has the events for it.
 *
 * It runs on the recorder's writer threads inside the traced process, so it
 * allocates only in tf_writer_open and tf_segenc_new (with mmap only: the
 * recorder makes a tf_segenc on its writer thread, where malloc could wait
 * for a lock an application thread holds while it waits for the writer),
 * writes with write(2) only (no stdio), never prints, and after a failed
 * write cuts the file back to the end of the last complete segment so that
 * everything already written stays readable.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <lz4frame.h>

#include "tf_internal.h"

/* One segment being made: its encoder and buffers. The writer has its own
 * (meta segments, tf_write_events); tf_segenc_new makes more, for other
 * threads to encode with while the writer's thread appends. */
struct tf_segenc {
	LZ4F_preferences_t prefs;
	struct tf_colenc *enc;
	uint8_t *raw;               /* one segment's payload before LZ4 */
	size_t raw_cap;
	uint8_t *out;               /* segment header + LZ4 frame */
	size_t out_cap;
	size_t len;                 /* bytes of out that make the segment */
};

struct tf_writer {
	int fd;
	uint64_t off;               /* end of the last complete segment */
	uint64_t data_start;        /* first segment's offset (header size) */
	uint64_t bound;             /* bounded: ring size in bytes; else 0 */
	uint32_t lap;               /* bounded: 1 + times the ring wrapped */
	uint64_t written;           /* bytes appended, all laps */
	struct tf_segenc se;
	struct tf_stkrun *stk;      /* STACK records not yet queued: a run */
	uint8_t *meta;              /* queued meta records (encoded) */
	size_t meta_len;
	uint32_t meta_count;
	uint64_t meta_seq;          /* meta records already written */
	uint64_t meta_tmin, meta_tmax;
};

static int io_fail(struct tf_writer *w, struct tf_error *err, const char *what)
{
	int e = errno;
	/* Cut a partly written segment off so that readers see a clean end;
	 * best effort, the write error is what gets reported. A ring past its
	 * first lap keeps older segments after off: only rewind there. */
	if (w->lap > 1 || ftruncate(w->fd, (off_t)w->off) == 0)
		lseek(w->fd, (off_t)w->off, SEEK_SET);
	if (err)
		err->sys_errno = e;
	const char *name = strerrorname_np(e);
	return tf_fail(err, TF_E_IO, w->off, "%s failed (%s)", what,
		       name ? name : "unknown errno");
}

static int write_all(struct tf_writer *w, const uint8_t *p, size_t n,
		     struct tf_error *err)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = write(w->fd, p + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return io_fail(w, err, "write");
		}
		done += (size_t)k;
	}
	w->off += n;
	w->written += n;
	return TF_OK;
}

/* Bounded: a segment of n bytes that would end past the bound starts the
 * next lap at the start of the ring. What the last lap left beyond the
 * current end is cut off first, so the file holds two laps at most. */
static int wrap_if_needed(struct tf_writer *w, size_t n, struct tf_error *err)
{
	if (!w->bound || w->off + n <= w->bound || w->off == w->data_start)
		return TF_OK;
	if (ftruncate(w->fd, (off_t)w->off) != 0 ||
	    lseek(w->fd, (off_t)w->data_start, SEEK_SET) < 0)
		return io_fail(w, err, "wrapping the trace ring");
	w->off = w->data_start;
	w->lap++;
	return TF_OK;
}

/* Compresses se->raw[0..len) as one LZ4 frame into se->out after the
 * room for a segment header; *flen gets the frame's length. The one-shot
 * frame API keeps its state on the stack (about 16 KiB) and allocates
 * nothing, unlike LZ4F_compressBegin, which allocates a buffer per frame. */
static int compress(struct tf_segenc *se, size_t len, size_t *flen, struct tf_error *err)
{
	se->prefs.frameInfo.contentSize = len;
	size_t r = LZ4F_compressFrame(se->out + TF_SEG_HEADER, se->out_cap - TF_SEG_HEADER,
				      se->raw, len, &se->prefs);
	if (LZ4F_isError(r))
		return tf_fail(err, TF_E_NOMEM, 0, "LZ4 compression failed: %s",
			       LZ4F_getErrorName(r));
	*flen = r;
	return TF_OK;
}

/* Makes se->raw[0..len) a segment in se->out: everything but the lap and
 * the header's checksum, which tf_writer_put sets. */
static int seal(struct tf_segenc *se, uint32_t stream, uint32_t tid, uint64_t first_seq,
		uint32_t count, uint64_t t_first, uint64_t t_last, size_t len,
		struct tf_error *err)
{
	size_t at = 0;
	int rc = compress(se, len, &at, err);
	if (rc)
		return rc;
	uint8_t *h = se->out;
	tf_put32(h + 0, TF_SEG_MAGIC);
	tf_put32(h + 4, stream);
	tf_put32(h + 8, tid);
	tf_put32(h + 12, count);
	tf_put64(h + 16, first_seq);
	tf_put64(h + 24, t_first);
	tf_put64(h + 32, t_last);
	tf_put32(h + 40, (uint32_t)len);
	tf_put32(h + 44, (uint32_t)at);
	se->len = TF_SEG_HEADER + at;
	return TF_OK;
}

int tf_writer_put(struct tf_writer *w, struct tf_segenc *se, struct tf_error *err)
{
	int rc = wrap_if_needed(w, se->len, err);
	if (rc)
		return rc;
	uint8_t *h = se->out;
	tf_put32(h + 48, w->lap);
	tf_put32(h + 52, tf_crc32(h, TF_SEG_HEADER - 4));
	return write_all(w, h, se->len, err);
}

struct tf_segenc *tf_writer_segenc(struct tf_writer *w)
{
	return &w->se;
}

/* Appends w->se.raw[0..len) as one segment. */
static int put_segment(struct tf_writer *w, uint32_t stream, uint32_t tid,
		       uint64_t first_seq, uint32_t count, uint64_t t_first,
		       uint64_t t_last, size_t len, struct tf_error *err)
{
	int rc = seal(&w->se, stream, tid, first_seq, count, t_first, t_last, len, err);
	return rc ? rc : tf_writer_put(w, &w->se, err);
}

static void segenc_fini(struct tf_segenc *se)
{
	tf_colenc_free(se->enc);
	if (se->raw)
		munmap(se->raw, se->raw_cap);
	if (se->out)
		munmap(se->out, se->out_cap);
}

/* out_min: what else the writer builds in se->out (its file header). */
static int segenc_init(struct tf_segenc *se, size_t out_min)
{
	se->prefs.frameInfo.blockSizeID = LZ4F_max4MB;
	se->prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	se->prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
	se->raw_cap = tf_colenc_bound(TF_SEG_EVENTS + 1);
	if (se->raw_cap < TF_META_QUEUE)
		se->raw_cap = TF_META_QUEUE;
	se->out_cap = TF_SEG_HEADER + LZ4F_compressFrameBound(se->raw_cap, &se->prefs);
	if (se->out_cap < out_min)
		se->out_cap = out_min;
	se->raw = tf_map(se->raw_cap, 0);
	se->out = tf_map(se->out_cap, 0);
	se->enc = tf_colenc_new();
	return se->raw && se->out && se->enc ? 0 : -1;  /* the caller finis */
}

int tf_segenc_new(struct tf_segenc **out, struct tf_error *err)
{
	struct tf_segenc *se = tf_map(sizeof *se, 0);  /* zeroed */
	*out = NULL;
	if (!se || segenc_init(se, 0) < 0) {
		tf_segenc_free(se);
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	}
	*out = se;
	return TF_OK;
}

void tf_segenc_free(struct tf_segenc *se)
{
	if (!se)
		return;
	segenc_fini(se);
	munmap(se, sizeof *se);
}

static int put_file_header(struct tf_writer *w, const struct tf_header *hd,
			   struct tf_error *err)
{
	size_t exe_n = hd->exe ? strlen(hd->exe) : 0;
	size_t cmd_n = hd->cmdline ? strlen(hd->cmdline) : 0;
	exe_n = exe_n > TF_MAX_STR ? TF_MAX_STR : exe_n;
	cmd_n = cmd_n > TF_MAX_STR ? TF_MAX_STR : cmd_n;
	size_t total = TF_FILE_FIXED + exe_n + cmd_n + 4;

	uint8_t *h = w->se.out;
	memcpy(h, TF_FILE_MAGIC, TF_FILE_MAGIC_LEN);
	tf_put32(h + 8, TF_VERSION);
	tf_put32(h + 12, (uint32_t)total);
	tf_put32(h + 16, hd->pid);
	tf_put32(h + 20, hd->ppid);
	tf_put32(h + 24, hd->pointer_size);
	tf_put32(h + 28, 0);
	tf_put64(h + 32, hd->t0_mono_ns);
	tf_put64(h + 40, hd->t0_real_ns);
	tf_put64(h + 48, hd->sample_period);
	tf_put32(h + 56, (uint32_t)exe_n);
	tf_put32(h + 60, (uint32_t)cmd_n);
	if (exe_n)
		memcpy(h + TF_FILE_FIXED, hd->exe, exe_n);
	if (cmd_n)
		memcpy(h + TF_FILE_FIXED + exe_n, hd->cmdline, cmd_n);
	tf_put32(h + total - 4, tf_crc32(h, total - 4));
	return write_all(w, h, total, err);
}

static void writer_free(struct tf_writer *w)
{
	segenc_fini(&w->se);
	tf_stkrun_free(w->stk);
	free(w->meta);
	free(w);
}

int tf_writer_open(struct tf_writer **wp, int fd, const struct tf_header *h,
		   struct tf_error *err)
{
	*wp = NULL;
	if (fd < 0 || !h)
		return tf_fail(err, TF_E_ARG, 0, "no file or no header");
	struct tf_writer *w = calloc(1, sizeof *w);
	if (!w)
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	w->fd = fd;
	w->meta = malloc(TF_META_QUEUE);
	w->stk = tf_stkrun_new();
	w->meta_tmin = UINT64_MAX;
	if (segenc_init(&w->se, TF_FILE_FIXED + 2 * TF_MAX_STR + 4) < 0 || !w->meta ||
	    !w->stk) {
		writer_free(w);
		return tf_fail(err, TF_E_NOMEM, 0, "out of memory");
	}
	int rc = put_file_header(w, h, err);
	if (rc) {
		writer_free(w);
		return rc;
	}
	w->data_start = w->off;
	*wp = w;
	return TF_OK;
}

int tf_writer_bound(struct tf_writer *w, uint64_t max_bytes, struct tf_error *err)
{
	if (w->off != w->data_start || max_bytes < TF_BOUND_MIN)
		return tf_fail(err, TF_E_ARG, 0, "bound below %u bytes or set too late",
			       (uint64_t)TF_BOUND_MIN);
	/* Set the header's flag: read it back, patch, checksum, rewrite. */
	uint8_t *h = w->se.out;
	size_t n = (size_t)w->data_start;
	if (pread(w->fd, h, n, 0) != (ssize_t)n)
		return io_fail(w, err, "reading the header back");
	tf_put32(h + 28, tf_get32(h + 28) | TF_HDR_BOUNDED);
	tf_put32(h + n - 4, tf_crc32(h, n - 4));
	if (pwrite(w->fd, h, n, 0) != (ssize_t)n)
		return io_fail(w, err, "rewriting the header");
	w->bound = max_bytes;
	w->lap = 1;
	return TF_OK;
}

uint64_t tf_writer_written(const struct tf_writer *w)
{
	return w->written;
}

/* Checks a batch: known kinds, REALLOC halves in pairs, known fns. */
static int check_events(const struct tf_event *ev, size_t n,
			struct tf_error *err)
{
	for (size_t i = 0; i < n; i++) {
		unsigned k = ev[i].kind;
		if (ev[i].fn >= TF_FN_COUNT || (tf_fn_custom(ev[i].fn) && k != TF_EV_ALLOC))
			return tf_fail(err, TF_E_ARG, 0, "event %u: bad fn %u",
				       (uint64_t)i, (uint64_t)ev[i].fn);
		if (k == TF_EV_ALLOC || k == TF_EV_FREE)
			continue;
		if (k == TF_EV_REALLOC_OLD && i + 1 < n &&
		    ev[i + 1].kind == TF_EV_REALLOC_NEW) {
			i++;
			continue;
		}
		return tf_fail(err, TF_E_ARG, 0,
			       "event %u: kind %u is not ALLOC, FREE or a REALLOC pair",
			       (uint64_t)i, (uint64_t)k);
	}
	return TF_OK;
}

/* Encodes ev[0..n) (checked, one segment's worth) into se. */
static int encode(struct tf_segenc *se, uint32_t stream, uint32_t tid, uint64_t first_seq,
		  const struct tf_event *ev, size_t n, struct tf_error *err)
{
	size_t recs = 0;
	for (size_t i = 0; i < n; i++)
		recs += ev[i].kind != TF_EV_REALLOC_NEW;
	uint64_t t0, t1;
	size_t len = tf_colenc_encode(se->enc, ev, n, se->raw, &t0, &t1);
	return seal(se, stream, tid, first_seq, (uint32_t)recs, t0, t1, len, err);
}

int tf_segenc_events(struct tf_segenc *se, uint32_t stream, uint32_t tid,
		     uint64_t first_seq, const struct tf_event *ev, size_t n,
		     struct tf_error *err)
{
	if (stream == 0)
		return tf_fail(err, TF_E_ARG, 0, "stream 0 is the meta stream");
	/* one more than TF_SEG_EVENTS only for the second half of a pair */
	size_t max = TF_SEG_EVENTS + (n > TF_SEG_EVENTS &&
				      ev[TF_SEG_EVENTS - 1].kind == TF_EV_REALLOC_OLD);
	if (n == 0 || n > max)
		return tf_fail(err, TF_E_ARG, 0, "%u events do not make one segment", (uint64_t)n);
	int rc = check_events(ev, n, err);
	return rc ? rc : encode(se, stream, tid, first_seq, ev, n, err);
}

int tf_write_events(struct tf_writer *w, uint32_t stream, uint32_t tid,
		    uint64_t first_seq, const struct tf_event *ev, size_t n,
		    struct tf_error *err)
{
	if (stream == 0)
		return tf_fail(err, TF_E_ARG, 0, "stream 0 is the meta stream");
	int rc = check_events(ev, n, err);
	if (rc)
		return rc;
	while (n) {
		size_t k = n < TF_SEG_EVENTS ? n : TF_SEG_EVENTS;
		if (ev[k - 1].kind == TF_EV_REALLOC_OLD)
			k++;        /* keep the pair together */
		rc = encode(&w->se, stream, tid, first_seq, ev, k, err);
		if (!rc)
			rc = tf_writer_put(w, &w->se, err);
		if (rc)
			return rc;
		first_seq += k;
		ev += k;
		n -= k;
	}
	return TF_OK;
}

/* Writes the queued meta records as one segment. */
static int flush_queue(struct tf_writer *w, struct tf_error *err)
{
	if (!w->meta_count)
		return TF_OK;
	memcpy(w->se.raw, w->meta, w->meta_len);
	uint64_t t0 = w->meta_tmin == UINT64_MAX ? 0 : w->meta_tmin;
	int rc = put_segment(w, 0, 0, w->meta_seq, w->meta_count, t0,
			     w->meta_tmax, w->meta_len, err);
	if (rc)
		return rc;  /* the queue stays; a later flush retries it */
	w->meta_seq += w->meta_count;
	w->meta_count = 0;
	w->meta_len = 0;
	w->meta_tmin = UINT64_MAX;
	w->meta_tmax = 0;
	return TF_OK;
}

/* Room in the queue for count records of at most bytes: the segment's
 * record limit counts a STACKS record's nodes. */
static int make_room(struct tf_writer *w, size_t bytes, uint32_t count,
		     struct tf_error *err)
{
	if (bytes > TF_META_QUEUE - w->meta_len ||
	    count > TF_SEG_MAX_RECORDS - w->meta_count)
		return flush_queue(w, err);
	return TF_OK;
}

/* Queues the run of STACK records gathered so far as one STACKS record. */
static int queue_run(struct tf_writer *w, struct tf_error *err)
{
	uint32_t n = tf_stkrun_count(w->stk);
	if (!n)
		return TF_OK;
	int rc = make_room(w, tf_stkrun_bound(w->stk), n, err);
	if (rc)
		return rc;  /* the run stays; a later record or flush retries it */
	w->meta_len += tf_stkrun_encode(w->stk, w->meta + w->meta_len);
	w->meta_count += n;
	return TF_OK;
}

int tf_writer_flush(struct tf_writer *w, struct tf_error *err)
{
	int rc = queue_run(w, err);
	return rc ? rc : flush_queue(w, err);
}

/* Encodes r into the queue. */
static int queue_record(struct tf_writer *w, const struct tf_record *r,
			struct tf_error *err)
{
	int rc = make_room(w, tf_meta_bound(r), 1, err);
	if (rc)
		return rc;
	size_t len;
	rc = tf_meta_encode(r, w->meta + w->meta_len, &len, err);
	if (rc)
		return rc;
	w->meta_len += len;
	w->meta_count++;
	if (r->kind == TF_MARK || r->kind == TF_LOST || r->kind == TF_END) {
		w->meta_tmin = r->t < w->meta_tmin ? r->t : w->meta_tmin;
		w->meta_tmax = r->t > w->meta_tmax ? r->t : w->meta_tmax;
	}
	return TF_OK;
}

/* Queues r after the run before it, so that records keep their order. */
static int queue_meta(struct tf_writer *w, const struct tf_record *r,
		      struct tf_error *err)
{
	int rc = queue_run(w, err);
	return rc ? rc : queue_record(w, r, err);
}

/* A STACK record joins the run (FORMAT.md "STACKS"); one that does not
 * continue it (ids not consecutive, run full) queues the run first. */
static int gather_stack(struct tf_writer *w, const struct tf_record *r,
			struct tf_error *err)
{
	if (r->id == 0)
		return tf_fail(err, TF_E_ARG, 0, "stack node id 0 is the root");
	if (tf_stkrun_add(w->stk, r) == 0)
		return TF_OK;
	int rc = queue_run(w, err);
	if (!rc)
		tf_stkrun_add(w->stk, r);  /* an empty run takes any node */
	return rc;
}

int tf_write_meta(struct tf_writer *w, const struct tf_record *r,
		  struct tf_error *err)
{
	if (r->kind == TF_END)
		return tf_fail(err, TF_E_ARG, 0, "END is written by tf_writer_close");
	if (r->kind == TF_STACK)
		return gather_stack(w, r, err);
	/* A SAMPLE passes the run: counter values are not tied to stack
	 * nodes, and the recorder writes one every few ms, which would cut
	 * runs, and their model, short (FORMAT.md "STACKS"). */
	if (r->kind == TF_SAMPLE)
		return queue_record(w, r, err);
	return queue_meta(w, r, err);
}

int tf_writer_close(struct tf_writer *w, uint64_t t_end, struct tf_error *err)
{
	struct tf_record end = { .kind = TF_END, .t = t_end };
	int rc = queue_meta(w, &end, err);
	if (!rc)
		rc = tf_writer_flush(w, err);
	writer_free(w);
	return rc;
}

void tf_writer_abandon(struct tf_writer *w)
{
	if (w)
		writer_free(w);
}
