/*
 * rec.h - control heapreel's recorder (libheapreel.so) from inside the program
 * it records: start and stop recording, put a labelled mark on the
 * timeline, flush what is recorded so far to the trace file.
 *
 * The functions live in libheapreel.so, which is preloaded (LD_PRELOAD,
 * trace-record), not linked. Two ways to call them without linking, so the
 * program runs unchanged when it is not being recorded:
 *
 *   #define REC_WEAK              // before the include: weak declarations
 *   #include <heapreel/rec.h>   // installed there; "rec.h" in the source
 *   if (rec_mark) rec_mark("warm");
 *
 *   int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "rec_mark");
 *   if (mark) mark("warm");
 *
 * Every function returns 0, or -1 when the process has no open trace (the
 * recorder could not start, or the trace was closed by exit or exec);
 * rec_pool_create returns REC_POOL_NONE then.
 * They are safe to call from any thread, never from a signal handler.
 * trace-ctl does the same from outside the process.
 */
#ifndef HEAPREEL_REC_H
#define HEAPREEL_REC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef REC_WEAK
#define REC_DECL __attribute__((weak))
#else
#define REC_DECL
#endif

/* Longest mark label kept; longer labels are truncated to this many bytes. */
#define REC_MARK_MAX 255

/* Records allocations from now on (and writes a heapreel.start mark).
 * Does nothing if recording is already on. */
REC_DECL int rec_start(void);

/* Stops recording allocations (and writes a heapreel.stop mark). Frees of
 * blocks recorded before the stop are still recorded, so a snapshot stays
 * exact for them; blocks allocated while stopped are unknown to the trace. */
REC_DECL int rec_stop(void);

/* A mark at this instant: trace-snap --at mark:LABEL, the TUI's chart. */
REC_DECL int rec_mark(const char *label);

/* Returns once everything recorded before the call is in the trace file,
 * with a sample of the counters (RSS, the allocator's figures) read after
 * the call began (unless REC_STATS_MS=0). */
REC_DECL int rec_flush(void);

/* ---- a custom allocator's blocks (README "Custom allocators") -----------
 * A program's own allocator reports the blocks it hands out: kind custom
 * in the database, with their stacks from the caller of these functions.
 * Blocks of one pool pair by address among themselves only (they may lie
 * inside malloc'd blocks: those stay heap blocks of their own); rec_alloc's
 * blocks belong to no pool. Addresses must be below 2^48 (all of user
 * space on x86-64); a larger one returns -1, recorded nothing. Nothing is
 * recorded while stopped (frees still are), while sampling (REC_SAMPLE)
 * or in a bounded trace (REC_MAX_SIZE); the calls then return 0. */

/* A pool: 0 is no pool; at most REC_POOL_MAX per trace. */
typedef unsigned int rec_pool_t;
#define REC_POOL_NONE 0u
#define REC_POOL_MAX 65535u

/* old_ptr NULL: only a new block; new_ptr NULL: only old_ptr freed. */
REC_DECL int rec_alloc(const void *ptr, size_t size);
REC_DECL int rec_realloc(const void *old_ptr, const void *new_ptr, size_t size);
REC_DECL int rec_free(const void *ptr);
/* A new pool named name (truncated to REC_MARK_MAX bytes; names need not
 * be unique); REC_POOL_NONE without a trace or past REC_POOL_MAX pools. */
REC_DECL rec_pool_t rec_pool_create(const char *name);
/* Pool REC_POOL_NONE, or one this trace did not create: -1. */
REC_DECL int rec_pool_alloc(rec_pool_t pool, const void *ptr, size_t size);
REC_DECL int rec_pool_free(rec_pool_t pool, const void *ptr);
/* Frees every block still in the pool; the pool id is not used again. */
REC_DECL int rec_pool_destroy(rec_pool_t pool);

#ifdef __cplusplus
}
#endif

#endif
