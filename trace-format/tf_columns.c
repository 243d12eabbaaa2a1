/*
 * tf_columns.c - the record encoding of event segments (ALLOC, FREE,
 * REALLOC): each field goes to its own column as a small number, coded
 * against a model of what a program and a glibc-like allocator do (times as
 * deltas, per pair of stacks when that pays, freed blocks handed back, call
 * sites repeating their size), and
 * each column is then entropy coded (tf_entropy.c). FORMAT.md "Event
 * segments" is the specification.
 *
 * The model (struct tf_model) is updated by the encoder and the decoder
 * through the same functions, which is what keeps them in step. It is reset
 * at every segment so each segment decodes on its own.
 *
 * The encoder runs on the recorder's writer threads: it must never allocate
 * (tf_colenc_new does, once, with mmap only: the recorder may make one on a
 * writer thread, where malloc could wait for a lock an application thread
 * holds while it waits for the writer) and never perform I/O.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "tf_internal.h"

#define TF_MTF_N 16          /* move-to-front entries for sizes and stacks */
#define TF_CLS_N 72          /* per-size-class freed lists: chunks up to 1136 B */
#define TF_CLS_DEPTH 8       /* recently freed blocks kept per class */
#define TF_FREED_N 8         /* recently freed blocks of any size */
#define TF_ALIGN_SHIFT 4     /* malloc results are 16-aligned on x86-64 */

/* Allocation address codes: [0, CLS_DEPTH) class hit, then FREED_N global
 * hits, then the raw escape, then from TF_ACODE_DELTA: twice an aligned
 * delta from the prediction, or twice a free's distance back plus one. */
#define TF_ACODE_FREED TF_CLS_DEPTH
#define TF_ACODE_RAW (TF_CLS_DEPTH + TF_FREED_N)
#define TF_ACODE_DELTA (TF_ACODE_RAW + 1)
/* Stack codes: [0, MTF_N) hit; MTF_N + 1 + id otherwise. */
#define TF_MCODE_VALUE (TF_MTF_N + 1)
/* Size codes: 0 the stack's previous size, [1, MTF_N] hit, then the raw
 * escape, then the size itself plus TF_SCODE_VALUE. */
#define TF_SCODE_MTF 1
#define TF_SCODE_RAW (TF_SCODE_MTF + TF_MTF_N)
#define TF_SCODE_VALUE (TF_SCODE_RAW + 1)
/* Fn codes are 0 for the stack's previous fn, else fn + 1. */
#define TF_CTX_BITS 12       /* per-stack contexts, direct-mapped by stack id */
#define TF_TCTX_BITS 12      /* time contexts, direct-mapped by stack pair */

#define TF_SEG_RECS (TF_SEG_EVENTS + 1) /* the writer may add a REALLOC half */
#define TF_HASH_BITS 17                 /* 2^17 slots: about half used at most */
#define TF_HASH_MIN_BITS 9              /* the fewest slots a segment uses: 2 pages */
#define TF_PAGE 4096                    /* the smallest page there is */
#define TF_PREFETCH 8                   /* events ahead whose slots are fetched */

struct tf_ctx {               /* what the latest allocation at a stack did */
	uint64_t size;
	uint32_t stack;
	uint32_t gen;            /* valid if == tf_model.gen */
	uint8_t fn;
};

/* The time from one record to the next mostly depends on the code that runs
 * in between, which the stacks of the two records identify: a time context
 * remembers the latest delta seen between a given pair of stacks. */
struct tf_tctx {
	uint64_t dt;
	uint32_t prev_stack, stack;
	uint32_t gen;
};

struct tf_model {
	uint64_t prev_t;
	uint32_t gen;            /* segment number, for ctx validity */
	uint32_t prev_stack;     /* stack of the previous record, 0 if none */
	struct tf_ctx ctx[1u << TF_CTX_BITS];
	struct tf_tctx tctx[1u << TF_TCTX_BITS];
	uint64_t sizes[TF_MTF_N];
	uint64_t stacks[TF_MTF_N];
	uint64_t cls[TF_CLS_N][TF_CLS_DEPTH];
	uint8_t cls_n[TF_CLS_N];
	uint64_t freed[TF_FREED_N];
	uint8_t freed_n;
	uint64_t last_addr, last_size;   /* latest allocation of the segment */
	uint64_t *alloc_addr;            /* allocations of the segment, in order */
	uint64_t *alloc_size;
	size_t nalloc;
	uint64_t *free_addr;             /* frees of the segment, in order */
	size_t nfree;
};

