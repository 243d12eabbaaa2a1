/*
 * stk_hard.c - allocations in the cases that are hard for a stack capture
 * that remembers the thread's previous walk, for tests/recorder/
 * test_stacks.py (run with REC_CHECK_STACKS=1). One case per run, named by
 * argv[1]; every allocation's size names its call site, and the test checks
 * each site's stack by function name, innermost first, down to main (or to
 * the thread's or coroutine's entry); take() makes every allocation, so it
 * is each stack's first frame. Every block is freed at once.
 *
 *   ab          ROUNDS x, in turn: 1000 bytes in helper < a < main, then
 *               1000 bytes in helper < b < main (a and b: equal frames)
 *   longjmp     ROUNDS x: 1100 bytes in jump_down at each of DEEP levels
 *               (jump_down < ... < jump_down < jump_top < main), a longjmp
 *               from the deepest to jump_top, then 1101 bytes in
 *               after_jump < jump_top < main and 1102 bytes in
 *               after_jump_deep < after_jump2 < jump_top < main
 *   siglongjmp  ROUNDS x: 1200 bytes in sjump_down (DEEP levels under
 *               sjump_top < main), SIGUSR1 raised from the deepest; its
 *               handler allocates 1201 bytes (on_jump_signal < the signal
 *               frame < raise...) and siglongjmps to sjump_top, which
 *               allocates 1202 bytes in after_sjump < sjump_top < main
 *   signal      ROUNDS x: SIGUSR1 raised under DEEP sig_down frames (< main);
 *               its handler allocates 1300 bytes in on_signal; SIGUSR2, whose
 *               handler runs on an alternate signal stack (sigaltstack):
 *               1301 bytes in on_alt_signal; then 1302 bytes in sig_down at
 *               the bottom
 *   coroutine   ROUNDS x: 1400 bytes in co_leaf < co_body (a makecontext
 *               coroutine on its own stack), swapcontext back to main,
 *               1401 bytes in main_leaf < main, swapcontext to the
 *               coroutine again
 *   threads     THREADS threads, THREADS_AT_ONCE at a time (pthread reuses
 *               their stacks): thread i allocates 1500 + i % 3 bytes in
 *               t_leaf under i % 3 t_mid frames < t_body (< start_thread)
 *   fork        forks under DEEP fork_down frames (< main); the child
 *               allocates 1600 bytes in fork_leaf < fork_down..., returns
 *               to main and allocates 1601 bytes in child_leaf < main, and
 *               exits 0; the parent waits for it and allocates 1602 bytes
 *               in parent_leaf < main
 *   dlclose     dlopens argv[2] (libstk_dl_a.so), whose dl_run allocates
 *               1700 bytes (dl_leaf < dl_run < main), dlcloses it, dlopens
 *               argv[3] (libstk_dl_b.so, the same size: the loader maps it
 *               where the first was), whose dl_run allocates 1701 bytes
 *               (dl_leaf_b < dl_mid_b < dl_run < main); then the first again
 *   fp          ROUNDS x, twice: 1800 bytes in fp_leaf < fp_mid < fp_top <
 *               main, through fp_top's two calls of fp_mid, whose stacks
 *               differ only in the frame pointer fp_mid saved (below)
 *   same        SAME_CALLS x in a row: 1900 bytes in same_leaf < main,
 *               from one call site (each capture after the first is the
 *               thread's previous stack)
 * With STK_PAD=N in the environment, main runs the case under N frames of
 * pad (< main), so that every stack is deep (the recorder's walk of deep
 * stacks, which reuses the thread's previous walk, then meets each case).
 * Prints nothing; exits 0 (1 on bad arguments or a failed call).
 */
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define ROUNDS 3
#define DEEP 12                 /* frames between the top and the bottom */
#define THREADS 60
#define THREADS_AT_ONCE 4
#define CO_STACK (256 * 1024)   /* the coroutine's stack */
#define ALT_STACK (64 * 1024)   /* the alternate signal stack */
#define SAME_CALLS 8

static volatile unsigned sink;

static void take(size_t n)
{
	char *p = malloc(n);
	sink += p != NULL;
	free(p);
}

/* ---- ab: two callers of equal frames, one helper ------------------------ */
__attribute__((noinline)) static void helper(void) { take(1000); }
__attribute__((noinline)) static void a(void) { helper(); sink++; }
__attribute__((noinline)) static void b(void) { helper(); sink++; }

static int run_ab(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	for (int i = 0; i < ROUNDS; i++) {
		a();
		b();
	}
	return 0;
}

/* ---- longjmp ------------------------------------------------------------ */
static jmp_buf jump_to;

