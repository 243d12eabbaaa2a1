/*
 * fz.h - what the fuzz targets share: turning a fuzzer input into the
 * bytes of a trace file, and putting bytes into files.
 *
 * An input is one mode byte, then the body:
 *   mode bit 0 clear: the body is a trace file, byte for byte (checksums,
 *     LZ4 frames and all: exercises the reader's own checks);
 *   mode bit 0 set: the body is a "packed" trace (fz_pack writes them from
 *     real traces): the file header, then each segment as its 56-byte header
 *     followed by its *decompressed* payload of raw_size bytes. The file
 *     header's crc, each payload's LZ4 frame and each segment header's
 *     frame_size and crc are recomputed, so the mutations reach the payload
 *     decoders instead of dying at a checksum.
 * This code must never trust the input: it only copies and recomputes.
 */
#ifndef HEAPREEL_FZ_H
#define HEAPREEL_FZ_H

#include <stddef.h>
#include <stdint.h>

#define FZ_MODE_PACKED 1u     /* mode byte bit: the body is packed */
/* Separates the trace from the .ring file in the importer target's input. */
#define FZ_RING_MARK "HRFZRING"
#define FZ_RING_MARK_LEN 8

/* Builds the trace file bytes of input [data, data + size) into a malloc'd
 * buffer *out of *len bytes; -1 if out of memory. */
int fz_trace_bytes(const uint8_t *data, size_t size, uint8_t **out,
		   size_t *len);

/* Writes n bytes to a new file at path (0600, O_EXCL): -1 on failure. */
int fz_write_file(const char *path, const void *buf, size_t n);

/* The libFuzzer entry point each target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
