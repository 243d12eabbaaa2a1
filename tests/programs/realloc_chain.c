/*
 * realloc_chain - every shape of realloc, from fixed call sites:
 *   realloc(NULL, 100)            -> an ALLOC with fn realloc (size 100)
 *   grow 100 -> 200 -> 5000 -> 300000, shrink -> 60   (4 REALLOCs, one site
 *                                  each, sizes 200, 5000, 300000, 60)
 *   realloc(p, 0)                 -> a FREE with fn realloc
 *   reallocarray(NULL, 3, 70)     -> an ALLOC with fn reallocarray (210)
 *   reallocarray(q, 30, 70)       -> a REALLOC with fn reallocarray (2100)
 *   free(q)                       -> a FREE with fn free
 * repeated ROUNDS times in a loop (so each site has one stack), and prints
 *   alloc <n>  realloc <n>  free_by_realloc <n>  free <n>
 * with the counts the trace must show (allocations of this program only;
 * stdio's own buffer is one more malloc).
 */
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 5

static void *volatile null_block; /* keeps realloc(NULL, n) a realloc call */

__attribute__((noinline)) static void *start(void) { return realloc(null_block, 100); }
__attribute__((noinline)) static void *grow1(void *p) { return realloc(p, 200); }
__attribute__((noinline)) static void *grow2(void *p) { return realloc(p, 5000); }
__attribute__((noinline)) static void *grow3(void *p) { return realloc(p, 300000); }
__attribute__((noinline)) static void *shrink(void *p) { return realloc(p, 60); }
__attribute__((noinline)) static void *to_zero(void *p) { return realloc(p, 0); }
__attribute__((noinline)) static void *arr_start(void) { return reallocarray(null_block, 3, 70); }
__attribute__((noinline)) static void *arr_grow(void *p) { return reallocarray(p, 30, 70); }

int main(void)
{
	int bad = 0;
	for (int r = 0; r < ROUNDS; r++) {
		char *p = start();
		p[0] = 5; /* must survive every move */
		p[99] = 1;
		p = grow1(p);
		p = grow2(p);
		p = grow3(p);
		p[299999] = 2;
		p = shrink(p);
		if (!p || p[0] != 5 || to_zero(p) != NULL)
			bad = 1;
		char *q = arr_start();
		q = arr_grow(q);
		if (!q)
			bad = 1;
		q[2099] = 3;
		free(q);
	}
	printf("alloc %d\nrealloc %d\nfree_by_realloc %d\nfree %d\n",
	       2 * ROUNDS, 5 * ROUNDS, ROUNDS, ROUNDS);
	return bad;
}
