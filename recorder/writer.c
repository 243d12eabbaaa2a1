/*
 * writer.c - the writer thread: drains the staging rings into the trace.
 *
 * Every round (1 to 8 ms, or sooner when a thread's ring crossed half full and
 * woke it through the futex word `kick`) it appends, in this order:
 *   - MODULE records for objects loaded since the last round (it polls
 *     dl_iterate_phdr's load counter; dlclose snapshots before unloading),
 *   - STACK records for trie nodes [emitted, nodes_next) whose ready flag is
 *     set,
 *   - a LOST record counting the events dropped since the last one (a
 *     thread that got no staging ring: all in use, or no disk space), as
 *     counted in the .ring file, which holds the count a kill or a failed
 *     write keeps from the trace,
 *   - for every ring in use: a THREAD record when it first sees the stream
 *     (name read from /proc/self/task/TID/comm), then, once enough are
 *     pending (DRAIN_MIN), the events [tail, head) as segments, advancing
 *     tail only after each write returned; a CLOSED ring drained to its
 *     head is released (a thread's own once the kernel has ended the
 *     thread: it records into it until then).
 * Events are copied out of the ring first, in chunks of one segment that
 * never end between the two events of a realloc (which the thread
 * publishes together), so a pair that wraps around the ring's end still
 * goes out in one segment. Chunks are encoded two at a time when they can
 * be, one by the encoder thread (encoder.c, "chunks" below).
 *
 * After each round it serves the control socket, writes the marks queued
 * by rec_mark, trace-ctl, start and stop, answers rec_flush with a
 * round that drains every ring (control.c, api.c), and samples the
 * process's counters when REC_STATS_MS says one is due (counters.c: it
 * sleeps no longer than that), once more at the end.
 *
 * In a bounded trace (REC_MAX_SIZE), and in any trace once recording was
 * stopped (stopset.c), every drained event also goes to the keymap; in a
 * bounded one and a keyframe is written between rounds each time a quarter of
 * the ring has been written (keyframe_step, keyframe.c), after a KEY round
 * that drains every ring up to the keyframe's cut.
 *
 * On stop it does a last round, stops the encoder thread, writes a
 * "heapreel.stats" MARK (ring waits, the most rounds one wait for room
 * spanned, calls through lent rings, lost events, unknown stacks, nodes,
 * sampled-set overflows, segments the encoder thread encoded, this
 * thread's CPU time, and under REC_CHECK_STACKS the captures checked), and
 * tf_writer_close writes END.
 *
 * The thread runs with the re-entrancy guard set (its allocations are not
 * recorded) and all signals blocked (the program's handlers never run on it).
 * If writing fails (disk full, file size limit) or the trace was removed,
 * it says so (once per session: rec_say_trouble) and drains no more
 * (rec_s.undrained): what the rings hold stays there, tails unmoved, for
 * the importer's recovery from the .ring, and threads stop waiting for
 * room (a full ring counts its events lost: ring.c). Emptying the rings
 * without writing would lose events nobody counts, and leave a trace in
 * which a new thread's allocation reuses an address whose free, still in
 * an exited thread's ring, was dropped. Removal is checked before every
 * write, not only once per round (check_fd): nothing published after the
 * removal goes into the trace. Any signal a failed write raises (SIGXFSZ)
 * stays pending on this thread, unseen.
 *
 * When the process exits while other threads run (rec_session_exit), the
 * last round drains what is there, END closes the trace, and the writer
 * sets rec_s.undrained: the other threads' later events stay in their
 * rings for the importer, as after SIGKILL.
 *
 * Must never: take a lock an application thread may hold while allocating.
 */
#include "rec_internal.h"
#include "got.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Writer period when nobody wakes it: 1 ms while rounds write events,
 * doubling up to 8 ms while they write none, so an idle or sampled
 * recording does not wake a CPU (and preempt the program on a busy
 * machine) a thousand times a second. A ring crossing half full still
 * wakes it at once. */
#define ROUND_MIN_NS 1000000L
#define ROUND_MAX_NS 8000000L
#define META_FLUSH_ROUNDS 100          /* meta segment at most every 100 rounds */
/* Segments compress better when big (trace_format.h): a ring is drained
 * once it holds DRAIN_MIN events (half its capacity if that is less: a
 * small ring's thread would wait), or after DRAIN_AGE_ROUNDS (0.2-1.6 s) so the
 * trace stays fresh, or when its thread exited, or while any thread waits
 * for room (drain() says why), or at the end; each call
 * gets at most TF_SEGMENT_EVENTS, so a thread waiting for room gets some
 * before the whole ring is written. Half a segment (a quarter of a 4 MiB
 * ring) keeps three quarters of the ring free for the writer's delays:
 * churn 4x4.5M 5.05 B/event, against 5.16 at a quarter of a segment (the
 * writer, with its encoder thread, drained that often); two runs of each
 * had no ring waits. */
