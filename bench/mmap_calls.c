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
#include "calls.h"

#include <sys/mman.h>

#define MAP_BYTES (64 << 10)  /* a pool allocator's arena, say */

int main(int argc, char **argv)
{
	long pairs = calls_pairs(argc, argv, "mmap_calls");
	if (!pairs)
		return 2;
	double t0 = calls_now_ns();
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
	calls_report(t0, calls_now_ns(), pairs);
	return 0;
}
