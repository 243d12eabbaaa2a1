/*
 * got.c - redirecting named functions by rewriting the GOT entries that
 * bind them (R_X86_64_JUMP_SLOT and GLOB_DAT, or aarch64's) in every
 * loaded object, and putting them back.
 *
 * Interposing by export (interpose.c) reaches every object, but gives every
 * program the name: one that probes for jemalloc's mallocx would find ours.
 * An entry rewritten here reaches only the objects that already call the
 * function. Each entry changed is remembered (its address and old word),
 * so rec_got_restore can put it back (detaching, issue 26); objects
 * dlopen'ed later are patched by the writer's round, which notices them
 * (writer.c), never from an allocation hook.
 *
 * Safety: a pass runs inside dl_iterate_phdr's callback, which holds the
 * loader's list lock, so no object it sees can be unmapped under it; an
 * object is touched only once _dl_find_object knows it (the loader adds it
 * there after relocating it and making its RELRO read-only), so the loader
 * never writes an entry after us nor finds its page made read-only by us
 * mid-relocation. An entry is rewritten only from the definition (or, lazily
 * bound, its own PLT stub) to the hook, and back only from the hook, with
 * one aligned atomic store: a thread calling through it meanwhile gets one
 * or the other. A thread resolving a lazy entry at that moment may store
 * the definition over the hook: a pass that rewrote a stub is followed by
 * another (the calls in between are not seen). A RELRO page is made writable for the store and read-only
 * again, as the loader left it.
 *
 * Must never: allocate, run from an allocation hook, write an entry whose
 * object is not relocated, touch the object that defines the function
 * (the allocator's own calls) unless told to (got.h `own`: an attach's
 * exports, which a preload interposes there too), or libheapreel.so.
 */
#include "rec_internal.h"
#include "got.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#define GOT_JUMP_SLOT R_X86_64_JUMP_SLOT
#define GOT_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define GOT_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GOT_GLOB_DAT R_AARCH64_GLOB_DAT
#else
/* Elsewhere: no relocation type matches, and rec_got_install says so. */
#define GOT_UNKNOWN_MACHINE 1
#define GOT_JUMP_SLOT UINT32_MAX
#define GOT_GLOB_DAT UINT32_MAX
#endif

#if __ELF_NATIVE_CLASS == 64
#define GOT_R_TYPE ELF64_R_TYPE
#define GOT_R_SYM ELF64_R_SYM
#else
#define GOT_R_TYPE ELF32_R_TYPE
#define GOT_R_SYM ELF32_R_SYM
#endif

/* Entries remembered: a few per object that calls a redirected function
 * (jemalloc's API is 5 names, tcmalloc's 30); an entry that finds the
 * table full is left alone, so that none is changed that cannot be put
 * back. */
#define GOT_ENTRIES_MAX 1024

struct entry {
	uintptr_t *slot;
	uintptr_t old;                /* the word before: definition or PLT stub */
	uintptr_t hook;
};

static const struct rec_got_fn *fns;
static _Atomic unsigned nfns;         /* 0: nothing to redirect (or restored) */
static struct entry entries[GOT_ENTRIES_MAX];
static unsigned nentries;
static _Atomic int pending;           /* the last pass left an object for later */
static int said;                      /* the first failure was said */
/* A pass left some entry unrouted (no room to remember it, a page that
 * would not turn writable): calls through it go unrecorded until the
 * restore. */
static _Atomic int incomplete;
static uintptr_t page_size;
static atomic_flag lock = ATOMIC_FLAG_INIT;

/* One object's dynamic tables, as a pass needs them. */
struct object {
	const struct dl_phdr_info *info;
	const ElfW(Sym) *sym;
	const char *str;
	const ElfW(Rela) *rel[2];     /* DT_JMPREL, DT_RELA */
	size_t nrel[2];
	uintptr_t relro_lo, relro_hi; /* whole pages the loader made read-only */
	int relocated;                /* -1: not asked yet */
};

struct pass {
	int restore;                  /* put entries back instead of changing them */
	unsigned changed;
	int failed;                   /* an entry could not be changed or remembered */
};

static int contains(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && addr - lo < ph->p_memsz)
			return 1;
	}
	return 0;
}

