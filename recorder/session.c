/*
 * session.c - one trace being written: creating <trace> and <trace>.ring,
 * mapping the ring file, starting the writer, and the clean stop.
 *
 * Names: REC_OUT with every %p replaced by the pid, else
 * <program>.<pid>.trc in the working directory. Both files are created
 * 0600 with O_CREAT|O_EXCL|O_NOFOLLOW, in their directory as out_dir.c
 * opened it (not through a symbolic link planted in a shared directory);
 * if either exists (an exec'd program has the same pid as the process that
 * started it; a fork child without %p in REC_OUT) the next of <name>.1 ...
 * <name>.99 is tried, then <name>.<pid>00, <name>.<pid>01, ...: a fork
 * storm under one REC_OUT never runs out of names, and its children do not
 * each walk every name taken before them (a pid is unique among running
 * processes: only an earlier process of the same pid, or one past its
 * hundredth suffix, can hold one of its names). Any other error prints one
 * line on stderr and the program runs unrecorded.
 *
 * Forks (of a preloaded process; an attached one's children are not
 * recorded): a prepare handler stamps the instant in the forking thread (before
 * glibc's fork takes malloc's locks; the child inherits the thread's copy)
 * and the child's trace starts with a FORK record naming its parent's trace
 * and that instant, from which the importer gives the child the live set it
 * inherited (FORMAT.md). A vfork or posix_spawn child runs no handlers: it
 * execs, and an exec'd program inherits no heap.
 *
 * The .ring file (layout in trace_format.h) is sized at start and mapped
 * MAP_SHARED; the header page, node ids as they are handed out and each
 * ring when first claimed are fallocated before use, so a full disk is an
 * error we see (that thread or stack goes unrecorded) instead of SIGBUS.
 * The start reserves the header, the first chunk of nodes and ring 0 (the
 * first thread's): a disk too small for those refuses the trace. The file's
 * size must be under RLIMIT_FSIZE, or ftruncate would raise SIGXFSZ in the
 * program's thread. A reservation that failed is not retried (the disk is
 * full; retrying on every event would crawl).
 *
 * Trouble writing the trace (disk full, file size limit, trace removed) is
 * said once per session, whichever part of the recorder meets it first.
 *
 * A clean stop (exit or _exit of a process whose other threads are gone,
 * exec) stops the writer (which writes END), marks the ring file finished
 * and unlinks it. An exit while other threads of the program run
 * (rec_session_exit: exit() from any thread, _exit) cannot stop them: they
 * run, and allocate, until the kernel ends the process. The writer drains
 * what is there and writes END, and the threads go on recording into
 * their rings, which nobody drains any more; the .ring is left for the
 * importer, as after a kill. A .ring file left on disk thus means the
 * process died, or exited with threads running, or could not write its
 * trace. The mapping itself stays: other threads may still be inside an
 * allocation hook. If the writer failed, the .ring is left as after a
 * kill: events already in the trace name stacks that were still queued in
 * memory, and the importer recovers them, and the rings' events, from it.
 *
 * Must never: print anything but the one line, or stop a process that is
 * not ours (a vfork child shares our memory: everything checks the pid).
 */
#include "rec_internal.h"
#include "got.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RING_EVENTS (1u << 17)         /* 4 MiB per thread: ~100 ms of a busy thread,
                                          enough to ride out the writer being descheduled */
#define MAX_NODES (1u << 22)           /* trie nodes: 64 MiB of file, sparse */
#define NODE_CHUNK (1u << 16)          /* nodes fallocated at a time (1 MiB) */
#define HEADER_BYTES 4096
#define PAGE 4096u
#define NAME_SEQUENTIAL 100            /* <name>, <name>.1 ... <name>.99, then by pid */

struct rec_session rec_s;
static struct tf_writer *writer;
static _Atomic int ending;             /* the writer is being or was stopped */
static char cmdline[4096];
/* An attach's trace path (absolute, from trace-record -p): stands for
 * REC_OUT, which the attached process's environment does not hold. */
