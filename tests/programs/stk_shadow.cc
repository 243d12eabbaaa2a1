/*
 * stk_shadow.cc - what the shadow stack (REC_SHADOW=1, recorder/shadow.c)
 * must survive: frames whose return addresses it patched are unwound
 * without returning, or read, by others. For tests/recorder/test_stacks.py,
 * run with REC_CHECK_STACKS=1, with and without REC_SHADOW=1. Each
 * allocation's size names its call site; every block is freed at once.
 * argv[1] is the case; the exit status is 0, or says what went wrong.
 * stk_shadow_static is this program with libgcc and libstdc++ linked in
 * statically: its unwinder is its own, reached by no exported name.
 *
 *   unwind    ROUNDS x: unwind_catcher < main calls unwind_down DEEP levels
 *             deep; each level allocates 1900 bytes, the deepest throws,
 *             and each level's Noisy destructor allocates 1901 bytes while
 *             the exception unwinds it (the landing pad's allocation
 *             patches the frames still to be unwound); after the catch,
 *             1902 bytes in after_unwind < unwind_catcher.
 *   exit      a thread (down_body) goes DEEP levels down noisy_down, each
 *             allocating 1910 bytes, and calls pthread_exit at the bottom
 *             (exit_bottom): each level's Noisy destructor allocates 1911
 *             bytes while the forced unwind runs; then main allocates 1912
 *             bytes in after_exit < run_exit. Exits 2 if a destructor did
 *             not run.
 *   cancel    the same through pthread_cancel: a thread (down_body) goes
 *             DEEP levels down noisy_down, each allocating 1940 bytes,
 *             then (cancel_bottom) WAIT_DEEP levels down cancel_wait, which
 *             has no cleanups, allocates 1943 bytes at the bottom and waits
 *             in pause() until main cancels the thread;
 *             each level's Noisy destructor allocates 1941 bytes while
 *             glibc's forced unwind runs (through its own pointer into
 *             libgcc_s, not the exported _Unwind_ForcedUnwind); then 1942
 *             bytes in after_cancel < run_cancel. Exits 4 if the thread
 *             was not cancelled or a destructor did not run.
 *   policy    POLICY_CALLS x: 1950 bytes at the bottom of policy_down,
 *             1 to POLICY_DEEP levels deep as a generator of its own
 *             draws (lcg_next): call chains that change at random depths,
 *             whose patched frames mostly return before the next
 *             allocation (recorder/stack.c's patching policy then stops
 *             patching for a while).
 *   backtrace bt_down DEEP levels deep (nothing allocated on the way), then
 *             in bt_bottom twice from one call site: backtrace() and _Unwind_Backtrace
 *             into two buffers, and 1920 bytes in bt_leaf (which patches
 *             the whole stack). The second pair must equal the first (exit
 *             3 if not); prints the frames of the second backtrace(), one
 *             hex address a line. Then twice 1921 bytes in bt_after,
 *             BT_AFTER levels deep (further down the stack than where
 *             backtrace was called: that call is over, so the second
 *             allocation finds the first's frames patched).
 *   deep      ROUNDS x: deep_down 300 levels deep (more than REC_DEPTH's 64
 *             and the shadow's 128 frames), 1930 bytes at every 25th level
 *             on the way down, 1931 bytes at the same levels on the way up;
 *             then the same 100 levels deep with 1932 and 1933 bytes.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <execinfo.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>
#include <unwind.h>

static const int ROUNDS = 3;
static const int DEEP = 10;
static const int WAIT_DEEP = 6;      /* cancel_wait's frames */
static const int BT_MAX = 64;          /* frames a backtrace keeps */
static const int BT_AFTER = 150;       /* 16-byte frames: below bt_down's Frames */
static const int DEEP_LONG = 300;
static const int DEEP_SHORT = 100;
static const int DEEP_EVERY = 25;

static volatile unsigned sink;
static int destructed;

__attribute__((noinline)) static void take(size_t n)
{
	void *p = malloc(n);
	sink += p != nullptr;
	free(p);
}

/* Allocates `size` bytes when destroyed, also while an unwinder runs it. */
struct Noisy {
	size_t size;
	explicit Noisy(size_t n) : size(n) {}
	__attribute__((noinline)) ~Noisy()
	{
		take(size);
		destructed++;
	}
};

/* ---- unwind ------------------------------------------------------------- */
struct Deep {};

__attribute__((noinline)) static void unwind_down(int n)
{
	Noisy noisy(1901);
	take(1900);
	if (n > 1)
		unwind_down(n - 1);
	else
		throw Deep();
	sink++;
}

__attribute__((noinline)) static void after_unwind() { take(1902); }

__attribute__((noinline)) static void unwind_catcher()
{
	try {
		unwind_down(DEEP);
	} catch (const Deep &) {
		sink++;
	}
	after_unwind();
}

static int run_unwind()
{
	for (int i = 0; i < ROUNDS; i++)
		unwind_catcher();
	return 0;
}

/* ---- exit --------------------------------------------------------------- */
/* n levels deep, each allocating size bytes, whose Noisy destructors
 * allocate size + 1 bytes; bottom() at the deepest (it ends the thread) */
__attribute__((noinline)) static void noisy_down(int n, size_t size, void (*bottom)())
{
	Noisy noisy(size + 1);
	take(size);
	if (n > 1)
		noisy_down(n - 1, size, bottom);
	else
		bottom();
	sink++;
}

/* A thread that goes DEEP levels down noisy_down */
struct Down {
	size_t size;
	void (*bottom)();
};

