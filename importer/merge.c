/*
 * merge.c - pass 2's k-way merge: every event stream of every trace, in time
 * order on the common axis, frees before allocations at equal times (the
 * ordering rule of trace_format.h), each REALLOC split into the free of its
 * old block at t and the allocation of its new block at t2.
 *
 * A stream holds at most one decoded segment at a time, and only while its
 * time range is being merged (a stream waiting for its next segment holds no
 * decoder), so memory is bounded by the overlapping segments, never by the
 * trace length. It must never reorder the events of one stream: the heap
 * compares stream heads only.
 *
 * A stream of a bounded trace replayed from a keyframe reads the keyframe's
 * events first (its pre list, in time order), then its own records from
 * the keyframe's cut on (min_seq): those before it are in the keyframe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imp.h"

/* Heap key ranks at equal times: a stream whose next segment is not loaded
 * yet must be looked at before any event of that time is emitted. */
enum { RANK_UNLOADED = 0, RANK_FREE = 1, RANK_ALLOC = 2 };

struct cursor {
	struct imp_stream *st;
	struct imp_trace *tr;
	bool pre_done;                /* the keyframe's events were loaded */
	size_t seg;                   /* next segment to load */
	bool ring_done;               /* the .ring events were loaded */
	uint64_t min_seq;             /* records below it are in the keyframe */
	const struct tf_record *recs; /* loaded records, NULL if none */
	size_t n, i;
	uint8_t half;                 /* REALLOC: 0 free part next, 1 alloc part */
	struct tf_decoder *dec;
	uint64_t key_t;
	uint8_t rank;
	size_t idx;                   /* tie-break: stable, deterministic */
};

struct imp_merge {
	struct cursor *cur;
	struct cursor **heap;
	size_t ncur, nheap;
	struct tf_decoder **pool;     /* decoders not in use */
	size_t npool;
	uint64_t now, records, clamped;
	bool failed;                  /* out of memory while peeking */
	struct imp_err err;
};

static bool less(const struct cursor *a, const struct cursor *b)
{
	if (a->key_t != b->key_t)
		return a->key_t < b->key_t;
	if (a->rank != b->rank)
		return a->rank < b->rank;
	return a->idx < b->idx;
}

static void sift_down(struct imp_merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;
		struct cursor *t;

		if (l < m->nheap && less(m->heap[l], m->heap[s]))
			s = l;
		if (r < m->nheap && less(m->heap[r], m->heap[s]))
			s = r;
		if (s == i)
			return;
		t = m->heap[i];
		m->heap[i] = m->heap[s];
		m->heap[s] = t;
		i = s;
	}
}

