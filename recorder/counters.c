/*
 * counters.c - figures of the whole process sampled over time, written as
 * COUNTER and SAMPLE records (FORMAT.md): its resident set, from
 * /proc/self/statm, and the program's allocator's own statistics when it
 * offers them (glibc mallinfo2, jemalloc mallctl, tcmalloc
 * MallocExtension_GetNumericProperty). README "Counters" lists the names.
 *
 * Every REC_STATS_MS (default 10 ms; 0 turns it off) the writer thread
 * takes one sample between its rounds, holding none of the recorder's
 * locks, so a program thread inside a hook never waits for it. The
 * allocator's statistics calls take the allocator's own locks (mallinfo2
 * walks every arena under its mutex) and may allocate: on the writer
 * thread, whose allocations are not recorded (rec_guard), they wait like
 * any caller of the allocator, and a program thread waits for the writer
 * only from a hook, outside the real allocator (ring.c), so neither holds
 * what the other waits for. A fork takes the allocator's locks in its
 * prepare handler (glibc, jemalloc and tcmalloc all do), so it waits for a
 * sample in progress instead of copying a held lock into the child; the
 * child's writer is a new thread. The RSS is read at every sample; the
 * allocator's figures, whose reading may hold its locks for long, at most
 * 0.2 % of the time (ALLOC_COST_SHARE), and at every forced sample
 * (rec_flush, the end).
 *
 * The allocator is looked up once, from the constructor (rec_counters_init):
 * the functions are those of the object that defines the malloc the
 * program calls (malloc_object), found with dlsym and dladdr, which take
 * the dynamic loader's lock and so are never called from a hook or from
 * the writer. A function of
 * another object (glibc's mallinfo2 while jemalloc serves malloc) would
 * describe an allocator the program does not use, and is not sampled.
 *
 * Must never: call the allocator's statistics from a program thread
 * (but the constructor's first probe, below), or the dynamic loader from
 * the writer; print except through rec_say.
 */
#include "rec_internal.h"
#include "tf_varint.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>

#define STATS_NS_DEFAULT 10000000ull    /* REC_STATS_MS unset: every 10 ms */
#define STATS_NS_MIN 1000000ull         /* below 1 ms the writer would do little else */
#define STATS_NS_MAX 3600000000000ull   /* an hour */
#define NS_PER_MS 1000000ull
#define STATM_BYTES 256                 /* /proc/self/statm: 7 numbers, ~40 bytes */
#define COUNTERS_MAX 16                 /* 3 from statm, at most 5 of an allocator */
#define NSTATM 3                        /* statm's counters come first, every sample */
/* An allocator's statistics call costs what the allocator makes it cost:
 * glibc's mallinfo2 walks every free chunk of every arena under the
 * arena's lock, 0.4 ms with 5 000 free chunks, 39 ms with 75 000 (measured
 * here), stalling the program's mallocs meanwhile. The next such read
 * comes no sooner than this many times the last one's duration, so that
 * it takes at most 0.2 % of the time (and of the arena's lock): a fifth of
 * the 1 % the whole sampling may cost (issue 23). */
#define ALLOC_COST_SHARE 500

/* Where a counter's value comes from. */
enum source { STATM, GLIBC, JEMALLOC, TCMALLOC };

struct counter {
	const char *name;               /* on disk (COUNTER record) */
	enum source src;
	const char *key;                /* jemalloc mallctl name, tcmalloc property */
	size_t offset;                  /* glibc: the field of struct mallinfo2 */
};

