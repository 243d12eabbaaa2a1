/*
 * sink.c - the rows of the two big tables, from pass 2 to a second thread
 * that inserts them while the replay goes on, so that SQLite's work runs on
 * the other core instead of after the replay.
 *
 * Frees are packed IMP_FREE_BLOCK to a free_blocks row (schema.sql) on this
 * side, each block in place in its batch; a block leaves with its batch. An
 * allocations row is made in allocation order, but its t_free is known only
 * once the block is freed: it waits in a window of the last SINK_WINDOW
 * allocations and leaves when it falls out, freed or not. A row that leaves
 * still live is inserted with t_free = the trace's last time, a placeholder
 * that SQLite stores in at least as many bytes as the real time (its records
 * size integers by magnitude): the UPDATE its free sends later then rewrites
 * the cell in place, never longer, and never splits a page (a row that grew
 * did, in most pages: +3% database). At the end, those never freed get NULL.
 *
 * Rows travel in batches of one kind through a channel (chan.c). The
 * inserter is the database's only user until imp_sink_end returns. It must
 * never reorder a table's rows (their ids are SQLite's appends, checked
 * batch by batch), and never send a fix before the row it fixes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imp.h"
#include "tf_varint.h"

/* Allocations a row waits for its free before it leaves with a placeholder:
 * most blocks are freed well within it, so few need a fix, and it costs 48
 * bytes a slot. A power of two (ids map to slots by mask). */
#define SINK_WINDOW (1u << 18)
#define SINK_BUFS 8                   /* batches in flight between the threads */
#define SINK_BATCH_BYTES (1u << 20)

enum batch_kind { BATCH_FREES, BATCH_ALLOCS, BATCH_FIXES, BATCH_KINDS };

/* A free is four varints of at most 10 bytes. */
#define FREE_BYTES_MAX 40

struct free_block {                   /* one free_blocks row */
	uint64_t id;                  /* row number, from 0 */
	uint32_t n, len;              /* frees in it; bytes of data */
	uint64_t prev;                /* the last free's alloc_id */
	uint8_t data[IMP_FREE_BLOCK * FREE_BYTES_MAX];
};

struct fix_row {                      /* t_free of a row already inserted */
	uint64_t id, t_free;
	bool freed, temporary;
};

struct batch {                        /* the head of a channel buffer; rows follow */
	uint32_t kind, n;
	uint64_t last_id;             /* allocations: the last row's id */
};

static const size_t row_size[BATCH_KINDS] = {
	[BATCH_FREES] = sizeof(struct free_block),
	[BATCH_ALLOCS] = sizeof(struct imp_alloc_row),
	[BATCH_FIXES] = sizeof(struct fix_row),
};

struct imp_sink {
	struct imp_db *db;
	uint64_t t_last;              /* no t_free is later: the placeholder */
	struct imp_chan *chan;
	struct batch *open[BATCH_KINDS];  /* being filled by the replay */
	struct imp_alloc_row *win;    /* ids (sent, made], slot id & mask */
	struct free_block *fb;        /* being filled, in the open frees batch */
	uint64_t made, sent, frees;
	uint64_t *unfreed;            /* sent live and never freed: set NULL */
	size_t nunfreed, capunfreed;
	pthread_t thread;
	bool running;
	/* the inserter's: read by the replay only after the join */
	bool failed;
	char why[IMP_ERR_MAX];
	struct imp_err *e;
};

static void *rows_of(struct batch *b)
{
	return b + 1;
}

static size_t batch_cap(enum batch_kind k)
{
	return (SINK_BATCH_BYTES - sizeof(struct batch)) / row_size[k];
}

/* ---- the inserter thread ------------------------------------------------- */
struct cursor {                       /* one batch, read by the bulk table */
	struct batch *b;
	uint32_t i;
};

static int next_alloc(void *ctx, int64_t *v, uint32_t *nulls)
{
	struct cursor *c = ctx;
	const struct imp_alloc_row *a;

	if (c->i == c->b->n)
		return 0;
	a = (const struct imp_alloc_row *)rows_of(c->b) + c->i++;
	v[1] = (int64_t)a->t;
	if (a->freed)
		v[2] = (int64_t)a->t_free;
	else
		*nulls |= 1u << 2;
	v[3] = (int64_t)a->size;
	v[4] = a->stack;
	v[5] = a->tid;
	v[6] = a->pid;
	v[7] = (int64_t)a->addr;
	v[8] = a->from_realloc;
	v[9] = a->temporary;
	v[10] = a->kind;
	v[11] = a->pool;
	return 1;
}

