/*
 * keymap.c - the writer's picture of the heap: for every address, the
 * latest event the writer has applied (an allocation with its size, stack,
 * thread and function, or a free), kept by the writer thread from the
 * events it drains, so that a bounded trace's keyframe can be written off
 * the program's threads, and so that a stopped recording knows which
 * blocks it recorded (stopset.c).
 *
 * Rings are drained in no particular order across threads, so events of
 * one address arrive out of time order; keeping only the latest by time
 * (a free before an allocation at equal times, as everywhere) makes the map
 * independent of that order. A free is kept as an entry so that an older
 * event of its address arriving later is recognised as older. Frees are
 * forgotten in bulk (rec_keymap_forget_frees) once no older event of their
 * address can still be in a ring: those stamped up to a keyframe's cut,
 * once the writer has drained every ring up to it (writer.c keyframe_step
 * says why).
 *
 * It lives in the program's memory, so it is packed: 24 bytes an address
 * (struct slot), the stream and tid of an allocation through a table of
 * the streams that have entries (16-bit index; 0 marks a free). The slots
 * are spread over SHARDS tables by hash, each a bucketised cuckoo table
 * (an address is in one of its two buckets of BUCKET slots), which stays
 * fast up to FILL_MAX full; a shard that fills grows by a quarter, so a
 * table is always at least FILL_MAX / 1.25 = 76% full (at most 31.6 bytes
 * an address) and a growth copies one shard, never the whole map.
 *
 * Writer thread only; must never be called from an allocation hook (it
 * maps memory).
 */
#include "rec_internal.h"

#include <string.h>

/* ---- packed entries ------------------------------------------------------- */
struct slot {                           /* addr 0: empty */
	uint64_t a;                     /* addr | stream index << ADDR_BITS */
	uint64_t t;                     /* time | fn << TIME_BITS */
	uint64_t s;                     /* size | stack << SIZE_BITS */
};
#define ADDR_BITS 48                    /* x86-64 user addresses (4-level paging) */
#define TIME_BITS 56                    /* ns since the trace began: 2.2 years */
#define SIZE_BITS 42                    /* 4 TiB */
#define STACK_BITS (64 - SIZE_BITS)     /* trie node ids: session.c's MAX_NODES is 2^22 */
#define LOW(bits) ((UINT64_C(1) << (bits)) - 1)

static uint64_t addr_of(const struct slot *e) { return e->a & LOW(ADDR_BITS); }
static uint32_t sidx_of(const struct slot *e) { return (uint32_t)(e->a >> ADDR_BITS); }
static uint64_t time_of(const struct slot *e) { return e->t & LOW(TIME_BITS); }

/* ---- the streams that have allocations in the map ------------------------- */
#define STREAMS_MAX (1u << (64 - ADDR_BITS))  /* index 0 marks a free */
#define SMAP_SLOTS (2 * STREAMS_MAX)         /* stream id -> index, at most half full */
struct stream {
	uint32_t stream, tid;
	uint32_t refs;                  /* allocations in the map; 0: on the free list */
	uint32_t next_free;
};
static struct stream *streams;          /* [STREAMS_MAX] */
static uint16_t *smap;                  /* [SMAP_SLOTS]: index, 0 = empty */
static uint32_t streams_used, free_head;

/* ---- the shards ----------------------------------------------------------- */
#define SHARDS 64
#define BUCKET 8                        /* slots per bucket: 192 bytes */
#define FILL_MAX_PERCENT 95             /* 8-slot buckets with two choices fill to 99.9% */
#define KICKS_MAX 512                   /* evictions before a shard grows */
#define PAGE 4096
struct shard {
	struct slot *tab;               /* nb buckets of BUCKET slots */
	size_t nb, n, bytes;
};
static struct shard shards[SHARDS];
static uint64_t t_max, rnd;
static int broken;                      /* out of memory: no more keyframes */

static uint64_t mix(uint64_t x)         /* murmur3's finaliser */
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* The two buckets of addr in a shard of nb buckets: from bits of the hash
 * the shard number does not use. */
static void buckets(uint64_t addr, size_t nb, size_t *b1, size_t *b2)
{
	uint64_t h = mix(addr);
	*b1 = (size_t)(((h >> 32) * nb) >> 32);
	*b2 = (size_t)((((h >> 6) & LOW(26)) * nb) >> 26);
	if (*b2 == *b1)
		*b2 = (*b1 + 1) % nb;
}

static struct shard *shard_of(uint64_t addr)
{
	return &shards[mix(addr) & (SHARDS - 1)];
}

static void unmap_all(void)
{
	for (int i = 0; i < SHARDS; i++)
		if (shards[i].tab)
			munmap(shards[i].tab, shards[i].bytes);
	if (streams)
		munmap(streams, STREAMS_MAX * sizeof *streams);
	if (smap)
		munmap(smap, SMAP_SLOTS * sizeof *smap);
	memset(shards, 0, sizeof shards);
	streams = NULL;
	smap = NULL;
}

