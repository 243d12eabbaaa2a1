/*
 * sample.c - byte sampling (REC_SAMPLE=BYTES): which allocations are
 * recorded, and which frees belong to a recorded block.
 *
 * Which allocations: Poisson sampling over the allocated bytes, as tcmalloc
 * does. Each thread counts down the bytes until its next sample point
 * (rec_sample_left, initial-exec TLS, no lock); gaps between sample points
 * are exponentially distributed with mean P (the period), drawn from a
 * per-thread xorshift64* generator (libc's random() and rand() lock). An
 * allocation of s bytes is sampled when the countdown crosses zero inside
 * it, which happens with probability 1 - exp(-s/P), independently of every
 * other allocation: that is the model pprof and jeprof unbias with
 * (scale 1 / (1 - exp(-avg/P))). Only a sampled allocation is stamped,
 * unwound and written, which is where the saving comes from. An
 * allocation smaller than the thread's countdown passes on that alone,
 * inline, asking nothing else: a thread's first countdown is drawn while
 * recording (it may run on after a stop or at exit: such calls pass, as
 * they should, and one that ends in an unrecorded allocation is drawn
 * again, rec_sample_skip), and the period cannot change while any thread
 * holds one.
 *
 * Which frees: a free is recorded only if its block was sampled. Sampled
 * live blocks are kept in a lock-free open-addressing set of addresses,
 * fronted by two filters indexed by the same hash. The first, one cache
 * line (rec_sample_l0), counts the live sampled blocks of each of its 64
 * slots; every free looks there first, inline and before anything else, so
 * the line stays in L1 and the free of an unsampled block costs a multiply
 * and an L1 load while few sampled blocks are live (the bench's sqlite3 at
 * 512 KiB: 20 at most). A count of 0 passes the free in every mode: when
 * every free is recorded (not sampling, or the set overflowed) all counts
 * are stuck first (rec_sample_every_free, from api.c's derive).
 * (Without it, the second filter's byte missed L1 on most of sqlite3's
 * frees: 1.2 % of a sampled sqlite3's profile, three quarters on that
 * load.) The second, 8 KiB of one-byte slots, holds how many live sampled
 * blocks hash to each slot (3 bits) and the XOR of their 5-bit
 * fingerprints (more bits of the hash), so a slot of one block names it up
 * to 1 in 32; the free's route reads it inline too, after the first
 * (churn keeps a few hundred sampled blocks live: most first counts are
 * nonzero). A slot that may hold the block (a sampled block, or a
 * collision: live sampled blocks / 8192, over 32 where a slot has one)
 * probes the set, at most MAX_PROBE slots. (With plain counters in 16 KiB,
 * set probes of collisions were a third of a sampled churn's free cost,
 * the filter's cache misses half.) Insert and remove happen only for
 * sampled blocks. The same address cannot be in the set twice: a block
 * is removed before the real free runs and inserted after the real
 * allocator returned it. Removed entries become tombstones (reused by
 * inserts; an entry never moves back to empty), so a lookup may stop at the
 * first empty slot. The set is two tables: a near one of 8192 slots (64 KiB,
 * where a few thousand live sampled blocks fit and stay in L2), and a far
 * one of 2^22 slots (32 MiB, touched as used: stopset.c may put millions of
 * blocks there) for a block whose near window
 * of MAX_PROBE slots was all live. A window once full never has an empty
 * slot again, so a lookup goes on to the far table only when the near
 * window had none. (One 8 MiB table put each insert on its own page: 2 000
 * page faults and a cache miss per insert and per take in a sampled churn,
 * a third of the recorder's profile.) If an insert finds no room in either window
 * the set has overflowed: from then on every free is recorded (correct,
 * only bigger: frees of unsampled blocks are unmatched frees for the
 * importer) and the heapreel.stats mark says so.
 *
 * The same set holds, while not sampling, the stop set's heap blocks
 * (stopset.c) and the recorded custom blocks (custom.c, keys with the top
 * bit set); those can be added while recording every free, so an insert
 * without room always marks the set overflowed. The tables may be mapped
 * by racing program threads (custom.c's first block): the pointers are
 * published by compare-exchange.
 *
 * Must never: allocate, lock, or call into the dynamic loader (everything
 * here runs inside allocation hooks; the tables are mapped once, at start
 * or by the first recorded custom block).
 */
