/*
 * replay.c - pass 2: applies the merged events in time order, pairing every
 * allocation with its free through a per-process address table (livetab.c),
 * and produces the tables that must come out in time order:
 *   allocations, frees: handed to a second thread that inserts them while
 *                this one goes on (sink.c);
 *   timeline, checkpoint_index, checkpoints: kept (the index and timeline in
 *                memory, checkpoint rows in a scratch file) and inserted
 *                once that thread is done, SQLite being one connection.
 *
 * A forked child whose parent's trace is here (run.c: inherited 1) starts
 * with a copy of its parent's live set, live mappings and live custom
 * blocks at the fork, taken
 * when the merge passes the fork's instant: allocations of the child at that
 * instant, with the parent's sizes and stacks, so that its snapshots hold
 * them and its frees (and unmaps) of them pair. Those stacks are the
 * parent's (or an ancestor's) stacks rows, outside the child's own range:
 * their counters sit in a sorted side table (struct proc's foreign).
 *
 * The program's anonymous mappings (FORMAT.md "Mappings") are allocations
 * of kind mmap kept apart, in each process's sorted list of regions: an
 * unmap ends every region it touches and starts again the pieces it leaves
 * (their t_alloc the unmap's instant), so a snapshot holds exactly what
 * stays mapped. They count in the per-stack state (checkpoints, snapshots)
 * but not in live_bytes, the timeline or the peak, which stay the heap's.
 *
 * A custom allocator's blocks (FORMAT.md "Custom blocks") are allocations
 * of kind custom, paired in a table of their own keyed by address and pool
 * (a pool's block may lie inside a heap block, or share its address with
 * another pool's), counted like mappings: in the per-stack state, not in
 * live_bytes. A pool's destruction ends every block it still holds, in
 * allocation order.
 *
 * Memory is the live set (one 32-byte entry per live block), per-stack
 * counters and fixed buffers: never the trace. It must never reorder
 * events: allocations and frees ids follow the merge's order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "imp.h"
#include "tf_varint.h"

#define PROGRESS_EVERY 65536          /* events between progress calls */
/* A checkpoint writes one row per stack with state; spacing checkpoints at
 * least this many allocations per row keeps them a small fraction of the
 * database however many stacks a program has. */
#define CKPT_ALLOCS_PER_ROW 8
#define NO_STREAM UINT32_MAX          /* imp_live.stream of an inherited block */
struct stack_state {
	int64_t live_bytes, live_objects;
	uint64_t alloc_bytes, alloc_objects;
};

struct region {                       /* a live mapping: [addr, addr + size) */
	uint64_t addr, size, id;
	uint32_t stack, tid;
};

struct proc {
	struct imp_trace *tr;
	uint32_t pid;
	struct imp_livetab live;
	struct stack_state *ss;       /* index: stacks.id - tr->db_first */
	uint32_t *foreign;            /* inherited blocks' stacks.ids, sorted */
	struct stack_state *fss;      /* their counters, same index */
	size_t nforeign;
	bool inherit_unknown;         /* frees of unknown blocks: inherited ones */
	bool attached;                /* frees of unknown blocks: allocated before the attach */
	/* A recording that ended by a detach ends at its mark: every event
	 * stamped by then was recorded (the recorder takes the mark's time
	 * before it turns allocations off, and a hook reads the clock after
	 * it looked whether they are on), while later ones are only some of
	 * what happened (a thread already inside a hook, frees until the GOT
	 * is put back). So they are left out, and answers up to the end stay
	 * exact. IMP_NO_TIME: no detach. */
	uint64_t t_cut;
	uint64_t with_state;          /* stacks with alloc_objects > 0 */
	bool changed;                 /* events since its last checkpoint */
	int64_t live_bytes, live_objects;
	bool started;
	/* From its first heapreel.stop or heapreel.unrouted mark on, blocks
	 * may have been allocated unrecorded (stopped, not yet started, or by
	 * an object whose calls were not routed yet): a free matching no block
	 * then is of such a block, counted apart (unknown_frees), not as
	 * unmatched. */
	uint64_t t_unseen;
	uint64_t bucket, b_max, b_allocs, b_frees;
	/* The first allocation id of each timeline bucket, from the first
	 * on: a block whose free the trace lacks (a missed free) was
	 * allocated no earlier than its id's bucket, where the loss begins. */
	struct bucket_ids { uint64_t id, t; } *bids;
	size_t nbids, capbids;
	/* A bounded trace replayed from a keyframe is exact from `window` on:
	 * earlier events are applied at that instant, and the live set they
	 * leave counts for the peak only once they are all in (settling). */
	uint64_t window;
	bool settling;
	struct imp_proc_stats *ps;
	uint32_t index;               /* in procs */
	struct imp_livetab custom;    /* custom blocks, by custom_key */
	struct pool_list *pools;      /* index: pool id (0, rec_alloc's, unused) */
	size_t npools;
	struct region *maps;          /* anonymous mappings, sorted, disjoint */
	size_t nmaps, capmaps;
	bool unmap_hit;               /* the last unmap ended a region */
};

/* Checkpoint rows wait in a scratch file, varint-encoded (about 10 bytes
 * instead of 48: scratch files' page-cache traffic costs CPU time). */
