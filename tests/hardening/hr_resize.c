/*
 * hr_resize - threads whose rings fill with reallocs after the trace
 * stopped being written, for test_diskfull.py's fsize_shut: a realloc is
 * two events, so a thread left one slot of room loses a realloc that a
 * one-event call after it would still fit into. The trace must then hold
 * a prefix of the thread's calls (the recorder shuts a thread's ring at
 * its first call lost), never that free without its realloc.
 *
 *   hr_resize REALLOCS
 *
 * Phase 0: the main thread makes PHASE0_PAIRS malloc/free pairs, prints
 * "phase 0 done" and reads a line. Phase 1: it makes malloc/free pairs
 * until a line comes on stdin (the test lowers the file size limit, waits
 * for the recorder's line saying writing failed, then sends it) and prints
 * "phase 1 done". Phase 2: RESIZERS threads start together (each claims
 * a ring of its own, empty); thread k makes k + 1 mallocs, REALLOCS
 * reallocs of its last block and frees its blocks, so one of them meets
 * an odd number of free slots whatever else its ring took. The main
 * thread prints "resizer K tid T" for each, then "done".
 *
 * Must never: free a block another thread allocated (the test counts
 * each resizer's calls).
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PHASE0_PAIRS 20000
#define PAIRS_PER_LOOK 1000           /* phase 1: pairs between looks at stdin */
#define PHASE1_MAX_LOOKS 1000000      /* no line for that long: give up */
#define RESIZERS 2
#define BLOCK_MIN 24                  /* a resizer's sizes alternate from here ... */
#define BLOCK_STEP 40                 /* ... by this much */

struct resizer {
	pthread_t t;
	int k;
	pid_t tid;
};

static long reallocs;
static pthread_barrier_t start;

static void pairs(long n, unsigned seed)
{
	for (long i = 0; i < n; i++) {
		void *p = malloc(16 + (size_t)((i * 7 + seed) % 500));
		if (!p)
			abort();
		free(p);
	}
}

static void wait_line(void)
{
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		exit(2);
}

static void *resize(void *arg)
{
	struct resizer *r = arg;
	r->tid = gettid();
	void *b[RESIZERS] = { 0 };
	pthread_barrier_wait(&start);
	for (int i = 0; i <= r->k; i++)
		if (!(b[i] = malloc(BLOCK_MIN)))
			abort();
	for (long i = 0; i < reallocs; i++)
		if (!(b[r->k] = realloc(b[r->k], BLOCK_MIN + (size_t)(i % 2) * BLOCK_STEP)))
			abort();
	for (int i = 0; i <= r->k; i++)
		free(b[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (reallocs = atol(argv[1])) < 1) {
		fprintf(stderr, "usage: hr_resize REALLOCS\n");
		return 64;
	}
	pairs(PHASE0_PAIRS, 0);
	printf("phase 0 done\n");
	fflush(stdout);
	wait_line();

	struct pollfd in = { .fd = 0, .events = POLLIN };
	long looks = 0;
	while (poll(&in, 1, 0) == 0) {
		if (++looks > PHASE1_MAX_LOOKS)
			return 3;
		pairs(PAIRS_PER_LOOK, (unsigned)looks);
	}
	wait_line();
	printf("phase 1 done\n");
	fflush(stdout);

	struct resizer r[RESIZERS];
	pthread_barrier_init(&start, NULL, RESIZERS);
	for (int k = 0; k < RESIZERS; k++) {
		r[k] = (struct resizer){ .k = k };
		if (pthread_create(&r[k].t, NULL, resize, &r[k]))
			abort();
	}
	for (int k = 0; k < RESIZERS; k++)
		pthread_join(r[k].t, NULL);
	for (int k = 0; k < RESIZERS; k++)
		printf("resizer %d tid %d\n", k, (int)r[k].tid);
	printf("done\n");
	return 0;
}
