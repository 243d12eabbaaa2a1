/*
 * maps - anonymous mappings of known sizes from known functions, for the
 * test of mmap tracking (tests/recorder/test_maps.py). PAGE is 4096. Steps,
 * each ended by a mark "maps-N":
 *   maps-0: map_a maps 16 pages, map_b 8 pages (in a reservation that
 *           keeps room for grow_b to grow in place), heap_big
 *           mallocs 64 MiB (glibc maps it: heap)
 *   maps-1: unmap_mid unmaps pages 4..7 of a's region (12 pages stay, in
 *           two pieces, still map_a's); b grown in place to 12 pages by
 *           grow_b (mremap: the region is now grow_b's); map_file maps a
 *           file (not counted)
 *   maps-2: move_b moves b to a new place at 20 pages (MREMAP_MAYMOVE |
 *           MREMAP_FIXED onto a fresh reservation); fixed_c maps 2 pages
 *           MAP_FIXED over pages 0..1 of a (a keeps 10 pages)
 *   maps-3: everything unmapped, the 64 MiB block freed
 * With the argument "fork", the process forks after maps-1; the child marks
 * "child-0" (it inherited maps-1's mappings), unmaps all of a (both
 * pieces) and marks "child-1" (grow_b's 12 pages stay), then exits; the
 * parent waits for it and goes on as without the argument. With "churn",
 * after maps-3 it mallocs and frees CHURN_PAIRS blocks (enough events to
 * wrap a bounded trace of 4 MiB several times) and marks "churned".
 * Expected per function at each mark, in bytes: see the test.
 * Exits 1 (a line on stderr) if a call fails.
 */
#define REC_WEAK
#include "rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096ul
#define BIG (64ul << 20)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)
#define RW (PROT_READ | PROT_WRITE)

static void *check(void *p, const char *what)
{
	if (p == MAP_FAILED || p == NULL) {
		perror(what);
		exit(1);
	}
	return p;
}

static void *map_a(void) { return check(mmap(NULL, 16 * PAGE, RW, ANON, -1, 0), "map_a"); }
/* b's 8 pages lie at the start of a 12-page reservation made by a raw
 * system call (not recorded), so that the room grow_b needs stays taken
 * until then: a hole left open would be taken by another mapping of the
 * process (the recorder's own threads map small regions at any time). */
static void *map_b(void)
{
	long res = syscall(SYS_mmap, NULL, 12 * PAGE, PROT_NONE, ANON | MAP_NORESERVE, -1, 0);
	check(res < 0 ? MAP_FAILED : (void *)res, "map_b reserve");
	return check(mmap((void *)res, 8 * PAGE, RW, ANON | MAP_FIXED, -1, 0), "map_b");
}
static void *heap_big(void) { return check(malloc(BIG), "heap_big"); }

static void *map_file(void)
{
	FILE *f = tmpfile();
	if (!f || ftruncate(fileno(f), 4 * PAGE))
		check(NULL, "map_file");
	void *p = check(mmap(NULL, 4 * PAGE, PROT_READ, MAP_PRIVATE, fileno(f), 0), "map_file");
	fclose(f);  /* the mapping stays; the FILE's heap goes */
	return p;
}

static void unmap_mid(char *a)
{
	if (munmap(a + 4 * PAGE, 4 * PAGE))
		check(NULL, "unmap_mid");
}

/* The reservation's last 4 pages go (unrecorded) right before b grows
 * into them. */
static void *grow_b(void *b)
{
	if (syscall(SYS_munmap, (char *)b + 8 * PAGE, 4 * PAGE))
		check(NULL, "grow_b unreserve");
	return check(mremap(b, 8 * PAGE, 12 * PAGE, 0), "grow_b");
}

static void *move_b(void *b)
{
	/* a place of 20 pages that is surely free: reserve it, then move there */
	void *to = check(mmap(NULL, 20 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			      -1, 0), "move_b reserve");
	return check(mremap(b, 12 * PAGE, 20 * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, to), "move_b");
}

static void fixed_c(char *a)
{
	check(mmap(a, 2 * PAGE, RW, ANON | MAP_FIXED, -1, 0), "fixed_c");
}

/* The child of "fork": what it inherited, then a of it unmapped. */
static void child(char *a)
{
	rec_mark("child-0");
	if (munmap(a, 16 * PAGE))
		check(NULL, "child munmap");
	rec_mark("child-1");
	exit(0);
}

#define CHURN_PAIRS 1500000
#define CHURN_LIVE 64               /* blocks kept live: addresses vary */

static void churn(void)
{
	static void *live[CHURN_LIVE];
	unsigned x = 1;
	for (unsigned i = 0; i < CHURN_PAIRS; i++) {
		x = x * 1103515245u + 12345u;   /* sizes that do not compress away */
		free(live[i % CHURN_LIVE]);
		live[i % CHURN_LIVE] = malloc(16 + (x >> 8) % 4096);
	}
	for (unsigned i = 0; i < CHURN_LIVE; i++)
		free(live[i]);
	rec_mark("churned");
}

int main(int argc, char **argv)
{
	char *a = map_a();
	void *b = map_b();
	void *big = heap_big();
	rec_mark("maps-0");
	unmap_mid(a);
	b = grow_b(b);
	void *f = map_file();
	rec_mark("maps-1");
	if (argc > 1 && !strcmp(argv[1], "fork")) {
		int status;
		pid_t pid = fork();
		if (pid == 0)
			child(a);
		if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
			check(NULL, "fork");
	}
	b = move_b(b);
	fixed_c(a);
	rec_mark("maps-2");
	munmap(a, 16 * PAGE);
	munmap(b, 20 * PAGE);
	munmap(f, 4 * PAGE);
	free(big);
	rec_mark("maps-3");
	if (argc > 1 && !strcmp(argv[1], "churn"))
		churn();
	return 0;
}
