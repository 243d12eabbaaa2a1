/*
 * dlopener LIB [N [ROUNDS]] - dlopen()s LIB (libhrdltest.so: its
 * constructor makes 2 allocations of 4001 bytes), calls hrdltest_work(N)
 * (N allocations of 4002 bytes, default 6), then dlclose()s it (its
 * destructor frees the 2); ROUNDS times (default 1), so the same library is
 * mapped and unmapped again and again.
 * Prints "ctor allocs <2 ROUNDS> size 4001" and "work allocs <N ROUNDS> size 4002".
 * Exit 1 with a message if the library or symbol cannot be loaded or unloaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define CTOR_ALLOCS 2                 /* libhrdltest's constructor */

static int fail(void)
{
	fprintf(stderr, "dlopener: %s\n", dlerror());
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: dlopener LIB [N [ROUNDS]]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 6;
	int rounds = argc > 3 ? atoi(argv[3]) : 1;
	long done = 0;
	for (int r = 0; r < rounds; r++) {
		void *h = dlopen(argv[1], RTLD_NOW);
		if (!h)
			return fail();
		int (*work)(int) = (int (*)(int))dlsym(h, "hrdltest_work");
		if (!work)
			return fail();
		done += work(n);
		if (dlclose(h))
			return fail();
	}
	printf("ctor allocs %d size 4001\nwork allocs %ld size 4002\n", CTOR_ALLOCS * rounds, done);
	return 0;
}
