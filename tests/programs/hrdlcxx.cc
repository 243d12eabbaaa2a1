/*
 * libhrdlcxx.so - libhrdltest.so's C++ twin, for dlopener (a C program: no
 * C++ runtime until this library brings one). Its constructor allocates 2
 * blocks of 4001 bytes with new[] (ctor_site) and keeps them until its
 * destructor; hrdltest_work(n) allocates and frees n blocks of 4002 bytes
 * with new[] (work_site). libheapreel.so found no operator new at start, so
 * its hooks stand in with malloc and free: the blocks must still be
 * recorded once each, as new[], and freed.
 */
__attribute__((noinline)) static char *ctor_site() { return new char[4001]; }
__attribute__((noinline)) static char *work_site() { return new char[4002]; }

static char *kept[2];

__attribute__((constructor)) static void hrdlcxx_init()
{
	for (auto &k : kept)
		k = ctor_site();
}

__attribute__((destructor)) static void hrdlcxx_fini()
{
	for (auto k : kept)
		delete[] k;
}

extern "C" int hrdltest_work(int n);
extern "C" int hrdltest_work(int n)
{
	for (int i = 0; i < n; i++)
		delete[] work_site();
	return n;
}
