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
 * (the handle of dlopen(NULL)), and in a non-PIE executable that takes a
 * function's address (python3), past its canonical PLT entry, which
 * dlsym returns, to the definition it jumps to.
 *
 * Must never: allocate from the real allocator before it is resolved, or
 * reuse bootstrap memory (blocks are few and stay allocated forever).
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
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
	(*(void **)&rec_real.field = find(name))

/* Every pointer from find(name), free last. */
static void resolve_in(void *(*find)(const char *))
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
	void *f = find("free");
	atomic_store_explicit((_Atomic(void *) *)(void *)&rec_real.free, f,
			      memory_order_release);
	rec_guard = g;
	atomic_store(&resolving, 0);
}

/* The definition after ours (called from here: RTLD_NEXT is ours). */
static void *next_definition(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void rec_real_resolve(void)
{
	/* an attached copy is not in the global scope, so RTLD_NEXT would find
	 * libc's functions, not those of the program's allocator (jemalloc
	 * linked in); and a call may come before heapreel_attach (gdb calls
	 * malloc, ours as likely as any, for the strings it passes) */
	resolve_in(rec_session_attached() ? rec_program_definition : next_definition);
}

void *rec_program_scope(void)
{
	static void *scope;
	if (!scope)
		scope = dlopen(NULL, RTLD_LAZY);
	return scope;
}

/* The object whose canonical PLT entry p is (a non-PIE executable's entry
 * for a function whose address it takes: its symbol is undefined, with
 * the entry's address as value), or NULL. */
static struct link_map *plt_of(void *p)
{
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	struct link_map *map = NULL;
	if (!dladdr1(p, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym || sym->st_shndx != SHN_UNDEF ||
	    !dladdr1(p, &di, (void **)&map, RTLD_DL_LINKMAP))
		return NULL;
	return map;
}

void *rec_program_definition(const char *name)
{
	void *p = dlsym(rec_program_scope(), name);
	struct link_map *plt = p ? plt_of(p) : NULL;
	struct dl_find_object self;
	if (!plt || _dl_find_object((void *)rec_program_definition, &self) != 0)
		return p;
	/* the definition: the first object after the entry's in the global
	 * order that defines the name itself, never ours */
	for (struct link_map *m = plt->l_next; m; m = m->l_next) {
		if (m == self.dlfo_link_map || !m->l_name[0])
			continue;
		void *h = dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
		void *q = h ? dlsym(h, name) : NULL;
		if (h)
			dlclose(h);
		struct dl_find_object fq;
		if (q && _dl_find_object(q, &fq) == 0 && fq.dlfo_link_map == m)
			return q;
	}
	return p;
}

