/*
 * tf_entropy.c - the entropy coder of event columns: each 64-bit value is
 * split into a bucket symbol (the value itself below 16, else its bit length
 * and second-highest bit) coded with a per-column canonical Huffman code,
 * followed by the value's remaining low bits verbatim. This is DEFLATE's
 * length/distance scheme; it is what gets a column close to its entropy,
 * which LZ4 alone cannot (it has no entropy stage).
 * FORMAT.md "Column coding" is the specification.
 *
 * The encoder runs on the recorder's writer thread: stack memory only, no
 * allocation, no I/O. The decoder trusts nothing: bad code lengths, codes
 * that name no symbol and reads past the column's end are errors.
 */
#include "tf_internal.h"

#define TF_DIRECT 16            /* values below this are their own symbol */
#define TF_NSYM TF_ENT_NSYM     /* TF_DIRECT + 2 per bit length 5..64 */
#define TF_MAX_LEN TF_ENT_TABLE_BITS  /* longest code: the lookup table's bits */

static unsigned bitlen(uint64_t v)
{
	return 64 - (unsigned)__builtin_clzll(v);
}

static unsigned symbol_of(uint64_t v, unsigned *extra_bits)
{
	if (v < TF_DIRECT) {
		*extra_bits = 0;
		return (unsigned)v;
	}
	unsigned n = bitlen(v);
	*extra_bits = n - 2;
	return TF_DIRECT + 2 * (n - 5) + (unsigned)((v >> (n - 2)) & 1);
}

/* The verbatim low bits that follow symbol s. */
static unsigned extra_of(unsigned s)
{
	return s < TF_DIRECT ? 0 : (s - TF_DIRECT) / 2 + 3;
}

/* ---- code construction (shared) ------------------------------------------ */

/* Huffman code lengths for freq[0..TF_NSYM), none longer than TF_MAX_LEN.
 * Leaves sorted by weight and internal nodes (made in nondecreasing weight
 * order) form two queues, so the tree takes O(m) after an insertion sort of
 * the m used symbols. Frequencies are halved until the tree is shallow
 * enough. */
static void build_lengths(const uint32_t *freq_in, uint8_t *len)
{
	uint32_t freq[TF_NSYM];
	memcpy(freq, freq_in, sizeof freq);
	for (;;) {
		uint64_t w[2 * TF_NSYM];
		int16_t parent[2 * TF_NSYM];
		uint8_t depth[2 * TF_NSYM];
		int leaf[TF_NSYM], m = 0;
		memset(len, 0, TF_NSYM);
		for (int s = 0; s < TF_NSYM; s++) {
			if (!freq[s])
				continue;
			int i = m++;
			for (; i > 0 && freq[leaf[i - 1]] > freq[s]; i--)
				leaf[i] = leaf[i - 1];
			leaf[i] = s;
		}
		if (m == 1)
			len[leaf[0]] = 1;
		if (m <= 1)
			return;
		for (int i = 0; i < m; i++)
			w[i] = freq[leaf[i]];
		int nodes = m, qa = 0, qb = m;  /* fronts of the two queues */
		for (int k = 0; k < m - 1; k++) {
			int pick[2];
			for (int j = 0; j < 2; j++)
				pick[j] = qa < m && (qb >= nodes || w[qa] <= w[qb]) ? qa++ : qb++;
			w[nodes] = w[pick[0]] + w[pick[1]];
			parent[pick[0]] = parent[pick[1]] = (int16_t)nodes;
			nodes++;
		}
		depth[nodes - 1] = 0;   /* the root, made last */
		int maxlen = 0;
		for (int i = nodes - 2; i >= 0; i--) {
			depth[i] = (uint8_t)(depth[parent[i]] + 1);
			if (i < m) {
				len[leaf[i]] = depth[i];
				maxlen = depth[i] > maxlen ? depth[i] : maxlen;
			}
		}
		if (maxlen <= TF_MAX_LEN)
			return;
		for (int s = 0; s < TF_NSYM; s++)
			if (freq[s])
				freq[s] = (freq[s] >> 1) | 1;
	}
}

/* Canonical codes (DEFLATE's rule), bit-reversed for LSB-first packing.
 * Returns -1 if the lengths over-subscribe the code space. */
static int canonical(const uint8_t *len, uint16_t *rev)
{
	unsigned count[TF_MAX_LEN + 1] = { 0 }, next[TF_MAX_LEN + 2];
	for (int s = 0; s < TF_NSYM; s++)
		count[len[s]]++;
	count[0] = 0;
	unsigned code = 0;
	int64_t room = 1;
	for (int l = 1; l <= TF_MAX_LEN; l++) {
		code = (code + count[l - 1]) << 1;
		next[l] = code;
		room = 2 * room - count[l];
		if (room < 0)
			return -1;
	}
	for (int s = 0; s < TF_NSYM; s++) {
		if (!len[s])
			continue;
		unsigned c = next[len[s]]++, r = 0;
		for (int i = 0; i < len[s]; i++)
			r |= ((c >> i) & 1) << (len[s] - 1 - i);
		rev[s] = (uint16_t)r;
	}
	return 0;
}

/* ---- encoder -------------------------------------------------------------- */

struct tf_bw {
	uint8_t *p;
	uint64_t acc;
	unsigned n;
};

static inline void put_bits(struct tf_bw *b, uint64_t bits, unsigned n)
{
	b->acc |= bits << b->n;   /* n <= 32 and b->n < 32 */
	b->n += n;
	if (b->n >= 32) {
		tf_put32(b->p, (uint32_t)b->acc);
		b->p += 4;
		b->acc >>= 32;
		b->n -= 32;
	}
}

