/*
 * stack.c - capturing the call stack of an allocation.
 *
 * Fast path: a walk driven by the DWARF CFI rules cfi.c caches per return
 * address: per frame one probe of the thread's own cache (none when the frame
 * has the return address of this thread's previous walk's frame at the
 * same depth or at the same stack pointer) and two loads from the stack.
 * On a deep stack (walk_memo) the walk stops at the first frame that starts
 * as one of the thread's previous walk and whose outer frames' loaded words
 * all still hold: the rest is that walk's, checked with independent loads
 * instead of a chain of dependent ones (the memo's comment says why it is
 * exact). Either walk hashes only the frames it does not share with the
 * previous walk (stackhash.c says why that is the same hash). The
 * recorder's own frames are left through their frame pointers (libheapreel.so is
 * built with -fno-omit-frame-pointer), which gives the call site's return
 * address, stack pointer and frame pointer without unw_getcontext.
 * If any frame's rule is not expressible (cfi.c says when), or a step does
 * not move up the stack, the whole stack is captured again by libunwind, so
 * the result is always what a full DWARF unwind gives.
 *
 * libunwind's unw_backtrace walks the stack with DWARF CFI (Debian's libc
 * and libstdc++ have no frame pointers, so a frame-pointer walk alone would
 * truncate stacks) and caches what it learnt per return address.
 *
 * Debian's libunwind.a is not PIC (R_X86_64_32 and local-exec TLS relocations
 * in its text), so it cannot be linked into libheapreel.so. Linking libunwind.so
 * normally would put its _Unwind_* into the program's global symbol scope and
 * the program's C++ exceptions would bind to them (5x slower). So libheapreel.so
 * loads libunwind.so with dlopen(RTLD_LOCAL) in its constructor: its symbols
 * stay out of the global scope and only we call it, through a pointer.
 *
 * The recorder's own frames (the interposed function and what it calls) are
 * skipped by address: every leading frame inside libheapreel.so's text.
 *
 * A call made while this thread's hook records is walked without the memo
 * and the rule cache (the interrupted walk may be using them, or be half
 * way through writing an entry), without waiting for cfi.c's
 * insert lock (the interrupted code may hold it) and without libunwind. The
 * walk tells where the call comes from: it reaches a frame of libheapreel.so if
 * the real allocator the hook called made it, and stops first at the
 * kernel's signal frame (which the rules cannot step out of) if a signal
 * handler did. A handler's stack, recorded through nested.c, so holds the
 * handler's frames and the signal trampoline, not what the signal
 * interrupted.
 *
 * Under REC_SHADOW=1 the walk is walk_shadow: it stops at the first
 * return address slot that holds shadow.c's trampoline and takes the
 * frames beyond from the thread's shadow stack, then patches the slots it
 * walked. Exact because a slot is written by the call that made its frame:
 * one on the chain that holds the trampoline was patched during that
 * frame's life, so no frame from it outward has returned since the walk
 * that patched it (frames that left without returning are below it, and
 * their entries are dropped). It falls back to libunwind (which stops at
 * the trampoline; the shadow gives the rest, rec_unwind_full) where the
 * rules cannot step. A stack deeper than REC_SHADOW_MAX keeps only its
 * innermost REC_SHADOW_MAX frames in the shadow, and the register state
 * of the last (rec_shadow_cut) to walk on from. README "Shadow stacks"
 * says where else the method cannot see, and why it is off by default.
 *
 * Under REC_CHECK_STACKS=1 every capture is checked against a full
 * libunwind walk (stack_check.c).
 *
 * Must never: run dlopen/dlsym outside rec_stack_init (the constructor).
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <libunwind.h>
#include <string.h>

#ifndef REC_LIBUNWIND_SONAME
#error "meson passes -DREC_LIBUNWIND_SONAME"
#endif

/* The recorder's frames above the call site (capture, note_alloc or
 * resize, the interposed function or the out-of-line half it tail-calls):
 * fewer than REC_STACK_SLOTS - REC_DEPTH_MAX. */
#define OWN_FRAMES_MAX (REC_STACK_SLOTS - REC_DEPTH_MAX)

/* Per thread, the previous walk: every frame's return address, the stack
 * and frame pointers it was found with and its rule, outermost first, and
 * what stepping out of the outermost gave. Consecutive stacks of a thread
 * share their outer frames, and a walk is a function of its start (return
 * address, stack and frame pointers), of the rules (fixed for a return
 * address within one cfi.c epoch) and of the words it loads from the
 * stack. So when the walk meets a frame that starts as one the previous
 * walk met, it only checks that each word that walk loaded beyond it
 * still holds what it held: the rest of the stack is then exactly the
 * previous walk's. Those loads come from known addresses and are
 * independent, where a walk is a chain of dependent loads (each frame's
 * address says where the next one is): the unchanged outer frames cost
 * far less, though still a load each. The previous walk's frames are met in order of
 * their stack pointers, not of their depth, so a stack whose inner end
 * grew or shrank (a deep interpreter's) still finds them; a frame met
 * with its return address but another frame pointer takes its rule.
 *
 * The list is circular (logical index i, 0 the outermost, is slot
 * (memo_base + i) % MEMO_FRAMES), so that dropping outer frames (a deeper
 * stack cut at the depth limit) or adding them moves no entry. A stack
 * deeper than MEMO_FRAMES is not kept. */
#define MEMO_FRAMES REC_DEPTH_DEFAULT   /* a power of two */
struct frame {
	uintptr_t ip, sp, bp;
	uint64_t rule;
	const uintptr_t *slot;    /* where the walk loaded ip from */
	const uintptr_t *bpload;  /* and bp (NULL: the inner frame's) */
	const uintptr_t *bpslot;  /* bpload if a frame from here outward reads bp,
				   * else &bp: what holds() checks */
	int bp_read;              /* the walk from here outward reads bp as it is here */
	struct rec_sh t;          /* the hash chain's value here (stackhash.c) */
};
static REC_TLS unsigned memo_base;
static REC_TLS unsigned memo_n;         /* frames of the previous capture; 0 = not a walk */
/* Past the outermost frame: the state its step gave (ip 0 when the stack
 * ended there, or the frame the depth limit left out), if memo_more;
 * else its rule said it was the outermost. */