#define DRAIN_MIN (TF_SEGMENT_EVENTS / 2)
#define DRAIN_AGE_ROUNDS 200
#define DRAIN_CHUNK TF_SEGMENT_EVENTS
#define SCRATCH_BYTES ((DRAIN_CHUNK + 1) * sizeof(struct tf_event))

static struct tf_writer *w;
static pthread_t thread;
static _Atomic uint32_t kick;
static _Atomic int stopping;
static int keep_rings;                 /* rec_writer_stop's: other threads go on */
static int failed;                     /* a write failed: drain no more */
static uint32_t nodes_emitted, modules_emitted;
static uint64_t lost_emitted;          /* events counted in LOST records */
struct announced {                     /* per ring, writer's own notes */
	uint32_t stream;               /* what THREAD said last */
	char name[16];
	uint64_t drained;              /* round of the last drain */
	_Atomic uint64_t moved;        /* round that last moved its tail (ring.c reads it) */
};
static uint64_t round_no;
static struct announced *announced;
static struct tf_event *scratch;       /* DRAIN_CHUNK + 1 events */
static int meta_dirty;
static int mark_dirty;                 /* a MARK is queued: on disk this round,
					  since a kill would lose it */
#define KEYFRAME_EVERY 4               /* keyframes per ring's worth of bytes */
static uint64_t key_written;           /* bytes written when the last keyframe began */
static uint64_t key_cut;               /* the KEY round's time (keyframe_step) */
static int key_warned;
/* Test only (REC_TEST_KEYFRAME_GAP, read at start): before each ring,
 * the KEY round waits until the program has published this many events
 * (KEY_GAP_WAITS at most), so it runs between the reads of the heads
 * however loaded the machine is (tests/hardening/test_bounded.py, raced). */
static uint64_t key_gap;
#define KEY_GAP_STEP_NS 1000000L
#define KEY_GAP_WAITS 1000
/* Test only (REC_TEST_HOLD_FIRST_DRAIN=1, read at start): see hold(). */
static int hold_first;
#define HOLD_WAITS 10000               /* steps of KEY_GAP_STEP_NS: 10 s at most */
/* Test only (REC_TEST_WRITER_LATE_US, read at start): the writer thread
 * sleeps this long before its first step, so that a short program's exit
 * comes before it (rec_thread_start does not wait for it, the exit does),
 * and so does an attach's routing (attach.c waits for it). */
static long late_us;

/* Detaching (rec_writer_detach): the control connection to answer once
 * the trace is closed (-1: not detaching), and the rounds still to run
 * before the final one, so that a thread inside a hook it entered before
 * the GOT was put back publishes its event in time (a few ms; one
 * descheduled longer than that loses its call, as at an exit). */
static int detach_fd = -1;
static unsigned detach_rounds;
#define DETACH_GRACE_ROUNDS 4

void rec_writer_detach(int fd)
{
	detach_fd = fd;
	detach_rounds = DETACH_GRACE_ROUNDS;
}

/* The writer's last steps after a detach: it ends itself (nobody joins
 * it), after the files are closed and the request answered. */
static void detached(void)
{
	/* the drain buffer's pages back to the system, as the encoder's */
	madvise(scratch, SCRATCH_BYTES, MADV_DONTNEED);
	rec_enc_release();
	rec_session_detach_end();
	rec_ctl_detached(detach_fd);
	detach_fd = -1;
	pthread_detach(pthread_self());
}

void rec_writer_kick(void)
{
	atomic_fetch_add_explicit(&kick, 1, memory_order_release);
	rec_futex_wake(&kick, 1);
}

static int check_fd(void);

/* Nothing more can be written: the rings keep what they hold. */
static void fail_writing(void)
{
	failed = 1;
	atomic_store_explicit(&rec_s.undrained, 1, memory_order_release);
	rec_ring_progress();
}

static void check(int status, const struct tf_error *err)
{
	if (status == TF_OK || failed)
		return;
	fail_writing();
	char why[200], *e = why + sizeof why;
	rec_cat(rec_cat(rec_cat(why, e, ": "), e, err->msg), e, "; recording stopped");
	rec_say_trouble("cannot write ", rec_s.trace_path, why);
}

void rec_writer_meta(const struct tf_record *r)
{
	struct tf_error err;
	if (!failed)
		check(tf_write_meta(w, r, &err), &err);
	meta_dirty = 1;
}

/* The instant each mark of what the trace lacks (tf_lack_mark) was
 * written at (0: not written this session), for the keyframes. */
static uint64_t lack_t[TF_LACKS];

