/*
 * stopset.c - while recording is stopped, the trace gets the frees of the
 * blocks it recorded, and no other.
 *
 * Sampling keeps its sampled blocks in a set (sample.c) that frees probe.
 * Recording every allocation keeps no such set: putting each recorded
 * block in one would cost every allocation while recording. So while
 * recording is on every free is written, and when it stops the writer
 * makes the set from what it wrote: the keymap (keymap.c: the latest event
 * of every address) holds the live blocks. Until the set is filled, every
 * free is still written (the importer counts those of unknown blocks as
 * unknown_frees); once it is, frees take sampling's probing route
 * (REC_M_PROBE) until recording starts again.
 *
 * The steps, by the writer between rounds (rec_stopset_round), or all at
 * once for rec_flush (rec_stopset_settle, so that a program can rely on
 * it):
 *   READ   the first stop of an unbounded trace: from now on the keymap
 *          takes every chunk the writer writes (a bounded trace's does
 *          from the start), and the trace written so far is read back into
 *          it, READ_SEGMENTS a round so the rings keep being drained;
 *   SWEEP  takes out of the set the blocks the keymap does not hold live
 *          (freed since an earlier stop, while every free was written);
 *   FLAG   REC_M_SETBUILD on, membarrier, a round that drains every ring;
 *   FILL   the keymap's live blocks into the set, then REC_M_PROBE.
 * Each is abandoned when recording starts again (the read-back goes on).
 *
 * Why FLAG: an allocation stamped before the stop may be published after
 * the drain read its ring's head (its thread preempted inside the hook).
 * A hook reads the word after publishing (ring.c, a compiler barrier
 * between); the writer sets the flag, then membarrier makes every thread
 * pass a full barrier before it reads the heads. So either the drain finds
 * the event or the hook saw the flag and put its block in the set itself
 * (rec_stopset_published): Dekker's pattern with the fence on one side.
 *
 * What it costs: the keymap (at most 32 bytes per address the trace has
 * seen live or freed lately) from the first stop on, and the writer's work
 * of keeping it. What a race leaves is counted, never lost: a set entry
 * whose block was freed during FILL makes the next free of that address
 * written, which the importer counts as an unknown free.
 *
 * Custom blocks (custom.c) are not in the keymap: custom.c puts each one
 * it records in the set itself under a key no heap address has, so SWEEP
 * keeps those keys and a hook's publication (rec_stopset_published) leaves
 * custom events to custom.c.
 *
 * A forked child whose parent had recorded blocks never builds: its trace
 * lacks the blocks it inherited (the importer takes them from the
 * parent's), so while stopped it writes every free, as before.
 *
 * Must never: run on a program thread, except rec_stopset_published, which
 * only reads and inserts into the lock-free set.
 */
#include "rec_internal.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READ_SEGMENTS 4               /* read back per writer round */

static struct tf_reader *reader;      /* READ: the trace as it was at the stop */
static struct tf_decoder *dec;
static struct tf_event *buf;          /* a segment's events, as the keymap takes them */
static size_t buf_cap;
static int tracking;                  /* the keymap takes every chunk written */
static int never;                     /* this session never builds (see above) */
static int child_inherited;           /* set by a forked child before its session */
static int barrier_cmd;               /* the membarrier command that works; 0: untried */

void rec_stopset_fork_child(int inherited)
{
	child_inherited = inherited;
}

static void close_reader(void)
{
	if (reader)
		tf_reader_close(reader);
	if (dec)
		tf_decoder_free(dec);
	reader = NULL;
	dec = NULL;
}

void rec_stopset_start(void)
{
	close_reader();          /* a forked child's copy of its parent's */
	tracking = rec_s.max_size != 0;
	never = child_inherited;
	child_inherited = 0;
}

void rec_stopset_end(void)
{
	close_reader();
}

int rec_stopset_tracking(void)
{
	return tracking;
}

static void give_up(void)
{
	close_reader();
	never = 1;
	tracking = rec_s.max_size != 0;
}

/* READ begins: the trace as written so far (between rounds: every chunk
 * taken is in it) is opened through our own descriptor. */
static void begin_read(void)
{
	char path[40], *e = path + sizeof path;
	struct tf_error err;
	rec_utoa(rec_cat(path, e, "/proc/self/fd/"), e, (uint64_t)rec_s.trace_fd);
	if (rec_keymap_init() < 0 || tf_reader_open(&reader, path, &err) != TF_OK ||
	    tf_decoder_new(&dec, &err) != TF_OK) {
		give_up();
		return;
	}
	tracking = 1;
}

