/*
 * trace_format.h - the public face of heapreel's trace format: the one
 * contract between the recorder (which writes traces) and the importer and
 * trace-dump (which read them). The byte layout is specified in FORMAT.md.
 *
 * A trace file is a header followed by self-contained segments. Each segment
 * carries the records of one stream and is one LZ4 frame with checksums, so a
 * torn or corrupted segment is detected and everything before it still reads.
 *
 * Streams: stream 0 is the meta stream (STACK, THREAD, MODULE, MARK, LOST,
 * END, FORK, COUNTER, SAMPLE records; not time-ordered, readers load it
 * whole). Every other stream
 * is the event stream of one thread: ALLOC, FREE, REALLOC in the thread's
 * program order, so its times never decrease.
 *
 * Times are nanoseconds of CLOCK_MONOTONIC since the header's t0_mono_ns.
 * Ordering rule: an ALLOC is timestamped after the real allocator returned,
 * a FREE before the real free runs; a REALLOC carries both instants. At equal
 * times a reader orders frees before allocations.
 *
 * This library never prints; every function returns a status and, on error,
 * fills a struct tf_error naming the byte offset and what is wrong.
 */
#ifndef HEAPREEL_TRACE_FORMAT_H
#define HEAPREEL_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TF_VERSION 3 /* bumped on any incompatible change of FORMAT.md (2: mappings,
                        3: STACKS records) */

/* ---- status codes ------------------------------------------------------ */
enum tf_status {
	TF_OK = 0,
	TF_DONE = 1,           /* iteration finished (not an error) */
	TF_E_IO = -1,          /* read/write failed: errno is in tf_error.sys_errno */
	TF_E_MAGIC = -2,       /* not a heapreel trace */
	TF_E_VERSION = -3,     /* written by a newer, incompatible version */
	TF_E_TRUNCATED = -4,   /* file ends inside a header or segment */
	TF_E_CORRUPT = -5,     /* checksum or structure check failed */
	TF_E_NOMEM = -6,
	TF_E_ARG = -7,         /* caller passed something out of range */
};

struct tf_error {
	uint64_t offset;       /* byte offset in the file where the problem is */
	int sys_errno;         /* for TF_E_IO, else 0 */
	char msg[160];         /* one line, no file name, no trailing newline */
};

/* ---- times (tf_time.c) ---------------------------------------------------
 * The one time grammar of every command (README "Times"). */

/* A decimal number at s ("12", "1.5", ".5"; its digits read as one integer
 * must fit an int64, at most 18 decimals): *mant = that integer, *decimals
 * = how many digits follow the point. Returns where the number ends, NULL
 * if s does not start with one. */
const char *tf_parse_decimal(const char *s, int64_t *mant, int *decimals);
/* 10^k for 0 <= k <= 18. */
int64_t tf_pow10(int k);
/* A duration, the whole of s: a decimal number with a unit ns, us, ms, s,
 * m, h, or none (seconds), into exact nanoseconds (fractions of a
 * nanosecond truncated). 0, or -1 if malformed or beyond INT64_MAX ns. */
int tf_parse_duration(const char *s, int64_t *ns);

/* ---- record kinds ---------------------------------------------------------
 * Numbers are on disk: never reuse one. A reader skips kinds it does not
 * know (meta records are length-prefixed, event fields of a new kind live in
 * columns of their own: FORMAT.md) and returns them with only kind, stream,
 * seq and t set. */
