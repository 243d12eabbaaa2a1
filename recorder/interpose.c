/*
 * interpose.c - the allocator entry points libheapreel.so exports: malloc, free,
 * calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, malloc_usable_size (passed through), and C++ operator
 * new / delete in every form (at the end, with why).
 *
 * Each one calls the real function, then (while recording, and not from
 * inside the recorder) stamps the time, captures the stack and publishes a
 * 32-byte event to the calling thread's ring. What is recorded follows one
 * word of api.c, read at most once per call (sampling's common cases are
 * settled before it is needed: sample.c): allocations only while started,
 * and when sampling only the sampled ones; frees of every block, or with
 * sampling only of the sampled blocks. Ordering rule: an allocation is
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
 * only when a thread claims its ring or maps its walk tables (its first
 * capture, stack.c), when its ring crosses half full (one futex wake) or
 * is full, and on a new stack's path (stackid.c's tables growing). Errors
 * of the real call pass through unchanged (errno included); a failed call
 * records nothing.
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

/* The stack id of the current allocation's call stack, captured into buf. */
static inline uint32_t stack_id(void **buf)
{
	unsigned n;
	int same, hashed;
	struct rec_sh h;
	void *const *ips = rec_stack_capture(buf, &n, &same, &h, &hashed);
	uint32_t gen = atomic_load_explicit(&rec_s.gen, memory_order_relaxed);
	if (same && last_id && last_gen == gen)
		return last_id;
	last_gen = gen;
	if (hashed) {
		last_id = rec_stackid_known(&h);
		if (REC_LIKELY(last_id))
			return last_id;
		if (!rec_stack_fill(buf, &n))
			hashed = 0;
	}
	last_id = rec_stackid(ips, n, hashed ? &h : NULL);
	return last_id;
}

/* A thread without a mapping of its own captures into its stack: 2 KiB a
 * thread sized tightly may lack, so only then. */
static __attribute__((noinline)) uint32_t stack_id_on_stack(void)
{
	void *buf[REC_STACK_SLOTS];
	return stack_id(buf);
}

static uint32_t current_stack(void)
{
	void **room = rec_stack_room();
	return REC_LIKELY(room) ? stack_id(room) : stack_id_on_stack();
}

/* Is an allocation of size bytes to be recorded now? *track: it must
 * join the sampled set (sampling is on). */
static inline int take_alloc(size_t size, int *track)
{
	uint64_t w = rec_ctl_now();
	uint64_t period = w >> REC_M_PERIOD_SHIFT;
	*track = period != 0;
	if (!(w & REC_M_ALLOCS)) {
		rec_sample_unrecorded(period, size); /* stopped since countdown_unrecorded looked */
		return 0;
	}
	return !period || rec_sampled(period, size);
}

/* Is the free of p to be recorded? Called before the real free, so p is
 * out of the sampled set before another thread can be handed it again. */
