/*
 * got_threads [THREADS [ROUNDS]] - jemalloc's API called by several threads
 * while the recorder rewrites and puts back the GOT entries they call
 * through (linked with -ljemalloc).
 *
 * THREADS threads (default 4) each do ROUNDS rounds (default 2000) of:
 * mallocx of SIZE bytes, rallocx to SIZE + 1, sdallocx (site_churn). Once
 * all have, the main thread lets them do ROUNDS more and meanwhile marks
 * "restore" (a recording with REC_TEST_GOT_RESTORE=restore puts the GOT
 * back there, while the threads call through it), then joins them. Nothing
 * is timed, and the work is bounded: the waits count rounds.
 *
 * Prints "threads THREADS" at the end.
 */
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "marks.h"

enum { THREADS_MAX = 64, SIZE = 1500 };

static long want;                     /* rounds per phase */
static atomic_int ready, go;          /* threads done with phase 1; phase 2 may start */

__attribute__((noinline)) static void site_churn(void)
{
	void *p = rallocx(mallocx(SIZE, 0), SIZE + 1, 0);
	sdallocx(p, SIZE + 1, 0);
}

static void *churn(void *arg)
{
	(void)arg;
	for (long i = 0; i < want; i++)
		site_churn();
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		sched_yield();
	for (long i = 0; i < want; i++)
		site_churn();
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	want = argc > 2 ? atol(argv[2]) : 2000;
	if (threads < 1 || threads > THREADS_MAX || want < 1) {
		fprintf(stderr, "usage: got_threads [THREADS (1-%d) [ROUNDS]]\n", THREADS_MAX);
		return 2;
	}
	pthread_t tid[THREADS_MAX];
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, churn, NULL) != 0) {
			fprintf(stderr, "got_threads: cannot create a thread\n");
			return 1;
		}
	while (atomic_load(&ready) < threads)
		sched_yield();
	atomic_store(&go, 1);
	mark("restore");
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	printf("threads %d\n", threads);
	return 0;
}
