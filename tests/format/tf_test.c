/*
 * tf_test.c - unit tests of the trace-format library, through its public
 * API (plus tf_internal.h to hand-build segments of kinds this version does
 * not know). Every check names what failed; the program exits 1 on the
 * first failure.
 *
 *   tf-test                 run every test
 *   tf-test sample PATH     write a small deterministic trace (for the
 *                           trace-dump tests in test_dump.py)
 *   tf-test bench N [BATCH] encode N synthetic churn-like events in calls
 *                           of BATCH events (default 20000), print
 *                           bytes/event and encode/decode rates (a tool,
 *                           not a test: nothing timed is asserted)
 *   tf-test reencode TRACE BATCH
 *                           the same figures for the events of a real trace,
 *                           rewritten in calls of BATCH events per stream
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lz4frame.h>

#include "tf_internal.h"
#include "trace_format.h"

#define CHECK(cond, ...) do { if (!(cond)) { \
	fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)

static char tmpdir[] = "/tmp/tf-test-XXXXXX";

/* The writer must not allocate after tf_writer_open (it runs inside traced
 * processes). Outside sanitizer builds this program interposes the
 * allocator to count calls, liblz4's included, while `counting` is set. */
#ifndef __SANITIZE_ADDRESS__
#define TF_TEST_COUNTS_ALLOCS 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t k);
extern void *__libc_realloc(void *p, size_t n);
static int counting;
static unsigned long allocs;

void *malloc(size_t n)
{
	allocs += counting;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t k)
{
	allocs += counting;
	return __libc_calloc(n, k);
}

void *realloc(void *p, size_t n)
{
	allocs += counting;
	return __libc_realloc(p, n);
}
#endif
static int checks;

/* ---- deterministic random numbers (splitmix64) --------------------------- */
static uint64_t rng_state = 42;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Opens path and a decoder for it (the test fails if either fails). */
static void open_decoding(const char *path, struct tf_reader **rd, struct tf_decoder **d)
{
	struct tf_error e = { 0 };
	CHECK(tf_reader_open(rd, path, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_decoder_new(d, &e) == TF_OK, "%s", e.msg);
}

static char *tmp_path(const char *name)
{
	static char buf[4][256];
	static int k;
	char *p = buf[k++ & 3];
	snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
	return p;
}

static int create(const char *path)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	return fd;
}

static const struct tf_header hdr = {
	.pid = 4242, .ppid = 1, .pointer_size = 8,
	.t0_mono_ns = 123456789, .t0_real_ns = 1700000000000000000ull,
	.sample_period = 0, .exe = "/usr/bin/test prog", .cmdline = "prog -x 1",
};

/* ---- expected records ------------------------------------------------------ */
struct expect {
	struct tf_record *r;
	size_t n, cap;
};

static void expect_add(struct expect *x, const struct tf_record *r)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 1024;
		x->r = realloc(x->r, x->cap * sizeof *x->r);
		CHECK(x->r, "out of memory");
	}
	x->r[x->n++] = *r;
}

/* Turns events of one stream into the records a reader must return. */
static void expect_events(struct expect *x, uint32_t stream, uint32_t tid,
			  uint64_t seq, const struct tf_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++, seq++) {
		struct tf_record r = { .stream = stream, .tid = tid, .seq = seq,
				       .t = ev[i].t, .addr = ev[i].addr };
		if (ev[i].kind == TF_EV_ALLOC) {
			r.kind = TF_ALLOC;
			r.fn = ev[i].fn;
			r.size = ev[i].size;
			r.stack = ev[i].stack;
		} else if (ev[i].kind == TF_EV_FREE) {
			r.kind = TF_FREE;
			r.fn = TF_FN_FREE;
		} else {
			r.kind = TF_REALLOC;
			r.old_addr = ev[i].addr;
			r.t2 = ev[i + 1].t;
			r.addr = ev[i + 1].addr;
			r.size = ev[i + 1].size;
			r.stack = ev[i + 1].stack;
			r.fn = ev[i + 1].fn;
			i++;
			seq++;
		}
		expect_add(x, &r);
	}
}

static int same_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static void check_record(const struct tf_record *got, const struct tf_record *want,
			 size_t i)
{
	CHECK(got->kind == want->kind, "record %zu: kind %u, want %u", i,
	      got->kind, want->kind);
	CHECK(got->stream == want->stream && got->seq == want->seq,
	      "record %zu: stream/seq %u/%" PRIu64 ", want %u/%" PRIu64, i,
	      got->stream, got->seq, want->stream, want->seq);
	switch (want->kind) {
	case TF_ALLOC: case TF_FREE: case TF_REALLOC:
		CHECK(got->tid == want->tid && got->t == want->t &&
		      got->t2 == want->t2 && got->addr == want->addr &&
		      got->old_addr == want->old_addr && got->size == want->size &&
		      got->stack == want->stack && got->fn == want->fn,
		      "event %zu differs: t %" PRIu64 "/%" PRIu64 " addr %" PRIx64
		      "/%" PRIx64 " size %" PRIu64 "/%" PRIu64 " stack %u/%u", i,
		      got->t, want->t, got->addr, want->addr, got->size,
		      want->size, got->stack, want->stack);
		break;
	case TF_STACK:
		CHECK(got->id == want->id && got->parent == want->parent &&
		      got->ip == want->ip, "stack %zu differs", i);
		break;
	case TF_THREAD:
		CHECK(got->tid == want->tid && same_str(got->str, want->str),
		      "thread %zu differs: %s", i, got->str);
		break;
	case TF_MODULE:
		CHECK(got->addr == want->addr && got->size == want->size &&
		      got->file_offset == want->file_offset &&
		      got->perms == want->perms && same_str(got->str, want->str) &&
		      got->build_id_len == want->build_id_len &&
		      (!want->build_id_len ||
		       !memcmp(got->build_id, want->build_id, want->build_id_len)),
		      "module %zu differs: %s", i, got->str);
		break;
	case TF_MARK:
		CHECK(got->t == want->t && same_str(got->str, want->str),
		      "mark %zu differs", i);
		break;
	case TF_LOST:
		CHECK(got->t == want->t && got->count == want->count,
		      "lost %zu differs", i);
		break;
	case TF_END:
		CHECK(got->t == want->t, "end differs");
		break;
	case TF_FORK:
		CHECK(got->id == want->id && got->count == want->count && got->t == want->t,
		      "fork differs");
		break;
	}
	checks++;
}

/* Reads the whole trace; checks every record against want (stream by
 * stream, in order) and returns the status that ended the walk. *nseg gets
 * the segments decoded, *bad_off the error offset. */
static int read_trace(const char *path, const struct expect *want, int nstreams,
		      size_t *nseg, uint64_t *bad_off)
{
	struct tf_reader *rd;
	struct tf_decoder *dec;
	struct tf_error e = { 0 };
	size_t pos[64] = { 0 };        /* next expected index per stream */
	int rc = tf_reader_open(&rd, path, &e);
	if (rc)
		return *bad_off = e.offset, rc;
	CHECK(tf_decoder_new(&dec, &e) == TF_OK, "decoder: %s", e.msg);
	*nseg = 0;
	struct tf_segment_info si;
	while ((rc = tf_reader_next_segment(rd, &si, &e)) == TF_OK) {
		const struct tf_record *recs;
		rc = tf_decode_segment(rd, dec, &si, &recs, &e);
		if (rc)
			break;
		(*nseg)++;
		CHECK(si.stream < (uint32_t)nstreams, "unexpected stream %u", si.stream);
		const struct expect *w = &want[si.stream];
		for (uint32_t i = 0; i < si.count; i++) {
			CHECK(pos[si.stream] < w->n, "stream %u: too many records",
			      si.stream);
			check_record(&recs[i], &w->r[pos[si.stream]], pos[si.stream]);
			pos[si.stream]++;
		}
	}
	*bad_off = e.offset;
	if (rc == TF_DONE)
		for (int s = 0; s < nstreams; s++)
			CHECK(pos[s] == want[s].n, "stream %d: %zu records, want %zu",
			      s, pos[s], want[s].n);
	tf_decoder_free(dec);
	tf_reader_close(rd);
	return rc;
}

/* ---- random events ---------------------------------------------------------- */
static uint64_t rnd_addr(const uint64_t *recent, size_t nrecent)
{
	switch (rnd() % 4) {
	case 0: return rnd();                         /* anywhere in 64 bits */
	case 1: return nrecent ? recent[rnd() % nrecent] : 0;
	case 2: return (0x55550000000ull + (rnd() % 100000) * 16);
	default: return nrecent ? recent[rnd() % nrecent] + 16 * (rnd() % 64) : 16;
	}
}

static uint64_t rnd_size(void)
{
	switch (rnd() % 4) {
	case 0: return 0;
	case 1: return rnd() % ((1ull << 40) + 1);
	case 2: return 1ull << 40;
	default: return 8 * (rnd() % 20);
	}
}

static uint64_t rnd_dt(void)
{
	switch (rnd() % 5) {
	case 0: return 0;
	case 1: return rnd() >> 4;                    /* huge */
	default: return rnd() % 1000;
	}
}

