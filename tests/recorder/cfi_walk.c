/*
 * cfi_walk.c - allocations behind frames of every shape the recorder's CFI
 * walk meets, for test_unwind.py. Built with -O2 and without frame pointers,
 * so most frames have an RSP-based CFA; with_vla's VLA makes its CFA
 * RBP-based; on_signal runs on a signal frame, which the walk leaves to
 * libunwind. via_a and via_b have the same frame size and call the same
 * leaf_shared through the same frames, from the same frame of main: the
 * walk of one meets the previous walk's innermost frames (same return
 * addresses at the same depths and stack pointers) under a different
 * stack, which the recorder must not take for the previous stack (stack.c
 * reuses a stack id only when every frame matches).
 *
 * Allocates (each block freed at once):
 *   REPEAT x 777 bytes in leaf_alloc, under DEPTH + 1 frames of descend
 *   REPEAT x 779 bytes in with_vla, called from main
 *   1 x 778 bytes in on_signal, a SIGUSR1 handler raised from main
 *   REPEAT x, in turn: 780 bytes in leaf_shared < mid_shared < via_a;
 *     782 bytes in leaf_shared < extra_frame < mid_shared < via_a;
 *     781 bytes in leaf_shared < mid_shared < via_b
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

__attribute__((noinline)) static void leaf_shared(size_t n)
{
	char *p = malloc(n);
	sink += p != NULL;
	free(p);
}

__attribute__((noinline)) static void extra_frame(size_t n)
{
	leaf_shared(n);
	sink++;
}

__attribute__((noinline)) static void mid_shared(size_t n, int deeper)
{
	if (deeper)
		extra_frame(n);
	else
		leaf_shared(n);
	sink++;
}

__attribute__((noinline)) static void via_a(size_t n, int deeper)
{
	mid_shared(n, deeper);
	sink += 1;
}

__attribute__((noinline)) static void via_b(size_t n, int deeper)
{
	mid_shared(n + 1, deeper);
	sink += 2;  /* not the same code as via_a: not folded into one */
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
	for (int i = 0; i < REPEAT; i++) {
		via_a(780, 0);
		via_a(782, 1);
		via_b(780, 0);
	}
	signal(SIGUSR1, on_signal);
	raise(SIGUSR1);
	return 0;
}