static int fix(struct imp_sink *s, struct batch *b)
{
	const struct fix_row *f = rows_of(b);

	for (uint32_t i = 0; i < b->n; i++, f++) {
		int rc = f->freed ?
			imp_db_insert(s->db, "UPDATE allocations SET t_free = ?, "
				      "temporary = ? WHERE id = ?", "uuu",
				      f->t_free, (uint64_t)f->temporary, f->id) :
			imp_db_insert(s->db, "UPDATE allocations SET t_free = NULL "
				      "WHERE id = ?", "u", f->id);
		if (rc)
			return -1;
	}
	return 0;
}

static int insert_free_blocks(struct imp_sink *s, struct batch *b)
{
	const struct free_block *fb = rows_of(b);

	for (uint32_t i = 0; i < b->n; i++, fb++)
		if (imp_db_insert(s->db, "INSERT INTO free_blocks VALUES(?, ?)", "ub",
				  fb->id, fb->data, (size_t)fb->len))
			return -1;
	return 0;
}

/* Rows get their ids from SQLite (NULL rowid: an append, no seek; about
 * 1.5x faster than explicit ids), which equal ours because each table is
 * filled once, from empty, in id order. */
static int insert(struct imp_sink *s, struct batch *b)
{
	struct cursor c = { .b = b };
	int rc;

	if (!b->n)
		return 0;              /* handed back unfilled (imp_sink_close) */
	switch (b->kind) {
	case BATCH_FREES:
		return insert_free_blocks(s, b);
	case BATCH_ALLOCS:
		rc = imp_db_bulk(s->db, "INSERT INTO allocations SELECT NULL, c1, "
				 "c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 FROM imp_bulk",
				 next_alloc, &c);
		break;
	default:
		return fix(s, b);
	}
	if (!rc && imp_db_last_rowid(s->db) != b->last_id) {
		snprintf(s->why, sizeof s->why, "row ids out of step");
		return -1;
	}
	return rc;
}

static void *inserter(void *arg)
{
	struct imp_sink *s = arg;
	uint8_t *buf;
	size_t n;

	while ((buf = imp_chan_recv(s->chan, &n))) {
		int rc = insert(s, (struct batch *)buf);

		imp_chan_done(s->chan, buf);
		if (rc) {
			if (!s->why[0])
				snprintf(s->why, sizeof s->why, "sqlite: %s",
					 imp_db_errmsg(s->db));
			s->failed = true;
			break;
		}
	}
	imp_chan_abort(s->chan);       /* the replay must not wait for us */
	return NULL;
}

/* Waits for the inserter; -1 (e) if it failed. */
static int join(struct imp_sink *s)
{
	if (!s->running)
		return 0;
	imp_chan_close(s->chan);
	pthread_join(s->thread, NULL);
	s->running = false;
	if (s->failed) {
		imp_errf(s->e, "%s: %s", imp_db_path(s->db), s->why);
		return -1;
	}
	return 0;
}

/* ---- the replay's side --------------------------------------------------- */
static void send(struct imp_sink *s, enum batch_kind k)
{
	struct batch *b = s->open[k];

	if (!b || !b->n)
		return;
	/* A fix may be for a row still in the open allocations batch. */
	if (k == BATCH_FIXES)
		send(s, BATCH_ALLOCS);
	s->open[k] = NULL;
	imp_chan_send(s->chan, (uint8_t *)b, sizeof *b + b->n * row_size[k]);
}

/* Room for one more row of kind k: NULL (e) once the inserter has stopped. */
static void *slot(struct imp_sink *s, enum batch_kind k)
{
	struct batch *b = s->open[k];

	if (b && b->n == batch_cap(k)) {
		send(s, k);
		b = NULL;
	}
	if (!b) {
		b = (struct batch *)imp_chan_buf(s->chan);
		if (!b) {
			join(s);
			return NULL;
		}
		b->kind = k;
		b->n = 0;
		s->open[k] = b;
	}
	return (uint8_t *)rows_of(b) + b->n++ * row_size[k];
}

static int put_fix(struct imp_sink *s, const struct fix_row *f)
{
	struct fix_row *r = slot(s, BATCH_FIXES);

	if (!r)
		return -1;
	*r = *f;
	return 0;
}

/* The oldest waiting row leaves: a live one with the placeholder, unless
 * the replay is over (it is then live at the end: NULL). */
static int leave(struct imp_sink *s, bool over)
{
	struct imp_alloc_row *w = &s->win[(s->sent + 1) & (SINK_WINDOW - 1)];
	struct imp_alloc_row *r = slot(s, BATCH_ALLOCS);

	if (!r)
		return -1;
	*r = *w;
	if (!r->freed && !over) {
		r->t_free = s->t_last;
		r->freed = true;
	}
	s->open[BATCH_ALLOCS]->last_id = ++s->sent;
	return 0;
}