/* Is the object in _dl_find_object's tables: relocated, RELRO applied? */
static int relocated(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		struct dl_find_object fo;
		return _dl_find_object((void *)(info->dlpi_addr + ph->p_vaddr), &fo) == 0 &&
		       fo.dlfo_link_map && fo.dlfo_link_map->l_addr == info->dlpi_addr;
	}
	return 0;
}

/* The loader relocates most d_ptr values in place (not the vdso's). */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

/* 0 if the object has no dynamic section or no symbols. */
static int read_object(const struct dl_phdr_info *info, struct object *o)
{
	*o = (struct object){ .info = info, .relocated = -1 };
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t at = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)at;
		else if (ph->p_type == PT_GNU_RELRO) {
			o->relro_lo = at & ~(page_size - 1);
			o->relro_hi = (at + ph->p_memsz) & ~(page_size - 1);
		}
	}
	if (!dyn)
		return 0;
	int rela_plt = 1;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: o->sym = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_STRTAB: o->str = (const char *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_JMPREL: o->rel[0] = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: o->nrel[0] = dyn->d_un.d_val / sizeof(ElfW(Rela)); break;
		case DT_PLTREL: rela_plt = dyn->d_un.d_val == DT_RELA; break;
		case DT_RELA: o->rel[1] = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_RELASZ: o->nrel[1] = dyn->d_un.d_val / sizeof(ElfW(Rela)); break;
		}
	}
	if (!rela_plt)
		o->nrel[0] = 0;   /* REL on a RELA machine: not ours to read */
	return o->sym && o->str;
}

static const struct rec_got_fn *wanted(const char *name)
{
	for (unsigned i = 0; i < atomic_load_explicit(&nfns, memory_order_relaxed); i++)
		if (!strcmp(fns[i].name, name))
			return &fns[i];
	return NULL;
}

static struct entry *remembered(const uintptr_t *slot)
{
	for (unsigned i = 0; i < nentries; i++)
		if (entries[i].slot == slot)
			return &entries[i];
	return NULL;
}

/* Test only (REC_TEST_GOT_PAUSE_US, read by rec_got_install, 1 s at most):
 * a pause after each entry written, so that the program's threads run
 * while its GOT is half rewritten (tests/attach/test_cycles.py slow). */
static long pause_us;
/* Test only (REC_TEST_GOT_FAIL=NAME, read by rec_got_install): NAME's
 * entries fail as a full table would (tests/attach/test_dlopen.py). */
static const char *test_fail;

/* One aligned store, the page writable around it if RELRO made it read-only. */
static int store(const struct object *o, uintptr_t *slot, uintptr_t word)
{
	uintptr_t page = (uintptr_t)slot & ~(page_size - 1);
	int ro = page >= o->relro_lo && page < o->relro_hi;
	if (ro && mprotect((void *)page, page_size, PROT_READ | PROT_WRITE) != 0)
		return -1;
	atomic_store_explicit((_Atomic uintptr_t *)slot, word, memory_order_release);
	if (ro)
		mprotect((void *)page, page_size, PROT_READ);
	if (pause_us)
		rec_sleep_us(pause_us);
	return 0;
}

static void patch(struct pass *p, const struct object *o, uintptr_t *slot, uintptr_t word,
		  const struct rec_got_fn *f, int lazy)
{
	uintptr_t hook = (uintptr_t)f->hook;
	/* the definition, or a lazy entry's PLT stub (in its own object);
	 * anything else (0: a weak reference left unbound) stays */
	int stub = word != (uintptr_t)f->real;
	if (stub && !(lazy && contains(o->info, word)))
		return;
	/* remembered: an object reloaded at the same place, or a stub the
	 * loader resolved over the hook (below) */
	struct entry *e = remembered(slot);
	if ((!e && nentries == GOT_ENTRIES_MAX) || (test_fail && !strcmp(f->name, test_fail))) {
		p->failed = 1;
		return;
	}
	if (store(o, slot, hook) != 0) {
		p->failed = 1;
		return;
	}
	if (!e)
		e = &entries[nentries++];
	*e = (struct entry){ .slot = slot, .old = word, .hook = hook };
	p->changed++;
	/* another thread may be resolving this lazy entry right now: the
	 * loader would then write the definition over the hook; the next
	 * pass (the writer's next round) looks again */
	if (stub)
		atomic_store_explicit(&pending, 1, memory_order_relaxed);
}