enum tf_kind {
	TF_ALLOC = 1,
	TF_FREE = 2,
	TF_REALLOC = 3,
	TF_STACK = 4,          /* one trie node: id, parent, ip */
	TF_THREAD = 5,         /* tid, name */
	TF_MODULE = 6,         /* one executable mapping of a loaded object */
	TF_MARK = 7,           /* a labelled instant (rec_mark, trace-ctl mark) */
	TF_LOST = 8,           /* count of events dropped (drop mode, write errors) */
	TF_END = 9,            /* clean end of the trace: last record written */
	TF_KEYFRAME = 10,      /* bounded recording: begin, cut or end of a keyframe */
	TF_PAUSE = 11,         /* reserved: recording stopped / started */
	TF_KEYEVENT = 12,      /* bounded recording: one event of a keyframe's set */
	TF_FORK = 13,          /* a forked child's trace: its parent's trace, the fork's instant */
	TF_COUNTER = 14,       /* a counter's name: id, name (before its first SAMPLE) */
	TF_SAMPLE = 15,        /* counter values at an instant: t, first counter id, values */
	TF_POOL = 16,          /* a custom allocator's pool: id (>= 1), name (rec_pool_create) */
	/* 17: STACKS on disk, a run of STACK nodes; readers hand out TF_STACK */
};

/* A SAMPLE holds at most this many values (readers refuse more): the
 * counters of counters first, first + 1, ... at t, packed as varints. */
#define TF_SAMPLE_MAX 256

/* A keyframe (bounded traces, FORMAT.md "Bounded traces") is, in meta
 * records written in this order: KEYFRAME BEGIN; the trie nodes, modules and
 * threads again; KEYEVENT records (the latest event the writer had applied
 * of every address: its live blocks, and frees it cannot forget yet); one
 * KEYFRAME CUT per stream (how many of its events the set includes); and
 * KEYFRAME END with the time from which replay is exact. */
enum tf_key_phase { TF_KEY_BEGIN = 0, TF_KEY_CUT = 1, TF_KEY_END = 2 };

/* MARK labels the recorder writes for itself start with TF_MARK_RESERVED
 * (heapreel.stats, heapreel.start, heapreel.stop); TF_MARK_SAMPLE followed by
 * a number is the sampling period set at run time, before anything was
 * recorded, which readers prefer over the header's. */
#define TF_MARK_RESERVED "heapreel."
#define TF_MARK_SAMPLE TF_MARK_RESERVED "sample="
/* Recording of allocations stopped (rec_stop, trace-ctl stop, REC_PAUSED)
 * and started again: blocks allocated between are unknown to the trace. */
#define TF_MARK_STOP TF_MARK_RESERVED "stop"
#define TF_MARK_START TF_MARK_RESERVED "start"
/* The first custom allocator call (rec.h) the recorder did not record
 * because the trace is sampled or bounded: custom blocks are missing from
 * that instant on (README "Custom allocators"). */
#define TF_MARK_CUSTOM_UNRECORDED TF_MARK_RESERVED "custom-unrecorded"
/* The instant of the first anonymous mapping a trace does not hold because
 * it is sampled or bounded: mappings are missing from that instant on
 * (README "Mappings"). */
#define TF_MARK_MMAP_UNRECORDED TF_MARK_RESERVED "mmap-unrecorded"
/* The trace was started by attaching to a running process (trace-record
 * -p), at this instant: blocks allocated before it are unknown, and frees
 * of them are expected (FORMAT.md "Attached traces"). */
#define TF_MARK_ATTACH TF_MARK_RESERVED "attach"
/* An attached recording was detached from at this instant (trace-record
 * -p): events (allocations, then frees) may be missing from it on, though
 * the trace ends a little later (FORMAT.md "Attached traces"). */
#define TF_MARK_DETACH TF_MARK_RESERVED "detach"
/* Calls of some object reached the allocator unrecorded from
 * TF_MARK_UNROUTED's instant until TF_MARK_ROUTED's, when the recorder
 * routed the object's GOT entries (one dlopen'ed since its last look):
 * blocks allocated then are unknown, and frees of them are expected
 * (FORMAT.md "Unrouted calls"). */
#define TF_MARK_UNROUTED TF_MARK_RESERVED "unrouted"
#define TF_MARK_ROUTED TF_MARK_RESERVED "routed"

/* The marks above from which a trace lacks something for good. A bounded
 * trace's ring may overwrite them, so every keyframe writes again each one
 * the trace has, at its first instant, and readers keep one copy. */
