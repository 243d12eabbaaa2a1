/*
 * rec_internal.h - what the files of libheapreel.so share with each other.
 *
 * libheapreel.so is built with -fvisibility=hidden and a version script that
 * exports only the interposed functions (librec.map), so nothing declared
 * here is visible to the traced program. Everything here runs inside an
 * arbitrary program's allocator calls: it must never call stdio, never
 * allocate on the hot path, and never call into the dynamic loader from an
 * allocation hook.
 */
#ifndef HEAPREEL_REC_INTERNAL_H
#define HEAPREEL_REC_INTERNAL_H

#include "rec_common.h"
#include "trace_format.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define REC_LIKELY(x) __builtin_expect(!!(x), 1)
#define REC_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* initial-exec: a TLS access is one %fs-relative load, no __tls_get_addr
 * (which may allocate and take loader locks). A library loaded into a
 * running process (libheapreel-attach.so, REC_ATTACH_BUILD: trace-record
 * -p) cannot have it: the loader keeps less static TLS for late comers
 * (glibc.rtld.optional_static_tls, 512 bytes by default) than our 1.6 KiB
 * (the big per-thread tables are mapped: rec_map_thread). There it is
 * global-dynamic: each thread's first access allocates its block (the
 * program's malloc, called by the loader directly, not through a hook)
 * without a lock, once the first access ever (heapreel_attach's, before
 * any hook is routed) has settled the module's TLS as dynamic under the
 * loader's TLS lock. */
#ifdef REC_ATTACH_BUILD
#define REC_TLS __thread __attribute__((tls_model("global-dynamic")))
#else
#define REC_TLS __thread __attribute__((tls_model("initial-exec")))
#endif
/* The few symbols libheapreel.so exports (librec.map lists them). */
#define REC_EXPORT __attribute__((visibility("default")))
/* Our descriptors live at or above this number, away from the low numbers
 * programs and shells pick for themselves (`exec 3>log`). */
#define REC_FD_BASE 600

/* ---- real.c: the real allocator and the re-entrancy guard --------------- */

/* C++ operator new and delete, every form, by mangled name: X(name, fn,
 * shape), fn the ALLOC's tf_fn (deletes: TF_FN_FREE), shape its parameters
 * after the pointer or size (rec_cxx_*: a nothrow_t& is `const void *`, an
 * align_val_t a size_t). interpose.c exports each, real.c finds the next. */
typedef void *rec_cxx_new(size_t);
typedef void *rec_cxx_new_tag(size_t, const void *);
typedef void *rec_cxx_new_align(size_t, size_t);
typedef void *rec_cxx_new_align_tag(size_t, size_t, const void *);
typedef void rec_cxx_del(void *);
typedef void rec_cxx_del_size(void *, size_t);   /* also (void *, align_val_t) */
typedef void rec_cxx_del_tag(void *, const void *);
typedef void rec_cxx_del_size_align(void *, size_t, size_t);
typedef void rec_cxx_del_align_tag(void *, size_t, const void *);

#define REC_CXX_ENTRY_POINTS(X) \
	X(_Znwm, TF_FN_NEW, new) \
	X(_Znam, TF_FN_NEW_ARRAY, new) \
	X(_ZnwmRKSt9nothrow_t, TF_FN_NEW, new_tag) \
	X(_ZnamRKSt9nothrow_t, TF_FN_NEW_ARRAY, new_tag) \
	X(_ZnwmSt11align_val_t, TF_FN_NEW, new_align) \
	X(_ZnamSt11align_val_t, TF_FN_NEW_ARRAY, new_align) \
	X(_ZnwmSt11align_val_tRKSt9nothrow_t, TF_FN_NEW, new_align_tag) \
	X(_ZnamSt11align_val_tRKSt9nothrow_t, TF_FN_NEW_ARRAY, new_align_tag) \
	X(_ZdlPv, TF_FN_FREE, del) \
	X(_ZdaPv, TF_FN_FREE, del) \
	X(_ZdlPvm, TF_FN_FREE, del_size) \
	X(_ZdaPvm, TF_FN_FREE, del_size) \
	X(_ZdlPvRKSt9nothrow_t, TF_FN_FREE, del_tag) \
	X(_ZdaPvRKSt9nothrow_t, TF_FN_FREE, del_tag) \
	X(_ZdlPvSt11align_val_t, TF_FN_FREE, del_size) \
	X(_ZdaPvSt11align_val_t, TF_FN_FREE, del_size) \
	X(_ZdlPvmSt11align_val_t, TF_FN_FREE, del_size_align) \
	X(_ZdaPvmSt11align_val_t, TF_FN_FREE, del_size_align) \
	X(_ZdlPvSt11align_val_tRKSt9nothrow_t, TF_FN_FREE, del_align_tag) \
	X(_ZdaPvSt11align_val_tRKSt9nothrow_t, TF_FN_FREE, del_align_tag)

#define REC_CXX_FIELD(name, fn, shape) rec_cxx_##shape *name;

struct rec_real {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
	int (*dlclose)(void *);
	void (*exit_now)(int);        /* _exit */
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	/* NULL where the program has no C++ runtime (interpose.c falls back) */
	REC_CXX_ENTRY_POINTS(REC_CXX_FIELD)
};
extern struct rec_real rec_real;

/* The re-entrancy guard. 0: this thread is not in the recorder. 1: it runs
 * recorder code (or is the writer thread): allocations made then go straight
 * to the real allocator, unrecorded. REC_GUARD_HOOK: an interposed function
 * is recording a call of this thread; a call arriving then comes from the
 * recorder's side (the real allocator calling another entry point: passed
 * through) or from a signal handler that interrupted the hook (recorded
 * through nested.c); rec_stack_from_recorder tells which. */
#define REC_GUARD_OWN 1
#define REC_GUARD_HOOK 2
extern REC_TLS int rec_guard;

/* Resolves every rec_real pointer (dlsym RTLD_NEXT; an attached copy:
 * rec_program_definition). Safe to call more than once and before the
 * constructor; dlsym's own allocations are served from the bootstrap
 * arena. */
void rec_real_resolve(void);
/* The global scope alone (dlopen(NULL)'s handle): what the program's
 * lookups search, without our own objects when we were dlopen'ed. */
void *rec_program_scope(void);
/* name's definition there (never an executable's PLT entry); NULL if none.
 * Takes the loader's lock: never from a hook. */
void *rec_program_definition(const char *name);
/* Bootstrap arena: serves allocations while the real functions are unknown.
 * 64 KiB: dlsym needs a few hundred bytes once; the rest is room for a
 * program or another preloaded library that allocates before our constructor. */
#define REC_BOOT_ARENA_BYTES (64 * 1024)
extern unsigned char rec_boot_arena[REC_BOOT_ARENA_BYTES];
/* Inline: every free asks. */
static inline int rec_boot_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)rec_boot_arena < REC_BOOT_ARENA_BYTES;
}
void *rec_boot_alloc(size_t size, size_t align);
size_t rec_boot_size(const void *p);

/* ---- api.c: what is recorded now; rec.h and the control requests ---------
 * rec_ctl_word: the sampling period above REC_M_PERIOD_SHIFT, flags below.
 * The hot path reads it once per call, relaxed. */
