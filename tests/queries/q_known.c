/*
 * q_known - allocations from known call sites, in phases, for trace-snap's
 * end-to-end tests (every size is used by one site only, so the test finds
 * each phase's instants in the database by size):
 *   1. alloc_small(): 10 x 24 B, kept
 *   2. alloc_big() from main: 3 x 5000 B, kept
 *   3. mid() -> alloc_big(): 2 x 5000 B, kept
 *   4. free 5 of the small blocks
 *   5. leak_some(): 4 x 333 B never freed; then churn(): 6 x 777 B, each
 *      freed before the next (the steady window is phase 5)
 *   6. free main's big blocks, the other small ones and one of mid's
 * Peak: the first churn block, 5x24 + 5x5000 + 4x333 + 777 = 27229 B.
 * Leaks at the end: one 5000 B block from mid, 4 x 333 B from leak_some.
 * `q_known LEAKS MIDS` (trace-snap --base's second run) makes LEAKS
 * blocks in leak_some() (1..16, default 4) and MIDS in mid() (1..8,
 * default 2) instead: with 7 and 1 the peak is 5x24 + 4x5000 + 7x333 +
 * 777 = 23228 B.
 * It prints nothing; exit status 0, 1 if an allocation failed, 2 for a
 * bad argument.
 * Never: allocate from any other site between the phases.
 */
#include <stdlib.h>

#define NSMALL 10
#define NBIG 3
#define NMID 2
#define NLEAK 4
#define MAX_MID 8
#define MAX_LEAK 16
#define NCHURN 6

static int bad;

static void *alloc_small(void) { return malloc(24); }
static void *alloc_big(void) { return malloc(5000); }
static void *mid(void) { return alloc_big(); }
static void *leak_some(void) { return malloc(333); }

static void churn(void)
{
	void *p = malloc(777);
	bad |= !p;
	free(p);
}

/* Argument i as a count in [1, max], else dflt; -1 if it is not one. */
static int count(int argc, char **argv, int i, int max, int dflt)
{
	if (argc <= i)
		return dflt;
	int v = atoi(argv[i]);
	return v >= 1 && v <= max ? v : -1;
}

int main(int argc, char **argv)
{
	void *small[NSMALL], *big[NBIG], *m[MAX_MID];
	static void *leaked[MAX_LEAK];   /* static: still reachable, not freed */
	int nleak = count(argc, argv, 1, MAX_LEAK, NLEAK), nmid = count(argc, argv, 2, MAX_MID, NMID);
	if (nleak < 0 || nmid < 0)
		return 2;
	for (int i = 0; i < NSMALL; i++)
		bad |= !(small[i] = alloc_small());
	for (int i = 0; i < NBIG; i++)
		bad |= !(big[i] = alloc_big());
	for (int i = 0; i < nmid; i++)
		bad |= !(m[i] = mid());
	for (int i = 0; i < NSMALL / 2; i++)
		free(small[i]);
	for (int i = 0; i < nleak; i++)
		bad |= !(leaked[i] = leak_some());
	for (int i = 0; i < NCHURN; i++)
		churn();
	for (int i = 0; i < NBIG; i++)
		free(big[i]);
	for (int i = NSMALL / 2; i < NSMALL; i++)
		free(small[i]);
	free(m[0]);
	return bad;
}
