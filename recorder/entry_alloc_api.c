/*
 * entry_alloc_api.c - the allocators' own APIs, recorded: jemalloc's
 * mallocx, rallocx, xallocx, dallocx, sdallocx and tcmalloc's tc_* (every
 * function of gperftools/tcmalloc.h that allocates or frees), when the
 * object serving malloc defines them.
 *
 * They cannot be exported as malloc is (librec.map says why), so the GOT
 * entries through which the program's objects call them are redirected to
 * the hooks here (got.c), at start for the objects loaded then and by the
 * writer for those dlopen'ed later. nallocx, sallocx and tc_malloc_size
 * allocate nothing and are left alone, as are mallctl and tc_mallinfo.
 *
 * Each hook records through interpose.c's rec_hook_*, so a block is
 * recorded once, at the outermost entry point: what the real function
 * calls meanwhile (another entry point) arrives inside the hook and passes
 * through. rallocx and tc_realloc are realloc; xallocx resizes in place
 * and is recorded as a realloc to the same address only when the block's
 * usable size changed (sallocx before, xallocx's answer after), with the
 * size asked for; every free (dallocx, sdallocx, tc_free, tc_delete...) is
 * a free. A tc_new that throws bad_alloc records nothing (this file is
 * built with -fexceptions, as interpose.c).
 *
 * Must never: export a symbol, allocate, or run before the real pointers
 * are known (a hook is reachable only once its GOT entry is rewritten).
 */
#include "rec_internal.h"
#include "got.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* The hooked functions, by shape: X(name, shape, fn), fn the ALLOC's tf_fn
 * (frees: TF_FN_FREE). Shapes after their parameters: je_* take jemalloc's
 * int flags last; the rest are rec_cxx_* shapes of rec_internal.h or
 * malloc's family's. */
#define ALLOC_API(X) \
	X(mallocx, je_alloc, TF_FN_MALLOCX) \
	X(rallocx, je_resize, TF_FN_RALLOCX) \
	X(xallocx, je_xallocx, TF_FN_XALLOCX) \
	X(dallocx, je_free, TF_FN_FREE) \
	X(sdallocx, je_sized_free, TF_FN_FREE) \
	X(tc_malloc, new, TF_FN_TC_MALLOC) \
	X(tc_malloc_skip_new_handler, new, TF_FN_TC_MALLOC) \
	X(tc_calloc, calloc, TF_FN_TC_CALLOC) \
	X(tc_realloc, resize, TF_FN_TC_REALLOC) \
	X(tc_memalign, memalign, TF_FN_TC_MEMALIGN) \
	X(tc_valloc, new, TF_FN_TC_MEMALIGN) \
	X(tc_pvalloc, new, TF_FN_TC_MEMALIGN) \
	X(tc_posix_memalign, posix_memalign, TF_FN_TC_POSIX_MEMALIGN) \
	X(tc_new, new, TF_FN_TC_NEW) \
	X(tc_new_nothrow, new_tag, TF_FN_TC_NEW) \
	X(tc_new_aligned, new_align, TF_FN_TC_NEW) \
	X(tc_new_aligned_nothrow, new_align_tag, TF_FN_TC_NEW) \
	X(tc_newarray, new, TF_FN_TC_NEWARRAY) \
	X(tc_newarray_nothrow, new_tag, TF_FN_TC_NEWARRAY) \
	X(tc_newarray_aligned, new_align, TF_FN_TC_NEWARRAY) \
	X(tc_newarray_aligned_nothrow, new_align_tag, TF_FN_TC_NEWARRAY) \
	X(tc_free, del, TF_FN_FREE) \
	X(tc_cfree, del, TF_FN_FREE) \
	X(tc_delete, del, TF_FN_FREE) \
	X(tc_deletearray, del, TF_FN_FREE) \
	X(tc_free_sized, del_size, TF_FN_FREE) \
	X(tc_delete_sized, del_size, TF_FN_FREE) \
	X(tc_deletearray_sized, del_size, TF_FN_FREE) \
	X(tc_delete_nothrow, del_tag, TF_FN_FREE) \
	X(tc_deletearray_nothrow, del_tag, TF_FN_FREE) \
	X(tc_delete_aligned, del_size, TF_FN_FREE) \
	X(tc_deletearray_aligned, del_size, TF_FN_FREE) \
	X(tc_delete_sized_aligned, del_size_align, TF_FN_FREE) \
	X(tc_deletearray_sized_aligned, del_size_align, TF_FN_FREE) \
	X(tc_delete_aligned_nothrow, del_align_tag, TF_FN_FREE) \
	X(tc_deletearray_aligned_nothrow, del_align_tag, TF_FN_FREE)