__attribute__((noinline)) static void jump_down(int n)
{
	take(1100);
	if (n > 1)
		jump_down(n - 1);
	else if (n == 1)  /* (a path that returns: no infinite recursion) */
		longjmp(jump_to, 1);
	sink++;
}

__attribute__((noinline)) static void after_jump(void) { take(1101); }
__attribute__((noinline)) static void after_jump_deep(void) { take(1102); }
__attribute__((noinline)) static void after_jump2(void) { after_jump_deep(); sink++; }

__attribute__((noinline)) static void jump_top(void)
{
	if (setjmp(jump_to) == 0)
		jump_down(DEEP);
	after_jump();
	after_jump2();
}

static int run_longjmp(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	for (int i = 0; i < ROUNDS; i++)
		jump_top();
	return 0;
}

/* ---- siglongjmp out of a handler ---------------------------------------- */
static sigjmp_buf sjump_to;

static void on_jump_signal(int sig)
{
	(void)sig;
	take(1201);
	siglongjmp(sjump_to, 1);
}

__attribute__((noinline)) static void sjump_down(int n)
{
	take(1200);
	if (n > 1)
		sjump_down(n - 1);
	else
		raise(SIGUSR1);
	sink++;
}

__attribute__((noinline)) static void after_sjump(void) { take(1202); }

__attribute__((noinline)) static void sjump_top(void)
{
	if (sigsetjmp(sjump_to, 1) == 0)
		sjump_down(DEEP);
	after_sjump();
}

static int run_siglongjmp(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	if (signal(SIGUSR1, on_jump_signal) == SIG_ERR)
		return 1;
	for (int i = 0; i < ROUNDS; i++)
		sjump_top();
	return 0;
}

/* ---- signal handlers that allocate --------------------------------------- */
static void on_signal(int sig) { (void)sig; take(1300); }
static void on_alt_signal(int sig) { (void)sig; take(1301); }

__attribute__((noinline)) static void sig_down(int n)
{
	if (n > 1) {
		sig_down(n - 1);
	} else {
		raise(SIGUSR1);
		raise(SIGUSR2);
		take(1302);
	}
	sink++;
}

static int run_signal(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static char alt[ALT_STACK];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof alt };
	struct sigaction plain = { .sa_handler = on_signal };
	struct sigaction onstack = { .sa_handler = on_alt_signal, .sa_flags = SA_ONSTACK };
	if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &plain, NULL) != 0 ||
	    sigaction(SIGUSR2, &onstack, NULL) != 0)
		return 1;
	for (int i = 0; i < ROUNDS; i++)
		sig_down(DEEP);
	return 0;
}

/* ---- swapcontext coroutines ----------------------------------------------- */
static ucontext_t main_ctx, co_ctx;

__attribute__((noinline)) static void co_leaf(void) { take(1400); }

static void co_body(void)
{
	for (;;) {
		co_leaf();
		swapcontext(&co_ctx, &main_ctx);
	}
}

__attribute__((noinline)) static void main_leaf(void) { take(1401); }

static int run_coroutine(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static char stack[CO_STACK];
	if (getcontext(&co_ctx) != 0)
		return 1;
	co_ctx.uc_stack.ss_sp = stack;
	co_ctx.uc_stack.ss_size = sizeof stack;
	co_ctx.uc_link = NULL;
	makecontext(&co_ctx, co_body, 0);
	for (int i = 0; i < ROUNDS; i++) {
		if (swapcontext(&main_ctx, &co_ctx) != 0)
			return 1;
		main_leaf();
	}
	return 0;
}

/* ---- short threads on reused stacks --------------------------------------- */
__attribute__((noinline)) static void t_leaf(int i) { take(1500 + (size_t)(i % 3)); }

__attribute__((noinline)) static void t_mid(int i, int n)
{
	if (n > 0)
		t_mid(i, n - 1);
	else
		t_leaf(i);
	sink++;
}

static void *t_body(void *arg)
{
	int i = (int)(intptr_t)arg;
	if (i % 3)
		t_mid(i, i % 3 - 1);
	else
		t_leaf(i);
	return NULL;
}

static int run_threads(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	for (int i = 0; i < THREADS; i += THREADS_AT_ONCE) {
		pthread_t t[THREADS_AT_ONCE];
		for (int k = 0; k < THREADS_AT_ONCE; k++)
			if (pthread_create(&t[k], NULL, t_body, (void *)(intptr_t)(i + k)) != 0)
				return 1;
		for (int k = 0; k < THREADS_AT_ONCE; k++)
			pthread_join(t[k], NULL);
	}
	return 0;
}

/* ---- fork from a deep stack ----------------------------------------------- */
__attribute__((noinline)) static void fork_leaf(void) { take(1600); }