static const char *out_path;
/* 1 when this copy was loaded into a running process (dlopen'ed by
 * trace-record -p, attach.c) instead of preloaded: its exports are then
 * not in the global scope, so nobody finds its mark there. */
static int attached;
/* CLOCK_MONOTONIC when this thread last entered fork (prepare handler). */
static REC_TLS uint64_t fork_mono;
/* A forked child's parent trace and fork instant, for its FORK record;
 * parent_pid 0 = not a forked child's trace. */
static struct {
	pid_t parent_pid;
	uint64_t parent_t0, mono;
} forked;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t rec_now(void)
{
	return mono_ns() - rec_s.t0;
}

void rec_say(const char *a, const char *b, const char *c)
{
	char line[8448], *e = line + sizeof line - 1;
	char *p = rec_cat(line, e, "heapreel: ");
	p = rec_cat(rec_cat(rec_cat(p, e, a), e, b), e, c);
	*p++ = '\n';
	ssize_t r = write(2, line, (size_t)(p - line));
	(void)r;
}

void rec_say_trouble(const char *a, const char *b, const char *c)
{
	if (!atomic_exchange(&rec_s.said_trouble, 1))
		rec_say(a, b, c);
}

static void read_exe(void)
{
	ssize_t n = readlink("/proc/self/exe", rec_s.exe, sizeof rec_s.exe - 1);
	if (n < 0)
		n = 0;
	rec_s.exe[n] = 0;
	static const char deleted[] = " (deleted)";
	size_t d = sizeof deleted - 1;
	if ((size_t)n > d && !strcmp(rec_s.exe + n - d, deleted))
		rec_s.exe[n - d] = 0;
}

static void read_cmdline(void)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, cmdline, sizeof cmdline - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	while (n > 0 && cmdline[n - 1] == 0)
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (cmdline[i] == 0)
			cmdline[i] = ' ';
	cmdline[n] = 0;
}

/* REC_OUT with %p expanded, or <program>.<pid>.trc; made absolute, so the
 * clean stop unlinks the right .ring after the program changed directory. */
static void base_name(char *out, size_t size)
{
	char *e = out + size, *p = out;
	const char *env = out_path ? out_path : getenv("REC_OUT");
	*p = 0;
	if ((!env || env[0] != '/') && getcwd(out, size - 1)) {
		p = out + strlen(out);
		if (p[-1] != '/')
			p = rec_cat(p, e, "/");
	} else {
		*p = 0; /* absolute REC_OUT, or no cwd: use the name as given */
	}
	if (env && *env) {
		for (const char *s = env; *s; s++) {
			if (s[0] == '%' && s[1] == 'p') {
				p = rec_utoa(p, e, (uint64_t)rec_s.pid);
				s++;
			} else {
				char one[2] = { *s, 0 };
				p = rec_cat(p, e, one);
			}
		}
		return;
	}
	p = rec_cat(p, e, program_invocation_short_name);
	p = rec_cat(p, e, ".");
	p = rec_utoa(p, e, (uint64_t)rec_s.pid);
	rec_cat(p, e, ".trc");
}

int rec_fd_high(int fd)
{
	int high = fcntl(fd, F_DUPFD_CLOEXEC, REC_FD_BASE);
	if (high < 0)
		return fd; /* a low descriptor limit: keep the number we got */
	close(fd);
	return high;
}

static int open_new(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd < 0 ? fd : rec_fd_high(fd);
}

long rec_fd_links(int fd, dev_t dev, ino_t ino)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino)
		return -1;
	return (long)st.st_nlink;
}

int rec_fd_ok(int fd, dev_t dev, ino_t ino)
{
	return rec_fd_links(fd, dev, ino) >= 0;
}

void rec_fd_remember(int fd, dev_t *dev, ino_t *ino)
{
	struct stat st;
	if (fstat(fd, &st) == 0) {
		*dev = st.st_dev;
		*ino = st.st_ino;
	}
}

