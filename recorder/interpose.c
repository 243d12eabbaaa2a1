/*
 * interpose.c - the allocator entry points librec.so exports: malloc, free,
 * calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, and malloc_usable_size (passed through).
 *
 * Each one calls the real function, then (while recording, and not from
 * inside the recorder) stamps the time, captures the stack and publishes a
 * 32-byte event to the calling thread's ring. What is recorded follows one
 * word of api.c, read once per call: allocations only while started, and
 * when sampling only the sampled ones (sample.c); frees of every block, or
 * with sampling only of the sampled blocks. Ordering rule: an allocation is
 * stamped after the real call returned, a free before the real free runs, so
 * an address handed out again by another thread always sorts after its free.
 *
 * Must never: allocate, lock, or call into the dynamic loader; syscalls
 * only when a thread claims its ring, when its ring crosses half full (one
 * futex wake) or is full. Errors of the real call pass through unchanged
 * (errno included); a failed call records nothing.
 */
#include "rec_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* The real pointers are resolved in the constructor; a call that comes
 * earlier resolves them itself, or gets bootstrap memory while dlsym runs. */
static inline int ready(void)
{
	if (REC_LIKELY(rec_real.free != NULL))
		return 1;
	rec_real_resolve();
	return rec_real.free != NULL;
}

/* This thread's previous stack id, and the session it belongs to: a stack
 * equal to the previous one needs neither hash nor lookup. */
static REC_TLS uint32_t last_id, last_gen;

/* The stack id of the current allocation's call stack. */
static uint32_t current_stack(void)
{
	void *buf[REC_STACK_SLOTS];
	unsigned n;
	int same;
	void *const *ips = rec_stack_capture(buf, &n, &same);
	uint32_t gen = atomic_load_explicit(&rec_s.gen, memory_order_relaxed);
	if (same && last_id && last_gen == gen)
		return last_id;
	last_id = rec_stackid(ips, n);
	last_gen = gen;
	return last_id;
}

/* Is an allocation of size bytes to be recorded now? *track: it must
 * join the sampled set (sampling is on). */
static inline int take_alloc(size_t size, int *track)
{
	uint64_t w = rec_ctl_now();
	uint64_t period = w >> REC_M_PERIOD_SHIFT;
	*track = period != 0;
	return (w & REC_M_ALLOCS) && (!period || rec_sampled(period, size));
}

/* Is the free of p to be recorded? Called before the real free, so p is
 * out of the sampled set before another thread can be handed it again. */
static inline int take_free(const void *p)
{
	uint64_t w = rec_ctl_now();
	if (w & REC_M_FREES)
		return 1;
	return (w & REC_M_PROBE) && rec_sampled_take((uintptr_t)p);
}

/* Records one allocation the real allocator just returned. */
static void note_alloc(void *p, size_t size, unsigned fn, int track)
{
	if (track)
		rec_sampled_add((uintptr_t)p);
	uint64_t t = rec_now();
	struct tf_event ev = {
		.t = t, .addr = (uintptr_t)p, .size = size,
		.stack = current_stack(), .kind = TF_EV_ALLOC, .fn = (uint8_t)fn,
	};
	rec_ring_put(&ev, 1);
}

/* Records the free of p, stamped t (before the real call ran). */
static void note_free(void *p, uint64_t t, unsigned fn)
{
	struct tf_event ev = { .t = t, .addr = (uintptr_t)p, .kind = TF_EV_FREE, .fn = (uint8_t)fn };
	rec_ring_put(&ev, 1);
}

/* Keeps errno as the real call left it across the recording work. */
#define KEEP_ERRNO(stmt) do { int e_ = errno; stmt; errno = e_; } while (0)

REC_EXPORT void *malloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 16);
	int track;
	if (rec_guard || !rec_on() || !take_alloc(size, &track))
		return rec_real.malloc(size);
	rec_guard = 1;
	void *p = rec_real.malloc(size);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, TF_FN_MALLOC, track));
	rec_guard = 0;
	return p;
}

REC_EXPORT void free(void *p)
{
	if (!p || REC_UNLIKELY(rec_boot_owns(p)))
		return;
	if (REC_UNLIKELY(!ready()))
		return; /* not ours and no real free yet: cannot happen; never crash */
	if (rec_guard || !rec_on() || !take_free(p)) {
		rec_real.free(p);
		return;
	}
	rec_guard = 1;
	KEEP_ERRNO(note_free(p, rec_now(), TF_FN_FREE));
	rec_real.free(p);
	rec_guard = 0;
}

REC_EXPORT void *calloc(size_t n, size_t size)
{
	if (REC_UNLIKELY(!ready())) {
		size_t total;
		if (__builtin_mul_overflow(n, size, &total))
			return NULL;
		return rec_boot_alloc(total, 16);
	}
	size_t total;
	int track;
	if (rec_guard || !rec_on() || __builtin_mul_overflow(n, size, &total) ||
	    !take_alloc(total, &track))
		return rec_real.calloc(n, size);
	rec_guard = 1;
	void *p = rec_real.calloc(n, size);
	if (p)
		KEEP_ERRNO(note_alloc(p, total, TF_FN_CALLOC, track));
	rec_guard = 0;
	return p;
}

/* realloc and reallocarray: real_call(old, n, m) is the real function, size
 * the bytes requested (n for realloc, n * m for reallocarray). */
