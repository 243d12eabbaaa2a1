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
 * A call that arrives while this thread's hook is recording comes either
 * from the real allocator the hook called (glibc's reallocarray calls
 * realloc: passed through, as before) or from a signal handler that
 * interrupted the hook; a stack walk tells which (stack.c). A handler's call
 * is recorded too, through nested.c's queue, which the interrupted hook
 * drains into its ring: before its own event what was stamped earlier, the
 * rest as it leaves. So a handler's allocations are all recorded, wherever
 * the signal landed.
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

/* How a call is recorded: not at all, by this thread's hook, or as the
 * call of a signal handler that interrupted that hook (nested.c). A call
 * the real allocator makes from inside the hook (glibc's reallocarray calls
 * realloc) is passed through, as are those of the recorder's own code. */
enum how { PASS, HOOK, NESTED };

static inline enum how how_now(uintptr_t caller)
{
	int g = rec_guard;
	if (REC_LIKELY(!g))
		return rec_on() ? HOOK : PASS;
	return g == REC_GUARD_HOOK && rec_on() && !rec_stack_from_recorder(caller) ? NESTED : PASS;
}

/* The interposed function's return address: evaluated in the exported
 * function itself, so it names the program's (or allocator's) call site. */
#define CALLER ((uintptr_t)__builtin_return_address(0))

/* Keeps errno as the real call left it across the recording work. */
#define KEEP_ERRNO(stmt) do { int e_ = errno; stmt; errno = e_; } while (0)

static inline void enter(enum how h)
{
	if (h == HOOK)
		rec_guard = REC_GUARD_HOOK;
	atomic_signal_fence(memory_order_seq_cst);
}

/* Leaves a hook: the guard off first, then what handlers queued meanwhile
 * goes to the ring (the guard on again while it does: a handler arriving
 * then queues behind). */
static inline void leave(enum how h)
{
	if (h != HOOK)
		return;
	atomic_signal_fence(memory_order_seq_cst);
	rec_guard = 0;
	atomic_signal_fence(memory_order_seq_cst);
	while (REC_UNLIKELY(rec_nested_queued())) {
		rec_guard = REC_GUARD_HOOK;
		atomic_signal_fence(memory_order_seq_cst);
		KEEP_ERRNO(rec_nested_drain(UINT64_MAX));
		atomic_signal_fence(memory_order_seq_cst);
		rec_guard = 0;
		atomic_signal_fence(memory_order_seq_cst);
	}
}

static inline uint32_t stack_of(enum how h)
{
	return h == NESTED ? rec_nested_stack() : current_stack();
}

/* The k events of one call: this hook's go to the ring after what handlers
 * queued before them; a handler's fill the slots it reserved at `at`. */
static void record(const struct tf_event *ev, unsigned k, enum how h, uint32_t at)
{
	if (h == NESTED) {
		rec_nested_fill(at, ev, k);
		return;
	}
	if (!k)
		return;
	if (REC_UNLIKELY(rec_nested_queued())) {
		rec_nested_drain(ev[0].t);
		if (k == 2 && rec_nested_queued()) {
			/* a handler may have run inside the real realloc: its events
			 * go between the halves, sent as a FREE and an ALLOC (fn kept) */
			struct tf_event half[2] = { ev[0], ev[1] };
			half[0].kind = TF_EV_FREE;
			half[1].kind = TF_EV_ALLOC;
			rec_ring_put(&half[0], 1);
			rec_nested_drain(half[1].t);
			rec_ring_put(&half[1], 1);
			return;
		}
	}
	rec_ring_put(ev, k);
}

/* Records one allocation the real allocator just returned. */
static void note_alloc(void *p, size_t size, unsigned fn, int track, enum how h)
{
	if (track)
		rec_sampled_add((uintptr_t)p);
	uint32_t at = h == NESTED ? rec_nested_reserve(1) : 0;
	struct tf_event ev = {
		.t = rec_now(), .addr = (uintptr_t)p, .size = size, .kind = TF_EV_ALLOC,
		.fn = (uint8_t)fn,
	};
	ev.stack = stack_of(h);
	record(&ev, 1, h, at);
}

/* Records the free of p, stamped now: before the real free runs. */
static void note_free(void *p, unsigned fn, enum how h)
{
	uint32_t at = h == NESTED ? rec_nested_reserve(1) : 0;
	struct tf_event ev = { .t = rec_now(), .addr = (uintptr_t)p, .kind = TF_EV_FREE,
			       .fn = (uint8_t)fn };
	record(&ev, 1, h, at);
}

REC_EXPORT void *malloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 16);
	int track;
	enum how h = how_now(CALLER);
	if (!h || !take_alloc(size, &track))
		return rec_real.malloc(size);
	enter(h);
	void *p = rec_real.malloc(size);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, TF_FN_MALLOC, track, h));
	leave(h);
	return p;
}