#define REC_M_ALLOCS 1u               /* record allocations */
#define REC_M_FREES 2u                /* record every free */
#define REC_M_PROBE 4u                /* record a free if its block is in the sampled set */
#define REC_M_SETBUILD 32u            /* stopped: the writer fills that set (stopset.c) */
#define REC_M_PERIOD_SHIFT 8           /* above api.c's flags too */
_Static_assert(REC_PERIOD_MAX <= UINT64_MAX >> REC_M_PERIOD_SHIFT,
	       "REC_PERIOD_MAX fits above the flags");
extern _Atomic uint64_t rec_ctl_word;
static inline uint64_t rec_ctl_now(void)
{
	return atomic_load_explicit(&rec_ctl_word, memory_order_relaxed);
}
void rec_ctl_init(void);              /* REC_SAMPLE, REC_PAUSED; constructor */
void rec_ctl_session_start(void);     /* before a trace starts */
void rec_ctl_session_started(void);   /* after: a paused trace says so */
void rec_ctl_overflow(void);          /* the sampled set is full: every free recorded */
uint64_t rec_ctl_period(void);
int rec_ctl_active(void);
/* The set of recorded live blocks while stopped (stopset.c): is it wanted
 * now (stopped, not sampling, blocks recorded, not filled yet)? Then
 * REC_M_SETBUILD on, and once filled REC_M_PROBE instead of REC_M_FREES:
 * each 0, or -1 if recording started again meanwhile (or overflowed). */
int rec_ctl_set_wanted(void);
int rec_ctl_set_building(void);
int rec_ctl_set_ready(void);
/* Requests; can_wait: the caller is not the writer. 0, or -1: no trace. */
int rec_ctl_start(int can_wait);
int rec_ctl_stop(int can_wait);
int rec_ctl_hold(int ending);         /* while GOT entries change (api.c) */
void rec_ctl_release(int allocs);
int rec_ctl_mark(const char *label, int can_wait);
/* The mark of what the trace lacks from this instant on (tf_lack_mark),
 * unless the trace has it: once per trace. A program thread that may not
 * wait for the writer (can_wait 0) leaves it, if the queue is full, for
 * the writer's next round. */
void rec_ctl_lack(enum tf_lack k, int can_wait);
/* A new pool id, its name queued for the writer's POOL record; 0 if there
 * is no trace or TF_POOL_MAX pools were made. */
uint32_t rec_ctl_pool_create(const char *name);
int rec_ctl_pool_known(uint32_t pool);  /* made by rec_ctl_pool_create */
void rec_ctl_pool_names(void);          /* writer: a POOL record per pool made */
/* A new period, accepted only before anything was recorded, and before
 * any thread drew a countdown (rec_sample_drawn): 0, or -1 (refused), or
 * -2 (the sampled set cannot be mapped); *have: the period in force. */
int rec_ctl_set_period(uint64_t period, uint64_t *have);
/* Writer side: queued marks into MARK records; a full round for the
 * rec_flush calls waiting, if any. */
void rec_ctl_drain_marks(void);
void rec_ctl_serve_flush(void);

/* ---- control.c: the trace-ctl socket, served by the writer ---------------- */
void rec_ctl_listen(void);            /* at session start */
void rec_ctl_abandon(void);           /* forked child: close the parent's */
void rec_ctl_round(void);             /* each writer round: requests, marks, flush */
void rec_ctl_close(void);             /* the session ends: close and unlink */
void rec_ctl_detached(int c);         /* answers a detach request (writer.c) */

/* ---- sample.c: byte sampling ------------------------------------------------ */
/* Bytes to this thread's next sample point. 0 until the thread's first
 * draw, which happens while sampling and recording, and always 0 when not
 * sampling; the period of a drawn countdown stays (rec_sample_drawn), so
 * any allocation smaller than it passes unrecorded whatever else is going
 * on (the allocation's inline route asks nothing else). */
extern REC_TLS uint64_t rec_sample_left;
int rec_sample_init(void);            /* maps the tables (once) */
void rec_sample_reset(void);          /* new trace: no sampled blocks (forked child: its parent's) */
void rec_sample_fork_child(void);     /* the only thread: no countdown drawn; keeps the set */
int rec_sample_drawn(void);           /* some thread holds a drawn countdown */
void rec_sample_every_free(void);     /* every first-filter count stuck (below) */
uint64_t rec_sample_overflows(void);
int rec_sample_slow(uint64_t period, size_t size); /* the countdown ends in this block */
/* The countdown ended in an allocation not recorded (stopped, or no trace):
 * a fresh gap (gaps are memoryless), so the next start samples unbiased. */
void rec_sample_skip(uint64_t period);
/* An allocation of size bytes goes unrecorded (stopped, or no trace): a
 * countdown that ends in it is drawn again, so the next start does not
 * sample its first allocation for sure. */
static inline void rec_sample_unrecorded(uint64_t period, size_t size)
{
	if (REC_UNLIKELY(rec_sample_left && rec_sample_left <= size))
		rec_sample_skip(period);
}
/* Is an allocation of size bytes sampled? (Hot path: a compare and a
 * subtraction.) */
static inline int rec_sampled(uint64_t period, size_t size)
{
	if (REC_LIKELY(rec_sample_left > size)) {
		rec_sample_left -= size;
		return 0;
	}
	return rec_sample_slow(period, size);
}
void rec_sampled_add(uint64_t addr);  /* a sampled block is live */
/* A free whose filters said maybe (rec_sampled_maybe, rec_sampled_likely):
 * was addr sampled? (removes it) */
int rec_sampled_take(uint64_t addr);
/* Writer side, for the set of recorded live blocks while stopped
 * (stopset.c): is addr in the set? Takes out every block keep() says no
 * to. */
int rec_sampled_has(uint64_t addr);
void rec_sampled_sweep(int (*keep)(uint64_t addr));
/* The first look of every free (sample.c says why): one cache line of
 * counts, by the top REC_SAMPLE_L0_LOG bits of the address's hash. A count
 * of 0 means the free is not recorded, in every mode: whenever every free
 * is (REC_M_FREES), all counts are stuck nonzero (api.c's derive sees to
 * it before the flag can be read). */
#define REC_SAMPLE_L0_LOG 6
extern _Atomic uint8_t rec_sample_l0[1u << REC_SAMPLE_L0_LOG];
/* The hash both filters and the set index by (Fibonacci hashing: the top
 * bits are well mixed). */
static inline uint64_t rec_sample_hash(uint64_t addr)
{
	return addr * 0x9e3779b97f4a7c15ull;
}
/* May the free of the block at addr be recorded? 0: surely not. Inline:
 * every free asks, and nearly every answer is "no" from this first look. */
static inline int rec_sampled_maybe(uint64_t addr)
{
	uint64_t h = rec_sample_hash(addr);
	return atomic_load_explicit(&rec_sample_l0[h >> (64 - REC_SAMPLE_L0_LOG)],
				    memory_order_acquire) != 0;
}
/* The second filter (sample.c): a byte per slot, by the hash's top
 * REC_SAMPLE_F_LOG bits, holding how many live sampled blocks hash there
 * (3 bits) and the XOR of their 5-bit fingerprints (the hash bits below). */
#define REC_SAMPLE_F_LOG 13                 /* 8 KiB */
#define REC_SAMPLE_F_COUNT 7u               /* the count's bits */
#define REC_SAMPLE_F_FP_SHIFT 3
#define REC_SAMPLE_F_FP_BITS 5
extern _Atomic uint8_t *_Atomic rec_sample_filter;
static inline uint8_t rec_sample_fingerprint(uint64_t h)
{
	return (uint8_t)((h >> (64 - REC_SAMPLE_F_LOG - REC_SAMPLE_F_FP_BITS)) &
			 ((1u << REC_SAMPLE_F_FP_BITS) - 1));
}
/* The second look, while probing (the filter is mapped): 0 if the block
 * at addr is surely not sampled (its slot is empty, or holds one block of
 * another fingerprint: addr, if sampled, is in its slot until the thread
 * freeing it takes it out). Inline too: with a few hundred sampled blocks live,
 * most of the first filter's counts are nonzero. */