/* Fills n events (REALLOC pairs count as two) with random content. */
static size_t random_events(struct tf_event *ev, size_t n, uint64_t *t)
{
	uint64_t recent[32] = { 0 };
	size_t nrecent = 0, i = 0;
	while (i < n) {
		unsigned what = (unsigned)(rnd() % 10);
		uint32_t stack = rnd() % 3 ? (uint32_t)(rnd() % 50) : (uint32_t)rnd();
		*t += rnd_dt();
		if (what < 4) {
			ev[i] = (struct tf_event){ .t = *t, .addr = rnd_addr(recent, nrecent),
				.size = rnd_size(), .stack = stack, .kind = TF_EV_ALLOC,
				.fn = (uint8_t)(rnd() % TF_FN_FREE) };
			recent[nrecent++ % 32] = ev[i].addr;
			nrecent = nrecent > 32 ? 32 : nrecent;
			i++;
		} else if (what < 8 || i + 2 > n) {
			ev[i++] = (struct tf_event){ .t = *t, .addr = rnd_addr(recent, nrecent),
				.kind = TF_EV_FREE, .fn = TF_FN_FREE };
		} else {
			ev[i] = (struct tf_event){ .t = *t, .addr = rnd_addr(recent, nrecent),
				.kind = TF_EV_REALLOC_OLD, .fn = TF_FN_REALLOC };
			*t += rnd_dt();
			ev[i + 1] = (struct tf_event){ .t = *t, .addr = rnd_addr(recent, nrecent),
				.size = rnd_size(), .stack = stack, .kind = TF_EV_REALLOC_NEW,
				.fn = rnd() % 2 ? TF_FN_REALLOC : TF_FN_REALLOCARRAY };
			i += 2;
		}
	}
	return i;
}

static const uint8_t build_id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
				      7, 8, 9, 10, 11, 12, 13, 14, 15, 0 };

static void write_meta(struct tf_writer *w, struct expect *meta, struct tf_record *r)
{
	struct tf_error e = { 0 };
	CHECK(tf_write_meta(w, r, &e) == TF_OK, "write_meta: %s", e.msg);
	r->seq = meta->n;
	expect_add(meta, r);
}

/* A set of meta records of every kind, strings with spaces and bytes. */
static void some_meta(struct tf_writer *w, struct expect *meta, int round)
{
	for (uint32_t i = 1; i <= 40; i++) {
		struct tf_record r = { .kind = TF_STACK, .id = i + 40u * (uint32_t)round,
			.parent = i / 2, .ip = rnd() };
		write_meta(w, meta, &r);
	}
	struct tf_record th = { .kind = TF_THREAD, .tid = 1000 + (uint32_t)round,
		.str = round ? "worker 2" : "main" };
	write_meta(w, meta, &th);
	struct tf_record mod = { .kind = TF_MODULE, .addr = 0x7f0000001000ull,
		.size = 0x21000, .file_offset = 0x1000, .perms = 1 | 4 | 8,
		.str = "/usr/lib/x86_64-linux-gnu/libc.so.6", .build_id = build_id,
		.build_id_len = sizeof build_id };
	write_meta(w, meta, &mod);
	struct tf_record mod2 = { .kind = TF_MODULE, .addr = UINT64_MAX - 4095,
		.size = 4096, .perms = 1, .str = "" };
	write_meta(w, meta, &mod2);
	struct tf_record mark = { .kind = TF_MARK, .t = 5000 + (uint64_t)round,
		.str = "phase two\twith tab" };
	write_meta(w, meta, &mark);
	struct tf_record lost = { .kind = TF_LOST, .t = 7000, .count = 1ull << 35 };
	write_meta(w, meta, &lost);
	struct tf_record fork = { .kind = TF_FORK, .id = UINT32_MAX,
		.count = UINT64_MAX - (uint64_t)round, .t = 1ull << 40 };
	write_meta(w, meta, &fork);
}

static void add_end(struct expect *meta, uint64_t t)
{
	struct tf_record end = { .kind = TF_END, .t = t, .seq = meta->n };
	expect_add(meta, &end);
}

/* ---- tests -------------------------------------------------------------------- */

#define NSTREAMS 4

/* Writes a trace with random events on NSTREAMS-1 streams in several calls
 * each, plus meta records; returns the path. */
