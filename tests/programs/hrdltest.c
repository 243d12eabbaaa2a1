/*
 * libhrdltest.so - a small library for dlopener. Its constructor allocates
 * 2 blocks of 4001 bytes (ctor_site) and keeps them until its destructor;
 * hrdltest_work(n) allocates and frees n blocks of 4002 bytes (work_site).
 * A trace must show those allocations with stacks whose innermost frame is
 * inside this library, and a MODULE record for it.
 */
#include <stdlib.h>

static void *kept[2];

__attribute__((noinline)) static void *ctor_site(void) { return malloc(4001); }
__attribute__((noinline)) static void *work_site(void) { return malloc(4002); }

__attribute__((constructor)) static void hrdltest_init(void)
{
	for (int i = 0; i < 2; i++)
		kept[i] = ctor_site();
}

__attribute__((destructor)) static void hrdltest_fini(void)
{
	for (int i = 0; i < 2; i++)
		free(kept[i]);
}

int hrdltest_work(int n);
int hrdltest_work(int n)
{
	for (int i = 0; i < n; i++)
		free(work_site());
	return n;
}