static void put_back(struct pass *p, const struct object *o, uintptr_t *slot, uintptr_t word)
{
	struct entry *e = remembered(slot);
	if (!e || word != e->hook)
		return;
	if (store(o, slot, e->old) == 0)
		p->changed++;
	else
		p->failed = 1;
}

static void visit_rela(struct pass *p, struct object *o, const ElfW(Rela) *r)
{
	unsigned type = (unsigned)GOT_R_TYPE(r->r_info);
	if (type != GOT_JUMP_SLOT && type != GOT_GLOB_DAT)
		return;
	const ElfW(Sym) *s = &o->sym[GOT_R_SYM(r->r_info)];
	/* an object that defines the name itself calls it through its GOT
	 * only where the loader found another definition first, or where it
	 * holds `real`: routed for `own` (got.h) only, and a lazy entry only
	 * in the object holding `real` (its stub could bind to its own) */
	int defined = s->st_shndx != SHN_UNDEF;
	const struct rec_got_fn *f = wanted(o->str + s->st_name);
	if (!f || (defined && !f->own))
		return;
	int definer = contains(o->info, (uintptr_t)f->real);
	if (definer && !defined)
		return;
	if (o->relocated < 0)
		o->relocated = relocated(o->info);
	if (!o->relocated) {
		atomic_store_explicit(&pending, 1, memory_order_relaxed);
		return;
	}
	uintptr_t *slot = (uintptr_t *)(o->info->dlpi_addr + r->r_offset);
	uintptr_t word = atomic_load_explicit((_Atomic uintptr_t *)slot, memory_order_relaxed);
	if (p->restore)
		put_back(p, o, slot, word);
	else
		patch(p, o, slot, word, f, type == GOT_JUMP_SLOT && (!defined || definer));
}

static int visit_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct object o;
	if (contains(info, (uintptr_t)&visit_object) || !read_object(info, &o))
		return 0;             /* libheapreel.so calls the real functions itself */
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < o.nrel[k]; i++)
			visit_rela(data, &o, &o.rel[k][i]);
	return 0;
}

/* One pass over every loaded object, serialized with the others. */
static struct pass run(int restore)
{
	struct pass p = { .restore = restore };
	int g = rec_guard;
	rec_guard = 1;
	while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
		;
	atomic_store_explicit(&pending, 0, memory_order_relaxed);
	if (atomic_load_explicit(&nfns, memory_order_relaxed))
		rec_walk_objects(visit_object, &p);
	if (restore) {
		/* entries of objects gone are forgotten too */
		atomic_store_explicit(&nfns, 0, memory_order_relaxed);
		nentries = 0;
		atomic_store_explicit(&pending, 0, memory_order_relaxed);
		atomic_store_explicit(&incomplete, 0, memory_order_relaxed);
	} else if (p.failed) {
		atomic_store_explicit(&incomplete, 1, memory_order_relaxed);
	}
	if (p.failed && !said) {
		said = 1;
		rec_say(restore ? "cannot put back every GOT entry changed" :
			"cannot redirect every GOT entry of an allocator function", "",
			restore ? "" : "; the calls through those left go unrecorded");
	}
	atomic_flag_clear_explicit(&lock, memory_order_release);
	rec_guard = g;
	return p;
}

int rec_got_install(const struct rec_got_fn *f, unsigned n)
{
#ifdef GOT_UNKNOWN_MACHINE
	(void)f;
	(void)n;
	rec_say("cannot redirect GOT entries on this machine", "",
		"; the allocator's own API goes unrecorded");
	return -1;
#else
	page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
	pause_us = rec_test_delay_us("REC_TEST_GOT_PAUSE_US");
	test_fail = getenv("REC_TEST_GOT_FAIL");
	fns = f;
	atomic_store_explicit(&nfns, n, memory_order_relaxed);
	struct pass p = run(0);
	return p.failed ? -1 : (int)p.changed;
#endif
}

unsigned rec_got_refresh(int changed)
{
	if (atomic_load_explicit(&nfns, memory_order_relaxed) &&
	    (changed || atomic_load_explicit(&pending, memory_order_relaxed)))
		return run(0).changed;
	return 0;
}

int rec_got_incomplete(void)
{
	return atomic_load_explicit(&incomplete, memory_order_relaxed);
}

unsigned rec_got_restore(void)
{
	return run(1).changed;
}

void rec_got_fork_child(void)
{
	atomic_flag_clear(&lock);
}
