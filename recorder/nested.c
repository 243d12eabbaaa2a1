/*
 * nested.c - allocations made by a signal handler that interrupted one of
 * this thread's hooks.
 *
 * A hook records a call with rec_guard == REC_GUARD_HOOK, and its own code
 * allocates nothing, so an allocator call the same thread makes meanwhile
 * comes from a signal handler. It cannot be recorded the normal way (the
 * interrupted hook may be half way through writing its ring, walking its
 * stack with the thread's memo, or holding the trie or rule-cache lock), and
 * it must not be lost. So the handler's call stamps its events, walks its
 * stack the nested way (stack.c) and queues them here; the interrupted hook
 * puts them in its ring (interpose.c): those stamped before its own event
 * first, the rest as it leaves, so the ring stays in time order.
 *
 * The queue: QUEUE_SLOTS events in initial-exec TLS and two counters. A
 * producer reserves its slots with one atomic add (a deeper handler may
 * interrupt it) and only then stamps, so slot order is time order; it
 * fills each slot and publishes it by writing the slot's number last. Only
 * the interrupted hook drains, with the guard set, so a producer always
 * runs to its end before the consumer looks, never the other way round. A
 * slot reserved and left empty (a failed realloc, a full queue) is skipped.
 * A full queue counts the events as lost; it only has to hold what handlers
 * do during one hook call (ring.c blocks signals while a thread waits for
 * the writer), a handful.
 *
 * Must never: allocate, wait for anything this thread holds, or touch the
 * thread's ring.
 */
#include "rec_internal.h"

#define QUEUE_SLOTS 32                 /* a power of two */
#define NESTED_DEPTH 32                /* frames kept of a handler's stack */

REC_TLS _Atomic uint32_t rec_nested_head, rec_nested_tail;
static REC_TLS struct tf_event queue[QUEUE_SLOTS];
static REC_TLS _Atomic uint32_t filled[QUEUE_SLOTS]; /* number + 1 of the slot's event */

uint32_t rec_nested_reserve(unsigned n)
{
	return atomic_fetch_add_explicit(&rec_nested_head, n, memory_order_relaxed);
}

void rec_nested_fill(uint32_t at, const struct tf_event *ev, unsigned k)
{
	uint32_t tail = atomic_load_explicit(&rec_nested_tail, memory_order_relaxed);
	if (at + k - tail > QUEUE_SLOTS) {
		rec_lose(NULL, ev, k);
		return;
	}
	for (unsigned i = 0; i < k; i++) {
		uint32_t q = at + i;
		queue[q % QUEUE_SLOTS] = ev[i];
		atomic_signal_fence(memory_order_release);
		atomic_store_explicit(&filled[q % QUEUE_SLOTS], q + 1, memory_order_relaxed);
	}
}

uint32_t rec_nested_stack(void)
{
	void *buf[NESTED_DEPTH];
	unsigned max = rec_s.depth < NESTED_DEPTH ? rec_s.depth : NESTED_DEPTH;
	unsigned n = rec_stack_capture_nested(buf, max);
	return rec_stackid_nested(buf, n);
}

void rec_nested_drain(uint64_t upto)
{
	for (;;) {
		uint32_t q = atomic_load_explicit(&rec_nested_tail, memory_order_relaxed);
		if (q == atomic_load_explicit(&rec_nested_head, memory_order_relaxed))
			return;
		unsigned k = 1;
		if (atomic_load_explicit(&filled[q % QUEUE_SLOTS], memory_order_relaxed) == q + 1) {
			atomic_signal_fence(memory_order_acquire);
			struct tf_event ev[2] = { queue[q % QUEUE_SLOTS] };
			if (ev[0].t > upto)
				return;
			if (ev[0].kind == TF_EV_REALLOC_OLD) { /* filled together with its pair */
				ev[1] = queue[(q + 1) % QUEUE_SLOTS];
				k = 2;
			}
			rec_ring_put(ev, k);
		}
		atomic_store_explicit(&rec_nested_tail, q + k, memory_order_relaxed);
	}
}
