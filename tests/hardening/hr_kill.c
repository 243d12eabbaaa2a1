/*
 * hr_kill - allocates and frees in known patterns from several threads and,
 * after every completed call, publishes how many calls it completed into a
 * shared counters file, so a driver that kills it at any instant knows what
 * the imported trace must hold.
 *
 *   hr_kill COUNTERS NTHREADS ITERS END [fork]
 *
 * COUNTERS: a file of at least HRK_PROCS * HRK_FILE_BYTES bytes, mapped
 * MAP_SHARED. With "fork" the program forks right away (before any thread)
 * and both processes run everything below, the child publishing into the
 * file's second HRK_FILE_BYTES.
 * NTHREADS (1..HRK_MAX_WORKERS) workers, the main thread being worker 0.
 * Worker w keeps a window of HRK_WINDOW blocks of sizes in its own class
 * [HRK_CLASS(w), HRK_CLASS(w) + HRK_SPAN) and, driven by its own PRNG,
 * mallocs or callocs into an empty slot, or reallocs (within the class) or
 * frees a full one. Every block a worker holds is freed by that worker, so
 * the frees of a thread are the closed blocks of its own class.
 * A further thread, the spawner, starts short-lived threads one at a time
 * (each allocates HRK_SHORT_CALLS blocks of sizes in [HRK_SHORT_MIN,
 * HRK_SHORT_MIN + HRK_SPAN), frees them all and exits) while the workers run.
 *
 * ITERS: window steps per worker; 0 = run until killed. With ITERS > 0 the
 * program, once every worker and short thread has finished, ends by END:
 * "exit" (return 0), "abort" (abort()), "segv" (a store through a null
 * pointer), "grow" (never frees: mallocs HRK_GROW_BYTES blocks, touching
 * every page, until something kills it - the OOM test), "exit_thread" or
 * "_exit_thread" (the workers but the main thread, and the short-lived
 * threads, never stop; once the main thread's ITERS steps are done, a new
 * thread calls exit(0), or _exit(0), while they run).
 *
 * Counter slot k (64 bytes): tid, allocs (malloc+calloc), reallocs, frees,
 * each stored (volatile) right after the call returned; slot
 * HRK_MAX_WORKERS counts the short-lived threads together (only one runs at
 * a time). The header slot before them: tid = the number of workers that
 * published their tid, allocs = the blocks "grow" allocated. Nothing in the
 * loops makes a syscall except what malloc does.
 *
 * Must never: allocate from these threads outside the known size classes
 * between publishing, or free a block another thread allocated.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#define HRK_MAX_WORKERS 8
#define HRK_WINDOW 64                 /* blocks each worker juggles */
#define HRK_SPAN 512                  /* sizes per class */
#define HRK_CLASS(w) (1024u * ((unsigned)(w) + 1))   /* worker w: [1024(w+1), +512) */
#define HRK_SHORT_MIN (1024u * (HRK_MAX_WORKERS + 1))  /* short-lived threads: after every class */
#define HRK_SHORT_CALLS 40            /* blocks per short-lived thread */
#define HRK_GROW_BYTES (256u * 1024)  /* "grow": block size, above the mmap threshold */
#define HRK_PAGE 4096u
#define HRK_FILE_BYTES (64u * (HRK_MAX_WORKERS + 2))
#define HRK_PROCS 2                   /* parent and, with "fork", its child */
#define HRK_CALLOC_ONE_IN 3           /* empty slot: calloc 1 time in 3 */
#define HRK_REALLOC_ONE_IN 4          /* full slot: realloc 1 time in 4, else free */

struct hrk_slot {                     /* 64 bytes, one cache line */
	volatile uint64_t tid;
	volatile uint64_t allocs;
	volatile uint64_t reallocs;
	volatile uint64_t frees;
	uint64_t pad[4];
};

struct hrk_file {
	struct hrk_slot header;       /* tid field: workers ready */
	struct hrk_slot slot[HRK_MAX_WORKERS + 1];
};
_Static_assert(sizeof(struct hrk_file) == HRK_FILE_BYTES, "counters layout");

static struct hrk_file *cf;
static long iters;
static int forever;                   /* workers other than main never stop */
static volatile int workers_done;
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t next_rand(uint64_t *s)        /* xorshift64 */
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void publish_tid(struct hrk_slot *c)
{
	c->tid = (uint64_t)gettid();
	pthread_mutex_lock(&ready_lock);
	cf->header.tid++;
	pthread_mutex_unlock(&ready_lock);
}