/* The latest mark of each span label (tf_span_mark), for the keyframes.
 * Latest by time: the mark queue hands marks over in slot order. */
static struct { int seen; uint64_t t; } span_mark[TF_SPAN_MARKS];

void rec_writer_mark(uint64_t t, const char *label)
{
	struct tf_record r = { .kind = TF_MARK, .t = t, .str = label };
	rec_writer_meta(&r);
	mark_dirty = 1;
	int k = tf_lack_of(label);
	if (k >= 0 && !lack_t[k])
		lack_t[k] = t ? t : 1;
	int i = tf_span_of(label);
	if (i >= 0 && (!span_mark[i].seen || t > span_mark[i].t))
		span_mark[i].seen = 1, span_mark[i].t = t;
}

void rec_writer_lack_marks(void)
{
	for (int k = 0; k < TF_LACKS; k++)
		if (lack_t[k]) {
			struct tf_record r = { .kind = TF_MARK, .t = lack_t[k],
					       .str = tf_lack_mark((enum tf_lack)k) };
			rec_writer_meta(&r);
		}
	for (unsigned i = 0; i < TF_SPAN_MARKS; i++)
		if (span_mark[i].seen) {
			struct tf_record r = { .kind = TF_MARK, .t = span_mark[i].t,
					       .str = tf_span_mark(i) };
			rec_writer_meta(&r);
		}
}

static void flush_meta(void)
{
	struct tf_error err;
	if (check_fd())
		check(tf_writer_flush(w, &err), &err);
	meta_dirty = 0;
	mark_dirty = 0;
}

void rec_writer_module(uint32_t i)
{
	const char *path;
	const struct rec_module *m = rec_module(i, &path);
	struct tf_record r = {
		.kind = TF_MODULE, .t = rec_now(), .addr = m->start, .size = m->size,
		.file_offset = m->offset, .str = path, .perms = m->perms,
		.build_id = m->build_id_len ? m->build_id : NULL,
		.build_id_len = m->build_id_len,
	};
	rec_writer_meta(&r);
}

/* 0 if node id is not written yet (its thread is inside the insert, or
 * died there). */
int rec_writer_node(uint32_t id)
{
	struct tf_ring_file *rf = rec_s.rf;
	struct tf_node *nd = (struct tf_node *)((char *)rf + rf->nodes_offset) + id;
	if (!atomic_load_explicit(&nd->ready, memory_order_acquire))
		return 0;
	struct tf_record r = { .kind = TF_STACK, .id = id, .parent = nd->parent, .ip = nd->ip };
	rec_writer_meta(&r);
	return 1;
}

/* rec_now() before the previous look at the loaded objects: an object
 * loaded since may have called the allocator unrecorded (below). */
static uint64_t objects_looked;
/* The unrouted span of an entry got.c could not route is written, never
 * closed (rec_got_incomplete). */
static int unrouted_open;

/* Module records are not in the .ring file, so they go to disk at once:
 * a trace recovered after a kill can still be symbolized. A GOT entry
 * routed now (an object dlopen'ed since the last look calling the
 * allocator's API, or any allocator function when attached) was called
 * unrecorded until now: the unrouted .. routed marks bound when. */
static void emit_modules(void)
{
	uint64_t looked = rec_now();
	int changed = rec_modules_changed();
	if (rec_got_refresh(changed)) {
		rec_writer_mark(objects_looked, TF_MARK_UNROUTED);
		rec_writer_mark(rec_now(), TF_MARK_ROUTED);
	}
	if (!unrouted_open && rec_got_incomplete()) {
		unrouted_open = 1;
		rec_writer_mark(objects_looked, TF_MARK_UNROUTED);
	}
	objects_looked = looked;
	if (changed)
		rec_modules_snapshot();
	uint32_t n = rec_modules_count();
	if (modules_emitted == n)
		return;
	for (; modules_emitted < n; modules_emitted++)
		rec_writer_module(modules_emitted);
	flush_meta();
}

static void emit_nodes(int final)
{
	uint32_t next = atomic_load_explicit(&rec_s.rf->nodes_next, memory_order_acquire);
	for (; nodes_emitted < next; nodes_emitted++)
		if (!rec_writer_node(nodes_emitted) && !final)
			break;  /* being written: next round (at the end: its writer
				   died mid-insert; nothing uses it) */
}

/* Events dropped since the last round (threads without a ring), with
 * the total so far: the importer adds what the .ring file counts beyond
 * the last LOST record that reached the trace. */
static void emit_lost(void)
{
	const struct tf_ring_file *rf = rec_s.rf;
	uint64_t n = atomic_load(&rf->lost);
	if (n == lost_emitted)
		return;
	uint64_t t = atomic_load(&rf->t_lost);
	struct tf_record r = { .kind = TF_LOST, .t = t ? t - 1 : rec_now(),
			       .count = n - lost_emitted, .size = n };
	lost_emitted = n;
	rec_writer_meta(&r);
}

