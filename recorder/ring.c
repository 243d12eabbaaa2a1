/*
 * ring.c - the per-thread staging rings in <trace>.ring.
 *
 * A thread claims a free ring on its first event (one CAS on an in-memory
 * claim flag, then the ring header is filled and its state set LIVE with a
 * release store) and gets a fresh stream id. It writes events to slot
 * head & (ring_events - 1) and publishes them by storing head + n with
 * release: a realloc's two events are published by one store, so the writer
 * never sees half a pair. No lock, no syscall on this path.
 *
 * A thread that gets no disk space for a ring records nothing for the rest
 * of the session; its events are counted as lost.
 *
 * When a ring is full the thread waits for the writer (lossless): it counts
 * one wait, wakes the writer and sleeps in short steps until there is room
 * or the trace is closing (then the event is counted as lost instead).
 * When the ring crosses half full the writer is woken early (one futex
 * syscall per crossing, not per event).
 *
 * At thread exit a pthread key destructor marks the ring CLOSED; the writer
 * drains it and releases it for another thread. The destructor re-arms once,
 * so frees done by other keys' destructors in the same round are recorded.
 * What the thread frees after that (glibc's own exit work) continues its
 * stream on lent rings (below), once the writer has drained its own.
 *
 * More threads than REC_RINGS_KEPT at once: a thread that finds none free
 * borrows one of the REC_RINGS_LENT rings for each call instead. It writes
 * the call's events under its own stream (one id and index count for the
 * thread's life, kept here), marks the ring CLOSED so the writer drains and
 * releases it, and before its next borrow waits until the writer has done
 * so: a stream's events reach the trace in order, which recovery after a
 * kill relies on. Nothing is lost and no thread holds a lent ring between
 * calls (it may block for ever in between), but each such call costs a
 * writer round trip. A thread tries for a ring of its own again on each
 * call.
 *
 * Every wait for the writer blocks signals meanwhile: a handler's
 * allocations would otherwise queue behind the waiting hook (nested.c) for
 * as long as the writer takes.
 *
 * Must never: allocate, lock, or block except while waiting for the writer.
 */
#include "rec_internal.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define RING_MAX 4096                   /* upper bound of tf_ring_file.max_rings */
#define WAIT_NS 50000                   /* sleep step while waiting for the writer */

struct rec_thread {
	struct tf_ring *ring;           /* its own ring, or NULL */
	struct tf_event *slot;
	uint32_t mask;
	uint32_t gen;                   /* session the fields here belong to */
	int done;                       /* exiting, or no disk space for a ring: record nothing more */
	/* without a ring of its own: */
	uint32_t tid;
	uint32_t stream;                /* 0: none yet */
	uint64_t seq;                   /* index of its stream's next event */
	int32_t lent;                   /* ring of its previous call, or -1 */
	uint32_t lent_release;          /* that ring's release count when lent */
	struct tf_ring *retired;        /* past its exit: its own ring, until drained */
	int exited;                     /* past its exit: lent rings only */
};

static REC_TLS struct rec_thread me;
static _Atomic uint8_t claimed[RING_MAX];
static _Atomic uint8_t reserved[RING_MAX];  /* file range fallocated */
static _Atomic uint32_t released[REC_RINGS_LENT]; /* per lent ring: times released */
static _Atomic uint32_t next_stream;
static pthread_key_t exit_key;

static void thread_exit(void *arg)
{
	if (arg == (void *)1) {
		pthread_setspecific(exit_key, (void *)2);
		return;
	}
	struct tf_ring *r = me.ring;
	me.ring = NULL;
	if (!r || me.gen != atomic_load(&rec_s.gen) || !rec_on()) {
		me.done = 1;
		return;
	}
	prctl(PR_GET_NAME, r->name);
	me.tid = r->tid;
	me.stream = r->stream;
	me.seq = atomic_load_explicit(&r->head, memory_order_relaxed);
	me.retired = r;
	me.exited = 1;
	atomic_store_explicit(&r->state, TF_RING_CLOSED, memory_order_release);
}