enum tf_lack { TF_LACK_CUSTOM, TF_LACK_MMAP, TF_LACK_ATTACH, TF_LACKS };

static inline const char *tf_lack_mark(enum tf_lack k)
{
	return k == TF_LACK_CUSTOM ? TF_MARK_CUSTOM_UNRECORDED
	     : k == TF_LACK_MMAP ? TF_MARK_MMAP_UNRECORDED : TF_MARK_ATTACH;
}

/* Which lack a mark's label says, or -1 for any other mark. */
static inline int tf_lack_of(const char *label)
{
	for (int k = 0; k < TF_LACKS; k++)
		if (!strcmp(label, tf_lack_mark((enum tf_lack)k)))
			return k;
	return -1;
}

/* The marks that open and close a span where blocks went unrecorded
 * (stopped; calls not yet routed). A live set after such a span lacks its
 * blocks still live, so every keyframe writes again the latest of each of
 * these labels, at its own time, and readers keep one MARK of a label and
 * time, as for the lack marks. */
#define TF_SPAN_MARKS 4

static inline const char *tf_span_mark(unsigned i)
{
	static const char *const label[TF_SPAN_MARKS] = {
		TF_MARK_STOP, TF_MARK_START, TF_MARK_UNROUTED, TF_MARK_ROUTED,
	};
	return label[i];
}

/* Which span mark a label is, or -1. */
static inline int tf_span_of(const char *label)
{
	for (unsigned i = 0; i < TF_SPAN_MARKS; i++)
		if (!strcmp(label, tf_span_mark(i)))
			return (int)i;
	return -1;
}

/* Which allocator entry point produced an ALLOC / REALLOC (for tests and
 * debugging; the importer keeps only "came from realloc"). */
enum tf_fn {
	TF_FN_MALLOC = 0, TF_FN_CALLOC, TF_FN_REALLOC, TF_FN_REALLOCARRAY,
	TF_FN_POSIX_MEMALIGN, TF_FN_ALIGNED_ALLOC, TF_FN_MEMALIGN,
	TF_FN_VALLOC, TF_FN_PVALLOC, TF_FN_FREE,
	TF_FN_NEW, TF_FN_NEW_ARRAY,   /* C++ operator new, new[]: every form */
	/* Anonymous mappings the program made (FORMAT.md "Mappings"): ALLOC
	 * records of kind mmap, not heap blocks. TF_FN_MUNMAP's ALLOC is no
	 * block: it unmaps [addr, addr + size) from whatever maps cover it. */
	TF_FN_MMAP, TF_FN_MREMAP, TF_FN_MUNMAP,
	/* A custom allocator's blocks (rec.h, FORMAT.md "Custom blocks"):
	 * ALLOC records of kind custom, paired per pool (tf_event.pool,
	 * tf_record.pool: 0 = no pool). CUSTOM_FREE ends the block at addr;
	 * POOL_DESTROY ends every live block of its pool (addr 0). */
	TF_FN_CUSTOM_ALLOC = 15, TF_FN_CUSTOM_REALLOC, TF_FN_CUSTOM_FREE, TF_FN_POOL_DESTROY,
	/* The allocators' own APIs, where the program's allocator has them
	 * (their frees are TF_FN_FREE): jemalloc's mallocx, rallocx, xallocx;
	 * tcmalloc's tc_malloc (and _skip_new_handler), tc_calloc, tc_realloc,
	 * tc_memalign (and tc_valloc, tc_pvalloc), tc_new and tc_newarray
	 * (every form), tc_posix_memalign. 19 is reserved. */
	TF_FN_MALLOCX = 20, TF_FN_RALLOCX, TF_FN_XALLOCX,
	TF_FN_TC_MALLOC, TF_FN_TC_CALLOC, TF_FN_TC_REALLOC, TF_FN_TC_MEMALIGN,
	TF_FN_TC_NEW, TF_FN_TC_NEWARRAY, TF_FN_TC_POSIX_MEMALIGN,
	TF_FN_COUNT
};