static const char *write_random_trace(struct expect *want, size_t per_call,
				      int calls)
{
	const char *path = tmp_path("random.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "open: %s", e.msg);
	struct tf_event *ev = malloc(per_call * sizeof *ev);
	uint64_t seq[NSTREAMS] = { 0 }, t[NSTREAMS] = { 0 };
	for (int c = 0; c < calls; c++) {
		for (uint32_t s = 1; s < NSTREAMS; s++) {
			size_t n = random_events(ev, per_call - rnd() % 3, &t[s]);
			CHECK(tf_write_events(w, s, 100 + s, seq[s], ev, n, &e) == TF_OK,
			      "write_events: %s", e.msg);
			expect_events(&want[s], s, 100 + s, seq[s], ev, n);
			seq[s] += n;
		}
		some_meta(w, &want[0], c);
		if (c == 1)
			CHECK(tf_writer_flush(w, &e) == TF_OK, "flush: %s", e.msg);
	}
	CHECK(tf_writer_close(w, 999999, &e) == TF_OK, "close: %s", e.msg);
	add_end(&want[0], 999999);
	close(fd);
	free(ev);
	return path;
}

static void free_expect(struct expect *x, int n)
{
	for (int i = 0; i < n; i++)
		free(x[i].r);
}

static void test_round_trip(void)
{
	struct expect want[NSTREAMS] = { 0 };
	/* 70000 events per call: more than one segment per call. */
	const char *path = write_random_trace(want, 70000, 3);
	size_t nseg;
	uint64_t off;
	int rc = read_trace(path, want, NSTREAMS, &nseg, &off);
	CHECK(rc == TF_DONE, "read: status %d at %" PRIu64, rc, off);
	CHECK(nseg >= 3 * 3 * 2, "only %zu segments", nseg);

	struct tf_reader *rd;
	struct tf_error e = { 0 };
	CHECK(tf_reader_open(&rd, path, &e) == TF_OK, "%s", e.msg);
	const struct tf_header *h = tf_reader_header(rd);
	CHECK(h->version == TF_VERSION && h->pid == hdr.pid && h->ppid == hdr.ppid &&
	      h->pointer_size == 8 && h->t0_mono_ns == hdr.t0_mono_ns &&
	      h->t0_real_ns == hdr.t0_real_ns && !strcmp(h->exe, hdr.exe) &&
	      !strcmp(h->cmdline, hdr.cmdline), "header differs");
	struct stat st;
	stat(path, &st);
	CHECK(tf_reader_file_size(rd) == (uint64_t)st.st_size, "file size");
	/* Segment infos: event streams' time ranges and seq continuity. */
	struct tf_segment_info si;
	uint64_t next_seq[NSTREAMS] = { 0 };
	while (tf_reader_next_segment(rd, &si, &e) == TF_OK) {
		CHECK(si.first_seq == next_seq[si.stream], "stream %u: first_seq %" PRIu64
		      " want %" PRIu64, si.stream, si.first_seq, next_seq[si.stream]);
		CHECK(si.stored_bytes > TF_SEG_HEADER, "stored_bytes");
		struct tf_decoder *d;
		const struct tf_record *recs;
		CHECK(tf_decoder_new(&d, &e) == TF_OK, "decoder");
		CHECK(tf_decode_segment(rd, d, &si, &recs, &e) == TF_OK, "%s", e.msg);
		for (uint32_t i = 0; i < si.count; i++) {
			next_seq[si.stream] += 1 + (recs[i].kind == TF_REALLOC);
			if (si.stream)
				CHECK(recs[i].t >= si.t_first && recs[i].t <= si.t_last &&
				      (recs[i].kind != TF_REALLOC || recs[i].t2 <= si.t_last),
				      "time outside the segment's range");
		}
		tf_decoder_free(d);
	}
	tf_reader_close(rd);
	free_expect(want, NSTREAMS);
}

/* Records equal to what a glibc program produces: checks that the model's
 * hit paths (freed lists, in-segment references, MTF) round-trip too. */
static void test_round_trip_realistic(void)
{
	struct expect want[2] = { 0 };
	const char *path = tmp_path("real.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	enum { N = 200000, LIVE = 512 };
	struct tf_event *ev = malloc(N * sizeof *ev);
	void *live[LIVE] = { 0 };
	size_t n = 0;
	uint64_t t = 1;
	while (n + 2 <= N) {
		size_t k = rnd() % LIVE;
		t += rnd() % 300;
		if (!live[k]) {
			size_t sz = 8 + rnd() % 2000;
			live[k] = malloc(sz);
			ev[n++] = (struct tf_event){ .t = t, .addr = (uintptr_t)live[k],
				.size = sz, .stack = (uint32_t)(1 + rnd() % 30),
				.kind = TF_EV_ALLOC };
		} else if (rnd() % 4 == 0) {
			size_t sz = 8 + rnd() % 4000;
			uintptr_t old = (uintptr_t)live[k];
			void *p = realloc(live[k], sz);
			CHECK(p, "realloc");
			ev[n++] = (struct tf_event){ .t = t, .addr = old,
				.kind = TF_EV_REALLOC_OLD, .fn = TF_FN_REALLOC };
			ev[n++] = (struct tf_event){ .t = t + 40, .addr = (uintptr_t)p,
				.size = sz, .stack = 7, .kind = TF_EV_REALLOC_NEW,
				.fn = TF_FN_REALLOC };
			live[k] = p;
			t += 40;
		} else {
			ev[n++] = (struct tf_event){ .t = t, .addr = (uintptr_t)live[k],
				.kind = TF_EV_FREE, .fn = TF_FN_FREE };
			free(live[k]);
			live[k] = NULL;
		}
	}
	for (size_t k = 0; k < LIVE; k++)
		free(live[k]);
	/* Uneven batches, one of them ending between REALLOC halves. */
	size_t at = 0, seq = 0;
	while (at < n) {
		size_t k = at == 0 ? 1 : 1 + rnd() % 90000;
		k = k > n - at ? n - at : k;
		if (k < n - at && ev[at + k - 1].kind == TF_EV_REALLOC_OLD)
			k++;
		CHECK(tf_write_events(w, 1, 77, seq, ev + at, k, &e) == TF_OK, "%s", e.msg);
		expect_events(&want[1], 1, 77, seq, ev + at, k);
		at += k;
		seq += k;
	}
	CHECK(tf_writer_close(w, t, &e) == TF_OK, "%s", e.msg);
	add_end(&want[0], t);
	close(fd);
	size_t nseg;
	uint64_t off;
	CHECK(read_trace(path, want, 2, &nseg, &off) == TF_DONE, "read at %" PRIu64, off);
	free(ev);
	free_expect(want, 2);
}

/* 65536 identical frees: about 3 bits per record, so the payload has fewer
 * bytes than the segment has records. */
static void test_dense_segment(void)
{
	struct expect want[2] = { 0 };
	const char *path = tmp_path("dense.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	enum { N = TF_SEGMENT_EVENTS };
	struct tf_event *ev = malloc(N * sizeof *ev);
	for (size_t i = 0; i < N; i++)
		ev[i] = (struct tf_event){ .t = 5, .addr = 0x1000, .kind = TF_EV_FREE,
					   .fn = TF_FN_FREE };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_write_events(w, 1, 9, 0, ev, N, &e) == TF_OK, "%s", e.msg);
	expect_events(&want[1], 1, 9, 0, ev, N);
	CHECK(tf_writer_close(w, 5, &e) == TF_OK, "%s", e.msg);
	add_end(&want[0], 5);
	close(fd);
	struct stat st;
	CHECK(stat(path, &st) == 0 && st.st_size < N / 4, "dense trace is %lld bytes",
	      (long long)st.st_size);
	size_t nseg;
	uint64_t off;
	int rc = read_trace(path, want, 2, &nseg, &off);
	CHECK(rc == TF_DONE, "dense segment: status %d at %" PRIu64, rc, off);
	free(ev);
	free_expect(want, 2);
}

static void test_writer_args(void)
{
	const char *path = tmp_path("args.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	struct tf_event lone = { .t = 1, .addr = 16, .kind = TF_EV_REALLOC_OLD };
	CHECK(tf_write_events(w, 1, 1, 0, &lone, 1, &e) == TF_E_ARG, "lone REALLOC_OLD");
	struct tf_event bad = { .t = 1, .addr = 16, .kind = 9 };
	CHECK(tf_write_events(w, 1, 1, 0, &bad, 1, &e) == TF_E_ARG, "bad kind");
	struct tf_event ok = { .t = 1, .addr = 16, .kind = TF_EV_FREE };
	CHECK(tf_write_events(w, 0, 1, 0, &ok, 1, &e) == TF_E_ARG, "stream 0");
	struct tf_record root = { .kind = TF_STACK, .id = 0 };
	CHECK(tf_write_meta(w, &root, &e) == TF_E_ARG, "stack id 0");
	struct tf_record end = { .kind = TF_END };
	CHECK(tf_write_meta(w, &end, &e) == TF_E_ARG, "END via write_meta");
	struct tf_record ev = { .kind = TF_ALLOC };
	CHECK(tf_write_meta(w, &ev, &e) == TF_E_ARG, "ALLOC via write_meta");
	tf_writer_abandon(w);
	close(fd);
	/* Nothing but the header: no segment, clean end. */
	struct expect want[1] = { 0 };
	size_t nseg;
	uint64_t off;
	CHECK(read_trace(path, want, 1, &nseg, &off) == TF_DONE && nseg == 0,
	      "abandoned trace");
	checks += 7;
}

/* Appends a hand-built segment (payload raw[0..len)) to fd. */
static void put_raw_segment(int fd, uint32_t stream, uint32_t count,
			    uint64_t first_seq, const uint8_t *raw, size_t len)
{
	uint8_t buf[4096];
	LZ4F_preferences_t prefs = { 0 };
	prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
	size_t flen = LZ4F_compressFrame(buf + TF_SEG_HEADER, sizeof buf - TF_SEG_HEADER,
					 raw, len, &prefs);
	CHECK(!LZ4F_isError(flen), "lz4");
	tf_put32(buf, TF_SEG_MAGIC);
	tf_put32(buf + 4, stream);
	tf_put32(buf + 8, 5);
	tf_put32(buf + 12, count);
	tf_put64(buf + 16, first_seq);
	tf_put64(buf + 24, 100);
	tf_put64(buf + 32, 112);
	tf_put32(buf + 40, (uint32_t)len);
	tf_put32(buf + 44, (uint32_t)flen);
	tf_put32(buf + 48, 0);
	tf_put32(buf + 52, tf_crc32(buf, TF_SEG_HEADER - 4));
	CHECK(write(fd, buf, TF_SEG_HEADER + flen) == (ssize_t)(TF_SEG_HEADER + flen),
	      "write");
}

/* The stack trie of a deep, recursive program (a compiler's): every new
 * stack shares a prefix with the one before and adds a chain of frames, each
 * return address one of a few call sites of its depth. Written as STACK
 * records interrupted now and then by a SAMPLE (as the recorder's counters
 * do), which passes them, it must read back node for node and take less
 * than one byte a node: as one record each it took about eight (issue 25). */
static void test_stack_runs(void)
{
	enum { NODES = 60000, DEPTH = 40, SITES = 3, SAMPLE_EVERY = 1700 };
	const char *path = tmp_path("stacks.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	static uint32_t parent[NODES + 1];
	static uint64_t ip[NODES + 1];
	uint32_t path_ids[DEPTH] = { 0 }, depth = 0;
	uint8_t value[1] = { 7 };
	for (uint32_t id = 1; id <= NODES; id++) {
		if (depth == DEPTH || rnd() % 8 == 0)   /* return to a caller */
			depth = (uint32_t)(rnd() % (depth < DEPTH ? depth + 1 : DEPTH));
		parent[id] = depth ? path_ids[depth - 1] : 0;
		ip[id] = 0x555555554000ull + 0x1000 * depth + 16 * (rnd() % SITES);
		path_ids[depth++] = id;
		struct tf_record r = { .kind = TF_STACK, .id = id, .parent = parent[id], .ip = ip[id] };
		CHECK(tf_write_meta(w, &r, &e) == TF_OK, "stack %u: %s", id, e.msg);
		if (id % SAMPLE_EVERY == 0) {
			struct tf_record smp = { .kind = TF_SAMPLE, .t = id, .id = 1,
						 .values = value, .values_len = 1 };
			CHECK(tf_write_meta(w, &smp, &e) == TF_OK, "sample: %s", e.msg);
		}
	}
	CHECK(tf_writer_close(w, 1, &e) == TF_OK, "%s", e.msg);
	close(fd);

	uint64_t stored = 0;    /* bytes of the segments, headers included */
	uint32_t next = 1, samples = 0, first_sample_after = 0;
	struct tf_reader *rd;
	struct tf_decoder *d;
	open_decoding(path, &rd, &d);
	struct tf_segment_info si;
	const struct tf_record *r;
	int rc;
	while ((rc = tf_reader_next_segment(rd, &si, &e)) == TF_OK) {
		CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "%s", e.msg);
		stored += si.stored_bytes;
		for (uint32_t i = 0; i < si.count; i++) {
			if (r[i].kind == TF_SAMPLE && !samples++)
				first_sample_after = next - 1;
			if (r[i].kind != TF_STACK)
				continue;
			CHECK(r[i].id == next && r[i].parent == parent[next] && r[i].ip == ip[next],
			      "node %u: id %u parent %u ip %#llx", next, r[i].id, r[i].parent,
			      (unsigned long long)r[i].ip);
			next++;
		}
	}
	CHECK(rc == TF_DONE, "%s", e.msg);
	CHECK(next == NODES + 1 && samples == NODES / SAMPLE_EVERY, "%u nodes, %u samples",
	      next - 1, samples);
	/* a SAMPLE passes the run it interrupts: runs of TF_STACKS_MAX nodes */
	CHECK(first_sample_after == 0, "first SAMPLE read after %u nodes", first_sample_after);
	CHECK(stored < NODES, "%llu bytes for %u nodes", (unsigned long long)stored,
	      (unsigned)NODES);
	tf_decoder_free(d);
	tf_reader_close(rd);
	checks += 5;
}

/* Regular timing (the delta depends only on the two stacks around it): the
 * writer must pick the context-coded time column (DTC) over DT, and the
 * reader must decode it exactly. Uses the codecs directly. */
static void test_time_contexts(void)
{
	enum { N = 30000 };
	struct tf_event *ev = malloc(N * sizeof *ev);
	size_t n = 0;
	uint64_t t = 1ull << 40;
	for (uint32_t i = 0; n + 3 <= N; i++) {
		uint32_t stack = 1 + i % 10;
		uint64_t addr = 0x10000 + 64 * (uint64_t)i;
		t += 1000 * stack + 7;
		ev[n++] = (struct tf_event){ .t = t, .addr = addr, .size = 32,
			.stack = stack, .kind = TF_EV_ALLOC };
		if (i % 7 == 3) {
			ev[n++] = (struct tf_event){ .t = t + 5, .addr = addr,
				.kind = TF_EV_REALLOC_OLD, .fn = TF_FN_REALLOC };
			ev[n++] = (struct tf_event){ .t = t + 90, .addr = addr + 32,
				.size = 64, .stack = stack, .kind = TF_EV_REALLOC_NEW,
				.fn = TF_FN_REALLOC };
			addr += 32;
			t += 90;
		}
		t += 50 + i % 3 * (t & 1);   /* a little noise */
		ev[n++] = (struct tf_event){ .t = t, .addr = addr, .kind = TF_EV_FREE,
			.fn = TF_FN_FREE };
	}
	struct expect want = { 0 };
	expect_events(&want, 1, 3, 0, ev, n);
	struct tf_colenc *enc = tf_colenc_new();
	struct tf_coldec *dec = tf_coldec_new();
	uint8_t *buf = malloc(tf_colenc_bound(n));
	struct tf_record *out = malloc(want.n * sizeof *out);
	uint64_t t0, t1;
	size_t len = tf_colenc_encode(enc, ev, n, buf, &t0, &t1);
	int has_dt = 0, has_dtc = 0;
	for (const uint8_t *p = buf, *end = buf + len; p < end;) {
		uint64_t tag, clen;
		CHECK(tf_get_varint(&p, end, &tag) == 0 && tf_get_varint(&p, end, &clen) == 0,
		      "column directory");
		has_dt |= tag == TF_COL_DT;
		has_dtc |= tag == TF_COL_DTC;
		p += clen;
	}
	CHECK(has_dtc && !has_dt, "regular timing coded with DT (%d) not DTC (%d)",
	      has_dt, has_dtc);
	struct tf_segment_info si = { .stream = 1, .tid = 3, .count = (uint32_t)want.n };
	struct tf_error e = { 0 };
	CHECK(tf_coldec_decode(dec, &si, buf, len, out, &e) == TF_OK, "%s", e.msg);
	for (size_t i = 0; i < want.n; i++)
		check_record(&out[i], &want.r[i], i);
	tf_colenc_free(enc);
	tf_coldec_free(dec);
	free(buf);
	free(out);
	free(ev);
	free(want.r);
}

/* One column of an event segment: tag, length, Huffman method, values. */
static uint8_t *put_column(uint8_t *o, unsigned tag, const uint64_t *v, size_t n)
{
	uint8_t body[256];
	struct tf_entcode code;
	body[0] = 1;    /* the Huffman coding of FORMAT.md */
	tf_ent_plan(v, n, &code);
	size_t len = 1 + tf_ent_write(v, n, &code, body + 1);
	o = tf_put_varint(o, tag);
	o = tf_put_varint(o, len);
	memcpy(o, body, len);
	return o + len;
}

/* A STACKS record (FORMAT.md "STACKS") of nodes first .. first + n - 1 with
 * the given parent and address codes, as a meta payload. */
static size_t put_stacks(uint8_t *out, uint64_t first, uint64_t n,
			 const uint64_t *pcode, const uint64_t *icode)
{
	uint8_t body[512], *b = body;
	b = tf_put_varint(b, first);
	b = tf_put_varint(b, n);
	for (int c = 0; c < 2; c++) {
		struct tf_entcode code;
		const uint64_t *v = c ? icode : pcode;
		uint8_t col[256];
		tf_ent_plan(v, n, &code);
		size_t len = tf_ent_write(v, n, &code, col);
		b = tf_put_varint(b, len);
		memcpy(b, col, len);
		b += len;
	}
	uint8_t *o = out;
	*o++ = TF_META_STACKS;
	o = tf_put_varint(o, (uint64_t)(b - body));
	memcpy(o, body, (size_t)(b - body));
	return (size_t)(o - out) + (size_t)(b - body);
}

/* STACKS bodies by hand: a good one decodes to the nodes its codes say;
 * an address code naming an empty context entry, a parent below 0 or
 * beyond 64 bits, more nodes than the segment counts, no node, node id 0
 * and ids past 32 bits are corrupt. */
static void test_stacks_codes(void)
{
	struct tf_stkmodel *m = tf_stkmodel_new();
	struct tf_record out[4];
	char strbuf[64];
	uint8_t p[1024];
	struct tf_error e = { 0 };
	struct tf_segment_info si = { .offset = 9, .count = 2, .first_seq = 10 };
	/* node 5 under the root at 0x1000 (a literal against caller 0), node 6
	 * under node 5 at 0x1010 (a literal against 0x1000) */
	size_t len = put_stacks(p, 5, 2, (uint64_t[]){ 8, 0 }, (uint64_t[]){ 4 + 0x2000, 4 + 0x20 });
	CHECK(m && tf_meta_decode(&si, p, len, out, strbuf, m, &e) == TF_OK, "%s", e.msg);
	CHECK(out[0].kind == TF_STACK && out[0].id == 5 && out[0].parent == 0 &&
	      out[0].ip == 0x1000 && out[0].seq == 10 && out[1].id == 6 &&
	      out[1].parent == 5 && out[1].ip == 0x1010 && out[1].seq == 11,
	      "stacks: %u/%u/%#llx %u/%u/%#llx", out[0].id, out[0].parent,
	      (unsigned long long)out[0].ip, out[1].id, out[1].parent,
	      (unsigned long long)out[1].ip);
	/* the same node 6 named by its context's entry 0 after a sibling */
	si.count = 3;
	len = put_stacks(p, 5, 3, (uint64_t[]){ 8, 0, 2 }, (uint64_t[]){ 4 + 0x2000, 4 + 0x20, 0 });
	CHECK(tf_meta_decode(&si, p, len, out, strbuf, m, &e) == TF_OK, "%s", e.msg);
	CHECK(out[2].id == 7 && out[2].parent == 5 && out[2].ip == 0x1010, "context entry 0");
	struct { uint64_t first, n, pcode[2], icode[2]; uint32_t count; const char *what; } bad[] = {
		{ 5, 1, { 8 }, { 0 }, 1, "address code naming an empty entry" },
		{ 5, 1, { 10 }, { 4 }, 1, "parent below 0" },
		{ 5, 2, { 8, 0 }, { 4, 4 }, 1, "more nodes than the segment counts" },
		{ 5, 0, { 0 }, { 0 }, 1, "no node" },
		{ 0, 1, { 0 }, { 4 }, 1, "node id 0" },
		{ UINT32_MAX, 2, { 0, 0 }, { 4, 4 }, 2, "node ids past 2^32 - 1" },
		{ UINT64_MAX, 2, { 0, 1 }, { 4, 4 }, 2, "node ids wrapping around 2^64" },
		{ 5, 1, { UINT64_MAX }, { 4 }, 1, "parent code of 64 bits" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		len = put_stacks(p, bad[i].first, bad[i].n ? bad[i].n : 1, bad[i].pcode, bad[i].icode);
		if (!bad[i].n)
			p[3] = 0;  /* the count varint, after kind, length and first */
		si.count = bad[i].count;
		CHECK(tf_meta_decode(&si, p, len, out, strbuf, m, &e) == TF_E_CORRUPT &&
		      e.offset == 9, "%s: not corrupt", bad[i].what);
	}
	tf_stkmodel_free(m);
	checks += 11;
}

/* A future version's kinds: meta kind 200 with a body, an event kind 12
 * whose field lives in column 50, and a THREAD record with a trailing field
 * this version does not know. The reader must skip them and decode the rest. */
static void test_unknown_kinds(void)
{
	const char *path = tmp_path("unknown.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);

	uint8_t meta[] = {
		TF_STACK, 3, 7, 0, 0x2a,              /* stack id=7 parent=0 ip=42 */
		200, 4, 1, 2, 3, 4,                   /* unknown kind, 4-byte body */
		TF_THREAD, 6, 9, 2, 'a', 'b', 0x55, 0x66, /* + 2 unknown bytes */
	};
	put_raw_segment(fd, 0, 3, 0, meta, sizeof meta);
	/* ALLOC t=100 (calloc, size 64, stack 5, address 0x1000 escaped raw),
	 * kind 12 at t=105 with its value in column 50, FREE t=112 naming the
	 * latest allocation. */
	uint8_t cols[512], *o = cols;
	o = put_column(o, TF_COL_KIND, (uint64_t[]){ TF_ALLOC, 12, TF_FREE }, 3);
	o = put_column(o, TF_COL_DT, (uint64_t[]){ 100, 5, 7 }, 3);
	o = put_column(o, TF_COL_FN, (uint64_t[]){ TF_FN_CALLOC + 1 }, 1);
	o = put_column(o, TF_COL_SIZE, (uint64_t[]){ 18 + 64 }, 1);
	o = put_column(o, TF_COL_STACK, (uint64_t[]){ 17 + 5 }, 1);
	o = put_column(o, 50, (uint64_t[]){ 0xabcdef }, 1);
	o = put_column(o, TF_COL_ADDR, (uint64_t[]){ 16 }, 1);
	o = put_column(o, TF_COL_FADDR, (uint64_t[]){ 0 }, 1);
	o = put_column(o, TF_COL_RAW, (uint64_t[]){ 0x1000 }, 1);
	put_raw_segment(fd, 1, 3, 0, cols, (size_t)(o - cols));
	CHECK(tf_writer_close(w, 500, &e) == TF_OK, "%s", e.msg);
	close(fd);

	struct tf_reader *rd;
	struct tf_decoder *d;
	struct tf_segment_info si;
	const struct tf_record *r;
	open_decoding(path, &rd, &d);
	CHECK(tf_reader_next_segment(rd, &si, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "meta: %s", e.msg);
	CHECK(r[0].kind == TF_STACK && r[0].id == 7 && r[0].ip == 42, "stack");
	CHECK(r[1].kind == 200, "unknown meta kind kept as a bare record");
	CHECK(r[2].kind == TF_THREAD && r[2].tid == 9 && !strcmp(r[2].str, "ab"),
	      "thread after unknown kind: %u %s", r[2].tid, r[2].str);
	CHECK(tf_reader_next_segment(rd, &si, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "events: %s", e.msg);
	CHECK(r[0].kind == TF_ALLOC && r[0].t == 100 && r[0].size == 64 &&
	      r[0].stack == 5 && r[0].addr == 0x1000 && r[0].fn == TF_FN_CALLOC,
	      "alloc: t %" PRIu64 " size %" PRIu64 " addr %" PRIx64, r[0].t,
	      r[0].size, r[0].addr);
	CHECK(r[1].kind == 12 && r[1].t == 105 && r[1].seq == 1, "unknown event kind");
	CHECK(r[2].kind == TF_FREE && r[2].t == 112 && r[2].addr == 0x1000 &&
	      r[2].seq == 2, "free after unknown kind: t %" PRIu64, r[2].t);
	CHECK(tf_reader_next_segment(rd, &si, &e) == TF_OK, "end segment");
	CHECK(tf_reader_next_segment(rd, &si, &e) == TF_DONE, "done");
	tf_decoder_free(d);
	tf_reader_close(rd);
	checks += 10;
}

static uint8_t *slurp(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	CHECK(fd >= 0 && fstat(fd, &st) == 0, "open %s", path);
	uint8_t *b = malloc((size_t)st.st_size + 1);
	CHECK(read(fd, b, (size_t)st.st_size) == st.st_size, "read %s", path);
	close(fd);
	*n = (size_t)st.st_size;
	return b;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
	int fd = create(path);
	CHECK(n == 0 || write(fd, b, n) == (ssize_t)n, "write %s", path);
	close(fd);
}

/* Segments encoded apart (two tf_segencs taking turns, as the recorder's
 * writer and encoder threads do) and appended with tf_writer_put make the
 * same file as tf_write_events; tf_segenc_events refuses what is not one
 * segment of one event stream. */
/* COUNTER names and SAMPLE values round-trip (the largest value, a sample
 * starting past counter 1, the most values a sample may hold); a SAMPLE
 * whose values end inside a varint, or hold one value too many, or name
 * counter 0, is corrupt. */
static void test_counters(void)
{
	const char *path = tmp_path("counters.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	uint64_t v[TF_SAMPLE_MAX + 1];
	uint8_t packed[(TF_SAMPLE_MAX + 1) * TF_VARINT_MAX];
	for (uint32_t i = 0; i < TF_SAMPLE_MAX + 1; i++)
		v[i] = i == 1 ? UINT64_MAX : (uint64_t)i * 4096;
	struct tf_record c = { .kind = TF_COUNTER, .id = 3, .str = "rss_bytes" };
	CHECK(tf_write_meta(w, &c, &e) == TF_OK, "%s", e.msg);
	struct tf_record s = { .kind = TF_SAMPLE, .t = 1234, .id = 3, .count = 3,
			       .values = packed, .values_len = (uint32_t)tf_sample_pack(packed, v, 3) };
	CHECK(tf_write_meta(w, &s, &e) == TF_OK, "%s", e.msg);
	s.count = TF_SAMPLE_MAX;
	s.values_len = (uint32_t)tf_sample_pack(packed, v, TF_SAMPLE_MAX);
	CHECK(tf_write_meta(w, &s, &e) == TF_OK, "%s", e.msg);
	s.count = TF_SAMPLE_MAX + 1;
	CHECK(tf_write_meta(w, &s, &e) == TF_E_ARG, "a sample of 257 values written");
	c.id = 0;
	CHECK(tf_write_meta(w, &c, &e) == TF_E_ARG, "counter id 0 written");
	CHECK(tf_writer_flush(w, &e) == TF_OK, "%s", e.msg);
	uint8_t bad[3][7 + TF_SAMPLE_MAX + 1] = {
		{ TF_SAMPLE, 5, 9, 1, 2, 1, 0x80 },       /* values end in a varint */
		{ TF_SAMPLE, 4, 9, 0, 1, 7 },              /* counter 0 */
		/* 257 values of one byte: body 4 + 257 bytes, values 257 */
		{ TF_SAMPLE, 0x85, 0x02, 9, 1, 0x81, 0x02 },
	};
	memset(bad[2] + 7, 1, TF_SAMPLE_MAX + 1);
	put_raw_segment(fd, 0, 1, 0, bad[0], 7);
	put_raw_segment(fd, 0, 1, 0, bad[1], 6);
	put_raw_segment(fd, 0, 1, 0, bad[2], 7 + TF_SAMPLE_MAX + 1);
	tf_writer_abandon(w);
	close(fd);

	struct tf_reader *rd;
	struct tf_decoder *d;
	struct tf_segment_info si;
	const struct tf_record *r;
	uint64_t got[TF_SAMPLE_MAX];
	open_decoding(path, &rd, &d);
	CHECK(tf_reader_next_segment(rd, &si, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "meta: %s", e.msg);
	CHECK(si.count == 3, "%u records", si.count);
	CHECK(r[0].kind == TF_COUNTER && r[0].id == 3 && !strcmp(r[0].str, "rss_bytes"),
	      "counter: %u %s", r[0].id, r[0].str);
	CHECK(r[1].kind == TF_SAMPLE && r[1].t == 1234 && r[1].id == 3 && r[1].count == 3 &&
	      tf_sample_unpack(&r[1], got) == 3 && got[0] == 0 && got[1] == UINT64_MAX &&
	      got[2] == 8192, "sample: t %" PRIu64 " count %" PRIu64, r[1].t, r[1].count);
	CHECK(r[2].count == TF_SAMPLE_MAX && tf_sample_unpack(&r[2], got) == TF_SAMPLE_MAX &&
	      got[TF_SAMPLE_MAX - 1] == (TF_SAMPLE_MAX - 1) * 4096ull, "full sample");
	for (int k = 0; k < 3; k++) {
		CHECK(tf_reader_next_segment(rd, &si, &e) == TF_OK, "%s", e.msg);
		CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_E_CORRUPT,
		      "bad sample %d decoded", k);
	}
	tf_decoder_free(d);
	tf_reader_close(rd);
	checks += 12;
}

/* Custom blocks (fns 15-18) keep their pool through the POOL column, a
 * heap block and two pools' blocks at one address included; a POOL name
 * round-trips; pool id 0, and a custom fn on anything but an ALLOC, are
 * refused by the writer. */
static void test_pools(void)
{
	const char *path = tmp_path("pools.trc");
	int fd = create(path), seen = 0;
	struct tf_writer *w;
	struct tf_reader *rd;
	struct tf_decoder *d;
	struct tf_segment_info si;
	const struct tf_record *r;
	struct tf_error e = { 0 };
	const uint64_t a = 0x7f0000001000;
	const struct tf_event ev[] = {
		{ .t = 10, .addr = a, .size = 65536, .stack = 4, .kind = TF_EV_ALLOC },
		{ .t = 20, .addr = a, .size = 100, .stack = 5, .kind = TF_EV_ALLOC,
		  .fn = TF_FN_CUSTOM_ALLOC, .pool = 1 },
		{ .t = 30, .addr = a, .size = 64, .stack = 5, .kind = TF_EV_ALLOC,
		  .fn = TF_FN_CUSTOM_ALLOC, .pool = TF_POOL_MAX },
		{ .t = 40, .addr = a + 16, .size = 7, .stack = 6, .kind = TF_EV_ALLOC,
		  .fn = TF_FN_CUSTOM_REALLOC },
		{ .t = 50, .addr = a, .kind = TF_EV_ALLOC, .fn = TF_FN_CUSTOM_FREE, .pool = 1 },
		{ .t = 60, .kind = TF_EV_ALLOC, .fn = TF_FN_POOL_DESTROY, .pool = TF_POOL_MAX },
		{ .t = 70, .addr = a, .kind = TF_EV_FREE },
	};
	enum { N = sizeof ev / sizeof ev[0] };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_write_events(w, 1, 9, 0, ev, N, &e) == TF_OK, "%s", e.msg);
	struct tf_event bad = { .t = 80, .addr = a, .kind = TF_EV_FREE, .fn = TF_FN_CUSTOM_FREE };
	CHECK(tf_write_events(w, 1, 9, N, &bad, 1, &e) == TF_E_ARG, "a custom FREE written");
	struct tf_record p = { .kind = TF_POOL, .id = 2, .str = "arena" };
	CHECK(tf_write_meta(w, &p, &e) == TF_OK, "%s", e.msg);
	p.id = 0;
	CHECK(tf_write_meta(w, &p, &e) == TF_E_ARG, "pool id 0 written");
	CHECK(tf_writer_close(w, 100, &e) == TF_OK, "%s", e.msg);
	close(fd);

	open_decoding(path, &rd, &d);
	while (tf_reader_next_segment(rd, &si, &e) == TF_OK) {
		CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "%s", e.msg);
		if (si.stream == 0) {
			CHECK(r[0].kind == TF_POOL && r[0].id == 2 && !strcmp(r[0].str, "arena"),
			      "pool record: kind %u id %u", r[0].kind, r[0].id);
			seen |= 1;
			continue;
		}
		CHECK(si.count == N, "%u records", si.count);
		for (int i = 0; i < N; i++)
			CHECK(r[i].kind == (ev[i].kind == TF_EV_FREE ? TF_FREE : TF_ALLOC) &&
			      r[i].t == ev[i].t && r[i].addr == ev[i].addr &&
			      (r[i].kind == TF_FREE || (r[i].fn == ev[i].fn && r[i].size == ev[i].size &&
							r[i].stack == ev[i].stack)) &&
			      r[i].pool == ev[i].pool, "record %d: fn %u pool %u addr %" PRIx64, i,
			      r[i].fn, r[i].pool, r[i].addr);
		seen |= 2;
	}
	CHECK(seen == 3, "segments seen: %d", seen);
	tf_decoder_free(d);
	tf_reader_close(rd);
	checks += 6;
}

static void test_segenc(void)
{
	enum { N = 3 * TF_SEGMENT_EVENTS + 1000 };
	struct tf_event *ev = malloc(N * sizeof *ev);
	uint64_t t = 0;
	size_t n = random_events(ev, N, &t);
	const char *paths[2] = { tmp_path("whole.trc"), tmp_path("apart.trc") };
	struct tf_segenc *se[2] = { NULL, NULL };
	struct tf_error e = { 0 };
#ifdef TF_TEST_COUNTS_ALLOCS
	allocs = 0;
	counting = 1;
#endif
	for (int i = 0; i < 2; i++)
		CHECK(tf_segenc_new(&se[i], &e) == TF_OK, "%s", e.msg);
#ifdef TF_TEST_COUNTS_ALLOCS
	counting = 0;
	CHECK(allocs == 0, "tf_segenc_new called malloc %lu times", allocs);
#endif
	for (int way = 0; way < 2; way++) {
		int fd = create(paths[way]);
		struct tf_writer *w;
		CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
		if (way == 0) {
			CHECK(tf_write_events(w, 3, 30, 0, ev, n, &e) == TF_OK, "%s", e.msg);
		} else {
			for (size_t at = 0, turn = 0; at < n; turn++) {
				size_t k = n - at < TF_SEGMENT_EVENTS ? n - at : TF_SEGMENT_EVENTS;
				if (ev[at + k - 1].kind == TF_EV_REALLOC_OLD)
					k++;
				struct tf_segenc *s = se[turn % 2];
				CHECK(tf_segenc_events(s, 3, 30, at, ev + at, k, &e) == TF_OK, "%s", e.msg);
				CHECK(tf_writer_put(w, s, &e) == TF_OK, "%s", e.msg);
				at += k;
			}
		}
		CHECK(tf_writer_close(w, t, &e) == TF_OK, "%s", e.msg);
		close(fd);
	}
	size_t len[2];
	uint8_t *bytes[2] = { slurp(paths[0], &len[0]), slurp(paths[1], &len[1]) };
	CHECK(len[0] == len[1] && !memcmp(bytes[0], bytes[1], len[0]),
	      "segments encoded apart differ from tf_write_events' (%zu vs %zu bytes)",
	      len[0], len[1]);
	size_t big = TF_SEGMENT_EVENTS + 1;
	while (ev[TF_SEGMENT_EVENTS - 1].kind == TF_EV_REALLOC_OLD)
		ev[TF_SEGMENT_EVENTS - 1].kind = TF_EV_FREE;  /* no pair at the cut */
	ev[TF_SEGMENT_EVENTS].kind = TF_EV_FREE;
	CHECK(tf_segenc_events(se[0], 0, 1, 0, ev, 10, &e) == TF_E_ARG, "stream 0 accepted");
	CHECK(tf_segenc_events(se[0], 3, 1, 0, ev, 0, &e) == TF_E_ARG, "no events accepted");
	CHECK(tf_segenc_events(se[0], 3, 1, 0, ev, big, &e) == TF_E_ARG,
	      "%zu events (no pair at the cut) made one segment", big);
	for (int i = 0; i < 2; i++) {
		free(bytes[i]);
		tf_segenc_free(se[i]);
	}
	free(ev);
}

/* Segment starts of a trace, in file order. */
static size_t segment_starts(const char *path, uint64_t *off, size_t max)
{
	struct tf_reader *rd;
	struct tf_segment_info si;
	struct tf_error e = { 0 };
	size_t n = 0;
	CHECK(tf_reader_open(&rd, path, &e) == TF_OK, "%s", e.msg);
	while (n < max && tf_reader_next_segment(rd, &si, &e) == TF_OK)
		off[n++] = si.offset;
	tf_reader_close(rd);
	return n;
}

/* Walks a damaged copy: every segment before `bad_seg` decodes, then an
 * error of the allowed kinds names an offset >= the damaged segment's start. */
static void check_damaged(const char *path, uint64_t seg_start, size_t good_segs,
			  const char *what, uint64_t where)
{
	struct tf_reader *rd;
	struct tf_decoder *d;
	struct tf_segment_info si;
	struct tf_error e = { 0 };
	const struct tf_record *r;
	int rc;
	size_t ok = 0;
	CHECK(tf_reader_open(&rd, path, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_decoder_new(&d, &e) == TF_OK, "%s", e.msg);
	while ((rc = tf_reader_next_segment(rd, &si, &e)) == TF_OK &&
	       (rc = tf_decode_segment(rd, d, &si, &r, &e)) == TF_OK)
		ok++;
	CHECK(rc == TF_E_TRUNCATED || rc == TF_E_CORRUPT,
	      "%s at %" PRIu64 ": status %d", what, where, rc);
	CHECK(ok == good_segs, "%s at %" PRIu64 ": %zu segments read, want %zu",
	      what, where, ok, good_segs);
	CHECK(e.offset >= seg_start, "%s at %" PRIu64 ": offset %" PRIu64
	      " before the segment (%" PRIu64 ")", what, where, e.offset, seg_start);
	CHECK(e.msg[0] != '\0', "no message");
	tf_decoder_free(d);
	tf_reader_close(rd);
	checks++;
}

static void test_damage(void)
{
	struct expect want[NSTREAMS] = { 0 };
	const char *path = write_random_trace(want, 3000, 3);
	free_expect(want, NSTREAMS);
	size_t n;
	uint8_t *b = slurp(path, &n);
	uint64_t off[64];
	size_t nseg = segment_starts(path, off, 64);
	CHECK(nseg >= 5, "%zu segments", nseg);
	const char *cut = tmp_path("cut.trc");

	/* Truncation at many offsets inside the last segment. */
	uint64_t last = off[nseg - 1];
	for (uint64_t at = last + 1; at < n; at += 1 + (n - last) / 97) {
		spit(cut, b, at);
		check_damaged(cut, last, nseg - 1, "truncation", at);
	}
	spit(cut, b, n - 1);
	check_damaged(cut, last, nseg - 1, "truncation", n - 1);

	/* A flipped bit anywhere in a middle segment: its header or frame. */
	size_t mid = nseg / 2;
	uint64_t end = off[mid + 1];
	for (uint64_t at = off[mid]; at < end; at += 1 + (end - off[mid]) / 61) {
		for (int bit = 0; bit < 8; bit += 3) {
			b[at] ^= (uint8_t)(1 << bit);
			spit(cut, b, n);
			b[at] ^= (uint8_t)(1 << bit);
			check_damaged(cut, off[mid], mid, "bit flip", at);
		}
	}
	free(b);
}

static int open_status(const char *path, uint64_t *offset)
{
	struct tf_reader *rd;
	struct tf_error e = { 0 };
	int rc = tf_reader_open(&rd, path, &e);
	if (rc == TF_OK)
		tf_reader_close(rd);
	else
		CHECK(e.msg[0], "no message");
	*offset = e.offset;
	return rc;
}

static void test_bad_headers(void)
{
	struct expect want[NSTREAMS] = { 0 };
	const char *path = write_random_trace(want, 100, 1);
	free_expect(want, NSTREAMS);
	size_t n;
	uint8_t *b = slurp(path, &n);
	const char *p = tmp_path("hdr.trc");
	uint64_t off;

	spit(p, b, 0);
	CHECK(open_status(p, &off) == TF_E_TRUNCATED && off == 0, "empty file");
	spit(p, b, 5);
	CHECK(open_status(p, &off) == TF_E_TRUNCATED, "5-byte file");
	spit(p, b, 40);
	CHECK(open_status(p, &off) == TF_E_TRUNCATED, "header cut");

	b[0] ^= 1;
	spit(p, b, n);
	CHECK(open_status(p, &off) == TF_E_MAGIC && off == 0, "wrong magic");
	spit(p, (const uint8_t *)"hello world, not a trace\n", 25);
	CHECK(open_status(p, &off) == TF_E_MAGIC, "text file");
	b[0] ^= 1;

	tf_put32(b + 8, TF_VERSION + 1);
	spit(p, b, n);
	CHECK(open_status(p, &off) == TF_E_VERSION && off == 8, "future version");
	tf_put32(b + 8, TF_VERSION);

	b[20] ^= 0x10;       /* ppid: header checksum */
	spit(p, b, n);
	CHECK(open_status(p, &off) == TF_E_CORRUPT, "header checksum");
	b[20] ^= 0x10;

	CHECK(open_status(tmp_path("missing.trc"), &off) == TF_E_IO, "missing file");
	CHECK(open_status(tmpdir, &off) == TF_E_IO, "directory");
	spit(p, b, n);
	CHECK(open_status(p, &off) == TF_OK, "restored copy opens");
	free(b);
	checks += 11;
}

/* ENOSPC (/dev/full) and EFBIG (RLIMIT_FSIZE): TF_E_IO with errno, and what
 * was written before the failure stays readable. */
static void test_write_errors(void)
{
	struct tf_writer *w;
	struct tf_error e = { 0 };
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_E_IO &&
		      e.sys_errno == ENOSPC, "ENOSPC: %s", e.msg);
		close(fd);
		checks++;
	}

	const char *path = tmp_path("fsize.trc");
	fd = create(path);
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	struct rlimit old, lim;
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 64 << 10;
	signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
	struct tf_event ev[3000];
	uint64_t t = 0, seq = 0;
	int rc = TF_OK;
	size_t written = 0;
	for (int i = 0; i < 100 && rc == TF_OK; i++) {
		size_t n = random_events(ev, 3000, &t);
		rc = tf_write_events(w, 1, 1, seq, ev, n, &e);
		written += rc == TF_OK;
		seq += n;
	}
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	CHECK(rc == TF_E_IO && e.sys_errno == EFBIG, "EFBIG: status %d errno %d (%s)",
	      rc, e.sys_errno, e.msg);
	CHECK(written > 0, "nothing written before the limit");
	tf_writer_abandon(w);
	close(fd);
	uint64_t off[256];
	size_t nseg = segment_starts(path, off, 256);
	CHECK(nseg == written, "%zu segments readable, %zu written", nseg, written);
	struct tf_reader *rd;
	struct tf_segment_info si;
	CHECK(tf_reader_open(&rd, path, &e) == TF_OK, "%s", e.msg);
	while ((rc = tf_reader_next_segment(rd, &si, &e)) == TF_OK)
		;
	CHECK(rc == TF_DONE, "file after a failed write does not end cleanly: %s", e.msg);
	tf_reader_close(rd);
	checks += 4;
}

/* Payloads with valid checksums but garbage inside (a hostile file) must
 * decode or fail with TF_E_CORRUPT, never read out of bounds (the ASan
 * build runs this). Calls the codecs directly, without files. */
static void test_fuzz_payloads(void)
{
	enum { N = 3000, ROUNDS = 3000 };
	struct tf_event *ev = malloc(N * sizeof *ev);
	uint64_t t = 0;
	size_t n = random_events(ev, N, &t);
	size_t recs = 0;
	for (size_t i = 0; i < n; i++)
		recs += ev[i].kind != TF_EV_REALLOC_NEW;
	struct tf_colenc *enc = tf_colenc_new();
	struct tf_coldec *dec = tf_coldec_new();
	struct tf_stkmodel *stk = tf_stkmodel_new();
	struct tf_stkrun *run = tf_stkrun_new();
	CHECK(enc && dec && stk && run, "out of memory");
	size_t cap = tf_colenc_bound(n);
	uint8_t *good = malloc(cap), *bad = malloc(cap);
	struct tf_record *out = malloc(recs * sizeof *out);
	char *strbuf = malloc(cap + 2 * recs + 1);
	uint64_t t0, t1;
	size_t len = tf_colenc_encode(enc, ev, n, good, &t0, &t1);
	struct tf_segment_info si = { .offset = 1000, .stream = 1, .count = (uint32_t)recs };
	struct tf_error e = { 0 };
	CHECK(tf_coldec_decode(dec, &si, good, len, out, &e) == TF_OK, "%s", e.msg);
	int corrupt = 0;
	for (int round = 0; round < ROUNDS; round++) {
		memcpy(bad, good, len);
		size_t blen = len;
		switch (round % 3) {
		case 0:     /* flip a few bits */
			for (int k = 0; k < 1 + round % 4; k++)
				bad[rnd() % len] ^= (uint8_t)(1 << (rnd() % 8));
			break;
		case 1:     /* cut the payload */
			blen = rnd() % len;
			break;
		default:    /* random bytes over a stretch */
			for (size_t k = rnd() % len, m = 1 + rnd() % 64; m && k < len; k++, m--)
				bad[k] = (uint8_t)rnd();
		}
		int rc = tf_coldec_decode(dec, &si, bad, blen, out, &e);
		CHECK(rc == TF_OK || (rc == TF_E_CORRUPT && e.offset == 1000 && e.msg[0]),
		      "event payload round %d: status %d", round, rc);
		corrupt += rc == TF_E_CORRUPT;
		struct tf_segment_info xsi = { .offset = 7, .count = (uint32_t)(1 + rnd() % 50) };
		rc = tf_meta_decode(&xsi, bad, blen, out, strbuf, stk, &e);
		CHECK(rc == TF_OK || rc == TF_E_CORRUPT, "meta payload: status %d", rc);
	}
	CHECK(corrupt > ROUNDS / 2, "only %d of %d damaged payloads detected", corrupt, ROUNDS);

	/* Damaged meta payloads: decoded records must be whole (strings set). */
	struct tf_record meta[] = {
		{ .kind = TF_THREAD, .tid = 7, .str = "worker" },
		{ .kind = TF_MODULE, .addr = 0x400000, .size = 4096, .str = "/bin/x",
		  .build_id = build_id, .build_id_len = 20 },
		{ .kind = TF_MARK, .t = 9, .str = "mark" },
		{ .kind = TF_STACK, .id = 3, .parent = 1, .ip = 0x401000 },
		{ .kind = TF_STACK, .id = 4, .parent = 3, .ip = 0x401010 },
		{ .kind = TF_LOST, .t = 3, .count = 2 },
	};
	size_t mlen = 0, k;
	for (size_t i = 0; i < 6; i++) {
		if (meta[i].kind == TF_STACK) {   /* a run of two: one STACKS record */
			CHECK(tf_stkrun_add(run, &meta[i]) == 0, "stack run");
			continue;
		}
		if (tf_stkrun_count(run))
			mlen += tf_stkrun_encode(run, good + mlen);
		CHECK(tf_meta_encode(&meta[i], good + mlen, &k, &e) == TF_OK, "%s", e.msg);
		mlen += k;
	}
	struct tf_segment_info msi = { .offset = 7, .count = 6 };
	CHECK(tf_meta_decode(&msi, good, mlen, out, strbuf, stk, &e) == TF_OK, "%s", e.msg);
	CHECK(out[3].kind == TF_STACK && out[3].id == 3 && out[3].parent == 1 &&
	      out[3].ip == 0x401000 && out[4].id == 4 && out[4].parent == 3 &&
	      out[4].ip == 0x401010 && out[4].seq == 4 && out[5].kind == TF_LOST,
	      "stacks record in a meta payload");
	for (int round = 0; round < ROUNDS; round++) {
		memcpy(bad, good, mlen);
		size_t blen = round % 2 ? rnd() % mlen : mlen;
		bad[rnd() % mlen] ^= (uint8_t)(1 << (rnd() % 8));
		int rc = tf_meta_decode(&msi, bad, blen, out, strbuf, stk, &e);
		CHECK(rc == TF_OK || rc == TF_E_CORRUPT, "meta payload: status %d", rc);
		for (size_t i = 0; rc == TF_OK && i < 6; i++)
			CHECK(out[i].str || (out[i].kind != TF_THREAD &&
					     out[i].kind != TF_MODULE && out[i].kind != TF_MARK),
			      "meta round %d: %s record without its string", round,
			      tf_kind_name(out[i].kind));
	}
	tf_colenc_free(enc);
	tf_coldec_free(dec);
	tf_stkmodel_free(stk);
	tf_stkrun_free(run);
	free(ev);
	free(good);
	free(bad);
	free(out);
	free(strbuf);
	checks += 2 * ROUNDS + 1;
}

#ifdef TF_TEST_COUNTS_ALLOCS
static void test_no_alloc_after_open(void)
{
	const char *path = tmp_path("noalloc.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	enum { N = 150000 };
	struct tf_event *ev = malloc(N * sizeof *ev);
	uint64_t t = 0;
	size_t n = random_events(ev, N, &t);
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	struct expect meta = { .r = malloc(4096 * sizeof(struct tf_record)), .cap = 4096 };
	counting = 1;
	int rc = tf_write_events(w, 1, 1, 0, ev, n, &e);
	for (int round = 0; round < 20 && !rc; round++)
		some_meta(w, &meta, round);
	if (!rc)
		rc = tf_writer_flush(w, &e);
	if (!rc)
		rc = tf_write_events(w, 2, 2, 0, ev, 1000, &e);
	if (!rc)
		rc = tf_writer_close(w, t, &e);
	counting = 0;
	CHECK(rc == TF_OK, "%s", e.msg);
	CHECK(allocs == 0, "the writer allocated %lu times after open", allocs);
	close(fd);
	free(ev);
	free(meta.r);
	checks++;
}
#endif

static void test_names(void)
{
	CHECK(!strcmp(tf_kind_name(TF_ALLOC), "alloc") &&
	      !strcmp(tf_kind_name(TF_END), "end") &&
	      !strcmp(tf_kind_name(99), "unknown"), "kind names");
	CHECK(!strcmp(tf_fn_name(TF_FN_POSIX_MEMALIGN), "posix_memalign") &&
	      !strcmp(tf_fn_name(TF_FN_COUNT), "unknown") &&
	      !strcmp(tf_fn_name(TF_FN_POOL_DESTROY), "pool_destroy") &&
	      !strcmp(tf_fn_name(TF_FN_POOL_DESTROY + 1), "unknown") &&  /* reserved: no name */
	      !strcmp(tf_fn_name(TF_FN_XALLOCX), "xallocx") &&
	      !strcmp(tf_fn_name(TF_FN_TC_POSIX_MEMALIGN), "tc_posix_memalign"), "fn names");
	CHECK(!strcmp(tf_status_name(TF_E_VERSION), "unsupported format version"),
	      "status names");
	checks += 3;
}

/* ---- sample trace for test_dump.py --------------------------------------- */
static int write_sample(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	struct tf_writer *w;
	struct tf_error e = { 0 };
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	struct expect meta = { 0 };
	struct tf_record st[] = {
		{ .kind = TF_STACK, .id = 1, .parent = 0, .ip = 0x401000 },
		{ .kind = TF_STACK, .id = 2, .parent = 1, .ip = 0x401234 },
		{ .kind = TF_THREAD, .tid = 4242, .str = "main" },
		{ .kind = TF_MODULE, .addr = 0x400000, .size = 0x2000, .file_offset = 0,
		  .perms = 1 | 4 | 8, .str = "/usr/bin/demo", .build_id = build_id,
		  .build_id_len = 4 },
		{ .kind = TF_MARK, .t = 150, .str = "half way" },
		{ .kind = TF_LOST, .t = 160, .count = 3 },
		/* on the parent's axis: not part of this trace's duration */
		{ .kind = TF_FORK, .id = 4241, .count = 123456789, .t = 5000 },
	};
	for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
		write_meta(w, &meta, &st[i]);
	free(meta.r);
	/* Three segments of stream 1 (alloc, realloc, free) so that tests can
	 * damage a middle one. */
	struct tf_event a[] = {
		{ .t = 100, .addr = 0x5000, .size = 24, .stack = 2, .kind = TF_EV_ALLOC,
		  .fn = TF_FN_MALLOC },
		{ .t = 110, .addr = 0x5040, .size = 100, .stack = 1, .kind = TF_EV_ALLOC,
		  .fn = TF_FN_CALLOC },
	};
	struct tf_event r[] = {
		{ .t = 120, .addr = 0x5000, .kind = TF_EV_REALLOC_OLD, .fn = TF_FN_REALLOC },
		{ .t = 130, .addr = 0x6000, .size = 48, .stack = 2,
		  .kind = TF_EV_REALLOC_NEW, .fn = TF_FN_REALLOC },
	};
	struct tf_event f[] = {
		{ .t = 140, .addr = 0x6000, .kind = TF_EV_FREE, .fn = TF_FN_FREE },
	};
	CHECK(tf_write_events(w, 1, 4242, 0, a, 2, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_write_events(w, 1, 4242, 2, r, 2, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_write_events(w, 1, 4242, 4, f, 1, &e) == TF_OK, "%s", e.msg);
	CHECK(tf_writer_close(w, 200, &e) == TF_OK, "%s", e.msg);
	close(fd);
	return 0;
}

/* ---- synthetic churn for figures ------------------------------------------- */
/* Events shaped like shared/bench/churn.c on one thread: random slots,
 * log-uniform sizes, ~1000 stacks, real glibc addresses. */
static size_t churn_events(struct tf_event *ev, size_t n)
{
	enum { SLOTS = 4096 };
	static void *slot[SLOTS];
	size_t i = 0;
	uint64_t t = 1000;
	while (i + 2 <= n) {
		uint64_t r = rnd();
		size_t k = r % SLOTS;
		unsigned p = (unsigned)((r >> 32) % 100);
		t += 60 + rnd() % 120;
		uint32_t stack = (uint32_t)(1 + rnd() % 936);
		uint64_t rs = rnd();
		size_t size = ((size_t)8 << (rs % 13));
		size += (size_t)((rs >> 8) % size);
		if (!slot[k]) {
			slot[k] = malloc(size);
			ev[i++] = (struct tf_event){ .t = t, .addr = (uintptr_t)slot[k],
				.size = size, .stack = stack, .kind = TF_EV_ALLOC,
				.fn = p < 70 ? TF_FN_MALLOC : p < 90 ? TF_FN_CALLOC : TF_FN_REALLOC };
		} else if (p < 15) {
			uintptr_t old = (uintptr_t)slot[k];
			void *q = realloc(slot[k], size);
			ev[i++] = (struct tf_event){ .t = t, .addr = old,
				.kind = TF_EV_REALLOC_OLD, .fn = TF_FN_REALLOC };
			t += 50 + rnd() % 100;
			ev[i++] = (struct tf_event){ .t = t, .addr = (uintptr_t)q,
				.size = size, .stack = stack, .kind = TF_EV_REALLOC_NEW,
				.fn = TF_FN_REALLOC };
			slot[k] = q;
		} else {
			ev[i++] = (struct tf_event){ .t = t, .addr = (uintptr_t)slot[k],
				.kind = TF_EV_FREE, .fn = TF_FN_FREE };
			free(slot[k]);
			slot[k] = NULL;
		}
	}
	for (size_t k = 0; k < SLOTS; k++) {
		free(slot[k]);
		slot[k] = NULL;
	}
	return i;
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct stream_events {
	struct tf_event *ev;
	size_t n, cap;
	uint32_t tid;
};

/* Writes the streams in rounds of `batch` events each, as a recorder's
 * writer thread would, then reads the trace back; prints the figures. */
static int measure(struct stream_events *st, uint32_t nst, size_t batch)
{
	const char *path = tmp_path("measure.trc");
	int fd = create(path);
	struct tf_writer *w;
	struct tf_error e = { 0 };
	size_t events = 0, at[256] = { 0 }, left = 1;
	CHECK(nst <= 256, "too many streams");
	CHECK(tf_writer_open(&w, fd, &hdr, &e) == TF_OK, "%s", e.msg);
	double t0 = cpu_now();
	while (left) {
		left = 0;
		for (uint32_t s = 0; s < nst; s++) {
			size_t k = st[s].n - at[s] < batch ? st[s].n - at[s] : batch;
			if (k < st[s].n - at[s] && st[s].ev[at[s] + k - 1].kind == TF_EV_REALLOC_OLD)
				k++;
			if (!k)
				continue;
			CHECK(tf_write_events(w, s + 1, st[s].tid, at[s], st[s].ev + at[s], k,
					      &e) == TF_OK, "%s", e.msg);
			at[s] += k;
			events += k;
			left += st[s].n - at[s];
		}
	}
	CHECK(tf_writer_close(w, 0, &e) == TF_OK, "%s", e.msg);
	double t1 = cpu_now();
	close(fd);
	struct tf_reader *rd;
	struct tf_decoder *d;
	struct tf_segment_info si;
	const struct tf_record *r;
	size_t recs = 0, segs = 0;
	CHECK(tf_reader_open(&rd, path, &e) == TF_OK && tf_decoder_new(&d, &e) == TF_OK,
	      "%s", e.msg);
	double t2 = cpu_now();
	while (tf_reader_next_segment(rd, &si, &e) == TF_OK) {
		CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "%s", e.msg);
		recs += si.stream ? si.count : 0;
		segs++;
	}
	double t3 = cpu_now();
	uint64_t bytes = tf_reader_file_size(rd);
	tf_decoder_free(d);
	tf_reader_close(rd);
	printf("events %zu records %zu segments %zu file_bytes %" PRIu64
	       " bytes_per_record %.2f\n", events, recs, segs, bytes,
	       (double)bytes / (double)recs);
	printf("cpu: encode %.1f M events/s, decode %.1f M events/s\n",
	       (double)events / (t1 - t0) / 1e6, (double)events / (t3 - t2) / 1e6);
	unlink(path);
	return 0;
}

static int bench(size_t n, size_t batch)
{
	struct stream_events st = { .ev = malloc(n * sizeof(struct tf_event)), .tid = 1 };
	st.n = churn_events(st.ev, n);
	measure(&st, 1, batch);
	free(st.ev);
	return 0;
}

static void push_event(struct stream_events *s, const struct tf_event *ev)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4096;
		s->ev = realloc(s->ev, s->cap * sizeof *s->ev);
		CHECK(s->ev, "out of memory");
	}
	s->ev[s->n++] = *ev;
}

/* The events of a trace's streams, rewritten in batches of `batch`. */
static int reencode(const char *trace, size_t batch)
{
	static struct stream_events st[256];
	struct tf_reader *rd;
	struct tf_decoder *d;
	struct tf_segment_info si;
	struct tf_error e = { 0 };
	const struct tf_record *r;
	uint32_t nst = 0;
	CHECK(tf_reader_open(&rd, trace, &e) == TF_OK && tf_decoder_new(&d, &e) == TF_OK,
	      "%s: %s", trace, e.msg);
	while (tf_reader_next_segment(rd, &si, &e) == TF_OK) {
		CHECK(tf_decode_segment(rd, d, &si, &r, &e) == TF_OK, "%s", e.msg);
		if (!si.stream)
			continue;
		CHECK(si.stream <= 256, "stream %u", si.stream);
		struct stream_events *s = &st[si.stream - 1];
		nst = si.stream > nst ? si.stream : nst;
		s->tid = si.tid;
		for (uint32_t i = 0; i < si.count; i++) {
			const struct tf_record *x = &r[i];
			struct tf_event ev = { .t = x->t, .addr = x->addr, .size = x->size,
				.stack = x->stack, .fn = x->fn };
			if (x->kind == TF_ALLOC) {
				ev.kind = TF_EV_ALLOC;
			} else if (x->kind == TF_FREE) {
				ev.kind = TF_EV_FREE;
			} else {
				struct tf_event old = { .t = x->t, .addr = x->old_addr,
					.kind = TF_EV_REALLOC_OLD, .fn = x->fn };
				push_event(s, &old);
				ev.t = x->t2;
				ev.kind = TF_EV_REALLOC_NEW;
			}
			push_event(s, &ev);
		}
	}
	tf_decoder_free(d);
	tf_reader_close(rd);
	measure(st, nst, batch);
	for (uint32_t s = 0; s < nst; s++)
		free(st[s].ev);
	return 0;
}

static void cleanup(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "tf-test: could not remove %s\n", tmpdir);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "sample"))
		return write_sample(argv[2]);
	CHECK(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
	atexit(cleanup);
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "bench"))
		return bench(strtoull(argv[2], NULL, 0),
			     argc == 4 ? strtoull(argv[3], NULL, 0) : 20000);
	if (argc == 4 && !strcmp(argv[1], "reencode"))
		return reencode(argv[2], strtoull(argv[3], NULL, 0));
	if (argc != 1) {
		fprintf(stderr, "usage: tf-test [sample PATH | bench N [BATCH] | "
			"reencode TRACE BATCH]\n");
		return 64;
	}
	test_names();
	test_writer_args();
	test_dense_segment();
	test_segenc();
	test_round_trip();
	test_round_trip_realistic();
	test_unknown_kinds();
	test_stack_runs();
	test_stacks_codes();
	test_counters();
	test_pools();
	test_time_contexts();
	test_bad_headers();
	test_damage();
	test_write_errors();
	test_fuzz_payloads();
#ifdef TF_TEST_COUNTS_ALLOCS
	test_no_alloc_after_open();
#endif
	printf("tf-test: all %d checks passed\n", checks);
	return 0;
}