/* A THREAD record when the stream is new or the thread's name changed
 * (readers keep the last name of a tid). */
static void thread_record(uint32_t i, struct tf_ring *r)
{
	struct announced *a = &announced[i];
	if (a->stream == r->stream && !memcmp(a->name, r->name, sizeof a->name))
		return;
	a->stream = r->stream;
	memcpy(a->name, r->name, sizeof a->name);
	struct tf_record t = { .kind = TF_THREAD, .tid = r->tid, .t = rec_now(), .str = a->name };
	rec_writer_meta(&t);
}

/* The live thread's name into the ring header (also for recovery). */
static void read_comm(struct tf_ring *r)
{
	char path[64], name[sizeof r->name], *e = path + sizeof path;
	char *p = rec_cat(path, e, "/proc/self/task/");
	p = rec_utoa(p, e, r->tid);
	rec_cat(p, e, "/comm");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, name, sizeof name - 1);
	close(fd);
	if (n <= 0)
		return;
	if (name[n - 1] == '\n')
		n--;
	memset(name + n, 0, sizeof name - (size_t)n);
	memcpy(r->name, name, sizeof name);
}

/* How much a round writes: NORMAL leaves rings that hold little for a
 * later round; SYNC writes everything (rec_flush, trace-ctl flush); FINAL
 * also skips trie nodes whose writer died and notes thread names; KEY
 * writes every ring up to the keyframe's cut (keyframe_step). */
enum round_mode { NORMAL, SYNC, FINAL, KEY };

/* Bounded recording: a keyframe each time a quarter of the ring has been
 * written since the last one began, so the ring always holds one whole
 * keyframe and what followed it (FORMAT.md "Bounded traces"). Rounds stop
 * early when one is due, so that it is never late by a whole round. */
static int key_due(void)
{
	return rec_s.max_size && !failed && !rec_keymap_broken() &&
	       tf_writer_written(w) - key_written >= rec_s.max_size / KEYFRAME_EVERY;
}

/* ---- chunks: events copied out of a ring, on their way to the trace ------
 * A chunk is encoded, appended, then its ring's tail moves past it. While
 * the encoder thread is there (unbounded traces: a bounded one decides
 * keyframes between chunks), a chunk waits, copied out, for the next one:
 * if one comes, the encoder thread encodes the waiting chunk while this
 * thread encodes the new one, and both are appended in order; if none
 * comes (settle), this thread encodes it alone. */
struct chunk {
	struct tf_ring *ring;
	uint32_t i;                    /* its index */
	struct rec_enc_job job;
};
static struct chunk waiting, current;
static enum { NONE_WAITS, WAITS, ENCODING } waiting_state;

/* Copies n events of ring r (capacity cap) from index tail into buf, and
 * one more if the n-th is a REALLOC's first half (a pair is never split);
 * returns the count. */
static size_t copy_out(struct tf_ring *r, uint32_t cap, uint64_t tail, size_t n,
		       struct tf_event *buf)
{
	const struct tf_event *ev = rec_ring_events(r);
	size_t at = tail & (cap - 1);
	size_t part = n < cap - at ? n : cap - at;
	memcpy(buf, ev + at, part * sizeof *ev);
	memcpy(buf + part, ev, (n - part) * sizeof *ev);
	if (buf[n - 1].kind == TF_EV_REALLOC_OLD) {
		buf[n] = ev[(tail + n) & (cap - 1)];
		n++;
	}
	return n;
}

/* Appends c (encoded) and moves its ring's tail past it. */
static void complete(struct chunk *c)
{
	struct rec_enc_job *j = &c->job;
	if (j->rc)
		check(j->rc, &j->err);
	else if (check_fd())  /* after the copy: see check_fd */
		check(tf_writer_put(w, j->se, &j->err), &j->err);
	if (failed)
		return;       /* not in the trace: the ring keeps them */
	if (rec_stopset_tracking())
		rec_keymap_apply(j->stream, j->tid, j->ev, j->n);
	atomic_store_explicit(&announced[c->i].moved, round_no, memory_order_relaxed);
	atomic_store_explicit(&c->ring->tail, j->first_seq + j->n, memory_order_release);
	rec_ring_progress();
}

static void encode_here(struct chunk *c)
{
	if (failed)
		c->job.rc = TF_OK;  /* complete() leaves it in its ring */
	else
		rec_enc_run(&c->job);
}

/* Writes the waiting chunk, if there is one. */
static void settle(void)
{
	if (waiting_state == WAITS)
		encode_here(&waiting);
	else if (waiting_state == ENCODING)
		rec_enc_wait();
	else
		return;
	waiting_state = NONE_WAITS;
	complete(&waiting);
}

