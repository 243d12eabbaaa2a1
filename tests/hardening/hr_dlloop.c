/*
 * hr_dlloop LIB ROUNDS N - dlopen()s LIB (libhrdltest.so from
 * tests/programs), calls hrdltest_work(N), dlclose()s it, ROUNDS times, so
 * the same library is mapped and unmapped again and again (its module
 * records must follow it: every allocation it makes is symbolized inside
 * it, whatever round it came from).
 * Per round the library's constructor allocates 2 blocks of 4001 bytes,
 * its destructor frees them, hrdltest_work allocates and frees N blocks of
 * 4002 bytes. Prints "rounds R ctor allocs 2R work allocs NR".
 * Exit 1 with a message if the library or its symbol cannot be loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define HRD_CTOR_ALLOCS 2             /* libhrdltest's constructor */

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: hr_dlloop LIB ROUNDS N\n");
		return 64;
	}
	int rounds = atoi(argv[2]), n = atoi(argv[3]);
	long work = 0;
	for (int r = 0; r < rounds; r++) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "hr_dlloop: %s\n", dlerror());
			return 1;
		}
		int (*fn)(int) = (int (*)(int))dlsym(h, "hrdltest_work");
		if (!fn) {
			fprintf(stderr, "hr_dlloop: %s\n", dlerror());
			return 1;
		}
		work += fn(n);
		if (dlclose(h)) {
			fprintf(stderr, "hr_dlloop: %s\n", dlerror());
			return 1;
		}
	}
	printf("rounds %d ctor allocs %d work allocs %ld\n", rounds, HRD_CTOR_ALLOCS * rounds, work);
	return 0;
}