static void *resize(void *old, size_t size, unsigned fn, void *(*real_call)(void *, size_t, size_t),
		    size_t n, size_t m)
{
	int track;
	int take_new = take_alloc(size, &track);
	if (!old) {
		void *p = real_call(NULL, n, m);
		if (p && take_new)
			KEEP_ERRNO(note_alloc(p, size, fn, track));
		return p;
	}
	int take_old = take_free(old);
	if (!take_old && !take_new)
		return real_call(old, n, m);
	uint64_t before = rec_now();
	void *p = real_call(old, n, m);
	int e = errno;
	if (!p) {
		if (take_old && size == 0)      /* realloc(p, 0) freed p */
			note_free(old, before, fn);
		else if (take_old && track)     /* failed: old lives on, still sampled */
			rec_sampled_add((uintptr_t)old);
		errno = e;
		return p;
	}
	if (take_old && take_new) {
		if (track)
			rec_sampled_add((uintptr_t)p);
		uint64_t after = rec_now();
		struct tf_event ev[2] = {
			{ .t = before, .addr = (uintptr_t)old, .kind = TF_EV_REALLOC_OLD,
			  .fn = (uint8_t)fn },
			{ .t = after, .addr = (uintptr_t)p, .size = size, .stack = current_stack(),
			  .kind = TF_EV_REALLOC_NEW, .fn = (uint8_t)fn },
		};
		rec_ring_put(ev, 2);
	} else if (take_old) { /* the new block goes unrecorded (stopped, unsampled) */
		note_free(old, before, fn);
	} else { /* only the new block: the old one was never recorded */
		note_alloc(p, size, fn, track);
	}
	errno = e;
	return p;
}

static void *call_realloc(void *old, size_t n, size_t m)
{
	(void)m;
	return rec_real.realloc(old, n);
}

static void *call_reallocarray(void *old, size_t n, size_t m)
{
	return rec_real.reallocarray(old, n, m);
}

/* realloc of a bootstrap block: move it into the real heap (recorded as a
 * new allocation: its bootstrap birth was never recorded). */
static void *move_from_boot(void *old, size_t size)
{
	size_t have = rec_boot_size(old);
	void *p = malloc(size);
	if (p)
		memcpy(p, old, have < size ? have : size);
	return p;
}

REC_EXPORT void *realloc(void *old, size_t size)
{
	if (REC_UNLIKELY(!ready())) {
		void *p = rec_boot_alloc(size, 16);
		if (p && old)
			memcpy(p, old, rec_boot_size(old) < size ? rec_boot_size(old) : size);
		return p;
	}
	if (REC_UNLIKELY(old && rec_boot_owns(old)))
		return move_from_boot(old, size);
	if (rec_guard || !rec_on())
		return rec_real.realloc(old, size);
	rec_guard = 1;
	void *p = resize(old, size, TF_FN_REALLOC, call_realloc, size, 0);
	rec_guard = 0;
	return p;
}

REC_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (REC_UNLIKELY(!ready()) || REC_UNLIKELY(old && rec_boot_owns(old)))
		return realloc(old, total);
	if (rec_guard || !rec_on())
		return rec_real.reallocarray(old, n, size);
	rec_guard = 1;
	void *p = resize(old, total, TF_FN_REALLOCARRAY, call_reallocarray, n, size);
	rec_guard = 0;
	return p;
}

REC_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready())) {
		void *p = rec_boot_alloc(size, align);
		if (!p)
			return ENOMEM;
		*out = p;
		return 0;
	}
	int track;
	if (rec_guard || !rec_on() || !take_alloc(size, &track))
		return rec_real.posix_memalign(out, align, size);
	rec_guard = 1;
	int r = rec_real.posix_memalign(out, align, size);
	if (r == 0)
		KEEP_ERRNO(note_alloc(*out, size, TF_FN_POSIX_MEMALIGN, track));
	rec_guard = 0;
	return r;
}

/* aligned_alloc, memalign: same shape. */
static void *aligned(void *(*real_call)(size_t, size_t), size_t align, size_t size, unsigned fn)
{
	int track;
	if (rec_guard || !rec_on() || !take_alloc(size, &track))
		return real_call(align, size);
	rec_guard = 1;
	void *p = real_call(align, size);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, fn, track));
	rec_guard = 0;
	return p;
}

REC_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, align);
	return aligned(rec_real.aligned_alloc, align, size, TF_FN_ALIGNED_ALLOC);
}

REC_EXPORT void *memalign(size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, align);
	return aligned(rec_real.memalign, align, size, TF_FN_MEMALIGN);
}

/* valloc, pvalloc: page-aligned. */
static void *paged(void *(*real_call)(size_t), size_t size, unsigned fn)
{
	int track;
	if (rec_guard || !rec_on() || !take_alloc(size, &track))
		return real_call(size);
	rec_guard = 1;
	void *p = real_call(size);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, fn, track));
	rec_guard = 0;
	return p;
}

REC_EXPORT void *valloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 4096);
	return paged(rec_real.valloc, size, TF_FN_VALLOC);
}

REC_EXPORT void *pvalloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 4096);
	return paged(rec_real.pvalloc, size, TF_FN_PVALLOC);
}

REC_EXPORT size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (REC_UNLIKELY(rec_boot_owns(p)))
		return rec_boot_size(p);
	if (REC_UNLIKELY(!ready()))
		return 0;
	return rec_real.malloc_usable_size(p);
}
