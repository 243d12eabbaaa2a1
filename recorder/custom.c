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
 * pools or blocks: rec_pool_destroy is one event, which trace-import
 * expands into the frees of the pool's live blocks. A pool's name goes to
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
 * stop still ends.
 *
 * Must never: allocate, lock, use stdio, or record from inside the
 * recorder (a call while this thread's hook runs is dropped).
 */
#include "rec_internal.h"
#include "rec.h"

/* Highest address a custom block may have: the keyspace trace-import
 * pairs pool blocks in (an address below 2^48, the pool above it). */
#define ADDR_LIMIT ((uint64_t)1 << 48)

enum take { TAKE_NONE, TAKE_FREE, TAKE_ALL };

/* A call the trace cannot hold (sampled, bounded): the trace says so once. */
static void unrecorded(void)
{
	rec_ctl_lack(TF_LACK_CUSTOM, 1);
}

/* What may be recorded now; -1 without a trace. */
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
	return w & (REC_M_FREES | REC_M_PROBE) ? TAKE_FREE : TAKE_NONE;
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
		rec_hook_events(&ev, 1, 1);
	}
	return 0;
}

/* The end of the block at p in pool (fn CUSTOM_FREE), or of every block
 * of pool (fn POOL_DESTROY, p NULL). */
static int note_end(unsigned fn, rec_pool_t pool, const void *p)
{
	int t = take();
	if (t < 0 || (uintptr_t)p >= ADDR_LIMIT)
		return -1;
	if (t != TAKE_NONE && (p || fn == TF_FN_POOL_DESTROY)) {
		struct tf_event ev = custom_event(fn, pool, p, 0);
		rec_hook_events(&ev, 1, 0);
	}
	return 0;
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
	if (t != TAKE_NONE && old_ptr)
		ev[k++] = custom_event(TF_FN_CUSTOM_FREE, REC_POOL_NONE, old_ptr, 0);
	if (t == TAKE_ALL && new_ptr)
		ev[k++] = custom_event(TF_FN_CUSTOM_REALLOC, REC_POOL_NONE, new_ptr, size);
	if (k)
		rec_hook_events(ev, k, ev[k - 1].fn == TF_FN_CUSTOM_REALLOC);
	return 0;
}

REC_EXPORT int rec_free(const void *ptr)
{
	return note_end(TF_FN_CUSTOM_FREE, REC_POOL_NONE, ptr);
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
	return rec_ctl_pool_known(pool) ? note_end(TF_FN_CUSTOM_FREE, pool, ptr) : -1;
}

REC_EXPORT int rec_pool_destroy(rec_pool_t pool)
{
	return rec_ctl_pool_known(pool) ? note_end(TF_FN_POOL_DESTROY, pool, NULL) : -1;
}