/* Room for n events in buf; 0 or -1. */
static int room(size_t n)
{
	if (n <= buf_cap)
		return 0;
	size_t cap = n < TF_SEGMENT_EVENTS * 2 ? TF_SEGMENT_EVENTS * 2 : n;
	struct tf_event *b = rec_map_private(cap * sizeof *b, 0);
	if (!b)
		return -1;
	if (buf)
		munmap(buf, buf_cap * sizeof *buf);
	buf = b;
	buf_cap = cap;
	return 0;
}

/* The events of one decoded segment into the keymap; 0 or -1. */
static int apply(const struct tf_segment_info *si, const struct tf_record *recs)
{
	if (room((size_t)si->count * 2) < 0)
		return -1;
	size_t n = 0;
	for (uint32_t i = 0; i < si->count; i++) {
		const struct tf_record *r = &recs[i];
		struct tf_event e = { .t = r->t, .addr = r->addr, .size = r->size,
				      .stack = r->stack, .fn = r->fn };
		if (r->kind == TF_ALLOC) {
			e.kind = TF_EV_ALLOC;
		} else if (r->kind == TF_FREE) {
			e.kind = TF_EV_FREE;
		} else if (r->kind == TF_REALLOC) {
			buf[n++] = (struct tf_event){ .t = r->t, .addr = r->old_addr,
						      .kind = TF_EV_REALLOC_OLD };
			e.t = r->t2;
			e.kind = TF_EV_REALLOC_NEW;
		} else {
			continue;
		}
		buf[n++] = e;
	}
	rec_keymap_apply(si->stream, si->tid, buf, n);
	return 0;
}

/* Reads back up to max segments (0: all); 1 once the read-back is done. */
static int read_some(unsigned max)
{
	for (unsigned k = 0; !max || k < max; k++) {
		struct tf_segment_info si;
		const struct tf_record *recs;
		struct tf_error err;
		int rc = tf_reader_next_segment(reader, &si, &err);
		if (rc == TF_DONE) {
			close_reader();
			return 1;
		}
		if (rc != TF_OK || (si.stream &&   /* stream 0: meta records */
		    (tf_decode_segment(reader, dec, &si, &recs, &err) != TF_OK ||
		     apply(&si, recs) < 0))) {
			give_up();
			return 0;
		}
	}
	return 0;
}

/* Every thread passes a full barrier: 0, or -1 if the kernel cannot. */
static int barrier(void)
{
	if (!barrier_cmd) {
		barrier_cmd = -1;
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
			barrier_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
		else if (syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) > 0)
			barrier_cmd = MEMBARRIER_CMD_GLOBAL;
	}
	return barrier_cmd > 0 && syscall(SYS_membarrier, barrier_cmd, 0, 0) == 0 ? 0 : -1;
}

/* A custom block's key stays: custom.c keeps those exact itself. */
static int keep(uint64_t addr)
{
	return rec_custom_key(addr) || rec_keymap_live(addr);
}

/* SWEEP, FLAG, FILL. */
static void build(void)
{
	if (rec_keymap_broken() || rec_sample_init() < 0) {
		give_up();
		return;
	}
	rec_sampled_sweep(keep);
	if (rec_ctl_set_building() < 0)
		return;     /* started again */
	if (barrier() < 0) {
		give_up();
		return;
	}
	uint64_t t = rec_now();
	if (rec_writer_sync() < 0)
		return;     /* the rings keep what they hold: every free stays written */
	size_t i = 0;
	struct rec_key k;
	while (rec_keymap_next(&i, &k))
		if (!rec_sampled_has(k.addr))
			rec_sampled_add(k.addr);
	/* a bounded trace's keyframes forget frees by their own rule */
	if (!rec_s.max_size)
		rec_keymap_forget_frees(t);
	rec_ctl_set_ready();
}

/* The next step; every one left when all is set. */
static void step(int all)
{
	unsigned max = all ? 0 : READ_SEGMENTS;
	if (never || rec_writer_failed())
		return;
	if (reader && !read_some(max))
		return;
	if (never || !rec_ctl_set_wanted())
		return;
	if (!tracking) {
		begin_read();
		if (!reader || !read_some(max))
			return;
	}
	build();
}

void rec_stopset_round(void)
{
	step(0);
}

void rec_stopset_settle(void)
{
	step(1);
}

void rec_stopset_published(const struct tf_event *ev, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if ((ev[i].kind == TF_EV_ALLOC || ev[i].kind == TF_EV_REALLOC_NEW) &&
		    !tf_fn_custom(ev[i].fn) && !rec_sampled_has(ev[i].addr))
			rec_sampled_add(ev[i].addr);
}
