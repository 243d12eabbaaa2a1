/*
 * mmap_calls - the cost of the recorder's mmap hooks per call (bench/run.py,
 * `./heapreel bench --only mmap`). PAIRS times: map MAP_BYTES of anonymous
 * memory, touch its first page, unmap it; the same loop runs without the
 * recorder (the base) and under it, where each mapping and unmapping is
 * recorded with its stack. Prints the loop's own time, so the recorder's
 * start and end are not in it:
 *   ns_per_pair N.N
 * Must never: print anything else on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define MAP_BYTES (64 << 10)  /* below glibc's mmap threshold, like a pool's arena */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 0;
	if (pairs <= 0) {
		fprintf(stderr, "usage: mmap_calls PAIRS\n");
		return 2;
	}
	double t0 = now_ns();
	for (long i = 0; i < pairs; i++) {
		char *p = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap_calls: mmap");
			return 1;
		}
		p[0] = (char)i;     /* the program's own work: fault the page in */
		munmap(p, MAP_BYTES);
	}
	double t1 = now_ns();
	printf("ns_per_pair %.1f\n", (t1 - t0) / (double)pairs);
	return 0;
}
