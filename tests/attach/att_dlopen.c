/*
 * att_dlopen.c - a program that loads a library while it is attached to
 * (tests/attach/test_dlopen.py).
 *
 *   att_dlopen LIBRARY GO_FILE TAKE_FILE END_FILE
 *
 * Prints "ready PID", waits for GO_FILE, dlopens LIBRARY (att_dl_lib.c,
 * whose constructor allocates), prints "loaded", waits for TAKE_FILE,
 * calls the library's att_dl_take and allocates OWN_SIZE bytes itself in
 * own(), prints "taken", waits for END_FILE and exits 0 without freeing.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define OWN_SIZE 5555
#define POLL_NS 1000000L

static void *volatile own_block;

__attribute__((noinline)) static void own(void)
{
	own_block = malloc(OWN_SIZE);
}

static void wait_for(const char *path)
{
	struct timespec step = { 0, POLL_NS };
	while (access(path, F_OK) != 0)
		nanosleep(&step, NULL);
}

static void say(const char *line)
{
	printf("%s\n", line);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: att_dlopen LIBRARY GO_FILE TAKE_FILE END_FILE\n");
		return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	wait_for(argv[2]);
	void *h = dlopen(argv[1], RTLD_NOW);
	void *(*take)(void) = h ? (void *(*)(void))dlsym(h, "att_dl_take") : NULL;
	if (!take) {
		fprintf(stderr, "att_dlopen: %s\n", dlerror());
		return 1;
	}
	say("loaded");
	wait_for(argv[3]);
	take();
	own();
	say("taken");
	wait_for(argv[4]);
	say("bye");
	return 0;
}
