/*
 * input.c - pass 1 over one trace: checks the header, indexes every segment
 * by stream (offset, time range, first seq, count) without decompressing
 * event segments, and loads the meta stream (stack nodes, threads, modules,
 * marks, lost counts, END, FORK, and a wrapped bounded trace's keyframe) whole.
 *
 * It must never hold the event records of segments: memory here is
 * proportional to the number of segments, stacks and the one keyframe's
 * live set, never to the number of events. Damage after the header is not
 * an error: the scan stops there and says where.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imp.h"

int imp_trace_open(struct imp_trace *tr, const char *path, struct imp_err *e)
{
	struct tf_error te = {0};
	int rc;

	memset(tr, 0, sizeof *tr);
	tr->t_end = IMP_NO_TIME;
	tr->t_loss = IMP_NO_TIME;
	tr->attach_t = IMP_NO_TIME;
	tr->t_detach = IMP_NO_TIME;
	tr->path = imp_strdup(path);
	if (!tr->path) {
		imp_errf(e, "%s: out of memory", path);
		return -1;
	}
	rc = tf_reader_open(&tr->rd, path, &te);
	if (rc != TF_OK) {
		if (rc == TF_E_IO)
			imp_errf(e, "%s: %s", path, strerror(te.sys_errno));
		else
			imp_errf(e, "%s: byte %llu: %s", path,
				 (unsigned long long)te.offset, te.msg);
		return -1;
	}
	tr->hdr = tf_reader_header(tr->rd);
	return 0;
}

struct imp_stream *imp_trace_stream(struct imp_trace *tr, uint32_t stream,
				    uint32_t tid)
{
	struct imp_stream *s;
	size_t i;

	/* Threads are few (hundreds) and this runs once per segment. */
	for (i = tr->nstreams; i-- > 0;)
		if (tr->streams[i].stream == stream)
			return &tr->streams[i];
	if (imp_grow(&tr->streams, &tr->capstreams, tr->nstreams,
		     sizeof *tr->streams))
		return NULL;
	s = &tr->streams[tr->nstreams++];
	memset(s, 0, sizeof *s);
	s->stream = stream;
	s->tid = tid;
	s->t_first = IMP_NO_TIME;
	return s;
}

int imp_trace_node(struct imp_trace *tr, uint32_t id, uint32_t parent,
		   uint64_t ip)
{
	size_t cap = tr->nnodes;

	if (id == 0)
		return 0;          /* the root is implicit */
	if (imp_grow(&tr->nodes, &cap, id, sizeof *tr->nodes))
		return -1;
	tr->nnodes = cap;
	tr->nodes[id].ip = ip;
	tr->nodes[id].parent = parent;
	tr->nodes[id].present = 1;
	return 0;
}

int imp_trace_thread(struct imp_trace *tr, uint32_t tid, const char *name)
{
	struct imp_thread *t = NULL;
	size_t i;

	for (i = 0; i < tr->nthreads; i++)
		if (tr->threads[i].tid == tid)
			t = &tr->threads[i];
	if (!t) {
		if (imp_grow(&tr->threads, &tr->capthreads, tr->nthreads,
			     sizeof *tr->threads))
			return -1;
		t = &tr->threads[tr->nthreads++];
		t->tid = tid;
		t->name = NULL;
	}
	if (name && *name) {       /* the latest name wins (threads rename) */
		char *n = strdup(name);

		if (!n)
			return -1;
		free(t->name);
		t->name = n;
	}
	return 0;
}

/* Keyframes repeat the module map: keep each mapping once. */
static bool known_module(const struct imp_trace *tr, const struct tf_record *r)
{
	for (size_t i = 0; i < tr->nmods; i++) {
		const struct imp_module *m = &tr->mods[i];

		if (m->start == r->addr && m->end == r->addr + r->size &&
		    m->file_offset == r->file_offset && !strcmp(m->path, r->str ? r->str : ""))
			return true;
	}
	return false;
}

/* A wrapped trace replays from its oldest keyframe read whole: the first
 * whose BEGIN survived (everything after a surviving record survived) and
 * whose END was reached. Its events go to their streams' pre lists; its
 * cuts say where each stream's own records take over. */
