/*
 * api.c - what is recorded right now, and the rec.h functions that change
 * it: rec_start, rec_stop, rec_mark, rec_flush (exported, also through
 * dlsym), used as well by the control channel (control.c) and at start
 * (REC_PAUSED, REC_SAMPLE).
 *
 * Everything the hot path needs beyond sampling's two inline answers (a
 * countdown, a first-filter count: sample.c) is one atomic word,
 * rec_ctl_word: the sampling period in the high bits and flags below;
 * every change is a CAS on it, so a transition is never half seen. Derived
 * flags tell the hot path what to do:
 *   REC_M_ALLOCS  record allocations (recording is active);
 *   REC_M_FREES   record every free: not sampling, and active, or stopped
 *                 after having been active until the writer knows which
 *                 blocks were recorded (a free then may end a block
 *                 recorded earlier; the importer counts the others apart,
 *                 as unknown_frees); or with an overflowed set (sample.c);
 *   REC_M_PROBE   record a free if its block is in the sampled set: when
 *                 sampling, or stopped once the writer has put every
 *                 recorded live block in that set (stopset.c: F_SETREADY);
 *   REC_M_SETBUILD the writer is filling that set: a hook that publishes an
 *                 allocation puts its block there too (ring.c).
 * While stopped no allocation is recorded, so a snapshot over a stop is
 * exact for blocks allocated while recording and knows nothing of blocks
 * allocated while stopped.
 *
 * Marks (rec_mark, trace-ctl mark, and the reserved heapreel.start,
 * heapreel.stop, heapreel.sample=N) are stamped by the caller and queued in
 * a fixed array of slots that the writer thread drains into MARK records
 * (and the names of rec_pool_create's pools into POOL records; the names
 * are kept too, in a table mapped at the first pool, so that a new trace
 * of the process (a forked child's) and every keyframe names them again);
 * a caller finding the queue full waits for the writer (never the writer
 * itself: it drains first). rec_flush asks the writer for a full round and
 * waits for it.
 *
 * The sampling period of a trace is fixed once it has recorded an
 * allocation: a change is accepted only before the first start (the trace
 * then holds a heapreel.sample=N mark, which the importer prefers over the
 * header's period), so every sampled event of a trace has the same period;
 * nor once a thread has drawn a countdown (sample.c), which a failed exec's
 * new trace inherits.
 *
 * Must never: lock, allocate, or be called by the hot path except
 * rec_ctl_overflow (a CAS, once the first-filter counts are stuck).
 */
#include "rec_internal.h"
#include "rec.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Flags of rec_ctl_word besides the REC_M_* the hot path reads. */
#define F_EVER 8u          /* this trace has recorded allocations */
#define F_OVERFLOW 16u     /* the sampled set overflowed: record every free */
#define F_SETREADY 64u     /* stopped: the set holds every recorded live block */
#define F_HOLD 128u        /* rec_ctl_hold: allocations off, and no stop */
_Static_assert(REC_M_SETBUILD == 32u, "between F_OVERFLOW and F_SETREADY");
#define FLAGS_MASK (((uint64_t)1 << REC_M_PERIOD_SHIFT) - 1)  /* below the period */

#define MARK_SLOTS 64      /* marks queued between two writer rounds */
#define WAIT_NS 100000     /* a caller's sleep step while waiting for the writer */

_Atomic uint64_t rec_ctl_word;

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY };
struct mark_slot {
	_Atomic uint32_t state;
	uint32_t pool;             /* a pool's name (POOL record), 0: a mark */
	uint64_t t;
	char label[REC_MARK_MAX + 1];
};
static struct mark_slot slots[MARK_SLOTS];
static _Atomic uint32_t flush_asked, flush_done; /* rec_flush requests, compared mod 2^32 */
static _Atomic uint32_t pools_made;  /* pool ids handed out: 1 .. pools_made */

/* Pool id i's name, entry i - 1; ready once the name is in. The table is
 * reserved whole (TF_POOL_MAX entries, 16 MiB of address space) and gets
 * a page per 15 pools as they are made. */
