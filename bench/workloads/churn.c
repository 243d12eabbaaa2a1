/*
 * churn.c - the benchmarks' allocator workload (bench/run.py): THREADS
 * threads each make OPS random heap operations, deterministically from
 * SEED, at the bottom of call chains of varied depth, so that a profiler
 * pays for many distinct stacks as well as for many calls.
 *
 *   churn THREADS OPS SEED      (bench/run.py: churn 4 1000000 42)
 *
 * Each thread keeps a table of SLOTS slots. An operation picks a slot among
 * those in use so far: an empty one gets a block (malloc, calloc or
 * realloc(NULL, n)), a full one is resized (realloc) or freed. Sizes are
 * log-uniform from 8 bytes to 64 KiB. During the first GROW_PERCENT of the
 * operations the slots in use grow from a sixteenth to all of them, and one
 * allocation in KEEP_EVERY also makes a block kept until the end: the heap
 * grows, then stays about level. Every operation runs CHAIN_MIN to
 * CHAIN_MAX calls deep, each level one of two functions chosen by one of
 * SHAPES bit patterns: about a thousand distinct allocating stacks.
 *
 * The operations depend only on SEED and the thread's index, so every run
 * makes the same calls; the totals go to stderr as
 * "churn: alloc_calls=N free_calls=N ..." (run.py reads alloc_calls).
 *
 * Must never: depend on timing or on addresses for what it does (a run
 * under a profiler makes exactly the calls of a run without), or leak.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 4096            /* blocks a thread juggles */
#define GROW_PERCENT 30       /* of the operations: the heap grows during them */
#define KEEP_EVERY 16         /* one growing-phase allocation in this many is kept */
#define KEEP_MAX (1u << 20)   /* kept blocks per thread, at most */
#define CHAIN_MIN 5           /* call depth of an operation, from ... */
#define CHAIN_MAX 30          /* ... to */
#define SHAPES 12             /* bit patterns choosing the functions of a chain */
#define SIZE_OCTAVES 13       /* sizes 8 << 0 .. 8 << 13 = 64 KiB */
#define KEEP_OCTAVES 9        /* kept blocks: 8 bytes to 4 KiB */
#define FILL_MAX 64           /* bytes written into a new block (it is used) */
#define THREADS_MAX 256

enum kind { GET_MALLOC, GET_CALLOC, GET_REALLOC, RESIZE, PUT, KEEP };

struct worker {
	pthread_t th;
	unsigned index;
	uint64_t ops, seed, state;
	void **slot;
	size_t *size;
	void **kept;
	size_t nkept;
	enum kind kind;           /* the operation under way ... */
	size_t at, want;          /* ... its slot and size */
	uint64_t allocs, frees, reallocs, sum;
};

/* xorshift64*: a fast generator, plenty for picking operations */
static uint64_t next(struct worker *w)
{
	w->state ^= w->state >> 12;
	w->state ^= w->state << 25;
	w->state ^= w->state >> 27;
	return w->state * 0x2545f4914f6cdd1dull;
}

/* A size in octave o picked uniformly among octaves: 8 << o to twice that. */
static size_t pick_size(struct worker *w, unsigned octaves)
{
	uint64_t r = next(w);
	size_t low = (size_t)8 << (r % octaves);
	return low + (size_t)((r >> 16) % low);
}

static void fill(struct worker *w, void *p, size_t n)
{
	memset(p, (int)(w->index & 0xff) + 1, n < FILL_MAX ? n : FILL_MAX);
}

static void *must(void *p)
{
	if (!p)
		abort();
	return p;
}

/* The operations: the only calls of the allocator. noipa keeps each a
 * frame of its own, as the chains above them. */
__attribute__((noipa)) static void op_get(struct worker *w)
{
	size_t n = w->want;
	void *p;

	if (w->kind == GET_MALLOC) {
		p = must(malloc(n));
	} else if (w->kind == GET_CALLOC) {
		n = (n + 7) / 8 * 8;
		p = must(calloc(n / 8, 8));
		w->sum += ((unsigned char *)p)[n - 1];
	} else {
		p = must(realloc(NULL, n));
	}
	fill(w, p, n);
	w->slot[w->at] = p;
	w->size[w->at] = n;
	w->allocs++;
}

__attribute__((noipa)) static void op_resize(struct worker *w)
{
	void *p = must(realloc(w->slot[w->at], w->want));

	w->sum += ((unsigned char *)p)[0];
	w->slot[w->at] = p;
	w->size[w->at] = w->want;
	w->reallocs++;
}

__attribute__((noipa)) static void op_put(struct worker *w)
{
	unsigned char *p = w->slot[w->at];

	w->sum += p[0] + w->size[w->at];
	free(p);
	w->slot[w->at] = NULL;
	w->frees++;
}