#include "rec_internal.h"

#include <string.h>
#include <sys/mman.h>

#define NEAR_LOG 13                    /* the near table: 2^13 slots, 64 KiB */
#define FAR_LOG 22                     /* the far one: 2^22 slots, 32 MiB virtual */
#define SET_SLOTS (((size_t)1 << NEAR_LOG) + ((size_t)1 << FAR_LOG))
#define MAX_PROBE 32                   /* 4 cache lines: the longest a lookup reads */
#define COUNT_STUCK 7u                 /* a count that reached this never changes */
#define L0_STUCK UINT8_MAX             /* the same for the first filter's counts */
#define TOMB 1u                        /* removed entry (addresses are 16-aligned: never 1) */

REC_TLS uint64_t rec_sample_left;
_Alignas(64) _Atomic uint8_t rec_sample_l0[1u << REC_SAMPLE_L0_LOG];
static REC_TLS uint64_t rng;           /* 0: this thread has not drawn yet */
static _Atomic int drawn;              /* a countdown was drawn in this process */

_Atomic uint8_t *_Atomic rec_sample_filter;
static _Atomic uint64_t *_Atomic set;  /* the near table, then the far one */
static _Atomic int far_used;           /* an insert went on to the far table */
static _Atomic uint64_t overflowed;    /* inserts that found no room */
static int keep_set;                   /* forked child: its first reset keeps the set */

int rec_sample_init(void)
{
	if (atomic_load_explicit(&rec_sample_filter, memory_order_acquire))
		return 0;
	size_t fbytes = (size_t)1 << REC_SAMPLE_F_LOG;
	size_t sbytes = SET_SLOTS * sizeof *set;
	void *f = mmap(NULL, fbytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	void *s = mmap(NULL, sbytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f == MAP_FAILED || s == MAP_FAILED) {
		if (f != MAP_FAILED)
			munmap(f, fbytes);
		if (s != MAP_FAILED)
			munmap(s, sbytes);
		return -1;
	}
	/* Program threads may race here (custom.c's first block): the set
	 * before the filter, which says both are there; a loser unmaps its own. */
	_Atomic uint64_t *none_set = NULL;
	_Atomic uint8_t *none = NULL;
	if (!atomic_compare_exchange_strong(&set, &none_set, s))
		munmap(s, sbytes);
	if (!atomic_compare_exchange_strong(&rec_sample_filter, &none, f))
		munmap(f, fbytes);
	return 0;
}

static void l0_fill(uint8_t v)
{
	for (unsigned i = 0; i < 1u << REC_SAMPLE_L0_LOG; i++)
		atomic_store(&rec_sample_l0[i], v);
}

void rec_sample_reset(void)
{
	/* A forked child's replay starts with the blocks it inherited (the
	 * importer takes them from the parent's trace, FORMAT.md FORK): the
	 * frees of the sampled ones must still be recorded. */
	if (keep_set) {
		keep_set = 0;
		return;
	}
	/* The first filter's counts too when nothing was ever sampled: a
	 * trace that recorded every free left them stuck, and the next trace
	 * (a forked child) may be given a period. */
	l0_fill(0);
	if (!rec_sample_filter)
		return;
	/* Zero pages again, without touching them (after a failed exec: the
	 * previous trace's blocks are not in the new one). */
	madvise((void *)rec_sample_filter, (size_t)1 << REC_SAMPLE_F_LOG, MADV_DONTNEED);
	madvise((void *)set, SET_SLOTS * sizeof *set, MADV_DONTNEED);
	atomic_store(&far_used, 0);
	atomic_store(&overflowed, 0);
}

void rec_sample_fork_child(void)
{
	rec_sample_left = 0;
	rng = 0;                       /* the next draw is a first one, not a sample */
	atomic_store(&drawn, 0);
	keep_set = rec_sample_filter != NULL; /* the parent sampled: a set to keep */
}

/* A period may change only while no thread holds a countdown of the old one:
 * an allocation under its countdown passes without asking the period. */
int rec_sample_drawn(void)
{
	return atomic_load(&drawn);
}

void rec_sample_every_free(void)
{
	l0_fill(L0_STUCK);
}

uint64_t rec_sample_overflows(void)
{
	return atomic_load(&overflowed);
}

/* -ln(u) for u in (0, 1]: u = m * 2^e with m in [1, 2), ln m by the atanh
 * series in s = (m-1)/(m+1) < 1/3 (error below 1e-7: plenty for a gap). */
static double neg_log(double u)
{
	uint64_t bits;
	memcpy(&bits, &u, sizeof bits);
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & ((1ull << 52) - 1)) | (1023ull << 52);
	double m;
	memcpy(&m, &bits, sizeof m);
	double s = (m - 1) / (m + 1), s2 = s * s;
	double ln_m = 2 * s * (1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 +
			  s2 * (1.0 / 9 + s2 * (1.0 / 11))))));
	return -(e * 0.69314718055994530942 + ln_m);
}