/* Ring i's (r) events [tail, tail + n) (n may grow by one: copy_out), on their
 * way; returns n. A waiting chunk's events are in scratch, encoded with
 * the writer's encoder unless the encoder thread takes it; a new chunk
 * that pairs with it goes in the encoder thread's buffer. */
static size_t send(uint32_t i, struct tf_ring *r, uint32_t cap, uint64_t tail, size_t n)
{
	const struct rec_enc *e = NULL;
	if (waiting_state == WAITS && (failed || !(e = rec_enc_get())))
		settle();       /* cannot pair: the waiting chunk alone */
	int wait = waiting_state == NONE_WAITS && !rec_s.max_size && !failed && rec_enc_ready();
	struct chunk *c = wait ? &waiting : &current;
	struct tf_event *buf = e ? e->ev : scratch;
	n = copy_out(r, cap, tail, n, buf);
	c->ring = r;
	c->i = i;
	c->job = (struct rec_enc_job){ .se = tf_writer_segenc(w), .ev = buf, .n = n,
				       .stream = r->stream, .tid = r->tid, .first_seq = tail };
	if (wait) {
		waiting_state = WAITS;
		return n;
	}
	if (e) {
		waiting.job.se = e->se;
		rec_enc_submit(&waiting.job);
		waiting_state = ENCODING;
	}
	encode_here(c);
	settle();
	complete(c);
	return n;
}

/* May CLOSED ring i be released once drained? A lent ring is closed after
 * its one call; a thread's own ring takes what the thread does after its
 * exit destructor until the kernel has ended it (ring.c). Asked before the
 * head is read: once the thread is gone, that head is the last. */
static int closed_for_good(uint32_t i, const struct tf_ring *r)
{
	if (i >= REC_RINGS_KEPT)
		return 1;
	return syscall(SYS_tgkill, rec_s.pid, r->tid, 0) < 0 && errno == ESRCH;
}

/* KEY rounds: the index in [tail, head) of ring r's (capacity cap) first
 * event stamped after key_cut (a realloc's two events count as one, at the
 * later time), or head. A stream's events are in time order. */
static uint64_t key_limit(struct tf_ring *r, uint32_t cap, uint64_t tail, uint64_t head)
{
	const struct tf_event *ev = rec_ring_events(r);
	for (uint64_t q = tail; q < head; q++) {
		const struct tf_event *e = &ev[q & (cap - 1)];
		if (e->kind != TF_EV_REALLOC_OLD && e->t > key_cut)
			return e->kind == TF_EV_REALLOC_NEW && q > tail ? q - 1 : q;
	}
	return head;
}

/* Test only (hold_first): ring r's first drain (capacity cap, the small
 * one) waits until a thread waits for room (HOLD_WAITS steps at most), then
 * takes just over half of it. Its thread, full, must see it empty before it
 * grows (ring.c), and the rest is less than a round drains unasked: it
 * waits on what the rounds choose (tests/recorder/test_programs.py,
 * case ring_grow). Sets *end to the head now; returns the head to drain to. */
static uint64_t hold(const struct tf_ring *r, uint32_t cap, uint64_t *end)
{
	for (int k = 0; k < HOLD_WAITS && !atomic_load(&rec_s.waiters); k++) {
		struct timespec step = { 0, KEY_GAP_STEP_NS };
		nanosleep(&step, NULL);
	}
	*end = atomic_load_explicit(&r->head, memory_order_acquire);
	return *end < cap / 2 + 1 ? *end : cap / 2 + 1;
}

/* Drains ring i; returns how many events it wrote. A ring that holds
 * little is left for a later round, unless a thread waits for room: it may
 * be this ring's, growing, which needs it empty (ring.c), so the round
 * drains every ring and the thread is served by the end of the first round
 * that began after it started waiting, whatever the other threads do. */
