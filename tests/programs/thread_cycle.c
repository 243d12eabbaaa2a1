/*
 * thread_cycle - N threads (argv[1], default 10000) one after the other,
 * each allocating one block of 777 bytes from cycle_site and freeing it.
 * The recorder maps each thread's own tables (24 KiB) at its first
 * allocation and must unmap them at its exit, or a program that keeps
 * making threads grows without end: the process's virtual size and
 * mappings (/proc/self/statm, /proc/self/maps) are read after WARM_UP
 * threads and again at the end, and printed as
 * "threads <all> size 777 vsz_kib <before> <after> maps <before> <after>".
 * glibc's own growth in between is bounded and does not grow with N (its
 * cache of thread stacks, at most 40 MiB; an arena).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WARM_UP 16  /* threads before the first reading: stack cache, arenas, rings */
#define SIZE 777

__attribute__((noinline)) static void *cycle_site(void)
{
	return malloc(SIZE);
}

static void *worker(void *arg)
{
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
	if (n < 1) {
		fprintf(stderr, "usage: thread_cycle [N >= 1]\n");
		return 2;
	}
	if (cycle(WARM_UP) != 0)
		return 1;
	long v0 = vsz_kib(), m0 = maps();
	if (cycle(n) != 0)
		return 1;
	printf("threads %d size %d vsz_kib %ld %ld maps %ld %ld\n", n + WARM_UP, SIZE, v0, vsz_kib(),
	       m0, maps());
	return 0;
}
