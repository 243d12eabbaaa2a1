/*
 * small_stacks - threads given the smallest stacks pthreads allows, which
 * must keep them under the recorder: glibc takes every thread's static TLS
 * (the recorder's among it) out of the top of the thread's stack, and the
 * hooks run on what is left. One thread per size in `sizes`, one at a
 * time; thread i first fills PAD bytes of its own stack (argv[1], default
 * PAD_DEFAULT: a frame of its own, so the stack left for the hook is what
 * a program that sized its stack tightly would leave), then allocates
 * COUNT blocks of 3000 + i bytes from site<i>, frees every other one and
 * returns. Prints
 * "thread <i> stack <bytes> allocs <COUNT> size <3000+i> frees <COUNT/2>"
 * per thread; exits 1 (with the error) if a thread cannot be created.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 100
/* Of a 16 KiB stack here (LD_BIND_NOW=1), about 11 KiB can be filled
 * unrecorded, 8.5 KiB recorded (with or without REC_SHADOW), 5.5 KiB under
 * REC_CHECK_STACKS (libunwind's full walk in the hook). Without
 * LD_BIND_NOW the loader's lazy binding of memset takes 2 KiB of that. */
#define PAD_DEFAULT 5120
#define PAD_MAX 8192
static size_t pad_bytes = PAD_DEFAULT;
/* 16384: PTHREAD_STACK_MIN on x86-64 (not a constant under _GNU_SOURCE) */
static const size_t sizes[] = { 16384, 20480, 24576, 32768, 36864 };
#define N (sizeof sizes / sizeof *sizes)

#define SITE(i) \
	__attribute__((noinline)) static void *site##i(size_t n) { return malloc(n); }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4)
static void *(*const sites[N])(size_t) = { site0, site1, site2, site3, site4 };

static void *blocks[COUNT];

__attribute__((noinline)) static void allocate(int i)
{
	for (int k = 0; k < COUNT; k++)
		blocks[k] = sites[i](3000 + (size_t)i);
	for (int k = 0; k < COUNT; k += 2)
		free(blocks[k]);
}

/* PAD bytes of this thread's stack in use below the allocations */
__attribute__((noinline)) static void padded(int i)
{
	volatile char pad[pad_bytes];
	memset((char *)pad, i, pad_bytes);
	allocate(i);
	if (pad[pad_bytes - 1] != (char)i)
		abort();
}

static void *worker(void *arg)
{
	padded((int)(long)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		pad_bytes = strtoul(argv[1], NULL, 10);
	if (pad_bytes < 1 || pad_bytes > PAD_MAX) {
		fprintf(stderr, "usage: small_stacks [PAD bytes, 1..%d]\n", PAD_MAX);
		return 2;
	}
	for (unsigned i = 0; i < N; i++) {
		pthread_attr_t at;
		pthread_t t;
		pthread_attr_init(&at);
		int err = pthread_attr_setstacksize(&at, sizes[i]);
		if (!err)
			err = pthread_create(&t, &at, worker, (void *)(long)i);
		pthread_attr_destroy(&at);
		if (err) {
			fprintf(stderr, "small_stacks: a thread with a stack of %zu bytes: %s\n",
				sizes[i], strerror(err));
			return 1;
		}
		pthread_join(t, NULL);
		printf("thread %u stack %zu allocs %d size %zu frees %d\n", i, sizes[i], COUNT,
		       3000 + (size_t)i, COUNT / 2);
	}
	return 0;
}