static uint64_t drain(uint32_t i, enum round_mode mode)
{
	struct tf_ring *r = rec_session_ring(i);
	uint32_t state = atomic_load_explicit(&r->state, memory_order_acquire);
	if (state == TF_RING_FREE || failed)
		return 0;
	int release = state == TF_RING_CLOSED && closed_for_good(i, r);
	if (announced[i].stream != r->stream) {
		read_comm(r);
		thread_record(i, r);
	}
	struct announced *a = &announced[i];
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t end = atomic_load_explicit(&r->head, memory_order_acquire), head = end;
	/* after the head: a ring grows only while empty (ring.c) */
	uint32_t cap = atomic_load_explicit(&r->events, memory_order_relaxed);
	uint64_t enough = cap / 2 < DRAIN_MIN ? cap / 2 : DRAIN_MIN;
	if (mode == KEY)
		head = key_limit(r, cap, tail, end);
	if (hold_first && mode == NORMAL && i < REC_RINGS_KEPT && tail == 0 &&
	    cap == REC_RING_FIRST_EVENTS && head)
		head = hold(r, cap, &end);
	if (mode == NORMAL && state != TF_RING_CLOSED && head - tail < enough &&
	    !atomic_load(&rec_s.waiters) && round_no - a->drained < DRAIN_AGE_ROUNDS)
		return 0;
	a->drained = round_no;
	uint64_t wrote = head - tail;
	while (tail != head) {
		/* in chunks, so a thread waiting for room gets some soon */
		size_t n = head - tail < DRAIN_CHUNK ? head - tail : DRAIN_CHUNK;
		tail += send(i, r, cap, tail, n);
		if (failed)
			return wrote;   /* the rest stays in the ring */
		if (mode == NORMAL && key_due())
			return wrote;   /* time for a keyframe: the rest later */
	}
	if (tail != end)
		return wrote;
	if (release || mode == FINAL)
		settle();       /* the ring's events all in the trace first */
	if (failed)
		return wrote;   /* they are not: the ring keeps them (its tail did not move) */
	if (release) {
		thread_record(i, r); /* the name the thread had at exit */
		if (rec_s.max_size)
			rec_keyframe_released(r->stream, r->tid, tail);
		announced[i].stream = 0;
		atomic_store_explicit(&r->head, 0, memory_order_relaxed);
		atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
		atomic_store_explicit(&r->state, TF_RING_FREE, memory_order_release);
		rec_ring_release(i);
		rec_ring_progress();
	} else if (mode == FINAL) {
		read_comm(r);
		thread_record(i, r);
	}
	return wrote;
}

/* Events published in all rings so far (as far as their heads say). */
static uint64_t published(void)
{
	uint32_t used = atomic_load_explicit(&rec_s.rf->rings_used, memory_order_acquire);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < used; i++)
		sum += atomic_load_explicit(&rec_session_ring(i)->head, memory_order_acquire);
	return sum;
}

/* Test only: until the program published n more events (or a second). */
static void wait_events(uint64_t n)
{
	uint64_t from = published();
	for (int k = 0; k < KEY_GAP_WAITS && published() - from < n; k++) {
		struct timespec step = { 0, KEY_GAP_STEP_NS };
		nanosleep(&step, NULL);
	}
}

/* One round; returns how many events it wrote. */
static uint64_t round_all(enum round_mode mode)
{
	emit_modules();
	emit_nodes(mode == FINAL);
	emit_lost();
	if (!failed)
		rec_ring_prepare();
	uint32_t used = atomic_load_explicit(&rec_s.rf->rings_used, memory_order_acquire);
	uint64_t wrote = 0;
	for (uint32_t i = 0; i < used && !(mode == NORMAL && key_due()); i++) {
		if (mode == KEY && key_gap)
			wait_events(key_gap);
		wrote += drain(i, mode);
	}
	settle();
	emit_nodes(mode == FINAL); /* nodes of the events just written */
	return wrote;
}

uint64_t rec_thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void stats(void)
{
	char label[640], *e = label + sizeof label;  /* every figure at 20 digits */
	char *p = rec_cat(label, e, TF_MARK_RESERVED "stats ring_waits=");
	p = rec_utoa(p, e, atomic_load(&rec_s.ring_waits));
	p = rec_cat(p, e, " wait_rounds=");
	p = rec_utoa(p, e, atomic_load(&rec_s.wait_rounds));
	p = rec_cat(p, e, " lent=");
	p = rec_utoa(p, e, atomic_load(&rec_s.lent_calls));
	p = rec_cat(p, e, " lost=");
	p = rec_utoa(p, e, atomic_load(&rec_s.rf->lost));
	p = rec_cat(p, e, " stacks_unknown=");
	p = rec_utoa(p, e, atomic_load(&rec_s.stacks_unknown));
	p = rec_cat(p, e, " nodes=");
	p = rec_utoa(p, e, atomic_load(&rec_s.rf->nodes_next) - 1);
	p = rec_cat(p, e, " sample_overflows=");
	p = rec_utoa(p, e, rec_sample_overflows());
	p = rec_cat(p, e, " helper_segments=");
	p = rec_utoa(p, e, rec_enc_jobs());
	p = rec_cat(p, e, " tables_mapped=");
	p = rec_utoa(p, e, rec_stack_tables_mapped());
	p = rec_cat(p, e, " writer_cpu_us=");
	p = rec_utoa(p, e, rec_thread_cpu_ns() / 1000u);
	uint64_t counters_ns, allocator_ns;
	rec_counters_spent(&counters_ns, &allocator_ns);
	p = rec_cat(p, e, " counters_cpu_us=");
	p = rec_utoa(p, e, counters_ns / 1000u);
	p = rec_cat(p, e, " allocator_stats_us=");
	p = rec_utoa(p, e, allocator_ns / 1000u);
	if (rec_check_stacks) {
		p = rec_cat(p, e, " stack_checks=");
		p = rec_utoa(p, e, atomic_load(&rec_s.stack_checks));
		p = rec_cat(p, e, " memo_hits=");
		p = rec_utoa(p, e, atomic_load(&rec_s.memo_hits));
		p = rec_cat(p, e, " plain_hashes=");
		p = rec_utoa(p, e, atomic_load(&rec_s.plain_hashes));
		if (rec_shadow_on) {
			p = rec_cat(p, e, " shadow_hits=");
			p = rec_utoa(p, e, atomic_load(&rec_s.shadow_hits));
			p = rec_cat(p, e, " shadow_quiet=");
			rec_utoa(p, e, atomic_load(&rec_s.shadow_quiet));
		}
	}
	rec_writer_mark(rec_now(), label);
}