/* A table of at least nb buckets (all of its pages used); 0 or -1. */
static int shard_map(struct shard *sh, size_t nb)
{
	size_t bytes = (nb * BUCKET * sizeof(struct slot) + PAGE - 1) / PAGE * PAGE;
	sh->tab = rec_map_private(bytes, 1);
	if (!sh->tab)
		return -1;
	sh->bytes = bytes;
	sh->nb = bytes / (BUCKET * sizeof(struct slot));
	sh->n = 0;
	return 0;
}

int rec_keymap_init(void)
{
	unmap_all();
	t_max = 0;
	rnd = 0x9E3779B97F4A7C15ull;
	broken = 0;
	streams_used = 1;
	free_head = 0;
	/* pages as used: an index is written before it is read */
	streams = rec_map_private(STREAMS_MAX * sizeof *streams, 0);
	smap = rec_map_private(SMAP_SLOTS * sizeof *smap, 1);
	if (!streams || !smap)
		return -1;
	for (int i = 0; i < SHARDS; i++)
		if (shard_map(&shards[i], 1) < 0)
			return -1;
	return 0;
}

static void say_broken(const char *why)
{
	if (!broken && rec_s.max_size)
		rec_say("bounded recording: ", why,
			"; no more keyframes (the trace may not import once it wraps)");
	else if (!broken)
		rec_say("recording stopped: ", why,
			"; every free is written while stopped");
	broken = 1;
}

/* ---- stream indexes --------------------------------------------------------- */
static size_t smap_home(uint32_t stream)
{
	return (size_t)((stream * 0x9E3779B97F4A7C15ull) >> 32) & (SMAP_SLOTS - 1);
}

/* The index of stream (made if new, with no reference), or 0: none left. */
static uint32_t stream_index(uint32_t stream, uint32_t tid)
{
	size_t i = smap_home(stream);
	for (; smap[i]; i = (i + 1) & (SMAP_SLOTS - 1))
		if (streams[smap[i]].stream == stream)
			return smap[i];
	uint32_t x = free_head;
	if (x)
		free_head = streams[x].next_free;
	else if (streams_used < STREAMS_MAX)
		x = streams_used++;
	else
		return 0;
	streams[x] = (struct stream){ .stream = stream, .tid = tid };
	smap[i] = (uint16_t)x;
	return x;
}

