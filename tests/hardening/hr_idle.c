/*
 * hr_idle.c - a thread that goes quiet while the bounded trace wraps many
 * times, then allocates once just before the process is SIGKILLed
 * (test_bounded.py case idle): its stream's segments are all overwritten,
 * its last event is only in the .ring, after the keyframe's cut.
 *
 *   hr_idle     (exits by SIGKILL; prints nothing)
 *
 * The quiet thread first makes 200 000 events, more than its staging ring
 * holds, then main churns 6 M malloc/free pairs, then the quiet thread
 * allocates 777 777 bytes in call_last and main kills the process.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define EARLY 100000             /* malloc/free pairs before going quiet */
#define CHURN 6000000            /* main's pairs while it is quiet */
#define SLOTS 512
#define LAST_SIZE 777777

static atomic_int phase;         /* 1 quiet, 2 go on, 3 allocated */

__attribute__((noinline)) static void *call_last(size_t n) { return malloc(n); }

static void *quiet(void *arg)
{
	(void)arg;
	for (int i = 0; i < EARLY; i++) {
		void *volatile p = malloc(32);
		free(p);
	}
	atomic_store(&phase, 1);
	while (atomic_load(&phase) != 2)
		usleep(1000);
	void *volatile last = call_last(LAST_SIZE);
	(void)last;
	atomic_store(&phase, 3);
	for (;;)
		pause();
	return NULL;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, quiet, NULL) != 0)
		return 1;
	while (atomic_load(&phase) != 1)
		usleep(1000);
	static void *slot[SLOTS];
	uint64_t s = 88172645463325252ull;
	for (long i = 0; i < CHURN; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		void **p = &slot[s % SLOTS];
		free(*p);
		*p = malloc(16 + (s >> 20) % 200);
	}
	atomic_store(&phase, 2);
	while (atomic_load(&phase) != 3)
		;
	kill(getpid(), SIGKILL);
	return 0;
}
