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
 * When a ring is full the thread waits for the writer (lossless): it counts
 * one wait, wakes the writer and sleeps in short steps until there is room
 * or the trace is closing (then the event is counted as lost instead), with
 * signals blocked meanwhile.
 * When the ring crosses half full the writer is woken early (one futex
 * syscall per crossing, not per event).
 *
 * At thread exit a pthread key destructor marks the ring CLOSED; the writer
 * drains it and releases it for another thread. The destructor re-arms once,
 * so frees done by other keys' destructors in the same round are recorded.
 *
 * Must never: allocate, lock, or block except while its ring is full.
 */
#include "rec_internal.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define RING_MAX 4096                   /* upper bound of tf_ring_file.max_rings */
#define FULL_WAIT_NS 50000              /* sleep step while a ring is full */

struct rec_thread {
	struct tf_ring *ring;
	struct tf_event *slot;
	uint32_t mask;
	uint32_t index;
	uint32_t gen;                   /* session the fields above belong to */
	int done;                       /* thread is exiting: record nothing more */
};

static REC_TLS struct rec_thread me;
static _Atomic uint8_t claimed[RING_MAX];
static _Atomic uint8_t reserved[RING_MAX];  /* file range fallocated */
static _Atomic uint32_t next_stream;
static pthread_key_t exit_key;
static _Atomic int said_no_ring;

static void thread_exit(void *arg)
{
	if (arg == (void *)1) {
		pthread_setspecific(exit_key, (void *)2);
		return;
	}
	struct tf_ring *r = me.ring;
	if (r && me.gen == atomic_load(&rec_s.gen) && rec_on()) {
		prctl(PR_GET_NAME, r->name);
		atomic_store_explicit(&r->state, TF_RING_CLOSED, memory_order_release);
	}
	me.ring = NULL;
	me.done = 1;
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
	atomic_store(&said_no_ring, 0);
}

void rec_ring_release(uint32_t i)
{
	atomic_store_explicit(&claimed[i], 0, memory_order_release);
}

static int claim(void)
{
	struct tf_ring_file *rf = rec_s.rf;
	uint32_t n = rf->max_rings < RING_MAX ? rf->max_rings : RING_MAX;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t zero = 0;
		if (atomic_load_explicit(&claimed[i], memory_order_relaxed) ||
		    !atomic_compare_exchange_strong_explicit(&claimed[i], &zero, 1,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		if (!atomic_load(&reserved[i])) {
			if (!rec_session_reserve_ring(i)) {
				atomic_store(&claimed[i], 0);
				return -1;
			}
			atomic_store(&reserved[i], 1);
		}
		struct tf_ring *r = rec_session_ring(i);
		r->tid = (uint32_t)gettid();
		r->stream = atomic_fetch_add(&next_stream, 1);
		memset(r->name, 0, sizeof r->name);
		atomic_store_explicit(&r->head, 0, memory_order_relaxed);
		atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
		atomic_store_explicit(&r->state, TF_RING_LIVE, memory_order_release);
		uint32_t used = atomic_load(&rf->rings_used);
		while (used < i + 1 && !atomic_compare_exchange_weak(&rf->rings_used, &used, i + 1))
			;
		me.ring = r;
		me.slot = (struct tf_event *)(r + 1);
		me.mask = rf->ring_events - 1;
		me.index = i;
		/* no-op for the main thread, which never runs key destructors; may
		 * allocate (keys past the first 32), which is libc's, not the program's */
		int g = rec_guard;
		rec_guard = 1;
		pthread_setspecific(exit_key, (void *)1);
		rec_guard = g;
		return 0;
	}
	if (!atomic_exchange(&said_no_ring, 1))
		rec_say("no staging ring left in ", rec_s.ring_path,
			" (all in use, or the disk is full); events of further threads are counted as lost");
	return -1;
}

/* The ring has no room for n more events: wait for the writer. Returns 0 if
 * the trace is closing and the events must be dropped. */
static int wait_room(struct tf_ring *r, uint64_t head, unsigned n)
{
	atomic_fetch_add_explicit(&rec_s.ring_waits, 1, memory_order_relaxed);
	/* Signals wait too: a handler's allocations would queue behind this
	 * hook (nested.c) for as long as the writer takes. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	struct timespec step = { 0, FULL_WAIT_NS };
	int room = 1;
	while (head + n - atomic_load_explicit(&r->tail, memory_order_acquire) > me.mask + 1) {
		if (!rec_on()) {
			room = 0;
			break;
		}
		rec_writer_kick();
		nanosleep(&step, NULL);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return room;
}

void rec_ring_put(const struct tf_event *ev, unsigned n)
{
	uint32_t gen = atomic_load_explicit(&rec_s.gen, memory_order_relaxed);
	if (REC_UNLIKELY(me.gen != gen)) { /* first event, or a new session */
		me.ring = NULL;
		me.done = 0;
		me.gen = gen;
	}
	if (REC_UNLIKELY(!me.ring) && (me.done || claim() < 0)) {
		atomic_fetch_add_explicit(&rec_s.lost, n, memory_order_relaxed);
		return;
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