/* Before every write: is the trace's descriptor still ours, and the trace
 * still in a directory? 1 if writing may go on; 0 once it may not (said,
 * and the writer then drains without writing).
 *
 * Checked at the start of each round (so a removal is said even when there
 * is nothing to write) and again just before each write, after the events
 * were copied out of their ring: whatever goes into the trace was then
 * published before the check saw the trace still linked, i.e. before the
 * removal. A check once per round is not enough: a round can last long (a
 * busy or descheduled writer draining big rings one after the other), and
 * the rings it reaches late may hold events published after the removal,
 * by threads started since (in a ring another thread released); the next
 * round, seeing the removal, then drops older events still queued in the
 * rings it had drained early (a thread that ended before the removal).
 * The trace would hold a new thread's allocation of an address whose
 * earlier free it lacks (glibc hands an exited thread's arena to the next
 * thread), which no reader can pair. The same check keeps a round from
 * writing into a descriptor the program closed or replaced meanwhile. */
static int check_fd(void)
{
	if (failed)
		return 0;
	long links = rec_fd_links(rec_s.trace_fd, rec_s.trace_dev, rec_s.trace_ino);
	if (links < 0) {
		fail_writing();
		rec_say_trouble("the program closed or replaced the descriptor of ",
				rec_s.trace_path, "; recording stopped");
	} else if (links == 0) {
		/* removed (its directory too, maybe): writing on would only
		 * take disk space nobody can see until the program exits */
		fail_writing();
		rec_say_trouble("", rec_s.trace_path, " was removed; recording stopped");
	}
	return !failed;
}

int rec_writer_sync(void)
{
	check_fd();
	round_all(SYNC);
	flush_meta();
	/* rec_flush: the counters as they are now, read after this thread's
	 * own writing touched its buffers, so they hold what the program
	 * sees once the flush returns */
	rec_counters_tick(1);
	flush_meta();
	return failed ? -1 : 0;
}

int rec_writer_failed(void)
{
	return failed;
}

uint64_t rec_writer_moved(uint32_t i)
{
	return atomic_load_explicit(&announced[i].moved, memory_order_relaxed);
}

/* A keyframe, between rounds (FORMAT.md "Bounded traces"). Its cut is a
 * time, key_cut, read before any ring's head: the KEY round drains every
 * ring up to its first event stamped after key_cut (or its head), so the
 * keymap holds exactly the events stamped up to key_cut that were
 * published before their ring's head was read, and the cuts are where
 * each ring stopped. A cut made of heads alone would not be one instant:
 * between the reads of two rings' heads the program may allocate a block
 * in the first after its read, free it, and get its address again in the
 * second before its read; the keyframe would then hold the second
 * allocation while the first replays after the cut, unfreed. By time,
 * every event of an address older than one the keymap holds was
 * published before it and is in the keymap too. The frees then in the
 * keymap are forgotten: every older event of their address is in it, and
 * a keyframe holds only allocations. */
static void keyframe_step(void)
{
	if (!key_due())
		return;
	key_written = tf_writer_written(w);
	key_cut = rec_now();
	round_all(KEY);
	rec_keymap_forget_frees(key_cut);
	uint64_t before = tf_writer_written(w);
	rec_keyframe_write(nodes_emitted, modules_emitted);
	flush_meta();
	if (!key_warned && tf_writer_written(w) - before > rec_s.max_size / KEYFRAME_EVERY) {
		key_warned = 1;
		rec_say("bounded recording: the live set takes more than a quarter of REC_MAX_SIZE",
			"", "; a larger REC_MAX_SIZE keeps a replayable window");
	}
}