#define API_INDEX(name, shape, fn) API_##name,
enum { ALLOC_API(API_INDEX) API_COUNT };

/* The definitions found, by index (NULL: not the malloc object's). */
static void *real[API_COUNT];
/* jemalloc's sallocx, which xallocx's hook asks before and after. */
static size_t (*real_sallocx)(const void *, int);

/* The shapes: the real call from a rec_call, then the hook. */
typedef void *api_je_alloc(size_t, int);
typedef void *api_je_resize(void *, size_t, int);
typedef size_t api_je_xallocx(void *, size_t, size_t, int);
typedef void api_je_free(void *, int);
typedef void api_je_sized_free(void *, size_t, int);
typedef void *api_calloc(size_t, size_t);
typedef void *api_resize(void *, size_t);
typedef void *api_memalign(size_t, size_t);
typedef int api_posix_memalign(void **, size_t, size_t);

#define REAL(name, type) ((type *)real[API_##name])

#define DEF_je_alloc(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ return REAL(name, api_je_alloc)(c->size, c->flags); } \
	static void *hook_##name(size_t size, int flags) \
	{ \
		return rec_hook_alloc(call_##name, &(struct rec_call){ .size = size, .flags = flags }, \
				      fn, REC_CALLER); \
	}

#define DEF_je_resize(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ return REAL(name, api_je_resize)(c->ptr, c->size, c->flags); } \
	static void *hook_##name(void *p, size_t size, int flags) \
	{ \
		return rec_hook_resize(call_##name, \
				       &(struct rec_call){ .ptr = p, .size = size, .flags = flags }, \
				       fn, REC_CALLER); \
	}