static inline int take_free(const void *p)
{
	uint64_t w = rec_ctl_now();
	if (w & REC_M_FREES)
		return 1;
	return (w & REC_M_PROBE) && rec_sampled_maybe((uintptr_t)p) &&
	       rec_sampled_likely((uintptr_t)p) && rec_sampled_take((uintptr_t)p);
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

/* Where a call goes, decided inline with no call, so that a call passed
 * through (with sampling, nearly every one) costs no frame and no saved
 * registers on the way to the real function:
 *   ROUTE_PASS    not recorded: straight to the real function;
 *   ROUTE_RECORD  recorded by this thread's hook, nothing left to decide
 *                 (recording every allocation, or every free);
 *   ROUTE_PROBE   a free while sampling: recorded if the sampled set has p;
 *   ROUTE_SLOW    the slow way (below), which decides everything again:
 *                 inside a hook, before the constructor, or a countdown
 *                 that ends in this allocation.
 * Each route asks first the one question that settles sampling's common
 * case: an allocation smaller than this thread's countdown, a free whose
 * first-filter count is 0 (rec_internal.h says why either answer holds in
 * every mode). alloc_route takes size from the countdown only when it
 * answers ROUTE_PASS, so the slow way counts each allocation once. */
enum route { ROUTE_PASS, ROUTE_RECORD, ROUTE_PROBE, ROUTE_SLOW };

static inline enum route alloc_route(size_t size)
{
	uint64_t left = rec_sample_left;
	if (REC_LIKELY(left > size) && REC_LIKELY(!rec_guard)) {
		rec_sample_left = left - size;
		return ROUTE_PASS;
	}
	if (REC_UNLIKELY(!rec_real.free || rec_guard))
		return ROUTE_SLOW;
	uint64_t w = rec_ctl_now();
	if (!rec_on() || !(w & REC_M_ALLOCS))
		return left ? ROUTE_SLOW : ROUTE_PASS; /* a drawn countdown ends unrecorded */
	return w >> REC_M_PERIOD_SHIFT ? ROUTE_SLOW : ROUTE_RECORD;
}

static inline enum route free_route(const void *p)
{
	if (REC_UNLIKELY(!rec_real.free))
		return ROUTE_SLOW;
	if (REC_LIKELY(!rec_sampled_maybe((uintptr_t)p)))
		return ROUTE_PASS;
	/* the second filter's "surely not" holds too unless every free is
	 * recorded (an overflowed set does not hold every sampled block) */
	uint64_t w = rec_ctl_now();
	if (!(w & REC_M_FREES) && (!(w & REC_M_PROBE) || !rec_sampled_likely((uintptr_t)p)))
		return ROUTE_PASS;
	if (rec_guard)
		return ROUTE_SLOW;
	if (!rec_on())
		return ROUTE_PASS;
	return w & REC_M_FREES ? ROUTE_RECORD : ROUTE_PROBE;
}

/* A drawn countdown that ends in an allocation not recorded (stopped, or
 * no trace) is drawn again (gaps are memoryless), so the next start does
 * not sample its first allocation for sure. The first step of the slow way
 * of malloc, calloc and realloc, whose inline routes count down (a
 * handler's call inside a hook included: a hook has done with the
 * countdown before it sets the guard). */
static inline void countdown_unrecorded(size_t size)
{
	uint64_t w = rec_ctl_now();
	if (!rec_on() || !(w & REC_M_ALLOCS))
		rec_sample_unrecorded(w >> REC_M_PERIOD_SHIFT, size);
}

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
		/* Only a realloc's halves have a real call between their stamps;
		 * mmap.c's and custom.c's events are all stamped before the hook,
		 * so what handlers queued since goes after them, as they leave. */
		if (k == 2 && ev[0].kind == TF_EV_REALLOC_OLD && rec_nested_queued()) {
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

/* mmap.c's and custom.c's events of one call (all stamped): recorded by
 * this thread's hook, the last one with its stack if stacked. */
void rec_hook_events(struct tf_event *ev, unsigned k, int stacked)
{
	enter(HOOK);
	KEEP_ERRNO({
		if (stacked)
			ev[k - 1].stack = current_stack();
		record(ev, k, HOOK, 0);
	});
	leave(HOOK);
}

/* Out of line: the routes other than ROUTE_PASS. */
#define SLOW __attribute__((noinline))

/* An allocation call recorded: real_call(a, b) makes it (malloc, calloc,
 * aligned_alloc, memalign, valloc, pvalloc), size is the bytes asked for. */
static void *alloc_rec(void *(*real_call)(size_t, size_t), size_t a, size_t b, size_t size,
		       unsigned fn, int track, enum how h)
{
	enter(h);
	void *p = real_call(a, b);
	if (p)
		KEEP_ERRNO(note_alloc(p, size, fn, track, h));
	leave(h);
	return p;
}

/* The slow way of an allocation call made by real_call(a, b) (after the
 * real pointers are known): recorded, or passed to real_call. */
static void *alloc_call(void *(*real_call)(size_t, size_t), size_t a, size_t b, size_t size,
			unsigned fn, uintptr_t caller)
{
	int track;
	enum how h = how_now(caller);
	if (!h || !take_alloc(size, &track))
		return real_call(a, b);
	return alloc_rec(real_call, a, b, size, fn, track, h);
}

static void *call_malloc(size_t n, size_t m)
{
	(void)m;
	return rec_real.malloc(n);
}

static SLOW void *malloc_slow(size_t size, uintptr_t caller)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 16);
	countdown_unrecorded(size);
	return alloc_call(call_malloc, size, 0, size, TF_FN_MALLOC, caller);
}