static void *writer_main(void *arg)
{
	(void)arg;
	if (late_us)    /* before its first touch of our TLS */
		rec_sleep_us(late_us);
	rec_guard = 1;
	rec_thread_started(&rec_s.writer_tid);
	prctl(PR_SET_NAME, "heapreel-writer");
	long period = ROUND_MIN_NS;
	for (round_no = 1;; round_no++) {
		uint32_t k = atomic_load_explicit(&kick, memory_order_acquire);
		if (atomic_load(&stopping) || (detach_fd >= 0 && !detach_rounds--))
			break;
		/* before this round reads `waiters` (ring.c's wait_room reads
		 * `round` before it adds itself) */
		atomic_store(&rec_s.round, round_no);
		check_fd();
		uint64_t wrote = round_all(NORMAL);
		if (rec_s.max_size)
			keyframe_step();
		rec_stopset_round();
		rec_custom_round();
		rec_ctl_round();
		uint64_t sample_in = rec_counters_tick(0);
		period = wrote ? ROUND_MIN_NS : period * 2 > ROUND_MAX_NS ? ROUND_MAX_NS : period * 2;
		if (mark_dirty || (meta_dirty && round_no % META_FLUSH_ROUNDS == 0))
			flush_meta();
		struct timespec ts = { 0, sample_in < (uint64_t)period ? (long)sample_in : period };
		rec_futex_wait(&kick, k, &ts);
	}
	if (detach_fd >= 0)   /* hooks still running record nothing more */
		atomic_store(&rec_s.state, REC_CLOSED);
	check_fd();
	round_all(FINAL);
	rec_counters_tick(1);
	if (keep_rings) {  /* the other threads' later events stay in their rings */
		atomic_store_explicit(&rec_s.undrained, 1, memory_order_release);
		rec_ring_progress();
	}
	rec_enc_stop();
	rec_stopset_end();
	rec_ctl_drain_marks();
	rec_ctl_close();
	stats();
	struct tf_error err;
	if (check_fd())
		check(tf_writer_close(w, rec_now(), &err), &err);
	else
		tf_writer_abandon(w);
	w = NULL;
	rec_ring_progress();  /* the trace is closed: nobody waits for this thread */
	if (detach_fd >= 0)
		detached();
	return NULL;
}

int rec_writer_start(struct tf_writer *tw)
{
	struct tf_ring_file *rf = rec_s.rf;
	size_t abytes = (size_t)rf->max_rings * sizeof *announced;
	if (scratch)
		munmap(scratch, SCRATCH_BYTES);
	if (announced)
		munmap(announced, abytes);
	scratch = rec_map_private(SCRATCH_BYTES, 0);   /* events are copied in before read */
	announced = rec_map_private(abytes, 1);
	if (!scratch || !announced)
		return -1;  /* the next start unmaps whichever was mapped */
	if (rec_s.max_size && rec_keyframe_init() < 0) {
		rec_say("bounded recording: no memory for the live set", "", "; not recording");
		return -1;
	}
	rec_stopset_start();
	rec_counters_start();
	const char *gap = getenv("REC_TEST_KEYFRAME_GAP");
	key_gap = gap ? strtoull(gap, NULL, 10) : 0;
	hold_first = getenv("REC_TEST_HOLD_FIRST_DRAIN") != NULL;
	late_us = rec_test_delay_us("REC_TEST_WRITER_LATE_US");
	w = tw;
	failed = 0;
	memset(lack_t, 0, sizeof lack_t);
	memset(span_mark, 0, sizeof span_mark);
	keep_rings = 0;
	meta_dirty = 0;
	key_written = 0;
	key_warned = 0;
	nodes_emitted = 1;
	modules_emitted = 0;
	objects_looked = 0;
	unrouted_open = 0;
	lost_emitted = 0;
	atomic_store(&stopping, 0);
	waiting_state = NONE_WAITS;
	/* The module map goes to disk before any event can: a process killed
	 * before the first round still has a trace that symbolizes. */
	emit_modules();
	rec_ctl_pool_names();   /* a forked child's, made by its parent */
	if (!rec_s.max_size)
		rec_enc_start();  /* without it, chunks are encoded one by one */

	if (rec_thread_start(&thread, writer_main, NULL, &rec_s.writer_tid) == 0)
		return 0;
	rec_enc_stop();
	return -1;
}

void rec_writer_abandon(void)
{
	if (w)
		tf_writer_abandon(w);
	w = NULL;
	atomic_store(&rec_s.writer_tid, 0);   /* a forked child has no such thread */
	rec_enc_abandon();
}

void rec_writer_stop(int keep)
{
	keep_rings = keep;
	atomic_store(&stopping, 1);
	rec_writer_kick();
	pthread_join(thread, NULL);
}