static const struct counter statm[] = {
	{ "rss_bytes", STATM, NULL, 0 },            /* resident */
	{ "rss_anon_bytes", STATM, NULL, 0 },       /* resident - shared */
	{ "rss_file_shmem_bytes", STATM, NULL, 0 }, /* shared */
};
_Static_assert(sizeof statm / sizeof statm[0] == NSTATM, "statm's counters come first");
static const struct counter glibc[] = {
	{ "glibc.arena_bytes", GLIBC, NULL, offsetof(struct mallinfo2, arena) },
	{ "glibc.mmapped_bytes", GLIBC, NULL, offsetof(struct mallinfo2, hblkhd) },
	{ "glibc.in_use_bytes", GLIBC, NULL, offsetof(struct mallinfo2, uordblks) },
	{ "glibc.free_bytes", GLIBC, NULL, offsetof(struct mallinfo2, fordblks) },
	{ "glibc.top_pad_bytes", GLIBC, NULL, offsetof(struct mallinfo2, keepcost) },
};
static const struct counter jemalloc[] = {
	{ "jemalloc.allocated_bytes", JEMALLOC, "stats.allocated", 0 },
	{ "jemalloc.active_bytes", JEMALLOC, "stats.active", 0 },
	{ "jemalloc.resident_bytes", JEMALLOC, "stats.resident", 0 },
	{ "jemalloc.mapped_bytes", JEMALLOC, "stats.mapped", 0 },
	{ "jemalloc.retained_bytes", JEMALLOC, "stats.retained", 0 },
};
static const struct counter tcmalloc[] = {
	{ "tcmalloc.allocated_bytes", TCMALLOC, "generic.current_allocated_bytes", 0 },
	{ "tcmalloc.heap_size_bytes", TCMALLOC, "generic.heap_size", 0 },
	{ "tcmalloc.pageheap_free_bytes", TCMALLOC, "tcmalloc.pageheap_free_bytes", 0 },
	{ "tcmalloc.pageheap_unmapped_bytes", TCMALLOC, "tcmalloc.pageheap_unmapped_bytes", 0 },
};

typedef struct mallinfo2 (*mallinfo2_fn)(void);
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*tc_property_fn)(const char *, size_t *);

/* Fixed by rec_counters_init, before any writer runs; sampled[] grows
 * on the writer only (probe), and a forked child's keeps its parent's. */
static uint64_t period_ns;              /* 0: off */
static uint64_t page_bytes;
static const struct counter *sampled[COUNTERS_MAX];   /* id i + 1: sampled[i] */
static uint32_t nsampled;
static mallinfo2_fn mallinfo2_p;
static mallctl_fn mallctl_p;
static tc_property_fn tc_property_p;

/* The writer's, per session. */
static uint32_t named;                  /* sampled[0, named) have their COUNTER record */
static uint64_t next_due;               /* rec_now() of the next sample */
static uint64_t alloc_due;              /* ... that reads the allocator's counters */
static uint64_t spent_cpu_ns;           /* the writer's CPU time in samples (heapreel.stats) */
static uint64_t spent_alloc_ns;         /* wall time in the allocator's statistics calls */

/* REC_STATS_MS: a bare integer is milliseconds (the variable's unit); a
 * number with a unit follows the time grammar (README "Times"). */
static uint64_t parse_period(void)
{
	const char *s = getenv("REC_STATS_MS");
	uint64_t ms;
	int64_t ns;
	if (!s || !*s)
		return STATS_NS_DEFAULT;
	if (rec_parse_u64(s, 0, STATS_NS_MAX / NS_PER_MS, &ms) == 0)
		ns = (int64_t)(ms * NS_PER_MS);
	else if (tf_parse_duration(s, &ns) < 0 || (uint64_t)ns > STATS_NS_MAX)
		ns = -1;
	if (ns < 0 || (ns > 0 && (uint64_t)ns < STATS_NS_MIN)) {
		rec_say("REC_STATS_MS=", s, " is not 0 (off), milliseconds (10) or a duration "
			"from 1ms to 1h (0.5s); sampling every 10 ms");
		return STATS_NS_DEFAULT;
	}
	return (uint64_t)ns;
}

/* The base address of the object that defines fn, or NULL. */
static void *object_of(void *fn)
{
	Dl_info info;
	return fn && dladdr(fn, &info) ? info.dli_fbase : NULL;
}

/* The object whose malloc the program calls: the one under ours, or,
 * when an allocator is preloaded before libheapreel.so, that one (whose
 * malloc then takes the program's calls without passing through ours). */
static void *malloc_object(void)
{
	void *first = object_of(dlsym(RTLD_DEFAULT, "malloc"));
	return first && first != object_of((void *)rec_counters_init) ? first
	       : object_of(*(void **)&rec_real.malloc);
}

