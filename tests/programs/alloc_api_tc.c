/*
 * alloc_api_tc - tcmalloc's own tc_* API from known functions, linked with
 * libtcmalloc_minimal.so.4 by full path (Debian ships no header for it:
 * the prototypes are gperftools/tcmalloc.h's).
 *
 * Each site_* function makes BLOCKS blocks through one entry point and
 * keeps them: tc_malloc, tc_malloc_skip_new_handler, tc_calloc, tc_realloc
 * (of a tc_malloc'd block, to a larger size), tc_realloc of NULL, tc_memalign,
 * tc_posix_memalign, tc_new, tc_newarray, tc_new_nothrow. Mark "all":
 * every block lives. Then each site's first block is freed through the
 * matching free (tc_free, tc_cfree, tc_free_sized, tc_delete,
 * tc_deletearray, tc_delete_sized, tc_delete_nothrow...): mark "some";
 * then the rest: mark "none".
 *
 * Prints "site NAME SIZE" per site and "probe mallocx found|absent"
 * (dlsym(RTLD_DEFAULT): this process has no jemalloc, and the recorder
 * must not make it look as if it had).
 * Must never: allocate between the marks except through the sites.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "marks.h"

void *tc_malloc(size_t size);
void *tc_malloc_skip_new_handler(size_t size);
void *tc_calloc(size_t n, size_t size);
void *tc_realloc(void *p, size_t size);
void *tc_memalign(size_t align, size_t size);
int tc_posix_memalign(void **out, size_t align, size_t size);
void *tc_new(size_t size);
void *tc_newarray(size_t size);
void *tc_new_nothrow(size_t size, const void *nothrow);
void tc_free(void *p);
void tc_cfree(void *p);
void tc_free_sized(void *p, size_t size);
void tc_delete(void *p);
void tc_deletearray(void *p);
void tc_delete_sized(void *p, size_t size);
void tc_delete_nothrow(void *p, const void *nothrow);

enum {
	BLOCKS = 3, SITES = 10, ALIGN = 64,
	/* sizes in the order of sites[] */
	MALLOC_SIZE = 3001, SKIP_SIZE = 3002, CALLOC_N = 3, CALLOC_ELEM = 1001,
	REALLOC_FROM = 100, REALLOC_SIZE = 3004, MEMALIGN_SIZE = 3005,
	POSIX_SIZE = 3006, NEW_SIZE = 3007, NEWARRAY_SIZE = 3008, NOTHROW_SIZE = 3009,
	REALLOC_NULL_SIZE = 3010,
};

static void *blocks[SITES][BLOCKS];
static const char nothrow;   /* stands for std::nothrow (an empty tag) */

__attribute__((noinline)) static void *site_tc_malloc(void) { return tc_malloc(MALLOC_SIZE); }
__attribute__((noinline)) static void *site_tc_skip(void) { return tc_malloc_skip_new_handler(SKIP_SIZE); }
__attribute__((noinline)) static void *site_tc_calloc(void) { return tc_calloc(CALLOC_N, CALLOC_ELEM); }
__attribute__((noinline)) static void *site_tc_realloc(void)
{
	return tc_realloc(tc_malloc(REALLOC_FROM), REALLOC_SIZE);
}
__attribute__((noinline)) static void *site_tc_realloc_null(void)
{
	return tc_realloc(NULL, REALLOC_NULL_SIZE);
}
__attribute__((noinline)) static void *site_tc_memalign(void) { return tc_memalign(ALIGN, MEMALIGN_SIZE); }
__attribute__((noinline)) static void *site_tc_posix_memalign(void)
{
	void *p = NULL;
	return tc_posix_memalign(&p, ALIGN, POSIX_SIZE) == 0 ? p : NULL;
}
__attribute__((noinline)) static void *site_tc_new(void) { return tc_new(NEW_SIZE); }
__attribute__((noinline)) static void *site_tc_newarray(void) { return tc_newarray(NEWARRAY_SIZE); }
__attribute__((noinline)) static void *site_tc_new_nothrow(void)
{
	return tc_new_nothrow(NOTHROW_SIZE, &nothrow);
}

static const struct {
	const char *name;
	void *(*site)(void);
	size_t size;
} sites[SITES] = {
	{ "site_tc_malloc", site_tc_malloc, MALLOC_SIZE },
	{ "site_tc_skip", site_tc_skip, SKIP_SIZE },
	{ "site_tc_calloc", site_tc_calloc, CALLOC_N * CALLOC_ELEM },
	{ "site_tc_realloc", site_tc_realloc, REALLOC_SIZE },
	{ "site_tc_memalign", site_tc_memalign, MEMALIGN_SIZE },
	{ "site_tc_posix_memalign", site_tc_posix_memalign, POSIX_SIZE },
	{ "site_tc_new", site_tc_new, NEW_SIZE },
	{ "site_tc_newarray", site_tc_newarray, NEWARRAY_SIZE },
	{ "site_tc_new_nothrow", site_tc_new_nothrow, NOTHROW_SIZE },
	{ "site_tc_realloc_null", site_tc_realloc_null, REALLOC_NULL_SIZE },
};

/* Block i of every site, each through a free that fits its allocation. */
static void drop(int i)
{
	tc_free(blocks[0][i]);
	tc_cfree(blocks[1][i]);
	tc_free_sized(blocks[2][i], CALLOC_N * CALLOC_ELEM);
	tc_free(blocks[3][i]);
	tc_free(blocks[4][i]);
	tc_free(blocks[5][i]);
	tc_delete_sized(blocks[6][i], NEW_SIZE);
	tc_deletearray(blocks[7][i]);
	tc_delete_nothrow(blocks[8][i], &nothrow);
	tc_free(blocks[9][i]);
}

int main(void)
{
	printf("probe mallocx %s\n", dlsym(RTLD_DEFAULT, "mallocx") ? "found" : "absent");
	for (int i = 0; i < BLOCKS; i++)
		for (int s = 0; s < SITES; s++)
			blocks[s][i] = sites[s].site();
	drop_between_marks(drop, BLOCKS);
	for (int s = 0; s < SITES; s++)
		printf("site %s %zu\n", sites[s].name, sites[s].size);
	return 0;
}