struct ckpt_rec {                     /* one checkpoints row */
	uint64_t ckpt, stack;
	int64_t live_bytes, live_objects;
	uint64_t alloc_bytes, alloc_objects;
};

struct tl_row {                       /* one timeline row, written after pass 2 */
	uint64_t t, max, allocs, frees;
	int64_t live_bytes, live_objects;
	uint32_t pid;
};

struct ckpt_index_row {
	uint64_t id, t, alloc_id, free_id;
	uint32_t pid;
};

struct fork {                         /* a child to seed from its parent */
	uint64_t t;                   /* the fork, common axis */
	uint32_t parent, child;       /* indexes in procs */
};

struct replay {
	struct imp_db *db;
	const struct imp_replay_opts *o;
	struct imp_totals *tot;
	struct proc *procs;
	uint32_t *proc_of;            /* by stream gidx: index in procs */
	size_t nprocs, nstreams;
	struct imp_spill ckpts;
	struct imp_sink *sink;
	struct tl_row *tl;
	size_t ntl, captl;
	struct ckpt_index_row *ci;
	size_t nci, capci;
	struct fork *forks;           /* by time */
	size_t nforks, capforks, next_fork;
	uint64_t now;                 /* time of the last applied event */
	uint64_t alloc_id, free_id, ckpt_id, since_ckpt;
	uint64_t read_id;             /* checkpoint rows inserted */
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
	/* the scratch files live beside the output: theirs is its disk */
	r->e->unwritable = errno != ENOMEM;
	imp_errf(r->e, "%s: scratch file in %s: %s: %s", imp_db_path(r->db),
		 imp_db_dir(r->db), what, strerror(errno));
	return -1;
}

static int put_ckpt(struct replay *r, const struct ckpt_rec *c)
{
	struct imp_spill *s = &r->ckpts;
	uint8_t *p;

	if (imp_spill_reserve(s))
		return io_err(r, "write");
	p = s->buf + s->n;
	p = tf_put_varint(p, c->ckpt - s->prev_id);
	p = tf_put_varint(p, c->stack);
	p = tf_put_varint(p, tf_zigzag(c->live_bytes));
	p = tf_put_varint(p, tf_zigzag(c->live_objects));
	p = tf_put_varint(p, c->alloc_bytes);
	p = tf_put_varint(p, c->alloc_objects);
	s->prev_id = c->ckpt;
	s->n = (size_t)(p - s->buf);
	return 0;
}

static int corrupt(struct replay *r)
{
	errno = EIO;               /* shorter or other than what was written */
	return io_err(r, "read");
}

static int get_ckpt(struct replay *r, struct ckpt_rec *c)
{
	struct imp_spill *s = &r->ckpts;
	const uint8_t *p;
	uint64_t v[6];

	if (imp_spill_fill(s))
		return io_err(r, "read");
	p = s->buf + s->off;
	if (!imp_get_uvs(&p, s->buf + s->n, v, 6))
		return corrupt(r);
	s->off = (size_t)(p - s->buf);
	c->ckpt = s->prev_id += v[0];
	c->stack = v[1];
	c->live_bytes = tf_unzigzag(v[2]);
	c->live_objects = tf_unzigzag(v[3]);
	c->alloc_bytes = v[4];
	c->alloc_objects = v[5];
	return 0;
}

/* ---- timeline ------------------------------------------------------------ */
static int bucket_row(struct replay *r, struct proc *p, uint64_t b,
		      uint64_t max, uint64_t allocs, uint64_t frees)
{
	struct tl_row *t;

	if (imp_grow(&r->tl, &r->captl, r->ntl, sizeof *r->tl)) {
		imp_errf(r->e, "out of memory");
		return -1;
	}
	t = &r->tl[r->ntl++];
	t->pid = p->pid;
	t->t = b * r->o->bucket_ns;
	t->live_bytes = p->live_bytes;
	t->live_objects = p->live_objects;
	t->max = max;
	t->allocs = allocs;
	t->frees = frees;
	return 0;
}

/* Bucket b's first allocation id is the next one. */
static int note_bucket(struct replay *r, struct proc *p, uint64_t b)
{
	if (imp_grow(&p->bids, &p->capbids, p->nbids, sizeof *p->bids)) {
		imp_errf(r->e, "out of memory (%zu timeline buckets)", p->nbids);
		return -1;
	}
	p->bids[p->nbids++] = (struct bucket_ids){ r->alloc_id + 1, b * r->o->bucket_ns };
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
		return note_bucket(r, p, b);
	}
	if (b == p->bucket)
		return 0;
	if (note_bucket(r, p, b))
		return -1;
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
/* live + d modulo 2^64: sizes come from the trace, and a damaged one can
 * hold sizes no allocation ever had, whose sum overflows int64_t. */
