/*
 * ring.c - recovery of the events a killed process left in TRACE.ring, the
 * memory-mapped staging file its threads wrote into (layout at the bottom of
 * trace_format.h): for every ring ever used, whatever its state, the events
 * the writer had not yet appended to the trace ([last seq in the trace + 1,
 * head), see FORMAT.md for a tail past it), and every ready stack node the
 * trace does not define; and the events the file counts as lost (dropped
 * once the writer drained no more: each ring's count, with its thread, and
 * the file's own beyond what the trace's LOST records said).
 *
 * The file belongs to a dead process and may be stale or torn: every offset
 * and count is checked against the file size before use, and the file is
 * only ever read. It must never be trusted to be consistent with the trace
 * beyond what these checks establish.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imp.h"

/* The last seq the trace holds for a stream is not in the segment index
 * (a REALLOC record spans two event slots): decode the stream's last
 * segment to find it. Returns one past it. */
static int trace_next_seq(struct imp_trace *tr, struct imp_stream *s,
			  struct tf_decoder *dec, uint64_t *next, uint64_t *t_last)
{
	const struct tf_segment_info *si;
	const struct tf_record *recs;
	struct tf_error te = {0};

	*next = 0;
	*t_last = 0;
	if (!s->nsegs)
		return 0;
	si = &s->segs[s->nsegs - 1];
	if (tf_decode_segment(tr->rd, dec, si, &recs, &te) != TF_OK || !si->count) {
		*next = si->first_seq;   /* torn: take its events from the ring */
		*t_last = si->t_first;
		return 0;
	}
	*next = recs[si->count - 1].seq +
		(recs[si->count - 1].kind == TF_REALLOC ? 2 : 1);
	*t_last = si->t_last;
	return 0;
}

/* Events from t on may be missing (trace axis). */
static void loss_from(struct imp_trace *tr, uint64_t t)
{
	if (t < tr->t_loss)
		tr->t_loss = t;
}

static int add_event(struct imp_stream *s, const struct tf_event *ev,
		     const struct tf_event *old, uint64_t seq)
{
	struct tf_record *r;

	if (imp_grow(&s->ring, &s->capring, s->nring, sizeof *s->ring))
		return -1;
	r = &s->ring[s->nring++];
	memset(r, 0, sizeof *r);
	r->stream = s->stream;
	r->tid = s->tid;
	r->fn = ev->fn;
	r->seq = old ? seq - 1 : seq;
	r->addr = ev->addr;
	r->size = ev->size;
	r->stack = ev->stack;
	r->pool = ev->pool;
	if (old) {
		r->kind = TF_REALLOC;
		r->t = old->t;
		r->t2 = ev->t;
		r->old_addr = old->addr;
	} else {
		r->kind = ev->kind == TF_EV_FREE ? TF_FREE : TF_ALLOC;
		r->t = ev->t;
	}
	return 0;
}

static int take_ring(struct imp_trace *tr, const struct tf_ring *rg,
		     const struct tf_event *slots, uint32_t nslots,
		     struct tf_decoder *dec, uint64_t *lost)
{
	uint64_t head = atomic_load_explicit(&rg->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&rg->tail, memory_order_acquire);
	uint64_t dropped = atomic_load_explicit(&rg->lost, memory_order_acquire);
	struct imp_stream *s;
	struct tf_event old = {0};
	bool have_old = false;
	uint64_t from, seq, t_last;
	char name[sizeof rg->name + 1];

	if (rg->stream == 0)
		return 0;
	s = imp_trace_stream(tr, rg->stream, rg->tid);
	if (!s)
		return -1;
	if (trace_next_seq(tr, s, dec, &from, &t_last))
		return -1;
	if (dropped) {             /* after the stream's last event in the ring */
		s->lost += dropped;
		*lost += dropped;
		loss_from(tr, head > from ? slots[(head - 1) & (nslots - 1)].t : t_last);
	}
	if (from < s->cut)
		from = s->cut;     /* a bounded trace: the keyframe has the rest */
	/* tail > from: the recorder took [from, tail) out of the ring, yet
	 * the trace lacks them (its writes failed: disk full; or the trace is
	 * damaged). Their slots still hold them unless the thread wrapped
	 * around (the two after head may be torn by a write in flight). If
	 * not, events after the gap would free blocks whose allocation is
	 * missing: none is recovered, all count as lost. */
	if (tail > from && head - from + 2 > nslots) {
		*lost += head - from;
		s->lost += head - from;
		loss_from(tr, t_last);
		from = head;
	}
	if (head > from && head - from > nslots) {
		*lost += head - from - nslots;   /* overwritten before we came */
		s->lost += head - from - nslots;
		loss_from(tr, t_last);
		from = head - nslots;
	}
	memcpy(name, rg->name, sizeof rg->name);
	name[sizeof rg->name] = 0;
	if (name[0]) {
		bool named = false;

		for (size_t i = 0; i < tr->nthreads; i++)
			if (tr->threads[i].tid == rg->tid && tr->threads[i].name)
				named = true;
		if (!named && imp_trace_thread(tr, rg->tid, name))
			return -1;
	}
	for (seq = from; seq < head; seq++) {
		struct tf_event ev = slots[seq & (nslots - 1)];

		switch (ev.kind) {
		case TF_EV_ALLOC:
		case TF_EV_FREE:
			if (add_event(s, &ev, NULL, seq))
				return -1;
			break;
		case TF_EV_REALLOC_OLD:
			old = ev;
			have_old = true;
			continue;
		case TF_EV_REALLOC_NEW:
			/* Without its OLD half (before the range) it is
			 * still a new block: keep it as an allocation. */
			if (!have_old)
				ev.kind = TF_EV_ALLOC;
			if (add_event(s, &ev, have_old ? &old : NULL, seq))
				return -1;
			break;
		default:           /* torn slot: skip it */
			break;
		}
		have_old = false;
		tr->recovered++;
		tr->events++;
		if (ev.t > tr->t_max)
			tr->t_max = ev.t;
	}
	return 0;
}

