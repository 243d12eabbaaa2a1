/*
 * pool_calls - the cost of rec.h's custom allocator API on a pool
 * allocator's hot path (bench/run.py, `./heapreel bench --only pool`).
 * A bump allocator hands out PAIRS blocks of BLOCK bytes from a ring of
 * SLOTS slots in one arena, reporting each with rec_pool_alloc and its
 * release with rec_pool_free, through weak symbols as a program would:
 * without the recorder the calls are skipped (the base). Prints the
 * loop's own time, so the recorder's start and end are not in it:
 *   ns_per_pair N.N
 * Must never: print anything else on stdout.
 */
#define REC_WEAK
#include "rec.h"
#include "calls.h"

#define SLOTS 1024          /* blocks live at once: the ring of slots */
#define BLOCK 64            /* each slot's bytes */
#define ASKED 48            /* bytes reported per block */

int main(int argc, char **argv)
{
	long pairs = calls_pairs(argc, argv, "pool_calls");
	char *arena = pairs ? malloc((size_t)SLOTS * BLOCK) : NULL;
	if (!arena)
		return 2;
	rec_pool_t pool = rec_pool_create ? rec_pool_create("bench") : REC_POOL_NONE;
	double t0 = calls_now_ns();
	for (long i = 0; i < pairs; i++) {
		char *b = arena + (size_t)(i % SLOTS) * BLOCK;
		if (rec_pool_alloc)
			rec_pool_alloc(pool, b, ASKED);
		b[0] = (char)i;     /* the allocator's own work: touch the block */
		if (rec_pool_free)
			rec_pool_free(pool, b);
	}
	calls_report(t0, calls_now_ns(), pairs);
	free(arena);
	return 0;
}