static int64_t wrap_add(int64_t live, uint64_t d)
{
	return (int64_t)((uint64_t)live + d);
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Every stack of p's live set is its own or, inherited, in foreign. */
static struct stack_state *state_of(struct proc *p, uint32_t stack)
{
	uint32_t k = stack - p->tr->db_first;
	const uint32_t *f;

	if (k < p->tr->db_count)
		return &p->ss[k];
	f = bsearch(&stack, p->foreign, p->nforeign, sizeof *f, by_u32);
	return &p->fss[f - p->foreign];
}

/* The rows and per-stack counters of the end of allocation id, any kind. */
static int end_row(struct replay *r, struct proc *p, uint64_t id, uint64_t size,
		   uint32_t stack, uint64_t t, bool temporary)
{
	struct stack_state *s = state_of(p, stack);
	struct imp_free_row f = {
		.alloc_id = id, .size = size, .stack = stack, .proc = p->index,
	};

	r->free_id++;
	if (imp_sink_free(r->sink, r->free_id, &f, t, temporary))
		return -1;
	s->live_bytes = wrap_add(s->live_bytes, -size);
	s->live_objects--;
	p->ps->frees++;
	r->tot->frees++;
	return 0;
}

static int close_block(struct replay *r, struct proc *p, struct imp_live *l,
		       uint64_t t, bool temporary)
{
	if (end_row(r, p, l->id, l->size, l->stack, t, temporary))
		return -1;
	p->live_bytes = wrap_add(p->live_bytes, -l->size);
	p->live_objects--;
	p->b_frees++;
	imp_live_erase(&p->live, l);
	return 0;
}

/* Live bytes at t may be the bucket's maximum and the peak. */
static void note_high(struct proc *p, uint64_t t)
{
	if ((uint64_t)p->live_bytes > p->b_max)
		p->b_max = (uint64_t)p->live_bytes;
	if ((uint64_t)p->live_bytes > p->ps->peak_bytes) {
		p->ps->peak_bytes = (uint64_t)p->live_bytes;
		p->ps->peak_objects = (uint64_t)p->live_objects;
		p->ps->peak_t = t;
	}
}

/* Events before a keyframe's window happen at its start (see struct proc);
 * those at its very start are part of the settling too (the keyframe may
 * hold a free of that instant). */
static void clamp_to_window(struct proc *p, struct imp_ev *ev)
{
	if (ev->t <= p->window && p->window) {
		ev->t = p->window;
		p->settling = true;
	} else if (p->settling) {
		p->settling = false;
		note_high(p, p->window);
	}
}

/* The row and per-stack counters of allocation id (the next id), any kind. */
static int start_row(struct replay *r, struct proc *p, uint64_t id, uint64_t size,
		     uint32_t stack, const struct imp_alloc_row *row)
{
	struct stack_state *ss = state_of(p, stack);

	if (imp_sink_alloc(r->sink, id, row))
		return -1;
	if (!ss->alloc_objects)
		p->with_state++;
	ss->alloc_objects++;
	ss->alloc_bytes += size;
	ss->live_objects++;
	ss->live_bytes = wrap_add(ss->live_bytes, size);
	p->ps->allocs++;
	r->tot->allocations++;
	r->since_ckpt++;
	return 0;
}

/* Block n (its id the next allocation id) becomes live in p. */
static int open_block(struct replay *r, struct proc *p, const struct imp_live *n,
		      const struct imp_alloc_row *row)
{
	if (imp_live_insert(&p->live, n)) {
		imp_errf(r->e, "out of memory (live set of %zu blocks)", p->live.n);
		return -1;
	}
	if (start_row(r, p, n->id, n->size, n->stack, row))
		return -1;
	p->live_bytes = wrap_add(p->live_bytes, n->size);
	p->live_objects++;
	p->b_allocs++;
	return 0;
}

/* ---- anonymous mappings ------------------------------------------------- */

/* The first region of p that ends after addr. */
static size_t first_after(const struct proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->maps[mid].addr + p->maps[mid].size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Region g becomes live at index i of p's list, as allocation row of t. */
static int open_region(struct replay *r, struct proc *p, size_t i, struct region g,
		       uint64_t t, bool from_realloc)
{
	if (p->nmaps == p->capmaps) {
		size_t cap = p->capmaps ? 2 * p->capmaps : 16;
		struct region *m = realloc(p->maps, cap * sizeof *m);
		if (!m) {
			imp_errf(r->e, "out of memory (%zu mappings)", p->nmaps);
			return -1;
		}
		p->maps = m;
		p->capmaps = cap;
	}
	memmove(&p->maps[i + 1], &p->maps[i], (p->nmaps - i) * sizeof *p->maps);
	p->nmaps++;
	g.id = ++r->alloc_id;
	p->maps[i] = g;
	struct imp_alloc_row row = {
		.t = t, .addr = g.addr, .size = g.size, .stack = g.stack, .tid = g.tid,
		.pid = p->pid, .from_realloc = from_realloc, .kind = IMP_KIND_MMAP,
	};
	return start_row(r, p, g.id, g.size, g.stack, &row);
}

/* Unmaps [a, b) at t: each region it touches ends, what it leaves of them
 * starts again. */
static int unmap(struct replay *r, struct proc *p, uint64_t a, uint64_t b, uint64_t t)
{
	size_t i = first_after(p, a);

	p->unmap_hit = false;
	while (i < p->nmaps && p->maps[i].addr < b) {
		struct region g = p->maps[i];
		uint64_t end = g.addr + g.size;

		p->unmap_hit = true;
		if (end_row(r, p, g.id, g.size, g.stack, t, false))
			return -1;
		memmove(&p->maps[i], &p->maps[i + 1], (p->nmaps - i - 1) * sizeof *p->maps);
		p->nmaps--;
		if (g.addr < a && open_region(r, p, i++, (struct region){
			    .addr = g.addr, .size = a - g.addr, .stack = g.stack, .tid = g.tid },
			    t, false))
			return -1;
		if (end > b && open_region(r, p, i++, (struct region){
			    .addr = b, .size = end - b, .stack = g.stack, .tid = g.tid },
			    t, false))
			return -1;
	}
	return 0;
}

/* A mapping event. An mremap's new range counts only if its old range
 * held a mapping (it may have been a file's); a mapping over live regions
 * (never from the reference recorder, which unmaps first) replaces them. */
static int region_event(struct replay *r, struct proc *p, const struct imp_ev *ev)
{
	/* a damaged trace's range may wrap: cut at the top of the space */
	uint64_t end = ev->size > UINT64_MAX - ev->addr ? UINT64_MAX : ev->addr + ev->size;

	if (ev->region == IMP_UNMAP)
		return unmap(r, p, ev->addr, end, ev->t);
	if ((ev->region == IMP_REMAP && !p->unmap_hit) || end == ev->addr)
		return 0;
	if (unmap(r, p, ev->addr, end, ev->t))
		return -1;
	struct region g = {
		.addr = ev->addr, .size = end - ev->addr, .stack = imp_stack_of(p->tr, ev->stack),
		.tid = ev->st->tid,
	};
	return open_region(r, p, first_after(p, ev->addr), g, ev->t,
			   ev->region == IMP_REMAP);
}

/* ---- a custom allocator's blocks ------------------------------------------ */

/* A pool's blocks in allocation order, so that destroying it costs its own
 * blocks, not every live custom block of the process (a program that
 * makes and destroys a pool per request beside a big long-lived one).
 * Entries of blocks since ended stay until the list is compacted, which
 * happens once they outnumber the live ones. */
struct pool_entry {
	uint64_t id, key;             /* the block's allocations.id, custom_key */
};
struct pool_list {
	struct pool_entry *e;
	size_t n, cap, live;
};
#define POOL_COMPACT_SLACK 64         /* ended entries always tolerated */

/* Custom blocks pair by address within their pool: addresses are below
 * 2^48 (the recorder refuses others), pools above. */
#define POOL_SHIFT 48
static uint64_t custom_key(uint64_t addr, uint32_t pool)
{
	return addr | (uint64_t)pool << POOL_SHIFT;
}

/* Events of p may be missing from t (common axis) on: so may those of
 * the children already seeded from it at or after t, from their fork
 * (they may hold a block its lost free ended before). */
static void lose_from(struct replay *r, struct proc *p, uint64_t t)
{
	uint64_t own = t > p->tr->shift ? t - p->tr->shift : 0;  /* its own axis */
	if (own < p->tr->t_loss)
		p->tr->t_loss = own;
	for (size_t k = 0; k < r->next_fork; k++)
		if (r->forks[k].parent == p->index && r->forks[k].t >= t)
			lose_from(r, &r->procs[r->forks[k].child], r->forks[k].t);
}

/* Block id was allocated again while live: its free is not in the trace,
 * an event lost at some instant since its allocation, so answers from
 * its bucket's start on say that events may be missing (t_loss). */
static void count_missed(struct replay *r, struct proc *p, uint64_t id)
{
	size_t lo = 0, hi = p->nbids;      /* the last bucket starting at or before id */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->bids[mid].id <= id)
			lo = mid;
		else
			hi = mid;
	}
	lose_from(r, p, p->nbids ? p->bids[lo].t : 0);
	p->ps->missed_frees++;
	r->tot->missed_frees++;
}

