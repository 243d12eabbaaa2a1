/*
 * custom.c - rec.h's API for a program's own allocator: rec_alloc,
 * rec_realloc, rec_free and the pools (rec_pool_create, rec_pool_alloc,
 * rec_pool_free, rec_pool_destroy), recorded as blocks of kind custom
 * (FORMAT.md "Custom blocks").
 *
 * Each call is one or two ALLOC events of a custom fn, with the pool in the
 * event (0: rec_alloc's blocks, no pool), published to the calling thread's
 * ring as an allocation hook does: an allocation with the stack of the
 * rec_ function's caller, a free with none. The recorder keeps no table of
 * pools or blocks (but the set below): rec_pool_destroy is one event, which
 * trace-import expands into the frees of the pool's live blocks. A pool's name goes to
 * the writer through api.c's mark queue (a POOL record).
 *
 * Not recorded while sampling (unbiasing scales a stack's bytes by its
 * blocks' mean size: a pool's blocks are not drawn by the countdown) nor
 * in a bounded trace (the keymap keeps one block per address, and a pool's
 * block may share its address with the malloc'd block that holds it): the
 * calls still return 0 then, and the first one of a trace leaves a mark
 * (TF_MARK_CUSTOM_UNRECORDED) from which answers say they lack them.
 * Allocations are recorded only while recording is started; frees also
 * while stopped once something was recorded, so a block recorded before a
 * stop still ends, and, once the stop set is filled (stopset.c), only the
 * ends of recorded blocks: each block recorded goes into the sampled set
 * (sample.c) under a key of its own (key() below) before it is published,
 * and every end takes it out, so the set always holds exactly the live
 * recorded custom blocks (no race with the writer: the thread recording a
 * block inserts it, the program frees it only after). A pool destroyed is
 * marked; the writer takes its keys out (rec_custom_round), and while
 * stopped its destroy is written only if it recorded a block. The frees
 * not written are not counted (as the heap's are not).
 *
 * Must never: allocate, lock, use stdio, record from inside the recorder
 * (a call while this thread's hook runs is dropped), or put in the set a
 * key that could equal a heap block's address.
 */
#include "rec_internal.h"
#include "rec.h"

/* Highest address a custom block may have: the keyspace trace-import
 * pairs pool blocks in (an address below 2^48, the pool above it). */
#define ADDR_LIMIT ((uint64_t)1 << 48)
/* A recorded block's key in the sampled set (sample.c): its address below
 * KEY_ADDR_BITS, its pool above, and KEY_TAG, which no user-space address
 * has (the kernel's half), so a key never equals a heap block's address.
 * A block at KEY_ADDR_BITS or above has no key: its free is always written. */
#define KEY_ADDR_BITS 47
#define KEY_TAG ((uint64_t)1 << 63)
#define POOLS (REC_POOL_MAX + 1)
#define WORD_BITS 64

/* What may be recorded now: nothing, every free, the frees of recorded
 * blocks only (stopped, the set filled: stopset.c), everything; -1
 * without a trace. */
enum take { TAKE_NONE, TAKE_FREE, TAKE_PROBE, TAKE_ALL };

/* Pools with a recorded block, and pools destroyed since the writer last
 * took their keys out of the set (rec_custom_round). */
static _Atomic uint64_t pool_recorded[POOLS / WORD_BITS];
static _Atomic uint64_t pool_dead[POOLS / WORD_BITS];
static _Atomic int dead_any;

static int pool_has(_Atomic uint64_t *bits, rec_pool_t pool)
{
	return (atomic_load_explicit(&bits[pool / WORD_BITS], memory_order_relaxed) >>
		(pool % WORD_BITS)) & 1;
}

static void pool_set(_Atomic uint64_t *bits, rec_pool_t pool)
{
	if (!pool_has(bits, pool))
		atomic_fetch_or(&bits[pool / WORD_BITS], (uint64_t)1 << (pool % WORD_BITS));
}

static uint64_t key(rec_pool_t pool, const void *p)
{
	uintptr_t a = (uintptr_t)p;
	return a >> KEY_ADDR_BITS ? 0 : KEY_TAG | (uint64_t)pool << KEY_ADDR_BITS | a;
}

/* A call the trace cannot hold (sampled, bounded): the trace says so once. */
static void unrecorded(void)
{
	rec_ctl_lack(TF_LACK_CUSTOM, 1);
}

static int take(void)
{
	if (!rec_on())
		return -1;
	uint64_t w = rec_ctl_now();
	if (rec_guard)
		return TAKE_NONE;
	if ((w >> REC_M_PERIOD_SHIFT) || rec_s.max_size) {
		unrecorded();
		return TAKE_NONE;
	}
	if (w & REC_M_ALLOCS)
		return TAKE_ALL;
	/* stopped: frees only once blocks may have been recorded */
	return w & REC_M_FREES ? TAKE_FREE : w & REC_M_PROBE ? TAKE_PROBE : TAKE_NONE;
}

/* A recorded block into the set, before it is published: whoever frees it
 * finds it there. Without room, every free is written (sample.c). */
static void keep(rec_pool_t pool, const void *p)
{
	pool_set(pool_recorded, pool);
	uint64_t k = key(pool, p);
	if (!k)
		return;
	if (rec_sample_init() < 0)
		rec_ctl_overflow();
	else
		rec_sampled_add(k);
}

