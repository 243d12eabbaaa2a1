/*
 * pairs - N threads (argv[1], 2..8, default 4) each allocate K blocks
 * (argv[2], default 1000) of 3000 + i bytes from one call site, then wait
 * while the main thread calls rec_flush (libheapreel.so's rec.h API, found with
 * dlsym so the program runs without it too): that flush's writer round
 * finds N rings holding events, so it writes them in pairs of chunks, one
 * encoded by the writer's encoder thread (recorder/encoder.c). Then each
 * thread frees its own blocks. Prints "thread <i> allocs <K> size <3000+i>"
 * per thread, then "flush <rc>" (-2 when not preloaded).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 8
#define MAX_COUNT 10000

static int nthreads = 4, count = 1000;
static void *blocks[MAX_THREADS][MAX_COUNT];
static pthread_barrier_t allocated, flushed;

__attribute__((noinline)) static void *site(size_t n)
{
	return malloc(n);
}

static void *worker(void *arg)
{
	int i = (int)(long)arg;
	for (int k = 0; k < count; k++)
		blocks[i][k] = site(3000 + (size_t)i);
	pthread_barrier_wait(&allocated);
	pthread_barrier_wait(&flushed);
	for (int k = 0; k < count; k++)
		free(blocks[i][k]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		count = atoi(argv[2]);
	if (nthreads < 2 || nthreads > MAX_THREADS || count < 1 || count > MAX_COUNT) {
		fprintf(stderr, "usage: pairs [N 2..8] [K 1..%d]\n", MAX_COUNT);
		return 2;
	}
	int (*flush)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "rec_flush");
	pthread_barrier_init(&allocated, NULL, (unsigned)nthreads + 1);
	pthread_barrier_init(&flushed, NULL, (unsigned)nthreads + 1);
	pthread_t t[MAX_THREADS];
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	pthread_barrier_wait(&allocated);
	int rc = flush ? flush() : -2;
	pthread_barrier_wait(&flushed);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < nthreads; i++)
		printf("thread %d allocs %d size %d\n", i, count, 3000 + i);
	printf("flush %d\n", rc);
	return 0;
}
