/*
 * imp_inline.c - an allocation inside an always_inline function, compiled
 * -O2 -g: the importer must name the inlined function as its own frame
 * (inline_depth 1, its own file:line) above the function it was inlined
 * into. It must never print.
 */
#include <stdlib.h>
#include <string.h>

#define N_CALLS 20
#define BASE_SIZE 64

void *volatile sink[N_CALLS];

static inline __attribute__((always_inline)) void *inl_alloc(size_t n)
{
	void *p = malloc(n); /* SITE_INL */

	if (p)
		memset(p, 1, n);
	return p;
}

__attribute__((noinline)) void *outer_fn(size_t n)
{
	return inl_alloc(n + 1);
}

int main(void)
{
	for (int i = 0; i < N_CALLS; i++)
		sink[i] = outer_fn(BASE_SIZE + (size_t)i);
	for (int i = 0; i < N_CALLS; i++)
		free(sink[i]);
	return 0;
}