/* fn if the object that serves malloc defines it, else NULL. */
static void *allocator_fn(const char *name, void *malloc_object)
{
	void *fn = dlsym(RTLD_DEFAULT, name);
	return malloc_object && object_of(fn) == malloc_object ? fn : NULL;
}

static void add(const struct counter *c, size_t n)
{
	for (size_t i = 0; i < n && nsampled < COUNTERS_MAX; i++)
		sampled[nsampled++] = &c[i];
}

/* jemalloc's and tcmalloc's statistics exist only in some builds (jemalloc
 * --disable-stats), and tcmalloc answers only once its initializer ran,
 * which comes after ours when it is preloaded before us. So they are
 * tried (probe) until one answers, then read once more, all keys after
 * that answer, to learn which exist: a pass that overlaps the initializer
 * sees its first keys refused and the later ones answered (seen in CI).
 *
 * The first try is made in our constructor, not by the writer: tcmalloc
 * builds its interface lazily (a default MallocExtension, made on first
 * use under pthread_once) and its initializer replaces it with the real
 * one without waiting for that once. A first use on the writer thread,
 * racing with the initializer on the main thread, could install the
 * default after the real one: every later query, the program's own
 * included, would then be refused (3 in 10 runs of a program preloaded
 * with tcmalloc, then us). Made on the thread that runs the initializers,
 * before tcmalloc's, the first use is over when that one starts. */
static const struct counter *keyed;     /* their table, until probed */
static size_t nkeyed;

static int read_key(const struct counter *c, uint64_t *v)
{
	size_t x = 0, len = sizeof x;
	int ok = c->src == JEMALLOC ? mallctl_p(c->key, &x, &len, NULL, 0) == 0
	                            : tc_property_p(c->key, &x) != 0;
	*v = x;
	return ok ? 0 : -1;
}

/* The keyed counters that answer join sampled[] (the first time any
 * does). */
static void probe(void)
{
	uint64_t v;
	size_t i = 0;
	while (i < nkeyed && read_key(&keyed[i], &v) != 0)
		i++;
	if (i == nkeyed)
		return;         /* not answering yet */
	for (i = 0; i < nkeyed; i++)
		if (read_key(&keyed[i], &v) == 0)
			add(&keyed[i], 1);
	nkeyed = 0;
}

void rec_counters_init(void)
{
	period_ns = parse_period();
	if (!period_ns)
		return;
	long page = sysconf(_SC_PAGESIZE);
	page_bytes = page > 0 ? (uint64_t)page : 4096;
	add(statm, sizeof statm / sizeof statm[0]);
	void *obj = malloc_object();
	*(void **)&mallctl_p = allocator_fn("mallctl", obj);
	*(void **)&tc_property_p = allocator_fn("MallocExtension_GetNumericProperty", obj);
	void *mi = allocator_fn("mallinfo2", obj);
	if (mallctl_p) {
		keyed = jemalloc;
		nkeyed = sizeof jemalloc / sizeof jemalloc[0];
	} else if (tc_property_p) {
		keyed = tcmalloc;
		nkeyed = sizeof tcmalloc / sizeof tcmalloc[0];
	}
	if (nkeyed)
		probe();
	else if (mi) {        /* set only for glibc: read_all calls it when set */
		*(void **)&mallinfo2_p = mi;
		add(glibc, sizeof glibc / sizeof glibc[0]);
	}
}

void rec_counters_start(void)
{
	named = 0;
	next_due = alloc_due = 0;
	spent_cpu_ns = spent_alloc_ns = 0;
}

void rec_counters_spent(uint64_t *cpu_ns, uint64_t *alloc_ns)
{
	*cpu_ns = spent_cpu_ns;
	*alloc_ns = spent_alloc_ns;
}

/* A number of /proc/self/statm at *p, and the space after it. */
static uint64_t statm_field(const char **p)
{
	uint64_t v = 0;
	for (; **p >= '0' && **p <= '9'; (*p)++)
		v = v * 10 + (uint64_t)(**p - '0');
	if (**p == ' ')
		(*p)++;
	return v;
}