static inline int rec_sampled_likely(uint64_t addr)
{
	uint64_t h = rec_sample_hash(addr);
	uint8_t n = atomic_load_explicit(&rec_sample_filter[h >> (64 - REC_SAMPLE_F_LOG)],
					 memory_order_acquire);
	unsigned k = n & REC_SAMPLE_F_COUNT;
	return k && (k != 1 || n >> REC_SAMPLE_F_FP_SHIFT == rec_sample_fingerprint(h));
}

/* ---- session.c: one trace being written ----------------------------------- */
enum rec_state { REC_OFF = 0, REC_ON = 1, REC_CLOSED = 2 };

struct rec_session {
	_Atomic int state;            /* enum rec_state; hot path reads it relaxed */
	_Atomic uint32_t gen;         /* bumped per session: stale thread state is reset */
	pid_t pid;                    /* process the trace belongs to */
	unsigned depth;               /* REC_DEPTH */
	uint64_t max_size;            /* REC_MAX_SIZE: bounded trace; 0 = unbounded */
	uint64_t t0;                  /* CLOCK_MONOTONIC ns at trace start */
	struct tf_ring_file *rf;      /* the mapped <trace>.ring */
	size_t map_size;
	int ring_fd, trace_fd;        /* moved above REC_FD_BASE, identity checked */
	dev_t ring_dev, trace_dev;
	ino_t ring_ino, trace_ino;
	uint64_t nodes_reserved;      /* node ids below this are fallocated */
	_Atomic int reserve_failed;   /* a fallocate failed: no more are tried */
	_Atomic int said_trouble;     /* rec_say_trouble spoke this session */
	/* 1 once the writer drains no ring any more: its writes failed, or the
	 * process is exiting while other threads run (rec_session_exit). What
	 * the rings hold stays for the importer's recovery; a thread finding
	 * its ring full then counts its events lost instead of waiting. */
	_Atomic int undrained;
	_Atomic uint32_t writer_tid, enc_tid; /* the recorder's own threads (0: none yet) */
	/* Threads waiting for the writer (ring.c) sleep on `progress`, which
	 * the writer bumps, and wakes them by when `waiters` is not 0, each
	 * time a tail moves, a ring is released or it drains no more. While
	 * `waiters` is not 0 a round drains every ring that holds anything
	 * (writer.c). `round` is the writer's round in progress (or last). */
	_Atomic uint32_t progress, waiters;
	_Atomic uint64_t round;
	/* figures reported in the trace's closing stats MARK (the count of
	 * lost events is the ring file's: rf->lost, rings' lost) */
	_Atomic uint64_t ring_waits;  /* times a thread found its ring full and waited */
	_Atomic uint64_t wait_rounds; /* most writer rounds one wait for room spanned */
	_Atomic uint64_t lent_calls;  /* calls recorded through a lent ring (no ring free) */
	_Atomic uint64_t stack_checks; /* captures checked (REC_CHECK_STACKS) */
	_Atomic uint64_t shadow_hits; /* of those, walks that met the shadow's trampoline */
	_Atomic uint64_t shadow_quiet; /* windows of a thread's captures that patched
	                                  nothing (stack.c's patching policy) */
	_Atomic uint64_t memo_hits;   /* of those, walks that took the rest from the memo */
	_Atomic uint64_t plain_hashes; /* shallow walks hashed from their previous one's */
	_Atomic uint64_t stacks_unknown; /* events stored with stack 0: trie full, or a
	                                    new stack in a handler that interrupted
	                                    this thread's trie insert */
	char trace_path[4096];
	char ring_path[4096 + 8];
	char exe[4096];               /* /proc/self/exe without " (deleted)" */
};
extern struct rec_session rec_s;

static inline int rec_on(void)
{
	return atomic_load_explicit(&rec_s.state, memory_order_relaxed) == REC_ON;
}

uint64_t rec_now(void);               /* ns since rec_s.t0 */
/* 1 if fd still is the file we opened (a program may close our descriptors
 * and reuse the numbers for its own files, which we must never write). */
int rec_fd_ok(int fd, dev_t dev, ino_t ino);
/* Its link count (0: removed) if it still is that file, else -1. */
long rec_fd_links(int fd, dev_t dev, ino_t ino);
int rec_fd_high(int fd);              /* fd moved to REC_FD_BASE or above (or kept) */
void rec_fd_remember(int fd, dev_t *dev, ino_t *ino); /* for rec_fd_ok */
void rec_session_stop(void);          /* flush, END, unlink .ring; idempotent */
/* The process ends (exit from any thread, _exit): rec_session_stop if the
 * caller is the program's only thread; else the trace is closed but the
 * other threads go on recording into their rings until the kernel ends
 * them, and the .ring is left for the importer, as after SIGKILL. */
void rec_session_exit(void);
void rec_session_restart(void);       /* after a failed exec */
int rec_session_mine(void);           /* recording, and this is the traced process */

/* ---- attaching to a running process (attach.c, session.c) ---------------- */
/* Routes an attach installs: the malloc family, C++ new/delete, the mmap
 * family and dlclose, with room to spare. */
#define REC_ATTACH_ROUTES_MAX 48
/* heapreel_attach's answers (trace-record -p reads them through gdb). */
#define REC_ATTACH_PRELOADED (-1)     /* this copy was preloaded: trace-ctl controls it */
#define REC_ATTACH_BUSY (-2)          /* already recording */
#define REC_ATTACH_FAILED (-3)        /* could not start a trace (said on stderr) */
int rec_session_attached(void);       /* 1: loaded into a running process */
/* Starts a trace at trace_path (absolute) in an attached copy: 0 or a
 * REC_ATTACH_ code. The routes are attach.c's to install after it. */
int rec_session_attach(const char *trace_path);
/* Detaching, on the writer thread: _begin puts the GOT back (-1: not an
 * attached recording); _end, once the writer wrote END, closes the files. */
int rec_session_detach_begin(void);
void rec_session_detach_end(void);
/* Makes node ids below `id` safe to write (fallocated); 0 if the disk is full. */
int rec_session_reserve_nodes(uint64_t id);
/* The file offset of ring i's first event area, or of its full one (big). */
uint64_t rec_session_area(uint32_t i, int big);
/* Makes that area safe to write; 0 on failure. */
int rec_session_reserve_ring(uint32_t i, int big);
/* The same for the first area ahead of need (rec_ring_prepare): a failure
 * is neither said nor remembered, a thread's own reservation meets it if
 * it is real. */
int rec_session_prepare_ring(uint32_t i);
struct tf_ring *rec_session_ring(uint32_t i);       /* its header */
struct tf_event *rec_session_events(uint64_t area); /* an area, mapped */
/* Ring r's event area now: read, as its capacity, after a head that covers
 * the events read (ring.c). */
static inline struct tf_event *rec_ring_events(const struct tf_ring *r)
{
	return rec_session_events(atomic_load_explicit(&r->events_at, memory_order_relaxed));
}
void rec_say(const char *a, const char *b, const char *c); /* one stderr line */
/* The trace cannot be written in full: one stderr line, the session's first. */
void rec_say_trouble(const char *a, const char *b, const char *c);

