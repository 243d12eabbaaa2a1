/*
 * stackid.c - turning a captured stack into a stack id (a leaf trie node).
 *
 * Hot path: look the stack's 122-bit hash (stackhash.c, often worked out
 * by the walk from its previous one's) up in one open-addressing table; no
 * lock, no write. A hit is accepted when both halves match: stackhash.c
 * says why a collision is far less likely than a memory error; it costs
 * no memory beyond the table.
 *
 * Miss path (once per distinct stack): under one spinlock, walk the trie
 * from the outermost frame inward, taking the nodes of the outer frames
 * shared with the previous stack that went this way from `path`, finding
 * the next nodes in a second table; from the first frame that has none,
 * every node is new, and they are made together (nodes_new). That table
 * holds every node by the hash of the stack it ends (its frame and every
 * frame outward of it, Horner's rule one step a frame), not by (parent,
 * ip): so the slots of all the frames are fetched at once, where each
 * lookup otherwise waited for the node the one before it found (cc1plus
 * makes a million nodes, ten lookups for each new stack: the miss path
 * fell from 5.3 % of its recorded run's samples to about 3.6 %). A node's key
 * is a stack's hash, as unlikely to be mistaken as the hot path's. New
 * nodes go into the .ring file's node array: ip and parent first, then
 * `ready` with a release store, so the writer and a recovering reader
 * only ever see whole nodes (nodes_next moves past them after). Then the
 * stack is added to the stack table. The lock keeps one node per stack it
 * ends and lets both tables grow; it is never held across anything that
 * can allocate or lock (only mmap), and the re-entrancy guard keeps a
 * thread from re-entering it. A signal handler that interrupts this
 * thread's miss path (nested.c) only looks up: a new stack gets stack 0
 * instead of waiting for a lock its own thread may hold.
 *
 * Tables live in anonymous mmaps. A grown stack table replaces the old one
 * with a release store; the old one stays mapped because lock-free readers
 * may still be in it (the old tables together are smaller than the new).
 * The node table is only read under the lock: a grown one replaces the
 * old at once.
 *
 * Must never: allocate, block the hot path, or crash when full: a full node
 * array gives stack 0 (unknown) and says so once on stderr.
 */
#include "rec_internal.h"

#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#define STK_INITIAL_SLOTS (1u << 12)   /* grows by 2x at half full */
/* The node table grows by 2x at three quarters full: it is probed only on
 * the miss path, and holds every node (cc1plus: a million, 48 MiB where
 * half full would take 96). */
#define NODE_INITIAL_SLOTS (1u << 14)

/* Node ids by the 122-bit hash of a stack (keys()). */
struct stk_slot {
	_Atomic uint64_t h1;       /* 0 = empty; published last */
	uint64_t h2;
	uint32_t id;
	uint32_t pad;
};

struct stk_table {
	uint64_t mask;
	uint64_t used;
	struct stk_slot slot[];
};

static _Atomic(struct stk_table *) stk;  /* leaves: the stacks recorded */
static struct stk_table *ntab;           /* every node, by the stack it ends */
/* Under the lock: the outer frames of the stack that last went through
 * the trie, outermost first, with their nodes: a new stack mostly shares
 * its outer frames with the one before it, and takes their nodes from
 * here instead of looking them up. */
#define PATH_FRAMES REC_DEPTH_DEFAULT
static struct path_frame {
	uint64_t ip;
	struct rec_sh t;           /* the hash of the stack its node ends */
	uint32_t node;
} path[PATH_FRAMES];
static unsigned path_n;
/* Under the lock: the stack being placed, by frame from the outermost:
 * the hash of the stack each frame's node ends, and its keys. */
static struct frame_key {
	struct rec_sh t;
	uint64_t h1, h2;
} fkey[REC_DEPTH_MAX];
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

static void stk_unmap(struct stk_table *t)
{
	munmap(t, sizeof *t + (t->mask + 1) * sizeof(struct stk_slot));
}

int rec_stackid_init(int unmap_old)
{
	/* The old tables describe another session's node array. */
	struct stk_table *old = atomic_load(&stk);
	if (old && unmap_old)
		stk_unmap(old);
	if (ntab && unmap_old)
		stk_unmap(ntab);
	atomic_flag_clear(&lock);
	said_full = 0;
	path_n = 0;
	ntab = stk_new(NODE_INITIAL_SLOTS);
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
			return s->id;
	}
}

static void stk_put(struct stk_table *t, uint64_t h1, uint64_t h2, uint32_t id)
{
	uint64_t i = h1 & t->mask;
	while (atomic_load_explicit(&t->slot[i].h1, memory_order_relaxed))
		i = (i + 1) & t->mask;
	t->slot[i].h2 = h2;
	t->slot[i].id = id;
	atomic_store_explicit(&t->slot[i].h1, h1, memory_order_release);
	t->used++;
}

