/*
 * entry - calls every allocator entry point libheapreel.so interposes, each from
 * its own call site (one function per entry point) with a size no other site
 * uses, REPEAT times in a loop, checks the alignment each one promises, then
 * frees everything with free() and prints one line per entry point:
 *   <fn> <calls> <requested size> <alignment>
 * A trace of it must hold exactly <calls> allocations of <requested size>
 * with that fn, all with one stack id, and one free per allocation.
 * malloc_usable_size (passed through, not recorded) is checked too.
 * Exit status 0, or 1 with a message if an allocation failed or is misaligned.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REPEAT 3

static int bad;

static void *check(void *p, size_t size, size_t align, const char *fn)
{
	if (!p || (uintptr_t)p % align || malloc_usable_size(p) < size) {
		fprintf(stderr, "entry: %s(%zu, align %zu) gave %p\n", fn, size, align, p);
		bad = 1;
	}
	return p;
}

/* realloc(NULL, n) through a volatile so the compiler cannot turn it into malloc */
static void *volatile null_block;

/* call_*, not do_*: google-pprof hides a frame named do_malloc (a tcmalloc internal). */
__attribute__((noinline)) static void *call_malloc(void) { return malloc(1001); }
__attribute__((noinline)) static void *call_calloc(void) { return calloc(2, 501); }
__attribute__((noinline)) static void *call_realloc(void) { return realloc(null_block, 1003); }
__attribute__((noinline)) static void *call_reallocarray(void) { return reallocarray(null_block, 4, 251); }
__attribute__((noinline)) static void *call_posix_memalign(void)
{
	void *p = NULL;
	return posix_memalign(&p, 64, 1005) == 0 ? p : NULL;
}
__attribute__((noinline)) static void *call_aligned_alloc(void) { return aligned_alloc(256, 1280); }
__attribute__((noinline)) static void *call_memalign(void) { return memalign(128, 1007); }
__attribute__((noinline)) static void *call_valloc(void) { return valloc(1008); }
__attribute__((noinline)) static void *call_pvalloc(void) { return pvalloc(1009); }

int main(void)
{
	static const struct {
		const char *fn;
		void *(*call)(void);
		size_t size, align;
	} sites[] = {
		{ "malloc", call_malloc, 1001, 16 },
		{ "calloc", call_calloc, 1002, 16 },
		{ "realloc", call_realloc, 1003, 16 },
		{ "reallocarray", call_reallocarray, 1004, 16 },
		{ "posix_memalign", call_posix_memalign, 1005, 64 },
		{ "aligned_alloc", call_aligned_alloc, 1280, 256 },
		{ "memalign", call_memalign, 1007, 128 },
		{ "valloc", call_valloc, 1008, 4096 },
		{ "pvalloc", call_pvalloc, 1009, 4096 },
	};
	enum { NSITES = sizeof sites / sizeof sites[0] };
	void *blocks[NSITES][REPEAT];
	for (int s = 0; s < NSITES; s++)
		for (int i = 0; i < REPEAT; i++)
			blocks[s][i] = check(sites[s].call(), sites[s].size, sites[s].align, sites[s].fn);
	unsigned char *z = blocks[1][0];
	for (size_t i = 0; i < 1002; i++)
		if (z[i])
			bad = 1;
	free(NULL); /* not an event */
	for (int s = 0; s < NSITES; s++)
		for (int i = 0; i < REPEAT; i++)
			free(blocks[s][i]);
	for (int s = 0; s < NSITES; s++)
		printf("%s %d %zu %zu\n", sites[s].fn, REPEAT, sites[s].size, sites[s].align);
	return bad;
}