__attribute__((noinline)) static void *down_body(void *arg)
{
	const Down *d = static_cast<const Down *>(arg);
	noisy_down(DEEP, d->size, d->bottom);
	return nullptr;
}

__attribute__((noinline)) static void exit_bottom() { pthread_exit(nullptr); }

__attribute__((noinline)) static void after_exit() { take(1912); }

static int run_exit()
{
	static Down down = { 1910, exit_bottom };
	pthread_t t;
	if (pthread_create(&t, nullptr, down_body, &down) != 0 || pthread_join(t, nullptr) != 0)
		return 1;
	if (destructed != DEEP)
		return 2;
	after_exit();
	return 0;
}

/* ---- cancel ------------------------------------------------------------- */
static sem_t cancel_ready;
static volatile int sink_never;  /* never set: the wait ends by cancellation */

/* No cleanups here: an unwinder must go on from these frames to their
 * callers through return addresses the allocation made the shadow patch
 * (all but the innermost few: stack.c's SHADOW_SKIP). */
__attribute__((noinline)) static void cancel_wait(int n)
{
	if (n > 1) {
		cancel_wait(n - 1);
		sink++;
		return;
	}
	take(1943);
	sem_post(&cancel_ready);
	while (!sink_never)
		pause();  /* a cancellation point */
}

__attribute__((noinline)) static void cancel_bottom() { cancel_wait(WAIT_DEEP); }

__attribute__((noinline)) static void after_cancel() { take(1942); }

static int run_cancel()
{
	static Down down = { 1940, cancel_bottom };
	pthread_t t;
	void *ret = nullptr;
	if (sem_init(&cancel_ready, 0, 0) != 0 ||
	    pthread_create(&t, nullptr, down_body, &down) != 0)
		return 1;
	while (sem_wait(&cancel_ready) != 0)
		;
	if (pthread_cancel(t) != 0 || pthread_join(t, &ret) != 0)
		return 1;
	if (ret != PTHREAD_CANCELED || destructed != DEEP)
		return 4;
	after_cancel();
	return 0;
}

/* ---- policy ------------------------------------------------------------- */
static const int POLICY_CALLS = 6000;
static const unsigned POLICY_DEEP = 30;

/* test_stacks.py draws the same depths */
static unsigned lcg_next(unsigned *x)
{
	*x = *x * 1103515245u + 12345u;
	return *x >> 16;
}

__attribute__((noinline)) static void policy_down(unsigned n)
{
	if (n > 1)
		policy_down(n - 1);
	else
		take(1950);
	sink++;
}

static int run_policy()
{
	unsigned x = 1;
	for (int i = 0; i < POLICY_CALLS; i++)
		policy_down(1 + lcg_next(&x) % POLICY_DEEP);
	return 0;
}

/* ---- backtrace ---------------------------------------------------------- */
struct Frames {
	void *ip[BT_MAX];
	int n;
};

static _Unwind_Reason_Code one_frame(struct _Unwind_Context *ctx, void *arg)
{
	Frames *f = static_cast<Frames *>(arg);
	if (f->n == BT_MAX)
		return _URC_END_OF_STACK;
	f->ip[f->n++] = reinterpret_cast<void *>(_Unwind_GetIP(ctx));
	return _URC_NO_REASON;
}

__attribute__((noinline)) static void bt_grab(Frames *libc, Frames *gcc)
{
	libc->n = backtrace(libc->ip, BT_MAX);
	gcc->n = 0;
	_Unwind_Backtrace(one_frame, gcc);
}

__attribute__((noinline)) static void bt_leaf() { take(1920); }

static int same(const Frames &a, const Frames &b)
{
	return a.n == b.n && memcmp(a.ip, b.ip, sizeof(void *) * (size_t)a.n) == 0;
}

/* The buffers only here, so that bt_down's frames stay small. */
__attribute__((noinline)) static int bt_bottom()
{
	Frames libc[2], gcc[2];
	for (int i = 0; i < 2; i++) {
		bt_grab(&libc[i], &gcc[i]);
		bt_leaf();
	}
	if (!same(libc[0], libc[1]) || !same(gcc[0], gcc[1]))
		return -1000;
	for (int i = 0; i < libc[1].n; i++)
		printf("%p\n", libc[1].ip[i]);
	return 1;
}

__attribute__((noinline)) static int bt_down(int n)
{
	return n > 1 ? bt_down(n - 1) + 1 : bt_bottom();
}

__attribute__((noinline)) static void bt_after(int n)
{
	if (n > 1) {
		bt_after(n - 1);
	} else {
		take(1921);
		take(1921);
	}
}

static int run_backtrace()
{
	if (bt_down(DEEP) != DEEP)
		return 3;
	bt_after(BT_AFTER);
	return 0;
}

/* ---- deep --------------------------------------------------------------- */
__attribute__((noinline)) static void deep_down(int n, size_t size)
{
	if (n % DEEP_EVERY == 0)
		take(size);
	if (n > 1)
		deep_down(n - 1, size);
	if (n % DEEP_EVERY == 0)
		take(size + 1);
}

static int run_deep()
{
	for (int i = 0; i < ROUNDS; i++) {
		deep_down(DEEP_LONG, 1930);
		deep_down(DEEP_SHORT, 1932);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)();
	} cases[] = {
		{ "unwind", run_unwind }, { "exit", run_exit }, { "cancel", run_cancel }, { "policy", run_policy },
		{ "backtrace", run_backtrace }, { "deep", run_deep },
	};
	for (const auto &c : cases)
		if (argc == 2 && !strcmp(argv[1], c.name))
			return c.run();
	return 1;
}
