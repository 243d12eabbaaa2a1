/*
 * ctl_stopstart.c - sampling across stops (test_sample.py, run with
 * REC_SAMPLE=1048576): 200 cycles of
 *
 *   rec_stop
 *   4000 x malloc(1000) + free      -> nothing recorded (4 MB: the thread's
 *                                      countdown ends in there nearly surely)
 *   rec_start
 *   malloc(1016) + free             -> the probe: sampled with probability
 *                                      1 - exp(-1016/2^20), about 0.001
 *
 * so about 0.2 probes in all are sampled; a sample point that fell while
 * stopped and carried over to the start would sample nearly every probe.
 * Uses rec.h's weak declarations; exits 2 without libheapreel.so. Prints
 * nothing.
 */
#define REC_WEAK
#include "rec.h"

#include <stdlib.h>

#define CYCLES 200
#define BURN 4000
#define BURN_SIZE 1000
#define PROBE_SIZE 1016

int main(void)
{
	if (!rec_start)
		return 2;
	free(malloc(16)); /* the thread draws its countdown while recording */
	for (int c = 0; c < CYCLES; c++) {
		rec_stop();
		for (int i = 0; i < BURN; i++) {
			void *volatile p = malloc(BURN_SIZE);
			free(p);
		}
		rec_start();
		void *volatile q = malloc(PROBE_SIZE);
		free(q);
	}
	return 0;
}