/* A free that matched no block: counted as a heap free's would be. */
static void count_unmatched(struct replay *r, struct proc *p, uint64_t t)
{
	/* before a keyframe's window, the block's allocation may have been
	 * overwritten: expected, not counted */
	if (p->settling)
		return;
	if (p->inherit_unknown) {
		p->ps->inherited_frees++;
		r->tot->inherited_frees++;
	} else if (p->attached) {
		p->ps->frees_before_attach++;
		r->tot->frees_before_attach++;
	} else if (t >= p->t_unseen) {
		p->ps->unknown_frees++;
	} else {
		p->ps->unmatched_frees++;
		r->tot->unmatched_frees++;
	}
}

/* The block entry e names, if it is still live. */
static struct imp_live *entry_live(struct proc *p, const struct pool_entry *e)
{
	struct imp_live *l = imp_live_find(&p->custom, e->key);
	return l && l->id == e->id ? l : NULL;
}

/* Drops the entries of ended blocks from list g. */
static void compact(struct proc *p, struct pool_list *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->n; i++)
		if (entry_live(p, &g->e[i]))
			g->e[n++] = g->e[i];
	g->n = n;
}

/* Block l (live in p->custom) at the end of its pool's list; 0 or -1 (no
 * memory). */
static int pool_append(struct proc *p, const struct imp_live *l)
{
	size_t pool = (size_t)(l->addr >> POOL_SHIFT);
	if (!pool)
		return 0;           /* rec_alloc's blocks: no pool to destroy */
	if (pool >= p->npools) {
		struct pool_list *more = realloc(p->pools, (pool + 1) * sizeof *more);
		if (!more)
			return -1;
		memset(more + p->npools, 0, (pool + 1 - p->npools) * sizeof *more);
		p->pools = more;
		p->npools = pool + 1;
	}
	struct pool_list *g = &p->pools[pool];
	if (g->n == g->cap && g->n > 2 * g->live + POOL_COMPACT_SLACK)
		compact(p, g);
	if (imp_grow(&g->e, &g->cap, g->n, sizeof *g->e))
		return -1;
	g->e[g->n++] = (struct pool_entry){ .id = l->id, .key = l->addr };
	g->live++;
	return 0;
}