int rec_ring_init(void)
{
	return pthread_key_create(&exit_key, thread_exit) == 0 ? 0 : -1;
}

void rec_ring_reset(void)
{
	for (unsigned i = 0; i < RING_MAX; i++) {
		atomic_store(&claimed[i], 0);
		atomic_store(&reserved[i], 0);
	}
	atomic_store(&next_stream, 1);
}

void rec_ring_release(uint32_t i)
{
	if (i >= REC_RINGS_KEPT)
		atomic_fetch_add_explicit(&released[i - REC_RINGS_KEPT], 1, memory_order_release);
	atomic_store_explicit(&claimed[i], 0, memory_order_release);
}

/* A free ring among [from, to), claimed: its index, -1 if none is free, -2
 * if the file has no room for it (disk full, descriptor gone). */
static int take(uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++) {
		uint8_t zero = 0;
		if (atomic_load_explicit(&claimed[i], memory_order_relaxed) ||
		    !atomic_compare_exchange_strong_explicit(&claimed[i], &zero, 1,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		if (!atomic_load(&reserved[i])) {
			if (!rec_session_reserve_ring(i)) {
				atomic_store(&claimed[i], 0);
				return -2;
			}
			atomic_store(&reserved[i], 1);
		}
		return (int)i;
	}
	return -1;
}

/* Ring i, claimed, carries `stream` from index seq on: header filled, LIVE. */
static struct tf_ring *open_ring(uint32_t i, uint32_t tid, uint32_t stream, uint64_t seq)
{
	struct tf_ring_file *rf = rec_s.rf;
	struct tf_ring *r = rec_session_ring(i);
	r->tid = tid;
	r->stream = stream;
	memset(r->name, 0, sizeof r->name);
	atomic_store_explicit(&r->head, seq, memory_order_relaxed);
	atomic_store_explicit(&r->tail, seq, memory_order_relaxed);
	atomic_store_explicit(&r->state, TF_RING_LIVE, memory_order_release);
	uint32_t used = atomic_load(&rf->rings_used);
	while (used < i + 1 && !atomic_compare_exchange_weak(&rf->rings_used, &used, i + 1))
		;
	return r;
}

/* A ring of the thread's own: 0, or -1 (none free: borrow), or -2 (lost). */
static int claim(void)
{
	int i = take(0, REC_RINGS_KEPT);
	if (i < 0)
		return i;
	struct tf_ring *r = open_ring((uint32_t)i, (uint32_t)gettid(),
				      atomic_fetch_add(&next_stream, 1), 0);
	me.ring = r;
	me.slot = (struct tf_event *)(r + 1);
	me.mask = rec_s.rf->ring_events - 1;
	/* no-op for the main thread, which never runs key destructors; may
	 * allocate (keys past the first 32), which is libc's, not the program's */
	int g = rec_guard;
	rec_guard = 1;
	pthread_setspecific(exit_key, (void *)1);
	rec_guard = g;
	return 0;
}

/* Waiting for the writer, with signals blocked (see the top) from the
 * first step until wait_end. */
struct waiting {
	int on;
	sigset_t old;
};

static void wait_step(struct waiting *w)
{
	if (!w->on) {
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &w->old);
		w->on = 1;
	}
	struct timespec step = { 0, WAIT_NS };
	rec_writer_kick();
	nanosleep(&step, NULL);
}

static void wait_end(const struct waiting *w)
{
	if (w->on)
		pthread_sigmask(SIG_SETMASK, &w->old, NULL);
}

/* A lent ring for this call, once the previous one is drained: its index,
 * or -1 (the trace is closing, or no room: the events are lost). */
static int borrow(void)
{
	struct waiting wt = { 0 };
	int i = -1;
	for (;;) {
		if (me.lent < 0 ||
		    atomic_load_explicit(&released[me.lent - REC_RINGS_KEPT],
					 memory_order_acquire) != me.lent_release) {
			me.lent = -1;
			i = take(REC_RINGS_KEPT, REC_RINGS_KEPT + REC_RINGS_LENT);
			if (i != -1)
				break;
		}
		if (!rec_on())
			break;
		wait_step(&wt);
	}
	wait_end(&wt);
	return i < 0 ? -1 : i;
}

