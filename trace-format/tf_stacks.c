/*
 * tf_stacks.c - the STACKS meta record (FORMAT.md "STACKS"): a run of stack
 * trie nodes with consecutive ids, their parents and return addresses coded
 * as two Huffman columns against a model of the run. A deep-stacked program
 * (a compiler, an interpreter) makes a trie node for most of its
 * allocations; as one STACK record each (id, parent, 6-byte address) they
 * took about 8 bytes a node after LZ4, half of cc1plus's trace, where the
 * run's model takes under one: a node's parent is mostly the node before it,
 * and the address below a given caller's address is mostly one of the few
 * seen below it before.
 *
 * The writer gathers a run (tf_stkrun_add) and encodes it when a record that
 * is not the run's next node comes, so the records' order in the meta stream
 * is the order they were written in. The encoder runs on the recorder's
 * writer thread: it touches only the memory of its struct tf_stkrun (mapped
 * once by tf_stkrun_new), no allocation, no I/O. The decoder expands a record
 * into STACK records and trusts nothing: codes that name no context entry,
 * parents out of range and runs longer than the segment's count are
 * corruption.
 */
#include <stdlib.h>

#include "tf_internal.h"

/* Contexts: the return addresses most recently seen below a caller's
 * address, newest first. A direct-mapped table like the event columns'
 * (4096 entries); a slot holding another caller is taken over. */
#define STK_CTX_BITS 12
#define STK_WAYS 4              /* addresses kept per caller; codes 0..3 */
#define STK_HASH 0x9E3779B97F4A7C15ull /* 2^64 / golden ratio: spreads addresses */
/* Parent codes of 32-bit ids are below 2^34; a larger one is corrupt (and
 * its difference would overflow a signed 64-bit subtraction). */
#define STK_PCODE_MAX (1ull << 34)

struct stk_ctx {
	uint64_t key;            /* the caller's address */
	uint64_t ip[STK_WAYS];   /* the addresses below it, newest first */
	uint32_t gen;            /* the run it belongs to; another: empty */
	uint32_t n;              /* entries of ip in use */
};

struct tf_stkmodel {
	struct stk_ctx ctx[1u << STK_CTX_BITS];
	uint32_t gen;            /* the current run: resets every slot at once */
};

struct tf_stkrun {
	uint32_t first, n;       /* ids first .. first + n - 1 */
	uint32_t parent[TF_STACKS_MAX];
	uint64_t ip[TF_STACKS_MAX];
	uint64_t code[2][TF_STACKS_MAX]; /* the parent and address columns */
	struct tf_stkmodel m;
};

/* A new run: every context empty, without touching the table. */
static void model_reset(struct tf_stkmodel *m)
{
	if (++m->gen == 0) {     /* wrapped: stale slots could match again */
		memset(m->ctx, 0, sizeof m->ctx);
		m->gen = 1;
	}
}

/* The context of caller address key, emptied if it held another. */
static struct stk_ctx *context(struct tf_stkmodel *m, uint64_t key)
{
	struct stk_ctx *c = &m->ctx[(key * STK_HASH) >> (64 - STK_CTX_BITS)];
	if (c->gen != m->gen || c->key != key) {
		c->gen = m->gen;
		c->key = key;
		c->n = 0;
	}
	return c;
}

/* Moves ip to the front of c (inserting it, the oldest dropping out). */
static void context_use(struct stk_ctx *c, uint64_t ip)
{
	uint32_t k = 0;
	while (k < c->n && c->ip[k] != ip)
		k++;
	if (k == c->n && c->n < STK_WAYS)
		c->n++;
	if (k == STK_WAYS)
		k--;
	memmove(&c->ip[1], &c->ip[0], k * sizeof c->ip[0]);
	c->ip[0] = ip;
}

/* ---- encoding (the writer's thread) -------------------------------------- */

struct tf_stkrun *tf_stkrun_new(void)
{
	return tf_map(sizeof(struct tf_stkrun), 0);   /* zeroed: empty run */
}

void tf_stkrun_free(struct tf_stkrun *s)
{
	if (s)
		munmap(s, sizeof *s);
}

uint32_t tf_stkrun_count(const struct tf_stkrun *s)
{
	return s->n;
}

int tf_stkrun_add(struct tf_stkrun *s, const struct tf_record *r)
{
	if (s->n == TF_STACKS_MAX || (s->n && r->id != s->first + s->n))
		return -1;
	if (!s->n)
		s->first = r->id;
	s->parent[s->n] = r->parent;
	s->ip[s->n++] = r->ip;
	return 0;
}

size_t tf_stkrun_bound(const struct tf_stkrun *s)
{
	return 1 + 5 * TF_VARINT_MAX + 2 * tf_ent_bound(s->n);
}

/* The caller address of node i's context: its parent's, when the parent
 * is in the run (the decoder knows nothing of earlier runs), else 0. */