/* Bytes to the next sample point: exponential with mean period. */
static uint64_t gap(uint64_t period)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	uint64_t x = rng * 0x2545f4914f6cdd1dull;
	double u = (double)((x >> 11) + 1) * 0x1p-53;   /* (0, 1] */
	return (uint64_t)(neg_log(u) * (double)period);
}

int rec_sample_slow(uint64_t period, size_t size)
{
	if (REC_UNLIKELY(rng == 0)) {
		/* First draw of this thread: seed from the clock and the TLS
		 * address (distinct per thread), mixed by splitmix64. */
		uint64_t z = rec_now() ^ (uintptr_t)&rng ^ 0x9e3779b97f4a7c15ull;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		rng = (z ^ (z >> 31)) | 1;
		if (!atomic_load_explicit(&drawn, memory_order_relaxed))
			atomic_store(&drawn, 1);
		uint64_t g = gap(period);
		if (g > size) {
			rec_sample_left = g - size;
			return 0;
		}
	}
	/* Exponential gaps are memoryless: the distance from this block's end
	 * to the next sample point is a fresh draw. */
	rec_sample_skip(period);
	return 1;
}

void rec_sample_skip(uint64_t period)
{
	rec_sample_left = gap(period);
}

/* Adds (+1) or removes (-1) a block of hash h to or from its second-filter
 * slot: one compare-exchange, so every value a reader sees is a whole set
 * of blocks. A full count sticks: the slot then always probes. */
static void slot_update(uint64_t h, int d)
{
	const unsigned cm = REC_SAMPLE_F_COUNT, fs = REC_SAMPLE_F_FP_SHIFT;
	_Atomic uint8_t *c = &rec_sample_filter[h >> (64 - REC_SAMPLE_F_LOG)];
	uint8_t fp = rec_sample_fingerprint(h), n = atomic_load_explicit(c, memory_order_relaxed);
	while ((n & cm) != COUNT_STUCK) {
		uint8_t m = (uint8_t)((((n & cm) + (unsigned)d) & cm) | (((n >> fs) ^ fp) << fs));
		if (atomic_compare_exchange_weak_explicit(c, &n, m, memory_order_release,
							  memory_order_relaxed))
			return;
	}
}

/* Adds d (+1 or -1) to the first filter's count of hash h; a full count
 * sticks (that slot then always looks further). */
static void l0_update(uint64_t h, int d)
{
	_Atomic uint8_t *c = &rec_sample_l0[h >> (64 - REC_SAMPLE_L0_LOG)];
	uint8_t n = atomic_load_explicit(c, memory_order_relaxed);
	while (n != L0_STUCK &&
	       !atomic_compare_exchange_weak_explicit(c, &n, (uint8_t)(n + d), memory_order_release,
						      memory_order_relaxed))
		;
}

/* A block of hash h joins (+1) or leaves (-1) the set: both filters count it. */
static void filters_update(uint64_t h, int d)
{
	slot_update(h, d);
	l0_update(h, d);
}

/* The window of slots a hash may sit in, in the near (far = 0) or the far
 * table: MAX_PROBE slots from the home slot, wrapping inside the table. */
struct window {
	_Atomic uint64_t *table;
	uint64_t mask, home;
};

static struct window window(uint64_t h, int far)
{
	unsigned log = far ? FAR_LOG : NEAR_LOG;
	return (struct window){
		.table = far ? set + ((size_t)1 << NEAR_LOG) : set,
		.mask = ((uint64_t)1 << log) - 1,
		.home = h >> (64 - log),
	};
}

