/*
 * counters.c - a trace's COUNTER and SAMPLE records (FORMAT.md) into the
 * counters table (schema.sql): one row per sample and counter, named,
 * on the common time axis.
 *
 * Pass 1 (input.c) hands every such record here as the meta stream is
 * read; run.c writes the rows with the trace's process. A value whose
 * counter no COUNTER record of the trace names is dropped (FORMAT.md says
 * readers do), and counted in meta.counter_values_unnamed. A repeated
 * (counter, t) keeps its first value.
 *
 * Never prints; errors come back as -1 (the database's: imp_db_errmsg).
 */
#include <stdlib.h>
#include <string.h>

#include "imp.h"

struct imp_counter_name {
	uint32_t id;
	char *name;
};

struct imp_sample {
	uint64_t t;
	uint32_t first, n;
	size_t at;                    /* its values: vals[at, at + n) */
};

struct imp_counters {
	struct imp_counter_name *names;
	size_t nnames, capnames;
	struct imp_sample *samples;
	size_t nsamples, capsamples;
	uint64_t *vals;
	size_t nvals, capvals;
};

int imp_counters_add(struct imp_trace *tr, const struct tf_record *r)
{
	struct imp_counters *c = tr->counters;

	if (!c && !(c = tr->counters = calloc(1, sizeof *c)))
		return -1;
	if (r->kind == TF_COUNTER) {
		if (imp_grow(&c->names, &c->capnames, c->nnames, sizeof *c->names))
			return -1;
		c->names[c->nnames].id = r->id;
		if (!(c->names[c->nnames].name = strdup(r->str ? r->str : "")))
			return -1;
		c->nnames++;
		return 0;
	}
	if (imp_grow(&c->samples, &c->capsamples, c->nsamples, sizeof *c->samples) ||
	    imp_grow(&c->vals, &c->capvals, c->nvals + TF_SAMPLE_MAX, sizeof *c->vals))
		return -1;
	c->samples[c->nsamples++] = (struct imp_sample){
		.t = r->t, .first = r->id, .at = c->nvals,
		.n = tf_sample_unpack(r, c->vals + c->nvals),
	};
	c->nvals += c->samples[c->nsamples - 1].n;
	return 0;
}

static int by_id(const void *a, const void *b)
{
	const struct imp_counter_name *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

static const char *name_of(const struct imp_counters *c, uint64_t id)
{
	struct imp_counter_name key = { .id = (uint32_t)id };
	const struct imp_counter_name *n;

	if (id > UINT32_MAX)
		return NULL;
	n = bsearch(&key, c->names, c->nnames, sizeof *c->names, by_id);
	return n ? n->name : NULL;
}

int imp_counters_write(struct imp_db *db, struct imp_trace *tr, uint64_t *unnamed)
{
	struct imp_counters *c = tr->counters;

	if (!c)
		return 0;
	qsort(c->names, c->nnames, sizeof *c->names, by_id);
	for (size_t i = 0; i < c->nsamples; i++) {
		const struct imp_sample *s = &c->samples[i];

		for (uint32_t k = 0; k < s->n; k++) {
			const char *name = name_of(c, (uint64_t)s->first + k);

			if (!name) {
				++*unnamed;
				continue;
			}
			if (imp_db_insert(db, "INSERT OR IGNORE INTO counters VALUES(?,?,?,?)",
					  "uutu", (uint64_t)tr->pid, s->t + tr->shift, name,
					  c->vals[s->at + k]))
				return -1;
		}
	}
	return 0;
}

void imp_counters_free(struct imp_trace *tr)
{
	struct imp_counters *c = tr->counters;

	if (!c)
		return;
	for (size_t i = 0; i < c->nnames; i++)
		free(c->names[i].name);
	free(c->names);
	free(c->samples);
	free(c->vals);
	free(c);
	tr->counters = NULL;
}