/* Under the lock: a table of twice t's slots, with t's entries; NULL if
 * it cannot be mapped. */
static struct stk_table *stk_grown(struct stk_table *t)
{
	struct stk_table *g = stk_new(2 * (t->mask + 1));
	if (g)
		for (uint64_t i = 0; i <= t->mask; i++) {
			uint64_t k = atomic_load_explicit(&t->slot[i].h1, memory_order_relaxed);
			if (k)
				stk_put(g, k, t->slot[i].h2, t->slot[i].id);
		}
	return g;
}

/* Under the lock: add, growing the table first when half full. If the grown
 * table cannot be mapped the old one keeps working until it is 7/8 full;
 * after that stacks still resolve, through the miss path every time. */
static void stk_add(uint64_t h1, uint64_t h2, uint32_t leaf)
{
	struct stk_table *t = atomic_load_explicit(&stk, memory_order_relaxed);
	if (2 * (t->used + 1) > t->mask + 1) {
		struct stk_table *g = stk_grown(t);
		if (g) {
			atomic_store_explicit(&stk, g, memory_order_release);
			t = g;
		} else if (8 * (t->used + 1) > 7 * (t->mask + 1)) {
			return;
		}
	}
	stk_put(t, h1, h2, leaf);
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

/* Under the lock: new nodes for the frames of ips[0..n) (innermost
 * first) from the outermost's `first` on, the first under parent, their
 * keys in fkey[first..n) (their slots fetched by leaf_of): none of them
 * exists, since a node just made has no children. The leaf's id, or 0 if
 * the trie has no room for them all. */
static uint32_t nodes_new(uint32_t parent, void *const *ips, unsigned first, unsigned n)
{
	struct tf_ring_file *rf = rec_s.rf;
	uint32_t id = atomic_load_explicit(&rf->nodes_next, memory_order_relaxed);
	uint64_t end = (uint64_t)id + (n - first);
	if (end > rf->max_nodes || !rec_session_reserve_nodes(end))
		return 0;
	while (4 * (ntab->used + (n - first)) > 3 * (ntab->mask + 1)) {
		struct stk_table *g = stk_grown(ntab);
		if (!g)
			return 0;
		stk_unmap(ntab);
		ntab = g;
	}
	struct tf_node *nd = (struct tf_node *)((char *)rf + rf->nodes_offset) + id;
	for (unsigned k = first; k < n; k++, nd++, parent = id++) {
		stk_put(ntab, fkey[k].h1, fkey[k].h2, id);
		nd->ip = (uintptr_t)ips[n - 1 - k];
		nd->parent = parent;
		atomic_store_explicit(&nd->ready, 1, memory_order_release);
	}
	atomic_store_explicit(&rf->nodes_next, id, memory_order_release);
	return parent;
}

/* Under the lock: the leaf node of ips[0..n) (innermost first), the
 * frames that have none yet given theirs; 0 if the trie is full. */
static uint32_t leaf_of(void *const *ips, unsigned n)
{
	uint32_t node = 0;
	struct rec_sh t = { 0, 0 };
	unsigned j = 0;                   /* frames from the outermost with a node */
	while (j < path_n && j < n && path[j].ip == (uintptr_t)ips[n - 1 - j]) {
		node = path[j].node;
		t = path[j++].t;
	}
	path_n = j;
	for (unsigned k = j; k < n; k++) {
		struct frame_key *f = &fkey[k];
		f->t = t = rec_sh_in(t, (uintptr_t)ips[n - 1 - k]);
		keys(&t, &f->h1, &f->h2);
		__builtin_prefetch(&ntab->slot[f->h1 & ntab->mask]);
	}
	/* a node's parent has one too: the frames with one come first */
	for (; j < n; j++) {
		uint32_t id = stk_find(ntab, fkey[j].h1, fkey[j].h2);
		if (!id)
			break;
		node = id;
		if (j < PATH_FRAMES) {
			path[j] = (struct path_frame){ (uintptr_t)ips[n - 1 - j], fkey[j].t, node };
			path_n = j + 1;
		}
	}
	if (j < n) {
		node = nodes_new(node, ips, j, n);
		if (!node)
			return 0;
		/* the new nodes' ids are consecutive, up to the leaf's */
		for (unsigned k = j; k < n && k < PATH_FRAMES; k++)
			path[k] = (struct path_frame){ (uintptr_t)ips[n - 1 - k], fkey[k].t,
						       node - (n - 1 - k) };
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