static void model_reset(struct tf_model *m)
{
	if (++m->gen == 0) {     /* wrapped: old entries would look valid */
		memset(m->ctx, 0, sizeof m->ctx);
		memset(m->tctx, 0, sizeof m->tctx);
		m->gen = 1;
	}
	m->prev_t = 0;
	m->prev_stack = 0;
	memset(m->sizes, 0, sizeof m->sizes);
	memset(m->stacks, 0, sizeof m->stacks);
	memset(m->cls_n, 0, sizeof m->cls_n);
	m->freed_n = 0;
	m->last_addr = m->last_size = 0;
	m->nalloc = 0;
	m->nfree = 0;
}

/* The context of a stack: a call site usually repeats its fn and size.
 * An unused entry predicts malloc of 0 bytes. */
static struct tf_ctx *ctx_of(struct tf_model *m, uint32_t stack)
{
	struct tf_ctx *c = &m->ctx[(stack * 0x9e3779b1u) >> (32 - TF_CTX_BITS)];
	if (c->gen != m->gen || c->stack != stack)
		*c = (struct tf_ctx){ .stack = stack, .gen = m->gen, .fn = TF_FN_MALLOC };
	return c;
}

/* The time context of the pair (previous record's stack, this record's
 * stack); a fresh one predicts a delta of 0. */
static struct tf_tctx *tctx_of(struct tf_model *m, uint32_t stack)
{
	uint32_t h = (m->prev_stack * 0x9e3779b1u) ^ (stack * 0x85ebca6bu);
	struct tf_tctx *c = &m->tctx[(h * 0xc2b2ae35u) >> (32 - TF_TCTX_BITS)];
	if (c->gen != m->gen || c->prev_stack != m->prev_stack || c->stack != stack)
		*c = (struct tf_tctx){ .prev_stack = m->prev_stack, .stack = stack,
				       .gen = m->gen };
	return c;
}

/* glibc's chunk size for a request: size + 8 rounded up to 16, at least 32. */
static uint64_t chunk_of(uint64_t size)
{
	uint64_t c = (size + 8 + 15) & ~(uint64_t)15;
	return c < 32 ? 32 : c;
}

static unsigned class_of(uint64_t size)
{
	if (size > (uint64_t)TF_CLS_N << TF_ALIGN_SHIFT)
		return TF_CLS_N - 1;
	uint64_t c = chunk_of(size) >> TF_ALIGN_SHIFT;
	return c < TF_CLS_N ? (unsigned)c : TF_CLS_N - 1;
}

/* Moves entry k (or, for k == n, the new value v) to the front. */
static void mtf_use(uint64_t *t, unsigned k, uint64_t v)
{
	if (k >= TF_MTF_N)
		k = TF_MTF_N - 1;
	else
		v = t[k];
	for (; k > 0; k--)
		t[k] = t[k - 1];
	t[0] = v;
}

static unsigned mtf_find(const uint64_t *t, uint64_t v)
{
	for (unsigned k = 0; k < TF_MTF_N; k++)
		if (t[k] == v)
			return k;
	return TF_MTF_N;
}

/* Removes addr from a most-recent-first list of n entries. */
static void list_remove(uint64_t *t, uint8_t *n, uint64_t addr)
{
	for (unsigned k = 0; k < *n; k++)
		if (t[k] == addr) {
			for ((*n)--; k < *n; k++)
				t[k] = t[k + 1];
			return;
		}
}

static void list_push(uint64_t *t, uint8_t *n, unsigned cap, uint64_t addr)
{
	unsigned keep = *n < cap ? *n : cap - 1;
	*n = (uint8_t)(keep + 1);
	for (; keep > 0; keep--)
		t[keep] = t[keep - 1];
	t[0] = addr;
}

/* carved: the block was not a recently freed one (coded by distance), so
 * the next such block is predicted to follow it. */
static void model_alloc(struct tf_model *m, uint64_t addr, uint64_t size,
			int carved)
{
	unsigned c = class_of(size);
	list_remove(m->cls[c], &m->cls_n[c], addr);
	list_remove(m->freed, &m->freed_n, addr);
	m->alloc_addr[m->nalloc] = addr;
	m->alloc_size[m->nalloc] = size;
	m->nalloc++;
	if (carved) {
		m->last_addr = addr;
		m->last_size = size;
	}
}

/* ref: index in alloc_addr of the freed block, or SIZE_MAX if unknown. */
static void model_free(struct tf_model *m, uint64_t addr, size_t ref)
{
	if (ref != SIZE_MAX) {
		unsigned c = class_of(m->alloc_size[ref]);
		list_push(m->cls[c], &m->cls_n[c], TF_CLS_DEPTH, addr);
	}
	list_push(m->freed, &m->freed_n, TF_FREED_N, addr);
	m->free_addr[m->nfree++] = addr;
}

