/*
 * imp_killed.c - allocates a known set of blocks, then SIGKILLs itself:
 * whatever the recorder's writer had not yet appended to the trace must be
 * recovered by trace-import from the leftover TRACE.ring. It must never
 * print or exit normally.
 */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define N_BLOCKS 5000
#define BASE_SIZE 32
#define SIZE_SPREAD 7                 /* sizes BASE_SIZE .. BASE_SIZE + 6 */

void *volatile keep[N_BLOCKS];

void doomed(void)
{
	for (int i = 0; i < N_BLOCKS; i++)
		keep[i] = malloc(BASE_SIZE + (size_t)(i % SIZE_SPREAD));
}

int main(void)
{
	doomed();
	kill(getpid(), SIGKILL);
	return 1;
}
