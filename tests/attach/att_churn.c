/*
 * att_churn.c - a multi-threaded program that allocates all the time, for
 * attach/detach cycles (tests/attach/test_cycles.py).
 *
 *   att_churn STOP_FILE
 *
 * CHURN_THREADS threads each keep a window of WINDOW blocks, replacing one
 * per step (malloc, realloc or calloc, sizes from a fixed sequence), every
 * block filled with a pattern of its own and checked before it is freed;
 * a ticker thread wakes every TICK_NS and keeps the longest gap between
 * two wake-ups (a pause of the whole process, an attach's). Prints "ready
 * PID" at once; when STOP_FILE exists, the threads stop and it prints
 * "threads=4 corrupt=0" (the same however long it ran: its output does
 * not depend on timing), and on stderr "max_gap_us=N steps=M".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHURN_THREADS 4
#define WINDOW 256
#define SIZE_MAX_STEP 2048
#define TICK_NS 1000000L
#define STOP_POLL_NS 10000000L

static atomic_int stop;
static atomic_long corrupt, steps;
static long max_gap_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct block {
	unsigned char *p;
	size_t n;
	unsigned char tag;
};

static void check(const struct block *b)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->p[i] != b->tag) {
			atomic_fetch_add(&corrupt, 1);
			return;
		}
}

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
	struct block w[WINDOW] = {{0}};
	for (unsigned k = 0; !atomic_load_explicit(&stop, memory_order_relaxed); k++) {
		struct block *b = &w[k % WINDOW];
		seed = seed * 1103515245u + 12345u;
		size_t n = 1 + (seed >> 8) % SIZE_MAX_STEP;
		unsigned char tag = (unsigned char)(seed >> 24);
		if (b->p)
			check(b);
		switch (k % 3) {
		case 0:
			free(b->p);
			b->p = malloc(n);
			break;
		case 1: {
			unsigned char *q = realloc(b->p, n);
			if (q)
				b->p = q;
			else
				n = b->n;
			break;
		}
		default:
			free(b->p);
			b->p = calloc(1, n);
			break;
		}
		if (!b->p) {
			b->n = 0;
			continue;
		}
		memset(b->p, tag, n);
		b->n = n;
		b->tag = tag;
		atomic_fetch_add_explicit(&steps, 1, memory_order_relaxed);
	}
	for (unsigned i = 0; i < WINDOW; i++) {
		if (w[i].p)
			check(&w[i]);
		free(w[i].p);
	}
	return NULL;
}

static void *ticker(void *arg)
{
	(void)arg;
	uint64_t last = now_ns();
	struct timespec tick = { 0, TICK_NS };
	while (!atomic_load(&stop)) {
		nanosleep(&tick, NULL);
		uint64_t t = now_ns();
		if ((long)(t - last) > max_gap_ns)
			max_gap_ns = (long)(t - last);
		last = t;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: att_churn STOP_FILE\n");
		return 2;
	}
	pthread_t t[CHURN_THREADS], tick;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (uintptr_t i = 0; i < CHURN_THREADS; i++)
		pthread_create(&t[i], NULL, churn, (void *)i);
	pthread_create(&tick, NULL, ticker, NULL);
	struct timespec poll = { 0, STOP_POLL_NS };
	while (access(argv[1], F_OK) != 0)
		nanosleep(&poll, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < CHURN_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_join(tick, NULL);
	printf("threads=%d corrupt=%ld\n", CHURN_THREADS, atomic_load(&corrupt));
	fprintf(stderr, "max_gap_us=%ld steps=%ld\n", max_gap_ns / 1000, atomic_load(&steps));
	return 0;
}