/* The suffix of the k-th name tried (0: none); see the top of the file. */
static uint64_t name_suffix(uint64_t k)
{
	if (k < NAME_SEQUENTIAL)
		return k;
	return (uint64_t)rec_s.pid * NAME_SEQUENTIAL + (k - NAME_SEQUENTIAL);
}

/* Creates the trace and its .ring; returns 0, an errno, or -1: a planted
 * symbolic link is on the way (out_dir.c). */
static int create_files(void)
{
	char base[4096];
	base_name(base, sizeof base);
	rec_cat(rec_s.trace_path, rec_s.trace_path + sizeof rec_s.trace_path, base);
	const char *leaf;
	int dfd = rec_out_dir_open(base, &leaf);
	if (dfd < 0)
		return dfd == -2 ? -1 : errno;
	size_t at = (size_t)(leaf - base);     /* where the names start in the paths */
	int err = EEXIST;
	/* until a name is free: the suffixes never run out */
	for (uint64_t k = 0; err == EEXIST; k++) {
		char *e = rec_s.trace_path + sizeof rec_s.trace_path;
		char *p = rec_cat(rec_s.trace_path, e, base);
		if (k)
			p = rec_utoa(rec_cat(p, e, "."), e, name_suffix(k));
		if (p == e - 1) {
			err = ENAMETOOLONG; /* cut, every name tried would be this one */
			break;
		}
		e = rec_s.ring_path + sizeof rec_s.ring_path;
		rec_cat(rec_cat(rec_s.ring_path, e, rec_s.trace_path), e, ".ring");
		rec_s.trace_fd = open_new(dfd, rec_s.trace_path + at);
		if (rec_s.trace_fd < 0) {
			err = errno;
			continue;
		}
		rec_s.ring_fd = open_new(dfd, rec_s.ring_path + at);
		if (rec_s.ring_fd >= 0) {
			rec_fd_remember(rec_s.trace_fd, &rec_s.trace_dev, &rec_s.trace_ino);
			rec_fd_remember(rec_s.ring_fd, &rec_s.ring_dev, &rec_s.ring_ino);
			err = 0;
			break;
		}
		err = errno;
		close(rec_s.trace_fd);
		unlinkat(dfd, rec_s.trace_path + at, 0);
	}
	close(dfd);
	return err;
}

/* The ring file's layout (FORMAT.md): the header page, the trie nodes, the
 * rings' 64-byte headers side by side, then every ring's first event area
 * (FIRST_AREA) side by side, then every ring's full area (BIG_AREA), used
 * once it grew. First areas are adjacent so that those of a thousand
 * threads are one extent of the file, not a thousand: ext4 here took 70
 * to 110 ms to free a thousand scattered 64 KiB extents when the process
 * ended (two thirds of a 1000-thread program's whole run), 0.5 ms for
 * adjacent ones. */
#define FIRST_AREA ((uint64_t)REC_RING_FIRST_EVENTS * sizeof(struct tf_event))
#define BIG_AREA ((uint64_t)RING_EVENTS * sizeof(struct tf_event))
#define RINGS (REC_RINGS_KEPT + REC_RINGS_LENT)
#define HEADS_BYTES (((uint64_t)RINGS * sizeof(struct tf_ring) + PAGE - 1) & ~(uint64_t)(PAGE - 1))
#define NODES_OFF ((uint64_t)HEADER_BYTES)
#define HEADS_OFF (NODES_OFF + (uint64_t)MAX_NODES * sizeof(struct tf_node))
#define FIRSTS_OFF (HEADS_OFF + HEADS_BYTES)
#define BIGS_OFF (FIRSTS_OFF + (uint64_t)RINGS * FIRST_AREA)
#define FILE_BYTES (BIGS_OFF + (uint64_t)RINGS * BIG_AREA)

