/*
 * ctl_stopped.c - what a stopped recording writes (test_stopped.py): the
 * frees of blocks it recorded, and nothing else. rec_flush after rec_stop
 * returns once that holds (stopset.c).
 *
 *   recording: 1000 x malloc(100), kept               -> 1000 allocs
 *              1000 x malloc(200) + free               -> 1000 pairs
 *   rec_stop, rec_flush
 *   stopped:   100000 x malloc(64) + free              -> nothing
 *              1000 x malloc(300), kept
 *              free the 1000 blocks of 100 bytes       -> 1000 frees
 *              rec_flush, rec_mark("freed")
 *              free the 1000 blocks of 300 bytes       -> nothing
 *   rec_start: 500 x malloc(400) + free                -> 500 pairs
 *   rec_stop:  the same again (1000 x 100, 100000 x 64), from a second
 *              stop (the set is filled again)
 *
 * Argument "threads": 4 threads allocate and free blocks of their own
 * while the main thread stops and starts recording 200 times (each racer
 * makes calls in every phase; a rec_flush every tenth stop, then a
 * phase of calls with the set filled, the others race the filling of the
 * set): every block is freed by the end, so the import must show no live
 * block and no missed free (a recorded block whose free went unwritten
 * would stay live, or end when its address is recorded again). Each racer
 * also holds WINDOW custom blocks (rec.h), by turns in its own pool and in
 * none, at addresses of its own, ended the same way.
 *
 * Argument "wrap" (run bounded): rec_stop, KEPT x malloc(300) kept,
 * rec_start, then WRAP_PAIRS malloc + free of sizes from an LCG, enough
 * for a small bounded trace's ring to overwrite the stop and start marks;
 * exits without freeing the 300-byte blocks.
 *
 * Uses rec.h's weak declarations; exits 2 without libheapreel.so.
 */
#define REC_WEAK
#include "rec.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KEPT 1000
#define CHURN 100000
#define THREADS 4
#define TOGGLES 200
#define FLUSH_EVERY 10                 /* stops whose set is filled before a phase */
#define PHASES (2 * TOGGLES + TOGGLES / FLUSH_EVERY)
#define WINDOW 64                      /* blocks a racing thread holds */
#define STEPS 50                       /* a racer's steps per phase, at least */
#define RACER_SIZE 5000                /* 5000..6008 bytes: none of libc's own */
#define CUSTOM_BASE 0x10000000u        /* a racer's custom blocks: numbers, never touched */
#define CUSTOM_SPAN 0x100000u          /* between two racers' custom addresses */
#define CUSTOM_STEP 0x40u
#define WRAP_PAIRS 3000000
#define WRAP_SIZES 4096                /* sizes 16 .. 16 + WRAP_SIZES - 1 */

static void *kept[KEPT], *unknown[KEPT];

static void churn(size_t size, int n)
{
	for (int i = 0; i < n; i++) {
		void *volatile p = malloc(size);
		free(p);
	}
}

static int one_stop(void)
{
	for (int i = 0; i < KEPT; i++)
		kept[i] = malloc(100);
	churn(200, KEPT);
	if (rec_stop() != 0 || rec_flush() != 0)
		return 1;
	churn(64, CHURN);
	for (int i = 0; i < KEPT; i++)
		unknown[i] = malloc(300);
	for (int i = 0; i < KEPT; i++)
		free(kept[i]);
	if (rec_flush() != 0 || rec_mark("freed") != 0)
		return 1;
	for (int i = 0; i < KEPT; i++)
		free(unknown[i]);
	return 0;
}

/* Racer me's custom block k ends (if held) and another starts in its
 * place: even k in the racer's pool, odd k in none. */
static void custom_step(int me, rec_pool_t pool, unsigned k, int held, size_t size)
{
	const void *a = (const void *)(uintptr_t)(CUSTOM_BASE + (unsigned)me * CUSTOM_SPAN +
						  k * CUSTOM_STEP);
	if (k % 2 == 0) {
		if (held)
			rec_pool_free(pool, a);
		if (size)
			rec_pool_alloc(pool, a, size);
	} else {
		if (held)
			rec_free(a);
		if (size)
			rec_alloc(a, size);
	}
}

static _Atomic int phase;               /* bumped by each stop and start */
static _Atomic int seen[THREADS];      /* a racer's STEPS steps in that phase done */

/* Holds WINDOW blocks, replacing one each step: STEPS steps at the start of
 * each phase of the main thread's (so every phase, recording or stopped,
 * has each racer's calls, racing the writer filling the set after a stop),
 * then it waits for the next phase; at the end it frees them all. Sizes
 * from a private LCG. */
static void *racer(void *arg)
{
	int me = (int)(uintptr_t)arg;
	rec_pool_t pool = rec_pool_create("racer");
	void *held[WINDOW] = { 0 };
	unsigned x = (unsigned)me * 2654435761u + 1;
	for (int ph = 0, n = 0;;) {
		if (n == STEPS) {
			seen[me] = ph;
			if (ph == PHASES)
				break;   /* the main thread's last phase */
		}
		if (n >= STEPS) {
			if (phase == ph) {
				sched_yield();
				continue;
			}
			ph = phase;
			n = 0;
		}
		x = x * 1103515245u + 12345u;
		unsigned k = (x >> 8) % WINDOW;
		custom_step(me, pool, k, held[k] != NULL, RACER_SIZE + (x >> 16) % 1009);
		free(held[k]);
		held[k] = malloc(RACER_SIZE + (x >> 16) % 1009);
		n++;
	}
	for (unsigned k = 0; k < WINDOW; k++) {
		custom_step(me, pool, k, held[k] != NULL, 0);
		free(held[k]);
	}
	return NULL;
}

/* The next phase, once every racer did its steps in this one. */
static void next_phase(void)
{
	for (int i = 0; i < THREADS; i++)
		while (seen[i] != phase)
			sched_yield();
	phase++;
}

static int threads(void)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		seen[i] = -1;
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, racer, (void *)(uintptr_t)i) != 0)
			return 1;
	for (int c = 0; c < TOGGLES; c++) {
		rec_stop();
		next_phase();
		churn(64, 500);
		if (c % FLUSH_EVERY == 0) {
			rec_flush();   /* the racers then free while probing */
			next_phase();
		}
		rec_start();
		next_phase();
		churn(64, 500);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int wrap(void)
{
	if (rec_stop() != 0)
		return 1;
	for (int i = 0; i < KEPT; i++)
		unknown[i] = malloc(300);
	if (rec_start() != 0)
		return 1;
	unsigned x = 1;
	for (int i = 0; i < WRAP_PAIRS; i++) {
		x = x * 1103515245u + 12345u;
		void *volatile p = malloc(16 + (x >> 8) % WRAP_SIZES);
		free(p);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (!rec_start)
		return 2;
	if (argc > 1 && !strcmp(argv[1], "threads"))
		return threads();
	if (argc > 1 && !strcmp(argv[1], "wrap"))
		return wrap();
	if (one_stop() != 0 || rec_start() != 0)
		return 1;
	churn(400, KEPT / 2);
	return one_stop();
}
