/*
 * stk_dl.c - the two libraries stk_hard's dlclose case loads one after the
 * other at the same address: built as libstk_dl_a.so (dl_run < dl_leaf,
 * 1700 bytes) and, with -DSTK_DL_B, libstk_dl_b.so (dl_run < dl_mid_b <
 * dl_leaf_b, 1701 bytes), so return addresses cached for the first mean
 * other frames in the second. Each block is freed at once.
 */
#include <stdlib.h>

static volatile unsigned sink;

#ifndef STK_DL_B
__attribute__((noinline)) static void dl_leaf(void)
{
	char *p = malloc(1700);
	sink += p != NULL;
	free(p);
}

void dl_run(void)
{
	dl_leaf();
	sink++;
}
#else
__attribute__((noinline)) static void dl_leaf_b(void)
{
	char big[64];
	char *p = malloc(1701);
	big[0] = (char)(p != NULL);
	sink += (unsigned)big[0];
	free(p);
}

__attribute__((noinline)) static void dl_mid_b(void)
{
	dl_leaf_b();
	sink++;
}

void dl_run(void)
{
	dl_mid_b();
	sink++;
}
#endif
