/*
 * input.c - pass 1 over one trace: checks the header, indexes every segment
 * by stream (offset, time range, first seq, count) without decompressing
 * event segments, and loads the meta stream (stack nodes, threads, modules,
 * marks, lost counts, END) whole.
 *
 * It must never hold event records: memory here is proportional to the
 * number of segments and stacks, never to the number of events. Damage after
 * the header is not an error: the scan stops there and says where.
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

static int add_meta(struct imp_trace *tr, const struct tf_record *r)
{
	switch (r->kind) {
	case TF_STACK:
		return imp_trace_node(tr, r->id, r->parent, r->ip);
	case TF_THREAD:
		return imp_trace_thread(tr, r->tid, r->str);
	case TF_MODULE: {
		struct imp_module *m;

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

		if (imp_grow(&tr->marks, &tr->capmarks, tr->nmarks,
			     sizeof *tr->marks))
			return -1;
		k = &tr->marks[tr->nmarks];
		k->t = r->t;
		k->label = strdup(r->str ? r->str : "");
		if (!k->label)
			return -1;
		tr->nmarks++;
		if (r->t > tr->t_max)
			tr->t_max = r->t;
		return 0;
	}
	case TF_LOST:
		tr->lost += r->count;
		return 0;
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

int imp_trace_scan(struct imp_trace *tr, struct imp_err *e)
{
	struct tf_decoder *dec = NULL;
	struct tf_segment_info si;
	struct tf_error te = {0};
	size_t i;
	int rc;

	if (tf_decoder_new(&dec, &te) != TF_OK)
		goto nomem;
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

		qsort(s->segs, s->nsegs, sizeof *s->segs, by_seq);
	}
	tf_decoder_free(dec);
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
	}
	for (i = 0; i < tr->nmods; i++) {
		free(tr->mods[i].path);
		free(tr->mods[i].build_id);
	}
	for (i = 0; i < tr->nthreads; i++)
		free(tr->threads[i].name);
	for (i = 0; i < tr->nmarks; i++)
		free(tr->marks[i].label);
	free(tr->streams);
	free(tr->nodes);
	free(tr->mods);
	free(tr->threads);
	free(tr->marks);
	free(tr->node_db);
	free(tr->path);
	memset(tr, 0, sizeof *tr);
}
