/*
 * shadow.c - REC_SHADOW=1: the per-thread shadow stack that lets stack.c
 * walk only the frames that changed since the thread's previous capture.
 *
 * After a walk, stack.c replaces the saved return address of each frame it
 * walked by the address of rec_shadow_tramp and pushes the original here
 * (with the address of the slot it was saved in). A frame that returns
 * lands in the trampoline, which pops its entry and jumps to the original
 * address with every return register intact. So a slot that still holds
 * the trampoline is a frame that has not returned since it was walked, and
 * the frames from it outward are the entries from its own to the bottom.
 *
 * Entries are ordered as the stack: rec_shadow[0] is the outermost frame,
 * slots grow down towards the top. An entry whose slot is below the slot
 * being returned through (or below where a new walk met the trampoline)
 * belongs to a frame that left without returning (longjmp, siglongjmp):
 * it is dropped. A pop commits the new count with a compare-and-swap, so a
 * signal handler that empties the shadow meanwhile (rec_shadow_drop) wins.
 *
 * Everything that unwinds or reads return addresses without returning
 * must see the original addresses: the exported _Unwind_RaiseException,
 * _Unwind_Resume, _Unwind_Resume_or_Rethrow, _Unwind_ForcedUnwind,
 * _Unwind_Backtrace, backtrace, pthread_exit, swapcontext and setcontext,
 * and the lookups every libgcc unwinder makes before it reads the
 * program's stack (_dl_find_object, dl_iterate_phdr: so also glibc's
 * pthread_cancel and a libgcc linked into the program), first put every
 * patched slot back (rec_shadow_drop), then jump to the next definition
 * (RTLD_NEXT) with the stack and argument registers as they came, so the
 * callee sees its caller exactly as without us. What
 * such a call allocates before it unwinds (glibc's backtrace and
 * pthread_exit load libgcc_s at their first call) must not patch the
 * frames again: a capture whose walk meets the call's return address
 * slot still holding the address it returns to is inside the call and
 * patches nothing (rec_shadow_barrier); the first that does not meet it
 * there (the call returned, or a landing pad above it runs) ends that.
 *
 * Not covered, so REC_SHADOW is off by default (README "Shadow stacks"):
 * stacks switched without swapcontext/setcontext (hand-written
 * coroutines); a program reading its own return addresses after an
 * allocation (__builtin_return_address, libunwind's unw_step, which may
 * take a frame's rules from its cache without a lookup); gdb.
 *
 * Must never: allocate, lock or call the dynamic loader in the pop or in
 * rec_shadow_drop; write a slot that does not hold the trampoline.
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <stdlib.h>

REC_TLS struct rec_shadow_ent *rec_shadow;
REC_TLS int rec_shadow_closed;
REC_TLS unsigned rec_shadow_n;
REC_TLS int rec_shadow_chained;
REC_TLS unsigned rec_shadow_drops;
REC_TLS unsigned rec_shadow_pops;
REC_TLS struct rec_sh rec_shadow_tb;
REC_TLS uintptr_t rec_shadow_barrier, rec_shadow_barrier_ra;
REC_TLS struct rec_shadow_cut rec_shadow_cut;
int rec_shadow_on;
static struct rec_thread_kind mem_kind;

/* The thread's exit (a key destructor, its first round): every live
 * patched slot is put back and the entries' memory goes. A signal
 * handler's walk before the close may have patched: the drop after it
 * puts that back too. A capture after that (a later destructor's) maps
 * the memory again and patches afresh, as a new thread would; the next
 * round gives it back (thread_mem.c). */
static void mem_free(void *arg)
{
	rec_shadow_closed = 1;  /* first: a signal handler's walk meanwhile patches nothing */
	atomic_signal_fence(memory_order_seq_cst);
	rec_shadow_drop();
	rec_shadow_n = 0;  /* what the drop kept are dead frames' */
	rec_shadow = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	rec_shadow_closed = 0;
	rec_unmap_thread(&mem_kind, arg);
}

int rec_shadow_map(void)
{
	if (rec_shadow_closed)
		return 0;
	rec_shadow = rec_map_thread(&mem_kind);
	rec_shadow_closed = !rec_shadow;
	return !rec_shadow_closed;
}

/* The trampoline a patched frame returns into: rsp = slot + 8. It saves
 * the return registers (rax, rdx, xmm0, xmm1; x87 and vector registers
 * above xmm1 are not touched by rec_shadow_pop's C), asks for the original
 * address and jumps there. The nop before it keeps an unwinder's
 * "return address - 1" out of the preceding function; its unwind rule says
 * "outermost frame", so an unwinder that meets it stops there (stack.c and
 * stack_check.c translate it through the shadow). */