/* The replay's ids must be the rowids the rows will get. */
static int out_of_step(struct imp_sink *s)
{
	imp_errf(s->e, "%s: row ids out of step", imp_db_path(s->db));
	return -1;
}

int imp_sink_alloc(struct imp_sink *s, uint64_t id, const struct imp_alloc_row *a)
{
	if (id != s->made + 1)
		return out_of_step(s);
	if (s->made - s->sent == SINK_WINDOW && leave(s, false))
		return -1;
	s->win[++s->made & (SINK_WINDOW - 1)] = *a;
	return 0;
}

/* Appends f to b: schema.sql's four varints. */
static void pack_free(struct free_block *b, const struct imp_free_row *f)
{
	uint8_t *p = b->data + b->len;
	uint64_t d = f->alloc_id - b->prev;   /* two's complement: signed */

	p = tf_put_varint(p, tf_zigzag((int64_t)d));
	p = tf_put_varint(p, f->size);
	p = tf_put_varint(p, f->stack);
	p = tf_put_varint(p, f->proc);
	b->prev = f->alloc_id;
	b->len = (uint32_t)(p - b->data);
}

int imp_sink_free(struct imp_sink *s, uint64_t id, const struct imp_free_row *f,
		  uint64_t t, bool temporary)
{
	if (id != s->frees + 1 || !f->alloc_id || f->alloc_id > s->made)
		return out_of_step(s);
	if (!s->fb) {
		if (!(s->fb = slot(s, BATCH_FREES)))
			return -1;
		s->fb->id = s->frees / IMP_FREE_BLOCK;
		s->fb->n = s->fb->len = 0;
		s->fb->prev = 0;
	}
	pack_free(s->fb, f);
	if (++s->fb->n == IMP_FREE_BLOCK)
		s->fb = NULL;          /* full: the next free begins a block */
	s->frees++;
	if (f->alloc_id > s->sent) {
		struct imp_alloc_row *w = &s->win[f->alloc_id & (SINK_WINDOW - 1)];

		w->t_free = t;
		w->freed = true;
		w->temporary = temporary;
		return 0;
	}
	return put_fix(s, &(struct fix_row){
		.id = f->alloc_id, .t_free = t, .freed = true, .temporary = temporary,
	});
}

int imp_sink_unfreed(struct imp_sink *s, uint64_t id)
{
	if (id > s->sent)
		return 0;              /* still waiting: it leaves with NULL */
	if (imp_grow(&s->unfreed, &s->capunfreed, s->nunfreed, sizeof *s->unfreed)) {
		imp_errf(s->e, "out of memory");
		return -1;
	}
	s->unfreed[s->nunfreed++] = id;
	return 0;
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int imp_sink_end(struct imp_sink *s)
{
	/* In id order, the fixes walk the table forward, not at random. */
	if (s->nunfreed)
		qsort(s->unfreed, s->nunfreed, sizeof *s->unfreed, by_id);
	for (size_t i = 0; i < s->nunfreed; i++)
		if (put_fix(s, &(struct fix_row){ .id = s->unfreed[i] }))
			return -1;
	while (s->sent < s->made)
		if (leave(s, true))
			return -1;
	for (int k = 0; k < BATCH_KINDS; k++)
		send(s, (enum batch_kind)k);
	return join(s);
}

int imp_sink_open(struct imp_sink **sp, struct imp_db *db, uint64_t t_last,
		  struct imp_err *e)
{
	struct imp_sink *s = calloc(1, sizeof *s);

	*sp = s;
	if (!s || !(s->win = malloc(SINK_WINDOW * sizeof *s->win)) ||
	    imp_chan_new(&s->chan, SINK_BUFS, SINK_BATCH_BYTES)) {
		imp_errf(e, "out of memory");
		return -1;
	}
	s->db = db;
	s->t_last = t_last;
	s->e = e;
	int rc = pthread_create(&s->thread, NULL, inserter, s);
	if (rc) {
		imp_errf(e, "cannot start a thread: %s", strerror(rc));
		return -1;
	}
	s->running = true;
	return 0;
}

void imp_sink_close(struct imp_sink *s)
{
	if (!s)
		return;
	/* A failed replay: the batches it holds go back unfilled (the pool
	 * frees only what is in it), and the inserter stops. */
	for (int k = 0; k < BATCH_KINDS; k++)
		if (s->open[k]) {
			s->open[k]->n = 0;
			imp_chan_send(s->chan, (uint8_t *)s->open[k], sizeof *s->open[k]);
		}
	if (s->running) {
		imp_chan_close(s->chan);
		pthread_join(s->thread, NULL);
	}
	imp_chan_free(s->chan);
	free(s->win);
	free(s->unfreed);
	free(s);
}
