/*
 * clocked - allocations bracketed by CLOCK_MONOTONIC reads, for the test that
 * the recorder's event times are CLOCK_MONOTONIC's: the trace's t0_mono_ns
 * plus an allocation's time lies between the two reads around its call
 * (the recorder stamps it after the real malloc returned).
 * Allocates ROUNDS blocks of 4242 + i bytes, i = 0.., with
 * SLEEP_MS of sleep before each, and prints per block "SIZE BEFORE AFTER":
 * CLOCK_MONOTONIC in ns read just before the malloc and just after it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 3
#define SLEEP_MS 100

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(void)
{
	void *blocks[ROUNDS];
	uint64_t before[ROUNDS], after[ROUNDS];
	for (int i = 0; i < ROUNDS; i++) {
		struct timespec nap = { 0, SLEEP_MS * 1000000L };
		nanosleep(&nap, NULL);
		before[i] = mono_ns();
		blocks[i] = malloc(4242 + (size_t)i);
		after[i] = mono_ns();
	}
	for (int i = 0; i < ROUNDS; i++) {
		printf("%d %llu %llu\n", 4242 + i, (unsigned long long)before[i],
		       (unsigned long long)after[i]);
		free(blocks[i]);
	}
	return 0;
}
