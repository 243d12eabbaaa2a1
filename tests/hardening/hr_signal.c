/*
 * hr_signal N [custom] - allocates inside signal handlers while the
 * interrupted thread allocates in a loop, so a handler can land anywhere in
 * the recorder's malloc/free hooks. With "custom", the loop reports
 * custom allocator blocks instead (rec.h): rec_alloc of one block, N
 * rec_realloc of it in place (each an end and a new block, recorded in one
 * hook call), rec_free; a handler then lands in that hook.
 *
 * The main thread mallocs and frees N blocks of sizes in [HRS_MAIN_MIN,
 * HRS_MAIN_MIN + HRS_MAIN_SPAN) (above the tcache range: the arena path).
 * A helper thread sends it SIGALRM and SIGUSR1 in turn, every
 * HRS_PERIOD_NS, until the loop is done. Both handlers run the same code
 * (each blocks the other): malloc one block of HRS_HANDLER_SIZE and free
 * the one the previous handler call kept, so every handler block is
 * allocated in one handler call and freed in the next.
 *
 * glibc's malloc is not async-signal-safe, so the program keeps the
 * handler inside what is safe here: the handler's size class is served by
 * its own tcache bin, filled with HRS_PREWARM blocks before the signals
 * start and never touched by the main loop, so a handler never takes an
 * arena lock the interrupted code may hold.
 *
 * Prints "main allocs N frees N" and "handler allocs M frees M" (M varies
 * with timing; the trace must hold exactly M + HRS_PREWARM allocations of
 * HRS_HANDLER_SIZE bytes, all freed, and N of the main sizes).
 *
 * Must never: allocate in the handler a size the main loop uses.
 */
#define REC_WEAK
#include "rec.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HRS_MAIN_MIN 2048
#define HRS_MAIN_SPAN 1024
#define HRS_HANDLER_SIZE 88           /* a tcache size nobody else here uses */
#define HRS_PREWARM 2                 /* tcache entries the handler bin starts with */
#define HRS_PERIOD_NS 20000           /* between two signals */

static char custom_block[HRS_MAIN_MIN + HRS_MAIN_SPAN];

static pthread_t main_thread;
static volatile sig_atomic_t done;
static volatile long handler_allocs, handler_frees;
static void *volatile kept;

static void on_signal(int sig)
{
	(void)sig;
	void *p = malloc(HRS_HANDLER_SIZE);
	if (!p)
		abort();
	handler_allocs++;
	memset(p, 1, HRS_HANDLER_SIZE);
	if (kept) {
		free(kept);
		handler_frees++;
	}
	kept = p;
}

static void *kicker(void *arg)
{
	(void)arg;
	struct timespec step = { 0, HRS_PERIOD_NS };
	for (unsigned k = 0; !done; k++) {
		pthread_kill(main_thread, k % 2 ? SIGUSR1 : SIGALRM);
		nanosleep(&step, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	void *warm[HRS_PREWARM];
	for (int i = 0; i < HRS_PREWARM; i++)
		warm[i] = malloc(HRS_HANDLER_SIZE);
	for (int i = 0; i < HRS_PREWARM; i++)
		free(warm[i]);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGALRM);
	sigaddset(&sa.sa_mask, SIGUSR1);
	sigaction(SIGALRM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);

	/* the kicker itself never takes the signals */
	sigset_t both, old;
	sigemptyset(&both);
	sigaddset(&both, SIGALRM);
	sigaddset(&both, SIGUSR1);
	main_thread = pthread_self();
	pthread_sigmask(SIG_BLOCK, &both, &old);
	pthread_t k;
	if (pthread_create(&k, NULL, kicker, NULL))
		return 1;
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	long allocs = 0, frees = 0;
	int custom = argc > 2 && !strcmp(argv[2], "custom");
	if (custom && (!rec_alloc || rec_alloc(custom_block, HRS_MAIN_MIN)))
		return 1;
	for (long i = 0; i < n; i++) {
		size_t size = HRS_MAIN_MIN + (size_t)(i % HRS_MAIN_SPAN);
		if (custom) {
			if (rec_realloc(custom_block, custom_block, size))
				return 1;
			allocs++;
			frees++;
			continue;
		}
		char *p = malloc(size);
		if (!p)
			return 1;
		allocs++;
		p[0] = 1;
		free(p);
		frees++;
	}
	if (custom && rec_free(custom_block))
		return 1;
	pthread_sigmask(SIG_BLOCK, &both, NULL);
	done = 1;
	pthread_join(k, NULL);
	if (kept) {
		free(kept);
		handler_frees++;
	}
	printf("main allocs %ld frees %ld\n", allocs, frees);
	printf("handler allocs %ld frees %ld\n", handler_allocs, handler_frees);
	return 0;
}