static int add_key(struct imp_trace *tr, const struct tf_record *r)
{
	if (!tr->wrapped || tr->keyed)
		return 0;
	if (r->kind == TF_KEYFRAME && r->sub == TF_KEY_BEGIN) {
		for (size_t i = 0; i < tr->nstreams; i++) {
			tr->streams[i].npre = 0;   /* an earlier, torn keyframe */
			tr->streams[i].cut = 0;
		}
		tr->key_id = r->id;
		return 0;
	}
	if (!tr->key_id || r->id != tr->key_id)
		return 0;
	if (r->kind == TF_KEYFRAME && r->sub == TF_KEY_END) {
		tr->keyed = true;
		tr->window = r->t;
		return 0;
	}
	if (r->kind == TF_KEYFRAME ? r->sub != TF_KEY_CUT :
	    r->sub != TF_ALLOC && r->sub != TF_FREE)
		return 0;          /* of a newer version */
	struct imp_stream *s = imp_trace_stream(tr, r->stream, r->tid);

	if (!s)
		return -1;
	if (r->kind == TF_KEYFRAME) {
		/* a stream moving between lent rings is cut twice: the later
		 * cut is the larger */
		if (r->count > s->cut)
			s->cut = r->count;
		return 0;
	}
	if (imp_grow(&s->pre, &s->cappre, s->npre, sizeof *s->pre))
		return -1;
	s->pre[s->npre++] = (struct tf_record){
		.kind = r->sub == TF_ALLOC ? TF_ALLOC : TF_FREE, .fn = r->fn,
		.stream = r->stream, .tid = r->tid, .t = r->t, .addr = r->addr,
		.size = r->size, .stack = r->stack,
	};
	return 0;
}

/* A mark a bounded trace's keyframes write again (FORMAT.md "Bounded
 * traces": what the trace lacks) that is already in: one is kept. */
static bool keyframe_copy(const struct imp_trace *tr, const struct tf_record *r)
{
	if (!r->str || (tf_lack_of(r->str) < 0 && tf_span_of(r->str) < 0))
		return false;
	for (size_t i = 0; i < tr->nmarks; i++)
		if (tr->marks[i].t == r->t && !strcmp(tr->marks[i].label, r->str))
			return true;
	return false;
}

static int add_meta(struct imp_trace *tr, const struct tf_record *r)
{
	switch (r->kind) {
	case TF_KEYFRAME:
	case TF_KEYEVENT:
		return add_key(tr, r);
	case TF_STACK:
		return imp_trace_node(tr, r->id, r->parent, r->ip);
	case TF_THREAD:
		return imp_trace_thread(tr, r->tid, r->str);
	case TF_MODULE: {
		struct imp_module *m;

		if (known_module(tr, r))
			return 0;
		if (imp_grow(&tr->mods, &tr->capmods, tr->nmods, sizeof *tr->mods))
			return -1;
		m = &tr->mods[tr->nmods];
		memset(m, 0, sizeof *m);
		m->start = r->addr;
		m->end = r->addr + r->size;
		m->file_offset = r->file_offset;
		m->t_load = r->t;
		m->perms = r->perms;
		m->path = strdup(r->str ? r->str : "");
		if (!m->path)
			return -1;
		if (r->build_id && r->build_id_len) {
			m->build_id = malloc(r->build_id_len);
			if (!m->build_id) {
				free(m->path);
				return -1;
			}
			memcpy(m->build_id, r->build_id, r->build_id_len);
			m->build_id_len = r->build_id_len;
		}
		tr->nmods++;
		return 0;
	}
	case TF_MARK: {
		struct imp_mark *k;

		if (keyframe_copy(tr, r))
			return 0;
		if (imp_grow(&tr->marks, &tr->capmarks, tr->nmarks,
			     sizeof *tr->marks))
			return -1;
		k = &tr->marks[tr->nmarks];
		k->t = r->t;
		k->label = strdup(r->str ? r->str : "");
		if (!k->label)
			return -1;
		tr->nmarks++;
		if (!strcmp(k->label, TF_MARK_ATTACH) && tr->attach_t == IMP_NO_TIME)
			tr->attach_t = r->t;
		if (!strcmp(k->label, TF_MARK_DETACH) && r->t < tr->t_detach)
			tr->t_detach = r->t;
		if (r->t > tr->t_max)
			tr->t_max = r->t;
		return 0;
	}
	case TF_POOL: {
		struct imp_pool *k;

		if (imp_grow(&tr->pools, &tr->cappools, tr->npools, sizeof *tr->pools))
			return -1;
		k = &tr->pools[tr->npools];
		k->id = r->id;
		if (!(k->name = strdup(r->str ? r->str : "")))
			return -1;
		tr->npools++;
		return 0;
	}
	case TF_LOST:
		tr->lost += r->count;
		if (r->size > tr->lost_total)
			tr->lost_total = r->size;
		if (r->t < tr->t_loss)
			tr->t_loss = r->t;
		return 0;
	case TF_FORK:
		tr->forked = true;
		tr->fork_ppid = r->id;
		tr->fork_parent_t0 = r->count;
		tr->fork_mono = r->count + r->t;
		return 0;
	case TF_COUNTER:
	case TF_SAMPLE:
		return imp_counters_add(tr, r);
	case TF_END:
		tr->t_end = r->t;
		if (r->t > tr->t_max)
			tr->t_max = r->t;
		return 0;
	default:                   /* kinds added later: skipped */
		return 0;
	}
}

