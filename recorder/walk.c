/*
 * walk.c - every walk of the loaded objects that libheapreel.so makes
 * (dl_iterate_phdr: the module map, the load counters, GOT passes, our
 * own text at start), kept out of the way of fork.
 *
 * dl_iterate_phdr holds the loader's list lock (dl_load_write_lock) while
 * it runs. fork copies that lock as it is: if our writer thread is inside
 * a walk when another thread forks, the child's lock stays held for ever,
 * and the child's first walk (the recorder's own, at the start of its
 * trace, or the program's, or a dlopen) blocks for good. A forked child
 * of a recorded program so hung for an hour in a test. fork's prepare
 * handler therefore takes walk_lock, which every walk holds, so no walk of
 * ours is in progress when the process is copied; the parent and the
 * child release it after.
 *
 * Test only (REC_TEST_WALK_DELAY_US, read at start): each walk sleeps that
 * long inside dl_iterate_phdr, with the loader's lock held, so that a
 * fork meets a walk in progress nearly every time.
 *
 * Must never: be called from an allocation hook (the loader's lock), or
 * hold walk_lock across anything but the walk.
 */
#include "rec_internal.h"

#include <link.h>
#include <pthread.h>

static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;
static long delay_us;           /* REC_TEST_WALK_DELAY_US */

/* A walk's callback, with the test delay before its first object. */
struct slow_walk {
	int (*cb)(struct dl_phdr_info *, size_t, void *);
	void *data;
	int slept;
};

static int slow_cb(struct dl_phdr_info *info, size_t size, void *v)
{
	struct slow_walk *w = v;
	if (!w->slept++) {
		rec_sleep_us(delay_us);
	}
	return w->cb(info, size, w->data);
}

void rec_walk_init(void)
{
	delay_us = rec_test_delay_us("REC_TEST_WALK_DELAY_US");
}

int rec_walk_objects(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	struct slow_walk w = { cb, data, 0 };
	pthread_mutex_lock(&walk_lock);
	int r = delay_us ? dl_iterate_phdr(slow_cb, &w) : dl_iterate_phdr(cb, data);
	pthread_mutex_unlock(&walk_lock);
	return r;
}

void rec_walk_fork_prepare(void)
{
	pthread_mutex_lock(&walk_lock);
}

void rec_walk_fork_release(void)
{
	pthread_mutex_unlock(&walk_lock);
}