#define TF_MODEL_WORDS 3     /* alloc_addr, alloc_size, free_addr: words per record */

/* The history arrays of m in a, room for cap records. */
static void model_place(struct tf_model *m, uint64_t *a, size_t cap)
{
	m->alloc_addr = a;
	m->alloc_size = a + cap;
	m->free_addr = a + 2 * cap;
}

/* Gives m room for the history of `cap` records; -1 if out of memory. */
static int model_arrays(struct tf_model *m, size_t cap)
{
	uint64_t *a = realloc(m->alloc_addr, TF_MODEL_WORDS * cap * sizeof *a);
	if (!a)
		return -1;
	model_place(m, a, cap);
	return 0;
}

static uint64_t predict_addr(const struct tf_model *m)
{
	return m->last_addr + chunk_of(m->last_size);
}

/* ======================================================================
 * encoder
 * ==================================================================== */

/* Values per record a column can hold at most: RAW takes a REALLOC's old
 * address, new address and size. */
static const uint8_t col_per_rec[TF_COL_COUNT] = {
	[TF_COL_KIND] = 1, [TF_COL_DT] = 1, [TF_COL_FN] = 1, [TF_COL_SIZE] = 1,
	[TF_COL_STACK] = 1, [TF_COL_ADDR] = 1, [TF_COL_FADDR] = 1,
	[TF_COL_DT2] = 1, [TF_COL_RAW] = 3, [TF_COL_DTC] = 1, [TF_COL_POOL] = 1,
};

#define TF_COL_METHOD_HUFFMAN 1 /* the only column coding of version 1 */

struct tf_slot {            /* address -> index of its latest alloc / free */
	uint64_t addr;
	uint32_t idx;
	uint32_t gen;           /* slot is empty unless gen == tf_colenc.gen */
};

struct tf_colenc {
	struct tf_model m;
	uint64_t *val[TF_COL_COUNT];   /* column values before entropy coding */
	size_t n[TF_COL_COUNT];
	struct tf_slot *allocs;  /* address -> index in m.alloc_addr */
	struct tf_slot *frees;   /* address -> index in m.free_addr */
	unsigned bits;           /* this segment's tables: their first 2^bits slots */
	size_t ready;            /* bytes of each table with their pages in place */
	uint32_t gen;
};

/* The tables are read before they are written: a read of an untouched page
 * maps the shared zero page, and the first write after it then copies the
 * page and flushes the TLB of every CPU the traced program runs on (an
 * interrupt to each of its threads). So every page of them is put in place
 * by a write before any read: the struct's at once (tf_map(.., 1)), the
 * address tables' as segments need them (slots_ready; populating their
 * 4 MiB at once took ~3 ms of every traced program's start, most of it for
 * nothing in a program that records little). calloc, or malloc and memset
 * (which compilers turn into calloc), would leave fresh mmap'd pages
 * untouched. Memory always written before it is read gets its pages as
 * they are used (tf_map(.., 0)). */

#define TF_ENC_SLOTS_BYTES (((size_t)2 << TF_HASH_BITS) * sizeof(struct tf_slot))
#define TF_ENC_HISTORY_BYTES (TF_MODEL_WORDS * TF_SEG_RECS * sizeof(uint64_t))

static size_t cols_bytes(void)
{
	size_t total = 0;
	for (int c = 1; c < TF_COL_COUNT; c++)
		total += (size_t)col_per_rec[c] * TF_SEG_RECS;
	return total * sizeof(uint64_t);
}

struct tf_colenc *tf_colenc_new(void)
{
	struct tf_colenc *e = tf_map(sizeof *e, 1);
	if (!e)
		return NULL;
	uint64_t *cols = tf_map(cols_bytes(), 0);
	uint64_t *history = tf_map(TF_ENC_HISTORY_BYTES, 0);
	e->allocs = tf_map(TF_ENC_SLOTS_BYTES, 0);
	e->val[1] = cols;
	if (history)
		model_place(&e->m, history, TF_SEG_RECS);
	if (!cols || !history || !e->allocs) {
		tf_colenc_free(e);  /* unmaps what was mapped */
		return NULL;
	}
	e->frees = e->allocs + ((size_t)1 << TF_HASH_BITS);
	for (int c = 1; c < TF_COL_COUNT; c++) {
		e->val[c] = cols;
		cols += (size_t)col_per_rec[c] * TF_SEG_RECS;
	}
	return e;
}

