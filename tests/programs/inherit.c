/*
 * inherit - a forked child's heap is its parent's (issue 21, defect 10).
 * Known sizes from known functions, so every snapshot has exact answers:
 *
 *   parent      keep_site  6 x 1111 B, drop_site 4 x 2222 B; a thread
 *               (noise_site, 77 B, each freed at once, every 100 us)
 *               allocates through every fork; forks the child, waits, then vforks a program
 *               that execs `inherit exec` (a new image: nothing inherited).
 *   child       frees the 4 drop_site blocks it inherited; child_site
 *               3 x 3333 B, frees 1; marks "child-done"; forks the
 *               grandchild, waits.
 *   grandchild  frees 2 of the keep_site blocks it inherited through the
 *               child; grand_site 2 x 4444 B; marks "grand-done".
 *   exec        exec_site 1 x 5555 B (freed), then exits.
 *
 * So at the end (--leaks): the child holds keep 6666 B, child 6666 B;
 * the grandchild keep 4444 B, child 6666 B, grand 8888 B; every free
 * pairs. Prints "parent P child C grandchild G exec E".
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEEP_BLOCKS 6
#define DROP_BLOCKS 4
#define CHILD_BLOCKS 3
#define CHILD_FREES 1
#define GRAND_FREES 2               /* of the keep_site blocks */
#define GRAND_BLOCKS 2

__attribute__((noinline)) static void *keep_site(void) { return malloc(1111); }
__attribute__((noinline)) static void *drop_site(void) { return malloc(2222); }
__attribute__((noinline)) static void *child_site(void) { return malloc(3333); }
__attribute__((noinline)) static void *grand_site(void) { return malloc(4444); }
__attribute__((noinline)) static void *exec_site(void) { return malloc(5555); }
__attribute__((noinline)) static void *noise_site(void) { return malloc(77); }

#define NOISE_PAUSE_US 100          /* between the thread's blocks: a few hundred in all */

static atomic_int stop;

static void *noise(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		free(noise_site());
		usleep(NOISE_PAUSE_US);
	}
	return NULL;
}

/* rec_mark when recorded (libheapreel.so exports it), else nothing. */
static void mark(const char *label)
{
	void (*m)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "rec_mark");
	if (m)
		m(label);
}

static pid_t must_fork(void)
{
	pid_t pid = fork();
	if (pid < 0) {
		perror("inherit: fork");
		exit(1);
	}
	return pid;
}

static int wait_ok(pid_t pid)
{
	int status;
	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status);
}

/* The grandchild's pid through a pipe: the parent prints it. */
static void grandchild(void **keep, int out)
{
	for (int i = 0; i < GRAND_FREES; i++)
		free(keep[i]);
	for (int i = 0; i < GRAND_BLOCKS; i++)
		if (!grand_site())
			_exit(1);
	mark("grand-done");
	pid_t me = getpid();
	_exit(write(out, &me, sizeof me) == sizeof me ? 0 : 1);
}

static void child(void **keep, void **drop, int out)
{
	void *mine[CHILD_BLOCKS];
	for (int i = 0; i < DROP_BLOCKS; i++)
		free(drop[i]);
	for (int i = 0; i < CHILD_BLOCKS; i++)
		mine[i] = child_site();
	for (int i = 0; i < CHILD_FREES; i++)
		free(mine[i]);
	mark("child-done");
	pid_t g = must_fork();
	if (g == 0)
		grandchild(keep, out);
	exit(wait_ok(g) ? 0 : 1);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		free(exec_site());
		return 0;
	}
	void *keep[KEEP_BLOCKS], *drop[DROP_BLOCKS];
	for (int i = 0; i < KEEP_BLOCKS; i++)
		keep[i] = keep_site();
	for (int i = 0; i < DROP_BLOCKS; i++)
		drop[i] = drop_site();
	pthread_t th;
	int fds[2];
	if (pthread_create(&th, NULL, noise, NULL) || pipe(fds)) {
		fprintf(stderr, "inherit: cannot start the thread or the pipe\n");
		return 1;
	}
	fflush(stdout);
	pid_t c = must_fork();
	if (c == 0)
		child(keep, drop, fds[1]);
	pid_t g = 0;
	int ok = wait_ok(c) && read(fds[0], &g, sizeof g) == sizeof g;
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	pid_t e = vfork();
	if (e == 0) {
		execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
		_exit(127);
	}
	ok = ok && e > 0 && wait_ok(e);
	for (int i = 0; i < KEEP_BLOCKS; i++)
		free(keep[i]);
	for (int i = 0; i < DROP_BLOCKS; i++)
		free(drop[i]);
	printf("parent %d child %d grandchild %d exec %d\n", (int)getpid(), (int)c, (int)g, (int)e);
	return ok ? 0 : 1;
}
