/*
 * got.h - redirecting named functions in the GOT of every loaded object
 * (got.c), for the allocator APIs libheapreel.so must not export
 * (entry_alloc_api.c) and for attaching to a running process (issue 26).
 */
#ifndef HEAPREEL_GOT_H
#define HEAPREEL_GOT_H

/* A function to redirect: every GOT entry bound to `name` in an object
 * that does not define it gets `hook` instead; `real` is the definition
 * the program found. When `own`, so do the entries of objects that define
 * the name themselves and call `real` through their GOT (glibc's strdup
 * calling malloc, glibc's or jemalloc's): those calls are the program's,
 * as a preloaded export sees them. Never for an allocator's own API,
 * which it may call itself. */
struct rec_got_fn {
	const char *name;
	void *hook;
	void *real;
	int own;
};

/* Patches every loaded object for fns[0..n) (kept by reference: static
 * storage) and remembers each entry changed; later objects are patched by
 * rec_got_refresh. The number of entries changed, or -1 if some could not
 * be, said on stderr once (an object not relocated yet is no failure:
 * refresh does it). */
int rec_got_install(const struct rec_got_fn *fns, unsigned n);
/* The writer, each round: patches objects loaded since the last pass
 * (changed: the module list changed), or retries one left unfinished. The
 * number of entries changed: calls through them since the last pass
 * reached the real function unrecorded. */
unsigned rec_got_refresh(int changed);
/* 1 if a pass left some entry unrouted (said once on stderr), until the
 * restore. */
int rec_got_incomplete(void);
/* Puts back every entry changed in objects still loaded and stops
 * patching; the number of entries put back. */
unsigned rec_got_restore(void);
/* A forked child: the parent's lock holder does not exist here. */
void rec_got_fork_child(void);

#endif
