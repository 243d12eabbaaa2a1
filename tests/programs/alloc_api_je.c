/*
 * alloc_api_je [LIB|- [NAME:OFFSET...]] - jemalloc's own API from known functions, linked with
 * -ljemalloc (the recorder reaches these calls by rewriting this program's
 * GOT: recorder/got.c).
 *
 * Each site_* function makes BLOCKS blocks through one entry point and
 * keeps them: mallocx (site_mallocx), mallocx with MALLOCX_ALIGN and
 * MALLOCX_ZERO (site_mallocx_aligned), mallocx then rallocx to a larger
 * size (site_rallocx), a large mallocx shrunk in place by xallocx
 * (site_xallocx; an xallocx that cannot change anything follows, which
 * records nothing), and malloc (site_malloc: jemalloc's too). Mark "all":
 * every block lives. Then each site's first block is freed with sdallocx
 * or dallocx: mark "some"; then the rest: mark "none".
 *
 * With LIB (libhrdlje.so): dlopen()s it after the marks, has the recorder
 * notice it (rec_flush), calls hrdlje_work(DL_BLOCKS) (mallocx of
 * DL_SIZE bytes, kept), mark "dl", hrdlje_drop(), mark "dl-none".
 *
 * Then mark "restore" (a recording with REC_TEST_GOT_RESTORE=restore puts
 * every GOT entry back there), then site_after: one mallocx and dallocx of
 * AFTER_SIZE bytes (recorded only when not restored), mallocx called
 * through its address.
 *
 * Each NAME:OFFSET is a GOT entry of this program (OFFSET in hex from its
 * start, as readelf -r shows it) bound to function NAME: its word is
 * printed at start and after mark "restore", as "word start|after NAME
 * WHAT", WHAT "real" (NAME's definition), "hooked" (a function of
 * libheapreel.so), +OFFSET (a place in this program: a lazy entry's PLT
 * stub) or "other".
 *
 * Prints "site NAME SIZE" per site (SIZE: the bytes each block holds at
 * mark "all", as the program asked: xallocx's size when it changed the
 * block's usable size, else the size first asked for) and "probe tc_malloc
 * found|absent" (dlsym(RTLD_DEFAULT)).
 * Must never: allocate between the marks except through the sites.
 */
#include <dlfcn.h>
#include <jemalloc/jemalloc.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "marks.h"

enum {
	BLOCKS = 3,
	MALLOCX_SIZE = 2001, ALIGNED_SIZE = 2002, RALLOCX_FROM = 100, RALLOCX_SIZE = 2003,
	XALLOCX_FROM = 1 << 20, XALLOCX_SIZE = 1 << 18, MALLOC_SIZE = 2005,
	ALIGN = 64, DL_BLOCKS = 4, DL_SIZE = 2010, AFTER_SIZE = 2011,
};

static void *mx[BLOCKS], *al[BLOCKS], *ra[BLOCKS], *xa[BLOCKS], *ma[BLOCKS];
static size_t xa_size;  /* the size each xallocx'd block holds */