/* An fn of an anonymous mapping's: its ALLOC record is a region's. */
static inline int tf_fn_region(unsigned fn)
{
	return fn >= TF_FN_MMAP && fn <= TF_FN_MUNMAP;
}

/* An fn of the custom allocator API: its ALLOC record has a pool. */
static inline int tf_fn_custom(unsigned fn)
{
	return fn >= TF_FN_CUSTOM_ALLOC && fn <= TF_FN_POOL_DESTROY;
}

/* Pool ids fit the staging event's 16 bits (tf_event.pool). */
#define TF_POOL_MAX 65535u

/* ---- the staging event: 32 bytes ------------------------------------------
 * This is both what the recorder's hot path writes into a thread's ring
 * (see struct tf_ring below; it must stay exactly 32 bytes) and what the
 * writer encodes. A realloc that moves or resizes a block takes two
 * consecutive events published together: TF_EV_REALLOC_OLD (t = before the
 * call, addr = old block) then TF_EV_REALLOC_NEW (t = after, addr = new block,
 * size, stack). realloc(NULL, n) is an ALLOC with fn TF_FN_REALLOC;
 * realloc(p, 0) that frees is a FREE; a failed realloc records nothing. */
enum tf_ev_kind {
	TF_EV_ALLOC = 1,
	TF_EV_FREE = 2,
	TF_EV_REALLOC_OLD = 3,
	TF_EV_REALLOC_NEW = 4,
};

struct tf_event {
	uint64_t t;            /* ns since t0_mono_ns */
	uint64_t addr;
	uint64_t size;         /* requested size; 0 for frees */
	uint32_t stack;        /* leaf trie node id; 0 = empty stack */
	uint8_t kind;          /* enum tf_ev_kind */
	uint8_t fn;            /* enum tf_fn */
	uint16_t pool;         /* custom fns (tf_fn_custom): the pool, 0 = none; else 0 */
};
_Static_assert(sizeof(struct tf_event) == 32, "ring slot layout");

/* ---- a decoded record, as readers see it ------------------------------- */
struct tf_record {
	uint8_t kind;          /* enum tf_kind */
	uint8_t fn;            /* ALLOC/REALLOC/KEYEVENT: enum tf_fn */
	uint8_t sub;           /* KEYFRAME: enum tf_key_phase; KEYEVENT: TF_ALLOC or TF_FREE */
	uint32_t stream;       /* 0 = meta stream; KEYFRAME CUT, KEYEVENT: the event stream */
	uint32_t tid;          /* event streams: the thread; THREAD: its tid */
	uint64_t seq;          /* index of this record within its stream (events only) */
	uint64_t t;            /* ALLOC: after return; FREE: before the call;
	                          REALLOC: before (old block freed); KEYFRAME END:
	                          replay is exact from here on; FORK: the fork, in
	                          ns since the parent's t0; others: when */
	uint64_t t2;           /* REALLOC: after return (new block allocated) */
	uint64_t addr;         /* ALLOC/FREE: the block; REALLOC: the new block;
	                          MODULE: start of the mapping */
	uint64_t old_addr;     /* REALLOC: the old block */
	uint64_t size;         /* ALLOC/REALLOC: requested size; MODULE: mapping length;
	                          LOST: events counted by this and every earlier LOST
	                          record of the trace (0 in older traces) */
	uint32_t stack;        /* ALLOC/REALLOC: leaf trie node id */
	uint32_t id;           /* STACK: node id (>= 1); KEYFRAME, KEYEVENT: keyframe number;
	                          COUNTER: its id (>= 1); SAMPLE: the first value's counter;
	                          FORK: the parent's pid */
	uint32_t parent;       /* STACK: parent node id, 0 = root */
	uint32_t pool;         /* ALLOC of a custom fn: its pool (0 = none); POOL: its id */
	uint64_t ip;           /* STACK: return address */
	uint64_t count;        /* SAMPLE: values; LOST: events dropped; KEYFRAME CUT: stream index of
	                          the cut (events before it are in the keyframe);
	                          FORK: the parent's trace's t0_mono_ns */
	uint64_t file_offset;  /* MODULE: file offset of the mapping */
	const char *str;       /* THREAD name, MODULE path, MARK label, COUNTER or POOL name; NUL-terminated,
	                          valid until the next decode into the same buffer */
	const uint8_t *build_id; /* MODULE: raw GNU build-id bytes, or NULL */
	uint32_t build_id_len;
	uint32_t perms;        /* MODULE: bit 0 r, 1 w, 2 x, 3 p(rivate) */
	const uint8_t *values; /* SAMPLE: count values packed (tf_sample_pack) */
	uint32_t values_len;   /* SAMPLE: bytes at values */
};

