/*
 * hr_disk - a deterministic allocation workload in phases, for the tests
 * where the trace cannot be written (test_diskfull.py): its stdout, a
 * checksum of its own work, must be the same recorded or not.
 *
 *   hr_disk PHASES THREADS STEPS [pause]
 *
 * Each phase starts THREADS (1..HRD_MAX_THREADS) new worker threads, so
 * threads keep arriving after the disk filled. Worker w of phase p runs
 * STEPS steps of its own PRNG over a window of HRD_WINDOW blocks: an empty
 * slot gets a malloc or calloc of a size in [HRD_MIN, HRD_MIN + HRD_SPAN),
 * filled with a pattern; a full slot is checked against its pattern, added
 * to the checksum and freed. At the end of its phase a worker frees what it
 * still holds. No realloc: every call is one event of the trace.
 * The main thread prints after each phase
 *   phase P allocs A frees F sum S
 * (A, F: the phase's calls, over all workers; S: their checksum) and at
 * the end "total allocs A frees F". With "pause" it reads one line from
 * stdin before every phase after the first (end of file: go on), so a test
 * can act on the trace at a known point. Exit status 0, or 1 when a block
 * did not hold what was written into it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HRD_MAX_THREADS 8
#define HRD_WINDOW 256
#define HRD_MIN 16
#define HRD_SPAN 4000
#define HRD_CALLOC_ONE_IN 4           /* empty slot: calloc 1 time in 4 */

struct hrd_worker {
	pthread_t t;
	uint64_t seed;
	uint64_t allocs, frees, sum;
	int bad;
};

static long steps;

static uint64_t next_rand(uint64_t *s)        /* xorshift64 */
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The pattern of a block: its size and the byte of its slot. */
static void fill(unsigned char *b, size_t n, unsigned j)
{
	memcpy(b, &n, sizeof n);
	memset(b + sizeof n, (int)(j & 0xff), n - sizeof n);
}

static void take(struct hrd_worker *w, unsigned char *b, size_t n, unsigned j)
{
	size_t m;
	memcpy(&m, b, sizeof m);
	if (m != n || b[n - 1] != (unsigned char)j)
		w->bad = 1;
	w->sum = w->sum * 31 + n + b[n - 1];
	free(b);
	w->frees++;
}

static void *worker(void *arg)
{
	struct hrd_worker *w = arg;
	unsigned char *blocks[HRD_WINDOW] = { 0 };
	size_t sizes[HRD_WINDOW] = { 0 };
	uint64_t s = w->seed;
	for (long i = 0; i < steps; i++) {
		uint64_t r = next_rand(&s);
		unsigned j = (unsigned)(r % HRD_WINDOW);
		if (blocks[j]) {
			take(w, blocks[j], sizes[j], j);
			blocks[j] = NULL;
			continue;
		}
		size_t n = HRD_MIN + (size_t)((r >> 8) % HRD_SPAN);
		blocks[j] = (r >> 24) % HRD_CALLOC_ONE_IN ? malloc(n) : calloc(1, n);
		if (!blocks[j])
			abort();
		w->allocs++;
		sizes[j] = n;
		fill(blocks[j], n, j);
	}
	for (unsigned j = 0; j < HRD_WINDOW; j++)
		if (blocks[j])
			take(w, blocks[j], sizes[j], j);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "pause"))) {
		fprintf(stderr, "usage: hr_disk PHASES THREADS STEPS [pause]\n");
		return 64;
	}
	int phases = atoi(argv[1]), n = atoi(argv[2]);
	steps = atol(argv[3]);
	if (phases < 1 || n < 1 || n > HRD_MAX_THREADS || steps < 1) {
		fprintf(stderr, "hr_disk: PHASES >= 1, THREADS 1..%d, STEPS >= 1\n",
			HRD_MAX_THREADS);
		return 64;
	}
	uint64_t allocs = 0, frees = 0;
	int bad = 0;
	for (int p = 0; p < phases; p++) {
		if (p && argc == 5) {
			char line[64];
			if (!fgets(line, sizeof line, stdin))
				clearerr(stdin);
		}
		struct hrd_worker w[HRD_MAX_THREADS];
		for (int k = 0; k < n; k++) {
			memset(&w[k], 0, sizeof w[k]);
			w[k].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(p * HRD_MAX_THREADS + k + 1);
			if (pthread_create(&w[k].t, NULL, worker, &w[k]))
				abort();
		}
		uint64_t a = 0, f = 0, sum = 0;
		for (int k = 0; k < n; k++) {
			pthread_join(w[k].t, NULL);
			a += w[k].allocs;
			f += w[k].frees;
			sum = sum * 1000003 + w[k].sum;
			bad |= w[k].bad;
		}
		printf("phase %d allocs %llu frees %llu sum %llu\n", p, (unsigned long long)a,
		       (unsigned long long)f, (unsigned long long)sum);
		fflush(stdout);
		allocs += a;
		frees += f;
	}
	printf("total allocs %llu frees %llu\n", (unsigned long long)allocs,
	       (unsigned long long)frees);
	if (bad) {
		fprintf(stderr, "hr_disk: a block did not hold what was written into it\n");
		return 1;
	}
	return 0;
}
