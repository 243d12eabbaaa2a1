/* frees.c - the frees of free_blocks (schema.sql): free number id, from
 * the row that packs it. A row is decoded whole, once, into the handle's
 * one cached block: a snapshot reads its frees in order, and a
 * bisection's last probes fall in one row.
 *
 * Never: read past a row's bytes or trust its count (a damaged database
 * is an error naming the row, not a crash). Free numbers run 1 ...
 * meta.frees, each row but the last holding meta.free_block of them.
 */
#include <stdlib.h>

#include "qi.h"
#include "tf_varint.h"

static int damaged(struct q_db *db, int64_t row)
{
	return q_fail(db, "%s: free_blocks row %lld is damaged", db->path, (long long)row);
}

/* Decodes row into the cache: 1, 0 if there is no such row, -1 error. */
static int load(struct q_db *db, int64_t row)
{
	struct q_frees *c = &db->frees;
	if (!c->f && !(c->f = malloc((size_t)c->per_row * sizeof *c->f)))
		return q_fail(db, "out of memory");
	sqlite3_stmt *s;
	int rc = q_row1(db, Q_ST_FREE_BLOCK, row, &s, "reading free_blocks");
	if (rc <= 0)
		return rc;
	const uint8_t *p = sqlite3_column_blob(s, 0);
	size_t len = (size_t)sqlite3_column_bytes(s, 0);
	const uint8_t *end = len ? p + len : p;  /* an empty blob is NULL */
	uint64_t prev = 0;
	uint32_t n = 0;
	c->row = -1;                           /* until the whole row is in */
	while (p < end) {
		uint64_t zz, size, stack, proc;
		if (n == c->per_row || tf_get_varint(&p, end, &zz) ||
		    tf_get_varint(&p, end, &size) || tf_get_varint(&p, end, &stack) ||
		    tf_get_varint(&p, end, &proc))
			return damaged(db, row);
		prev += (uint64_t)tf_unzigzag(zz);       /* wraps as int64 */
		c->f[n++] = (struct q_free){ (int64_t)prev, (int64_t)size, (int64_t)stack,
		                             (int64_t)proc };
	}
	sqlite3_reset(s);
	c->row = row;
	c->n = n;
	return 1;
}

int q_free_get(struct q_db *db, int64_t id, const struct q_free **f)
{
	struct q_frees *c = &db->frees;
	if (id < 1 || id > c->total)
		return 0;
	int64_t row = (id - 1) / c->per_row;
	uint32_t i = (uint32_t)((id - 1) % c->per_row);
	if (row != c->row) {
		int rc = load(db, row);
		if (rc <= 0)
			return rc ? rc : damaged(db, row);   /* missing, yet meta counts it */
	}
	if (i >= c->n)
		return damaged(db, row);       /* short of frees the meta counts */
	*f = &c->f[i];
	return 1;
}
