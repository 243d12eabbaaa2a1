/*
 * ctl_paused.c - run with REC_PAUSED=1 (test_paused.py): what is recorded
 * is exactly what happens between rec_start and rec_stop, plus the frees of
 * recorded blocks after the stop. Uses rec.h's weak declarations, so it
 * also runs without libheapreel.so (then it exits 2).
 *
 *   paused:  1000 x malloc(100); free 500 of them        -> nothing recorded
 *   rec_start
 *   active:  300 x malloc(200); free 100 of them;        -> 300 allocs, 100 frees
 *            free 200 of the paused 100-byte blocks      -> 200 frees (unknown blocks)
 *            rec_mark("active")
 *   rec_stop
 *   stopped: 50 x malloc(300)                            -> nothing
 *            free 100 of the recorded 200-byte blocks    -> 100 frees
 * The remaining 100 blocks of 200 bytes stay live (leaks). Prints nothing.
 */
#define REC_WEAK
#include "rec.h"

#include <stdlib.h>

static void *p100[1000], *p200[300], *p300[50];

int main(void)
{
	if (!rec_start)
		return 2;
	for (int i = 0; i < 1000; i++)
		p100[i] = malloc(100);
	for (int i = 0; i < 500; i++)
		free(p100[i]);
	if (rec_start() != 0)
		return 1;
	for (int i = 0; i < 300; i++)
		p200[i] = malloc(200);
	for (int i = 0; i < 100; i++)
		free(p200[i]);
	for (int i = 500; i < 700; i++)
		free(p100[i]);
	if (rec_mark("active") != 0 || rec_stop() != 0)
		return 1;
	for (int i = 0; i < 50; i++)
		p300[i] = malloc(300);
	for (int i = 100; i < 200; i++)
		free(p200[i]);
	return rec_flush() == 0 ? 0 : 1;
}