/* NULL (nothing to record) when the usable size stayed as it was. */
#define DEF_je_xallocx(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ \
		size_t before = real_sallocx(c->ptr, c->flags); \
		c->usable = REAL(name, api_je_xallocx)(c->ptr, c->size, c->extra, c->flags); \
		return c->usable != before ? c->ptr : NULL; \
	} \
	static size_t hook_##name(void *p, size_t size, size_t extra, int flags) \
	{ \
		struct rec_call c = { .ptr = p, .size = size, .extra = extra, .flags = flags }; \
		if (!p || !size)  /* undefined for jemalloc: not ours to record */ \
			return REAL(name, api_je_xallocx)(p, size, extra, flags); \
		rec_hook_resize(call_##name, &c, fn, REC_CALLER); \
		return c.usable; \
	}

#define DEF_je_free(name, fn) \
	static void call_##name(struct rec_call *c) \
	{ REAL(name, api_je_free)(c->ptr, c->flags); } \
	static void hook_##name(void *p, int flags) \
	{ rec_hook_free(call_##name, &(struct rec_call){ .ptr = p, .flags = flags }, REC_CALLER); }

#define DEF_je_sized_free(name, fn) \
	static void call_##name(struct rec_call *c) \
	{ REAL(name, api_je_sized_free)(c->ptr, c->size, c->flags); } \
	static void hook_##name(void *p, size_t size, int flags) \
	{ \
		rec_hook_free(call_##name, \
			      &(struct rec_call){ .ptr = p, .size = size, .flags = flags }, REC_CALLER); \
	}

/* The C++ shapes (tc_new, tc_delete...): rec_internal.h's, static; the
 * definition is always there, so no fallback is ever called. */
#define CXX_SHAPE(name, shape, fn, none) \
	REC_HOOK_##shape(static, hook_##name, call_##name, REAL(name, rec_cxx_##shape), none, fn)
#define DEF_new(name, fn) CXX_SHAPE(name, new, fn, NULL)
#define DEF_new_tag(name, fn) CXX_SHAPE(name, new_tag, fn, NULL)
#define DEF_new_align(name, fn) CXX_SHAPE(name, new_align, fn, NULL)
#define DEF_new_align_tag(name, fn) CXX_SHAPE(name, new_align_tag, fn, NULL)
#define DEF_del(name, fn) CXX_SHAPE(name, del, fn, (void)0)
#define DEF_del_size(name, fn) CXX_SHAPE(name, del_size, fn, (void)0)
#define DEF_del_tag(name, fn) CXX_SHAPE(name, del_tag, fn, (void)0)
#define DEF_del_size_align(name, fn) CXX_SHAPE(name, del_size_align, fn, (void)0)
#define DEF_del_align_tag(name, fn) CXX_SHAPE(name, del_align_tag, fn, (void)0)

/* An overflowing count goes to the real function unrecorded (it fails). */
#define DEF_calloc(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ return REAL(name, api_calloc)(c->n, c->elem); } \
	static void *hook_##name(size_t n, size_t elem) \
	{ \
		size_t size; \
		if (__builtin_mul_overflow(n, elem, &size)) \
			return REAL(name, api_calloc)(n, elem); \
		return rec_hook_alloc(call_##name, \
				      &(struct rec_call){ .size = size, .n = n, .elem = elem }, \
				      fn, REC_CALLER); \
	}

#define DEF_resize(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ return REAL(name, api_resize)(c->ptr, c->size); } \
	static void *hook_##name(void *p, size_t size) \
	{ \
		return rec_hook_resize(call_##name, &(struct rec_call){ .ptr = p, .size = size }, \
				       fn, REC_CALLER); \
	}

#define DEF_memalign(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ return REAL(name, api_memalign)(c->align, c->size); } \
	static void *hook_##name(size_t align, size_t size) \
	{ \
		return rec_hook_alloc(call_##name, &(struct rec_call){ .size = size, .align = align }, \
				      fn, REC_CALLER); \
	}

#define DEF_posix_memalign(name, fn) \
	static void *call_##name(struct rec_call *c) \
	{ \
		void *p = NULL; \
		c->rc = REAL(name, api_posix_memalign)(&p, c->align, c->size); \
		return c->rc ? NULL : p; \
	} \
	static int hook_##name(void **out, size_t align, size_t size) \
	{ \
		struct rec_call c = { .size = size, .align = align }; \
		void *p = rec_hook_alloc(call_##name, &c, fn, REC_CALLER); \
		if (!c.rc) \
			*out = p; \
		return c.rc; \
	}

#define DEF_API(name, shape, fn) DEF_##shape(name, fn)
ALLOC_API(DEF_API)

/* The routes got.c installs: an attach's own (attach.c) first, then those
 * of this file whose definition was found. */
static struct rec_got_fn routes[REC_ATTACH_ROUTES_MAX + API_COUNT];

/* REC_TEST_GOT_RESTORE=LABEL: rec_mark(LABEL) puts the GOT back first (a
 * test of rec_got_restore until detaching calls it). */
#define TEST_LABEL_MAX 64
static char test_label[TEST_LABEL_MAX];

/* name's definition if the object that serves malloc has it, else NULL. */
static void *in_malloc_object(const char *name, const Dl_info *m)
{
	void *p = rec_session_attached() ? rec_program_definition(name) : dlsym(RTLD_NEXT, name);
	Dl_info d;
	return p && dladdr(p, &d) && d.dli_fbase == m->dli_fbase ? p : NULL;
}

void rec_alloc_api_init(const struct rec_got_fn *extra, unsigned nextra)
{
	const char *s = getenv("REC_TEST_GOT_RESTORE");
	if (s && strlen(s) < TEST_LABEL_MAX)
		strcpy(test_label, s);
	unsigned n = nextra < REC_ATTACH_ROUTES_MAX ? nextra : REC_ATTACH_ROUTES_MAX;
	if (n)
		memcpy(routes, extra, n * sizeof *routes);
	Dl_info m;
	if (rec_real.malloc && dladdr((void *)rec_real.malloc, &m)) {
#define API_FIND(name, shape, fn) real[API_##name] = in_malloc_object(#name, &m);
		ALLOC_API(API_FIND)
		*(void **)&real_sallocx = in_malloc_object("sallocx", &m);
		if (!real_sallocx)
			real[API_xallocx] = NULL;  /* its change cannot be told */
#define API_ROUTE(name, shape, fn) \
	if (real[API_##name]) \
		routes[n++] = (struct rec_got_fn){ #name, (void *)hook_##name, real[API_##name], 0 };
		ALLOC_API(API_ROUTE)
	}
	if (n)
		rec_got_install(routes, n);  /* a failure is said there */
}

void rec_alloc_api_mark(const char *label)
{
	if (test_label[0] && !strcmp(label, test_label))
		rec_got_restore();
}
