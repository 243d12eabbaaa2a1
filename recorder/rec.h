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
 * recorder could not start, or the trace was closed by exit or exec).
 * They are safe to call from any thread, never from a signal handler.
 * trace-ctl does the same from outside the process.
 */
#ifndef HEAPREEL_REC_H
#define HEAPREEL_REC_H

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

#ifdef __cplusplus
}
#endif

#endif
