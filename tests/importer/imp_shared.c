/*
 * imp_shared.c - one program run twice, its library loaded at different
 * addresses each time, for test_recorded.py's "shared" case: trace-import
 * resolves each module file once per import, so two processes' addresses
 * must map to the same symbols however far apart their code was loaded.
 *
 *   imp_shared LIB PAD_MIB
 *
 * Reserves PAD_MIB MiB of address space (PROT_NONE: no memory, no
 * allocation) so that LIB (libhrdltest.so) is mapped elsewhere than in a
 * run with another PAD_MIB, even without address-space randomisation;
 * allocates SITE_COUNT blocks of SITE_SIZE bytes at shared_site, then
 * dlopen()s LIB (2 blocks of 4001 bytes), calls hrdltest_work(WORK_COUNT)
 * (blocks of 4002 bytes) and dlclose()s it. Exit 1 if a step fails. It
 * must never print on success (stdio buffers would add allocations).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SITE_COUNT 3
#define SITE_SIZE 5003
#define WORK_COUNT 4
#define MIB (1024 * 1024)

void *volatile kept[SITE_COUNT];

__attribute__((noinline)) static void *shared_site(void)
{
	return malloc(SITE_SIZE);     /* SHARED_SITE */
}

int main(int argc, char **argv)
{
	long pad = argc == 3 ? atol(argv[2]) : -1;
	void *h;
	int (*work)(int);

	if (pad < 0)
		return 2;
	if (pad && mmap(NULL, (size_t)pad * MIB, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		return 1;
	for (int i = 0; i < SITE_COUNT; i++)
		kept[i] = shared_site();
	h = dlopen(argv[1], RTLD_NOW);
	if (!h)
		return 1;
	work = (int (*)(int))dlsym(h, "hrdltest_work");
	if (!work || work(WORK_COUNT) != WORK_COUNT || dlclose(h))
		return 1;
	for (int i = 0; i < SITE_COUNT; i++)
		free(kept[i]);
	return 0;
}
