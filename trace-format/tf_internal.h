/*
 * tf_internal.h - what the trace-format library's files share and nobody
 * else may see: on-disk constants, little-endian helpers, the error
 * helper, and the entry points of the record encodings.
 *
 * Everything here must stay free of allocation and I/O: the writer runs
 * inside a traced process, so the helpers it uses may only touch memory the
 * caller hands them.
 */
#ifndef HEAPREEL_TF_INTERNAL_H
#define HEAPREEL_TF_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "trace_format.h"
#include "tf_varint.h"

/* ---- on-disk constants (FORMAT.md) ----------------------------------- */
#define TF_FILE_FIXED 64                 /* fixed part of the file header */
#define TF_FILE_MAX_HEADER (1u << 20)    /* a reader refuses larger headers */
#define TF_MAX_STR 65536                 /* longest string stored (exe, cmdline,
                                            names, paths); longer ones are cut */
#define TF_MAX_BUILD_ID 255              /* GNU build ids are 20 bytes; cap */

#define TF_SEG_MAGIC 0x47535248u         /* "HRSG" little-endian */
#define TF_SEG_HEADER 56                 /* bytes of a segment header */
#define TF_SEG_MAX_RAW (64u << 20)       /* a reader refuses larger payloads */
/* Records per segment a reader accepts (bounds its memory); writers stay
 * far below: TF_SEG_EVENTS + 1 events, or a 256 KiB meta queue. */
#define TF_SEG_MAX_RECORDS (1u << 18)
/* Every record costs at least two bits of payload (its KIND and DT codes,
 * or two bytes of a meta record), so count <= 4 * raw_size. */
#define TF_SEG_RECORDS_PER_BYTE 4

/* An event segment holds at most this many events: large enough that the
 * in-segment address references and the Huffman tables pay off (a free
 * usually names an allocation of the same segment), small enough that a
 * torn tail loses little and the writer's buffers stay a few MiB. */
#define TF_SEG_EVENTS TF_SEGMENT_EVENTS

/* The meta queue is written out as a segment when it would overflow. */
#define TF_META_QUEUE (256u << 10)

/* Column tags of an event segment (FORMAT.md "Event segments"). */
enum tf_col {
	TF_COL_KIND = 1,   /* 1 byte per record: enum tf_kind */
	TF_COL_DT = 2,     /* every record: time code (t - previous time) */
	TF_COL_FN = 3,     /* ALLOC, REALLOC: 1 byte enum tf_fn */
	TF_COL_SIZE = 4,   /* ALLOC, REALLOC: size code */
	TF_COL_STACK = 5,  /* ALLOC, REALLOC: stack code */
	TF_COL_ADDR = 6,   /* ALLOC, REALLOC new block: allocation address code */
	TF_COL_FADDR = 7,  /* FREE, REALLOC old block: free address code */
	TF_COL_DT2 = 8,    /* REALLOC: time code (t2 - t) */
	TF_COL_RAW = 9,    /* escaped 64-bit values, in record order */
	TF_COL_DTC = 10,   /* every record, instead of DT: t against the time
	                      context of (previous stack, stack) */
	TF_COL_POOL = 11,  /* ALLOC of a custom fn: its pool id */
	TF_COL_COUNT = 12  /* one past the last tag */
};

/* ---- little-endian fixed-width integers ------------------------------ */
static inline void tf_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void tf_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t tf_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t tf_get64(const uint8_t *p)
{
	return (uint64_t)tf_get32(p) | (uint64_t)tf_get32(p + 4) << 32;
}


/* ---- errors ------------------------------------------------------------ */
/* Fills err (if not NULL) and returns status. fmt knows only "%s" (a
 * string) and "%u" (a uint64_t); it never allocates, so the writer may use
 * it inside a traced process. */
int tf_fail(struct tf_error *err, int status, uint64_t offset,
	    const char *fmt, ...);

/* CRC-32 (IEEE 802.3, as zlib) of the file and segment headers. */
uint32_t tf_crc32(const void *data, size_t len);

/* ---- column entropy coding (tf_entropy.c) --------------------------------- */
#define TF_ENT_TABLE_BITS 12    /* longest Huffman code = lookup table index */

struct tf_entdec {
	const uint8_t *p, *end;
	uint64_t acc;            /* bits not yet consumed, LSB first */
	unsigned n;              /* valid bits in acc */
	uint64_t bits_left;      /* bits of the column not yet consumed */
	uint16_t table[1u << TF_ENT_TABLE_BITS]; /* symbol << 4 | code length */
};

#define TF_ENT_NSYM (16 + 2 * 60) /* symbols: values 0..15, 2 per bit length 5..64 */

struct tf_entcode {              /* a column's canonical Huffman code */
	uint8_t len[TF_ENT_NSYM];
	uint16_t rev[TF_ENT_NSYM];   /* codes, bit-reversed for LSB-first packing */
	unsigned nsym;           /* symbols up to the last one used */
};

