/*
 * mktrace.c - writes crafted traces for the importer tests through the
 * trace-format writer API (and, for recovery tests, a hand-made .ring
 * staging file laid out by trace_format.h's own structs).
 *
 *   mktrace OUT.trc < script     one command per line (see run_script)
 *   mktrace --synth OUT.trc THREADS ALLOCS SEED
 *                                 a churn-like trace for measuring the importer
 *
 * It must never be used for anything but tests and measurements: it trusts
 * its script and exits on the first error.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace_format.h"

#define MAX_BATCH 65536               /* events per tf_write_events call */
#define MAX_STREAMS 256
#define LINE_MAX_LEN 4096

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("mktrace: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void check(int rc, const struct tf_error *e, const char *what)
{
	if (rc != TF_OK)
		die("%s: %s (%s)", what, tf_status_name(rc), e->msg);
}

static int create(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0)
		die("%s: cannot create", path);
	return fd;
}

/* ---- script mode ----------------------------------------------------------- */
struct batch {
	uint32_t stream, tid;
	struct tf_event ev[MAX_BATCH];
	size_t n;
};

static uint64_t next_seq[MAX_STREAMS];

static void flush(struct tf_writer *w, struct batch *b)
{
	struct tf_error e = {0};

	if (!b->n)
		return;
	check(tf_write_events(w, b->stream, b->tid, next_seq[b->stream], b->ev,
			      b->n, &e), &e, "write events");
	next_seq[b->stream] += b->n;
	b->n = 0;
}

static struct tf_event *push(struct batch *b)
{
	if (b->n == MAX_BATCH)
		die("batch too long");
	memset(&b->ev[b->n], 0, sizeof b->ev[b->n]);
	return &b->ev[b->n++];
}

struct ringfile {
	uint8_t *map;
	struct tf_ring_file *rf;
};

static struct tf_ring *ring_at(struct ringfile *r, unsigned idx)
{
	if (!r->map || idx >= r->rf->max_rings)
		die("no such ring %u", idx);
	return (struct tf_ring *)(r->map + r->rf->rings_offset +
				  idx * r->rf->ring_stride);
}

static void ring_create(struct ringfile *r, const char *path, unsigned nodes,
			unsigned rings, unsigned events, uint32_t pid, uint64_t t0)
{
	uint64_t nodes_off = 4096, rings_off, stride, size;
	int fd = create(path);

	stride = sizeof(struct tf_ring) + (uint64_t)events * sizeof(struct tf_event);
	rings_off = nodes_off + (uint64_t)nodes * sizeof(struct tf_node);
	size = rings_off + rings * stride;
	if (ftruncate(fd, (off_t)size))
		die("%s: ftruncate", path);
	r->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r->map == MAP_FAILED)
		die("%s: mmap", path);
	r->rf = (struct tf_ring_file *)r->map;
	r->rf->magic = TF_RING_MAGIC;
	r->rf->version = TF_RING_VERSION;
	r->rf->pid = pid;
	r->rf->t0_mono_ns = t0;
	r->rf->max_nodes = nodes;
	r->rf->max_rings = rings;
	r->rf->ring_events = events;
	r->rf->nodes_offset = nodes_off;
	r->rf->rings_offset = rings_off;
	r->rf->ring_stride = stride;
	atomic_store(&r->rf->nodes_next, 1);
}

