/*
 * tf_meta.c - the record encoding of the meta stream (stream 0): THREAD,
 * MODULE, MARK, LOST, END, KEYFRAME, KEYEVENT, FORK, COUNTER, SAMPLE, POOL;
 * the decoding of STACK too (traces of version 2 and older; the writer now
 * packs nodes into STACKS records, tf_stacks.c). Each record is a kind
 * byte, a varint body length and the body, so a reader skips kinds (and
 * trailing fields) it does not know. FORMAT.md "Meta segments" is the
 * specification.
 *
 * The encoder runs on the recorder's writer thread: no allocation, no I/O.
 */
#include "tf_internal.h"

#define TF_META_HEAD (1 + TF_VARINT_MAX) /* kind byte + body length */
#define TF_META_FIELDS 9                 /* most varints of a body (KEYEVENT) */

static size_t str_len(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n > TF_MAX_STR ? TF_MAX_STR : n;
}

size_t tf_meta_bound(const struct tf_record *r)
{
	return TF_META_HEAD + TF_META_FIELDS * TF_VARINT_MAX + str_len(r->str) +
	       r->build_id_len + r->values_len;
}

static uint8_t *put_bytes(uint8_t *p, const void *b, size_t n)
{
	p = tf_put_varint(p, n);
	if (n)
		memcpy(p, b, n);
	return p + n;
}

/* The fields KEYFRAME and KEYEVENT begin with: id, sub, t, stream, tid. */
static uint8_t *put_key_head(uint8_t *b, const struct tf_record *r)
{
	b = tf_put_varint(b, r->id);
	b = tf_put_varint(b, r->sub);
	b = tf_put_varint(b, r->t);
	b = tf_put_varint(b, r->stream);
	return tf_put_varint(b, r->tid);
}

int tf_meta_encode(const struct tf_record *r, uint8_t *out, size_t *len,
		   struct tf_error *err)
{
	uint8_t body[TF_META_FIELDS * TF_VARINT_MAX], *b = body;
	const void *tail[2];     /* length-prefixed byte strings after body */
	size_t tail_n[2];
	int ntail = 0;

	switch (r->kind) {
	case TF_THREAD:
		b = tf_put_varint(b, r->tid);
		tail[ntail] = r->str;
		tail_n[ntail++] = str_len(r->str);
		break;
	case TF_MODULE:
		if (r->build_id_len > TF_MAX_BUILD_ID || (r->build_id_len && !r->build_id))
			return tf_fail(err, TF_E_ARG, 0, "build id longer than %u bytes",
				       (uint64_t)TF_MAX_BUILD_ID);
		b = tf_put_varint(b, r->addr);
		b = tf_put_varint(b, r->size);
		b = tf_put_varint(b, r->file_offset);
		b = tf_put_varint(b, r->perms);
		tail[ntail] = r->build_id;
		tail_n[ntail++] = r->build_id_len;
		tail[ntail] = r->str;
		tail_n[ntail++] = str_len(r->str);
		break;
	case TF_MARK:
		b = tf_put_varint(b, r->t);
		tail[ntail] = r->str;
		tail_n[ntail++] = str_len(r->str);
		break;
	case TF_LOST:
		b = tf_put_varint(b, r->t);
		b = tf_put_varint(b, r->count);
		b = tf_put_varint(b, r->size);
		break;
	case TF_END:
		b = tf_put_varint(b, r->t);
		break;
	case TF_FORK:
		b = tf_put_varint(b, r->id);
		b = tf_put_varint(b, r->count);
		b = tf_put_varint(b, r->t);
		break;
	case TF_KEYFRAME:
		b = tf_put_varint(put_key_head(b, r), r->count);
		break;
	case TF_KEYEVENT:
		b = put_key_head(b, r);
		b = tf_put_varint(b, r->addr);
		b = tf_put_varint(b, r->size);
		b = tf_put_varint(b, r->stack);
		b = tf_put_varint(b, r->fn);
		break;
	case TF_COUNTER:
	case TF_POOL:
		if (r->id == 0)
			return tf_fail(err, TF_E_ARG, 0, "counter or pool id 0 is reserved");
		b = tf_put_varint(b, r->id);
		tail[ntail] = r->str;
		tail_n[ntail++] = str_len(r->str);
		break;
	case TF_SAMPLE:
		if (r->id == 0 || r->count > TF_SAMPLE_MAX || (r->values_len && !r->values))
			return tf_fail(err, TF_E_ARG, 0, "sample of more than %u values, or counter id 0",
				       (uint64_t)TF_SAMPLE_MAX);
		b = tf_put_varint(b, r->t);
		b = tf_put_varint(b, r->id);
		tail[ntail] = r->values;
		tail_n[ntail++] = r->values_len;
		break;
	default:
		return tf_fail(err, TF_E_ARG, 0, "record kind %u is not a meta record",
			       (uint64_t)r->kind);
	}