/* ---- out_dir.c: where a trace is created --------------------------------- */
/* The directory of path, walked without following a symbolic link another
 * user planted in a shared directory; *leaf: path's last component. The
 * descriptor (O_PATH), or -1 with errno, or -2: such a link is on the way. */
int rec_out_dir_open(const char *path, const char **leaf);

/* ---- stackhash.c: the hash a stack id is looked up by -------------------- */
#define REC_SH_P ((1ull << 61) - 1)   /* both polynomials are mod this prime */
struct rec_sh {
	uint64_t a, b;                /* the two polynomials, each below REC_SH_P */
};
extern uint64_t rec_sh_pow[2][REC_DEPTH_MAX + 1];  /* each base's powers */
extern uint64_t rec_sh_inv[2];                     /* each base's inverse */
void rec_stackhash_init(void);
/* The hash of n return addresses, innermost first. */
void rec_stackhash(void *const *ips, unsigned n, struct rec_sh *h);

static inline uint64_t rec_sh_mul(uint64_t x, uint64_t y)
{
	unsigned __int128 r = (unsigned __int128)x * y;
	uint64_t s = ((uint64_t)r & REC_SH_P) + (uint64_t)(r >> 61);
	return s >= REC_SH_P ? s - REC_SH_P : s;
}

/* A return address as a number below REC_SH_P (the same mod REC_SH_P). */
static inline uint64_t rec_sh_word(uintptr_t ip)
{
	uint64_t s = (ip & REC_SH_P) + (ip >> 61);
	return s >= REC_SH_P ? s - REC_SH_P : s;
}

static inline uint64_t rec_sh_add(uint64_t x, uint64_t y)
{
	uint64_t s = x + y;
	return s >= REC_SH_P ? s - REC_SH_P : s;
}

static inline uint64_t rec_sh_sub(uint64_t x, uint64_t y)
{
	return x >= y ? x - y : x + REC_SH_P - y;
}

/* Horner's step inward (stackhash.c): the chain's value at a frame of
 * return address ip, from its value at the frame outside it. */
static inline struct rec_sh rec_sh_in(struct rec_sh t, uintptr_t ip)
{
	uint64_t x = rec_sh_word(ip);
	return (struct rec_sh){ rec_sh_add(rec_sh_mul(t.a, rec_sh_pow[0][1]), x),
				rec_sh_add(rec_sh_mul(t.b, rec_sh_pow[1][1]), x) };
}

/* The step undone: the chain's value outside the frame of return address
 * ip, from its value at that frame. */
static inline struct rec_sh rec_sh_out(struct rec_sh t, uintptr_t ip)
{
	uint64_t x = rec_sh_word(ip);
	return (struct rec_sh){ rec_sh_mul(rec_sh_sub(t.a, x), rec_sh_inv[0]),
				rec_sh_mul(rec_sh_sub(t.b, x), rec_sh_inv[1]) };
}

/* The hash of the n frames from the chain's value `outside` them to its
 * value `inner` at the innermost: rec_stackhash of those frames. */
static inline struct rec_sh rec_sh_span(struct rec_sh inner, struct rec_sh outside, unsigned n)
{
	return (struct rec_sh){ rec_sh_sub(inner.a, rec_sh_mul(outside.a, rec_sh_pow[0][n])),
				rec_sh_sub(inner.b, rec_sh_mul(outside.b, rec_sh_pow[1][n])) };
}

/* ---- stack.c: capture --------------------------------------------------- */
/* Room for REC_DEPTH_MAX frames plus the recorder's own frames. */
#define REC_STACK_SLOTS (REC_DEPTH_MAX + 8)
/* libunwind, the stack hash, the per-thread tables' keys: 0; -1 if
 * libunwind is missing (or lacks what REC_CHECK_STACKS needs), -2 if no
 * thread key could be made. Again after a failure, it tries again. */
int rec_stack_init(void);
/* A buffer of REC_STACK_SLOTS for this thread's hook to capture into, in
 * the thread's own mapping (thread_mem.c), not its stack; NULL if it has
 * none (then a buffer on the stack). Only the hook uses it (rec_guard
 * REC_GUARD_HOOK): a handler interrupting it captures as nested.c's. */
void **rec_stack_room(void);
/* Captures into buf (REC_STACK_SLOTS entries) and returns where the
 * program's frames start: return addresses from the allocation's call site
 * outward, *n of them (at most rec_s.depth). *same = 1 when they are
 * exactly those of this thread's previous capture (its stack id holds).
 * *hashed = 1 when the walk worked out their hash (stackhash.c) into *h:
 * then ips is buf, and only rec_stack_fill puts all the frames in it (a
 * caller that finds the stack id by the hash alone never needs them). */
void *const *rec_stack_capture(void **buf, unsigned *n, int *same, struct rec_sh *h, int *hashed);
/* After a capture that said *hashed, before any other on this thread:
 * its *n frames into buf. 1; or 0 if the stack is no longer the one
 * hashed (a signal handler emptied the shadow stack in between, and
 * libunwind then got fewer frames: *n says how many). */
int rec_stack_fill(void **buf, unsigned *n);
/* From a signal handler that interrupted a hook of this thread: up to max
 * return addresses, the walk cut at the first frame the cached rules cannot
 * step out of (the signal frame, usually); no lock, no libunwind, and this
 * thread's walk memo untouched. */
unsigned rec_stack_capture_nested(void **buf, unsigned max);
/* A call made while this thread's hook records (rec_guard REC_GUARD_HOOK),
 * `caller` the interposed function's return address: does it come from the
 * recorder's side, i.e. the real allocator the hook called calling another
 * entry point (glibc's reallocarray tail-calls realloc), or code the hook
 * runs? 1 if caller or the walk from it reaches libheapreel.so; 0 if the walk
 * stops first, as a signal handler's does at the signal frame. Same walk as
 * rec_stack_capture_nested. */
int rec_stack_from_recorder(uintptr_t caller);
/* Threads' walk tables mapped afresh so far, not taken from those given
 * back (heapreel.stats). */
uint64_t rec_stack_tables_mapped(void);
/* This thread's next capture claims no `same`: it has no previous walk. */
void rec_stack_forget(void);

/* ---- stack_check.c: REC_CHECK_STACKS ------------------------------------ */
extern int rec_check_stacks;          /* 1: check every capture */
/* From rec_stack_init, with libunwind's handle and libheapreel.so's text:
 * reads REC_CHECK_STACKS; if checking is asked and cannot be done, -1
 * (libunwind lacks an entry point) or -2 (no thread key). */
int rec_stack_check_init(void *unwind, uintptr_t lo, uintptr_t hi);
/* Checks a capture (rec_stack_capture's frames, count, `same` and the
 * hash it worked out, or NULL) against a full libunwind walk from the
 * caller, and the hash against the frames' own; aborts on a difference. */
void rec_stack_check(void *const *ips, unsigned n, int same, const struct rec_sh *h);

/* A full libunwind walk from the caller (leading frames of libheapreel.so
 * skipped): up to max return addresses. translate: a frame returning into
 * the shadow stack's trampoline is followed by the shadow's frames
 * (rec_shadow_chain); else the walk stops there. 0 if libunwind is missing. */
unsigned rec_unwind_full(void **out, unsigned max, int translate);