__asm__(
	".text\n"
	".p2align 4\n"
	".cfi_startproc\n"
	".cfi_undefined rip\n"
	"nop\n"
	".globl rec_shadow_tramp\n"
	".hidden rec_shadow_tramp\n"
	".type rec_shadow_tramp, @function\n"
	"rec_shadow_tramp:\n"
	"	push %rax\n"
	"	push %rdx\n"
	"	sub $32, %rsp\n"
	"	movdqu %xmm0, (%rsp)\n"
	"	movdqu %xmm1, 16(%rsp)\n"
	"	lea 40(%rsp), %rdi\n"        /* the slot returned through */
	"	call rec_shadow_pop\n"
	"	mov %rax, %r11\n"
	"	movdqu (%rsp), %xmm0\n"
	"	movdqu 16(%rsp), %xmm1\n"
	"	add $32, %rsp\n"
	"	pop %rdx\n"
	"	pop %rax\n"
	"	jmp *%r11\n"
	".cfi_endproc\n"
	".size rec_shadow_tramp, .-rec_shadow_tramp\n");

/* rec_shadow_n = to if it still is from. One instruction, so a signal
 * handler of this thread sees it done or not begun; without the lock
 * prefix, since no other thread touches it. */
static inline int set_count(unsigned from, unsigned to)
{
	unsigned char done;
	__asm__ volatile("cmpxchg %3, %1\n\tsete %0"
			 : "=q"(done), "+m"(rec_shadow_n), "+a"(from)
			 : "r"(to)
			 : "memory", "cc");
	return done;
}

/* The original return address of the frame returning through slot. A
 * signal handler may run rec_shadow_drop in the middle: the count then
 * moved, the compare-and-swap fails and the pop looks again (the entry of
 * a slot being returned through no longer holds the trampoline, so the
 * drop kept it). */
__attribute__((used)) uintptr_t rec_shadow_pop(uintptr_t slot);
__attribute__((used)) uintptr_t rec_shadow_pop(uintptr_t slot)
{
	for (;;) {
		unsigned n0 = __atomic_load_n(&rec_shadow_n, __ATOMIC_RELAXED), n = n0;
		while (n && rec_shadow[n - 1].slot < slot)
			n--;  /* left by longjmp without returning */
		if (REC_UNLIKELY(!n || rec_shadow[n - 1].slot != slot)) {
			rec_say("heapreel: a return through the shadow stack's trampoline has no entry",
				" (the stack was switched unseen?); unset REC_SHADOW", "");
			abort();
		}
		uintptr_t ra = rec_shadow[n - 1].ra;
		if (set_count(n0, n - 1)) {
			rec_shadow_pops++;
			return ra;
		}
	}
}

unsigned rec_shadow_chain(uintptr_t slot, void **out, unsigned room, int *cut)
{
	*cut = 0;
	unsigned n = rec_shadow_n;
	while (n && rec_shadow[n - 1].slot < slot)
		n--;
	if (!n || rec_shadow[n - 1].slot != slot)
		return 0;
	unsigned k = 0;
	while (n && k < room)
		out[k++] = (void *)rec_shadow[--n].ra;
	*cut = n == 0 && rec_shadow[0].slot == rec_shadow_cut.slot;
	return k;
}

/* Puts back every patched slot above the caller's frame (below it are
 * dead frames, or our own) and forgets its entry. The others stay: a slot
 * that no longer holds the trampoline (a dead frame, or one returning
 * through it right now), or one below the caller (a handler on an
 * alternate stack placed above the thread's). */
void rec_shadow_drop(void)
{
	uintptr_t live = (uintptr_t)__builtin_frame_address(0);
	unsigned n = rec_shadow_n, kept = 0;
	for (unsigned i = 0; i < n; i++) {
		struct rec_shadow_ent e = rec_shadow[i];
		uintptr_t *slot = (uintptr_t *)e.slot;
		if (e.slot > live && *slot == (uintptr_t)rec_shadow_tramp)
			*slot = e.ra;
		else
			rec_shadow[kept++] = e;
	}
	atomic_signal_fence(memory_order_seq_cst);
	rec_shadow_n = kept;
	rec_shadow_drops++;
	if (kept != n)
		rec_shadow_chained = 0;  /* what is left may have lost links */
}

/* Bit 0 of an entry's slot (slots are 8-aligned): hidden by rec_shadow_hide. */
#define HIDDEN 1u

void rec_shadow_hide(void)
{
	uintptr_t live = (uintptr_t)__builtin_frame_address(0);
	for (unsigned i = 0; i < rec_shadow_n; i++) {
		uintptr_t *slot = (uintptr_t *)rec_shadow[i].slot;
		if ((uintptr_t)slot > live && *slot == (uintptr_t)rec_shadow_tramp) {
			*slot = rec_shadow[i].ra;
			rec_shadow[i].slot |= HIDDEN;
		}
	}
}

