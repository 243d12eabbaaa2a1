/*
 * rss_marks - known amounts of memory touched between marks, for the test
 * of the recorder's counters (tests/recorder/test_counters.py): at each
 * step it changes its heap, calls rec_flush (which has the recorder read
 * the counters after the change), reads its own VmRSS from
 * /proc/self/status, and marks "rss-N". Steps:
 *   rss-0: one block of BASE bytes, every page written, kept to the end (so
 *          that the recorder's own buffers, which it touches as it goes,
 *          are a small part of every figure: 2 % of the smallest)
 *   rss-1: and one block of BIG bytes, every page written
 *   rss-2: and SMALL_COUNT blocks of SMALL bytes, each written
 *   rss-3: the big block freed (glibc gives its mapping back)
 *   rss-4: the small blocks freed too (glibc keeps most of them)
 * It allocates nothing else before the end (no stdio until then), so the
 * live heap at each mark is exactly what the steps say. At the end it
 * prints one line per step: "rss-N VMRSS_BYTES".
 * Runs unrecorded too (rec.h's REC_WEAK: the calls are skipped).
 */
#define REC_WEAK
#include "rec.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE (16u << 20)
#define BIG (64u << 20)
#define SMALL 1024u
#define SMALL_COUNT 32768u
#define STEPS 5
#define STATUS_BYTES 4096
#define KIB 1024u

static unsigned long long vmrss[STEPS];
static void *small[SMALL_COUNT];

/* VmRSS of /proc/self/status in bytes, read without allocating. */
static unsigned long long read_vmrss(void)
{
	char buf[STATUS_BYTES];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strstr(buf, "VmRSS:");
	return p ? strtoull(p + strlen("VmRSS:"), NULL, 10) * KIB : 0;
}

static void step(int n)
{
	static const char *const labels[STEPS] = { "rss-0", "rss-1", "rss-2", "rss-3", "rss-4" };
	if (rec_flush)
		rec_flush();
	vmrss[n] = read_vmrss();
	if (rec_mark)
		rec_mark(labels[n]);
}

int main(void)
{
	read_vmrss();   /* its stack and the kernel's side touched before rss-0 */
	char *base = malloc(BASE);
	memset(base, 3, BASE);
	step(0);
	char *big = malloc(BIG);
	memset(big, 1, BIG);
	step(1);
	for (unsigned i = 0; i < SMALL_COUNT; i++)
		memset(small[i] = malloc(SMALL), 2, SMALL);
	step(2);
	free(big);
	step(3);
	for (unsigned i = 0; i < SMALL_COUNT; i++)
		free(small[i]);
	step(4);
	free(base);
	for (int i = 0; i < STEPS; i++)
		printf("rss-%d %llu\n", i, vmrss[i]);
	return 0;
}
