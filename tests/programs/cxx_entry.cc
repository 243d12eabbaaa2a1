/*
 * cxx_entry - every C++ allocation entry point from known functions, with
 * marks, built three times: against glibc (cxx_entry), linked with
 * -ljemalloc (cxx_entry_je) and with libtcmalloc_minimal (cxx_entry_tc), so
 * that operator new/delete come from each of them in turn.
 *
 * Each site_* function allocates BLOCKS blocks of its own size through one
 * entry point and keeps them (new, new[], aligned new and new[], nothrow
 * new and new[], malloc). Mark "all": every block lives. Then each site's
 * first block is freed by the matching delete (sized, aligned, nothrow,
 * array forms included): mark "some". Then the rest: mark "none". Between
 * "all" and "some" a new of an impossible size throws bad_alloc, caught:
 * it must record nothing and leave the recorder working.
 *
 * With an argument N, after mark "none": N times new char[CHURN_SIZE] and
 * delete[] at site_churn (a sampled recording's sample of it).
 *
 * Prints "site NAME SIZE" per site and "caught N" (1: bad_alloc caught).
 * Must never: allocate between the marks except through the sites.
 */
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <new>

enum { BLOCKS = 3, CHURN_SIZE = 1006 };

struct Plain { char c[1001]; };
struct alignas(64) Wide { char c[1024]; };  /* 64-aligned new: 1024 and 2 x 1024 */
struct Nothrow { char c[1003]; };

static Plain *plain[BLOCKS];
static char *array[BLOCKS];
static Wide *wide[BLOCKS];
static Wide *wides[BLOCKS];
static Nothrow *nothrow_[BLOCKS];
static char *nothrow_array[BLOCKS];
static void *mallocs[BLOCKS];

/* rec_mark when recorded (libheapreel.so exports it), else nothing. */
static void mark(const char *label)
{
	void *m = dlsym(RTLD_DEFAULT, "rec_mark");
	if (m)
		reinterpret_cast<int (*)(const char *)>(m)(label);
}

__attribute__((noinline)) static void site_new(int i) { plain[i] = new Plain; }
__attribute__((noinline)) static void site_new_array(int i) { array[i] = new char[1002]; }
__attribute__((noinline)) static void site_new_aligned(int i) { wide[i] = new Wide; }
__attribute__((noinline)) static void site_new_aligned_array(int i) { wides[i] = new Wide[2]; }
__attribute__((noinline)) static void site_new_nothrow(int i) { nothrow_[i] = new (std::nothrow) Nothrow; }
__attribute__((noinline)) static void site_new_nothrow_array(int i)
{
	nothrow_array[i] = new (std::nothrow) char[1004];
}
__attribute__((noinline)) static void site_malloc(int i) { mallocs[i] = std::malloc(1005); }

__attribute__((noinline)) static void site_churn(long n)
{
	for (long i = 0; i < n; i++)
		delete[] new char[CHURN_SIZE];
}

/* Frees block i of every site through the delete that matches its new. */
static void drop(int i)
{
	delete plain[i];                                   /* _ZdlPvm (sized) */
	delete[] array[i];                                 /* _ZdaPv */
	delete wide[i];                                    /* _ZdlPvmSt11align_val_t */
	delete[] wides[i];                                 /* _ZdaPvSt11align_val_t */
	::operator delete(nothrow_[i], std::nothrow);      /* _ZdlPvRKSt9nothrow_t */
	::operator delete[](nothrow_array[i], std::nothrow); /* _ZdaPvRKSt9nothrow_t */
	std::free(mallocs[i]);
}

/* A new that cannot succeed: 1 if its bad_alloc was caught. */
__attribute__((noinline)) static int site_too_big(size_t size)
{
	try {
		char *p = new char[size];
		delete[] p;
	} catch (const std::bad_alloc &) {
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < BLOCKS; i++) {
		site_new(i);
		site_new_array(i);
		site_new_aligned(i);
		site_new_aligned_array(i);
		site_new_nothrow(i);
		site_new_nothrow_array(i);
		site_malloc(i);
	}
	mark("all");
	/* argc keeps the size unknown to the compiler: no warning, no folding */
	int caught = site_too_big(((size_t)1 << 62) + (size_t)argc);
	drop(0);
	mark("some");
	for (int i = 1; i < BLOCKS; i++)
		drop(i);
	mark("none");
	site_churn(argc > 1 ? std::atol(argv[1]) : 0);
	std::printf("site site_new %zu\nsite site_new_array 1002\nsite site_new_aligned %zu\n"
		    "site site_new_aligned_array %zu\nsite site_new_nothrow %zu\n"
		    "site site_new_nothrow_array 1004\nsite site_malloc 1005\ncaught %d\n",
		    sizeof(Plain), sizeof(Wide), 2 * sizeof(Wide), sizeof(Nothrow), caught);
	return 0;
}
