/*
 * forkstorm N WAVE - many forked children under one REC_OUT without %p
 * (issue 21, defect 4: their traces must never run out of names).
 *
 * The parent allocates 3 blocks of 999 bytes (base_site), then forks N
 * children, WAVE of them alive at a time. Child i (0-based) frees base
 * block i % 3, which it inherited, allocates i % 5 + 1 blocks of 100 + i
 * bytes (storm_site), keeps them and exits. The parent prints one line
 * "child PID I" per child, frees its blocks and exits 0 if every child
 * exited 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define BASE_BLOCKS 3
#define BASE_SIZE 999
#define STORM_KINDS 5               /* child i allocates i % 5 + 1 blocks */
#define STORM_BASE 100              /* ... of 100 + i bytes */

__attribute__((noinline)) static void *base_site(void) { return malloc(BASE_SIZE); }
__attribute__((noinline)) static void *storm_site(int i) { return malloc(STORM_BASE + (size_t)i); }

static void child(int i, void **base)
{
	free(base[i % BASE_BLOCKS]);
	for (int k = 0; k < i % STORM_KINDS + 1; k++)
		if (!storm_site(i))
			_exit(1);
	exit(0);
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[1]) : 0, wave = argc > 2 ? atoi(argv[2]) : 0;
	if (n <= 0 || wave <= 0) {
		fprintf(stderr, "usage: forkstorm N WAVE\n");
		return 2;
	}
	void *base[BASE_BLOCKS];
	for (int k = 0; k < BASE_BLOCKS; k++)
		base[k] = base_site();
	pid_t *pids = calloc((size_t)n, sizeof *pids);
	int ok = pids != NULL;
	for (int start = 0; ok && start < n; start += wave) {
		int end = start + wave < n ? start + wave : n;
		fflush(stdout);
		for (int i = start; i < end; i++) {
			pids[i] = fork();
			if (pids[i] == 0)
				child(i, base);
			ok &= pids[i] > 0;
		}
		for (int i = start; i < end; i++) {
			int status;
			ok &= pids[i] > 0 && waitpid(pids[i], &status, 0) == pids[i] &&
			      WIFEXITED(status) && !WEXITSTATUS(status);
			printf("child %d %d\n", (int)pids[i], i);
		}
	}
	for (int k = 0; k < BASE_BLOCKS; k++)
		free(base[k]);
	free(pids);
	return ok ? 0 : 1;
}
