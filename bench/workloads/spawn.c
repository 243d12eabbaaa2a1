/*
 * spawn.c - the benchmarks' many-small-traces workload (bench/run.py,
 * "import_many"): a parent that forks CHILDREN short children, WAVE of them
 * alive at a time, each of which makes BLOCKS allocations from SITES call
 * sites and frees all but one in KEEP_EVERY before it exits. Recorded with
 * trace-record, the run's directory holds CHILDREN + 1 traces of the same
 * program, all with the same few stacks: what importing a run of a shell
 * script or a build system looks like.
 *
 *   spawn CHILDREN BLOCKS WAVE      (bench/run.py: spawn 3000 125 4)
 *
 * WAVE 0 forks nothing: the parent does every child's work itself, in
 * turn, so one trace holds the same allocations (run.py's comparison: what
 * the many traces cost beyond their events). Every child makes the same
 * calls (sizes depend only on the block's index), so every run records the
 * same events; the totals go to stderr as "spawn: children=N
 * alloc_calls=N".
 *
 * Must never: depend on timing for what it does, or leave a child behind
 * (the parent waits for every one and fails if one failed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SITES 4               /* call sites a child allocates from */
#define KEEP_EVERY 10         /* a child keeps one block in this many */
#define SIZE_MIN 16           /* block sizes: SIZE_MIN + (i % SIZE_SPAN) * 8 */
#define SIZE_SPAN 64

__attribute__((noinline)) static void *site0(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site1(size_t n) { return calloc(1, n); }
__attribute__((noinline)) static void *site2(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site3(size_t n) { return realloc(NULL, n); }

static void *(*const sites[SITES])(size_t) = { site0, site1, site2, site3 };

/* One child's work: blocks allocations, most freed again. */
static int child(int blocks)
{
	void **kept = calloc((size_t)blocks, sizeof *kept);

	if (!kept)
		return 1;
	for (int i = 0; i < blocks; i++) {
		size_t n = SIZE_MIN + (size_t)(i % SIZE_SPAN) * 8;
		void *p = sites[i % SITES](n);

		if (!p)
			return 1;
		memset(p, i, n);
		if (i % KEEP_EVERY)
			free(p);
		else
			kept[i] = p;
	}
	for (int i = 0; i < blocks; i++)
		free(kept[i]);
	free(kept);
	return 0;
}

static int reap(int *failed)
{
	int status;

	if (wait(&status) < 0)
		return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		(*failed)++;
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc == 4 ? atoi(argv[1]) : 0;
	int blocks = argc == 4 ? atoi(argv[2]) : 0;
	int wave = argc == 4 ? atoi(argv[3]) : 0;
	int running = 0, failed = 0;

	if (n <= 0 || blocks <= 0 || wave < 0) {
		fprintf(stderr, "usage: spawn CHILDREN BLOCKS WAVE\n");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		pid_t pid;

		if (wave == 0) {
			failed += child(blocks);
			continue;
		}
		if (running == wave && reap(&failed) == 0)
			running--;
		pid = fork();
		if (pid < 0) {
			perror("spawn: fork");
			return 1;
		}
		if (pid == 0)
			exit(child(blocks));
		running++;
	}
	while (running > 0 && reap(&failed) == 0)
		running--;
	fprintf(stderr, "spawn: children=%d alloc_calls=%lld\n", n,
		(long long)n * blocks);
	return failed ? 1 : 0;
}