/* ---- shadow.c: REC_SHADOW=1, return addresses of walked frames patched -- */
#define REC_SHADOW_MAX 128            /* frames patched per thread, at most */
struct rec_shadow_ent {
	uintptr_t ra;                 /* the return address the slot held */
	uintptr_t slot;               /* where it was saved: its frame's CFA - 8 */
	uintptr_t bp;                 /* RBP in the frame of ra, to walk on from */
	struct rec_sh t;              /* the hash chain's value at ra (stackhash.c) */
};
/* [0] the outermost frame patched; slots grow down towards the top.
 * REC_SHADOW_MAX entries (5 KiB) in memory of the thread's own
 * (thread_mem.c), had at its first shadow walk; NULL until then and
 * once its exit gave it back, when rec_shadow_n is 0. */
extern REC_TLS struct rec_shadow_ent *rec_shadow;
extern REC_TLS unsigned rec_shadow_n;
/* 1 while the thread's exit puts its patched slots back, and for good if
 * its memory could not be had: no walk patches meanwhile. */
extern REC_TLS int rec_shadow_closed;
int rec_shadow_map(void);             /* maps rec_shadow; 0 if closed */
/* Can this thread's walk patch (rec_shadow mapped, the thread not gone)? */
static inline int rec_shadow_ready(void)
{
	return REC_LIKELY(rec_shadow && !rec_shadow_closed) || rec_shadow_map();
}
/* 1 while each entry's t follows from the one below it, and
 * rec_shadow[0]'s from rec_shadow_tb (a rec_shadow_drop that keeps some
 * entries breaks the chain until the shadow starts again from empty). */
extern REC_TLS int rec_shadow_chained;
extern REC_TLS unsigned rec_shadow_drops;   /* rec_shadow_drop's calls */
extern REC_TLS unsigned rec_shadow_pops;    /* returns through the trampoline */
extern REC_TLS struct rec_sh rec_shadow_tb;
/* Nonzero: a call that unwinds (shadow.c's forwarders) returns through
 * this slot to rec_shadow_barrier_ra; no capture inside it patches. */
extern REC_TLS uintptr_t rec_shadow_barrier, rec_shadow_barrier_ra;
extern int rec_shadow_on;             /* REC_SHADOW=1 */
/* When the shadow does not reach the outermost frame (the stack was deeper
 * than REC_SHADOW_MAX): the stack and frame pointers of rec_shadow[0]'s
 * frame, to walk on from; valid while rec_shadow[0].slot is `slot`. */
struct rec_shadow_cut {
	uintptr_t slot, sp, bp;
};
extern REC_TLS struct rec_shadow_cut rec_shadow_cut;
void rec_shadow_tramp(void);          /* what a patched slot holds (asm) */
int rec_shadow_init(void);            /* from rec_stack_init: REC_SHADOW, RTLD_NEXT; -2: no key */
/* The frames from the patched slot `slot` outward, at most room; 0 if no
 * entry has that slot. *cut: they end at rec_shadow_cut's frame, not at
 * the outermost one. Reads only (a signal handler may call it). */
unsigned rec_shadow_chain(uintptr_t slot, void **out, unsigned room, int *cut);
/* Every patched slot above the caller put back and forgotten. */
void rec_shadow_drop(void);
/* Around a walk that must see the original addresses (stack_check.c):
 * the patched slots above the caller put back, then patched again. */
void rec_shadow_hide(void);
void rec_shadow_show(void);

/* ---- cfi.c: per-return-address unwind rules, cached ----------------------
 * A rule packs: bits 0-31 the CFA offset, 32-47 where the caller's RBP is
 * saved (CFA-relative, 0 = RBP unchanged), 48-55 where the return address
 * is (CFA-relative), 56-63 flags. */
#define REC_RULE_OK 1u           /* usable: CFA = RSP or RBP + offset */
#define REC_RULE_CFA_RBP 2u      /* the CFA is RBP-based (else RSP-based) */
#define REC_RULE_LAST 4u         /* outermost frame: return address undefined */
#define REC_RULE_NONE 0ull       /* not expressible: leave the stack to libunwind */
#define REC_RULE_END ((uint64_t)REC_RULE_LAST << 56)

static inline uint64_t rec_rule_make(int32_t cfa_off, int cfa_rbp, int16_t rbp_off, int8_t ra_off)
{
	return (uint64_t)(uint32_t)cfa_off | (uint64_t)(uint16_t)rbp_off << 32 |
	       (uint64_t)(uint8_t)ra_off << 48 |
	       (uint64_t)(REC_RULE_OK | (cfa_rbp ? REC_RULE_CFA_RBP : 0)) << 56;
}
static inline unsigned rec_rule_flags(uint64_t r) { return (unsigned)(r >> 56); }
static inline int32_t rec_rule_cfa_off(uint64_t r) { return (int32_t)(uint32_t)r; }
static inline int16_t rec_rule_rbp_off(uint64_t r) { return (int16_t)(uint16_t)(r >> 32); }
static inline int8_t rec_rule_ra_off(uint64_t r) { return (int8_t)(uint8_t)(r >> 48); }

/* The cache: open addressing, key = return address | epoch << 48. */
#define REC_CFI_SLOTS_LOG 17          /* 2 MiB of .bss, touched as used */
#define REC_CFI_EPOCH_SHIFT 48        /* return addresses are below 2^47 */
struct rec_cfi_slot {
	_Atomic uint64_t key;         /* 0 = empty; published after rule */
	_Atomic uint64_t rule;
};
extern struct rec_cfi_slot rec_cfi_cache[1u << REC_CFI_SLOTS_LOG];

/* The cache generation to use now, or UINT64_MAX: do not use the cache
 * (a dlclose is running). */
uint64_t rec_cfi_epoch(void);
/* A return address not in the cache: computes, caches and returns its rule. */
uint64_t rec_cfi_miss(uint64_t ra, uint64_t epoch);
/* The rule for ra without waiting for the insert lock (a signal handler may
 * have interrupted its holder): cached, or computed (and cached if the lock
 * is free). */
uint64_t rec_cfi_peek(uint64_t ra, uint64_t epoch);

static inline uint64_t rec_cfi_slot_of(uint64_t key)
{
	return (key * 0x9e3779b97f4a7c15ull) >> (64 - REC_CFI_SLOTS_LOG);
}

/* The rule for return address ra (hot path: one probe, usually). */
static inline uint64_t rec_cfi_find(uint64_t ra, uint64_t epoch)
{
	uint64_t key = ra | epoch << REC_CFI_EPOCH_SHIFT;
	for (uint64_t i = rec_cfi_slot_of(key);; i = (i + 1) & ((1u << REC_CFI_SLOTS_LOG) - 1)) {
		uint64_t k = atomic_load_explicit(&rec_cfi_cache[i].key, memory_order_acquire);
		if (REC_LIKELY(k == key))
			return atomic_load_explicit(&rec_cfi_cache[i].rule, memory_order_relaxed);
		if (k == 0)
			return rec_cfi_miss(ra, epoch);
	}
}
void rec_cfi_fork_child(void);        /* a forked child: release the insert lock */
/* Around the real dlclose: an unloaded object's rules must not outlive it. */
void rec_cfi_unload_begin(void);
void rec_cfi_unload_end(void);
void rec_cfi_forget(void);            /* objects went away unseen: new epoch */

/* ---- stackid.c: dedup into trie nodes ------------------------------------- */
/* Fresh tables for a new session; the old ones are unmapped only when no
 * other thread can be reading them (a forked child). */
int rec_stackid_init(int unmap_old);
/* The stack id (0 = unknown) of n return addresses; h: their hash
 * (rec_stackhash), or NULL to work it out. */
