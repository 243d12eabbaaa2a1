/*
 * pools - a pool allocator reporting its blocks through rec.h's custom
 * allocator API, for tests/recorder/test_pools.py. Each pool carves its
 * blocks out of one malloc'd arena of ARENA bytes (make_pool: heap), so the
 * pool's blocks lie inside a heap block, the first at its very address.
 * Steps, each ended by a mark "pools-N":
 *   pools-0: pools "alpha" and "beta"; from alpha, alpha_small 3 blocks of
 *            100 B and alpha_big 1 of 4000 B; from beta, beta_obj 5 of
 *            64 B; loose_alloc 2 rec_alloc blocks of 1000 B (no pool)
 *   pools-1: alpha's first small block freed (rec_pool_free); one beta
 *            block freed by address through alpha (not alpha's: nothing
 *            ends); loose_grow rec_reallocs a loose block to 3000 B
 *   pools-2: beta destroyed (rec_pool_destroy: its 4 blocks end), its
 *            arena freed; the other loose block freed (rec_free)
 *   pools-3: alpha destroyed, its arena freed, the last loose block freed
 * With the argument "fork", the process forks after pools-1; the child
 * marks "child-0" (it inherited pools-1's blocks), frees alpha's second
 * small block, destroys beta, makes pool "gamma" with one gamma_obj block
 * of 32 B, marks "child-1" and exits; the parent waits for it and goes on
 * as without the argument. With "churn", after pools-3: pool "delta"
 * gets DELTA_KEEP blocks of 48 B from delta_keep, then delta_churn takes
 * and gives back a block of 48 B at one address DELTA_CHURN times,
 * keeping the last (mark "churn-0"); the pool is destroyed (mark
 * "churn-1": its blocks all ended at once, though most of the pool's
 * reports were of blocks long gone).
 * Without the recorder (the weak symbols are NULL) it does the same and
 * prints "no recorder"; with it, any rec_ call that fails exits 1.
 * Expected per function at each mark, in bytes: see the test.
 */
#define REC_WEAK
#include "rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARENA 65536

struct pool {
	rec_pool_t id;
	char *arena;
	size_t used;
};

static int recorded;   /* the recorder is there */

static void must(int rc, const char *what)
{
	if (recorded && rc) {
		fprintf(stderr, "pools: %s failed\n", what);
		exit(1);
	}
}

static void mark(const char *label)
{
	if (recorded)
		must(rec_mark(label), "rec_mark");
}

static void make_pool(struct pool *p, const char *name)
{
	p->arena = malloc(ARENA);
	p->used = 0;
	p->id = recorded ? rec_pool_create(name) : REC_POOL_NONE;
	if (!p->arena || (recorded && p->id == REC_POOL_NONE)) {
		fprintf(stderr, "pools: make_pool %s failed\n", name);
		exit(1);
	}
}

/* Every block of a pool is reported by this one call site. */
static void *pool_get(struct pool *p, size_t size)
{
	void *b = p->arena + p->used;
	p->used += (size + 15) & ~(size_t)15;
	if (recorded)
		must(rec_pool_alloc(p->id, b, size), "rec_pool_alloc");
	return b;
}

static void pool_put(struct pool *p, void *b)
{
	if (recorded)
		must(rec_pool_free(p->id, b), "rec_pool_free");
}

static void pool_drop(struct pool *p)
{
	if (recorded)
		must(rec_pool_destroy(p->id), "rec_pool_destroy");
	free(p->arena);
}

static void *alpha_small(struct pool *p) { return pool_get(p, 100); }
static void *alpha_big(struct pool *p) { return pool_get(p, 4000); }
static void *beta_obj(struct pool *p) { return pool_get(p, 64); }

static void *gamma_obj(struct pool *p) { return pool_get(p, 32); }

static char loose[2][4096];

static void *loose_alloc(int i)
{
	if (recorded)
		must(rec_alloc(loose[i], 1000), "rec_alloc");
	return loose[i];
}

static void loose_grow(void *b)
{
	if (recorded)
		must(rec_realloc(b, b, 3000), "rec_realloc");
}

static void loose_free(void *b)
{
	if (recorded)
		must(rec_free(b), "rec_free");
}

#define DELTA_KEEP 10
#define DELTA_CHURN 1000
#define DELTA_SIZE 48

static void *delta_keep(struct pool *p) { return pool_get(p, DELTA_SIZE); }

/* One address taken and given back again and again; the last one kept. */
static void delta_churn(struct pool *p)
{
	for (int i = 0; i < DELTA_CHURN; i++) {
		void *b = pool_get(p, DELTA_SIZE);
		if (i == DELTA_CHURN - 1)
			break;
		pool_put(p, b);
		p->used = (size_t)((char *)b - p->arena);
	}
}

static void churn(void)
{
	struct pool delta;
	make_pool(&delta, "delta");
	for (int i = 0; i < DELTA_KEEP; i++)
		delta_keep(&delta);
	delta_churn(&delta);
	mark("churn-0");
	pool_drop(&delta);
	mark("churn-1");
}

/* The child of "fork": what it inherited, then its own pool calls. */
static void child(struct pool *alpha, struct pool *beta, void *small)
{
	struct pool gamma;
	mark("child-0");
	pool_put(alpha, small);
	pool_drop(beta);
	make_pool(&gamma, "gamma");
	gamma_obj(&gamma);
	mark("child-1");
	exit(0);
}

/* Forks the child; returns once it is done. */
static void fork_child(struct pool *alpha, struct pool *beta, void *small)
{
	pid_t pid = fork();
	int status;
	if (pid == 0)
		child(alpha, beta, small);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "pools: the forked child failed\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct pool alpha, beta;
	void *a[3], *b[5], *l[2];

	recorded = rec_pool_create != NULL;
	make_pool(&alpha, "alpha");
	make_pool(&beta, "beta");
	for (int i = 0; i < 3; i++)
		a[i] = alpha_small(&alpha);
	alpha_big(&alpha);
	for (int i = 0; i < 5; i++)
		b[i] = beta_obj(&beta);
	for (int i = 0; i < 2; i++)
		l[i] = loose_alloc(i);
	mark("pools-0");

	pool_put(&alpha, a[0]);
	pool_put(&alpha, b[1]);   /* beta's block, not alpha's: nothing ends */
	loose_grow(l[0]);
	mark("pools-1");
	if (argc > 1 && !strcmp(argv[1], "fork"))
		fork_child(&alpha, &beta, a[1]);

	pool_drop(&beta);
	loose_free(l[1]);
	mark("pools-2");

	pool_drop(&alpha);
	loose_free(l[0]);
	mark("pools-3");
	if (argc > 1 && !strcmp(argv[1], "churn"))
		churn();
	if (!recorded)
		puts("no recorder");
	return 0;
}