/* ROUTE_RECORD: this thread's hook, not sampling. */
static SLOW void *malloc_rec(size_t size)
{
	return alloc_rec(call_malloc, size, 0, size, TF_FN_MALLOC, 0, HOOK);
}

REC_EXPORT void *malloc(size_t size)
{
	enum route r = alloc_route(size);
	if (REC_LIKELY(r == ROUTE_PASS))
		return rec_real.malloc(size);
	if (r == ROUTE_RECORD)
		return malloc_rec(size);
	return malloc_slow(size, REC_CALLER);
}

static SLOW void free_rec(void *p, enum how h)
{
	enter(h);
	KEEP_ERRNO(note_free(p, TF_FN_FREE, h));
	rec_real.free(p);
	leave(h);
}

static SLOW void free_slow(void *p, uintptr_t caller)
{
	if (REC_UNLIKELY(!ready()))
		return; /* not ours and no real free yet: cannot happen; never crash */
	enum how h = how_now(caller);
	if (!h || !take_free(p))
		rec_real.free(p);
	else
		free_rec(p, h);
}

/* ROUTE_PROBE (both filters said maybe): this thread's hook if p is in the
 * sampled set. */
static SLOW void free_probe(void *p)
{
	if (rec_sampled_take((uintptr_t)p))
		free_rec(p, HOOK);
	else
		rec_real.free(p);
}

REC_EXPORT void free(void *p)
{
	if (!p || REC_UNLIKELY(rec_boot_owns(p)))
		return;
	enum route r = free_route(p);
	if (REC_LIKELY(r == ROUTE_PASS))
		rec_real.free(p);
	else if (r == ROUTE_RECORD)
		free_rec(p, HOOK);
	else if (r == ROUTE_PROBE)
		free_probe(p);
	else
		free_slow(p, REC_CALLER);
}

static void *call_calloc(size_t n, size_t m)
{
	return rec_real.calloc(n, m);
}

static SLOW void *calloc_slow(size_t n, size_t size, uintptr_t caller)
{
	size_t total;
	int over = __builtin_mul_overflow(n, size, &total);
	if (REC_UNLIKELY(!ready()))
		return over ? NULL : rec_boot_alloc(total, 16);
	if (over)
		return rec_real.calloc(n, size);  /* fails as it should */
	countdown_unrecorded(total);
	return alloc_call(call_calloc, n, size, total, TF_FN_CALLOC, caller);
}

/* ROUTE_RECORD: this thread's hook, not sampling; n * size does not overflow. */
static SLOW void *calloc_rec(size_t n, size_t size)
{
	return alloc_rec(call_calloc, n, size, n * size, TF_FN_CALLOC, 0, HOOK);
}

REC_EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;
	enum route r = __builtin_mul_overflow(n, size, &total) ? ROUTE_SLOW : alloc_route(total);
	if (REC_LIKELY(r == ROUTE_PASS))
		return rec_real.calloc(n, size);
	if (r == ROUTE_RECORD)
		return calloc_rec(n, size);
	return calloc_slow(n, size, REC_CALLER);
}

/* What a realloc records: the free of the old block (TAKE_OLD), the new
 * block (TAKE_NEW); TRACK: the new block joins the sampled set. */
enum { TAKE_OLD = 1, TAKE_NEW = 2, TRACK = 4 };

static inline unsigned resize_takes(const void *old, size_t size)
{
	int track;
	unsigned t = take_alloc(size, &track) ? TAKE_NEW : 0;
	if (old && take_free(old))
		t |= TAKE_OLD;
	return t | (track ? TRACK : 0);
}

/* A resize, recorded: call(c) makes it (realloc, reallocarray, and the
 * allocator APIs' own), c->ptr is the old block, c->size the bytes the
 * block gets, t what resize_takes said (something to record). A NULL from
 * call leaves the old block as it was: a failed call, or a resize in place
 * that changed nothing (xallocx). */