void tf_colenc_free(struct tf_colenc *e)
{
	if (!e)
		return;
	if (e->val[1])
		munmap(e->val[1], cols_bytes());
	if (e->m.alloc_addr)
		munmap(e->m.alloc_addr, TF_ENC_HISTORY_BYTES);
	if (e->allocs)
		munmap(e->allocs, TF_ENC_SLOTS_BYTES);
	munmap(e, sizeof *e);
}

size_t tf_colenc_bound(size_t nrec)
{
	size_t b = 0;
	for (int c = 1; c < TF_COL_COUNT; c++)
		b += 2 * TF_VARINT_MAX + 1 + tf_ent_bound(col_per_rec[c] * nrec);
	return b;
}

/* The address tables' size for a segment of n records: twice n slots or
 * more (short probes), from 2^TF_HASH_MIN_BITS up to 2^TF_HASH_BITS (a
 * full segment: 2 slots short of twice, still about half used). */
static unsigned slot_bits(size_t n)
{
	unsigned b = TF_HASH_MIN_BITS;
	while (b < TF_HASH_BITS && ((size_t)1 << b) < 2 * n)
		b++;
	return b;
}

/* Puts in place, each by a write, the pages of both tables' first 2^bits
 * slots (never read before: see above tf_colenc_new). */
static void slots_ready(struct tf_colenc *e, unsigned bits)
{
	size_t want = ((size_t)1 << bits) * sizeof(struct tf_slot);
	for (size_t off = e->ready; off < want; off += TF_PAGE) {
		((volatile char *)e->allocs)[off] = 0;
		((volatile char *)e->frees)[off] = 0;
	}
	if (want > e->ready)
		e->ready = want;
}