static void *worker(void *arg)
{
	unsigned w = (unsigned)(uintptr_t)arg;
	struct hrk_slot *c = &cf->slot[w];
	void *blocks[HRK_WINDOW] = { 0 };
	uint64_t s = 0x9e3779b97f4a7c15ull * (w + 1);
	publish_tid(c);
	for (long i = 0; !iters || i < iters || (w && forever); i++) {
		uint64_t r = next_rand(&s);
		unsigned j = (unsigned)(r % HRK_WINDOW);
		size_t size = HRK_CLASS(w) + (size_t)((r >> 8) % HRK_SPAN);
		if (!blocks[j]) {
			if ((r >> 20) % HRK_CALLOC_ONE_IN == 0)
				blocks[j] = calloc(1, size);
			else
				blocks[j] = malloc(size);
			if (!blocks[j])
				abort();
			c->allocs++;
			memset(blocks[j], (int)w, 16);
		} else if ((r >> 24) % HRK_REALLOC_ONE_IN == 0) {
			void *p = realloc(blocks[j], size);
			if (!p)
				abort();
			blocks[j] = p;
			c->reallocs++;
		} else {
			free(blocks[j]);
			blocks[j] = NULL;
			c->frees++;
		}
	}
	for (unsigned j = 0; j < HRK_WINDOW; j++) {
		if (blocks[j]) {
			free(blocks[j]);
			c->frees++;
		}
	}
	return NULL;
}

static void *short_lived(void *arg)
{
	struct hrk_slot *c = arg;
	void *b[HRK_SHORT_CALLS];
	for (unsigned k = 0; k < HRK_SHORT_CALLS; k++) {
		b[k] = malloc(HRK_SHORT_MIN + (k * 37) % HRK_SPAN);
		if (!b[k])
			abort();
		c->allocs++;
	}
	for (unsigned k = 0; k < HRK_SHORT_CALLS; k++) {
		free(b[k]);
		c->frees++;
	}
	return NULL;
}

/* Short-lived threads, one at a time, until the workers are done. */
static void *spawner(void *arg)
{
	(void)arg;
	while (!workers_done) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_lived, &cf->slot[HRK_MAX_WORKERS]))
			abort();
		pthread_join(t, NULL);
	}
	return NULL;
}

static void *exiter(void *arg)
{
	if (arg)
		_exit(0);
	exit(0);
}

static void grow(void)
{
	for (;;) {
		char *p = malloc(HRK_GROW_BYTES);
		if (!p)
			abort();
		cf->header.allocs++;
		for (size_t o = 0; o < HRK_GROW_BYTES; o += HRK_PAGE)
			p[o] = 1;
	}
}

/* A real SIGSEGV: a store through NULL, which an UBSan build would report
 * and stop at instead. */
__attribute__((no_sanitize("undefined"))) static void segv(void)
{
	volatile int *null = NULL;
	*null = 1;
}

int main(int argc, char **argv)
{
	if (argc != 5 && !(argc == 6 && !strcmp(argv[5], "fork"))) {
		fprintf(stderr, "usage: hr_kill COUNTERS NTHREADS ITERS "
			"exit|abort|segv|grow|exit_thread|_exit_thread [fork]\n");
		return 64;
	}
	int n = atoi(argv[2]);
	iters = atol(argv[3]);
	const char *end = argv[4];
	forever = !strcmp(end, "exit_thread") || !strcmp(end, "_exit_thread");
	if (n < 1 || n > HRK_MAX_WORKERS || iters < 0) {
		fprintf(stderr, "hr_kill: NTHREADS 1..%d, ITERS >= 0\n", HRK_MAX_WORKERS);
		return 64;
	}
	int fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	cf = mmap(NULL, HRK_PROCS * HRK_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (cf == MAP_FAILED) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	if (argc == 6) {
		pid_t child = fork();
		if (child < 0) {
			perror("fork");
			return 1;
		}
		if (child == 0)
			cf++;
	}
	pthread_t t[HRK_MAX_WORKERS], sp;
	if (pthread_create(&sp, NULL, spawner, NULL))
		abort();
	for (int w = 1; w < n; w++)
		if (pthread_create(&t[w], NULL, worker, (void *)(uintptr_t)w))
			abort();
	worker((void *)0);
	if (forever) {
		/* every worker running before the exit: under load the main
		 * thread's own iterations may end before the others started */
		for (;;) {
			pthread_mutex_lock(&ready_lock);
			uint64_t ready = cf->header.tid;
			pthread_mutex_unlock(&ready_lock);
			if (ready >= (uint64_t)n)
				break;
			sched_yield();
		}
		pthread_t x;
		if (pthread_create(&x, NULL, exiter, (void *)(uintptr_t)(end[0] == '_')))
			abort();
		pthread_join(x, NULL);  /* never returns: the exit ends everything */
	}
	for (int w = 1; w < n; w++)
		pthread_join(t[w], NULL);
	workers_done = 1;
	pthread_join(sp, NULL);
	if (!strcmp(end, "abort"))
		abort();
	if (!strcmp(end, "segv"))
		segv();
	if (!strcmp(end, "grow"))
		grow();
	return 0;
}