struct pool_name {
	_Atomic uint32_t ready;
	char name[REC_MARK_MAX + 1];
};
static struct pool_name *_Atomic pool_names;

/* The REC_M_* flags that follow from the period and the other flags, for
 * a word about to be stored. A free whose first-filter count is 0 passes
 * without reading the word, so a word with REC_M_FREES is only stored
 * after every count is stuck (they stay so until the next trace's reset). */
static uint64_t derive(uint64_t w)
{
	uint64_t flags = w & (REC_M_ALLOCS | F_EVER | F_OVERFLOW | REC_M_SETBUILD | F_SETREADY | F_HOLD);
	int probe = ((w >> REC_M_PERIOD_SHIFT) != 0 || (flags & F_SETREADY)) &&
		    !(flags & F_OVERFLOW);
	if (flags & (REC_M_ALLOCS | F_EVER))  /* blocks may have been recorded */
		flags |= probe ? REC_M_PROBE : REC_M_FREES;
	if (flags & REC_M_FREES)
		rec_sample_every_free();
	return (w & ~FLAGS_MASK) | flags;
}

/* Applies set/clear to the flags; returns the word before. */
static uint64_t change(uint64_t set, uint64_t clear)
{
	uint64_t old = atomic_load(&rec_ctl_word);
	while (!atomic_compare_exchange_weak(&rec_ctl_word, &old, derive((old | set) & ~clear)))
		;
	return old;
}

void rec_ctl_overflow(void)
{
	/* every insert without room calls: one CAS loop is enough */
	if (!(atomic_load(&rec_ctl_word) & F_OVERFLOW))
		change(F_OVERFLOW, 0);
}

uint64_t rec_ctl_period(void)
{
	return atomic_load(&rec_ctl_word) >> REC_M_PERIOD_SHIFT;
}

int rec_ctl_active(void)
{
	return (atomic_load(&rec_ctl_word) & REC_M_ALLOCS) != 0;
}

/* Who queues a mark, which decides what a full queue does. */
enum queuer {
	WRITER,         /* the writer thread (control requests): it makes room itself */
	WAITER,         /* a program thread that may wait for the writer */
	HURRIED,        /* a program thread that may not wait (it may hold its own
			   locks): a full queue turns it away (-2) */
};

/* Queues a mark stamped t (or pool's name, pool != 0); 0, or -1 if there
 * is no trace, or -2 (HURRIED) if the queue is full. */
static int queue_mark(uint64_t t, const char *label, uint32_t pool, enum queuer who)
{
	for (;;) {
		if (!rec_session_mine())
			return -1;
		for (unsigned i = 0; i < MARK_SLOTS; i++) {
			uint32_t free_ = SLOT_FREE;
			if (!atomic_compare_exchange_strong(&slots[i].state, &free_, SLOT_FILLING))
				continue;
			slots[i].t = t;
			slots[i].pool = pool;
			size_t n = strnlen(label, REC_MARK_MAX);
			memcpy(slots[i].label, label, n);
			slots[i].label[n] = 0;
			atomic_store_explicit(&slots[i].state, SLOT_READY, memory_order_release);
			return 0;
		}
		if (who == HURRIED)
			return -2;
		if (who == WRITER) {
			rec_ctl_drain_marks();
			continue;
		}
		if (rec_undrained())
			return -1;  /* no writer left to make room (or to write it) */
		rec_writer_kick();
		struct timespec step = { 0, WAIT_NS };
		nanosleep(&step, NULL);
	}
}

/* The marks of what a trace lacks (rec_ctl_lack), per trace: the session
 * (rec_s.gen + 1) whose trace has it, and the earliest instant of one that
 * the queue turned away, which the writer writes. */
static _Atomic uint32_t lack_told[TF_LACKS];
static _Atomic uint64_t lack_missed[TF_LACKS];
static int test_queue_full;  /* REC_TEST_MARK_QUEUE_FULL: every HURRIED mark turned away */