static void *resize(rec_call_alloc *call, struct rec_call *c, unsigned fn, enum how h, unsigned t)
{
	void *old = c->ptr;
	size_t size = c->size;
	int take_old = t & TAKE_OLD, take_new = t & TAKE_NEW, track = t & TRACK;
	if (!old) {
		void *p = call(c);
		if (p)
			KEEP_ERRNO(note_alloc(p, size, fn, track, h));
		return p;
	}
	uint32_t at = h == NESTED ? rec_nested_reserve(2) : 0;
	uint64_t before = rec_now();
	void *p = call(c);
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

static void *resize_rec(rec_call_alloc *call, struct rec_call *c, unsigned fn, enum how h,
			unsigned t)
{
	enter(h);
	void *p = resize(call, c, fn, h, t);
	leave(h);
	return p;
}

void *rec_hook_resize(rec_call_alloc *call, struct rec_call *c, unsigned fn, uintptr_t caller)
{
	enum how h = how_now(caller);
	unsigned t = h ? resize_takes(c->ptr, c->size) : 0;
	if (!(t & (TAKE_OLD | TAKE_NEW)))
		return call(c);
	return resize_rec(call, c, fn, h, t);
}

static void *call_realloc(struct rec_call *c)
{
	return rec_real.realloc(c->ptr, c->size);
}

static void *call_reallocarray(struct rec_call *c)
{
	return rec_real.reallocarray(c->ptr, c->n, c->elem);
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

static SLOW void *realloc_slow(void *old, size_t size, uintptr_t caller)
{
	if (REC_UNLIKELY(!ready())) {
		void *p = rec_boot_alloc(size, 16);
		if (p && old)
			memcpy(p, old, rec_boot_size(old) < size ? rec_boot_size(old) : size);
		return p;
	}
	if (REC_UNLIKELY(old && rec_boot_owns(old)))
		return move_from_boot(old, size);
	countdown_unrecorded(size);
	return rec_hook_resize(call_realloc, &(struct rec_call){ .ptr = old, .size = size },
			       TF_FN_REALLOC, caller);
}

REC_EXPORT void *realloc(void *old, size_t size)
{
	/* free_route first: it changes nothing, alloc_route may */
	if (REC_LIKELY((!old || (!rec_boot_owns(old) && free_route(old) == ROUTE_PASS)) &&
		       alloc_route(size) == ROUTE_PASS))
		return rec_real.realloc(old, size);
	return realloc_slow(old, size, REC_CALLER);
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
	enum how h = how_now(REC_CALLER);
	unsigned t = h ? resize_takes(old, total) : 0;
	if (!(t & (TAKE_OLD | TAKE_NEW))) {
		/* glibc's reallocarray calls realloc: inside the hook it is
		 * passed through, not sampled a second time */
		enter(h);
		void *p = rec_real.reallocarray(old, n, size);
		leave(h);
		return p;
	}
	return resize_rec(call_reallocarray,
			  &(struct rec_call){ .ptr = old, .size = total, .n = n, .elem = size },
			  TF_FN_REALLOCARRAY, h, t);
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
	enum how h = how_now(REC_CALLER);
	if (!h || !take_alloc(size, &track))
		return rec_real.posix_memalign(out, align, size);
	enter(h);
	int r = rec_real.posix_memalign(out, align, size);
	if (r == 0)
		KEEP_ERRNO(note_alloc(*out, size, TF_FN_POSIX_MEMALIGN, track, h));
	leave(h);
	return r;
}

REC_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, align);
	return alloc_call(rec_real.aligned_alloc, align, size, size, TF_FN_ALIGNED_ALLOC, REC_CALLER);
}

REC_EXPORT void *memalign(size_t align, size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, align);
	return alloc_call(rec_real.memalign, align, size, size, TF_FN_MEMALIGN, REC_CALLER);
}

/* valloc, pvalloc: page-aligned; call_valloc(size, 0) makes the call. */

static void *call_valloc(size_t n, size_t m)
{
	(void)m;
	return rec_real.valloc(n);
}

static void *call_pvalloc(size_t n, size_t m)
{
	(void)m;
	return rec_real.pvalloc(n);
}