static size_t hash_slot(uint64_t addr, unsigned bits)
{
	return (size_t)(((addr >> TF_ALIGN_SHIFT) * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static void hash_put(struct tf_slot *t, unsigned bits, uint32_t gen, uint64_t addr, size_t idx)
{
	size_t mask = ((size_t)1 << bits) - 1;
	for (size_t s = hash_slot(addr, bits);; s = (s + 1) & mask) {
		struct tf_slot *h = &t[s];
		if (h->gen != gen || h->addr == addr) {
			*h = (struct tf_slot){ addr, (uint32_t)idx, gen };
			return;
		}
	}
}

static size_t hash_get(const struct tf_slot *t, unsigned bits, uint32_t gen, uint64_t addr)
{
	size_t mask = ((size_t)1 << bits) - 1;
	for (size_t s = hash_slot(addr, bits);; s = (s + 1) & mask) {
		const struct tf_slot *h = &t[s];
		if (h->gen != gen)
			return SIZE_MAX;
		if (h->addr == addr)
			return h->idx;
	}
}

static inline void put_v(struct tf_colenc *e, int col, uint64_t v)
{
	e->val[col][e->n[col]++] = v;
}

static inline void put_raw(struct tf_colenc *e, uint64_t v)
{
	put_v(e, TF_COL_RAW, v);
}

/* Times of a stream never decrease, so a delta is coded unsigned (modulo
 * 2^64: a time that goes back costs a long code, nothing more). */
static void enc_time(struct tf_colenc *e, int col, uint64_t t, uint64_t base)
{
	put_v(e, col, t - base);
}

/* The time of a record (t against the previous record) goes to both DT and
 * DTC; the segment keeps whichever column codes smaller. */
static void enc_record_time(struct tf_colenc *e, uint64_t t, uint32_t stack)
{
	struct tf_model *m = &e->m;
	struct tf_tctx *c = tctx_of(m, stack);
	uint64_t dt = t - m->prev_t;
	put_v(e, TF_COL_DTC, tf_zigzag((int64_t)(dt - c->dt)));
	c->dt = dt;
	m->prev_stack = stack;
	enc_time(e, TF_COL_DT, t, m->prev_t);
}

static void enc_alloc_addr(struct tf_colenc *e, uint64_t addr, uint64_t size)
{
	struct tf_model *m = &e->m;
	unsigned c = class_of(size);
	for (unsigned k = 0; k < m->cls_n[c]; k++)
		if (m->cls[c][k] == addr) {
			put_v(e, TF_COL_ADDR, k);
			goto done;
		}
	for (unsigned k = 0; k < m->freed_n; k++)
		if (m->freed[k] == addr) {
			put_v(e, TF_COL_ADDR, TF_ACODE_FREED + k);
			goto done;
		}
	/* A block carved from a freed region often starts where an earlier
	 * free of the segment was: name that free, or else the distance from
	 * the prediction, whichever is the smaller number. */
	uint64_t d = addr - predict_addr(m), code = UINT64_MAX;
	size_t ref = hash_get(e->frees, e->bits, e->gen, addr);
	if (!(d & ((1u << TF_ALIGN_SHIFT) - 1)))
		code = 2 * tf_zigzag((int64_t)d >> TF_ALIGN_SHIFT);
	if (ref != SIZE_MAX && 2 * (uint64_t)(m->nfree - 1 - ref) + 1 < code)
		code = 2 * (uint64_t)(m->nfree - 1 - ref) + 1;
	if (code == UINT64_MAX) {
		put_v(e, TF_COL_ADDR, TF_ACODE_RAW);
		put_raw(e, addr);
	} else {
		put_v(e, TF_COL_ADDR, TF_ACODE_DELTA + code);
	}
	hash_put(e->allocs, e->bits, e->gen, addr, m->nalloc);
	model_alloc(m, addr, size, 1);
	return;
done:
	hash_put(e->allocs, e->bits, e->gen, addr, m->nalloc);
	model_alloc(m, addr, size, 0);
}

static void enc_free_addr(struct tf_colenc *e, uint64_t addr)
{
	struct tf_model *m = &e->m;
	size_t ref = hash_get(e->allocs, e->bits, e->gen, addr);
	if (ref != SIZE_MAX) {
		put_v(e, TF_COL_FADDR, 2 * (uint64_t)(m->nalloc - 1 - ref));
	} else {
		uint64_t d = addr - m->last_addr;
		if (d & ((1u << TF_ALIGN_SHIFT) - 1)) {
			put_v(e, TF_COL_FADDR, 1);
			put_raw(e, addr);
		} else {
			uint64_t z = tf_zigzag((int64_t)d >> TF_ALIGN_SHIFT);
			put_v(e, TF_COL_FADDR, 2 * (z + 1) + 1);
		}
	}
	hash_put(e->frees, e->bits, e->gen, addr, m->nfree);
	model_free(m, addr, ref);
}

static void enc_stack(struct tf_colenc *e, uint32_t stack);

static void enc_size(struct tf_colenc *e, struct tf_ctx *c, uint64_t size)
{
	unsigned k = mtf_find(e->m.sizes, size);
	if (size == c->size)
		put_v(e, TF_COL_SIZE, 0);
	else if (k < TF_MTF_N)
		put_v(e, TF_COL_SIZE, TF_SCODE_MTF + k);
	else if (size > UINT64_MAX - TF_SCODE_VALUE) {
		put_v(e, TF_COL_SIZE, TF_SCODE_RAW);
		put_raw(e, size);
	} else {
		put_v(e, TF_COL_SIZE, TF_SCODE_VALUE + size);
	}
	mtf_use(e->m.sizes, k, size);
	c->size = size;
}

static void enc_fn(struct tf_colenc *e, struct tf_ctx *c, uint8_t fn)
{
	put_v(e, TF_COL_FN, fn == c->fn ? 0 : (uint64_t)fn + 1);
	c->fn = fn;
}

/* Stack, fn and size of an ALLOC or a REALLOC's new block. */
static void enc_site(struct tf_colenc *e, const struct tf_event *x)
{
	enc_stack(e, x->stack);
	struct tf_ctx *c = ctx_of(&e->m, x->stack);
	enc_fn(e, c, x->fn);
	enc_size(e, c, x->size);
}

static void enc_stack(struct tf_colenc *e, uint32_t stack)
{
	unsigned k = mtf_find(e->m.stacks, stack);
	put_v(e, TF_COL_STACK, k < TF_MTF_N ? k : TF_MCODE_VALUE + (uint64_t)stack);
	mtf_use(e->m.stacks, k, stack);
}

/* Column lengths are written as 4-byte varints (continuation bits set on
 * the first three bytes): enough for 2^28 bytes, more than a segment holds. */
#define TF_LEN_BYTES 4

static void put_fixed_varint(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < TF_LEN_BYTES; i++, v >>= 7)
		p[i] = (uint8_t)((v & 0x7f) | (i + 1 < TF_LEN_BYTES ? 0x80 : 0));
}

/* One column: tag, byte length, method, coded values. The length is
 * written after coding, in a fixed-width varint, so nothing is copied. */
static uint8_t *put_column(uint8_t *o, int tag, const uint64_t *v, size_t n,
			   const struct tf_entcode *code)
{
	o = tf_put_varint(o, (uint64_t)tag);
	uint8_t *lenp = o;
	o += TF_LEN_BYTES;
	*o++ = TF_COL_METHOD_HUFFMAN;
	o += tf_ent_write(v, n, code, o);
	put_fixed_varint(lenp, (uint64_t)(o - lenp - TF_LEN_BYTES));
	return o;
}

size_t tf_colenc_encode(struct tf_colenc *e, const struct tf_event *ev,
			size_t n, uint8_t *out, uint64_t *t_first,
			uint64_t *t_last)
{
	struct tf_model *m = &e->m;
	uint64_t tmin = UINT64_MAX, tmax = 0;

	model_reset(m);
	if (++e->gen == 0) {    /* wrapped: slots of generation 0 look live */
		memset(e->allocs, 0, e->ready);
		memset(e->frees, 0, e->ready);
		e->gen = 1;
	}
	e->bits = slot_bits(n);
	slots_ready(e, e->bits);
	memset(e->n, 0, sizeof e->n);

	for (size_t i = 0; i < n; i++) {
		const struct tf_event *x = &ev[i];
		uint64_t tend = x->t;
		/* The address tables are larger than the caches: fetch the slots
		 * a later event will probe while this one is coded. */
		if (i + TF_PREFETCH < n) {
			size_t s = hash_slot(ev[i + TF_PREFETCH].addr, e->bits);
			__builtin_prefetch(&e->allocs[s], 1);
			__builtin_prefetch(&e->frees[s], 1);
		}
		tmin = x->t < tmin ? x->t : tmin;
		switch (x->kind) {
		case TF_EV_ALLOC:
			put_v(e, TF_COL_KIND, TF_ALLOC);
			enc_record_time(e, x->t, x->stack);
			enc_site(e, x);
			enc_alloc_addr(e, x->addr, x->size);
			if (tf_fn_custom(x->fn))
				put_v(e, TF_COL_POOL, x->pool);
			break;
		case TF_EV_FREE:
			put_v(e, TF_COL_KIND, TF_FREE);
			enc_record_time(e, x->t, 0);
			enc_free_addr(e, x->addr);
			break;
		default: {  /* TF_EV_REALLOC_OLD; the writer checked the pair */
			const struct tf_event *y = &ev[++i];
			put_v(e, TF_COL_KIND, TF_REALLOC);
			enc_record_time(e, x->t, y->stack);
			enc_time(e, TF_COL_DT2, y->t, x->t);
			enc_site(e, y);
			enc_free_addr(e, x->addr);
			enc_alloc_addr(e, y->addr, y->size);
			tmin = y->t < tmin ? y->t : tmin;
			tend = y->t;
			break;
		}
		}
		tmax = x->t > tmax ? x->t : tmax;
		tmax = tend > tmax ? tend : tmax;
		m->prev_t = tend;
	}

	uint8_t *o = out;
	for (int c = 1; c < TF_COL_COUNT; c++) {
		if (!e->n[c] || c == TF_COL_DTC)
			continue;
		struct tf_entcode code, alt;
		int col = c;
		size_t size = tf_ent_plan(e->val[c], e->n[c], &code);
		/* The time column: the smaller coding (the column heads are
		 * the same size: both tags are one-byte varints). */
		if (c == TF_COL_DT && tf_ent_plan(e->val[TF_COL_DTC], e->n[TF_COL_DTC],
						  &alt) < size) {
			col = TF_COL_DTC;
			code = alt;
		}
		o = put_column(o, col, e->val[col], e->n[col], &code);
	}
	*t_first = n ? tmin : 0;
	*t_last = tmax;
	return (size_t)(o - out);
}

/* ======================================================================
 * decoder
 * ==================================================================== */

struct tf_coldec {
	struct tf_model m;
	size_t cap;              /* capacity of m.alloc_* */
	struct tf_entdec col[TF_COL_COUNT];
};

struct tf_coldec *tf_coldec_new(void)
{
	return calloc(1, sizeof(struct tf_coldec));
}

void tf_coldec_free(struct tf_coldec *d)
{
	if (!d)
		return;
	free(d->m.alloc_addr);
	free(d);
}

struct tf_dec {             /* one decode call's state */
	struct tf_model *m;
	struct tf_entdec *c;     /* the columns */
	uint8_t present[TF_COL_COUNT];
	const struct tf_segment_info *si;
	struct tf_error *err;
	uint64_t rec;            /* index of the record being decoded */
};

static int bad(struct tf_dec *d, const char *what)
{
	return tf_fail(d->err, TF_E_CORRUPT, d->si->offset,
		       "segment of stream %u: record %u: %s",
		       (uint64_t)d->si->stream, d->rec, what);
}

static int get_v(struct tf_dec *d, int col, uint64_t *v)
{
	if (!d->present[col] || tf_ent_get(&d->c[col], v) < 0)
		return bad(d, "column ends early or holds an invalid code");
	return TF_OK;
}

static int get_byte(struct tf_dec *d, int col, uint8_t *v)
{
	uint64_t x;
	int rc = get_v(d, col, &x);
	if (!rc && x > UINT8_MAX)
		return bad(d, "byte column value out of range");
	*v = (uint8_t)x;
	return rc;
}

static int get_raw(struct tf_dec *d, uint64_t *v)
{
	return get_v(d, TF_COL_RAW, v);
}

static int dec_time(struct tf_dec *d, int col, uint64_t base, uint64_t *t)
{
	uint64_t v;
	int rc = get_v(d, col, &v);
	*t = base + v;
	return rc;
}

static int dec_size(struct tf_dec *d, struct tf_ctx *c, uint64_t *size)
{
	uint64_t v;
	int rc = get_v(d, TF_COL_SIZE, &v);
	if (rc)
		return rc;
	if (v == 0)
		*size = c->size;
	else if (v < TF_SCODE_RAW)
		*size = d->m->sizes[v - TF_SCODE_MTF];
	else if (v == TF_SCODE_RAW) {
		if ((rc = get_raw(d, size)))
			return rc;
	} else {
		*size = v - TF_SCODE_VALUE;
	}
	mtf_use(d->m->sizes, mtf_find(d->m->sizes, *size), *size);
	c->size = *size;
	return TF_OK;
}

static int dec_fn(struct tf_dec *d, struct tf_ctx *c, uint8_t *fn)
{
	uint64_t v;
	int rc = get_v(d, TF_COL_FN, &v);
	if (rc)
		return rc;
	if (v > (uint64_t)UINT8_MAX + 1)
		return bad(d, "fn code out of range");
	*fn = v ? (uint8_t)(v - 1) : c->fn;
	c->fn = *fn;
	return TF_OK;
}

/* Fn and size of an ALLOC or REALLOC, against its stack's context. */
static int dec_site(struct tf_dec *d, struct tf_record *r)
{
	struct tf_ctx *c = ctx_of(d->m, r->stack);
	int rc = dec_fn(d, c, &r->fn);
	return rc ? rc : dec_size(d, c, &r->size);
}

/* The record's time, from whichever time column the segment has. */
static int dec_record_time(struct tf_dec *d, uint32_t stack, uint64_t *t)
{
	struct tf_model *m = d->m;
	struct tf_tctx *c = tctx_of(m, stack);
	int rc;
	if (d->present[TF_COL_DT]) {
		rc = dec_time(d, TF_COL_DT, m->prev_t, t);
	} else {
		uint64_t v;
		rc = get_v(d, TF_COL_DTC, &v);
		*t = m->prev_t + c->dt + (uint64_t)tf_unzigzag(v);
	}
	c->dt = *t - m->prev_t;
	m->prev_stack = stack;
	return rc;
}
static int dec_stack(struct tf_dec *d, uint32_t *stack)
{
	uint64_t v;
	int rc = get_v(d, TF_COL_STACK, &v);
	if (rc)
		return rc;
	unsigned k = v < TF_MTF_N ? (unsigned)v : TF_MTF_N;
	if (k < TF_MTF_N)
		v = d->m->stacks[k];
	else if (v < TF_MCODE_VALUE || v - TF_MCODE_VALUE > UINT32_MAX)
		return bad(d, "bad stack code");
	else
		v -= TF_MCODE_VALUE;
	mtf_use(d->m->stacks, k, v);
	*stack = (uint32_t)v;
	return TF_OK;
}

static int dec_alloc_addr(struct tf_dec *d, uint64_t size, uint64_t *addr)
{
	struct tf_model *m = d->m;
	uint64_t v;
	int rc = get_v(d, TF_COL_ADDR, &v);
	if (rc)
		return rc;
	unsigned c = class_of(size);
	if (v < TF_ACODE_FREED) {
		if (v >= m->cls_n[c])
			return bad(d, "allocation address names an empty slot");
		*addr = m->cls[c][v];
	} else if (v < TF_ACODE_RAW) {
		if (v - TF_ACODE_FREED >= m->freed_n)
			return bad(d, "allocation address names an empty slot");
		*addr = m->freed[v - TF_ACODE_FREED];
	} else if (v == TF_ACODE_RAW) {
		if ((rc = get_raw(d, addr)))
			return rc;
	} else if ((v - TF_ACODE_DELTA) & 1) {
		uint64_t back = (v - TF_ACODE_DELTA) / 2;
		if (back >= m->nfree)
			return bad(d, "allocation names a free before the segment");
		*addr = m->free_addr[m->nfree - 1 - back];
	} else {
		int64_t q = tf_unzigzag((v - TF_ACODE_DELTA) / 2);
		*addr = predict_addr(m) + ((uint64_t)q << TF_ALIGN_SHIFT);
	}
	model_alloc(m, *addr, size, v >= TF_ACODE_RAW);
	return TF_OK;
}

static int dec_free_addr(struct tf_dec *d, uint64_t *addr)
{
	struct tf_model *m = d->m;
	uint64_t v;
	size_t ref = SIZE_MAX;
	int rc = get_v(d, TF_COL_FADDR, &v);
	if (rc)
		return rc;
	if (!(v & 1)) {
		if (v / 2 >= m->nalloc)
			return bad(d, "free names an allocation before the segment");
		ref = m->nalloc - 1 - (size_t)(v / 2);
		*addr = m->alloc_addr[ref];
	} else if (v == 1) {
		if ((rc = get_raw(d, addr)))
			return rc;
	} else {
		int64_t q = tf_unzigzag(v / 2 - 1);
		*addr = m->last_addr + ((uint64_t)q << TF_ALIGN_SHIFT);
	}
	model_free(m, *addr, ref);
	return TF_OK;
}

/* A custom block's pool: a pool id fits the staging event's 16 bits. */
static int dec_pool(struct tf_dec *d, uint32_t *pool)
{
	uint64_t v;
	int rc = get_v(d, TF_COL_POOL, &v);
	if (!rc && v > TF_POOL_MAX)
		return bad(d, "pool id out of range");
	*pool = (uint32_t)v;
	return rc;
}

static int dec_record(struct tf_dec *d, struct tf_record *r, uint64_t *seq)
{
	struct tf_model *m = d->m;
	uint8_t kind = 0;
	int rc;

	if ((rc = get_byte(d, TF_COL_KIND, &kind)))
		return rc;
	/* The stack comes first: the time is coded against it. */
	if ((kind == TF_ALLOC || kind == TF_REALLOC) &&
	    (rc = dec_stack(d, &r->stack)))
		return rc;
	if ((rc = dec_record_time(d, r->stack, &r->t)))
		return rc;
	r->kind = kind;
	r->seq = (*seq)++;
	m->prev_t = r->t;
	switch (kind) {
	case TF_ALLOC:
		if ((rc = dec_site(d, r)) ||
		    (rc = dec_alloc_addr(d, r->size, &r->addr)))
			return rc;
		if (tf_fn_custom(r->fn))
			return dec_pool(d, &r->pool);
		break;
	case TF_FREE:
		r->fn = TF_FN_FREE;
		return dec_free_addr(d, &r->addr);
	case TF_REALLOC:
		(*seq)++;   /* a REALLOC covers two stream indexes */
		if ((rc = dec_time(d, TF_COL_DT2, r->t, &r->t2)) ||
		    (rc = dec_site(d, r)) ||
		    (rc = dec_free_addr(d, &r->old_addr)) ||
		    (rc = dec_alloc_addr(d, r->size, &r->addr)))
			return rc;
		m->prev_t = r->t2;
		break;
	default:    /* a kind of a newer version: its fields are in columns
		       this reader does not know, so only kind and t remain */
		break;
	}
	return TF_OK;
}

int tf_coldec_decode(struct tf_coldec *dc, const struct tf_segment_info *si,
		     const uint8_t *p, size_t len, struct tf_record *recs,
		     struct tf_error *err)
{
	struct tf_dec d = { .m = &dc->m, .c = dc->col, .si = si, .err = err };
	const uint8_t *end = p + len;

	while (p < end) {
		uint64_t tag, clen;
		if (tf_get_varint(&p, end, &tag) < 0 ||
		    tf_get_varint(&p, end, &clen) < 0 ||
		    clen > (uint64_t)(end - p))
			return bad(&d, "bad column directory");
		if (tag < TF_COL_COUNT && tag > 0) {
			if (d.present[tag])
				return bad(&d, "column given twice");
			if (clen < 1 || *p != TF_COL_METHOD_HUFFMAN)
				return bad(&d, "unknown column coding");
			if (tf_ent_init(&dc->col[tag], p + 1, clen - 1) < 0)
				return bad(&d, "invalid column code");
			d.present[tag] = 1;
		}           /* unknown tags: columns of newer kinds, skipped */
		p += clen;
	}
	if (dc->cap < si->count) {
		if (model_arrays(&dc->m, si->count) < 0)
			return tf_fail(err, TF_E_NOMEM, si->offset,
				       "out of memory decoding a segment");
		dc->cap = si->count;
	}
	model_reset(&dc->m);
	uint64_t seq = si->first_seq;
	for (d.rec = 0; d.rec < si->count; d.rec++) {
		struct tf_record *r = &recs[d.rec];
		memset(r, 0, sizeof *r);
		r->stream = si->stream;
		r->tid = si->tid;
		int rc = dec_record(&d, r, &seq);
		if (rc)
			return rc;
	}
	return TF_OK;
}

