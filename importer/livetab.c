/*
 * livetab.c - the live set of one process: address -> live allocation, an
 * open-addressing table with linear probing and backward-shift deletion (no
 * tombstones, so probes stay short however long the churn). Lookups are in
 * imp.h (inline: one per event). It must never hold a freed block.
 */
#include <stdlib.h>

#include "imp.h"

/* Initial slots: small, as most processes of a many-process run hold few
 * blocks (a table per process is allocated up front); doubling is cheap. */
#define LIVE_MIN_CAP 64

int imp_live_init(struct imp_livetab *t)
{
	t->cap = LIVE_MIN_CAP;
	t->n = 0;
	t->tab = calloc(t->cap, sizeof *t->tab);
	return t->tab ? 0 : -1;
}

void imp_live_free(struct imp_livetab *t)
{
	free(t->tab);
	t->tab = NULL;
	t->cap = t->n = 0;
}

static int grow(struct imp_livetab *t)
{
	struct imp_live *old = t->tab;
	size_t oldcap = t->cap;

	t->cap = oldcap * 2;
	t->tab = calloc(t->cap, sizeof *t->tab);
	if (!t->tab) {
		t->tab = old;
		t->cap = oldcap;
		return -1;
	}
	for (size_t i = 0; i < oldcap; i++) {
		if (old[i].id) {
			size_t j = imp_live_slot(t, old[i].addr);

			while (t->tab[j].id)
				j = (j + 1) & (t->cap - 1);
			t->tab[j] = old[i];
		}
	}
	free(old);
	return 0;
}

int imp_live_insert(struct imp_livetab *t, const struct imp_live *l)
{
	size_t i;

	/* At most 3/4 full: linear probing stays near one probe. */
	if ((t->n + 1) * 4 > t->cap * 3 && grow(t))
		return -1;
	i = imp_live_slot(t, l->addr);
	while (t->tab[i].id)
		i = (i + 1) & (t->cap - 1);
	t->tab[i] = *l;
	t->n++;
	return 0;
}

void imp_live_erase(struct imp_livetab *t, struct imp_live *l)
{
	size_t i = (size_t)(l - t->tab), j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & (t->cap - 1);
		if (!t->tab[j].id)
			break;
		k = imp_live_slot(t, t->tab[j].addr);
		/* Move j into the hole at i unless its home k lies in (i, j]. */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			t->tab[i] = t->tab[j];
			i = j;
		}
	}
	t->tab[i].id = 0;
	t->n--;
}
