/*
 * stack.c - capturing the call stack of an allocation.
 *
 * libunwind's unw_backtrace walks the stack with DWARF CFI (Debian's libc
 * and libstdc++ have no frame pointers, so a frame-pointer walk alone would
 * truncate stacks) and caches what it learnt per return address.
 *
 * Debian's libunwind.a is not PIC (R_X86_64_32 and local-exec TLS relocations
 * in its text), so it cannot be linked into librec.so. Linking libunwind.so
 * normally would put its _Unwind_* into the program's global symbol scope and
 * the program's C++ exceptions would bind to them (5x slower). So librec.so
 * loads libunwind.so with dlopen(RTLD_LOCAL) in its constructor: its symbols
 * stay out of the global scope and only we call it, through a pointer.
 *
 * The recorder's own frames (the interposed function and what it calls) are
 * skipped by address: every leading frame inside librec.so's text.
 *
 * Must never: run dlopen/dlsym outside rec_stack_init (the constructor).
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <libunwind.h>

#ifndef REC_LIBUNWIND_SONAME
#error "meson passes -DREC_LIBUNWIND_SONAME"
#endif

/* The recorder's frames above the call site (capture, note_alloc or
 * resize, the interposed function): fewer than REC_STACK_SLOTS - REC_DEPTH_MAX. */
#define OWN_FRAMES_MAX (REC_STACK_SLOTS - REC_DEPTH_MAX)

static __typeof__(unw_backtrace) *unw_bt;
static uintptr_t self_lo, self_hi;    /* librec.so's executable segments */

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uintptr_t me = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (me < lo || me >= hi)
		return 0;
	self_lo = lo;
	self_hi = hi;
	return 1;
}

int rec_stack_init(void)
{
	if (unw_bt)
		return 0;
	if (!dl_iterate_phdr(find_self, (void *)(uintptr_t)rec_stack_init))
		return -1;
	void *h = dlopen(REC_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	*(void **)&unw_bt = dlsym(h, "unw_backtrace");
	return unw_bt ? 0 : -1;
}

void *const *rec_stack_capture(void **buf, unsigned *n)
{
	int got = unw_bt(buf, (int)rec_s.depth + OWN_FRAMES_MAX);
	if (got < 0)
		got = 0;
	int i = 0;
	while (i < got && (uintptr_t)buf[i] >= self_lo && (uintptr_t)buf[i] < self_hi)
		i++;
	unsigned k = (unsigned)(got - i);
	*n = k < rec_s.depth ? k : rec_s.depth;
	return buf + i;
}