uint32_t rec_stackid(void *const *ips, unsigned n, const struct rec_sh *h);
/* The stack id of the stack of hash h if it has one already, else 0. */
uint32_t rec_stackid_known(const struct rec_sh *h);
/* The same from a signal handler that interrupted a hook of this thread; if
 * it interrupted this thread's trie insert, a stack not seen before is 0
 * (counted as unknown). */
uint32_t rec_stackid_nested(void *const *ips, unsigned n);

/* ---- nested.c: calls from signal handlers that interrupted a hook ---------
 * Their events wait in a per-thread queue until the interrupted hook puts
 * them in its ring. The queue's counters: slots reserved, slots drained. */
extern REC_TLS _Atomic uint32_t rec_nested_head, rec_nested_tail;
static inline int rec_nested_queued(void)
{
	return atomic_load_explicit(&rec_nested_head, memory_order_relaxed) !=
	       atomic_load_explicit(&rec_nested_tail, memory_order_relaxed);
}
/* Producer (guard REC_GUARD_HOOK, interrupting a hook): reserve slots for n
 * (1 or 2) events before stamping them, so queue order is time order; fill
 * k <= n of them (a reserved slot left empty is skipped). */
uint32_t rec_nested_reserve(unsigned n);
void rec_nested_fill(uint32_t at, const struct tf_event *ev, unsigned k);
uint32_t rec_nested_stack(void);      /* the stack id of the handler's call */
/* Consumer (the interrupted hook, guard REC_GUARD_HOOK): queued events
 * stamped at or before upto, in order, into this thread's ring. */
void rec_nested_drain(uint64_t upto);

/* ---- ring.c: per-thread staging rings ------------------------------------- */
/* Rings a thread keeps from its first event to its exit; threads beyond
 * them borrow one of REC_RINGS_LENT rings (after those) for each call.
 * A ring holds REC_RING_FIRST_EVENTS (its 64 KiB first area of the file,
 * reserved when a thread first claims it) until its thread fills it; it
 * then moves, once the writer has drained it, to its full area of the
 * file's ring_events (4 MiB), as long as fewer than REC_RINGS_GROWN rings
 * have grown. So a thousand threads that allocate a little each have a
 * ring of their own for 64 MiB of disk, and the file's reservation stays
 * under 64 x 4 MiB + 1040 x 64 KiB + the nodes' (at most 64 MiB). */
#define REC_RINGS_KEPT 1024
#define REC_RINGS_LENT 16
#define REC_RING_FIRST_EVENTS (1u << 11)
#define REC_RINGS_GROWN 64
int rec_ring_init(void);              /* once per process: the thread-exit key */
void rec_ring_reset(void);            /* new session: forget every claim */
/* Publishes n (1 or 2) events of the calling thread together. */
void rec_ring_put(const struct tf_event *ev, unsigned n);

/* ---- interpose.c, for the entry points with hooks of their own -----------
 * C++ new and delete (interpose.c) and the allocator APIs (entry_alloc_api.c)
 * hand their arguments over as one rec_call, which call(c) turns into the
 * real call; unused fields are 0. */
struct rec_call {
	void *ptr;                    /* the block freed or resized */
	size_t size;                  /* bytes the block gets */
	size_t n, elem;               /* a count of elements of elem bytes (calloc-like) */
	size_t align;                 /* an alignment (C++ align_val_t, memalign) */
	size_t extra;                 /* xallocx's extra */
	int flags;                    /* jemalloc's MALLOCX_* flags */
	int rc;                       /* out: posix_memalign's answer */
	size_t usable;                /* out: xallocx's answer */
	const void *tag;              /* a C++ nothrow_t& */
};
typedef void *rec_call_alloc(struct rec_call *c);
typedef void rec_call_free(struct rec_call *c);
/* The interposed function's return address: evaluated in the hooked
 * function itself, so it names the program's (or allocator's) call site. */
#define REC_CALLER ((uintptr_t)__builtin_return_address(0))
/* An allocation of c->size bytes (a C++ new's bad_alloc unwinds through). */
void *rec_hook_alloc(rec_call_alloc *call, struct rec_call *c, unsigned fn, uintptr_t caller);
/* The free of c->ptr. */
void rec_hook_free(rec_call_free *call, struct rec_call *c, uintptr_t caller);
/* c->ptr resized to c->size; call returns the block, or NULL if the old
 * one stays as it was (failed, or resized in place to no effect). */
void *rec_hook_resize(rec_call_alloc *call, struct rec_call *c, unsigned fn, uintptr_t caller);

/* The hooks of the C++ shapes (rec_cxx_*), for interpose.c's operator new
 * and delete (exported) and tcmalloc's tc_new family (entry_alloc_api.c):
 * call(c) makes the real call through real (a pointer of the shape's
 * type), or fallback where real is NULL (fallback may use c); hook is the
 * hooked function, declared qual; fn the tf_fn recorded (news only). */
#define REC_HOOK_new(qual, hook, call, real, fallback, fn) \
	static void *call(struct rec_call *c) { return real ? real(c->size) : (fallback); } \
	qual void *hook(size_t size); \
	qual void *hook(size_t size) \
	{ return rec_hook_alloc(call, &(struct rec_call){ .size = size }, fn, REC_CALLER); }

#define REC_HOOK_new_tag(qual, hook, call, real, fallback, fn) \
	static void *call(struct rec_call *c) { return real ? real(c->size, c->tag) : (fallback); } \
	qual void *hook(size_t size, const void *tag); \
	qual void *hook(size_t size, const void *tag) \
	{ \
		return rec_hook_alloc(call, &(struct rec_call){ .size = size, .tag = tag }, fn, \
				      REC_CALLER); \
	}

#define REC_HOOK_new_align(qual, hook, call, real, fallback, fn) \
	static void *call(struct rec_call *c) \
	{ return real ? real(c->size, c->align) : (fallback); } \
	qual void *hook(size_t size, size_t align); \
	qual void *hook(size_t size, size_t align) \
	{ \
		return rec_hook_alloc(call, &(struct rec_call){ .size = size, .align = align }, fn, \
				      REC_CALLER); \
	}

#define REC_HOOK_new_align_tag(qual, hook, call, real, fallback, fn) \
	static void *call(struct rec_call *c) \
	{ return real ? real(c->size, c->align, c->tag) : (fallback); } \
	qual void *hook(size_t size, size_t align, const void *tag); \
	qual void *hook(size_t size, size_t align, const void *tag) \
	{ \
		return rec_hook_alloc(call, \
				      &(struct rec_call){ .size = size, .align = align, .tag = tag }, \
				      fn, REC_CALLER); \
	}

#define REC_HOOK_del(qual, hook, call, real, fallback, fn) \
	static void call(struct rec_call *c) { if (real) real(c->ptr); else fallback; } \
	qual void hook(void *p); \
	qual void hook(void *p) \
	{ rec_hook_free(call, &(struct rec_call){ .ptr = p }, REC_CALLER); }

#define REC_HOOK_del_size(qual, hook, call, real, fallback, fn) \
	static void call(struct rec_call *c) { if (real) real(c->ptr, c->size); else fallback; } \
	qual void hook(void *p, size_t size); \
	qual void hook(void *p, size_t size) \
	{ rec_hook_free(call, &(struct rec_call){ .ptr = p, .size = size }, REC_CALLER); }