/* A custom block into p's live set and its pool's list. */
static int insert_custom(struct proc *p, const struct imp_live *l)
{
	if (imp_live_insert(&p->custom, l))
		return -1;
	if (pool_append(p, l)) {
		imp_live_erase(&p->custom, imp_live_find(&p->custom, l->addr));
		return -1;
	}
	return 0;
}

static int end_custom(struct replay *r, struct proc *p, struct imp_live *l, uint64_t t)
{
	if (end_row(r, p, l->id, l->size, l->stack, t, false))
		return -1;
	size_t pool = (size_t)(l->addr >> POOL_SHIFT);
	if (pool && pool < p->npools)
		p->pools[pool].live--;
	imp_live_erase(&p->custom, l);
	return 0;
}

/* Every live block of pool ends at t, in allocation order. */
static int destroy_pool(struct replay *r, struct proc *p, uint32_t pool, uint64_t t)
{
	if (!pool || pool >= p->npools)
		return 0;
	struct pool_list *g = &p->pools[pool];
	int rc = 0;
	for (size_t i = 0; i < g->n && !rc; i++) {
		struct imp_live *l = entry_live(p, &g->e[i]);
		if (l)
			rc = end_custom(r, p, l, t);
	}
	g->n = 0;
	return rc;
}

static int custom_event(struct replay *r, struct proc *p, const struct imp_ev *ev)
{
	uint64_t key = custom_key(ev->addr, ev->pool);
	struct imp_live *l = imp_live_find(&p->custom, key);

	if (ev->region == IMP_POOL_END)
		return destroy_pool(r, p, ev->pool, ev->t);
	if (ev->region == IMP_CUSTOM_END) {
		if (!l) {
			count_unmatched(r, p, ev->t);
			return 0;
		}
		return end_custom(r, p, l, ev->t);
	}
	if (l) {                   /* its free was missed: it ends now */
		count_missed(r, p, l->id);
		if (end_custom(r, p, l, ev->t))
			return -1;
	}
	struct imp_live n = {
		.addr = key, .id = ++r->alloc_id, .size = ev->size,
		.stack = imp_stack_of(p->tr, ev->stack), .stream = ev->st->gidx,
	};
	struct imp_alloc_row row = {
		.t = ev->t, .addr = ev->addr, .size = ev->size, .stack = n.stack,
		.tid = ev->st->tid, .pid = p->pid, .from_realloc = ev->from_realloc,
		.kind = IMP_KIND_CUSTOM, .pool = ev->pool,
	};
	if (insert_custom(p, &n)) {
		imp_errf(r->e, "out of memory (%zu custom blocks)", p->custom.n);
		return -1;
	}
	return start_row(r, p, n.id, n.size, n.stack, &row);
}

static int apply(struct replay *r, struct proc *p, const struct imp_ev *ev)
{
	struct imp_stream *st = ev->st;
	struct imp_live *l = imp_live_find(&p->live, ev->addr);

	if (advance(r, p, ev->t))
		return -1;
	p->changed = true;
	p->ps->t_end = ev->t;
	if (st->t_first == IMP_NO_TIME)
		st->t_first = ev->t;
	st->t_last = ev->t;

	if (ev->region >= IMP_CUSTOM)
		return custom_event(r, p, ev);
	if (ev->region)
		return region_event(r, p, ev);
	if (ev->kind == IMP_FREE) {
		if (!l) {
			count_unmatched(r, p, ev->t);
			return 0;
		}
		return close_block(r, p, l, ev->t, l->stream == st->gidx &&
				   st->last_alloc == l->id);
	}

	if (l) {                   /* its free was missed: it ends now */
		count_missed(r, p, l->id);
		if (close_block(r, p, l, ev->t, false))
			return -1;
	}
	struct imp_live n = {
		.addr = ev->addr, .id = ++r->alloc_id, .size = ev->size,
		.stack = imp_stack_of(p->tr, ev->stack), .stream = st->gidx,
	};
	struct imp_alloc_row row = {
		.t = ev->t, .addr = ev->addr, .size = ev->size, .stack = n.stack,
		.tid = st->tid, .pid = p->pid, .from_realloc = ev->from_realloc,
	};

	if (open_block(r, p, &n, &row))
		return -1;
	st->last_alloc = n.id;
	if (!p->settling)
		note_high(p, ev->t);
	return 0;
}

/* ---- forked children's inherited blocks ----------------------------------- */
static int by_id(const void *a, const void *b)
{
	uint64_t x = (*(struct imp_live *const *)a)->id, y = (*(struct imp_live *const *)b)->id;

	return (x > y) - (x < y);
}

