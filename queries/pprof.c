/* pprof.c - the pprof protobuf format (profile.proto, gzipped: .pb.gz),
 * read by Go pprof, speedscope and Pyroscope (heap-formats.md §3).
 *
 * Symbolized: every location carries its lines (inlined chain innermost
 * first) and functions with names and files, so no binary is needed.
 * Values are unbiased (period = the sampling period, or 1); sample types
 * alloc_objects, alloc_space, inuse_objects, inuse_space, in Go's order,
 * inuse_space last and the default. Location address = return address - 1.
 *
 * Never: emit id 0, an index past the string table, or a string table
 * whose entry 0 is not "".
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "qi.h"

/* profile.proto field numbers. */
enum {
	P_SAMPLE_TYPE = 1, P_SAMPLE = 2, P_MAPPING = 3, P_LOCATION = 4, P_FUNCTION = 5,
	P_STRING_TABLE = 6, P_PERIOD_TYPE = 11, P_PERIOD = 12, P_DEFAULT_SAMPLE_TYPE = 14,
	VT_TYPE = 1, VT_UNIT = 2,
	S_LOCATION_ID = 1, S_VALUE = 2,
	M_ID = 1, M_START = 2, M_LIMIT = 3, M_OFFSET = 4, M_FILENAME = 5, M_BUILD_ID = 6,
	M_HAS_FUNCTIONS = 7, M_HAS_FILENAMES = 8, M_HAS_LINE_NUMBERS = 9,
	M_HAS_INLINE_FRAMES = 10,
	L_ID = 1, L_MAPPING_ID = 2, L_ADDRESS = 3, L_LINE = 4,
	LN_FUNCTION_ID = 1, LN_LINE = 2,
	F_ID = 1, F_NAME = 2, F_SYSTEM_NAME = 3, F_FILENAME = 4,
	WIRE_VARINT = 0, WIRE_LEN = 2,
};

/* zlib's windowBits: 15 (32 KiB window) + 16 asks for a gzip wrapper. */
#define GZIP_WINDOW_BITS (15 + 16)
#define GZIP_MEM_LEVEL 8

struct buf { unsigned char *p; size_t n, cap; bool oom; };

static void put(struct buf *b, const void *d, size_t n)
{
	if (!n)                        /* an empty part may have no memory yet */
		return;
	if (b->oom || q_grow(&b->p, &b->cap, b->n + n, 1)) {
		b->oom = true;
		return;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void varint(struct buf *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;
	do {
		t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put(b, t, n);
}

static void field_int(struct buf *b, int field, uint64_t v)
{
	varint(b, (uint64_t)field << 3 | WIRE_VARINT);
	varint(b, v);
}

/* A length-delimited field whose bytes are in sub (sub is then emptied). */
static void field_msg(struct buf *b, int field, struct buf *sub)
{
	varint(b, (uint64_t)field << 3 | WIRE_LEN);
	varint(b, sub->n);
	put(b, sub->p, sub->n);
	b->oom |= sub->oom;
	sub->n = 0;
}

/* ---- the string table and the functions: interned by content ---------- */

struct strtab {
	char **s;
	size_t n, cap;
	struct q_map map;                      /* hash -> first index; chain in next */
	uint32_t *next;
	size_t capnext;
	bool oom;
};

/* FNV-1a over a, a separator, then b. */
static int64_t hash2(const char *a, const char *b)
{
	uint64_t h = 1469598103934665603ull;
	for (; *a; a++)
		h = (h ^ (unsigned char)*a) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (; b && *b; b++)
		h = (h ^ (unsigned char)*b) * 1099511628211ull;
	return (int64_t)(h >> 1);
}

/* Index of the pair (a, b) in tab (b may be NULL: a plain string). */
static uint64_t intern(struct strtab *t, const char *a, const char *b)
{
	int64_t h = hash2(a, b);
	uint32_t k;
	int found = q_map_get(&t->map, h, &k);
	size_t la = strlen(a);
	for (uint32_t i = k; found && i != UINT32_MAX; i = t->next[i])
		if (!strncmp(t->s[i], a, la) && t->s[i][la] == (b ? 1 : 0) &&
		    (!b || !strcmp(t->s[i] + la + 1, b)))
			return i;
	size_t lb = b ? strlen(b) + 1 : 0;
	char *c = malloc(la + lb + 1);
	if (!c || q_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s) ||
	    q_grow(&t->next, &t->capnext, t->n + 1, sizeof *t->next) ||
	    q_map_put(&t->map, h, (uint32_t)t->n)) {
		free(c);
		t->oom = true;
		return 0;
	}
	memcpy(c, a, la + 1);
	if (b) {
		c[la] = 1;                     /* separator that names never contain */
		memcpy(c + la + 1, b, lb);
	}
	t->s[t->n] = c;
	t->next[t->n] = found ? k : UINT32_MAX;
	return t->n++;
}

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->next);
	q_map_free(&t->map);
}