/* Puts addr in the first empty or removed slot of w; 0 if all are live. */
static int insert_in(struct window w, uint64_t addr)
{
	for (uint64_t k = 0; k < MAX_PROBE; k++) {
		_Atomic uint64_t *e = &w.table[(w.home + k) & w.mask];
		/* Probed by a write (an atomic add of 0, one locked xadd; an or
		 * would compile to a load and a compare-exchange): a read
		 * of an untouched page would map the shared zero page, and the
		 * write after it would copy that page and flush every CPU's TLB,
		 * an interrupt per page on each core, most of sampling's system
		 * time in a threaded program. */
		uint64_t v = atomic_fetch_add_explicit(e, 0, memory_order_relaxed);
		if ((v == 0 || v == TOMB) &&
		    atomic_compare_exchange_strong_explicit(e, &v, addr, memory_order_release,
							    memory_order_relaxed))
			return 1;
	}
	return 0;
}

enum found { FOUND, ABSENT, WINDOW_FULL };

/* Takes addr out of w. ABSENT: an empty slot came first (it is in no
 * table: its insert would have stopped there or before). */
static enum found take_from(struct window w, uint64_t addr)
{
	for (uint64_t k = 0; k < MAX_PROBE; k++) {
		_Atomic uint64_t *e = &w.table[(w.home + k) & w.mask];
		uint64_t v = atomic_load_explicit(e, memory_order_acquire);
		if (v == 0)
			return ABSENT;
		if (v != addr)
			continue;
		/* Only the thread freeing addr removes it: a plain store would
		 * do, the CAS guards against a double free racing itself. */
		return atomic_compare_exchange_strong_explicit(e, &v, TOMB, memory_order_relaxed,
							       memory_order_relaxed) ? FOUND : ABSENT;
	}
	return WINDOW_FULL;
}

void rec_sampled_add(uint64_t addr)
{
	uint64_t h = rec_sample_hash(addr);
	int in = insert_in(window(h, 0), addr);
	if (!in) {
		/* before the insert: whoever frees addr learned of it after */
		atomic_store(&far_used, 1);
		in = insert_in(window(h, 1), addr);
	}
	if (in) {
		filters_update(h, 1);
		return;
	}
	/* Every thread whose block found no room waits until every free is
	 * recorded before handing the block out: the first to overflow may
	 * still be on its way there when this block is freed. */
	atomic_fetch_add(&overflowed, 1);
	rec_ctl_overflow();
}

int rec_sampled_take(uint64_t addr)
{
	uint64_t h = rec_sample_hash(addr);
	enum found f = take_from(window(h, 0), addr);
	if (f == WINDOW_FULL && atomic_load(&far_used))
		f = take_from(window(h, 1), addr);
	if (f != FOUND)
		return 0;
	filters_update(h, -1);
	return 1;
}

/* Is addr in w? ABSENT when an empty slot comes first (as take_from). */
static enum found find_in(struct window w, uint64_t addr)
{
	for (uint64_t k = 0; k < MAX_PROBE; k++) {
		uint64_t v = atomic_load_explicit(&w.table[(w.home + k) & w.mask],
						  memory_order_acquire);
		if (v == 0)
			return ABSENT;
		if (v == addr)
			return FOUND;
	}
	return WINDOW_FULL;
}

int rec_sampled_has(uint64_t addr)
{
	uint64_t h = rec_sample_hash(addr);
	enum found f = find_in(window(h, 0), addr);
	if (f == WINDOW_FULL && atomic_load(&far_used))
		f = find_in(window(h, 1), addr);
	return f == FOUND;
}

void rec_sampled_sweep(int (*keep)(uint64_t addr))
{
	size_t n = atomic_load(&far_used) ? SET_SLOTS : (size_t)1 << NEAR_LOG;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = atomic_load_explicit(&set[i], memory_order_relaxed);
		if (v == 0 || v == TOMB || keep(v))
			continue;
		if (atomic_compare_exchange_strong_explicit(&set[i], &v, TOMB, memory_order_relaxed,
							    memory_order_relaxed))
			filters_update(rec_sample_hash(v), -1);
	}
}