/* Packs n (<= TF_SAMPLE_MAX) values into out (room for n * 10 bytes), as a
 * SAMPLE's values; returns the bytes written. */
size_t tf_sample_pack(uint8_t *out, const uint64_t *v, uint32_t n);
/* A decoded SAMPLE's values into v (room for TF_SAMPLE_MAX); returns how
 * many (the reader checked them). */
uint32_t tf_sample_unpack(const struct tf_record *r, uint64_t *v);

/* ---- file header --------------------------------------------------------- */
#define TF_FILE_MAGIC "HEAPRTRC"         /* 8 bytes at offset 0 */
#define TF_FILE_MAGIC_LEN 8
struct tf_header {
	uint32_t version;      /* set by the writer; checked by the reader */
	uint32_t pid, ppid;
	uint32_t pointer_size; /* 8 on x86-64 */
	uint64_t t0_mono_ns;   /* CLOCK_MONOTONIC at trace start: all times are relative to it */
	uint64_t t0_real_ns;   /* CLOCK_REALTIME at the same instant (for display) */
	uint64_t sample_period;/* 0 = every allocation recorded; else mean bytes between samples */
	const char *exe;       /* absolute path of the executable, as /proc/self/exe */
	const char *cmdline;   /* arguments joined by single spaces */
	uint32_t flags;        /* read: TF_HDR_BOUNDED; writers set it with tf_writer_bound */
};

/* The file is a ring of segments (REC_MAX_SIZE): segments carry their lap
 * number, the oldest ones get overwritten, keyframes make what survives
 * replayable. Readers hand out segments oldest first (FORMAT.md). */
#define TF_HDR_BOUNDED 1u

/* ---- writer ---------------------------------------------------------------
 * Used by the recorder's writer threads (never by application threads) and by
 * tests. It allocates only in tf_writer_open and tf_segenc_new; all later
 * calls reuse buffers, so it can run inside a process whose allocator is
 * being traced. */
struct tf_writer;

/* fd: an open, writable, empty file (the caller creates it 0600, O_EXCL). */
int tf_writer_open(struct tf_writer **w, int fd, const struct tf_header *h,
		   struct tf_error *err);

/* The writer puts at most this many events in a segment (one more rather
 * than split a REALLOC pair). Small calls make small segments, which
 * compress worse: hand it ~16 Ki events or more per call when a ring holds
 * that many. */
#define TF_SEGMENT_EVENTS 65536

/* Append events of one thread's stream as one or more segments. first_seq is
 * the stream index of ev[0]; successive calls for a stream continue it. A
 * REALLOC_OLD/REALLOC_NEW pair must not be split across calls. */
int tf_write_events(struct tf_writer *w, uint32_t stream, uint32_t tid,
		    uint64_t first_seq, const struct tf_event *ev, size_t n,
		    struct tf_error *err);

/* A segment encoded apart from the writer, so that one thread can encode
 * while another appends. A tf_segenc is used by one thread at a time;
 * tf_segenc_new allocates with mmap only. */
struct tf_segenc;
int tf_segenc_new(struct tf_segenc **se, struct tf_error *err);
void tf_segenc_free(struct tf_segenc *se);

