/*
 * demo.c - the program `./heapreel demo` records: a small "service" whose
 * heap goes through recognisable phases, so that the trace summary, the
 * snapshot at the peak, the leak report and the TUI have something to show.
 *
 * Phases, about one second in all (times are approximate):
 *   cache   0.00-0.25 s  cache_fill -> cache_insert -> entry_new: a cache
 *                        grows to CACHE_ENTRIES entries (~12 MiB, the peak);
 *   burst   0.25-0.50 s  request_handle -> request_parse -> token_copy:
 *                        many short-lived temporaries, each freed at once;
 *   leak    ~0.50 s      config_load -> config_line: LEAK_BLOCKS blocks that
 *                        are never freed (what `trace-snap --leaks` finds);
 *   steady  0.50-0.90 s  a second thread ("demo-worker") keeps a working set
 *                        of constant size by replacing blocks, while the main
 *                        thread trims the cache back by half;
 *   end                  everything but the leak is freed.
 * When the recorder exports rec_mark (a weak reference, so the demo links
 * nothing of heapreel and runs without it), each phase start is marked.
 *
 * It must never: depend on anything but libc, print more than one line, or
 * run much longer than a second (it is run by every `./heapreel demo`).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CACHE_ENTRIES 20000  /* entries at the end of the cache phase */
#define CACHE_STEPS 25       /* the cache grows in this many steps... */
#define STEP_NS 10000000L    /* ...with this pause (10 ms) after each step */
#define ENTRY_MIN 256        /* cache entry sizes: ENTRY_MIN + (i % ENTRY_SPREAD) */
#define ENTRY_SPREAD 768
#define BURST_STEPS 25       /* burst phase: steps of REQUESTS_PER_STEP requests */
#define REQUESTS_PER_STEP 800
#define TOKENS_PER_REQUEST 4 /* temporaries per request */
#define LEAK_BLOCKS 200      /* config lines never freed */
#define LEAK_SIZE 96
#define STEADY_STEPS 40      /* steady phase: steps of the worker thread */
#define WORKING_SET 512      /* blocks the worker keeps live */
#define REPLACES_PER_STEP 1000
#define WORK_MIN 64          /* worker block sizes: WORK_MIN + (i % WORK_SPREAD) */
#define WORK_SPREAD 448

struct entry {
	unsigned key;
	size_t len;
	char data[];
};

static struct entry *cache[CACHE_ENTRIES];
static unsigned checksum; /* keeps the compiler from eliding malloc/free pairs */

/* Resolved by the dynamic linker from the preloaded libheapreel.so, else NULL. */
extern void rec_mark(const char *label) __attribute__((weak));

static void mark(const char *label)
{
	if (rec_mark)
		rec_mark(label);
}

static void pause_step(void)
{
	struct timespec ts = { 0, STEP_NS };
	nanosleep(&ts, NULL);
}

/* ---- phase 1: a growing cache -------------------------------------------- */

__attribute__((noinline)) static struct entry *entry_new(unsigned key)
{
	size_t len = ENTRY_MIN + key % ENTRY_SPREAD;
	struct entry *e = malloc(sizeof *e + len);
	if (!e)
		return NULL;
	e->key = key;
	e->len = len;
	memset(e->data, (int)(key & 0xff), len);
	return e;
}

__attribute__((noinline)) static void cache_insert(unsigned key)
{
	cache[key] = entry_new(key);
}

__attribute__((noinline)) static void cache_fill(void)
{
	unsigned per_step = CACHE_ENTRIES / CACHE_STEPS;
	for (unsigned s = 0; s < CACHE_STEPS; s++) {
		for (unsigned i = s * per_step; i < (s + 1) * per_step; i++)
			cache_insert(i);
		pause_step();
	}
}

/* ---- phase 2: a burst of temporaries ------------------------------------- */

__attribute__((noinline)) static char *token_copy(const char *s, size_t n)
{
	return strndup(s, n);
}

__attribute__((noinline)) static void request_parse(const char *req)
{
	const char *p = req;
	for (int t = 0; t < TOKENS_PER_REQUEST; t++) {
		size_t n = strcspn(p, " ");
		char *tok = token_copy(p, n);
		if (tok) {
			checksum += (unsigned char)tok[0];
			free(tok);
		}
		p += n + (p[n] == ' ');
	}
}

__attribute__((noinline)) static void request_handle(unsigned i)
{
	char req[64];
	snprintf(req, sizeof req, "GET /item/%u HTTP/1.1", i);
	request_parse(req);
}

__attribute__((noinline)) static void burst(void)
{
	for (unsigned s = 0; s < BURST_STEPS; s++) {
		for (unsigned i = 0; i < REQUESTS_PER_STEP; i++)
			request_handle(s * REQUESTS_PER_STEP + i);
		pause_step();
	}
}

/* ---- phase 3: a leak ------------------------------------------------------ */

__attribute__((noinline)) static char *config_line(unsigned i)
{
	char *line = malloc(LEAK_SIZE);
	if (line)
		snprintf(line, LEAK_SIZE, "option_%u = %u", i, i * 7);
	return line;
}

__attribute__((noinline)) static void config_load(void)
{
	for (unsigned i = 0; i < LEAK_BLOCKS; i++) {
		char *line = config_line(i);
		if (line)
			checksum += (unsigned char)line[7]; /* and forgotten: the leak */
	}
}

/* ---- phase 4: steady state in a second thread ----------------------------- */

__attribute__((noinline)) static void *work_block(unsigned i)
{
	size_t n = WORK_MIN + i % WORK_SPREAD;
	unsigned char *b = malloc(n);
	if (b)
		memset(b, (int)(i & 0xff), n);
	return b;
}

__attribute__((noinline)) static void *worker(void *arg)
{
	void **set = calloc(WORKING_SET, sizeof *set);
	unsigned i = 0;
	(void)arg;
	pthread_setname_np(pthread_self(), "demo-worker");
	if (!set)
		return NULL;
	for (unsigned s = 0; s < STEADY_STEPS; s++) {
		for (unsigned r = 0; r < REPLACES_PER_STEP; r++, i++) {
			unsigned k = i % WORKING_SET;
			free(set[k]);
			set[k] = work_block(i);
		}
		pause_step();
	}
	for (unsigned k = 0; k < WORKING_SET; k++)
		free(set[k]);
	free(set);
	return NULL;
}

__attribute__((noinline)) static void cache_trim(void)
{
	for (unsigned i = 0; i < CACHE_ENTRIES; i += 2) {
		checksum += cache[i] ? cache[i]->key : 0;
		free(cache[i]);
		cache[i] = NULL;
	}
}

int main(void)
{
	pthread_t th;

	mark("cache");
	cache_fill();
	mark("burst");
	burst();
	mark("leak");
	config_load();
	mark("steady");
	if (pthread_create(&th, NULL, worker, NULL) != 0) {
		fprintf(stderr, "demo: cannot start the worker thread\n");
		return 1;
	}
	cache_trim();
	pthread_join(th, NULL);
	mark("end");
	for (unsigned i = 0; i < CACHE_ENTRIES; i++)
		free(cache[i]);
	printf("demo: done (checksum %u)\n", checksum);
	return 0;
}
