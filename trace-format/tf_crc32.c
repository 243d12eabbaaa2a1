/*
 * tf_crc32.c - CRC-32 (IEEE 802.3 polynomial, reflected, as zlib's crc32)
 * of file and segment headers. Headers are tens of bytes, so a bitwise loop
 * is fast enough and needs no table (and no initialisation race).
 */
#include "tf_internal.h"

#define TF_CRC32_POLY 0xedb88320u /* reversed 0x04c11db7 */

uint32_t tf_crc32(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t c = 0xffffffffu;
	while (len--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (TF_CRC32_POLY & -(c & 1));
	}
	return c ^ 0xffffffffu;
}