/* The counters of c's inherited stacks (the distinct stacks of blocks,
 * custom blocks included, and mappings, sorted; a child is seeded once). */
static int foreign_stacks(struct proc *c, struct imp_live *const *blocks, size_t n,
			  const struct region *maps, size_t nmaps)
{
	size_t k = 0, all = n + nmaps;

	c->foreign = malloc((all ? all : 1) * sizeof *c->foreign);
	if (!c->foreign)
		return -1;
	for (size_t i = 0; i < n; i++)
		c->foreign[i] = blocks[i]->stack;
	for (size_t i = 0; i < nmaps; i++)
		c->foreign[n + i] = maps[i].stack;
	qsort(c->foreign, all, sizeof *c->foreign, by_u32);
	for (size_t i = 0; i < all; i++)
		if (!k || c->foreign[k - 1] != c->foreign[i])
			c->foreign[k++] = c->foreign[i];
	c->nforeign = k;
	c->fss = calloc(k ? k : 1, sizeof *c->fss);
	return c->fss ? 0 : -1;
}

/* Appends the live entries of t to blocks. */
static size_t live_entries(const struct imp_livetab *t, struct imp_live **blocks, size_t n)
{
	for (size_t k = 0; k < t->cap; k++)
		if (t->tab[k].id)
			blocks[n++] = &t->tab[k];
	return n;
}

/* Child f->child gets its parent's live set, as it is now (the fork's
 * instant: the merge is past every event before it), in the order the
 * parent allocated it, its heap blocks then its custom blocks (the same
 * memory, the same pools: the child's trace names them again), then its
 * parent's anonymous mappings (a fork copies them too; the child's own
 * munmap of one then cuts it as any other). */
static int seed(struct replay *r, const struct fork *f)
{
	struct proc *pp = &r->procs[f->parent], *c = &r->procs[f->child];
	const struct imp_livetab *pt = &pp->live;
	size_t all = pt->n + pp->custom.n;
	struct imp_live **blocks = malloc((all ? all : 1) * sizeof *blocks);
	size_t n = 0, nheap;
	int rc = -1;

	if (!blocks)
		goto nomem;
	nheap = n = live_entries(pt, blocks, 0);
	n = live_entries(&pp->custom, blocks, n);
	qsort(blocks, nheap, sizeof *blocks, by_id);
	qsort(blocks + nheap, n - nheap, sizeof *blocks, by_id);
	if (foreign_stacks(c, blocks, n, pp->maps, pp->nmaps))
		goto nomem;
	r->now = f->t;
	if (advance(r, c, f->t))
		goto out;
	c->changed = true;
	for (size_t i = 0; i < n; i++) {
		bool custom = i >= nheap;
		struct imp_live l = {
			.addr = blocks[i]->addr, .id = ++r->alloc_id, .size = blocks[i]->size,
			.stack = blocks[i]->stack, .stream = NO_STREAM,
		};
		struct imp_alloc_row row = {
			.t = f->t, .addr = l.addr, .size = l.size, .stack = l.stack,
			.tid = c->tr->hdr->pid, .pid = c->pid,
		};

		if (custom) {
			row.addr = l.addr & ((UINT64_C(1) << POOL_SHIFT) - 1);
			row.kind = IMP_KIND_CUSTOM;
			row.pool = (uint32_t)(l.addr >> POOL_SHIFT);
			if (insert_custom(c, &l))
				goto nomem;
			if (start_row(r, c, l.id, l.size, l.stack, &row))
				goto out;
		} else if (open_block(r, c, &l, &row)) {
			goto out;
		}
		c->ps->inherited++;
		r->tot->inherited++;
	}
	for (size_t i = 0; i < pp->nmaps; i++) {     /* sorted: each goes last */
		struct region g = pp->maps[i];
		g.tid = c->tr->hdr->pid;
		if (open_region(r, c, c->nmaps, g, f->t, false))
			goto out;
		c->ps->inherited++;
		r->tot->inherited++;
	}
	note_high(c, f->t);
	rc = 0;
	goto out;
nomem:
	imp_errf(r->e, "out of memory (a forked child's %zu inherited blocks)", all);
out:
	free(blocks);
	return rc;
}

/* Seeds the children forked before t. */
static int seed_before(struct replay *r, uint64_t t)
{
	for (; r->next_fork < r->nforks && r->forks[r->next_fork].t < t; r->next_fork++)
		if (seed(r, &r->forks[r->next_fork]))
			return -1;
	return 0;
}

/* The next fork's instant, IMP_NO_TIME if none. */
static uint64_t next_fork(const struct replay *r)
{
	return r->next_fork < r->nforks ? r->forks[r->next_fork].t : IMP_NO_TIME;
}

static int by_fork_t(const void *a, const void *b)
{
	const struct fork *x = a, *y = b;

	return (x->t > y->t) - (x->t < y->t);
}

