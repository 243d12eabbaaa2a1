/*
 * real.c - finding the real allocator under libheapreel.so, and the bootstrap
 * arena that serves allocations while it is not found yet.
 *
 * dlsym(RTLD_NEXT) itself may call calloc/malloc (its error buffer) before
 * any real pointer is known; those calls get memory from a small static
 * arena. Bootstrap blocks are never passed to the real free: free(),
 * realloc() and malloc_usable_size() recognise them by address.
 *
 * Preloaded, the real functions are the next definitions after ours
 * (RTLD_NEXT). Attached (dlopen'ed into a running process, attach.c), ours
 * are not in the global scope, and RTLD_NEXT would search only our own
 * dependencies (libc's malloc where the program uses a jemalloc linked
 * into it), and RTLD_DEFAULT would search them after the global scope
 * (finding our own operator new in a C program): the real functions are
 * the ones the program's lookups find, those of the global scope alone
 * (the handle of dlopen(NULL)).
 *
 * Must never: allocate from the real allocator before it is resolved, or
 * reuse bootstrap memory (blocks are few and stay allocated forever).
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <string.h>

struct rec_real rec_real;
REC_TLS int rec_guard;

/* Each bootstrap block is preceded by its size, so realloc can copy it. */
#define BOOT_HEADER 16

_Alignas(64) unsigned char rec_boot_arena[REC_BOOT_ARENA_BYTES];
static _Atomic size_t boot_used;
static _Atomic int resolving;    /* 1 while a thread runs rec_real_resolve */

void *rec_boot_alloc(size_t size, size_t align)
{
	if (align < BOOT_HEADER)
		align = BOOT_HEADER;
	if (align > 4096 || size > REC_BOOT_ARENA_BYTES)
		return NULL;
	size_t used = atomic_load(&boot_used), start, end;
	do {
		start = (used + BOOT_HEADER + align - 1) & ~(align - 1);
		end = start + ((size + 15) & ~(size_t)15);
		if (end > REC_BOOT_ARENA_BYTES)
			return NULL;
	} while (!atomic_compare_exchange_weak(&boot_used, &used, end));
	memcpy(rec_boot_arena + start - sizeof(size_t), &size, sizeof size);
	return memset(rec_boot_arena + start, 0, size); /* serves calloc too */
}

size_t rec_boot_size(const void *p)
{
	size_t size;
	memcpy(&size, (const unsigned char *)p - sizeof(size_t), sizeof size);
	return size;
}

#define RESOLVE(field, name) \
	(*(void **)&rec_real.field = dlsym(scope, name))

/* Every pointer from dlsym(scope, ...), free last. */
static void resolve_in(void *scope)
{
	if (rec_real.free)
		return;
	int expected = 0;
	if (!atomic_compare_exchange_strong(&resolving, &expected, 1))
		return; /* another thread (or dlsym re-entering) resolves: boot arena */
	int g = rec_guard;
	rec_guard = 1;
	RESOLVE(malloc, "malloc");
	RESOLVE(calloc, "calloc");
	RESOLVE(realloc, "realloc");
	RESOLVE(reallocarray, "reallocarray");
	RESOLVE(posix_memalign, "posix_memalign");
	RESOLVE(aligned_alloc, "aligned_alloc");
	RESOLVE(memalign, "memalign");
	RESOLVE(valloc, "valloc");
	RESOLVE(pvalloc, "pvalloc");
	RESOLVE(malloc_usable_size, "malloc_usable_size");
	RESOLVE(dlclose, "dlclose");
	RESOLVE(exit_now, "_exit");
	RESOLVE(execve, "execve");
	RESOLVE(execvpe, "execvpe");
	RESOLVE(fexecve, "fexecve");
#define RESOLVE_CXX(name, fn, shape) RESOLVE(name, #name);
	REC_CXX_ENTRY_POINTS(RESOLVE_CXX)
	/* free last: its being set tells everyone the table is complete */
	void *f = dlsym(scope, "free");
	atomic_store_explicit((_Atomic(void *) *)(void *)&rec_real.free, f,
			      memory_order_release);
	rec_guard = g;
	atomic_store(&resolving, 0);
}

void rec_real_resolve(void)
{
	resolve_in(RTLD_NEXT);
}

void *rec_program_scope(void)
{
	static void *scope;
	if (!scope)
		scope = dlopen(NULL, RTLD_LAZY);
	return scope;
}

void rec_real_resolve_attached(void)
{
	resolve_in(rec_program_scope());
}
