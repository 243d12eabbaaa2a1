/*
 * fz_input.c - turns a fuzzer input into the bytes of a trace file (fz.h
 * describes the two modes) and writes files for the targets.
 *
 * It must never read outside the input or trust a length it finds there:
 * every field it uses is clamped to the bytes that are actually left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lz4frame.h>

#include "fz.h"
#include "tf_internal.h"

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static int put(struct buf *b, const void *src, size_t n)
{
	if (n == 0)
		return 0;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
	return 0;
}

/* Appends one segment: header h (56 bytes, fixed up here) and payload raw
 * compressed as the reference writer does (both checksums, content size). */
static int put_segment(struct buf *b, const uint8_t *h, const uint8_t *raw,
		       size_t n)
{
	LZ4F_preferences_t prefs = {
		.frameInfo = {
			.blockChecksumFlag = LZ4F_blockChecksumEnabled,
			.contentChecksumFlag = LZ4F_contentChecksumEnabled,
			.contentSize = n,
		},
	};
	size_t bound = LZ4F_compressFrameBound(n, &prefs);
	uint8_t *out = malloc(TF_SEG_HEADER + bound);
	if (!out)
		return -1;
	size_t flen = LZ4F_compressFrame(out + TF_SEG_HEADER, bound, raw, n,
					 &prefs);
	if (LZ4F_isError(flen)) {
		free(out);
		return -1;
	}
	memcpy(out, h, TF_SEG_HEADER);
	tf_put32(out + 40, (uint32_t)n);
	tf_put32(out + 44, (uint32_t)flen);
	tf_put32(out + 52, tf_crc32(out, TF_SEG_HEADER - 4));
	int rc = put(b, out, TF_SEG_HEADER + flen);
	free(out);
	return rc;
}

/* Packed body -> trace file. */
static int unpack(const uint8_t *p, size_t size, struct buf *b)
{
	const uint8_t *end = p + size;
	size_t hsize = size >= 16 ? tf_get32(p + 12) : size;

	/* The file header, its crc recomputed when it fits in the input. */
	if (hsize < TF_FILE_FIXED + 4 || hsize > size)
		hsize = size < TF_FILE_FIXED ? size : TF_FILE_FIXED;
	if (put(b, p, hsize))
		return -1;
	if (hsize >= TF_FILE_FIXED + 4)
		tf_put32(b->p + hsize - 4, tf_crc32(b->p, hsize - 4));
	p += hsize;
	while ((size_t)(end - p) >= TF_SEG_HEADER) {
		size_t raw = tf_get32(p + 40), left = (size_t)(end - p) - TF_SEG_HEADER;
		if (raw > left)
			raw = left;
		if (put_segment(b, p, p + TF_SEG_HEADER, raw))
			return -1;
		p += TF_SEG_HEADER + raw;
	}
	return put(b, p, (size_t)(end - p));   /* a torn tail stays torn */
}

int fz_trace_bytes(const uint8_t *data, size_t size, uint8_t **out,
		   size_t *len)
{
	struct buf b = {0};
	int rc;

	*out = NULL;
	*len = 0;
	if (size == 0)
		return 0;
	if (data[0] & FZ_MODE_PACKED)
		rc = unpack(data + 1, size - 1, &b);
	else
		rc = put(&b, data + 1, size - 1);
	if (rc) {
		free(b.p);
		return -1;
	}
	*out = b.p;
	*len = b.n;
	return 0;
}

int fz_write_file(const char *path, const void *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0600);
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < n) {
		ssize_t k = write(fd, (const char *)buf + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)k;
	}
	return close(fd);
}
