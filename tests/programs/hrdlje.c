/*
 * libhrdlje.so - a library alloc_api_je dlopen()s after start-up: its
 * calls of jemalloc's mallocx and sdallocx must be recorded too (the
 * recorder rewrites its GOT when its writer notices it).
 * hrdlje_work(n): n blocks of DL_SIZE bytes by mallocx (dl_site), kept;
 * hrdlje_drop(): frees them with sdallocx.
 */
#include <jemalloc/jemalloc.h>

enum { DL_MAX = 16, DL_SIZE = 2010 };

static void *kept[DL_MAX];
static int nkept;

__attribute__((noinline)) static void *dl_site(void) { return mallocx(DL_SIZE, 0); }

void hrdlje_work(int n);
void hrdlje_work(int n)
{
	for (; nkept < n && nkept < DL_MAX; nkept++)
		kept[nkept] = dl_site();
}

void hrdlje_drop(void);
void hrdlje_drop(void)
{
	while (nkept)
		sdallocx(kept[--nkept], DL_SIZE, 0);
}