void rec_ctl_lack(enum tf_lack k, int can_wait)
{
	uint32_t gen = atomic_load(&rec_s.gen) + 1;
	if (atomic_load(&lack_told[k]) == gen)
		return;
	uint64_t t = rec_now();
	int r = can_wait ? queue_mark(t, tf_lack_mark(k), 0, WAITER)
	        : test_queue_full ? -2 : queue_mark(t, tf_lack_mark(k), 0, HURRIED);
	if (r == 0) {
		atomic_store(&lack_told[k], gen);
		return;
	}
	/* turned away: the writer writes it at its next round, at the
	 * earliest instant turned away (two threads may race: the first
	 * mark counts) */
	uint64_t seen = atomic_load(&lack_missed[k]);
	while (r == -2 && (!seen || t < seen) &&
	       !atomic_compare_exchange_weak(&lack_missed[k], &seen, t))
		;
}

/* Writer: the lack marks the queue turned away. */
static void drain_lacks(void)
{
	uint32_t gen = atomic_load(&rec_s.gen) + 1;
	for (int k = 0; k < TF_LACKS; k++) {
		uint64_t t = atomic_exchange(&lack_missed[k], 0);
		if (t && atomic_load(&lack_told[k]) != gen) {
			rec_writer_mark(t, tf_lack_mark((enum tf_lack)k));
			atomic_store(&lack_told[k], gen);
		}
	}
}

void rec_ctl_drain_marks(void)
{
	drain_lacks();
	for (unsigned i = 0; i < MARK_SLOTS; i++) {
		if (atomic_load_explicit(&slots[i].state, memory_order_acquire) != SLOT_READY)
			continue;
		if (slots[i].pool) {
			struct tf_record r = { .kind = TF_POOL, .id = slots[i].pool,
					       .str = slots[i].label };
			rec_writer_meta(&r);
		} else {
			rec_writer_mark(slots[i].t, slots[i].label);
		}
		atomic_store_explicit(&slots[i].state, SLOT_FREE, memory_order_release);
	}
}

void rec_ctl_serve_flush(void)
{
	uint32_t asked = atomic_load(&flush_asked);
	if (asked == atomic_load(&flush_done))
		return;
	rec_writer_sync();
	rec_stopset_settle();   /* stopped: from now on, only recorded blocks' frees */
	atomic_store(&flush_done, asked);
	rec_futex_wake(&flush_done, INT32_MAX);
}

int rec_ctl_start(int can_wait)
{
	if (!rec_session_mine()) /* also: not from a vfork child, which shares our memory */
		return -1;
	uint64_t t = rec_now(); /* before: every allocation recorded comes after */
	uint64_t old = change(REC_M_ALLOCS | F_EVER, REC_M_SETBUILD | F_SETREADY);
	if (!(old & REC_M_ALLOCS))
		return queue_mark(t, TF_MARK_START, 0, can_wait ? WAITER : WRITER);
	return 0;
}

int rec_ctl_stop(int can_wait)
{
	if (!rec_session_mine())
		return -1;
	uint64_t t = rec_now(); /* before: an allocation it misses comes after */
	uint64_t old = change(0, REC_M_ALLOCS);
	if (old & REC_M_ALLOCS)
		return queue_mark(t, TF_MARK_STOP, 0, can_wait ? WAITER : WRITER);
	return 0;
}

/* While trace-record -p rewrites GOT entries (attach.c) or puts them back
 * (session.c's detach), some of the program's calls reach the hooks and
 * some not: a block recorded through a hooked malloc, freed through a free
 * not (yet, or no longer) hooked, and recorded again at the same address
 * through the hooked malloc would be a missed free. So no allocation is
 * recorded meanwhile. The attach's hold writes no mark (the attach mark,
 * stamped once it is over, bounds the recording). A detach's (`ending`)
 * writes a heapreel.detach mark at its instant: from then on allocations
 * are not recorded, and frees no longer once their entries are put back,
 * while the trace ends only after the writer's grace rounds; readers take
 * the mark as the instant events may be missing from. Neither builds a
 * stop set (set_wanted), which would map and fill the sampled set at every
 * detach. rec_ctl_hold: allocations off, 1 if they were on;
 * rec_ctl_release: the hold over, allocations on again if `allocs` (as
 * rec_ctl_start turns them on). */
