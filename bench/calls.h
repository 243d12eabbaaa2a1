/*
 * calls.h - what the calls programs (pool_calls.c, mmap_calls.c) share:
 * each times its own loop of PAIRS pairs of calls and prints
 *   ns_per_pair N.N
 * for bench/run.py, so that the recorder's start and end are not in it.
 */
#ifndef HEAPREEL_BENCH_CALLS_H
#define HEAPREEL_BENCH_CALLS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double calls_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* PAIRS from the command line, or 0 after a usage line. */
static inline long calls_pairs(int argc, char **argv, const char *name)
{
	long pairs = argc > 1 ? atol(argv[1]) : 0;
	if (pairs <= 0)
		fprintf(stderr, "usage: %s PAIRS\n", name);
	return pairs > 0 ? pairs : 0;
}

static inline void calls_report(double t0, double t1, long pairs)
{
	printf("ns_per_pair %.1f\n", (t1 - t0) / (double)pairs);
}

#endif