#define REC_HOOK_del_tag(qual, hook, call, real, fallback, fn) \
	static void call(struct rec_call *c) { if (real) real(c->ptr, c->tag); else fallback; } \
	qual void hook(void *p, const void *tag); \
	qual void hook(void *p, const void *tag) \
	{ rec_hook_free(call, &(struct rec_call){ .ptr = p, .tag = tag }, REC_CALLER); }

#define REC_HOOK_del_size_align(qual, hook, call, real, fallback, fn) \
	static void call(struct rec_call *c) \
	{ if (real) real(c->ptr, c->size, c->align); else fallback; } \
	qual void hook(void *p, size_t size, size_t align); \
	qual void hook(void *p, size_t size, size_t align) \
	{ \
		rec_hook_free(call, &(struct rec_call){ .ptr = p, .size = size, .align = align }, \
			      REC_CALLER); \
	}

#define REC_HOOK_del_align_tag(qual, hook, call, real, fallback, fn) \
	static void call(struct rec_call *c) \
	{ if (real) real(c->ptr, c->align, c->tag); else fallback; } \
	qual void hook(void *p, size_t align, const void *tag); \
	qual void hook(void *p, size_t align, const void *tag) \
	{ \
		rec_hook_free(call, &(struct rec_call){ .ptr = p, .align = align, .tag = tag }, \
			      REC_CALLER); \
	}

/* ---- entry_alloc_api.c: jemalloc's *allocx and tcmalloc's tc_* ----------- */
/* At start (constructor), or at each attach: routes extra[0..nextra)
 * (attach.c's, kept by reference: static storage; at most
 * REC_ATTACH_ROUTES_MAX) and the APIs the object serving malloc defines to
 * their hooks (got.c); REC_TEST_GOT_RESTORE is read here. */
struct rec_got_fn;
void rec_alloc_api_init(const struct rec_got_fn *extra, unsigned nextra);
/* rec_mark's label: the test hook that puts the GOT back (README). */
void rec_alloc_api_mark(const char *label);

/* ---- mmap.c ---------------------------------------------------------------- */
void rec_mmap_init(void);     /* constructor: where the allocator's own calls come from */

/* ---- interpose.c, for mmap.c and custom.c --------------------------------- */
/* Records k events of one call as an allocation hook does (the guard set,
 * handlers' calls queued); the last gets the caller's stack if stacked. */
void rec_hook_events(struct tf_event *ev, unsigned k, int stacked);
/* Writer side: ring i is drained and may be claimed again. */
void rec_ring_release(uint32_t i);
/* Writer side: a tail moved, a ring was released, or the writer drains no
 * more: threads waiting for it look again. */
void rec_ring_progress(void);
/* Writer side, each round: the next rings threads will claim get their
 * first part reserved and their pages mapped, so that a new thread's
 * first event makes no system call and takes no page fault. */
void rec_ring_prepare(void);
/* Counts n events stamped from ev->t on as lost, in the .ring file: in
 * ring `own` once the writer drains no more (it is never released then,
 * so the count stays with its thread), else in the file's own count. */
void rec_lose(struct tf_ring *own, const struct tf_event *ev, unsigned n);
static inline int rec_undrained(void)
{
	return atomic_load_explicit(&rec_s.undrained, memory_order_acquire);
}

/* ---- the recorder's own threads (writer.c, encoder.c) --------------------- */
/* Sleeps while *word is seen, up to timeout (NULL: no limit). */
static inline void rec_futex_wait(_Atomic uint32_t *word, uint32_t seen,
				  const struct timespec *timeout)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, timeout, NULL, 0);
}

/* Wakes up to n threads sleeping on word. */
static inline void rec_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Test hooks' delays (REC_TEST_*_US, read at start): the microseconds
 * variable `name` asks for, 0 unless it holds 1 to REC_TEST_DELAY_MAX_US. */
#define REC_TEST_DELAY_MAX_US 1000000u
static inline long rec_test_delay_us(const char *name)
{
	const char *s = getenv(name);
	uint64_t us;
	return s && rec_parse_u64(s, 1, REC_TEST_DELAY_MAX_US, &us) == 0 ? (long)us : 0;
}

static inline void rec_sleep_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
	nanosleep(&ts, NULL);
}

/* *tid of a thread made but not yet running. */
#define REC_TID_STARTING UINT32_MAX

/* Makes one with every signal blocked (a thread keeps the mask it is made
 * with), so no handler of the program ever runs on it; 0 or -1. It does
 * not wait for the thread to run (on a busy machine that is milliseconds
 * of every recorded process's start): *tid is REC_TID_STARTING until the
 * thread publishes its tid (rec_thread_started), which rec_thread_tid
 * waits for. */
static inline int rec_thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
				   _Atomic uint32_t *tid)
{
	sigset_t all, old;
	sigfillset(&all);
	atomic_store(tid, REC_TID_STARTING);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		atomic_store(tid, 0);
		return -1;
	}
	return 0;
}

/* The new thread's first step. */
static inline void rec_thread_started(_Atomic uint32_t *tid)
{
	atomic_store(tid, (uint32_t)gettid());
	rec_futex_wake(tid, INT32_MAX);
}

/* The tid of a thread rec_thread_start made, once it runs (0: none). */
static inline uint32_t rec_thread_tid(_Atomic uint32_t *tid)
{
	uint32_t v;
	while ((v = atomic_load(tid)) == REC_TID_STARTING)
		rec_futex_wait(tid, REC_TID_STARTING, NULL);
	return v;
}

/* ---- encoder.c: the writer's second encoding thread ----------------------- */
struct rec_enc {                      /* what it encodes with */
	struct tf_segenc *se;
	struct tf_event *ev;          /* room for TF_SEGMENT_EVENTS + 1 events */
};
struct rec_enc_job {                  /* one segment's events, and the outcome */
	struct tf_segenc *se;         /* encoded into */
	const struct tf_event *ev;
	size_t n;
	uint32_t stream, tid;
	uint64_t first_seq;
	int rc;                       /* of tf_segenc_events */
	struct tf_error err;
};
int rec_enc_start(void);              /* with the writer: the thread, idle */
int rec_enc_ready(void);              /* the thread is there (its encoder may not be) */
const struct rec_enc *rec_enc_get(void); /* made on first call (mmap); NULL: none */
void rec_enc_run(struct rec_enc_job *j);    /* encodes j on this thread */
void rec_enc_submit(struct rec_enc_job *j); /* encodes j on the encoder thread */
void rec_enc_wait(void);              /* until the submitted job is done */
uint64_t rec_enc_jobs(void);          /* jobs the thread did this session */
void rec_enc_stop(void);              /* joins it; no job may be pending */
void rec_enc_abandon(void);           /* forked child: it is not there */
/* After a detach, the thread stopped: its encoder and buffer are unmapped
 * (the next attach makes new ones), so a detached process keeps little of
 * the recorder in its RSS. */
void rec_enc_release(void);

/* ---- writer.c: the writer thread ------------------------------------------ */
int rec_writer_start(struct tf_writer *w);
/* Final drain, END; joins the thread. keep_rings: other threads go on
 * (rec_session_exit): rec_s.undrained is set once the last round is done. */
void rec_writer_stop(int keep_rings);
void rec_writer_abandon(void);        /* forked child: forget the parent's writer */
/* On the writer thread, after rec_session_detach_begin: a few more rounds,
 * the final one, END; then the session's files are closed, fd (the control
 * connection that asked) is answered and closed, and the writer ends. */