int imp_ring_recover(struct imp_trace *tr, struct imp_err *e)
{
	const struct tf_ring_file *rf;
	struct tf_decoder *dec = NULL;
	struct tf_error te = {0};
	char path[PATH_MAX];
	struct stat sb;
	uint64_t size, nodes, rings, lost = 0;
	uint8_t *map;
	int fd, rc = -1;

	if ((size_t)snprintf(path, sizeof path, "%s.ring", tr->path) >= sizeof path)
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		imp_errf(e, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size < sizeof *rf) {
		close(fd);
		return 0;          /* not a staging file we can use */
	}
	size = (uint64_t)sb.st_size;
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		imp_errf(e, "%s: %s", path, strerror(errno));
		return -1;
	}
	rf = (const struct tf_ring_file *)map;
	if (rf->magic != TF_RING_MAGIC || rf->version > TF_RING_VERSION ||
	    rf->version < 1 ||
	    rf->pid != tr->hdr->pid || rf->t0_mono_ns != tr->hdr->t0_mono_ns ||
	    rf->ring_events == 0 || (rf->ring_events & (rf->ring_events - 1)) ||
	    rf->nodes_offset % _Alignof(struct tf_node) ||
	    rf->rings_offset % _Alignof(struct tf_ring) ||
	    rf->ring_stride % _Alignof(struct tf_ring) ||
	    rf->nodes_offset > size ||
	    (size - rf->nodes_offset) / sizeof(struct tf_node) < rf->max_nodes ||
	    rf->ring_stride < sizeof(struct tf_ring) ||
	    rf->rings_offset > size ||
	    (size - rf->rings_offset) / rf->ring_stride < rf->max_rings) {
		rc = 0;            /* stale, foreign or torn: ignore it */
		goto out;
	}
	if (tf_decoder_new(&dec, &te) != TF_OK)
		goto nomem;

	nodes = atomic_load_explicit(&rf->nodes_next, memory_order_acquire);
	if (nodes > rf->max_nodes)
		nodes = rf->max_nodes;
	for (uint64_t id = 1; id < nodes; id++) {
		const struct tf_node *n = (const struct tf_node *)
			(map + rf->nodes_offset) + id;

		if (!atomic_load_explicit(&n->ready, memory_order_acquire))
			continue;
		if (id < tr->nnodes && tr->nodes[id].present)
			continue;
		if (imp_trace_node(tr, (uint32_t)id, n->parent, n->ip))
			goto nomem;
	}

	rings = atomic_load_explicit(&rf->rings_used, memory_order_acquire);
	if (rings > rf->max_rings)
		rings = rf->max_rings;
	for (uint64_t i = 0; i < rings; i++) {
		const uint8_t *base = map + rf->rings_offset + i * rf->ring_stride;
		const struct tf_ring *rg = (const struct tf_ring *)base;

		/* a ring released by the writer holds nothing (head 0); one
		 * left FREE by an older recorder's failed writer may */
		if (atomic_load_explicit(&rg->state, memory_order_acquire) == TF_RING_FREE &&
		    atomic_load_explicit(&rg->head, memory_order_acquire) == 0)
			continue;
		/* version 2: the ring's own capacity (0: the file's) */
		uint32_t cap = rf->version >= 2 ?
			atomic_load_explicit(&rg->events, memory_order_acquire) : 0;
		if (!cap)
			cap = rf->ring_events;
		/* version 3: the ring's own event area (0: after its header) */
		uint64_t at = rf->version >= 3 ?
			atomic_load_explicit(&rg->events_at, memory_order_acquire) : 0;
		if (!at)
			at = (uint64_t)(base - map) + sizeof *rg;
		if (cap > rf->ring_events || (cap & (cap - 1)) ||
		    at % _Alignof(struct tf_event) || at > size ||
		    (size - at) / sizeof(struct tf_event) < cap)
			continue;  /* torn or foreign: nothing to trust in it */
		if (take_ring(tr, rg, (const struct tf_event *)(map + at), cap, dec, &lost))
			goto nomem;
	}
	/* dropped without a ring, beyond what LOST records in the trace say */
	uint64_t unringed = atomic_load_explicit(&rf->lost, memory_order_acquire);
	uint64_t t_lost = atomic_load_explicit(&rf->t_lost, memory_order_acquire);
	if (unringed > tr->lost_total)
		lost += unringed - tr->lost_total;
	if (t_lost && lost)
		loss_from(tr, t_lost - 1);
	tr->lost += lost;
	rc = 0;
	goto out;
nomem:
	imp_errf(e, "%s: out of memory", path);
out:
	tf_decoder_free(dec);
	munmap(map, size);
	return rc;
}
