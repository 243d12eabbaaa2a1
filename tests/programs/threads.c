/*
 * threads - N worker threads (argv[1], 1..8, default 4), each named
 * "worker-<i>" and allocating K blocks (argv[2], default 1000) of size
 * 2000 + i from its own call site (site0 .. site7). After all have
 * allocated (a barrier), worker i frees the blocks of worker (i + 1) % N,
 * so every block is freed by another thread than the one that allocated it.
 * Prints "thread <i> allocs <K> size <2000+i>" per worker, then
 * "frees <N*K>". A trace must show N*K allocations, each size from one
 * stack, N distinct stacks, the same number of frees, and N + 1 threads
 * (the main thread allocates stdio's buffer).
 * With a third argument "exit", worker 0 calls exit(3) right after the
 * barrier while the others are freeing: the trace must still be complete
 * (END) with all N*K allocations.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 8

static int nthreads = 4, count = 1000, exit_early;
static void **blocks[MAX_THREADS];
static pthread_barrier_t barrier;

#define SITE(i) \
	__attribute__((noinline)) static void *site##i(size_t n) { return malloc(n); }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void *(*const sites[MAX_THREADS])(size_t) = {
	site0, site1, site2, site3, site4, site5, site6, site7,
};

static void *worker(void *arg)
{
	int i = (int)(long)arg;
	char name[16];
	snprintf(name, sizeof name, "worker-%d", i);
	pthread_setname_np(pthread_self(), name);
	for (int k = 0; k < count; k++)
		blocks[i][k] = sites[i](2000 + (size_t)i);
	pthread_barrier_wait(&barrier);
	if (exit_early && i == 0)
		exit(3);
	void **theirs = blocks[(i + 1) % nthreads];
	for (int k = 0; k < count; k++)
		free(theirs[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		count = atoi(argv[2]);
	exit_early = argc > 3 && !strcmp(argv[3], "exit");
	if (nthreads < 1 || nthreads > MAX_THREADS || count < 1) {
		fprintf(stderr, "usage: threads [N 1..8] [K >= 1]\n");
		return 2;
	}
	static void *storage[MAX_THREADS][100000];
	if (count > 100000)
		count = 100000;
	for (int i = 0; i < nthreads; i++)
		blocks[i] = storage[i];
	pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
	pthread_t t[MAX_THREADS];
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < nthreads; i++)
		printf("thread %d allocs %d size %d\n", i, count, 2000 + i);
	printf("frees %d\n", nthreads * count);
	return 0;
}
