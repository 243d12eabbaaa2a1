/* map.c - a small int64 -> uint32 hash map (open addressing, linear
 * probing) for stack ids, trie node ids and name hashes: the profile and
 * stack code look keys up millions of times and SQLite must not do it.
 *
 * Never: store the key INT64_MIN (it marks an empty slot).
 */
#include <stdlib.h>
#include <string.h>

#include "qi.h"

#define EMPTY INT64_MIN
#define MIN_CAP 64                     /* first table size, a power of two */

static size_t slot_of(int64_t key, size_t cap)
{
	uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;   /* Fibonacci hashing */
	return (size_t)(h >> 32) & (cap - 1);
}

int q_map_get(const struct q_map *m, int64_t key, uint32_t *val)
{
	if (!m->cap)
		return 0;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			*val = m->vals[i];
			return 1;
		}
		if (m->keys[i] == EMPTY)
			return 0;
	}
}

static int rehash(struct q_map *m, size_t cap)
{
	int64_t *keys = malloc(cap * sizeof *keys);
	uint32_t *vals = malloc(cap * sizeof *vals);
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	for (size_t i = 0; i < cap; i++)
		keys[i] = EMPTY;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] == EMPTY)
			continue;
		size_t j = slot_of(m->keys[i], cap);
		while (keys[j] != EMPTY)
			j = (j + 1) & (cap - 1);
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int q_map_put(struct q_map *m, int64_t key, uint32_t val)
{
	/* Keep the load under 1/2 so probes stay short. */
	if (2 * (m->n + 1) > m->cap && rehash(m, m->cap ? 2 * m->cap : MIN_CAP))
		return -1;
	size_t i = slot_of(key, m->cap);
	while (m->keys[i] != EMPTY && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (m->keys[i] == EMPTY)
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void q_map_clear(struct q_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		m->keys[i] = EMPTY;
	m->n = 0;
}

void q_map_free(struct q_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}