	size_t blen = (size_t)(b - body), total = blen;
	uint8_t tmp[TF_VARINT_MAX];
	for (int k = 0; k < ntail; k++)
		total += (size_t)(tf_put_varint(tmp, tail_n[k]) - tmp) + tail_n[k];
	uint8_t *o = out;
	*o++ = r->kind;
	o = tf_put_varint(o, total);
	memcpy(o, body, blen);
	o += blen;
	for (int k = 0; k < ntail; k++)
		o = put_bytes(o, tail[k], tail_n[k]);
	*len = (size_t)(o - out);
	return TF_OK;
}

/* ---- decoding ---------------------------------------------------------- */

struct tf_mcur {
	const uint8_t *p, *end;
	char *str;               /* where the next copied string goes */
};

static int get_u(struct tf_mcur *c, uint64_t *v)
{
	return tf_get_varint(&c->p, c->end, v);
}

static int get_u32(struct tf_mcur *c, uint32_t *v)
{
	uint64_t x;
	if (get_u(c, &x) < 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int get_u8(struct tf_mcur *c, uint8_t *v)
{
	uint64_t x;
	if (get_u(c, &x) < 0 || x > UINT8_MAX)
		return -1;
	*v = (uint8_t)x;
	return 0;
}

static int get_key_head(struct tf_mcur *c, struct tf_record *r)
{
	return get_u32(c, &r->id) || get_u8(c, &r->sub) || get_u(c, &r->t) ||
	       get_u32(c, &r->stream) || get_u32(c, &r->tid) ? -1 : 0;
}

/* Copies a length-prefixed byte string, NUL-terminated, into c->str. */
static int get_bytes(struct tf_mcur *c, const char **s, uint32_t *n)
{
	uint64_t len;
	if (get_u(c, &len) < 0 || len > (uint64_t)(c->end - c->p))
		return -1;
	memcpy(c->str, c->p, len);
	c->str[len] = '\0';
	*s = c->str;
	c->str += len + 1;
	c->p += len;
	if (n)
		*n = (uint32_t)len;
	return 0;
}

size_t tf_sample_pack(uint8_t *out, const uint64_t *v, uint32_t n)
{
	uint8_t *p = out;
	for (uint32_t i = 0; i < n; i++)
		p = tf_put_varint(p, v[i]);
	return (size_t)(p - out);
}

uint32_t tf_sample_unpack(const struct tf_record *r, uint64_t *v)
{
	const uint8_t *p = r->values, *end = p + r->values_len;
	uint32_t n = 0;
	while (n < TF_SAMPLE_MAX && p < end && tf_get_varint(&p, end, &v[n]) == 0)
		n++;
	return n;
}

/* A SAMPLE's values: whole varints, at most TF_SAMPLE_MAX of them. */
static int get_values(struct tf_mcur *c, struct tf_record *r)
{
	const char *s;
	if (get_bytes(c, &s, &r->values_len) < 0)
		return -1;
	r->values = (const uint8_t *)s;
	const uint8_t *p = r->values, *end = p + r->values_len;
	uint64_t v;
	for (r->count = 0; p < end; r->count++)
		if (r->count == TF_SAMPLE_MAX || tf_get_varint(&p, end, &v) < 0)
			return -1;
	return 0;
}

/* Decodes the fields this version knows; -1 if the body ends early. */
static int body(struct tf_mcur *c, struct tf_record *r)
{
	const char *bid;
	int bad = 0;
	switch (r->kind) {
	case TF_STACK:
		bad = get_u32(c, &r->id) || get_u32(c, &r->parent) || get_u(c, &r->ip);
		break;
	case TF_THREAD:
		bad = get_u32(c, &r->tid) || get_bytes(c, &r->str, NULL);
		break;
	case TF_MODULE:
		bad = get_u(c, &r->addr) || get_u(c, &r->size) ||
		      get_u(c, &r->file_offset) || get_u32(c, &r->perms) ||
		      get_bytes(c, &bid, &r->build_id_len) ||
		      get_bytes(c, &r->str, NULL);
		if (!bad)
			r->build_id = r->build_id_len ? (const uint8_t *)bid : NULL;
		break;
	case TF_MARK:
		bad = get_u(c, &r->t) || get_bytes(c, &r->str, NULL);
		break;
	case TF_LOST:
		bad = get_u(c, &r->t) || get_u(c, &r->count) ||
		      (c->p < c->end && get_u(c, &r->size)); /* total: since version 1's recorders */
		break;
	case TF_END:
		bad = get_u(c, &r->t);
		break;
	case TF_FORK:
		bad = get_u32(c, &r->id) || get_u(c, &r->count) || get_u(c, &r->t);
		break;
	case TF_KEYFRAME:
		bad = get_key_head(c, r) || get_u(c, &r->count);
		break;
	case TF_KEYEVENT:
		bad = get_key_head(c, r) || get_u(c, &r->addr) || get_u(c, &r->size) ||
		      get_u32(c, &r->stack) || get_u8(c, &r->fn);
		break;
	case TF_COUNTER:
	case TF_POOL:
		bad = get_u32(c, &r->id) || r->id == 0 || get_bytes(c, &r->str, NULL);
		break;
	case TF_SAMPLE:
		bad = get_u(c, &r->t) || get_u32(c, &r->id) || r->id == 0 || get_values(c, r);
		break;
	}           /* other kinds: of a newer version, skipped by length */
	return bad ? -1 : 0;
}

/* A STACKS body: its nodes become records recs[i..], *i moves past them. */
static int stacks(const struct tf_segment_info *si, const uint8_t *p, size_t len,
		  struct tf_record *recs, uint32_t *i, struct tf_stkmodel *m)
{
	uint32_t n;
	if (tf_stacks_decode(m, p, len, recs + *i, si->count - *i, &n) < 0)
		return -1;
	for (uint32_t k = 0; k < n; k++)
		recs[*i + k].seq = si->first_seq + *i + k;
	*i += n;
	return 0;
}

int tf_meta_decode(const struct tf_segment_info *si, const uint8_t *p,
		   size_t len, struct tf_record *recs, char *strbuf,
		   struct tf_stkmodel *m, struct tf_error *err)
{
	const uint8_t *end = p + len;
	struct tf_mcur c = { .str = strbuf };
	for (uint32_t i = 0; i < si->count;) {
		struct tf_record *r = &recs[i];
		uint64_t blen;
		memset(r, 0, sizeof *r);
		if (p >= end)
			return tf_fail(err, TF_E_CORRUPT, si->offset,
				       "meta segment: record %u missing", (uint64_t)i);
		uint8_t kind = *p++;
		if (tf_get_varint(&p, end, &blen) < 0 ||
		    blen > (uint64_t)(end - p))
			return tf_fail(err, TF_E_CORRUPT, si->offset,
				       "meta segment: record %u: bad length",
				       (uint64_t)i);
		if (kind == TF_META_STACKS) {
			if (stacks(si, p, (size_t)blen, recs, &i, m) < 0)
				return tf_fail(err, TF_E_CORRUPT, si->offset,
					       "meta segment: stacks record %u: bad body",
					       (uint64_t)i);
			p += blen;
			continue;
		}
		r->kind = kind;
		r->seq = si->first_seq + i;
		c.p = p;
		c.end = p + blen;
		if (body(&c, r) < 0)
			return tf_fail(err, TF_E_CORRUPT, si->offset,
				       "meta segment: %s record %u: bad body",
				       tf_kind_name(r->kind), (uint64_t)i);
		p += blen;   /* fields added by newer versions are skipped */
		i++;
	}
	return TF_OK;
}
