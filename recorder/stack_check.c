/*
 * stack_check.c - REC_CHECK_STACKS=1: every stack the fast path captures
 * (stack.c's CFI walk with its rule caches and per-thread memo, or its
 * libunwind fallback) is checked against a full walk the slow, trusted
 * way, and a difference aborts the program with both stacks on stderr;
 * so is a hash the walk worked out from its previous one's (stackhash.c)
 * that is not the stack's own.
 *
 * The trusted walk is libunwind's unw_step from a context taken here
 * (unw_getcontext, rec_unwind_full): not unw_backtrace, whose own
 * per-address cache is what the fallback uses. Under REC_SHADOW=1 the
 * patched return addresses are put back for the walk (rec_shadow_hide),
 * so it sees the program's own stack, not the shadow's record of it. Its frames are cut as stack.c cuts them: every leading
 * frame inside libheapreel.so's text is skipped (this file's, stack.c's and
 * the hook's), then at most REC_DEPTH frames are kept. Two things are
 * checked on every capture: the frames are the full walk's, and a capture
 * that claims to be the thread's previous stack (`same`, which lets the
 * hook reuse the previous stack id) has the previous full walk's frames.
 * The number of captures checked goes into the heapreel.stats mark
 * (stack_checks=N), so a test can tell that every event was checked (a
 * `same` in a thread that could not be given the memory for its previous
 * walk, or taken by a signal handler while the thread's exit gives that
 * memory back, is not checked, and not counted).
 *
 * Not checked: the stacks of allocations a signal handler makes while it
 * interrupts one of this thread's hooks (nested.c). Their walk is cut at
 * the signal frame by design, and libunwind may not be entered again from
 * a handler that interrupted it. A handler that interrupts the program
 * elsewhere is recorded (and checked) like any call.
 *
 * The cost is irrelevant (a full DWARF walk per event); the recorder's
 * rules are not: no stdio (the report goes through write(2)), no
 * allocation (the previous walk is kept in a per-thread mapping,
 * libunwind's context and cursor live on the stack as in unw_backtrace),
 * and libunwind's entry points are looked up in the constructor.
 *
 * Must never: run when REC_CHECK_STACKS is not 1 (the hot path pays one
 * predictable branch), or return after finding a difference.
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>

#define HEX_DIGITS 16                 /* of a 64-bit address */
/* Heads a report (`./heapreel test --check-stacks` counts them in the logs) */
#define DIFFER "REC_CHECK_STACKS: stacks differ: "

int rec_check_stacks;

static __typeof__(unw_tdep_getcontext) *get_context;
static __typeof__(unw_init_local) *init_local;
static __typeof__(unw_step) *step_out;
static __typeof__(unw_get_reg) *get_reg;
static uintptr_t own_lo, own_hi;      /* libheapreel.so's executable segments */
/* Test only (REC_TEST_CHECK_NO_MEM, read when check mode starts): no
 * thread gets the memory below, as when it cannot be mapped */
static int test_no_mem;

/* Per thread, the full walks of the previous capture and of this one:
 * 4 KiB of the thread's own (thread_mem.c), not its stack's, had at its
 * first check and given back at its exit, by the first round of its key's
 * destructor; a check after that (a later destructor's) takes them again,
 * as stack.c takes its tables. Taken again, they hold no previous walk,
 * so stack.c forgets its previous walk too as they go (rec_stack_forget):
 * its next capture claims no `same`, and one that did would be a
 * difference. */
struct mem {
	uintptr_t prev[REC_DEPTH_MAX];
	void *walked[REC_DEPTH_MAX];
};
static REC_TLS struct mem *mem;
static REC_TLS unsigned prev_n;
static REC_TLS int mem_gone;           /* none to be had, or being given back */
static struct rec_thread_kind mem_kind;

static void mem_free(void *arg)
{
	mem_gone = 1;  /* first: a signal handler's check meanwhile maps none */
	atomic_signal_fence(memory_order_seq_cst);
	mem = NULL;
	prev_n = 0;
	rec_stack_forget();
	atomic_signal_fence(memory_order_seq_cst);
	mem_gone = 0;  /* a later check takes them again */
	rec_unmap_thread(&mem_kind, arg);
}

int rec_stack_check_init(void *unwind, uintptr_t lo, uintptr_t hi)
{
	/* libunwind's own names for the local-only entry points the macros
	 * of libunwind.h stand for */
	*(void **)&get_context = dlsym(unwind, "_Ux86_64_getcontext");
	*(void **)&init_local = dlsym(unwind, "_ULx86_64_init_local");
	*(void **)&step_out = dlsym(unwind, "_ULx86_64_step");
	*(void **)&get_reg = dlsym(unwind, "_ULx86_64_get_reg");
	if (!get_context || !init_local || !step_out || !get_reg)
		get_context = NULL;  /* rec_unwind_full finds nothing */
	own_lo = lo;
	own_hi = hi;
	const char *s = getenv("REC_CHECK_STACKS");
	if (!s || strcmp(s, "1") != 0)
		return 0;
	if (!get_context)
		return -1;
	if (rec_thread_kind_init(&mem_kind, sizeof *mem, mem_free) < 0)
		return -2;
	test_no_mem = getenv("REC_TEST_CHECK_NO_MEM") != NULL;
	rec_check_stacks = 1;
	return 0;
}

