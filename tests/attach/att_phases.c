/*
 * att_phases.c - a program to attach to part-way (tests/attach/test_attach.py).
 *
 *   att_phases GO_FILE END_FILE
 *
 * Phase 1 (before any attach): early() allocates EARLY_BLOCKS blocks of
 * EARLY_SIZE bytes; prints "ready PID" and waits (polling, allocating
 * nothing) until GO_FILE exists. Phase 2: frees EARLY_BLOCKS - 1 of them,
 * reallocs the last one to RE_SIZE in regrow() (a realloc of a block the
 * trace never saw), alpha() mallocs ALPHA_BLOCKS x ALPHA_SIZE and frees
 * one, beta() callocs BETA_BLOCKS x BETA_SIZE, delta() strdups DELTA_TEXT
 * (libc's malloc call, through libc's own GOT), and a forked child calls
 * gamma() (GAMMA_SIZE bytes) and _exits; prints "phase2 done" once the
 * child is gone and waits for END_FILE, then prints "bye" and exits 0
 * without freeing.
 * So an attach between the phases records exactly: alpha 2 x 1000, beta
 * 2 x 5000, regrow 1 x 200, delta 1 x 24 live at the end, and EARLY_BLOCKS frees of
 * blocks allocated before it (the realloc's included); nothing of the child
 * (an attach records the process attached to, not its children).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EARLY_BLOCKS 10
#define EARLY_SIZE 100
#define RE_SIZE 200
#define ALPHA_BLOCKS 3
#define ALPHA_SIZE 1000
#define BETA_BLOCKS 2
#define BETA_SIZE 5000
#define GAMMA_SIZE 777
#define DELTA_TEXT "copied after the attach"   /* 23 characters: 24 bytes */
#define POLL_NS 1000000L

static void *blocks[EARLY_BLOCKS];
static void *alphas[ALPHA_BLOCKS];
static void *betas[BETA_BLOCKS];
static void *volatile grown;
static char *volatile copied;

__attribute__((noinline)) static void early(void)
{
	for (int i = 0; i < EARLY_BLOCKS; i++)
		blocks[i] = malloc(EARLY_SIZE);
}

__attribute__((noinline)) static void regrow(void)
{
	grown = realloc(blocks[EARLY_BLOCKS - 1], RE_SIZE);
}

__attribute__((noinline)) static void alpha(void)
{
	for (int i = 0; i < ALPHA_BLOCKS; i++)
		alphas[i] = malloc(ALPHA_SIZE);
	free(alphas[0]);
}

__attribute__((noinline)) static void beta(void)
{
	for (int i = 0; i < BETA_BLOCKS; i++)
		betas[i] = calloc(1, BETA_SIZE);
}

__attribute__((noinline)) static void delta(void)
{
	copied = strdup(DELTA_TEXT);
}

__attribute__((noinline)) static void gamma_child(void)
{
	void *volatile p = malloc(GAMMA_SIZE);
	(void)p;
	_exit(0);
}

static void wait_for(const char *path)
{
	struct timespec step = { 0, POLL_NS };
	while (access(path, F_OK) != 0)
		nanosleep(&step, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: att_phases GO_FILE END_FILE\n");
		return 2;
	}
	early();
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	wait_for(argv[1]);
	for (int i = 0; i < EARLY_BLOCKS - 1; i++)
		free(blocks[i]);
	regrow();
	alpha();
	beta();
	delta();
	pid_t child = fork();
	if (child == 0)
		gamma_child();
	if (child < 0 || waitpid(child, NULL, 0) != child)
		return 1;
	printf("phase2 done\n");
	fflush(stdout);
	wait_for(argv[2]);
	printf("bye\n");
	return 0;
}
