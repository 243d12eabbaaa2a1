/*
 * stackid.c - turning a captured stack into a stack id (a leaf trie node).
 *
 * Hot path: look the stack's 122-bit hash (stackhash.c, often worked out
 * by the walk from its previous one's) up in one open-addressing table; no
 * lock, no write. A hit is accepted when both halves match: stackhash.c
 * says why a collision is far less likely than a memory error; it costs
 * no memory beyond the table.
 *
 * Miss path (once per distinct stack): under one spinlock, walk the trie from
 * the outermost frame inward, taking the nodes of the outer frames shared
 * with the previous stack that went this way from `path`, finding the next
 * (parent, ip) nodes in a second table; from the first frame that has
 * none, every node is new, and they are made together (nodes_new). New
 * nodes go into the .ring file's node array: ip and parent first, then
 * `ready` with a release store, so the writer and a recovering reader
 * only ever see whole nodes (nodes_next moves past them after). Then the
 * stack is added to the hash table. The lock keeps node ids unique per
 * (parent, ip) and lets both tables grow; it is never held across anything
 * that can allocate or lock (only mmap), and the re-entrancy guard keeps a
 * thread from re-entering it. A
 * signal handler that interrupts this thread's miss path (nested.c) only
 * looks up: a new stack gets stack 0 instead of waiting for a lock its own
 * thread may hold.
 *
 * Tables live in anonymous mmaps. A grown hash table replaces the old one
 * with a release store; the old one stays mapped because lock-free readers
 * may still be in it (the old tables together are smaller than the new).
 *
 * Must never: allocate, block the hot path, or crash when full: a full node
 * array gives stack 0 (unknown) and says so once on stderr.
 */
#include "rec_internal.h"

#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#define STK_INITIAL_SLOTS (1u << 12)   /* grows by 2x at half full */
#define NODE_INITIAL_SLOTS (1u << 14)

struct stk_slot {
	_Atomic uint64_t h1;       /* 0 = empty; published last */
	uint64_t h2;
	uint32_t leaf;
	uint32_t pad;
};

struct stk_table {
	uint64_t mask;
	uint64_t used;
	struct stk_slot slot[];
};

struct node_slot {                 /* (parent, ip) -> id; ip 0 = empty */
	uint64_t ip;
	uint32_t parent, id;
};

static _Atomic(struct stk_table *) stk;
static struct node_slot *ntab;
static uint64_t ntab_mask, ntab_used;
/* Under the lock: the outer frames of the stack that last went through
 * the trie, outermost first, with their nodes: a new stack mostly shares
 * its outer frames with the one before it, and takes their nodes from
 * here instead of looking them up. */
#define PATH_FRAMES REC_DEPTH_DEFAULT
static struct path_frame {
	uint64_t ip;
	uint32_t node;
} path[PATH_FRAMES];
static unsigned path_n;
static atomic_flag lock = ATOMIC_FLAG_INIT;
static int said_full;
/* This thread is in the miss path (wants or holds the lock): a signal
 * handler that interrupted it must not wait for the lock. */
static REC_TLS _Atomic int inserting;

static inline uint64_t fmix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	return k ^ (k >> 33);
}

/* The table's two keys from a stack's hash (stackhash.c): the first
 * mixed, since its low bits pick the slot, and never 0 (an empty slot). */
static inline void keys(const struct rec_sh *h, uint64_t *h1, uint64_t *h2)
{
	*h1 = fmix(h->a + 1);  /* a + 1 is not 0, and fmix maps only 0 to 0 */
	*h2 = h->b;
}

static struct stk_table *stk_new(uint64_t slots)
{
	struct stk_table *t = rec_map_private(sizeof *t + slots * sizeof(struct stk_slot), 1);
	if (t)
		t->mask = slots - 1;
	return t;
}

int rec_stackid_init(int unmap_old)
{
	/* The old tables describe another session's node array. */
	struct stk_table *old = atomic_load(&stk);
	if (old && unmap_old)
		munmap(old, sizeof *old + (old->mask + 1) * sizeof(struct stk_slot));
	if (ntab && unmap_old)
		munmap(ntab, (ntab_mask + 1) * sizeof *ntab);
	atomic_flag_clear(&lock);
	said_full = 0;
	ntab_mask = NODE_INITIAL_SLOTS - 1;
	ntab_used = 0;
	path_n = 0;
	ntab = rec_map_private(NODE_INITIAL_SLOTS * sizeof *ntab, 1);
	struct stk_table *t = stk_new(STK_INITIAL_SLOTS);
	atomic_store(&stk, t);
	return ntab && t ? 0 : -1;
}

