/*
 * mmap.c - the program's anonymous mappings: mmap, mmap64, munmap, mremap,
 * recorded as allocations of kind mmap (FORMAT.md "Mappings").
 *
 * A mapping is an ALLOC with fn TF_FN_MMAP (or TF_FN_MREMAP) and the
 * mapping's page-rounded length; an unmap (munmap, the old range of an
 * mremap, the range a MAP_FIXED mapping replaces) is an ALLOC with fn
 * TF_FN_MUNMAP over [addr, addr + length): the importer trims and splits
 * the regions it covers, so a partial munmap needs no table here.
 * File-backed mappings are not recorded, but a MAP_FIXED one still unmaps
 * what it covers.
 *
 * Recorded only from the program's own code: a call made while this thread
 * is inside the recorder or one of its allocation hooks (rec_guard set: the
 * real allocator's large blocks, jemalloc's or tcmalloc's extents when they
 * call mmap from malloc) belongs to the allocator, as does any call from
 * the text of the shared object that serves malloc (a sampled run passes
 * most allocations on with no hook around them), and a call from
 * libheapreel.so itself (its rings and tables) to the recorder. The real
 * call is the system call itself, so these hooks work before the
 * constructor and never touch the dynamic loader (its own mappings of
 * libraries go through its internal mmap, not through these symbols).
 * brk and sbrk are left alone: the heap they grow is malloc's, already
 * counted block by block. Nothing is recorded while sampling or in a
 * bounded trace: the first anonymous mapping then leaves a mark
 * (TF_MARK_MMAP_UNRECORDED).
 *
 * Must never: allocate, lock, use stdio, or record a failed call.
 */
#undef _FILE_OFFSET_BITS /* our mmap must be the symbol mmap, not mmap64 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Lengths as the kernel counts them: whole pages. */
static size_t pages(size_t len)
{
	size_t page = (size_t)getpagesize();
	return (len + page - 1) & ~(page - 1);
}

/* The text of the object that serves malloc (rec_mmap_init). */
static uintptr_t alloc_lo, alloc_hi;

void rec_mmap_init(void)
{
	struct dl_find_object fo;
	void *malloc_fn = *(void **)&rec_real.malloc;
	/* not when the program itself defines malloc: its own mappings
	 * would then all look like the allocator's */
	if (malloc_fn && _dl_find_object(malloc_fn, &fo) == 0 && fo.dlfo_link_map &&
	    fo.dlfo_link_map->l_name && fo.dlfo_link_map->l_name[0]) {
		alloc_lo = (uintptr_t)fo.dlfo_map_start;
		alloc_hi = (uintptr_t)fo.dlfo_map_end;
	}
}

/* Is a call by the program, made from caller, to be recorded now? Not a
 * call from the allocator's own object (jemalloc's and tcmalloc's extents:
 * rec_guard tells them inside our hooks, but an allocation a sampled run
 * passes straight on has no hook around it). Not while sampling:
 * unbiasing scales a stack's bytes by its blocks' mean size, which would
 * inflate mappings recorded in full (README). Not in a bounded trace: its
 * keyframes carry the live set as one block per address (keymap.c), and
 * a region trimmed or split by munmap is no such block. The first
 * anonymous mapping that goes unrecorded so leaves a mark, from which
 * answers say they lack mappings. The mark never waits for the writer's
 * queue: the caller may hold its own locks (a full queue leaves it to
 * the writer's next round, api.c). */
static int program_call(uintptr_t caller, int anon_map)
{
	/* The allocator's object first, before anything touches our TLS:
	 * when attached, a thread's first touch allocates it through the
	 * program's malloc, and jemalloc's may map memory for it, which
	 * must not come back here for the same TLS (its lock is held). */
	if ((caller >= alloc_lo && caller < alloc_hi) || rec_guard || !rec_on() ||
	    rec_stack_from_recorder(caller))
		return 0;
	uint64_t w = rec_ctl_now();
	if (!(w >> REC_M_PERIOD_SHIFT) && !rec_s.max_size)
		return 1;
	if (anon_map && (w & REC_M_ALLOCS))
		rec_ctl_lack(TF_LACK_MMAP, 0);
	return 0;
}

static struct tf_event region_event(unsigned fn, uint64_t t, const void *addr, size_t len)
{
	return (struct tf_event){ .t = t, .addr = (uintptr_t)addr, .size = pages(len),
				  .kind = TF_EV_ALLOC, .fn = (uint8_t)fn };
}

/* A successful mmap: what it replaced (MAP_FIXED), then the new mapping
 * if it is anonymous and allocations are recorded. */
static void note_map(void *p, size_t len, int flags)
{
	struct tf_event ev[2];
	unsigned k = 0;
	uint64_t t = rec_now();
	if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))
		ev[k++] = region_event(TF_FN_MUNMAP, t, p, len);
	if ((flags & MAP_ANONYMOUS) && (rec_ctl_now() & REC_M_ALLOCS))
		ev[k++] = region_event(TF_FN_MMAP, t, p, len);
	if (k)
		rec_hook_events(ev, k, ev[k - 1].fn != TF_FN_MUNMAP);
}

static void *map_call(void *addr, size_t len, int prot, int flags, int fd, off_t off,
		      uintptr_t caller)
{
	void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED && program_call(caller, flags & MAP_ANONYMOUS))
		note_map(p, len, flags);
	return p;
}

#define CALLER ((uintptr_t)__builtin_return_address(0))

REC_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return map_call(addr, len, prot, flags, fd, off, CALLER);
}

REC_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return map_call(addr, len, prot, flags, fd, (off_t)off, CALLER);
}

REC_EXPORT int munmap(void *addr, size_t len)
{
	uintptr_t caller = CALLER;
	/* stamped before the call, like a free: an address mapped again by
	 * another thread sorts after its unmap */
	uint64_t t = rec_now();
	int r = (int)syscall(SYS_munmap, addr, len);
	if (r == 0 && program_call(caller, 0)) {
		struct tf_event ev = region_event(TF_FN_MUNMAP, t, addr, len);
		rec_hook_events(&ev, 1, 0);
	}
	return r;
}

/* The old range is unmapped, the new one mapped with mremap's stack (a
 * realloc of a mapping); the importer keeps the new one only if the old
 * range held a recorded mapping (it may have been a file's). */
REC_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	uintptr_t caller = CALLER;
	void *want = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	uint64_t t = rec_now();
	void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
	/* old_len 0 duplicates a shared mapping: nothing anonymous to follow */
	if (p != MAP_FAILED && old_len && program_call(caller, 0)) {
		struct tf_event ev[3];
		unsigned k = 0;
		if (flags & MREMAP_FIXED)  /* what the new place replaced */
			ev[k++] = region_event(TF_FN_MUNMAP, t, p, new_len);
		ev[k++] = region_event(TF_FN_MUNMAP, t, old, old_len);
		ev[k++] = region_event(TF_FN_MREMAP, rec_now(), p, new_len);
		rec_hook_events(ev, k, ev[k - 1].fn != TF_FN_MUNMAP);
	}
	return p;
}
