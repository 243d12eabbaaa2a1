/*
 * stk_throw.cc - C++ exceptions unwinding through frames that allocated,
 * for tests/recorder/test_stacks.py (run with REC_CHECK_STACKS=1). Each
 * allocation's size names its call site; every block is freed at once
 * (or by a destructor while the exception unwinds).
 *
 * ROUNDS x:
 *   catcher < main calls throw_down, DEEP levels deep; each level
 *   allocates 1800 bytes (operator new, in throw_down) and keeps it in a
 *   unique_ptr, the deepest throws (libstdc++'s __cxa_allocate_exception
 *   allocates the exception with malloc), and catcher catches it: the
 *   unique_ptrs' destructors free the blocks while it unwinds;
 *   then catcher allocates 1801 bytes in other_down, DEEP levels deep
 *   (the same depth, another path), and 1802 bytes in after_catch < catcher.
 * With STK_PAD=N in the environment, each catcher runs under N frames of
 * pad (< main): every stack is deep.
 * Prints nothing; exits 0.
 */
#include <cstdlib>
#include <memory>
#include <stdexcept>

static const int ROUNDS = 3;
static const int DEEP = 8;

static volatile unsigned sink;

__attribute__((noinline)) static void throw_down(int n)
{
	std::unique_ptr<char[]> block(new char[1800]);
	block[0] = 1;
	if (n > 1)
		throw_down(n - 1);
	else
		throw std::runtime_error("deep");
	sink += (unsigned)block[0];
}

__attribute__((noinline)) static void other_down(int n)
{
	if (n > 1) {
		other_down(n - 1);
	} else {
		char *p = new char[1801];
		sink += p != nullptr;
		delete[] p;
	}
	sink++;
}

__attribute__((noinline)) static void after_catch()
{
	char *p = new char[1802];
	sink += p != nullptr;
	delete[] p;
}

__attribute__((noinline)) static void catcher()
{
	try {
		throw_down(DEEP);
	} catch (const std::runtime_error &) {
		sink++;
	}
	other_down(DEEP);
	after_catch();
}

// catcher under n + 1 frames of pad
__attribute__((noinline)) static void pad(int n)
{
	if (n > 0)
		pad(n - 1);
	else
		catcher();
	sink++;  // not a tail call: the frame stays
}

int main()
{
	const char *padding = std::getenv("STK_PAD");
	int frames = padding ? std::atoi(padding) : 0;
	for (int i = 0; i < ROUNDS; i++) {
		if (frames > 0)
			pad(frames - 1);
		else
			catcher();
	}
	return 0;
}