static void push(struct imp_merge *m, struct cursor *c)
{
	size_t i = m->nheap++;

	m->heap[i] = c;
	while (i && less(m->heap[i], m->heap[(i - 1) / 2])) {
		struct cursor *t = m->heap[i];

		m->heap[i] = m->heap[(i - 1) / 2];
		m->heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void pop(struct imp_merge *m)
{
	m->heap[0] = m->heap[--m->nheap];
	sift_down(m, 0);
}

/* Sets the key from the head record; false if the loaded records are
 * exhausted. Records of kinds an event stream should not hold are skipped. */
static uint8_t region_of(const struct tf_record *r)
{
	switch (r->fn) {
	case TF_FN_MMAP:
		return IMP_MAP;
	case TF_FN_MREMAP:
		return IMP_REMAP;
	case TF_FN_MUNMAP:
		return IMP_UNMAP;
	case TF_FN_CUSTOM_ALLOC:
	case TF_FN_CUSTOM_REALLOC:
		return IMP_CUSTOM;
	case TF_FN_CUSTOM_FREE:
		return IMP_CUSTOM_END;
	case TF_FN_POOL_DESTROY:
		return IMP_POOL_END;
	default:
		return IMP_NOT_REGION;
	}
}

/* A block made by a realloc entry point without an old block (realloc
 * and tc_realloc of NULL: an ALLOC record) is a realloc's new block too. */
static bool realloc_fn(unsigned fn)
{
	return fn == TF_FN_REALLOC || fn == TF_FN_REALLOCARRAY || fn == TF_FN_TC_REALLOC ||
	       fn == TF_FN_RALLOCX || fn == TF_FN_XALLOCX || fn == TF_FN_CUSTOM_REALLOC;
}

static bool head_key(struct cursor *c)
{
	while (c->i < c->n) {
		const struct tf_record *r = &c->recs[c->i];

		switch (r->seq < c->min_seq ? 0 : r->kind) {
		case TF_ALLOC:  /* an unmap, a custom block's end rank as a free */
			c->key_t = r->t + c->tr->shift;
			c->rank = imp_region_ends(region_of(r)) ? RANK_FREE : RANK_ALLOC;
			return true;
		case TF_FREE:
			c->key_t = r->t + c->tr->shift;
			c->rank = RANK_FREE;
			return true;
		case TF_REALLOC:
			c->key_t = (c->half ? r->t2 : r->t) + c->tr->shift;
			c->rank = c->half ? RANK_ALLOC : RANK_FREE;
			return true;
		default:
			c->i++;
			c->half = 0;
		}
	}
	return false;
}

static void release(struct imp_merge *m, struct cursor *c)
{
	if (c->dec)
		m->pool[m->npool++] = c->dec;
	c->dec = NULL;
	c->recs = NULL;
	c->n = c->i = 0;
}

/* After the loaded records ran out: key on the next segment, if any.
 * Returns false when the stream is finished. */
static bool next_source(struct imp_merge *m, struct cursor *c)
{
	release(m, c);
	if (!c->pre_done && c->st->npre) {
		c->key_t = c->st->pre[0].t + c->tr->shift;
		c->rank = RANK_UNLOADED;
		return true;
	}
	if (c->seg < c->st->nsegs) {
		c->key_t = c->st->segs[c->seg].t_first + c->tr->shift;
		c->rank = RANK_UNLOADED;
		return true;
	}
	if (!c->ring_done && c->st->nring) {
		c->key_t = c->st->ring[0].t + c->tr->shift;
		c->rank = RANK_UNLOADED;
		return true;
	}
	return false;
}

static int load(struct imp_merge *m, struct cursor *c, struct imp_err *e)
{
	c->min_seq = c->st->cut;
	if (!c->pre_done && c->st->npre) {
		c->recs = c->st->pre;
		c->n = c->st->npre;
		c->pre_done = true;
		c->min_seq = 0;
	} else if (c->seg < c->st->nsegs) {
		const struct tf_segment_info *si = &c->st->segs[c->seg++];
		struct tf_error te = {0};
		int rc;

		if (!m->npool) {
			if (tf_decoder_new(&m->pool[m->npool], &te) != TF_OK) {
				imp_errf(e, "%s: out of memory", c->tr->path);
				return -1;
			}
			m->npool++;
		}
		c->dec = m->pool[--m->npool];
		rc = tf_decode_segment(c->tr->rd, c->dec, si, &c->recs, &te);
		if (rc == TF_E_NOMEM) {
			release(m, c);
			imp_errf(e, "%s: out of memory", c->tr->path);
			return -1;
		}
		if (rc != TF_OK) {
			/* This thread's events end here; the others go on. */
			if (!c->tr->damaged) {
				c->tr->damaged = true;
				c->tr->t_damaged = si->t_first;
				snprintf(c->tr->damage, sizeof c->tr->damage,
					 "%s: byte %llu: %s", c->tr->path,
					 (unsigned long long)te.offset, te.msg);
			}
			c->seg = c->st->nsegs;
			c->ring_done = true;
			release(m, c);
			return 0;
		}
		c->n = si->count;
	} else {
		c->recs = c->st->ring;
		c->n = c->st->nring;
		c->ring_done = true;
	}
	c->i = 0;
	c->half = 0;
	return 0;
}

int imp_merge_open(struct imp_merge **mp, struct imp_trace *tr, size_t ntr,
		   struct imp_err *e)
{
	struct imp_merge *m = calloc(1, sizeof *m);
	size_t n = 0, t, s;

	*mp = NULL;
	if (!m)
		goto nomem;
	for (t = 0; t < ntr; t++)
		n += tr[t].nstreams;
	m->cur = calloc(n ? n : 1, sizeof *m->cur);
	m->heap = calloc(n ? n : 1, sizeof *m->heap);
	m->pool = calloc(n ? n : 1, sizeof *m->pool);
	if (!m->cur || !m->heap || !m->pool)
		goto nomem;
	for (t = 0; t < ntr; t++) {
		for (s = 0; s < tr[t].nstreams; s++) {
			struct cursor *c = &m->cur[m->ncur];

			c->st = &tr[t].streams[s];
			c->tr = &tr[t];
			c->idx = m->ncur++;
			if (next_source(m, c))
				push(m, c);
		}
	}
	*mp = m;
	return 0;
nomem:
	imp_merge_close(m);
	imp_errf(e, "out of memory");
	return -1;
}

int imp_merge_next(struct imp_merge *m, struct imp_ev *ev, struct imp_err *e)
{
	if (m->failed) {
		*e = m->err;
		return -1;
	}
	while (m->nheap) {
		struct cursor *c = m->heap[0];
		const struct tf_record *r;

		if (!c->recs) {
			if (load(m, c, e))
				return -1;
			if (c->recs && head_key(c)) {
				sift_down(m, 0);
			} else if (next_source(m, c)) {
				sift_down(m, 0);
			} else {
				pop(m);
			}
			continue;
		}
		r = &c->recs[c->i];
		ev->st = c->st;
		ev->t = c->key_t;
		ev->size = r->size;
		ev->stack = r->stack;
		if (r->kind == TF_REALLOC && c->half == 0) {
			ev->kind = IMP_FREE;
			ev->addr = r->old_addr;
			ev->from_realloc = 0;
			ev->region = IMP_NOT_REGION;
			ev->pool = 0;
			c->half = 1;
		} else {
			ev->kind = r->kind == TF_FREE ? IMP_FREE : IMP_ALLOC;
			ev->addr = r->addr;
			ev->from_realloc = r->kind == TF_REALLOC || realloc_fn(r->fn);
			ev->region = region_of(r);
			ev->pool = r->pool;
			c->half = 0;
			c->i++;
			m->records++;
		}
		if (ev->kind == IMP_FREE)
			ev->size = 0;
		else if (imp_region_ends(ev->region))
			ev->kind = IMP_FREE;   /* sorts as a free; an unmap's size: the range */
		ev->t_stamp = ev->t;
		/* A stream whose clock went backwards must not break the
		 * global order the tables rely on. */
		if (ev->t < m->now) {
			ev->t = m->now;
			m->clamped++;
		}
		m->now = ev->t;
		if (head_key(c) || next_source(m, c))
			sift_down(m, 0);
		else
			pop(m);
		return 1;
	}
	return 0;
}

uint64_t imp_merge_peek(struct imp_merge *m)
{
	/* Load until the top of the heap is a real event (loading can only
	 * raise a key, never lower one below the current minimum). */
	while (!m->failed && m->nheap && !m->heap[0]->recs) {
		struct cursor *c = m->heap[0];

		if (load(m, c, &m->err)) {
			m->failed = true;  /* reported by the next imp_merge_next */
			return m->now;
		}
		if (c->recs && head_key(c))
			sift_down(m, 0);
		else if (next_source(m, c))
			sift_down(m, 0);
		else
			pop(m);
	}
	if (!m->nheap)
		return IMP_NO_TIME;
	return m->heap[0]->key_t < m->now ? m->now : m->heap[0]->key_t;
}

bool imp_merge_peek_addr(const struct imp_merge *m, uint64_t *addr,
			 struct imp_stream **st)
{
	const struct cursor *c;
	const struct tf_record *r;

	if (!m->nheap || !m->heap[0]->recs)
		return false;
	c = m->heap[0];
	r = &c->recs[c->i];
	*addr = r->kind == TF_REALLOC && c->half == 0 ? r->old_addr : r->addr;
	*st = c->st;
	return true;
}

uint64_t imp_merge_records(const struct imp_merge *m)
{
	return m->records;
}

uint64_t imp_merge_clamped(const struct imp_merge *m)
{
	return m->clamped;
}

void imp_merge_close(struct imp_merge *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->ncur; i++)
		if (m->cur[i].dec)
			tf_decoder_free(m->cur[i].dec);
	for (i = 0; i < m->npool; i++)
		tf_decoder_free(m->pool[i]);
	free(m->cur);
	free(m->heap);
	free(m->pool);
	free(m);
}
