/*
 * ctl_sample.c - known totals for the sampling test (test_sample.py).
 *
 * site_a allocates 200 000 blocks of 256 bytes and frees every second one,
 * site_b 10 000 blocks of 4096 bytes (by reallocarray, which glibc makes
 * call realloc: sampled once, not twice), site_c 100 blocks of 100 000 bytes;
 * then it puts the mark "full" (rec_mark found through dlsym, so the
 * program needs no link to libheapreel.so), frees everything and exits 0.
 * Live at "full": a 100 000 x 256, b 10 000 x 4096, c 100 x 100 000.
 * Prints nothing.
 */
#include <dlfcn.h>
#include <stdlib.h>

#define A_N 200000
#define A_SIZE 256
#define B_N 10000
#define B_SIZE 4096
#define C_N 100
#define C_SIZE 100000

static void *a[A_N], *b[B_N], *c[C_N];

__attribute__((noinline)) static void site_a(void)
{
	for (int i = 0; i < A_N; i++)
		a[i] = malloc(A_SIZE);
	for (int i = 0; i < A_N; i += 2) {
		free(a[i]);
		a[i] = NULL;
	}
}

__attribute__((noinline)) static void site_b(void)
{
	for (int i = 0; i < B_N; i++)
		b[i] = reallocarray(NULL, B_SIZE / 16, 16);
}

__attribute__((noinline)) static void site_c(void)
{
	for (int i = 0; i < C_N; i++)
		c[i] = malloc(C_SIZE);
}

int main(void)
{
	int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "rec_mark");
	site_a();
	site_b();
	site_c();
	if (!mark || mark("full") != 0)
		return 1;
	for (int i = 0; i < A_N; i++)
		free(a[i]);
	for (int i = 0; i < B_N; i++)
		free(b[i]);
	for (int i = 0; i < C_N; i++)
		free(c[i]);
	return 0;
}