/* Is the end of the block at p in pool written? Its key leaves the set
 * whatever the answer (a free dropped inside the recorder included), so
 * that the set holds only live recorded blocks. */
static int ends(int t, rec_pool_t pool, const void *p)
{
	uint64_t k = key(pool, p);
	int was = k && atomic_load_explicit(&rec_sample_filter, memory_order_acquire) &&
		  rec_sampled_take(k);
	return t == TAKE_PROBE ? !k || was : t != TAKE_NONE;
}

static struct tf_event custom_event(unsigned fn, rec_pool_t pool, const void *p, size_t size)
{
	return (struct tf_event){ .t = rec_now(), .addr = (uintptr_t)p, .size = size,
				  .kind = TF_EV_ALLOC, .fn = (uint8_t)fn, .pool = (uint16_t)pool };
}

/* A block of size bytes at p in pool, fn its entry point. */
static int note_alloc(unsigned fn, rec_pool_t pool, const void *p, size_t size)
{
	int t = take();
	if (t < 0 || (uintptr_t)p >= ADDR_LIMIT)
		return -1;
	if (t == TAKE_ALL && p) {
		struct tf_event ev = custom_event(fn, pool, p, size);
		keep(pool, p);
		rec_hook_events(&ev, 1, 1);
	}
	return 0;
}

/* The end of the block at p in pool. */
static int note_end(rec_pool_t pool, const void *p)
{
	int t = take();
	if (t < 0 || (uintptr_t)p >= ADDR_LIMIT)
		return -1;
	if (p && ends(t, pool, p)) {
		struct tf_event ev = custom_event(TF_FN_CUSTOM_FREE, pool, p, 0);
		rec_hook_events(&ev, 1, 0);
	}
	return 0;
}

/* The end of every block of pool: written while stopped only if the pool
 * had recorded blocks; their keys leave the set in the writer's next round. */
static int note_destroy(rec_pool_t pool)
{
	int t = take();
	if (t < 0)
		return -1;
	int recorded = pool_has(pool_recorded, pool);
	if (recorded) {           /* else it has no key in the set */
		pool_set(pool_dead, pool);
		atomic_store(&dead_any, 1);
	}
	if (t != TAKE_NONE && (t != TAKE_PROBE || recorded)) {
		struct tf_event ev = custom_event(TF_FN_POOL_DESTROY, pool, NULL, 0);
		rec_hook_events(&ev, 1, 0);
	}
	return 0;
}

/* A key of a destroyed pool: out (any other key stays). */
static int alive(uint64_t k)
{
	rec_pool_t pool = (rec_pool_t)(k >> KEY_ADDR_BITS) & REC_POOL_MAX;
	return !(k & KEY_TAG) || !pool_has(pool_dead, pool);
}

void rec_custom_round(void)
{
	if (atomic_load(&dead_any) && atomic_exchange(&dead_any, 0) &&
	    atomic_load_explicit(&rec_sample_filter, memory_order_acquire))
		rec_sampled_sweep(alive);
}

int rec_custom_key(uint64_t k)
{
	return (k & KEY_TAG) != 0;
}

REC_EXPORT int rec_alloc(const void *ptr, size_t size)
{
	return note_alloc(TF_FN_CUSTOM_ALLOC, REC_POOL_NONE, ptr, size);
}

/* The old block's end, then the new block: one publication, so no other
 * event of this thread falls between them. */
REC_EXPORT int rec_realloc(const void *old_ptr, const void *new_ptr, size_t size)
{
	int t = take();
	if (t < 0 || (uintptr_t)old_ptr >= ADDR_LIMIT || (uintptr_t)new_ptr >= ADDR_LIMIT)
		return -1;
	struct tf_event ev[2];
	unsigned k = 0;
	if (old_ptr && ends(t, REC_POOL_NONE, old_ptr))
		ev[k++] = custom_event(TF_FN_CUSTOM_FREE, REC_POOL_NONE, old_ptr, 0);
	if (t == TAKE_ALL && new_ptr) {
		ev[k++] = custom_event(TF_FN_CUSTOM_REALLOC, REC_POOL_NONE, new_ptr, size);
		keep(REC_POOL_NONE, new_ptr);
	}
	if (k)
		rec_hook_events(ev, k, ev[k - 1].fn == TF_FN_CUSTOM_REALLOC);
	return 0;
}

REC_EXPORT int rec_free(const void *ptr)
{
	return note_end(REC_POOL_NONE, ptr);
}

REC_EXPORT rec_pool_t rec_pool_create(const char *name)
{
	return rec_ctl_pool_create(name);
}

REC_EXPORT int rec_pool_alloc(rec_pool_t pool, const void *ptr, size_t size)
{
	return rec_ctl_pool_known(pool) ? note_alloc(TF_FN_CUSTOM_ALLOC, pool, ptr, size) : -1;
}

REC_EXPORT int rec_pool_free(rec_pool_t pool, const void *ptr)
{
	return rec_ctl_pool_known(pool) ? note_end(pool, ptr) : -1;
}

REC_EXPORT int rec_pool_destroy(rec_pool_t pool)
{
	return rec_ctl_pool_known(pool) ? note_destroy(pool) : -1;
}