uint64_t rec_session_area(uint32_t i, int big)
{
	return big ? BIGS_OFF + i * BIG_AREA : FIRSTS_OFF + i * FIRST_AREA;
}

/* Sizes, fallocates the start of and maps the ring file; 0 or an errno. */
static int map_ring(void)
{
	uint64_t size = FILE_BYTES;
	struct rlimit fsize;
	if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
	    fsize.rlim_cur < size)
		return EFBIG;
	if (ftruncate(rec_s.ring_fd, (off_t)size) < 0)
		return errno;
	uint64_t nodes_bytes = (uint64_t)NODE_CHUNK * sizeof(struct tf_node);
	int err = posix_fallocate(rec_s.ring_fd, 0, (off_t)(NODES_OFF + nodes_bytes));
	if (!err)   /* every ring header, and the first ring's first area */
		err = posix_fallocate(rec_s.ring_fd, (off_t)HEADS_OFF, (off_t)(HEADS_BYTES + FIRST_AREA));
	if (err)
		return err;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rec_s.ring_fd, 0);
	if (m == MAP_FAILED)
		return errno;
	/* No read-ahead: the first write to a page of this file otherwise reads
	 * in (zero-fills) 8 MiB around it, 2.5 ms on ext4 here, for a header of
	 * one page, nodes written a few at a time and rings a sampling or
	 * short-lived program barely uses. Page by page costs 4.5 us a page
	 * against 2.2, about 1 ms more for each ring a thread fills whole. */
	madvise(m, size, MADV_RANDOM);
	struct tf_ring_file *rf = m;
	rf->magic = TF_RING_MAGIC;
	rf->version = TF_RING_VERSION;
	rf->pid = (uint32_t)rec_s.pid;
	rf->t0_mono_ns = rec_s.t0;
	rf->max_nodes = MAX_NODES;
	rf->max_rings = RINGS;
	rf->ring_events = RING_EVENTS;
	rf->nodes_offset = NODES_OFF;
	rf->rings_offset = HEADS_OFF;
	rf->ring_stride = sizeof(struct tf_ring);
	atomic_store(&rf->nodes_next, 1);
	rec_s.rf = rf;
	rec_s.map_size = size;
	rec_s.nodes_reserved = NODE_CHUNK;
	return 0;
}

/* fallocates [off, off + len) of the ring file; 1, or 0 once one failed.
 * needed: a failure is said and remembered (else the reservation was only
 * ahead of need, and whoever needs the range meets it again). */
static int reserve(uint64_t off, uint64_t len, int needed)
{
	if (atomic_load(&rec_s.reserve_failed) ||
	    !rec_fd_ok(rec_s.ring_fd, rec_s.ring_dev, rec_s.ring_ino))
		return 0;
	int err = posix_fallocate(rec_s.ring_fd, (off_t)off, (off_t)len);
	if (!err)
		return 1;
	if (!needed)
		return 0;
	atomic_store(&rec_s.reserve_failed, 1);
	char why[200], *e = why + sizeof why;
	rec_cat(rec_cat(rec_cat(why, e, ": "), e, strerrordesc_np(err)),
		e, "; events of new threads are counted as lost, new stacks recorded as unknown");
	rec_say_trouble("cannot grow ", rec_s.ring_path, why);
	return 0;
}

int rec_session_reserve_nodes(uint64_t id)
{
	if (id <= rec_s.nodes_reserved)
		return 1;
	uint64_t upto = (id + NODE_CHUNK - 1) / NODE_CHUNK * NODE_CHUNK;
	const struct tf_ring_file *rf = rec_s.rf;
	if (!reserve(rf->nodes_offset + rec_s.nodes_reserved * sizeof(struct tf_node),
		     (upto - rec_s.nodes_reserved) * sizeof(struct tf_node), 1))
		return 0;
	rec_s.nodes_reserved = upto;
	return 1;
}