__attribute__((noinline)) unsigned rec_unwind_full(void **out, unsigned max, int translate)
{
	int cut = 0;
	unw_context_t uc;
	unw_cursor_t c;
	if (!get_context || get_context(&uc) < 0 || init_local(&c, &uc) < 0)
		return 0;
	unsigned n = 0;
	int own = 1;  /* still in the recorder's leading frames */
	do {
		unw_word_t ip, sp;
		if (get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (ip == (uintptr_t)rec_shadow_tramp) {
			/* the caller's frame was patched: its slot is just below
			 * the callee's CFA, which is this frame's SP */
			if (translate && get_reg(&c, UNW_REG_SP, &sp) == 0)
				n += rec_shadow_chain(sp - sizeof(uintptr_t), out + n, max - n, &cut);
			break;
		}
		if (own && ip >= own_lo && ip < own_hi)
			continue;
		own = 0;
		out[n++] = (void *)ip;
	} while (n < max && step_out(&c) > 0);
	if (cut && n < max) {
		/* the shadow ends before the stack does: walk it all again
		 * with the slots put back */
		rec_shadow_drop();
		return rec_unwind_full(out, max, 0);
	}
	return n;
}

static char *hex(char *p, char *end, uintptr_t v)
{
	char digits[HEX_DIGITS + 3] = "0x";
	for (int i = HEX_DIGITS - 1; i >= 0; i--, v >>= 4)
		digits[2 + i] = "0123456789abcdef"[v & 0xf];
	return rec_cat(p, end, digits);
}

/* One line per frame of a stack, under a line naming it. */
static void say_stack(const char *name, const uintptr_t *ips, unsigned n)
{
	char num[32], *e = num + sizeof num;
	rec_cat(rec_utoa(rec_cat(num, e, ", "), e, n), e, " frames:");
	rec_say("REC_CHECK_STACKS: ", name, num);
	for (unsigned i = 0; i < n; i++) {
		char line[HEX_DIGITS + 3];
		hex(line, line + sizeof line, ips[i]);
		rec_say("  ", line, "");
	}
}

static int equal(const uintptr_t *a, unsigned na, const uintptr_t *b, unsigned nb)
{
	return na == nb && memcmp(a, b, na * sizeof *a) == 0;
}

static void check(void *const *ips, unsigned n, int same, const struct rec_sh *h, void **walked)
{
	const uintptr_t *full = (const uintptr_t *)(const void *)walked;
	const uintptr_t *prev = mem ? mem->prev : NULL;
	unsigned depth = rec_s.depth < REC_DEPTH_MAX ? rec_s.depth : REC_DEPTH_MAX;
	if (rec_shadow_on)
		rec_shadow_hide();  /* libunwind must see the real stack, not the shadow's */
	unsigned nf = rec_unwind_full(walked, depth, 0);
	if (rec_shadow_on)
		rec_shadow_show();
	const uintptr_t *fast = (const uintptr_t *)(const void *)ips;
	if (!equal(fast, n, full, nf)) {
		rec_say(DIFFER, "the fast walk's stack is not libunwind's", "");
		say_stack("fast walk", fast, n);
		say_stack("libunwind", full, nf);
		abort();
	}
	struct rec_sh own;
	if (h && (rec_stackhash(ips, n, &own), h->a != own.a || h->b != own.b)) {
		rec_say(DIFFER, "the hash the walk worked out is not its stack's", "");
		say_stack("fast walk", fast, n);
		abort();
	}
	if (!prev) {
		/* no memory keeps the previous walk (mem could not be had while
		 * stack.c's tables could, or a signal handler's capture came
		 * while the thread's exit gives mem back): a `same` cannot be
		 * checked, so this capture is left out of stack_checks, which
		 * then falls short of the events, rather than reported as a
		 * difference */
		if (!same)
			atomic_fetch_add_explicit(&rec_s.stack_checks, 1, memory_order_relaxed);
		return;
	}
	if (same && !equal(prev, prev_n, full, nf)) {
		rec_say(DIFFER, "a stack taken for the thread's previous one is not", "");
		say_stack("previous", prev, prev_n);
		say_stack("libunwind", full, nf);
		abort();
	}
	atomic_fetch_add_explicit(&rec_s.stack_checks, 1, memory_order_relaxed);
	memcpy(mem->prev, full, nf * sizeof *full);
	prev_n = nf;
}

static __attribute__((noinline)) void check_on_stack(void *const *ips, unsigned n, int same,
						     const struct rec_sh *h)
{
	void *walked[REC_DEPTH_MAX];
	check(ips, n, same, h, walked);
}

void rec_stack_check(void *const *ips, unsigned n, int same, const struct rec_sh *h)
{
	if (!mem && !mem_gone) {
		mem = test_no_mem ? NULL : rec_map_thread(&mem_kind);
		mem_gone = !mem;
	}
	if (REC_LIKELY(mem))
		check(ips, n, same, h, mem->walked);
	else
		check_on_stack(ips, n, same, h);
}
