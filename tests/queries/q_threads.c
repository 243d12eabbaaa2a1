/*
 * q_threads - two threads allocating known sizes from known call sites,
 * one after the other, for trace-snap --tid and --histogram's end-to-end
 * test (every size is used by one site only):
 *   thread "alpha": alpha_small() 8 x 48 B, alpha_big() 2 x 3000 B, then
 *     frees one of the 3000 B blocks; the rest is never freed
 *   thread "beta" (started once alpha has ended): beta_keep() 5 x 200 B,
 *     never freed, then beta_tmp() 3 x 4096 B, each freed before the next
 * alpha's own peak: its second 3000 B block (8 x 48 + 2 x 3000 = 6384 B);
 * beta's: its first 4096 B block (5 x 200 + 4096 = 5096 B).
 * It prints nothing; exit status 0, 1 if an allocation or a thread failed.
 * Never: allocate from those threads anywhere else.
 */
#include <pthread.h>
#include <stdlib.h>

#define NSMALL 8
#define NBIG 2
#define NKEEP 5
#define NTMP 3

static void *small[NSMALL], *big[NBIG], *keep[NKEEP];   /* reachable: never freed */
static int failed;                     /* a thread returns its address when it failed */

__attribute__((noinline)) static void *alpha_small(void) { return malloc(48); }
__attribute__((noinline)) static void *alpha_big(void) { return malloc(3000); }
__attribute__((noinline)) static void *beta_keep(void) { return malloc(200); }
__attribute__((noinline)) static void *beta_tmp(void) { return malloc(4096); }

static void *alpha(void *arg)
{
	int bad = 0;
	(void)arg;
	pthread_setname_np(pthread_self(), "alpha");
	for (int i = 0; i < NSMALL; i++)
		bad |= !(small[i] = alpha_small());
	for (int i = 0; i < NBIG; i++)
		bad |= !(big[i] = alpha_big());
	free(big[0]);
	big[0] = NULL;
	return bad ? &failed : NULL;
}

static void *beta(void *arg)
{
	int bad = 0;
	(void)arg;
	pthread_setname_np(pthread_self(), "beta");
	for (int i = 0; i < NKEEP; i++)
		bad |= !(keep[i] = beta_keep());
	for (int i = 0; i < NTMP; i++) {
		void *p = beta_tmp();
		bad |= !p;
		free(p);
	}
	return bad ? &failed : NULL;
}

int main(void)
{
	void *(*const run[])(void *) = { alpha, beta };
	int bad = 0;
	for (size_t i = 0; i < sizeof run / sizeof *run; i++) {
		pthread_t t;
		void *ret = NULL;
		bad |= pthread_create(&t, NULL, run[i], NULL) || pthread_join(t, &ret) || ret;
	}
	return bad;
}