static void value_type(struct buf *out, struct buf *sub, int field, struct strtab *st,
                       const char *type, const char *unit)
{
	field_int(sub, VT_TYPE, intern(st, type, NULL));
	field_int(sub, VT_UNIT, intern(st, unit, NULL));
	field_msg(out, field, sub);
}

/* Mapping id (1-based) of the module holding ip, 0 if none. */
static uint64_t mapping_of(const struct q_module *m, const size_t *order, size_t nx, uint64_t ip)
{
	for (size_t i = 0; i < nx; i++)
		if (ip >= (uint64_t)m[order[i]].start && ip < (uint64_t)m[order[i]].end)
			return i + 1;
	return 0;
}

static int gzip_out(struct q_db *db, const struct buf *b, FILE *f)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, GZIP_WINDOW_BITS,
	                 GZIP_MEM_LEVEL, Z_DEFAULT_STRATEGY) != Z_OK)
		return q_fail(db, "gzip: cannot initialize");
	unsigned char chunk[65536];
	z.next_in = b->p;
	z.avail_in = (uInt)b->n;
	int rc;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof chunk;
		rc = deflate(&z, Z_FINISH);
		fwrite(chunk, 1, sizeof chunk - z.avail_out, f);
	} while (rc == Z_OK || rc == Z_BUF_ERROR);
	deflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : q_fail(db, "gzip: compression failed");
}

