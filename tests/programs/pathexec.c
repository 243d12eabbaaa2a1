/*
 * pathexec - a PATH search done by hand, as python's os.execvp and other
 * programs do it: one execv per directory, the failed ones returning.
 *   pathexec NAME DIR...
 * allocates 2 blocks of 4003 bytes (before_site), tries execv("DIR/NAME")
 * for each DIR in turn (argv of the new program: NAME alone), then
 * execvp of a name no PATH holds; if every exec failed it allocates 3
 * blocks of 4004 bytes (after_site), prints
 *   failed <number of failed execs>
 * and exits 0. Under the recorder its trace must hold all five blocks (a
 * failed exec does not end it) and the run no other trace, unless an exec
 * succeeded: then that program's own trace is the only other one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BEFORE_BLOCKS 2
#define AFTER_BLOCKS 3
#define MISSING "heapreel-no-such-program"  /* in no directory of PATH */

__attribute__((noinline)) static void *before_site(void) { return malloc(4003); }
__attribute__((noinline)) static void *after_site(void) { return malloc(4004); }

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: pathexec NAME DIR...\n");
		return 2;
	}
	void *before[BEFORE_BLOCKS], *after[AFTER_BLOCKS];
	for (int i = 0; i < BEFORE_BLOCKS; i++)
		before[i] = before_site();
	char *args[] = { argv[1], NULL };
	int failed = 0;
	for (int i = 2; i < argc; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", argv[i], argv[1]);
		execv(path, args);
		failed++;
	}
	char *missing[] = { MISSING, NULL };
	execvp(MISSING, missing);
	failed++;
	for (int i = 0; i < AFTER_BLOCKS; i++)
		after[i] = after_site();
	printf("failed %d\n", failed);
	for (int i = 0; i < BEFORE_BLOCKS; i++)
		free(before[i]);
	for (int i = 0; i < AFTER_BLOCKS; i++)
		free(after[i]);
	return 0;
}
