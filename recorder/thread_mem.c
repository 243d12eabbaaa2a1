/*
 * thread_mem.c - memory of a thread's own for what is too big for TLS:
 * the walk's tables (stack.c), the shadow stack (shadow.c), the check
 * mode's walks (stack_check.c).
 *
 * glibc carves every thread's static TLS out of the top of its stack, so
 * each KiB of ours is a KiB less for a thread whose stack was sized
 * tightly (and pthread_create fails with EINVAL for a stack that TLS
 * fills). So a thread's tables are a mapping, made at its first need and
 * handed to a pthread key whose destructor gives it back at the thread's
 * exit, in the first round of destructors. The program's own destructors
 * mostly run after ours (their keys are mostly made later) and may
 * allocate: such a need takes a mapping again, setting the key again, so
 * glibc's next round gives it back too; only a need in glibc's last
 * round, after our destructor, outlives the thread. Given back, a mapping
 * waits in its kind's cache for the next thread: a program that makes
 * short threads pays neither an mmap nor an munmap (which interrupts every
 * CPU the process runs on to flush its TLB) per thread. A table is written before
 * it is read (its counts are TLS, zero in a new thread and reset when the
 * thread gives it back; stack.c's rule cache carries the epoch its rules
 * hold for), so a mapping needs no clearing between threads.
 *
 * Must never: lock (a hook or a signal handler gets and gives mappings),
 * or allocate for the program.
 */
#include "rec_internal.h"

int rec_thread_set(pthread_key_t key, void *p)
{
	int g = rec_guard;
	if (!g)
		rec_guard = REC_GUARD_OWN;
	int err = pthread_setspecific(key, p);
	rec_guard = g;
	return err;
}

int rec_thread_key(pthread_key_t *key, int *keyed, void (*destructor)(void *))
{
	if (!*keyed && pthread_key_create(key, destructor) != 0)
		return -1;
	*keyed = 1;
	return 0;
}

int rec_thread_kind_init(struct rec_thread_kind *k, size_t bytes, void (*give_back)(void *))
{
	if (rec_thread_key(&k->key, &k->keyed, give_back) < 0)
		return -2;
	k->bytes = bytes;
	return 0;
}

/* A mapping from the cache (each slot taken by one exchange, so two
 * takers never get the same one), or NULL. */
static void *take(struct rec_thread_kind *k)
{
	for (unsigned i = 0; i < REC_THREAD_CACHE; i++) {
		if (atomic_load_explicit(&k->cache[i], memory_order_relaxed) == NULL)
			continue;
		void *p = atomic_exchange_explicit(&k->cache[i], NULL, memory_order_acquire);
		if (p)
			return p;
	}
	return NULL;
}

void *rec_map_thread(struct rec_thread_kind *k)
{
	void *p = take(k);
	if (!p && (p = rec_map_private(k->bytes, 1)))
		atomic_fetch_add_explicit(&k->mapped, 1, memory_order_relaxed);
	if (p && rec_thread_set(k->key, p) != 0) {
		rec_unmap_thread(k, p);
		p = NULL;
	}
	return p;
}

void rec_unmap_thread(struct rec_thread_kind *k, void *p)
{
	for (unsigned i = 0; i < REC_THREAD_CACHE; i++) {
		void *none = NULL;
		if (atomic_compare_exchange_strong_explicit(&k->cache[i], &none, p,
							    memory_order_release,
							    memory_order_relaxed))
			return;
	}
	munmap(p, k->bytes);
}