static int run_script(const char *out)
{
	static struct batch b;
	struct tf_header h = { .pid = 1000, .ppid = 1, .pointer_size = 8,
			       .exe = "/bin/true", .cmdline = "true" };
	struct tf_writer *w = NULL;
	struct tf_error e = {0};
	struct ringfile ring = {0};
	char line[LINE_MAX_LEN], exe[LINE_MAX_LEN] = "/bin/true",
	     cmd[LINE_MAX_LEN] = "true";
	int fd = create(out), lineno = 0;
	int closed = 0;                       /* after close/abandon: ring only */

	while (fgets(line, sizeof line, stdin)) {
		char word[32] = "", s1[LINE_MAX_LEN] = "", s2[LINE_MAX_LEN] = "";
		unsigned long long a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
		struct tf_record r = {0};
		struct tf_event *ev;

		lineno++;
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%31s", word) != 1 || word[0] == '#')
			continue;
		if (!strcmp(word, "header")) {
			/* header PID PPID T0_MONO T0_REAL SAMPLE EXE CMDLINE... */
			int n = 0;

			if (sscanf(line, "%*s %llu %llu %llu %llu %llu %4095s %n",
				   &a1, &a2, &a3, &a4, &a5, exe, &n) < 6)
				die("line %d: bad header", lineno);
			snprintf(cmd, sizeof cmd, "%s", line + n);
			h.pid = (uint32_t)a1;
			h.ppid = (uint32_t)a2;
			h.t0_mono_ns = a3;
			h.t0_real_ns = a4;
			h.sample_period = a5;
			h.exe = exe;
			h.cmdline = cmd;
			continue;
		}
		if (!w && !closed)
			check(tf_writer_open(&w, fd, &h, &e), &e, "open");
		if (closed && (word[0] != 'r' || !strcmp(word, "r")))
			die("line %d: %s after close", lineno, word);
		if (!strcmp(word, "node")) {           /* node ID PARENT IP */
			sscanf(line, "%*s %llu %llu %llx", &a1, &a2, &a3);
			r.kind = TF_STACK;
			r.id = (uint32_t)a1;
			r.parent = (uint32_t)a2;
			r.ip = a3;
			check(tf_write_meta(w, &r, &e), &e, "node");
		} else if (!strcmp(word, "thread")) {  /* thread TID NAME */
			sscanf(line, "%*s %llu %4095s", &a1, s1);
			r.kind = TF_THREAD;
			r.tid = (uint32_t)a1;
			r.str = s1;
			check(tf_write_meta(w, &r, &e), &e, "thread");
		} else if (!strcmp(word, "module")) {
			/* module START SIZE OFFSET PERMS PATH [BUILDID_HEX] */
			uint8_t bid[64];
			size_t n = 0;

			sscanf(line, "%*s %llx %llx %llx %llu %4095s %4095s", &a1, &a2,
			       &a3, &a4, s1, s2);
			for (; s2[2 * n] && s2[2 * n + 1] && n < sizeof bid; n++)
				sscanf(s2 + 2 * n, "%2hhx", &bid[n]);
			r.kind = TF_MODULE;
			r.addr = a1;
			r.size = a2;
			r.file_offset = a3;
			r.perms = (uint32_t)a4;
			r.str = s1;
			r.build_id = n ? bid : NULL;
			r.build_id_len = (uint32_t)n;
			check(tf_write_meta(w, &r, &e), &e, "module");
		} else if (!strcmp(word, "mark")) {    /* mark T LABEL */
			sscanf(line, "%*s %llu %4095s", &a1, s1);
			r.kind = TF_MARK;
			r.t = a1;
			r.str = s1;
			check(tf_write_meta(w, &r, &e), &e, "mark");
		} else if (!strcmp(word, "fork")) {    /* fork PPID PARENT_T0 T */
			sscanf(line, "%*s %llu %llu %llu", &a1, &a2, &a3);
			r.kind = TF_FORK;
			r.id = (uint32_t)a1;
			r.count = a2;
			r.t = a3;
			check(tf_write_meta(w, &r, &e), &e, "fork");
		} else if (!strcmp(word, "lost")) {    /* lost COUNT */
			sscanf(line, "%*s %llu", &a1);
			r.kind = TF_LOST;
			r.count = a1;
			check(tf_write_meta(w, &r, &e), &e, "lost");
		} else if (!strcmp(word, "bound")) {   /* bound BYTES: a ring */
			sscanf(line, "%*s %llu", &a1);
			check(tf_writer_bound(w, a1, &e), &e, "bound");
		} else if (!strcmp(word, "key")) {     /* key ID begin|end T */
			sscanf(line, "%*s %llu %4095s %llu", &a1, s1, &a2);
			r.kind = TF_KEYFRAME;
			r.id = (uint32_t)a1;
			r.sub = !strcmp(s1, "end") ? TF_KEY_END : TF_KEY_BEGIN;
			r.t = a2;
			check(tf_write_meta(w, &r, &e), &e, "key");
		} else if (!strcmp(word, "kcut")) {    /* kcut ID STREAM TID SEQ */
			sscanf(line, "%*s %llu %llu %llu %llu", &a1, &a2, &a3, &a4);
			r.kind = TF_KEYFRAME;
			r.sub = TF_KEY_CUT;
			r.id = (uint32_t)a1;
			r.stream = (uint32_t)a2;
			r.tid = (uint32_t)a3;
			r.count = a4;
			check(tf_write_meta(w, &r, &e), &e, "kcut");
		} else if (!strcmp(word, "kev")) {
			/* kev ID a|f T STREAM TID ADDR SIZE STACK */
			sscanf(line, "%*s %llu %4095s %llu %llu %llu %llx %llu %llu", &a1, s1,
			       &a2, &a3, &a4, &a5, &a6, &a7);
			r.kind = TF_KEYEVENT;
			r.id = (uint32_t)a1;
			r.sub = !strcmp(s1, "a") ? TF_ALLOC : TF_FREE;
			r.t = a2;
			r.stream = (uint32_t)a3;
			r.tid = (uint32_t)a4;
			r.addr = a5;
			r.size = a6;
			r.stack = (uint32_t)a7;
			check(tf_write_meta(w, &r, &e), &e, "kev");
		} else if (!strcmp(word, "pad")) {     /* pad N T0 ADDR0 STACK */
			/* N blocks of 16 bytes allocated and freed at once, one
			 * ns apart, ADDR0 + 32 i: filler that fills a ring */
			sscanf(line, "%*s %llu %llu %llx %llu", &a1, &a2, &a3, &a4);
			for (unsigned long long i = 0; i < a1; i++) {
				ev = push(&b);
				*ev = (struct tf_event){ .kind = TF_EV_ALLOC, .t = a2 + 2 * i,
							 .addr = a3 + 32 * i, .size = 16,
							 .stack = (uint32_t)a4 };
				ev = push(&b);
				*ev = (struct tf_event){ .kind = TF_EV_FREE, .t = a2 + 2 * i + 1,
							 .addr = a3 + 32 * i, .fn = TF_FN_FREE };
			}
		} else if (!strcmp(word, "events")) {  /* events STREAM TID */
			sscanf(line, "%*s %llu %llu", &a1, &a2);
			flush(w, &b);
			if (a1 == 0 || a1 >= MAX_STREAMS)
				die("line %d: bad stream", lineno);
			b.stream = (uint32_t)a1;
			b.tid = (uint32_t)a2;
		} else if (!strcmp(word, "a")) {       /* a T ADDR SIZE STACK */
			sscanf(line, "%*s %llu %llx %llu %llu", &a1, &a2, &a3, &a4);
			ev = push(&b);
			ev->kind = TF_EV_ALLOC;
			ev->fn = TF_FN_MALLOC;
			ev->t = a1;
			ev->addr = a2;
			ev->size = a3;
			ev->stack = (uint32_t)a4;
		} else if (!strcmp(word, "m") || !strcmp(word, "M") || !strcmp(word, "u")) {
			/* m|M|u T ADDR SIZE STACK: mmap, mremap's new range, munmap */
			sscanf(line, "%*s %llu %llx %llu %llu", &a1, &a2, &a3, &a4);
			ev = push(&b);
			ev->kind = TF_EV_ALLOC;
			ev->fn = word[0] == 'm' ? TF_FN_MMAP : word[0] == 'M' ? TF_FN_MREMAP : TF_FN_MUNMAP;
			ev->t = a1;
			ev->addr = a2;
			ev->size = a3;
			ev->stack = (uint32_t)a4;
		} else if (!strcmp(word, "f")) {       /* f T ADDR */
			sscanf(line, "%*s %llu %llx", &a1, &a2);
			ev = push(&b);
			ev->kind = TF_EV_FREE;
			ev->fn = TF_FN_FREE;
			ev->t = a1;
			ev->addr = a2;
		} else if (!strcmp(word, "r")) {       /* r T T2 OLD NEW SIZE STACK */
			sscanf(line, "%*s %llu %llu %llx %llx %llu %llu", &a1, &a2,
			       &a3, &a4, &a5, &a6);
			ev = push(&b);
			ev->kind = TF_EV_REALLOC_OLD;
			ev->fn = TF_FN_REALLOC;
			ev->t = a1;
			ev->addr = a3;
			ev = push(&b);
			ev->kind = TF_EV_REALLOC_NEW;
			ev->fn = TF_FN_REALLOC;
			ev->t = a2;
			ev->addr = a4;
			ev->size = a5;
			ev->stack = (uint32_t)a6;
		} else if (!strcmp(word, "flush")) {
			flush(w, &b);
			check(tf_writer_flush(w, &e), &e, "flush");
		} else if (!strcmp(word, "close")) {   /* close T_END */
			sscanf(line, "%*s %llu", &a1);
			flush(w, &b);
			check(tf_writer_close(w, a1, &e), &e, "close");
			w = NULL;
			closed = 1;
		} else if (!strcmp(word, "abandon")) { /* a killed process */
			flush(w, &b);
			check(tf_writer_flush(w, &e), &e, "flush");
			tf_writer_abandon(w);
			w = NULL;
			closed = 1;
		} else if (!strcmp(word, "ring")) {
			/* ring NODES RINGS EVENTS: creates OUT.ring */
			char path[LINE_MAX_LEN + 8];

			sscanf(line, "%*s %llu %llu %llu", &a1, &a2, &a3);
			snprintf(path, sizeof path, "%s.ring", out);
			ring_create(&ring, path, (unsigned)a1, (unsigned)a2,
				    (unsigned)a3, h.pid, h.t0_mono_ns);
		} else if (!strcmp(word, "rnode")) {   /* rnode ID PARENT IP */
			struct tf_node *n;

			sscanf(line, "%*s %llu %llu %llx", &a1, &a2, &a3);
			n = (struct tf_node *)(ring.map + ring.rf->nodes_offset) + a1;
			n->ip = a3;
			n->parent = (uint32_t)a2;
			atomic_store(&n->ready, 1);
			if (a1 + 1 > atomic_load(&ring.rf->nodes_next))
				atomic_store(&ring.rf->nodes_next, (uint32_t)a1 + 1);
		} else if (!strcmp(word, "rring")) {
			/* rring IDX TID STREAM SEQ0 TAIL NAME */
			struct tf_ring *rg;

			sscanf(line, "%*s %llu %llu %llu %llu %llu %15s", &a1, &a2,
			       &a3, &a4, &a5, s1);
			rg = ring_at(&ring, (unsigned)a1);
			atomic_store(&rg->state, TF_RING_LIVE);
			rg->tid = (uint32_t)a2;
			rg->stream = (uint32_t)a3;
			atomic_store(&rg->head, a4);
			atomic_store(&rg->tail, a5);
			memcpy(rg->name, s1, strlen(s1));
			if (a1 + 1 > atomic_load(&ring.rf->rings_used))
				atomic_store(&ring.rf->rings_used, (uint32_t)a1 + 1);
		} else if (!strcmp(word, "rev")) {
			/* rev IDX KIND(a|f|ro|rn) T ADDR SIZE STACK */
			struct tf_ring *rg;
			struct tf_event *slot;
			uint64_t head;

			sscanf(line, "%*s %llu %15s %llu %llx %llu %llu", &a1, s1,
			       &a2, &a3, &a4, &a5);
			rg = ring_at(&ring, (unsigned)a1);
			head = atomic_load(&rg->head);
			slot = (struct tf_event *)((uint8_t *)rg + sizeof *rg) +
			       (head & (ring.rf->ring_events - 1));
			memset(slot, 0, sizeof *slot);
			slot->kind = !strcmp(s1, "a") ? TF_EV_ALLOC :
				     !strcmp(s1, "f") ? TF_EV_FREE :
				     !strcmp(s1, "ro") ? TF_EV_REALLOC_OLD :
							 TF_EV_REALLOC_NEW;
			slot->fn = s1[0] == 'r' ? TF_FN_REALLOC :
				   s1[0] == 'f' ? TF_FN_FREE : TF_FN_MALLOC;
			slot->t = a2;
			slot->addr = a3;
			slot->size = a4;
			slot->stack = (uint32_t)a5;
			atomic_store(&rg->head, head + 1);
		} else {
			die("line %d: unknown command %s", lineno, word);
		}
	}
	if (w) {
		flush(w, &b);
		tf_writer_abandon(w);
	}
	close(fd);
	return 0;
}

