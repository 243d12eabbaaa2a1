/*
 * thread_cycle - N threads (argv[1], default 10000) one after the other,
 * each allocating one block of 777 bytes from cycle_site and freeing it.
 * The recorder maps each thread's own tables (a 24 KiB mapping) at its
 * first allocation and must give them back at its exit (for the next
 * threads, a few kept), or a program that keeps making threads grows
 * without end: the process's virtual size and
 * mappings (/proc/self/statm, /proc/self/maps) are read after WARM_UP
 * threads and again at the end, and printed as
 * "threads <all> size 777 vsz_kib <before> <after> maps <before> <after>".
 * glibc's own growth in between is bounded and does not grow with N (its
 * cache of thread stacks, at most 40 MiB; an arena).
 * Each thread also sets a thread-specific value whose destructor, made
 * after the recorder's, allocates and frees DTOR_SIZE bytes from dtor_site
 * and sets the value again once: glibc calls it in two rounds, both after
 * the recorder's own destructors ran in that round (which gave its tables
 * back: the allocation takes them again). The line then goes on
 * "dtor_size <DTOR_SIZE> dtor_allocs <2 x threads> size_allocs <threads>".
 * With "dtor-first" after N, the threads allocate nothing but in that
 * destructor: their first capture comes in a destructor round, after
 * glibc passed the recorder's keys in it (they held nothing yet), and
 * size_allocs is 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WARM_UP 16  /* threads before the first reading: stack cache, arenas, rings */
#define SIZE 777
#define DTOR_SIZE 555
#define FIRST ((void *)1)       /* the value as the thread set it */
#define AGAIN ((void *)2)       /* as the destructor set it again */

static pthread_key_t key;
static int dtor_first;   /* "dtor-first": the workers allocate only in on_exit_key */

__attribute__((noinline)) static void *cycle_site(void)
{
	return malloc(SIZE);
}

__attribute__((noinline)) static void *dtor_site(void)
{
	return malloc(DTOR_SIZE);
}

static void on_exit_key(void *value)
{
	free(dtor_site());
	if (value == FIRST)
		pthread_setspecific(key, AGAIN);
}

static void *worker(void *arg)
{
	pthread_setspecific(key, FIRST);
	if (!dtor_first)
		free(cycle_site());
	return arg;
}

static long vsz_kib(void)
{
	long pages = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f || fscanf(f, "%ld", &pages) != 1)
		pages = -1;
	if (f)
		fclose(f);
	return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static long maps(void)
{
	long n = 0;
	int c;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static int cycle(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, NULL) != 0)
			return -1;
		pthread_join(t, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	dtor_first = argc > 2 && strcmp(argv[2], "dtor-first") == 0;
	if (n < 1 || (argc > 2 && !dtor_first)) {
		fprintf(stderr, "usage: thread_cycle [N >= 1 [dtor-first]]\n");
		return 2;
	}
	if (pthread_key_create(&key, on_exit_key) != 0 || cycle(WARM_UP) != 0)
		return 1;
	long v0 = vsz_kib(), m0 = maps();
	if (cycle(n) != 0)
		return 1;
	printf("threads %d size %d vsz_kib %ld %ld maps %ld %ld dtor_size %d dtor_allocs %d"
	       " size_allocs %d\n", n + WARM_UP, SIZE, v0, vsz_kib(), m0, maps(), DTOR_SIZE,
	       2 * (n + WARM_UP), dtor_first ? 0 : n + WARM_UP);
	return 0;
}