/* The children to seed (run.c decided which), by time. */
static int plan_forks(struct replay *r, struct imp_trace *tr, size_t ntr)
{
	for (size_t t = 0; t < ntr; t++) {
		r->procs[t].inherit_unknown = tr[t].inherited == IMP_INHERIT_UNKNOWN;
		if (tr[t].inherited != IMP_INHERIT_SEEDED)
			continue;
		if (imp_grow(&r->forks, &r->capforks, r->nforks, sizeof *r->forks))
			return -1;
		r->forks[r->nforks++] = (struct fork){
			.t = tr[t].fork_at, .parent = (uint32_t)tr[t].parent, .child = (uint32_t)t,
		};
	}
	if (r->nforks)             /* qsort's base must not be NULL */
		qsort(r->forks, r->nforks, sizeof *r->forks, by_fork_t);
	return 0;
}

/* ---- checkpoints ---------------------------------------------------------- */
/* The checkpoints row of one stack, if it ever allocated. */
static int put_state(struct replay *r, uint32_t stack, const struct stack_state *s)
{
	struct ckpt_rec c = {
		.ckpt = r->ckpt_id, .stack = stack,
		.live_bytes = s->live_bytes, .live_objects = s->live_objects,
		.alloc_bytes = s->alloc_bytes, .alloc_objects = s->alloc_objects,
	};

	if (!s->alloc_objects)
		return 0;
	if (put_ckpt(r, &c))
		return -1;
	r->tot->checkpoint_rows++;
	return 0;
}

static int checkpoint(struct replay *r, struct proc *procs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct proc *p = &procs[i];

		if (!p->changed)
			continue;
		p->changed = false;
		r->ckpt_id++;
		if (imp_grow(&r->ci, &r->capci, r->nci, sizeof *r->ci)) {
			imp_errf(r->e, "out of memory");
			return -1;
		}
		r->ci[r->nci++] = (struct ckpt_index_row){
			.id = r->ckpt_id, .pid = p->pid, .t = r->now,
			.alloc_id = r->alloc_id, .free_id = r->free_id,
		};
		for (uint32_t k = 0; k < p->tr->db_count; k++)
			if (put_state(r, p->tr->db_first + k, &p->ss[k]))
				return -1;
		for (size_t k = 0; k < p->nforeign; k++)
			if (put_state(r, p->foreign[k], &p->fss[k]))
				return -1;
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

/* ---- after pass 2: the rows that waited ---------------------------------- */
static int next_ckpt(void *ctx, int64_t *v, uint32_t *nulls)
{
	struct replay *r = ctx;
	struct ckpt_rec c = {0};

	(void)nulls;
	if (r->read_id == r->tot->checkpoint_rows)
		return 0;
	if (get_ckpt(r, &c)) {
		r->io_failed = true;
		return -1;
	}
	r->read_id++;
	v[0] = (int64_t)c.ckpt;
	v[1] = (int64_t)c.stack;
	v[2] = c.live_bytes;
	v[3] = c.live_objects;
	v[4] = (int64_t)c.alloc_bytes;
	v[5] = (int64_t)c.alloc_objects;
	return 1;
}

/* After pass 2, with the inserter gone: everything else, in order. */
static int write_rows(struct replay *r)
{
	for (size_t i = 0; i < r->ntl; i++) {
		const struct tl_row *t = &r->tl[i];

		if (imp_db_insert(r->db, "INSERT INTO timeline VALUES(?,?,?,?,?,?,?)",
				  "uuiiuuu", (uint64_t)t->pid, t->t, t->live_bytes,
				  t->live_objects, t->max, t->allocs, t->frees))
			return db_err(r);
	}
	for (size_t i = 0; i < r->nci; i++) {
		const struct ckpt_index_row *c = &r->ci[i];

		if (imp_db_insert(r->db, "INSERT INTO checkpoint_index "
				  "VALUES(?,?,?,?,?)", "uuuuu", c->id,
				  (uint64_t)c->pid, c->t, c->alloc_id, c->free_id))
			return db_err(r);
	}
	if (imp_spill_rewind(&r->ckpts))
		return io_err(r, "write");
	r->read_id = 0;
	if (imp_db_bulk(r->db, "INSERT INTO checkpoints SELECT c0, c1, c2, c3, "
			"c4, c5 FROM imp_bulk", next_ckpt, r))
		return r->io_failed ? -1 : db_err(r);
	return 0;
}

/* After the last event: the allocations rows still waiting for a free. */
static int end_sink(struct replay *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct imp_livetab *t = &r->procs[i].live;

		for (size_t k = 0; k < t->cap; k++)
			if (t->tab[k].id && imp_sink_unfreed(r->sink, t->tab[k].id))
				return -1;
		for (size_t k = 0; k < r->procs[i].nmaps; k++)
			if (imp_sink_unfreed(r->sink, r->procs[i].maps[k].id))
				return -1;
		for (size_t k = 0; k < r->procs[i].custom.cap; k++)
			if (r->procs[i].custom.tab[k].id &&
			    imp_sink_unfreed(r->sink, r->procs[i].custom.tab[k].id))
				return -1;
	}
	return imp_sink_end(r->sink);
}

static int setup(struct replay *r, struct imp_trace *tr, size_t ntr,
		 struct imp_proc_stats *ps)
{
	uint64_t nstreams = 0;
	uint32_t g = 0;