static REC_TLS struct frame memo_past;
static REC_TLS int memo_more;
/* The hash chain's value outside the memo's outermost frame: the chain
 * starts from 0 at a walk that met no frame of the memo, and what the
 * depth limit drops or walk_past adds at the outer end keeps it going,
 * so the hash of the memo's frames is the span from it to the innermost
 * frame's value, however the outer end moved. */
static REC_TLS struct rec_sh memo_tb;
/* Only a thread whose previous stack was at least MEMO_DEEP frames deep
 * keeps and looks for its frames: on a shallower stack the bookkeeping
 * (and the look's mispredicted branches, where stacks change at random
 * depths) costs more than the frames it saves. */
#define MEMO_DEEP 48
static REC_TLS unsigned walk_depth;    /* frames of the thread's previous walk */
/* The previous shallow walk (walk_plain), innermost first, and the one
 * being made: they take turns. */
struct plain {
	uintptr_t ip, sp;
	uint64_t rule;
};
static REC_TLS unsigned plain_cur;     /* plain[plain_cur] is the previous walk */
static REC_TLS unsigned plain_n;       /* its frames; 0 = not a shallow walk */
/* The hash chain's value (stackhash.c) at the shallow walks' frames,
 * indexed from the outermost: the value at a frame depends only on the
 * frames from it outward, so a walk that ends in the previous one's
 * outer frames finds their values where that walk left them, and steps
 * the chain over its new inner frames only. The first plain_t_n hold the
 * previous walk's. */
static REC_TLS unsigned plain_t_n;
static REC_TLS int plain_alike;        /* the previous walk shared half its frames */
/* This walk's new frames, innermost first, before they join the memo
 * (where their words were loaded from follows from the inner frame's
 * rule: memo_join works it out). */
struct fresh {
	uintptr_t ip, sp, bp;
	uint64_t rule;
};

/* In a thread's tables, rules by return address, direct-mapped, behind
 * the memo and in front of cfi.c's shared cache: a frame the memo misses
 * is most often one this thread walked a few stacks ago, and a probe of
 * the shared table (2 MiB, one address per cache line and most per page)
 * is a cache and TLB miss. */
#define NEAR_LOG 9
#define NEAR_SLOTS (1u << NEAR_LOG)
struct near {
	uintptr_t ip;                 /* 0: empty */
	uint64_t rule;
};

/* The tables above, 23 KiB a thread (a mapping of 24), in memory of
 * their own, not TLS (thread_mem.c says why): had at the thread's first
 * capture and given back at its exit, by the first round of its key's
 * destructor. A capture after that (a later destructor's allocation)
 * takes tables again, as a new thread would, and sets the key again, so
 * the next round gives them back: a thread keeps tables past its end only
 * if it captures in glibc's last round (PTHREAD_DESTRUCTOR_ITERATIONS),
 * after our destructor. Had we kept them until that round instead, a
 * thread whose first capture is in a destructor would count its rounds
 * late and never give them back (24 KiB a thread). */
struct tables {
	struct frame memo[MEMO_FRAMES];
	struct plain plain[2][MEMO_FRAMES];
	struct rec_sh plain_t[MEMO_FRAMES];
	struct fresh fresh[MEMO_FRAMES];
	struct near near[NEAR_SLOTS];
	/* the cfi.c epoch near's rules and the memo's are of (0 in a new
	 * mapping; walk_shadow, under REC_SHADOW=1, which uses no memo,
	 * keeps it for near only): near's rules are the process's, so
	 * tables taken again (another thread's, or this one's after
	 * forget_tables) keep theirs while the epoch holds */
	uint64_t epoch;
	/* walk_shadow's: the return address slots of the frames walked, and
	 * their RBP, to patch (never wanted by two walks at once: a hook a
	 * signal handler runs inside ours walks as nested.c's) */
	uintptr_t slots[REC_SHADOW_MAX], bps[REC_SHADOW_MAX];
	void *room[REC_STACK_SLOTS];  /* rec_stack_room */
};
static REC_TLS struct tables *tb;
static REC_TLS int tb_gone;             /* none to be had, or being given back */
static struct rec_thread_kind tb_kind;

/* What this thread knows of its tables' content, as in a new thread: a
 * table taken again may be another thread's, and is written before read
 * from this state (but for near, whose rules hold for every thread). */
static void forget_tables(void)
{
	rec_stack_forget();  /* the previous walk, as far as a `same` goes */
	memo_base = 0;
	memo_more = 0;
	memo_past = (struct frame){ 0 };
	memo_tb = (struct rec_sh){ 0 };
	plain_cur = plain_t_n = 0;
	plain_alike = 0;
}

static void tables_free(void *arg)
{
	tb_gone = 1;  /* first: a signal handler's hook meanwhile maps none */
	atomic_signal_fence(memory_order_seq_cst);
	tb = NULL;    /* then: no handler walks with the state being reset */
	atomic_signal_fence(memory_order_seq_cst);
	forget_tables();
	atomic_signal_fence(memory_order_seq_cst);
	tb_gone = 0;  /* a later capture takes tables again */
	rec_unmap_thread(&tb_kind, arg);
}

uint64_t rec_stack_tables_mapped(void)
{
	return atomic_load_explicit(&tb_kind.mapped, memory_order_relaxed);
}

/* This thread's tables, had at its first capture: 0 if it has none. */
static inline int tables(void)
{
	if (REC_LIKELY(tb))
		return 1;
	if (tb_gone)
		return 0;
	tb = rec_map_thread(&tb_kind);
	tb_gone = !tb;
	return !tb_gone;
}

void **rec_stack_room(void)
{
	return tables() ? tb->room : NULL;
}