int rec_session_prepare_ring(uint32_t i)
{
	return reserve(rec_session_area(i, 0), FIRST_AREA, 0);
}

int rec_session_reserve_ring(uint32_t i, int big)
{
	return reserve(rec_session_area(i, big), big ? BIG_AREA : FIRST_AREA, 1);
}

struct tf_ring *rec_session_ring(uint32_t i)
{
	struct tf_ring_file *rf = rec_s.rf;
	return (struct tf_ring *)((char *)rf + rf->rings_offset + i * rf->ring_stride);
}

struct tf_event *rec_session_events(uint64_t area)
{
	return (struct tf_event *)((char *)rec_s.rf + area);
}

static void fail(const char *path, const char *why)
{
	rec_say("cannot create ", path, why);
}

static void give_up(void)
{
	if (rec_s.rf)
		munmap(rec_s.rf, rec_s.map_size);
	rec_s.rf = NULL;
	close(rec_s.trace_fd);
	close(rec_s.ring_fd);
	unlink(rec_s.ring_path);
	unlink(rec_s.trace_path);
}

/* A forked child's FORK record, written out at once: a child killed early
 * still says whose heap it started with. */
static int write_fork(struct tf_error *err)
{
	if (!forked.parent_pid)
		return TF_OK;
	struct tf_record r = {
		.kind = TF_FORK, .id = (uint32_t)forked.parent_pid,
		.count = forked.parent_t0, .t = forked.mono - forked.parent_t0,
	};
	forked.parent_pid = 0;
	int rc = tf_write_meta(writer, &r, err);
	return rc ? rc : tf_writer_flush(writer, err);
}

/* Starts a trace for the current process; on failure says why and leaves
 * the process unrecorded. */
static void start(int single_thread)
{
	int g = rec_guard;
	rec_guard = 1;
	rec_s.pid = getpid();
	rec_s.rf = NULL;
	atomic_store(&rec_s.ring_waits, 0);
	atomic_store(&rec_s.wait_rounds, 0);
	atomic_store(&rec_s.round, 0);
	atomic_store(&rec_s.lent_calls, 0);
	atomic_store(&rec_s.undrained, 0);
	atomic_store(&ending, 0);
	atomic_store(&rec_s.stacks_unknown, 0);
	atomic_store(&rec_s.stack_checks, 0);
	atomic_store(&rec_s.shadow_hits, 0);
	atomic_store(&rec_s.shadow_quiet, 0);
	atomic_store(&rec_s.memo_hits, 0);
	atomic_store(&rec_s.plain_hashes, 0);
	atomic_store(&rec_s.reserve_failed, 0);
	atomic_store(&rec_s.said_trouble, 0);
	struct timespec mono, real;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	rec_s.t0 = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;

	int err = create_files();
	if (err) {
		char why[160], *e = why + sizeof why;
		rec_cat(rec_cat(rec_cat(why, e, ": "), e,
				err < 0 ? "a directory on the way is a symbolic link another user "
					  "planted in a shared directory" : strerrordesc_np(err)),
			e, "; not recording");
		fail(rec_s.trace_path, why);
		goto out;
	}
	err = map_ring();
	if (err || rec_stackid_init(single_thread) < 0) {
		char why[160], *e = why + sizeof why;
		rec_cat(rec_cat(rec_cat(why, e, ".ring: "), e, strerrordesc_np(err ? err : ENOMEM)),
			e, "; not recording");
		fail(rec_s.trace_path, why);
		give_up();
		goto out;
	}
	rec_ring_reset();
	rec_modules_reset();
	rec_ctl_session_start();
	read_exe();
	read_cmdline();
	struct tf_header h = {
		.version = TF_VERSION, .pid = (uint32_t)rec_s.pid, .ppid = (uint32_t)getppid(),
		.pointer_size = sizeof(void *), .t0_mono_ns = rec_s.t0,
		.t0_real_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec,
		.exe = rec_s.exe, .cmdline = cmdline, .sample_period = rec_ctl_period(),
	};
	struct tf_error terr;
	if (tf_writer_open(&writer, rec_s.trace_fd, &h, &terr) != TF_OK ||
	    (rec_s.max_size && tf_writer_bound(writer, rec_s.max_size, &terr) != TF_OK) ||
	    write_fork(&terr) != TF_OK) {
		char why[200], *e = why + sizeof why;
		rec_cat(rec_cat(rec_cat(why, e, ": "), e, terr.msg), e, "; not recording");
		fail(rec_s.trace_path, why);
		tf_writer_abandon(writer); /* NULL when open failed */
		give_up();
		goto out;
	}
	rec_modules_snapshot();
	atomic_fetch_add(&rec_s.gen, 1);
	rec_ctl_listen();
	if (rec_writer_start(writer) < 0) {
		rec_ctl_close();
		tf_writer_abandon(writer);
		fail(rec_s.trace_path, ": cannot start the writer thread; not recording");
		give_up();
		goto out;
	}
	atomic_store(&rec_s.state, REC_ON);
	rec_ctl_session_started();
out:
	rec_guard = g;
}