/* A rec.h function when recorded (libheapreel.so exports them), else NULL. */
static void *rec(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static void flush(void)
{
	int (*f)(void) = (int (*)(void))rec("rec_flush");
	if (f)
		f();
}

extern const char __executable_start[], _end[];   /* this program's image (ld) */

static void say_words(const char *when, int n, char **entries)
{
	uintptr_t base = (uintptr_t)__executable_start;
	for (int i = 0; i < n; i++) {
		char name[64];
		unsigned long off;
		if (sscanf(entries[i], "%63[^:]:%lx", name, &off) != 2) {
			fprintf(stderr, "alloc_api_je: %s is not NAME:OFFSET\n", entries[i]);
			exit(2);
		}
		uintptr_t word = *(volatile const uintptr_t *)(base + off);
		Dl_info in;
		printf("word %s %s ", when, name);
		if ((void *)word == rec(name))
			printf("real\n");
		else if (word - base < (uintptr_t)(_end - __executable_start))
			printf("+%#lx\n", (unsigned long)(word - base));
		else if (dladdr((void *)word, &in) && strstr(in.dli_fname, "libheapreel.so"))
			printf("hooked\n");
		else
			printf("other\n");
	}
}

__attribute__((noinline)) static void site_mallocx(int i) { mx[i] = mallocx(MALLOCX_SIZE, 0); }
__attribute__((noinline)) static void site_mallocx_aligned(int i)
{
	al[i] = mallocx(ALIGNED_SIZE, MALLOCX_ALIGN(ALIGN) | MALLOCX_ZERO);
}
__attribute__((noinline)) static void site_rallocx(int i)
{
	ra[i] = rallocx(mallocx(RALLOCX_FROM, 0), RALLOCX_SIZE, 0);
}
__attribute__((noinline)) static void site_xallocx(int i)
{
	void *p = mallocx(XALLOCX_FROM, 0);
	size_t before = sallocx(p, 0);
	size_t size = xallocx(p, XALLOCX_SIZE, 0, 0) != before ? XALLOCX_SIZE : XALLOCX_FROM;
	size_t usable = sallocx(p, 0);
	xallocx(p, usable, 0, 0);   /* already that size: nothing changes */
	if (i && size != xa_size) {
		fprintf(stderr, "alloc_api_je: xallocx shrank one block in place, not another\n");
		exit(1);
	}
	xa_size = size;
	xa[i] = p;
}
__attribute__((noinline)) static void site_malloc(int i) { ma[i] = malloc(MALLOC_SIZE); }
/* Through mallocx's address: this program's entry for it is a GLOB_DAT,
 * the others JUMP_SLOTs. */
__attribute__((noinline)) static void site_after(void)
{
	void *(*volatile alloc)(size_t, int) = mallocx;
	dallocx(alloc(AFTER_SIZE, 0), 0);
}

static void drop(int i)
{
	sdallocx(mx[i], MALLOCX_SIZE, 0);
	dallocx(al[i], MALLOCX_ALIGN(ALIGN));
	dallocx(ra[i], 0);
	sdallocx(xa[i], xa_size, 0);
	free(ma[i]);
}

static int with_library(const char *path)
{
	void *h = dlopen(path, RTLD_NOW);
	void (*work)(int) = h ? (void (*)(int))dlsym(h, "hrdlje_work") : NULL;
	void (*done)(void) = h ? (void (*)(void))dlsym(h, "hrdlje_drop") : NULL;
	if (!work || !done) {
		fprintf(stderr, "alloc_api_je: %s\n", dlerror());
		return 1;
	}
	flush();   /* the recorder's writer has seen the new object */
	work(DL_BLOCKS);
	mark("dl");
	done();
	mark("dl-none");
	printf("dl %d %d\n", DL_BLOCKS, DL_SIZE);
	return 0;
}

int main(int argc, char **argv)
{
	int words = argc > 2 ? argc - 2 : 0;
	say_words("start", words, argv + 2);
	printf("probe tc_malloc %s\n", rec("tc_malloc") ? "found" : "absent");
	for (int i = 0; i < BLOCKS; i++) {
		site_mallocx(i);
		site_mallocx_aligned(i);
		site_rallocx(i);
		site_xallocx(i);
		site_malloc(i);
	}
	drop_between_marks(drop, BLOCKS);
	printf("site site_mallocx %d\nsite site_mallocx_aligned %d\nsite site_rallocx %d\n"
	       "site site_xallocx %zu\nsite site_malloc %d\n",
	       MALLOCX_SIZE, ALIGNED_SIZE, RALLOCX_SIZE, xa_size, MALLOC_SIZE);
	if (argc > 1 && strcmp(argv[1], "-") && with_library(argv[1]))
		return 1;
	mark("restore");
	say_words("after", words, argv + 2);
	site_after();
	printf("after %d\n", AFTER_SIZE);
	return 0;
}