REC_EXPORT void *valloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 4096);
	return alloc_call(call_valloc, size, 0, size, TF_FN_VALLOC, REC_CALLER);
}

REC_EXPORT void *pvalloc(size_t size)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(size, 4096);
	return alloc_call(call_pvalloc, size, 0, size, TF_FN_PVALLOC, REC_CALLER);
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

/* ---- C++ operator new and delete ----------------------------------------
 * Every form (rec_internal.h lists them), so that a program whose new and
 * delete come from jemalloc or tcmalloc, which do not go through malloc, is
 * recorded as one under libstdc++. Each calls the next definition with its
 * own arguments; what that one calls (libstdc++'s new calls malloc, its
 * nothrow new calls new) arrives inside the hook and is passed through, so
 * a block is recorded once, at the outermost entry point, with its stack
 * from new's caller. A throwing new that fails records nothing; its
 * bad_alloc unwinds through the hook, whose guard a cleanup clears (this
 * file is built with -fexceptions for that). Where the program has no C++
 * runtime at start (a C program that dlopens one later), the real pointers
 * are NULL and the hooks use the real malloc, memalign and free instead:
 * then a failing new returns NULL, as no bad_alloc can be thrown from here. */

static void leave_cleanup(const enum how *h)
{
	leave(*h);
}

static void guard_cleanup(const int *g)
{
	rec_guard = *g;
}

/* An allocation by an entry point of its own (C++ new here, the allocator
 * APIs in entry_alloc_api.c): call(c) makes the real call, c->size is the
 * bytes asked for, fn the tf_fn recorded. */
void *rec_hook_alloc(rec_call_alloc *call, struct rec_call *c, unsigned fn, uintptr_t caller)
{
	if (REC_UNLIKELY(!ready()))
		return rec_boot_alloc(c->size, c->align);
	int track;
	enum how h = how_now(caller);
	if (!h)
		return call(c);
	if (!take_alloc(c->size, &track)) {
		/* not sampled: what the real new calls (libstdc++'s malloc) is
		 * part of this call, not a second draw of sampling's countdown
		 * (that would sample new's bytes twice, as malloc) */
		__attribute__((cleanup(guard_cleanup))) int g = rec_guard;
		rec_guard = REC_GUARD_OWN;
		return call(c);
	}
	enter(h);
	/* left on return and when a bad_alloc unwinds through this frame */
	__attribute__((cleanup(leave_cleanup))) enum how left = h;
	void *p = call(c);
	if (p)
		KEEP_ERRNO(note_alloc(p, c->size, fn, track, left));
	return p;
}

/* A free by an entry point of its own (delete, dallocx, tc_free...):
 * recorded as free() is (stamped before the real call). */
void rec_hook_free(rec_call_free *call, struct rec_call *c, uintptr_t caller)
{
	if (!c->ptr || REC_UNLIKELY(rec_boot_owns(c->ptr)) || REC_UNLIKELY(!ready()))
		return;
	enum how h = how_now(caller);
	if (!h || !take_free(c->ptr)) {
		call(c);
		return;
	}
	enter(h);
	KEEP_ERRNO(note_free(c->ptr, TF_FN_FREE, h));
	call(c);
	leave(h);
}

/* Per shape: the real call's fallback (rec_internal.h's REC_HOOK_* make the
 * call and the exported function). */
#define FALLBACK_new rec_real.malloc(c->size)
#define FALLBACK_new_tag rec_real.malloc(c->size)
#define FALLBACK_new_align rec_real.memalign(c->align, c->size)
#define FALLBACK_new_align_tag rec_real.memalign(c->align, c->size)
#define FALLBACK_del rec_real.free(c->ptr)
#define FALLBACK_del_size rec_real.free(c->ptr)
#define FALLBACK_del_tag rec_real.free(c->ptr)
#define FALLBACK_del_size_align rec_real.free(c->ptr)
#define FALLBACK_del_align_tag rec_real.free(c->ptr)

#define DEF_CXX(name, fn, shape) \
	REC_HOOK_##shape(REC_EXPORT, name, call##name, rec_real.name, FALLBACK_##shape, fn)
REC_CXX_ENTRY_POINTS(DEF_CXX)