static uint32_t stk_find(struct stk_table *t, uint64_t h1, uint64_t h2)
{
	for (uint64_t i = h1 & t->mask;; i = (i + 1) & t->mask) {
		struct stk_slot *s = &t->slot[i];
		uint64_t k = atomic_load_explicit(&s->h1, memory_order_acquire);
		if (k == 0)
			return 0;
		if (k == h1 && s->h2 == h2)
			return s->leaf;
	}
}

static void stk_put(struct stk_table *t, uint64_t h1, uint64_t h2, uint32_t leaf)
{
	uint64_t i = h1 & t->mask;
	while (atomic_load_explicit(&t->slot[i].h1, memory_order_relaxed))
		i = (i + 1) & t->mask;
	t->slot[i].h2 = h2;
	t->slot[i].leaf = leaf;
	atomic_store_explicit(&t->slot[i].h1, h1, memory_order_release);
	t->used++;
}

/* Under the lock: add, growing the table first when half full. If the grown
 * table cannot be mapped the old one keeps working until it is 7/8 full;
 * after that stacks still resolve, through the miss path every time. */
static void stk_add(uint64_t h1, uint64_t h2, uint32_t leaf)
{
	struct stk_table *t = atomic_load_explicit(&stk, memory_order_relaxed);
	if (2 * (t->used + 1) > t->mask + 1) {
		struct stk_table *g = stk_new(2 * (t->mask + 1));
		if (g) {
			for (uint64_t i = 0; i <= t->mask; i++) {
				uint64_t k = atomic_load_explicit(&t->slot[i].h1, memory_order_relaxed);
				if (k)
					stk_put(g, k, t->slot[i].h2, t->slot[i].leaf);
			}
			atomic_store_explicit(&stk, g, memory_order_release);
			t = g;
		} else if (8 * (t->used + 1) > 7 * (t->mask + 1)) {
			return;
		}
	}
	stk_put(t, h1, h2, leaf);
}

static inline uint64_t node_hash(uint32_t parent, uint64_t ip)
{
	return fmix(ip * 0x9e3779b97f4a7c15ull + parent);
}

static int ntab_grow(void)
{
	uint64_t slots = 2 * (ntab_mask + 1);
	struct node_slot *g = rec_map_private(slots * sizeof *g, 1);
	if (!g)
		return -1;
	for (uint64_t i = 0; i <= ntab_mask; i++) {
		if (!ntab[i].ip)
			continue;
		uint64_t j = node_hash(ntab[i].parent, ntab[i].ip) & (slots - 1);
		while (g[j].ip)
			j = (j + 1) & (slots - 1);
		g[j] = ntab[i];
	}
	munmap(ntab, (ntab_mask + 1) * sizeof *ntab);
	ntab = g;
	ntab_mask = slots - 1;
	return 0;
}

/* Not when a reservation failed: that said stacks go unknown already. */
static void say_full(void)
{
	if (!said_full && !atomic_load(&rec_s.reserve_failed)) {
		said_full = 1;
		rec_say("stack trie of ", rec_s.trace_path,
			" is full; new stacks are recorded as unknown (stack 0)");
	}
}

/* Under the lock: the id of node (parent, ip), or 0 if there is none. */
static uint32_t node_find(uint32_t parent, uint64_t ip)
{
	for (uint64_t i = node_hash(parent, ip) & ntab_mask; ntab[i].ip; i = (i + 1) & ntab_mask)
		if (ntab[i].ip == ip && ntab[i].parent == parent)
			return ntab[i].id;
	return 0;
}

/* Under the lock: new nodes for the frames ips[count - 1] .. ips[0]
 * (innermost last), the first under parent: none of them exists, since
 * a node just made has no children. Their ids are known before they are
 * made (nodes_next onward), so their table slots are fetched all at once
 * rather than one cache miss after another (cc1plus makes a million
 * nodes). The leaf's id, or 0 if the trie has no room for them all. */
