/*
 * att_midcall.c - a program whose first thread lives inside malloc and
 * free, for attaching to it (tests/attach/test_midcall.py): gdb stops that
 * thread, mostly in the allocator, and makes its calls there.
 *
 *   att_midcall STOP_FILE
 *
 * Prints "ready PID", then allocates and frees small blocks (tcache's
 * lock-free path) and larger ones (the arena's, under its lock) in a loop,
 * each filled with a pattern of its own and checked before it is freed,
 * and two live at once must differ. Every ROUND steps it looks for
 * STOP_FILE; once it exists it prints "corrupt=N" (0 unless a block was
 * handed out twice or written by someone else) and exits 0 if N is 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUND 100000       /* steps between two looks for STOP_FILE */
#define SMALL 24           /* a tcache size */
#define LARGE 4000         /* past tcache's own bins' common sizes: the arena's */

static unsigned long bad;

static void fill(unsigned char *p, size_t n, unsigned char tag)
{
	memset(p, tag, n);
}

static void check(const unsigned char *p, size_t n, unsigned char tag)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != tag) {
			bad++;
			return;
		}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: att_midcall STOP_FILE\n");
		return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (uint64_t k = 0; access(argv[1], F_OK) != 0;) {
		for (int i = 0; i < ROUND; i++, k++) {
			size_t n = k % 8 ? SMALL : LARGE;
			unsigned char *a = malloc(n), *b = malloc(n);
			if (!a || !b || a == b) {
				bad++;
				free(a);
				continue;
			}
			fill(a, n, (unsigned char)k);
			fill(b, n, (unsigned char)~k);
			check(a, n, (unsigned char)k);
			check(b, n, (unsigned char)~k);
			free(b);
			free(a);
		}
	}
	printf("corrupt=%lu\n", bad);
	return bad != 0;
}