/* Encodes ev[0..n) of one stream as one segment into se, replacing what se
 * held: n at most TF_SEGMENT_EVENTS, one more only if the last two are a
 * REALLOC pair. first_seq as for tf_write_events. */
int tf_segenc_events(struct tf_segenc *se, uint32_t stream, uint32_t tid,
		     uint64_t first_seq, const struct tf_event *ev, size_t n,
		     struct tf_error *err);

/* Appends the segment se holds (tf_segenc_events succeeded on it). */
int tf_writer_put(struct tf_writer *w, struct tf_segenc *se, struct tf_error *err);

/* The writer's own encoder, for its thread. Meta records share its buffers:
 * append what it holds before the next tf_write_meta, tf_writer_flush or
 * tf_write_events. */
struct tf_segenc *tf_writer_segenc(struct tf_writer *w);

/* Queue one meta record (STACK, THREAD, MODULE, MARK, LOST, FORK, COUNTER,
 * SAMPLE) for stream 0;
 * queued meta records go out as a segment when the queue fills or at
 * tf_writer_flush / tf_writer_close. Strings and build ids are copied. */
int tf_write_meta(struct tf_writer *w, const struct tf_record *r,
		  struct tf_error *err);

/* Write any queued meta records as a segment now. */
int tf_writer_flush(struct tf_writer *w, struct tf_error *err);

/* Flush, write the END record, free the writer. Does not close fd. */
int tf_writer_close(struct tf_writer *w, uint64_t t_end, struct tf_error *err);

/* Makes the trace a ring of at most max_bytes (header included; at least
 * TF_BOUND_MIN): a segment that would end past it goes to the start of the
 * ring, over the oldest ones. Call right after tf_writer_open. */
#define TF_BOUND_MIN 1024u
int tf_writer_bound(struct tf_writer *w, uint64_t max_bytes, struct tf_error *err);

/* Bytes appended since the trace was opened (all laps of a bounded one). */
uint64_t tf_writer_written(const struct tf_writer *w);

/* Frees the writer without writing END (e.g. in a forked child that must not
 * touch its parent's trace). */
void tf_writer_abandon(struct tf_writer *w);

/* ---- reader -------------------------------------------------------------- */
struct tf_reader;

struct tf_segment_info {
	uint64_t offset;       /* file offset of the segment header */
	uint32_t stream, tid;
	uint64_t first_seq;    /* stream index of the first record */
	uint32_t count;        /* records in the segment */
	uint64_t t_first, t_last; /* event streams: time range covered */
	uint32_t stored_bytes; /* header + compressed payload, as on disk */
};

/* Opens and checks the header (magic, version). */
int tf_reader_open(struct tf_reader **r, const char *path, struct tf_error *err);
const struct tf_header *tf_reader_header(const struct tf_reader *r);
/* Bounded traces: 1 if the ring wrapped, so the oldest segments are gone
 * and replay must start from a keyframe. Always 0 for other traces. */
int tf_reader_wrapped(const struct tf_reader *r);
uint64_t tf_reader_file_size(const struct tf_reader *r);
void tf_reader_close(struct tf_reader *r);

/* Reads the next segment header in file order without decompressing it.
 * Returns TF_OK, TF_DONE at a clean end of file, or an error whose offset
 * names the first bad byte; segments before it are unaffected. */
int tf_reader_next_segment(struct tf_reader *r, struct tf_segment_info *si,
			   struct tf_error *err);

/* A decoder holds the decompression and record buffers of one segment at a
 * time; keep one per stream you read concurrently (e.g. a merge). */
struct tf_decoder;
int tf_decoder_new(struct tf_decoder **d, struct tf_error *err);
void tf_decoder_free(struct tf_decoder *d);

/* Decompresses and decodes the segment described by si (verifying its
 * checksums). On success *recs points at si->count records owned by the
 * decoder, valid until its next tf_decode_segment. */