static uint32_t nodes_new(uint32_t parent, void *const *ips, unsigned count)
{
	struct tf_ring_file *rf = rec_s.rf;
	uint32_t id = atomic_load_explicit(&rf->nodes_next, memory_order_relaxed);
	uint64_t end = (uint64_t)id + count;
	if (end > rf->max_nodes || !rec_session_reserve_nodes(end))
		return 0;
	while (2 * (ntab_used + count) > ntab_mask + 1)
		if (ntab_grow() < 0)
			return 0;
	for (unsigned k = 0; k < count; k++)
		__builtin_prefetch(&ntab[node_hash(k ? id + k - 1 : parent,
						  (uintptr_t)ips[count - 1 - k]) & ntab_mask], 1);
	struct tf_node *nd = (struct tf_node *)((char *)rf + rf->nodes_offset) + id;
	for (unsigned k = 0; k < count; k++, nd++, parent = id++) {
		uint64_t ip = (uintptr_t)ips[count - 1 - k];
		uint64_t i = node_hash(parent, ip) & ntab_mask;
		while (ntab[i].ip)
			i = (i + 1) & ntab_mask;
		ntab[i] = (struct node_slot){ ip, parent, id };
		nd->ip = ip;
		nd->parent = parent;
		atomic_store_explicit(&nd->ready, 1, memory_order_release);
	}
	ntab_used += count;
	atomic_store_explicit(&rf->nodes_next, id, memory_order_release);
	return parent;
}

/* Under the lock: the leaf node of ips[0..n) (innermost first), the
 * frames that have none yet given theirs; 0 if the trie is full. */
static uint32_t leaf_of(void *const *ips, unsigned n)
{
	uint32_t node = 0;
	unsigned j = 0;                   /* frames from the outermost with a node */
	while (j < path_n && j < n && path[j].ip == (uintptr_t)ips[n - 1 - j])
		node = path[j++].node;
	path_n = j;
	for (; j < n; j++) {
		uint64_t ip = (uintptr_t)ips[n - 1 - j];
		uint32_t id = node_find(node, ip);
		if (!id)
			break;
		node = id;
		if (j < PATH_FRAMES) {
			path[j] = (struct path_frame){ ip, node };
			path_n = j + 1;
		}
	}
	if (j < n) {
		node = nodes_new(node, ips, n - j);
		if (!node)
			return 0;
		/* the new nodes' ids are consecutive, up to the leaf's */
		for (unsigned k = j; k < n && k < PATH_FRAMES; k++)
			path[k] = (struct path_frame){ (uintptr_t)ips[n - 1 - k], node - (n - 1 - k) };
		path_n = n < PATH_FRAMES ? n : PATH_FRAMES;
	}
	return node;
}

uint32_t rec_stackid(void *const *ips, unsigned n, const struct rec_sh *h)
{
	if (n == 0)
		return 0;
	struct rec_sh mine;
	if (!h) {
		rec_stackhash(ips, n, &mine);
		h = &mine;
	}
	uint64_t h1, h2;
	keys(h, &h1, &h2);
	uint32_t leaf = stk_find(atomic_load_explicit(&stk, memory_order_acquire), h1, h2);
	if (REC_LIKELY(leaf))
		return leaf;

	atomic_store_explicit(&inserting, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
		sched_yield();
	leaf = stk_find(atomic_load_explicit(&stk, memory_order_relaxed), h1, h2);
	if (!leaf) {
		leaf = leaf_of(ips, n);
		if (leaf)
			stk_add(h1, h2, leaf);
	}
	atomic_flag_clear_explicit(&lock, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&inserting, 0, memory_order_relaxed);
	if (!leaf) {
		atomic_fetch_add_explicit(&rec_s.stacks_unknown, 1, memory_order_relaxed);
		say_full();
	}
	return leaf;
}

uint32_t rec_stackid_known(const struct rec_sh *h)
{
	uint64_t h1, h2;
	keys(h, &h1, &h2);
	return stk_find(atomic_load_explicit(&stk, memory_order_acquire), h1, h2);
}

uint32_t rec_stackid_nested(void *const *ips, unsigned n)
{
	if (!atomic_load_explicit(&inserting, memory_order_relaxed))
		return rec_stackid(ips, n, NULL);
	if (n == 0)
		return 0;
	struct rec_sh h;
	rec_stackhash(ips, n, &h);
	uint64_t h1, h2;
	keys(&h, &h1, &h2);
	uint32_t leaf = stk_find(atomic_load_explicit(&stk, memory_order_acquire), h1, h2);
	if (!leaf)
		atomic_fetch_add_explicit(&rec_s.stacks_unknown, 1, memory_order_relaxed);
	return leaf;
}