/* Past its exit: waits until the writer drained and released the thread's
 * own ring (it then holds another stream, or none), so that the stream's
 * events reach the trace in order. 0 if recording stopped meanwhile. */
static int retire(void)
{
	struct tf_ring *r = me.retired;
	struct waiting wt = { 0 };
	while (atomic_load_explicit(&r->state, memory_order_acquire) != TF_RING_FREE &&
	       r->stream == me.stream && rec_on())
		wait_step(&wt);
	wait_end(&wt);
	me.retired = NULL;
	return rec_on();
}

/* No ring of its own: the events go through a lent ring (see the top). */
static void lend(const struct tf_event *ev, unsigned n)
{
	if (me.retired && !retire()) {
		atomic_fetch_add_explicit(&rec_s.lost, n, memory_order_relaxed);
		return;
	}
	if (!me.stream) {
		me.tid = (uint32_t)gettid();
		me.stream = atomic_fetch_add(&next_stream, 1);
	}
	int i = borrow();
	if (i < 0) {
		atomic_fetch_add_explicit(&rec_s.lost, n, memory_order_relaxed);
		return;
	}
	struct tf_ring *r = open_ring((uint32_t)i, me.tid, me.stream, me.seq);
	struct tf_event *slot = (struct tf_event *)(r + 1);
	uint32_t mask = rec_s.rf->ring_events - 1;
	for (unsigned k = 0; k < n; k++)
		slot[(me.seq + k) & mask] = ev[k];
	me.seq += n;
	atomic_store_explicit(&r->head, me.seq, memory_order_release);
	me.lent = i;
	me.lent_release = atomic_load_explicit(&released[i - REC_RINGS_KEPT],
					       memory_order_relaxed);
	atomic_store_explicit(&r->state, TF_RING_CLOSED, memory_order_release);
	rec_writer_kick();
}

/* The ring has no room for n more events: wait for the writer. Returns 0 if
 * the trace is closing and the events must be dropped. */
static int wait_room(struct tf_ring *r, uint64_t head, unsigned n)
{
	atomic_fetch_add_explicit(&rec_s.ring_waits, 1, memory_order_relaxed);
	struct waiting wt = { 0 };
	int room = 1;
	while (head + n - atomic_load_explicit(&r->tail, memory_order_acquire) > me.mask + 1) {
		if (!rec_on()) {
			room = 0;
			break;
		}
		wait_step(&wt);
	}
	wait_end(&wt);
	return room;
}

void rec_ring_put(const struct tf_event *ev, unsigned n)
{
	uint32_t gen = atomic_load_explicit(&rec_s.gen, memory_order_relaxed);
	if (REC_UNLIKELY(me.gen != gen)) /* first event, or a new session */
		me = (struct rec_thread){ .gen = gen, .lent = -1 };
	if (REC_UNLIKELY(!me.ring)) {
		if (me.exited) {
			lend(ev, n);
			return;
		}
		int c = me.done ? -2 : claim();
		if (c == -1) {
			lend(ev, n);
			return;
		}
		if (c < 0) {
			/* no disk space for a ring: none later either, or the
			 * thread's frees of blocks it allocated unrecorded
			 * would show as unmatched */
			me.done = 1;
			atomic_fetch_add_explicit(&rec_s.lost, n, memory_order_relaxed);
			return;
		}
	}
	struct tf_ring *r = me.ring;
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint64_t cap = (uint64_t)me.mask + 1;
	if (REC_UNLIKELY(head + n - tail > cap)) {
		if (!wait_room(r, head, n)) {
			atomic_fetch_add_explicit(&rec_s.lost, n, memory_order_relaxed);
			return;
		}
		tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	}
	for (unsigned i = 0; i < n; i++)
		me.slot[(head + i) & me.mask] = ev[i];
	atomic_store_explicit(&r->head, head + n, memory_order_release);
	uint64_t used = head + n - tail;
	if (REC_UNLIKELY(used >= cap / 2 && used - n < cap / 2))
		rec_writer_kick();
}
