/*
 * imp_known.c - a program with exactly known allocations, recorded and
 * imported by test_recorded.py, which checks counts and byte sums per
 * function, a call site's file:line, realloc chains, pairing across threads
 * and the peak. Built -O0 -g with frame pointers; it must never print (stdio
 * buffers would add allocations) and never change these numbers without
 * the test.
 */
#include <pthread.h>
#include <stdlib.h>

#define A_COUNT 100
#define A_SIZE 1000
#define B_COUNT 50
#define B_NMEMB 10
#define B_SIZE 30
#define C_STEPS 10                    /* malloc(100), then realloc to 200..1000 */
#define C_UNIT 100
#define T_COUNT 1000
#define T_SIZE 48
#define P_BLOCKS 8
#define P_BLOCK (1 << 20)
#define P_LAST (3 << 20)              /* the allocation that makes the peak */

void *volatile keep_a[A_COUNT], *volatile keep_b[B_COUNT];
void *volatile handoff[T_COUNT];
void *volatile keep_p[P_BLOCKS + 1];

void make_a(void)
{
	for (int i = 0; i < A_COUNT; i++)
		keep_a[i] = malloc(A_SIZE); /* SITE_A */
}

void make_b(void)
{
	for (int i = 0; i < B_COUNT; i++)
		keep_b[i] = calloc(B_NMEMB, B_SIZE);
}

void grow_c(void)
{
	void *p = malloc(C_UNIT);

	for (int i = 2; i <= C_STEPS; i++)
		p = realloc(p, (size_t)(C_UNIT * i));
	free(p);
}

void *produce(void *arg)
{
	(void)arg;
	for (int i = 0; i < T_COUNT; i++)
		handoff[i] = malloc(T_SIZE);
	return NULL;
}

void *consume(void *arg)
{
	(void)arg;
	for (int i = 0; i < T_COUNT; i++)
		free(handoff[i]);
	return NULL;
}

void peak_step(void)
{
	for (int i = 0; i < P_BLOCKS; i++)
		keep_p[i] = malloc(P_BLOCK);
	keep_p[P_BLOCKS] = malloc(P_LAST);
	for (int i = 0; i <= P_BLOCKS; i++)
		free(keep_p[i]);
}

int main(void)
{
	pthread_t t;

	make_a();
	for (int i = 0; i < A_COUNT; i++)
		free(keep_a[i]);
	make_b();                          /* never freed: live at the end */
	grow_c();
	pthread_create(&t, NULL, produce, NULL);
	pthread_join(t, NULL);
	pthread_create(&t, NULL, consume, NULL);
	pthread_join(t, NULL);
	peak_step();
	return 0;
}