/* Index x has no allocation in the map any more: free it. */
static void stream_drop(uint32_t x)
{
	size_t i = smap_home(streams[x].stream);
	while (smap[i] != x)
		i = (i + 1) & (SMAP_SLOTS - 1);
	/* backward-shift deletion: later members of the run stay reachable */
	for (size_t j = i;;) {
		smap[i] = 0;
		for (;;) {
			j = (j + 1) & (SMAP_SLOTS - 1);
			if (!smap[j])
				goto removed;
			size_t home = smap_home(streams[smap[j]].stream);
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		smap[i] = smap[j];
		i = j;
	}
removed:
	streams[x].next_free = free_head;
	free_head = x;
}

static void stream_unref(uint32_t x)
{
	if (!--streams[x].refs)
		stream_drop(x);
}

/* ---- the cuckoo tables ------------------------------------------------------ */
static struct slot *find(struct shard *sh, uint64_t addr)
{
	size_t b[2];
	buckets(addr, sh->nb, &b[0], &b[1]);
	for (int k = 0; k < 2; k++) {
		struct slot *e = sh->tab + b[k] * BUCKET;
		for (int j = 0; j < BUCKET; j++)
			if (addr_of(&e[j]) == addr)
				return &e[j];
	}
	return NULL;
}

/* Places *v (an address not in the shard), evicting others to their
 * other bucket as needed; 0, or -1 with *v the entry left over. */
static int place(struct shard *sh, struct slot *v)
{
	for (int kick = 0; kick < KICKS_MAX; kick++) {
		size_t b[2];
		buckets(addr_of(v), sh->nb, &b[0], &b[1]);
		for (int k = 0; k < 2; k++) {
			struct slot *e = sh->tab + b[k] * BUCKET;
			for (int j = 0; j < BUCKET; j++)
				if (!e[j].a) {
					e[j] = *v;
					sh->n++;
					return 0;
				}
		}
		rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
		struct slot *e = sh->tab + b[rnd & 1] * BUCKET + (rnd >> 8) % BUCKET;
		struct slot out = *e;
		*e = *v;
		*v = out;
	}
	return -1;
}

/* Moves the shard to a table a quarter larger (or larger still if the
 * entries do not fit), with *v in it too; 0 or -1 (the map is broken). */
static int grow(struct shard *sh, struct slot *v)
{
	struct shard old = *sh;
	for (size_t nb = old.nb + old.nb / 4 + 1;; nb += nb / 4 + 1) {
		if (shard_map(sh, nb) < 0) {
			*sh = old;
			return -1;
		}
		struct slot left = *v;
		int ok = place(sh, &left) == 0;
		for (size_t i = 0; ok && i < old.nb * BUCKET; i++)
			if (old.tab[i].a) {
				left = old.tab[i];
				ok = place(sh, &left) == 0;
			}
		if (ok)
			break;
		munmap(sh->tab, sh->bytes);
	}
	munmap(old.tab, old.bytes);
	return 0;
}

/* Later in replay order: by time, a free before an allocation. */
static int later(const struct slot *e, uint64_t t, int alloc)
{
	uint64_t te = time_of(e);
	return t != te ? t > te : alloc && !sidx_of(e);
}

static void put(struct slot *v)
{
	struct shard *sh = shard_of(addr_of(v));
	struct slot *e = find(sh, addr_of(v));
	uint32_t x = sidx_of(v);
	uint64_t t = time_of(v);
	if (e) {
		if (!later(e, t, x != 0))
			return;
		uint32_t old = sidx_of(e);
		*e = *v;
		if (x)
			streams[x].refs++;      /* before: old may be x */
		if (old)
			stream_unref(old);
	} else {
		/* place() may leave another entry over in *v: grow() takes it */
		if ((100 * (sh->n + 1) > FILL_MAX_PERCENT * BUCKET * sh->nb || place(sh, v) < 0) &&
		    grow(sh, v) < 0) {
			say_broken("no memory for the live set");
			return;
		}
		if (x)
			streams[x].refs++;
	}
	if (t > t_max)
		t_max = t;
}

void rec_keymap_apply(uint32_t stream, uint32_t tid, const struct tf_event *ev, size_t n)
{
	uint32_t x = 0;
	for (size_t i = 0; i < n && !broken; i++) {
		const struct tf_event *e = &ev[i];
		int alloc = e->kind == TF_EV_ALLOC || e->kind == TF_EV_REALLOC_NEW;
		/* none in a bounded trace (custom.c, mmap.c); and a region's
		 * address is not a block's, nor an unmap one */
		if (!e->addr || tf_fn_custom(e->fn) || tf_fn_region(e->fn))
			continue;
		if (e->addr > LOW(ADDR_BITS) || e->t > LOW(TIME_BITS) ||
		    (alloc && (e->size > LOW(SIZE_BITS) || e->stack > LOW(STACK_BITS)))) {
			say_broken("an address, time, size or stack too large for the live set");
			return;
		}
		if (alloc && !x) {
			if (!(x = stream_index(stream, tid))) {
				say_broken("too many threads with live blocks");
				return;
			}
			streams[x].refs++;      /* held by this call */
		}
		struct slot v = { .a = e->addr, .t = e->t };
		if (alloc) {
			v.a |= (uint64_t)x << ADDR_BITS;
			v.t |= (uint64_t)e->fn << TIME_BITS;
			v.s = e->size | (uint64_t)e->stack << SIZE_BITS;
		}
		put(&v);
	}
	if (x)
		stream_unref(x);
}

void rec_keymap_forget_frees(uint64_t upto)
{
	for (int i = 0; i < SHARDS; i++) {
		struct shard *sh = &shards[i];
		for (size_t j = 0; j < sh->nb * BUCKET; j++) {
			struct slot *e = &sh->tab[j];
			if (e->a && !sidx_of(e) && time_of(e) <= upto) {
				e->a = 0;
				sh->n--;
			}
		}
	}
}

int rec_keymap_next(size_t *i, struct rec_key *k)
{
	for (; *i >> 32 < SHARDS; *i = ((*i >> 32) + 1) << 32) {
		const struct shard *sh = &shards[*i >> 32];
		for (size_t j = *i & LOW(32); j < sh->nb * BUCKET; j++) {
			const struct slot *e = &sh->tab[j];
			uint32_t x = sidx_of(e);
			if (!e->a || !x)
				continue;
			*i = (*i & ~LOW(32)) | (j + 1);
			*k = (struct rec_key){
				.addr = addr_of(e), .t = time_of(e), .size = e->s & LOW(SIZE_BITS),
				.stack = (uint32_t)(e->s >> SIZE_BITS), .stream = streams[x].stream,
				.tid = streams[x].tid, .fn = (uint8_t)(e->t >> TIME_BITS),
			};
			return 1;
		}
	}
	return 0;
}

int rec_keymap_live(uint64_t addr)
{
	const struct slot *e = find(shard_of(addr), addr);
	return e && sidx_of(e) != 0;
}

uint64_t rec_keymap_t_max(void)
{
	return t_max;
}

int rec_keymap_broken(void)
{
	return broken;
}