static inline struct frame *memo_at(unsigned i)
{
	return &tb->memo[(memo_base + i) & (MEMO_FRAMES - 1)];
}

static inline uint64_t rule_of(uintptr_t ip, uint64_t epoch)
{
	struct near *e = &tb->near[(ip * 0x9e3779b97f4a7c15ull) >> (64 - NEAR_LOG)];
	if (REC_LIKELY(e->ip == ip))
		return e->rule;
	uint64_t rule = rec_cfi_find(ip, epoch);
	*e = (struct near){ ip, rule };
	return rule;
}

static __typeof__(unw_backtrace) *unw_bt;
static uintptr_t self_lo, self_hi;    /* libheapreel.so's executable segments */

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uintptr_t me = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (me < lo || me >= hi)
		return 0;
	self_lo = lo;
	self_hi = hi;
	return 1;
}

int rec_stack_init(void)
{
	static int ready;          /* an attach after a failed one tries again */
	if (ready)
		return 0;
	rec_stackhash_init();
	if (!rec_walk_objects(find_self, (void *)(uintptr_t)rec_stack_init))
		return -1;
	void *h = dlopen(REC_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	*(void **)&unw_bt = dlsym(h, "unw_backtrace");
	if (!unw_bt)
		return -1;
	int rc = rec_thread_kind_init(&tb_kind, sizeof *tb, tables_free);
	if (rc == 0)
		rc = rec_shadow_init();
	if (rc == 0)
		rc = rec_stack_check_init(h, self_lo, self_hi);
	ready = rc == 0;
	return rc;
}

/* Leaves the recorder's own frames through their frame pointers, from fp
 * (a frame of libheapreel.so): the return address into the interposed
 * function's caller (its frame's, or that of the out-of-line half it
 * tail-called), the caller's stack pointer and frame pointer. 0 if not
 * found. */
static inline int call_site(const uintptr_t *fp, uintptr_t *ip, uintptr_t *sp, uintptr_t *bp)
{
	for (unsigned k = 0; k < OWN_FRAMES_MAX; k++) {
		if (fp[1] < self_lo || fp[1] >= self_hi) { /* the outermost frame of libheapreel.so */
			*ip = fp[1];
			*sp = (uintptr_t)(fp + 2);
			*bp = fp[0];
			return *ip != 0;
		}
		fp = (const uintptr_t *)fp[0];
	}
	return 0;
}

/* Steps out of the frame of return address *ip with its rule: 1, or 0 at
 * the outermost frame, or -1 if the rule cannot say (or would not move up
 * the stack). */
static inline int step(uint64_t rule, uintptr_t *ip, uintptr_t *sp, uintptr_t *bp)
{
	unsigned flags = rec_rule_flags(rule);
	if (flags & REC_RULE_LAST)
		return 0;
	if (!(flags & REC_RULE_OK))
		return -1;
	uintptr_t cfa = (flags & REC_RULE_CFA_RBP ? *bp : *sp) + (uintptr_t)rec_rule_cfa_off(rule);
	if (REC_UNLIKELY(cfa <= *sp))
		return -1;
	if (rec_rule_rbp_off(rule))
		*bp = *(const uintptr_t *)(cfa + (intptr_t)rec_rule_rbp_off(rule));
	*ip = *(const uintptr_t *)(cfa + (intptr_t)rec_rule_ra_off(rule));
	*sp = cfa;
	return 1;
}

/* The words the walk loaded to reach frame f still hold what they did. */
static inline int holds(const struct frame *f)
{
	return (*f->slot == f->ip) & (*f->bpslot == f->bp);
}

/* How many of the memo's frames, from the outermost, a walk may stop at
 * and take the rest from, as far as frame k: a walk stopping at frame j
 * relies on the words that gave frames 0..j-1 and what lay past the
 * outermost, so the first of those that no longer holds (a word changed)
 * bounds j; k + 1 if all up to frame k still hold. */
static unsigned memo_valid(unsigned k)
{
	if (memo_more && !holds(&memo_past))
		return 0;
	for (unsigned i = 0; i < k; i++)
		if (!holds(memo_at(i)))
			return i + 1;
	return k + 1;
}

/* Where holds() checks a frame's bp, once the frame is where it stays
 * and its bp_read is known. */
static inline void set_bpslot(struct frame *m)
{
	m->bpslot = m->bpload && m->bp_read ? m->bpload : &m->bp;
}

/* Frame m's words were loaded by the step out of a frame with rule
 * `inner` (m.sp is that step's CFA). */
static inline void set_loads(struct frame *m, uint64_t inner)
{
	int16_t rbp = rec_rule_rbp_off(inner);
	m->slot = (const uintptr_t *)(m->sp + (intptr_t)rec_rule_ra_off(inner));
	m->bpload = rbp ? (const uintptr_t *)(m->sp + rbp) : NULL;
}

/* Whether a walk from frame f reads its frame pointer before it reloads
 * it: its own rule's CFA, or a frame beyond it that gets the same value. */
static inline int reads_bp(uint64_t rule, int beyond)
{
	return (rec_rule_flags(rule) & REC_RULE_CFA_RBP) || (!rec_rule_rbp_off(rule) && beyond);
}

/* The walk's new frames fresh[0..c) (innermost first) become the memo's
 * inner end, above its frame k (none: k = -1, the walk met no frame of
 * the memo); the memo's frames below `keep_from` (logical) are dropped. */
static void memo_join(unsigned c, int k, unsigned keep_from)
{
	if (k < 0) {
		memo_base = 0;
		memo_past.bp_read = memo_more;  /* a later walk may go on from it */
		set_bpslot(&memo_past);
	} else {
		memo_base += keep_from;
		k -= (int)keep_from;
	}
	int beyond = k < 0 ? memo_past.bp_read : memo_at((unsigned)k)->bp_read;
	struct rec_sh t = k < 0 ? memo_tb : memo_at((unsigned)k)->t;
	for (unsigned j = 0; j < c; j++) {
		const struct fresh *fr = &tb->fresh[c - 1 - j];
		struct frame *m = memo_at((unsigned)(k + 1) + j);
		m->t = t = rec_sh_in(t, fr->ip);
		m->ip = fr->ip;
		m->sp = fr->sp;
		m->bp = fr->bp;
		m->rule = fr->rule;
		if (j + 1 < c)
			set_loads(m, tb->fresh[c - 2 - j].rule);
		m->bp_read = beyond = reads_bp(m->rule, beyond);
		set_bpslot(m);
	}
	memo_n = (unsigned)(k + 1) + c;
	/* no walk checks the innermost frame's words (a walk that meets it
	 * checks only the frames beyond): it points at its own */
	struct frame *in = memo_at(memo_n - 1);
	in->slot = &in->ip;
	in->bpslot = &in->bp;
}

/* Walks on outward from the memo's outermost frame's successor
 * (memo_past) while buf has room: the memo gains the frames at its outer
 * end. The new n, or -1 if the rules cannot say. */
static int walk_past(void **buf, unsigned n, unsigned max, uint64_t epoch)
{
	struct frame f = memo_past, to;
	int more = 1;
	while (f.ip && n < max) {
		f.rule = rule_of(f.ip, epoch);
		buf[n++] = (void *)f.ip;
		to = f;
		int s = step(f.rule, &to.ip, &to.sp, &to.bp);
		if (s < 0)
			return -1;
		set_loads(&to, f.rule);
		if (memo_n && memo_n < MEMO_FRAMES) {
			memo_base--;
			memo_n++;
			struct frame *m = memo_at(0);
			*m = f;
			m->t = memo_tb;
			memo_tb = rec_sh_out(memo_tb, f.ip);
			m->bp_read = 1;  /* what lies beyond is not known yet */
			set_bpslot(m);
		} else {
			memo_n = 0;  /* deeper than the memo holds */
		}
		if (s == 0) {
			more = 0;
			break;
		}
		f = to;
	}
	memo_past = f;
	memo_past.bp_read = 1;
	set_bpslot(&memo_past);
	memo_more = more;
	return (int)n;
}

/* A Horner step waits for the multiply before it, where rec_stackhash's
 * multiplies overlap: stepping over a walk's new frames pays while they
 * are at most about half of its frames. */
#define PLAIN_STEPS(n) ((n) / 2)

/* The hash of a shallow walk's n frames buf[], whose outermost `shared`
 * were the previous walk's outermost too: the chain's values at those
 * come from plain_t (as far as it holds them), and it steps over the
 * rest (*hashed), if they are few enough; else the caller hashes. The
 * second of two walks that each shared at least half their frames with
 * the one before steps over all its frames if it must: the walks after
 * it will share them too (sqlite3's). One alike walk alone is no sign
 * (one in 15 of churn's, whose call paths change at random depths). */
static void plain_hash(void *const *buf, unsigned n, unsigned shared,
		       struct rec_sh *h, int *hashed)
{
	int alike = plain_alike;
	plain_alike = shared >= n - PLAIN_STEPS(n);
	if (n > MEMO_FRAMES) {
		plain_t_n = 0;
		return;
	}
	unsigned from = shared < plain_t_n ? shared : plain_t_n;  /* values still right */
	if (n - from > PLAIN_STEPS(n) && !(alike && plain_alike)) {
		plain_t_n = from;
		return;
	}
	struct rec_sh t = from ? tb->plain_t[from - 1] : (struct rec_sh){ 0, 0 };
	for (unsigned k = from; k < n; k++)
		tb->plain_t[k] = t = rec_sh_in(t, (uintptr_t)buf[n - 1 - k]);
	plain_t_n = n;
	*h = t;
	*hashed = 1;
	if (REC_UNLIKELY(rec_check_stacks) && from)
		atomic_fetch_add_explicit(&rec_s.plain_hashes, 1, memory_order_relaxed);
}

/* The CFI walk of a shallow stack, from its innermost frame f: the
 * previous shallow walk's return addresses and rules stand in front of
 * the rule caches (a hit needs no hash). A rule depends on the return
 * address only, so any of that walk's frames with the same address will
 * do; the one looked at first is at the same depth, or once the walk met
 * a frame of the previous one at the same stack pointer (the same outer
 * frames, under inner ones that changed), at that frame's offset. A walk
 * whose every frame hits at its own depth, as deep as the previous walk,
 * is the previous stack. Its hash comes from plain_hash. As walk(). */
static int walk_plain(struct frame f, void **buf, unsigned max, int *same,
		      struct rec_sh *h, int *hashed, uint64_t epoch)
{
	const struct plain *prev = tb->plain[plain_cur];
	struct plain *next = tb->plain[plain_cur ^ 1];
	unsigned n = 0, hits = 0, pn = plain_n, q = 0, d = 0;  /* prev[n + d]: the guess */
	unsigned run = UINT_MAX;  /* frames from run to n - 1 have prev's at n + d */
	while (n < max) {
		const struct plain *g = n + d < pn ? &prev[n + d] : NULL;
		if (g && g->ip == f.ip) {
			f.rule = g->rule;
			hits += d == 0;
			if (run == UINT_MAX)
				run = n;
		} else if (g && g->sp == f.sp) {
			f.rule = rule_of(f.ip, epoch);  /* in line, but another caller */
			run = UINT_MAX;
		} else {
			while (q < pn && prev[q].sp < f.sp)
				q++;
			if (q < pn && prev[q].sp == f.sp && prev[q].ip == f.ip) {
				f.rule = prev[q].rule;
				d = q - n;
				run = n;
			} else {
				f.rule = rule_of(f.ip, epoch);
				run = UINT_MAX;
			}
		}
		if (n < MEMO_FRAMES)
			next[n] = (struct plain){ f.ip, f.sp, f.rule };
		buf[n++] = (void *)f.ip;
		int s = step(f.rule, &f.ip, &f.sp, &f.bp);
		if (s < 0)
			return -1;
		if (s == 0 || !f.ip)
			break;
	}
	*same = hits == n && n == pn;  /* hits at the same depth, below MEMO_FRAMES */
	plain_n = n < MEMO_FRAMES ? n : MEMO_FRAMES;
	plain_cur ^= 1;
	/* the outer frames this walk shares with the previous one, whole */
	unsigned shared = run != UINT_MAX && n + d == pn ? n - run : 0;
	plain_hash(buf, n, shared, h, hashed);
	return (int)n;
}

/* The CFI walk of a deep stack, from its innermost frame f, with the
 * memo: as walk(). */
static int walk_memo(struct frame f, void **buf, unsigned max, int *same, uint64_t epoch)
{
	unsigned mn = memo_n, q = mn, c = 0;  /* memo frames below q: not yet passed */
	unsigned valid = UINT_MAX;            /* memo_valid(), once asked */
	int more = 1;                         /* the walk's memo_more */
	while (c < max) {
		while (q && memo_at(q - 1)->sp < f.sp)
			q--;  /* frames of the previous walk that returned */
		struct frame *m = q ? memo_at(q - 1) : NULL;
		if (m && m->sp == f.sp && m->ip == f.ip) {
			if (valid == UINT_MAX)
				valid = memo_valid(q - 1);  /* later matches are further out */
			if ((!m->bp_read || m->bp == f.bp) && q - 1 < valid) {
				/* the rest is the previous walk's */
				if (REC_UNLIKELY(rec_check_stacks))
					atomic_fetch_add_explicit(&rec_s.memo_hits, 1, memory_order_relaxed);
				unsigned k = q - 1, take = k + 1 < max - c ? k + 1 : max - c;
				/* a stack the memo can hold whole is hashed from it, and
				 * its frames are copied only if needed (rec_stack_fill) */
				if (max > MEMO_FRAMES)
					for (unsigned i = 0; i < take; i++)
						buf[c + i] = (void *)memo_at(k - i)->ip;
				*same = c == 0 && k == mn - 1;
				if (*same)
					return (int)mn;
				unsigned n = c + take, drop = k + 1 - take;
				if (n > MEMO_FRAMES) {
					memo_n = 0;
					return (int)n;
				}
				if (c) {  /* its inner frame is this walk's now */
					struct frame *mk = memo_at(k);
					set_loads(mk, tb->fresh[c - 1].rule);
					set_bpslot(mk);
				}
				if (drop) {
					memo_tb = memo_at(drop - 1)->t;
					memo_past = *memo_at(drop - 1);
					set_bpslot(&memo_past);
					memo_more = 1;
				}
				memo_join(c, (int)k, drop);
				if (!drop && memo_more && memo_past.ip && n < max)
					return walk_past(buf, n, max, epoch);
				return (int)n;
			}
			f.rule = m->rule;
		} else {
			f.rule = rule_of(f.ip, epoch);
		}
		if (c < MEMO_FRAMES)
			tb->fresh[c] = (struct fresh){ f.ip, f.sp, f.bp, f.rule };
		buf[c++] = (void *)f.ip;
		int s = step(f.rule, &f.ip, &f.sp, &f.bp);
		if (s < 0)
			return -1;  /* not expressible, or not moving up: let libunwind judge */
		if (s == 0 || !f.ip) {
			more = s != 0;
			break;
		}
	}
	memo_past = f;
	set_loads(&memo_past, f.rule);  /* f.rule: the frame it stepped out of */
	memo_more = more;
	memo_tb = (struct rec_sh){ 0, 0 };
	if (c <= MEMO_FRAMES)
		memo_join(c, -1, 0);
	else
		memo_n = 0;
	return (int)c;
}

/* The CFI walk: the number of frames put in buf, or -1 to use libunwind.
 * *same: the frames are exactly those of the thread's previous capture;
 * *h: their hash, if the walk worked it out from the previous walk's
 * figures (*hashed; after walk_memo buf may then lack the frames the memo
 * gave, rec_stack_fill). */
static __attribute__((noinline)) int walk(void **buf, unsigned max, int *same,
					  struct rec_sh *h, int *hashed)
{
	uint64_t epoch = rec_cfi_epoch();
	if (epoch == UINT64_MAX || !tables())
		return -1;
	struct frame f = { 0 };
	if (!call_site(__builtin_frame_address(0), &f.ip, &f.sp, &f.bp))
		return -1;
	if (REC_UNLIKELY(tb->epoch != epoch)) {
		memset(tb->near, 0, sizeof tb->near);
		tb->epoch = epoch;
		memo_n = plain_n = 0;
	}
	*same = 0;
	int n;
	if (walk_depth >= MEMO_DEEP) {
		plain_n = 0;
		n = walk_memo(f, buf, max, same, epoch);
		if (n > 0 && memo_n == (unsigned)n) {
			*h = rec_sh_span(memo_at(memo_n - 1)->t, memo_tb, memo_n);
			*hashed = 1;
		}
	} else {
		memo_n = 0;
		n = walk_plain(f, buf, max, same, h, hashed, epoch);
	}
	walk_depth = n < 0 ? 0 : (unsigned)n;
	return n;
}

/* The innermost frames a shadow walk leaves unpatched: the allocation's
 * caller and its wrappers (sqlite3MemMalloc < sqlite3Malloc, Python's
 * PyMem layers) mostly return right after it, and a return through the
 * trampoline (two mispredicted jumps, the pop) costs more than stepping
 * out of those frames again at the next capture. */
#define SHADOW_SKIP 3

/* Per thread, whether shadow walks patch what they walked. Patching pays
 * when the frames patched stay: the next captures take them from the
 * shadow instead of walking them (pychurn.py). Where they return soon
 * (churn's call chains change at random depths) each return through the
 * trampoline (two mispredicted jumps and the pop) costs more than the
 * frames it saved: churn took 2.94x its unrecorded CPU time patching
 * every walk, against 2.25x without REC_SHADOW. So every POLICY_CAPTURES
 * captures a thread weighs its returns through the trampoline, at
 * POP_FRAMES frames each, against the frames its walks took from the
 * shadow, and stops patching for the next POLICY_RETRY windows if they
 * cost more; the patched frames it keeps are still used (churn: 2.26x). */
#define POLICY_CAPTURES 256
#define POP_FRAMES 4
#define POLICY_RETRY 16
static REC_TLS unsigned policy_captures, policy_reused, policy_pops_at, policy_off;

/* One capture more under the policy, which took `reused` frames from the
 * shadow: may this thread's walks patch? */
static inline int shadow_policy(unsigned reused)
{
	policy_reused += reused;
	if (REC_LIKELY(++policy_captures < POLICY_CAPTURES))
		return !policy_off;
	unsigned pops = rec_shadow_pops - policy_pops_at;
	if (policy_off)
		policy_off = policy_off < POLICY_RETRY ? policy_off + 1 : 0;
	else
		policy_off = (uint64_t)pops * POP_FRAMES > policy_reused;
	if (REC_UNLIKELY(rec_check_stacks) && policy_off)
		atomic_fetch_add_explicit(&rec_s.shadow_quiet, 1, memory_order_relaxed);
	policy_pops_at = rec_shadow_pops;
	policy_captures = policy_reused = 0;
	return !policy_off;
}

/* Per thread, what the previous shadow walk began with: the frames the
 * same stack walks again (their number and return addresses) and the
 * slot holding the trampoline it then meets; slot 0: not known. */
static REC_TLS uintptr_t shadow_first_slot;
static REC_TLS void *shadow_first_ips[SHADOW_SKIP + 1];
static REC_TLS unsigned shadow_first_t;

/* Where the frames of a hashed shadow walk are, to copy them out only if
 * they are needed (rec_stack_fill): if lazy, buf's from `from` on are the
 * entries k-1 downward, while rec_shadow_drops is still `drops`. */
static REC_TLS struct shadow_fill {
	int lazy;
	unsigned k, from;
	unsigned drops;
} shadow_fill;

/* The shadow's frames of a walk into buf[from..n): entries k-1 downward. */
static void shadow_copy(void **buf, unsigned from, unsigned n, unsigned k)
{
	for (unsigned j = from; j < n; j++)
		buf[j] = (void *)rec_shadow[k - 1 - (j - from)].ra;
}

/* How a shadow walk ended. */
enum shadow_end { END_OUTERMOST, END_TRAMP, END_CUT };

/* Makes room for `need` entries above the first `keep`: the outermost
 * entries are put back in their slots and forgotten. The entries left. */
static unsigned shadow_room(unsigned keep, unsigned need)
{
	if (keep + need <= REC_SHADOW_MAX)
		return keep;
	unsigned out = keep + need - REC_SHADOW_MAX;
	rec_shadow_n = 0;             /* nothing to translate while this runs */
	atomic_signal_fence(memory_order_seq_cst);
	for (unsigned i = 0; i < out; i++) {
		uintptr_t *slot = (uintptr_t *)rec_shadow[i].slot;
		if (*slot == (uintptr_t)rec_shadow_tramp)
			*slot = rec_shadow[i].ra;
	}
	keep -= out;
	rec_shadow_tb = rec_shadow[out - 1].t;  /* the chain goes on from there */
	memmove(rec_shadow, rec_shadow + out, keep * sizeof *rec_shadow);
	return keep;
}

/* Patches the slots of the m frames walked (slots[j] held buf[j + 1],
 * with RBP bps[j]) above the first `keep` shadow entries, making room;
 * cut: the outermost entry is not the outermost frame. The entries are
 * written and counted before any slot holds the trampoline, so a
 * siglongjmp out of a handler meanwhile leaves no patched slot without
 * its entry. */
static void shadow_patch(void *const *buf, const uintptr_t *slots, const uintptr_t *bps,
			 unsigned m, unsigned keep, int cut)
{
	unsigned left = shadow_room(keep, m);
	cut |= left < keep;
	keep = left;
	if (!keep) {  /* a new chain */
		rec_shadow_tb = (struct rec_sh){ 0, 0 };
		rec_shadow_chained = 1;
	}
	struct rec_sh t = keep ? rec_shadow[keep - 1].t : rec_shadow_tb;
	for (unsigned j = m; j-- > 0;) {
		t = rec_sh_in(t, (uintptr_t)buf[j + 1]);
		rec_shadow[keep + m - 1 - j] = (struct rec_shadow_ent){ (uintptr_t)buf[j + 1], slots[j], bps[j], t };
	}
	if (cut)
		rec_shadow_cut = (struct rec_shadow_cut){ rec_shadow[0].slot,
			rec_shadow[0].slot + sizeof(uintptr_t), rec_shadow[0].bp };
	else if (!keep)
		rec_shadow_cut.slot = 0;  /* the outermost entry is the outermost frame */
	rec_shadow_n = keep + m;
	atomic_signal_fence(memory_order_seq_cst);
	for (unsigned j = 0; j < m; j++)
		*(uintptr_t *)slots[j] = (uintptr_t)rec_shadow_tramp;
}

/* The frames past a cut shadow (rec_shadow_cut), from the frame of
 * return address ip, into buf from n up to max: the new n, or -1 if the
 * rules cannot say. */
static int walk_on(void **buf, unsigned n, unsigned max, uintptr_t ip, uint64_t epoch)
{
	uintptr_t sp = rec_shadow_cut.sp, bp = rec_shadow_cut.bp;
	while (n < max) {
		int s = step(rule_of(ip, epoch), &ip, &sp, &bp);
		if (s == 0)
			break;
		if (s < 0 || ip == (uintptr_t)rec_shadow_tramp)
			return -1;
		buf[n++] = (void *)ip;
	}
	return (int)n;
}

/* The shadow walk (REC_SHADOW=1): the CFI walk of the frames that changed,
 * up to the first slot that holds the trampoline; the frames beyond are
 * the shadow's. The frames walked are then patched (shadow.c). A walk that
 * meets neither the trampoline nor the outermost frame within
 * REC_SHADOW_MAX frames patches those and leaves the shadow cut there
 * (rec_shadow_cut: a later walk that needs more frames walks on from it).
 * The number of frames put in buf, or -1 to use libunwind; *h: their
 * hash, when the shadow's chain gives it (*hashed). */
static __attribute__((noinline)) int walk_shadow(void **buf, unsigned max, int *same,
						 struct rec_sh *h, int *hashed)
{
	uint64_t epoch = rec_cfi_epoch();
	if (epoch == UINT64_MAX || !tables() || !rec_shadow_ready())
		return -1;
	uintptr_t ip, sp, bp, tramp = (uintptr_t)rec_shadow_tramp, x = 0;
	if (!call_site(__builtin_frame_address(0), &ip, &sp, &bp))
		return -1;
	if (REC_UNLIKELY(tb->epoch != epoch)) {
		memset(tb->near, 0, sizeof tb->near);
		tb->epoch = epoch;
	}
	uintptr_t *slots = tb->slots, *bps = tb->bps;
	unsigned t = 0, m = 0;             /* frames in buf; slots staged */
	int staging = 1;                   /* every frame so far staged */
	/* inside a call that unwinds (its return slot on the walk, still
	 * returning to where it did): 1, outside 0, not known yet -1 */
	uintptr_t barrier = rec_shadow_barrier;
	int inside = barrier ? -1 : 0;
	enum shadow_end end = END_CUT;
	unsigned reused = 0;               /* frames taken from the shadow */
	for (;;) {
		buf[t++] = (void *)ip;
		if ((m == REC_SHADOW_MAX || !staging) && t >= max)
			break;         /* nothing more to patch, and buf is full */
		uint64_t rule = rule_of(ip, epoch);
		unsigned flags = rec_rule_flags(rule);
		if (flags & REC_RULE_LAST) {
			end = END_OUTERMOST;
			break;
		}
		uintptr_t cfa = (flags & REC_RULE_CFA_RBP ? bp : sp) + (uintptr_t)rec_rule_cfa_off(rule);
		if (!(flags & REC_RULE_OK) || cfa <= sp) {
			if (t < max)
				return -1;  /* not expressible, or not moving up: let libunwind judge */
			m = 0;             /* the frames past max only mattered for patching */
			break;
		}
		if (rec_rule_rbp_off(rule))
			bp = *(const uintptr_t *)(cfa + (intptr_t)rec_rule_rbp_off(rule));
		uintptr_t slot = cfa + (intptr_t)rec_rule_ra_off(rule);
		ip = *(const uintptr_t *)slot;
		sp = cfa;
		if (REC_UNLIKELY(inside < 0) && slot >= barrier)
			inside = slot == barrier && ip == rec_shadow_barrier_ra;
		if (ip == tramp) {
			x = slot;
			end = END_TRAMP;
			break;
		}
		staging &= slot + sizeof(uintptr_t) == cfa;  /* where `ret` reads it */
		if (m < REC_SHADOW_MAX && staging) {
			bps[m] = bp;
			slots[m++] = slot;
		}
	}
	unsigned n = t < max ? t : max;
	/* every frame walked has its slot staged, or the shadow's room */
	int patch = staging && (end == END_CUT ? m == REC_SHADOW_MAX : m == t - 1);
	if (REC_UNLIKELY(barrier)) {
		if (inside < 0)  /* the walk ended below the call's slot: */
			inside = end != END_TRAMP;  /* a patched frame there is not in it */
		if (inside)
			patch = 0;
		else
			rec_shadow_barrier = 0;  /* that call was left */
	}
	if (end == END_TRAMP) {
		/* the entries above x's are frames gone by longjmp: dropped */
		unsigned k = rec_shadow_n;
		while (k && rec_shadow[k - 1].slot < x)
			k--;
		if (!k || rec_shadow[k - 1].slot != x) {
			rec_shadow_drop();
			return -1;  /* a trampoline the shadow does not know: libunwind */
		}
		rec_shadow_n = k;
		if (REC_UNLIKELY(rec_check_stacks))
			atomic_fetch_add_explicit(&rec_s.shadow_hits, 1, memory_order_relaxed);
		/* the shadow's frames in the stack: its entries k-1 .. i */
		unsigned from = n, i = k - (max - n < k ? max - n : k);
		n += k - i;
		reused = k - i;
		int on = i == 0 && n < max && rec_shadow[0].slot == rec_shadow_cut.slot;
		/* they are copied only if needed (rec_stack_fill), when the
		 * stack is hashed and the patch below keeps those entries */
		int lazy = rec_shadow_chained && t == from && !on &&
			   !(patch && m > SHADOW_SKIP && k + m - SHADOW_SKIP > REC_SHADOW_MAX);
		shadow_fill = (struct shadow_fill){ lazy, k, from, rec_shadow_drops };
		if (!lazy)
			shadow_copy(buf, from, n, k);
		unsigned walked = n;
		if (on) {
			int more = walk_on(buf, n, max, rec_shadow[0].ra, epoch);
			if (more < 0) {
				rec_shadow_drop();
				return -1;
			}
			n = (unsigned)more;
		}
		/* the walked frames hashed onto the chain at the trampoline's
		 * entry, the entries from the outermost one taken: no frame
		 * past the shadow (walk_on's) in the stack */
		if (rec_shadow_chained && n == walked && t == from) {
			struct rec_sh in = rec_shadow[k - 1].t;
			for (unsigned j = t; j-- > 0;)
				in = rec_sh_in(in, (uintptr_t)buf[j]);
			*h = rec_sh_span(in, i ? rec_shadow[i - 1].t : rec_shadow_tb, n);
			*hashed = 1;
		}
		*same = x == shadow_first_slot && t == shadow_first_t &&
			memcmp(buf, shadow_first_ips, t * sizeof *buf) == 0;
	} else {
		*same = 0;
	}
	patch &= shadow_policy(reused) && m > SHADOW_SKIP;  /* every capture weighed */
	if (patch) {
		if (end == END_CUT)
			rec_shadow_drop();  /* the live patched slots are past the walk: put back */
		/* past the trampoline's entry, or (no slot on the walk held the
		 * trampoline) every entry left is gone */
		shadow_patch(buf + SHADOW_SKIP, slots + SHADOW_SKIP, bps + SHADOW_SKIP,
			     m - SHADOW_SKIP, end == END_TRAMP ? rec_shadow_n : 0, end == END_CUT);
		shadow_first_slot = slots[SHADOW_SKIP];
		shadow_first_t = SHADOW_SKIP + 1;
	} else {
		shadow_first_slot = end == END_TRAMP && t <= SHADOW_SKIP + 1 ? x : 0;
		shadow_first_t = t;
	}
	if (shadow_first_slot)
		memcpy(shadow_first_ips, buf, shadow_first_t * sizeof *buf);
	return (int)n;
}

/* Frames a call from the recorder's side climbs before a frame of
 * libheapreel.so (the real allocator's few); past them it is not one. */
#define FROM_RECORDER_FRAMES 32

/* rec_stack_from_recorder's walk past a patched slot (a frame the
 * shadow stack knows, REC_SHADOW=1): the rest of the stack is the
 * shadow's, up to `left` frames. */
static int shadow_from_recorder(uintptr_t slot, unsigned left)
{
	void *rest[FROM_RECORDER_FRAMES];
	int cut;
	unsigned k = rec_shadow_chain(slot, rest, left, &cut);
	for (unsigned i = 0; i < k; i++)
		if ((uintptr_t)rest[i] >= self_lo && (uintptr_t)rest[i] < self_hi)
			return 1;
	return 0;
}

int rec_stack_from_recorder(uintptr_t caller)
{
	if (caller >= self_lo && caller < self_hi)
		return 1;  /* called from libheapreel.so, or tail-called through the allocator */
	uint64_t epoch = rec_cfi_epoch();
	uintptr_t ip, sp, bp;
	/* no rules while a dlclose runs: count it as ours (passed through) */
	if (epoch == UINT64_MAX || !call_site(__builtin_frame_address(0), &ip, &sp, &bp))
		return 1;
	uintptr_t slot = 0;                /* where ip was read from */
	for (unsigned n = 0; ip && n < FROM_RECORDER_FRAMES; n++) {
		if (ip == (uintptr_t)rec_shadow_tramp)
			return shadow_from_recorder(slot, FROM_RECORDER_FRAMES - n);
		if (ip >= self_lo && ip < self_hi)
			return 1;
		uint64_t rule = rec_cfi_peek(ip, epoch);
		if (step(rule, &ip, &sp, &bp) <= 0)
			return 0;
		slot = sp + (uintptr_t)(intptr_t)rec_rule_ra_off(rule);
	}
	return 0;
}

unsigned rec_stack_capture_nested(void **buf, unsigned max)
{
	uint64_t epoch = rec_cfi_epoch();
	uintptr_t ip, sp, bp;
	if (epoch == UINT64_MAX || !call_site(__builtin_frame_address(0), &ip, &sp, &bp))
		return 0;
	unsigned n = 0;
	while (ip && n < max) {
		buf[n++] = (void *)ip;
		if (step(rec_cfi_peek(ip, epoch), &ip, &sp, &bp) <= 0)
			break;
	}
	return n;
}

void rec_stack_forget(void)
{
	memo_n = plain_n = walk_depth = 0;
	shadow_first_slot = 0;
}

static void *const *capture(void **buf, unsigned *n, int *same, struct rec_sh *h, int *hashed)
{
	*hashed = 0;
	int fast = rec_shadow_on ? walk_shadow(buf, rec_s.depth, same, h, hashed)
				 : walk(buf, rec_s.depth, same, h, hashed);
	if (fast >= 0) {
		*n = (unsigned)fast;
		return buf;
	}
	rec_stack_forget();  /* no list holds one whole capture */
	*same = 0;
	if (rec_shadow_on) {
		/* libunwind stops at the trampoline; the shadow goes on from there */
		*n = rec_unwind_full(buf, rec_s.depth, 1);
		return buf;
	}
	int got = unw_bt(buf, (int)rec_s.depth + OWN_FRAMES_MAX);
	if (got < 0)
		got = 0;
	int i = 0;
	while (i < got && (uintptr_t)buf[i] >= self_lo && (uintptr_t)buf[i] < self_hi)
		i++;
	unsigned k = (unsigned)(got - i);
	*n = k < rec_s.depth ? k : rec_s.depth;
	return buf + i;
}

void *const *rec_stack_capture(void **buf, unsigned *n, int *same, struct rec_sh *h, int *hashed)
{
	void *const *ips = capture(buf, n, same, h, hashed);
	if (REC_UNLIKELY(rec_check_stacks)) {
		if (*hashed && !rec_stack_fill(buf, n))
			*hashed = *same = 0;
		rec_stack_check(ips, *n, *same, *hashed ? h : NULL);
	}
	return ips;
}

int rec_stack_fill(void **buf, unsigned *n)
{
	if (rec_shadow_on) {
		const struct shadow_fill *f = &shadow_fill;
		if (!f->lazy)
			return 1;  /* walk_shadow copied them */
		if (REC_UNLIKELY(f->drops != rec_shadow_drops)) {
			/* a signal handler emptied the shadow meanwhile (its
			 * backtrace(), say): the slots hold the frames again,
			 * as far as libunwind gets */
			unsigned got = rec_unwind_full(buf, *n, 1);
			if (got != *n) {
				*n = got;
				return 0;
			}
			return 1;
		}
		shadow_copy(buf, f->from, *n, f->k);
		return 1;
	}
	if (!memo_n)
		return 1;  /* a shallow walk hashed what it put in buf */
	for (unsigned i = 0; i < *n; i++)
		buf[i] = (void *)memo_at(*n - 1 - i)->ip;
	return 1;
}