/* After the writer wrote END: the trace closed, the .ring finished and
 * removed (kept if writing failed: the importer recovers from it). */
static void close_files(void)
{
	if (rec_fd_ok(rec_s.trace_fd, rec_s.trace_dev, rec_s.trace_ino))
		close(rec_s.trace_fd);
	if (!rec_writer_failed()) {
		atomic_store(&rec_s.rf->finished, 1);
		unlink(rec_s.ring_path);
	}
	if (rec_fd_ok(rec_s.ring_fd, rec_s.ring_dev, rec_s.ring_ino))
		close(rec_s.ring_fd);
}

void rec_session_stop(void)
{
	if (getpid() != rec_s.pid)
		return;
	int on = REC_ON;
	if (!atomic_compare_exchange_strong(&rec_s.state, &on, REC_CLOSED) ||
	    atomic_exchange(&ending, 1))
		return;  /* stopped already, or rec_session_exit stopped the writer */
	int g = rec_guard;
	rec_guard = 1;
	rec_writer_stop(0);
	close_files();
	rec_guard = g;
}

/* Whether allocations were on when the detach held them off
 * (rec_ctl_hold): on again once the trace is closed, for the next attach. */
static int detach_held;
/* From a detach's start until its trace is closed: an exit meanwhile
 * waits for the writer (rec_session_exit), which the kernel would
 * otherwise end in the middle of the trace's last segment. */
static _Atomic int detaching;
#define DETACH_EXIT_WAIT_MS 2000       /* the longest such a wait, in steps of */
#define DETACH_EXIT_STEP_NS 1000000L   /* 1 ms */

int rec_session_detach_begin(void)
{
	if (!attached || !rec_on() || atomic_exchange(&ending, 1))
		return -1;
	atomic_store(&detaching, 1);
	detach_held = rec_ctl_hold(1);  /* none recorded from here on (api.c) */
	rec_got_restore();
	return 0;
}