/* ---- synthetic churn -------------------------------------------------------
 * THREADS streams interleaved in time; each keeps a pool of live blocks,
 * frees a random one (sometimes one of another thread's, cross-thread),
 * reallocates some, and allocates at ~1000 stacks. */
#define SYNTH_STACKS 1000
#define SYNTH_POOL 8192               /* live blocks per thread, at most */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int run_synth(const char *out, unsigned threads, uint64_t allocs,
		     uint64_t seed)
{
	struct tf_header h = { .version = TF_VERSION, .pid = 4242, .ppid = 1,
			       .pointer_size = 8, .t0_mono_ns = 1000000000,
			       .exe = "/synthetic", .cmdline = "synthetic churn" };
	struct tf_writer *w;
	struct tf_error e = {0};
	static struct batch b[MAX_STREAMS];
	static uint64_t pool[MAX_STREAMS][SYNTH_POOL];
	static size_t npool[MAX_STREAMS];
	uint64_t t = 0, done = 0, next_addr = 0x10000;
	int fd = create(out);

	if (threads < 1 || threads >= MAX_STREAMS)
		die("threads: 1..%d", MAX_STREAMS - 1);
	rng_state = seed | 1;
	check(tf_writer_open(&w, fd, &h, &e), &e, "open");
	for (uint32_t i = 1; i <= SYNTH_STACKS; i++) {
		struct tf_record r = { .kind = TF_STACK, .id = i,
				       .parent = i > 20 ? i / 20 : 0,
				       .ip = 0x400000 + i * 16 };

		check(tf_write_meta(w, &r, &e), &e, "node");
	}
	for (unsigned i = 0; i < threads; i++) {
		b[i].stream = i + 1;
		b[i].tid = 5000 + i;
	}
	while (done < allocs) {
		unsigned k = (unsigned)(rnd() % threads);
		struct batch *bb = &b[k];
		uint64_t x = rnd();
		struct tf_event *ev;

		t += 1 + x % 50;
		if (bb->n + 2 > MAX_BATCH / 16)
			flush(w, bb);
		if (npool[k] && (npool[k] == SYNTH_POOL || x % 100 < 48)) {
			unsigned from = x % 10 == 0 ? (unsigned)(rnd() % threads) : k;
			size_t j;

			if (!npool[from])
				from = k;
			j = (size_t)(rnd() % npool[from]);
			ev = push(bb);
			ev->kind = TF_EV_FREE;
			ev->fn = TF_FN_FREE;
			ev->t = t;
			ev->addr = pool[from][j];
			pool[from][j] = pool[from][--npool[from]];
			continue;
		}
		if (npool[k] && x % 100 < 53) {
			size_t j = (size_t)(rnd() % npool[k]);

			ev = push(bb);
			ev->kind = TF_EV_REALLOC_OLD;
			ev->fn = TF_FN_REALLOC;
			ev->t = t;
			ev->addr = pool[k][j];
			t += 1;
			ev = push(bb);
			ev->kind = TF_EV_REALLOC_NEW;
			ev->fn = TF_FN_REALLOC;
			ev->t = t;
			ev->addr = pool[k][j] = (next_addr += 64);
			ev->size = 16 + rnd() % 4096;
			ev->stack = (uint32_t)(1 + rnd() % SYNTH_STACKS);
			done++;
			continue;
		}
		ev = push(bb);
		ev->kind = TF_EV_ALLOC;
		ev->fn = TF_FN_MALLOC;
		ev->t = t;
		ev->addr = pool[k][npool[k]++] = (next_addr += 64);
		ev->size = 16 + x % 1024;
		ev->stack = (uint32_t)(1 + rnd() % SYNTH_STACKS);
		done++;
	}
	for (unsigned i = 0; i < threads; i++)
		flush(w, &b[i]);
	check(tf_writer_close(w, t + 1, &e), &e, "close");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "--synth"))
		return run_synth(argv[2], (unsigned)atoi(argv[3]),
				 strtoull(argv[4], NULL, 10),
				 strtoull(argv[5], NULL, 10));
	if (argc != 2)
		die("usage: mktrace OUT.trc < script | mktrace --synth OUT.trc "
		    "THREADS ALLOCS SEED");
	return run_script(argv[1]);
}
