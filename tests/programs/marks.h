/*
 * marks.h - what alloc_api_je, alloc_api_tc and got_threads share: rec_mark when
 * recorded, and the three marks between which their blocks are freed.
 * Must never: allocate (the programs allocate only through their sites).
 */
#ifndef HR_MARKS_H
#define HR_MARKS_H

#include <dlfcn.h>

/* rec_mark when recorded (libheapreel.so exports it), else nothing. */
static inline void mark(const char *label)
{
	int (*m)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "rec_mark");
	if (m)
		m(label);
}

/* Mark "all"; drop(0) frees every site's first block; mark "some"; the
 * rest of blocks are freed; mark "none". */
static inline void drop_between_marks(void (*drop)(int), int blocks)
{
	mark("all");
	drop(0);
	mark("some");
	for (int i = 1; i < blocks; i++)
		drop(i);
	mark("none");
}

#endif