int rec_ctl_hold(int ending)
{
	uint64_t t = rec_now(); /* before: an allocation it misses comes after */
	int was = (change(F_HOLD, REC_M_ALLOCS) & REC_M_ALLOCS) != 0;
	if (ending)
		queue_mark(t, TF_MARK_DETACH, 0, WRITER);
	return was;
}

void rec_ctl_release(int allocs)
{
	if (allocs)
		change(REC_M_ALLOCS | F_EVER, REC_M_SETBUILD | F_SETREADY | F_HOLD);
	else
		change(0, F_HOLD);
}

/* Stopped, not sampling, blocks recorded, no overflow, set not filled. */
static int set_wanted(uint64_t w)
{
	return !(w & (REC_M_ALLOCS | F_OVERFLOW | F_SETREADY | F_HOLD)) && (w & F_EVER) &&
	       !(w >> REC_M_PERIOD_SHIFT);
}

int rec_ctl_set_wanted(void)
{
	return set_wanted(atomic_load(&rec_ctl_word));
}

int rec_ctl_set_building(void)
{
	uint64_t old = atomic_load(&rec_ctl_word);
	do {
		if (!set_wanted(old))
			return -1;
	} while (!atomic_compare_exchange_weak(&rec_ctl_word, &old, derive(old | REC_M_SETBUILD)));
	return 0;
}

int rec_ctl_set_ready(void)
{
	uint64_t old = atomic_load(&rec_ctl_word);
	do {
		if (!set_wanted(old) || !(old & REC_M_SETBUILD))
			return -1;
	} while (!atomic_compare_exchange_weak(&rec_ctl_word, &old, derive(old | F_SETREADY)));
	return 0;
}

int rec_ctl_mark(const char *label, int can_wait)
{
	return label ? queue_mark(rec_now(), label, 0, can_wait ? WAITER : WRITER) : -1;
}

/* The names table, mapped by the first caller; NULL without memory. */
static struct pool_name *names_table(void)
{
	struct pool_name *t = atomic_load(&pool_names), *none = NULL;
	if (t)
		return t;
	size_t bytes = (size_t)TF_POOL_MAX * sizeof *t;
	t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	if (!atomic_compare_exchange_strong(&pool_names, &none, t)) {
		munmap(t, bytes);   /* another thread's came first */
		return none;
	}
	return t;
}

uint32_t rec_ctl_pool_create(const char *name)
{
	struct pool_name *t = rec_session_mine() ? names_table() : NULL;
	uint32_t id = atomic_load(&pools_made);
	do {
		if (id >= TF_POOL_MAX || !t)
			return 0;
	} while (!atomic_compare_exchange_weak(&pools_made, &id, id + 1));
	struct pool_name *e = &t[id];
	size_t n = name ? strnlen(name, REC_MARK_MAX) : 0;
	memcpy(e->name, name ? name : "", n);
	e->name[n] = 0;
	atomic_store_explicit(&e->ready, 1, memory_order_release);
	return queue_mark(rec_now(), e->name, id + 1, WAITER) ? 0 : id + 1;
}

void rec_ctl_pool_names(void)
{
	struct pool_name *t = atomic_load(&pool_names);
	uint32_t n = atomic_load(&pools_made);
	for (uint32_t i = 0; t && i < n; i++) {
		if (!atomic_load_explicit(&t[i].ready, memory_order_acquire))
			continue;   /* its creator is copying the name: its own POOL follows */
		struct tf_record r = { .kind = TF_POOL, .id = i + 1, .str = t[i].name };
		rec_writer_meta(&r);
	}
}

int rec_ctl_pool_known(uint32_t pool)
{
	return pool && pool <= atomic_load(&pools_made);
}