__attribute__((noipa)) static void op_keep(struct worker *w)
{
	size_t n = pick_size(w, KEEP_OCTAVES);
	void *p = must(malloc(n));

	fill(w, p, n);
	w->kept[w->nkept++] = p;
	w->allocs++;
}

static void op(struct worker *w)
{
	switch (w->kind) {
	case RESIZE:
		op_resize(w);
		break;
	case PUT:
		op_put(w);
		break;
	case KEEP:
		op_keep(w);
		break;
	default:
		op_get(w);
	}
}

/* A chain of depth calls down to op(): at each level shape's bit picks
 * left or right, so (depth, shape) is one call path. The returned count
 * keeps each level's frame (no tail call). */
static int down(struct worker *w, int depth, unsigned shape);

__attribute__((noipa)) static int left(struct worker *w, int depth, unsigned shape)
{
	int r = down(w, depth, shape);

	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

__attribute__((noipa)) static int right(struct worker *w, int depth, unsigned shape)
{
	int r = down(w, depth, shape);

	__asm__ volatile("" : "+r"(r));
	return r + 3;
}

static int down(struct worker *w, int depth, unsigned shape)
{
	if (!depth) {
		op(w);
		return 0;
	}
	return (shape >> (depth % 4)) & 1 ? left(w, depth - 1, shape) : right(w, depth - 1, shape);
}

__attribute__((noipa)) static void run_op(struct worker *w)
{
	uint64_t r = next(w);
	int depth = CHAIN_MIN + (int)(r % (CHAIN_MAX - CHAIN_MIN + 1));

	w->sum += (uint64_t)left(w, depth - 1, (unsigned)((r >> 20) % SHAPES));
}

/* Chooses the next operation: its kind, slot and size. */
static void choose(struct worker *w, size_t in_use)
{
	uint64_t r = next(w);
	unsigned pct = (unsigned)((r >> 40) % 100);

	w->at = (size_t)(r % in_use);
	w->want = pick_size(w, SIZE_OCTAVES);
	if (!w->slot[w->at])
		w->kind = pct < 70 ? GET_MALLOC : pct < 90 ? GET_CALLOC : GET_REALLOC;
	else
		w->kind = pct < 15 ? RESIZE : PUT;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t grow = w->ops * GROW_PERCENT / 100;

	w->state = (w->seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)w->index + 1) << 32;
	w->slot = must(calloc(SLOTS, sizeof *w->slot));
	w->size = must(calloc(SLOTS, sizeof *w->size));
	w->kept = must(malloc(KEEP_MAX * sizeof *w->kept));
	for (uint64_t i = 0; i < w->ops; i++) {
		size_t in_use = i < grow ? SLOTS / 16 + (SLOTS - SLOTS / 16) * i / grow : SLOTS;
		bool get;

		choose(w, in_use);
		get = w->kind != RESIZE && w->kind != PUT;
		run_op(w);
		if (i < grow && get && next(w) % KEEP_EVERY == 0 && w->nkept < KEEP_MAX) {
			w->kind = KEEP;
			run_op(w);
		}
	}
	for (w->at = 0; w->at < SLOTS; w->at++)
		if (w->slot[w->at])
			op_put(w);
	for (size_t i = 0; i < w->nkept; i++)
		free(w->kept[i]);
	w->frees += w->nkept;
	free(w->slot);
	free(w->size);
	free(w->kept);
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker *ws;
	unsigned long n;
	uint64_t allocs = 0, frees = 0, reallocs = 0, sum = 0;

	if (argc != 4 || !(n = strtoul(argv[1], NULL, 10)) || n > THREADS_MAX) {
		fprintf(stderr, "usage: churn THREADS OPS SEED (THREADS 1 to %d)\n", THREADS_MAX);
		return 2;
	}
	ws = must(calloc(n, sizeof *ws));
	for (unsigned i = 0; i < n; i++) {
		ws[i].index = i;
		ws[i].ops = strtoull(argv[2], NULL, 10);
		ws[i].seed = strtoull(argv[3], NULL, 10);
		if (pthread_create(&ws[i].th, NULL, work, &ws[i])) {
			fprintf(stderr, "churn: cannot start a thread\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(ws[i].th, NULL);
		allocs += ws[i].allocs;
		frees += ws[i].frees;
		reallocs += ws[i].reallocs;
		sum += ws[i].sum;
	}
	free(ws);
	fprintf(stderr, "churn: alloc_calls=%" PRIu64 " free_calls=%" PRIu64
		" realloc_calls=%" PRIu64 " checksum=%" PRIu64 "\n",
		allocs + reallocs, frees, reallocs, sum);
	return 0;
}