REC_EXPORT void free(void *p)
{
	if (!p || REC_UNLIKELY(rec_boot_owns(p)))
		return;
	if (REC_UNLIKELY(!ready()))
		return; /* not ours and no real free yet: cannot happen; never crash */
	enum how h = how_now(CALLER);
	if (!h || !take_free(p)) {
		rec_real.free(p);
		return;
	}
	enter(h);
	KEEP_ERRNO(note_free(p, TF_FN_FREE, h));
	rec_real.free(p);
	leave(h);
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
	enum how h = how_now(CALLER);
	if (!h || __builtin_mul_overflow(n, size, &total) || !take_alloc(total, &track))
		return rec_real.calloc(n, size);
	enter(h);
	void *p = rec_real.calloc(n, size);
	if (p)
		KEEP_ERRNO(note_alloc(p, total, TF_FN_CALLOC, track, h));
	leave(h);
	return p;
}

/* realloc and reallocarray: real_call(old, n, m) is the real function, size
 * the bytes requested (n for realloc, n * m for reallocarray). */
static void *resize(void *old, size_t size, unsigned fn, void *(*real_call)(void *, size_t, size_t),
		    size_t n, size_t m, enum how h)
{
	int track;
	int take_new = take_alloc(size, &track);
	if (!old) {
		void *p = real_call(NULL, n, m);
		if (p && take_new)
			KEEP_ERRNO(note_alloc(p, size, fn, track, h));
		return p;
	}
	int take_old = take_free(old);
	if (!take_old && !take_new)
		return real_call(old, n, m);
	uint32_t at = h == NESTED ? rec_nested_reserve(2) : 0;
	uint64_t before = rec_now();
	void *p = real_call(old, n, m);
	int e = errno;
	struct tf_event ev[2];
	unsigned k = 0;
	if (!p) {
		if (take_old && size == 0)      /* realloc(p, 0) freed p */
			ev[k++] = (struct tf_event){ .t = before, .addr = (uintptr_t)old,
						     .kind = TF_EV_FREE, .fn = (uint8_t)fn };
		else if (take_old && track)     /* failed: old lives on, still sampled */
			rec_sampled_add((uintptr_t)old);
	} else {
		/* alone (a FREE) when the new block goes unrecorded (stopped, unsampled) */
		if (take_old)
			ev[k++] = (struct tf_event){ .t = before, .addr = (uintptr_t)old,
						     .kind = take_new ? TF_EV_REALLOC_OLD : TF_EV_FREE,
						     .fn = (uint8_t)fn };
		/* alone (an ALLOC) when the old block was never recorded */
		if (take_new) {
			if (track)
				rec_sampled_add((uintptr_t)p);
			ev[k] = (struct tf_event){ .t = rec_now(), .addr = (uintptr_t)p, .size = size,
						   .kind = take_old ? TF_EV_REALLOC_NEW : TF_EV_ALLOC,
						   .fn = (uint8_t)fn };
			ev[k++].stack = stack_of(h);
		}
	}
	record(ev, k, h, at);
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
	enum how h = how_now(CALLER);
	if (!h)
		return rec_real.realloc(old, size);
	enter(h);
	void *p = resize(old, size, TF_FN_REALLOC, call_realloc, size, 0, h);
	leave(h);
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
	enum how h = how_now(CALLER);
	if (!h)
		return rec_real.reallocarray(old, n, size);
	enter(h);
	void *p = resize(old, total, TF_FN_REALLOCARRAY, call_reallocarray, n, size, h);
	leave(h);
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
	enum how h = how_now(CALLER);
	if (!h || !take_alloc(size, &track))
		return rec_real.posix_memalign(out, align, size);
	enter(h);
	int r = rec_real.posix_memalign(out, align, size);
	if (r == 0)
		KEEP_ERRNO(note_alloc(*out, size, TF_FN_POSIX_MEMALIGN, track, h));
	leave(h);
	return r;
}

/* aligned_alloc, memalign: same shape. */
static void *aligned(void *(*real_call)(size_t, size_t), size_t align, size_t size, unsigned fn,
		     uintptr_t caller)
{
	int track;
	enum how h = how_now(caller);
	if (!h || !take_alloc(size, &track))
		return real_call(align, size);
	enter(h);
	void *p = real_call(align, size);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, fn, track, h));
	leave(h);
	return p;
}

REC_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, align);
	return aligned(rec_real.aligned_alloc, align, size, TF_FN_ALIGNED_ALLOC, CALLER);
}

REC_EXPORT void *memalign(size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, align);
	return aligned(rec_real.memalign, align, size, TF_FN_MEMALIGN, CALLER);
}

/* valloc, pvalloc: page-aligned. */
static void *paged(void *(*real_call)(size_t), size_t size, unsigned fn, uintptr_t caller)
{
	int track;
	enum how h = how_now(caller);
	if (!h || !take_alloc(size, &track))
		return real_call(size);
	enter(h);
	void *p = real_call(size);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, fn, track, h));
	leave(h);
	return p;
}

REC_EXPORT void *valloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 4096);
	return paged(rec_real.valloc, size, TF_FN_VALLOC, CALLER);
}

REC_EXPORT void *pvalloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 4096);
	return paged(rec_real.pvalloc, size, TF_FN_PVALLOC, CALLER);
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