int rec_ctl_set_period(uint64_t period, uint64_t *have)
{
	uint64_t old = atomic_load(&rec_ctl_word), now;
	*have = old >> REC_M_PERIOD_SHIFT;
	if (period && rec_sample_init() < 0)
		return -2;  /* no sampled set: the period in force stays */
	do {
		*have = old >> REC_M_PERIOD_SHIFT;
		if (*have == period)
			return 0;
		if ((old & (REC_M_ALLOCS | F_EVER)) || rec_sample_drawn())
			return -1;
		now = derive((old & FLAGS_MASK) | period << REC_M_PERIOD_SHIFT);
	} while (!atomic_compare_exchange_weak(&rec_ctl_word, &old, now));
	char label[48], *e = label + sizeof label;
	rec_utoa(rec_cat(label, e, TF_MARK_SAMPLE), e, period);
	queue_mark(rec_now(), label, 0, WRITER);
	return 0;
}

void rec_ctl_init(void)
{
	uint64_t period = 0;
	const char *s = getenv("REC_SAMPLE");
	if (s && *s && strcmp(s, "0")) {
		if (rec_parse_u64(s, 1, REC_PERIOD_MAX, &period) < 0)
			rec_say("REC_SAMPLE=", s, " is not a number of bytes from 1 to 2^40;"
				" recording every allocation");
		else if (rec_sample_init() < 0) {
			rec_say("cannot map the sampled-address set", "",
				"; recording every allocation");
			period = 0;
		}
	}
	test_queue_full = getenv("REC_TEST_MARK_QUEUE_FULL") != NULL;
	const char *p = getenv("REC_PAUSED");
	int paused = p && *p && strcmp(p, "0");
	uint64_t w = period << REC_M_PERIOD_SHIFT | (paused ? 0 : REC_M_ALLOCS);
	atomic_store(&rec_ctl_word, derive(w));
}

void rec_ctl_session_start(void)
{
	/* A new trace (process start, forked child, failed exec): it has
	 * recorded nothing, keeps the activity of the process, and has no
	 * sampled blocks and no queued marks yet. */
	for (unsigned i = 0; i < MARK_SLOTS; i++)
		atomic_store(&slots[i].state, SLOT_FREE);
	for (int k = 0; k < TF_LACKS; k++)
		atomic_store(&lack_missed[k], 0);
	rec_sample_reset();
	uint64_t old = atomic_load(&rec_ctl_word), now;
	do {
		uint64_t w = old & ~(uint64_t)(F_EVER | F_OVERFLOW | REC_M_SETBUILD | F_SETREADY);
		if (w & REC_M_ALLOCS)
			w |= F_EVER;
		now = derive(w);
	} while (!atomic_compare_exchange_weak(&rec_ctl_word, &old, now));
	atomic_store(&flush_done, atomic_load(&flush_asked));
}

void rec_ctl_session_started(void)
{
	if (!(atomic_load(&rec_ctl_word) & REC_M_ALLOCS))
		queue_mark(rec_now(), TF_MARK_STOP, 0, WRITER);
}

/* ---- rec.h ------------------------------------------------------------ */

REC_EXPORT int rec_start(void)
{
	return rec_ctl_start(1);
}

REC_EXPORT int rec_stop(void)
{
	return rec_ctl_stop(1);
}

REC_EXPORT int rec_mark(const char *label)
{
	if (label)
		rec_alloc_api_mark(label);
	return rec_ctl_mark(label, 1);
}

REC_EXPORT int rec_flush(void)
{
	if (!rec_session_mine())
		return -1;
	uint32_t asked = atomic_fetch_add(&flush_asked, 1) + 1;
	rec_writer_kick();
	for (;;) {
		uint32_t done = atomic_load(&flush_done);
		if ((int32_t)(done - asked) >= 0)
			return rec_writer_failed() ? -1 : 0;
		if (!rec_on())
			return 0; /* closed meanwhile: the close wrote everything */
		if (rec_undrained())
			return -1; /* writing failed, or no writer is left (exiting) */
		struct timespec step = { 0, WAIT_NS };
		rec_futex_wait(&flush_done, done, &step);
	}
}