static void damage(struct imp_trace *tr, int rc, const struct tf_error *te)
{
	if (tr->damaged)
		return;
	tr->damaged = true;
	tr->t_damaged = tr->t_max;
	if (rc == TF_E_IO)
		snprintf(tr->damage, sizeof tr->damage, "%s: byte %llu: %s",
			 tr->path, (unsigned long long)te->offset,
			 strerror(te->sys_errno));
	else
		snprintf(tr->damage, sizeof tr->damage, "%s: byte %llu: %s",
			 tr->path, (unsigned long long)te->offset, te->msg);
}

static int by_seq(const void *a, const void *b)
{
	const struct tf_segment_info *x = a, *y = b;

	return (x->first_seq > y->first_seq) - (x->first_seq < y->first_seq);
}

static int by_time(const void *a, const void *b)
{
	const struct tf_record *x = a, *y = b;

	if (x->t != y->t)
		return (x->t > y->t) - (x->t < y->t);
	return (x->kind == TF_ALLOC) - (y->kind == TF_ALLOC); /* frees first */
}

/* A keyed stream: keyframe events in time order; segments wholly before
 * the cut are dropped (the merge skips the rest of the records before it). */
static void start_at_key(struct imp_stream *s)
{
	size_t i = 0;

	if (s->npre)
		qsort(s->pre, s->npre, sizeof *s->pre, by_time);
	while (i + 1 < s->nsegs && s->segs[i + 1].first_seq <= s->cut)
		i++;
	if (i) {
		memmove(s->segs, s->segs + i, (s->nsegs - i) * sizeof *s->segs);
		s->nsegs -= i;
	}
}

int imp_trace_scan(struct imp_trace *tr, struct imp_err *e)
{
	struct tf_decoder *dec = NULL;
	struct tf_segment_info si;
	struct tf_error te = {0};
	size_t i;
	int rc;

	if (tf_decoder_new(&dec, &te) != TF_OK)
		goto nomem;
	tr->wrapped = tf_reader_wrapped(tr->rd);
	for (;;) {
		memset(&te, 0, sizeof te);
		rc = tf_reader_next_segment(tr->rd, &si, &te);
		if (rc == TF_DONE)
			break;
		if (rc != TF_OK) {
			if (rc == TF_E_NOMEM)
				goto nomem;
			damage(tr, rc, &te);
			break;
		}
		if (si.stream == 0) {
			const struct tf_record *recs;

			rc = tf_decode_segment(tr->rd, dec, &si, &recs, &te);
			if (rc == TF_E_NOMEM)
				goto nomem;
			if (rc != TF_OK) {
				/* A meta segment is needed whole; the events
				 * after it may still use its stacks: stop. */
				damage(tr, rc, &te);
				break;
			}
			for (i = 0; i < si.count; i++)
				if (add_meta(tr, &recs[i]))
					goto nomem;
		} else {
			struct imp_stream *s = imp_trace_stream(tr, si.stream, si.tid);

			if (!s || imp_grow(&s->segs, &s->capsegs, s->nsegs,
					   sizeof *s->segs))
				goto nomem;
			s->segs[s->nsegs++] = si;
			tr->events += si.count;
			if (si.t_last > tr->t_max)
				tr->t_max = si.t_last;
		}
	}
	for (i = 0; i < tr->nstreams; i++) {
		struct imp_stream *s = &tr->streams[i];

		if (s->nsegs)  /* a stream of a keyframe only has none */
			qsort(s->segs, s->nsegs, sizeof *s->segs, by_seq);
		if (tr->keyed) {
			start_at_key(s);
			tr->events += s->npre;
		}
	}
	tf_decoder_free(dec);
	if (tr->lost_total > tr->lost)
		tr->lost = tr->lost_total;    /* LOST records overwritten (bounded) */
	if (tr->wrapped && !tr->keyed) {
		imp_errf(e, "%s: the bounded trace wrapped and no whole keyframe survived: "
			 "record with a larger REC_MAX_SIZE", tr->path);
		return -1;
	}
	return 0;
nomem:
	tf_decoder_free(dec);
	imp_errf(e, "%s: out of memory", tr->path);
	return -1;
}

void imp_trace_close(struct imp_trace *tr)
{
	size_t i;

	if (tr->rd)
		tf_reader_close(tr->rd);
	for (i = 0; i < tr->nstreams; i++) {
		free(tr->streams[i].segs);
		free(tr->streams[i].ring);
		free(tr->streams[i].pre);
	}
	for (i = 0; i < tr->nmods; i++) {
		free(tr->mods[i].path);
		free(tr->mods[i].build_id);
	}
	for (i = 0; i < tr->nthreads; i++)
		free(tr->threads[i].name);
	for (i = 0; i < tr->nmarks; i++)
		free(tr->marks[i].label);
	for (i = 0; i < tr->npools; i++)
		free(tr->pools[i].name);
	free(tr->pools);
	free(tr->streams);
	free(tr->nodes);
	free(tr->mods);
	free(tr->threads);
	free(tr->marks);
	free(tr->node_db);
	free(tr->path);
	imp_counters_free(tr);
	memset(tr, 0, sizeof *tr);
}
