/*
 * clock_floor.c - libclock_floor.so, the bench's "clock floor" variant
 * (bench/run.py): a preloaded malloc family that does nothing but read
 * CLOCK_MONOTONIC once per call and pass the call on to glibc. Every
 * recorder that stamps each event with its own time pays at least this
 * (the interposition and the clock read: clock_gettime is 19-23 ns on the
 * bench machines, where rdtsc alone is 10), so the ratio it gets is the
 * least a recorder with exact nanosecond times can reach on that workload
 * and machine, the number to read issue 25's targets against.
 *
 * The time read goes to a per-thread sink, so the compiler cannot drop it.
 * glibc's __libc_* entry points are the real allocator (no dlsym, which
 * may allocate); operator new and the rest of the C++ family reach malloc
 * in libstdc++, so they are counted there, once.
 *
 * Must never: allocate, print, or be linked into anything but the bench.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define FLOOR_EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void __libc_free(void *p);

static __thread uint64_t sink;

static inline void stamp(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	sink += (uint64_t)ts.tv_nsec;
}

FLOOR_EXPORT void *malloc(size_t size)
{
	void *p = __libc_malloc(size);
	stamp();
	return p;
}

FLOOR_EXPORT void *calloc(size_t n, size_t size)
{
	void *p = __libc_calloc(n, size);
	stamp();
	return p;
}

FLOOR_EXPORT void *realloc(void *old, size_t size)
{
	void *p = __libc_realloc(old, size);
	stamp();
	return p;
}

FLOOR_EXPORT void free(void *p)
{
	if (p)
		stamp();
	__libc_free(p);
}

FLOOR_EXPORT void *memalign(size_t align, size_t size)
{
	void *p = __libc_memalign(align, size);
	stamp();
	return p;
}

FLOOR_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

FLOOR_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (align % sizeof(void *) || align & (align - 1))
		return EINVAL;
	void *p = memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
