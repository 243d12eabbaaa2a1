/* kind.c - what kind of memory a profile's stacks hold (heap blocks, the
 * program's anonymous mappings, a custom allocator's blocks: schema.sql
 * allocations.kind), for trace-snap --kind and the text output's split.
 *
 * A stack's rows are all of one kind (a call site calls either the
 * allocator or mmap), so a profile, a sum per stack, splits by stack
 * exactly. The stacks that are not heap's are few and come whole from a
 * partial index, once per handle.
 * Never: scan the allocations table, or call a stack of an older database
 * (no kind column) anything but heap.
 */
#include <string.h>

#include "qi.h"

static const char *const kind_names[Q_NKINDS] = {
	[Q_KIND_HEAP] = "heap", [Q_KIND_MMAP] = "mmap", [Q_KIND_CUSTOM] = "custom",
};

int q_kind_parse(const char *name, unsigned *mask)
{
	if (!strcmp(name, "all")) {
		*mask = Q_KINDS_ALL;
		return 0;
	}
	for (unsigned k = 0; k < Q_NKINDS; k++)
		if (!strcmp(name, kind_names[k])) {
			*mask = 1u << k;
			return 0;
		}
	return -1;
}

const char *q_kind_name(unsigned kind)
{
	return kind < Q_NKINDS ? kind_names[kind] : "unknown";
}

/* Databases imported before the column existed hold heap blocks only. */
static bool has_kinds(struct q_db *db)
{
	return sqlite3_table_column_metadata(db->sql, NULL, "allocations", "kind", NULL, NULL,
	                                     NULL, NULL, NULL) == SQLITE_OK;
}

int q_load_kinds(struct q_db *db)
{
	if (db->kinds_loaded)
		return 0;
	if (has_kinds(db)) {
		sqlite3_stmt *s = q_stmt(db, Q_ST_STACK_KINDS);
		int rc;
		if (!s)
			return -1;
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			int64_t kind = sqlite3_column_int64(s, 0);
			if (kind <= 0 || kind >= Q_NKINDS)
				return q_fail(db, "%s: allocations.kind %lld is no kind this version knows",
				              db->path, (long long)kind);
			if (q_map_put(&db->kinds, sqlite3_column_int64(s, 1), (uint32_t)kind))
				return q_fail(db, "out of memory");
		}
		if (rc != SQLITE_DONE)
			return q_sqlfail(db, "reading the stacks' kinds");
	}
	db->kinds_loaded = true;
	return 0;
}

unsigned q_kind_of(const struct q_db *db, int64_t stack)
{
	uint32_t k;
	return q_map_get(&db->kinds, stack, &k) ? k : Q_KIND_HEAP;
}

int q_keep_kinds(struct q_db *db, struct q_profile *p, unsigned mask)
{
	p->kinds = mask;
	if (mask == Q_KINDS_ALL)
		return 0;
	if (q_load_kinds(db))
		return -1;
	size_t w = 0;
	for (size_t i = 0; i < p->n; i++)
		if (mask & (1u << q_kind_of(db, p->rows[i].stack_id)))
			p->rows[w++] = p->rows[i];
	p->n = w;
	return 0;
}

int q_kind_totals(struct q_db *db, const struct q_profile *p, int key, int64_t tot[Q_NKINDS])
{
	if (q_load_kinds(db))
		return -1;
	memset(tot, 0, Q_NKINDS * sizeof *tot);
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		tot[q_kind_of(db, p->rows[i].stack_id)] += u.v[key];
	}
	return db->kinds.n > 0;
}