int q_write_pb_gz(struct q_db *db, const struct q_profile *p, FILE *f)
{
	long pi = q_proc_index(db, p->pid);
	if (pi < 0)
		return -1;
	struct q_module *m = NULL;
	size_t nm = 0;
	if (q_modules(db, p->pid, &m, &nm))
		return -1;
	struct buf out = { 0 }, sub = { 0 }, sub2 = { 0 };
	struct strtab st = { 0 }, fns = { 0 };
	struct q_map locs = { 0 };             /* ip -> location id */
	size_t *order = malloc((nm + 1) * sizeof *order), nx = 0;
	int rc = 0;
	if (!order) {
		q_modules_free(m, nm);
		return q_fail(db, "out of memory");
	}
	intern(&st, "", NULL);                 /* string_table[0] must be "" */
	/* Executable mappings, the main binary first (Go treats it so). */
	const char *exe = db->procs[pi].exe;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < nm; i++)
			if (strchr(m[i].perms, 'x') && (!strcmp(m[i].path, exe) == (pass == 0)))
				order[nx++] = i;
	value_type(&out, &sub, P_SAMPLE_TYPE, &st, "alloc_objects", "count");
	value_type(&out, &sub, P_SAMPLE_TYPE, &st, "alloc_space", "bytes");
	value_type(&out, &sub, P_SAMPLE_TYPE, &st, "inuse_objects", "count");
	value_type(&out, &sub, P_SAMPLE_TYPE, &st, "inuse_space", "bytes");
	/* Samples, and each location the first time a sample uses it. */
	struct buf locbuf = { 0 }, fnbuf = { 0 }, ids = { 0 };
	const struct q_row **rows = q_sorted_rows(db, p);
	if (!rows)
		rc = -1;
	for (size_t i = 0; !rc && i < p->n; i++) {
		const struct q_frame *fr;
		size_t nf;
		if (q_stack(db, rows[i]->stack_id, &fr, &nf)) {
			rc = -1;
			break;
		}
		struct q_row u;
		q_unbias(rows[i], p->sample_period, &u);
		for (size_t j = 0; j < nf; ) {
			size_t end = q_group_end(fr, nf, j);
			uint32_t id;
			if (!q_map_get(&locs, (int64_t)fr[j].ip, &id)) {
				id = (uint32_t)locs.n + 1;
				if (q_map_put(&locs, (int64_t)fr[j].ip, id))
					out.oom = true;
				struct buf loc = { 0 };
				field_int(&loc, L_ID, id);
				uint64_t mid = mapping_of(m, order, nx, fr[j].ip);
				if (mid)
					field_int(&loc, L_MAPPING_ID, mid);
				field_int(&loc, L_ADDRESS, fr[j].ip - 1);
				for (size_t k = j; k < end; k++) {  /* innermost first */
					size_t nfns = fns.n;
					uint64_t fid = intern(&fns, fr[k].function,
					                      fr[k].file ? fr[k].file : "") + 1;
					if (fns.n > nfns) {
						field_int(&sub2, F_ID, fid);
						uint64_t name = intern(&st, fr[k].function, NULL);
						field_int(&sub2, F_NAME, name);
						field_int(&sub2, F_SYSTEM_NAME, name);
						if (fr[k].file)
							field_int(&sub2, F_FILENAME,
							          intern(&st, fr[k].file, NULL));
						field_msg(&fnbuf, P_FUNCTION, &sub2);
					}
					field_int(&sub2, LN_FUNCTION_ID, fid);
					if (fr[k].line > 0)
						field_int(&sub2, LN_LINE, (uint64_t)fr[k].line);
					field_msg(&loc, L_LINE, &sub2);
				}
				field_msg(&locbuf, P_LOCATION, &loc);
				free(loc.p);
			}
			varint(&ids, id);
			j = end;
		}
		field_msg(&sub, S_LOCATION_ID, &ids);
		static const int order4[] = { Q_ALLOC_OBJECTS, Q_ALLOC_BYTES, Q_INUSE_OBJECTS,
		                              Q_INUSE_BYTES };
		for (int k = 0; k < Q_NVAL; k++)
			varint(&sub2, (uint64_t)u.v[order4[k]]);
		field_msg(&sub, S_VALUE, &sub2);
		field_msg(&out, P_SAMPLE, &sub);
	}
	free(rows);
	for (size_t i = 0; i < nx; i++) {
		const struct q_module *x = &m[order[i]];
		field_int(&sub, M_ID, i + 1);
		field_int(&sub, M_START, (uint64_t)x->start);
		field_int(&sub, M_LIMIT, (uint64_t)x->end);
		field_int(&sub, M_OFFSET, (uint64_t)x->offset);
		field_int(&sub, M_FILENAME, intern(&st, x->path, NULL));
		if (x->build_id && *x->build_id)
			field_int(&sub, M_BUILD_ID, intern(&st, x->build_id, NULL));
		field_int(&sub, M_HAS_FUNCTIONS, 1);
		field_int(&sub, M_HAS_FILENAMES, 1);
		field_int(&sub, M_HAS_LINE_NUMBERS, 1);
		field_int(&sub, M_HAS_INLINE_FRAMES, 1);
		field_msg(&out, P_MAPPING, &sub);
	}
	put(&out, locbuf.p, locbuf.n);
	put(&out, fnbuf.p, fnbuf.n);
	out.oom |= locbuf.oom | fnbuf.oom | ids.oom;
	field_int(&sub, VT_TYPE, intern(&st, "space", NULL));
	field_int(&sub, VT_UNIT, intern(&st, "bytes", NULL));
	uint64_t dflt = intern(&st, "inuse_space", NULL);
	for (size_t i = 0; i < st.n; i++) {   /* the table last: now complete */
		varint(&out, (uint64_t)P_STRING_TABLE << 3 | WIRE_LEN);
		varint(&out, strlen(st.s[i]));
		put(&out, st.s[i], strlen(st.s[i]));
	}
	field_msg(&out, P_PERIOD_TYPE, &sub);
	field_int(&out, P_PERIOD, p->sample_period > 0 ? (uint64_t)p->sample_period : 1);
	field_int(&out, P_DEFAULT_SAMPLE_TYPE, dflt);
	if (!rc && (out.oom || sub.oom || sub2.oom || st.oom || fns.oom))
		rc = q_fail(db, "out of memory");
	if (!rc)
		rc = gzip_out(db, &out, f);
	free(out.p);
	free(sub.p);
	free(sub2.p);
	free(locbuf.p);
	free(ids.p);
	free(fnbuf.p);
	strtab_free(&st);
	strtab_free(&fns);
	q_map_free(&locs);
	free(order);
	q_modules_free(m, nm);
	return rc;
}
