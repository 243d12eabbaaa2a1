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
 * A ring starts small (REC_RING_FIRST_EVENTS, rec_internal.h says why)
 * and grows once its thread fills it: the thread waits until the writer
 * has drained it empty, reserves its full area of the file and publishes
 * that area and the new capacity in the ring header before the next
 * event, which the writer reads after the head that covers it. Empty, not
 * just some room: so while any thread waits the writer's rounds drain
 * every ring, even one holding less than they leave for later (a chunk
 * in flight when the thread found its ring full leaves such a rest);
 * otherwise the thread would starve for DRAIN_AGE_ROUNDS (writer.c).
 *
 * A thread that gets no disk space for a ring records nothing for the rest
 * of the session; its events are counted as lost.
 *
 * When a ring is full the thread waits for the writer (lossless): it counts
 * one wait, wakes the writer and sleeps in short steps until there is room
 * or the trace is closing (then the event is counted as lost instead). The
 * most writer rounds one wait spanned goes to the stats (wait_rounds).
 * When the ring crosses half full the writer is woken early (one futex
 * syscall per crossing, not per event). Once the writer drains no more
 * (rec_s.undrained: its writes failed, or the process is exiting with
 * threads running) nobody waits: what the rings hold stays there for the
 * importer, and an event that finds its ring full is counted lost in that
 * ring's header, which keeps the count with its thread.
 *
 * At thread exit a pthread key destructor marks the ring CLOSED and wakes
 * the writer, which drains it, and releases it for another thread once the
 * thread is gone (the kernel says so). What the thread does after its
 * destructor (other keys' destructors, glibc's own exit work) still goes
 * to its ring: an exiting thread never waits for the writer, so a
 * thousand threads can end at once.
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
 * as long as the writer takes. A waiting thread sleeps on the writer's
 * progress count (a futex) and the writer wakes it when a tail moved or a
 * ring was released: nobody polls.
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
#define WAIT_MAX_NS 20000000L           /* a wait's longest sleep: a safety net, the
                                           writer's wake-up ends it first */

struct rec_thread {
	struct tf_ring *ring;           /* its own ring, or NULL */
	struct tf_event *slot;
	uint32_t mask;                  /* its ring's capacity - 1 */
	uint32_t index;                 /* its ring's */
	uint32_t gen;                   /* session the fields here belong to */
	int done;                       /* exiting, or no disk space for a ring: record nothing more */
	/* Lost a call for want of room in its ring: every later call is lost
	 * too, so the trace holds a prefix of the thread's calls. Else a
	 * realloc (two events) lost with one slot left, then a free of its
	 * new block that fits, would show as an unmatched free. */
	int shut;
	/* without a ring of its own: */
	uint32_t tid;
	uint32_t stream;                /* 0: none yet */
	uint64_t seq;                   /* index of its stream's next event */
	int32_t lent;                   /* ring of its previous call, or -1 */
	uint32_t lent_release;          /* that ring's release count when lent */
};

static REC_TLS struct rec_thread me;
enum { RES_NONE, RES_FIRST, RES_WHOLE };   /* how much of a ring's file range is fallocated */
static _Atomic uint8_t claimed[RING_MAX];
static _Atomic uint8_t reserved[RING_MAX];
static _Atomic uint32_t grown;              /* rings reserved whole */
static _Atomic uint32_t released[REC_RINGS_LENT]; /* per lent ring: times released */
static _Atomic uint32_t next_stream;
static pthread_key_t exit_key;

static void thread_exit(void *arg)
{
	(void)arg;
	struct tf_ring *r = me.ring;
	if (!r || me.gen != atomic_load(&rec_s.gen) || !rec_on()) {
		me.ring = NULL;
		me.done = 1;
		return;
	}
	prctl(PR_GET_NAME, r->name);
	atomic_store_explicit(&r->state, TF_RING_CLOSED, memory_order_release);
	rec_writer_kick();  /* its tail goes out now, not when a later round finds it */
}

int rec_ring_init(void)
{
	static int keyed;
	return rec_thread_key(&exit_key, &keyed, thread_exit);
}

void rec_ring_reset(void)
{
	for (unsigned i = 0; i < RING_MAX; i++) {
		atomic_store(&claimed[i], 0);
		atomic_store(&reserved[i], RES_NONE);
	}
	atomic_store(&reserved[0], RES_WHOLE);   /* the session's start did it */
	atomic_store(&grown, 1);
	atomic_store(&next_stream, 1);
}

