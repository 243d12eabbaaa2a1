/*
 * replay.c - pass 2: applies the merged events in time order, pairing every
 * allocation with its free through a per-process address table, and writes
 * the tables that must come out in time order: frees (free order), timeline,
 * checkpoint_index/checkpoints, and finally allocations (allocation order,
 * with t_free and the temporary flag, known only once the block was freed).
 *
 * Memory is the live set (one 32-byte entry per live block) plus per-stack
 * counters; per-allocation data goes to two scratch files beside the output
 * (sequential records, and a t_free slot per allocation that is written in
 * free order and read back in allocation order). It must never hold the
 * whole trace, and never reorder events: ids follow the merge's order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "imp.h"

#define LIVE_MIN_CAP 4096             /* initial address table slots */
#define SPILL_BUF (1u << 20)          /* scratch write/read buffer, bytes */
#define PROGRESS_EVERY 65536          /* events between progress calls */
/* A checkpoint writes one row per stack with state; spacing checkpoints at
 * least this many allocations per row keeps them a small fraction of the
 * database however many stacks a program has. */
#define CKPT_ALLOCS_PER_ROW 8
#define TFREE_TEMP (1ull << 63)       /* t_free slot: the "temporary" flag */

struct live {                         /* one live block; id 0 = empty slot */
	uint64_t addr, id, size;
	uint32_t stack;               /* stacks.id */
	uint32_t stream;              /* gidx of the allocating thread */
};

struct stack_state {
	int64_t live_bytes, live_objects;
	uint64_t alloc_bytes, alloc_objects;
};

struct proc {
	struct imp_trace *tr;
	uint32_t pid;
	struct live *tab;
	size_t cap, n;
	struct stack_state *ss;       /* index: stacks.id - tr->db_first */
	uint64_t with_state;          /* stacks with alloc_objects > 0 */
	bool changed;                 /* events since its last checkpoint */
	int64_t live_bytes, live_objects;
	bool started;
	uint64_t bucket, b_max, b_allocs, b_frees;
	struct imp_proc_stats *ps;
	uint32_t index;               /* in procs */
};

/* Scratch records, varint-encoded (about 10 bytes instead of 40): the
 * scratch files' page-cache traffic was a third of the import's CPU time. */
struct alloc_rec {                    /* one allocation, in allocation order */
	uint64_t t, addr, size;
	uint32_t stack, stream;       /* stream: gidx; gives tid and pid */
	uint32_t from_realloc;
};

struct free_rec {                     /* one frees row, in free order */
	uint64_t t, alloc_id, size;
	uint32_t stack, proc;
};

#define SPILL_REC_MAX 64              /* longest record: 6 varints of 10 bytes */

struct spill {                        /* a scratch file written, then read, in order */
	int fd;
	uint8_t *buf;
	size_t n, off;                /* bytes in buf; read position */
	bool eof;                     /* reading: the file is all in buf */
	uint64_t prev_t, prev_id;     /* delta bases (reset by spill_rewind) */
	uint64_t *prev_addr;          /* per stream gidx */
};

struct replay {
	struct imp_db *db;
	const struct imp_replay_opts *o;
	struct imp_totals *tot;
	struct proc *procs;
	uint32_t *proc_of;            /* by stream gidx: index in procs */
	uint32_t *tid_of;             /* by stream gidx */
	size_t nprocs, nstreams;
	struct spill allocs, frees;
	int tfree_fd;
	uint64_t *tfree;              /* index: allocation id */
	uint64_t tfree_cap;           /* slots mapped */
	uint64_t now;                 /* time of the last applied event */
	uint64_t alloc_id, free_id, ckpt_id, since_ckpt;
	uint64_t read_id;             /* bulk loading: rows produced */
	bool io_failed;               /* a bulk callback failed: e says why */
	struct imp_err *e;
};

static int db_err(struct replay *r)
{
	imp_errf(r->e, "%s: sqlite: %s", imp_db_path(r->db), imp_db_errmsg(r->db));
	return -1;
}

static int io_err(struct replay *r, const char *what)
{
	imp_errf(r->e, "%s: scratch file in %s: %s: %s", imp_db_path(r->db),
		 imp_db_dir(r->db), what, strerror(errno));
	return -1;
}