void rec_session_detach_end(void)
{
	close_files();
	atomic_store(&detaching, 0);
	rec_ctl_release(detach_held);
	/* The ring file's mapping is swapped for zeroed anonymous memory: its
	 * pages and disk blocks are released (a hundred attaches must not
	 * pile them up), while a thread still finishing a hook it entered
	 * before the GOT was put back writes harmlessly instead of faulting. */
	if (mmap(rec_s.rf, rec_s.map_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		rec_say("cannot release the ring file's mapping", "", "; it stays mapped");
}

/* The caller's tid and the recorder's threads'. */
struct known_tids {
	uint32_t self, writer, enc;
};

/* A thread of /proc/self/task other than the caller and the recorder's own? */
static int another_thread(const char *name, void *known)
{
	const struct known_tids *k = known;
	uint64_t tid;
	return rec_parse_u64(name, 1, INT32_MAX, &tid) == 0 && tid != k->self &&
	       tid != k->writer && tid != k->enc;
}

/* Does any thread of this process run besides the caller and the
 * recorder's own? 1 when it cannot tell (the cautious answer: the .ring
 * is kept). A thread of ours made but not yet running is listed already:
 * its tid is waited for. */
static int others_running(void)
{
	struct known_tids k = { (uint32_t)gettid(), rec_thread_tid(&rec_s.writer_tid),
				rec_thread_tid(&rec_s.enc_tid) };
	return rec_dir_each(AT_FDCWD, "/proc/self/task", another_thread, &k) != 0;
}

void rec_session_exit(void)
{
	for (int ms = 0; atomic_load(&detaching) && ms < DETACH_EXIT_WAIT_MS; ms++) {
		struct timespec step = { 0, DETACH_EXIT_STEP_NS };
		nanosleep(&step, NULL);
	}
	if (!rec_session_mine())
		return;
	if (!others_running()) {
		rec_session_stop();
		return;
	}
	if (atomic_exchange(&ending, 1))
		return;
	int g = rec_guard;
	rec_guard = 1;
	rec_writer_stop(1);  /* recording goes on, nobody drains */
	rec_guard = g;
}

int rec_session_mine(void)
{
	return rec_on() && getpid() == rec_s.pid;
}

void rec_session_restart(void)
{
	if (getpid() == rec_s.pid && atomic_load(&rec_s.state) == REC_CLOSED)
		start(0);
}

/* Prepare handlers run in reverse order of registration: ours, registered
 * by a preloaded library's constructor, runs after the program's own, right
 * before glibc's fork takes malloc's locks. */
static void fork_prepare(void)
{
	rec_walk_fork_prepare();
	fork_mono = mono_ns();
}

static void fork_parent(void)
{
	rec_walk_fork_release();
}

/* Forked child: one thread, no writer. Drop the parent's mapping and writer
 * without writing to the parent's files, then start the child's own trace. */
static void fork_child(void)
{
	rec_walk_fork_release();
	if (atomic_load(&rec_s.state) != REC_ON)
		return;
	int g = rec_guard;
	rec_guard = 1;
	/* blocks recorded before the fork are in the parent's trace only */
	rec_stopset_fork_child((rec_ctl_now() & (REC_M_FREES | REC_M_PROBE)) != 0 &&
			       !rec_ctl_period());
	forked.parent_pid = rec_s.pid;  /* still the parent's session */
	forked.parent_t0 = rec_s.t0;
	forked.mono = fork_mono;
	atomic_store(&rec_s.state, REC_OFF);
	munmap(rec_s.rf, rec_s.map_size);
	rec_s.rf = NULL;
	if (rec_fd_ok(rec_s.trace_fd, rec_s.trace_dev, rec_s.trace_ino))
		close(rec_s.trace_fd);
	if (rec_fd_ok(rec_s.ring_fd, rec_s.ring_dev, rec_s.ring_ino))
		close(rec_s.ring_fd);
	rec_writer_abandon();
	rec_ctl_abandon();
	rec_cfi_fork_child();
	rec_got_fork_child();
	rec_sample_fork_child();
	if (attached) {
		/* an attach records the process attached to, not the children it
		 * forks (nobody would detach them): their calls go back to the
		 * real functions, and a later attach to one starts its own trace */
		rec_got_restore();
		atomic_store(&rec_s.state, REC_CLOSED);
	} else {
		start(1);
	}
	rec_guard = g;
}

static unsigned parse_depth(void)
{
	const char *s = getenv("REC_DEPTH");
	if (!s || !*s)
		return REC_DEPTH_DEFAULT;
	uint64_t v;
	if (rec_parse_u64(s, 1, REC_DEPTH_MAX, &v) < 0) {
		rec_say("REC_DEPTH=", s, " is not a number from 1 to 256; using 64");
		return REC_DEPTH_DEFAULT;
	}
	return (unsigned)v;
}

/* REC_MAX_SIZE: 0 (unbounded) when unset; a bad value is said and ignored. */
static uint64_t parse_max_size(void)
{
	const char *s = getenv("REC_MAX_SIZE");
	uint64_t v;
	if (!s || !*s)
		return 0;
	if (rec_parse_size(s, REC_MAX_SIZE_MIN, REC_MAX_SIZE_MAX, &v) < 0) {
		rec_say("REC_MAX_SIZE=", s, " is not a size of at least 4M (K, M, G suffixes);"
			" recording unbounded");
		return 0;
	}
	return v;
}

/* Exported under a name no program has (rec.h's could be a program's own
 * stubs): the dynamic loader finds the first copy's. */
REC_EXPORT const int heapreel_recorder = 1;

/* Is this the libheapreel.so that records? Two copies preloaded (an
 * installed one and a build's) would write two traces of one process; the
 * program's calls reach the first, so the other stays idle, passing calls
 * on, and says so. */
static int first_copy(void)
{
	Dl_info first, self;
	const void *mark = dlsym(RTLD_DEFAULT, "heapreel_recorder");
	if (!mark || !dladdr(mark, &first) || !dladdr((void *)first_copy, &self) ||
	    first.dli_fbase == self.dli_fbase)
		return 1;
	rec_say("another libheapreel.so is loaded first and records; ", self.dli_fname,
		" stays idle");
	return 0;
}

/* What every session needs, once per process: 0, or -1 after saying why
 * (the allocators' APIs are then back as they were). */
static int setup(void)
{
	rec_walk_init();
	rec_mmap_init();
	rec_s.depth = parse_depth();
	rec_s.max_size = parse_max_size();
	rec_ctl_init();
	rec_counters_init();
	if (!attached)
		rec_alloc_api_init(NULL, 0);   /* attached: each attach routes them (attach.c) */
	int rc = rec_stack_init();
	if (rc == -1) {
		rec_say("cannot load ", REC_LIBUNWIND_SONAME, " for stack capture; not recording");
		return -1;
	}
	if (rc < 0 || rec_ring_init() < 0 ||
	    pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) {
		rec_say("cannot set up thread hooks", "", "; not recording");
		return -1;
	}
	return 0;
}

int rec_session_attached(void)
{
	return attached;
}

int rec_session_attach(const char *trace_path)
{
	static int set_up;             /* setup() ran: a later attach reuses it */
	if (!attached)
		return REC_ATTACH_PRELOADED;
	if (atomic_load(&rec_s.state) == REC_ON)
		return REC_ATTACH_BUSY;
	int g = rec_guard;
	rec_guard = 1;
	out_path = trace_path;
	if (!set_up) {
		rec_real_resolve();
		set_up = setup() == 0;
	}
	int rc = REC_ATTACH_FAILED;
	if (set_up) {
		/* start(1): the previous attach's tables are unused (its hooks
		 * ended in the detach's grace rounds), so they are unmapped, or
		 * every cycle would keep them */
		start(1);
		rc = rec_on() ? 0 : REC_ATTACH_FAILED;
	}
	out_path = NULL;
	rec_guard = g;
	return rc;
}

__attribute__((constructor)) static void rec_init(void)
{
	int g = rec_guard;
	rec_guard = 1;
	if (!dlsym(rec_program_scope(), "heapreel_recorder")) {
		attached = 1;           /* idle until rec_session_attach */
		rec_guard = g;
		return;
	}
	rec_real_resolve();
	if (dlsym(RTLD_DEFAULT, REC_NEVER_RECORD) || !first_copy()) {
		rec_guard = g;          /* calls pass through */
		return;
	}
	if (setup() < 0)
		rec_got_restore();      /* the allocators' APIs back as they were */
	else
		start(1);
	rec_guard = g;
}

__attribute__((destructor)) static void rec_fini(void)
{
	rec_session_exit();
}