void rec_writer_detach(int fd);
void rec_writer_kick(void);           /* wake the writer early (a syscall) */
/* Writer thread only: a MARK record; a full round written to the file. */
void rec_writer_mark(uint64_t t, const char *label);
void rec_writer_lack_marks(void);     /* a keyframe: the marks of what the trace lacks again */
int rec_writer_sync(void);            /* 0, or -1: writing failed */
int rec_writer_failed(void);
uint64_t rec_thread_cpu_ns(void);      /* CPU time of the calling thread */
uint64_t rec_writer_moved(uint32_t i); /* round that last moved ring i's tail */
void rec_writer_meta(const struct tf_record *r);
void rec_writer_module(uint32_t i);
int rec_writer_node(uint32_t id);     /* 0: not written yet */

/* ---- counters.c: RSS and the allocator's figures over time ---------------- */
void rec_counters_init(void);         /* constructor: REC_STATS_MS, the allocator's functions */
void rec_counters_start(void);        /* a session's writer starts: names not written yet */
/* Writer thread only, between rounds: a SAMPLE (with the COUNTER names
 * first in a session) when one is due, or at once if force (the end,
 * rec_flush); returns the ns until the next is due (UINT64_MAX: off). */
uint64_t rec_counters_tick(int force);
/* CPU time the writer spent sampling in this session, and the wall time
 * of the allocator's statistics calls in it (holding the allocator's
 * locks, which a program thread may be waiting for). */
void rec_counters_spent(uint64_t *cpu_ns, uint64_t *alloc_ns);
void rec_counters_names(void);        /* the COUNTER records (keyframes write them again) */

/* ---- keyframe.c: a bounded trace's keyframes (writer thread only) -------- */
int rec_keyframe_init(void);          /* with the keymap; 0 or -1 */
/* A ring drained to its end (seq events) and released. */
void rec_keyframe_released(uint32_t stream, uint32_t tid, uint64_t seq);
/* Writes one keyframe: trie nodes [1, nodes), modules [0, modules). */
void rec_keyframe_write(uint32_t nodes, uint32_t modules);

/* Zeroed private memory for the recorder's tables, outside the program's
 * heap; NULL if there is none. populate: every page in place at once, for
 * tables read before they are written (the first write to a page that a
 * read had mapped to the zero page copies it and flushes every CPU's TLB,
 * an interrupt for each program thread); buffers always written first get
 * their pages as they are used. mmap may take the kernel's mm lock for
 * long: the writer calls this, an allocation hook only on stackid.c's
 * once-per-stack path and at a thread's first capture (rec_map_thread). */
static inline void *rec_map_private(size_t bytes, int populate)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- thread_mem.c: a thread's own tables, not TLS ------------------------ */
/* pthread_setspecific for the recorder: keys past the first 32 allocate,
 * which is libc's, not the program's. Inside a hook (REC_GUARD_HOOK) that
 * call is told from the recorder's side and passed through, while a signal
 * handler's allocations meanwhile are still recorded (nested.c). */
int rec_thread_set(pthread_key_t key, void *p);
/* Makes *key (destructor its destructor) unless *keyed says it was made:
 * 0, or -1. Once per process, so a retried setup (the next attach after a
 * failed one) makes no other key. */
int rec_thread_key(pthread_key_t *key, int *keyed, void (*destructor)(void *));
/* One kind of a thread's own memory: the key whose destructor gives a
 * thread's mapping back, and the mappings given back, for the next threads. */
#define REC_THREAD_CACHE 64
struct rec_thread_kind {
	pthread_key_t key;
	int keyed;                    /* rec_thread_key */
	size_t bytes;
	_Atomic(void *) cache[REC_THREAD_CACHE];
	_Atomic uint64_t mapped;      /* mappings made, not taken from the cache */
};
/* Makes k's key (once) for mappings of bytes, give_back its destructor:
 * 0, or -2 if no key can be made. */
int rec_thread_kind_init(struct rec_thread_kind *k, size_t bytes, void (*give_back)(void *));
/* k->bytes of the thread's own, set as k's key's value, from k's cache or
 * newly mapped and populated; not cleared. NULL if there are none: the
 * caller does without. Asked again after its destructor gave them back
 * (at the thread's exit, for a later destructor), it sets the key again,
 * and glibc's next destructor round gives them back; so a thread keeps
 * them past its end only if it asks in glibc's last round, after k's
 * destructor. */
void *rec_map_thread(struct rec_thread_kind *k);
void rec_unmap_thread(struct rec_thread_kind *k, void *p);   /* to the cache, or unmapped */

/* ---- stopset.c: while stopped, only recorded blocks' frees (writer) ----- */
void rec_stopset_fork_child(int inherited); /* before the child's session: blocks inherited? */
void rec_stopset_start(void);         /* a session's writer starts */
void rec_stopset_end(void);           /* and ends */
int rec_stopset_tracking(void);       /* the keymap takes every chunk written */
void rec_stopset_round(void);         /* between writer rounds: the next step */
/* custom.c, writer side: the keys of destroyed pools out of the sampled
 * set; is k a custom block's key (which the stop set's sweep keeps)? */
void rec_custom_round(void);
int rec_custom_key(uint64_t k);
void rec_stopset_settle(void);        /* rec_flush: every step left */
/* A hook published ev[0..n) and then saw REC_M_SETBUILD (ring.c). */
void rec_stopset_published(const struct tf_event *ev, unsigned n);

/* ---- keymap.c: the live set of recorded blocks (writer thread only) ------ */
struct rec_key {                      /* a live block, as a keyframe lists it */
	uint64_t addr, t, size;
	uint32_t stack, stream, tid;
	uint8_t fn;
};
int rec_keymap_init(void);            /* 0, or -1: no memory */
/* Drained events of one stream, in any order across streams. */
void rec_keymap_apply(uint32_t stream, uint32_t tid, const struct tf_event *ev, size_t n);
/* Frees stamped at or before upto, once no older event of their address
 * can still be in a ring. */
void rec_keymap_forget_frees(uint64_t upto);
/* The live blocks: start with *i = 0; 1 and *k the next one, or 0 at the
 * end. */
int rec_keymap_next(size_t *i, struct rec_key *k);
int rec_keymap_live(uint64_t addr);   /* its latest event is an allocation */
uint64_t rec_keymap_t_max(void);      /* latest time applied */
int rec_keymap_broken(void);          /* ran out of memory (said so) */

/* ---- modules.c: the module map -------------------------------------------- */
struct rec_module {
	uint64_t start, size, offset;
	uint32_t perms;                   /* as tf_record.perms */
	uint32_t build_id_len;
	uint8_t build_id[32];
	uint32_t path;                    /* offset into the module path pool */
};
void rec_modules_reset(void);         /* new session: everything unsent */
void rec_modules_snapshot(void);      /* dl_iterate_phdr; never from a hook */
/* Objects added since the last snapshot? (Writer only; also tells cfi.c
 * when objects were unloaded behind our dlclose.) */
int rec_modules_changed(void);
/* Modules [from, count) are published; returns count. */
uint32_t rec_modules_count(void);
const struct rec_module *rec_module(uint32_t i, const char **path);

/* ---- walk.c: our walks of the loaded objects, kept out of fork's way ------ */
struct dl_phdr_info;
void rec_walk_init(void);             /* constructor: the test delay */
/* dl_iterate_phdr(cb, data) under walk_lock; never from a hook. */
int rec_walk_objects(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data);
void rec_walk_fork_prepare(void);     /* fork's prepare handler: no walk from now */
void rec_walk_fork_release(void);     /* after fork, in the parent and the child */

#endif
