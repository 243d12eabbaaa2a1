/*
 * modules.c - the module map: every executable segment of every loaded
 * object, for MODULE records (enough to rebuild the exe and .so r-xp lines of
 * /proc/self/maps for a .heap file's MAPPED_LIBRARIES).
 *
 * A snapshot walks dl_iterate_phdr: for each PT_LOAD segment with PF_X, the
 * page-aligned start and length, the page-aligned file offset, the
 * permissions, the object's path (the main program's as /proc/self/exe shows
 * it, without " (deleted)") and its GNU build id from PT_NOTE. Segments not
 * seen before are appended to a table that only grows; the writer emits
 * entries [emitted, count) and publication is one release store of count.
 *
 * When snapshots happen: at trace start; in the writer thread whenever
 * dl_iterate_phdr's load counter (dlpi_adds) moved; and in dlclose (our
 * interposed one, below) before the object is unmapped, so an object that
 * lives less than one writer round is still recorded. dlopen is not
 * interposed: glibc's dlopen uses its caller's address to pick the
 * DT_RUNPATH and the namespace, and a wrapper would make that caller
 * libheapreel.so, so a program's dlopen("libx.so") that relies on its RUNPATH
 * would fail.
 *
 * Unloads matter to cfi.c's unwind rule cache: our dlclose brackets the
 * real one with rec_cfi_unload_begin/end, and the writer's poll also
 * watches dlpi_subs for objects glibc unloads itself.
 *
 * Must never: be called from an allocation hook (dl_iterate_phdr takes the
 * loader's lock). Appenders serialise on a spinlock; the writer never takes it.
 */
#include "rec_internal.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULES_MAX 8192               /* executable segments kept per session */
#define PATH_POOL_BYTES (1u << 20)     /* their paths, NUL-separated */
#define PAGE 4096u

static struct rec_module mods[MODULES_MAX];
static char pool[PATH_POOL_BYTES];
static uint32_t pool_used;
static _Atomic uint32_t count;
static atomic_flag lock = ATOMIC_FLAG_INIT;
static _Atomic unsigned long long seen_adds; /* dlpi_adds at the last snapshot */

void rec_modules_reset(void)
{
	atomic_store(&count, 0);
	pool_used = 0;
	atomic_store(&seen_adds, 0);
	atomic_flag_clear(&lock);
}

uint32_t rec_modules_count(void)
{
	return atomic_load_explicit(&count, memory_order_acquire);
}

const struct rec_module *rec_module(uint32_t i, const char **path)
{
	*path = pool + mods[i].path;
	return &mods[i];
}

static void build_id(const struct dl_phdr_info *info, struct rec_module *m)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
			const char *name = p + sizeof *nh;
			const char *desc = name + ((nh->n_namesz + 3) & ~3u);
			if (desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && nh->n_descsz <= sizeof m->build_id) {
				memcpy(m->build_id, desc, nh->n_descsz);
				m->build_id_len = nh->n_descsz;
				return;
			}
			p = desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
}

static uint32_t keep_path(const char *path)
{
	size_t n = strlen(path) + 1;
	for (uint32_t i = 0; i < atomic_load_explicit(&count, memory_order_relaxed); i++)
		if (!strcmp(pool + mods[i].path, path))
			return mods[i].path;
	if (pool_used + n > PATH_POOL_BYTES)
		return UINT32_MAX;
	memcpy(pool + pool_used, path, n);
	pool_used += (uint32_t)n;
	return pool_used - (uint32_t)n;
}

static int known(uint64_t start, uint64_t size, const char *path)
{
	uint32_t n = atomic_load_explicit(&count, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (mods[i].start == start && mods[i].size == size && !strcmp(pool + mods[i].path, path))
			return 1;
	return 0;
}

static int add_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	atomic_store_explicit(&seen_adds, info->dlpi_adds, memory_order_relaxed);
	const char *path = info->dlpi_name;
	char abs[4096];
	if (!path || !*path)
		path = rec_s.exe;  /* the main program */
	else if (!strchr(path, '/'))
		return 0;          /* linux-vdso.so.1: no file behind it */
	else if (path[0] != '/') /* LD_PRELOAD=./x.so, dlopen("./x.so") */
		path = realpath(path, abs) ? abs : path;
	struct rec_module m = { 0 };
	int have_id = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uint64_t va = info->dlpi_addr + ph->p_vaddr;
		uint64_t start = va & ~(uint64_t)(PAGE - 1);
		uint64_t end = (va + ph->p_memsz + PAGE - 1) & ~(uint64_t)(PAGE - 1);
		if (known(start, end - start, path))
			continue;
		uint32_t n = atomic_load_explicit(&count, memory_order_relaxed);
		if (n == MODULES_MAX)
			return 1;
		if (!have_id) {
			build_id(info, &m);
			have_id = 1;
		}
		m.start = start;
		m.size = end - start;
		m.offset = (ph->p_offset - (va - start));
		m.perms = (ph->p_flags & PF_R ? 1u : 0) | (ph->p_flags & PF_W ? 2u : 0) | 4u | 8u;
		m.path = keep_path(path);
		if (m.path == UINT32_MAX)
			return 1;
		mods[n] = m;
		atomic_store_explicit(&count, n + 1, memory_order_release);
	}
	return 0;
}

void rec_modules_snapshot(void)
{
	int g = rec_guard;
	rec_guard = 1;
	while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
		;
	rec_walk_objects(add_object, NULL);
	atomic_flag_clear_explicit(&lock, memory_order_release);
	rec_guard = g;
}

static int read_counts(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	unsigned long long *c = data;
	c[0] = info->dlpi_adds;
	c[1] = info->dlpi_subs;
	return 1; /* the counters are the same in every entry: stop after one */
}

int rec_modules_changed(void)
{
	static unsigned long long seen_subs; /* only the writer calls this */
	unsigned long long c[2] = { 0, 0 };
	rec_walk_objects(read_counts, c);
	if (c[1] != seen_subs) {
		/* unloaded without our dlclose (glibc's own NSS and iconv modules
		 * use an internal one): forget cached unwind rules too */
		seen_subs = c[1];
		rec_cfi_forget();
	}
	return c[0] != atomic_load_explicit(&seen_adds, memory_order_relaxed);
}

/* Records the object's segments before it can disappear. */
REC_EXPORT int dlclose(void *handle)
{
	if (!rec_real.dlclose)
		rec_real_resolve();
	if (!rec_guard && rec_session_mine())
		rec_modules_snapshot();
	rec_cfi_unload_begin();
	int r = rec_real.dlclose(handle);
	rec_cfi_unload_end();
	return r;
}