/* Worst-case bytes of tf_ent_write for n values. */
size_t tf_ent_bound(size_t n);
/* The code for v[0..n); returns the exact bytes tf_ent_write will write,
 * so a caller can choose between codings before writing one. */
size_t tf_ent_plan(const uint64_t *v, size_t n, struct tf_entcode *c);
/* Codes v[0..n) into out with c (code lengths, then the bit stream);
 * returns the bytes written. No allocation. */
size_t tf_ent_write(const uint64_t *v, size_t n, const struct tf_entcode *c,
		    uint8_t *out);
/* Prepares reading a column of len bytes; -1 if its code is invalid. */
int tf_ent_init(struct tf_entdec *d, const uint8_t *p, size_t len);
/* Next value; -1 at the column's end or on an invalid code. */
int tf_ent_get(struct tf_entdec *d, uint64_t *v);

/* Zeroed anonymous memory, NULL if none; populate: every page in place at
 * once. The encoder's memory comes from here, never from malloc
 * (tf_segenc_new says why). */
static inline void *tf_map(size_t bytes, int populate)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- event segment encoding (tf_columns.c) ------------------------------ */
struct tf_colenc;

/* Allocates an encoder for up to TF_SEG_EVENTS records, with mmap only
 * (tf_segenc_new says why); NULL if out of memory. */
struct tf_colenc *tf_colenc_new(void);
void tf_colenc_free(struct tf_colenc *e);
/* Worst-case payload bytes for n records. */
size_t tf_colenc_bound(size_t nrec);

/* Encodes records made of events ev[0..n) (REALLOC pairs already checked)
 * into out; returns the payload length. t_first/t_last receive the smallest
 * and largest time. */
size_t tf_colenc_encode(struct tf_colenc *e, const struct tf_event *ev,
			size_t n, uint8_t *out, uint64_t *t_first,
			uint64_t *t_last);

struct tf_coldec;
struct tf_coldec *tf_coldec_new(void);
void tf_coldec_free(struct tf_coldec *d);
/* Decodes a payload of si->count records into recs. Returns TF_OK or
 * TF_E_CORRUPT / TF_E_NOMEM with a message in err (offset = seg start). */
int tf_coldec_decode(struct tf_coldec *d, const struct tf_segment_info *si,
		     const uint8_t *p, size_t len, struct tf_record *recs,
		     struct tf_error *err);

/* ---- runs of stack nodes: the STACKS meta record (tf_stacks.c) ---------- */
#define TF_META_STACKS 17        /* on-disk kind; readers hand out its nodes
                                    as TF_STACK records */
/* Nodes per STACKS record: long enough for its model to learn the program's
 * call sites, short enough that a worst-case record (tf_stkrun_bound) fits
 * in the meta queue. */
#define TF_STACKS_MAX 8192

struct tf_stkrun;     /* the writer's run of nodes being gathered */
struct tf_stkmodel;   /* a decoder's model */

/* Mapped with mmap (tf_segenc_new says why); NULL if out of memory. */
struct tf_stkrun *tf_stkrun_new(void);
void tf_stkrun_free(struct tf_stkrun *s);
uint32_t tf_stkrun_count(const struct tf_stkrun *s);
/* Appends STACK record r to the run; -1 if it does not continue the run
 * (full, or r->id not the next id): encode the run first. */
int tf_stkrun_add(struct tf_stkrun *s, const struct tf_record *r);
/* Worst-case bytes of the run's STACKS record. */
size_t tf_stkrun_bound(const struct tf_stkrun *s);
/* Writes the run as one STACKS record (kind, length, body) at out, empties
 * the run and returns the bytes written. */
size_t tf_stkrun_encode(struct tf_stkrun *s, uint8_t *out);

struct tf_stkmodel *tf_stkmodel_new(void);
void tf_stkmodel_free(struct tf_stkmodel *m);
/* Decodes a STACKS body of len bytes into at most room STACK records
 * (recs[0..*n), seq left 0); -1 if it is corrupt or holds more. */
int tf_stacks_decode(struct tf_stkmodel *m, const uint8_t *p, size_t len,
		     struct tf_record *recs, uint32_t room, uint32_t *n);

/* ---- meta records (tf_meta.c) ------------------------------------------ */
/* Worst-case encoded size of r. */
size_t tf_meta_bound(const struct tf_record *r);
/* Checks r (TF_E_ARG with a message) and encodes it at out; *len gets the
 * bytes written. */
int tf_meta_encode(const struct tf_record *r, uint8_t *out, size_t *len,
		   struct tf_error *err);
/* Decodes si->count meta records from p (a STACKS record counts as its
 * nodes, decoded with m); strings and build ids are copied to strbuf (at
 * least len + count bytes). */
int tf_meta_decode(const struct tf_segment_info *si, const uint8_t *p,
		   size_t len, struct tf_record *recs, char *strbuf,
		   struct tf_stkmodel *m, struct tf_error *err);

#endif
