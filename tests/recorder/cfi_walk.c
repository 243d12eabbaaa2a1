/*
 * cfi_walk.c - allocations behind frames of every shape the recorder's CFI
 * walk meets, for test_unwind.py. Built with -O2 and without frame pointers,
 * so most frames have an RSP-based CFA; with_vla's VLA makes its CFA
 * RBP-based; on_signal runs on a signal frame, which the walk leaves to
 * libunwind.
 *
 * Allocates (each block freed at once):
 *   REPEAT x 777 bytes in leaf_alloc, under DEPTH + 1 frames of descend
 *   REPEAT x 779 bytes in with_vla, called from main
 *   1 x 778 bytes in on_signal, a SIGUSR1 handler raised from main
 * Prints nothing; exits 0.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH 30
#define REPEAT 3

static volatile unsigned sink;

__attribute__((noinline)) static void leaf_alloc(void)
{
	char *p = malloc(777);
	sink += p != NULL;
	free(p);
}

__attribute__((noinline)) static void descend(int n)
{
	if (n > 0)
		descend(n - 1);
	else
		leaf_alloc();
	sink++; /* keeps the recursive call from becoming a jump */
}

__attribute__((noinline)) static void with_vla(int n)
{
	char vla[n];
	memset(vla, 1, (size_t)n);
	char *p = malloc(779);
	sink += p != NULL && vla[n - 1];
	free(p);
}

static void on_signal(int sig)
{
	char *p = malloc(778);
	sink += p != NULL && sig;
	free(p);
}

int main(int argc, char **argv)
{
	(void)argv;
	for (int i = 0; i < REPEAT; i++) {
		descend(DEPTH);
		with_vla(argc + 100 + i);
	}
	signal(SIGUSR1, on_signal);
	raise(SIGUSR1);
	return 0;
}
