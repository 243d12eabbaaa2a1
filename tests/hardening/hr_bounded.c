/*
 * hr_bounded.c - a program whose live set is known exactly at every mark,
 * run for far longer than a bounded trace holds (test_bounded.py).
 *
 *   hr_bounded ROUNDS [progress | flush | pass]
 *
 * At start, call_keep allocates KEEP blocks of 1000 + i bytes, freed only
 * at the very end: the surviving window must still know them (keyframes).
 * Each round, WORKERS threads churn: random malloc / free / realloc in a
 * table of their own (call_churn, call_grow) and blocks handed to the next
 * worker, who frees them (call_pass: cross-thread frees). Then every worker
 * frees all of that and its previous hold set, and allocates its new hold
 * set in call_hold: (round % 5 + 1 + k) blocks of 64 (k + 1) + round bytes
 * for worker k. All threads meet; main puts the mark "round-N" (rec_mark
 * through dlsym); all meet again. So at "round-N" exactly the keep set and
 * the hold sets of round N are live from these call sites. Prints
 * "rounds N" at the end (with "progress": "round N" after each mark, for a
 * test that kills it mid-run; with "flush": main calls rec_flush
 * FLUSHES times in each round while the workers churn, so flushes meet
 * keyframes; with "pass": PASS_PERCENT of the ops hand a block to the next
 * worker, who frees its inbox every PASS_DRAIN ops, so addresses move
 * between threads (glibc's per-thread cache hands a freed block to the
 * thread that freed it) many times a millisecond); exits 0.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 3
#define KEEP 100
#define SLOTS 1024
#define OPS 10000                /* per worker per round */
#define INBOX 4096
#define HOLD_MAX 16
#define FLUSHES 3                /* rec_flush calls per round in "flush" mode */
#define PASS_PERCENT 5           /* ops that hand a block on ("pass" mode: PASS_MANY) */
#define PASS_MANY 50
#define DRAIN_EVERY 1000         /* ops between inbox drains ("pass" mode: PASS_DRAIN) */
#define PASS_DRAIN 50

static pthread_barrier_t done_churn, held, marked;
static int rounds;
static unsigned pass_percent = PASS_PERCENT, drain_every = DRAIN_EVERY;

struct worker {
	int k;
	void *slot[SLOTS];
	void *hold[HOLD_MAX];
	int nhold;
	pthread_mutex_t lock;    /* inbox */
	void *inbox[INBOX];
	int ninbox;
};
static struct worker w[WORKERS];

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

__attribute__((noinline)) static void *call_keep(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *call_churn(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *call_grow(void *p, size_t n) { return realloc(p, n); }
__attribute__((noinline)) static void *call_pass(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *call_hold(size_t n) { return malloc(n); }

static void drain_inbox(struct worker *me)
{
	pthread_mutex_lock(&me->lock);
	for (int i = 0; i < me->ninbox; i++)
		free(me->inbox[i]);
	me->ninbox = 0;
	pthread_mutex_unlock(&me->lock);
}

static void churn(struct worker *me, int round)
{
	uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(me->k + 1) + (uint64_t)round * 7919 + 1;
	struct worker *to = &w[(me->k + 1) % WORKERS];
	for (int op = 0; op < OPS; op++) {
		uint64_t r = next_rand(&s);
		void **p = &me->slot[r % SLOTS];
		size_t size = 16 + (r >> 20) % 4096;
		unsigned what = (unsigned)(r >> 40) % 100;
		if (what < pass_percent) {
			pthread_mutex_lock(&to->lock);
			if (to->ninbox < INBOX)
				to->inbox[to->ninbox++] = call_pass(size);
			pthread_mutex_unlock(&to->lock);
		} else if (what < 20 && *p) {
			void *q = call_grow(*p, size);
			if (q)
				*p = q;
		} else if (!*p) {
			*p = call_churn(size);
		} else {
			free(*p);
			*p = NULL;
		}
		if (op % drain_every == 0)
			drain_inbox(me);
	}
}

static void *work(void *arg)
{
	struct worker *me = arg;
	for (int round = 1; round <= rounds; round++) {
		churn(me, round);
		pthread_barrier_wait(&done_churn);   /* nobody hands off any more */
		drain_inbox(me);
		for (int i = 0; i < SLOTS; i++) {
			free(me->slot[i]);
			me->slot[i] = NULL;
		}
		for (int i = 0; i < me->nhold; i++)
			free(me->hold[i]);
		me->nhold = round % 5 + 1 + me->k;
		for (int i = 0; i < me->nhold; i++)
			me->hold[i] = call_hold((size_t)(64 * (me->k + 1) + round));
		pthread_barrier_wait(&held);
		pthread_barrier_wait(&marked);
	}
	for (int i = 0; i < me->nhold; i++)
		free(me->hold[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 40;
	int progress = argc > 2 && !strcmp(argv[2], "progress");
	int flushing = argc > 2 && !strcmp(argv[2], "flush");
	if (argc > 2 && !strcmp(argv[2], "pass")) {
		pass_percent = PASS_MANY;
		drain_every = PASS_DRAIN;
	}
	int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "rec_mark");
	int (*flush)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "rec_flush");
	if (flushing && !flush)
		return 1;
	static void *keep[KEEP];
	for (int i = 0; i < KEEP; i++)
		keep[i] = call_keep((size_t)(1000 + i));
	pthread_barrier_init(&done_churn, NULL, WORKERS);
	pthread_barrier_init(&held, NULL, WORKERS + 1);
	pthread_barrier_init(&marked, NULL, WORKERS + 1);
	pthread_t t[WORKERS];
	/* every inbox lock before any worker runs: worker k hands blocks to
	 * worker k + 1 from its first op, and initialising a mutex another
	 * thread holds unlocks it (two threads in one inbox: a block lost) */
	for (int k = 0; k < WORKERS; k++) {
		w[k].k = k;
		pthread_mutex_init(&w[k].lock, NULL);
	}
	for (int k = 0; k < WORKERS; k++)
		if (pthread_create(&t[k], NULL, work, &w[k]) != 0)
			return 1;
	for (int round = 1; round <= rounds; round++) {
		char label[32];
		pthread_barrier_wait(&held);
		snprintf(label, sizeof label, "round-%d", round);
		if (mark && mark(label) != 0)
			return 1;
		if (progress) {
			printf("round %d\n", round);
			fflush(stdout);
		}
		pthread_barrier_wait(&marked);
		for (int i = 0; flushing && i < FLUSHES; i++)
			if (flush() != 0)
				return 1;
	}
	for (int k = 0; k < WORKERS; k++)
		pthread_join(t[k], NULL);
	for (int i = 0; i < KEEP; i++)
		free(keep[i]);
	printf("rounds %d\n", rounds);
	return 0;
}
