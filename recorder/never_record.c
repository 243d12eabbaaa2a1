/*
 * never_record.c - linked into trace-record and trace-ctl only, never into
 * libheapreel.so: the object whose presence tells the recorder's
 * constructor not to record this process (rec_common.h REC_NEVER_RECORD).
 * Run under a caller's LD_PRELOAD of libheapreel.so, trace-record would
 * otherwise write a trace of itself into the working directory, and the
 * child it forks before exec would claim the trace name meant for the
 * program (which then "already exists").
 */
#include "rec_common.h"

/* The name is REC_NEVER_RECORD; meson exports it from the executable. */
__attribute__((visibility("default"), used)) const int rec_never_record = 1;