/* An unnamed scratch file beside the output, gone when closed. */
static int scratch(struct replay *r)
{
	char path[4096];
	int fd = open(imp_db_dir(r->db), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != ENOENT))
		return fd;
	if ((size_t)snprintf(path, sizeof path, "%s/.trace-import-XXXXXX",
			     imp_db_dir(r->db)) >= sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int spill_open(struct replay *r, struct spill *s, size_t nstreams)
{
	s->fd = scratch(r);
	s->buf = malloc(SPILL_BUF);
	s->prev_addr = calloc(nstreams ? nstreams : 1, sizeof *s->prev_addr);
	if (s->fd < 0)
		return io_err(r, "create");
	if (!s->buf || !s->prev_addr) {
		imp_errf(r->e, "out of memory");
		return -1;
	}
	return 0;
}

static void spill_close(struct spill *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	free(s->prev_addr);
}

/* Room for one more record in the write buffer. */
static int spill_reserve(struct replay *r, struct spill *s)
{
	if (s->n + SPILL_REC_MAX > SPILL_BUF) {
		if (write_all(s->fd, s->buf, s->n))
			return io_err(r, "write");
		s->n = 0;
	}
	return 0;
}

/* Switches from writing to reading from the start. */
static int spill_rewind(struct replay *r, struct spill *s, size_t nstreams)
{
	if (write_all(s->fd, s->buf, s->n))
		return io_err(r, "write");
	s->n = s->off = 0;
	s->eof = false;
	s->prev_t = s->prev_id = 0;
	memset(s->prev_addr, 0, (nstreams ? nstreams : 1) * sizeof *s->prev_addr);
	if (lseek(s->fd, 0, SEEK_SET) < 0)
		return io_err(r, "seek");
	posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

/* At least one whole record buffered (or the rest of the file). */
static int spill_fill(struct replay *r, struct spill *s)
{
	if (s->eof || s->n - s->off >= SPILL_REC_MAX)
		return 0;
	memmove(s->buf, s->buf + s->off, s->n - s->off);
	s->n -= s->off;
	s->off = 0;
	while (s->n < SPILL_BUF) {
		ssize_t got = read(s->fd, s->buf + s->n, SPILL_BUF - s->n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return io_err(r, "read");
		if (got == 0) {
			s->eof = true;
			break;
		}
		s->n += (size_t)got;
	}
	return 0;
}

static uint8_t *put_uv(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static uint64_t zigzag(uint64_t delta)
{
	return delta << 1 ^ (uint64_t)((int64_t)delta >> 63);
}

static uint64_t unzigzag(uint64_t v)
{
	return v >> 1 ^ -(v & 1);
}

/* Reads the varints of one record; false if the file ends inside it. */
static bool get_uvs(struct spill *s, uint64_t *v, int n)
{
	const uint8_t *p = s->buf + s->off, *end = s->buf + s->n;

	for (int i = 0; i < n; i++) {
		uint64_t x = 0;
		unsigned shift = 0;

		for (;;) {
			if (p == end || shift > 63)
				return false;
			x |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
			if (!(*p++ & 0x80))
				break;
		}
		v[i] = x;
	}
	s->off = (size_t)(p - s->buf);
	return true;
}

static int put_alloc(struct replay *r, const struct alloc_rec *a)
{
	struct spill *s = &r->allocs;
	uint8_t *p;

	if (spill_reserve(r, s))
		return -1;
	p = s->buf + s->n;
	p = put_uv(p, a->t - s->prev_t);
	p = put_uv(p, (uint64_t)a->stream << 1 | a->from_realloc);
	p = put_uv(p, zigzag(a->addr - s->prev_addr[a->stream]));
	p = put_uv(p, a->size);
	p = put_uv(p, a->stack);
	s->prev_t = a->t;
	s->prev_addr[a->stream] = a->addr;
	s->n = (size_t)(p - s->buf);
	return 0;
}

static int put_free(struct replay *r, const struct free_rec *f)
{
	struct spill *s = &r->frees;
	uint8_t *p;

	if (spill_reserve(r, s))
		return -1;
	p = s->buf + s->n;
	p = put_uv(p, f->t - s->prev_t);
	p = put_uv(p, zigzag(f->alloc_id - s->prev_id));
	p = put_uv(p, f->size);
	p = put_uv(p, f->stack);
	p = put_uv(p, f->proc);
	s->prev_t = f->t;
	s->prev_id = f->alloc_id;
	s->n = (size_t)(p - s->buf);
	return 0;
}

static int corrupt(struct replay *r)
{
	errno = EIO;               /* shorter or other than what was written */
	return io_err(r, "read");
}

static int get_alloc(struct replay *r, struct alloc_rec *a)
{
	struct spill *s = &r->allocs;
	uint64_t v[5];

	if (spill_fill(r, s))
		return -1;
	if (!get_uvs(s, v, 5) || (v[1] >> 1) >= r->nstreams)
		return corrupt(r);
	a->t = s->prev_t += v[0];
	a->stream = (uint32_t)(v[1] >> 1);
	a->from_realloc = v[1] & 1;
	a->addr = s->prev_addr[a->stream] += unzigzag(v[2]);
	a->size = v[3];
	a->stack = (uint32_t)v[4];
	return 0;
}

static int get_free(struct replay *r, struct free_rec *f)
{
	struct spill *s = &r->frees;
	uint64_t v[5];

	if (spill_fill(r, s))
		return -1;
	if (!get_uvs(s, v, 5) || v[4] >= r->nprocs)
		return corrupt(r);
	f->t = s->prev_t += v[0];
	f->alloc_id = s->prev_id += unzigzag(v[1]);
	f->size = v[2];
	f->stack = (uint32_t)v[3];
	f->proc = (uint32_t)v[4];
	return 0;
}

/* ---- the address table: open addressing, linear probing ---------------- */
static size_t slot_of(const struct proc *p, uint64_t addr)
{
	return (size_t)(((addr >> 4) * 0x9E3779B97F4A7C15ull) >> 20) & (p->cap - 1);
}

static struct live *find(struct proc *p, uint64_t addr)
{
	size_t i = slot_of(p, addr);

	while (p->tab[i].id) {
		if (p->tab[i].addr == addr)
			return &p->tab[i];
		i = (i + 1) & (p->cap - 1);
	}
	return NULL;
}

static int grow(struct proc *p)
{
	struct live *old = p->tab;
	size_t oldcap = p->cap, i;

	p->cap = oldcap ? oldcap * 2 : LIVE_MIN_CAP;
	p->tab = calloc(p->cap, sizeof *p->tab);
	if (!p->tab) {
		p->tab = old;
		p->cap = oldcap;
		return -1;
	}
	for (i = 0; i < oldcap; i++) {
		if (old[i].id) {
			size_t j = slot_of(p, old[i].addr);

			while (p->tab[j].id)
				j = (j + 1) & (p->cap - 1);
			p->tab[j] = old[i];
		}
	}
	free(old);
	return 0;
}

static int insert(struct proc *p, const struct live *l)
{
	size_t i;

	if ((p->n + 1) * 4 > p->cap * 3 && grow(p))
		return -1;
	i = slot_of(p, l->addr);
	while (p->tab[i].id)
		i = (i + 1) & (p->cap - 1);
	p->tab[i] = *l;
	p->n++;
	return 0;
}

/* Backward-shift deletion: no tombstones, probes stay short. */
static void erase(struct proc *p, struct live *l)
{
	size_t i = (size_t)(l - p->tab), j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & (p->cap - 1);
		if (!p->tab[j].id)
			break;
		k = slot_of(p, p->tab[j].addr);
		/* Move j into the hole at i unless its home k lies in (i, j]. */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			p->tab[i] = p->tab[j];
			i = j;
		}
	}
	p->tab[i].id = 0;
	p->n--;
}

/* ---- timeline ------------------------------------------------------------ */
static int bucket_row(struct replay *r, struct proc *p, uint64_t b,
		      uint64_t max, uint64_t allocs, uint64_t frees)
{
	if (imp_db_insert(r->db, "INSERT INTO timeline VALUES(?,?,?,?,?,?,?)",
			  "uiiiiuu", (uint64_t)p->pid, (int64_t)(b * r->o->bucket_ns),
			  p->live_bytes, p->live_objects, (int64_t)max, allocs, frees))
		return db_err(r);
	return 0;
}

/* Closes the buckets before the one holding t. */
static int advance(struct replay *r, struct proc *p, uint64_t t)
{
	uint64_t b = t / r->o->bucket_ns;

	if (!p->started) {
		p->started = true;
		p->bucket = b;
		p->b_max = 0;
		return 0;
	}
	if (b == p->bucket)
		return 0;
	if (bucket_row(r, p, p->bucket, p->b_max, p->b_allocs, p->b_frees))
		return -1;
	for (uint64_t k = p->bucket + 1; k < b; k++)
		if (bucket_row(r, p, k, (uint64_t)p->live_bytes, 0, 0))
			return -1;
	p->bucket = b;
	p->b_max = (uint64_t)p->live_bytes;
	p->b_allocs = p->b_frees = 0;
	return 0;
}

/* ---- applying events ----------------------------------------------------- */
static struct stack_state *state_of(struct proc *p, uint32_t stack)
{
	return &p->ss[stack - p->tr->db_first];
}

static int close_block(struct replay *r, struct proc *p, struct live *l,
		       uint64_t t, bool temporary)
{
	struct stack_state *s = state_of(p, l->stack);
	struct free_rec f = {
		.t = t, .alloc_id = l->id, .size = l->size, .stack = l->stack,
		.proc = p->index,
	};

	r->free_id++;
	if (put_free(r, &f))
		return -1;
	r->tfree[l->id] = (t + 1) | (temporary ? TFREE_TEMP : 0);
	s->live_bytes -= (int64_t)l->size;
	s->live_objects--;
	p->live_bytes -= (int64_t)l->size;
	p->live_objects--;
	p->b_frees++;
	p->ps->frees++;
	r->tot->frees++;
	erase(p, l);
	return 0;
}

static int apply(struct replay *r, struct proc *p, const struct imp_ev *ev)
{
	struct imp_stream *st = ev->st;
	struct live *l = find(p, ev->addr);

	if (advance(r, p, ev->t))
		return -1;
	p->changed = true;
	p->ps->t_end = ev->t;
	if (st->t_first == IMP_NO_TIME)
		st->t_first = ev->t;
	st->t_last = ev->t;

	if (ev->kind == IMP_FREE) {
		if (!l) {
			p->ps->unmatched_frees++;
			r->tot->unmatched_frees++;
			return 0;
		}
		return close_block(r, p, l, ev->t, l->stream == st->gidx &&
				   st->last_alloc == l->id);
	}

	if (l) {                   /* its free was missed: it ends now */
		p->ps->missed_frees++;
		r->tot->missed_frees++;
		if (close_block(r, p, l, ev->t, false))
			return -1;
	}
	if (r->alloc_id + 1 >= r->tfree_cap) {
		imp_errf(r->e, "%s: more allocations than the traces' records",
			 imp_db_path(r->db));
		return -1;
	}
	struct live n = {
		.addr = ev->addr, .id = ++r->alloc_id, .size = ev->size,
		.stack = imp_stack_of(p->tr, ev->stack), .stream = st->gidx,
	};
	struct alloc_rec s = {
		.t = ev->t, .addr = ev->addr, .size = ev->size, .stack = n.stack,
		.stream = st->gidx, .from_realloc = ev->from_realloc,
	};
	struct stack_state *ss = state_of(p, n.stack);

	if (insert(p, &n)) {
		imp_errf(r->e, "out of memory (live set of %zu blocks)", p->n);
		return -1;
	}
	if (put_alloc(r, &s))
		return -1;
	st->last_alloc = n.id;
	if (!ss->alloc_objects)
		p->with_state++;
	ss->alloc_objects++;
	ss->alloc_bytes += ev->size;
	ss->live_objects++;
	ss->live_bytes += (int64_t)ev->size;
	p->live_bytes += (int64_t)ev->size;
	p->live_objects++;
	p->b_allocs++;
	if ((uint64_t)p->live_bytes > p->b_max)
		p->b_max = (uint64_t)p->live_bytes;
	if ((uint64_t)p->live_bytes > p->ps->peak_bytes) {
		p->ps->peak_bytes = (uint64_t)p->live_bytes;
		p->ps->peak_objects = (uint64_t)p->live_objects;
		p->ps->peak_t = ev->t;
	}
	p->ps->allocs++;
	r->tot->allocations++;
	r->since_ckpt++;
	return 0;
}

/* ---- checkpoints ---------------------------------------------------------- */
static int checkpoint(struct replay *r, struct proc *procs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct proc *p = &procs[i];

		if (!p->changed)
			continue;
		p->changed = false;
		r->ckpt_id++;
		if (imp_db_insert(r->db, "INSERT INTO checkpoint_index "
				  "VALUES(?,?,?,?,?)", "uuuuu", r->ckpt_id,
				  (uint64_t)p->pid, r->now, r->alloc_id, r->free_id))
			return db_err(r);
		for (uint32_t k = 0; k < p->tr->db_count; k++) {
			const struct stack_state *s = &p->ss[k];

			if (!s->alloc_objects)
				continue;
			if (imp_db_ckpt_row(r->db, r->ckpt_id, p->tr->db_first + k,
					    s->live_bytes, s->live_objects,
					    s->alloc_bytes, s->alloc_objects))
				return db_err(r);
			r->tot->checkpoint_rows++;
		}
		r->tot->checkpoints++;
	}
	r->since_ckpt = 0;
	return 0;
}

static uint64_t ckpt_due(const struct replay *r, const struct proc *procs,
			 size_t n)
{
	uint64_t rows = 0;

	for (size_t i = 0; i < n; i++)
		rows += procs[i].with_state;
	rows *= CKPT_ALLOCS_PER_ROW;
	return rows > r->o->ckpt_interval ? rows : r->o->ckpt_interval;
}

/* ---- the final, sequential passes: frees, then allocations --------------- */
static int next_free(void *ctx, int64_t *v, uint32_t *nulls)
{
	struct replay *r = ctx;
	struct free_rec f = {0};

	(void)nulls;
	if (r->read_id == r->free_id)
		return 0;
	if (get_free(r, &f)) {
		r->io_failed = true;
		return -1;
	}
	v[0] = (int64_t)++r->read_id;
	v[1] = (int64_t)f.t;
	v[2] = (int64_t)f.alloc_id;
	v[3] = (int64_t)f.size;
	v[4] = f.stack;
	v[5] = r->procs[f.proc].pid;
	return 1;
}

static int next_alloc(void *ctx, int64_t *v, uint32_t *nulls)
{
	struct replay *r = ctx;
	struct alloc_rec a = {0};
	uint64_t id, tf;

	if (r->read_id == r->alloc_id)
		return 0;
	if (get_alloc(r, &a)) {
		r->io_failed = true;
		return -1;
	}
	id = ++r->read_id;
	tf = r->tfree[id];
	v[0] = (int64_t)id;
	v[1] = (int64_t)a.t;
	if (tf)
		v[2] = (int64_t)((tf & ~TFREE_TEMP) - 1);
	else
		*nulls |= 1u << 2;    /* never freed */
	v[3] = (int64_t)a.size;
	v[4] = a.stack;
	v[5] = r->tid_of[a.stream];
	v[6] = r->procs[r->proc_of[a.stream]].pid;
	v[7] = (int64_t)a.addr;
	v[8] = a.from_realloc;
	v[9] = (tf & TFREE_TEMP) != 0;
	if (r->o->progress && !(id % PROGRESS_EVERY))
		r->o->progress(r->o->progress_ctx, IMP_PHASE_ALLOCS, id,
			       r->alloc_id);
	return 1;
}

static int bulk(struct replay *r, const char *sql,
		int (*next)(void *, int64_t *, uint32_t *))
{
	r->read_id = 0;
	if (imp_db_bulk(r->db, sql, next, r))
		return r->io_failed ? -1 : db_err(r);
	return 0;
}

static int write_rows(struct replay *r)
{
	if (spill_rewind(r, &r->frees, r->nstreams) ||
	    spill_rewind(r, &r->allocs, r->nstreams) ||
	    bulk(r, "INSERT INTO frees SELECT c0, c1, c2, c3, c4, c5 "
		 "FROM imp_bulk", next_free) ||
	    bulk(r, "INSERT INTO allocations SELECT c0, c1, c2, c3, c4, c5, "
		 "c6, c7, c8, c9 FROM imp_bulk", next_alloc))
		return -1;
	return 0;
}

static int setup(struct replay *r, struct imp_trace *tr, size_t ntr,
		 struct imp_proc_stats *ps)
{
	uint64_t slots = 1, nstreams = 0;
	uint32_t g = 0;

	for (size_t t = 0; t < ntr; t++) {
		struct proc *p = &r->procs[t];

		slots += tr[t].events;
		nstreams += tr[t].nstreams;
		p->tr = &tr[t];
		p->index = (uint32_t)t;
		p->pid = tr[t].hdr->pid;
		p->ps = &ps[t];
		p->ss = calloc(tr[t].db_count ? tr[t].db_count : 1, sizeof *p->ss);
		if (!p->ss || grow(p))
			goto nomem;
	}
	r->nprocs = ntr;
	r->nstreams = nstreams;
	r->proc_of = calloc(nstreams ? nstreams : 1, sizeof *r->proc_of);
	r->tid_of = calloc(nstreams ? nstreams : 1, sizeof *r->tid_of);
	if (!r->proc_of || !r->tid_of)
		goto nomem;
	for (size_t t = 0; t < ntr; t++)
		for (size_t s = 0; s < tr[t].nstreams; s++) {
			tr[t].streams[s].gidx = g;
			tr[t].streams[s].last_alloc = 0;
			r->tid_of[g] = tr[t].streams[s].tid;
			r->proc_of[g++] = (uint32_t)t;
		}
	if (spill_open(r, &r->allocs, nstreams) ||
	    spill_open(r, &r->frees, nstreams))
		return -1;
	r->tfree_fd = scratch(r);
	if (r->tfree_fd < 0)
		return io_err(r, "create");
	/* One slot per possible allocation (each record allocates at most
	 * once), plus slot 0: a sparse file, so untouched slots cost nothing
	 * and read as 0 = "never freed". */
	r->tfree_cap = slots + 1;
	if (ftruncate(r->tfree_fd, (off_t)(r->tfree_cap * sizeof *r->tfree)))
		return io_err(r, "size");
	r->tfree = mmap(NULL, r->tfree_cap * sizeof *r->tfree,
			PROT_READ | PROT_WRITE, MAP_SHARED, r->tfree_fd, 0);
	if (r->tfree == MAP_FAILED) {
		r->tfree = NULL;
		return io_err(r, "map");
	}
	return 0;
nomem:
	imp_errf(r->e, "out of memory");
	return -1;
}

static void teardown(struct replay *r, size_t ntr)
{
	if (r->tfree)
		munmap(r->tfree, r->tfree_cap * sizeof *r->tfree);
	spill_close(&r->allocs);
	spill_close(&r->frees);
	if (r->tfree_fd >= 0)
		close(r->tfree_fd);
	for (size_t t = 0; t < ntr; t++) {
		free(r->procs[t].tab);
		free(r->procs[t].ss);
	}
	free(r->procs);
	free(r->proc_of);
	free(r->tid_of);
}

int imp_replay(struct imp_db *db, struct imp_trace *tr, size_t ntr,
	       const struct imp_replay_opts *o, struct imp_proc_stats *ps,
	       struct imp_totals *tot, struct imp_err *e)
{
	struct replay r = {
		.db = db, .o = o, .tot = tot, .e = e,
		.allocs.fd = -1, .frees.fd = -1, .tfree_fd = -1,
	};
	struct imp_merge *m = NULL;
	struct imp_ev ev;
	uint64_t due;
	int rc = -1, got;

	r.procs = calloc(ntr ? ntr : 1, sizeof *r.procs);
	if (!r.procs) {
		imp_errf(e, "out of memory");
		return -1;
	}
	if (setup(&r, tr, ntr, ps) || imp_merge_open(&m, tr, ntr, e))
		goto out;
	due = o->ckpt_interval;
	while ((got = imp_merge_next(m, &ev, e)) == 1) {
		struct proc *p = &r.procs[r.proc_of[ev.st->gidx]];

		r.now = ev.t;
		if (apply(&r, p, &ev))
			goto out;
		/* A checkpoint must hold every event of its instant. */
		if (r.since_ckpt >= due && imp_merge_peek(m) > r.now) {
			if (checkpoint(&r, r.procs, ntr))
				goto out;
			due = ckpt_due(&r, r.procs, ntr);
		}
		if (o->progress && !(imp_merge_records(m) % PROGRESS_EVERY))
			o->progress(o->progress_ctx, IMP_PHASE_MERGE,
				    imp_merge_records(m), o->total_events);
	}
	if (got < 0)
		goto out;
	tot->events = imp_merge_records(m);
	tot->clamped = imp_merge_clamped(m);
	for (size_t t = 0; t < ntr; t++) {
		struct proc *p = &r.procs[t];

		if (p->started &&
		    bucket_row(&r, p, p->bucket, p->b_max, p->b_allocs, p->b_frees))
			goto out;
	}
	if (checkpoint(&r, r.procs, ntr) || write_rows(&r))
		goto out;
	rc = 0;
out:
	imp_merge_close(m);
	teardown(&r, ntr);
	return rc;
}
