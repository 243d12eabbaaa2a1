/*
 * encoder.c - the writer's second thread ("heapreel-enc"): it encodes one
 * chunk of events while the writer encodes the next (writer.c pairs them),
 * so that on a machine whose cores the program's threads keep busy the
 * writer gets two threads' share of the CPU, not one, and keeps up. (With
 * 4 busy threads on 2 cores the writer alone gets a fifth of the CPU, about
 * what it needs for them: each time it fell behind, a thread whose ring was
 * full had to wait for it.)
 *
 * One job at a time: rec_enc_submit hands it over through the futex word
 * `go`, the thread encodes it into its own tf_segenc and bumps `done`; the
 * writer appends the segment itself (tf_writer_put), in order. The thread
 * is made when the writer starts, idle until the first job; its encoder and
 * events buffer (~11 MiB) only when writer.c first has two chunks to pair,
 * on the writer's thread, with mmap only (tf_segenc_new says why). A
 * process whose writer never has two chunks at once (one busy thread)
 * never maps them.
 *
 * The thread runs with the re-entrancy guard set (its allocations are not
 * recorded) and all signals blocked, like the writer.
 *
 * Must never: call malloc, or touch the trace file.
 */
#include "rec_internal.h"

#include <sys/prctl.h>

static pthread_t thread;
static int running;                    /* the thread exists (this process) */
/* enc.ev: a segment's events and one more */
#define EV_BYTES ((TF_SEGMENT_EVENTS + 1) * sizeof(struct tf_event))
static int unusable;                   /* no memory for the encoder: never again */
static struct rec_enc enc;             /* made on first use, kept across sessions */
static struct rec_enc_job *job;
static _Atomic uint32_t go, done;      /* jobs handed over, jobs finished */
static _Atomic int quit;
static uint64_t jobs;                  /* encoded by the thread this session */

void rec_enc_run(struct rec_enc_job *j)
{
	j->rc = tf_segenc_events(j->se, j->stream, j->tid, j->first_seq, j->ev, j->n, &j->err);
}

/* arg: `go` when the thread was made; a job handed over before the thread
 * first looks has moved it on. Every move of `go` is a job, or the stop
 * (`quit` set first): a wake-up is never about anything else, so none can
 * be missed between looking and sleeping. */
static void *enc_main(void *arg)
{
	uint32_t seen = (uint32_t)(uintptr_t)arg;
	rec_guard = 1;
	rec_thread_started(&rec_s.enc_tid);
	prctl(PR_SET_NAME, "heapreel-enc");
	for (;;) {
		uint32_t g;
		while ((g = atomic_load_explicit(&go, memory_order_acquire)) == seen)
			rec_futex_wait(&go, seen, NULL);
		seen = g;
		if (atomic_load_explicit(&quit, memory_order_relaxed))
			return NULL;  /* no job is pending: the writer settled first */
		rec_enc_run(job);
		atomic_store_explicit(&done, g, memory_order_release);
		rec_futex_wake(&done, 1);
	}
}

int rec_enc_start(void)
{
	jobs = 0;
	atomic_store(&quit, 0);
	uint32_t g = atomic_load(&go);
	atomic_store(&done, g);
	running = rec_thread_start(&thread, enc_main, (void *)(uintptr_t)g, &rec_s.enc_tid) == 0;
	return running ? 0 : -1;
}

int rec_enc_ready(void)
{
	return running && !unusable;
}

const struct rec_enc *rec_enc_get(void)
{
	if (!rec_enc_ready())
		return NULL;
	if (enc.se)
		return &enc;
	struct tf_error err;
	enc.ev = rec_map_private(EV_BYTES, 0);
	if (!enc.ev || tf_segenc_new(&enc.se, &err) != TF_OK) {
		if (enc.ev)
			munmap(enc.ev, EV_BYTES);
		enc.ev = NULL;
		unusable = 1;
		return NULL;
	}
	return &enc;
}

void rec_enc_submit(struct rec_enc_job *j)
{
	job = j;
	jobs++;
	atomic_fetch_add_explicit(&go, 1, memory_order_release);
	rec_futex_wake(&go, 1);
}

void rec_enc_wait(void)
{
	uint32_t g = atomic_load_explicit(&go, memory_order_relaxed), d;
	while ((d = atomic_load_explicit(&done, memory_order_acquire)) != g)
		rec_futex_wait(&done, d, NULL);
}

uint64_t rec_enc_jobs(void)
{
	return jobs;
}

void rec_enc_stop(void)
{
	if (!running)
		return;
	atomic_store_explicit(&quit, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&go, 1, memory_order_release);
	rec_futex_wake(&go, 1);
	pthread_join(thread, NULL);
	running = 0;
}

void rec_enc_release(void)
{
	tf_segenc_free(enc.se);
	if (enc.ev)
		munmap(enc.ev, EV_BYTES);
	enc.se = NULL;
	enc.ev = NULL;
}

void rec_enc_abandon(void)
{
	running = 0;  /* a forked child has no such thread; its encoder is a copy, kept */
	atomic_store(&rec_s.enc_tid, 0);
}
