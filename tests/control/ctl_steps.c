/*
 * ctl_steps.c - a program driven step by step through stdin, so that
 * trace-ctl commands land between known allocations without timing
 * (test_ctl.py). It prints "pid N" and then "ready" after each step; each
 * line read on stdin runs the next step:
 *   step 1: 10 x malloc(111)   (kept)
 *   step 2: 20 x malloc(222), then frees the ten 111-byte blocks
 *   step 3: 30 x malloc(333)
 *   step 4: 40 x malloc(444)
 *   step 5: 50 x malloc(555)
 * End of input: exits 0 (everything not freed stays live).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define STEPS 5

static void *kept[10];

static void step(int n)
{
	size_t size = (size_t)n * 111;
	int count = n * 10;
	for (int i = 0; i < count; i++) {
		void *p = malloc(size);
		if (n == 1)
			kept[i] = p;
	}
	if (n == 2)
		for (int i = 0; i < 10; i++)
			free(kept[i]);
}

int main(void)
{
	char line[64];
	printf("pid %d\nready\n", (int)getpid());
	fflush(stdout);
	for (int n = 1; n <= STEPS && fgets(line, sizeof line, stdin); n++) {
		step(n);
		printf("ready\n");
		fflush(stdout);
	}
	while (fgets(line, sizeof line, stdin))
		;
	return 0;
}
