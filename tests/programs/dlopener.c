/*
 * dlopener LIB [N] - dlopen()s LIB (libhrdltest.so: its constructor makes 2
 * allocations of 4001 bytes), calls hrdltest_work(N) (N allocations of 4002
 * bytes, default 6), then dlclose()s it (its destructor frees the 2).
 * Prints "ctor allocs 2 size 4001" and "work allocs <N> size 4002".
 * Exit 1 with a message if the library or symbol cannot be loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: dlopener LIB [N]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 6;
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopener: %s\n", dlerror());
		return 1;
	}
	int (*work)(int) = (int (*)(int))dlsym(h, "hrdltest_work");
	if (!work) {
		fprintf(stderr, "dlopener: %s\n", dlerror());
		return 1;
	}
	int done = work(n);
	dlclose(h);
	printf("ctor allocs 2 size 4001\nwork allocs %d size 4002\n", done);
	return 0;
}
