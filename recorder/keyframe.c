/*
 * keyframe.c - what a keyframe of a bounded trace says, in meta records
 * (FORMAT.md "Bounded traces"): BEGIN; every trie node, module, counter
 * name, pool name, live thread and mark of what the trace lacks
 * (TF_MARK_*_UNRECORDED, TF_MARK_ATTACH) again (their first records may be overwritten); the keymap's
 * entries as KEYEVENTs; one CUT per stream the keymap has applied events of
 * (live rings at their tail, and streams whose ring was released since the
 * last keyframe at their end); END with the time from which a replay that
 * starts here is exact.
 *
 * The writer schedules it (writer.c keyframe_step): it calls
 * rec_keyframe_write once every ring is drained up to the keyframe's cut
 * and the keymap's frees are forgotten, so the KEYEVENTs are the live
 * blocks.
 *
 * Writer thread only; must never be called from an allocation hook (it
 * maps memory) or write a record the importer could take for a cut that
 * is not one.
 */
#include "rec_internal.h"

struct released {                       /* a stream drained to its end */
	uint32_t stream, tid;
	uint64_t seq;
};

#define RELEASED_MIN (1u << 12)         /* first list: 64 KiB */

static struct released *rel;            /* since the last keyframe */
static size_t nrel, caprel;
static uint32_t keyframes;
static int untracked;                   /* an ended stream could not be noted */

int rec_keyframe_init(void)
{
	if (rel)
		munmap(rel, caprel * sizeof *rel);
	caprel = RELEASED_MIN;
	nrel = 0;
	keyframes = 0;
	untracked = 0;
	rel = rec_map_private(caprel * sizeof *rel, 0);  /* entries written before read */
	return rel ? rec_keymap_init() : -1;
}

/* A stream on lent rings is released after each call: one entry per
 * stream is enough (its latest end), found among the last few. */
#define RELEASED_LOOKBACK 64

void rec_keyframe_released(uint32_t stream, uint32_t tid, uint64_t seq)
{
	for (size_t i = nrel, k = 0; i-- > 0 && k < RELEASED_LOOKBACK; k++)
		if (rel[i].stream == stream) {
			rel[i].seq = seq;
			return;
		}
	if (nrel == caprel) {
		void *p = mremap(rel, caprel * sizeof *rel, 2 * caprel * sizeof *rel, MREMAP_MAYMOVE);
		if (p == MAP_FAILED) {
			/* without its cut, the stream's surviving records would
			 * replay over the keyframe's: no more keyframes */
			if (!untracked)
				rec_say("bounded recording: no memory to track ended threads", "",
					"; no more keyframes (the trace may not import once it wraps)");
			untracked = 1;
			return;
		}
		rel = p;
		caprel *= 2;
	}
	rel[nrel++] = (struct released){ stream, tid, seq };
}

static void cut(uint32_t id, uint32_t stream, uint32_t tid, uint64_t seq)
{
	struct tf_record r = { .kind = TF_KEYFRAME, .sub = TF_KEY_CUT, .id = id,
			       .stream = stream, .tid = tid, .count = seq };
	rec_writer_meta(&r);
}

void rec_keyframe_write(uint32_t nodes, uint32_t modules)
{
	if (untracked)
		return;
	uint32_t id = ++keyframes;
	struct tf_record r = { .kind = TF_KEYFRAME, .sub = TF_KEY_BEGIN, .id = id };
	rec_writer_meta(&r);
	for (uint32_t n = 1; n < nodes; n++)
		rec_writer_node(n);
	for (uint32_t m = 0; m < modules; m++)
		rec_writer_module(m);
	rec_counters_names();
	rec_ctl_pool_names();
	rec_writer_lack_marks();
	uint32_t used = atomic_load_explicit(&rec_s.rf->rings_used, memory_order_acquire);
	for (uint32_t i = 0; i < used; i++) {
		struct tf_ring *g = rec_session_ring(i);
		if (atomic_load_explicit(&g->state, memory_order_acquire) == TF_RING_FREE)
			continue;
		struct tf_record t = { .kind = TF_THREAD, .tid = g->tid, .t = rec_now(), .str = g->name };
		rec_writer_meta(&t);
	}

	size_t it = 0;
	for (struct rec_key k; rec_keymap_next(&it, &k);) {
		struct tf_record e = {
			.kind = TF_KEYEVENT, .sub = TF_ALLOC, .id = id, .t = k.t,
			.stream = k.stream, .tid = k.tid, .addr = k.addr,
			.size = k.size, .stack = k.stack, .fn = k.fn,
		};
		rec_writer_meta(&e);
	}

	for (uint32_t i = 0; i < used; i++) {
		struct tf_ring *g = rec_session_ring(i);
		if (atomic_load_explicit(&g->state, memory_order_acquire) != TF_RING_FREE)
			cut(id, g->stream, g->tid, atomic_load_explicit(&g->tail, memory_order_relaxed));
	}
	for (size_t i = 0; i < nrel; i++)
		cut(id, rel[i].stream, rel[i].tid, rel[i].seq);
	nrel = 0;

	struct tf_record end = { .kind = TF_KEYFRAME, .sub = TF_KEY_END, .id = id,
				 .t = rec_keymap_t_max() };
	rec_writer_meta(&end);
}
