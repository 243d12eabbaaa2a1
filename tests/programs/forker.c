/*
 * forker - fork under the recorder. The parent allocates 5 blocks of 3001
 * bytes (parent_site) and keeps them over the fork; the child allocates 7
 * blocks of 3002 bytes (child_site), frees 4 of them, and leaves by
 * argv[1]: "exit" (default: exit(0)), "_exit" (_exit(0), no destructors),
 * or "exec" (execv(argv[2], argv + 2): the new program records its own
 * trace under the same pid). The parent waits, frees its blocks and prints
 *   parent <pid> allocs 5 size 3001
 *   child <pid> allocs 7 frees 4 size 3002 how <mode>
 * The parent's trace must hold its 5 allocations and none of the child's;
 * the child's trace (named with its pid) the child's 7 + 4 and none of the
 * parent's. Exits with the child's exit status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PARENT_BLOCKS 5
#define CHILD_BLOCKS 7
#define CHILD_FREES 4

__attribute__((noinline)) static void *parent_site(void) { return malloc(3001); }
__attribute__((noinline)) static void *child_site(void) { return malloc(3002); }

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "exit";
	if (!strcmp(how, "exec") && argc < 3) {
		fprintf(stderr, "usage: forker [exit|_exit|exec PROG ARGS...]\n");
		return 2;
	}
	void *mine[PARENT_BLOCKS];
	for (int i = 0; i < PARENT_BLOCKS; i++)
		mine[i] = parent_site();
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("forker: fork");
		return 1;
	}
	if (pid == 0) {
		void *theirs[CHILD_BLOCKS];
		for (int i = 0; i < CHILD_BLOCKS; i++)
			theirs[i] = child_site();
		for (int i = 0; i < CHILD_FREES; i++)
			free(theirs[i]);
		if (!strcmp(how, "_exit"))
			_exit(0);
		if (!strcmp(how, "exec")) {
			execv(argv[2], argv + 2);
			_exit(127);
		}
		exit(0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	for (int i = 0; i < PARENT_BLOCKS; i++)
		free(mine[i]);
	printf("parent %d allocs %d size 3001\n", (int)getpid(), PARENT_BLOCKS);
	printf("child %d allocs %d frees %d size 3002 how %s\n", (int)pid, CHILD_BLOCKS,
	       CHILD_FREES, how);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