	for (size_t t = 0; t < ntr; t++) {
		struct proc *p = &r->procs[t];

		nstreams += tr[t].nstreams;
		p->tr = &tr[t];
		p->window = tr[t].keyed ? tr[t].window + tr[t].shift : 0;
		p->t_unseen = IMP_NO_TIME;
		for (size_t k = 0; k < tr[t].nmarks; k++)
			if ((!strcmp(tr[t].marks[k].label, TF_MARK_STOP) ||
			     !strcmp(tr[t].marks[k].label, TF_MARK_UNROUTED)) &&
			    tr[t].marks[k].t + tr[t].shift < p->t_unseen)
				p->t_unseen = tr[t].marks[k].t + tr[t].shift;
		p->attached = tr[t].attach_t != IMP_NO_TIME;
		p->t_cut = tr[t].t_detach == IMP_NO_TIME ? IMP_NO_TIME : tr[t].t_detach + tr[t].shift;
		p->index = (uint32_t)t;
		p->pid = tr[t].pid;
		p->ps = &ps[t];
		p->ss = calloc(tr[t].db_count ? tr[t].db_count : 1, sizeof *p->ss);
		if (!p->ss || imp_live_init(&p->live) || imp_live_init(&p->custom))
			goto nomem;
	}
	r->nprocs = ntr;
	r->nstreams = nstreams;
	r->proc_of = calloc(nstreams ? nstreams : 1, sizeof *r->proc_of);
	if (!r->proc_of || plan_forks(r, tr, ntr))
		goto nomem;
	for (size_t t = 0; t < ntr; t++)
		for (size_t s = 0; s < tr[t].nstreams; s++) {
			tr[t].streams[s].gidx = g;
			tr[t].streams[s].last_alloc = 0;
			r->proc_of[g++] = (uint32_t)t;
		}
	if (imp_spill_open(&r->ckpts, imp_db_dir(r->db)))
		return io_err(r, "create");
	/* The placeholder t_free: no event is later (events before a
	 * keyframe's window move to its start, which may be past t_max). */
	uint64_t t_last = r->o->duration - 1;
	for (size_t t = 0; t < ntr; t++)
		if (r->procs[t].window > t_last)
			t_last = r->procs[t].window;
	if (imp_sink_open(&r->sink, r->db, t_last, r->e))
		return -1;
	return 0;
nomem:
	imp_errf(r->e, "out of memory");
	return -1;
}

static void teardown(struct replay *r, size_t ntr)
{
	imp_sink_close(r->sink);
	imp_spill_close(&r->ckpts);
	free(r->tl);
	free(r->ci);
	free(r->forks);
	for (size_t t = 0; t < ntr; t++) {
		imp_live_free(&r->procs[t].live);
		imp_live_free(&r->procs[t].custom);
		for (size_t g = 0; g < r->procs[t].npools; g++)
			free(r->procs[t].pools[g].e);
		free(r->procs[t].pools);
		free(r->procs[t].ss);
		free(r->procs[t].bids);
		free(r->procs[t].foreign);
		free(r->procs[t].fss);
		free(r->procs[t].maps);
	}
	free(r->procs);
	free(r->proc_of);
}

int imp_replay(struct imp_db *db, struct imp_trace *tr, size_t ntr,
	       const struct imp_replay_opts *o, struct imp_proc_stats *ps,
	       struct imp_totals *tot, struct imp_err *e)
{
	struct replay r = {
		.db = db, .o = o, .tot = tot, .e = e,
		.ckpts.fd = -1,
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
		struct imp_stream *nst;
		uint64_t naddr;

		if (seed_before(&r, ev.t))
			goto out;
		if (ev.t_stamp > p->t_cut) {
			p->tr->after_detach++;
			continue;
		}

		/* The table lookup is a cache miss: start the next one now. */
		if (imp_merge_peek_addr(m, &naddr, &nst)) {
			struct imp_livetab *t = &r.procs[r.proc_of[nst->gidx]].live;

			__builtin_prefetch(&t->tab[imp_live_slot(t, naddr)]);
		}
		clamp_to_window(p, &ev);
		r.now = ev.t;
		if (apply(&r, p, &ev))
			goto out;
		/* A checkpoint must hold every event of its instant (and
		 * the blocks of a child forked then). */
		if (r.since_ckpt >= due && imp_merge_peek(m) > r.now && next_fork(&r) > r.now) {
			if (checkpoint(&r, r.procs, ntr))
				goto out;
			due = ckpt_due(&r, r.procs, ntr);
		}
		if (o->progress && !(imp_merge_records(m) % PROGRESS_EVERY))
			o->progress(o->progress_ctx, imp_merge_records(m),
				    o->total_events);
	}
	if (got < 0 || seed_before(&r, IMP_NO_TIME))
		goto out;
	tot->events = imp_merge_records(m);
	tot->clamped = imp_merge_clamped(m);
	for (size_t t = 0; t < ntr; t++) {
		struct proc *p = &r.procs[t];

		if (p->settling) {
			p->settling = false;
			note_high(p, p->window);
		}
		if (p->started &&
		    bucket_row(&r, p, p->bucket, p->b_max, p->b_allocs, p->b_frees))
			goto out;
	}
	if (checkpoint(&r, r.procs, ntr) || end_sink(&r) || write_rows(&r))
		goto out;
	rc = 0;
out:
	imp_merge_close(m);
	teardown(&r, ntr);
	return rc;
}