void rec_lose(struct tf_ring *own, const struct tf_event *ev, unsigned n)
{
	struct tf_ring_file *rf = rec_s.rf;
	if (own && rec_undrained())
		atomic_fetch_add_explicit(&own->lost, n, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&rf->lost, n, memory_order_relaxed);
	uint64_t t = ev->t + 1, seen = atomic_load_explicit(&rf->t_lost, memory_order_relaxed);
	while ((!seen || t < seen) &&
	       !atomic_compare_exchange_weak_explicit(&rf->t_lost, &seen, t, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

void rec_ring_progress(void)
{
	atomic_fetch_add(&rec_s.progress, 1);
	if (atomic_load(&rec_s.waiters))
		rec_futex_wake(&rec_s.progress, INT32_MAX);
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
		if (atomic_load(&reserved[i]) == RES_NONE) {
			if (!rec_session_reserve_ring(i, 0)) {
				atomic_store(&claimed[i], 0);
				return -2;
			}
			atomic_store(&reserved[i], RES_FIRST);
		}
		return (int)i;
	}
	return -1;
}

/* Rings made ready beyond the last claimed: as many as are claimed, from
 * PREPARE_MIN to PREPARE_MAX. Making one costs the writer its 64 KiB of
 * the file, reserved and faulted in: 32 of them were 2 MiB and half the
 * CPU the recorder added to `python3 -c pass`, where one ring is all it
 * takes; a program that starts threads gets more ahead as it claims
 * them. */
#define PREPARE_MIN 2
#define PREPARE_MAX 32

void rec_ring_prepare(void)
{
	uint32_t used = atomic_load_explicit(&rec_s.rf->rings_used, memory_order_relaxed);
	uint32_t ahead = used < PREPARE_MIN ? PREPARE_MIN : used < PREPARE_MAX ? used : PREPARE_MAX;
	uint32_t upto = used + ahead < REC_RINGS_KEPT ? used + ahead : REC_RINGS_KEPT;
	for (uint32_t i = used; i < upto; i++) {
		uint8_t none = RES_NONE;
		if (atomic_load(&reserved[i]) != RES_NONE || !rec_session_prepare_ring(i))
			break;
		/* the pages in place: the claiming thread's first stores take no fault */
		madvise(rec_session_events(rec_session_area(i, 0)),
			(size_t)REC_RING_FIRST_EVENTS * sizeof(struct tf_event), MADV_POPULATE_WRITE);
		atomic_compare_exchange_strong(&reserved[i], &none, RES_FIRST);
	}
}

/* Ring i, claimed, carries `stream` from index seq on: header filled, LIVE. */
static struct tf_ring *open_ring(uint32_t i, uint32_t tid, uint32_t stream, uint64_t seq)
{
	struct tf_ring_file *rf = rec_s.rf;
	struct tf_ring *r = rec_session_ring(i);
	int big = atomic_load(&reserved[i]) == RES_WHOLE;
	r->tid = tid;
	r->stream = stream;
	atomic_store_explicit(&r->events, big ? rf->ring_events : REC_RING_FIRST_EVENTS,
			      memory_order_relaxed);
	atomic_store_explicit(&r->events_at, rec_session_area(i, big), memory_order_relaxed);
	memset(r->name, 0, sizeof r->name);
	atomic_store_explicit(&r->head, seq, memory_order_relaxed);
	atomic_store_explicit(&r->tail, seq, memory_order_relaxed);
	atomic_store_explicit(&r->lost, 0, memory_order_relaxed);
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
	me.slot = rec_ring_events(r);
	me.mask = atomic_load_explicit(&r->events, memory_order_relaxed) - 1;
	me.index = (uint32_t)i;
	/* no-op for the main thread, which never runs key destructors */
	rec_thread_set(exit_key, (void *)1);
	return 0;
}

/* Waiting for the writer, with signals blocked (see the top) from the
 * first step until wait_end. A wait loop calls wait_look before each look
 * at what it waits for, then wait_step: a move of the writer's between
 * the look and the sleep makes the sleep return at once. */
struct waiting {
	int on;
	uint32_t seen;
	sigset_t old;
};

static void wait_look(struct waiting *w)
{
	w->seen = atomic_load(&rec_s.progress);
}

static void wait_step(struct waiting *w)
{
	if (!w->on) {
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &w->old);
		atomic_fetch_add(&rec_s.waiters, 1);
		w->on = 1;
	}
	struct timespec most = { 0, WAIT_MAX_NS };
	rec_writer_kick();
	rec_futex_wait(&rec_s.progress, w->seen, &most);
}

static void wait_end(const struct waiting *w)
{
	if (!w->on)
		return;
	atomic_fetch_sub(&rec_s.waiters, 1);
	pthread_sigmask(SIG_SETMASK, &w->old, NULL);
}

/* A lent ring for this call, once the previous one is drained: its index,
 * or -1 (the trace is closing, or no room: the events are lost). */
static int borrow(void)
{
	struct waiting wt = { 0 };
	int i = -1;
	for (;;) {
		wait_look(&wt);
		if (me.lent < 0 ||
		    atomic_load_explicit(&released[me.lent - REC_RINGS_KEPT],
					 memory_order_acquire) != me.lent_release) {
			me.lent = -1;
			i = take(REC_RINGS_KEPT, REC_RINGS_KEPT + REC_RINGS_LENT);
			if (i != -1)
				break;
		}
		if (!rec_on() || rec_undrained())
			break;
		wait_step(&wt);
	}
	wait_end(&wt);
	return i < 0 ? -1 : i;
}

/* No ring of its own: the events go through a lent ring (see the top). */
static void lend(const struct tf_event *ev, unsigned n)
{
	if (!me.stream) {
		me.tid = (uint32_t)gettid();
		me.stream = atomic_fetch_add(&next_stream, 1);
	}
	int i = borrow();
	if (i < 0) {
		rec_lose(NULL, ev, n);
		return;
	}
	atomic_fetch_add_explicit(&rec_s.lent_calls, 1, memory_order_relaxed);
	struct tf_ring *r = open_ring((uint32_t)i, me.tid, me.stream, me.seq);
	struct tf_event *slot = rec_ring_events(r);
	uint32_t mask = atomic_load_explicit(&r->events, memory_order_relaxed) - 1;
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

/* A wait for room that began in writer round `from` ended: the rounds it
 * spanned, to the one that last moved the ring's tail, into the stats. */
static void note_wait_rounds(uint64_t from)
{
	uint64_t moved = rec_writer_moved(me.index);
	uint64_t n = moved > from ? moved - from : 0;
	uint64_t most = atomic_load_explicit(&rec_s.wait_rounds, memory_order_relaxed);
	while (n > most &&
	       !atomic_compare_exchange_weak_explicit(&rec_s.wait_rounds, &most, n,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* The ring has no room for n more events (n = its capacity: until it is
 * empty): wait for the writer. Returns 0 if the trace is closing or the
 * writer drains no more, and the events must be dropped. */
static int wait_room(struct tf_ring *r, uint64_t head, unsigned n)
{
	struct waiting wt = { 0 };
	int room = 1;
	/* before wait_step adds this thread to `waiters` (writer.c) */
	uint64_t from = atomic_load(&rec_s.round);
	for (;;) {
		wait_look(&wt);
		if (head + n - atomic_load_explicit(&r->tail, memory_order_acquire) <= me.mask + 1)
			break;
		if (!rec_on() || rec_undrained()) {
			room = 0;
			break;
		}
		wait_step(&wt);
	}
	wait_end(&wt);
	if (wt.on && room)
		note_wait_rounds(from);
	return room;
}

/* The thread filled its ring at its first capacity: once the writer has
 * drained it, it takes the file's ring_events, if its whole file range is
 * (or can be) reserved within REC_RINGS_GROWN rings. 1 if it grew. */
static int grow(struct tf_ring *r, uint64_t head)
{
	uint32_t i = me.index;
	if (atomic_load(&reserved[i]) != RES_WHOLE) {
		uint32_t g = atomic_load(&grown);
		do {
			if (g >= REC_RINGS_GROWN)
				return 0;
		} while (!atomic_compare_exchange_weak(&grown, &g, g + 1));
		if (!rec_session_reserve_ring(i, 1)) {
			atomic_fetch_sub(&grown, 1);
			return 0;
		}
		atomic_store(&reserved[i], RES_WHOLE);
	}
	if (!wait_room(r, head, me.mask + 1))
		return 0;
	/* empty: the writer reads the area and capacity after a head that
	 * covers an event, and every event from here on is published after
	 * these stores */
	uint64_t area = rec_session_area(i, 1);
	atomic_store_explicit(&r->events_at, area, memory_order_relaxed);
	atomic_store_explicit(&r->events, rec_s.rf->ring_events, memory_order_relaxed);
	me.slot = rec_session_events(area);
	me.mask = rec_s.rf->ring_events - 1;
	return 1;
}

static inline void put(const struct tf_event *ev, unsigned n)
{
	uint32_t gen = atomic_load_explicit(&rec_s.gen, memory_order_relaxed);
	if (REC_UNLIKELY(me.gen != gen)) /* first event, or a new session */
		me = (struct rec_thread){ .gen = gen, .lent = -1 };
	if (REC_UNLIKELY(!me.ring)) {
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
			rec_lose(NULL, ev, n);
			return;
		}
	}
	struct tf_ring *r = me.ring;
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint64_t cap = (uint64_t)me.mask + 1;
	if (REC_UNLIKELY((head + n - tail > cap) | me.shut)) {
		if (me.shut) {
			rec_lose(r, ev, n);
			return;
		}
		if (!(cap < rec_s.rf->ring_events && grow(r, head))) {
			atomic_fetch_add_explicit(&rec_s.ring_waits, 1, memory_order_relaxed);
			if (!wait_room(r, head, n)) {
				me.shut = 1;
				rec_lose(r, ev, n);
				return;
			}
		}
		cap = (uint64_t)me.mask + 1;
		tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	}
	for (unsigned i = 0; i < n; i++)
		me.slot[(head + i) & me.mask] = ev[i];
	atomic_store_explicit(&r->head, head + n, memory_order_release);
	uint64_t used = head + n - tail;
	if (REC_UNLIKELY(used >= cap / 2 && used - n < cap / 2))
		rec_writer_kick();
}

void rec_ring_put(const struct tf_event *ev, unsigned n)
{
	put(ev, n);
	/* after the head's store, the word's load: the writer's membarrier
	 * orders them (stopset.c says why) */
	atomic_signal_fence(memory_order_seq_cst);
	if (REC_UNLIKELY(rec_ctl_now() & REC_M_SETBUILD))
		rec_stopset_published(ev, n);
}
