/*
 * ctl_custop.c - what a stopped recording writes of a custom allocator's
 * calls (test_custop.py): the frees of the custom blocks it recorded, and
 * no other. Custom addresses are numbers the recorder never dereferences,
 * chosen so that pool 0 and pool p share them.
 *
 *   recording: heap = malloc(96), kept
 *              c0[i] = rec_alloc(BASE + i * STEP, 100), i < 4
 *              p[i]  = rec_pool_alloc(p, BASE + i * STEP, 200), i < 4
 *              q[i]  = rec_pool_alloc(q, QBASE + i * STEP, 300), i < 4
 *   rec_stop, rec_flush
 *   stopped:   rec_alloc(LOST) + rec_free(LOST)          -> nothing
 *              rec_free(c0[0]), rec_free(c0[1])          -> 2 frees
 *              rec_pool_free(p, p[2]), (p, p[3])         -> 2 frees
 *              rec_free(heap): pool 0 at a heap address  -> nothing
 *              rec_pool_free(p, LOST)                    -> nothing
 *              rec_realloc(c0[2], MOVED, 10)             -> 1 free
 *              rec_realloc(LOST, MOVED + STEP, 10)       -> nothing
 *              rec_pool_destroy(q)                       -> 1 destroy
 *              r = rec_pool_create, an alloc, a destroy  -> nothing
 *              free(heap)                                -> 1 heap free
 *              rec_flush, rec_mark("freed")
 *   rec_start: rec_free(c0[3]), rec_pool_free(p, p[0])   -> 2 frees
 *              rec_free(UNKNOWN): never allocated        -> 1 free
 *
 * Live at mark "freed": c0[3] (100 bytes) and p[0], p[1] (200 each).
 * Uses rec.h's weak declarations; exits 2 without libheapreel.so.
 */
#define REC_WEAK
#include "rec.h"

#include <stdint.h>
#include <stdlib.h>

#define BLOCKS 4
#define BASE 0x10000000u               /* the first custom block's address */
#define STEP 0x40u                     /* between two custom blocks */
#define QBASE 0x20000000u              /* pool q's first block */
#define LOST 0x30000000u               /* allocated while stopped: unrecorded */
#define MOVED 0x40000000u              /* rec_realloc's new blocks, stopped */
#define UNKNOWN 0x50000000u            /* freed while recording, never allocated */

static const void *at(uintptr_t a)
{
	return (const void *)a;
}

static int recording(rec_pool_t p, rec_pool_t q)
{
	for (uintptr_t i = 0; i < BLOCKS; i++)
		if (rec_alloc(at(BASE + i * STEP), 100) || rec_pool_alloc(p, at(BASE + i * STEP), 200) ||
		    rec_pool_alloc(q, at(QBASE + i * STEP), 300))
			return 1;
	return 0;
}

static int stopped(rec_pool_t p, rec_pool_t q, void *heap)
{
	rec_pool_t r;
	return rec_alloc(at(LOST), 50) || rec_free(at(LOST)) ||
	       rec_free(at(BASE)) || rec_free(at(BASE + STEP)) ||
	       rec_pool_free(p, at(BASE + 2 * STEP)) || rec_pool_free(p, at(BASE + 3 * STEP)) ||
	       rec_free(heap) || rec_pool_free(p, at(LOST)) ||
	       rec_realloc(at(BASE + 2 * STEP), at(MOVED), 10) ||
	       rec_realloc(at(LOST), at(MOVED + STEP), 10) ||
	       rec_pool_destroy(q) ||
	       !(r = rec_pool_create("r")) || rec_pool_alloc(r, at(LOST), 60) ||
	       rec_pool_destroy(r);
}

int main(void)
{
	if (!rec_start)
		return 2;
	void *volatile heap = malloc(96);
	rec_pool_t p = rec_pool_create("p"), q = rec_pool_create("q");
	if (!heap || !p || !q || recording(p, q) || rec_stop() || rec_flush() ||
	    stopped(p, q, heap))
		return 1;
	free(heap);
	if (rec_flush() || rec_mark("freed") || rec_start() ||
	    rec_free(at(BASE + 3 * STEP)) || rec_pool_free(p, at(BASE)) || rec_free(at(UNKNOWN)))
		return 1;
	return 0;
}
