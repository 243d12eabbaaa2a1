/*
 * attach.c - what trace-record -p calls inside a running process into which
 * it loaded libheapreel.so (trace_attach.c): heapreel_attach starts a trace
 * and routes the program's allocation calls to the hooks by rewriting the
 * GOT entries that bind them (got.c), since a library loaded late is not in
 * the global scope its exports would need. Detaching is a control request
 * (control.c "detach"): the writer puts every entry back and closes the
 * trace; a later attach finds this copy loaded and starts a new trace.
 *
 * Routed: what interpose.c and mmap.c export (the malloc family, C++ new
 * and delete in every form, mmap, mmap64, munmap, mremap) and dlclose
 * (modules.c), in every object that calls them (their definer's own calls
 * too: glibc's strdup calls malloc through libc's GOT), and jemalloc's and
 * tcmalloc's own APIs (entry_alloc_api.c) in the others. The hook is our
 * own definition, looked up in this object (its address taken by name from
 * inside would bind to the program's); the real function is the one the
 * program's lookups find (real.c). A function with no definition at the
 * attach (operator new in a C program) is not routed. Not routed: exit,
 * _exit and the exec family (an exec ends the trace as a kill does: the
 * .ring stays for the importer) and rec.h's API.
 *
 * Blocks allocated before the attach are unknown to the trace; every free
 * is recorded, and the importer counts those of unknown blocks as
 * frees_before_attach, told by the heapreel.attach mark (FORMAT.md).
 *
 * Runs on whatever thread gdb stopped, never inside a hook of ours. Must
 * never: start a second trace while one runs, or route a function to
 * itself.
 */
#include "rec_internal.h"
#include "got.h"

#include <dlfcn.h>

/* Every export of ours that the program's objects may call. */
static const char *const names[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc",
#define CXX_NAME(name, fn, shape) #name,
	REC_CXX_ENTRY_POINTS(CXX_NAME)
#undef CXX_NAME
	"mmap", "mmap64", "munmap", "mremap", "dlclose",
};
_Static_assert(sizeof names / sizeof names[0] <= REC_ATTACH_ROUTES_MAX,
	       "REC_ATTACH_ROUTES_MAX holds every name");

static struct rec_got_fn routes[REC_ATTACH_ROUTES_MAX];

/* Fills routes: our definition and the program's of each name both found. */
static unsigned find_routes(void)
{
	Dl_info self;
	void *h = dladdr((void *)find_routes, &self) ?
		  dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	unsigned n = 0;
	for (size_t i = 0; h && i < sizeof names / sizeof names[0]; i++) {
		void *hook = dlsym(h, names[i]), *real = rec_program_definition(names[i]);
		if (hook && real && hook != real)
			routes[n++] = (struct rec_got_fn){ names[i], hook, real, 1 };
	}
	if (h)
		dlclose(h);   /* the reference NOLOAD took; linked -z nodelete anyway */
	return n;
}

/* trace_path: absolute, from trace-record -p. 0, or a REC_ATTACH_ code. */
REC_EXPORT int heapreel_attach(const char *trace_path)
{
	int g = rec_guard;
	rec_guard = 1;
	int rc = rec_session_attach(trace_path);
	if (rc == 0) {
		/* The recorder's threads first run (their first step touches
		 * our TLS) before any entry routes: here that TLS is allocated
		 * through the program's malloc, and jemalloc's may mmap through
		 * its GOT, which would re-enter the allocation from our hook
		 * and deadlock on jemalloc's own lock. */
		rec_thread_tid(&rec_s.writer_tid);
		rec_thread_tid(&rec_s.enc_tid);
		int held = rec_ctl_hold(0);          /* until every entry routes (api.c) */
		rec_alloc_api_init(routes, find_routes());
		rec_ctl_release(held);
		/* from here on every allocation is recorded: the instant a
		 * snapshot's "allocated since the attach" counts from */
		rec_ctl_mark(TF_MARK_ATTACH, 1);
	}
	rec_guard = g;
	return rc;
}