/* 0 in the child, the child's pid in the parent, -1 on failure */
__attribute__((noinline)) static pid_t fork_down(int n)
{
	pid_t pid;
	if (n > 1) {
		pid = fork_down(n - 1);
	} else {
		pid = fork();
		if (pid == 0)
			fork_leaf();
	}
	sink++;
	return pid;
}

__attribute__((noinline)) static void child_leaf(void) { take(1601); }
__attribute__((noinline)) static void parent_leaf(void) { take(1602); }

static int run_fork(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	pid_t pid = fork_down(DEEP);
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_leaf();
		exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	parent_leaf();
	return 0;
}

/* ---- dlclose, and another library where the first was -------------------- */
static int call_lib(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 1;
	void (*run)(void);
	*(void **)&run = dlsym(h, "dl_run");
	if (!run)
		return 1;
	run();
	return dlclose(h) != 0;
}

static int run_dlclose(int argc, char **argv)
{
	if (argc != 4)
		return 1;
	return call_lib(argv[2]) || call_lib(argv[3]) || call_lib(argv[2]);
}

/* ---- fp: equal return addresses where a frame pointer differs ----------- */
/* fp_top calls fp_mid from two sites, the second under FP_SHIFT more bytes
 * of its own alloca; fp_mid takes FP_SHIFT fewer there, so fp_leaf's and
 * take's frames are where they were, and so is every return address the
 * first site's walk loaded down to fp_mid's. Only the frame pointer
 * fp_mid saved differs. Then fp_top writes into its own alloca'd bytes,
 * where fp_mid's frame was, the two words the first walk loaded past it
 * (fp_top's frame pointer and the first site's return address): a walk
 * that checked the return addresses it reuses but not that frame pointer
 * would take fp_top's frame, and the first site, from its previous walk. */
#define FP_SHIFT 256          /* bytes: a multiple of the stack's 16-byte alignment */
#define FP_ROOM 64
static const uintptr_t *fp_cfa;   /* fp_mid's frame (its CFA) under the first site */
static uintptr_t fp_words[2];     /* what the first walk loaded at fp_cfa - 2 and - 1 */

__attribute__((noinline)) static void fp_leaf(void) { take(1800); }

__attribute__((noinline)) static void fp_mid(int second)
{
	volatile char *room = alloca(second ? FP_ROOM : FP_ROOM + FP_SHIFT);
	room[0] = 0;
	if (!second) {  /* CFA = frame pointer + 16: the saved rbp, then the return address */
		fp_cfa = (const uintptr_t *)__builtin_frame_address(0) + 2;
		fp_words[0] = fp_cfa[-2];
		fp_words[1] = fp_cfa[-1];
	}
	fp_leaf();
	sink++;
}

__attribute__((noinline)) static int fp_top(int second)
{
	if (!second) {
		volatile char *room = alloca(16);
		room[0] = 0;
		fp_mid(0);
	} else {
		uintptr_t *room = alloca(16 + FP_SHIFT);
		uintptr_t *w = (uintptr_t *)fp_cfa - 2;
		if (w < room || w + 2 > room + (16 + FP_SHIFT) / sizeof *room)
			return 1;  /* the frames are not laid out as this case needs */
		w[0] = fp_words[0];
		w[1] = fp_words[1];
		fp_mid(1);
	}
	sink++;
	return 0;
}

static int run_fp(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	for (int i = 0; i < 2 * ROUNDS; i++)
		if (fp_top(i % 2))  /* one call site: only fp_top's differ */
			return 1;
	return 0;
}

/* ---- same: one stack, again and again --------------------------------- */
__attribute__((noinline)) static void same_leaf(void) { take(1900); sink++; }

static int run_same(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	for (int i = 0; i < SAME_CALLS; i++)
		same_leaf();
	return 0;
}

/* The cases by name; each returns the exit status. */
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} cases[] = {
	{ "ab", run_ab }, { "longjmp", run_longjmp }, { "siglongjmp", run_siglongjmp },
	{ "signal", run_signal }, { "coroutine", run_coroutine }, { "threads", run_threads },
	{ "fork", run_fork }, { "dlclose", run_dlclose }, { "fp", run_fp },
	{ "same", run_same },
};

/* Runs the case under n + 1 frames of pad. */
__attribute__((noinline)) static int pad(int n, int (*run)(int, char **), int argc, char **argv)
{
	int r = n > 0 ? pad(n - 1, run, argc, argv) : run(argc, argv);
	sink++;  /* not a tail call: the frame stays */
	return r;
}

int main(int argc, char **argv)
{
	const char *padding = getenv("STK_PAD");
	int frames = padding ? atoi(padding) : 0;
	for (size_t i = 0; argc >= 2 && i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name))
			return frames > 0 ? pad(frames - 1, cases[i].run, argc, argv)
					  : cases[i].run(argc, argv);
	return 1;
}
