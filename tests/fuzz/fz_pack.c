/*
 * fz_pack.c - writes the packed form (fz.h) of a trace, to seed the fuzz
 * corpus with real traces whose payloads the fuzzer can mutate directly:
 *
 *   fz_pack TRACE OUT     (OUT = mode byte 1, header, segment headers
 *                          each followed by its decompressed payload)
 *
 * A tool for building the corpus, never part of a test: it trusts its
 * input (a trace our writer made) and exits on the first problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>

#include "fz.h"
#include "tf_internal.h"

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "fz_pack: %s\n", what);
	exit(1);
}

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) || !(p = malloc((size_t)len + 1)) ||
	    fread(p, 1, (size_t)len, f) != (size_t)len)
		die("cannot read the trace");
	fclose(f);
	*n = (size_t)len;
	return p;
}

int main(int argc, char **argv)
{
	LZ4F_dctx *dc;
	size_t n, at;
	uint8_t *t, mode = FZ_MODE_PACKED;
	FILE *out;

	if (argc != 3)
		die("usage: fz_pack TRACE OUT");
	t = slurp(argv[1], &n);
	if (n < TF_FILE_FIXED || (at = tf_get32(t + 12)) > n ||
	    LZ4F_isError(LZ4F_createDecompressionContext(&dc, LZ4F_VERSION)) ||
	    !(out = fopen(argv[2], "wbx")))
		die("bad trace or cannot create OUT");
	fwrite(&mode, 1, 1, out);
	fwrite(t, 1, at, out);
	while (n - at >= TF_SEG_HEADER) {
		size_t raw = tf_get32(t + at + 40), flen = tf_get32(t + at + 44);
		size_t in = flen, got = raw;
		uint8_t *p = malloc(raw + 1);

		if (!p || flen > n - at - TF_SEG_HEADER)
			die("torn segment");
		LZ4F_resetDecompressionContext(dc);
		if (LZ4F_isError(LZ4F_decompress(dc, p, &got, t + at + TF_SEG_HEADER,
						 &in, NULL)) || got != raw)
			die("bad LZ4 frame");
		fwrite(t + at, 1, TF_SEG_HEADER, out);
		fwrite(p, 1, raw, out);
		free(p);
		at += TF_SEG_HEADER + flen;
	}
	LZ4F_freeDecompressionContext(dc);
	free(t);
	return fclose(out) ? 1 : 0;
}
