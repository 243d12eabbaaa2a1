/*
 * tf_varint.h - LEB128 varints (7 bits per byte, low group first) and
 * zigzag, as the trace format writes them (FORMAT.md). Public, header-only:
 * the importer packs its database blobs (free_blocks, checkpoint spills)
 * the same way and the queries read them back, so every stage encodes and
 * checks a varint with this one code.
 *
 * Must never: read at or past end, or accept a varint of more than 64 bits
 * (a damaged input is an error, never a wrong value).
 */
#ifndef HEAPREEL_TF_VARINT_H
#define HEAPREEL_TF_VARINT_H

#include <stdint.h>

#define TF_VARINT_MAX 10 /* bytes of the longest 64-bit varint */

static inline uint8_t *tf_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Reads one varint from [*p, end). Returns 0 and advances *p, or -1 if the
 * input ends or the varint is longer than 64 bits. */
static inline int tf_get_varint(const uint8_t **p, const uint8_t *end,
				uint64_t *v)
{
	const uint8_t *q = *p;
	uint64_t x = 0;
	for (unsigned shift = 0; q < end && shift < 64; shift += 7) {
		uint8_t b = *q++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (shift == 63 && b > 1)
				return -1;     /* the tenth byte holds bit 63 only */
			*p = q;
			*v = x;
			return 0;
		}
	}
	return -1;
}

static inline uint64_t tf_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t tf_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
