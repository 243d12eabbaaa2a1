/*
 * bounded_live.c - bench/run.py's bounded-recording workload: a large live
 * set kept while the trace wraps, so that the recorder's live set (keymap.c)
 * holds LIVE blocks for most of the run.
 *
 *   bounded_live [LIVE [ROUNDS]]
 *
 * Allocates LIVE blocks (default 5 M) of 16 to 16 + 16 * (SIZES - 1) bytes
 * from SITES call sites, then ROUNDS times (default 40) frees a random
 * CHURN_PERCENT of them and allocates them again, and frees everything at
 * the end: LIVE blocks live from the end of the first phase on. Prints
 * "live N" and exits 0 (1: out of memory). Must never depend on the
 * recorder: run.py also runs it without one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE_DEFAULT 5000000
#define ROUNDS_DEFAULT 40
#define SITES 4
#define SIZES 7
#define CHURN_PERCENT 10

__attribute__((noinline)) static void *site0(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site1(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site2(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site3(size_t n) { return malloc(n); }

static void *(*const site[SITES])(size_t) = { site0, site1, site2, site3 };

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *block(uint64_t r)
{
	return site[r % SITES]((size_t)(16 + 16 * ((r >> 8) % SIZES)));
}

int main(int argc, char **argv)
{
	size_t live = argc > 1 ? strtoull(argv[1], NULL, 10) : LIVE_DEFAULT;
	int rounds = argc > 2 ? atoi(argv[2]) : ROUNDS_DEFAULT;
	void **p = calloc(live, sizeof *p);
	uint64_t s = 0x9E3779B97F4A7C15ull;
	if (!p)
		return 1;
	for (size_t i = 0; i < live; i++)
		if (!(p[i] = block(next_rand(&s))))
			return 1;
	for (int round = 0; round < rounds; round++)
		for (size_t k = 0; k < live / 100 * CHURN_PERCENT; k++) {
			uint64_t r = next_rand(&s);
			size_t i = (size_t)(r % live);
			free(p[i]);
			if (!(p[i] = block(r >> 24)))
				return 1;
		}
	for (size_t i = 0; i < live; i++)
		free(p[i]);
	free(p);
	printf("live %zu\n", live);
	return 0;
}
