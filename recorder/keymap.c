/*
 * keymap.c - bounded recording's picture of the heap: for every address,
 * the latest event the writer has applied (an allocation with its size,
 * stack and thread, or a free), kept by the writer thread from the events
 * it drains, so that a keyframe can be written off the program's threads.
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
 * Open addressing with linear probing in an anonymous mapping, doubled when
 * half full. Writer thread only; must never be called from an allocation
 * hook (it maps memory).
 */
#include "rec_internal.h"

#define KEYMAP_MIN_SLOTS (1u << 16)     /* first table: 2.5 MiB */

static struct rec_key *tab;             /* addr 0 = empty slot */
static size_t cap, used;
static uint64_t t_max;
static int broken;                      /* out of memory: no more keyframes */

static size_t slot_of(uint64_t addr, size_t c)
{
	return (size_t)(((addr >> 4) * 0x9E3779B97F4A7C15ull) >> 32) & (c - 1);
}

int rec_keymap_init(void)
{
	if (tab)
		munmap(tab, cap * sizeof *tab);
	cap = KEYMAP_MIN_SLOTS;
	used = 0;
	t_max = 0;
	broken = 0;
	tab = rec_map_private(cap * sizeof *tab, 1);
	return tab ? 0 : -1;
}

static int grow(void)
{
	size_t ncap = cap * 2;
	struct rec_key *n = rec_map_private(ncap * sizeof *tab, 1);
	if (!n)
		return -1;
	for (size_t i = 0; i < cap; i++) {
		if (!tab[i].addr)
			continue;
		size_t j = slot_of(tab[i].addr, ncap);
		while (n[j].addr)
			j = (j + 1) & (ncap - 1);
		n[j] = tab[i];
	}
	munmap(tab, cap * sizeof *tab);
	tab = n;
	cap = ncap;
	return 0;
}

/* Later in replay order: by time, a free before an allocation. */
static int later(const struct rec_key *a, uint64_t t, uint8_t kind)
{
	return t != a->t ? t > a->t : kind == TF_ALLOC && a->kind == TF_FREE;
}

static void put(const struct rec_key *k)
{
	if (broken)
		return;
	if (2 * (used + 1) > cap && grow() < 0) {
		broken = 1;
		rec_say("bounded recording: no memory for the live set", "",
			"; no more keyframes (the trace may not import once it wraps)");
		return;
	}
	if (k->t > t_max)
		t_max = k->t;
	size_t i = slot_of(k->addr, cap);
	while (tab[i].addr && tab[i].addr != k->addr)
		i = (i + 1) & (cap - 1);
	if (!tab[i].addr)
		used++;
	else if (!later(&tab[i], k->t, k->kind))
		return;
	tab[i] = *k;
}

void rec_keymap_apply(uint32_t stream, uint32_t tid, const struct tf_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct tf_event *e = &ev[i];
		struct rec_key k = { .addr = e->addr, .t = e->t, .stream = stream, .tid = tid };
		if (e->kind == TF_EV_ALLOC || e->kind == TF_EV_REALLOC_NEW) {
			k.kind = TF_ALLOC;
			k.size = e->size;
			k.stack = e->stack;
			k.fn = e->fn;
		} else {
			k.kind = TF_FREE;
		}
		if (k.addr)
			put(&k);
	}
}

/* Removes slot i, moving later members of its probe run back so that
 * lookups still find them (backward-shift deletion). */
static void erase(size_t i)
{
	size_t j = i;
	for (;;) {
		tab[i].addr = 0;
		for (;;) {
			j = (j + 1) & (cap - 1);
			if (!tab[j].addr)
				return;
			size_t home = slot_of(tab[j].addr, cap);
			/* j may move to i unless its home lies cyclically in (i, j] */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		tab[i] = tab[j];
		i = j;
	}
}

void rec_keymap_forget_frees(uint64_t upto)
{
	for (size_t i = 0; i < cap; i++)
		while (tab[i].addr && tab[i].kind == TF_FREE && tab[i].t <= upto) {
			erase(i);
			used--;
		}
}

const struct rec_key *rec_keymap_next(size_t *i)
{
	for (; *i < cap; (*i)++)
		if (tab[*i].addr)
			return &tab[(*i)++];
	return NULL;
}

uint64_t rec_keymap_t_max(void)
{
	return t_max;
}

int rec_keymap_broken(void)
{
	return broken;
}
