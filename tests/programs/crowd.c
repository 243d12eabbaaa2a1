/*
 * crowd - N threads (argv[1], 1..CROWD_MAX) alive at once, each allocating
 * K blocks (argv[2]) of CROWD_SIZE bytes from one call site, then waiting
 * for all the others (a barrier), then freeing its blocks and exiting: the
 * case of many live threads that each allocate a little (a thread pool, a
 * server with a thread per connection). Prints "crowd N x K" once done.
 * A trace must show N * K allocations of CROWD_SIZE, all freed, by N
 * threads; the bench times it with and without the recorder.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define CROWD_MAX 4000
#define CROWD_SIZE 4321
#define CROWD_STACK (64 * 1024)       /* thread stacks: 4000 fit in 256 MiB */

static int count;
static pthread_barrier_t all_alive;

__attribute__((noinline)) static void *crowd_site(void)
{
	return malloc(CROWD_SIZE);
}

static void *member(void *arg)
{
	void **mine = arg;
	for (int k = 0; k < count; k++)
		mine[k] = crowd_site();
	pthread_barrier_wait(&all_alive);
	for (int k = 0; k < count; k++)
		free(mine[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	count = argc > 2 ? atoi(argv[2]) : 20;
	if (n < 1 || n > CROWD_MAX || count < 1 || count > 1000) {
		fprintf(stderr, "usage: crowd [N 1..%d] [K 1..1000]\n", CROWD_MAX);
		return 2;
	}
	static pthread_t t[CROWD_MAX];
	static void *blocks[CROWD_MAX][1000];
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CROWD_STACK);
	pthread_barrier_init(&all_alive, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], &attr, member, blocks[i])) {
			fprintf(stderr, "crowd: cannot start thread %d\n", i);
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("crowd %d x %d\n", n, count);
	return 0;
}
