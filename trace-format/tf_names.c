/*
 * tf_names.c - the lowercase names of record kinds, allocator entry points
 * and status codes, as trace-dump prints them. Static strings only.
 */
#include "trace_format.h"

const char *tf_kind_name(unsigned kind)
{
	static const char *const names[] = {
		[TF_ALLOC] = "alloc", [TF_FREE] = "free",
		[TF_REALLOC] = "realloc", [TF_STACK] = "stack",
		[TF_THREAD] = "thread", [TF_MODULE] = "module",
		[TF_MARK] = "mark", [TF_LOST] = "lost", [TF_END] = "end",
		[TF_KEYFRAME] = "keyframe", [TF_PAUSE] = "pause",
		[TF_KEYEVENT] = "keyevent", [TF_FORK] = "fork",
		[TF_COUNTER] = "counter", [TF_SAMPLE] = "sample",
		[TF_POOL] = "pool",
	};
	if (kind < sizeof names / sizeof names[0] && names[kind])
		return names[kind];
	return "unknown";
}

const char *tf_fn_name(unsigned fn)
{
	static const char *const names[TF_FN_COUNT] = {
		[TF_FN_MALLOC] = "malloc", [TF_FN_CALLOC] = "calloc",
		[TF_FN_REALLOC] = "realloc",
		[TF_FN_REALLOCARRAY] = "reallocarray",
		[TF_FN_POSIX_MEMALIGN] = "posix_memalign",
		[TF_FN_ALIGNED_ALLOC] = "aligned_alloc",
		[TF_FN_MEMALIGN] = "memalign", [TF_FN_VALLOC] = "valloc",
		[TF_FN_PVALLOC] = "pvalloc", [TF_FN_FREE] = "free",
		[TF_FN_NEW] = "new", [TF_FN_NEW_ARRAY] = "new[]",
		[TF_FN_MMAP] = "mmap", [TF_FN_MREMAP] = "mremap", [TF_FN_MUNMAP] = "munmap",
		[TF_FN_CUSTOM_ALLOC] = "custom_alloc", [TF_FN_CUSTOM_REALLOC] = "custom_realloc",
		[TF_FN_CUSTOM_FREE] = "custom_free", [TF_FN_POOL_DESTROY] = "pool_destroy",
		[TF_FN_MALLOCX] = "mallocx", [TF_FN_RALLOCX] = "rallocx",
		[TF_FN_XALLOCX] = "xallocx", [TF_FN_TC_MALLOC] = "tc_malloc",
		[TF_FN_TC_CALLOC] = "tc_calloc", [TF_FN_TC_REALLOC] = "tc_realloc",
		[TF_FN_TC_MEMALIGN] = "tc_memalign", [TF_FN_TC_NEW] = "tc_new",
		[TF_FN_TC_NEWARRAY] = "tc_newarray",
		[TF_FN_TC_POSIX_MEMALIGN] = "tc_posix_memalign",
	};
	return fn < TF_FN_COUNT && names[fn] ? names[fn] : "unknown";
}

const char *tf_status_name(int status)
{
	switch (status) {
	case TF_OK: return "ok";
	case TF_DONE: return "done";
	case TF_E_IO: return "i/o error";
	case TF_E_MAGIC: return "not a heapreel trace";
	case TF_E_VERSION: return "unsupported format version";
	case TF_E_TRUNCATED: return "truncated";
	case TF_E_CORRUPT: return "corrupt";
	case TF_E_NOMEM: return "out of memory";
	case TF_E_ARG: return "invalid argument";
	}
	return "unknown status";
}