int tf_decode_segment(struct tf_reader *r, struct tf_decoder *d,
		      const struct tf_segment_info *si,
		      const struct tf_record **recs, struct tf_error *err);

const char *tf_kind_name(unsigned kind);   /* "alloc", "free", ...; "unknown" */
const char *tf_fn_name(unsigned fn);       /* "malloc", "calloc", ... */
const char *tf_status_name(int status);

/* ---- the .ring staging file -------------------------------------------------
 * <trace>.ring is a MAP_SHARED file the recorder's threads write into
 * directly, so events survive SIGKILL. Page 0 holds struct tf_ring_file; then
 * max_nodes struct tf_node (the stack trie); then max_rings 64-byte struct
 * tf_ring headers, ring_stride apart, each with its events at events_at (or,
 * when 0, right after it: ring_stride then leaves room for ring_events).
 * A reader recovering a killed process takes, for every ring in use, events
 * [max(tail, last seq already in the trace + 1), head) and every ready node
 * whose id is not yet in the trace. All integers little-endian (host). */
#define TF_RING_MAGIC 0x31474e4952524845ull /* "EHRRING1" */
#define TF_RING_VERSION 3    /* 2: each ring has its own capacity (tf_ring.events);
                                3: and its own event area (tf_ring.events_at) */

struct tf_ring_file {
	uint64_t magic;
	uint32_t version;
	uint32_t pid;
	uint64_t t0_mono_ns;   /* same as the trace header's */
	uint32_t max_nodes;    /* capacity of the trie node array */
	uint32_t max_rings;
	uint32_t ring_events;  /* events per ring, a power of two */
	uint32_t reserved0;
	uint64_t nodes_offset; /* file offset of node 0 */
	uint64_t rings_offset; /* file offset of ring 0's header */
	uint64_t ring_stride;  /* bytes from one ring header to the next */
	_Atomic uint32_t nodes_next;  /* next node id to hand out (ids start at 1) */
	_Atomic uint32_t rings_used;  /* rings ever claimed (high-water mark) */
	_Atomic uint32_t finished;    /* 1 once the trace was closed cleanly */
	uint32_t reserved1;
	/* Events dropped that no LOST record of the trace and no ring's `lost`
	 * counts (threads without a ring once the writer stopped draining),
	 * and the earliest time (ns since t0, plus one; 0: none) of any event
	 * counted lost in this file. Zero in files of older recorders. */
	_Atomic uint64_t lost;
	_Atomic uint64_t t_lost;
};

struct tf_node {            /* 16 bytes; index = node id; id 0 is the root */
	uint64_t ip;
	uint32_t parent;
	_Atomic uint32_t ready; /* 1 once ip and parent are written */
};
_Static_assert(sizeof(struct tf_node) == 16, "node layout");

enum tf_ring_state { TF_RING_FREE = 0, TF_RING_LIVE = 1, TF_RING_CLOSED = 2 };

struct tf_ring {            /* 64 bytes; its events at events_at */
	_Atomic uint32_t state; /* enum tf_ring_state */
	uint32_t tid;
	uint32_t stream;        /* stream id of the trace (>= 1) */
	_Atomic uint32_t events; /* this ring's capacity: a power of two, at most the
	                           file's ring_events (0: ring_events, as in version 1);
	                           changed by its thread only while it is empty */
	_Atomic uint64_t head;  /* events published by the thread (stream seq of the next one) */
	_Atomic uint64_t tail;  /* events already appended to the trace by the writer */
	char name[16];          /* thread name, as in /proc/self/task/TID/comm */
	_Atomic uint64_t lost;  /* events of this stream dropped after [tail, head): the
	                           writer had stopped draining (its writes failed, or
	                           the process was exiting) and the ring was full */
	_Atomic uint64_t events_at; /* file offset of its events; 0: right after this
	                           header (always so in versions 1 and 2); changed,
	                           like `events`, only while the ring is empty */
};
_Static_assert(sizeof(struct tf_ring) == 64, "ring header layout");

#endif
