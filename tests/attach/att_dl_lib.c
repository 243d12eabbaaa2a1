/*
 * att_dl_lib.c - the library att_dlopen.c loads while attached to
 * (tests/attach/test_dlopen.py): its constructor allocates CTOR_SIZE
 * bytes as dlopen runs it, before the recorder can have routed the
 * library's malloc; att_dl_take allocates TAKE_SIZE bytes when called.
 * Neither block is freed.
 */
#include <stdlib.h>

#define CTOR_SIZE 3333
#define TAKE_SIZE 4444

static void *volatile kept[2];

__attribute__((constructor)) static void at_load(void)
{
	kept[0] = malloc(CTOR_SIZE);
}

__attribute__((noinline)) void *att_dl_take(void)
{
	return kept[1] = malloc(TAKE_SIZE);
}
