/*
 * rec_common.h - what libheapreel.so shares with trace-record and trace-ctl:
 * the bounds of the recorder's options, stdio-free string helpers, and
 * where the control sockets live.
 *
 * Everything here is safe inside an allocation hook (no stdio, no
 * allocation, no locks), since libheapreel.so uses it there too.
 */
#ifndef HEAPREEL_REC_COMMON_H
#define HEAPREEL_REC_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define REC_DEPTH_DEFAULT 64                  /* REC_DEPTH, --depth */
#define REC_DEPTH_MAX 256
#define REC_PERIOD_MAX ((uint64_t)1 << 40)    /* REC_SAMPLE, --sample: bytes */
/* REC_MAX_SIZE, --max-size: bytes of a bounded trace. The floor keeps room
 * for a keyframe and the segments after it (TF_BOUND_MIN is the format's). */
#define REC_MAX_SIZE_MIN ((uint64_t)4 << 20)
#define REC_MAX_SIZE_MAX ((uint64_t)1 << 50)
/* A program that exports an object of this name (our own tools, so that
 * one run under a caller's LD_PRELOAD is not recorded itself, and its fork
 * before exec does not take the trace name meant for the program) is never
 * recorded: libheapreel.so's constructor looks it up and stays idle. */
#define REC_NEVER_RECORD "rec_never_record"

/* ---- text.c ------------------------------------------------------------ */
/* Both append at dst, never past end - 1, keep the result NUL-terminated and
 * return the new end of the string. */
char *rec_cat(char *dst, char *end, const char *s);
char *rec_utoa(char *dst, char *end, uint64_t v);
/* A whole decimal number from lo to hi into *v: 0, or -1 if s is not one. */
int rec_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v);
/* The same with an optional binary suffix K, M or G (KiB, MiB, GiB). */
int rec_parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *v);

/* ---- dir.c ------------------------------------------------------------- */
/* Calls fn for each name in directory path (relative to dfd, or absolute)
 * until fn returns nonzero: 1 if fn stopped it, 0 at the end, -1 if the
 * directory cannot be read. */
int rec_dir_each(int dfd, const char *path, int (*fn)(const char *name, void *ctx), void *ctx);

/* ---- ctl_dir.c: the control directory -----------------------------------
 * DIR is $REC_CTL_DIR if set, else /tmp/heapreel-EUID; a recorded process
 * listens on DIR/PID.sock. */
void rec_ctl_dir_path(char *dir, size_t size);
/* DIR opened O_NOFOLLOW and verified private: a directory owned by our
 * effective uid, mode exactly 0700. The descriptor, or -1 with errno
 * (EPERM: it exists but is not private). */
int rec_ctl_dir_open(const char *dir);
/* The socket address of PID through the verified directory's descriptor,
 * /proc/self/fd/DFD/PID.sock, so a path swapped meanwhile cannot redirect it. */
void rec_ctl_sock_path(char *out, size_t size, int dfd, uint64_t pid);
/* Removes from the verified directory dfd the sockets of processes that
 * are gone: PID.sock with no process PID and no listener (a killed process
 * leaves its socket). self: our own pid, never touched (0: none). */
void rec_ctl_dir_sweep(int dfd, uint64_t self);

#endif