void rec_shadow_show(void)
{
	for (unsigned i = 0; i < rec_shadow_n; i++) {
		if (rec_shadow[i].slot & HIDDEN) {
			rec_shadow[i].slot &= ~(uintptr_t)HIDDEN;
			*(uintptr_t *)rec_shadow[i].slot = (uintptr_t)rec_shadow_tramp;
		}
	}
}

/* ---- what unwinds without returning ------------------------------------- */
/* Forwarders, in the order of names[]: each puts the patched slots back, then
 * jumps to the next definition of its name with the stack and the argument
 * registers (at most three) as its caller left them, so an unwinder that
 * starts from its own frame meets the caller's frame next, as without us. */
#define FORWARDS(X) \
	X(0, _Unwind_RaiseException) X(1, _Unwind_Resume) X(2, _Unwind_Resume_or_Rethrow) \
	X(3, _Unwind_ForcedUnwind) X(4, _Unwind_Backtrace) X(5, backtrace) \
	X(6, pthread_exit) X(7, swapcontext) X(8, setcontext) \
	X(9, _dl_find_object) X(10, dl_iterate_phdr)
#define NAME(i, f) #f,
static const char *const names[] = { FORWARDS(NAME) };
#define N_FORWARDS (sizeof names / sizeof *names)
static void *next_def[N_FORWARDS];
/* From here on, names[] are the lookups of an unwinder's frame rules
 * (libgcc's _Unwind_Find_FDE calls _dl_find_object, older libgcc and
 * libunwind dl_iterate_phdr): every libgcc unwinder asks one before it
 * reads a return address from the program's stack, also the ones no
 * exported name reaches (glibc's pthread_cancel, which calls libgcc_s
 * through its own pointer; a libgcc linked into the program). The
 * recorder's own calls (libunwind in stack_check.c and the fallback walk,
 * the writer's) put nothing back. */
#define FIRST_LOOKUP 9

/* The next definition of forwarder i, called from `slot`, the patched
 * slots put back first and no patching until the call is left.
 * Resolved in the constructor; one whose library came later (libgcc_s
 * loaded by a dlopen) is looked up at its first call, outside any hook. */
__attribute__((used)) void *rec_shadow_forward(unsigned i, uintptr_t slot);
__attribute__((used)) void *rec_shadow_forward(unsigned i, uintptr_t slot)
{
	if (i < FIRST_LOOKUP || !rec_guard) {
		rec_shadow_drop();
		rec_shadow_barrier = slot;
		rec_shadow_barrier_ra = *(const uintptr_t *)slot;
	}
	void *f = __atomic_load_n(&next_def[i], __ATOMIC_ACQUIRE);
	if (REC_UNLIKELY(!f)) {
		f = dlsym(RTLD_NEXT, names[i]);
		if (!f) {
			rec_say("heapreel: no definition of ", names[i], " to pass the call to");
			abort();
		}
		__atomic_store_n(&next_def[i], f, __ATOMIC_RELEASE);
	}
	return f;
}

#define FORWARD(i, f) \
	".globl " #f "\n" ".type " #f ", @function\n" #f ":\n" \
	"	.cfi_startproc\n" \
	"	push %rdi\n	.cfi_adjust_cfa_offset 8\n" \
	"	push %rsi\n	.cfi_adjust_cfa_offset 8\n" \
	"	push %rdx\n	.cfi_adjust_cfa_offset 8\n" \
	"	mov $" #i ", %edi\n" \
	"	lea 24(%rsp), %rsi\n" \
	"	call rec_shadow_forward\n" \
	"	pop %rdx\n	.cfi_adjust_cfa_offset -8\n" \
	"	pop %rsi\n	.cfi_adjust_cfa_offset -8\n" \
	"	pop %rdi\n	.cfi_adjust_cfa_offset -8\n" \
	"	jmp *%rax\n" \
	"	.cfi_endproc\n" \
	".size " #f ", .-" #f "\n"
__asm__(".text\n" FORWARDS(FORWARD));

int rec_shadow_init(void)
{
	const char *s = getenv("REC_SHADOW");
	rec_shadow_on = s && s[0] == '1' && !s[1];
	for (unsigned i = 0; i < N_FORWARDS; i++)
		next_def[i] = dlsym(RTLD_NEXT, names[i]);
	return rec_shadow_on ? rec_thread_kind_init(&mem_kind, REC_SHADOW_MAX * sizeof *rec_shadow,
						    mem_free) : 0;
}
