/*
 * clock.c - the time of every event: nanoseconds since the trace start,
 * counted by the CPU's time-stamp counter when the kernel itself keeps time
 * with it, else read from clock_gettime(CLOCK_MONOTONIC).
 *
 * Why not always clock_gettime: through the vDSO it costs ~24 ns here, and
 * most of that is the LFENCE it puts before its RDTSC; a bare RDTSC costs
 * ~10 ns. Every allocation is stamped twice (its allocation and its free).
 *
 * What replay needs from a stamp is order (design.md): a free is stamped
 * before the real free runs and an allocation after the real call returns,
 * so that a block one thread frees and the allocator hands to another
 * thread is freed before it is allocated. RDTSC may execute before earlier
 * instructions have completed, but never after a later store is visible to
 * other threads (it retires before that store, and stores leave the core in
 * order after retirement). So:
 *   rec_now_before() - a bare RDTSC: no later than anything this thread
 *                      does after it. A free's stamp.
 *   rec_now()        - LFENCE, then RDTSC: also no earlier than anything
 *                      this thread did before it. Every other stamp.
 * Both are inline in rec_internal.h.
 *
 * The counter is used only when CPUID says it is invariant (constant rate,
 * runs in every power state) and the kernel's clocksource is "tsc" (the
 * kernel checked that the counters of all CPUs agree, and a hypervisor does
 * not trap RDTSC). Its rate is measured once per program, against
 * CLOCK_MONOTONIC over CALIBRATE_NS; each trace start takes one
 * (CLOCK_MONOTONIC, counter) pair as its origin. So a stamp is the trace's
 * CLOCK_MONOTONIC start plus counted time: it drifts from CLOCK_MONOTONIC
 * only by the measured rate's error (each end of the measurement is read
 * between two clock reads ~25 ns apart: < 50 ppm) and by NTP's slewing,
 * which nothing in replay depends on; order and resolution are exact.
 *
 * Must never: allocate, or read the counter before rec_clock_start.
 */
#include "rec_internal.h"

#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __x86_64__
#include <cpuid.h>
#endif

#define NS_PER_S 1000000000u
#define CALIBRATE_NS 1000000u   /* 1 ms of spinning per program: rate error < 50 ppm */
#define PAIR_TRIES 8            /* clock reads around a counter read: keep the tightest */
#define MIN_HZ 100000000u       /* a counter rate outside 100 MHz - 10 GHz is not believed */
#define MAX_HZ 10000000000u
#define CLOCKSOURCE "/sys/devices/system/clocksource/clocksource0/current_clocksource"

struct rec_clock rec_clock;

uint64_t rec_clock_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

#ifdef __x86_64__
/* 1 if the kernel keeps its own time with the TSC. */
static int kernel_uses_tsc(void)
{
	char buf[16];
	int fd = open(CLOCKSOURCE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	return n == 4 && memcmp(buf, "tsc\n", 4) == 0;
}

static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000007, &a, &b, &c, &d))
		return 0;
	return (d >> 8) & 1;  /* "invariant TSC" */
}

/* One (CLOCK_MONOTONIC, counter) pair: the counter read between two clock
 * reads, the tightest of PAIR_TRIES, the clock taken at its middle. */
static void pair(uint64_t *mono, uint64_t *tsc)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < PAIR_TRIES; i++) {
		uint64_t a = rec_clock_mono();
		_mm_lfence();
		uint64_t c = __rdtsc();
		_mm_lfence();
		uint64_t b = rec_clock_mono();
		if (b - a < best) {
			best = b - a;
			*mono = a + (b - a) / 2;
			*tsc = c;
		}
	}
}
#endif

void rec_clock_init(void)
{
	rec_clock.tsc = 0;
#ifdef __x86_64__
	if (!tsc_invariant() || !kernel_uses_tsc())
		return;
	uint64_t m0, c0, m1, c1;
	pair(&m0, &c0);
	while (rec_clock_mono() - m0 < CALIBRATE_NS)
		;
	pair(&m1, &c1);
	if (c1 <= c0 || m1 <= m0)
		return;
	unsigned __int128 hz = (unsigned __int128)(c1 - c0) * NS_PER_S / (m1 - m0);
	if (hz < MIN_HZ || hz > MAX_HZ)
		return;
	rec_clock.mult = (uint64_t)(((unsigned __int128)(m1 - m0) << REC_CLOCK_SHIFT) / (c1 - c0));
	rec_clock.tsc = 1;
#endif
}

uint64_t rec_clock_start(void)
{
#ifdef __x86_64__
	if (rec_clock.tsc) {
		uint64_t mono, tsc;
		pair(&mono, &tsc);
		rec_clock.tsc0 = tsc;
		return mono;
	}
#endif
	return rec_clock_mono();
}