static uint64_t caller_ip(const uint64_t *ip, uint32_t first, uint32_t id, uint32_t parent)
{
	return parent >= first && parent < id ? ip[parent - first] : 0;
}

size_t tf_stkrun_encode(struct tf_stkrun *s, uint8_t *out)
{
	model_reset(&s->m);
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t id = s->first + i;
		uint64_t key = caller_ip(s->ip, s->first, id, s->parent[i]);
		struct stk_ctx *c = context(&s->m, key);
		uint32_t k = 0;
		while (k < c->n && c->ip[k] != s->ip[i])
			k++;
		s->code[0][i] = tf_zigzag((int64_t)id - 1 - (int64_t)s->parent[i]);
		s->code[1][i] = k < c->n ? k : STK_WAYS + tf_zigzag((int64_t)(s->ip[i] - key));
		context_use(c, s->ip[i]);
	}
	uint8_t body[4 * TF_VARINT_MAX], *b = body;
	b = tf_put_varint(b, s->first);
	b = tf_put_varint(b, s->n);
	struct tf_entcode code[2];
	size_t clen[2], blen = (size_t)(b - body);
	for (int c = 0; c < 2; c++) {
		clen[c] = tf_ent_plan(s->code[c], s->n, &code[c]);
		uint8_t tmp[TF_VARINT_MAX];
		blen += (size_t)(tf_put_varint(tmp, clen[c]) - tmp) + clen[c];
	}
	uint8_t *o = out;
	*o++ = TF_META_STACKS;
	o = tf_put_varint(o, blen);
	memcpy(o, body, (size_t)(b - body));
	o += b - body;
	for (int c = 0; c < 2; c++) {
		o = tf_put_varint(o, clen[c]);
		o += tf_ent_write(s->code[c], s->n, &code[c], o);
	}
	s->n = 0;
	return (size_t)(o - out);
}

/* ---- decoding ------------------------------------------------------------- */

struct tf_stkmodel *tf_stkmodel_new(void)
{
	return calloc(1, sizeof(struct tf_stkmodel));
}

void tf_stkmodel_free(struct tf_stkmodel *m)
{
	free(m);
}

/* Opens the column that follows at *p (varint length, coded values). */
static int open_column(struct tf_entdec *d, const uint8_t **p, const uint8_t *end)
{
	uint64_t len;
	if (tf_get_varint(p, end, &len) < 0 || len > (uint64_t)(end - *p) ||
	    tf_ent_init(d, *p, (size_t)len) < 0)
		return -1;
	*p += len;
	return 0;
}

/* Node i of the run (recs[i], id first + i) from its two codes. */
static int decode_node(struct tf_stkmodel *m, struct tf_record *recs, uint32_t first,
		       uint32_t i, uint64_t pcode, uint64_t icode)
{
	uint32_t id = first + i;
	if (pcode > STK_PCODE_MAX)
		return -1;
	int64_t parent = (int64_t)id - 1 - tf_unzigzag(pcode);
	if (parent < 0 || parent > (int64_t)UINT32_MAX)
		return -1;
	struct tf_record *r = &recs[i];
	memset(r, 0, sizeof *r);
	r->kind = TF_STACK;
	r->id = id;
	r->parent = (uint32_t)parent;
	uint64_t key = r->parent >= first && r->parent < id ? recs[r->parent - first].ip : 0;
	struct stk_ctx *c = context(m, key);
	if (icode < STK_WAYS && icode >= c->n)
		return -1;
	r->ip = icode < STK_WAYS ? c->ip[icode] : key + (uint64_t)tf_unzigzag(icode - STK_WAYS);
	context_use(c, r->ip);
	return 0;
}

int tf_stacks_decode(struct tf_stkmodel *m, const uint8_t *p, size_t len,
		     struct tf_record *recs, uint32_t room, uint32_t *n)
{
	const uint8_t *end = p + len;
	uint64_t first, count;
	if (tf_get_varint(&p, end, &first) < 0 || tf_get_varint(&p, end, &count) < 0 ||
	    first == 0 || count == 0 || count > TF_STACKS_MAX || count > room ||
	    first > (uint64_t)UINT32_MAX - count + 1)
		return -1;
	struct tf_entdec col[2];
	if (open_column(&col[0], &p, end) < 0 || open_column(&col[1], &p, end) < 0)
		return -1;   /* bytes after the columns: fields of a newer version */
	model_reset(m);
	for (uint32_t i = 0; i < count; i++) {
		uint64_t pcode, icode;
		if (tf_ent_get(&col[0], &pcode) < 0 || tf_ent_get(&col[1], &icode) < 0 ||
		    decode_node(m, recs, (uint32_t)first, i, pcode, icode) < 0)
			return -1;
	}
	*n = (uint32_t)count;
	return 0;
}