/* resident and shared pages (fields 2 and 3; resident = RssAnon +
 * RssFile + RssShmem, shared = RssFile + RssShmem, the kernel's
 * counters that /proc/self/status prints as VmRSS and its parts). */
static int read_statm(uint64_t *resident, uint64_t *shared)
{
	static char buf[STATM_BYTES];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = buf;
	statm_field(&p);                /* size */
	*resident = statm_field(&p) * page_bytes;
	*shared = statm_field(&p) * page_bytes;
	return 0;
}

/* COUNTER records for sampled[from, nsampled). */
static void name_from(uint32_t from)
{
	for (uint32_t i = from; i < nsampled; i++) {
		struct tf_record r = { .kind = TF_COUNTER, .id = i + 1, .str = sampled[i]->name };
		rec_writer_meta(&r);
	}
	named = nsampled;
}

void rec_counters_names(void)
{
	name_from(0);
}

/* The allocator's counters into v[NSTATM ...]. */
static void read_allocator(uint64_t *v)
{
	struct mallinfo2 mi = { 0 };
	if (mallctl_p) {                /* jemalloc's statistics are refreshed by an epoch bump */
		uint64_t epoch = 1;
		size_t len = sizeof epoch;
		mallctl_p("epoch", &epoch, &len, &epoch, len);
	}
	if (mallinfo2_p)
		mi = mallinfo2_p();
	for (uint32_t i = NSTATM; i < nsampled; i++) {
		const struct counter *c = sampled[i];
		if (c->src == GLIBC)
			v[i] = *(const size_t *)(const void *)((const char *)&mi + c->offset);
		else if (read_key(c, &v[i]) < 0)
			v[i] = 0;
	}
}

/* One SAMPLE: the RSS counters, and the allocator's too when with_alloc.
 * Those are read first, so that the sample's time, taken after the reads,
 * is at most a statm read after the RSS it holds. */
static void sample(int with_alloc)
{
	uint64_t v[COUNTERS_MAX], resident, shared;
	uint8_t packed[COUNTERS_MAX * TF_VARINT_MAX];
	if (with_alloc && nkeyed)
		probe();
	with_alloc = with_alloc && nsampled > NSTATM;
	if (with_alloc) {
		uint64_t t0 = rec_now();
		read_allocator(v);
		spent_alloc_ns += rec_now() - t0;
	}
	if (read_statm(&resident, &shared) < 0)
		return;         /* a SAMPLE always holds rss_bytes */
	v[0] = resident;
	v[1] = resident - shared;
	v[2] = shared;
	if (named < nsampled)
		name_from(named);
	uint32_t n = with_alloc ? nsampled : NSTATM;
	struct tf_record r = { .kind = TF_SAMPLE, .t = rec_now(), .id = 1, .count = n,
			       .values = packed, .values_len = (uint32_t)tf_sample_pack(packed, v, n) };
	rec_writer_meta(&r);
}

/* The next due time after one due at due, read at now: a period after the
 * due time (no drift), or after now if the writer fell behind by more (no
 * burst of catching up). */
static uint64_t next_after(uint64_t due, uint64_t now, uint64_t period)
{
	return due + period > now ? due + period : now + period;
}

uint64_t rec_counters_tick(int force)
{
	if (!period_ns || rec_writer_failed())
		return UINT64_MAX;      /* off, or nothing can be written any more */
	uint64_t now = rec_now();
	if (now >= next_due || force) {
		int with_alloc = (nsampled > NSTATM || nkeyed) && (now >= alloc_due || force);
		uint64_t cpu = rec_thread_cpu_ns();
		sample(with_alloc);
		spent_cpu_ns += rec_thread_cpu_ns() - cpu;
		uint64_t after = rec_now();
		if (with_alloc) {
			/* its cost (mallinfo2 walks every free chunk under
			 * the arena's lock) at most 1 / ALLOC_COST_SHARE of the time */
			uint64_t spaced = (after - now) * ALLOC_COST_SHARE;
			alloc_due = next_after(alloc_due, now, spaced > period_ns ? spaced : period_ns);
		}
		next_due = next_after(next_due, now, period_ns);
		now = after;
	}
	return next_due > now ? next_due - now : 0;
}