size_t tf_ent_bound(size_t n)
{
	/* lengths + per value: longest code and 62 extra bits */
	return TF_VARINT_MAX + TF_NSYM / 2 + 8 + n * ((TF_MAX_LEN + 62 + 7) / 8);
}

size_t tf_ent_plan(const uint64_t *v, size_t n, struct tf_entcode *c)
{
	uint32_t freq[TF_NSYM] = { 0 };
	unsigned extra;
	uint64_t bits = 0;

	for (size_t i = 0; i < n; i++)
		freq[symbol_of(v[i], &extra)]++;
	build_lengths(freq, c->len);
	canonical(c->len, c->rev);
	c->nsym = TF_NSYM;
	while (c->nsym && !c->len[c->nsym - 1])
		c->nsym--;
	for (unsigned s = 0; s < c->nsym; s++)
		bits += (uint64_t)freq[s] * (c->len[s] + extra_of(s));
	/* what tf_ent_write writes: nsym, the lengths two to a byte, the bits */
	uint8_t nsym_bytes[TF_VARINT_MAX];
	return (size_t)(tf_put_varint(nsym_bytes, c->nsym) - nsym_bytes) +
	       (c->nsym + 1) / 2 + (size_t)((bits + 7) / 8);
}

size_t tf_ent_write(const uint64_t *v, size_t n, const struct tf_entcode *c,
		    uint8_t *out)
{
	const uint8_t *len = c->len;
	const uint16_t *rev = c->rev;
	unsigned extra;

	uint8_t *o = tf_put_varint(out, c->nsym);
	for (unsigned s = 0; s < c->nsym; s += 2)
		*o++ = (uint8_t)(len[s] | (s + 1 < c->nsym ? len[s + 1] << 4 : 0));

	struct tf_bw b = { o, 0, 0 };
	for (size_t i = 0; i < n; i++) {
		unsigned s = symbol_of(v[i], &extra);
		uint64_t low = v[i] & ((extra < 64 ? (uint64_t)1 << extra : 0) - 1);
		if (len[s] + extra <= 32) {     /* nearly always: one put */
			put_bits(&b, rev[s] | low << len[s], len[s] + extra);
			continue;
		}
		put_bits(&b, rev[s], len[s]);
		if (extra > 31) {
			put_bits(&b, low & 0x7fffffff, 31);
			low >>= 31;
			extra -= 31;
		}
		put_bits(&b, low, extra);
	}
	while (b.n) {
		*b.p++ = (uint8_t)b.acc;
		b.acc >>= 8;
		b.n = b.n > 8 ? b.n - 8 : 0;
	}
	return (size_t)(b.p - out);
}

/* ---- decoder -------------------------------------------------------------- */

int tf_ent_init(struct tf_entdec *d, const uint8_t *p, size_t size)
{
	const uint8_t *end = p + size;
	uint64_t nsym;
	uint8_t len[TF_NSYM] = { 0 };
	uint16_t rev[TF_NSYM];

	if (tf_get_varint(&p, end, &nsym) < 0 || nsym > TF_NSYM ||
	    (uint64_t)(end - p) < (nsym + 1) / 2)
		return -1;
	for (unsigned s = 0; s < nsym; s++)
		len[s] = (p[s / 2] >> (4 * (s & 1))) & 15;
	p += (nsym + 1) / 2;
	for (unsigned s = 0; s < nsym; s++)
		if (len[s] > TF_MAX_LEN)
			return -1;
	if (canonical(len, rev) < 0)
		return -1;
	memset(d->table, 0, sizeof d->table);
	for (unsigned s = 0; s < nsym; s++)
		for (unsigned f = rev[s]; len[s] && f < (1u << TF_MAX_LEN);
		     f += 1u << len[s])
			d->table[f] = (uint16_t)(s << 4 | len[s]);
	d->p = p;
	d->end = end;
	d->acc = 0;
	d->n = 0;
	d->bits_left = (uint64_t)(end - p) * 8;
	return 0;
}

/* Tops acc up to at least 57 bits: eight bytes at a time while the column
 * has them, then byte by byte, then zeros (take() stops at the real end). */
static inline void refill(struct tf_entdec *d)
{
	if (d->end - d->p >= 8) {
		d->acc |= tf_get64(d->p) << d->n;
		d->p += (63 - d->n) >> 3;
		d->n |= 56;
		return;
	}
	while (d->n <= 56) {
		uint64_t byte = d->p < d->end ? *d->p++ : 0;
		d->acc |= byte << d->n;
		d->n += 8;
	}
}

static inline int take(struct tf_entdec *d, unsigned n, uint64_t *bits)
{
	if (n > d->bits_left)
		return -1;
	*bits = d->acc & ((n < 64 ? (uint64_t)1 << n : 0) - 1);
	d->acc = n < 64 ? d->acc >> n : 0;
	d->n -= n;
	d->bits_left -= n;
	return 0;
}

int tf_ent_get(struct tf_entdec *d, uint64_t *v)
{
	uint64_t bits;
	refill(d);
	uint16_t e = d->table[d->acc & ((1u << TF_MAX_LEN) - 1)];
	if (!(e & 15) || take(d, e & 15, &bits) < 0)
		return -1;
	unsigned s = e >> 4;
	if (s < TF_DIRECT) {
		*v = s;
		return 0;
	}
	unsigned n = (s - TF_DIRECT) / 2 + 5, extra = n - 2;
	uint64_t top = (uint64_t)(2 + ((s - TF_DIRECT) & 1)) << extra, lo = 0, hi;
	refill(d);
	if (extra > 31) {
		if (take(d, 31, &lo) < 0)
			return -1;
		refill(d);
		if (take(d, extra - 31, &hi) < 0)
			return -1;
		lo |= hi << 31;
	} else if (take(d, extra, &lo) < 0) {
		return -1;
	}
	*v = top | lo;
	return 0;
}
