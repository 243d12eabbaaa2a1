/*
 * liblate_tc.so - an allocator whose statistics start answering part-way
 * through the recorder's first look at them, as tcmalloc's do when its
 * initializer (which registers its MallocExtension) runs on the main
 * thread while the recorder's writer thread is already reading them.
 * Preloaded after libheapreel.so, it serves malloc (glibc's, forwarded)
 * and MallocExtension_GetNumericProperty, which refuses its first call
 * only and then answers every tcmalloc key with 1. The recorder must
 * still sample all four of tcmalloc's counters (test_counters tcmalloc_late).
 */
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);

void *malloc(size_t size)
{
	return __libc_malloc(size);
}

int MallocExtension_GetNumericProperty(const char *property, size_t *value);

int MallocExtension_GetNumericProperty(const char *property, size_t *value)
{
	static atomic_int calls;
	(void)property;
	if (atomic_fetch_add(&calls, 1) == 0)
		return 0;       /* the initializer has not registered yet */
	*value = 1;
	return 1;
}
